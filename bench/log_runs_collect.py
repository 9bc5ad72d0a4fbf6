"""Gather what `bench/log_runs_readme.sh` measured into `spindleflow_rl/assets/log_runs_readme.json` (chapter 18c and
the README show it): for each log, the run's sizes, training range, price and seconds (log_learning.json), the
evaluation's routing section at the run's price (eval.json), the 19-point sweep (sweep.json) and the wall times the
script printed.

    python bench/log_runs_collect.py /tmp/log_runs /tmp/log_runs_bench.txt ["2-core CPU, each command alone"] [ASSET]

The optional third argument describes the machine (default: a shared 2-core CPU, timings noisy); the fourth names the
asset to write (default log_runs_readme.json; the real-like pair of chapter 18a: real_like_runs.json)."""

import json, re, sys
from pathlib import Path

ASSET = Path(__file__).resolve().parents[1] / 'spindleflow_rl' / 'assets' / 'log_runs_readme.json'


def criteria(sw: dict) -> dict:
    """Issue 19's bar, read off a sweep: at every point the policy's PGR is at least the best router's there minus 0.02
    with the paired interval's upper end >= 0; significantly above kNN somewhere; APGR at least every router's."""
    pol = sw['policies']['policy']
    vs = pol['vs']
    n = len(pol['x'])
    worst = []
    for i in range(n):
        best = max(vs, key=lambda r: vs[r]['pgr_b'][i])
        v = vs[best]
        worst.append(
            {
                'x': pol['x'][i],
                'best': best,
                'diff': v['diff'][i],
                'ci': v['diff_ci95'][i],
                'ok': v['diff'][i] >= -0.02 and v['diff_ci95'][i][1] >= 0,
            }
        )
    return {
        'every_point': all(w['ok'] for w in worst),
        'failing_points': [w for w in worst if not w['ok']],
        'above_knn_at': [pol['x'][i] for i in range(n) if 'knn' in vs and vs['knn']['diff_ci95'][i][0] > 0],
        'apgr_policy': next(iter(vs.values()))['apgr_a'],
        'apgr': {r: v['apgr_b'] for r, v in vs.items()},
        'apgr_at_least_every_router': all(v['apgr_diff'] >= 0 for v in vs.values()),
    }


def main(argv=None):
    argv = argv if argv is not None else sys.argv[1:]
    out, times = Path(argv[0]), Path(argv[1]).read_text()
    machine = (
        argv[2] if len(argv) > 2 else '2-core CPU, shared (timings are noisy)'
    )  # say so when the commands ran alone
    res = {
        'command': 'bash bench/log_runs_readme.sh OUT',
        'machine': machine,
        'logs': {},
    }  # paths below: relative to OUT
    for d in sorted(p for p in out.iterdir() if (p / 'runs' / 'run' / 'log_learning.json').exists()):
        run = d / 'runs' / 'run'
        info = json.loads((run / 'log_learning.json').read_text())
        ev = json.loads((run / 'eval.json').read_text())
        entry = {
            'sizes': info['sizes'],
            'cost_coef_range': info['cost_coef_range'],
            'price': info['price'],
            'price_why': info['price_why'],
            'train_seconds': info['seconds'],
            'distil': info['distil'],
            'logged': {k: v for k, v in ev['logged'].items() if k not in ('markdown',)},
            'wall_s': {
                m.group(2): int(m.group(3))
                for m in re.finditer(rf"^({re.escape(d.name)}): (.+?) (\d+)s$", times, re.M)
            },
        }
        if (run / 'sweep.json').exists():
            entry['sweep'] = json.loads((run / 'sweep.json').read_text())
            entry['criteria'] = criteria(entry['sweep'])
            ck = Path(entry['sweep'].get('checkpoint', ''))
            if ck.is_absolute() and ck.is_relative_to(out.resolve()):
                entry['sweep']['checkpoint'] = str(ck.relative_to(out.resolve()))
        if (run / 'sweep12.json').exists():
            entry['sweep12_seconds'] = json.loads((run / 'sweep12.json').read_text())['seconds']
        res['logs'][d.name] = entry
    asset = ASSET.with_name(argv[3]) if len(argv) > 3 else ASSET
    if len(argv) > 3:
        res['command'] = f'LOGS="{" ".join(res["logs"])}" bash bench/log_runs_readme.sh OUT'
    asset.write_text(json.dumps(res, indent=1))
    print('wrote', asset, list(res['logs']))


if __name__ == '__main__':
    main()
