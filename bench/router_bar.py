"""Issue 19's per-point bar applied to the routers themselves: each tuned router, played as if it were the policy, against
the other three, on the synthetic logs of chapter 18b (3,000 questions, seed 1, a fifth held out).

    nice -n 10 python bench/router_bar.py --out /tmp/router_bar          # all three logs (a few minutes)

The bar: at every point (strong-call rates 5%, 10%, ..., 95% with two specialists; spend shares with more) the
candidate's PGR is at least the best *other* router's minus 0.02, with the paired 95% interval's upper end >= 0. A
router that fails it against methods no better than itself shows how much of a per-point miss is noise: with 627
held-out questions a point's paired interval is about +/-0.03 to +/-0.08 wide, and "the best of three at each point"
picks up whatever noise favours one of them there. Prints each router's failing points and its APGR. Seeded.

On the two-model logs it also plays an **oracle**: escalation ranked by the generator's hidden probabilities
(`make_two_model_log(..., hidden=True)`: strong-minus-cheap probability of a right answer), the best any router can do
in expectation, since the cheap answer's wording depends on those probabilities and on noise, not on the drawn grade.
No deployable policy can know them; the oracle only shows whether the bar can be met on these held-out questions at all."""

import argparse, sys, time
from pathlib import Path
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from log_routing_table import write_log
from log_runs_collect import criteria


def bar(name: str, n: int, seed: int, out: Path) -> dict:
    from spindleflow_rl.sim.backends import RecordedOutcomesBackend
    from spindleflow_rl.core.catalog import Catalog
    from spindleflow_rl.core.config import ConfigError
    import spindleflow_rl.training.logs_learning as ll
    import spindleflow_rl.logs.routers as lr

    log, cat = write_log(name, n, seed, out)
    be = RecordedOutcomesBackend.from_file(log, Catalog.from_file(cat))
    tab = lr.log_table(ll.LoggedTasks(be))
    tr, rows = np.flatnonzero(tab.train), np.flatnonzero(~tab.train)
    qc, qs = lr.ends(tab, rows)
    routers = {}
    for R in (lr.KNNQuality, lr.GainRouter, lr.MFRouter, lr.CascadeRouter):
        try:
            routers[R.name] = R().fit(tab, tr, seed=seed)
        except ConfigError:
            pass  # the cascade on a log without answers
    P = {k: r.quality(rows) for k, r in routers.items()}
    calls = lambda k, x: lr.matched_router_calls(
        tab, routers[k], P[k], rows, x
    )  # at rate x (two models) / spend share x
    qual = lambda k, xs: np.array([lr.play_calls(tab, rows, calls(k, x))[0] for x in xs])
    out_ = {}
    for k in routers:
        xs = np.array([lr.spend_axis(tab, rows, calls(k, x)) for x in lr.RATE_GRID])
        Qa = qual(k, lr.RATE_GRID)
        cmp = {o: lr.paired_curve(Qa, qual(o, xs), qc, qs, xs, seed=seed) for o in routers if o != k}
        c = criteria(
            {'policies': {'policy': {'x': xs.tolist(), 'vs': cmp}}}
        )  # the bar, as the README runs are judged
        fails = [
            (round(float(f['x']), 2), f['best'], round(f['diff'], 3), [round(float(v), 3) for v in f['ci']])
            for f in c['failing_points']
        ]
        apgr = c['apgr_policy']
        out_[k] = {'apgr': apgr, 'fails': fails}
        print(
            f"{name}: {k:8s} APGR {apgr:.3f}; fails the bar against the other routers at {len(fails)} of {len(xs)} "
            f"points: {fails}",
            flush=True,
        )
    if tab.M == 2:  # the oracle: the hidden probabilities, against every router
        from spindleflow_rl.logs.routers import make_two_model_log, at_rate

        hid = {
            (r['task'], r['specialist_id']): r['p_right'] for r in make_two_model_log(n, seed, hidden=True)
        }
        text = {t.id: t.text for t in be.world.bank.tasks()}
        p = lambda m: np.array([hid[(text[tab.task_ids[i]], tab.ids[m])] for i in rows])
        gain, c, s = p(tab.strongest) - p(tab.cheapest), tab.cheapest, tab.strongest
        xs = np.array([round(x * len(rows)) / len(rows) for x in lr.RATE_GRID])
        Qa = np.array(
            [
                lr.play_calls(
                    tab, rows, np.stack([np.where(at_rate(gain, x), s, c), np.full(len(rows), -1)], 1)
                )[0]
                for x in xs
            ]
        )
        cmp = {o: lr.paired_curve(Qa, qual(o, xs), qc, qs, xs, seed=seed) for o in routers}
        c_ = criteria({'policies': {'policy': {'x': xs.tolist(), 'vs': cmp}}})
        fails = [
            (round(float(f['x']), 2), f['best'], round(f['diff'], 3), [round(float(v), 3) for v in f['ci']])
            for f in c_['failing_points']
        ]
        out_['oracle'] = {'apgr': c_['apgr_policy'], 'fails': fails, 'apgr_routers': c_['apgr']}
        print(
            f"{name}: oracle   APGR {c_['apgr_policy']:.3f} (routers at its points: "
            + ', '.join(f"{k} {v:.3f}" for k, v in c_['apgr'].items())
            + f"); fails the bar against the routers at {len(fails)} of {len(xs)} points: {fails}",
            flush=True,
        )
    return out_


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--out', default='/tmp/router_bar')
    ap.add_argument('--logs', default='two,two-noans,multi')
    ap.add_argument('--n', type=int, default=3000)
    ap.add_argument('--seed', type=int, default=1)
    a = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    t = time.time()
    for name in a.logs.split(','):
        bar(name, a.n, a.seed, out)
    print(f"({time.time() - t:.0f}s)")


if __name__ == '__main__':
    main()
