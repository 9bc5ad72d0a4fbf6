"""Chapter 18's cascade router inside the fitted Q (issue 31): with the cheapest specialist's answers logged, the Q
tunes the report's cascade on the same questions and folds, so its candidate 'cascade' validates at exactly the
router's value and the choice is never below it. Taken, the Q plays the cascade: the cheapest first, then its
escalation, the same calls in the environment as `decide`, and the policy network's scorer carries the same values.
Taking it is not destructive, and a log without the cheap answers has no such candidate."""

from pathlib import Path

import numpy as np
import pytest
import torch as th
from stable_baselines3.common.vec_env import DummyVecEnv

import spindleflow_rl.training.logs_learning as ll
import spindleflow_rl.logs.routers as lr
from spindleflow_rl.agent.network import SlotScorer
from spindleflow_rl.core.catalog import Catalog
from spindleflow_rl.core.config import ConfigError
from spindleflow_rl.core.embeddings import get_embedder
from spindleflow_rl.logs.multi_model_log import MULTI_MODEL_CATALOG, make_multi_model_log
from spindleflow_rl.logs.routers import LoggedTasks, write_csv
from spindleflow_rl.sim.backends import RecordedOutcomesBackend
from scorer_checks import assert_reloads_the_same

ASSETS = Path(__file__).resolve().parents[1] / 'spindleflow_rl' / 'assets'
COLS = ['id', 'role', 'domain', 'cost', 'latency', 'reliability', 'capability']


def backend(log, catalog):
    return RecordedOutcomesBackend.from_file(
        log, Catalog.from_file(catalog), embedder=get_embedder(), quiet=True
    )


@pytest.fixture(scope='module')
def two():
    be = backend(ASSETS / 'two_model_log.csv', ASSETS / 'two_model_catalog.csv')
    tab = lr.log_table(LoggedTasks(be))
    q = ll.FullInfoQ(tab, ll.LOG_REWARD, seed=0).fit()
    q.fit_prices(ll.price_grid(q))
    return be, tab, q


def held(tab):
    return np.flatnonzero(~tab.train & tab.avail.all(1))


def fit_rows(tab):
    return np.flatnonzero(tab.train & tab.avail.all(1))


def test_the_cascade_validates_as_the_report_s_and_the_choice_is_never_below_a_router(two):
    _, tab, q = two
    v = q.choice['values']
    routers = {
        R.name: R().fit(tab, fit_rows(tab))
        for R in (lr.KNNQuality, lr.GainRouter, lr.MFRouter, lr.CascadeRouter)
    }
    assert v['cascade'] == pytest.approx(routers['cascade'].val_area, abs=1e-12)
    assert (
        q.casc_router.setting == routers['cascade'].setting and q.casc_router.kind == routers['cascade'].kind
    )
    # the default rule ('best'): the highest validated plays, never below a router it contains ...
    assert q.choice['rule'] == 'best' and q.choice['taken'] == q.choice['best'] == max(v, key=v.get)
    assert v[q.choice['taken']] >= max(r.val_area for r in routers.values()) - 1e-12
    one = (
        __import__('copy').deepcopy(q).choose(rule='one_se')
    )  # ... the one-standard-error rule: never more than se
    assert one.choice['values'] == v and one.choice['best'] == q.choice['best']
    assert v[one.choice['taken']] >= max(r.val_area for r in routers.values()) - one.choice['se'] - 1e-12
    assert q.summary()['settings']['cascade'].startswith(str(routers['cascade'].setting))


def test_taken_the_q_plays_the_cascade(two):
    be, tab, q = two
    q = __import__('copy').deepcopy(q).take('cascade')
    assert q.depth == 2 and q.stack.cascade_on and all(s.cascade_on for s in q.fold_stacks)
    r, c, s = q.casc_router, tab.cheapest, tab.strongest
    score = 1 - r.oof[:, c] if r.kind == 'wrong' else r.oof[:, s] - r.oof[:, c]
    n = len(q.rows)
    for price in np.quantile(q.prices, [0.2, 0.5, 0.8]):
        d = q.decide(np.arange(n), price, fitted=True)  # the fitting questions, out of fold
        assert (d[:, 0] == c).all()
        np.testing.assert_array_equal(d[:, 1] == s, score > price * q.cbar[s])
        h = held(tab)
        got = ll.env_calls(tab, ll.log_env(be, 'heldout', (price, price)), ll.QPolicy(q), h)[:, :2]
        np.testing.assert_array_equal(got, q.decide(h, price))
        assert 0 < (got[:, 1] == s).mean() < 1 or price == q.prices.max()
    st = q.stack  # on a new question: the cascade's logistic regressions of the cheap answer
    X, obs, A = q._inputs(held(tab)[:5])
    want = lr._sigmoid(st.casc(np.hstack([X, A[:, c], obs[:, c]])))
    np.testing.assert_allclose(st.answer(c, X, A[:, c], obs[:, c]), want)


def test_the_scorer_carries_the_cascade(two):
    be, tab, q = two
    q = __import__('copy').deepcopy(q).take('cascade')
    env = DummyVecEnv([lambda: ll.log_env(be, 'train', (0.0, float(q.prices.max())))])
    sm = ll.make_scored_model(env, q, be, seed=0, fitting=False)
    sc = sm.policy.features_extractor.scorer
    assert sc.spec['cascade'] == tab.cheapest and 'casc_W' in dict(sc.named_buffers())
    fe, gap, steps = sm.policy.features_extractor, 0.0, 0
    for price in np.quantile(q.prices, [0.3, 0.7]):
        lenv = ll.log_env(be, 'heldout', (price, price))
        for i in held(tab)[:25]:
            pol = ll.QPolicy(q)
            obs, _ = lenv.reset(options={'task': tab.task_ids[i]})
            pol.reset(lenv)
            for _ in range(2):
                v = pol.values(lenv)
                P = fe.layout.split(th.as_tensor(obs)[None])
                got = fe.scorer(
                    P['task'], P['roster'], P['called'], P['called_mask'], P['slot_obs'], P['scalars']
                )[0]
                if len(lenv.unwrapped.trace):  # after the cheap answer: the cascade's escalation value
                    for slot, val in v.items():
                        if slot != 'stop':
                            gap, steps = max(gap, abs(float(got[slot, 2]) - np.tanh(10 * val))), steps + 1
                obs, _, term, trunc, _ = lenv.step(pol.act(lenv, obs, {}))
                if term or trunc:
                    break
    assert steps > 20 and gap < 1e-5, (steps, gap)
    assert_reloads_the_same(sm, ll.slot_scorer_spec(q))
    spec = {'n': 5, 'specialists': 2, 'k': 2, 'mf_dim': 4, 'text': [True] * 2, 'blocks': 4}
    with pytest.raises(ConfigError, match="'cascade' is a specialist's index"):
        SlotScorer({**spec, 'cascade': 2})
    with pytest.raises(ConfigError, match="'relative' is true or false"):
        SlotScorer({**spec, 'relative': 'yes'})
    assert SlotScorer(spec).relative is False and ll.slot_scorer_spec(q)['relative'] is True


def test_taking_the_cascade_is_not_destructive(two):
    _, tab, q = two
    q = __import__('copy').deepcopy(q)
    h, taken = held(tab), q.choice['taken']
    before = [q.decide(h, p) for p in np.quantile(q.prices, [0.2, 0.6])]
    ps = q.prices.copy()
    q.take('cascade').take(taken)
    assert not q.stack.cascade_on and 'cascade' not in ll.slot_scorer_spec(q)
    np.testing.assert_array_equal(q.prices, ps)
    for p, want in zip(np.quantile(q.prices, [0.2, 0.6]), before):
        np.testing.assert_array_equal(q.decide(h, p), want)


def test_more_specialists_and_a_log_without_the_cheap_answers(tmp_path):
    rows = make_multi_model_log(300, 2)
    write_csv(MULTI_MODEL_CATALOG, tmp_path / 'catalog.csv', COLS)
    write_csv(rows, tmp_path / 'log.csv')
    tab = lr.log_table(LoggedTasks(backend(tmp_path / 'log.csv', tmp_path / 'catalog.csv')))
    q = ll.FullInfoQ(tab, ll.LOG_REWARD, seed=0).fit()
    q.fit_prices(ll.price_grid(q))
    r = lr.CascadeRouter().fit(tab, fit_rows(tab))
    assert q.choice['values']['cascade'] == pytest.approx(r.val_area, abs=1e-12)
    q.take(
        'cascade'
    )  # more than two: the cheapest, then the argmax of P - price * cost, if above the cheap P
    P, c, n = q.casc_router.oof, tab.cheapest, len(q.rows)
    for price in np.quantile(q.prices, [0.2, 0.6]):
        u = P - price * q.cbar
        u[:, c] = P[:, c]
        k = u.argmax(1)
        np.testing.assert_array_equal(
            q.decide(np.arange(n), price, fitted=True)[:, 1], np.where(k == c, -1, k)
        )
    write_csv([{k: v for k, v in r_.items() if k != 'response'} for r_ in rows], tmp_path / 'noans.csv')
    tab2 = lr.log_table(LoggedTasks(backend(tmp_path / 'noans.csv', tmp_path / 'catalog.csv')))
    q2 = ll.FullInfoQ(tab2, ll.LOG_REWARD, seed=0).fit()
    q2.fit_prices(ll.price_grid(q2))
    assert 'cascade' not in q2.choice['values'] and q2.casc_router is None
    with pytest.raises(ConfigError, match="needs the cheapest specialist's answers logged"):
        q2.take('cascade')


def test_the_choice_rule_takes_the_simplest_within_one_standard_error():
    v = {'q': 0.80, 'knn': 0.785, 'ridge': 0.79, 'cascade': 0.81, 'knn+q': 0.806, 'knn+q3': 0.812}
    wide = {'knn+q3': [0.70, 0.92, 0.80, 0.83]}  # se = std / 2 = 0.0465: everything is within it
    narrow = {'knn+q3': [0.811, 0.813, 0.812, 0.812]}  # se 0.0004: only the best
    mid = {'knn+q3': [0.80, 0.824, 0.812, 0.812]}  # se 0.0049: the two-decision candidates, not one call
    se = pytest.approx(np.std(wide['knn+q3'], ddof=1) / 2)
    assert ll.pick_candidate(v, wide, 'one_se') == ('ridge', 'knn+q3', se)
    assert ll.pick_candidate(v, narrow, 'one_se')[0] == 'knn+q3'
    assert ll.pick_candidate(v, mid, 'one_se')[0] == 'cascade'
    assert ll.pick_candidate(v, wide) == (
        'knn+q3',
        'knn+q3',
        se,
    )  # the default: the highest, whatever the spread
    tie = {'q': 0.8, 'knn+q': 0.8}  # a tie keeps the Q's own decisions
    for rule in ('best', 'one_se'):
        assert ll.pick_candidate(tie, {'q': [0.8, 0.8], 'knn+q': [0.8, 0.8]}, rule)[0] == 'q'
    assert [
        ll.candidate_depth(k) for k in ('ridge', 'q', 'cascade', 'cheapest+q', 'mf+q', 'q3', 'mf+q3')
    ] == [1, 2, 2, 2, 2, 3, 3]
    with pytest.raises(ConfigError, match="'best' \\(the default\\) or 'one_se'"):
        ll.pick_candidate(v, wide, 'lowest')


def test_fold_values_are_each_fold_s_area_on_the_whole_set_s_scale(two):
    _, tab, q = two
    t, rows, r = q.sub, np.arange(len(q.rows)), q.casc_router
    qc, qs = lr.ends(t, rows)
    pts = lr.RATE_GRID
    got = q.choice['fold_values']['cascade']
    assert len(got) == len(q.folds) == 5
    for (_, b), g in zip(
        q.folds, got
    ):  # the area itself, from the curve's points, on the whole set's PGR scale
        xs = [lr.spend_axis(t, b, r.calls_at(r.oof, x)[b]) for x in pts]
        ys = [lr.play_calls(t, b, r.calls_at(r.oof, x)[b])[0].mean() for x in pts]
        assert g == pytest.approx(
            (lr.curve_area(xs, ys) - lr.ends(t, b)[0].mean()) / (qs.mean() - qc.mean()), abs=1e-9
        )
    taken, best, se = ll.pick_candidate(q.choice['values'], q.choice['fold_values'])
    assert (q.choice['taken'], q.choice['best'], q.choice['se']) == (taken, best, se) and se > 0
    s = q.summary()
    assert (s['rule'], s['best'], s['standard_error']) == ('best', best, round(se, 4)) and taken == best
