"""Regenerate the synthetic two-model example log and its catalog (chapter 18, `make_two_model_log`).

    python bench/make_two_model_log.py                       # the shipped assets: 200 questions, seed 0
    python bench/make_two_model_log.py --n 3000 --seed 1 --out /tmp/two_model_3000.csv   # a larger log for the sweep
    python bench/make_two_model_log.py --n 3000 --seed 1 --no-answers --out /tmp/noans.csv   # the same log, no answer text logged
    python bench/make_two_model_log.py --n 3000 --seed 1 --real-like --out /tmp/real_like.csv   # shaped like a real pair (18a)

Seeded: the same arguments write the same files. The log is synthetic; see chapter 18 for how it is built."""

import argparse
from pathlib import Path
from spindleflow_rl.logs.routers import make_two_model_log, write_csv, TWO_MODEL_CATALOG
from spindleflow_rl.logs.multi_model_log import make_real_like_log

ASSETS = Path(__file__).resolve().parents[1] / 'spindleflow_rl' / 'assets'


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--n', type=int, default=200, help='distinct questions')
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--out', default=str(ASSETS / 'two_model_log.csv'), help='log CSV to write')
    ap.add_argument('--catalog', default=str(ASSETS / 'two_model_catalog.csv'), help='catalog CSV to write')
    ap.add_argument(
        '--no-answers',
        action='store_true',
        help="leave the 'response' column empty: a log of grades, costs and latencies only",
    )
    ap.add_argument(
        '--real-like',
        action='store_true',
        help="chapter 18a's real-like pair (a small, correlated gap: make_real_like_log) instead of chapter 18's",
    )
    a = ap.parse_args(argv)
    rows = (make_real_like_log if a.real_like else make_two_model_log)(a.n, a.seed)
    if a.no_answers:
        rows = [{**r, 'response': ''} for r in rows]
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.catalog).parent.mkdir(parents=True, exist_ok=True)
    print('wrote', write_csv(rows, a.out), f'({len(rows)} rows)')
    print(
        'wrote',
        write_csv(
            TWO_MODEL_CATALOG,
            a.catalog,
            ['id', 'role', 'domain', 'cost', 'latency', 'reliability', 'capability'],
        ),
    )


if __name__ == '__main__':
    main()
