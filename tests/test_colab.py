"""The Colab notebook runs headless on CPU with tiny budgets (its `parameters` cell replaced, papermill-style),
without network, and leaves a checkpoint, an evaluation report and a replay page; run again with a larger budget it
resumes the same run from its latest checkpoint."""
import json, os
from pathlib import Path
import nbformat
import pytest
from nbclient import NotebookClient

NB = Path(__file__).resolve().parent.parent/'colab'/'SpindleFlow_RL_Colab.ipynb'
BADGE = 'https://colab.research.google.com/github/spindleflow/spindleflow-rl/blob/main/colab/SpindleFlow_RL_Colab.ipynb'


def load():
    return nbformat.read(NB, as_version=4)


def parameters_cell(nb):
    cells = [c for c in nb.cells if 'parameters' in c.metadata.get('tags', [])]
    assert len(cells) == 1, (f'{NB.name} needs exactly one cell tagged "parameters" (found {len(cells)}); '
                             'if nbdev_clean removed the tag, set allowed_cell_metadata_keys = tags in settings.ini')
    return cells[0]


def test_colab_notebook_shape():
    nb = load()
    assert nb.cells[0].cell_type == 'markdown' and BADGE in nb.cells[0].source and 'colab-badge.svg' in nb.cells[0].source
    p = parameters_cell(nb)
    assert nb.cells.index(p) <= 3, 'the parameters cell belongs at the top'
    names = {l.split('=')[0].strip() for l in p.source.splitlines() if '=' in l and not l.startswith('#')}
    assert {'TIMESTEPS', 'N_ENVS', 'EVAL_EPISODES', 'USE_DRIVE', 'RUN_REAL_LLM', 'SMOKE'} <= names, names
    # Runtime > Run all must not stop at a permission popup: Drive and real-LLM calls (Secrets access) are off by default
    ns = {}
    exec(p.source, ns)
    assert ns['USE_DRIVE'] is False and ns['RUN_REAL_LLM'] is False and ns['SMOKE'] is False, (ns['USE_DRIVE'], ns['RUN_REAL_LLM'])
    # ... and the Drive cell is explained: what it is for and how to turn it on
    drive = next(i for i, c in enumerate(nb.cells) if c.cell_type == 'code' and 'drive.mount(' in c.source)
    assert 'if USE_DRIVE:' in nb.cells[drive].source, 'drive.mount must only run when USE_DRIVE is set'
    why = nb.cells[drive - 1]
    assert why.cell_type == 'markdown' and 'USE_DRIVE = True' in why.source and 'disconnect' in why.source and 'checkpoint' in why.source
    assert sum('drive.mount(' in c.source for c in nb.cells if c.cell_type == 'code') == 1
    for c in nb.cells:     # committed clean: no outputs, no execution counts
        if c.cell_type == 'code': assert not c.outputs and c.execution_count is None, c.source[:60]
    assert 'spindleflow-rl @ git+https://github.com/spindleflow/spindleflow-rl@v0.1.0' in ''.join(c.source for c in nb.cells)


def run(tmp: Path, **params) -> nbformat.NotebookNode:
    nb = load()
    p = {'TIMESTEPS': 256, 'N_ENVS': 2, 'EVAL_EPISODES': 2, 'RECORD': 1, 'USE_DRIVE': True, 'RUN_REAL_LLM': True,
         'SMOKE': True, 'OUT': str(tmp), 'RUN_NAME': 'smoke', 'SEED': 0, 'DEVICE': 'cpu', **params}
    # USE_DRIVE and RUN_REAL_LLM on: off Colab and without a key both must be skipped cleanly
    parameters_cell(nb).source = '\n'.join(f'{k} = {v!r}' for k, v in p.items())
    NotebookClient(nb, timeout=300, kernel_name='python3', resources={'metadata': {'path': str(tmp)}}).execute()
    return nb


def text_of(nb) -> str:
    out = []
    for c in nb.cells:
        for o in c.get('outputs', []):
            if o.get('output_type') == 'stream': out.append(o['text'])
            elif 'data' in o: out.append(o['data'].get('text/plain', ''))
    return '\n'.join(out)


@pytest.fixture
def offline_env(monkeypatch):
    for k in ('OPENAI_API_KEY', 'OPENAI_BASE_URL'): monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv('HF_HUB_OFFLINE', '1'); monkeypatch.setenv('TRANSFORMERS_OFFLINE', '1')
    for k in ('HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy'):     # any HTTP(S) attempt fails at once
        monkeypatch.setenv(k, 'http://127.0.0.1:9')
    for k in ('NO_PROXY', 'no_proxy'): monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv('MPLBACKEND', 'Agg'); monkeypatch.setenv('TOKENIZERS_PARALLELISM', 'false')
    monkeypatch.setenv('SPINDLEFLOW_CACHE', os.environ.get('SPINDLEFLOW_CACHE', str(NB.parent.parent/'.cache'/'spindleflow_rl')))


def test_colab_notebook_smoke_and_resume(tmp_path, offline_env):
    nb = run(tmp_path)
    log = text_of(nb)
    run_dir = tmp_path/'runs'/'smoke'
    st = json.loads((run_dir/'latest.json').read_text())
    assert st['num_timesteps'] == 256 and (run_dir/st['checkpoint']).exists(), st
    assert (run_dir/'final.zip').exists()
    rep = json.loads((run_dir/'eval.json').read_text())
    assert set(rep['splits']['heldout']) == {'policy', 'random', 'greedy-topk-par', 'oracle'}
    for f in ('eval.md', 'learning_curve.png', 'pareto.png', 'phases.png', 'episodes.jsonl'): assert (run_dir/f).exists(), f
    page = (run_dir/'replay.html').read_text()
    assert page.count('<template id="sf-p-') >= 4 and 'policy' in page
    assert 'pip install skipped' in log and 'Google Drive not mounted' in log and 'new run: 256 timesteps' in log
    assert 'real-LLM section skipped: no OPENAI_API_KEY' in log and 'TensorBoard inline skipped' in log
    assert 'ReplayViewer' in log or 'VBox' in log or any('application/vnd.jupyter.widget-view+json' in o.get('data', {})
                                                         for c in nb.cells for o in c.get('outputs', []))

    # re-run with a larger budget: resumes the same run (the Drive-disconnect case)
    nb2 = run(tmp_path, TIMESTEPS=320, EVAL_EPISODES=2)
    st2 = json.loads((run_dir/'latest.json').read_text())
    assert st2['num_timesteps'] == 320, st2
    assert 'resuming' in text_of(nb2) and (run_dir/'progress-from-256.csv').exists()
