#!/usr/bin/env python
"""Embedding cache benchmark: 1,000 distinct short texts embedded three times, timed side by side.

1. cold   - fresh Embedder, empty temp cache: model load + encode + disk write
2. disk   - a second, fresh Embedder on the same cache folder: every text read from disk, the model never loaded
3. memory - the same second instance again: every text from its in-memory LRU

Target: the disk-hit time is under 1% of the cold time.
Usage: python bench/bench_embed_cache.py [--n 1000] [--batch-size 64] [--device cpu]
"""

import argparse, itertools, shutil, tempfile, time
from pathlib import Path
from spindleflow_rl.core.embeddings import Embedder

VERBS = [
    'build',
    'review',
    'refactor',
    'test',
    'document',
    'deploy',
    'profile',
    'secure',
    'design',
    'migrate',
]
THINGS = [
    'a login form',
    'the payments API',
    'a data pipeline',
    'the CI workflow',
    'a mobile onboarding screen',
    'the search index',
    'an ML training job',
    'the release notes',
    'a GraphQL schema',
    'the audit log',
]
WHERE = [
    'for a startup',
    'for a bank',
    'in Python',
    'in TypeScript',
    'on Kubernetes',
    'before launch',
    'for accessibility',
    'under load',
    'with feature flags',
    'for the EU region',
]


def make_texts(n: int) -> list[str]:
    "n distinct short task-like texts, the same on every run (no randomness)."
    combos = [' '.join(c) for c in itertools.product(VERBS, THINGS, WHERE)]
    texts = [
        t if i < len(combos) else f'{t} (variant {i // len(combos)})'
        for i, t in enumerate(itertools.islice(itertools.cycle(combos), n))
    ]
    assert len(set(texts)) == n
    return texts


def timed(f):
    t = time.perf_counter()
    out = f()
    return out, time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--n', type=int, default=1000, help='number of distinct texts')
    ap.add_argument('--batch-size', type=int, default=64, help='encoder batch size')
    ap.add_argument('--device', default='cpu', help="'cpu', 'cuda' or 'auto'")
    args = ap.parse_args()
    texts = make_texts(args.n)
    cache = Path(tempfile.mkdtemp(prefix='spindleflow-embed-bench-'))
    try:
        cold = Embedder(cache_dir=cache, batch_size=args.batch_size, device=args.device)
        load_s, load = [], cold._load

        def timed_load():  # note how much of the cold pass is the (lazy) model load
            was_loaded = cold._model is not None
            out, t = timed(load)
            if not was_loaded:
                load_s.append(t)
            return out

        cold._load = timed_load
        a, t_cold = timed(lambda: cold.encode(texts))
        warm = Embedder(cache_dir=cache, batch_size=args.batch_size, device=args.device)
        b, t_disk = timed(lambda: warm.encode(texts))
        assert warm._model is None, 'the disk-hit pass loaded the model'
        assert warm.stats == {'memory_hits': 0, 'disk_hits': args.n, 'encoded': 0}, warm.stats
        c, t_mem = timed(lambda: warm.encode(texts))
        assert warm.stats['memory_hits'] == args.n, warm.stats
        assert (a == b).all() and (b == c).all(), 'cached vectors differ from the encoded ones'
        n_files = sum(1 for _ in cache.rglob('*.npy'))
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    print(
        f'{args.n} distinct texts, model {cold.model_id}, device {args.device}, batch {args.batch_size}, '
        f'{n_files} cache files'
    )
    print(f"{'pass':<38}{'time (s)':>10}{'per text (us)':>15}{'vs cold':>10}")
    for name, t in [
        ('cold: load model + encode + write', t_cold),
        ('disk hit: fresh instance, same cache', t_disk),
        ('memory hit: same instance', t_mem),
    ]:
        print(f'{name:<38}{t:>10.4f}{t / args.n * 1e6:>15.1f}{t / t_cold:>10.2%}')
    print(
        f'  (cold = {sum(load_s):.2f} s model load + {t_cold - sum(load_s):.2f} s encoding and writing; '
        f'disk hit vs encoding alone: {t_disk / (t_cold - sum(load_s)):.2%})'
    )
    verdict = 'OK' if t_disk < 0.01 * t_cold else 'MISSED'
    print(
        f'target disk hit < 1% of cold: {verdict} ({t_disk / t_cold:.2%}); cold/disk speed-up x{t_cold / t_disk:.0f}, '
        f'cold/memory x{t_cold / t_mem:.0f}'
    )


if __name__ == '__main__':
    main()
