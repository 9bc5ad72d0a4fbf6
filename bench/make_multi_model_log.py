"""Write the synthetic multi-model log and its catalog (chapter 18a, `make_multi_model_log`) as CSV files.

    python bench/make_multi_model_log.py --n 3000 --seed 1 --out /tmp/multi/log.csv --catalog /tmp/multi/catalog.csv
    spindleflow-train --backend recorded --recorded /tmp/multi/log.csv --catalog /tmp/multi/catalog.csv ...

Seeded: the same arguments write the same files. The log is synthetic; chapter 18a says what each parameter models."""

import argparse
from spindleflow_rl.logs.routers import write_csv
from spindleflow_rl.logs.multi_model_log import make_multi_model_log, MULTI_MODEL_CATALOG


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--n', type=int, default=3000, help='distinct questions')
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument(
        '--label-noise', type=float, default=0.03, help='share of grades flipped (an imperfect grader)'
    )
    ap.add_argument('--out', default='/tmp/multi_model/log.csv', help='log CSV to write')
    ap.add_argument('--catalog', default='/tmp/multi_model/catalog.csv', help='catalog CSV to write')
    a = ap.parse_args(argv)
    rows = make_multi_model_log(a.n, a.seed, label_noise=a.label_noise)
    print('wrote', write_csv(rows, a.out), f'({len(rows)} rows)')
    print(
        'wrote',
        write_csv(
            MULTI_MODEL_CATALOG,
            a.catalog,
            ['id', 'role', 'domain', 'cost', 'latency', 'reliability', 'capability'],
        ),
    )


if __name__ == '__main__':
    main()
