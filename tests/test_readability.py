"""Readability of the exported package (issue 33), measured the same way as the issue measured it.

- Dependencies at the top: an import of the package's own modules inside a function is allowed only with its reason
  written on the same line (`# lazy: ...`), e.g. a module that pulls torch into `spindleflow-train --help`.
- Density: statements per code line and the share of lines over 120 characters may not grow past today's figures
  (the issue's targets are 0.6 and 1 %; `CEILING` is lowered as the code gets there, never raised)."""

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / 'spindleflow_rl'
CEILING = {'statements_per_line': 0.92, 'long_line_share': 0.092}  # measured on main 2026-12-05: 0.91, 9.1 %


def own_import(node, name: str = 'spindleflow_rl') -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or '').startswith(name)
    return isinstance(node, ast.Import) and any(a.name.startswith(name) for a in node.names)


def measure(src: str) -> dict:
    "Counts for one module: own imports inside functions without a reason comment, statements, code lines, long lines."
    lines, tree = src.splitlines(), ast.parse(src)
    silent = [
        n.lineno
        for f in ast.walk(tree)
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
        for n in ast.walk(f)
        if own_import(n) and '#' not in lines[n.lineno - 1]
    ]
    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return {
        'silent': sorted(set(silent)),
        'lines': len(lines),
        'statements': sum(isinstance(n, ast.stmt) and not isinstance(n, defs) for n in ast.walk(tree)),
        'code': sum(1 for ln in lines if ln.strip() and not ln.strip().startswith('#')),
        'long': sum(len(ln) > 120 for ln in lines),
    }


def package_figures(pkg: Path = PKG) -> tuple[dict, dict]:
    per = {p.stem: measure(p.read_text(encoding='utf-8')) for p in sorted(pkg.glob('*.py')) if p.name != '_modidx.py'}
    tot = {k: sum(m[k] for m in per.values()) for k in ('lines', 'statements', 'code', 'long')}
    return per, {'statements_per_line': tot['statements'] / tot['code'], 'long_line_share': tot['long'] / tot['lines']}


def test_measure_on_a_synthetic_module():
    src = (
        "from .config import ConfigError\n"
        "def f():\n    from .train import train\n    from .runs import build   # lazy: loads torch\n"
        "    import numpy as np; x = 1\n" + "y = '" + 'a' * 130 + "'\n"
    )
    m = measure(src)
    assert m['silent'] == [3], m  # the one without a reason; the third-party import does not count
    assert m['statements'] == 6 and m['code'] == 6 and m['long'] == 1, m


def test_own_imports_inside_functions_state_their_reason():
    per, _ = package_figures()
    bad = {mod: m['silent'] for mod, m in per.items() if m['silent']}
    assert not bad, (
        "imports of the package's own modules inside functions with no reason on their line "
        f"(module: line numbers): {bad}. Fix: move the import to the notebook's top import cell, or, "
        "for a heavy or optional dependency, say why on the same line (`# lazy: ...`); then nbdev_export."
    )


def test_density_does_not_grow():
    _, fig = package_figures()
    over = {k: (round(v, 3), CEILING[k]) for k, v in fig.items() if v > CEILING[k]}
    assert not over, (
        f"denser than the ceiling (measured, ceiling): {over}. Fix: one statement per line, lines <= 120 "
        "characters in the notebook cells you changed; then nbdev_export."
    )
