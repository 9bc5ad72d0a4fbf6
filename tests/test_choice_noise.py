"""`bench/choice_noise.py` (issue 31, item 2: what choosing by validation costs) on the shipped 200-question log: the
pick it reports is the one a log run makes (`FullInfoQ.choose`), every candidate is played on the same held-out
questions, the regret is the hindsight best's lead over the pick, and `--collect` writes the asset chapter 18c reads."""

import importlib.util, json
from pathlib import Path
import numpy as np
import pytest
from spindleflow_rl.sim.backends import RecordedOutcomesBackend
from spindleflow_rl.core.catalog import Catalog
from spindleflow_rl.core.embeddings import get_embedder
from spindleflow_rl.logs.routers import LoggedTasks
import spindleflow_rl.training.logs_learning as ll
import spindleflow_rl.logs.routers as lr

ROOT = Path(__file__).resolve().parents[1]
ASSETS = ROOT / 'spindleflow_rl' / 'assets'
spec = importlib.util.spec_from_file_location('choice_noise', ROOT / 'bench' / 'choice_noise.py')
cn = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cn)


@pytest.fixture(scope='module')
def tab():
    be = RecordedOutcomesBackend.from_file(
        ASSETS / 'two_model_log.csv',
        Catalog.from_file(ASSETS / 'two_model_catalog.csv'),
        embedder=get_embedder(),
    )
    return lr.log_table(LoggedTasks(be))


def test_one_seed_reports_the_runs_pick_and_its_regret(tab):
    r = cn.one_seed(tab, 0)
    q = ll.FullInfoQ(tab, ll.LOG_REWARD, seed=0).fit()
    q.fit_prices(ll.price_grid(q))  # as a log run fits it: the choice made
    assert (
        r['picked'] == q.choice['taken'] == q.choice['best']
    )  # the highest validated, as a run picks it ...
    assert (r['picked_one_se'], r['standard_error']) == (
        ll.pick_candidate(q.choice['values'], q.choice['fold_values'], 'one_se')[0],
        round(q.choice['se'], 4),
    )  # ... and the one-standard-error rule's
    assert r['validation'] == {k: round(float(v), 4) for k, v in q.choice['values'].items()}
    assert (
        set(r['heldout']) == set(r['validation']) and len(r['heldout']) == 11
    )  # q, 4 routers, 4 '+q', the cheapest then the Q, the cascade router
    h = r['heldout']
    assert r['best_heldout'] == max(h, key=h.get)
    assert r['regret'] == pytest.approx(h[r['best_heldout']] - h[r['picked']], abs=2e-4) and r['regret'] >= 0
    assert r['regret_one_se'] == pytest.approx(h[r['best_heldout']] - h[r['picked_one_se']], abs=2e-4)
    assert r['rank_of_pick'] == 1 + sum(v > h[r['picked']] for v in h.values())
    # the Q policy played on the held-out questions at its own calibrated prices: the pick's held-out value
    ho = np.flatnonzero(~tab.train & tab.avail.all(1))
    val = lr.decision_value(tab, ho, lambda c: q.decide(ho, c), ll.calibrate(q, lr.RATE_GRID))
    assert h[r['picked']] == pytest.approx(val, abs=1e-4)


def test_collect_writes_one_asset_from_the_reports(tmp_path, monkeypatch):
    asset = tmp_path / 'choice_noise.json'
    monkeypatch.setattr(cn, 'ASSET', asset)
    (tmp_path / 'reports').mkdir()
    for name in ('b-log', 'a-log'):
        (tmp_path / 'reports' / f'{name}.json').write_text(
            json.dumps({'log': name, 'seeds': [], 'mean_regret': 0.1})
        )
    cn.main([str(tmp_path / 'reports'), '--collect', '--machine', 'test box'])
    got = json.loads(asset.read_text())
    assert got['machine'] == 'test box' and list(got['logs']) == ['a-log', 'b-log']
    assert got['logs']['b-log']['mean_regret'] == 0.1
    (tmp_path / 'empty').mkdir()
    with pytest.raises(SystemExit, match='no reports'):
        cn.main([str(tmp_path / 'empty'), '--collect'])  # a folder with no reports: says what to run first


def test_the_shipped_asset_is_consistent():
    """Every report in chapter 18c's asset: regret = hindsight best minus pick; the pick is the validation argmax and
    'picked_one_se' (the one-standard-error rule's) within one standard error of it, with no more decisions."""
    noise = json.loads((ASSETS / 'choice_noise.json').read_text())
    assert noise['logs']
    for name, e in noise['logs'].items():
        for s in e['seeds']:
            v, h, p, one = s['validation'], s['heldout'], s['picked'], s['picked_one_se']
            assert v[p] == max(v.values()), (name, s['seed'])  # (values rounded to 4 places)
            assert v[one] >= v[p] - s['standard_error'] - 1e-4, (name, s['seed'])
            assert ll.candidate_depth(one) <= ll.candidate_depth(p), (name, s['seed'])
            assert s['regret'] == pytest.approx(max(h.values()) - h[p], abs=2e-4), (name, s['seed'])
            assert s['regret_one_se'] == pytest.approx(max(h.values()) - h[one], abs=2e-4), (name, s['seed'])
