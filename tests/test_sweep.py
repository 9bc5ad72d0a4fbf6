"""Sweeps: a two-trial sweep (each trial one `spindleflow-train` config, then a held-out evaluation) runs
through Ray Tune on a local Ray instance started by the sweep, and the same sweep runs in this process without Ray;
both give the same numbers, gathered into one sweep.json and sweep.png."""

import json, os, subprocess, sys
from pathlib import Path
import pytest
from spindleflow_rl.commands.sweep import run_sweep, ray_available
from spindleflow_rl.cli import sweep_main as main

TINY = {
    'train.timesteps': 64,
    'train.n_envs': 2,
    'train.curriculum': False,
    'train.phase': 1,
    'train.progress': False,
    'train.checkpoint_every': 0,
    'train.imitation_teacher': '',
    'train.torch_threads': 1,
    'ppo.n_steps': 16,
    'ppo.batch_size': 32,
    'ppo.n_epochs': 1,
}
AXES = {'reward.efficiency_coef': [0.0, 0.5]}


def numbers(rec):
    return [
        (
            r['name'],
            r['point'],
            r['num_timesteps'],
            r['heldout']['episodes'],
            round(r['heldout']['return'], 9),
            round(r['heldout']['quality'], 9),
        )
        for r in rec['trials']
    ]


def test_two_trial_sweep_without_ray(tmp_path):
    rec = run_sweep(sweep=AXES, set=TINY, out=tmp_path / 'local', eval_episodes=4, engine='local', quiet=True)
    assert rec['engine'] == 'local' and [r['point'] for r in rec['trials']] == [
        {'reward.efficiency_coef': 0.0},
        {'reward.efficiency_coef': 0.5},
    ]
    saved = json.loads((tmp_path / 'local' / 'sweep.json').read_text())
    assert numbers(saved) == numbers(rec) and (tmp_path / 'local' / 'sweep.png').stat().st_size > 1000
    for r in rec['trials']:  # each trial is a whole training run in its own folder
        run = Path(r['run_dir'])
        assert run.parent == (tmp_path / 'local' / 'trials').resolve() and (run / 'final.zip').exists()
        assert (
            json.loads((run / 'config.json').read_text())['reward']['efficiency_coef']
            == r['point']['reward.efficiency_coef']
        )


def test_sweep_runs_without_ray_installed(tmp_path):
    "`engine auto` with Ray not importable (a process where `import ray` fails): the trials run in-process."
    code = (
        "import sys, builtins; real = builtins.__import__\n"
        "def imp(name, *a, **k):\n"
        "    if name == 'ray' or name.startswith('ray.'): raise ImportError('no ray here')\n"
        "    return real(name, *a, **k)\n"
        "builtins.__import__ = imp\n"
        "from spindleflow_rl.commands.sweep import ray_available\nfrom spindleflow_rl.cli import sweep_main as main\n"
        "assert not ray_available()\n"
        f"sys.exit(main(['--sweep', 'train.seed=0,1', '--set', 'train.timesteps=32', 'train.n_envs=1', "
        f"'train.curriculum=false',"
        f" 'train.checkpoint_every=0', 'train.imitation_teacher=', 'train.torch_threads=1', 'ppo.n_steps=16', "
        f"'ppo.batch_size=16',"
        f" 'ppo.n_epochs=1', '--eval-episodes', '0', '--out', {str(tmp_path / 'noray')!r}]))\n"
    )
    p = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert 'this process, one after another' in p.stdout
    rec = json.loads((tmp_path / 'noray' / 'sweep.json').read_text())
    assert rec['engine'] == 'local' and [r['num_timesteps'] for r in rec['trials']] == [32, 32]


@pytest.mark.slow  # starts a local Ray cluster: ~22 s (`bash tools/test.sh --slow`; CI runs it)
@pytest.mark.skipif(
    not ray_available(), reason='the [ray] extra is not installed (pip install -e ".[dev]" installs it)'
)
def test_two_trial_sweep_through_ray_tune_local(tmp_path):
    local = run_sweep(
        sweep=AXES, set=TINY, out=tmp_path / 'local', eval_episodes=4, engine='local', quiet=True
    )
    rec = run_sweep(sweep=AXES, set=TINY, out=tmp_path / 'ray', eval_episodes=4, engine='ray', quiet=True)
    assert rec['engine'] == 'ray'
    assert numbers(rec) == numbers(local)  # the same trials, the same numbers, whichever engine ran them
    assert (tmp_path / 'ray' / 'ray').is_dir()  # Ray Tune's own experiment folder
    assert json.loads((tmp_path / 'ray' / 'sweep.json').read_text())['engine'] == 'ray'
    import ray

    assert not ray.is_initialized()  # the sweep stopped the Ray it started
