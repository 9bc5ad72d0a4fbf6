"""Files the user hands to the commands (issue 20, item 1): catalogs (--catalog .csv/.yaml), task banks (--tasks), logs
of recorded outcomes (--recorded .csv/.jsonl), KEY=VALUE files (--env-file, and .env in the working folder), config
files (--config) with unknown keys and bad values in every section (train, ppo, policy, env, reward, sim, openai).
Each: missing, a folder, empty, unreadable (mode 000; as root a link to /proc/self/mem, whose read fails), not UTF-8,
valid YAML/CSV of the wrong shape, a CSV field over Python's 131,072-byte limit. Refused with exit 2 and a message
naming the file (and the row or key where there is one) before any run folder exists, never a traceback; the short
catalog format that train and demo accept is accepted by export too. See `cli_harness`."""

import json
import pytest, yaml
from cli_harness import Case, Ctx, run_case, tiny_run, unreadable, LATIN1, TINY, TASK

BIG = 140_000  # over the csv module's default field limit (131,072)
NO_RUN = ('{tmp}/runs/x',)


def write(name, data):
    "setup: {tmp}/<name> with `data` (bytes or text); a callable gets the ctx and returns the data."

    def setup(ctx):
        p = ctx.path('{tmp}') / name
        p.parent.mkdir(parents=True, exist_ok=True)
        d = data(ctx) if callable(data) else data
        p.write_bytes(d if isinstance(d, bytes) else d.encode())

    return setup


def folder(name):
    def setup(ctx):
        (ctx.path('{tmp}') / name).mkdir(parents=True)

    return setup


def no_read(name, content=b'x'):
    def setup(ctx):
        unreadable(ctx.path('{tmp}') / name, content)

    return setup


def train(*extra):
    return [
        '--config',
        '{cfg}',
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
        *extra,
    ]


def train_rec(log, *extra):
    return [
        '--config',
        '{cfg}',
        '--backend',
        'recorded',
        '--recorded',
        log,
        '--catalog',
        '{models}',
        '--log-learner',
        'ppo',
        '--imitation-teacher',
        '',
        '--timesteps',
        '64',
        '--eval-episodes',
        '0',
        '--no-progress',
        '--out',
        '{tmp}/runs',
        '--run-name',
        'x',
        *extra,
    ]


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
DEMO = ['--checkpoint', '{run}', '--episodes', '2', '--record', '1', '--out', '{tmp}/demo']
EXPORT = ['--checkpoint', '{run}', '--task', TASK, '--out', '{tmp}/wf.yml']
R = 'refuse (exit 2) naming the file; no run folder, no output'

CSV_HEAD = 'id,capability,domain\n'


def catalog_rows(n=8):
    "n specialists of the shipped catalog as CSV rows (their embeddings are cached)."
    from spindleflow_rl.core.catalog import Catalog

    c = Catalog.default()
    return ''.join(f'{s.id},"{s.capability}",{s.domain}\n' for s in list(c)[:n])


def fintech_list(ctx):
    "The shipped fintech catalog in the other short form: a top-level YAML list (no `specialists:` key)."
    from spindleflow_rl.core.config import PACKAGE_DIR

    return yaml.safe_dump(
        yaml.safe_load((PACKAGE_DIR / 'assets' / 'fintech_catalog.yaml').read_text())['specialists'],
        sort_keys=False,
    )


def shipped_tasks(edit=lambda s: s):
    def data(ctx):
        from spindleflow_rl.core.config import config_path

        return edit(config_path('tasks.yaml').read_text())

    return data


def named_if_refused(*names):
    "check: when the command refuses (exit 2), its message names each of `names`."

    def check(ctx, res):
        if res.rc == 2:
            miss = [n for n in names if ctx.fmt(n) not in res.text]
            assert not miss, f'refused without naming {miss}'

    return check


CATALOG_CASES = [
    Case(
        'catalog-missing', 'train', train('--catalog', '{tmp}/nope.csv'), 2, ('nope.csv',), R, absent=NO_RUN
    ),
    Case(
        'catalog-is-folder',
        'train',
        train('--catalog', '{tmp}/cat.csv'),
        2,
        ('cat.csv',),
        R,
        setup=folder('cat.csv'),
        absent=NO_RUN,
    ),
    Case(
        'catalog-empty-file',
        'train',
        train('--catalog', '{tmp}/cat.csv'),
        2,
        ('cat.csv',),
        R,
        setup=write('cat.csv', b''),
        absent=NO_RUN,
    ),
    Case(
        'catalog-unreadable',
        'train',
        train('--catalog', '{tmp}/cat.csv'),
        2,
        ('cat.csv',),
        R,
        setup=no_read('cat.csv'),
        absent=NO_RUN,
    ),
    Case(
        'catalog-not-utf8-csv',
        'train',
        train('--catalog', '{tmp}/cat.csv'),
        2,
        ('cat.csv',),
        R + ' (and the encoding problem)',
        setup=write(
            'cat.csv', lambda c: CSV_HEAD.encode() + catalog_rows().encode() + b'latin,' + LATIN1 + b',data\n'
        ),
        absent=NO_RUN,
    ),
    Case(
        'catalog-not-utf8-yaml',
        'train',
        train('--catalog', '{tmp}/cat.yaml'),
        2,
        ('cat.yaml',),
        R,
        setup=write('cat.yaml', b'- id: x\n  capability: ' + LATIN1 + b'\n'),
        absent=NO_RUN,
    ),
    Case(
        'catalog-csv-field-over-limit',
        'train',
        train('--catalog', '{tmp}/cat.csv'),
        2,
        ('cat.csv', ('row 10', 'line 10')),
        'refuse naming the file and the row whose field is over the CSV limit (or read it)',
        setup=write('cat.csv', lambda c: CSV_HEAD + catalog_rows() + 'huge,"' + 'x' * BIG + '",data\n'),
        absent=NO_RUN,
    ),
    Case(
        'catalog-yaml-wrong-shape',
        'train',
        train('--catalog', '{tmp}/cat.yaml'),
        2,
        ('cat.yaml',),
        R,
        setup=write('cat.yaml', 'specialists:\n  a: 1\n  b: 2\n'),
        absent=NO_RUN,
    ),
    Case(
        'catalog-yaml-scalar',
        'train',
        train('--catalog', '{tmp}/cat.yaml'),
        2,
        ('cat.yaml',),
        R,
        setup=write('cat.yaml', 'just some text\n'),
        absent=NO_RUN,
    ),
    Case(
        'catalog-duplicate-id',
        'train',
        train('--catalog', '{tmp}/cat.csv'),
        2,
        ('cat.csv', 'react_ui_engineer'),
        R,
        setup=write('cat.csv', lambda c: CSV_HEAD + catalog_rows() + catalog_rows(1)),
        absent=NO_RUN,
    ),
    Case(
        'catalog-unknown-fallback',
        'train',
        train('--catalog', '{tmp}/cat.csv'),
        2,
        ('cat.csv', 'nobody_engineer'),
        R,
        setup=write(
            'cat.csv',
            lambda c: (
                'id,capability,domain,fallbacks\n' + catalog_rows().replace('\n', ',nobody_engineer\n', 1)
            ),
        ),
        absent=NO_RUN,
    ),
    Case(
        'catalog-reliability-out-of-range',
        'train',
        train('--catalog', '{tmp}/cat.csv'),
        2,
        ('cat.csv', 'reliability'),
        R,
        setup=write(
            'cat.csv',
            lambda c: (
                'id,capability,domain,reliability\n'
                + catalog_rows().replace('\n', ',0.9\n').replace(',0.9\n', ',1.5\n', 1)
            ),
        ),
        absent=NO_RUN,
    ),
    Case(
        'catalog-cost-nan',
        'train',
        train('--catalog', '{tmp}/cat.csv'),
        2,
        ('cat.csv', 'cost'),
        'refuse a NaN cost naming file and field',
        setup=write(
            'cat.csv',
            lambda c: (
                'id,capability,domain,cost\n'
                + catalog_rows().replace('\n', ',0.01\n').replace(',0.01\n', ',nan\n', 1)
            ),
        ),
        absent=NO_RUN,
    ),
    Case(
        'catalog-one-specialist',
        'train',
        train('--catalog', '{tmp}/cat.csv'),
        (0, 2),
        (),
        'a catalog of one specialist: train, or refuse naming the catalog; no traceback',
        setup=write('cat.csv', lambda c: CSV_HEAD + catalog_rows(1)),
        check=named_if_refused('cat.csv'),
    ),
    Case(
        'catalog-eval-not-utf8',
        'eval',
        EVAL + ['--catalog', '{tmp}/cat.csv'],
        2,
        ('cat.csv',),
        R,
        setup=write('cat.csv', b'id,capability\nx,' + LATIN1 + b'\n'),
        absent=('{tmp}/e.json',),
    ),
    Case(
        'catalog-demo-not-utf8',
        'demo',
        DEMO + ['--catalog', '{tmp}/cat.csv'],
        2,
        ('cat.csv',),
        R,
        setup=write('cat.csv', b'id,capability\nx,' + LATIN1 + b'\n'),
        absent=('{tmp}/demo',),
    ),
    Case(
        'catalog-export-not-utf8',
        'export',
        EXPORT + ['--catalog', '{tmp}/cat.csv'],
        2,
        ('cat.csv',),
        R,
        setup=write('cat.csv', b'id,capability\nx,' + LATIN1 + b'\n'),
        absent=('{tmp}/wf.yml',),
    ),
    Case(
        'catalog-export-shipped-short-yaml',
        'export',
        ['--task', TASK, '--out', '{tmp}/wf.yml', '--catalog', '{fintech}'],
        0,
        (),
        "export accepts the short catalog format train and demo accept (the shipped fintech_catalog.yaml)",
        check=lambda c, r: _workflow_from(c, '{fintech}'),
    ),
    Case(
        'catalog-export-short-yaml-list',
        'export',
        ['--task', TASK, '--out', '{tmp}/wf.yml', '--catalog', '{tmp}/cat.yaml'],
        0,
        (),
        'export accepts the short format as a top-level list too',
        setup=write('cat.yaml', fintech_list),
        check=lambda c, r: _workflow_from(c, '{fintech}'),
    ),
]


def _workflow_from(ctx, catalog):
    wf = yaml.safe_load(ctx.path('{tmp}/wf.yml').read_text())
    ids = {s['id'] for s in yaml.safe_load(ctx.path(catalog).read_text())['specialists']}
    agents = {a['id'] for a in wf['agents']}
    assert agents and agents <= ids | {
        a['id'] for a in wf['agents'] if a.get('role', '').lower().startswith(('merge', 'judge'))
    }, f'workflow agents {sorted(agents)} are not from the catalog given'


TASK_CASES = [
    Case('tasks-missing', 'train', train('--tasks', '{tmp}/nope.yaml'), 2, ('nope.yaml',), R, absent=NO_RUN),
    Case(
        'tasks-is-folder',
        'train',
        train('--tasks', '{tmp}/t.yaml'),
        2,
        ('t.yaml',),
        R,
        setup=folder('t.yaml'),
        absent=NO_RUN,
    ),
    Case(
        'tasks-empty-file',
        'train',
        train('--tasks', '{tmp}/t.yaml'),
        2,
        ('t.yaml',),
        R,
        setup=write('t.yaml', b''),
        absent=NO_RUN,
    ),
    Case(
        'tasks-unreadable',
        'train',
        train('--tasks', '{tmp}/t.yaml'),
        2,
        ('t.yaml',),
        R,
        setup=no_read('t.yaml'),
        absent=NO_RUN,
    ),
    Case(
        'tasks-not-utf8',
        'train',
        train('--tasks', '{tmp}/t.yaml'),
        2,
        ('t.yaml',),
        R,
        setup=write(
            't.yaml', lambda c: shipped_tasks()(c).encode().replace(b'Can you make it responsive?', LATIN1)
        ),
        absent=NO_RUN,
    ),
    Case(
        'tasks-wrong-shape',
        'train',
        train('--tasks', '{tmp}/t.yaml'),
        2,
        ('t.yaml',),
        R,
        setup=write('t.yaml', '- one\n- two\n'),
        absent=NO_RUN,
    ),
    Case(
        'tasks-unknown-key',
        'train',
        train('--tasks', '{tmp}/t.yaml'),
        2,
        ('t.yaml', 'bogus'),
        R,
        setup=write(
            't.yaml', shipped_tasks(lambda s: s.replace('  phase: 1\n', '  phase: 1\n  bogus: 1\n', 1))
        ),
        absent=NO_RUN,
    ),
    Case(
        'tasks-forward-dependency',
        'train',
        train('--tasks', '{tmp}/t.yaml'),
        2,
        ('t.yaml', 'depends_on'),
        R,
        setup=write('t.yaml', shipped_tasks(lambda s: s.replace('depends_on: []', 'depends_on: [5]', 1))),
        absent=NO_RUN,
    ),
    Case(
        'tasks-no-training-tasks',
        'train',
        train('--tasks', '{tmp}/t.yaml'),
        2,
        ('t.yaml',),
        R,
        setup=write('t.yaml', shipped_tasks(lambda s: s.replace('split: train', 'split: heldout'))),
        absent=NO_RUN,
    ),
    Case(
        'tasks-eval-not-utf8',
        'eval',
        EVAL + ['--tasks', '{tmp}/t.yaml'],
        2,
        ('t.yaml',),
        R,
        setup=write('t.yaml', b'version: 1\ntasks:\n- id: ' + LATIN1 + b'\n'),
        absent=('{tmp}/e.json',),
    ),
]

LOG_HEAD = 'task,specialist_id,quality,cost_usd,latency_s\n'


def log_rows(ctx, n=40):
    return ''.join(open(ctx['log']).read().splitlines(keepends=True)[1 : n + 1])


def log_csv(extra_row=''):
    def data(ctx):
        head = open(ctx['log']).readline()
        return head + log_rows(ctx) + extra_row

    return data


def log_jsonl(ctx):
    import csv

    return ''.join(json.dumps(r) + '\n' for r in csv.DictReader(open(ctx['log'])))


LOG_CASES = [
    Case(
        'log-is-folder',
        'train',
        train_rec('{tmp}/log.csv'),
        2,
        ('log.csv',),
        R,
        setup=folder('log.csv'),
        absent=NO_RUN,
    ),
    Case(
        'log-empty-file',
        'train',
        train_rec('{tmp}/log.csv'),
        2,
        ('log.csv',),
        R,
        setup=write('log.csv', b''),
        absent=NO_RUN,
    ),
    Case(
        'log-unreadable',
        'train',
        train_rec('{tmp}/log.csv'),
        2,
        ('log.csv',),
        R,
        setup=no_read('log.csv'),
        absent=NO_RUN,
    ),
    Case(
        'log-not-utf8-csv',
        'train',
        train_rec('{tmp}/log.csv'),
        2,
        ('log.csv',),
        R,
        setup=write(
            'log.csv', lambda c: log_csv()(c).encode() + b'"' + LATIN1 + b'",cheap-model,0.5,0.001,1.0,ok,,\n'
        ),
        absent=NO_RUN,
    ),
    Case(
        'log-not-utf8-jsonl',
        'train',
        train_rec('{tmp}/log.jsonl'),
        2,
        ('log.jsonl',),
        R,
        setup=write('log.jsonl', lambda c: log_jsonl(c).encode() + b'{"task": "' + LATIN1 + b'"}\n'),
        absent=NO_RUN,
    ),
    Case(
        'log-csv-field-over-limit',
        'train',
        train_rec('{tmp}/log.csv'),
        (0, 2),
        (),
        'a logged response over the CSV field limit: read it (a long answer is a valid log), or refuse naming file '
        'and row',
        setup=write(
            'log.csv',
            log_csv(
                '"'
                + 'Convert 123 miles per hour to metres per second, to two decimal places.'
                + '",cheap-model,0.5,0.001,1.0,ok,"'
                + 'y' * BIG
                + '",units\n'
            ),
        ),
        check=named_if_refused('log.csv', 'row'),
    ),
    Case(
        'log-jsonl-line-not-object',
        'train',
        train_rec('{tmp}/log.jsonl'),
        2,
        ('log.jsonl', 'line 41'),
        R + ' and the line',
        setup=write('log.jsonl', lambda c: log_jsonl(c) + '[1, 2, 3]\n'),
        absent=NO_RUN,
    ),
    Case(
        'log-jsonl-number-as-text',
        'train',
        train_rec('{tmp}/log.jsonl'),
        2,
        ('log.jsonl', 'quality'),
        R + ' and the field',
        setup=write(
            'log.jsonl',
            lambda c: (
                log_jsonl(c)
                + json.dumps(
                    {
                        'task': 't',
                        'specialist_id': 'cheap-model',
                        'quality': [0.5],
                        'cost_usd': 0.1,
                        'latency_s': 1,
                    }
                )
                + '\n'
            ),
        ),
        absent=NO_RUN,
    ),
    Case(
        'log-quality-out-of-range',
        'train',
        train_rec('{tmp}/log.csv'),
        2,
        ('log.csv', 'quality'),
        R,
        setup=write('log.csv', log_csv('"a task",cheap-model,5,0.001,1.0,ok,,units\n')),
        absent=NO_RUN,
    ),
    Case(
        'log-one-task',
        'train',
        train_rec('{tmp}/log.csv'),
        (0, 2),
        (),
        'a log of one task: train, or refuse naming the log (too few tasks to split); no traceback',
        setup=write('log.csv', lambda c: open(c['log']).readline() + log_rows(c, 2)),
        check=named_if_refused('log.csv'),
    ),
]

ENV_CASES = [
    Case(
        'env-file-missing-train',
        'train',
        train('--env-file', '{tmp}/missing.env'),
        2,
        ('missing.env',),
        'refuse an --env-file that does not exist (not ignore it)',
        absent=NO_RUN,
    ),
    Case(
        'env-file-missing-eval',
        'eval',
        EVAL + ['--env-file', '{tmp}/missing.env'],
        2,
        ('missing.env',),
        'refuse an --env-file that does not exist',
        absent=('{tmp}/e.json',),
    ),
    Case(
        'env-file-missing-sweep',
        'sweep',
        [
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
            '--env-file',
            '{tmp}/missing.env',
        ],
        2,
        ('missing.env',),
        'refuse an --env-file that does not exist',
        absent=('{tmp}/sw',),
    ),
    Case(
        'env-file-not-utf8',
        'train',
        train('--env-file', '{tmp}/my.env'),
        2,
        ('my.env',),
        R,
        setup=write('my.env', b'SPINDLEFLOW_PROBE=' + LATIN1 + b'\n'),
        absent=NO_RUN,
    ),
    Case(
        'env-file-is-folder',
        'train',
        train('--env-file', '{tmp}/my.env'),
        2,
        ('my.env',),
        R,
        setup=folder('my.env'),
        absent=NO_RUN,
    ),
    Case(
        'env-file-unreadable',
        'train',
        train('--env-file', '{tmp}/my.env'),
        2,
        ('my.env',),
        R,
        setup=no_read('my.env'),
        absent=NO_RUN,
    ),
    Case(
        'env-file-bad-line',
        'train',
        train('--env-file', '{tmp}/my.env'),
        2,
        ('my.env', 'line 2'),
        R + ' and the line',
        setup=write('my.env', 'A=1\nthis line has no equals sign\n'),
        absent=NO_RUN,
    ),
    Case(
        'dotenv-not-utf8-train',
        'train',
        train(),
        2,
        ('.env',),
        'refuse a .env in the working folder that is not UTF-8, naming it',
        setup=write('.env', b'SPINDLEFLOW_PROBE=' + LATIN1 + b'\n'),
        absent=NO_RUN,
    ),
    Case(
        'dotenv-not-utf8-demo',
        'demo',
        DEMO,
        2,
        ('.env',),
        'refuse a .env in the working folder that is not UTF-8, naming it',
        setup=write('.env', b'SPINDLEFLOW_PROBE=' + LATIN1 + b'\n'),
        absent=('{tmp}/demo',),
    ),
]


def cfg_with(section, key, value, raw=None):
    "setup: {tmp}/c.yaml = the tiny config with `section.key: value` (or the raw text `raw`)."

    def data(ctx):
        if raw is not None:
            return raw
        d = yaml.safe_load(TINY)
        d.setdefault(section, {})[key] = value
        return yaml.safe_dump(d, sort_keys=False)

    return write('c.yaml', data)


def config_case(
    id, section, key, value, want='refuse (exit 2) naming the file and the key; no run folder', extra=()
):
    return Case(
        f'config-{id}',
        'train',
        [
            '--config',
            '{tmp}/c.yaml',
            '--demo-mode',
            '--timesteps',
            '64',
            '--no-progress',
            '--out',
            '{tmp}/runs',
            '--run-name',
            'x',
            *extra,
        ],
        2,
        ('c.yaml', key),
        want,
        setup=cfg_with(section, key, value),
        absent=NO_RUN,
    )


CONFIG_CASES = [
    Case(
        'config-is-folder',
        'train',
        [
            '--config',
            '{tmp}/c.yaml',
            '--demo-mode',
            '--timesteps',
            '64',
            '--out',
            '{tmp}/runs',
            '--run-name',
            'x',
        ],
        2,
        ('c.yaml',),
        R,
        setup=folder('c.yaml'),
        absent=NO_RUN,
    ),
    Case(
        'config-unreadable',
        'train',
        [
            '--config',
            '{tmp}/c.yaml',
            '--demo-mode',
            '--timesteps',
            '64',
            '--out',
            '{tmp}/runs',
            '--run-name',
            'x',
        ],
        2,
        ('c.yaml',),
        R,
        setup=no_read('c.yaml'),
        absent=NO_RUN,
    ),
    Case(
        'config-not-utf8',
        'train',
        [
            '--config',
            '{tmp}/c.yaml',
            '--demo-mode',
            '--timesteps',
            '64',
            '--out',
            '{tmp}/runs',
            '--run-name',
            'x',
        ],
        2,
        ('c.yaml',),
        R,
        setup=write('c.yaml', TINY.encode() + b'# ' + LATIN1 + b'\n'),
        absent=NO_RUN,
    ),
    Case(
        'config-invalid-yaml',
        'train',
        [
            '--config',
            '{tmp}/c.yaml',
            '--demo-mode',
            '--timesteps',
            '64',
            '--out',
            '{tmp}/runs',
            '--run-name',
            'x',
        ],
        2,
        ('c.yaml', 'line'),
        R + ' and the line',
        setup=write('c.yaml', 'train:\n  n_envs: [2\n'),
        absent=NO_RUN,
    ),
    Case(
        'config-unknown-section',
        'train',
        [
            '--config',
            '{tmp}/c.yaml',
            '--demo-mode',
            '--timesteps',
            '64',
            '--out',
            '{tmp}/runs',
            '--run-name',
            'x',
        ],
        2,
        ('c.yaml', 'trainer'),
        R + ' and the section',
        setup=cfg_with('trainer', 'n_envs', 2),
        absent=NO_RUN,
    ),
    config_case('train-unknown-key', 'train', 'n_env', 2),
    config_case('ppo-unknown-key', 'ppo', 'learning_rat', 0.001),
    config_case('policy-unknown-key', 'policy', 'lstm_size', 32),
    config_case('env-unknown-key', 'env', 'max_specialist', 4),
    config_case('reward-unknown-key', 'reward', 'efficency_coef', 0.1),
    config_case('sim-unknown-key', 'sim', 'fit_nois', 0.1),
    config_case(
        'openai-unknown-key-on-sim',
        'openai',
        'timeout',
        5,
        'refuse an unknown openai key also when the backend is sim',
    ),
    config_case('train-n-envs-text', 'train', 'n_envs', 'two'),
    config_case('train-checkpoint-every-negative', 'train', 'checkpoint_every', -1),
    config_case('train-success-window-zero', 'train', 'success_window', 0),
    config_case('train-keep-checkpoints-negative', 'train', 'keep_checkpoints', -1),
    config_case('ppo-learning-rate-negative', 'ppo', 'learning_rate', -1),
    config_case('ppo-n-steps-zero', 'ppo', 'n_steps', 0),
    config_case('ppo-batch-size-zero', 'ppo', 'batch_size', 0),
    config_case('ppo-gamma-above-one', 'ppo', 'gamma', 2.0),
    config_case('ppo-n-epochs-text', 'ppo', 'n_epochs', 'many'),
    config_case('policy-lstm-hidden-zero', 'policy', 'lstm_hidden', 0),
    config_case('policy-net-arch-text', 'policy', 'net_arch', 'big'),
    config_case(
        'policy-emb-dim-mismatch',
        'policy',
        'emb_dim',
        128,
        'refuse an emb_dim the embeddings (384) do not have',
    ),
    config_case('env-max-specialists-zero', 'env', 'max_specialists', 0),
    config_case('env-max-steps-zero', 'env', 'max_steps', 0),
    config_case('env-split-bogus', 'env', 'split', 'bogus'),
    config_case('env-score-lo-above-hi', 'env', 'score_lo', 0.99, 'refuse score_lo >= score_hi (0.97)'),
    config_case('reward-consistency-alpha-negative', 'reward', 'consistency_alpha', -1.0),
    config_case('reward-quality-scale-nan', 'reward', 'quality_scale', float('nan')),
    config_case('sim-fit-noise-negative', 'sim', 'fit_noise', -1.0),
    config_case('sim-baseline-quality-above-one', 'sim', 'baseline_quality', 2.0),
    config_case('sim-conflict-quality-negative', 'sim', 'conflict_quality', -1.0),
    config_case(
        'openai-timeout-negative-on-sim',
        'openai',
        'timeout_s',
        -1,
        'refuse a negative openai.timeout_s also when the backend is sim',
    ),
    Case(
        'config-ppo-learning-rate-negative-process',
        'train',
        [
            '--config',
            '{tmp}/c.yaml',
            '--demo-mode',
            '--timesteps',
            '64',
            '--out',
            '{tmp}/runs',
            '--run-name',
            'x',
        ],
        2,
        ('c.yaml', 'learning_rate'),
        'refuse (the real console script)',
        proc=True,
        setup=cfg_with('ppo', 'learning_rate', -1),
        absent=NO_RUN,
    ),
]

CASES = CATALOG_CASES + TASK_CASES + LOG_CASES + ENV_CASES + CONFIG_CASES


@pytest.fixture(scope='module')
def base(tmp_path_factory):
    from spindleflow_rl.logs.routers import make_two_model_log, write_csv, TWO_MODEL_CATALOG
    from spindleflow_rl.core.config import PACKAGE_DIR

    root = tmp_path_factory.mktemp('files')
    run = tiny_run(root)
    write_csv(make_two_model_log(20, seed=5), root / 'log.csv')
    write_csv(
        TWO_MODEL_CATALOG,
        root / 'models.csv',
        ['id', 'role', 'domain', 'cost', 'latency', 'reliability', 'capability'],
    )
    return {
        '@run': str(run),
        'cfg': str(root / 'tiny.yaml'),
        'log': str(root / 'log.csv'),
        'models': str(root / 'models.csv'),
        'fintech': str(PACKAGE_DIR / 'assets' / 'fintech_catalog.yaml'),
    }


@pytest.mark.parametrize('case', CASES, ids=str)
def test_user_file_case(case, base, tmp_path):
    run_case(case, Ctx(base, tmp_path), 'test_user_files')
