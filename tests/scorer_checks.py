"""Checks shared by the tests of the policy network's slot scorer (tests/test_third_decision.py,
tests/test_cascade_candidate.py)."""

import tempfile
from pathlib import Path

import torch as th

from spindleflow_rl.agent.checkpoints import load_policy


def assert_reloads_the_same(model, spec: dict):
    "Saved and loaded (without unpickling), `model`'s scorer has the spec `spec` and every weight is the same."
    with tempfile.TemporaryDirectory() as d:
        model.save(Path(d) / 'm.zip')
        loaded = load_policy(Path(d) / 'm.zip')
    assert loaded.policy.features_extractor.scorer.spec == spec
    for k, v in model.policy.state_dict().items():
        assert th.equal(v, loaded.policy.state_dict()[k]), k
