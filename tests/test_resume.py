"""A training run killed with SIGKILL mid-way and resumed with --checkpoint ends at the same total timesteps and
curriculum phase as an uninterrupted run, with bit-identical weights: every checkpoint carries the envs' states and
every RNG at a rollout boundary (small scale, real `spindleflow-train` processes)."""
import json, os, shutil, signal, subprocess, sys, time, zipfile
from pathlib import Path
import pytest

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
    return subprocess.Popen([exe, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **kw)

def _latest(run):
    p = run/'latest.json'
    return json.loads(p.read_text()) if p.exists() else None

def test_sigkill_and_resume_matches_uninterrupted(tmp_path):
    cfg = tmp_path/'small.yaml'; cfg.write_text(CONFIG)
    full = _train(['--config', str(cfg), '--out', str(tmp_path), '--run-name', 'full', '--demo-mode'])
    out, _ = full.communicate(timeout=600); assert full.returncode == 0, out
    ref = _latest(tmp_path/'full')
    assert ref['num_timesteps'] == 2048 and ref['phase'] == 3

    run = tmp_path/'killed'
    p = _train(['--config', str(cfg), '--out', str(tmp_path), '--run-name', 'killed', '--demo-mode'])
    t0 = time.time()
    while True:                              # wait for a checkpoint well into the run, then SIGKILL (no cleanup)
        st = _latest(run)
        if st and st['num_timesteps'] >= 640: break
        assert p.poll() is None, p.stdout.read()
        assert time.time() - t0 < 600, 'no checkpoint appeared'
        time.sleep(0.05)
    p.send_signal(signal.SIGKILL); p.wait(timeout=60)
    st = _latest(run)
    assert 0 < st['num_timesteps'] < 2048, st['num_timesteps']
    zipfile.ZipFile(run/st['checkpoint']).testzip()        # the checkpoint it points at is complete

    r = _train(['--checkpoint', str(run)])
    out, _ = r.communicate(timeout=600); assert r.returncode == 0, out
    end = _latest(run)
    assert end['num_timesteps'] == ref['num_timesteps']
    assert end['phase'] == ref['phase']
    assert [h['phase'] for h in end['curriculum']['history']] == [h['phase'] for h in ref['curriculum']['history']]
    assert [h['end'] for h in end['curriculum']['history']] == [h['end'] for h in ref['curriculum']['history']]
    assert (run/'final.zip').exists()
    from spindleflow_rl.policy import SpindleFlowPPO
    wa, wb = (SpindleFlowPPO.load(r/'final.zip', device='cpu').policy.state_dict() for r in (tmp_path/'full', run))
    assert all(__import__('torch').equal(wa[k], wb[k]) for k in wa), 'resumed weights differ from the uninterrupted run'
    assert 'exact resume' in out
