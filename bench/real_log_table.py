"""The fitted Q policy against every tuned router on a real multi-model log (RouterBench's wide CSVs, read as they are).

    nice -n 5 python bench/real_log_table.py                                   # ../shared/data/routerbench_subset: each file, then all
    python bench/real_log_table.py --logs arc_challenge_train.csv --no-asset   # one file
    python bench/real_log_table.py --logs arc_challenge_train.csv --truncate --no-asset   # ablation: MiniLM's own truncation
    python bench/real_log_table.py --q-calls 3 --no-asset --out /tmp/q3.json   # the Q with its third decision

For each log it loads the CSV(s) as `spindleflow-train --backend recorded --recorded PATH` does with every default (no
catalog: one made from the log; a fifth of the questions held out; MiniLM embeddings of each text's head and tail), fits
the routers (kNN, gain, MF, cascade) and the full-information Q on the training questions, plays the Q policy once on
every held-out question at prices calibrated on the training questions to spend shares 5%, 10%, ..., 95%, and sets
every router at each point's spend share, with paired bootstrap intervals (`paired_curve`). The Q policy here is the
numpy teacher the network is distilled from (chapter 18b), not the network. `--truncate` embeds texts as MiniLM cuts
them (their first 256 word pieces), in a cache of its own. Prints the tables and wall times; writes a JSON report
(and, unless --no-asset, `spindleflow_rl/assets/real_log_tables.json`, which chapter 18c shows). Seeded."""

import argparse, json, os, sys, tempfile, time
from pathlib import Path
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / 'shared' / 'data' / 'routerbench_subset'
ASSET = ROOT / 'spindleflow_rl' / 'assets' / 'real_log_tables.json'
LOGS = ('arc_challenge_train.csv', 'mbpp_train.csv', 'winograde_train.csv', 'all')


def run(path: Path, seed: int, q_calls: int = 2) -> dict:
    from spindleflow_rl.sim.backends import RecordedOutcomesBackend
    from spindleflow_rl.core.config import ConfigError
    from spindleflow_rl.logs.routers import LoggedTasks
    import spindleflow_rl.training.logs_learning as ll
    import spindleflow_rl.logs.routers as lr

    T = {}
    t = time.time()
    be = RecordedOutcomesBackend.from_file(path, None, quiet=True, seed=seed)
    tab = lr.log_table(LoggedTasks(be))
    T['load_and_embed'] = time.time() - t
    fit_rows, rows = np.flatnonzero(tab.train & tab.avail.all(1)), np.flatnonzero(~tab.train)
    t = time.time()
    q = ll.FullInfoQ(tab, ll.LOG_REWARD, seed=seed, max_calls=q_calls).fit()
    q.fit_prices(ll.price_grid(q))
    T['fit_q'] = time.time() - t
    routers = {}
    for R in (lr.KNNQuality, lr.GainRouter, lr.MFRouter, lr.CascadeRouter):
        t = time.time()
        try:
            routers[R.name] = R().fit(tab, fit_rows, seed=seed)
        except ConfigError as e:
            print(f"  {R.name}: skipped: {e}")
            continue
        T[f'router_{R.name}'] = time.time() - t
    t = time.time()
    prices = ll.calibrate(q, lr.RATE_GRID)
    qc, qs = lr.ends(tab, rows)
    calls = [q.decide(rows, c) for c in prices]
    xs = np.array([lr.spend_axis(tab, rows, c) for c in calls])
    keep = (xs > 0.005) & (xs < 0.995)
    Qp = np.array([lr.play_calls(tab, rows, c)[0] for c in calls])[keep]
    vs = {}
    for n, r in routers.items():
        P = r.quality(rows)
        rc = [lr.matched_router_calls(tab, r, P, rows, x) for x in xs[keep]]
        vs[n] = {
            **lr.paired_curve(
                Qp, np.array([lr.play_calls(tab, rows, c)[0] for c in rc]), qc, qs, xs[keep], seed=seed
            ),
            'setting': str(r.setting),
            'validation_area': float(r.val_area),
        }
    T['evaluate'] = time.time() - t
    per_model = {
        s: {'quality': float(tab.Y[rows, m].mean()), 'cost_usd': float(tab.C[rows, m].mean())}
        for m, s in enumerate(tab.ids)
    }
    return {
        'questions': int(tab.n),
        'fitting': int(len(fit_rows)),
        'heldout': int(len(rows)),
        'specialists': list(tab.ids),
        'cheapest': tab.ids[tab.cheapest],
        'strongest': tab.ids[tab.strongest],
        'per_model': per_model,
        'q': q.summary(),
        'prices': prices.tolist(),
        'x': xs.tolist(),
        'vs': vs,
        'seconds': {k: round(v, 1) for k, v in T.items()},
    }


def summary(name: str, r: dict) -> list:
    out = [
        f"{name}: {r['questions']:,} questions x {len(r['specialists'])} models, {r['fitting']:,} fitted / "
        f"{r['heldout']:,} held out; "
        f"cheapest {r['cheapest']}, strongest {r['strongest']}; seconds {r['seconds']}",
        f"  the Q took {r['q']['taken']!r} (validation values {r['q']['validation_values']})",
    ]
    for n, v in r['vs'].items():
        below = [f"{x:.2f}" for x, (lo, hi) in zip(v['x'], v['diff_ci95']) if hi < 0]
        above = [f"{x:.2f}" for x, (lo, hi) in zip(v['x'], v['diff_ci95']) if lo > 0]
        b_below = [f"{x:.2f}" for x, (lo, hi) in zip(v['x'], v['diff_band95']) if hi < 0]
        b_above = [f"{x:.2f}" for x, (lo, hi) in zip(v['x'], v['diff_band95']) if lo > 0]
        out.append(
            f"  Q policy APGR {v['apgr_a']:.3f} vs {n} {v['apgr_b']:.3f}: {v['apgr_diff']:+.3f} "
            f"[{v['apgr_diff_ci95'][0]:+.3f}, "
            f"{v['apgr_diff_ci95'][1]:+.3f}]; significantly below at {below or 'no point'}, above at "
            f"{above or 'no point'}; band (whole curve): below at {b_below or 'no point'}, above at "
            f"{b_above or 'no point'}"
        )
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--data', default=str(DATA))
    ap.add_argument('--logs', default=','.join(LOGS))
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--truncate', action='store_true')
    ap.add_argument('--out', default='')
    ap.add_argument('--no-asset', action='store_true')
    ap.add_argument(
        '--q-calls',
        type=int,
        default=2,
        choices=(2, 3),
        help="the Q's calls per question (3: a third decision reading whether two answers agree)",
    )
    a = ap.parse_args(argv)
    data = Path(a.data)
    if not data.exists():
        sys.exit(f"{data}: no such folder; pass --data with RouterBench's wide CSVs.")
    if a.truncate:  # the ablation: MiniLM's own cut, cached apart from the head-and-tail vectors
        import spindleflow_rl.sim.backends as b

        os.environ['SPINDLEFLOW_CACHE'] = tempfile.mkdtemp()
        b.head_and_tail = lambda texts, embedder: list(texts)
    args = [
        x for x in (argv if argv is not None else sys.argv[1:]) if not x.startswith('--out') and x != a.out
    ]
    res = {
        'command': ' '.join(['python bench/real_log_table.py'] + args),  # no output path: it may be absolute
        'embedding': 'truncated (first 256 word pieces)' if a.truncate else 'head and tail',
        'seed': a.seed,
        'logs': {},
    }
    for name in a.logs.split(','):
        t = time.time()
        r = run(data if name == 'all' else data / name, a.seed, a.q_calls)
        r['wall_s'] = round(time.time() - t, 1)
        res['logs'][name] = r
        print('\n'.join(summary(name, r)), flush=True)
    text = json.dumps(res, indent=1)
    if a.out:
        Path(a.out).write_text(text)
    if not a.no_asset:
        ASSET.write_text(text)
        print('wrote', ASSET)


if __name__ == '__main__':
    main()
