"""Real LLM mode end to end: the REAL `openai` client over real HTTP against `ScriptedOpenAIServer` on 127.0.0.1.
Costs from scripted usage, the cache, every failure path inside full env episodes, and the API key never written."""

import json, logging, os, pickle, socket, time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
import numpy as np
import pytest
from spindleflow_rl.core.config import ConfigError
from spindleflow_rl.envs.env import SpindleFlowEnv, encode_action
from spindleflow_rl.core.world import default_world
from spindleflow_rl.agent.policies import run_episode
from spindleflow_rl.llms.client import OpenAIConfig, LLMClient, ResponseCache
from spindleflow_rl.llms.backend import OpenAIBackend, make_judge_scorers
from spindleflow_rl.agent.policies import LLMPlannerPolicy
from spindleflow_rl.llms.testing import ScriptedOpenAIServer, ScriptedReply

FAKE_KEY = 'sk-test-SECRET-1234'
TASK = 'p2-frontend-01'
ROSTER = [
    'api_backend_engineer',
    'react_ui_engineer',
    'accessibility_specialist',
    'test_automation_engineer',
    'design_system_engineer',
    'frontend_contractor',
]  # slot 1 falls back to design_system_engineer (slot 4, no fallback)
PRICES = (
    "default: {input: 5, output: 20}\nmodels:\n  spec-model: {input: 1.0, output: 2.0}\n"
    "  judge-model: {input: 0.5, output: 1.5}\n  strong-model: {input: 3, output: 12}\n"
)
SPEC = (100 * 1.0 + 40 * 2.0) / 1e6  # one specialist/generalist reply at the scripted usage (100 in, 40 out)
JUDGE = (100 * 0.5 + 40 * 1.5) / 1e6  # one tier-2 judge reply
STRONG = (100 * 3 + 40 * 12) / 1e6  # one tier-3 judge reply
REACT, DESIGN = 'Your role: React UI engineer.', 'Your role: Design system engineer.'


@pytest.fixture(scope='module')
def world():
    return default_world()


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv('OPENAI_API_KEY', FAKE_KEY)
    monkeypatch.delenv('OPENAI_BASE_URL', raising=False)


@pytest.fixture
def server():
    with ScriptedOpenAIServer(usage=(100, 40), api_key=FAKE_KEY) as s:
        yield s  # 401 unless the real key is sent


@pytest.fixture
def cfg(tmp_path, server, key):
    (tmp_path / 'prices.yaml').write_text(PRICES)
    return OpenAIConfig(
        base_url=server.base_url,
        specialist_model='spec-model',
        generalist_model='spec-model',
        judge_model='judge-model',
        strong_judge_model='strong-model',
        planner_model='spec-model',
        cache_dir=str(tmp_path / 'llm'),
        prices_path=str(tmp_path / 'prices.yaml'),
        max_retries=2,
        backoff_base_s=0.01,
        backoff_max_s=0.05,
        timeout_s=2.0,
    )


def make_env(world, cfg, tier=2, sleep=time.sleep):
    client = LLMClient(cfg, sleep=sleep)
    return SpindleFlowEnv(
        backend=OpenAIBackend(world, cfg, client=client), scorers=make_judge_scorers(cfg, client), tier=tier
    )


def play(env, plan, seed=0, task=TASK, roster=ROSTER):
    "Play `plan` [(slots, mode), ...] then STOP (unless the episode ended first); return observations, rewards, infos."
    obs, info = env.reset(seed=seed, options={'task': task, 'roster': roster})
    M = env.cfg.max_specialists
    O, R, I = [obs], [], []
    for step in list(plan) + [None]:
        a = encode_action(M, stop=True) if step is None else encode_action(M, slots=step[0], mode=step[1])
        obs, r, term, trunc, info = env.step(a)
        O.append(obs)
        R.append(r)
        I.append(info)
        if term or trunc:
            break
    assert 'summary' in I[-1], "the episode must end normally"
    return O, R, I


def judge(env, tier=2):
    return env.cascade.scorers[tier].judge


def test_missing_key_is_a_clear_config_error(monkeypatch, world):
    monkeypatch.delenv('OPENAI_API_KEY', raising=False)
    for make in (
        lambda: OpenAIBackend.from_env(world),
        lambda: LLMClient(OpenAIConfig()),
        lambda: make_judge_scorers(),
    ):
        with pytest.raises(ConfigError) as e:
            make()
        msg = str(e.value)
        assert (
            'OPENAI_API_KEY is not set' in msg
            and 'OPENAI_BASE_URL' in msg
            and 'Ollama' in msg
            and '.env.example' in msg
        )


def test_openai_base_url_from_environment(monkeypatch, world, server, key, tmp_path):
    monkeypatch.setenv('OPENAI_BASE_URL', server.base_url)
    (tmp_path / 'prices.yaml').write_text(PRICES)
    be = OpenAIBackend.from_env(
        world,
        specialist_model='spec-model',
        generalist_model='spec-model',
        cache_dir=str(tmp_path / 'llm'),
        prices_path=str(tmp_path / 'prices.yaml'),
    )
    env = SpindleFlowEnv(backend=be, tier=1)
    _, _, I = play(env, [([0], 'sequential')])
    assert I[0]['trace']['calls'][0]['status'] == 'ok'
    assert server.count('spec-model') == 2  # the specialist + the baseline answer
    assert be.total_cost_usd == pytest.approx(2 * SPEC, abs=1e-15)


def test_episode_costs_are_exact_and_a_rerun_is_free_and_identical(world, cfg, server):
    runs = []
    for _ in range(2):
        env = make_env(world, cfg)
        n0 = server.n_requests
        O, R, I = play(env, [([0, 1], 'sequential'), ([2, 3], 'parallel')])
        runs.append((O, R, I, env, server.n_requests - n0))
    (O1, R1, I1, env1, n1), (O2, R2, I2, env2, n2) = runs
    assert (n1, n2) == (7, 0)  # 4 specialists + baseline + 2 judge calls; then none
    s1, s2 = I1[-1]['summary'], I2[-1]['summary']
    assert (s1['tier_used'], s1['rescored'], s1['failures']) == (2, False, 0)
    be1, be2 = env1.backend, env2.backend
    assert be1.total_cost_usd == pytest.approx(5 * SPEC, abs=1e-15)
    assert be1.episode_cost_usd == pytest.approx(5 * SPEC, abs=1e-15) and be1.episode_tokens == 5 * 140
    assert judge(env1).cost_usd == pytest.approx(2 * JUDGE, abs=1e-15) and judge(env1).total_tokens == 2 * 140
    assert s1['cost_usd'] == pytest.approx(
        4 * SPEC, abs=1e-15
    )  # the orchestrator's cost: its 4 specialist calls
    calls = [c for i in I1[:2] for c in i['trace']['calls']]
    assert [c['tokens']['prompt'] for c in calls] == [100] * 4 and not any(
        c['tokens']['cached'] for c in calls
    )
    # the replay: nothing spent, recorded usage kept, every number the same
    assert (be2.total_cost_usd, judge(env2).cost_usd, be2.meter.cache_hits, be2.episode_tokens) == (
        0.0,
        0.0,
        5,
        5 * 140,
    )
    assert all(
        c['tokens']['cached'] and c['tokens']['spent_usd'] == 0 for i in I2[:2] for c in i['trace']['calls']
    )
    assert R1 == R2 and s1['latency_s'] == s2['latency_s'] and s1['cost_usd'] == s2['cost_usd']
    assert all(np.array_equal(a, b) for a, b in zip(O1, O2))
    assert len(ResponseCache(cfg.cache_dir)) == 7


def test_tier3_episode_uses_the_strong_judge_once(world, cfg, server):
    env = make_env(world, cfg, tier=3)
    _, R, I = play(env, [([1, 2], 'sequential')])
    s = I[-1]['summary']
    assert (s['tier_used'], s['rescored']) == (3, False)
    assert server.count('strong-model') == 1 and server.count('judge-model') == 0
    assert judge(env, 3).cost_usd == pytest.approx(STRONG, abs=1e-15)
    assert (s['specialist_score'], s['baseline_score']) == pytest.approx(
        (0.6, 0.4)
    )  # scripted: 2 sections vs 1
    assert I[-1]['reward_terms']['quality_delta'] == pytest.approx(0.2)


def test_429_then_success_honours_retry_after(world, cfg, server):
    waits = []
    env = make_env(world, cfg, sleep=lambda s: (waits.append(s), time.sleep(s)))
    server.script(ScriptedReply(429, retry_after=0.07, message='rate limited'), match=REACT)
    _, R, I = play(env, [([1], 'sequential')])
    c = I[0]['trace']['calls'][0]
    assert (c['status'], c['recovered'], c['fallback_id']) == ('ok', False, None)
    assert waits == [0.07] and server.count(REACT) == 2
    assert I[0]['reward_terms']['failure_penalty'] == 0 and I[-1]['summary']['failures'] == 0
    assert env.backend.meter.failed_requests == 1 and env.backend.total_cost_usd == pytest.approx(
        2 * SPEC, abs=1e-15
    )


def test_500s_exhaust_retries_then_the_fallback_recovers(world, cfg, server):
    env = make_env(world, cfg)
    server.script(
        ScriptedReply(500, message='upstream down'), match=REACT, times=3
    )  # 1 + max_retries attempts
    _, R, I = play(env, [([1], 'sequential'), ([0], 'sequential')])
    c = I[0]['trace']['calls'][0]
    assert (c['status'], c['fallback_id'], c['recovered']) == ('error', 'design_system_engineer', True)
    assert c['output'].startswith('As Design system engineer')
    t = I[0]['reward_terms']
    assert t['failure_penalty'] == pytest.approx(-0.2 * 0.5) and t['recovery_bonus'] == pytest.approx(0.1)
    s = I[-1]['summary']
    assert (s['failures'], s['recovered'], s['tier_used'], s['n_called']) == (0, 1, 2, 2)
    assert [a for a, _, _ in env.outputs] == [
        'design_system_engineer',
        'api_backend_engineer',
    ]  # nothing lost
    assert server.count(REACT) == 3 and c['cost_usd'] == pytest.approx(
        SPEC, abs=1e-15
    )  # failed attempts cost nothing


def test_500s_with_no_fallback_left_is_an_error(world, cfg, server):
    env = make_env(world, cfg)
    server.script(ScriptedReply(500), match=DESIGN, times=None)
    _, R, I = play(env, [([4], 'sequential'), ([0], 'sequential')])
    c = I[0]['trace']['calls'][0]
    assert (c['status'], c['fallback_id'], c['recovered']) == ('error', None, False)
    assert I[0]['reward_terms']['failure_penalty'] == pytest.approx(-0.2)
    assert not env.called_emb[4].any() and env.called_emb[0].any()
    s = I[-1]['summary']
    assert (s['failures'], s['tier_used']) == (1, 2) and server.count(DESIGN) == 3


def test_timeout_becomes_a_timeout_status(world, cfg, server):
    env = make_env(world, cfg.replace(timeout_s=0.3, max_retries=1))
    server.script(ScriptedReply(delay_s=1.5), match=DESIGN, times=None)
    t0 = time.perf_counter()
    _, R, I = play(env, [([4], 'sequential'), ([0], 'sequential')])
    c = I[0]['trace']['calls'][0]
    assert (c['status'], c['recovered']) == ('timeout', False) and c['latency_s'] >= 0.6
    assert I[0]['reward_terms']['failure_penalty'] == pytest.approx(-0.3)
    assert I[1]['trace']['calls'][0]['status'] == 'ok'
    s = I[-1]['summary']
    assert (s['failures'], s['tier_used'], s['rescored']) == (1, 2, False)
    assert time.perf_counter() - t0 < 10


@pytest.mark.parametrize('failure', ['malformed', 'server_error'])
def test_judge_failure_rescores_the_whole_episode_on_a_lower_tier(world, cfg, server, failure):
    env = make_env(world, cfg)
    bad = (
        ScriptedReply(content='The delegated answer looks solid to me.')
        if failure == 'malformed'
        else ScriptedReply(503)
    )
    server.script(bad, match='judge-model', times=None)
    _, R, I = play(env, [([0, 1], 'sequential')])
    s = I[-1]['summary']
    assert (s['tier_locked'], s['tier_used'], s['rescored']) == (2, 1, True)
    assert len(s['judge_errors']) == 1
    assert ('gave no valid judgement in 3 attempts' if failure == 'malformed' else 'unavailable') in s[
        'judge_errors'
    ][0]
    assert server.count('judge-model') == 3  # 3 judge attempts, or 1 + 2 retries
    assert judge(env).cost_usd == pytest.approx(3 * JUDGE if failure == 'malformed' else 0.0, abs=1e-15)
    terms = I[-1]['reward_terms']
    assert terms['quality_delta'] == pytest.approx(s['specialist_score'] - s['baseline_score'])
    assert sum(R) == pytest.approx(env.return_)


def test_one_malformed_judgement_is_asked_again(world, cfg, server):
    env = make_env(world, cfg)
    server.script(ScriptedReply(content='Score: great'), match='judge-model')
    _, R, I = play(env, [([0, 1], 'sequential')])
    s = I[-1]['summary']
    assert (s['tier_used'], s['rescored']) == (2, False)
    assert (
        judge(env).n_malformed == 1 and server.count('judge-model') == 3
    )  # 2 for the answer, 1 for the baseline


def test_debate_resolves_a_conflict_that_parallel_leaves_open(world, cfg, server):
    off_topic = ScriptedReply(
        content='Bake sourdough bread: feed the starter with rye flour and proof it overnight.'
    )
    first_answer = lambda b: (
        'Frontend contractor.' in b['messages'][0]['content']
        and 'Your answer so far' not in b['messages'][-1]['content']
    )
    agreed = 'Build the weekly rota view in React with an accessible table, keyboard navigation and Playwright checks.'
    server.script(off_topic, match=first_answer, times=None)
    server.script(ScriptedReply(content=agreed), match='Your answer so far', times=None)
    env = make_env(world, cfg)
    _, _, I = play(env, [([1, 5], 'parallel')])
    assert I[0]['trace']['conflicts'] == [{'a': 1, 'b': 5, 'resolved': False}]
    assert I[0]['reward_terms']['conflict_penalty'] == pytest.approx(-0.1)
    assert env.backend.conflict_multiplier() == pytest.approx(0.85)
    M = env.cfg.max_specialists
    env.reset(seed=0, options={'task': TASK, 'roster': ROSTER})
    obs, r, *_, info = env.step(encode_action(M, slots=[1, 5], mode='debate', params=(0, 0.9, 0, 0)))
    assert info['trace']['conflicts'] == [{'a': 1, 'b': 5, 'resolved': True}]
    assert info['reward_terms']['conflict_bonus'] == pytest.approx(0.05)
    assert [c['output'][:40] for c in info['trace']['calls']] == [agreed[:40]] * 2
    assert server.count('Your answer so far') == 2  # one round (both revised), then they agree


def test_server_down_never_crashes_an_episode(world, cfg, tmp_path):
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    env = make_env(world, cfg.replace(base_url=f'http://127.0.0.1:{port}/v1', max_retries=1))
    _, R, I = play(env, [([1], 'sequential'), ([0, 2], 'parallel')])
    calls = [c for i in I[:2] for c in i['trace']['calls']]
    assert [c['status'] for c in calls] == ['error'] * 3 and not any(c['recovered'] for c in calls)
    s = I[-1]['summary']
    assert (s['failures'], s['tier_used'], s['rescored']) == (3, 1, True)
    assert env.backend.baseline()['failed'] and np.isfinite(sum(R))


def test_planner_policy_plays_its_plan_or_falls_back_to_top1(world, cfg, server):
    env = make_env(world, cfg)
    pol = LLMPlannerPolicy(cfg)
    s = run_episode(env, pol, seed=0, options={'task': TASK, 'roster': ROSTER})
    assert pol.last_plan == {
        'specialists': ROSTER[:2],
        'slots': [0, 1],
        'mode': 'sequential',
        'fallback': False,
        'reason': '',
    }
    assert (s['n_called'], s['invalid'], s['tier_used']) == (2, 0, 2) and pol.cost_usd == pytest.approx(
        SPEC, abs=1e-15
    )
    for task, bad in (
        ('p2-frontend-02', ScriptedReply(content='Ask the React engineer, then QA.')),
        ('p2-frontend-03', ScriptedReply(500)),
    ):
        server.clear_script()
        server.script(bad, match='"specialists"', times=None)
        n0 = server.count('"specialists"')
        s = run_episode(env, pol, seed=1, options={'task': task, 'roster': ROSTER})
        top1 = ROSTER[int(np.argmax(world.spec_emb(ROSTER) @ world.task_emb[task]))]
        assert pol.last_plan['fallback'] and pol.last_plan['specialists'] == [top1] and s['n_called'] == 1
        assert server.count('"specialists"') - n0 == 3  # 3 attempts, or 1 + 2 retries
    assert 'planner call failed' in pol.last_plan['reason'] and pol.n_fallbacks == 2


def test_the_key_never_reaches_logs_files_pickles_or_errors(world, cfg, server, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    env = make_env(world, cfg)
    pol = LLMPlannerPolicy(cfg)
    echo = 'upstream rejected the request from {auth}'  # a server that echoes the Authorization header
    server.script(ScriptedReply(500, message=echo), match=REACT, times=3)
    server.script(ScriptedReply(500, message=echo), match=DESIGN, times=3)  # its fallback fails too
    server.script(ScriptedReply(429, retry_after=0.01, message=echo), match='judge-model')
    s = run_episode(env, pol, seed=0, options={'task': TASK, 'roster': ROSTER}, record=True)
    failed = [c for ev in s['trace'] for c in ev.get('calls', []) if c['status'] != 'ok']
    assert failed and '[REDACTED]' in failed[0]['output'] and FAKE_KEY not in failed[0]['output']
    server.script(ScriptedReply(401, message='Incorrect API key provided: {auth}'))
    with pytest.raises(ConfigError) as e:
        env.backend.client.chat('spec-model', [{'role': 'user', 'content': 'Task: anything'}], max_tokens=10)
    assert 'check OPENAI_API_KEY' in str(e.value) and '[REDACTED]' in str(e.value)
    out = tmp_path / 'out'
    out.mkdir()
    (out / 'summary.json').write_text(json.dumps(s, default=str))
    (out / 'config.json').write_text(json.dumps(cfg.to_dict()))
    (out / 'objects.pkl').write_bytes(pickle.dumps((env.backend, env.cascade.scorers, pol)))
    (out / 'error.txt').write_text(str(e.value) + repr(e.value))
    (out / 'log.txt').write_text(caplog.text)
    assert any('[REDACTED]' in r.getMessage() for r in caplog.records)  # the echo was logged, redacted
    files = [p for p in tmp_path.rglob('*') if p.is_file()]
    assert len(files) > 8 and any(p.suffix == '.json' and 'llm' in p.parts for p in files)
    leaks = [str(p) for p in files if FAKE_KEY.encode() in p.read_bytes()]
    assert leaks == []
    be = pickle.loads((out / 'objects.pkl').read_bytes())[0]  # the client is rebuilt from the environment
    be.begin_episode(env.ctx, np.random.default_rng(0))
    assert be.execute([3], 'sequential', None, None).calls[0].status == 'ok'


def _hammer(args):
    root, worker = args
    rc, key = ResponseCache(root), 'ab' + '0' * 62
    bad = 0
    for i in range(60):
        rc.put(key, {'response': {'content': f'{worker}-{i}-' + 'x' * 2000}})
        got = rc.get(key)
        bad += got is None or not got['response']['content'].endswith('x' * 2000)
    return bad


def test_cache_is_safe_under_concurrent_writer_processes(tmp_path):
    with ProcessPoolExecutor(3) as ex:
        assert list(ex.map(_hammer, [(str(tmp_path), w) for w in range(3)])) == [0, 0, 0]
    assert [p.name for p in tmp_path.rglob('*') if p.is_file()] == ['ab' + '0' * 62 + '.json']
