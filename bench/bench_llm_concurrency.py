#!/usr/bin/env python
"""Real-LLM training throughput against concurrency (issue 15): `spindleflow_rl.train.train` with the OpenAI backend
(the real `openai` client over real HTTP) against its own loopback OpenAI-compatible server that answers every request
after `--latency` seconds, for several `n_envs`, side by side in one run, with the speed-up over the first.

Each configuration trains a fresh run (tier 0, phase 1, no evaluation, PPO `n_steps` 16) on a fresh reply cache, so
every reply is really requested; `timesteps/s` is the run's own figure from `train_summary.json` (rollouts and PPO
updates together, model construction not included). A short warm-up run first fills the embedding cache with the
server's answers so the first configuration does not pay for it alone. The vectorised env is `threads`
(chapter 09a), with `--max-concurrency` requests in flight at most (default 64: no cap below 16 envs); `--vec-envs
threads,dummy` also runs the one-after-another `DummyVecEnv` for comparison, `subproc` one process per env.

    python bench/bench_llm_concurrency.py                                   # 0.5 s per call, n_envs 1 4 8 16
    python bench/bench_llm_concurrency.py --latency 0.2 --n-envs 1,8 --vec-envs threads,dummy
"""
import argparse, json, os, shutil, sys, tempfile, time
from pathlib import Path

os.environ.setdefault('TOKENIZERS_PARALLELISM', 'false')


def run_one(server, n_envs, vec_env, timesteps, max_concurrency, root: Path, name: str) -> dict:
    from spindleflow_rl.train import load_run_config, train
    cfg = load_run_config(None, {
        'train': {'backend': 'openai', 'tier': 0, 'curriculum': False, 'phase': 1, 'timesteps': timesteps, 'n_envs': n_envs,
                  'vec_env': vec_env, 'eval_episodes': 0, 'progress': False, 'checkpoint_every': 0, 'imitation_teacher': '',
                  'out': str(root/'runs'), 'run_name': name, 'seed': 0},
        'ppo': {'n_steps': 16, 'batch_size': 16, 'n_epochs': 1},
        'openai': {'base_url': server.base_url, 'cache_dir': str(root/f'llm-{name}'), 'max_concurrency': max_concurrency,
                   'timeout_s': 30.0}})
    n0 = server.n_requests; server.max_in_flight = 0
    run = train(cfg, quiet=True)
    s = json.loads((run/'train_summary.json').read_text())
    return {'n_envs': n_envs, 'vec_env': vec_env, 'timesteps': s['num_timesteps'], 'seconds': s['seconds'],
            'timesteps_per_s': s['timesteps_per_s'], 'requests': server.n_requests - n0, 'peak_in_flight': server.max_in_flight,
            'cost_usd': s['cost_usd']}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--latency', type=float, default=0.5, help='seconds the server takes to answer each request')
    ap.add_argument('--n-envs', default='1,4,8,16', help='comma-separated n_envs values; the first is the reference')
    ap.add_argument('--vec-envs', default='threads', help='comma-separated: threads, dummy, subproc')
    ap.add_argument('--steps-per-env', type=int, default=32, help='timesteps per env (two rollouts of 16 steps)')
    ap.add_argument('--min-timesteps', type=int, default=64, help='at least this many timesteps per configuration')
    ap.add_argument('--max-concurrency', type=int, default=64, help='requests in flight at most (the limiter)')
    ap.add_argument('--json', help='write the table here as JSON too')
    a = ap.parse_args(argv)
    os.environ.setdefault('OPENAI_API_KEY', 'local-bench')           # the loopback server takes any key
    from spindleflow_rl.testing import ScriptedOpenAIServer
    ns = [int(x) for x in a.n_envs.split(',')]; kinds = [k.strip() for k in a.vec_envs.split(',')]
    root = Path(tempfile.mkdtemp(prefix='bench-llm-'))
    rows = []
    try:
        with ScriptedOpenAIServer(usage=(400, 200)) as warm:           # warm-up: embeddings of the answers, imports
            run_one(warm, 4, 'threads', 64, a.max_concurrency, root, 'warmup')
        with ScriptedOpenAIServer(usage=(400, 200), latency_s=a.latency) as srv:
            for kind in kinds:
                for n in ns:
                    ts = max(a.min_timesteps, n*a.steps_per_env)
                    r = run_one(srv, n, kind, ts, a.max_concurrency, root, f'{kind}-{n}')
                    rows.append(r)
                    print(f"  {kind:8s} n_envs {n:3d}: {r['timesteps']:5d} timesteps in {r['seconds']:6.1f}s = "
                          f"{r['timesteps_per_s']:6.2f} timesteps/s, {r['requests']} requests, peak {r['peak_in_flight']} in flight",
                          flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    ref = rows[0]['timesteps_per_s']
    print(f"\nserver latency {a.latency} s per request, {os.cpu_count()} CPU cores, max_concurrency {a.max_concurrency}\n")
    print('| vec env | n_envs | timesteps | seconds | timesteps/s | speed-up | requests | peak in flight |')
    print('|---|---|---|---|---|---|---|---|')
    for r in rows:
        r['speedup'] = r['timesteps_per_s']/ref
        print(f"| {r['vec_env']} | {r['n_envs']} | {r['timesteps']} | {r['seconds']:.1f} | {r['timesteps_per_s']:.2f} | "
              f"{r['speedup']:.1f}x | {r['requests']} | {r['peak_in_flight']} |")
    if a.json: Path(a.json).write_text(json.dumps({'latency_s': a.latency, 'rows': rows}, indent=2))
    return rows


if __name__ == '__main__':
    sys.exit(0 if main() else 1)
