"""The Colab notebook's shape: badge, both install sources named, a parameters cell whose defaults let *Run all* go
through unattended on a CPU runtime and run the README's configuration, and saved outputs from a real run of those
defaults (the run behind the README's table). It is *run* in
tests/test_install.py: installed as written from a tagged clone and from the wheel, in a fresh venv."""

import re
from pathlib import Path
import nbformat

NB = Path(__file__).resolve().parent.parent / 'colab' / 'SpindleFlow_RL_Colab.ipynb'
BADGE = 'https://colab.research.google.com/github/spindleflow/spindleflow-rl/blob/main/colab/SpindleFlow_RL_Colab.ipynb'


def load():
    return nbformat.read(NB, as_version=4)


def parameters_cell(nb):
    cells = [c for c in nb.cells if 'parameters' in c.metadata.get('tags', [])]
    assert len(cells) == 1, (
        f'{NB.name} needs exactly one cell tagged "parameters" (found {len(cells)}); '
        'if nbdev_clean removed the tag, set allowed_cell_metadata_keys = tags in settings.ini'
    )
    return cells[0]


def install_cell(nb):
    cells = [c for c in nb.cells if c.cell_type == 'code' and 'pip' in c.source and 'install' in c.source]
    assert len(cells) == 1, f'{NB.name} needs exactly one install cell (found {len(cells)})'
    return cells[0]


def test_colab_notebook_shape():
    nb = load()
    assert (
        nb.cells[0].cell_type == 'markdown'
        and BADGE in nb.cells[0].source
        and 'colab-badge.svg' in nb.cells[0].source
    )
    p = parameters_cell(nb)
    assert nb.cells.index(p) <= 3, 'the parameters cell belongs at the top'
    names = {l.split('=')[0].strip() for l in p.source.splitlines() if '=' in l and not l.startswith('#')}
    assert {
        'TIMESTEPS',
        'N_ENVS',
        'EVAL_EPISODES',
        'USE_DRIVE',
        'RUN_REAL_LLM',
        'SMOKE',
        'DEVICE',
    } <= names, names
    # Runtime > Run all must not stop at a permission popup: Drive
    # and real-LLM calls (Secrets access) are off by default
    ns = {}
    exec(p.source, ns)
    assert ns['USE_DRIVE'] is False and ns['RUN_REAL_LLM'] is False and ns['SMOKE'] is False, (
        ns['USE_DRIVE'],
        ns['RUN_REAL_LLM'],
    )
    # the defaults are the README's main run (`spindleflow-train
    # --curriculum --demo-mode`: train.yaml, seed 0, 500 episodes)
    assert (ns['TIMESTEPS'], ns['N_ENVS'], ns['EVAL_EPISODES'], ns['SEED']) == (250_000, 16, 500, 0), ns
    # the GPU path is unmeasured: CPU by default, and the notebook does not ask Colab for a GPU runtime
    assert (
        ns['DEVICE'] == 'cpu'
        and 'accelerator' not in nb.metadata
        and 'gpuType' not in nb.metadata.get('colab', {})
    )
    # both sources of the release are named at the top, and the install cell uses one of them
    top = nb.cells[1].source
    assert (
        'git+https://github.com/spindleflow/spindleflow-rl@v0.2.0' in top
        and 'spindleflow-rl[colab]==0.2.0' in top
    )
    assert 'unmeasured' in top and 'real run' in top and 'smoke run' in top
    # the run behind the saved outputs: its time and machine, and how to get a smoke run instead
    run = nb.cells[2].source
    assert (
        run.startswith('## This run')
        and '2-core CPU' in run
        and 'no GPU' in run
        and 'SMOKE = True' in run
        and 'min' in run
    )
    assert (
        "'spindleflow-rl[colab] @ git+https://github.com/spindleflow/spindleflow-rl@v0.2.0'"
        in install_cell(nb).source
    )
    # ... and the Drive cell is explained: what it is for and how to turn it on
    drive = next(i for i, c in enumerate(nb.cells) if c.cell_type == 'code' and 'drive.mount(' in c.source)
    assert 'if USE_DRIVE:' in nb.cells[drive].source, 'drive.mount must only run when USE_DRIVE is set'
    why = nb.cells[drive - 1]
    assert (
        why.cell_type == 'markdown'
        and 'USE_DRIVE = True' in why.source
        and 'disconnect' in why.source
        and 'checkpoint' in why.source
    )
    assert sum('drive.mount(' in c.source for c in nb.cells if c.cell_type == 'code') == 1


def test_colab_notebook_saved_outputs():
    """Committed with the outputs of a real run of its defaults (not a smoke run): the same numbers as the README's
    table, whose full evaluation (huggingface_blog/figures/eval.md) is part of the notebook's report."""
    nb = load()
    code = [c for c in nb.cells if c.cell_type == 'code']
    outs = [o for c in code for o in c.outputs]
    assert not [o for o in outs if o.get('output_type') == 'error'], 'a saved output is an error'
    text = '\n'.join(
        o.get('text', '') if o.get('output_type') == 'stream' else o.get('data', {}).get('text/plain', '')
        for o in outs
    )
    assert 'SMOKE=False' in text and 'TIMESTEPS=250,000' in text, (
        'the saved outputs must come from a run of the defaults'
    )
    for want in (
        'spindleflow_rl 0.1.0 |',  # the run was made with 0.1.0; 0.2.0 trains identical weights (This run cell)
        'new run:',
        'estimate:',
        'timesteps/s this session',
        'held-out episodes',
    ):
        assert want in text, want
    assert sum('image/png' in o.get('data', {}) for o in outs) >= 3, 'the report plots are saved'
    md = '\n'.join(o['data']['text/markdown'] for o in outs if 'text/markdown' in o.get('data', {}))
    blog_eval = (NB.parent.parent / 'huggingface_blog' / 'figures' / 'eval.md').read_text().strip()
    assert blog_eval in md, (
        "the notebook's report should hold the README's evaluation (the same run): re-run both"
    )
    assert not re.search(r'/tmp/|/root/|/work/', text), 'saved outputs hold a local absolute path'
