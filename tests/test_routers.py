"""Routers on logged data (chapter 18): the simple ones replayed call by call on every held-out task once; the
predicting ones (chapter 18b's one family, fitted on the log as a table) label-free at run time, and playing a call
sequence through the replay (`play`) gives what the table gives (`play_calls`); the Bayes cascade teacher."""

import importlib.resources as ir
from pathlib import Path
import numpy as np
import pytest
from spindleflow_rl.sim.backends import RecordedOutcomesBackend
from spindleflow_rl.core.catalog import Catalog
from spindleflow_rl.core.config import EnvConfig
from spindleflow_rl.core.embeddings import get_embedder
from spindleflow_rl.logs.routers import (
    make_two_model_log,
    LoggedTasks,
    reference,
    play,
    SingleRouter,
    RandomRouter,
    OracleRouter,
    HindsightOraclePolicy,
    play_policy,
    fit_logistic,
    predict_logistic,
    pgr,
    at_rate,
    BayesCascadeTeacher,
    summarize,
    log_table,
    knn_path,
    play_calls,
    KNNQuality,
    GainRouter,
    MFRouter,
    CascadeRouter,
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


def simple_table(lt, held, rate):
    ref = reference(lt, held)
    rs = {
        'cheapest': SingleRouter(lt.cheapest, 'cheapest'),
        'strongest': SingleRouter(lt.strongest, 'strongest'),
        'random': RandomRouter(lt.cheapest, lt.strongest, rate),
        'oracle': OracleRouter(lt),
    }
    return {n: summarize([play(r, lt, t) for t in held], lt, ref) for n, r in rs.items()}


def test_every_heldout_task_once_and_pgr_ends(lt):
    held = lt.tasks('heldout')
    tab = simple_table(lt, held, 0.4)
    assert {v['tasks'] for v in tab.values()} == {len(held)}
    assert tab['cheapest']['pgr'] == 0.0 and tab['strongest']['pgr'] == 1.0
    assert tab['cheapest']['calls_per_task'] == {lt.cheapest: 1.0, lt.strongest: 0.0}
    assert 0.2 < tab['random']['strong_call_rate'] < 0.6  # a seeded draw per task at 0.4
    assert tab['oracle']['quality'] >= max(v['quality'] for v in tab.values())


@pytest.fixture(scope='module')
def fitted(lt):
    T = log_table(lt)
    tr, ho = np.flatnonzero(T.train), np.flatnonzero(~T.train)
    return T, tr, ho, {R.name: R().fit(T, tr) for R in (KNNQuality, GainRouter, MFRouter, CascadeRouter)}


def test_the_router_family_replayed_call_by_call_gives_the_tables_result(lt, fitted):
    """Every router of the one family, played through chapter 18's replay (`play`: one `ask` per call, the grade
    never returned) at three strong-call rates, returns the same answers at the same spend as the table's
    `play_calls`; the cascade asks for the cheap answer before it escalates."""
    T, tr, ho, routers = fitted
    held = lt.tasks('heldout')
    assert [t.id for t in held] == [T.task_ids[i] for i in ho]
    for name, r in routers.items():
        P = r.quality(ho)
        for x in (0.2, 0.5, 0.8):
            calls = r.calls_at(P, x)
            q, c = play_calls(T, ho, calls)

            class Fixed:
                def route(self, task, ask):
                    for m in calls[[t.id for t in held].index(task.id)]:
                        if m >= 0:
                            ask(T.ids[m])

            plays = [play(Fixed(), lt, t) for t in held]
            assert np.allclose([p.quality for p in plays], q) and np.allclose([p.cost_usd for p in plays], c)
            k = int(round(x * len(ho)))
            assert sum(p.called(lt.strongest) for p in plays) == k, (name, x)
            if r.reads_answer:
                assert all(p.calls[0][0] == lt.cheapest for p in plays)


def test_knn_is_the_mean_grade_of_the_nearest_training_questions(fitted):
    "kNN as a team writes it by hand (cosine on the prompt embeddings, the k most similar training questions)."
    T, tr, ho, _ = fitted
    E = T.X / np.linalg.norm(T.X, axis=1, keepdims=True)
    for k in (10, 20):
        want = np.stack([T.Y[tr[np.argsort(-(E[tr] @ E[i]), kind='stable')[:k]]].mean(0) for i in ho])
        assert np.allclose(knn_path(T.X[tr], T.Y[tr], T.X[ho], [k])[0], want)


def test_routers_read_no_heldout_grade(lt, fitted):
    T, tr, ho, routers = fitted
    held = lt.tasks('heldout')
    texts = {t.text for t in held}
    be = lt.backend
    sw = RecordedOutcomesBackend(
        be.world, [{**r, 'quality': 1 - r['quality']} if r['task'] in texts else r for r in be.rows]
    )
    sw._emb = be._emb
    T2 = log_table(LoggedTasks(sw))
    assert (T2.Y[ho] != T.Y[ho]).any() and (T2.Y[tr] == T.Y[tr]).all()
    for R in (KNNQuality, CascadeRouter):
        r2 = R().fit(T2, tr)
        assert r2.setting == routers[R.name].setting
        assert np.allclose(r2.quality(ho), routers[R.name].quality(ho))


def test_logistic_and_pgr():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    y = (X[:, 0] + 0.3 * rng.normal(size=400) > 0).astype(float)
    w = fit_logistic(X, y, l2=0.1)
    p = predict_logistic(w, X)
    assert ((p > 0.5) == (y > 0.5)).mean() > 0.9 and w[0] > 2 * abs(w[1])
    assert pgr(0.7, 0.5, 0.9) == pytest.approx(0.5) and np.isnan(pgr(0.7, 0.5, 0.5))
    assert list(at_rate([0.1, 0.9, 0.5, 0.9], 0.5)) == [False, True, False, True]


def test_hindsight_oracle_in_the_env(lt):
    from spindleflow_rl.envs.env import SpindleFlowEnv

    held = lt.tasks('heldout')
    env = SpindleFlowEnv(EnvConfig(split='heldout'), backend=lt.backend, world=lt.world)
    plays = play_policy(env, HindsightOraclePolicy(), held)
    assert [p.task_id for p in plays] == [t.id for t in held]
    oracle = [play(OracleRouter(lt), lt, t) for t in held]
    assert [p.quality for p in plays] == pytest.approx([p.quality for p in oracle])


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


def test_the_learners_old_names_find_the_log_library_with_a_warning():
    """Names chapter 18b's module held before the routers became one family: the same objects; one warning each for
    those it no longer imports itself."""
    import warnings
    import spindleflow_rl.logs.routers as lib
    import spindleflow_rl.training.logs_learning as ll
    from spindleflow_rl._compat import OldPathWarning

    warned = []
    for name in sorted(ll.MOVED_TO_LOGS):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter('always')
            assert getattr(ll, name) is getattr(lib, name)
        here = name in vars(ll)  # still imported by the learner: an attribute, no warning
        assert [x.category for x in w] == ([] if here else [OldPathWarning]), name
        if not here:
            assert f'spindleflow_rl.logs.routers.{name}' in str(w[0].message)
            warned.append(name)
    assert {'KNNQuality', 'CascadeRouter', 'Router', 'logistic_path'} <= set(warned)
    with pytest.raises(AttributeError, match='no attribute'):
        ll.not_a_name


def _step_table(n=200, seed=0):
    "A three-specialist table (cheap, mid, strong by cost) whose router, predicting the same for every question,"
    "switches every question at once between operating points."
    from spindleflow_rl.logs.routers import LogTable

    rng = np.random.default_rng(seed)
    M = 3
    C = np.tile([0.001, 0.004, 0.01], (n, 1)) * rng.uniform(0.8, 1.2, (n, M))
    Y = (rng.random((n, M)) < [0.5, 0.7, 0.8]).astype(float)
    z = lambda *s: np.zeros(s)  # noqa: E731
    tab = LogTable(
        ids=['cheap', 'mid', 'strong'],
        task_ids=[f't{i}' for i in range(n)],
        X=z(n, 4),
        A=z(n, M, 4),
        text=np.zeros(M, bool),
        C=C,
        L=z(n, M),
        fail=np.zeros((n, M), int),
        avail=np.ones((n, M), bool),
        Y=Y,
        train=np.zeros(n, bool),
        budget=np.full(n, 60.0),
        base=np.zeros(n, int),
        expected=np.ones(n),
        cheapest=0,
        strongest=2,
    )
    return tab


def test_a_router_whose_spend_jumps_is_matched_by_mixing_its_two_points():
    "A router that switches every question at once (its predictions do not vary by question) is put at the policy's"
    "spend share by mixing the two operating points around it, not left at the nearest one."
    from spindleflow_rl.logs.routers import TunedRouter, matched_router_calls, spend_axis

    tab = _step_table()
    rows = np.arange(tab.n)
    r = TunedRouter()
    r.tab, r.fit_rows = tab, rows
    P = np.tile([0.5, 0.7, 0.8], (tab.n, 1))  # the same prediction for every question: a step curve
    grid = np.r_[0, np.geomspace(0.1, 1e6, 400)]
    reach = sorted({round(spend_axis(tab, rows, r.calls_at(P, g)), 3) for g in grid})
    assert len(reach) == 3  # always strong, always mid, always cheap: nothing in between
    for x in (0.1, 0.25, 0.5, 0.8):
        calls = matched_router_calls(tab, r, P, rows, x)
        assert abs(spend_axis(tab, rows, calls) - x) < 0.01, x  # matched, within one question's cost
        assert min(abs(x - s) for s in reach) > 0.05  # no single operating point is there
        # every question plays one of the two neighbouring points' calls
        assert set(calls[:, 0]) <= {0, 1, 2} and len(set(calls[:, 0])) == 2
        np.testing.assert_array_equal(calls, matched_router_calls(tab, r, P, rows, x))  # seeded
    # an operating point at x is played as it is
    at = r.calls_at(P, 0.0)
    np.testing.assert_array_equal(matched_router_calls(tab, r, P, rows, spend_axis(tab, rows, at)), at)
