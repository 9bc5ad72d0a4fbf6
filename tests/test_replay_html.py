"""The exported replay opens in a real browser with no network: headless Chromium renders it, and the screenshot
and the DOM show the recorded episode (DAG and reward-bar colours, step text, task text, a specialist id)."""

import html, os, re, shutil, subprocess
from pathlib import Path
import numpy as np
import pytest

CHROMIUM_NAMES = ('chromium', 'chromium-browser', 'google-chrome', 'google-chrome-stable')
FLAGS = [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--disable-default-apps',
    '--disable-extensions',
    '--host-resolver-rules=MAP * ~NOTFOUND',  # no host resolves: the page must not need the network
    '--hide-scrollbars',
    '--window-size=1280,900',
]


def find_chromium():
    for n in CHROMIUM_NAMES:
        p = shutil.which(n)
        if p:
            return p
    if os.environ.get('CI', '').lower() in ('1', 'true', 'yes'):
        pytest.fail(
            'CI is set but no Chromium was found on PATH. Install it (Debian: apt-get install -y chromium); '
            'the replay export must be checked in a real browser.'
        )
    pytest.skip(
        'Chromium not installed (Debian: apt-get install -y chromium); set CI=true to make this a failure.'
    )


def run_chromium(exe, tmp: Path, url: str, *args, timeout: int = 90) -> str:
    env = {**os.environ, 'HOME': str(tmp)}
    r = subprocess.run(
        [exe, *FLAGS, f'--user-data-dir={tmp / "profile"}', *args, url],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    assert r.returncode == 0, f'chromium exited with {r.returncode}:\n{r.stderr[-3000:]}'
    return r.stdout


def colour_share(img: np.ndarray, hexc: str, tol: float = 0.03) -> float:
    "Share of the screenshot's pixels within `tol` of the colour `hexc` (per channel, 0..1 scale)."
    c = np.array([int(hexc[i : i + 2], 16) / 255 for i in (1, 3, 5)])
    return float((np.abs(img[..., :3] - c).max(-1) < tol).mean())


@pytest.fixture(scope='module')
def exported(tmp_path_factory):
    "A replay of real episodes (baselines on the simulated backend, no training) and the episode to look at."
    from spindleflow_rl.agent.runs import split_env_fn
    from spindleflow_rl.agent.policies import make_baselines
    from spindleflow_rl.agent.replay import record_episodes, export_html

    eps = record_episodes(
        split_env_fn('heldout'),
        make_baselines(0, ('greedy-topk-par', 'oracle')),
        seeds=[10_000, 10_001],
        split='heldout',
    )
    # an episode with calls, at least two steps and a positive quality delta at its end (green bar on the last step)
    i = next(
        j
        for j, e in enumerate(eps)
        if len(e['steps']) >= 2
        and e['steps'][0].get('calls')
        and e['steps'][-1]['reward_terms']['quality_delta'] > 0
    )
    d = tmp_path_factory.mktemp('replay')
    return export_html(eps, d / 'replay.html'), eps, i


def test_replay_html_in_headless_chromium(exported, tmp_path):
    from matplotlib.image import imread
    from spindleflow_rl.envs.render import NODE_COLOURS, TERM_COLOURS

    exe = find_chromium()
    page, eps, i = exported
    ep = eps[i]
    T = len(ep['steps'])
    url = page.resolve().as_uri()

    # step 1: a call step; the DAG shows the orchestrator and this step's calls
    shot1 = tmp_path / 'step1.png'
    run_chromium(exe, tmp_path, f'{url}#ep={i}&step=1', f'--screenshot={shot1}')
    img = imread(shot1)
    assert img.shape[:2] == (900, 1280), img.shape
    gray = img[..., :3].mean(-1)
    assert gray.std() > 0.08, f'screenshot looks blank (grey std {gray.std():.3f}): {shot1}'
    assert (gray < 0.9).mean() > 0.03, f'almost nothing drawn in {shot1}'
    assert colour_share(img, NODE_COLOURS['orchestrator']) > 3e-4, f'no orchestrator node visible in {shot1}'
    assert colour_share(img, NODE_COLOURS['new']) > 3e-4, f'no specialist called this step visible in {shot1}'

    # last step: the quality delta bar is green
    shotT = tmp_path / 'last.png'
    run_chromium(exe, tmp_path, f'{url}#ep={i}&step={T}', f'--screenshot={shotT}')
    imgT = imread(shotT)
    assert colour_share(imgT, TERM_COLOURS['positive']) > 2e-4, f'no positive reward bar visible in {shotT}'
    assert colour_share(imgT, NODE_COLOURS['called']) > 3e-4, f'no earlier call in the DAG of {shotT}'
    assert np.abs(imgT[..., :3] - img[..., :3]).mean() > 0.005, 'step 1 and the last step render the same'

    # the DOM after the page's script ran: the chosen episode's last step in the left panel
    dom = run_chromium(exe, tmp_path, f'{url}#ep={i}&step={T}', '--dump-dom')
    m = re.search(r'<div id="sf-a">(.*?)<div id="sf-b">', dom, re.S)
    assert m, 'panel container missing from the DOM'
    shown = m.group(1)
    assert f'Step {T}/{T}' in shown and 'Episode end' in shown, (
        'the script did not switch to the requested step'
    )
    assert html.escape(ep['task']['text'], quote=False) in shown
    called = ep['steps'][0]['calls'][0]['specialist_id']
    assert called in shown, f'specialist {called} not shown'
    assert f'step {T} / {T}' in dom
    keep = os.environ.get('REPLAY_SCREENSHOT_DIR')  # keep the screenshots for a human look
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        for p in (shot1, shotT):
            shutil.copy(p, Path(keep) / p.name)


def test_specialist_script_renders_as_text_in_chromium(exported, tmp_path):
    """A specialist output holding <script> is shown as text in
    replay.html and in the audit report; the script never runs."""
    import copy
    from spindleflow_rl.agent.replay import export_html
    from spindleflow_rl.commands.audit import audit_episodes, audit_report, write_audit

    exe = find_chromium()
    _, eps, i = exported
    ep = copy.deepcopy(eps[i])
    ep['policy'] = 'policy'
    c = ep['steps'][0]['calls'][0]
    payload = '<script>document.title="pwned"</script>XSS-TEXT<img src=x onerror="document.title=\'pwned\'">'
    c['output'] = payload
    page = export_html([ep], tmp_path / 'evil.html', title='safe-title')
    dom = run_chromium(exe, tmp_path, f'{page.resolve().as_uri()}#ep=0&step=1', '--dump-dom')
    assert '<title>safe-title</title>' in dom and 'pwned</title>' not in dom, 'the injected script ran'
    m = re.search(r'<div id="sf-a">(.*?)<div id="sf-b">', dom, re.S)
    assert m and 'XSS-TEXT' in m.group(1) and '&lt;script&gt;' in m.group(1), (
        'the output is not shown as text'
    )
    files = write_audit(audit_report(audit_episodes([ep])), tmp_path / 'audit', title='safe-title')
    dom = run_chromium(exe, tmp_path, files[2].resolve().as_uri(), '--dump-dom')
    assert (
        '<title>safe-title</title>' in dom
        and 'pwned</title>' not in dom
        and 'XSS-TEXT' in dom
        and '&lt;script&gt;' in dom
    )
