"""The cost-quality curve on the synthetic two-model log (chapter 18), end to end through the command line.

    nice -n 5 python bench/two_model_sweep.py --out /tmp/two_model

Writes a 1000-question log (seed 1) and its catalog, trains ONE cost-conditioned policy
(`spindleflow-train --cost-coef-range 0,400`, no imitation warm start), sweeps it on the held-out questions
(`spindleflow-eval --sweep cost_coef=...`), and copies the sweep JSON (without its per-rate curves' bulk) to
`spindleflow_rl/assets/two_model_sweep.json`, which chapter 18 plots. Seeded; minutes on a laptop CPU."""
import argparse, json, shutil, subprocess, sys
from pathlib import Path
from spindleflow_rl.routers import make_two_model_log, write_csv, TWO_MODEL_CATALOG

ASSET = Path(__file__).resolve().parents[1]/'spindleflow_rl'/'assets'/'two_model_sweep.json'
CONFIG = """train:
  timesteps: {timesteps}
  n_envs: 16
  eval_episodes: 0
  imitation_teacher: ''
  progress_every_s: 60
ppo:
  n_steps: 32
  batch_size: 256
  n_epochs: 2
  ent_coef: 0.01
"""

def sh(*cmd):
    print('$', ' '.join(cmd), flush=True)
    subprocess.run(cmd, check=True)

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--out', default='/tmp/two_model'); ap.add_argument('--timesteps', type=int, default=40000)
    ap.add_argument('--n', type=int, default=1000); ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--range', default='0,400'); ap.add_argument('--coefs', default='0,50,100,200,400')
    ap.add_argument('--no-asset', action='store_true', help='do not copy the result into the package assets')
    a = ap.parse_args(argv)
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    write_csv(make_two_model_log(a.n, a.seed), out/'log.csv')
    write_csv(TWO_MODEL_CATALOG, out/'catalog.csv', ['id', 'role', 'domain', 'cost', 'latency', 'reliability', 'capability'])
    (out/'train.yaml').write_text(CONFIG.format(timesteps=a.timesteps))
    sh('spindleflow-train', '--config', str(out/'train.yaml'), '--catalog', str(out/'catalog.csv'), '--backend', 'recorded',
       '--recorded', str(out/'log.csv'), '--cost-coef-range', a.range, '--out', str(out/'runs'), '--run-name', 'policy', '--seed', '0')
    sh('spindleflow-eval', '--checkpoint', str(out/'runs'/'policy'), '--sweep', f'cost_coef={a.coefs}', '--json', str(out/'sweep.json'))
    if not a.no_asset:
        res = json.loads((out/'sweep.json').read_text())
        res['checkpoint'] = f"bench/two_model_sweep.py --timesteps {a.timesteps} --n {a.n} --seed {a.seed} --range {a.range}"
        ASSET.write_text(json.dumps(res, indent=1)); print('wrote', ASSET)

if __name__ == '__main__': main()
