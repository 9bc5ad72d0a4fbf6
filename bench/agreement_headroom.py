"""Where an orchestrator can pull ahead of one-shot routers on a log (issue 31): a three-call agreement cascade.

    python bench/agreement_headroom.py ../shared/data/routerbench_subset/arc_challenge_train.csv --json OUT/arc.json
    python bench/agreement_headroom.py LOG.csv --catalog CATALOG.csv --json OUT/NAME.json
    python bench/agreement_headroom.py OUT --collect     # OUT/*.json -> the asset of chapter 18c

The policy, written by hand as a careful engineer would (FrugalGPT / AutoMix style): call two cheaper specialists,
`m1` then `m2`, and return `m2`'s answer, unless a learned score sends the question on to the strongest specialist
(whose answer is then returned). The score is P(strongest right) - P(m2 right), one logistic regression per target
(`fit_logistic_lbfgs`, L2 tuned) on what a deployment sees, never a grade: the prompt's embedding and the two answers'
(their cosine, and whether it is at least 0.95: the answers agree). The share sent on is swept 0..100%. Three variants:
- `fixed`: one pair for every question, chosen among the five cheapest specialists (the strongest aside) with the L2
  by out-of-fold decision value on the training questions (5 folds);
- `prompt-only`: the same without the answers (what calling more adds without reading);
- `routed`: the pair chosen per question by the tuned prompt router that validates best (its two best predicted of
  those five: `m2` the best, `m1` the runner-up), whose predictions of `m2` and of the strongest the score also reads.

Played on the held-out questions every specialist answered (the same fifth a log run holds out), each point set by
its escalation share; every tuned router (chapter 18b, fitted as a log run fits them) is set at the same spend share
(`matched_router_calls`) and compared per question with paired bootstrap intervals (`paired_curve`). The cascade spends
at least `m1 + m2`, so it has no point below that spend share: those points are not compared. Seeded (`--seed`: the
held-out fifth's draw, the folds and the bootstrap); prints a table and wall times."""

import argparse, json, time
from collections import Counter
from typing import NamedTuple
from pathlib import Path
import numpy as np
from spindleflow_rl.core.catalog import Catalog
from spindleflow_rl.sim.backends import RecordedOutcomesBackend
from spindleflow_rl.logs.routers import LoggedTasks, fit_logistic_lbfgs, _sigmoid, at_rate
from spindleflow_rl.training.log_runs import fit_routers
import spindleflow_rl.training.logs_learning as ll
import spindleflow_rl.logs.routers as lr

SHARES = np.linspace(0.0, 1.0, 21)  # escalation shares swept
L2S = (3.0, 10.0, 30.0)
AGREE = 0.95  # answers at this cosine or above count as the same answer
VARIANTS = ('fixed', 'prompt-only', 'routed')


class Plan(NamedTuple):
    """The cascade's first two calls on questions `rows`: `m1` then `m2` (one specialist for every question, or one
    per question) and, when a prompt router chose them, its predicted qualities `P` on those questions."""

    rows: np.ndarray
    m1: np.ndarray | int
    m2: np.ndarray | int
    P: np.ndarray | None = None


def features(tab: lr.LogTable, p: Plan, agreement: bool = True) -> np.ndarray:
    """What the cascade reads after two calls: the prompt; with `agreement` the answers' cosine and whether it is at
    least 0.95; when routed, the router's predicted quality of `m2` and of the strongest."""
    cols = [tab.X[p.rows].astype(np.float64)]
    if agreement:
        a, b = tab.A[p.rows, p.m1].astype(np.float64), tab.A[p.rows, p.m2].astype(np.float64)
        cos = (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12)
        cols += [cos[:, None], (cos >= AGREE)[:, None].astype(float)]
    if p.P is not None:
        i = np.arange(len(p.rows))
        cols += [p.P[i, np.broadcast_to(p.m2, i.shape)][:, None], p.P[:, [tab.strongest]]]
    return np.hstack(cols)


def escalation_score(tab, fit: Plan, on: Plan, l2: float, agreement: bool = True) -> np.ndarray:
    """P(strongest right) - P(m2 right) on the questions of `on`, from logistic regressions fitted on those of `fit`
    (their labels only)."""
    Y = np.stack([tab.Y[fit.rows, fit.m2], tab.Y[fit.rows, tab.strongest]], 1)
    f = fit_logistic_lbfgs(features(tab, fit, agreement), Y, l2)
    P = _sigmoid(f(features(tab, on, agreement)))
    return P[:, 1] - P[:, 0]


def cascade_calls(tab, p: Plan, score: np.ndarray, share: float) -> np.ndarray:
    "`(n, 3)` calls: `m1`, `m2`, then the strongest on the top `share` of `score` (-1: stopped after two)."
    n = len(p.rows)
    esc = at_rate(score, share) if share > 0 else np.zeros(n, bool)
    m1, m2 = np.broadcast_to(p.m1, (n,)), np.broadcast_to(p.m2, (n,))
    return np.stack([m1, m2, np.where(esc, tab.strongest, -1)], 1)


def pool_of(tab, fit_rows, pool: int = 5) -> np.ndarray:
    "The `pool` cheapest specialists but the strongest, by mean cost on the fitting questions."
    cbar = tab.C[fit_rows].mean(0)
    return np.array([int(m) for m in np.argsort(cbar, kind='stable') if m != tab.strongest][:pool])


def routed_plan(rows, P, pool) -> Plan:
    "Per question, `m2` the pool's specialist the router predicts best, `m1` its runner-up (the one checked against)."
    order = np.asarray(pool)[np.argsort(-P[:, pool], axis=1, kind='stable')]
    return Plan(np.asarray(rows), order[:, 1], order[:, 0], P)


def oof_value(tab, plans: list, l2: float, agreement: bool = True) -> float:
    "Out-of-fold decision value of a cascade: `plans` is `[(fit Plan, held Plan)]` per fold of the fitting questions."
    held = Plan(
        *(
            np.concatenate([np.broadcast_to(getattr(h, k), (len(h.rows),)) for _, h in plans])
            for k in 'rows m1 m2'.split()
        )
    )
    s = np.concatenate([escalation_score(tab, f, h, l2, agreement) for f, h in plans])
    return lr.decision_value(tab, held.rows, lambda e: cascade_calls(tab, held, s, e), SHARES)


def fit_cascade(tab: lr.LogTable, fit_rows, agreement: bool = True, seed: int = 0, pool: int = 5) -> dict:
    """One pair for every question: (m1, m2) among the `pool` cheapest specialists but the strongest, and the L2,
    chosen by out-of-fold decision value on `fit_rows` (first the pair at L2 10, then the L2 for that pair)."""
    fit_rows = np.asarray(fit_rows)
    folds = lr.kfolds(len(fit_rows), 5, seed)
    cheap = [int(m) for m in pool_of(tab, fit_rows, pool)]

    def value(m1, m2, l2):
        "Out-of-fold decision value of the cascade (m1, m2) at `l2` on the fitting questions."
        plans = [(Plan(fit_rows[a], m1, m2), Plan(fit_rows[b], m1, m2)) for a, b in folds]
        return oof_value(tab, plans, l2, agreement)

    pairs = {(a, b): value(a, b, 10.0) for a in cheap for b in cheap if a != b}
    m1, m2 = max(pairs, key=pairs.get)
    l2s = {l2: (pairs[(m1, m2)] if l2 == 10.0 else value(m1, m2, l2)) for l2 in L2S}
    l2 = max(l2s, key=l2s.get)
    return {
        'm1': m1,
        'm2': m2,
        'l2': l2,
        'validation': float(l2s[l2]),
        'pairs': {f"{tab.ids[a]} -> {tab.ids[b]}": round(float(v), 4) for (a, b), v in pairs.items()},
    }


def fit_routed(tab: lr.LogTable, fit_rows, router, seed: int = 0, pool: int = 5) -> dict:
    """The pair chosen per question by a tuned prompt `router` (`routed_plan`, its predictions out of fold on the
    fitting questions) and the L2 chosen by out-of-fold decision value."""
    fit_rows = np.asarray(fit_rows)
    folds = lr.kfolds(len(fit_rows), 5, seed)
    cheap = pool_of(tab, fit_rows, pool)
    P = np.zeros((len(fit_rows), tab.M))
    for a, b in folds:
        P[b] = router.predict(router.setting, tab, fit_rows[a], fit_rows[b])
    plans = [(routed_plan(fit_rows[a], P[a], cheap), routed_plan(fit_rows[b], P[b], cheap)) for a, b in folds]
    l2s = {l2: oof_value(tab, plans, l2) for l2 in L2S}
    l2 = max(l2s, key=l2s.get)
    return {'l2': l2, 'validation': float(l2s[l2]), 'pool': cheap, 'P': P}


def headroom(tab: lr.LogTable, routers: dict, variant: str = 'fixed', seed: int = 0) -> dict:
    """Fit the cascade (`variant`: 'fixed' one pair reading both answers, 'prompt-only' one pair not reading them,
    'routed' the pair chosen per question by the best-validating prompt router) on the training questions, play it on
    the held-out ones, compare with every router, paired."""
    fit_rows = np.flatnonzero(tab.train & tab.avail.all(1))
    rows = np.flatnonzero(~tab.train & tab.avail.all(1))
    agreement = variant != 'prompt-only'
    if variant == 'routed':
        name = max((n for n in routers if not routers[n].reads_answer), key=lambda n: routers[n].val_area)
        r = routers[name]
        ch = fit_routed(tab, fit_rows, r, seed)
        fit, on = routed_plan(fit_rows, ch['P'], ch['pool']), routed_plan(rows, r.quality(rows), ch['pool'])
        pairs = Counter(f"{tab.ids[a]} -> {tab.ids[b]}" for a, b in zip(on.m1, on.m2))
        what = {'router': name, 'router_setting': str(r.setting), 'pairs_played': dict(pairs.most_common())}
    else:
        ch = fit_cascade(tab, fit_rows, agreement, seed)
        fit, on = Plan(fit_rows, ch['m1'], ch['m2']), Plan(rows, ch['m1'], ch['m2'])
        what = {'pair': [tab.ids[ch['m1']], tab.ids[ch['m2']]], 'pairs_validation': ch['pairs']}
    score = escalation_score(tab, fit, on, ch['l2'], agreement)
    calls = [cascade_calls(tab, on, score, e) for e in SHARES]
    xs = np.array([lr.spend_axis(tab, rows, c) for c in calls])
    keep = xs <= 0.995  # points past the strongest's own spend are not compared
    xs, calls = xs[keep], [c for c, k in zip(calls, keep) if k]
    Qa = np.array([lr.play_calls(tab, rows, c)[0] for c in calls])
    qc, qs = lr.ends(tab, rows)
    vs = {}
    for name, r in routers.items():
        P = r.quality(rows)
        rc = [lr.matched_router_calls(tab, r, P, rows, x) for x in xs]
        Qb = np.array([lr.play_calls(tab, rows, c)[0] for c in rc])
        xb = [lr.spend_axis(tab, rows, c) for c in rc]
        vs[name] = {**lr.paired_curve(Qa, Qb, qc, qs, xs, seed=seed), 'router_x': xb}
    return {
        'variant': variant,
        'agreement': agreement,
        **what,
        'l2': ch['l2'],
        'validation': round(ch['validation'], 4),
        'heldout': int(len(rows)),
        'x': xs.tolist(),
        'quality': Qa.mean(1).tolist(),
        'vs': vs,
    }


def verdict(v: dict) -> tuple[list, list]:
    "The points (spend share, PGR difference) where the cascade is significantly above / below a router."
    if not v['pgr_defined']:
        ci, d = v['quality_diff_ci95'], v['quality_diff']
    else:
        ci, d = v['diff_ci95'], v['diff']
    above = [(round(x, 2), round(e, 3)) for x, e, (lo, hi) in zip(v['x'], d, ci) if lo > 0]
    below = [(round(x, 2), round(e, 3)) for x, e, (lo, hi) in zip(v['x'], d, ci) if hi < 0]
    return above, below


ASSET = Path(__file__).resolve().parents[1] / 'spindleflow_rl' / 'assets' / 'agreement_headroom.json'


def collect(folder: Path, machine: str) -> None:
    "This script's JSON reports in `folder` (one per log, named by the file's stem) as the asset chapter 18c shows."
    logs = {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob('*.json'))}
    if not logs:
        raise SystemExit(
            f"no reports (*.json) in {folder}: run this script with --json {folder}/NAME.json first"
        )

    def short(v):
        "Floats to 4 decimals (the tables print 3), recursively: the asset ships inside the package."
        if isinstance(v, float):
            return round(v, 4)
        if isinstance(v, dict):
            return {k: short(x) for k, x in v.items()}
        return [short(x) for x in v] if isinstance(v, list) else v

    head = {'command': 'python bench/agreement_headroom.py', 'machine': machine, 'logs': short(logs)}
    ASSET.write_text(json.dumps(head, separators=(',', ':')))
    print(f"wrote {ASSET.name}: {', '.join(logs)}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('log', type=Path, help='a log CSV (long or RouterBench-wide format) or a folder of them')
    p.add_argument('--catalog', type=Path, default=None, help='its catalog CSV (optional for a wide log)')
    p.add_argument('--seed', type=int, default=0, help='folds and bootstrap seed')
    p.add_argument('--json', type=Path, default=None, help='write the results here')
    p.add_argument(
        '--collect', action='store_true', help='LOG is a folder of reports: write the asset of 18c'
    )
    p.add_argument('--machine', default='2-core CPU', help='with --collect: the machine, in words')
    a = p.parse_args(argv)
    if a.collect:
        return collect(a.log, a.machine)
    t0 = time.time()
    be = RecordedOutcomesBackend.from_file(
        a.log, Catalog.from_file(a.catalog) if a.catalog else None, quiet=True, seed=a.seed
    )
    tab = lr.log_table(LoggedTasks(be))
    if tab.M < 3:
        raise SystemExit(f"{a.log}: {tab.M} specialists; a three-call cascade needs at least three.")
    if not tab.text.all():
        raise SystemExit(f"{a.log}: answers are not logged for every specialist; the cascade reads them.")
    routers, _ = fit_routers(tab, seed=a.seed)
    print(
        f"{a.log.name}: {tab.M} specialists, {len(tab.task_ids)} questions; routers fitted {time.time() - t0:.0f}s"
    )
    out = {'log': a.log.name, 'specialists': tab.ids, 'runs': []}
    for variant in VARIANTS:
        t = time.time()
        r = headroom(tab, routers, variant, a.seed)
        r['seconds'] = round(time.time() - t, 1)
        out['runs'].append(r)
        if variant == 'routed':
            how = f"the pair chosen per question by the {r['router']} router ({len(r['pairs_played'])} pairs played)"
        else:
            how = f"{r['pair'][0]} -> {r['pair'][1]}" + (
                ' (answers unread)' if variant == 'prompt-only' else ''
            )
        print(
            f"\n{variant}: {how}, then {tab.ids[tab.strongest]}; L2 {r['l2']}; validation {r['validation']:.3f}; "
            f"{r['seconds']}s"
        )
        print('  spend share ' + ' '.join(f"{x:5.2f}" for x in r['x']))
        print('  quality     ' + ' '.join(f"{q:5.3f}" for q in r['quality']))
        for name, v in r['vs'].items():
            above, below = verdict(v)
            print(
                f"  vs {name:8s} APGR diff {v['apgr_diff']:+.3f} "
                f"[{v['apgr_diff_ci95'][0]:+.3f}, {v['apgr_diff_ci95'][1]:+.3f}] over these points; "
                f"significantly above at {above or 'none'}; below at {below or 'none'}"
            )
    out['seconds'] = round(time.time() - t0, 1)
    print(f"\n{out['seconds']} s")
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(out, indent=1))


if __name__ == '__main__':
    main()
