#!/usr/bin/env bash
# Build the release (sdist + wheel) and check it before it is tagged or published.
#   bash tools/release.sh                 build into dist/, check the files, install the wheel in a fresh venv, import it
#   bash tools/release.sh --no-venv       build and check the files only (seconds; what tests/test_install.py calls)
#   bash tools/release.sh --outdir DIR    build into DIR instead of dist/
#   bash tools/release.sh --venv DIR      make the fresh venv at DIR and keep it (default: a temp folder, removed)
# Checks: the version is settings.ini's; the metadata (name, Requires-Python, extras; the slim [colab] extra holds no
# ray/streamlit/openenv/video/nbdev; a Markdown long description); the sdist and the wheel hold every tracked file of
# spindleflow_rl/configs/ and spindleflow_rl/assets/ (demo_policy.zip included) and every module; the wheel builds
# from the sdist. The fresh-venv step installs CPU torch 2.13.0 first (as Colab has torch preinstalled), then
# `<wheel>[colab]` from the package index, and imports the package, makes the environment and reads a shipped config.
# Then: `git tag v<version>` on the released commit; publishing (twine upload) is a separate, manual step.
set -euo pipefail
cd "$(dirname "$0")/.."
OUTDIR=dist; VENV=1; VENV_DIR=
while [ $# -gt 0 ]; do
  case "$1" in
    --no-venv) VENV=0;;
    --outdir) OUTDIR="${2:?--outdir needs a folder}"; shift;;
    --venv) VENV_DIR="${2:?--venv needs a folder}"; shift;;
    *) echo "unknown option $1 (use --no-venv, --outdir DIR, --venv DIR)" >&2; exit 2;;
  esac; shift
done
VERSION="$(python -c "import configparser as c; p = c.ConfigParser(delimiters=['=']); p.read('settings.ini'); print(p['DEFAULT']['version'])")"
echo "== build spindleflow_rl $VERSION into $OUTDIR/"
mkdir -p "$OUTDIR"
rm -f "$OUTDIR/spindleflow_rl-$VERSION.tar.gz" "$OUTDIR/spindleflow_rl-$VERSION-py3-none-any.whl"
# --no-isolation: build with the setuptools installed here (pyproject's build-system needs setuptools>=64); the wheel
# is built from the sdist, so a file missing from MANIFEST.in is missing from the wheel too and the check below fails.
python -m build --no-isolation --outdir "$OUTDIR" . > "$OUTDIR/build.log" 2>&1 || { tail -30 "$OUTDIR/build.log" >&2; echo "FAIL: build (log: $OUTDIR/build.log)" >&2; exit 1; }
SDIST="$OUTDIR/spindleflow_rl-$VERSION.tar.gz"; WHEEL="$OUTDIR/spindleflow_rl-$VERSION-py3-none-any.whl"
echo "== check $(basename "$SDIST") and $(basename "$WHEEL")"
python - "$SDIST" "$WHEEL" "$VERSION" <<'PY'
import sys, tarfile, zipfile, subprocess, configparser, shlex
from email.parser import Parser
sdist, wheel, version = sys.argv[1:]
probs = []
tracked = subprocess.run(['git', 'ls-files', 'spindleflow_rl'], capture_output=True, text=True, check=True).stdout.split()
data = [f for f in tracked if f.startswith(('spindleflow_rl/configs/', 'spindleflow_rl/assets/'))]
mods = [f for f in tracked if f.endswith('.py')]
assert data and mods, 'git ls-files found no package files: run from a clone'
whl = set(zipfile.ZipFile(wheel).namelist())
sd = {n.split('/', 1)[1] for n in tarfile.open(sdist).getnames() if '/' in n}
for f in data + mods:
    if f not in whl: probs.append(f'wheel lacks {f}')
    if f not in sd: probs.append(f'sdist lacks {f}')
if 'spindleflow_rl/assets/demo_policy.zip' not in whl: probs.append('wheel lacks the demo policy')
meta = Parser().parsestr(zipfile.ZipFile(wheel).read(f'spindleflow_rl-{version}.dist-info/METADATA').decode())
if meta['Version'] != version: probs.append(f"metadata version {meta['Version']} != settings.ini {version}")
if meta['Name'].replace('_', '-').lower() != 'spindleflow-rl': probs.append(f"name {meta['Name']}")
if not meta['Requires-Python'] or not meta['Summary']: probs.append('Requires-Python or Summary missing')
if meta['Description-Content-Type'] != 'text/markdown' or len(meta.get_payload() or '') < 500: probs.append('long description (README) missing')
extras = set(meta.get_all('Provides-Extra') or [])
if not {'colab', 'dev', 'openenv', 'app', 'video', 'ray'} <= extras: probs.append(f'extras {sorted(extras)}')
reqs = meta.get_all('Requires-Dist') or []
colab = [r for r in reqs if 'extra == "colab"' in r]
heavy = [r for r in colab if any(h in r.lower() for h in ('ray', 'streamlit', 'openenv', 'moviepy', 'nbdev', 'imageio'))]
if not colab or heavy: probs.append(f'[colab] extra: {colab} (heavy: {heavy})')
cfg = configparser.ConfigParser(delimiters=['=']); cfg.read('settings.ini')
core = shlex.split(cfg['DEFAULT']['requirements'])
listed = [r for r in reqs if 'extra ==' not in r]
if len(listed) != len(core): probs.append(f'core requirements {listed} != settings.ini {core}')
eps = zipfile.ZipFile(wheel).read(f'spindleflow_rl-{version}.dist-info/entry_points.txt').decode()
for cmd in ('spindleflow-train', 'spindleflow-eval', 'spindleflow-demo'):
    if cmd not in eps: probs.append(f'console script {cmd} missing')
if probs: sys.exit('FAIL:\n  ' + '\n  '.join(probs))
print(f'ok: {len(data)} data files and {len(mods)} modules in both; version {version}; extras {sorted(extras)}; '
      f'[colab] = {", ".join(r.split(";")[0] for r in colab)}')
PY
if [ "$VENV" = 1 ]; then
  echo "== install $(basename "$WHEEL")[colab] in a fresh venv and import it"
  if [ -z "$VENV_DIR" ]; then TMPV="$(mktemp -d)"; trap 'rm -rf "$TMPV"' EXIT; VENV_DIR="$TMPV/venv"; fi
  [ -e "$VENV_DIR" ] && { echo "FAIL: $VENV_DIR exists; the venv must be fresh" >&2; exit 1; }
  python -m venv "$VENV_DIR"
  PY="$(cd "$VENV_DIR" && pwd)/bin/python"
  # pip's notes about this machine's local package folders are noise here; errors still show
  "$PY" -m pip install -q torch==2.13.0 2>&1 | grep -v "^WARNING: Location" || true
  "$PY" -c "import torch" || { echo "FAIL: torch did not install in $VENV_DIR" >&2; exit 1; }
  "$PY" -m pip install -q "spindleflow-rl[colab] @ file://$(cd "$(dirname "$WHEEL")" && pwd)/$(basename "$WHEEL")" 2>&1 | grep -v "^WARNING: Location" || true
  (cd "$(dirname "$VENV_DIR")" && env -u PYTHONPATH HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$PY" -c "
import gymnasium as gym, spindleflow_rl
from spindleflow_rl.core.config import config_path
from fastcore.test import test_eq
assert spindleflow_rl.__version__ == '$VERSION', spindleflow_rl.__version__
assert '/venv/' in spindleflow_rl.__file__, spindleflow_rl.__file__
assert config_path('catalog.yaml').exists() and (config_path('catalog.yaml').parent.parent/'assets'/'demo_policy.zip').exists()
env = gym.make('SpindleFlow-v0'); obs, info = env.reset(seed=0); test_eq(obs.shape, (5538,))
print('ok: imported', spindleflow_rl.__version__, 'from the venv; SpindleFlow-v0 resets; shipped configs and demo policy present')")
fi
echo "release $VERSION ready: $SDIST $WHEEL"
echo "next: git tag v$VERSION && git push origin v$VERSION; publish with: python -m twine upload $SDIST $WHEEL"
