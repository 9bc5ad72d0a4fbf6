"""Give every chapter its Colab badge, a guarded install cell and a closing export cell that is a no-op outside the
repository. Idempotent: run it after adding a chapter or bumping the version (`python tools/colab_cells.py
[nbs/XX.ipynb ...]`); `--check` only reports.

- badge: a markdown cell right after the title cell, opening this chapter from GitHub in Colab;
- install: a code cell after the badge that installs the release named in settings.ini (`version`, tag `v<version>`)
  with the slim `[colab]` extra (plus the extra a chapter needs, e.g. `openenv` for 13), only when the package is not
  importable, i.e. in Colab; from a clone (`pip install -e ".[dev]"`) it does nothing and prints nothing. It carries
  `#| eval: false`, so neither nbdev's docs processing (`exec_show_docs` would otherwise run it: it contains an
  import) nor `nbdev_test` nor `tools/chapters.py` executes it;
- export: the last cell runs `nbdev_export()` only when the chapter sits in the repository (`../settings.ini`).
"""

from __future__ import annotations
import configparser, hashlib, json, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPO = 'spindleflow/spindleflow-rl'
BADGE_MARK = 'colab-badge.svg'
INSTALL_MARK = '# Colab: install the package'
EXPORT_SRC = (
    "#| hide\n"
    "# Regenerate the package from the chapters; a no-op outside the repository (e.g. in Colab).\n"
    "from pathlib import Path\n"
    "\n"
    "if Path('../settings.ini').exists():\n"
    "    import nbdev\n"
    "\n"
    "    nbdev.nbdev_export()"
)


def badge_src(name: str) -> str:
    return (
        f"[![Open In Colab](https://colab.research.google.com/assets/{BADGE_MARK})]"
        f"(https://colab.research.google.com/github/{REPO}/blob/main/nbs/{name})"
    )


def release() -> str:
    "The version in settings.ini: the chapters install the release tagged `v<version>`."
    cfg = configparser.ConfigParser(delimiters=['='])
    cfg.read(ROOT / 'settings.ini', encoding='utf-8')
    return cfg['DEFAULT']['version']


# a chapter that needs more than the [colab] extra in Colab (its code imports an optional dependency at the top)
EXTRAS = {'13_openenv.ipynb': 'colab,openenv'}


def install_src(name: str, version: str | None = None) -> str:
    version = version or release()
    spec = f"spindleflow-rl[{EXTRAS.get(name, 'colab')}] @ git+https://github.com/{REPO}@v{version}"
    return (
        f"#| eval: false\n{INSTALL_MARK} (release {version}, tag v{version}) when it is not importable;\n"
        "# from a clone this cell does nothing. `#| eval: false`: nbdev's docs and tests never run it.\n"
        "import importlib.util, subprocess, sys\n"
        "\n"
        f"SPEC = {spec!r}\n"
        "if importlib.util.find_spec('spindleflow_rl') is None:\n"
        "    subprocess.run([sys.executable, '-m', 'pip', 'install', '-q', SPEC], check=True)"
    )


def _lines(s: str) -> list[str]:
    ls = s.split('\n')
    return [l + '\n' for l in ls[:-1]] + [ls[-1]]


def _src(c) -> str:
    return ''.join(c['source'])


def fix(path: Path, check: bool = False) -> list[str]:
    nb = json.loads(path.read_text())
    cells = nb['cells']
    todo = []
    badges = [c for c in cells if c['cell_type'] == 'markdown' and BADGE_MARK in _src(c)]
    if badges and _src(badges[0]) != badge_src(
        path.name
    ):  # e.g. a renamed chapter: the badge opens the new name
        todo.append('badge')
        badges[0]['source'] = _lines(badge_src(path.name))
    if not badges:
        todo.append('badge')
        cells.insert(
            1,
            {
                'cell_type': 'markdown',
                'id': 'b' + hashlib.md5(path.name.encode()).hexdigest()[:7],
                'metadata': {},
                'source': _lines(badge_src(path.name)),
            },
        )
    inst = [c for c in cells if c['cell_type'] == 'code' and INSTALL_MARK in _src(c)]
    want = install_src(path.name)
    if not inst:
        todo.append('install')
        i = next(i for i, c in enumerate(cells) if c['cell_type'] == 'markdown' and BADGE_MARK in _src(c))
        cells.insert(
            i + 1,
            {
                'cell_type': 'code',
                'execution_count': None,
                'id': 'i' + hashlib.md5(path.name.encode()).hexdigest()[:7],
                'metadata': {},
                'outputs': [],
                'source': _lines(want),
            },
        )
    elif _src(inst[0]) != want:
        todo.append('install')
        inst[0]['source'] = _lines(want)
        inst[0]['outputs'] = []
        inst[0]['execution_count'] = None
    last = cells[-1]
    if not (last['cell_type'] == 'code' and 'nbdev_export' in _src(last)):
        raise SystemExit(
            f"{path}: the last cell should be the `nbdev_export()` cell; add it (see any chapter) and re-run."
        )
    if _src(last) != EXPORT_SRC:
        todo.append('export')
        last['source'] = _lines(EXPORT_SRC)
        last['outputs'] = []
    if todo and not check:
        path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + '\n')
    return todo


def chapters() -> list[Path]:
    return sorted(
        p for p in (ROOT / 'nbs').glob('*.ipynb') if not p.name.startswith('_') and p.name != 'index.ipynb'
    )


if __name__ == '__main__':
    check = '--check' in sys.argv
    only = [Path(a).name for a in sys.argv[1:] if not a.startswith('--')]  # default: every chapter
    bad = {p.name: t for p in chapters() if (not only or p.name in only) and (t := fix(p, check))}
    for k, v in bad.items():
        print(f"{k}: {'to add or update' if check else 'added/updated'}: {', '.join(v)}")
    sys.exit(1 if (check and bad) else 0)
