"""Issue 13's Done-when, against loopback OpenAI-compatible servers with the real `openai` client:
`spindleflow-train --backend openai --tier 2 --phase 1 --timesteps 64 --n-envs 1` trains and evaluates inside
--max-cost-usd, prints the evaluation's estimated cost first; a second identical run sends no request; a run against
another server is not served the first server's replies; an evaluation over budget stops and keeps what it finished."""
import json, os, shutil, subprocess
from pathlib import Path
from spindleflow_rl.testing import ScriptedOpenAIServer

KEY = 'sk-test-SECRET-trust-4321'

def run(args, env, cmd='spindleflow-train'):
    exe = shutil.which(cmd); assert exe, f'{cmd} not on PATH: pip install -e .'
    p = subprocess.run([exe, *args], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return p.stdout + p.stderr

def env_for(srv, tmp_path):
    env = {**os.environ, 'OPENAI_API_KEY': KEY, 'OPENAI_BASE_URL': srv.base_url, 'SPINDLEFLOW_CACHE': str(tmp_path/'cache')}
    warm = Path(os.environ.get('SPINDLEFLOW_CACHE', Path.home()/'.cache'/'spindleflow_rl'))/'embeddings'
    if warm.exists() and not (tmp_path/'cache'/'embeddings').exists(): shutil.copytree(warm, tmp_path/'cache'/'embeddings')
    return env

def test_done_when_budget_cache_and_server_isolation(tmp_path):
    budget = 2.0
    cmd = ['--backend', 'openai', '--tier', '2', '--phase', '1', '--timesteps', '64', '--n-envs', '1', '--max-cost-usd', str(budget),
           '--eval-episodes', '2', '--no-progress', '--out', str(tmp_path/'runs')]
    with ScriptedOpenAIServer(usage=(100, 50), tag='[A]') as a, ScriptedOpenAIServer(usage=(100, 50), tag='[B]') as b:
        out = run(cmd + ['--run-name', 'first'], env_for(a, tmp_path))
        first = tmp_path/'runs'/'first'
        summ = json.loads((first/'train_summary.json').read_text()); rep = json.loads((first/'eval.json').read_text())
        assert 'estimated cost about $' in out and 'stops before passing $' in out, out[-3000:]
        assert summ['cost_kind'] == 'real' and summ['cost_usd'] > 0
        assert 0 < rep['eval_cost_usd'] and summ['cost_usd'] + rep['eval_cost_usd'] <= budget
        assert set(rep['splits']) == {'train', 'heldout', 'unseen-roster'} and 'llm-planner' in rep['splits']['heldout']
        n_a = a.n_requests; assert n_a > 0
        run(cmd + ['--run-name', 'second'], env_for(a, tmp_path))                 # the same run again: all from the cache
        assert a.n_requests == n_a
        second = json.loads((tmp_path/'runs'/'second'/'train_summary.json').read_text())
        assert second['cost_usd'] == 0.0 and json.loads((tmp_path/'runs'/'second'/'eval.json').read_text())['eval_cost_usd'] == 0.0
        other = cmd[:cmd.index('--eval-episodes')] + ['--eval-episodes', '0'] + cmd[cmd.index('--eval-episodes') + 2:]   # training only
        run(other + ['--run-name', 'other'], env_for(b, tmp_path))                # another server: asked afresh, not served A's
        assert b.n_requests > 0 and a.n_requests == n_a
        assert json.loads((tmp_path/'runs'/'other'/'train_summary.json').read_text())['cost_usd'] > 0
        out = run(['--checkpoint', str(first), '--backend', 'openai', '--tier', '2', '--episodes', '50', '--split', 'heldout',
                   '--max-cost-usd', '0.002', '--json', str(tmp_path/'small.json')], env_for(a, tmp_path), 'spindleflow-eval')
        small = json.loads((tmp_path/'small.json').read_text())
        assert small['stopped'] == 'budget' and 0 < small['eval_cost_usd'] <= 0.002, out[-2000:]
        tab = small['splits']['heldout']
        assert tab['policy']['episodes'] >= 2 and any(v.get('partial') for v in tab.values()) and 'stopped early' in out
    for f in tmp_path.rglob('*'):
        if f.is_file(): assert KEY.encode() not in f.read_bytes(), f
