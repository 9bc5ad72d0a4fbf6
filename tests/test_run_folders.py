"""Run folders and output paths (issue 20, items 1 and 2): an output that is a file, under /proc (unwritable), or already
holds output (train, export, demo, eval --json, audit, sweep) is refused with exit 2 naming it, and nothing the user
made changes; run names cannot leave --out; a run folder is claimed atomically (two runs with one name: one refuses);
a resume leaves no stale rows in progress.csv; Ctrl-C (SIGINT) and SIGTERM keep every checkpoint and report and say
how to resume; audit works on recorded-log runs and always audits the run's own world. See `cli_harness`."""

import csv, json, os, shutil, signal, subprocess, time
from pathlib import Path
import pytest
from cli_harness import Case, Ctx, run_case, run_inproc, tiny_run, base_env, TASK, TINY

PROC_DIR = '/proc/spindleflow-no-such-dir'  # unwritable, also for root


def user_file(rel, text='my own notes: keep me\n'):
    "setup: a file the user made at {tmp}/<rel> (its folders too)."

    def setup(ctx):
        p = ctx.path('{tmp}') / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)

    return setup


def chain(*fns):
    def setup(ctx):
        for f in fns:
            f(ctx)

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
]
DEMO = ['--checkpoint', '{run}', '--episodes', '2', '--record', '1']
EXPORT = ['--checkpoint', '{run}', '--task', TASK]
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
]
R = 'refuse (exit 2) naming the path; nothing written'
KEEP = "refuse without --overwrite (exit 2) naming the existing output; every byte of it kept"


def earlier(cmd, argv):
    "setup: run `cmd argv` once in process (the earlier output a re-run must not overwrite)."

    def setup(ctx):
        res = run_inproc(cmd, [ctx.fmt(a) for a in argv], ctx.tmp)
        assert res.rc == 0 and not res.traceback, res.text[-3000:]

    return setup


OUT_CASES = [
    # spindleflow-train
    Case(
        'train-out-is-file',
        'train',
        train('--out', '{tmp}/afile', '--run-name', 'x'),
        2,
        ('afile',),
        R,
        setup=user_file('afile'),
        same=('{tmp}/afile',),
    ),
    Case(
        'train-out-parent-is-file',
        'train',
        train('--out', '{tmp}/afile/runs', '--run-name', 'x'),
        2,
        ('afile',),
        R,
        setup=user_file('afile'),
        same=('{tmp}/afile',),
    ),
    Case('train-out-under-proc', 'train', train('--out', PROC_DIR, '--run-name', 'x'), 2, (PROC_DIR,), R),
    Case(
        'train-out-existing-run',
        'train',
        train('--out', '{tmp}', '--run-name', 'run'),
        2,
        ('{run}',),
        KEEP,
        same=('{run}',),
    ),
    Case(
        'train-out-existing-user-folder',
        'train',
        train('--out', '{tmp}', '--run-name', 'mine'),
        2,
        ('mine',),
        'refuse a run name whose folder already holds the user\'s files (exit 2); the folder unchanged',
        setup=user_file('mine/notes.txt'),
        same=('{tmp}/mine',),
    ),
    Case(
        'train-run-name-dotdot',
        'train',
        train('--out', '{tmp}/runs', '--run-name', '../../escaped-dotdot'),
        2,
        ('--run-name',),
        'refuse a run name that leaves --out (exit 2); nothing written outside it',
        absent=('{tmp}/../escaped-dotdot',),
    ),
    Case(
        'train-run-name-absolute',
        'train',
        train('--out', '{tmp}/runs', '--run-name', '{tmp}/abs'),
        2,
        ('--run-name',),
        'refuse an absolute run name (it would write outside --out)',
        absent=('{tmp}/abs',),
    ),
    Case(
        'train-run-name-dot',
        'train',
        train('--out', '{tmp}/runs', '--run-name', '.'),
        2,
        ('--run-name',),
        "refuse run name '.' (the run would be --out itself, beside other runs)",
        setup=user_file('runs/notes.txt'),
        same=('{tmp}/runs',),
    ),
    # spindleflow-export (--out is the workflow file)
    Case(
        'export-out-existing',
        'export',
        EXPORT + ['--out', '{tmp}/wf.yml'],
        2,
        ('wf.yml',),
        KEEP,
        setup=user_file('wf.yml', 'my: workflow\n'),
        same=('{tmp}/wf.yml',),
    ),
    Case(
        'export-rerun',
        'export',
        EXPORT + ['--out', '{tmp}/wf.yml'],
        2,
        ('wf.yml',),
        KEEP + ' (the same export again)',
        setup=earlier('export', EXPORT + ['--out', '{tmp}/wf.yml', '--seed', '1']),
        same=('{tmp}/wf.yml',),
    ),
    Case(
        'export-out-is-folder',
        'export',
        EXPORT + ['--out', '{tmp}/adir'],
        2,
        ('adir',),
        R,
        setup=user_file('adir/keep.txt'),
        same=('{tmp}/adir',),
    ),
    Case(
        'export-out-parent-is-file',
        'export',
        EXPORT + ['--out', '{tmp}/afile/wf.yml'],
        2,
        ('afile',),
        R,
        setup=user_file('afile'),
        same=('{tmp}/afile',),
    ),
    Case('export-out-under-proc', 'export', EXPORT + ['--out', PROC_DIR + '/wf.yml'], 2, (PROC_DIR,), R),
    # spindleflow-demo
    Case(
        'demo-out-is-file',
        'demo',
        DEMO + ['--out', '{tmp}/afile'],
        2,
        ('afile',),
        R,
        setup=user_file('afile'),
        same=('{tmp}/afile',),
    ),
    Case('demo-out-under-proc', 'demo', DEMO + ['--out', PROC_DIR], 2, (PROC_DIR,), R),
    Case(
        'demo-rerun',
        'demo',
        DEMO + ['--out', '{tmp}/demo'],
        2,
        ('demo',),
        KEEP + ' (the same demo again)',
        setup=earlier('demo', DEMO + ['--out', '{tmp}/demo', '--seed', '1']),
        same=('{tmp}/demo',),
    ),
    Case(
        'demo-out-user-folder',
        'demo',
        DEMO + ['--out', '{tmp}/mine'],
        2,
        ('mine',),
        KEEP + ' (a folder with the user\'s report.md)',
        setup=user_file('mine/report.md', '# my report\n'),
        same=('{tmp}/mine',),
    ),
    # spindleflow-eval --json
    Case(
        'eval-json-parent-is-file',
        'eval',
        EVAL + ['--json', '{tmp}/afile/e.json'],
        2,
        ('afile',),
        R,
        setup=user_file('afile'),
        same=('{tmp}/afile',),
    ),
    Case('eval-json-under-proc', 'eval', EVAL + ['--json', PROC_DIR + '/e.json'], 2, (PROC_DIR,), R),
    Case(
        'eval-json-existing',
        'eval',
        EVAL + ['--json', '{tmp}/e.json'],
        2,
        ('e.json',),
        KEEP,
        setup=user_file('e.json', '{"mine": 1}\n'),
        same=('{tmp}/e.json',),
    ),
    Case(
        'eval-json-md-existing',
        'eval',
        EVAL + ['--json', '{tmp}/e.json'],
        2,
        ('e.md',),
        'refuse when the report\'s markdown companion e.md exists (the user\'s file), naming it; e.md kept',
        setup=user_file('e.md', '# my notes\n'),
        same=('{tmp}/e.md',),
    ),
    Case(
        'eval-json-folder-existing',
        'eval',
        EVAL + ['--json', '{tmp}/e.json'],
        2,
        ('{tmp}/e',),
        'refuse when the folder for episodes.jsonl and plots ({tmp}/e) holds the user\'s files; kept',
        setup=user_file('e/episodes.jsonl', '{"mine": 1}\n'),
        same=('{tmp}/e',),
    ),
    Case(
        'eval-own-report-again',
        'eval',
        EVAL,
        2,
        ('--overwrite',),
        KEEP + " (the run's own eval.json)",
        same=('{run}/eval.json', '{run}/eval.md', '{run}/episodes.jsonl'),
    ),
    # spindleflow-audit
    Case(
        'audit-out-is-file',
        'audit',
        ['{run}', '--out', '{tmp}/afile'],
        2,
        ('afile',),
        R,
        setup=user_file('afile'),
        same=('{tmp}/afile',),
    ),
    Case('audit-out-under-proc', 'audit', ['{run}', '--out', PROC_DIR], 2, (PROC_DIR,), R),
    Case(
        'audit-out-existing',
        'audit',
        ['{run}', '--out', '{tmp}/aud'],
        2,
        ('aud',),
        KEEP,
        setup=user_file('aud/audit.md', '# mine\n'),
        same=('{tmp}/aud',),
    ),
    Case(
        'audit-rerun-default-out',
        'audit',
        ['{run}'],
        2,
        ('audit',),
        KEEP + ' (<run>/audit from an earlier audit)',
        setup=earlier('audit', ['{run}']),
        same=('{run}/audit',),
    ),
    # spindleflow-sweep
    Case(
        'sweep-out-is-file',
        'sweep',
        SWEEP + ['--out', '{tmp}/afile'],
        2,
        ('afile',),
        R,
        setup=user_file('afile'),
        same=('{tmp}/afile',),
    ),
    Case('sweep-out-under-proc', 'sweep', SWEEP + ['--out', PROC_DIR], 2, (PROC_DIR,), R),
    Case(
        'sweep-out-existing',
        'sweep',
        SWEEP + ['--out', '{tmp}/sw'],
        2,
        ('sw',),
        KEEP,
        setup=user_file('sw/sweep.json', '{}\n'),
        same=('{tmp}/sw',),
    ),
    # the real console scripts
    Case(
        'demo-out-is-file-process',
        'demo',
        DEMO + ['--out', '{tmp}/afile'],
        2,
        ('afile',),
        R + ' (the real console script)',
        proc=True,
        setup=user_file('afile'),
        same=('{tmp}/afile',),
    ),
]


# ---- two runs with one name at once ----------------------------------------------------------------------------------
def start_twin(ctx):
    "setup: start the same `spindleflow-train` command in a second process just before the case's own."
    ctx['_twin_log'] = ctx.tmp / 'twin.log'
    argv = [ctx.fmt(a) for a in TWIN]
    ctx['_twin'] = subprocess.Popen(
        [shutil.which('spindleflow-train'), *argv],
        cwd=ctx.tmp,
        env=base_env(),
        stdout=open(ctx['_twin_log'], 'w'),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def one_run_one_refusal(ctx, res):
    twin = ctx['_twin']
    twin.wait(300)
    codes = sorted([res.rc, twin.returncode])
    loser = res.text if res.rc != 0 else Path(ctx['_twin_log']).read_text()
    assert codes == [0, 2], f'exit codes {codes}: want one run (0) and one refusal (2)'
    assert 'Traceback' not in loser and ctx.fmt('{tmp}/runs/x') in loser, (
        f'the refusal does not name the run folder:\n{loser[-1500:]}'
    )
    run = ctx.path('{tmp}/runs/x')
    rows = list(csv.reader(open(run / 'progress.csv')))
    assert len({len(r) for r in rows}) == 1, (
        f'progress.csv rows of {sorted({len(r) for r in rows})} columns: two runs wrote it'
    )
    st = json.loads((run / 'latest.json').read_text())
    assert st['num_timesteps'] == 64


TWIN = [
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
    '--imitation-teacher',
    '',
]


# ---- a resume after a kill between checkpoints -----------------------------------------------------------------------
def _progress_steps(run: Path) -> list:
    steps = []
    for p in sorted(run.glob('progress*.csv')):
        lines = p.read_text().splitlines()
        for r in csv.DictReader(lines[:-1] if not p.read_text().endswith('\n') else lines):
            if r.get('time/total_timesteps'):
                steps.append(int(float(r['time/total_timesteps'])))
    return steps


def killed_between_checkpoints(ctx):
    """setup: a real `spindleflow-train` (checkpoint every 64 timesteps, rollouts of 32), paused with SIGSTOP whenever
    progress.csv holds a row past latest.json, and killed (SIGKILL) the first time it does: rows no checkpoint covers."""
    tmp = ctx.tmp
    (tmp / 'p.yaml').write_text(TINY.replace('checkpoint_every: 32', 'checkpoint_every: 64'))
    p = subprocess.Popen(
        [
            shutil.which('spindleflow-train'),
            '--config',
            str(tmp / 'p.yaml'),
            '--demo-mode',
            '--timesteps',
            '100000',
            '--out',
            str(tmp),
            '--run-name',
            'p',
            '--imitation-teacher',
            '',
        ],
        cwd=tmp,
        env=base_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    run, t0, done = tmp / 'p', time.time(), False
    try:
        while not done and p.poll() is None and time.time() - t0 < 180:
            time.sleep(0.01)
            if not (run / 'latest.json').exists() or not (run / 'progress.csv').exists():
                continue
            os.killpg(p.pid, signal.SIGSTOP)
            try:
                st = json.loads((run / 'latest.json').read_text())
                done = max(_progress_steps(run), default=0) > st['num_timesteps']
            except (ValueError, KeyError):
                pass
            if not done:
                os.killpg(p.pid, signal.SIGCONT)
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(30)
    assert done, 'never caught progress.csv ahead of the last checkpoint'
    st = json.loads((run / 'latest.json').read_text())
    ctx['prun'], ctx['pto'] = str(run), str(st['num_timesteps'] + 64)


def no_stale_rows(ctx, res):
    steps = _progress_steps(ctx.path('{prun}'))
    dup = sorted({s for s in steps if steps.count(s) > 1})
    assert not dup, (
        f'progress rows for timesteps {dup} appear twice (rows of the killed run past its checkpoint were kept)'
    )
    assert max(steps) == int(ctx['pto'])


# ---- Ctrl-C and SIGTERM ----------------------------------------------------------------------------------------------
def latest_complete(ctx, res):
    import zipfile

    st = json.loads(ctx.path('{run}/latest.json').read_text())
    assert st['num_timesteps'] >= 64
    zipfile.ZipFile(ctx.path('{run}') / st['checkpoint']).testzip()


def partial_report_or_none(path):
    def check(ctx, res):
        p = ctx.path(path)
        if p.exists():
            assert json.loads(p.read_text()).get('stopped') == 'interrupted', (
                'a report that does not say it is partial'
            )

    return check


UNBUF = {'PYTHONUNBUFFERED': '1'}
KEPT = (
    '{run}/final.zip',
    '{run}/config.json',
    '{run}/progress.csv',
    '{run}/eval.json',
    '{run}/episodes.jsonl',
)
SIGNAL_CASES = [
    Case(
        'sigint-train',
        'train',
        ['--checkpoint', '{run}', '--timesteps', '100000'],
        130,
        ('--checkpoint',),
        'Ctrl-C: exit 130, a message saying how to resume (--checkpoint); earlier files kept; latest.json on a '
        'complete zip',
        proc=True,
        signal_on=('timesteps from', signal.SIGINT),
        same=KEPT,
        check=latest_complete,
        env=UNBUF,
        timeout=180,
    ),
    Case(
        'sigint-eval',
        'eval',
        [
            '--checkpoint',
            '{run}',
            '--episodes',
            '400',
            '--split',
            'heldout',
            '--baselines',
            'random,greedy-topk-par',
            '--record',
            '0',
            '--json',
            '{tmp}/e.json',
        ],
        130,
        ('interrupt',),
        'Ctrl-C: exit 130 with a message; the run untouched; a report, if written, marked partial',
        proc=True,
        signal_on=('evaluating on heldout', signal.SIGINT),
        same=('{run}',),
        check=partial_report_or_none('{tmp}/e.json'),
        env=UNBUF,
        timeout=180,
    ),
    Case(
        'sigint-demo',
        'demo',
        ['--checkpoint', '{run}', '--episodes', '400', '--record', '1', '--out', '{tmp}/demo'],
        130,
        ('interrupt',),
        'Ctrl-C: exit 130 with a message, no traceback; the run untouched',
        proc=True,
        signal_on=('evaluating on held-out', signal.SIGINT),
        same=('{run}',),
        env=UNBUF,
        timeout=180,
    ),
]

RUN_CASES = [
    Case(
        'train-same-run-name-at-once',
        'train',
        TWIN,
        (0, 2),
        (),
        'two runs with one --run-name started together: exactly one trains, the other refuses (exit 2) naming the '
        'folder; progress.csv written by one run only',
        proc=True,
        setup=start_twin,
        check=one_run_one_refusal,
        timeout=300,
    ),
    Case(
        'train-resume-no-stale-progress-rows',
        'train',
        ['--checkpoint', '{prun}', '--timesteps', '{pto}'],
        0,
        (),
        'after a kill between checkpoints, the resumed run\'s progress logs hold each timestep once (no stale rows)',
        setup=killed_between_checkpoints,
        check=no_stale_rows,
        proc=True,
        timeout=300,
    ),
]


# ---- audit: the run's own world --------------------------------------------------------------------------------------
def audited_tasks(prefix):
    def check(ctx, res):
        rep = json.loads((ctx.path('{tmp}/a') / 'audit.json').read_text())
        tasks = {e['task_id'] for e in rep['episodes']}
        assert tasks, 'no episode audited'
        assert all(t.startswith(prefix) for t in tasks), (
            f'audited tasks {sorted(tasks)[:5]}: not the run\'s logged tasks ({prefix}...)'
        )

    return check


AUDIT_CASES = [
    Case(
        'audit-recorded-run',
        'audit',
        ['{rec}', '--out', '{tmp}/a'],
        0,
        (),
        'audit a recorded-log run from its episodes (the logged tasks rec-*)',
        check=audited_tasks('rec-'),
    ),
    Case(
        'audit-recorded-run-record',
        'audit',
        ['{rec}', '--record', '2', '--out', '{tmp}/a'],
        0,
        (),
        "--record on a recorded-log run records on the run's own log, not the shipped simulator world",
        check=audited_tasks('rec-'),
    ),
    Case(
        'audit-own-task-bank-run-record',
        'audit',
        ['{own}', '--record', '1', '--out', '{tmp}/a'],
        0,
        (),
        "--record on a run trained with --tasks records on the run's own task bank (ids my-*), not the shipped one",
        check=audited_tasks('my-'),
    ),
    Case(
        'audit-recorded-run-process',
        'audit',
        ['{rec}', '--out', '{tmp}/a'],
        0,
        (),
        'the real console script on a recorded-log run',
        proc=True,
        check=audited_tasks('rec-'),
    ),
]

CASES = OUT_CASES + RUN_CASES + SIGNAL_CASES + AUDIT_CASES


@pytest.fixture(scope='module')
def base(tmp_path_factory):
    """A tiny simulated run, evaluated (eval.json, episodes.jsonl), and a tiny run on a recorded log of two models,
    evaluated (its episodes are on the log's tasks, rec-*)."""
    from spindleflow_rl.logs.routers import make_two_model_log, write_csv, TWO_MODEL_CATALOG

    root = tmp_path_factory.mktemp('runs')
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
    write_csv(make_two_model_log(20, seed=5), root / 'log.csv')
    write_csv(
        TWO_MODEL_CATALOG,
        root / 'models.csv',
        ['id', 'role', 'domain', 'cost', 'latency', 'reliability', 'capability'],
    )
    rec = tiny_run(
        root,
        'rec',
        (
            '--catalog',
            str(root / 'models.csv'),
            '--backend',
            'recorded',
            '--recorded',
            str(root / 'log.csv'),
            '--log-learner',
            'ppo',
            '--imitation-teacher',
            '',
            '--eval-episodes',
            '2',
        ),
    )
    assert (rec / 'episodes.jsonl').exists()
    from spindleflow_rl.core.config import (
        config_path,
    )  # the shipped bank with every id renamed: my-p1-..., my-p2-...

    (root / 'mytasks.yaml').write_text(
        config_path('tasks.yaml').read_text().replace('\n- id: p', '\n- id: my-p')
    )
    own = tiny_run(root, 'own', ('--tasks', str(root / 'mytasks.yaml')))
    return {'@run': str(run), '@rec': str(rec), '@own': str(own), 'cfg': str(root / 'tiny.yaml')}


@pytest.mark.parametrize('case', CASES, ids=str)
def test_run_folder_case(case, base, tmp_path):
    ctx = Ctx(base, tmp_path)
    try:
        run_case(case, ctx, 'test_run_folders')
    finally:
        if '_twin' in ctx and ctx['_twin'].poll() is None:
            os.killpg(ctx['_twin'].pid, signal.SIGKILL)
