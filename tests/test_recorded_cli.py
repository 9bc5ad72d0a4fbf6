"""Train and evaluate on your own logs: `--backend recorded --recorded outcomes.csv` end to end from the CLI."""
import csv, json, os, shutil, subprocess
import numpy as np
from spindleflow_rl.catalog import Catalog

CONFIG = """
train:
  timesteps: 128
  n_envs: 2
  eval_episodes: 0
  progress: false
ppo:
  n_steps: 32
  batch_size: 64
  n_epochs: 1
"""

def test_recorded_outcomes_train_and_eval(tmp_path):
    cat = Catalog.default(); rng = np.random.default_rng(0)
    tasks = [f"Logged task {i}: add audit logging to the payments API and document it" for i in range(12)]
    with open(tmp_path/'outcomes.csv', 'w', newline='') as f:
        w = csv.writer(f); w.writerow(['task', 'specialist_id', 'quality', 'cost_usd', 'latency_s', 'status', 'response'])
        for t in tasks:
            for sid in cat.ids[:10]:
                w.writerow([t, sid, round(float(rng.uniform(0, 1)), 3), 0.01, round(float(rng.uniform(2, 20)), 2),
                            'ok' if rng.random() > 0.1 else 'timeout', ''])
    (tmp_path/'tiny.yaml').write_text(CONFIG)
    env = {**os.environ, 'HF_HUB_OFFLINE': '1'}
    def run(*cmd):
        p = subprocess.run([shutil.which(cmd[0]), *cmd[1:]], env=env, capture_output=True, text=True, timeout=900)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
        return p.stdout
    out = run('spindleflow-train', '--config', str(tmp_path/'tiny.yaml'), '--backend', 'recorded', '--recorded', str(tmp_path/'outcomes.csv'),
              '--out', str(tmp_path/'runs'), '--run-name', 'logs')
    assert 'phase 1' in out
    st = json.loads((tmp_path/'runs'/'logs'/'latest.json').read_text())
    assert st['num_timesteps'] == 128 and st['phase'] == 1
    run('spindleflow-eval', '--checkpoint', str(tmp_path/'runs'/'logs'), '--episodes', '3', '--split', 'train',
        '--baselines', 'random,greedy-topk-seq', '--json', str(tmp_path/'eval.json'))
    rep = json.loads((tmp_path/'eval.json').read_text())
    assert rep['backend'] == 'recorded' and set(rep['splits']['train']) == {'policy', 'random', 'greedy-topk-seq'}
    bad = tmp_path/'bad.csv'; bad.write_text('task,specialist_id,quality\nx,y,0.5\n')
    p = subprocess.run([shutil.which('spindleflow-train'), '--backend', 'recorded', '--recorded', str(bad), '--timesteps', '64'],
                       env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and 'missing column(s)' in p.stderr
