#!/usr/bin/env python
"""Real-LLM training throughput against the number of environments (issues 15 and 22): `spindleflow_rl.training.train.train`
with the OpenAI backend (the real `openai` client over real HTTP) against its own loopback OpenAI-compatible server
that answers every request after `--latency` seconds, for 1, 8, 16, 32 and 64 environments, side by side in one run,
with the speed-up over the first row and the share of the machine's CPU the run used. `requests/s` and its speed-up
are a cross-check that does not depend on how many calls each configuration's episodes happened to make.

Each configuration trains a fresh run (tier 0, phase 1, no evaluation, PPO `n_steps` 64 as in the project's training
config, `--steps-per-env` timesteps per environment: one rollout and its update) on a fresh reply cache, so every reply is really requested; `timesteps/s` is the run's own figure
from `train_summary.json` (rollouts and PPO updates together, model construction not included). A warm-up run first
(the largest `n_envs`, the same seeds, no latency) fills the embedding cache with the server's answers, so the
reference row does not pay for embedding them alone. `CPU share` is the process's CPU time (user + system, every
thread: environments, policy, PPO update, and the loopback server, which a real deployment would not run) over
`wall time x cores`, measured from the start to the end of `learn`: near 100% the run is CPU-bound and more
environments cannot help. `batch` is the mean number of environments per policy call of the asynchronous collector.

    python bench/bench_llm_concurrency.py                                  # async, 0.5 s per call, 1 8 16 32 64 envs
    python bench/bench_llm_concurrency.py --vec-envs async,threads         # and the lockstep threads, side by side
    python bench/bench_llm_concurrency.py --n-steps 16 --steps-per-env 32  # short rollouts: the rollout's tail weighs more
    python bench/bench_llm_concurrency.py --latency 0.2 --n-envs 1,8 --n-steps 16 --steps-per-env 16
"""

import argparse, json, os, resource, shutil, sys, tempfile, time
from pathlib import Path

os.environ.setdefault('TOKENIZERS_PARALLELISM', 'false')


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def meter():
    "A callback measuring wall and CPU time of `learn`, and the async collector's policy calls."
    from stable_baselines3.common.callbacks import BaseCallback

    class Meter(BaseCallback):
        def _on_training_start(self):
            self.t0, self.c0 = time.perf_counter(), cpu_seconds()

        def _on_step(self):
            return True

        def _on_training_end(self):
            self.wall, self.cpu = time.perf_counter() - self.t0, cpu_seconds() - self.c0
            self.stats = dict(getattr(self.training_env, 'stats', {}))

    return Meter()


def run_one(
    server, n_envs, vec_env, timesteps, max_concurrency, root: Path, name: str, torch_threads: int, ppo: dict
) -> dict:
    from spindleflow_rl.training.train import load_run_config, train

    cfg = load_run_config(
        None,
        {
            'train': {
                'backend': 'openai',
                'tier': 0,
                'curriculum': False,
                'phase': 1,
                'timesteps': timesteps,
                'n_envs': n_envs,
                'vec_env': vec_env,
                'eval_episodes': 0,
                'progress': False,
                'checkpoint_every': 0,
                'imitation_teacher': '',
                'out': str(root / 'runs'),
                'run_name': name,
                'seed': 0,
                'torch_threads': torch_threads,
            },
            'ppo': ppo,
            'openai': {
                'base_url': server.base_url,
                'cache_dir': str(root / f'llm-{name}'),
                'max_concurrency': max_concurrency,
                'timeout_s': 60.0,
            },
        },
    )
    n0 = server.n_requests
    server.max_in_flight = 0
    m = meter()
    run = train(cfg, quiet=True, callbacks=[m])
    s = json.loads((run / 'train_summary.json').read_text())
    cores = os.cpu_count() or 1
    calls = m.stats.get('policy_calls', 0)
    return {
        'n_envs': n_envs,
        'vec_env': vec_env,
        'timesteps': s['num_timesteps'],
        'seconds': s['seconds'],
        'timesteps_per_s': s['timesteps_per_s'],
        'requests': server.n_requests - n0,
        'peak_in_flight': server.max_in_flight,
        'cpu_share': m.cpu / max(m.wall * cores, 1e-9),
        'cpu_s': m.cpu,
        'batch': (m.stats['acted'] / calls) if calls else None,
        'cost_usd': s['cost_usd'],
    }


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.split('\n\n')[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        '--latency', type=float, default=0.5, help='seconds the server takes to answer each request'
    )
    ap.add_argument(
        '--n-envs', default='1,8,16,32,64', help='comma-separated n_envs values; the first is the reference'
    )
    ap.add_argument(
        '--vec-envs', default='async', help='comma-separated: async, threads, dummy (each runs every n_envs)'
    )
    ap.add_argument(
        '--steps-per-env', type=int, default=64, help='timesteps per env (one rollout of --n-steps 64)'
    )
    ap.add_argument(
        '--min-timesteps', type=int, default=64, help='at least this many timesteps per configuration'
    )
    ap.add_argument(
        '--ref-timesteps',
        type=int,
        default=256,
        help='timesteps of the one-environment rows (the reference): '
        'its episodes vary a lot (a STOP makes no call, a sequential step makes three), so it needs more steps',
    )
    ap.add_argument(
        '--max-concurrency',
        type=int,
        default=256,
        help='requests in flight at most (the limiter): an API that allows hundreds',
    )
    ap.add_argument(
        '--torch-threads',
        type=int,
        default=1,
        help='torch CPU threads (1: no OpenMP spinning against the env threads)',
    )
    ap.add_argument(
        '--n-steps',
        type=int,
        default=64,
        help="PPO rollout length per environment (the project's default, 64)",
    )
    ap.add_argument(
        '--learning-rate',
        type=float,
        help="PPO learning rate (default: the project's); 0 keeps the policy as "
        'initialised, so every configuration samples the same mix of steps (measured: it moves the results little)',
    )
    ap.add_argument('--json', help='write the table here as JSON too')
    a = ap.parse_args(argv)
    os.environ.setdefault('OPENAI_API_KEY', 'local-bench')  # the loopback server takes any key
    from spindleflow_rl.llms.testing import ScriptedOpenAIServer

    ppo = {
        'n_steps': a.n_steps,
        'batch_size': 16,
        'n_epochs': 1,
        **({} if a.learning_rate is None else {'learning_rate': a.learning_rate}),
    }
    ns = [int(x) for x in a.n_envs.split(',')]
    kinds = [k.strip() for k in a.vec_envs.split(',')]
    root = Path(tempfile.mkdtemp(prefix='bench-llm-'))
    rows, load0 = [], os.getloadavg()
    try:
        with ScriptedOpenAIServer(usage=(400, 200)) as warm:  # warm-up: embeddings of the answers, imports
            run_one(
                warm,
                max(ns),
                'async',
                max(a.min_timesteps, max(ns) * a.steps_per_env),
                a.max_concurrency,
                root,
                'warmup',
                a.torch_threads,
                ppo,
            )
        with ScriptedOpenAIServer(usage=(400, 200), latency_s=a.latency) as srv:
            for kind in kinds:
                for n in ns:
                    ts = a.ref_timesteps if n == 1 else max(a.min_timesteps, n * a.steps_per_env)
                    r = run_one(
                        srv, n, kind, ts, a.max_concurrency, root, f'{kind}-{n}', a.torch_threads, ppo
                    )
                    rows.append(r)
                    print(
                        f"  {kind:8s} n_envs {n:3d}: {r['timesteps']:5d} timesteps in {r['seconds']:6.1f}s = "
                        f"{r['timesteps_per_s']:6.2f} timesteps/s, {r['requests']} requests, peak "
                        f"{r['peak_in_flight']} in flight, "
                        f"CPU {r['cpu_share']:.0%}",
                        flush=True,
                    )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    ref = rows[0]['timesteps_per_s']
    print(
        f"\nserver latency {a.latency} s per request, {os.cpu_count()} CPU cores, max_concurrency {a.max_concurrency}, "
        f"torch threads {a.torch_threads}, PPO n_steps {a.n_steps}, learning rate "
        f"{'default' if a.learning_rate is None else f'{a.learning_rate:g}'}; load average before {load0[0]:.1f}, "
        f"after {os.getloadavg()[0]:.1f} "
        "(a load above the cores means other processes shared the machine)\n"
    )
    print(
        '| vec env | n_envs | timesteps | seconds | timesteps/s | speed-up | requests/s | its speed-up | peak in '
        'flight | CPU share | batch |'
    )
    print('|---|---|---|---|---|---|---|---|---|---|---|')
    ref_req = rows[0]['requests'] / rows[0]['seconds']
    for r in rows:
        r['speedup'], r['requests_per_s'] = r['timesteps_per_s'] / ref, r['requests'] / r['seconds']
        batch = f"{r['batch']:.1f}" if r['batch'] else '-'
        print(
            f"| {r['vec_env']} | {r['n_envs']} | {r['timesteps']} | {r['seconds']:.1f} | {r['timesteps_per_s']:.2f} | "
            f"{r['speedup']:.1f}x | {r['requests_per_s']:.1f} | {r['requests_per_s'] / ref_req:.1f}x | "
            f"{r['peak_in_flight']} | "
            f"{r['cpu_share']:.0%} | {batch} |"
        )
    if a.json:
        Path(a.json).write_text(
            json.dumps(
                {
                    'latency_s': a.latency,
                    'cores': os.cpu_count(),
                    'ppo': ppo,
                    'load_before': load0,
                    'load_after': os.getloadavg(),
                    'rows': rows,
                },
                indent=2,
            )
        )
    return rows


if __name__ == '__main__':
    sys.exit(0 if main() else 1)
