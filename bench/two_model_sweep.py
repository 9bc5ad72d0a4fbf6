"""The cost-quality curve on the synthetic two-model log (chapter 18), end to end.

    nice -n 10 python bench/two_model_sweep.py --out /tmp/two_model

Writes a 1000-question log (seed 1) and its catalog, then trains ONE cost-conditioned policy (`cost_coef` drawn per
episode from `--range`, given in the observation) and sweeps it on the held-out questions with
chapter 18's `cost_sweep` (`spindleflow_rl.logs.routers.sweep_main`; the command line's `--sweep` is chapter 18c's), copying the sweep JSON to `spindleflow_rl/assets/two_model_sweep.json`,
which chapter 18 plots. Two ways to train (`--mode`):

- `bc` (default): behaviour cloning of the Bayes cascade teacher (`routers.BayesCascadeTeacher`, fitted on the
  training questions only) through the Python API: `train()` builds the run exactly as `spindleflow-train` does, a
  callback clones the teacher (`imitation.collect_demonstrations` / `behaviour_clone` / `dagger_round`, `cost_coef`
  drawn per episode over the range) before the first PPO update and then stops, so the checkpoint is the cloned policy.
  `--finetune N` then runs `spindleflow-train --init-from <bc run> --timesteps N` (PPO) and sweeps that run instead.
- `ppo`: `spindleflow-train` alone (no warm start) for `--timesteps`, the earlier measurement.

Seeded. On a shared CPU: about 7 minutes for `bc` (5 of them cloning; log embedding cached), 15 for `ppo` at 150k timesteps."""

import argparse, json, subprocess, sys, time
from pathlib import Path
from spindleflow_rl.logs.routers import make_two_model_log, write_csv, TWO_MODEL_CATALOG

ASSET = Path(__file__).resolve().parents[1] / 'spindleflow_rl' / 'assets' / 'two_model_sweep.json'
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


def train_flags(out: Path, rng: str, run: str, seed: int = 0) -> list:
    "The `spindleflow-train` flags of every run here (the same config, catalog, log and price range)."
    return [
        '--config',
        str(out / 'train.yaml'),
        '--catalog',
        str(out / 'catalog.csv'),
        '--backend',
        'recorded',
        '--log-learner',
        'ppo',
        '--recorded',
        str(out / 'log.csv'),
        '--cost-coef-range',
        rng,
        '--out',
        str(out / 'runs'),
        '--run-name',
        run,
        '--seed',
        str(seed),
    ]


def clone_teacher(out: Path, rng: str, episodes: int, epochs: int, dagger: int, seed: int = 0) -> Path:
    """A run folder (as `spindleflow-train` writes it) whose policy is the Bayes cascade teacher cloned by behaviour
    cloning + `dagger` DAgger rounds on training questions, with no PPO update."""
    from stable_baselines3.common.callbacks import BaseCallback
    from spindleflow_rl.training.train import train
    from spindleflow_rl.cli import train_parser as build_parser, train_overrides as args_to_overrides
    from spindleflow_rl.agent.runs import load_run_config, build_world, make_backend
    from spindleflow_rl.envs.env import SpindleFlowEnv
    from spindleflow_rl.logs.routers import LoggedTasks, BayesCascadeTeacher
    from spindleflow_rl.training.imitation import (
        collect_demonstrations,
        behaviour_clone,
        dagger_round,
        concat_demonstrations,
    )

    a = build_parser().parse_args(train_flags(out, rng, 'bc', seed) + ['--timesteps', '512'])
    cfg = load_run_config(a.config, args_to_overrides(a))
    summary = {}

    class CloneThenStop(BaseCallback):
        "Before the first PPO update: clone the teacher into the model; then end training (no PPO update)."

        def _on_training_start(self):
            t0 = time.time()
            t = cfg['train']
            be, _ = make_backend(t, build_world(cfg), cfg['sim'])
            env = SpindleFlowEnv(
                cfg['env'].replace(phase=0, split='train', roster_split='train'),
                reward_config=cfg['reward'],
                sim_config=cfg['sim'],
                world=be.world,
                backend=be,
            )
            teacher = BayesCascadeTeacher(LoggedTasks(be))
            demos = collect_demonstrations(env, teacher, episodes, seed=seed + 1_000_000)
            losses = behaviour_clone(self.model, demos, epochs, batch_episodes=64, lr=2e-3, seed=seed)
            rets = []
            for r in range(dagger):
                d = dagger_round(
                    self.model, env, teacher, max(1, episodes // 2), seed=seed + 2_000_000 + r * episodes
                )
                rets.append(float(d.episode_returns.mean()))
                demos = concat_demonstrations(demos, d)
                losses += behaviour_clone(
                    self.model, demos, max(1, epochs // 2), batch_episodes=64, lr=1e-3, seed=seed + r + 1
                )
            summary.update(
                teacher='bayes-cascade',
                episodes=episodes,
                steps=len(demos),
                epochs=epochs,
                dagger_rounds=dagger,
                teacher_return=float(demos.episode_returns[:episodes].mean()),
                policy_return_per_round=rets,
                loss_first=losses[0],
                loss_last=losses[-1],
                seconds=round(time.time() - t0),
            )
            print('  cloned:', json.dumps(summary), flush=True)

        def _on_step(self):
            return False

    run = train(cfg, callbacks=[CloneThenStop()])
    (run / 'imitation.json').write_text(json.dumps(summary, indent=1))
    return run


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--out', default='/tmp/two_model')
    ap.add_argument('--mode', choices=('bc', 'ppo'), default='bc')
    ap.add_argument('--timesteps', type=int, default=150000, help='--mode ppo: PPO timesteps')
    ap.add_argument('--episodes', type=int, default=3000, help='--mode bc: teacher episodes')
    ap.add_argument('--epochs', type=int, default=30)
    ap.add_argument('--dagger', type=int, default=1)
    ap.add_argument(
        '--finetune', type=int, default=0, help='--mode bc: PPO timesteps after cloning (0: none)'
    )
    ap.add_argument('--n', type=int, default=1000)
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--range', default='0,300')
    ap.add_argument('--coefs', default='0,50,100,150,200,250,300')
    ap.add_argument('--no-asset', action='store_true', help='do not copy the result into the package assets')
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(make_two_model_log(a.n, a.seed), out / 'log.csv')
    write_csv(
        TWO_MODEL_CATALOG,
        out / 'catalog.csv',
        ['id', 'role', 'domain', 'cost', 'latency', 'reliability', 'capability'],
    )
    (out / 'train.yaml').write_text(CONFIG.format(timesteps=a.timesteps))
    if a.mode == 'ppo':
        sh('spindleflow-train', *train_flags(out, a.range, 'policy'), '--timesteps', str(a.timesteps))
        run = out / 'runs' / 'policy'
        how = f"--mode ppo --timesteps {a.timesteps}"
    else:
        run = bc_run = clone_teacher(out, a.range, a.episodes, a.epochs, a.dagger)
        how = f"--mode bc --episodes {a.episodes} --epochs {a.epochs} --dagger {a.dagger}"
        if a.finetune:
            sh(
                'spindleflow-train',
                *train_flags(out, a.range, 'finetune'),
                '--init-from',
                str(run),
                '--timesteps',
                str(a.finetune),
            )
            run = out / 'runs' / 'finetune'
            how += f" --finetune {a.finetune}"
    from spindleflow_rl.logs.routers import (
        sweep_main,
    )  # chapter 18's cost_coef sweep (the PPO learner's, with the Bayes teacher)

    print(f"$ sweep_main({run}, 'cost_coef={a.coefs}')", flush=True)
    sweep_main(run, f'cost_coef={a.coefs}', out / 'sweep.json')
    if not a.no_asset:
        res = json.loads((out / 'sweep.json').read_text())
        res['checkpoint'] = f"bench/two_model_sweep.py {how} --n {a.n} --seed {a.seed} --range {a.range}"
        if a.mode == 'bc':
            res['warm_start'] = json.loads((bc_run / 'imitation.json').read_text())
        ASSET.write_text(json.dumps(res, indent=1))
        print('wrote', ASSET)


if __name__ == '__main__':
    main()
