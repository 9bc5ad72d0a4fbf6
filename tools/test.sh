#!/usr/bin/env bash
# The project's test command (see README): sync checks, then every notebook's tests and the integration tests.
#   bash tools/test.sh            fast default run
#   bash tools/test.sh --slow     also the slow checks (full learning run, the release installed into a fresh venv,
#                                 docs processing of every chapter, runs against slow or faulty LLM servers, a
#                                 sweep through a local Ray cluster)
#   bash tools/test.sh --only-slow   only those slow checks (CI runs the default, then this)
#   bash tools/test.sh --workers N   N pytest processes (pytest-xdist; default 2, 1 runs them in this process)
set -euo pipefail
cd "$(dirname "$0")/.."
SLOW=0; ONLY_SLOW=0; WORKERS=2
while [ $# -gt 0 ]; do
  case "$1" in
    --slow) SLOW=1;;
    --only-slow) ONLY_SLOW=1;;
    --workers) WORKERS="${2:-}"; [ $# -gt 1 ] && shift;;
    --workers=*) WORKERS="${1#--workers=}";;
    *) echo "unknown option $1 (use --slow, --only-slow, --workers N)"; exit 2;;
  esac; shift
done
case "$WORKERS" in ''|*[!0-9]*|0) echo "--workers needs a whole number >= 1, got '$WORKERS'"; exit 2;; esac
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
# one statement per line, lines <= 120 characters (pyproject.toml [tool.ruff]; ruff is pinned in the dev extra because
# its layout changes between versions)
if ! ruff format --check --quiet nbs tests tools bench streamlit_app.py setup.py; then
  echo "FAIL: code not in the formatter's layout. Run: ruff format nbs tests tools bench streamlit_app.py setup.py && nbdev_export, review, commit." >&2
  exit 1
fi
ruff check --quiet --select E701,E702,E703 nbs tests tools bench spindleflow_rl || {
  echo "FAIL: several statements on one line (see above). Fix in the notebook cells, then nbdev_export." >&2; exit 1; }

echo "== 2/3 import without network"
python -c "import spindleflow_rl, gymnasium as gym; print('spindleflow_rl', spindleflow_rl.__version__)"

echo "== 3/3 notebook tests and integration tests"
args=(-q -p no:cacheprovider)
if [ "$SLOW" = 1 ]; then args+=(--slow); fi
if [ "$ONLY_SLOW" = 1 ]; then args+=(--slow --only-slow); fi
# the tests are safe to run side by side: free ports, a temp folder each, atomic cache writes
# loadgroup: the tests of one xdist_group share a fixture (tests/test_install.py: one fresh venv) and one worker
if [ "$WORKERS" -gt 1 ]; then args+=(-n "$WORKERS" --dist loadgroup); fi
python -m pytest "${args[@]}" tests
