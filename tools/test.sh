#!/usr/bin/env bash
# The project's test command (see README): sync checks, then every notebook's tests and the integration tests.
#   bash tools/test.sh            fast default run
#   bash tools/test.sh --slow     also the slow checks (full learning run, long benchmarks)
set -euo pipefail
cd "$(dirname "$0")/.."
SLOW=0
for a in "$@"; do case "$a" in --slow) SLOW=1;; *) echo "unknown option $a (use --slow)"; exit 2;; esac; done
export SPINDLEFLOW_CACHE="${SPINDLEFLOW_CACHE:-$PWD/.cache/spindleflow_rl}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false MPLBACKEND=Agg

echo "== 1/3 notebooks and package in sync"
snapshot() { git status --porcelain --untracked-files=all -- spindleflow_rl nbs README.md; git diff -- spindleflow_rl nbs README.md | sha1sum; }
before="$(snapshot)"
nbdev_export
nbdev_clean
after="$(snapshot)"
if [ "$before" != "$after" ]; then
  echo "FAIL: nbdev_export / nbdev_clean changed tracked files. Run them, review and commit:" >&2
  diff <(echo "$before") <(echo "$after") >&2 || true
  exit 1
fi
python tools/make_readme.py --check

echo "== 2/3 import without network"
python -c "import spindleflow_rl, gymnasium as gym; print('spindleflow_rl', spindleflow_rl.__version__)"

echo "== 3/3 notebook tests and integration tests"
args=(-q -p no:cacheprovider)
if [ "$SLOW" = 1 ]; then args+=(--slow); fi
python -m pytest "${args[@]}" tests
