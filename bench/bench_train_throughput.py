#!/usr/bin/env python
"""Training throughput: the project's model (`spindleflow_rl.agent.network.make_model`) vs sb3-contrib's default
`RecurrentPPO('MlpLstmPolicy', ...)`, side by side in one run, on the same environment and the same number of
DummyVecEnv copies.

Environment: the real `SpindleFlow-v0` when it is importable and registered (`--env auto`, the default, or
`--env real`), else a stand-in with exactly its observation layout (`ObsLayout(M, 384)`) and action shape, whose
episodes last 1-8 steps (`--env toy`). The output says which one ran.

Threads: torch intra-op threads are set once for both runs (`--threads`, default 1), so the ratio compares the
models, not the thread settings. On the shared 2-core dev box (load ~4-5 from other agents) 2 threads made BOTH models
slower, not faster: project model 99 vs 669 steps/s, default MlpLstm 6.1 vs 12.6 steps/s (2 vs 1 thread): OpenMP
threads spin and get descheduled when the cores are oversubscribed. Use `--threads 2` on an idle machine. The default MlpLstm policy is slow, so it
runs fewer timesteps (`--baseline-timesteps`, default 1024, one rollout); its `n_steps` is lowered to fit that budget
(`timesteps // n_envs`, at most its default 128), which does not change its per-step cost (each sample is trained on
n_epochs times whatever the rollout length). Model construction is not timed; `learn` is.

    python bench/bench_train_throughput.py                       # defaults
    python bench/bench_train_throughput.py --timesteps 32768 --baseline-timesteps 2048 --env toy
"""

import argparse, os, sys, time
import numpy as np
import torch
import gymnasium as gym
from gymnasium import spaces
from stable_baselines3.common.vec_env import DummyVecEnv


def _unit(x):
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-8)


class ToyDelegationEnv(gym.Env):
    "Stand-in with SpindleFlow-v0's observation layout: call the specialists that fit the open subtasks, then STOP."

    def __init__(self, max_specialists=6, emb_dim=384, max_steps=8):
        from spindleflow_rl.core.config import ObsLayout

        self.L = ObsLayout(max_specialists, emb_dim)
        self.M, self.D, self.max_steps = max_specialists, emb_dim, max_steps
        self.observation_space = spaces.Box(-np.inf, np.inf, (self.L.obs_dim,), np.float32)
        self.action_space = spaces.Box(-1, 1, (self.L.action_dim,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        r, M, D = self.np_random, self.M, self.D
        k = int(r.integers(1, 4))
        self.sub = _unit(r.standard_normal((k, D)))
        n_filled = int(r.integers(k + 1, M + 1))
        rows, owner = np.zeros((M, D)), -np.ones(M, int)
        rows[:k] = _unit(self.sub + 0.6 * _unit(r.standard_normal((k, D))))
        owner[:k] = np.arange(k)
        rows[k:n_filled] = _unit(r.standard_normal((n_filled - k, D)))
        perm = r.permutation(M)
        self.roster, self.owner = rows[perm], owner[perm]
        self.empty = ~self.roster.any(-1)
        self.open = np.ones(k, bool)
        self.called = np.zeros(M, bool)
        self.out, self.t, self.task = np.zeros((M, D)), 0, _unit(self.sub.sum(0))
        self.adj = np.zeros((M + 4, M + 4))
        return self._obs(), {}

    def _obs(self):
        s = _unit(self.sub[self.open].mean(0)) if self.open.any() else np.zeros(self.D)
        sc = [
            self.t / self.max_steps,
            1 - self.t / self.max_steps,
            0.1 * self.t,
            0,
            0,
            0,
            0.05 * self.called.sum(),
            self.called.mean(),
        ]
        fit = np.where(self.empty, 0.0, np.clip(self.roster @ s, 0, 1))  # per-slot fit to the open work
        so = np.zeros((self.M, self.L.n_slot_features))
        so[:, 0] = so[:, 1] = fit
        so[:, 2] = np.where(self.empty, 0, 1)
        return np.concatenate(
            [
                self.task,
                self.roster.ravel(),
                self.out.ravel(),
                s,
                self.adj.ravel(),
                self.called,
                sc,
                so.ravel(),
            ]
        ).astype(np.float32)

    def step(self, action):
        self.t += 1
        M = self.M
        if action[0] >= 0:
            return self._obs(), float(-0.5 * self.open.sum()), True, False, {}  # STOP
        sel = np.flatnonzero((action[1 : M + 1] > 0) & ~self.empty & ~self.called)
        rew = -0.1 if len(sel) == 0 else 0.0
        for i in sel:
            self.called[i] = True
            self.adj[0, i + 1] = self.adj[i + 1, M + 1] = 1
            self.out[i] = _unit(self.roster[i] + 0.3 * _unit(self.np_random.standard_normal(self.D)))
            j = self.owner[i]
            if j >= 0 and self.open[j]:
                self.open[j] = False
                rew += 1.0
            else:
                rew -= 0.3
        return self._obs(), float(rew), False, self.t >= self.max_steps, {}


def real_env_factory():
    "A zero-argument constructor for SpindleFlow-v0, or None when it is not available."
    try:
        import spindleflow_rl

        try:
            import spindleflow_rl.envs.env  # noqa: F401  (registers SpindleFlow-v0)
        except ImportError:
            pass
        if 'SpindleFlow-v0' not in gym.registry:
            return None
    except Exception as e:
        print(f'(SpindleFlow-v0 unavailable: {type(e).__name__}: {e})')
        return None
    return lambda: gym.make('SpindleFlow-v0')


from spindleflow_rl.agent.runs import (
    FastDummyVecEnv,
)  # the vec env spindleflow-train uses (no per-step info deepcopy)


class TimedDummyVecEnv(FastDummyVecEnv):
    "The training vec env, adding up the seconds spent stepping and resetting the environments."

    env_seconds = 0.0

    def step_wait(self):
        t0 = time.perf_counter()
        out = super().step_wait()
        self.env_seconds += time.perf_counter() - t0
        return out

    def reset(self):
        t0 = time.perf_counter()
        out = super().reset()
        self.env_seconds += time.perf_counter() - t0
        return out


def make_venv(factory, n_envs, seed):
    v = TimedDummyVecEnv([factory for _ in range(n_envs)])
    v.seed(seed)
    return v


def env_speed(factory, seconds=1.0, seed=0):
    "Random-action steps/s of one environment (context for the training figures)."
    env = factory()
    env.reset(seed=seed)
    env.action_space.seed(seed)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        n += 1
        if term or trunc:
            env.reset()
    return n / (time.perf_counter() - t0)


def timed_learn(model, timesteps):
    "Timesteps done, wall seconds of `learn`, and the part of them spent inside the environments."
    venv = model.get_env()
    venv.env_seconds = 0.0
    t0 = time.perf_counter()
    model.learn(timesteps)
    dt = time.perf_counter() - t0
    return model.num_timesteps, dt, venv.env_seconds


def main(argv=None):
    from spindleflow_rl.agent.network import make_model, DEFAULT_N_ENVS, DEFAULT_PPO

    p = argparse.ArgumentParser(
        description=__doc__.split('\n\n')[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument('--timesteps', type=int, default=16384, help='timesteps for the project model')
    p.add_argument(
        '--baseline-timesteps', type=int, default=1024, help='timesteps for the default MlpLstmPolicy (slow)'
    )
    p.add_argument(
        '--n-envs', type=int, default=DEFAULT_N_ENVS, help='DummyVecEnv copies, same for both models'
    )
    p.add_argument(
        '--threads', type=int, default=1, help='torch threads, same for both (see the module docstring)'
    )
    p.add_argument('--env', choices=['auto', 'real', 'toy'], default='auto')
    p.add_argument(
        '--device', default='cpu', help="torch device for both models ('auto' picks CUDA when present)"
    )
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--skip-baseline', action='store_true', help='only time the project model')
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)

    factory = real_env_factory() if a.env in ('auto', 'real') else None
    if factory is None and a.env == 'real':
        sys.exit('SpindleFlow-v0 is not available (spindleflow_rl.envs.env missing?); use --env toy.')
    env_name = (
        'SpindleFlow-v0 (real)' if factory else 'toy stand-in (SpindleFlow-v0 layout, 1-8-step episodes)'
    )
    factory = factory or ToyDelegationEnv
    print(
        f'env: {env_name}; obs dim {factory().observation_space.shape[0]}; {a.n_envs} x DummyVecEnv; '
        f'torch {torch.__version__}, {a.threads} thread(s), device {a.device}'
    )
    print(f'env alone (random actions): {env_speed(factory, seed=a.seed):,.0f} steps/s')

    ours = make_model(make_venv(factory, a.n_envs, a.seed), seed=a.seed, device=a.device)
    n, dt, env_s = timed_learn(ours, a.timesteps)
    r_ours = n / dt
    rew = [e['r'] for e in ours.ep_info_buffer]
    print(
        f'project model   (SpindleFlowPolicy, {sum(x.numel() for x in ours.policy.parameters()):,} params; '
        f'n_steps={ours.n_steps}, batch={ours.batch_size}, epochs={ours.n_epochs}): '
        f'{n:,} steps in {dt:.1f} s = {r_ours:,.0f} steps/s'
        + (f'; last-100-episode mean reward {np.mean(rew):.2f}' if rew else '')
    )
    print(
        f'  of which in the envs (step + reset): {env_s:.1f} s ({env_s / dt:.0%}); '
        f'model alone (rollout inference + PPO updates): {n / max(dt - env_s, 1e-9):,.0f} steps/s'
    )
    if a.skip_baseline:
        return
    from sb3_contrib import RecurrentPPO

    n_steps = int(min(128, max(8, a.baseline_timesteps // a.n_envs)))
    base = RecurrentPPO(
        'MlpLstmPolicy', make_venv(factory, a.n_envs, a.seed), n_steps=n_steps, seed=a.seed, device=a.device
    )
    n, dt, env_s = timed_learn(base, a.baseline_timesteps)
    r_base = n / dt
    print(
        f'default MlpLstm (sb3-contrib defaults, {sum(x.numel() for x in base.policy.parameters()):,} params; '
        f'n_steps={n_steps}, batch={base.batch_size}, epochs={base.n_epochs}): {n:,} steps in {dt:.1f} s = '
        f'{r_base:,.1f} steps/s'
    )
    print(f'ratio: {r_ours / r_base:,.1f}x')


if __name__ == '__main__':
    main()
