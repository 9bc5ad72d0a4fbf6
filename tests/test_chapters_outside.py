"""Every chapter runs from its Colab badge: outside the repository, with only the installed package.

The execution itself happens once, in tests/test_notebooks.py: each chapter runs from a copy alone in a temporary
folder (no `../settings.ini`, no `images/`, no `bench/`), and its fresh outputs may show no absolute path. Here, with no
execution: the saved outputs of every chapter (what GitHub and Colab show before anything runs, slow cells included)
and the text assets the package ships show no absolute path of the machine that made them either."""

import re, sys
from pathlib import Path
import nbformat, pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / 'tools'))
import chapters

NOTEBOOKS = sorted(p for p in (ROOT / 'nbs').glob('*.ipynb') if not p.name.startswith('_'))
ASSETS = sorted(
    p
    for p in (ROOT / 'spindleflow_rl' / 'assets').iterdir()
    if p.suffix in ('.json', '.yaml', '.yml', '.csv', '.jsonl', '.md', '.txt')
)

# (file name, pattern of the path it may still show): known,
# open, owned elsewhere (issue 32 item 6). Empty this as they go.
KNOWN_PATHS = []  # (chapter, pattern) of an absolute path still shown; none today


def known(name: str, hit: str) -> bool:
    return any(n == name and re.search(pat, hit) for n, pat in KNOWN_PATHS)


def test_detector_finds_machine_paths_only():
    "Temp folders, checkouts, home folders and file: URIs count; relative paths, URLs and embedded images do not."
    for t in [
        'run folder: /tmp/tmpes5s86mt/mine',
        '/work/main/spindleflow_rl/x.py:3: UserWarning',
        '"/root/.cache/x"',
        'file:///tmp/replay.html',
        'saved to /home/me/run',
        r'C:\Users\me\run',
        '/content/runs/a',
    ]:
        assert chapters.absolute_paths(t), t
    for t in [
        'runs/run/final.zip',
        'nbs/images/phases.png',
        '~/work/x',
        'https://example.org/home/a',
        'a/tmp/b',
        'spindleflow_rl/assets/demo_policy.zip',
        'data:image/png;base64,AAAA/tmp/BBBB==',
        'loss 1/2 /3',
    ]:
        assert not chapters.absolute_paths(t), t


@pytest.mark.parametrize('nb', NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_saved_outputs_show_no_absolute_path(nb):
    hits = [h for h in chapters.paths_printed(nbformat.read(nb, as_version=4)) if not known(nb.name, h)]
    assert not hits, (
        f"{nb.name} shows absolute paths of the machine that ran it: {hits}. Print them relative to "
        "their folder (e.g. `p.relative_to(run)`, `p.name`) and re-run the chapter."
    )


@pytest.mark.parametrize('asset', ASSETS, ids=[p.name for p in ASSETS])
def test_assets_hold_no_absolute_path(asset):
    hits = [h for h in chapters.absolute_paths(asset.read_text(errors='replace')) if not known(asset.name, h)]
    assert not hits, (
        f"spindleflow_rl/assets/{asset.name} stores absolute paths: {hits}. Store them relative to the run folder."
    )


def test_known_exceptions_are_still_needed():
    "An entry of KNOWN_PATHS that matches nothing any more is removed, so the list only shrinks."
    files = {p.name: [h for h in chapters.paths_printed(nbformat.read(p, as_version=4))] for p in NOTEBOOKS}
    files |= {p.name: chapters.absolute_paths(p.read_text(errors='replace')) for p in ASSETS}
    stale = [(n, pat) for n, pat in KNOWN_PATHS if not any(re.search(pat, h) for h in files.get(n, []))]
    assert not stale, f"fixed, remove from KNOWN_PATHS: {stale}"
