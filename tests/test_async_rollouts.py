"""Issue 22, asynchronous rollouts (`--vec-env async`, chapter 09a), against the scripted OpenAI-compatible server on
127.0.0.1 with the real `openai` client: the cost budget is never passed with 32 environments in flight; a run
interrupted mid-rollout (requests in flight) resumes to the same weights as the uninterrupted run; with the same
replies the run is the same whatever the concurrency; an error in one environment is raised with nothing left in flight."""

import json
import threading
import time
from pathlib import Path
import numpy as np
import pytest
import torch
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.utils import set_random_seed
from spindleflow_rl.agent.concurrency import AsyncVecEnv
from spindleflow_rl.core.config import ConfigError, EnvConfig
from spindleflow_rl.envs.env import SpindleFlowEnv, default_world
from spindleflow_rl.llms.backend import OpenAIConfig, LLMClient, OpenAIBackend, make_judge_scorers
from spindleflow_rl.agent.network import SpindleFlowPPO, make_model
from spindleflow_rl.llms.testing import ScriptedOpenAIServer, ScriptedReply
from spindleflow_rl.training.train import load_run_config, train
from spindleflow_rl.cli import train_main as main
from spindleflow_rl.agent.checkpoints import read_resume_state

KEY = 'sk-test-SECRET-async-7531'
USAGE = (100, 40)  # billed per reply: within every request's bound (prompt bytes, max_tokens)
PRICE = (USAGE[0] * 0.15 + USAGE[1] * 0.60) / 1e6  # gpt-4o-mini, the only model tier 0 calls


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv('OPENAI_API_KEY', KEY)
    monkeypatch.delenv('OPENAI_BASE_URL', raising=False)


def test_budget_never_passed_with_32_envs_in_flight(tmp_path, key, monkeypatch, capsys):
    """32 environments sending at once through the CLI: every request
    reserved its cost first, so what the server billed stays inside."""
    budget = 0.01  # about 250 replies
    (tmp_path / 'none.env').write_text('')  # an empty .env: nothing from the working folder
    cfg = tmp_path / 'c.yaml'
    cfg.write_text(
        f"train:\n  eval_episodes: 0\n  progress: false\n  checkpoint_every: 0\n  imitation_teacher: ''\n"
        f"ppo:\n  n_steps: 16\n  batch_size: 512\n  n_epochs: 1\nopenai:\n  cache_dir: {tmp_path / 'llm'}\n"
    )
    # No timing: every reply is held until 32 requests are in flight at once (or 60 s pass), then the gate opens for
    # good. A fixed reply delay (0.5 s, then 1.5 s) still let a busy 2-core machine see 31 at most: the 32nd request
    # left after the first reply had come back. Held replies make the count a property of the code, not of the load.
    gate = threading.Event()
    with ScriptedOpenAIServer(usage=USAGE) as srv:
        srv.script(ScriptedReply(gate=gate), times=None)

        def open_at_32():
            t0 = time.monotonic()
            while srv.in_flight < 32 and time.monotonic() - t0 < 60:
                time.sleep(0.01)
            gate.set()

        threading.Thread(target=open_at_32, daemon=True).start()
        monkeypatch.setenv('OPENAI_BASE_URL', srv.base_url)
        rc = main(
            [
                '--config',
                str(cfg),
                '--backend',
                'openai',
                '--tier',
                '0',
                '--phase',
                '1',
                '--timesteps',
                '4096',
                '--n-envs',
                '32',
                '--vec-env',
                'async',
                '--max-concurrency',
                '64',
                '--max-cost-usd',
                str(budget),
                '--out',
                str(tmp_path / 'runs'),
                '--run-name',
                'budget',
                '--env-file',
                str(tmp_path / 'none.env'),
            ]
        )
        out = capsys.readouterr().out
        billed, peak = srv.n_requests * PRICE, srv.max_in_flight
    assert rc == 0, out
    run = tmp_path / 'runs' / 'budget'
    summ = json.loads((run / 'train_summary.json').read_text())
    st = json.loads((run / 'latest.json').read_text())
    assert 'asynchronous' in out and 'cost budget' in out, out
    assert summ['stopped_for_cost'] is True and st['num_timesteps'] < 4096
    assert peak >= 32, peak  # every environment had a request in flight at once
    assert billed <= budget and summ['cost_usd'] <= budget
    assert summ['cost_usd'] == pytest.approx(billed, abs=1e-12)  # the run's spend is what the server billed
    assert billed > budget - 0.001  # and near it: the last refusal could not fit at all
    assert not (run / 'final.zip').exists()
    resume, why = read_resume_state(
        run / st['resume_state'], run / st['checkpoint']
    )  # the stop saved its rollout boundary (signed)
    assert resume is not None, why
    assert len(resume['envs']) == 32 and resume['env_spent'] <= summ['cost_usd']


class InterruptAt(BaseCallback):
    "Ctrl-C at a timestep (mid-rollout: the other environments have requests in flight)."

    def __init__(self, at: int):
        super().__init__(0)
        self.at = at

    def _on_step(self) -> bool:
        if self.num_timesteps >= self.at:
            raise KeyboardInterrupt
        return True


def _cfg(srv, tmp_path, name, cache, max_concurrency=16):
    return load_run_config(
        None,
        {
            'train': {
                'backend': 'openai',
                'tier': 0,
                'curriculum': False,
                'phase': 1,
                'timesteps': 4 * 8 * 8,
                'n_envs': 8,
                'vec_env': 'async',
                'eval_episodes': 0,
                'progress': False,
                'checkpoint_every': 64,
                'imitation_teacher': '',
                'out': str(tmp_path / 'runs'),
                'run_name': name,
                'seed': 3,
                'torch_threads': 1,
            },
            'ppo': {'n_steps': 8, 'batch_size': 32, 'n_epochs': 2},
            'env': {'max_steps': 3},  # time limits: bootstrapped rewards
            'openai': {'base_url': srv.base_url, 'cache_dir': str(cache), 'max_concurrency': max_concurrency},
        },
    )


def _weights(run: Path) -> dict:
    return SpindleFlowPPO.load(run / 'final.zip', device='cpu').policy.state_dict()


def test_resume_mid_rollout_is_exact_and_the_cache_replays_the_cold_run(tmp_path, key):
    """A cold run fills the reply cache; the same run on the warm cache (one request in flight at most: none is needed)
    gives the same weights; a run interrupted mid-rollout and resumed gives them too."""
    with ScriptedOpenAIServer(usage=USAGE, latency_s=0.02) as srv:
        cold = train(_cfg(srv, tmp_path, 'cold', tmp_path / 'llm'), quiet=True)
        n_cold = srv.n_requests
        warm = train(_cfg(srv, tmp_path, 'warm', tmp_path / 'llm', max_concurrency=1), quiet=True)
        assert srv.n_requests == n_cold  # every reply from the cache
        with pytest.raises(KeyboardInterrupt):
            train(_cfg(srv, tmp_path, 'resumed', tmp_path / 'llm'), quiet=True, callbacks=[InterruptAt(150)])
        assert srv._in_flight == 0  # nothing left in flight by the interrupt
        st = json.loads((tmp_path / 'runs' / 'resumed' / 'latest.json').read_text())
        assert st['num_timesteps'] == 128  # the boundary before the interrupt
        resumed = train(
            _cfg(srv, tmp_path, 'resumed', tmp_path / 'llm'),
            checkpoint=tmp_path / 'runs' / 'resumed',
            quiet=True,
        )
    assert n_cold > 100
    ref = _weights(cold)
    for run in (warm, resumed):
        w = _weights(run)
        assert all(torch.equal(ref[k], w[k]) for k in ref), run
    assert json.loads((resumed / 'latest.json').read_text())['num_timesteps'] == 256


def _llm_model(srv, cap: int, cache: Path, n=16, tier=2):
    """`n` environments (tier 2: judges included; at most 3 steps, so time limits cut episodes and their last reward is
    bootstrapped) whose clients have a stopped clock: latency is part of the observation."""
    world = default_world()
    cfg = OpenAIConfig(
        base_url=srv.base_url, cache_dir=str(cache), max_concurrency=cap, max_retries=0, timeout_s=20.0
    )

    def make(i):
        client = LLMClient(cfg, clock=lambda: 0.0)
        env = SpindleFlowEnv(
            EnvConfig(phase=2, tier=tier, max_steps=3),
            backend=OpenAIBackend(world, cfg, client=client),
            scorers=make_judge_scorers(cfg, client),
            world=world,
        )
        return Monitor(env)

    venv = AsyncVecEnv([(lambda i=i: make(i)) for i in range(n)])
    return make_model(venv, seed=0, n_steps=6, batch_size=48, n_epochs=2)


def test_same_replies_same_run_at_concurrency_1_and_16(tmp_path, key):
    """Two cold runs, one request in flight and sixteen: the steps
    finish in another order, the buffer and the weights are the same."""
    out = {}
    with ScriptedOpenAIServer(usage=USAGE, latency_s=0.01) as srv:
        for cap in (1, 16):
            model = _llm_model(srv, cap, tmp_path / f'llm{cap}')
            srv.max_in_flight = 0
            n0 = srv.n_requests
            set_random_seed(0)
            model.learn(2 * 6 * 16)
            b = model.rollout_buffer
            out[cap] = (
                {
                    k: getattr(b, k).copy()
                    for k in ('observations', 'actions', 'rewards', 'episode_starts', 'values', 'log_probs')
                },
                model.policy.state_dict(),
                srv.max_in_flight,
                srv.n_requests - n0,
            )
            model.env.close()
    (b1, w1, peak1, n1), (b16, w16, peak16, n16) = out[1], out[16]
    assert (peak1, n1 == n16) == (1, True) and peak16 > 4, (peak1, peak16, n1, n16)
    for k in b1:
        assert np.array_equal(b1[k], b16[k]), k
    assert all(torch.equal(w1[k], w16[k]) for k in w1)


def test_an_error_in_one_env_is_raised_with_nothing_in_flight(tmp_path, key):
    "A refused key on one request (a configuration error) surfaces as its ConfigError once the other steps have landed."
    with ScriptedOpenAIServer(usage=USAGE, latency_s=0.05) as srv:
        model = _llm_model(srv, 16, tmp_path / 'llm', n=8, tier=1)  # no judge: it would fall back a tier
        srv.script(ScriptedReply(status=401, message='bad key'), match=lambda body: srv.n_requests > 20)
        with pytest.raises(ConfigError, match='rejected the API key'):
            model.learn(6 * 8)
        assert srv._in_flight == 0 and not model.env.collecting
        model.env.close()


def test_curriculum_calls_wait_for_the_rollout_boundary(tmp_path):
    """set_phase from a callback mid-rollout is deferred to the rollout's
    end (every env switches at the same point); reads run at once."""

    class SwitchAt(BaseCallback):
        def _on_step(self):
            if self.num_timesteps == 16:
                self.seen = (
                    self.training_env.env_method('set_phase', 2),
                    self.training_env.env_method('get_phase'),
                )
            return True

    venv = AsyncVecEnv([(lambda: Monitor(SpindleFlowEnv(EnvConfig(phase=1)))) for _ in range(4)])
    model = make_model(venv, seed=0, n_steps=8, batch_size=32, n_epochs=1)
    cb = SwitchAt(0)
    model.learn(32, callback=cb)
    assert cb.seen == ([None] * 4, [1] * 4)  # deferred; the phase still 1 during the rollout
    assert venv.env_method('get_phase') == [2] * 4
    venv.close()


def test_ctrl_c_mid_rollout_saves_the_boundary_and_resumes(tmp_path):
    """SIGINT to `spindleflow-train --vec-env async` while requests are
    in flight: exit 130, checkpoint at a rollout boundary, resumable."""
    import os, shutil, signal, subprocess, time

    exe = shutil.which('spindleflow-train')
    assert exe, 'spindleflow-train is not on PATH: pip install -e .'
    (tmp_path / 'none.env').write_text('')  # an empty .env: nothing from the working folder
    cfg = tmp_path / 'c.yaml'
    cfg.write_text(
        f"train:\n  eval_episodes: 0\n  progress: false\n  checkpoint_every: 64\n  imitation_teacher: ''\n  "
        f"torch_threads: 1\n"
        f"ppo:\n  n_steps: 8\n  batch_size: 64\n  n_epochs: 1\nopenai:\n  cache_dir: {tmp_path / 'llm'}\n"
    )
    args = [
        '--config',
        str(cfg),
        '--backend',
        'openai',
        '--tier',
        '0',
        '--phase',
        '1',
        '--timesteps',
        '640',
        '--n-envs',
        '8',
        '--vec-env',
        'async',
        '--out',
        str(tmp_path / 'runs'),
        '--run-name',
        'ctrl-c',
        '--env-file',
        str(tmp_path / 'none.env'),
    ]
    with ScriptedOpenAIServer(usage=USAGE, latency_s=0.1) as srv:
        env = {**os.environ, 'OPENAI_API_KEY': KEY, 'OPENAI_BASE_URL': srv.base_url}
        # a job started in the background (`cmd &`, an xdist worker)
        # inherits SIGINT ignored, and Python then never raises
        # KeyboardInterrupt: give the child the default handler, as a terminal's Ctrl-C would find it
        p = subprocess.Popen(
            [exe, *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        latest, t0 = tmp_path / 'runs' / 'ctrl-c' / 'latest.json', time.time()
        while not (latest.exists() and json.loads(latest.read_text())['num_timesteps'] >= 128):
            assert p.poll() is None and time.time() - t0 < 300, (
                p.stdout.read() if p.poll() is not None else 'no checkpoint'
            )
            time.sleep(0.05)
        time.sleep(0.5)  # into the next rollout: steps in flight
        p.send_signal(signal.SIGINT)
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 130 and 'interrupted: writing a checkpoint' in out, out[-2000:]
        assert srv._in_flight == 0
        st = json.loads(latest.read_text())
        assert st['num_timesteps'] % 64 == 0 and 128 <= st['num_timesteps'] < 640, st['num_timesteps']
        r = subprocess.run(
            [
                exe,
                '--checkpoint',
                str(tmp_path / 'runs' / 'ctrl-c'),
                '--eval-episodes',
                '0',
                '--env-file',
                str(tmp_path / 'none.env'),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert r.returncode == 0 and 'exact resume' in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
    assert (
        json.loads(latest.read_text())['num_timesteps'] == 640
        and (tmp_path / 'runs' / 'ctrl-c' / 'final.zip').exists()
    )
