"""The recorded backend through the environment: what the orchestrator sees carries no grade, the episode scores the
answer it returns, the reward's baseline is a named policy, rosters follow the split, and large logs are cached."""

import json
from pathlib import Path
import numpy as np
import pytest
from spindleflow_rl.sim.backends import RecordedOutcomesBackend, embed_texts
from spindleflow_rl.core.catalog import Catalog
from spindleflow_rl.core.config import ConfigError, EnvConfig
from spindleflow_rl.core.embeddings import get_embedder
from spindleflow_rl.envs.env import SpindleFlowEnv, encode_action
from spindleflow_rl.agent.runs import split_env_fn
from spindleflow_rl.logs.routers import TWO_MODEL_CATALOG, write_csv

TASKS = ['What is 17 × 23?', 'What is the capital of Australia?', 'Solve for x: 3x + 4 = 19.']


@pytest.fixture(scope='module')
def cat(tmp_path_factory):
    d = tmp_path_factory.mktemp('cat')
    return Catalog.from_file(
        write_csv(
            TWO_MODEL_CATALOG,
            d / 'models.csv',
            ['id', 'role', 'domain', 'cost', 'latency', 'reliability', 'capability'],
        )
    )


def _log(texts=True, swap=False):
    rows = []
    for n, t in enumerate(TASKS):
        for sid, q in (('cheap-model', float(n % 2)), ('strong-model', 1.0 - float(n % 2))):
            q = 1.0 - q if swap else q
            rows.append(
                dict(
                    task=t,
                    specialist_id=sid,
                    quality=q,
                    cost_usd=0.0001 if sid == 'cheap-model' else 0.002,
                    latency_s=1.0,
                    response=f"I think it is {n}, not sure."
                    if (texts and sid == 'cheap-model')
                    else (f"It is {n}." if texts else ''),
                )
            )
    return rows


def _backend(tmp_path, cat, rows, name='log.jsonl', **kw):
    (tmp_path / name).write_text(''.join(json.dumps(r) + '\n' for r in rows))
    return RecordedOutcomesBackend.from_file(tmp_path / name, cat, embedder=get_embedder(), **kw)


def _episode(be, task_id, order, seed=3):
    env = SpindleFlowEnv(EnvConfig(split='all', max_specialists=6), backend=be, world=be.world)
    obs, info = env.reset(seed=seed, options={'task': task_id})
    seen = [obs]
    M = env.cfg.max_specialists
    term = trunc = False
    for sid in order:
        obs, r, term, trunc, info = env.step(encode_action(M, slots=[env.roster.index(sid)]))
        seen.append(obs)
    if not (term or trunc):
        obs, *_ = env.step(encode_action(M, stop=True))
        seen.append(obs)
    return seen, float(be.coverage()[0]), env


@pytest.mark.parametrize('texts', [True, False])
def test_no_grade_reaches_the_observation(tmp_path, cat, texts):
    a = _backend(tmp_path, cat, _log(texts), 'a.jsonl')
    b = _backend(tmp_path, cat, _log(texts, swap=True), 'b.jsonl')
    for t in a.world.bank.tasks():
        oa, qa, _ = _episode(a, t.id, ['cheap-model', 'strong-model'])
        ob, qb, _ = _episode(b, t.id, ['cheap-model', 'strong-model'])
        assert qa != qb  # the grades differ ...
        assert len(oa) == len(ob) and all(
            np.array_equal(x, y) for x, y in zip(oa, ob)
        )  # ... what is seen does not


def test_episode_scores_the_returned_answer(tmp_path, cat):
    be = _backend(tmp_path, cat, _log())
    t = be.world.bank.tasks()[0]  # cheap wrong (0), strong right (1)
    assert _episode(be, t.id, ['cheap-model', 'strong-model'])[1] == 1.0
    assert (
        _episode(be, t.id, ['strong-model', 'cheap-model'])[1] == 0.0
    )  # the last answer is returned, not "either was right"
    j = _backend(tmp_path, cat, _log(), 'j.jsonl', answer='judge')
    assert _episode(j, t.id, ['strong-model', 'cheap-model'])[1] in (0.0, 1.0)


def test_baseline_is_the_cheapest_answer_and_ignores_failed_grades(tmp_path, cat):
    rows = [
        dict(
            task='Name the capital of Peru.',
            specialist_id='cheap-model',
            quality=0.9,
            cost_usd=0.0001,
            latency_s=1,
            status='timeout',
        ),
        dict(
            task='Name the capital of Peru.',
            specialist_id='strong-model',
            quality=1.0,
            cost_usd=0.002,
            latency_s=2,
            response='Lima.',
        ),
    ]
    be = _backend(tmp_path, cat, rows)
    _, _, env = _episode(be, be.world.bank.tasks()[0].id, [])
    b = be.baseline()
    assert b['policy'] == 'cheapest' and b['specialist_id'] == 'cheap-model' and float(b['quality'][0]) == 0.0
    with pytest.raises(ConfigError, match='needs a generalist'):
        RecordedOutcomesBackend(be.world, rows, baseline='generalist')


def test_rosters_follow_the_split(tmp_path, cat):
    be = _backend(tmp_path, cat, _log())
    assert be.world.heldout_ids == []
    with pytest.raises(ConfigError, match="no 'unseen' roster"):
        split_env_fn('unseen-roster', backend_fn=lambda: (be, None))().reset(seed=0)
    env = split_env_fn('heldout', backend_fn=lambda: (be, None))()
    env.reset(seed=0)
    assert set(r for r in env.roster if r) == {'cheap-model', 'strong-model'}


def test_duplicates_category_and_index(tmp_path, cat, capsys):
    rows = _log() + [dict(_log()[0], quality=0.0, response='Maybe 391?')]
    rows += [
        dict(
            task='A failed one',
            specialist_id='cheap-model',
            quality=1.0,
            cost_usd=0.0001,
            latency_s=1,
            status='error',
            category=None,
        ),
        dict(
            task='A failed one',
            specialist_id='strong-model',
            quality=0.2,
            cost_usd=0.002,
            latency_s=1,
            category=None,
        ),
    ]
    cat2 = Catalog.from_file(
        write_csv(
            [dict(r, domain='maths' if r['id'] == 'strong-model' else 'chat') for r in TWO_MODEL_CATALOG],
            tmp_path / 'c2.csv',
            ['id', 'role', 'domain', 'cost', 'latency', 'reliability', 'capability'],
        )
    )
    be = _backend(tmp_path, cat2, rows, quiet=False)
    assert be.duplicates == {'pairs': 1, 'extra_rows': 1}
    assert 'logged more than once' in capsys.readouterr().out
    t = next(t for t in be.world.bank.tasks() if t.text == 'A failed one')
    assert t.category == 'maths'  # from the successful call, not the failed "best" row
    assert (
        sorted(be.index[TASKS[0]]) == ['cheap-model', 'strong-model']
        and len(be.index[TASKS[0]]['cheap-model']) == 2
    )


def test_large_log_embedding_progress_and_cache(tmp_path, capsys):
    class Counting:
        def __init__(self):
            self.e, self.n, self.model_id = get_embedder(), 0, get_embedder().model_id

        def encode(self, texts):
            self.n += len(texts)
            return self.e.encode(texts)

    ce = Counting()
    texts = [f'logged answer {i}' for i in range(600)]
    E = embed_texts(texts, ce, progress=True, cache_dir=tmp_path, batch=200)
    assert 'embedding log' in capsys.readouterr().err and ce.n == 600 and E.shape == (600, 384)
    E2 = embed_texts(texts, ce, progress=False, cache_dir=tmp_path)
    assert ce.n == 600 and np.array_equal(E, E2) and len(list(tmp_path.glob('*.npy'))) == 1


RB = Path(__file__).resolve().parents[2] / 'shared' / 'data' / 'routerbench_subset'


@pytest.mark.skipif(
    not RB.exists(), reason='the development copy of RouterBench lies in ../shared/data (CI has it)'
)
def test_a_real_wide_log_is_read_as_it_is():
    """RouterBench's wide CSVs: one row per logged (question, model),
    empty grade cells skipped (never a 0), costs and answers kept."""
    import csv
    from spindleflow_rl.sim.backends import load_recorded_outcomes, log_catalog, wide_models

    csv.field_size_limit(1 << 30)
    total, texts = 0, set()
    for f in sorted(RB.glob('*.csv')):
        with open(f, newline='', encoding='utf-8') as fh:
            raw = list(csv.DictReader(fh))
        models = wide_models(list(raw[0]))
        assert len(models) == 11 and 'oracle_model_to_route_to' not in models
        rows = load_recorded_outcomes(f)
        total += len(rows)
        texts |= {r['task'] for r in rows}
        cells = {(r['prompt'], m): r for r in raw for m in models if r[m].strip() != ''}
        assert len(rows) == len(cells) > 0 and {(r['task'], r['specialist_id']) for r in rows} == set(cells)
        for r in rows[::97]:
            c = cells[(r['task'], r['specialist_id'])]
            assert r['quality'] == float(c[r['specialist_id']]) and r['cost_usd'] == float(
                c[r['specialist_id'] + '|total_cost']
            )
            assert (
                r['response'] == c[r['specialist_id'] + '|model_response']
                and r['latency_s'] == 0.0
                and r['category'] == c['eval_name']
            )
        empty = sum(r[m].strip() == '' for r in raw for m in models)
        assert len(rows) + empty == len(raw) * 11  # every cell is a row or a model with no outcome
    together = load_recorded_outcomes(RB)  # the folder: the three files as one log
    assert len(together) == total and len({r['task'] for r in together}) == len(texts)
    cat, why = log_catalog(together, None)
    assert (
        why == 'from the log'
        and len(cat) == 11
        and cat['gpt-4-1106-preview'].cost_per_call > cat['mistralai/mistral-7b-chat'].cost_per_call
    )


@pytest.mark.skipif(
    not RB.exists(), reason='the development copy of RouterBench lies in ../shared/data (CI has it)'
)
def test_real_pair_is_what_the_real_log_says():
    """Chapter 18a's REAL_PAIR, which the real-like synthetic log is fitted to, is `pair_stats` of RouterBench's files
    (bench/real_log_stats.py's default pair), to its printed precision."""
    from spindleflow_rl.sim.backends import load_recorded_outcomes
    from spindleflow_rl.logs.multi_model_log import REAL_PAIR, pair_stats

    s = pair_stats(load_recorded_outcomes(RB), 'mistralai/mixtral-8x7b-chat', 'gpt-4-1106-preview')
    for k, v in REAL_PAIR.items():
        if k != 'source':
            assert s[k] == pytest.approx(v, abs=0.0005 if k != 'price_ratio' else 0.05), k
    assert s['weak_by_category']['mbpp'] < 0.6 < 0.8 < s['weak_by_category']['arc-challenge']
