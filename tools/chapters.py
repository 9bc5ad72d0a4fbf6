"""Execute the chapters (nbs/*.ipynb) and keep their saved outputs honest.

    python tools/chapters.py run nbs/07_env.ipynb ...    execute in place and save the outputs (what you commit)
    python tools/chapters.py check nbs/07_env.ipynb ...  execute a copy and compare with the saved outputs

Cells flagged `#| slow`, `#| llm` or `#| eval: false` are skipped, as `nbdev_test` skips them; their saved outputs are
cleared by `run` and ignored by `check`. The closing `nbdev_export()` cell is skipped too (run `nbdev_export` yourself). `check` fails when a cell raises, when a chapter has no saved output at all,
when a cell's fresh output differs from the saved one ("stale"), or when an output shows an absolute path of this
machine (`/tmp/...`, the checkout: it means nothing on a reader's machine, and a chapter must run from any folder). Before comparing, both sides are normalised:
- a *timing line* (a number followed by a time or speed unit: `3.2 s`, `12 ms`, `715 timesteps/s`) is masked;
- numbers are compared with a relative tolerance of 1e-3, or one unit in their last printed decimal place (a value
  that sits on a rounding boundary may print either way); integers and text exactly. Measured: re-executing every
  chapter under other CPU kernels (ATen avx2/default, MKL AVX2/SSE4_2/CNR, oneDNN AVX2, OpenBLAS Haswell/Sandybridge,
  and a second AVX-512 machine) moved no printed number outside a training cell by more than 1e-5 relative;
- a cell flagged `#| machine-dependent` prints numbers that come out of training (SGD amplifies last-bit differences
  between CPUs and BLAS builds: a behaviour-cloning loss printed 0.025 on one machine and 0.019 on another). Its text
  is compared with every number masked, and the cell itself must assert the properties that matter (a loss that
  falls, a policy that beats its baseline). Bit-identity is tested within one machine by the resume and seeding tests;
- a cell flagged `#| rtol: 0.05` prints numbers out of a fitted model that moves less than training does (the log
  learner's calibrated price at rate 0.5 on the 200-question example log: 235.6 to 240.8 across CPU kernels and
  embedding caches, 2.2%); its numbers, integers included, are
  compared with that relative tolerance. Size it from a measurement and say which in a comment below the flag;
- an image counts as `<image>` and a widget as `<widget>`: their presence is checked, not their pixels;
- a progress bar (tqdm, as a widget or as `NN%|` text) is dropped: whether one shows depends on what is cached on
  the machine (a cold cache embeds, a warm one reads a file), not on the chapter.
The kernel runs without `MPLBACKEND` so that `plt.show()` saves an inline PNG, and without `OMP_NUM_THREADS`.
"""

from __future__ import annotations
import os, re, sys, math
from pathlib import Path
import nbformat

SKIP = re.compile(r'^#\|\s*(slow|llm|eval:\s*false)\b', re.M)
MACHINE = re.compile(r'^#\|\s*machine-dependent\b', re.M)
RTOL = re.compile(r'^#\|\s*rtol:\s*([0-9.]+(?:[eE]-?\d+)?)', re.M)
UNITS = r'(?:ms|µs|us|ns|s|sec|secs|seconds?|min|mins|minutes?|h|it/s|steps/s|timesteps/s|eps/s|episodes/s|calls/s|rows/s|req/s)'
TIMING = re.compile(r'\d(?:[\d,]*)(?:\.\d+)?\s*' + UNITS + r'(?![\w])')
NUM = re.compile(r'[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?')
ADDR = re.compile(r'0x[0-9a-fA-F]{6,}')
PROGRESS = re.compile(r'\d+%\|')  # tqdm: `desc:  40%|████      | 2/5 [00:01<00:01, ...]`

EXPORT_CELL = 'nbdev.nbdev_export()'  # a chapter's closing cell: regenerates the package from the chapters


def skipped(cell) -> bool:
    """Flagged cells, and the closing export cell: executing a chapter must not rewrite the package's modules (another
    process importing them at that moment, e.g. a test running beside it, would read a half-written file)."""
    return cell.cell_type == 'code' and (bool(SKIP.search(cell.source)) or EXPORT_CELL in cell.source)


def is_slow(cell) -> bool:
    return cell.cell_type == 'code' and bool(re.search(r'^#\|\s*slow\b', cell.source, re.M))


# not passed to the kernel: MPLBACKEND (so `plt.show()` saves an inline PNG), OMP_NUM_THREADS (tests/conftest.py pins
# one thread per test worker; a chapter runs with torch's default threads, as its saved outputs were made)
KERNEL_UNSET = ('MPLBACKEND', 'OMP_NUM_THREADS')


def execute(path, timeout: int = 900, run_slow: bool = False):
    "Execute the notebook at `path` (skipping flagged cells) in a fresh kernel whose cwd is its folder; return it."
    from nbclient import NotebookClient

    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    keep = [c for c in nb.cells if not skipped(c) or (run_slow and is_slow(c))]
    run = nbformat.from_dict(dict(nb))
    run.cells = keep
    old = {k: os.environ.pop(k) for k in KERNEL_UNSET if k in os.environ}
    try:
        NotebookClient(
            run, timeout=timeout, kernel_name='python3', resources={'metadata': {'path': str(path.parent)}}
        ).execute()
    finally:
        os.environ.update(old)
    for c in nb.cells:
        if skipped(c) and not run_slow:
            c.outputs = []
            c.execution_count = None
    return nb


def _text(t) -> str:
    return t if isinstance(t, str) else ''.join(t)  # nbformat keeps text as a str or a list of lines


def render(outputs) -> str:
    """One string per cell: streams merged, rich outputs reduced to
    text, images and widgets to markers, progress bars dropped."""
    parts = []
    for o in outputs:
        kind, d = o.get('output_type'), o.get('data', {})
        widget = 'application/vnd.jupyter.widget-view+json' in d
        if widget and PROGRESS.search(_text(d.get('text/plain', ''))):
            continue  # a tqdm widget: cache-dependent
        if kind == 'stream':
            parts.append('\n'.join(l for l in _text(o.get('text', '')).split('\n') if not PROGRESS.search(l)))
        elif kind == 'error':
            parts.append(f"<error {o.get('ename')}>\n")
        elif 'image/png' in d or 'image/svg+xml' in d:
            parts.append('<image>\n')
        elif widget:
            parts.append('<widget>\n')
        else:
            parts.append(
                _text(d.get('text/plain') or d.get('text/markdown') or d.get('text/html') or '') + '\n'
            )
    text = ADDR.sub('0x…', ''.join(parts))
    return '\n'.join('<timing>' if TIMING.search(line) else line.rstrip() for line in text.splitlines())


def machine_dependent(cell) -> bool:
    return cell.cell_type == 'code' and bool(MACHINE.search(cell.source))


def cell_rtol(cell, default: float = 1e-3) -> float:
    "The relative tolerance a cell's numbers are compared with: its `#| rtol: X` flag, else `default`."
    m = RTOL.search(cell.source) if cell.cell_type == 'code' else None
    return float(m.group(1)) if m else default


def last_place(x: str) -> float:
    "One unit in the last printed decimal place of `x` (`0.025` -> 0.001); 0 for integers and exponent notation."
    m = re.fullmatch(r'[-+]?\d*\.(\d+)', x)
    return 10.0 ** -len(m.group(1)) if m else 0.0


def same(a: str, b: str, rtol: float = 1e-3, atol: float = 1e-9, numbers: bool = True) -> bool:
    "Equal text, with numbers equal up to `rtol` or one unit in their last printed place; `numbers=False` masks them."
    if NUM.sub('#', a) != NUM.sub('#', b):
        return False
    if not numbers:
        return True
    for x, y in zip(NUM.findall(a), NUM.findall(b)):
        fx, fy = float(x), float(y)
        if math.isclose(fx, fy, rel_tol=rtol, abs_tol=atol):
            continue
        ulp = max(last_place(x), last_place(y))
        if ulp and abs(fx - fy) <= ulp * (1 + 1e-9):
            continue
        return False
    return True


# an absolute path of this machine in an output or asset (a temp
# folder, the checkout, a home folder): it churns from run to
# run and means nothing on a reader's machine. A URL's path (`https://host/home/...`) and a data: URI's base64 are not.
ABSPATH = re.compile(
    r'(?<![\w.~-])(?:/(?:tmp|work|root|home|Users|usr|var|private|opt|mnt|srv|content|data|etc)/|[A-Za-z]:\\)'
)
DATA_URI = re.compile(r'data:[\w/+.-]+;base64,[A-Za-z0-9+/=]+')


def absolute_paths(text: str) -> list[str]:
    "Each absolute path in `text`, with a little context (images embedded as data: URIs are skipped)."
    text = DATA_URI.sub('data:…', text)
    return [text[max(0, m.start() - 40) : m.end() + 40].replace('\n', ' ') for m in ABSPATH.finditer(text)]


def output_texts(outputs):
    "The text of each output as saved (streams, rich text, errors), images aside: what `absolute_paths` reads."
    for o in outputs:
        if 'text' in o:
            yield _text(o['text'])
        for k, v in o.get('data', {}).items():
            if not k.startswith('image/'):
                yield v if isinstance(v, str) else ''.join(v) if isinstance(v, list) else str(v)
        if o.get('output_type') == 'error':
            yield f"{o.get('evalue', '')}\n" + '\n'.join(o.get('traceback', []))


def paths_printed(nb) -> list[str]:
    "`cell i: ...path...` for every absolute path in the outputs of notebook `nb`."
    return [
        f"code cell {i}: {hit}"
        for i, c in enumerate(c for c in nb.cells if c.cell_type == 'code')
        for t in output_texts(c.outputs)
        for hit in absolute_paths(t)
    ]


def differences(saved, fresh) -> list[str]:
    "Human-readable list of problems: errors, a chapter without saved outputs, stale cells."
    probs = []
    sc = [c for c in saved.cells if c.cell_type == 'code']
    fc = [c for c in fresh.cells if c.cell_type == 'code']
    for i, c in enumerate(fc):
        for o in c.outputs:
            if o.get('output_type') == 'error':
                probs.append(f"code cell {i} raised {o.get('ename')}: {o.get('evalue')}")
    shows = [
        c for c in sc if not skipped(c) and not re.match(r'\s*#\|\s*(export|default_exp|hide)', c.source)
    ]
    if shows and not any(
        c.outputs for c in shows
    ):  # a chapter with demo cells must show what they print or draw
        probs.append("no saved outputs: run `python tools/chapters.py run` on it and commit")
    for i, (a, b) in enumerate(zip(sc, fc)):
        if skipped(a):
            continue
        ra, rb = render(a.outputs), render(b.outputs)
        if not same(ra, rb, rtol=cell_rtol(a), numbers=not machine_dependent(a)):
            first = a.source.splitlines()[0] if a.source else ''
            probs.append(
                f"code cell {i} ({first[:60]!r}) is stale:\n--- saved\n{ra[:800]}\n--- now\n{rb[:800]}"
            )
    return probs


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2 or argv[0] not in ('run', 'check'):
        print(__doc__)
        return 2
    bad = 0
    for p in argv[1:]:
        saved = nbformat.read(p, as_version=4)
        try:
            fresh = execute(p)
        except Exception as e:
            print(f"{p}: FAILED to execute: {type(e).__name__}: {str(e)[-2000:]}")
            bad += 1
            continue
        if argv[0] == 'run':
            nbformat.write(fresh, p)
            print(f"{p}: executed and saved")
            continue
        probs = differences(saved, fresh) + [f"absolute path in an output: {h}" for h in paths_printed(fresh)]
        print(f"{p}: " + ('ok' if not probs else f"{len(probs)} problem(s)\n  " + '\n  '.join(probs)))
        bad += bool(probs)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
