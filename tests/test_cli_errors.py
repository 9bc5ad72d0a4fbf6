"""Every command's flags with bad values (issue 20, item 1): wrong type, zero, negative, out of range, huge, NaN, an
empty string, a flag that has no effect with the other flags given, conflicting flags. Each must exit 2 with a
message naming the flag (or its config key), before any run folder or output exists, never a traceback, never run as
if the flag were absent. In process through `main(argv)` (a second each); in a subprocess where a value might make
the command hang or allocate without bound (with a timeout and a memory limit), for `spindleflow-serve` (it serves
for ever when it accepts), and one case per command through the real console script. See `cli_harness`."""

import socket
import pytest, torch
from cli_harness import Case, Ctx, run_case, run_inproc, tiny_run, TASK


def train(*extra, ts='64'):
    """spindleflow-train on the tiny config, run folder {tmp}/runs/x, no evaluation after it, plus `extra` (argparse keeps
    the last of a repeated flag): cheap even when a bad value is accepted."""
    return [
        '--config',
        '{cfg}',
        '--out',
        '{tmp}/runs',
        '--run-name',
        'x',
        '--eval-episodes',
        '0',
        '--no-progress',
        *(['--timesteps', ts] if ts else []),
        *extra,
    ]


def F(flag: str) -> tuple:
    "A train flag is named as the flag or as its config key: ('--n-envs', 'train.n_envs')."
    return ('--' + flag.replace('_', '-'), 'train.' + flag.replace('-', '_'))


EVAL = [
    '--checkpoint',
    '{run}',
    '--episodes',
    '2',
    '--record',
    '0',
    '--split',
    'heldout',
    '--baselines',
    'random',
    '--json',
    '{tmp}/e.json',
]


def evals(**kw):
    "EVAL with flags replaced (`episodes='1'`) or added; a value None drops the flag."
    a = list(EVAL)
    for k, v in kw.items():
        f = '--' + k.replace('_', '-')
        if f in a:
            i = a.index(f)
            del a[i : i + 2]
        if v is not None:
            a += [f, v]
    return a


DEMO = ['--checkpoint', '{run}', '--episodes', '2', '--record', '1', '--out', '{tmp}/demo']
EXPORT = ['--checkpoint', '{run}', '--task', TASK, '--out', '{tmp}/wf.yml']
AUDIT = ['{run}', '--out', '{tmp}/audit']
SWEEP = [
    '--sweep',
    'train.seed=0',
    '--set',
    'train.timesteps=64',
    '--config',
    '{cfg}',
    '--engine',
    'local',
    '--eval-episodes',
    '0',
    '--out',
    '{tmp}/sw',
]


def replace(argv, flag, value):
    a = list(argv)
    i = a.index(flag)
    a[i + 1] = value
    return a


NO_RUN = ('{tmp}/runs/x',)
R = 'refuse before anything runs (exit 2), naming the flag'
CUDA = torch.cuda.is_available()

TRAIN_CASES = [
    Case('train-timesteps-text', 'train', train(ts='abc'), 2, ('--timesteps',), R),
    Case('train-timesteps-zero', 'train', train(ts='0'), 2, (F('timesteps'),), R, absent=NO_RUN),
    Case('train-timesteps-negative', 'train', train(ts='-64'), 2, (F('timesteps'),), R, absent=NO_RUN),
    Case(
        'train-timesteps-overflow',
        'train',
        train('--demo-mode', ts='99999999999999999999999'),
        2,
        (F('timesteps'),),
        'refuse a count beyond int64 (exit 2) instead of failing or running for ever',
        proc=True,
        timeout=45,
        absent=NO_RUN,
    ),
    Case('train-n-envs-zero', 'train', train('--n-envs', '0'), 2, (F('n_envs'),), R, absent=NO_RUN),
    Case('train-n-envs-negative', 'train', train('--n-envs', '-2'), 2, (F('n_envs'),), R, absent=NO_RUN),
    Case(
        'train-n-envs-huge',
        'train',
        train('--demo-mode', '--n-envs', '100000'),
        2,
        (F('n_envs'),),
        'refuse 100,000 environments for 64 timesteps (one rollout would be 1.6M steps) instead of building them',
        proc=True,
        timeout=45,
        absent=NO_RUN,
    ),
    Case(
        'train-seed-negative',
        'train',
        train('--seed', '-1'),
        2,
        (F('seed'),),
        'refuse: seeds are 0 .. 2**32-1 (numpy, SB3)',
        absent=NO_RUN,
    ),
    Case(
        'train-seed-huge',
        'train',
        train('--seed', str(2**40)),
        2,
        (F('seed'),),
        'refuse: seeds are 0 .. 2**32-1 (numpy, SB3)',
        absent=NO_RUN,
    ),
    Case(
        'train-max-cost-negative',
        'train',
        train('--max-cost-usd', '-1'),
        2,
        (F('max_cost_usd'),),
        R,
        absent=NO_RUN,
    ),
    Case(
        'train-max-cost-nan',
        'train',
        train('--max-cost-usd', 'nan'),
        2,
        (F('max_cost_usd'),),
        'refuse NaN (a NaN budget never stops anything)',
        absent=NO_RUN,
    ),
    Case(
        'train-eval-episodes-negative',
        'train',
        train('--eval-episodes', '-1'),
        2,
        (F('eval_episodes'),),
        R,
        absent=NO_RUN,
    ),
    Case(
        'train-eval-episodes-one',
        'train',
        train('--eval-episodes', '1'),
        2,
        (F('eval_episodes'),),
        'refuse before training (an evaluation needs 2 episodes), not after it',
        absent=NO_RUN,
    ),
    Case('train-device-bogus', 'train', train('--device', 'tpu'), 2, ('--device',), R, absent=NO_RUN),
    Case(
        'train-device-cuda',
        'train',
        train('--device', 'cuda'),
        0 if CUDA else 2,
        () if CUDA else ('--device',),
        'no GPU here: refuse --device cuda naming it' if not CUDA else 'train on the GPU',
    ),
    Case(
        'train-torch-threads-negative',
        'train',
        train('--torch-threads', '-1'),
        2,
        (F('torch_threads'),),
        R,
        absent=NO_RUN,
    ),
    Case(
        'train-max-concurrency-zero',
        'train',
        train('--max-concurrency', '0'),
        2,
        (('--max-concurrency', 'openai.max_concurrency'),),
        'refuse 0 (also when the backend does not use it)',
        absent=NO_RUN,
    ),
    Case(
        'train-tokens-per-minute-negative',
        'train',
        train('--tokens-per-minute', '-5'),
        2,
        (('--tokens-per-minute', 'openai.tokens_per_minute'),),
        'refuse a negative token budget',
        absent=NO_RUN,
    ),
    Case(
        'train-cost-coef-nan',
        'train',
        train('--cost-coef', 'nan'),
        2,
        (('--cost-coef', 'reward.cost_coef'),),
        R,
        absent=NO_RUN,
    ),
    Case(
        'train-cost-coef-negative',
        'train',
        train('--cost-coef', '-1'),
        2,
        (('--cost-coef', 'reward.cost_coef'),),
        'refuse a negative price of money (it would reward spending)',
        absent=NO_RUN,
    ),
    Case(
        'train-cost-coef-range-reversed',
        'train',
        train('--cost-coef-range', '2,1'),
        2,
        ('--cost-coef-range',),
        R,
        absent=NO_RUN,
    ),
    Case(
        'train-imitation-teacher-bogus',
        'train',
        train('--imitation-teacher', 'bogus'),
        2,
        ('bogus',),
        R,
        absent=NO_RUN,
    ),
    Case(
        'train-recorded-backend-without-log',
        'train',
        train('--backend', 'recorded'),
        2,
        ('--recorded',),
        R,
        absent=NO_RUN,
    ),
    Case(
        'train-recorded-log-without-backend',
        'train',
        train('--recorded', '{tmp}/log.csv'),
        2,
        ('--backend',),
        'refuse a log the simulated backend would ignore',
        absent=NO_RUN,
        setup=lambda c: (c.path('{tmp}') / 'log.csv').write_text(
            'task,specialist_id,quality,cost_usd,latency_s\n'
        ),
    ),
    Case(
        'train-base-url-with-sim',
        'train',
        train('--base-url', 'http://127.0.0.1:9/v1'),
        2,
        ('--base-url',),
        'refuse a server URL the simulated backend would ignore',
        absent=NO_RUN,
    ),
    Case(
        'train-checkpoint-empty',
        'train',
        train('--checkpoint', ''),
        2,
        ('--checkpoint',),
        "refuse --checkpoint '' (not a silent new run)",
        absent=NO_RUN,
    ),
    Case(
        'train-out-empty', 'train', train('--out', ''), 2, ('--out',), "refuse --out ''", absent=('{tmp}/x',)
    ),
    Case(
        'train-config-empty',
        'train',
        train('--config', ''),
        2,
        ('--config',),
        "refuse --config '' (not the shipped config)",
    ),
    Case(
        'train-catalog-empty',
        'train',
        train('--catalog', ''),
        2,
        ('--catalog',),
        "refuse --catalog '' (not the shipped catalog)",
        absent=NO_RUN,
    ),
    Case(
        'train-tasks-empty',
        'train',
        train('--tasks', ''),
        2,
        ('--tasks',),
        "refuse --tasks '' (not the shipped bank)",
        absent=NO_RUN,
    ),
    Case(
        'train-init-from-empty',
        'train',
        train('--init-from', ''),
        2,
        ('--init-from',),
        "refuse --init-from '' (not random weights)",
        absent=NO_RUN,
    ),
    Case(
        'train-env-file-empty',
        'train',
        train('--env-file', ''),
        2,
        ('--env-file',),
        "refuse --env-file ''",
        absent=NO_RUN,
    ),
    Case(
        'train-init-from-on-resume',
        'train',
        ['--checkpoint', '{run}', '--timesteps', '96', '--init-from', 'demo'],
        2,
        ('--init-from',),
        'refuse: a resumed run keeps its weights, --init-from would be ignored',
        same=('{run}',),
    ),
    Case('train-phase-out-of-range', 'train', train('--phase', '4'), 2, ('--phase',), R),
    Case('train-curriculum-and-phase', 'train', train('--curriculum', '--phase', '2'), 2, ('--phase',), R),
    Case(
        'train-demo-mode-with-openai',
        'train',
        train('--demo-mode', '--backend', 'openai'),
        2,
        ('--demo-mode',),
        R,
        absent=NO_RUN,
    ),
    Case('train-tier-2-on-sim', 'train', train('--tier', '2'), 2, ('--backend openai',), R, absent=NO_RUN),
    Case('train-unknown-flag', 'train', train('--bogus'), 2, ('--bogus',), R),
    Case(
        'train-default-config-timesteps-64',
        'train',
        [
            '--demo-mode',
            '--timesteps',
            '64',
            '--eval-episodes',
            '0',
            '--no-progress',
            '--out',
            '{tmp}/runs',
            '--run-name',
            'x',
        ],
        (0, 2),
        (),
        'train what was asked: --timesteps 64 with the shipped config (16 envs x 64-step rollouts) must not train '
        '1,024 '
        'timesteps silently (fit the rollout to the budget, or refuse naming n_envs/n_steps)',
        check=lambda c, r: _trained_at_most(c, r, 128),
    ),
]


def _trained_at_most(ctx, res, n):
    import json

    p = ctx.path('{tmp}/runs/x/train_summary.json')
    if res.rc == 0:
        got = json.loads(p.read_text())['num_timesteps']
        assert got <= n, f'asked for 64 timesteps, trained {got}'


EVAL_CASES = [
    Case('eval-episodes-one', 'eval', evals(episodes='1'), 2, ('--episodes',), R, absent=('{tmp}/e.json',)),
    Case(
        'eval-episodes-negative',
        'eval',
        evals(episodes='-5'),
        2,
        ('--episodes',),
        R,
        absent=('{tmp}/e.json',),
    ),
    Case('eval-episodes-text', 'eval', evals(episodes='two'), 2, ('--episodes',), R),
    Case('eval-record-negative', 'eval', evals(record='-1'), 2, ('--record',), R, absent=('{tmp}/e.json',)),
    Case(
        'eval-baselines-unknown',
        'eval',
        evals(baselines='random,nope'),
        2,
        ('nope',),
        R,
        absent=('{tmp}/e.json',),
    ),
    Case(
        'eval-baselines-empty',
        'eval',
        evals(baselines=''),
        2,
        ('--baselines',),
        "refuse --baselines '' (not every baseline)",
        absent=('{tmp}/e.json',),
    ),
    Case('eval-seed-negative', 'eval', evals(seed='-1'), 2, ('--seed',), R, absent=('{tmp}/e.json',)),
    Case(
        'eval-max-cost-nan',
        'eval',
        evals(max_cost_usd='nan'),
        2,
        (F('max_cost_usd'),),
        R,
        absent=('{tmp}/e.json',),
    ),
    Case(
        'eval-max-cost-zero',
        'eval',
        evals(max_cost_usd='0'),
        2,
        ('--max-cost-usd',),
        R,
        absent=('{tmp}/e.json',),
    ),
    Case(
        'eval-json-wrong-suffix',
        'eval',
        evals(json='{tmp}/e.txt'),
        2,
        ('--json',),
        R,
        absent=('{tmp}/e.txt',),
    ),
    Case('eval-checkpoint-missing', 'eval', evals(checkpoint='{tmp}/nowhere'), 2, ('nowhere',), R),
    Case(
        'eval-checkpoint-empty', 'eval', evals(checkpoint=''), 2, ('--checkpoint',), "refuse --checkpoint ''"
    ),
    Case('eval-checkpoint-empty-folder', 'eval', evals(checkpoint='{tmp}'), 2, ('latest.json',), R),
    Case(
        'eval-recorded-log-without-backend',
        'eval',
        evals(recorded='{tmp}/log.csv'),
        2,
        ('--backend',),
        'refuse a log the run\'s simulated backend would ignore',
        absent=('{tmp}/e.json',),
        setup=lambda c: (c.path('{tmp}') / 'log.csv').write_text(
            'task,specialist_id,quality,cost_usd,latency_s\n'
        ),
    ),
    Case(
        'eval-recorded-backend-without-log',
        'eval',
        evals(backend='recorded'),
        2,
        ('--recorded',),
        R,
        absent=('{tmp}/e.json',),
    ),
    Case(
        'eval-tier-2-on-sim', 'eval', evals(tier='2'), 2, ('--backend openai',), R, absent=('{tmp}/e.json',)
    ),
    Case(
        'eval-demo-mode-with-openai',
        'eval',
        evals(demo_mode=None, backend='openai') + ['--demo-mode'],
        2,
        ('--demo-mode',),
        R,
    ),
    Case(
        'eval-base-url-with-sim',
        'eval',
        evals(base_url='http://127.0.0.1:9/v1'),
        2,
        ('--base-url',),
        'refuse a server URL the simulated run would ignore',
        absent=('{tmp}/e.json',),
    ),
    Case(
        'eval-sweep-on-sim-run',
        'eval',
        evals(sweep='cost_coef=0,1', episodes=None, record=None, baselines=None),
        2,
        ('--backend recorded',),
        R,
    ),
    Case(
        'eval-sweep-bad-syntax',
        'eval',
        evals(sweep='lr=1,2', episodes=None, record=None, baselines=None),
        2,
        ('--sweep', 'strong_rate='),
        R,
    ),
    Case(
        'eval-sweep-ignored-flags',
        'eval',
        evals(sweep='strong_rate=0.5'),
        2,
        ('--episodes', '--record'),
        R,
        absent=('{tmp}/e.json',),
    ),
    Case(
        'eval-catalog-missing',
        'eval',
        evals(catalog='{tmp}/nope.csv'),
        2,
        ('nope.csv',),
        R,
        absent=('{tmp}/e.json',),
    ),
]

DEMO_CASES = [
    Case(
        'demo-episodes-zero',
        'demo',
        replace(DEMO, '--episodes', '0'),
        2,
        ('--episodes',),
        R,
        absent=('{tmp}/demo',),
    ),
    Case(
        'demo-episodes-one',
        'demo',
        replace(DEMO, '--episodes', '1'),
        2,
        ('--episodes',),
        'refuse: a confidence interval needs 2',
        absent=('{tmp}/demo',),
    ),
    Case(
        'demo-episodes-negative',
        'demo',
        replace(DEMO, '--episodes', '-3'),
        2,
        ('--episodes',),
        R,
        absent=('{tmp}/demo',),
    ),
    Case(
        'demo-record-negative',
        'demo',
        replace(DEMO, '--record', '-1'),
        2,
        ('--record',),
        R,
        absent=('{tmp}/demo',),
    ),
    Case('demo-n-envs-zero', 'demo', DEMO + ['--n-envs', '0'], 2, ('--n-envs',), R, absent=('{tmp}/demo',)),
    Case(
        'demo-device-bogus', 'demo', DEMO + ['--device', 'tpu'], 2, ('--device',), R, absent=('{tmp}/demo',)
    ),
    Case('demo-seed-negative', 'demo', DEMO + ['--seed', '-1'], 2, ('--seed',), R, absent=('{tmp}/demo',)),
    Case(
        'demo-checkpoint-missing',
        'demo',
        replace(DEMO, '--checkpoint', '{tmp}/nowhere'),
        2,
        ('nowhere',),
        R,
        absent=('{tmp}/demo',),
    ),
    Case(
        'demo-checkpoint-empty',
        'demo',
        replace(DEMO, '--checkpoint', ''),
        2,
        ('--checkpoint',),
        "refuse --checkpoint '' (not the shipped policy)",
        absent=('{tmp}/demo',),
    ),
    Case(
        'demo-train-timesteps-zero',
        'demo',
        DEMO + ['--train-timesteps', '0'],
        2,
        ('--train-timesteps',),
        R,
        absent=('{tmp}/demo',),
    ),
    Case(
        'demo-catalog-empty',
        'demo',
        DEMO + ['--catalog', ''],
        2,
        ('--catalog',),
        "refuse --catalog ''",
        absent=('{tmp}/demo',),
    ),
]

EXPORT_CASES = [
    Case(
        'export-task-empty',
        'export',
        replace(EXPORT, '--task', ''),
        2,
        ('--task',),
        R,
        absent=('{tmp}/wf.yml',),
    ),
    Case(
        'export-task-blank',
        'export',
        replace(EXPORT, '--task', '   '),
        2,
        ('--task',),
        R,
        absent=('{tmp}/wf.yml',),
    ),
    Case(
        'export-roster-unknown',
        'export',
        EXPORT + ['--roster', 'nope_engineer,also_nope'],
        2,
        ('nope_engineer',),
        R,
        absent=('{tmp}/wf.yml',),
    ),
    Case(
        'export-roster-empty',
        'export',
        EXPORT + ['--roster', ''],
        2,
        ('--roster',),
        "refuse --roster '' (not a drawn roster)",
        absent=('{tmp}/wf.yml',),
    ),
    Case(
        'export-roster-duplicate',
        'export',
        EXPORT + ['--roster', 'api_backend_engineer,api_backend_engineer'],
        2,
        ('api_backend_engineer',),
        'refuse a roster naming one specialist twice',
        absent=('{tmp}/wf.yml',),
    ),
    Case(
        'export-roster-too-long',
        'export',
        EXPORT
        + [
            '--roster',
            'react_ui_engineer,frontend_contractor,design_system_engineer,'
            'accessibility_specialist,web_performance_engineer,api_backend_engineer,'
            'backend_freelancer',
        ],
        2,
        ('--roster',),
        'refuse 7 specialists for a policy with 6 slots',
        absent=('{tmp}/wf.yml',),
    ),
    Case(
        'export-max-tokens-zero',
        'export',
        EXPORT + ['--max-tokens', '0'],
        2,
        ('--max-tokens',),
        R,
        absent=('{tmp}/wf.yml',),
    ),
    Case(
        'export-seed-negative',
        'export',
        EXPORT + ['--seed', '-1'],
        2,
        ('--seed',),
        R,
        absent=('{tmp}/wf.yml',),
    ),
    Case(
        'export-model-empty', 'export', EXPORT + ['--model', ''], 2, ('--model',), R, absent=('{tmp}/wf.yml',)
    ),
    Case(
        'export-checkpoint-missing',
        'export',
        replace(EXPORT, '--checkpoint', '{tmp}/nowhere'),
        2,
        ('nowhere',),
        R,
    ),
    Case(
        'export-checkpoint-empty',
        'export',
        replace(EXPORT, '--checkpoint', ''),
        2,
        ('--checkpoint',),
        "refuse --checkpoint '' (not the shipped policy)",
        absent=('{tmp}/wf.yml',),
    ),
    Case(
        'export-catalog-wrong-suffix',
        'export',
        EXPORT + ['--catalog', '{tmp}/cat.txt'],
        2,
        ('cat.txt',),
        R,
        setup=lambda c: (c.path('{tmp}') / 'cat.txt').write_text('id,capability\n'),
    ),
    Case(
        'export-process',
        'export',
        EXPORT + ['--roster', 'nope_engineer'],
        2,
        ('nope_engineer',),
        'the real console script: exit 2, no traceback',
        proc=True,
        absent=('{tmp}/wf.yml',),
    ),
]

AUDIT_CASES = [
    Case('audit-source-missing', 'audit', ['{tmp}/nowhere'], 2, ('nowhere',), R),
    Case(
        'audit-threshold-zero',
        'audit',
        AUDIT + ['--threshold', '0'],
        2,
        ('--threshold',),
        R,
        absent=('{tmp}/audit',),
    ),
    Case(
        'audit-threshold-nan',
        'audit',
        AUDIT + ['--threshold', 'nan'],
        2,
        ('--threshold',),
        R,
        absent=('{tmp}/audit',),
    ),
    Case(
        'audit-record-negative',
        'audit',
        AUDIT + ['--record', '-1'],
        2,
        ('--record',),
        R,
        absent=('{tmp}/audit',),
    ),
    Case(
        'audit-policy-unknown',
        'audit',
        AUDIT + ['--policy', 'nope'],
        2,
        ('nope',),
        'refuse a policy the episodes do not hold',
        absent=('{tmp}/audit',),
    ),
    Case(
        'audit-baselines-unknown',
        'audit',
        AUDIT + ['--record', '1', '--baselines', 'nope'],
        2,
        ('nope',),
        R,
        absent=('{tmp}/audit',),
    ),
    Case(
        'audit-seed-negative',
        'audit',
        AUDIT + ['--record', '1', '--seed', '-1'],
        2,
        ('--seed',),
        R,
        absent=('{tmp}/audit',),
    ),
    Case(
        'audit-split-without-record',
        'audit',
        AUDIT + ['--split', 'train'],
        2,
        ('--split',),
        'refuse --split without --record (it would be ignored)',
        absent=('{tmp}/audit',),
    ),
]

SWEEP_CASES = [
    Case(
        'sweep-no-equals',
        'sweep',
        replace(SWEEP, '--sweep', 'train.seed'),
        2,
        ('train.seed',),
        R,
        absent=('{tmp}/sw',),
    ),
    Case(
        'sweep-unknown-section',
        'sweep',
        replace(SWEEP, '--sweep', 'foo.bar=1'),
        2,
        ('foo.bar',),
        R,
        absent=('{tmp}/sw',),
    ),
    Case(
        'sweep-unknown-key',
        'sweep',
        replace(SWEEP, '--sweep', 'train.bogus=1,2'),
        2,
        ('bogus',),
        R,
        absent=('{tmp}/sw',),
    ),
    Case(
        'sweep-bad-value',
        'sweep',
        replace(SWEEP, '--sweep', 'train.n_envs=abc'),
        2,
        ('n_envs',),
        R,
        absent=('{tmp}/sw',),
    ),
    Case(
        'sweep-empty-value',
        'sweep',
        replace(SWEEP, '--sweep', 'train.seed=0,'),
        2,
        ('train.seed',),
        R,
        absent=('{tmp}/sw',),
    ),
    Case(
        'sweep-eval-episodes-one',
        'sweep',
        replace(SWEEP, '--eval-episodes', '1'),
        2,
        ('--eval-episodes',),
        'refuse 1 (an evaluation needs 2), not skip it silently',
        absent=('{tmp}/sw',),
    ),
    Case(
        'sweep-eval-episodes-negative',
        'sweep',
        replace(SWEEP, '--eval-episodes', '-1'),
        2,
        ('--eval-episodes',),
        R,
        absent=('{tmp}/sw',),
    ),
    Case(
        'sweep-cpus-per-trial-zero',
        'sweep',
        SWEEP + ['--cpus-per-trial', '0'],
        2,
        ('--cpus-per-trial',),
        R,
        absent=('{tmp}/sw',),
    ),
    Case(
        'sweep-max-concurrent-negative',
        'sweep',
        SWEEP + ['--max-concurrent', '-1'],
        2,
        ('--max-concurrent',),
        R,
        absent=('{tmp}/sw',),
    ),
    Case(
        'sweep-key-in-sweep-and-set',
        'sweep',
        [
            '--sweep',
            'train.seed=0,1',
            '--set',
            'train.seed=5',
            'train.timesteps=64',
            '--config',
            '{cfg}',
            '--engine',
            'local',
            '--eval-episodes',
            '0',
            '--out',
            '{tmp}/sw',
        ],
        2,
        ('train.seed',),
        'refuse a key given in both --sweep and --set',
        absent=('{tmp}/sw',),
    ),
    Case(
        'sweep-process',
        'sweep',
        replace(SWEEP, '--eval-episodes', '1'),
        2,
        ('--eval-episodes',),
        'the real console script: exit 2, no traceback',
        proc=True,
        absent=('{tmp}/sw',),
    ),
]


def _busy_port(ctx):
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    s.listen(1)
    ctx['port'] = str(s.getsockname()[1])
    ctx['_sock'] = s


SERVE = dict(proc=True, timeout=60)
SERVE_CASES = [  # a server that accepts bad input serves until the timeout: reported as a hang
    Case(
        'serve-port-99999',
        'serve',
        ['--port', '99999'],
        2,
        ('99999',),
        'refuse a port outside 1-65535 (exit 2)',
        **SERVE,
    ),
    Case(
        'serve-port-in-use',
        'serve',
        ['--port', '{port}'],
        1,
        ('{port}',),
        'runtime failure: the port is taken (exit 1, port named)',
        setup=_busy_port,
        **SERVE,
    ),
    Case(
        'serve-max-sessions-zero',
        'serve',
        ['--port', '0', '--max-sessions', '0'],
        2,
        ('--max-sessions',),
        R,
        **SERVE,
    ),
    Case(
        'serve-host-unresolvable',
        'serve',
        ['--host', 'no-such-host.invalid', '--port', '0'],
        (1, 2),
        ('no-such-host.invalid',),
        'a host that does not resolve: exit non-zero naming it',
        **SERVE,
    ),
]

CASES = TRAIN_CASES + EVAL_CASES + DEMO_CASES + EXPORT_CASES + AUDIT_CASES + SWEEP_CASES + SERVE_CASES


@pytest.fixture(scope='module')
def base(tmp_path_factory):
    "One tiny trained run, evaluated once (so it has episodes.jsonl to audit); each case gets its own copy."
    root = tmp_path_factory.mktemp('cli')
    run = tiny_run(root)
    res = run_inproc(
        'eval',
        [
            '--checkpoint',
            str(run),
            '--episodes',
            '2',
            '--record',
            '1',
            '--split',
            'heldout',
            '--baselines',
            'random,greedy-topk-par',
        ],
        root,
    )
    assert res.rc == 0, res.text[-3000:]
    return {'@run': str(run), 'cfg': str(root / 'tiny.yaml')}


@pytest.mark.parametrize('case', CASES, ids=str)
def test_cli_case(case, base, tmp_path):
    ctx = Ctx(base, tmp_path)
    try:
        run_case(case, ctx, 'test_cli_errors')
    finally:
        if '_sock' in ctx:
            ctx['_sock'].close()
