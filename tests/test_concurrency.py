"""Issue 15, concurrent rollouts, against the scripted OpenAI-compatible server on 127.0.0.1 with the real `openai`
client: the same seed gives the same episodes with 1 and with 8 requests in flight (replies are keyed, not ordered
by arrival), and `--max-cost-usd` stays exact with every environment stepping at once."""

import json, pickle
from pathlib import Path
import numpy as np
import pytest
from stable_baselines3.common.monitor import Monitor
from spindleflow_rl.agent.concurrency import ThreadedVecEnv
from spindleflow_rl.core.config import EnvConfig
from spindleflow_rl.envs.env import SpindleFlowEnv, default_world
from spindleflow_rl.llms.backend import OpenAIConfig, LLMClient, OpenAIBackend, make_judge_scorers
from spindleflow_rl.llms.testing import ScriptedOpenAIServer
from spindleflow_rl.training.train import ResumableEnv
from spindleflow_rl.cli import train_main as main

KEY = 'sk-test-SECRET-concurrency-8642'
N_ENVS, STEPS = 8, 10


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv('OPENAI_API_KEY', KEY)
    monkeypatch.delenv('OPENAI_BASE_URL', raising=False)


def rollout(server, vec_cls, max_concurrency, cache_dir, seed=0):
    """`STEPS` steps of `N_ENVS` tier-2 environments on the real OpenAI backend (judges included) with seeded random
    actions. The clients' clock is stopped: a call's wall-clock latency is part of the observation and differs
    between any two runs, with or without concurrency; everything else must not."""
    world = default_world()
    cfg = OpenAIConfig(
        base_url=server.base_url,
        cache_dir=str(cache_dir),
        max_concurrency=max_concurrency,
        max_retries=0,
        timeout_s=20.0,
    )

    def make(i):
        client = LLMClient(cfg, clock=lambda: 0.0)
        env = SpindleFlowEnv(
            EnvConfig(phase=2, tier=2),
            backend=OpenAIBackend(world, cfg, client=client),
            scorers=make_judge_scorers(cfg, client),
            world=world,
        )
        return ResumableEnv(Monitor(env))

    venv = vec_cls([(lambda i=i: make(i)) for i in range(N_ENVS)])
    venv.seed(seed)
    rng = np.random.default_rng(seed)
    server.max_in_flight = 0
    n0 = server.n_requests
    obs, rews, dones, trace = [venv.reset()], [], [], []
    for _ in range(STEPS):
        o, r, d, infos = venv.step(rng.uniform(-1, 1, (N_ENVS,) + venv.action_space.shape).astype(np.float32))
        obs.append(o)
        rews.append(r)
        dones.append(d)
        for i in infos:
            calls = [
                (c['specialist_id'], c['status'], c['output'][:200], c['cost_usd'])
                for c in (i.get('trace') or {}).get('calls', [])
            ]
            s = i.get('summary')
            trace.append(
                (
                    calls,
                    None
                    if s is None
                    else (
                        s['return'],
                        s['specialist_score'],
                        s['baseline_score'],
                        s['tier_used'],
                        s['cost_usd'],
                        s['n_called'],
                    ),
                )
            )
    spent = sum(venv.env_method('spent_usd'))
    venv.close()
    sent = sorted(json.dumps([q['model'], q['messages']], sort_keys=True) for q in server.requests[n0:])
    return dict(
        obs=np.array(obs),
        rews=np.array(rews),
        dones=np.array(dones),
        trace=trace,
        spent=spent,
        sent=sent,
        max_in_flight=server.max_in_flight,
    )


def test_same_seed_same_episodes_with_1_and_8_requests_in_flight(tmp_path, key):
    with ScriptedOpenAIServer(usage=(100, 40), latency_s=0.02) as srv:
        one = rollout(srv, ThreadedVecEnv, 1, tmp_path / 'one')  # every env at once, one request in flight
        eight = rollout(
            srv, ThreadedVecEnv, 8, tmp_path / 'eight'
        )  # and eight (chapter 09a: threads == DummyVecEnv)
    assert one['max_in_flight'] == 1
    assert eight['max_in_flight'] > 1, eight['max_in_flight']  # the requests really overlapped
    n_episodes = sum(t[1] is not None for t in eight['trace'])
    assert n_episodes >= N_ENVS and len(eight['sent']) > 50, (n_episodes, len(eight['sent']))
    assert np.array_equal(one['obs'], eight['obs'])  # bit for bit
    assert np.array_equal(one['rews'], eight['rews']) and np.array_equal(one['dones'], eight['dones'])
    assert one['trace'] == eight['trace']  # calls, replies, scores, priced costs
    assert one['sent'] == eight['sent']  # the same requests, each sent once
    assert eight['spent'] == pytest.approx(
        one['spent'], abs=1e-15
    )  # and the same money, exactly what was billed
    assert one['spent'] == pytest.approx(len(one['sent']) * (100 * 0.15 + 40 * 0.60) / 1e6, abs=1e-12)


CONFIG = """
train:
  eval_episodes: 0
  progress: false
  checkpoint_every: 0
  imitation_teacher: ''
ppo:
  n_steps: 8
  batch_size: 64
  n_epochs: 1
openai:
  cache_dir: {cache}
"""


def test_max_cost_usd_is_exact_with_concurrency(tmp_path, key, monkeypatch, capsys):
    """8 envs at once through the CLI: the budget holds, and the run's
    spend equals what the server billed, to the cent and below."""
    cfg = tmp_path / 'c.yaml'
    cfg.write_text(CONFIG.format(cache=tmp_path / 'llm'))
    budget = 0.05
    with ScriptedOpenAIServer(usage=(1000, 500), latency_s=0.05) as srv:
        monkeypatch.setenv('OPENAI_BASE_URL', srv.base_url)
        (tmp_path / 'none.env').write_text('')  # an empty env file: no .env of the working folder
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
                '8',
                '--vec-env',
                'threads',
                '--max-concurrency',
                '8',
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
        billed = (
            sum(1 for q in srv.requests) * (1000 * 0.15 + 500 * 0.60) / 1e6
        )  # every request answered: usage 1000 + 500
        peak = srv.max_in_flight
    assert rc == 0, out
    run = tmp_path / 'runs' / 'budget'
    summ = json.loads((run / 'train_summary.json').read_text())
    st = json.loads((run / 'latest.json').read_text())
    assert summ['stopped_for_cost'] is True and 'threads, all at once' in out, out
    assert 0 < summ['cost_usd'] <= budget
    assert summ['cost_usd'] == pytest.approx(billed, abs=1e-12) and st['cost_usd'] == summ['cost_usd']
    assert peak > 1 and st['num_timesteps'] < 4096
    assert json.loads((run / 'config.json').read_text())['openai']['max_concurrency'] == 8
    from spindleflow_rl.agent.checkpoints import read_resume_state  # signed: read the way a resume reads it

    resume, why = read_resume_state(
        run / st['resume_state'], run / st['checkpoint']
    )  # the stop saved its rollout boundary
    assert why == '', why
    assert len(resume['envs']) == 8 and resume['env_spent'] <= summ['cost_usd']


def test_a_pickled_client_shares_the_limiter_again(key):
    """An env snapshot (exact resume) pickles its client: the limiter
    is left out and the server's shared one is taken back."""
    cfg = OpenAIConfig(base_url='http://127.0.0.1:9/v1', max_concurrency=5, tokens_per_minute=1000)
    a = LLMClient(cfg)
    b = pickle.loads(pickle.dumps(a))
    assert b.limiter is a.limiter and (b.limiter.max_in_flight, b.limiter.tokens_per_minute) == (5, 1000.0)
