"""The shipped figures' data from the README's main run (chapter 09, the blog):

- `spindleflow_rl/assets/learning_curve.json`: the run's learning curve, phase by phase (`learning_curve_data`);
- `spindleflow_rl/assets/warm_start_vs_ppo.json`: the warm start alone (`warm_start.zip`, the clone of the planner
  before any PPO update) against warm start + PPO (`final.zip`), played on the same episodes of the held-out tasks and
  the unseen roster, with paired 95% intervals.

Usage (after `spindleflow-train --curriculum --demo-mode --out runs`):

    python bench/main_run_assets.py runs/<run> [--episodes 500]

Both policies the adaptive planner they were cloned from, random and the oracle play the same seeds, so the differences are paired.
"""

from __future__ import annotations
import argparse, json, sys
from pathlib import Path

import numpy as np

from spindleflow_rl.core.config import PACKAGE_DIR
from spindleflow_rl.core.files import atomic_write_json
from spindleflow_rl.training.train import learning_curve_data, LEARNING_CURVE
from spindleflow_rl.agent.runs import SECTIONS, load_model, split_env_fn, build_world
from spindleflow_rl.agent.policies import ModelPolicy, make_baselines
from spindleflow_rl.commands.evaluate import evaluate_split, paired_difference

OUT = PACKAGE_DIR / 'assets' / 'warm_start_vs_ppo.json'
SPLITS = ('heldout', 'unseen-roster')


def _r(v):
    return [round(float(x), 4) for x in v] if isinstance(v, list) else round(float(v), 4)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split('\n\n')[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument('run', help='the run folder of the main job (holds final.zip and warm_start.zip)')
    ap.add_argument('--episodes', type=int, default=500, help='episodes per policy and split (default 500)')
    ap.add_argument('--seed', type=int, default=0)
    a = ap.parse_args(argv)
    run = Path(a.run)
    missing = [
        f
        for f in ('final.zip', 'warm_start.zip', 'config.json', 'train_summary.json')
        if not (run / f).exists()
    ]
    if missing:
        print(
            f"error: {run} has no {', '.join(missing)}: give the folder of a finished run of "
            "`spindleflow-train --curriculum --demo-mode` (warm_start.zip is written when a run clones a teacher).",
            file=sys.stderr,
        )
        return 2
    atomic_write_json(LEARNING_CURVE, learning_curve_data(run))
    model_w, cfg, _ = load_model(run / 'warm_start.zip', 'cpu')
    model_f = load_model(run / 'final.zip', 'cpu')[0]
    sec = {
        k: cls.from_dict(cfg.get(k) or {}) for k, cls in SECTIONS.items() if k != 'train'
    }  # as spindleflow-eval does
    world = build_world(cfg)
    pols = {
        'warm start': ModelPolicy(model_w),
        'warm start + PPO': ModelPolicy(model_f),
        **make_baselines(a.seed, ('random', 'adaptive-planner', 'oracle')),
    }
    out = {
        'run': run.name,
        'episodes': a.episodes,
        'seed': a.seed,
        'timesteps': json.loads((run / 'train_summary.json').read_text()).get('num_timesteps'),
        'splits': {},
    }
    for name in SPLITS:
        env_fn = split_env_fn(name, sec['env'], sec['reward'], sec['sim'], world)
        returns: dict = {}
        table, _ = evaluate_split(env_fn, pols, a.episodes, seed=a.seed, returns_out=returns)
        R = {k: np.asarray(v) for k, v in returns.items()}
        out['splits'][name] = {
            'return': {k: round(float(v['return']), 4) for k, v in table.items()},
            'return_ci95': {k: round(float(v['return_ci95']), 4) for k, v in table.items()},
            'ppo_minus_warm_start': {
                k: _r(v)
                for k, v in paired_difference(
                    R['warm start + PPO'], R['warm start'], R['random'], R['oracle']
                ).items()
            },
            'warm_start_minus_planner': {
                k: _r(v)
                for k, v in paired_difference(
                    R['warm start'], R['adaptive-planner'], R['random'], R['oracle']
                ).items()
            },
        }
        d = out['splits'][name]['ppo_minus_warm_start']
        print(
            f"{name:14s} warm start {table['warm start']['return']:+.3f}  warm start + PPO "
            f"{table['warm start + PPO']['return']:+.3f}"
            f"  adaptive-planner {table['adaptive-planner']['return']:+.3f}  PPO - warm start {d}"
        )
    atomic_write_json(OUT, out)
    print(f"wrote {LEARNING_CURVE} and {OUT}")
    return 0


if __name__ == '__main__':
    sys.exit(main())
