"""Checkpoints and resume. In process, with real SB3 training (tiny: 2 envs, 16-step rollouts): a crash or a NaN writes
crash_<step>.zip with the error and leaves latest.json on the last good checkpoint; a run stopped mid-rollout and
resumed gives bit-identical weights and episode returns to an uninterrupted run; resuming a finished run says so.
As real `spindleflow-train` processes: a run killed with SIGKILL mid-way and resumed with --checkpoint ends at the
same total timesteps and curriculum phase as an uninterrupted run, with bit-identical weights (every checkpoint
carries the envs' states and every RNG at a rollout boundary)."""

import json, os, shutil, signal, subprocess, sys, time, zipfile
from pathlib import Path
import pytest, torch
from spindleflow_rl.core.config import ConfigError
from spindleflow_rl.agent.network import SpindleFlowPPO
from spindleflow_rl.agent.runs import load_run_config, resolve_checkpoint
from spindleflow_rl.training.train import train, NonFiniteError
from stable_baselines3.common.callbacks import BaseCallback

CONFIG = """
train:
  timesteps: 2048
  n_envs: 2
  checkpoint_every: 128
  keep_checkpoints: 2
  eval_episodes: 0
  progress: false
  torch_threads: 1
  phase_budget: [0.25, 0.25]
  success_threshold: 2.0     # phases advance on the step budget only, so the phase is a function of timesteps
ppo:
  n_steps: 32
  batch_size: 64
  n_epochs: 1
"""


def _train(args, **kw):
    exe = shutil.which('spindleflow-train')
    assert exe, 'spindleflow-train is not on PATH: pip install -e .'
    return subprocess.Popen([exe, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


def _latest(run):
    p = run / 'latest.json'
    return json.loads(p.read_text()) if p.exists() else None


def test_sigkill_and_resume_matches_uninterrupted(tmp_path):
    cfg = tmp_path / 'small.yaml'
    cfg.write_text(CONFIG)
    full = _train(['--config', str(cfg), '--out', str(tmp_path), '--run-name', 'full', '--demo-mode'])
    out, _ = full.communicate(timeout=600)
    assert full.returncode == 0, out
    ref = _latest(tmp_path / 'full')
    assert ref['num_timesteps'] == 2048 and ref['phase'] == 3

    run = tmp_path / 'killed'
    p = _train(['--config', str(cfg), '--out', str(tmp_path), '--run-name', 'killed', '--demo-mode'])
    t0 = time.time()
    while True:  # wait for a checkpoint well into the run, then SIGKILL (no cleanup)
        st = _latest(run)
        if st and st['num_timesteps'] >= 640:
            break
        assert p.poll() is None, p.stdout.read()
        assert time.time() - t0 < 600, 'no checkpoint appeared'
        time.sleep(0.05)
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=60)
    st = _latest(run)
    assert 0 < st['num_timesteps'] < 2048, st['num_timesteps']
    zipfile.ZipFile(run / st['checkpoint']).testzip()  # the checkpoint it points at is complete

    r = _train(['--checkpoint', str(run)])
    out, _ = r.communicate(timeout=600)
    assert r.returncode == 0, out
    end = _latest(run)
    assert end['num_timesteps'] == ref['num_timesteps']
    assert end['phase'] == ref['phase']
    assert [h['phase'] for h in end['curriculum']['history']] == [
        h['phase'] for h in ref['curriculum']['history']
    ]
    assert [h['end'] for h in end['curriculum']['history']] == [
        h['end'] for h in ref['curriculum']['history']
    ]
    assert (run / 'final.zip').exists()
    from spindleflow_rl.agent.network import SpindleFlowPPO

    wa, wb = (
        SpindleFlowPPO.load(r / 'final.zip', device='cpu').policy.state_dict()
        for r in (tmp_path / 'full', run)
    )
    assert all(__import__('torch').equal(wa[k], wb[k]) for k in wa), (
        'resumed weights differ from the uninterrupted run'
    )
    assert 'exact resume' in out


def cfg(tmp, name, ts=192, **kw):
    return load_run_config(
        overrides={
            'train': {
                'timesteps': ts,
                'n_envs': 2,
                'checkpoint_every': 64,
                'out': str(tmp),
                'run_name': name,
                'eval_episodes': 0,
                'progress': False,
                'phase_budget': [0.2, 0.3],
                'torch_threads': 1,
                **kw,
            },
            'ppo': {'n_steps': 16, 'batch_size': 32, 'n_epochs': 1},
        }
    )


class At(BaseCallback):
    "Runs `fn(model)` once, at the first step at or after timestep `t` (on_step) or the first rollout end after it."

    def __init__(self, t, fn, where='step'):
        super().__init__()
        self.t, self.fn, self.where, self.done = t, fn, where, False

    def _fire(self):
        if not self.done and self.num_timesteps >= self.t:
            self.done = True
            self.fn(self.model)

    def _on_step(self):
        if self.where == 'step':
            self._fire()
        return True

    def _on_rollout_end(self):
        if self.where == 'rollout_end':
            self._fire()


class Returns(BaseCallback):
    "Every finished episode's (timestep, env index, return)."

    def __init__(self):
        super().__init__()
        self.eps = []

    def _on_step(self):
        for i, info in enumerate(self.locals['infos']):
            if 'summary' in info:
                self.eps.append((self.num_timesteps, i, info['summary']['return']))
        return True


def weights(z):
    return SpindleFlowPPO.load(z, device='cpu').policy.state_dict()


def same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_crash_keeps_latest_on_last_good_checkpoint(tmp_path):
    def boom(model):
        raise RuntimeError('backend exploded')

    with pytest.raises(RuntimeError, match='backend exploded'):
        train(cfg(tmp_path, 'crash'), quiet=True, callbacks=[At(150, boom)])
    run = tmp_path / 'crash'
    st = json.loads((run / 'latest.json').read_text())
    assert st['num_timesteps'] == 128 and st['checkpoint'].endswith(
        'step_0000000128.zip'
    )  # the last periodic one
    crash = json.loads((run / 'checkpoints' / 'crash_0000000150.json').read_text())
    assert 'backend exploded' in crash['error'] and crash['latest_good'] == st['checkpoint']
    assert (run / 'checkpoints' / 'crash_0000000150.zip').exists() and not (run / 'final.zip').exists()


def test_nan_guard_stops_and_latest_stays_good(tmp_path):
    def poison(model):
        with torch.no_grad():
            next(model.policy.parameters()).fill_(float('nan'))

    with pytest.raises(NonFiniteError, match='training diverged'):
        train(cfg(tmp_path, 'nan'), quiet=True, callbacks=[At(100, poison, 'rollout_end')])
    run = tmp_path / 'nan'
    st = json.loads((run / 'latest.json').read_text())
    assert st['num_timesteps'] == 64
    w = weights(run / st['checkpoint'])
    assert all(torch.isfinite(v).all() for v in w.values())  # latest: finite weights
    crash = next((run / 'checkpoints').glob('crash_*.json'))
    assert 'NaN' in json.loads(crash.read_text())['error']
    assert any(not torch.isfinite(v).all() for v in weights(crash.with_suffix('.zip')).values())
    _, s2 = resolve_checkpoint(run)
    assert s2['num_timesteps'] == 64  # --checkpoint run resumes the good one


def test_stop_and_resume_is_bit_identical(tmp_path):
    full_eps = Returns()
    full = train(cfg(tmp_path, 'full'), quiet=True, callbacks=[full_eps])

    def stop(model):
        raise KeyboardInterrupt

    part_eps = Returns()
    with pytest.raises(KeyboardInterrupt):
        train(
            cfg(tmp_path, 'part'), quiet=True, callbacks=[part_eps, At(100, stop)]
        )  # mid-rollout (rollouts: 32 steps)
    st = json.loads((tmp_path / 'part' / 'latest.json').read_text())
    assert st['num_timesteps'] == 96 and st['resume_state']  # the rollout boundary
    rest_eps = Returns()
    part = train(cfg(tmp_path, 'part'), checkpoint=tmp_path / 'part', quiet=True, callbacks=[rest_eps])
    assert same(weights(full / 'final.zip'), weights(part / 'final.zip'))
    resumed = [e for e in part_eps.eps if e[0] <= 96] + rest_eps.eps
    assert len(full_eps.eps) > 10 and resumed == full_eps.eps  # every episode's return, exactly
    assert (
        json.loads((part / 'latest.json').read_text())['curriculum']
        == json.loads((full / 'latest.json').read_text())['curriculum']
    )


def test_resuming_a_finished_run_says_so(tmp_path, capsys):
    run = train(cfg(tmp_path, 'done', ts=64), quiet=True)
    before = sorted(p.name for p in (run / 'checkpoints').iterdir())
    train(cfg(tmp_path, 'done', ts=64), checkpoint=run)
    assert 'already trained to 64 timesteps' in capsys.readouterr().out
    assert sorted(p.name for p in (run / 'checkpoints').iterdir()) == before


def test_a_run_folder_someone_else_wrote_is_not_unpickled(tmp_path, monkeypatch, capsys):
    """Resume states are signed with this user's key (appendix 94a). A run folder whose state another key signed (a
    copy from another user or machine: here another key file) is refused for an exact resume, naming the trust flag
    and the weights-only way, and nothing in it is unpickled; `--trust-resume-state` resumes it exactly; a tampered
    state is refused too; `--init-from` starts a new run from its weights without unpickling anything."""
    import pickle, cloudpickle
    from spindleflow_rl.cli import train_main

    (tmp_path / 'c.yaml').write_text(CONFIG)
    monkeypatch.setenv('SPINDLEFLOW_RESUME_KEY', str(tmp_path / 'alice.key'))
    run = train(
        load_run_config(
            tmp_path / 'c.yaml', {'train': {'timesteps': 128, 'out': str(tmp_path), 'run_name': 'r'}}
        ),
        quiet=True,
    )
    latest = (run / 'latest.json').read_bytes()
    monkeypatch.setenv(
        'SPINDLEFLOW_RESUME_KEY', str(tmp_path / 'bob.key')
    )  # another user resumes Alice's folder
    loads = []
    monkeypatch.setattr(
        pickle, 'loads', lambda *a, **k: loads.append(1) or (_ for _ in ()).throw(AssertionError('unpickled'))
    )
    assert train_main(['--checkpoint', str(run), '--timesteps', '192', '--no-progress']) == 2
    err = capsys.readouterr().err
    assert 'signed with another key' in err and '--trust-resume-state' in err and '--init-from' in err, err
    assert loads == [] and (run / 'latest.json').read_bytes() == latest  # nothing unpickled, nothing written
    monkeypatch.undo()
    monkeypatch.setenv('SPINDLEFLOW_RESUME_KEY', str(tmp_path / 'bob.key'))
    monkeypatch.setattr(
        cloudpickle, 'loads', lambda *a, **k: (_ for _ in ()).throw(AssertionError('cloudpickle ran'))
    )
    assert (
        train_main(
            [
                '--config',
                str(tmp_path / 'c.yaml'),
                '--timesteps',
                '64',
                '--no-progress',
                '--out',
                str(tmp_path),
                '--run-name',
                'ft',
                '--init-from',
                str(run),
            ]
        )
        == 0
    )  # weights only: no unpickling at all
    monkeypatch.undo()
    monkeypatch.setenv('SPINDLEFLOW_RESUME_KEY', str(tmp_path / 'bob.key'))
    assert (
        train_main(['--checkpoint', str(run), '--timesteps', '192', '--no-progress', '--trust-resume-state'])
        == 0
    )
    assert json.loads((run / 'latest.json').read_text())['num_timesteps'] == 192
    monkeypatch.setenv('SPINDLEFLOW_RESUME_KEY', str(tmp_path / 'alice.key'))
    rs = (
        run / json.loads((run / 'latest.json').read_text())['resume_state']
    )  # now signed by Bob: Alice refuses it ...
    assert train_main(['--checkpoint', str(run), '--timesteps', '256', '--no-progress']) == 2
    monkeypatch.setenv('SPINDLEFLOW_RESUME_KEY', str(tmp_path / 'bob.key'))
    blob = bytearray(rs.read_bytes())
    blob[-3] ^= 1
    rs.write_bytes(bytes(blob))  # ... and Bob refuses a tampered one
    assert train_main(['--checkpoint', str(run), '--timesteps', '256', '--no-progress']) == 2
    assert 'signed with another key' in capsys.readouterr().err
