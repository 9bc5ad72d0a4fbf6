"""Install the release as a Colab user does, then run what they run, in a fresh venv.

The venv is made by `tools/release.sh --venv` (build and check the sdist and the wheel; a fresh `python -m venv`; CPU
torch 2.13.0 first, as Colab has torch preinstalled; the wheel with its `[colab]` extra, its requirements resolved
from the package index; an import smoke), plus ipykernel (Colab's kernel). Then, in a kernel of that venv:

1. the release is uninstalled and the Colab notebook runs from its first cell, its install cell as written but for
   the source: the `v<version>` tag of a bare clone of this commit (`git+file://...@v0.2.0`) instead of GitHub's. It
   trains, evaluates and replays (smoke sizes), starts TensorBoard, and plays its real-LLM section against a
   loopback OpenAI-compatible server; only the Google Drive mount cannot run here (no Colab);
2. uninstalled again, the notebook runs again with the built wheel as the source (what PyPI will serve) and resumes
   the run of step 1 with a larger budget;
3. each chapter's first cells (install cell, imports, first definition and demo) run from a temp folder outside the
   repository, as a chapter opened from its Colab badge does.

The kernel has no network: pip runs with `--no-index` plus a local folder that holds setuptools for the git build
(`PIP_NO_INDEX`, `PIP_FIND_LINKS`), and any other HTTP(S) request hits a dead proxy. So the install cell resolves the
release's requirements against what the venv already holds, as in Colab, where nearly all of them come preinstalled;
their resolution from the index is the fresh-venv step of release.sh.
"""

import configparser, json, os, shutil, subprocess, sys, time
from pathlib import Path
import nbformat, pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
NB = ROOT / 'colab' / 'SpindleFlow_RL_Colab.ipynb'
sys.path.insert(0, str(ROOT / 'tools'))
import colab_cells

_cfg = configparser.ConfigParser(delimiters=['='])
_cfg.read(ROOT / 'settings.ini', encoding='utf-8')
VERSION = _cfg['DEFAULT']['version']
GITHUB = f'git+https://github.com/spindleflow/spindleflow-rl@v{VERSION}'
KERNEL = 'spindleflow-colab-venv'
# every test of this module shares one venv: keep them on one xdist worker (tools/test.sh runs --dist loadgroup)
# slow (`bash tools/test.sh --slow`; CI runs them): building the release and a fresh venv takes ~80 s, the two
# Colab runs and the chapters' first cells ~55 s more
pytestmark = [pytest.mark.xdist_group('colab-venv'), pytest.mark.slow]


def sh(*cmd, **kw):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    assert r.returncode == 0, (
        f"{' '.join(map(str, cmd))} failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    )
    return r.stdout


@pytest.fixture(scope='module')
def colab_venv(tmp_path_factory):
    d = tmp_path_factory.mktemp('colab-venv')
    t0 = time.time()
    env = {k: v for k, v in os.environ.items() if k != 'PYTHONPATH'}
    sh('bash', ROOT / 'tools' / 'release.sh', '--outdir', d / 'dist', '--venv', d / 'venv', cwd=ROOT, env=env)
    py = d / 'venv' / 'bin' / 'python'
    sh(py, '-m', 'pip', 'install', '-q', 'ipykernel')  # Colab's kernel
    sh(
        py, '-m', 'pip', 'download', '-q', '--no-deps', '-d', d / 'wheelhouse', 'setuptools>=64'
    )  # for the git build, offline
    # a bare clone of this commit, tagged like the release (the repository's own tag is made at release time);
    # `git+file://localhost/...`: pip 23's URL check refuses `git+file:///` (an empty host), git takes both
    sha = sh('git', 'rev-parse', 'HEAD', cwd=ROOT).strip()
    sh('git', 'clone', '-q', '--bare', ROOT, d / 'bare.git')
    sh(
        'git', '-C', d / 'bare.git', 'tag', '-f', f'v{VERSION}', sha
    )  # -f: a clone that already has the release tag (elsewhere)
    spec = d / 'jupyter' / 'kernels' / KERNEL
    spec.mkdir(parents=True)
    (spec / 'kernel.json').write_text(
        json.dumps(
            {
                'argv': [str(py), '-m', 'ipykernel_launcher', '-f', '{connection_file}'],
                'display_name': KERNEL,
                'language': 'python',
            }
        )
    )
    print(f'venv ready in {time.time() - t0:.0f} s')
    return {
        'dir': d,
        'py': py,
        'wheel': d / 'dist' / f'spindleflow_rl-{VERSION}-py3-none-any.whl',
        'tag_url': f"git+file://localhost{d / 'bare.git'}@v{VERSION}",
        'jupyter': d / 'jupyter',
        'wheelhouse': d / 'wheelhouse',
    }


@pytest.fixture
def kernel_env(colab_venv, monkeypatch):
    "The kernel's environment: the venv kernel, no PYTHONPATH, no network but loopback, pip offline."
    monkeypatch.setenv('JUPYTER_PATH', str(colab_venv['jupyter']))
    monkeypatch.delenv('PYTHONPATH', raising=False)
    for k in ('OPENAI_API_KEY', 'OPENAI_BASE_URL'):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv('HF_HUB_OFFLINE', '1')
    monkeypatch.setenv('TRANSFORMERS_OFFLINE', '1')
    for k in ('HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy'):  # any HTTP(S) attempt fails at once
        monkeypatch.setenv(k, 'http://127.0.0.1:9')
    for k in ('NO_PROXY', 'no_proxy'):
        monkeypatch.setenv(k, '127.0.0.1,localhost')
    monkeypatch.setenv('PIP_NO_INDEX', '1')
    monkeypatch.setenv('PIP_FIND_LINKS', str(colab_venv['wheelhouse']))
    monkeypatch.setenv('MPLBACKEND', 'Agg')
    monkeypatch.setenv('TOKENIZERS_PARALLELISM', 'false')
    monkeypatch.setenv(
        'SPINDLEFLOW_CACHE', os.environ.get('SPINDLEFLOW_CACHE', str(ROOT / '.cache' / 'spindleflow_rl'))
    )
    return colab_venv


def uninstall(v):
    sh(v['py'], '-m', 'pip', 'uninstall', '-y', '-q', 'spindleflow_rl')
    r = subprocess.run([str(v['py']), '-c', 'import spindleflow_rl'], capture_output=True, cwd=v['dir'])
    assert r.returncode != 0, 'spindleflow_rl is still importable in the venv after uninstalling it'


# ends what the notebook started (TensorBoard's server), by process id: the kernel's own children
STOP_CHILDREN = (
    "import os, psutil\nfor p in psutil.Process(os.getpid()).children(recursive=True): p.terminate()"
)


def run_colab(tmp: Path, source: str, **params) -> nbformat.NotebookNode:
    "Run the Colab notebook in the venv kernel with its parameters replaced and the install cell's source swapped."
    from test_colab import parameters_cell, install_cell

    nb = nbformat.read(NB, as_version=4)
    p = {
        'TIMESTEPS': 256,
        'N_ENVS': 2,
        'EVAL_EPISODES': 2,
        'RECORD': 1,
        'USE_DRIVE': True,
        'RUN_REAL_LLM': True,
        'SMOKE': True,
        'OUT': str(tmp),
        'RUN_NAME': 'smoke',
        'SEED': 0,
        'DEVICE': 'cpu',
        **params,
    }
    parameters_cell(nb).source = '\n'.join(f'{k} = {v!r}' for k, v in p.items())
    cell = install_cell(nb)
    assert GITHUB in cell.source, f'the install cell should install {GITHUB}'
    cell.source = cell.source.replace(GITHUB, source)
    nb.cells.append(nbformat.v4.new_code_cell(STOP_CHILDREN))
    NotebookClient(nb, timeout=3600, kernel_name=KERNEL, resources={'metadata': {'path': str(tmp)}}).execute()
    return nb


def record_colab(v, tmp: Path):
    """Save the Colab notebook with the outputs of a real run of its defaults (the README's main run: 250k timesteps,
    500 evaluation episodes; several minutes on 2 cores; no Drive, no LLM), installed from the tagged clone; the
    parameters and install cells keep their committed source (the outputs say SMOKE=False and "from a local copy").
    Runs only with SPINDLEFLOW_RECORD_COLAB=1. (The committed outputs were recorded the same way from a clone, with
    the install skipped: /tmp-free, OUT relative.)"""
    uninstall(v)
    work = tmp / 'record'
    work.mkdir()
    nb = run_colab(
        work,
        v['tag_url'],
        TIMESTEPS=250_000,
        N_ENVS=16,
        EVAL_EPISODES=500,
        RECORD=3,
        SMOKE=False,
        USE_DRIVE=False,
        RUN_REAL_LLM=False,
        OUT='spindleflow-rl',
        RUN_NAME='colab-curriculum',
    )
    orig = nbformat.read(NB, as_version=4)
    assert len(nb.cells) == len(orig.cells) + 1 and nb.cells[-1].source == STOP_CHILDREN
    nb.cells = nb.cells[:-1]
    for new, old in zip(nb.cells, orig.cells):
        new.source = old.source
        new.metadata = old.metadata
        if new.cell_type == 'code':
            new.execution_count = None
        if "run_line_magic('tensorboard'" in new.source:
            new.outputs = []  # a frame on a server gone with the run
    nb.metadata = orig.metadata
    nbformat.write(nb, NB)


def text_of(nb) -> str:
    out = []
    for c in nb.cells:
        for o in c.get('outputs', []):
            if o.get('output_type') == 'stream':
                out.append(o['text'])
            elif 'data' in o:
                out.append(o['data'].get('text/plain', ''))
    return '\n'.join(out)


def test_colab_notebook_installs_from_the_tag_and_the_wheel_and_runs(kernel_env, tmp_path):
    from spindleflow_rl.llms.testing import ScriptedOpenAIServer

    v = kernel_env
    uninstall(v)
    with ScriptedOpenAIServer(usage=(100, 50)) as srv:
        os.environ['OPENAI_API_KEY'] = 'sk-test'
        os.environ['OPENAI_BASE_URL'] = srv.base_url
        try:
            nb = run_colab(tmp_path, v['tag_url'])
        finally:
            os.environ.pop('OPENAI_API_KEY')
            os.environ.pop('OPENAI_BASE_URL')
        n_llm = srv.n_requests
    log = text_of(nb)
    assert 'installed spindleflow-rl[colab] from a local copy' in log, log[:2000]
    site = sh(v['py'], '-c', 'import spindleflow_rl; print(spindleflow_rl.__file__)', cwd=tmp_path)
    assert str(v['dir'] / 'venv') in site, site  # the venv's copy, not the repository's
    assert f'spindleflow_rl {VERSION} |' in log
    run_dir = tmp_path / 'runs' / 'smoke'
    st = json.loads((run_dir / 'latest.json').read_text())
    assert st['num_timesteps'] == 256 and (run_dir / st['checkpoint']).exists(), st
    assert (run_dir / 'final.zip').exists()
    rep = json.loads((run_dir / 'eval.json').read_text())
    assert set(rep['splits']['heldout']) == {'policy', 'random', 'greedy-topk-par', 'oracle'}
    for f in ('eval.md', 'learning_curve.png', 'pareto.png', 'phases.png', 'episodes.jsonl'):
        assert (run_dir / f).exists(), f
    page = (run_dir / 'replay.html').read_text()
    assert page.count('<template id="sf-p-') >= 4 and 'policy' in page
    assert (
        'Google Drive not mounted' in log
        and 'new run: 256 timesteps' in log
        and 'estimate: well under a minute' in log
    )
    assert 'TensorBoard inline skipped' not in log  # it ran
    assert '3 episodes; specialists and baseline cost $' in log and n_llm > 0, (n_llm, log[-2000:])
    assert any(
        'application/vnd.jupyter.widget-view+json' in o.get('data', {})
        for c in nb.cells
        for o in c.get('outputs', [])
    )

    # from the wheel, with a larger budget: resumes the same run (the Drive-disconnect case)
    uninstall(v)
    nb2 = run_colab(tmp_path, f"file://{v['wheel']}", TIMESTEPS=320, RUN_REAL_LLM=False)
    log2 = text_of(nb2)
    assert (
        'installed spindleflow-rl[colab] from a local copy' in log2 and f'spindleflow_rl {VERSION} |' in log2
    )
    st2 = json.loads((run_dir / 'latest.json').read_text())
    assert st2['num_timesteps'] == 320, st2
    assert 'resuming' in log2 and (run_dir / 'progress-from-256.csv').exists()
    assert 'real-LLM section skipped: set RUN_REAL_LLM = True' in log2
    if os.environ.get('SPINDLEFLOW_RECORD_COLAB') == '1':
        record_colab(v, tmp_path)


def first_cells(path: Path) -> list:
    "A chapter's first code cells: everything up to its first demo (the first cell after an export that is not one)."
    cells = [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == 'code']
    if not any(c.source.lstrip().startswith('#| export') for c in cells):
        return cells[:4]  # install, imports, a definition, its demo
    out, seen_export = [], False
    for c in cells:
        out.append(c)
        is_def = c.source.lstrip().startswith(('#| export', '#| exporti', '#| default_exp', '#| hide'))
        seen_export |= c.source.lstrip().startswith('#| export')
        if seen_export and not is_def:
            break
    return out


def test_chapters_first_cells_run_outside_the_repository(kernel_env, tmp_path):
    """One kernel of the venv runs every chapter's first cells, each chapter from its own empty folder and with a
    cleared namespace (`%reset -f`); modules stay imported between chapters, which only saves time."""
    v = kernel_env
    if subprocess.run(
        [str(v['py']), '-c', 'import spindleflow_rl'], capture_output=True, cwd=tmp_path
    ).returncode:
        sh(v['py'], '-m', 'pip', 'install', '-q', f"spindleflow-rl[colab] @ file://{v['wheel']}")
    cells, owner = [], []
    for path in colab_cells.chapters():
        first = first_cells(path)
        assert colab_cells.INSTALL_MARK in first[0].source, (
            f'{path.name}: the first code cell should be the install cell'
        )
        work = tmp_path / path.stem
        work.mkdir()
        cells.append(nbformat.v4.new_code_cell(f"%reset -f\nimport os; os.chdir({str(work)!r})"))
        cells += [nbformat.v4.new_code_cell(c.source) for c in first]
        owner += [path.name] * (len(first) + 1)
    nb = nbformat.v4.new_notebook(cells=cells)
    t0 = time.time()
    NotebookClient(
        nb,
        timeout=300,
        kernel_name=KERNEL,
        allow_errors=True,
        resources={'metadata': {'path': str(tmp_path)}},
    ).execute()
    print(f'{len(colab_cells.chapters())} chapters, {len(cells)} cells in {time.time() - t0:.0f} s')
    failed = {}
    for name, c in zip(owner, nb.cells):
        for o in c.outputs:
            if o.get('output_type') == 'error' and name not in failed:
                failed[name] = f"{o['ename']}: {o['evalue']}\n--- in the cell ---\n{c.source[:600]}"
    # a chapter that needs another extra (13: openenv) asks for it in its install cell; this venv holds only [colab],
    # so there it must stop with the message that names the extra to install, and nothing else
    for name, extra in colab_cells.EXTRAS.items():
        want = extra.split(',')[-1]
        assert f'spindleflow-rl[{extra}]' in colab_cells.install_src(name), name
        err = failed.pop(name, '')
        assert err.startswith('ImportError') and f"spindleflow-rl[{want}]" in err, (
            f'{name}: {err or "ran without its extra"}'
        )
    assert not failed, '\n\n'.join(f'{k}: {v}' for k, v in failed.items())
