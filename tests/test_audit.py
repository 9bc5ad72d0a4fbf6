"""Audit on real environment episodes: explanations verify, the bonus condition (`explanation_verified`) holds for justified
plans and fails for a useless call, an early stop and a step-limit cut; `spindleflow-audit` writes escaped reports."""

import json
import numpy as np
import pytest
from spindleflow_rl.envs.env import SpindleFlowEnv, encode_action
from spindleflow_rl.core.world import default_world
from spindleflow_rl.agent.policies import (
    run_episode,
    GreedyTopKPolicy,
    CallAllPolicy,
    RandomPolicy,
    OraclePolicy,
)
from spindleflow_rl.envs.explain import (
    AuditContext,
    explain,
    verify,
    explanation_verified,
    audit_episode,
    DEFAULT_FIT_THRESHOLD,
)
from spindleflow_rl.commands.audit import record_audited
from spindleflow_rl.cli import audit_main as main


@pytest.fixture(scope='module')
def world():
    return default_world()


def case(world, M=6):
    "A phase-2 task with a roster of specialists that cover it one subtask set each, plus one that fits nothing."
    ids, thr = world.catalog.ids, DEFAULT_FIT_THRESHOLD
    for t in world.bank.tasks(phase=2):
        fa = world.task_arrays(t)['fit_all']
        if fa.max(0).min() < thr:
            continue
        need, cov = [], np.zeros(len(t.subtasks), bool)
        while not cov.all():
            i = int(np.argmax(((fa >= thr) & ~cov).sum(1) + fa.max(1) * 1e-3))
            need.append(ids[i])
            cov |= fa[i] >= thr
        if 2 <= len(need) <= M - 1:
            useless = next(ids[i] for i in range(len(ids)) if fa[i].max() == 0 and ids[i] not in need)
            return t.id, need + [useless] + [None] * (M - len(need) - 1), len(need)
    raise AssertionError('no suitable task in the bank')


def play(world, actions, task, roster, max_steps=None):
    env = SpindleFlowEnv(world=world, phase=2, **({'max_steps': max_steps} if max_steps else {}))
    env.reset(seed=0, options={'task': task, 'roster': roster})
    for a in actions:
        _, _, term, trunc, info = env.step(a)
        if term or trunc:
            return env, info
    raise AssertionError('episode did not end')


def test_explanation_verified_on_scripted_episodes(world):
    task, roster, n = case(world)
    M = 6
    good = [encode_action(M, slots=list(range(n))), encode_action(M, stop=True)]
    env, info = play(world, good, task, roster)
    assert explanation_verified(env) and info['summary']['path'].count('+') == n - 1
    assert explanation_verified(env, pending=env.trace[-1])
    # the same plan in two steps (parallel then sequential) is still justified
    two = [
        encode_action(M, slots=[0], mode='parallel'),
        encode_action(M, slots=list(range(1, n))),
        encode_action(M, stop=True),
    ]
    assert explanation_verified(play(world, two, task, roster)[0])
    # must be False: a call of a specialist that fits nothing;
    # stopping with work left; a call already made; the step limit
    u = roster.index(next(r for r in roster[::-1] if r))
    assert not explanation_verified(
        play(
            world, [encode_action(M, slots=[u] + list(range(n))), encode_action(M, stop=True)], task, roster
        )[0]
    )
    assert not explanation_verified(
        play(world, [encode_action(M, slots=[0]), encode_action(M, stop=True)], task, roster)[0]
    )
    again = [
        encode_action(M, slots=[0]),
        encode_action(M, slots=[0] + list(range(1, n))),
        encode_action(M, stop=True),
    ]
    env, info = play(world, again, task, roster)
    assert info['summary']['invalid'] == 1 and not explanation_verified(env)
    env, info = play(world, [encode_action(M, slots=[0])], task, roster, max_steps=1)
    assert info['summary']['truncated'] and not explanation_verified(env, explicit=False)
    # the final call's event is required when it is not in the trace yet
    env = SpindleFlowEnv(world=world, phase=2)
    env.reset(seed=0, options={'task': task, 'roster': roster})
    env.step(encode_action(M, slots=[0]))
    env.trace.pop()
    with pytest.raises(Exception, match='pass its event as pending'):
        explanation_verified(env)


def test_baselines_explanations_true_and_ranked(world):
    env = SpindleFlowEnv(world=world, split='heldout')
    rates = {}
    for name, pol in {
        'greedy': GreedyTopKPolicy(None, 'sequential'),
        'call-all': CallAllPolicy('parallel'),
        'random': RandomPolicy(0),
        'oracle': OraclePolicy(K=8),
    }.items():
        ok = just = 0
        for i in range(12):
            s = run_episode(env, pol, 30_000 + i, record=True)
            claims, v = audit_episode(s['trace'], AuditContext.from_env(env), s['truncated'])
            assert v.ok, (name, v.failed, v.missing)  # generated claims are always true and complete
            ok += v.ok
            just += v.justified
            assert just <= ok
        rates[name] = just / 12
    assert rates['greedy'] > rates['call-all'] and rates['greedy'] > rates['random'], rates


def test_verify_rejects_false_claims(world):
    env = SpindleFlowEnv(world=world, split='heldout')
    s = run_episode(env, GreedyTopKPolicy(None, 'sequential'), 30_001, record=True)
    ctx = AuditContext.from_env(env)
    claims = explain(s['trace'], ctx)
    assert verify(claims, s['trace'], ctx).ok
    call = next(c for c in claims if c.kind == 'call')
    call.value += 0.05
    call.text = ''
    assert not verify(claims, s['trace'], ctx).ok
    stop = claims[-1]
    call.value -= 0.05
    stop.reason = 'budget'
    stop.value = 1.0
    stop.text = ''
    r = verify(claims, s['trace'], ctx)
    assert not r.ok and 'budget' in r.failed[0][1]


def test_audit_cli_on_recorded_run(world, tmp_path):
    from spindleflow_rl.agent.runs import split_env_fn
    from spindleflow_rl.agent.replay import write_episodes

    fn = split_env_fn('heldout')
    recs = []
    for name, pol in {
        'greedy-topk-seq': GreedyTopKPolicy(None, 'sequential'),
        'call-all-parallel': CallAllPolicy('parallel'),
    }.items():
        env = fn()
        recs += [record_audited(env, pol, 10_000 + i, 'heldout', name) for i in range(3)]
    c = next(c for st in recs[3]['steps'] for c in st.get('calls') or [])  # an episode of the audited policy
    c['output'] = '<script>document.title="pwned"</script> | `x` **y**'
    run = tmp_path / 'run'
    write_episodes(run / 'episodes.jsonl', recs)
    assert main([str(run), '--policy', 'call-all-parallel']) == 0
    rep = json.loads((run / 'audit' / 'audit.json').read_text())
    assert rep['target'] == 'call-all-parallel' and rep['policies']['call-all-parallel']['episodes'] == 3
    assert len(rep['deviations']) == sum(
        1 for i in range(3) if recs[i]['summary']['path'] != recs[3 + i]['summary']['path']
    )
    page, md = (run / 'audit' / 'audit.html').read_text(), (run / 'audit' / 'audit.md').read_text()
    assert '<script>' not in page and '&lt;script&gt;' in page
    assert '<script>' not in md and '\\`x\\`' in md
    assert main([str(run)]) == 2  # an earlier audit is not replaced silently
    assert main([str(run), '--force', '--threshold', '1.5']) == 2
