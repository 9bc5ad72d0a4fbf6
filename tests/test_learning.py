"""The full learning check (slow: about 7 minutes on 2 cores; run with `bash tools/test.sh --slow`): the README's
main job trains the default demo curriculum and, on held-out tasks, reaches a normalised score of at least 0.85
and beats the best greedy top-k with non-overlapping 95% confidence intervals, while that greedy baseline stays
clearly below 0.70 (the whole paired-bootstrap interval of its normalised score); on the unseen roster at least 0.75."""

import json, shutil, subprocess, time
import pytest


@pytest.mark.slow
def test_default_curriculum_learns(tmp_path):
    exe = shutil.which('spindleflow-train')
    assert exe
    t0 = time.time()
    p = subprocess.run(
        [exe, '--curriculum', '--demo-mode', '--out', str(tmp_path), '--run-name', 'learn', '--no-progress'],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    minutes = (time.time() - t0) / 60
    rep = json.loads((tmp_path / 'learn' / 'eval.json').read_text())
    summary = json.loads((tmp_path / 'learn' / 'train_summary.json').read_text())
    print(f"trained in {summary['seconds']:.0f}s, whole job {minutes:.1f} min")
    held, unseen = rep['splits']['heldout'], rep['splits']['unseen-roster']
    assert held['policy']['normalised'] >= 0.85, held['policy']
    assert unseen['policy']['normalised'] >= 0.75, unseen['policy']
    g = max((n for n in held if n.startswith('greedy')), key=lambda n: held[n]['return'])
    lo_policy = held['policy']['return'] - held['policy']['return_ci95']
    hi_greedy = held[g]['return'] + held[g]['return_ci95']
    assert lo_policy > hi_greedy, (held['policy'], g, held[g])
    assert held[g]['normalised_ci95'][1] < 0.70, (g, held[g]['normalised'], held[g]['normalised_ci95'])
