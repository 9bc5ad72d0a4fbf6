"""Your own models and logs, end to end from the command line, as the README tells a user: a catalog whose ids are not
in the shipped one (`cheap-model`, `strong-model`), a small log of their answers, then `spindleflow-train`,
`spindleflow-eval` (routers in eval.json, every held-out task played once) and `spindleflow-eval --sweep` (JSON + PNG)."""
import json, os, shutil, subprocess
from spindleflow_rl.routers import make_two_model_log, write_csv, TWO_MODEL_CATALOG
from spindleflow_rl.catalog import Catalog

CONFIG = """
train:
  timesteps: 128
  n_envs: 2
  eval_episodes: 0
  progress: false
  imitation_teacher: ''
ppo:
  n_steps: 32
  batch_size: 64
  n_epochs: 1
"""

def _run(*cmd, ok=True):
    env = {**os.environ, 'HF_HUB_OFFLINE': '1', 'TRANSFORMERS_OFFLINE': '1'}
    p = subprocess.run([shutil.which(cmd[0]), *cmd[1:]], env=env, capture_output=True, text=True, timeout=900)
    if ok: assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return p

def test_own_models_train_eval_sweep(tmp_path):
    rows = make_two_model_log(40, seed=5)
    write_csv(rows, tmp_path/'log.csv')
    write_csv(TWO_MODEL_CATALOG, tmp_path/'models.csv', ['id', 'role', 'domain', 'cost', 'latency', 'reliability', 'capability'])
    assert not {'cheap-model', 'strong-model'} & set(Catalog.default().ids)
    (tmp_path/'tiny.yaml').write_text(CONFIG)
    out = _run('spindleflow-train', '--config', str(tmp_path/'tiny.yaml'), '--catalog', str(tmp_path/'models.csv'),
               '--backend', 'recorded', '--recorded', str(tmp_path/'log.csv'), '--cost-coef-range', '0,400',
               '--out', str(tmp_path/'runs'), '--run-name', 'mine').stdout
    assert 'phase 1' in out
    run = tmp_path/'runs'/'mine'
    st = json.loads((run/'latest.json').read_text())
    assert st['num_timesteps'] == 128 and st['phase'] == 1
    _run('spindleflow-eval', '--checkpoint', str(run), '--split', 'heldout', '--baselines', 'random,oracle', '--json', str(tmp_path/'eval.json'))
    rep = json.loads((tmp_path/'eval.json').read_text())
    assert rep['backend'] == 'recorded'
    lg = rep['logged']['heldout']
    assert {'policy', 'cheapest', 'strongest', 'best-single', 'random', 'knn', 'cascade', 'oracle'} <= set(lg)
    tasks = {v['tasks'] for v in lg.values()}; assert len(tasks) == 1
    n = tasks.pop(); assert 2 <= n < 40
    assert {v['episodes'] for v in rep['splits']['heldout'].values()} == {n}          # every held-out task once, for every policy
    assert lg['cheapest']['pgr'] == 0.0 and lg['strongest']['pgr'] == 1.0
    assert set(lg['policy']['calls_per_task']) == {'cheap-model', 'strong-model'}
    assert 'normalised' in rep['splits']['heldout']['policy']                          # kept for recorded runs (hindsight oracle)
    assert 'knn' in (tmp_path/'eval.md').read_text()
    _run('spindleflow-eval', '--checkpoint', str(run), '--sweep', 'cost_coef=0,400', '--json', str(tmp_path/'sweep.json'))
    sw = json.loads((tmp_path/'sweep.json').read_text())
    assert [p['cost_coef'] for p in sw['points']] == [0.0, 400.0] and sw['tasks'] == n
    assert {'knn', 'cascade'} == set(sw['curves']) and {'knn', 'cascade', 'random'} == set(sw['points'][0]['matched'])
    assert (tmp_path/'sweep.png').stat().st_size > 1000
    bad = _run('spindleflow-eval', '--checkpoint', str(run), '--sweep', 'lr=1,2', ok=False)
    assert bad.returncode == 2 and '--sweep expects cost_coef=' in bad.stderr

def test_recorded_errors(tmp_path):
    bad = tmp_path/'bad.csv'; bad.write_text('task,specialist_id,quality\nx,y,0.5\n')
    p = _run('spindleflow-train', '--backend', 'recorded', '--recorded', str(bad), '--timesteps', '64', ok=False)
    assert p.returncode == 2 and 'missing column(s)' in p.stderr
