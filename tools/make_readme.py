#!/usr/bin/env python
"""Generate README.md from nbs/index.ipynb (Quarto-free stand-in for `nbdev_readme`).

Markdown cells are copied as they are; code cells are shown as ```python blocks unless they carry an nbdev
directive that hides them (#| hide, #| exporti, #| eval: false with #| hide); image outputs that the notebook
references by file are kept as links. `--check` exits 1 when README.md is stale.
"""

import sys, json, re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def render(nb_path: Path) -> str:
    nb = json.loads(nb_path.read_text(encoding='utf-8'))
    out = [
        '<!-- Generated from nbs/index.ipynb by tools/make_readme.py: edit the notebook, not this file. -->',
        '',
    ]
    for cell in nb['cells']:
        src = ''.join(cell['source']).rstrip()
        if cell['cell_type'] == 'markdown':
            # nbdev's title cell: '# Title' + '> summary' stays as it is. Links are written relative to the
            # notebook (images/x.png); the README sits at the repository root, one level up.
            src = re.sub(r'\]\((images/)', r'](nbs/\1', src)
            src = re.sub(r'\]\(([0-9]{2}[a-z]?_[A-Za-z0-9_]+\.ipynb)\)', r'](nbs/\1)', src)
            src = src.replace('](../', '](')
            out += [src, '']
        elif cell['cell_type'] == 'code':
            lines = src.splitlines()
            directives = [l for l in lines if l.startswith('#|')]
            if any(re.match(r'#\|\s*(hide|exporti|export|default_exp)', d) for d in directives):
                continue
            body = '\n'.join(l for l in lines if not l.startswith('#|')).strip()
            if body:
                out += ['```python', body, '```', '']
    return '\n'.join(out).rstrip() + '\n'


def main():
    text = render(ROOT / 'nbs' / 'index.ipynb')
    readme = ROOT / 'README.md'
    if '--check' in sys.argv:
        if not readme.exists() or readme.read_text(encoding='utf-8') != text:
            print(
                'README.md is stale: run `python tools/make_readme.py` and commit the result.',
                file=sys.stderr,
            )
            return 1
        print('README.md is in sync with nbs/index.ipynb')
        return 0
    readme.write_text(text, encoding='utf-8')
    print(f'wrote {readme}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
