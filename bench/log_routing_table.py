"""The routing tables of chapter 18b: the learned policy against every tuned router on three synthetic logs.

    nice -n 10 python bench/log_routing_table.py --out /tmp/log_routing            # all three logs, 3000 questions, seed 1
    python bench/log_routing_table.py --logs two --n 1000 --no-asset                 # one log, smaller

For each log (`two`: chapter 18's two-model log with the cheap model's answers; `two-noans`: the same without any
answer text; `multi`: chapter 18a's four-model log) it writes the log and catalog as CSV, loads them as
`spindleflow-train --backend recorded` does (MiniLM embeddings, a fifth of the questions held out), fits the routers
and the full-information Q on the training questions, distils the Q policy into the project's policy network, plays
the network (and the Q policy) once on every held-out question at prices calibrated on the training questions to
strong-call rates (two models) or spend shares (more) of 5%, 10%, ..., 95%, and sets every router against each point
at the same rate / spend, with paired bootstrap intervals. Prints the tables and wall times (on a shared machine they
are noisy) and writes a JSON report (and, unless --no-asset, `spindleflow_rl/assets/log_routing_tables.json`, which
chapter 18b shows). Seeded."""

import argparse, json, time
from pathlib import Path
import numpy as np

ASSET = Path(__file__).resolve().parents[1] / 'spindleflow_rl' / 'assets' / 'log_routing_tables.json'
COLS = ['id', 'role', 'domain', 'cost', 'latency', 'reliability', 'capability']


def write_log(name: str, n: int, seed: int, out: Path):
    from spindleflow_rl.logs.routers import make_two_model_log, write_csv, TWO_MODEL_CATALOG
    from spindleflow_rl.logs.multi_model_log import make_multi_model_log, MULTI_MODEL_CATALOG

    if name == 'multi':
        rows, cat = make_multi_model_log(n, seed), MULTI_MODEL_CATALOG
    else:
        rows, cat = make_two_model_log(n, seed), TWO_MODEL_CATALOG
        if name == 'two-noans':
            rows = [{**r, 'response': ''} for r in rows]
    d = out / name
    d.mkdir(parents=True, exist_ok=True)
    return write_csv(rows, d / 'log.csv'), write_csv(cat, d / 'catalog.csv', COLS)


def run(
    name: str, n: int, seed: int, out: Path, episodes: int, epochs: int, dagger: int, scorer: str = 'q'
) -> dict:
    from spindleflow_rl.sim.backends import RecordedOutcomesBackend
    from spindleflow_rl.core.catalog import Catalog
    from spindleflow_rl.core.config import ConfigError
    from spindleflow_rl.agent.policies import ModelPolicy
    import spindleflow_rl.training.logs_learning as ll
    import spindleflow_rl.logs.routers as lr

    T = {}
    t = time.time()
    log, cat = write_log(name, n, seed, out)
    be = RecordedOutcomesBackend.from_file(log, Catalog.from_file(cat), quiet=False)
    T['load_and_embed'] = time.time() - t
    t = time.time()
    fit = ll.train_from_log(
        be, seed, episodes, epochs, dagger, progress=True, scorer=scorer != 'none', carry_q=scorer == 'q'
    )
    T.update(fit['seconds'])
    tab, q, model = fit['table'], fit['q'], fit['model']
    tr = np.flatnonzero(tab.train)
    print(
        f"{name}: {tab.ids}, {len(tr)} training / {tab.n - len(tr)} held-out questions; cost_coef range "
        f"{fit['cost_coef_range']}",
        flush=True,
    )
    routers, skipped = {}, {}
    for R in (lr.KNNQuality, lr.GainRouter, lr.MFRouter, lr.CascadeRouter):
        t = time.time()
        try:
            routers[R.name] = R().fit(tab, tr, seed=seed)
        except ConfigError as e:
            skipped[R.name] = str(e)
            print(f"  {R.name}: {e}")
            continue
        T[f'router_{R.name}'] = time.time() - t
        print(
            f"  {R.name}: {routers[R.name].setting} {routers[R.name].kind or ''} (validation area "
            f"{routers[R.name].val_area:.3f})",
            flush=True,
        )
    prices = ll.calibrate(q, lr.RATE_GRID)
    t = time.time()
    rep = ll.routing_report(
        tab, be, {'policy': ModelPolicy(model), 'q-policy': ll.QPolicy(q)}, prices, routers, seed
    )
    T['evaluate'] = time.time() - t
    calls = rep.pop('calls')
    rep['agreement'] = [
        ll.agreement(np.array(a), np.array(b)) for a, b in zip(calls['policy'], calls['q-policy'])
    ]
    rep['agreement_strong'] = [
        ll.agreement(np.array(a), np.array(b), tab.strongest)
        for a, b in zip(calls['policy'], calls['q-policy'])
    ]
    axis = 'strong-call rate' if tab.M == 2 else 'spend share'
    rep.update(
        log=name,
        specialists=tab.ids,
        n_questions=tab.n,
        n_train=int(len(tr)),
        axis=axis,
        skipped=skipped,
        cost_coef_range=list(fit['cost_coef_range']),
        target_points=lr.RATE_GRID.tolist(),
        prices=prices.tolist(),
        distil=fit['distil'],
        settings={k: [str(r.setting), r.kind] for k, r in routers.items()},
        stack=q.summary(),
        seconds={k: round(v, 1) for k, v in T.items()},
    )
    for who in ('policy', 'q-policy'):
        print(f"\n### {name}: {who} vs routers ({rep['questions']} held-out questions, by {axis})\n")
        print(ll.routing_markdown(rep, who, axis))
    print(
        '\nagreement of the network with the Q policy (same calls):', np.round(rep['agreement'], 2).tolist()
    )
    print('seconds:', rep['seconds'], flush=True)
    return rep


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--out', default='/tmp/log_routing')
    ap.add_argument('--logs', default='two,two-noans,multi')
    ap.add_argument('--n', type=int, default=3000)
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--episodes', type=int, default=6000)
    ap.add_argument('--epochs', type=int, default=40)
    ap.add_argument('--dagger', type=int, default=2)
    ap.add_argument('--no-asset', action='store_true')
    ap.add_argument(
        '--scorer',
        choices=('q', 'stack', 'none'),
        default='q',
        help="the network's run-time scorer: the stack's probabilities and the Q's values (q, the default), "
        "the probabilities only (stack), none (the embeddings alone): the ablations of chapter 18b",
    )
    a = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    reports = {}
    for name in a.logs.split(','):
        reports[name] = run(name, a.n, a.seed, out, a.episodes, a.epochs, a.dagger, a.scorer)
        (out / 'log_routing_tables.json').write_text(json.dumps(reports, indent=1))
    if not a.no_asset:
        res = {
            'command': f"bench/log_routing_table.py --logs {a.logs} --n {a.n} --seed {a.seed} --episodes {a.episodes} "
            f"--epochs {a.epochs} --dagger {a.dagger} --scorer {a.scorer}",
            'reports': reports,
        }
        ASSET.write_text(json.dumps(res, indent=1))
        print('wrote', ASSET)


if __name__ == '__main__':
    main()
