"""Regenerate every figure of huggingface_blog/blog_post.md from commands in this repository.

    python huggingface_blog/make_figures.py                 # minutes: the shipped policy and the committed result files
    python huggingface_blog/make_figures.py --episodes 100  # quicker, wider intervals
    python huggingface_blog/make_figures.py --full          # also re-run the experiments behind the result files (hours on 2 cores)

Figures go to huggingface_blog/figures/:
- phases.png, pareto.png (and eval.md, their table): `spindleflow-eval` of the shipped policy (spindleflow_rl/assets/demo_policy.zip, the main
  command's run) on held-out tasks and the unseen roster, against every baseline; phases.png is also the README's
  figure (copied to nbs/images/phases.png, beside the README's table of the same evaluation);
- learning_curve.png: the README's main job, phase by phase (spindleflow_rl/assets/learning_curve.json, written by
  `bench/main_run_assets.py` from the run folder; `--full` re-runs the main job and that script);
- transfer.png: chapter 19's zero-shot / fine-tuning / from-scratch curves (assets/transfer_result.json; `--full`
  re-runs `spindleflow_rl.commands.transfer.transfer_curve`);
- log_routing.png: chapter 18c's policy against the tuned routers on three synthetic logs (assets/log_runs_readme.json;
  `--full` re-runs `bench/log_runs_readme.sh` and `bench/log_runs_collect.py`).
"""
from __future__ import annotations
import argparse, json, os, shutil, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ASSETS = ROOT/'spindleflow_rl'/'assets'
OUT = Path(__file__).resolve().parent/'figures'

def sh(*cmd):
    print('$', ' '.join(str(c) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], check=True, cwd=ROOT)

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--episodes', type=int, default=500, help='evaluation episodes per policy and split (default: as the README)')
    ap.add_argument('--full', action='store_true', help='re-run the experiments behind the committed result files first')
    a = ap.parse_args(argv)
    os.environ.setdefault('HF_HUB_OFFLINE', '1'); os.environ.setdefault('TRANSFORMERS_OFFLINE', '1')
    import matplotlib; matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    OUT.mkdir(parents=True, exist_ok=True)
    if a.full:
        main_run = OUT/'runs'/'main'
        if not (main_run/'final.zip').exists():
            sh('spindleflow-train', '--curriculum', '--demo-mode', '--out', OUT/'runs', '--run-name', 'main')
        sh(sys.executable, 'bench/main_run_assets.py', main_run)
        with open(OUT/'runs'/'log_runs_bench.txt', 'w') as f:       # the README's own-logs commands on three synthetic logs
            print('$ bash bench/log_runs_readme.sh', OUT/'runs'/'log_runs', flush=True)
            subprocess.run(['bash', 'bench/log_runs_readme.sh', str(OUT/'runs'/'log_runs')], check=True, stdout=f, cwd=ROOT)
        sh(sys.executable, 'bench/log_runs_collect.py', OUT/'runs'/'log_runs', OUT/'runs'/'log_runs_bench.txt')
        from spindleflow_rl.commands.transfer import transfer_curve
        transfer_curve(out=str(OUT/'runs'/'transfer'))
    ev = OUT/'eval'
    if ev.exists(): shutil.rmtree(ev)
    sh('spindleflow-eval', '--checkpoint', ASSETS/'demo_policy.zip', '--episodes', a.episodes, '--split', 'heldout',
       '--split', 'unseen-roster', '--json', ev/'eval.json', '--record', 1)
    for f in ('phases.png', 'pareto.png'): shutil.copy(ev/'eval'/f, OUT/f)
    shutil.copy(OUT/'phases.png', ROOT/'nbs'/'images'/'phases.png')       # the README's figure: the same evaluation
    shutil.copy(ev/'eval.md', OUT/'eval.md'); shutil.rmtree(ev)       # keep the table the figures come from, not the episodes
    from spindleflow_rl.training.train import plot_learning_curve
    fig, ax = plt.subplots(figsize=(9, 4.4))       # 990 px at dpi 110: the notes above the curve, the legend below
    plot_learning_curve(json.loads((ASSETS/'learning_curve.json').read_text()), ax=ax)
    fig.tight_layout(); fig.savefig(OUT/'learning_curve.png', dpi=110); plt.close(fig)
    from spindleflow_rl.commands.transfer import plot_transfer
    fig, ax = plt.subplots(figsize=(7, 3.8))
    plot_transfer(json.loads((ASSETS/'transfer_result.json').read_text()), ax=ax)
    fig.tight_layout(); fig.savefig(OUT/'transfer.png', dpi=110); plt.close(fig)
    from spindleflow_rl.training.log_runs import plot_log_results
    plot_log_results(json.loads((ASSETS/'log_runs_readme.json').read_text()), path=OUT/'log_routing.png', dpi=110)
    print('figures:', ', '.join(sorted(p.name for p in OUT.glob('*.png'))))

if __name__ == '__main__': main()
