"""Checkpoints that cannot be used (issue 20, items 1 and 2), against every command that reads one: a file that is not
a zip, an empty or truncated zip, a zip with corrupted data, a foreign Stable-Baselines3 zip (plain PPO on CartPole),
given to `spindleflow-eval`, `-export`, `-demo`, `-audit`, `spindleflow-train --init-from` and `--checkpoint`. Each
must be refused with exit 2 and a message naming the file, never a traceback. In a run folder, a corrupted or
missing latest checkpoint falls back to the previous good one with a message; a run killed while writing a
checkpoint resumes. See `cli_harness` for how a case is run and checked."""

import json, os, shutil, signal, subprocess, time, zipfile
from pathlib import Path
import pytest
from cli_harness import Case, Ctx, run_case, tiny_run, bad_checkpoints, corrupt, base_env, TASK

KINDS = {
    'notzip': 'a text file named .zip',
    'empty': 'an empty file',
    'truncated': 'the first half of a checkpoint',
    'corrupted': 'a checkpoint with 64 bytes of its weights flipped',
    'foreign': 'a plain SB3 PPO CartPole zip',
}


def _per_command(kind: str) -> list:
    f, n = '{' + kind + '}', f'{kind}.zip'
    w = f'refuse: {KINDS[kind]} is not a SpindleFlow checkpoint (exit 2, the file named)'
    return [
        Case(
            f'{kind}-eval',
            'eval',
            [
                '--checkpoint',
                f,
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
            ],
            2,
            (n,),
            w,
            absent=('{tmp}/e.json',),
        ),
        Case(
            f'{kind}-export',
            'export',
            ['--checkpoint', f, '--task', TASK, '--out', '{tmp}/wf.yml'],
            2,
            (n,),
            w,
            absent=('{tmp}/wf.yml',),
        ),
        Case(
            f'{kind}-demo',
            'demo',
            ['--checkpoint', f, '--episodes', '2', '--record', '1', '--out', '{tmp}/demo'],
            2,
            (n,),
            w,
            absent=('{tmp}/demo',),
        ),
        Case(f'{kind}-audit', 'audit', [f, '--out', '{tmp}/audit'], 2, (n,), w, absent=('{tmp}/audit',)),
        Case(
            f'{kind}-train-init-from',
            'train',
            [
                '--config',
                '{cfg}',
                '--demo-mode',
                '--timesteps',
                '64',
                '--init-from',
                f,
                '--out',
                '{tmp}/runs',
                '--run-name',
                'x',
            ],
            2,
            (n,),
            w,
            absent=('{tmp}/runs/x',),
        ),
        Case(
            f'{kind}-train-resume', 'train', ['--checkpoint', f, '--timesteps', '128'], 2, (n,), w, same=(f,)
        ),
    ]


# ---- run folders whose checkpoints are damaged -----------------------------------------------------------------------
def _latest(ctx) -> dict:
    return json.loads((ctx.path('{run}') / 'latest.json').read_text())


def interrupted_run(ctx):
    "The run as if stopped before its end: no final.zip (so commands read the checkpoint latest.json points at)."
    (ctx.path('{run}') / 'final.zip').unlink()


def corrupt_latest(ctx):
    interrupted_run(ctx)
    z = ctx.path('{run}') / _latest(ctx)['checkpoint']
    z.write_bytes(corrupt(z.read_bytes()))


def truncate_latest_json(ctx):
    p = ctx.path('{run}') / 'latest.json'
    p.write_bytes(p.read_bytes()[:200])


def corrupt_final(ctx):
    p = ctx.path('{run}') / 'final.zip'
    p.write_bytes(corrupt(p.read_bytes()))


def corrupt_resume_state(ctx):
    interrupted_run(ctx)
    p = ctx.path('{run}') / _latest(ctx)['resume_state']
    p.write_bytes(p.read_bytes()[:1000])


def missing_latest_zip(ctx):
    interrupted_run(ctx)
    (ctx.path('{run}') / _latest(ctx)['checkpoint']).unlink()


def killed_writing_zip(ctx):
    """SIGKILL while `checkpoints/step_96.zip` was being written: its temporary file half written, latest.json still on
    step 64 (the write order is zip, resume state, latest.json, each through a temporary file and a rename)."""
    interrupted_run(ctx)
    ck = ctx.path('{run}') / 'checkpoints'
    data = (ck / 'step_0000000064.zip').read_bytes()
    (ck / '.step_0000000096.zip.k3j9x2.tmp').write_bytes(data[: len(data) // 3])


def killed_before_latest(ctx):
    "SIGKILL after step 96's zip was renamed into place, before its resume state and latest.json."
    interrupted_run(ctx)
    ck = ctx.path('{run}') / 'checkpoints'
    shutil.copyfile(ck / 'step_0000000064.zip', ck / 'step_0000000096.zip')
    (ck / '.step_0000000096.resume.pkl.k3j9x2.tmp').write_bytes(b'\x80\x05partial')


def resumed_to(n):
    def check(ctx, res):
        st = _latest(ctx)
        assert st['num_timesteps'] == n, f"latest.json says {st['num_timesteps']} timesteps, want {n}"
        zipfile.ZipFile(ctx.path('{run}') / st['checkpoint']).testzip()

    return check


def report_from(name):
    def check(ctx, res):
        rep = json.loads((ctx.path('{tmp}') / 'e.json').read_text())
        assert Path(rep['checkpoint']).name == name, (
            f"evaluated {rep['checkpoint']}, want the previous good checkpoint {name}"
        )

    return check


EVAL = [
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
RUN_CASES = [
    Case(
        'run-corrupted-latest-resume',
        'train',
        ['--checkpoint', '{run}', '--timesteps', '96'],
        0,
        ('step_0000000064.zip', 'step_0000000032.zip'),
        'resume falls back to the previous good checkpoint (step 32) with a message naming the corrupted one',
        setup=corrupt_latest,
        check=resumed_to(96),
        same=('{run}/checkpoints/step_0000000032.zip',),
    ),
    Case(
        'run-corrupted-latest-eval',
        'eval',
        ['--checkpoint', '{run}', *EVAL],
        0,
        ('step_0000000064.zip', 'step_0000000032.zip'),
        'evaluation falls back to the previous good checkpoint with a message naming the corrupted one',
        setup=corrupt_latest,
        check=report_from('step_0000000032.zip'),
    ),
    Case(
        'run-corrupted-latest-export',
        'export',
        ['--checkpoint', '{run}', '--task', TASK, '--out', '{tmp}/wf.yml'],
        0,
        ('step_0000000064.zip',),
        'export falls back to the previous good checkpoint with a message',
        setup=corrupt_latest,
    ),
    Case(
        'run-corrupted-final-eval',
        'eval',
        ['--checkpoint', '{run}', *EVAL],
        0,
        ('final.zip',),
        'final.zip unreadable: evaluate the good checkpoint it was copied from (same timesteps), with a message',
        setup=corrupt_final,
        check=report_from('step_0000000064.zip'),
    ),
    Case(
        'run-missing-latest-zip-resume',
        'train',
        ['--checkpoint', '{run}', '--timesteps', '96'],
        0,
        ('step_0000000064.zip', 'step_0000000032.zip'),
        'the zip latest.json names is gone: resume from the previous good checkpoint, with a message',
        setup=missing_latest_zip,
        check=resumed_to(96),
    ),
    Case(
        'run-truncated-latest-json-resume',
        'train',
        ['--checkpoint', '{run}', '--timesteps', '96'],
        2,
        ('latest.json',),
        'refuse: latest.json is not valid JSON (exit 2, named)',
        setup=truncate_latest_json,
        same=('{run}',),
    ),
    Case(
        'run-truncated-latest-json-eval',
        'eval',
        ['--checkpoint', '{run}', *EVAL],
        2,
        ('latest.json',),
        'refuse: latest.json is not valid JSON (exit 2, named)',
        setup=truncate_latest_json,
        same=('{run}',),
    ),
    Case(
        'run-truncated-resume-state',
        'train',
        ['--checkpoint', '{run}', '--timesteps', '96'],
        0,
        ('resume.pkl',),
        'an unreadable resume state: resume without it (or from the previous checkpoint), saying so',
        setup=corrupt_resume_state,
        check=resumed_to(96),
    ),
    Case(
        'run-killed-writing-zip',
        'train',
        ['--checkpoint', '{run}', '--timesteps', '96'],
        0,
        (),
        'killed while writing a checkpoint: resume from latest.json (step 64), ignoring the half-written temporary '
        'file',
        setup=killed_writing_zip,
        check=resumed_to(96),
    ),
    Case(
        'run-killed-before-latest',
        'train',
        ['--checkpoint', '{run}', '--timesteps', '96'],
        0,
        (),
        'killed between the zip and latest.json: resume from latest.json (step 64)',
        setup=killed_before_latest,
        check=resumed_to(96),
    ),
]


def kill9_during_save(ctx):
    """A real `spindleflow-train` killed with SIGKILL the moment a checkpoint's temporary file appears (mid-write when
    the timing allows; the assertions hold either way): the case then resumes it."""
    tmp = ctx.path('{tmp}')
    (tmp / 'k.yaml').write_text(
        Path(ctx['cfg']).read_text().replace('checkpoint_every: 32', 'checkpoint_every: 64')
    )
    p = subprocess.Popen(
        [
            shutil.which('spindleflow-train'),
            '--config',
            str(tmp / 'k.yaml'),
            '--demo-mode',
            '--timesteps',
            '100000',
            '--out',
            str(tmp),
            '--run-name',
            'k',
            '--imitation-teacher',
            '',
        ],
        cwd=tmp,
        env=base_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    ck, t0 = tmp / 'k' / 'checkpoints', time.time()
    try:
        while time.time() - t0 < 120 and p.poll() is None:
            tmps = (
                list(ck.glob('.step_*.tmp')) if ck.exists() else []
            )  # files.atomic_write_bytes: .<name>.<random>.tmp
            if tmps and (tmp / 'k' / 'latest.json').exists():
                break
            time.sleep(0.001)
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(30)
    assert (tmp / 'k' / 'latest.json').exists(), 'no checkpoint was written before the kill'
    ctx['kill_run'] = str(tmp / 'k')
    ctx['kill_to'] = str(json.loads((tmp / 'k' / 'latest.json').read_text())['num_timesteps'] + 64)


def kill9_check(ctx, res):
    st = json.loads((ctx.path('{kill_run}') / 'latest.json').read_text())
    assert st['num_timesteps'] == int(ctx['kill_to']), st['num_timesteps']
    for z in ctx.path('{kill_run}').rglob('*.zip'):
        zipfile.ZipFile(z).testzip()


PROC_CASES = [
    Case(
        'run-kill9-during-save-resume',
        'train',
        ['--checkpoint', '{kill_run}', '--timesteps', '{kill_to}'],
        0,
        (),
        'a run killed (SIGKILL) while saving resumes from its last complete checkpoint; every zip left is complete',
        proc=True,
        setup=kill9_during_save,
        check=kill9_check,
        timeout=180,
    ),
    Case(
        'notzip-eval-process',
        'eval',
        ['--checkpoint', '{notzip}', '--episodes', '2', '--json', '{tmp}/e.json'],
        2,
        ('notzip.zip',),
        'the real console script: refuse, exit 2, no traceback',
        proc=True,
    ),
]

CASES = [c for k in KINDS for c in _per_command(k)] + RUN_CASES + PROC_CASES


@pytest.fixture(scope='module')
def base(tmp_path_factory):
    root = tmp_path_factory.mktemp('ckpt')
    run = tiny_run(root)
    return {
        '@run': str(run),
        'cfg': str(root / 'tiny.yaml'),
        **bad_checkpoints(root / 'bad', run / 'final.zip'),
    }


@pytest.mark.parametrize('case', CASES, ids=str)
def test_checkpoint_case(case, base, tmp_path):
    run_case(case, Ctx(base, tmp_path), 'test_checkpoint_errors')
