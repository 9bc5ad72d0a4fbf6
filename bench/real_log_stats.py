"""What a real log says about a weak and a strong model (chapter 18a's `pair_stats`): the numbers `REAL_PAIR` holds
and the real-like synthetic log (`make_real_like_log`) is fitted to.

    python bench/real_log_stats.py ../shared/data/routerbench_subset            # mixtral-8x7b vs gpt-4 (REAL_PAIR)
    python bench/real_log_stats.py LOG --weak gpt-3.5-turbo-1106 --strong gpt-4-1106-preview

LOG: one file, a folder or `a.csv,b.csv`, in any format `--recorded` reads (RouterBench's wide CSVs as they are)."""

import argparse, json
from spindleflow_rl.sim.backends import load_recorded_outcomes
from spindleflow_rl.logs.multi_model_log import REAL_PAIR, pair_stats


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('log', help='a log file, a folder of them, or a.csv,b.csv')
    ap.add_argument('--weak', default='mistralai/mixtral-8x7b-chat')
    ap.add_argument('--strong', default='gpt-4-1106-preview')
    a = ap.parse_args(argv)
    s = pair_stats(load_recorded_outcomes(a.log), a.weak, a.strong)
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in s.items()}, indent=1))
    print('REAL_PAIR in chapter 18a:', {k: v for k, v in REAL_PAIR.items() if k != 'source'})
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
