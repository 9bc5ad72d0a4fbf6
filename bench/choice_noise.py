"""What choosing by validation costs (issue 31, item 2): the fitted Q picks what it plays (its own decisions, or a
prompt router it contains, alone or followed by its second call) by out-of-fold decision value on the training
questions. Here every candidate is also played on the held-out questions, to see how far the validated pick falls from
the best candidate in hindsight.

    python bench/choice_noise.py LOG.csv [--catalog CATALOG.csv] [--seeds 0 1 2] [--json OUT.json]
    python bench/choice_noise.py ../shared/data/routerbench_subset/winograde_train.csv --json OUT/winogrande.json
    python bench/choice_noise.py OUT --collect      # OUT/*.json -> spindleflow_rl/assets/choice_noise.json (18c)

The log is read as `spindleflow-train --backend recorded` reads it (MiniLM embeddings, the same held-out fifth). For
each seed of the Q's folds: each candidate's validation value (out of fold, what `choose` saw) and held-out value (the
area under its cost-quality curve on the held-out questions, on PGR's scale, at prices calibrated on the training
questions to strong-call rates or spend shares 5%..95%; each tuned router's on the same questions, for scale), the pick,
and the regret: the best held-out value minus the pick's (the run's pick, the highest validation value, and the
one-standard-error rule's, `choose(rule='one_se')`, an option). The hindsight best is chosen on the
held-out questions themselves, so the regret is an upper bound on what a better choice rule could recover on this
split. Seeded; prints a table and wall times."""

import argparse, copy, json, time
from pathlib import Path
import numpy as np
from spindleflow_rl.core.catalog import Catalog
from spindleflow_rl.sim.backends import RecordedOutcomesBackend
from spindleflow_rl.logs.routers import LoggedTasks
from spindleflow_rl.training.log_runs import fit_routers
import spindleflow_rl.training.logs_learning as ll
import spindleflow_rl.logs.routers as lr


def heldout_value(q: ll.FullInfoQ, tab: lr.LogTable, rows: np.ndarray) -> float:
    "Area under `q`'s curve on held-out `rows`, at the prices that put it at 5%..95% on its training questions."
    prices = ll.calibrate(q, lr.RATE_GRID)
    return lr.decision_value(tab, rows, lambda c: q.decide(rows, c), prices)


def one_seed(tab: lr.LogTable, seed: int) -> dict:
    "Fit the Q with fold seed `seed`; every candidate's validation and held-out value; the pick and its regret."
    t0 = time.time()
    base = ll.FullInfoQ(tab, ll.LOG_REWARD, seed=seed).fit()
    base.fit_prices(ll.price_grid(base), choose=False)
    picked = copy.deepcopy(base).choose()  # the run's rule (the highest validation value, chapter 18b)
    ch = picked.choice
    val, pick = ch['values'], ch['taken']
    alt = ll.pick_candidate(val, ch['fold_values'], 'one_se')[0]  # the one-standard-error rule's (an option)
    ho = np.flatnonzero(~tab.train & tab.avail.all(1))  # held-out questions every model answered
    test = {}
    for name in val:
        q = copy.deepcopy(base).take(name)
        test[name] = heldout_value(q, tab, ho)
    best = max(test, key=test.get)
    return {
        'seed': seed,
        'picked': pick,
        'picked_one_se': alt,
        'standard_error': round(float(ch['se']), 4),
        'best_heldout': best,
        'validation': {k: round(float(v), 4) for k, v in val.items()},
        'heldout': {k: round(float(v), 4) for k, v in test.items()},
        'regret': round(float(test[best] - test[pick]), 4),
        'regret_one_se': round(float(test[best] - test[alt]), 4),
        'rank_of_pick': int(sorted(test.values(), reverse=True).index(test[pick]) + 1),
        'seconds': round(time.time() - t0, 1),
    }


ASSET = Path(__file__).resolve().parents[1] / 'spindleflow_rl' / 'assets' / 'choice_noise.json'


def collect(folder: Path, machine: str) -> None:
    "This script's JSON reports in `folder` (one per log, named by the file's stem) as the asset chapter 18c shows."
    logs = {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob('*.json'))}
    if not logs:
        raise SystemExit(
            f"no reports (*.json) in {folder}: run this script with --json {folder}/NAME.json first"
        )
    ASSET.write_text(
        json.dumps({'command': 'python bench/choice_noise.py', 'machine': machine, 'logs': logs}, indent=1)
    )
    print(f"wrote {ASSET.name}: {', '.join(logs)}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('log', type=Path, help='a log CSV (long or RouterBench-wide format) or a folder of them')
    p.add_argument('--catalog', type=Path, default=None, help='its catalog CSV (optional for a wide log)')
    p.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2], help="the Q's fold seeds")
    p.add_argument('--json', type=Path, default=None, help='write the results here')
    p.add_argument(
        '--collect', action='store_true', help='LOG is a folder of reports: write the asset of 18c'
    )
    p.add_argument('--machine', default='2-core CPU', help='with --collect: the machine, in words')
    a = p.parse_args(argv)
    if a.collect:
        return collect(a.log, a.machine)
    t0 = time.time()
    cat = Catalog.from_file(a.catalog) if a.catalog else None
    be = RecordedOutcomesBackend.from_file(a.log, cat, quiet=False)
    tab = lr.log_table(LoggedTasks(be))
    print(
        f"{a.log.name}: {tab.M} specialists, {int(tab.train.sum())} training / {int((~tab.train).sum())} held out"
    )
    out = {'log': str(a.log.name), 'specialists': tab.ids, 'seeds': []}
    ho = np.flatnonzero(~tab.train & tab.avail.all(1))
    routers, _ = fit_routers(tab, seed=0)  # the tuned routers, as a log run fits them
    out['routers_heldout'] = {k: round(float(r.area(tab, ho, r.quality(ho))), 4) for k, r in routers.items()}
    print('tuned routers, held-out value:', out['routers_heldout'])
    for s in a.seeds:
        r = one_seed(tab, s)
        out['seeds'].append(r)
        print(
            f"\nfold seed {s}: picked {r['picked']} (the one-standard-error rule: {r['picked_one_se']}, one standard "
            f"error {r['standard_error']:.4f}), best held out {r['best_heldout']}, regret {r['regret']:+.4f} "
            f"(the rule's {r['regret_one_se']:+.4f})"
        )
        print(f"  {'candidate':<14}{'validation':>11}{'held out':>10}")
        for k in sorted(r['heldout'], key=r['heldout'].get, reverse=True):
            mark = (' <- picked' if k == r['picked'] else '') + (
                ' <- one-standard-error rule' if k == r['picked_one_se'] else ''
            )
            print(f"  {k:<14}{r['validation'][k]:>11.4f}{r['heldout'][k]:>10.4f}{mark}")
    reg = [r['regret'] for r in out['seeds']]
    out['mean_regret'] = round(float(np.mean(reg)), 4)
    out['mean_regret_one_se'] = round(float(np.mean([r['regret_one_se'] for r in out['seeds']])), 4)
    out['seconds'] = round(time.time() - t0, 1)
    print(
        f"\nmean regret over {len(reg)} fold seeds: {out['mean_regret']:+.4f} (the one-standard-error rule: "
        f"{out['mean_regret_one_se']:+.4f}); {out['seconds']} s"
    )
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))


if __name__ == '__main__':
    main()
