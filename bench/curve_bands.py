"""Point by point, or over the whole curve: where a log run's policy is significantly below / above each router in
`spindleflow-eval --sweep` reports, read two ways (chapter 18's `simultaneous_band`): each point's own paired 95%
interval, and the simultaneous 95% band over the sweep's points. Writes `spindleflow_rl/assets/curve_bands.json`
(chapter 18c shows it) unless --no-asset.

    python bench/curve_bands.py rb-arc=/tmp/real_log_runs/arc_challenge_train/runs/run/sweep.json ... [--machine TEXT]

Each argument is NAME=PATH of a sweep.json written by this release (with `diff_band95`); the sweeps come from
`bench/real_log_runs.sh` and `bench/log_runs_readme.sh` (their run folders keep sweep.json)."""

import argparse, json, sys
from pathlib import Path

ASSET = Path(__file__).resolve().parents[1] / 'spindleflow_rl' / 'assets' / 'curve_bands.json'


def read(path: Path) -> dict:
    "One sweep's policy against each router: APGR difference, and the points below / above, per point and by band."
    s = json.loads(path.read_text())
    pol = s['policies']['policy']
    out = {'questions': s['questions'], 'axis': s['axis'], 'points': len(pol['x']), 'routers': {}}
    for n, v in pol['vs'].items():
        if not v.get('diff_band95'):
            sys.exit(
                f"{path}: no simultaneous band in this sweep; re-run spindleflow-eval --sweep with this release."
            )

        def at(key, below):
            "The points whose interval `key` lies wholly below (or above) zero."
            return [round(x, 4) for x, (lo, hi) in zip(v['x'], v[key]) if (hi < 0 if below else lo > 0)]

        out['routers'][n] = {
            'apgr_policy': v['apgr_a'],
            'apgr_router': v['apgr_b'],
            'apgr_diff': v['apgr_diff'],
            'apgr_diff_ci95': v['apgr_diff_ci95'],
            'band_k': v['band_k'],
            'point_below': at('diff_ci95', True),
            'point_above': at('diff_ci95', False),
            'band_below': at('diff_band95', True),
            'band_above': at('diff_band95', False),
        }
    return out


def lines(res: dict) -> list:
    out = []
    for name, e in res['logs'].items():
        out.append(f"{name} ({e['questions']} held-out questions, {e['points']} points, by {e['axis']})")
        for n, r in e['routers'].items():
            f = lambda xs: ', '.join(f'{x:.2f}' for x in xs) or 'none'  # noqa: E731
            out.append(
                f"  vs {n:8s} APGR {r['apgr_policy']:.3f} - {r['apgr_router']:.3f} = {r['apgr_diff']:+.3f}; "
                f"per point below at {f(r['point_below'])}, above at {f(r['point_above'])}; "
                f"band (x{r['band_k']:.2f}) below at {f(r['band_below'])}, above at {f(r['band_above'])}"
            )
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('sweeps', nargs='+', metavar='NAME=PATH')
    ap.add_argument('--machine', default='2-core CPU')
    ap.add_argument('--no-asset', action='store_true')
    a = ap.parse_args(argv)
    res = {'command': 'python bench/curve_bands.py NAME=RUN/sweep.json ...', 'machine': a.machine, 'logs': {}}
    for item in a.sweeps:
        name, _, path = item.partition('=')
        if not path:
            sys.exit(f"{item!r}: give NAME=PATH of a sweep.json.")
        res['logs'][name] = read(Path(path))
    print('\n'.join(lines(res)))
    if not a.no_asset:
        ASSET.write_text(json.dumps(res, indent=1))
        print('wrote', ASSET)


if __name__ == '__main__':
    main()
