#!/usr/bin/env python
"""Run nbdev's notebook processing for the docs on every chapter: everything `nbdev_docs` does before `quarto render`.

    python tools/docs_check.py                    every chapter (nbs/*.ipynb)
    python tools/docs_check.py nbs/00a_config.ipynb ...
    python tools/docs_check.py --workers 2        chapters processed side by side (default 2)

For each notebook this is what `nbdev_proc_nbs` runs (nbdev 2.4.14, `nbdev.serve_drv.main`): the `FilterDefaults`
processors, among them `exec_show_docs`, which executes every exported cell and every cell holding an import (all
but `#| eval: false` ones) to render `show_doc`; a notebook whose cell raises fails, and the report names the chapter,
the cell and the error. Before that, as `_pre_docs` does: `nbs/nbdev.yml` from settings.ini, the module index, the
sidebar (unless `custom_sidebar`). The processed notebooks go to a temp folder, not `_proc/`.

A stub `quarto` comes first on PATH: without any `quarto`, nbdev's docs commands start an installer that pip-installs
the project into the first Python on PATH. The real render needs Quarto, which this machine cannot install.
Exit status 1 when a chapter fails that is not in KNOWN (or a chapter in KNOWN passes: take it out of KNOWN).
"""

from __future__ import annotations
import argparse, os, re, subprocess, sys, tempfile, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# chapters whose docs processing fails today, owned by other work; each entry says why. Empty this as they are fixed.
KNOWN: dict[str, str] = {}

STUB = "#!/bin/sh\necho 'quarto stub (tools/docs_check.py): the Quarto render is not part of this check' >&2\nexit 0\n"

DRIVER = """
import sys, traceback
from pathlib import Path
from nbdev.processors import FilterDefaults
import nbdev.serve_drv
out = Path(sys.argv[1])
for nb in sys.argv[2:]:                              # one process per batch, as nbdev_proc_nbs's workers do
    src = Path(nb)
    try:
        nbdev.serve_drv.main((src, out/src.name, FilterDefaults))     # what nbdev's proc_nbs runs for each notebook
        print(f"@@done {src.name}", flush=True)
    except BaseException:
        print(traceback.format_exc(), flush=True); print(f"@@failed {src.name}", flush=True)
"""


def chapters() -> list[Path]:
    return sorted(p for p in (ROOT / 'nbs').glob('*.ipynb') if not p.name.startswith('_'))


def stub_path(tmp: Path) -> dict:
    "The environment with a stub `quarto` first on PATH."
    b = tmp / 'bin'
    b.mkdir(exist_ok=True)
    (b / 'quarto').write_text(STUB)
    (b / 'quarto').chmod(0o755)
    return {**os.environ, 'PATH': f"{b}{os.pathsep}{os.environ.get('PATH', '')}"}


def prepare(env: dict):
    "nbdev's `_pre_docs` minus `_ensure_quarto` (the stub is on PATH) and minus `proc_nbs` (below, per chapter)."
    code = (
        "import shutil; assert shutil.which('quarto'), 'no quarto stub on PATH'\n"
        "from nbdev.quarto import refresh_quarto_yml, nbdev_sidebar\nimport nbdev.doclinks\n"
        "refresh_quarto_yml(); nbdev.doclinks._build_modidx(); nbdev_sidebar.__wrapped__()"
    )
    r = subprocess.run([sys.executable, '-c', code], cwd=ROOT, env=env, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"docs preparation failed:\n{r.stdout}{r.stderr}")


def why(out: str) -> str:
    "The useful part of a failure: nbdev's 'Error in cell N' line and the exception at the end of the traceback."
    cell = re.search(r'Error(?: in notebook: [^\n]*)? in cell (\d+)', out)
    last = [l for l in out.strip().splitlines() if re.match(r'^[A-Za-z_.]*(Error|Exception)\b', l)]
    parts = ([f"cell {cell.group(1)}"] if cell else []) + (
        last[-2:] if last else [out.strip().splitlines()[-1] if out.strip() else '?']
    )
    return '; '.join(dict.fromkeys(parts))


def process(
    nbs: list[Path], out: Path, env: dict, timeout: float = 600
) -> list[tuple[str, bool, str, float]]:
    """Process a batch of notebooks in one Python process (imports such as torch load once: ~2 s a chapter saved);
    `(name, ok, why, seconds)` for each, the seconds of a batch shared out evenly."""
    t0 = time.time()
    try:
        r = subprocess.run(
            [sys.executable, '-c', DRIVER, str(out), *map(str, nbs)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout * len(nbs),
        )
        text = r.stdout + r.stderr
    except subprocess.TimeoutExpired as e:
        text = (e.stdout or b'').decode() if isinstance(e.stdout, bytes) else (e.stdout or '')
        text += f"\n@@timeout after {timeout * len(nbs):.0f} s (a cell holding an import also runs something long?)"
    dt, res, chunk = (time.time() - t0) / max(1, len(nbs)), {}, []
    for line in text.splitlines():
        m = re.match(r'@@(done|failed) (.+)$', line)
        if m:
            res[m.group(2)] = (m.group(1) == 'done', '' if m.group(1) == 'done' else why('\n'.join(chunk)))
            chunk = []
        else:
            chunk.append(line)
    tail = why('\n'.join(chunk)) if chunk else 'the batch stopped before this chapter'
    return [(p.name, *res.get(p.name, (False, f"not processed: {tail}")), dt) for p in nbs]


def sidebar_problems() -> list[str]:
    "nbs/sidebar.yml (custom_sidebar = True) must list every chapter once, and only chapters that exist."
    import yaml

    side = yaml.safe_load((ROOT / 'nbs' / 'sidebar.yml').read_text(encoding='utf-8'))

    def walk(xs):
        for x in xs:
            if isinstance(x, str):
                yield x
            else:
                yield from walk(x.get('contents', []))

    listed = list(walk(side['website']['sidebar']['contents']))
    have = {p.name for p in chapters()}
    return (
        [f"nbs/sidebar.yml lacks {n}" for n in sorted(have - set(listed))]
        + [f"nbs/sidebar.yml lists {n}, which is not a chapter" for n in sorted(set(listed) - have)]
        + [f"nbs/sidebar.yml lists {n} twice" for n in sorted({n for n in listed if listed.count(n) > 1})]
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('notebooks', nargs='*', help='default: every chapter in nbs/')
    ap.add_argument('--workers', type=int, default=2)
    ap.add_argument('--timeout', type=float, default=600, help='seconds per chapter (default 600)')
    ap.add_argument(
        '--skip-known', action='store_true', help="don't process the chapters in KNOWN (saves minutes)"
    )
    a = ap.parse_args(argv)
    nbs = [Path(p).resolve() for p in a.notebooks] or chapters()
    if a.skip_known:
        nbs = [p for p in nbs if p.name not in KNOWN]
    missing = [str(p) for p in nbs if not p.exists()]
    if missing:
        sys.exit(f"no such notebook: {', '.join(missing)}")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = stub_path(tmp)
        prepare(env)
        k = max(1, min(a.workers, len(nbs)))
        with ThreadPoolExecutor(k) as ex:
            res = [
                r
                for batch in ex.map(lambda b: process(b, tmp, env, a.timeout), [nbs[i::k] for i in range(k)])
                for r in batch
            ]
    side = sidebar_problems()
    for m in side:
        print(f"FAIL     {m}")
    bad = len(side)
    for name, ok, msg, dt in res:
        known = KNOWN.get(name)
        if ok and known:
            bad += 1
            print(f"PASS but listed in KNOWN  {name}: remove it from KNOWN in tools/docs_check.py")
        elif ok:
            print(f"ok       {name}")
        elif known:
            print(f"known    {name}: {msg}  [{known}]")
        else:
            bad += 1
            print(f"FAIL     {name}: {msg}")
    print(
        f"{sum(ok for _, ok, _, _ in res)} of {len(res)} chapters pass nbdev's docs processing"
        + (f" ({len(KNOWN)} known failures not processed)" if a.skip_known else '')
        + (f"; {bad} unexpected" if bad else '')
    )
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
