"""0.1's module paths (appendix 99): each imports the very module at its 0.2 home, with one `OldPathWarning` naming
the new path and pointing at the importing line; what 0.1 saved (the shipped checkpoint, pickles naming old paths)
loads with no warning. Fresh interpreters, so no earlier import hides the warning."""

import json, subprocess, sys
from spindleflow_rl._compat import MOVED

PROBE = r'''
import importlib, json, sys, warnings
import spindleflow_rl
from spindleflow_rl._compat import MOVED, OldPathWarning
out = {}
for old, new in MOVED.items():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter('always')
        mod = importlib.import_module(f'spindleflow_rl.{old}')
    out[old] = {
        'same': mod is sys.modules[f'spindleflow_rl.{new}'],
        'spec': mod.__spec__.name,
        'warnings': [(x.category.__name__, str(x.message)) for x in w if issubclass(x.category, OldPathWarning)],
    }
print(json.dumps(out))
'''


def run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=300)


def test_every_old_path_is_its_new_module_with_one_warning():
    r = run(PROBE)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert set(got) == set(MOVED) and len(MOVED) == 40
    for old, new in MOVED.items():
        g = got[old]
        assert g['same'] and g['spec'] == f'spindleflow_rl.{new}', (old, g)
        assert g['warnings'] == [
            [
                'OldPathWarning',
                f"`spindleflow_rl.{old}` moved to `spindleflow_rl.{new}` in 0.2; the old path goes in 0.3: import "
                f"from `spindleflow_rl.{new}`.",
            ]
        ], (old, g)


def test_the_warning_points_at_the_importing_line_and_is_shown_in_a_script(tmp_path):
    script = tmp_path / 'old_user_script.py'
    script.write_text('x = 1\nfrom spindleflow_rl.policy import SpindleFlowPolicy\n')
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (
        f'{script}:2: OldPathWarning: `spindleflow_rl.policy` moved to `spindleflow_rl.agent.network`'
        in r.stderr
    )
    r = subprocess.run(
        [sys.executable, '-W', 'error::DeprecationWarning', str(script)], capture_output=True, text=True
    )
    assert (
        r.returncode == 1 and 'OldPathWarning' in r.stderr
    )  # a test suite that errors on deprecations sees it


def test_new_paths_and_0_1_checkpoints_load_without_warnings():
    r = run(
        'import warnings; warnings.simplefilter("error")\n'
        'import spindleflow_rl\n'
        'from spindleflow_rl.agent.checkpoints import load_policy, DEMO_POLICY, inspect_checkpoint\n'
        'assert inspect_checkpoint(DEMO_POLICY)["policy_class"]["__module__"] == "spindleflow_rl.policy"\n'
        'm = load_policy(DEMO_POLICY)\n'
        'print(type(m.policy).__module__, "spindleflow_rl.policy" in __import__("sys").modules)\n'
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ['spindleflow_rl.agent.network', 'False']


def test_a_trusted_0_1_checkpoint_and_old_pickles_load_silently():
    "`load_policy(trusted=True)` and `SpindleFlowPPO.load` unpickle the class the 0.1 zip names, with no warning."
    r = run(
        'import io, pickle, warnings; warnings.simplefilter("error")\n'
        'from spindleflow_rl.agent.checkpoints import load_policy, DEMO_POLICY\n'
        'from spindleflow_rl._compat import Unpickler\n'
        'from spindleflow_rl.core.config import EnvConfig\n'
        'm = load_policy(DEMO_POLICY, trusted=True)\n'  # SB3 unpickles the class spindleflow_rl.policy names
        'from spindleflow_rl.agent.network import SpindleFlowPPO\n'
        'assert type(SpindleFlowPPO.load(DEMO_POLICY).policy) is type(m.policy)\n'  # as the chapters load it
        'old = pickle.dumps(EnvConfig(), protocol=0).replace(b"spindleflow_rl.core.config", b"spindleflow_rl.config")\n'
        'assert Unpickler(io.BytesIO(old)).load() == EnvConfig()\n'
        'print(type(m.policy).__name__)\n'
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ['SpindleFlowPolicy']
