"""`spindleflow-train --backend openai --tier 2` and `spindleflow-eval --backend openai` end to end from the CLI,
with the real `openai` client talking to the scripted OpenAI-compatible server on 127.0.0.1 (a test double:
no network here); the API key never lands in a file."""

import json, os, shutil, subprocess
from pathlib import Path
import pytest
from spindleflow_rl.llms.testing import ScriptedOpenAIServer

KEY = 'sk-test-SECRET-cli-5678'
CONFIG = """
train:
  timesteps: 64
  n_envs: 2
  eval_episodes: 0
  progress: false
  checkpoint_every: 0
ppo:
  n_steps: 16
  batch_size: 32
  n_epochs: 1
"""


def run(cmd, env):
    exe = shutil.which(cmd[0])
    assert exe, f'{cmd[0]} not on PATH: pip install -e .'
    p = subprocess.run([exe, *cmd[1:]], env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return p.stdout + p.stderr


def server_env(srv, tmp_path):
    """Process environment pointing the CLI at the scripted server,
    with a private cache seeded from the suite's warm embeddings."""
    env = {
        **os.environ,
        'OPENAI_API_KEY': KEY,
        'OPENAI_BASE_URL': srv.base_url,
        'SPINDLEFLOW_CACHE': str(tmp_path / 'cache'),
        'HF_HUB_OFFLINE': '1',
    }
    # the embedder's cache lives under SPINDLEFLOW_CACHE: reuse the suite's warm one so the model need not load
    warm = Path(os.environ.get('SPINDLEFLOW_CACHE', Path.home() / '.cache' / 'spindleflow_rl')) / 'embeddings'
    if warm.exists() and not (tmp_path / 'cache' / 'embeddings').exists():
        shutil.copytree(warm, tmp_path / 'cache' / 'embeddings')
    return env


def test_openai_backend_train_and_eval_from_cli(tmp_path):
    cfg = tmp_path / 'tiny.yaml'
    cfg.write_text(CONFIG)
    with ScriptedOpenAIServer(usage=(100, 50)) as srv:
        env = server_env(srv, tmp_path)
        out = run(
            [
                'spindleflow-train',
                '--config',
                str(cfg),
                '--backend',
                'openai',
                '--tier',
                '2',
                '--out',
                str(tmp_path / 'runs'),
                '--run-name',
                'llm',
            ],
            env,
        )
        n_train = srv.n_requests
        assert n_train > 0, out
        runp = tmp_path / 'runs' / 'llm'
        st = json.loads((runp / 'latest.json').read_text())
        assert st['num_timesteps'] == 64 and st['cost_usd'] > 0
        out = run(
            [
                'spindleflow-eval',
                '--checkpoint',
                str(runp),
                '--episodes',
                '2',
                '--split',
                'heldout',
                '--backend',
                'openai',
                '--tier',
                '2',
                '--baselines',
                'random,greedy-topk-par',
                '--json',
                str(runp / 'eval_llm.json'),
            ],
            env,
        )
        rep = json.loads((runp / 'eval_llm.json').read_text())
        tab = rep['splits']['heldout']
        assert set(tab) == {'policy', 'random', 'greedy-topk-par', 'llm-planner'}
        assert tab['llm-planner']['cost_usd'] > 0 and 'oracle' not in tab
        assert srv.n_requests > n_train
    for f in tmp_path.rglob('*'):  # the key is in no file written: runs, caches, reports, logs
        if f.is_file():
            assert KEY.encode() not in f.read_bytes(), f


def test_max_cost_usd_stops_training_cleanly(tmp_path):
    "--max-cost-usd: training stops before the budget is passed, with a checkpoint written and the spend recorded."
    cfg = tmp_path / 'tiny.yaml'
    cfg.write_text(CONFIG.replace('timesteps: 64', 'timesteps: 4096'))
    with ScriptedOpenAIServer(usage=(1000, 500)) as srv:
        env = server_env(srv, tmp_path)
        budget = 0.02
        out = run(
            [
                'spindleflow-train',
                '--config',
                str(cfg),
                '--backend',
                'openai',
                '--tier',
                '0',
                '--max-cost-usd',
                str(budget),
                '--out',
                str(tmp_path / 'runs'),
                '--run-name',
                'budget',
            ],
            env,
        )
    runp = tmp_path / 'runs' / 'budget'
    summ = json.loads((runp / 'train_summary.json').read_text())
    st = json.loads((runp / 'latest.json').read_text())
    assert summ['stopped_for_cost'] is True, out
    assert 0 < summ['cost_usd'] <= budget and st['cost_usd'] == summ['cost_usd']
    assert st['num_timesteps'] < 4096 and (runp / st['checkpoint']).exists()
    assert not (runp / 'final.zip').exists()  # a stopped run is resumable, not final


@pytest.mark.slow  # three training runs against loopback servers with per-request latency: ~53 s (CI runs it)
def test_budget_cache_and_server_isolation(tmp_path):
    """`spindleflow-train --backend openai --tier 2 --phase 1` trains and evaluates inside --max-cost-usd and prints the
    evaluation's estimated cost and budget first; that evaluation is sized to the training (one split, the policy against
    adaptive-planner and the LLM planner); a second identical run sends no request; a run against another server is not
    served the first server's replies; an evaluation over budget stops and keeps what it finished."""
    budget = 2.0
    cmd = [
        '--backend',
        'openai',
        '--tier',
        '2',
        '--phase',
        '1',
        '--timesteps',
        '64',
        '--n-envs',
        '1',
        '--max-cost-usd',
        str(budget),
        '--eval-episodes',
        '2',
        '--no-progress',
        '--out',
        str(tmp_path / 'runs'),
    ]
    with (
        ScriptedOpenAIServer(usage=(100, 50), tag='[A]') as a,
        ScriptedOpenAIServer(usage=(100, 50), tag='[B]') as b,
    ):
        out = run(['spindleflow-train', *(cmd + ['--run-name', 'first'])], server_env(a, tmp_path))
        first = tmp_path / 'runs' / 'first'
        summ = json.loads((first / 'train_summary.json').read_text())
        rep = json.loads((first / 'eval.json').read_text())
        assert 'estimated cost about $' in out and 'stops before passing $' in out, out[-3000:]
        assert summ['cost_kind'] == 'real' and summ['cost_usd'] > 0
        assert 0 < rep['eval_cost_usd'] and summ['cost_usd'] + rep['eval_cost_usd'] <= budget
        assert set(rep['splits']) == {'heldout'} and set(rep['splits']['heldout']) == {
            'policy',
            'adaptive-planner',
            'llm-planner',
        }
        assert (
            rep['server'] == a.base_url.rstrip('/') and rep['budget_usd'] == 1.0
        )  # the run's own server; the default budget
        n_a = a.n_requests
        assert n_a > 0
        run(
            ['spindleflow-train', *(cmd + ['--run-name', 'second'])], server_env(a, tmp_path)
        )  # the same run again: all from the cache
        assert a.n_requests == n_a
        second = json.loads((tmp_path / 'runs' / 'second' / 'train_summary.json').read_text())
        assert (
            second['cost_usd'] == 0.0
            and json.loads((tmp_path / 'runs' / 'second' / 'eval.json').read_text())['eval_cost_usd'] == 0.0
        )
        other = (
            cmd[: cmd.index('--eval-episodes')]
            + ['--eval-episodes', '0']
            + cmd[cmd.index('--eval-episodes') + 2 :]
        )  # training only
        run(
            ['spindleflow-train', *(other + ['--run-name', 'other'])], server_env(b, tmp_path)
        )  # another server: asked afresh, not served A's
        assert b.n_requests > 0 and a.n_requests == n_a
        assert json.loads((tmp_path / 'runs' / 'other' / 'train_summary.json').read_text())['cost_usd'] > 0
        out = run(
            [
                'spindleflow-eval',
                '--checkpoint',
                str(first),
                '--backend',
                'openai',
                '--tier',
                '2',
                '--episodes',
                '50',
                '--split',
                'heldout',
                '--max-cost-usd',
                '0.002',
                '--json',
                str(tmp_path / 'small.json'),
            ],
            server_env(a, tmp_path),
        )
        small = json.loads((tmp_path / 'small.json').read_text())
        assert small['stopped'] == 'budget' and 0 < small['eval_cost_usd'] <= 0.002, out[-2000:]
        tab = small['splits']['heldout']
        assert (
            tab['policy']['episodes'] >= 2
            and any(v.get('partial') for v in tab.values())
            and 'stopped early' in out
        )
    for f in tmp_path.rglob('*'):
        if f.is_file():
            assert KEY.encode() not in f.read_bytes(), f
