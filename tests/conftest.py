import os, tempfile, pytest


def pytest_addoption(parser):
    parser.addoption(
        '--slow',
        action='store_true',
        default=False,
        help='also run slow checks (notebook cells flagged #| slow, full learning runs)',
    )
    parser.addoption(
        '--only-slow',
        action='store_true',
        default=False,
        help='run only the tests marked slow (the second half of CI: .ci/run)',
    )


def pytest_configure(config):
    config.addinivalue_line('markers', 'slow: long check, only with --slow')
    _console_scripts_of_this_checkout()
    _one_thread_per_worker()


def _one_thread_per_worker():
    """With two or more xdist workers (tools/test.sh: two on two cores), each worker and every command it starts computes
    on one thread: a torch/OpenMP pool per process spins on the core the other worker is using (measured under load:
    a recorded-log training over 900 s instead of about 65 s; a PPO run 180 s instead of 38 s). A value already set
    is kept. The chapters' kernels do not inherit it (tools/chapters.py): they run as a reader runs them."""
    if int(os.environ.get('PYTEST_XDIST_WORKER_COUNT', '1')) > 1:
        os.environ.setdefault('OMP_NUM_THREADS', '1')


def _console_scripts_of_this_checkout():
    """Put `spindleflow-*` scripts made from this checkout's settings.ini first on PATH, written as pip writes them.
    The tests then run the entry points this code declares even where the installed scripts come from another
    checkout or an older install (a shared environment, an editable install of another branch); whether `pip install`
    itself produces them is tests/test_install.py's job."""
    import configparser, sys
    from pathlib import Path

    ini = configparser.ConfigParser()
    ini.read(Path(__file__).resolve().parents[1] / 'settings.ini')
    d = Path(tempfile.gettempdir()) / f'spindleflow-scripts-{os.getpid()}'
    d.mkdir(exist_ok=True)
    for entry in ini['DEFAULT'].get('console_scripts', '').split():
        name, target = entry.split('=', 1)
        mod, fn = target.split(':')
        p = d / name
        p.write_text(
            f"#!{sys.executable}\nimport sys\nfrom {mod} import {fn}\nif __name__ == '__main__':\n    "
            f"sys.exit({fn}())\n"
        )
        p.chmod(0o755)
    if str(d) not in os.environ.get('PATH', '').split(os.pathsep):
        os.environ['PATH'] = str(d) + os.pathsep + os.environ.get('PATH', '')


def pytest_collection_modifyitems(config, items):
    items.sort(key=_rank)  # the longest first (LONGEST_FIRST below); stable, so the rest keep their order
    if config.getoption('--only-slow'):
        config.hook.pytest_deselected(items=[it for it in items if 'slow' not in it.keywords])
        items[:] = [it for it in items if 'slow' in it.keywords]
        return
    if config.getoption('--slow'):
        return
    skip = pytest.mark.skip(reason='slow: run with --slow')
    for it in items:
        if 'slow' in it.keywords:
            it.add_marker(skip)


import contextlib, os, subprocess, tempfile, time


@contextlib.contextmanager
def served_process(cmd, health_url: str, timeout_s: float = 120.0, **popen_kw):
    """Start a server process (`cmd`), wait until `health_url` answers 200, yield the process, stop it afterwards.
    Its log goes to a temporary file: an unread pipe fills up (64 KiB) and then blocks the server mid-test."""
    import requests

    log = tempfile.NamedTemporaryFile('w+', suffix='.log', delete=False)
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True, **popen_kw)
    try:
        t0 = time.time()
        while True:
            if p.poll() is not None:
                pytest.fail(f'{cmd[0]} exited with {p.returncode}:\n{open(log.name).read()[-3000:]}')
            try:
                if requests.get(health_url, timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.time() - t0 > timeout_s:
                pytest.fail(f'{cmd[0]} did not answer {health_url} within {timeout_s:.0f} s')
            time.sleep(0.2)
        yield p
    finally:
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
        log.close()
        os.unlink(log.name)


# The longest checks first, so that neither of tools/test.sh's two workers is left running one alone at the end. xdist
# (--dist loadgroup) gives each worker one check and one in reserve, then the next to whichever frees first; the order
# below keeps the chapters that compute on every core (18b, 18c: their kernels run as a reader's, without
# OMP_NUM_THREADS=1) from running at the same time (together they took 119 s and 107 s, apart 63 s and 49 s), and
# starts 18b beside 09a, which mostly waits on its loopback servers.
# Measured with `--durations=40`; a substring of the test id each.
LONGEST_FIRST = [
    'test_notebook[18b_',
    'test_notebook[09a_',
    'test_recorded_cli.py::test_full_information_run_eval_and_sweep',
    'test_recorded_cli.py::test_guard_keeps',
    'test_notebook[18c_',
    'test_async_rollouts.py::test_ctrl_c_mid_rollout',
    'test_notebook[00_',
    'test_paid_backend_case[paid-train-smoke]',
    'test_notebook[10_evaluate]',
    'test_openai_cli.py::test_openai_backend_train_and_eval',
    'test_notebook[08_policy]',
    'test_resume.py::test_sigkill',
    'test_notebook[12_demo]',
    'test_notebook[18_routers]',
    'test_recorded_cli.py::test_a_wide_log',
    'test_checkpoint_case[run-kill9-during-save-resume]',
    'test_recorded_cli.py::test_on_policy',
    'test_recorded_cli.py::test_no_heldout',
    'test_notebook[05a_',
]


def _rank(item) -> int:
    return next((i for i, s in enumerate(LONGEST_FIRST) if s in item.nodeid), len(LONGEST_FIRST))
