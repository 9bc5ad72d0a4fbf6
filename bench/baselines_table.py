#!/usr/bin/env python
"""Baselines on held-out tasks (all phases), the best one a deployment could run, and the simulator's ablations.

For each policy: mean return with a 95% confidence interval over N episodes (the same seeds, so the same tasks,
rosters and hidden parameters for every policy) and the normalised score (R - R_random) / (R_oracle - R_random)
with its paired-bootstrap 95% interval (`evaluate.normalised_ci`). "Best baseline" is the strongest policy that a
deployment could run (not `random`, not the `oracle`, which reads the simulator's hidden parameters).

Ablations: the best baseline and the gap to the oracle with each simulator design feature switched off
(dependencies, unreliability, latency budget, conflicts), and the self-refinement change of issue 10: a "debate"
of one specialist gets `self_refine_share` (0.5) of a debate's gain, 1.0 being the earlier model. The table
compares the adaptive planner with the same planner running every single call as a debate of one, paired.

    python bench/baselines_table.py [--episodes 2000] [--split heldout] [--no-ablations] [--json out.json]
"""

import argparse, json, time
import numpy as np
from spindleflow_rl.core.config import SimConfig
from spindleflow_rl.core.world import default_world
from spindleflow_rl.agent.policies import AdaptivePlannerPolicy, RandomPolicy, OraclePolicy
from spindleflow_rl.agent.runs import split_env_fn
from spindleflow_rl.agent.policies import make_baselines, BASELINES
from spindleflow_rl.commands.evaluate import evaluate_split, fmt_normalised

FEATURES = ('dependencies', 'unreliability', 'latency_budget', 'conflicts')
NOT_DEPLOYABLE = ('random', 'oracle')


def table(split, episodes, sim, policies, seed=0):
    tab, _ = evaluate_split(split_env_fn(split, sim=sim), policies, episodes, seed)
    return tab


def best_baseline(tab) -> str:
    return max((n for n in tab if n not in NOT_DEPLOYABLE), key=lambda n: tab[n]['return'])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--episodes', type=int, default=2000)
    ap.add_argument('--split', default='heldout')
    ap.add_argument('--no-ablations', action='store_true')
    ap.add_argument('--json')
    ap.add_argument('--seed', type=int, default=0)
    a = ap.parse_args()
    default_world()
    t0 = time.time()
    full = table(a.split, a.episodes, SimConfig(), make_baselines(a.seed, BASELINES), a.seed)
    print(f"## Baselines on {a.split} tasks, all phases ({a.episodes} episodes each)\n")
    print(
        '| policy | return (95% CI) | normalised (95% CI) | phase 1 | phase 2 | phase 3 | quality | specialists |'
    )
    print('|---|---|---|---|---|---|---|---|')
    for n, v in sorted(full.items(), key=lambda kv: -kv[1]['return']):
        nb = v['normalised_by_phase']
        print(
            f"| {n} | {v['return']:+.3f} ± {v['return_ci95']:.3f} | {fmt_normalised(v)} | {nb[1]:.2f} | {nb[2]:.2f} | "
            f"{nb[3]:.2f} "
            f"| {v['quality']:.3f} | {v['specialists_per_task']:.2f} |"
        )
    best = best_baseline(full)
    print(f"\nbest baseline a deployment could run: {best}, normalised {fmt_normalised(full[best])}")
    out = {'full': full, 'best_baseline': best}
    if not a.no_ablations:
        names = tuple(
            n
            for n in BASELINES
            if n in ('random', 'oracle', 'subtask-planner', 'adaptive-planner') or n.startswith('greedy')
        )
        print(f"\n## Ablations: each design feature switched off ({a.episodes} episodes each)\n")
        print(
            '| simulator | R random | best baseline (which) | R oracle | oracle - best | best normalised (95% CI) |'
        )
        print('|---|---|---|---|---|---|')
        rows = [('all features on', full)]
        for f in FEATURES:
            rows.append(
                (
                    f'{f} off',
                    table(
                        a.split, a.episodes, SimConfig(**{f: False}), make_baselines(a.seed, names), a.seed
                    ),
                )
            )
        for label, tab in rows:
            g = best_baseline(tab)
            print(
                f"| {label} | {tab['random']['return']:+.3f} | {tab[g]['return']:+.3f} ({g}) | "
                f"{tab['oracle']['return']:+.3f} | "
                f"{tab['oracle']['return'] - tab[g]['return']:+.3f} | {fmt_normalised(tab[g])} |"
            )
            out[label] = tab
        print(f"\n## Self-refinement: a debate of one specialist ({a.episodes} episodes each)\n")
        print(
            '| self_refine_share | adaptive planner, solo calls sequential | solo calls as a debate of one | debate - '
            'sequential |'
        )
        print('|---|---|---|---|')
        for share in (1.0, 0.5):
            pols = {
                'random': RandomPolicy(a.seed),
                'oracle': OraclePolicy(K=16, seed=a.seed),
                'sequential': AdaptivePlannerPolicy(),
                'debate': AdaptivePlannerPolicy(solo_mode='debate'),
            }
            ret = {}
            tab, _ = evaluate_split(
                split_env_fn(a.split, sim=SimConfig(self_refine_share=share)),
                pols,
                a.episodes,
                a.seed,
                returns_out=ret,
            )
            d = np.asarray(ret['debate']) - np.asarray(ret['sequential'])
            print(
                f"| {share} | {tab['sequential']['return']:+.3f} | {tab['debate']['return']:+.3f} | "
                f"{d.mean():+.4f} ± {1.96 * d.std(ddof=1) / np.sqrt(len(d)):.4f} |"
            )
            out[f'self_refine_share={share}'] = tab
    print(f"\n({time.time() - t0:.0f}s)")
    if a.json:
        open(a.json, 'w').write(json.dumps(out, indent=1, default=float))


if __name__ == '__main__':
    main()
