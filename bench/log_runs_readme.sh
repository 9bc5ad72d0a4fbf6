#!/usr/bin/env bash
# The README's own-logs commands, as a user runs them, on the three synthetic logs of chapter 18b (3,000 questions,
# seed 1: two models with the cheap model's answers, the same without answer text, four models), plus a 1,500-question
# two-model log for the speed target. Prints wall times; each run folder keeps eval.md and sweep.md (the tables).
#     nice -n 10 bash bench/log_runs_readme.sh /tmp/log_runs
# Another draw of the logs and of training: SEED=3 TRAIN_SEED=1 LOGS="two two-noans multi" bash bench/log_runs_readme.sh DIR
# The real-like pair of chapter 18a, with and without answers: LOGS="real-like real-like-noans" bash bench/...
set -euo pipefail
OUT=${1:-/tmp/log_runs}; mkdir -p "$OUT"
SEED=${SEED:-1}; TRAIN_SEED=${TRAIN_SEED:-0}
RATES=0.05,0.1,0.15,0.2,0.25,0.3,0.35,0.4,0.45,0.5,0.55,0.6,0.65,0.7,0.75,0.8,0.85,0.9,0.95
TWELVE=0.05,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.85,0.9,0.95
python bench/make_two_model_log.py --n 3000 --seed "$SEED" --out "$OUT/two/log.csv" --catalog "$OUT/two/catalog.csv"
python bench/make_two_model_log.py --n 3000 --seed "$SEED" --no-answers --out "$OUT/two-noans/log.csv" --catalog "$OUT/two-noans/catalog.csv"
python bench/make_multi_model_log.py --n 3000 --seed "$SEED" --out "$OUT/multi/log.csv" --catalog "$OUT/multi/catalog.csv"
python bench/make_two_model_log.py --n 1500 --seed 2 --out "$OUT/two-1500/log.csv" --catalog "$OUT/two-1500/catalog.csv"
python bench/make_two_model_log.py --n 3000 --seed "$SEED" --real-like --out "$OUT/real-like/log.csv" --catalog "$OUT/real-like/catalog.csv"
python bench/make_two_model_log.py --n 3000 --seed "$SEED" --real-like --no-answers --out "$OUT/real-like-noans/log.csv" --catalog "$OUT/real-like-noans/catalog.csv"
for name in ${LOGS:-two two-noans multi two-1500}; do
  d="$OUT/$name"; axis=strong_rate; [ "$name" = multi ] && axis=spend_share
  rm -rf "$d/runs"; SECONDS=0
  spindleflow-train --backend recorded --recorded "$d/log.csv" --catalog "$d/catalog.csv" --out "$d/runs" --run-name run --seed "$TRAIN_SEED" > "$d/train.log" 2>&1
  echo "$name: spindleflow-train (training + evaluation) ${SECONDS}s"
  SECONDS=0; spindleflow-eval --checkpoint "$d/runs/run" --sweep "$axis=$TWELVE" --json "$d/runs/run/sweep12.json" > "$d/sweep12.log" 2>&1
  echo "$name: 12-point sweep ${SECONDS}s"
  [ "$name" = two-1500 ] && continue
  SECONDS=0; spindleflow-eval --checkpoint "$d/runs/run" --sweep "$axis=$RATES" > "$d/sweep.log" 2>&1
  echo "$name: 19-point sweep ${SECONDS}s"
done
