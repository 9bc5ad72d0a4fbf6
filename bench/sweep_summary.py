"""One line per router from a `spindleflow-eval --sweep` report: APGR with its paired interval, and the points where
the policy is significantly below / above it (the paired 95% interval wholly below / above zero), point by point and
under the simultaneous band over the whole curve (`simultaneous_band`, chapter 18).
    python bench/sweep_summary.py RUN/sweep.json"""

import json, sys


def summary(path) -> list[str]:
    s = json.load(open(path))
    out = [f"{s['questions']} held-out questions, {len(s['specialists'])} specialists, by {s['axis']}"]
    for who, p in s['policies'].items():
        for name, v in p['vs'].items():
            below = [f"{x:.2f}" for x, ci in zip(v['x'], v['diff_ci95']) if ci[1] < 0]
            above = [f"{x:.2f}" for x, ci in zip(v['x'], v['diff_ci95']) if ci[0] > 0]
            band = v.get('diff_band95') or [(-1, 1)] * len(v['x'])  # a sweep written before the band
            b_below = [f"{x:.2f}" for x, ci in zip(v['x'], band) if ci[1] < 0]
            b_above = [f"{x:.2f}" for x, ci in zip(v['x'], band) if ci[0] > 0]
            lo, hi = v['apgr_diff_ci95']
            out.append(
                f"  {who} {v['apgr_a']:.3f} vs {name} {v['apgr_b']:.3f} ({v['apgr_diff']:+.3f} [{lo:+.3f}, "
                f"{hi:+.3f}]); "
                f"worst point {min(v['diff']):+.3f}; significantly below at {below or 'none'}, above at "
                f"{above or 'none'}"
                + (
                    f"; band: below at {b_below or 'none'}, above at {b_above or 'none'}"
                    if 'diff_band95' in v
                    else ''
                )
            )
    return out


if __name__ == '__main__':
    print('\n'.join(summary(sys.argv[1])))
