"""The fitted Q's third decision (issue 31): after two answers it reads whether they agree. On a four-model log with
answers: the Q policy in the environment makes exactly the calls `decide` makes (three at most); the policy network's
`SlotScorer` carries the same values at every step (the second decision interpolated between grid prices, the third
read in the order the DAG records); a candidate with fewer decisions, once taken, never calls a third time; the choice
keeps the one-standard-error rule's candidate; saved and loaded, the scorer is the same; a label flip on held-out questions
changes no call."""

import math

import numpy as np
import pytest
import torch as th
from stable_baselines3.common.vec_env import DummyVecEnv

import spindleflow_rl.training.logs_learning as ll
import spindleflow_rl.logs.routers as lr
from spindleflow_rl.agent.network import root_calls
from spindleflow_rl.core.catalog import Catalog
from spindleflow_rl.core.config import ConfigError
from spindleflow_rl.core.embeddings import get_embedder
from spindleflow_rl.logs.multi_model_log import MULTI_MODEL_CATALOG, make_multi_model_log
from spindleflow_rl.logs.routers import LoggedTasks, write_csv
from spindleflow_rl.sim.backends import RecordedOutcomesBackend
from scorer_checks import assert_reloads_the_same

COLS = ['id', 'role', 'domain', 'cost', 'latency', 'reliability', 'capability']


def load(tmp, rows):
    write_csv(rows, tmp / 'log.csv')
    write_csv(MULTI_MODEL_CATALOG, tmp / 'catalog.csv', COLS)
    return RecordedOutcomesBackend.from_file(
        tmp / 'log.csv', Catalog.from_file(tmp / 'catalog.csv'), embedder=get_embedder(), quiet=True
    )


@pytest.fixture(scope='module')
def fitted(tmp_path_factory):
    rows = make_multi_model_log(500, 1)
    be = load(tmp_path_factory.mktemp('log'), rows)
    tab = lr.log_table(LoggedTasks(be))
    q = ll.FullInfoQ(tab, ll.LOG_REWARD, seed=0, max_calls=3).fit()
    q.fit_prices(ll.price_grid(q), choose=False)  # the Q's own three decisions
    return rows, be, tab, q


def held(tab):
    return np.flatnonzero(~tab.train & tab.avail.all(1))


def prices(q):
    "Prices where the third decision is taken on some questions, and where it is not."
    return [float(np.quantile(q.prices, f)) for f in (0.1, 0.3, 0.6)]


def test_the_q_has_three_decisions_and_uses_the_third(fitted):
    _, _, tab, q = fitted
    assert q.third and q.depth == 3 and len(q.pairs) == 12
    h = held(tab)
    calls = [q.decide(h, c) for c in prices(q)]
    assert all(c.shape == (len(h), 3) for c in calls)
    third = [float((c[:, 2] >= 0).mean()) for c in calls]
    assert max(third) > 0.02, third  # some questions get a third call ...
    for c in calls:  # ... only after two, and never a specialist already called
        on = c[:, 2] >= 0
        assert (c[on, 1] >= 0).all() and (c[on, 2] != c[on, 0]).all() and (c[on, 2] != c[on, 1]).all()
    test = ll.FullInfoQ(tab, ll.LOG_REWARD, seed=0)  # the default: two calls
    assert not test.third and test.depth == 2
    with pytest.raises(ConfigError, match='max_calls is 2 or 3'):
        ll.FullInfoQ(tab, max_calls=4)


def test_q_policy_in_the_environment_makes_the_calls_decide_makes(fitted):
    _, be, tab, q = fitted
    h = held(tab)[:60]
    for c in prices(q):
        got = ll.env_calls(tab, ll.log_env(be, 'heldout', (c, c)), ll.QPolicy(q), h)[:, :3]
        np.testing.assert_array_equal(got, q.decide(h, c))


def versus_rest(v: dict) -> dict:
    "The scorer's reading of the Q policy's values after an answer: each call against the best other (or stopping)."
    calls = {s: x for s, x in v.items() if s != 'stop'}
    return {
        s: min(x, x - max([y for t, y in calls.items() if t != s], default=-math.inf))
        for s, x in calls.items()
    }


def scorer_vs_policy(model, q, be, rows, price) -> tuple[float, int]:
    """Play the Q policy on `rows`; at each step after the first call compare the scorer's Q feature with
    tanh(10 * the Q policy's value, read against the best other call's) of every callable slot. Returns the largest difference and the steps compared with
    two answers read."""
    fe = model.policy.features_extractor
    env = ll.log_env(be, 'heldout', (price, price))
    gap, after_two = 0.0, 0
    for i in rows:
        pol = ll.QPolicy(q)
        obs, _ = env.reset(options={'task': q.tab.task_ids[i]})
        pol.reset(env)
        for step in range(3):
            e = env.unwrapped
            calls = [c for ev in e.trace for c in ev.get('calls', [])]
            v = pol.values(env)
            P = fe.layout.split(th.as_tensor(obs)[None])
            root = root_calls(P['adjacency'], fe.M)
            got = fe.scorer(
                P['task'], P['roster'], P['called'], P['called_mask'], P['slot_obs'], P['scalars'], root=root
            )[0].numpy()
            if calls:
                for s, val in versus_rest(v).items():
                    gap = max(gap, abs(float(got[s, 2]) - math.tanh(10 * val)))
                after_two += len(calls) == 2
            obs, _, term, trunc, _ = env.step(pol.act(env, obs, {}))
            if term or trunc:
                break
    return gap, after_two


def test_the_network_scorer_carries_the_three_decisions(fitted):
    _, be, tab, q = fitted
    env = DummyVecEnv([lambda: ll.log_env(be, 'train', (0.0, float(q.prices.max())))])
    sm = ll.make_scored_model(env, q, be, seed=0, fitting=False)
    assert sm.policy.features_extractor.scorer.spec['calls'] == 3
    h = held(tab)[:40]
    for c in prices(q)[:2]:
        gap, after_two = scorer_vs_policy(sm, q, be, h, c)
        assert gap < 1e-5, (c, gap)
    assert after_two > 0  # the third decision was compared
    assert_reloads_the_same(sm, ll.slot_scorer_spec(q))


def test_taking_a_two_decision_candidate_never_calls_a_third_time(fitted):
    _, be, tab, _ = fitted
    q = ll.FullInfoQ(tab, ll.LOG_REWARD, seed=0, max_calls=3).fit()
    q.fit_prices(ll.price_grid(q), choose=False)
    h = held(tab)
    q3 = [q.decide(h, c) for c in prices(q)]
    for name in ('q', 'knn+q', 'knn'):
        q.take(name)
        assert q.depth == (1 if name == 'knn' else 2)
        for c in prices(q):
            d = q.decide(h, c)
            assert (d[:, 2] == -1).all()
            if name == 'knn':
                assert (d[:, 1] == -1).all()
        env = DummyVecEnv([lambda: ll.log_env(be, 'train', (0.0, 100.0))])
        sm = ll.make_scored_model(env, q, be, seed=0, fitting=False)
        gap, _ = scorer_vs_policy(sm, q, be, h[:15], prices(q)[1])
        assert gap < 1e-5
    q.take('q3')
    for c, want in zip(prices(q), q3):
        np.testing.assert_array_equal(q.decide(h, c), want)


def test_the_choice_keeps_the_rule_s_validated_candidate(fitted):
    _, _, tab, _ = fitted
    q = ll.FullInfoQ(tab, ll.LOG_REWARD, seed=0, max_calls=3).fit()
    q.fit_prices(ll.price_grid(q))
    v = q.choice['values']
    assert {'q', 'q3', 'knn+q3', 'cheapest+q3', 'cascade'} <= set(v) and len(v) == 17
    assert v[q.choice['taken']] == max(v.values())  # the best validated plays
    assert q.choice['taken'] == ll.pick_candidate(v, q.choice['fold_values'])[0] == q.choice['best']
    assert q.summary()['calls'] == q.depth
    taken, h = q.choice['taken'], held(tab)
    calls = [q.decide(h, c) for c in prices(q)]
    for other in (
        'knn',
        'cheapest+q',
    ):  # another candidate taken (one call: every second call off), then chosen again
        q.take(other)
        q.choose()
        assert (q.choice['taken'], q.choice['values']) == (taken, v)
        for c, want in zip(prices(q), calls):
            np.testing.assert_array_equal(q.decide(h, c), want)
    assert ll.choice_words(q).split(':')[0] in {
        "the Q's own three decisions",
        "the Q's own decisions",
        *(f"the {b} model's ranking then the Q's second and third decisions" for b in lr.BLOCKS),
        *(f"the {b} model's ranking then the Q's second call" for b in lr.BLOCKS),
        *(f"the {b} model's ranking (one call)" for b in lr.BLOCKS),
        "the cheapest first, then the Q's second decision",
        "the cheapest first, then the Q's second decision and third",
        "the cascade router (the cheapest first, then escalating on its reading of the answer)",
    }


def test_a_held_out_label_flip_changes_no_call(fitted, tmp_path):
    rows, _, tab, q = fitted
    _, be, _, _ = fitted
    flip = {be.world.bank[tab.task_ids[i]].text for i in held(tab)}
    be2 = load(
        tmp_path, [{**r, 'quality': 1.0 - float(r['quality'])} if r['task'] in flip else r for r in rows]
    )
    tab2 = lr.log_table(LoggedTasks(be2))
    assert not np.array_equal(tab2.Y, tab.Y)
    q2 = ll.FullInfoQ(tab2, ll.LOG_REWARD, seed=0, max_calls=3).fit()
    q2.fit_prices(ll.price_grid(q2), choose=False)
    for c in prices(q):
        np.testing.assert_array_equal(q2.decide(held(tab2), c), q.decide(held(tab), c))


def test_a_scorer_spec_names_a_wrong_calls_value():
    from spindleflow_rl.agent.network import SlotScorer

    spec = {'n': 5, 'specialists': 3, 'k': 2, 'mf_dim': 4, 'text': [True] * 3, 'blocks': 4}
    with pytest.raises(ConfigError, match="'calls' is 2 or 3 \\(3 only with a Q"):
        SlotScorer({**spec, 'calls': 3})  # a third decision needs the Q it belongs to
    with pytest.raises(ConfigError, match="'calls' is 2 or 3"):
        SlotScorer({**spec, 'q': 4, 'calls': 4})
    assert SlotScorer({**spec, 'q': 4}).calls == 2  # earlier checkpoints: two decisions
    sc = SlotScorer({**spec, 'q': 4, 'calls': 3})
    assert {'q1_W', 'pair_W'} <= set(dict(sc.named_buffers())) and 'meta_W' not in dict(sc.named_buffers())


def test_the_own_logs_command_with_three_calls(fitted, tmp_path):
    """`spindleflow-train --backend recorded ... --q-calls 3` end to end: the run's summary says what the Q plays and
    with how many calls, the saved policy's scorer carries a third decision when the Q plays one, the sweep replays it;
    a wrong value and the flag on a simulator run are refused by name."""
    import json, os, shutil, subprocess

    rows, _, _, _ = fitted
    write_csv(rows, tmp_path / 'log.csv')
    write_csv(MULTI_MODEL_CATALOG, tmp_path / 'catalog.csv', COLS)
    env = {**os.environ, 'HF_HUB_OFFLINE': '1', 'TRANSFORMERS_OFFLINE': '1'}

    def run(*args):
        return subprocess.run(
            [shutil.which(args[0]), *args[1:]],
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            cwd=tmp_path,
        )

    base = ['spindleflow-train', '--backend', 'recorded', '--recorded', 'log.csv', '--catalog', 'catalog.csv']
    small = '--distil-episodes 600 --distil-epochs 10 --distil-dagger-rounds 1 --torch-threads 1'.split()
    p = run(*base, '--out', 'runs', '--run-name', 'r3', '--q-calls', '3', '--no-progress', *small)
    assert p.returncode == 0 and 'Traceback' not in p.stderr, p.stdout[-2000:] + p.stderr[-2000:]
    info = json.loads((tmp_path / 'runs' / 'r3' / 'log_learning.json').read_text())
    q = info['q']
    v = q['validation_values']
    assert 'q3' in v and v[q['taken']] == max(v.values()) and q['rule'] == 'best' and q['best'] == q['taken']
    assert q['standard_error'] > 0  # how far apart the folds put the best: said, not acted on
    assert q['calls'] == (
        3 if q['taken'].endswith('q3') else 2 if '+' in q['taken'] or q['taken'] == 'q' else 1
    )
    assert (
        q['slot_scorer'].get('calls') == 3
    )  # the scorer carries the third decision's layout (written -1 if unused)
    assert json.loads((tmp_path / 'runs' / 'r3' / 'config.json').read_text())['train']['q_calls'] == 3
    s = run(
        'spindleflow-eval', '--checkpoint', 'runs/r3', '--sweep', 'spend_share=0.3,0.7', '--json', 'sw.json'
    )
    assert s.returncode == 0 and 'Traceback' not in s.stderr, s.stdout[-2000:] + s.stderr[-2000:]
    assert len(json.loads((tmp_path / 'sw.json').read_text())['policies']['policy']['x']) >= 1
    bad = run(*base, '--out', 'runs', '--run-name', 'bad', '--q-calls', '4')
    assert bad.returncode != 0 and '--q-calls' in bad.stderr and 'Traceback' not in bad.stderr, bad.stderr[
        -1500:
    ]
    sim = run('spindleflow-train', '--out', 'runs', '--run-name', 'sim', '--q-calls', '3')
    assert sim.returncode != 0 and '--q-calls' in sim.stderr and 'recorded' in sim.stderr, sim.stderr[-1500:]
