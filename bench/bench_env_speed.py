#!/usr/bin/env python
"""Environment speed with the simulated backend: steps/s in one process with random actions, next to a toy env of
the same observation and action shapes (the ceiling that gymnasium + numpy allow), measured side by side.

    python bench/bench_env_speed.py [--steps 20000] [--max-specialists 6] [--phase 0]
"""

import argparse, time
import numpy as np
import gymnasium as gym
from gymnasium import spaces
import spindleflow_rl
from spindleflow_rl.envs.env import SpindleFlowEnv
from spindleflow_rl.core.world import default_world
from spindleflow_rl.core.config import ObsLayout


class ToyEnv(gym.Env):
    "Same spaces, trivial dynamics: random 1-8 step episodes."

    def __init__(self, M=6):
        L = ObsLayout(M)
        self.observation_space = spaces.Box(-np.inf, np.inf, (L.obs_dim,), np.float32)
        self.action_space = spaces.Box(-1, 1, (L.action_dim,), np.float32)
        self.obs = np.zeros(L.obs_dim, np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.n = int(self.np_random.integers(1, 9))
        return self.obs.copy(), {}

    def step(self, a):
        self.t += 1
        return self.obs.copy(), 0.0, self.t >= self.n, False, {}


def run(env, steps, seed=0):
    rng = np.random.default_rng(seed)
    acts = rng.uniform(-1, 1, (steps,) + env.action_space.shape).astype(np.float32)
    env.reset(seed=seed)
    eps = 0
    t0 = time.perf_counter()
    for i in range(steps):
        _, _, term, trunc, _ = env.step(acts[i])
        if term or trunc:
            env.reset()
            eps += 1
    dt = time.perf_counter() - t0
    return steps / dt, eps


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--steps', type=int, default=20000)
    ap.add_argument('--max-specialists', type=int, default=6)
    ap.add_argument('--phase', type=int, default=0)
    a = ap.parse_args()
    default_world()  # build (or load from the embedding cache) outside the timed loop
    env = SpindleFlowEnv(max_specialists=a.max_specialists, phase=a.phase)
    toy = ToyEnv(a.max_specialists)
    run(env, 500)
    run(toy, 500)  # warm-up
    sf, eps = run(env, a.steps)
    ty, _ = run(toy, a.steps)
    print(
        f"SpindleFlow-v0 (sim backend, M={a.max_specialists}, phase={a.phase}): {sf:,.0f} steps/s ({a.steps} random "
        f"steps, {eps} episodes)"
    )
    print(f"toy env, same spaces:                        {ty:,.0f} steps/s")
    print(
        f"ratio SpindleFlow / toy: {sf / ty:.2f}   target >= 5,000 steps/s: {'OK' if sf >= 5000 else 'MISSED'}"
    )


if __name__ == '__main__':
    main()
