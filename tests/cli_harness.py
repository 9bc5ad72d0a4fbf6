"""Harness of the bad-input and fault case tables (issue 20, items 1 and 2): one `Case` per row, run through the
command's in-process `main(argv)` or its real console script (`spindleflow-*` in a subprocess), then checked against
the desired behaviour:

- exit code: 2 for a usage error (a bad flag, value, file, config key, checkpoint or output path the user gave),
  1 for a runtime failure (a server that fails, calls that failed beyond the threshold), 130 for Ctrl-C, 0 where the
  right behaviour is to succeed;
- no `Traceback` in stdout/stderr (in process: no exception escapes `main`, which is what prints one in the real CLI);
- the message names the offending flag, key or file (`names`: each entry a string, or a tuple of alternatives);
- data safety: files listed in `same` are byte-identical afterwards, paths in `absent` were not created;
- `check(ctx, res)`: extra assertions of the right behaviour (a report's content, a server's request count).

In process vs subprocess: validation cases run in process (a second each instead of 3-5 s of imports); the real
entry point runs where the case needs a process of its own: signals (SIGINT, SIGKILL), two runs at once, a command
that may hang or take memory on bad input (it gets a timeout and an address-space limit), `spindleflow-serve`, the
environment-variable cases of the paid backend, and one representative case per command, so that the traceback check
also covers the console script.

`SPINDLEFLOW_CASES_LOG=FILE` appends one JSON line per case (what happened); `python tests/cli_harness.py table FILE`
prints the markdown table of `tests/CLI_CASES.md`."""

from __future__ import annotations
import contextlib, hashlib, importlib, io, json, os, re, resource, shutil, signal, subprocess, sys, time, traceback, zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

COMMANDS = {
    c: f'{c}_main' for c in ('train', 'eval', 'demo', 'export', 'audit', 'sweep', 'serve')
}  # in spindleflow_rl.cli
MEMORY_LIMIT = (
    6 << 30
)  # address space of a subprocess case: a command that allocates without bound fails, not the machine

TINY = """train:
  n_envs: 2
  eval_episodes: 0
  checkpoint_every: 32
  keep_checkpoints: 5
  progress: false
  torch_threads: 1
  vec_env: dummy
ppo:
  n_steps: 16
  batch_size: 32
  n_epochs: 1
"""
TASK = 'p1-backend-01'  # a task id of the shipped bank (export without the embedding model)


@dataclass
class Case:
    id: str
    cmd: str  # train | eval | demo | export | audit | sweep | serve
    args: list  # argv; '{name}' is filled in from the context (see `Ctx`)
    rc: int | tuple = 2  # the exit code wanted (a tuple: any of them)
    names: tuple = ()  # strings the output must contain (a tuple entry: any of its strings)
    want: str = ''  # the desired behaviour in words (for the table)
    proc: bool = False  # run the real console script in a subprocess
    setup: Callable | None = None  # setup(ctx) before the run: writes the case's own files
    same: tuple = ()  # paths whose bytes (every file under a folder) must not change
    absent: tuple = ()  # paths that must not exist afterwards
    check: Callable | None = None  # check(ctx, res): extra assertions
    env: dict = field(
        default_factory=dict
    )  # extra environment (subprocess), or os.environ changes (in process)
    timeout: float = 120.0  # subprocess: longer counts as a hang
    signal_on: tuple | None = None  # (text, signum): send the signal once the output shows text

    def __str__(self):
        return self.id


class Ctx(dict):
    """The names a case's strings use. `{tmp}`: the case's own empty folder (also the working directory); `{run}`: a
    private copy of the module's tiny trained run (made on first use); the module's fixture adds more (`{zip}`,
    `{cfg}`, ...); `setup(ctx)` may add its own."""

    def __init__(self, base: dict, tmp: Path):
        super().__init__(base)
        self['tmp'] = str(tmp)
        self.tmp = Path(tmp)
        self.lazy = {k[1:]: v for k, v in base.items() if k.startswith('@')}

    def __missing__(self, key):
        if key in self.lazy:  # '@run': a folder copied into the case's folder on first use
            dst = self.tmp / key
            if not dst.exists():
                shutil.copytree(self.lazy[key], dst, symlinks=True)
            self[key] = str(dst)
            return self[key]
        raise KeyError(f"case string names {{{key}}}, which the context does not define")

    def fmt(self, s):
        return s.format_map(self) if isinstance(s, str) else str(s)

    def path(self, s) -> Path:
        return Path(self.fmt(s))


@dataclass
class Result:
    rc: int | None
    out: str
    err: str
    seconds: float
    timed_out: bool = False
    exception: str = ''

    @property
    def text(self):
        return self.out + '\n' + self.err

    @property
    def traceback(self) -> bool:
        return bool(self.exception) or 'Traceback (most recent call last)' in self.text


# ---- running ---------------------------------------------------------------------------------------------------------
def _limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def base_env(extra: dict | None = None) -> dict:
    """The environment of a case: this one, offline, without OPENAI_BASE_URL, then `extra` (a value None removes it)."""
    env = {
        **os.environ,
        'HF_HUB_OFFLINE': '1',
        'TRANSFORMERS_OFFLINE': '1',
        'TOKENIZERS_PARALLELISM': 'false',
        'MPLBACKEND': 'Agg',
    }
    env.pop('OPENAI_BASE_URL', None)
    env.update(extra or {})
    return {k: v for k, v in env.items() if v is not None}


def run_proc(
    cmd: str, argv: list, cwd, env: dict | None = None, timeout: float = 120.0, signal_on: tuple | None = None
) -> Result:
    """The real console script `spindleflow-<cmd>` in a subprocess (own session, memory-limited); killed after
    `timeout`. `signal_on=(text, signum)`: send `signum` to its process group (as Ctrl-C does) once `text` appears in
    its output."""
    import tempfile

    exe = shutil.which(f'spindleflow-{cmd}')
    assert exe, f'spindleflow-{cmd} is not on PATH: pip install -e .'
    _check_entry_point(exe, cmd)
    t0, timed_out, sent = time.time(), False, False
    with tempfile.TemporaryFile('w+') as fo, tempfile.TemporaryFile('w+') as fe:
        p = subprocess.Popen(
            [exe, *argv],
            cwd=cwd,
            env=base_env(env),
            stdin=subprocess.DEVNULL,
            stdout=fo,
            stderr=fe,
            text=True,
            start_new_session=True,
            preexec_fn=_limit_memory,
        )
        while p.poll() is None:
            if time.time() - t0 > timeout:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                timed_out = True
                break
            if signal_on and not sent:
                fo.seek(0)
                fe.seek(0)
                if signal_on[0] in fo.read() + fe.read():
                    os.killpg(p.pid, signal_on[1])
                    sent = True
            time.sleep(0.05)
        fo.seek(0)
        fe.seek(0)
        out, err = fo.read(), fe.read()
    if signal_on and not sent and not timed_out:
        err += f"\n[harness] '{signal_on[0]}' never appeared: no signal sent"
    return Result(None if timed_out else p.returncode, out, err, time.time() - t0, timed_out)


def _check_entry_point(exe: str, cmd: str):
    """The console script must run `spindleflow_rl.cli:<cmd>_main`
    (an install older than the command layer runs stale code)."""
    import sysconfig

    real = Path(sysconfig.get_path('scripts')) / f'spindleflow-{cmd}' if 'shims' in exe else Path(exe)
    text = real.read_text(errors='replace') if real.exists() else ''
    assert 'spindleflow_rl.cli' in text, (
        f'{real} does not run spindleflow_rl.cli:{cmd}_main (an install from before the command '
        'layer): reinstall with `pip install -e .` so the console scripts follow settings.ini'
    )


def run_inproc(cmd: str, argv: list, cwd, env: dict | None = None) -> Result:
    """`main(argv)` of the command's module in this process, stdout/stderr captured, the environment and working
    directory restored afterwards. An exception escaping `main` is what the console script shows as a traceback
    (exit code 1)."""
    main = getattr(importlib.import_module('spindleflow_rl.cli'), COMMANDS[cmd])
    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    new = base_env(env)
    os.environ.clear()
    os.environ.update(new)
    os.chdir(cwd)
    t0, exc, rc = time.time(), '', None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(list(argv))
            except SystemExit as e:
                if isinstance(e.code, str):
                    print(e.code, file=sys.stderr)
                    rc = 1
                else:
                    rc = 0 if e.code is None else int(e.code)
    except BaseException:  # KeyboardInterrupt included: the CLI would print a traceback
        exc = traceback.format_exc()
        rc = 1
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    rc = 0 if rc is None else rc
    return Result(
        rc, out.getvalue(), err.getvalue() + (('\n' + exc) if exc else ''), time.time() - t0, False, exc
    )


# ---- checking --------------------------------------------------------------------------------------------------------
def digest(path: Path) -> dict:
    "sha256 of every file at or under `path` (relative names); {} when it does not exist."
    p = Path(path)
    if p.is_file():
        return {'.': hashlib.sha256(p.read_bytes()).hexdigest()}
    if not p.exists():
        return {}
    return {
        str(f.relative_to(p)): hashlib.sha256(f.read_bytes()).hexdigest()
        for f in sorted(p.rglob('*'))
        if f.is_file()
    }


def _named(text: str, name) -> bool:
    alts = name if isinstance(name, tuple) else (name,)
    return any(a in text for a in alts)


def classify(case: Case, res: Result, missing: list, changed: list, created: list, check_err: str) -> str:
    """What happened, in the issue's words: ok / clear error / unclear error (the flag or file not named) / wrong exit
    code / traceback / hang / silent wrong (bad input accepted, or a wrong result) / overwritten (a file to keep
    changed) / error, output left behind (refused, but after writing what it must not)."""
    want = case.rc if isinstance(case.rc, tuple) else (case.rc,)
    if res.timed_out:
        return 'hang'
    if res.traceback:
        return 'traceback'
    if changed:
        return 'overwritten'
    if res.rc == 0 and (0 not in want or check_err or created):
        return 'silent wrong'
    if res.rc != 0 and want == (0,):
        return 'refused (should work)'
    if created:
        return 'error, output left behind'
    if res.rc not in want:
        return 'wrong exit code'
    if missing:
        return 'unclear error'
    if check_err:
        return 'wrong result'
    return 'ok' if res.rc == 0 else 'clear error'


def run_case(case: Case, ctx: Ctx, module: str = '') -> Result:
    """Run `case` and assert the desired behaviour (see the module docstring); every outcome is logged first when
    SPINDLEFLOW_CASES_LOG is set."""
    if case.setup:
        case.setup(ctx)
    argv = [ctx.fmt(a) for a in case.args]
    env = {k: None if v is None else ctx.fmt(v) for k, v in case.env.items()}
    before = {s: digest(ctx.path(s)) for s in case.same}
    for s, d in before.items():
        assert d, f'{case.id}: the file to keep ({ctx.fmt(s)}) does not exist before the run'
    pre_absent = {s: ctx.path(s).exists() for s in case.absent}
    res = (
        run_proc(case.cmd, argv, ctx.tmp, env, case.timeout, case.signal_on)
        if case.proc
        else run_inproc(case.cmd, argv, ctx.tmp, env)
    )
    names = [tuple(ctx.fmt(a) for a in n) if isinstance(n, tuple) else ctx.fmt(n) for n in case.names]
    missing = [n for n in names if not _named(res.text, n)]
    changed = [ctx.fmt(s) for s in case.same if digest(ctx.path(s)) != before[s]]
    created = [ctx.fmt(s) for s in case.absent if ctx.path(s).exists() and not pre_absent[s]]
    check_err = ''
    if case.check and not res.timed_out:
        try:
            case.check(ctx, res)
        except AssertionError as e:
            check_err = str(e) or 'check failed'
        except Exception as e:
            check_err = f'{type(e).__name__}: {e}'
    outcome = classify(case, res, missing, changed, created, check_err)
    log = os.environ.get('SPINDLEFLOW_CASES_LOG')
    if log:
        rec = {
            'id': case.id,
            'module': module,
            'cmd': case.cmd,
            'proc': case.proc,
            'rc': res.rc,
            'want_rc': case.rc,
            'traceback': res.traceback,
            'timed_out': res.timed_out,
            'missing': missing,
            'changed': changed,
            'created': created,
            'check': check_err[:300],
            'outcome': outcome,
            'want': case.want,
            'seconds': round(res.seconds, 2),
            'last_line': _last_line(res),
        }
        with open(log, 'a') as f:
            f.write(json.dumps(rec) + '\n')
    shown = (
        f"\n--- {case.id}: spindleflow-{case.cmd} {' '.join(argv)}\n--- stdout\n{res.out[-2500:]}\n--- "
        f"stderr\n{res.err[-4000:]}"
    )
    assert not res.timed_out, f'{case.id}: no answer within {case.timeout:.0f} s (a hang){shown}'
    assert not res.traceback, f'{case.id}: a traceback instead of a message{shown}'
    want = case.rc if isinstance(case.rc, tuple) else (case.rc,)
    assert res.rc in want, f'{case.id}: exit code {res.rc}, want {case.rc}{shown}'
    assert not missing, f'{case.id}: the message does not name {missing}{shown}'
    assert not changed, f'{case.id}: files changed that must be kept byte for byte: {changed}{shown}'
    assert not created, f'{case.id}: wrote where it must not: {created}{shown}'
    assert not check_err, f'{case.id}: {check_err}{shown}'
    return res


def _last_line(res: Result) -> str:
    """The most telling line of the output: the exception's last
    line, else the last stderr line, else the last stdout line."""
    for text in (res.exception, res.err, res.out):
        lines = [l.strip() for l in text.strip().splitlines() if l.strip()]
        if lines:
            return lines[-1][:240]
    return ''


# ---- fixtures' building blocks ---------------------------------------------------------------------------------------
def tiny_run(root: Path, name: str = 'run', extra: tuple = (), timesteps: int = 64) -> Path:
    "A tiny trained run (demo mode, 2 envs, 16-step rollouts, a checkpoint every 32 timesteps) trained in process."
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    cfg = root / 'tiny.yaml'
    if not cfg.exists():
        cfg.write_text(TINY)
    mode = [] if '--backend' in extra else ['--demo-mode']
    res = run_inproc(
        'train',
        [
            '--config',
            str(cfg),
            *mode,
            '--timesteps',
            str(timesteps),
            '--out',
            str(root),
            '--run-name',
            name,
            '--no-progress',
            *extra,
        ],
        root,
    )
    assert res.rc == 0 and not res.traceback, res.text[-3000:]
    return root / name


def foreign_sb3_zip(path: Path) -> Path:
    "A valid Stable-Baselines3 checkpoint of another problem: plain `PPO` on CartPole-v1, never trained."
    import gymnasium as gym
    from stable_baselines3 import PPO

    PPO('MlpPolicy', gym.make('CartPole-v1'), n_steps=16, batch_size=16, seed=0, device='cpu').save(str(path))
    return Path(path)


def bad_checkpoints(folder: Path, good: Path) -> dict:
    "Broken copies of the checkpoint zip `good`: {kind: path}."
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    data = Path(good).read_bytes()
    out = {}
    out['notzip'] = folder / 'notzip.zip'
    out['notzip'].write_text('this is not a zip file\n')
    out['empty'] = folder / 'empty.zip'
    out['empty'].write_bytes(b'')
    out['truncated'] = folder / 'truncated.zip'
    out['truncated'].write_bytes(data[: len(data) // 2])
    out['corrupted'] = folder / 'corrupted.zip'
    out['corrupted'].write_bytes(corrupt(data))
    out['foreign'] = foreign_sb3_zip(folder / 'foreign.zip')
    return {k: str(v) for k, v in out.items()}


def corrupt(data: bytes) -> bytes:
    "The zip `data` with the bytes of its largest member's compressed data overwritten (the zip directory intact)."
    zf = zipfile.ZipFile(io.BytesIO(data))
    info = max(zf.infolist(), key=lambda i: i.compress_size)
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    mid = start + info.compress_size // 2
    b = bytearray(data)
    b[mid : mid + 64] = bytes((x ^ 0x5A) for x in b[mid : mid + 64])
    return bytes(b)


def unreadable(path: Path, content: bytes = b'x') -> Path:
    """A file that exists but cannot be read: mode 000 for a normal user; as root (where mode 000 does not stop a read)
    a symlink to /proc/self/mem, whose read fails with EIO."""
    path = Path(path)
    if os.geteuid() != 0:
        path.write_bytes(content)
        path.chmod(0)
    else:
        os.symlink('/proc/self/mem', path)
    return path


LATIN1 = 'café,Zürich'.encode('latin-1')  # bytes that are not UTF-8


# ---- the table -------------------------------------------------------------------------------------------------------
def _short(text: str) -> str:
    "Temporary and checkout paths shortened to <tmp>/ and <repo>/ (the table stays readable and stable)."
    text = re.sub(r'/tmp/pytest-of-[^/]+/pytest-\d+/[^/\s\'\"]+/', '<tmp>/', text)
    return text.replace(str(Path(__file__).resolve().parent.parent) + '/', '<repo>/')


def table(log: str) -> str:
    "Markdown table (one row per case, by module) and counts per outcome, from a SPINDLEFLOW_CASES_LOG file."
    recs = {}
    for line in open(log):
        r = json.loads(line)
        recs[r['id']] = r
    rows, counts = [], {}
    by_mod = {}
    for r in recs.values():
        by_mod.setdefault(r['module'], []).append(r)
    out = []
    for mod, rs in by_mod.items():
        out += [
            f"\n### {mod}\n",
            '| case | command | now: exit | now: outcome | now: last line | want |',
            '|---|---|---|---|---|---|',
        ]
        for r in rs:
            counts.setdefault(mod, {}).setdefault(r['outcome'], 0)
            counts[mod][r['outcome']] += 1
            now = f"timeout ({r['seconds']:.0f} s)" if r['timed_out'] else r['rc']
            extra = []
            if r['missing'] and r['outcome'] == 'unclear error':
                extra.append(f"does not name {r['missing']}")
            if r['changed']:
                extra.append(f"changed {[Path(c).name for c in r['changed']]}")
            if r['created']:
                extra.append(f"created {[Path(c).name for c in r['created']]}")
            if r['check'] and r['outcome'] in ('silent wrong', 'wrong result', 'hang', 'traceback'):
                extra.append(r['check'].splitlines()[0][:160])
            last = _short(r['last_line']).replace('|', '\\|')
            if extra:
                last += ' <br>(' + '; '.join(e.replace('|', '\\|') for e in extra) + ')'
            want = f"exit {r['want_rc']}: {r['want']}".replace('|', '\\|')
            out.append(
                f"| `{r['id']}` | {r['cmd']}{' (process)' if r['proc'] else ''} | {now} | {r['outcome']} | {last} | "
                f"{want} |"
            )
    total = {}
    for c in counts.values():
        for k, v in c.items():
            total[k] = total.get(k, 0) + v
    head = ['| file | cases | ' + ' | '.join(sorted(total)) + ' |', '|---|---|' + '---|' * len(total)]
    for mod, c in counts.items():
        head.append(
            f"| {mod} | {sum(c.values())} | " + ' | '.join(str(c.get(k, 0)) for k in sorted(total)) + ' |'
        )
    head.append(
        f"| **all** | {sum(total.values())} | " + ' | '.join(str(total[k]) for k in sorted(total)) + ' |'
    )
    return '\n'.join(head) + '\n' + '\n'.join(out) + '\n'


if __name__ == '__main__':
    if len(sys.argv) == 3 and sys.argv[1] == 'table':
        print(table(sys.argv[2]))
    else:
        print('usage: python tests/cli_harness.py table CASES_LOG.jsonl')
        sys.exit(2)
