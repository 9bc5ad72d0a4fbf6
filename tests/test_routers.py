"""Router baselines on logged data (chapter 18): fitted on training
tasks, every held-out task once, label-free at run time."""

import importlib.resources as ir
from pathlib import Path
import numpy as np
import pytest
from spindleflow_rl.sim.backends import RecordedOutcomesBackend
from spindleflow_rl.core.catalog import Catalog
from spindleflow_rl.core.config import ConfigError, EnvConfig
from spindleflow_rl.core.embeddings import get_embedder
from spindleflow_rl.logs.routers import (
    make_two_model_log,
    LoggedTasks,
    router_table,
    router_scores,
    router_curve,
    reference,
    KNNRouter,
    CascadeRouter,
    HindsightOraclePolicy,
    play_policy,
    fit_logistic,
    predict_logistic,
    pgr,
    parse_sweep,
    at_rate,
    BayesCascadeTeacher,
    summarize,
    matched,
)

ASSETS = Path(str(ir.files('spindleflow_rl') / 'assets'))


@pytest.fixture(scope='module')
def lt():
    be = RecordedOutcomesBackend.from_file(
        ASSETS / 'two_model_log.csv',
        Catalog.from_file(ASSETS / 'two_model_catalog.csv'),
        embedder=get_embedder(),
    )
    return LoggedTasks(be)


def test_generator_is_seeded_and_realistic():
    a = make_two_model_log(300, seed=2)
    assert a == make_two_model_log(300, seed=2) and len({r['task'] for r in a}) == 300
    acc = {
        s: np.mean([r['quality'] for r in a if r['specialist_id'] == s and r['status'] == 'ok'])
        for s in ('cheap-model', 'strong-model')
    }
    assert 0.35 < acc['cheap-model'] < 0.7 < acc['strong-model'] < 0.97
    cost = {s: np.mean([r['cost_usd'] for r in a if r['specialist_id'] == s]) for s in acc}
    assert 10 < cost['strong-model'] / cost['cheap-model'] < 60
    hedged = [
        r['quality']
        for r in a
        if r['specialist_id'] == 'cheap-model' and ('sure' in r['response'] or 'Maybe' in r['response'])
    ]
    assert np.mean(hedged) < acc['cheap-model'] - 0.1


def test_every_heldout_task_once_and_pgr_ends(lt):
    held = lt.tasks('heldout')
    tab = router_table(lt, 'heldout', rate=0.4)
    assert {v['tasks'] for v in tab.values()} == {len(held)}
    assert tab['cheapest']['pgr'] == 0.0 and tab['strongest']['pgr'] == 1.0
    k = int(round(0.4 * len(held))) / len(held)
    assert tab['knn']['strong_call_rate'] == pytest.approx(k) and tab['cascade'][
        'strong_call_rate'
    ] == pytest.approx(k)
    assert (
        tab['cascade']['calls_per_task']['cheap-model'] == 1.0
    )  # the cascade always reads the cheap answer first
    assert tab['knn']['calls_per_task']['cheap-model'] == pytest.approx(1 - k)  # kNN calls one model
    assert tab['oracle']['quality'] >= max(v['quality'] for v in tab.values())


def test_routers_read_no_heldout_grade(lt):
    held = lt.tasks('heldout')
    texts = {t.text for t in held}
    be = lt.backend
    sw = RecordedOutcomesBackend(
        be.world, [{**r, 'quality': 1 - r['quality']} if r['task'] in texts else r for r in be.rows]
    )
    sw._emb = be._emb
    lt2 = LoggedTasks(sw)
    for R in (KNNRouter, CascadeRouter):
        assert np.allclose(router_scores(R(lt2), lt2, held), router_scores(R(lt), lt, held))
    q1 = [p['quality'] for p in router_curve(KNNRouter(lt), lt, held, [0.0, 1.0])]
    q2 = [p['quality'] for p in router_curve(KNNRouter(lt2), lt2, held, [0.0, 1.0])]
    assert q1 != q2  # the grades do change the outcome


def test_logistic_and_pgr():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    y = (X[:, 0] + 0.3 * rng.normal(size=400) > 0).astype(float)
    w = fit_logistic(X, y, l2=0.1)
    p = predict_logistic(w, X)
    assert ((p > 0.5) == (y > 0.5)).mean() > 0.9 and w[0] > 2 * abs(w[1])
    assert pgr(0.7, 0.5, 0.9) == pytest.approx(0.5) and np.isnan(pgr(0.7, 0.5, 0.5))
    assert list(at_rate([0.1, 0.9, 0.5, 0.9], 0.5)) == [False, True, False, True]
    assert parse_sweep('cost_coef=0,1.5') == ('cost_coef', [0.0, 1.5])
    with pytest.raises(ConfigError, match='must be finite and >= 0'):
        parse_sweep('cost_coef=-1')


def test_hindsight_oracle_in_the_env(lt):
    from spindleflow_rl.envs.env import SpindleFlowEnv

    held = lt.tasks('heldout')
    env = SpindleFlowEnv(EnvConfig(split='heldout'), backend=lt.backend, world=lt.world)
    plays = play_policy(env, HindsightOraclePolicy(), held)
    assert [p.task_id for p in plays] == [t.id for t in held]
    assert np.mean([p.quality for p in plays]) == pytest.approx(router_table(lt)['oracle']['quality'])


def test_bayes_cascade_teacher_prices_escalation_and_reads_no_grade(lt):
    from spindleflow_rl.envs.env import SpindleFlowEnv

    held = lt.tasks('heldout')
    T = BayesCascadeTeacher(lt)
    ref = reference(lt, held)
    rates = []
    for c in (0, 150, 400):
        env = SpindleFlowEnv(
            EnvConfig(split='heldout', cost_coef_range=(c, c)), backend=lt.backend, world=lt.world
        )
        plays = play_policy(env, T, held)
        assert all(
            p.calls and p.calls[0][0] == lt.cheapest for p in plays
        )  # always reads the cheap answer first
        rates.append(summarize(plays, lt, ref)['strong_call_rate'])
    assert rates[0] > 0.9 and rates[0] > rates[1] > rates[2] and rates[2] < 0.1
    # flipping every held-out grade changes nothing the teacher
    # decides on held-out answers (fitted on training tasks only)
    texts = {t.text for t in held}
    be = lt.backend
    sw = RecordedOutcomesBackend(
        be.world, [{**r, 'quality': 1 - r['quality']} if r['task'] in texts else r for r in be.rows]
    )
    sw._emb = be._emb
    T2 = BayesCascadeTeacher(LoggedTasks(sw))
    embs = [lt.answer(lt.cheapest, lt.rows(t, lt.cheapest)[0]).embedding for t in held]
    assert np.allclose([T.gain(e) for e in embs], [T2.gain(e) for e in embs])
    assert T.price(100, 0.05, 1, 1) == pytest.approx(100 * lt.cost[lt.strongest] + 0.05)


def test_teacher_demonstrations_carry_the_episode_price(lt):
    from spindleflow_rl.envs.env import SpindleFlowEnv
    from spindleflow_rl.training.imitation import collect_demonstrations

    env = SpindleFlowEnv(
        EnvConfig(split='train', cost_coef_range=(0, 400)), backend=lt.backend, world=lt.world
    )
    d = collect_demonstrations(env, BayesCascadeTeacher(lt), 12, seed=3)
    scal = env.layout.slices['scalars']
    coefs = d.obs[d.starts == 1][:, scal][:, -1]
    assert len(set(np.round(coefs, 4))) == 12 and coefs.min() >= 0 and coefs.max() <= np.log1p(400) + 1e-5
    assert {e - s for s, e in d.episodes()} <= {2, 3}  # cheap call, then escalate or stop


def test_shipped_sweep_beats_knn_below_full_escalation():
    import json

    res = json.loads((ASSETS / 'two_model_sweep.json').read_text())
    below = [p for p in res['points'] if 0.05 < p['strong_call_rate'] < 0.95]
    assert len(below) >= 4 and res['teacher'] and 'warm_start' in res
    assert all(p['pgr'] >= p['matched']['knn']['pgr'] for p in below)
