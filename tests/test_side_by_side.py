"""Episodes of a network played side by side (`run_episodes`, chapter 07a; DAgger's driven episodes, chapter 08a) are
the episodes played one by one: on a four-model log, a distilled network's calls, returned quality and spend at three
prices, and a DAgger round's observations, teacher labels and rewards, are identical both ways (batches small enough
that several batches and a remainder are played). A policy that is not a network, and a backend that cannot be
copied, are played one by one; `env_twins` refuses the latter with a message."""

import numpy as np
import pytest
from stable_baselines3.common.vec_env import DummyVecEnv

import spindleflow_rl.logs.routers as lr
import spindleflow_rl.training.imitation as im
import spindleflow_rl.training.logs_learning as ll
from spindleflow_rl.agent.policies import ModelPolicy, env_twins, run_episode, run_episodes
from spindleflow_rl.core.catalog import Catalog
from spindleflow_rl.core.config import ConfigError
from spindleflow_rl.core.embeddings import get_embedder
from spindleflow_rl.logs.multi_model_log import MULTI_MODEL_CATALOG, make_multi_model_log
from spindleflow_rl.logs.routers import LoggedTasks, write_csv
from spindleflow_rl.sim.backends import RecordedOutcomesBackend

COLS = ['id', 'role', 'domain', 'cost', 'latency', 'reliability', 'capability']


@pytest.fixture(scope='module')
def distilled(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('log')
    write_csv(make_multi_model_log(300, 2), tmp / 'log.csv')
    write_csv(MULTI_MODEL_CATALOG, tmp / 'catalog.csv', COLS)
    be = RecordedOutcomesBackend.from_file(
        tmp / 'log.csv', Catalog.from_file(tmp / 'catalog.csv'), embedder=get_embedder(), quiet=True
    )
    tab = lr.log_table(LoggedTasks(be))
    q = ll.FullInfoQ(tab, ll.LOG_REWARD, seed=0).fit()
    q.fit_prices(ll.price_grid(q))
    assert q.depth == 2  # a teacher with two decisions: the comparison needs episodes of several plans
    rng = ll.default_cost_range(q)
    model = ll.make_scored_model(DummyVecEnv([lambda: ll.log_env(be, 'train', rng)]), q, be, seed=0)
    ll.distil(model, ll.log_env(be, 'train', rng), ll.QPolicy(q), 120, 4, 0, seed=0)
    return be, tab, q, rng, model


def test_a_network_plays_the_same_episodes_side_by_side(distilled):
    be, tab, q, _, model = distilled
    rows = np.flatnonzero(~tab.train)
    tasks = [be.world.bank[tab.task_ids[i]] for i in rows]
    seeds = [10_000 + i for i in range(len(tasks))]
    opts = [{'task': t.id} for t in tasks]
    called = set()
    for c in [float(np.quantile(q.prices, f)) for f in (0.2, 0.5, 0.8)]:
        env = ll.log_env(be, 'heldout', (c, c))
        one = []
        for s, o in zip(seeds, opts):  # one by one: the reference
            summ = run_episode(env, ModelPolicy(model), s, o, record=True)
            one.append((summ['path'], float(env.backend.coverage()[0]), summ['cost_usd'], summ['return']))
        side = run_episodes(
            ll.log_env(be, 'heldout', (c, c)),
            ModelPolicy(model),
            seeds,
            opts,
            record=True,
            batch=16,
            on_end=lambda e, s: (s['path'], float(e.backend.coverage()[0]), s['cost_usd'], s['return']),
        )
        assert len(side) == len(one) > 32 and len(side) % 16  # several batches and a remainder
        assert side == one
        called |= {p for p, *_ in one}
        plays = lr.play_policy(ll.log_env(be, 'heldout', (c, c)), ModelPolicy(model), tasks)
        assert [(p.quality, p.cost_usd) for p in plays] == [(x[1], x[2]) for x in one]
    assert len(called) > 2  # the comparison covers different plans, not one repeated answer


def test_a_dagger_round_driven_side_by_side_records_the_same_demonstrations(distilled):
    be, _, q, rng, model = distilled
    env = ll.log_env(be, 'train', rng)
    seeds = list(range(500, 540))
    side = im._driven_side_by_side(env, ll.QPolicy(q), seeds, model, batch=16)
    one = [im._episode(ll.log_env(be, 'train', rng), ll.QPolicy(q), s, model) for s in seeds]
    for (o1, a1, r1), (o2, a2, r2) in zip(one, side):
        np.testing.assert_array_equal(np.array(o1), np.array(o2))
        np.testing.assert_array_equal(np.array(a1), np.array(a2))
        assert r1 == r2
    d = im.dagger_round(model, env, ll.QPolicy(q), 40, seed=500)
    assert len(d) == sum(len(r) for _, _, r in one)
    np.testing.assert_array_equal(d.obs, np.concatenate([np.array(o) for o, _, _ in one]).astype(np.float32))


def test_other_policies_and_backends_play_one_by_one(distilled):
    be, tab, q, _, _ = distilled
    env = ll.log_env(be, 'heldout', (1.0, 1.0))
    ids = [tab.task_ids[i] for i in np.flatnonzero(~tab.train)[:5]]
    got = run_episodes(env, ll.QPolicy(q), [1, 2, 3, 4, 5], [{'task': t} for t in ids], on_end=lambda e, s: e)
    assert all(e is env for e in got)  # the Q policy is not a network: played on `env` itself

    class Metered(RecordedOutcomesBackend):
        copyable = False

    metered = Metered.__new__(Metered)
    metered.__dict__.update(be.__dict__)
    with pytest.raises(ConfigError, match='cannot be copied for side-by-side episodes'):
        env_twins(ll.log_env(metered, 'heldout', (1.0, 1.0)), 2)
