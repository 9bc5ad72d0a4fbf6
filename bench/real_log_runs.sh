#!/usr/bin/env bash
# The README's own-logs commands with every default, as a user runs them, on the real 11-model log
# (RouterBench's zero-shot subset in ../shared/data/routerbench_subset, read as it is: no catalog): each file alone,
# then the folder (the three together). Training + evaluation, then a 19-point spend-share sweep; prints wall times
# and each sweep's summary (bench/sweep_summary.py). Each run folder keeps eval.md and sweep.md (the tables).
#     nice -n 5 bash bench/real_log_runs.sh /tmp/real_log_runs
# With the fitted Q's third decision (it reads whether two answers agree): EXTRA="--q-calls 3" bash bench/real_log_runs.sh DIR
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-/tmp/real_log_runs}; mkdir -p "$OUT"
DATA=${DATA:-$(cd .. && pwd)/shared/data/routerbench_subset}
SHARES=0.05,0.1,0.15,0.2,0.25,0.3,0.35,0.4,0.45,0.5,0.55,0.6,0.65,0.7,0.75,0.8,0.85,0.9,0.95
for name in ${LOGS:-arc_challenge_train mbpp_train winograde_train all}; do
  src="$DATA/$name.csv"; [ "$name" = all ] && src="$DATA/"
  d="$OUT/$name"; rm -rf "$d"; mkdir -p "$d"; SECONDS=0
  spindleflow-train --backend recorded --recorded "$src" --out "$d/runs" --run-name run ${EXTRA:-} > "$d/train.log" 2>&1
  echo "$name: spindleflow-train (training + evaluation) ${SECONDS}s"
  SECONDS=0; spindleflow-eval --checkpoint "$d/runs/run" --sweep "spend_share=$SHARES" > "$d/sweep.log" 2>&1
  echo "$name: 19-point sweep ${SECONDS}s"
  python bench/sweep_summary.py "$d/runs/run/sweep.json"
done
