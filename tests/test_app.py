"""The Streamlit app (streamlit_app.py): Streamlit's headless AppTest drives the interactions (bank task, typed task,
picked roster, seed, step slider), and the real app served on loopback is opened in headless Chromium (screenshot not
blank, the plan's specialist ids in the rendered page)."""

import os, re, shutil, socket, subprocess, sys, time
from pathlib import Path
import numpy as np
import pytest
from conftest import served_process
import requests

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / 'streamlit_app.py')
sys.path.insert(0, str(ROOT))
import streamlit_app  # noqa: E402  (the helpers; the page itself only runs under streamlit)
from streamlit.testing.v1 import AppTest  # noqa: E402


def run_app():
    at = AppTest.from_file(APP, default_timeout=240).run()
    assert not at.exception, at.exception
    return at


def page_text(at) -> str:
    return '\n'.join(m.value for m in at.markdown) + '\n'.join(s.value for s in at.subheader)


def called_ids(at) -> set:
    "Specialist ids in the calls tables of the steps shown."
    return set(re.findall(r'\| \d+ \| \w+ \| `([a-z0-9_]+)` \|', page_text(at)))


def test_parse_roster_formats_and_errors():
    known = {'a_b', 'c_d', 'e_f'}
    assert streamlit_app.parse_roster('r.yaml', b'roster: [a_b, c_d]', known, 6) == ['a_b', 'c_d']
    assert streamlit_app.parse_roster('r.yml', b'specialists:\n- id: e_f\n', known, 6) == ['e_f']
    assert streamlit_app.parse_roster('r.csv', b'id,role\nc_d,x\na_b,y\n', known, 6) == ['c_d', 'a_b']
    assert streamlit_app.parse_roster('r.txt', b'a_b  # first\n\ne_f\n', known, 6) == ['a_b', 'e_f']
    with pytest.raises(ValueError, match=r"unknown specialist id\(s\) \['zz'\]"):
        streamlit_app.parse_roster('r.txt', b'zz', known, 6)
    with pytest.raises(ValueError, match='1 to 2 specialists'):
        streamlit_app.parse_roster('r.txt', b'a_b\nc_d\ne_f', known, 2)
    with pytest.raises(ValueError, match='empty'):
        streamlit_app.parse_roster('r.txt', b'  ', known, 2)


def elements(at) -> list:
    "The page's elements in reading order, as (type, text) pairs (text for headers, markdown and captions)."
    out = []

    def walk(node):
        for c in getattr(node, 'children', {}).values():
            out.append(
                (
                    c.type,
                    str(getattr(c, 'value', ''))
                    if c.type in ('header', 'subheader', 'markdown', 'caption')
                    else '',
                )
            )
            walk(c)

    walk(at.main)
    return out


def test_parse_eval_md_reads_what_the_evaluation_writes():
    "The first screen's numbers: parse_eval_md reads `markdown_table`'s format (round trip) and the committed eval.md."
    from spindleflow_rl.commands.evaluate import markdown_table

    row = lambda r, nz, lo, hi: {
        'return': r,
        'return_ci95': 0.02,
        'normalised': nz,
        'normalised_ci95': [lo, hi],
        'quality': 0.3,
        'cost_usd': 0.04,
        'latency_s': 25.0,
        'success_rate': 0.2,
        'recovery_rate': 0.6,
        'specialists_per_task': 1.5,
        'plan_consistency': 0.6,
        'episodes': 50,
    }
    rep = {
        'splits': {
            'heldout': {
                'policy': row(0.115, 0.92, 0.88, 0.97),
                'random': row(-0.17, 0.0, 0.0, 0.0),
                'adaptive-planner': row(0.112, 0.92, 0.87, 0.96),
                'oracle': row(0.138, 1.0, 1.0, 1.0),
            }
        },
        'vs_best_baseline': {
            'heldout': {
                'best_baseline': 'adaptive-planner',
                'episodes': 50,
                'return_diff': 0.003,
                'return_diff_ci95': [-0.008, 0.014],
            }
        },
    }
    ev = streamlit_app.parse_eval_md(markdown_table(rep))
    assert list(ev) == ['heldout'] and ev['heldout']['episodes'] == 50
    assert list(ev['heldout']['table']) == ['policy', 'random', 'adaptive-planner', 'oracle']
    assert ev['heldout']['table']['policy'] == {
        'return': 0.115,
        'return_ci95': 0.02,
        'normalised': 0.92,
        'normalised_ci95': (0.88, 0.97),
        'cost_usd': 0.04,
    }
    assert 'policy − adaptive-planner: +0.003 [-0.008, +0.014] return' in ev['heldout']['paired']
    with pytest.raises(ValueError, match='no evaluation table'):
        streamlit_app.parse_eval_md('# nothing here')
    text = streamlit_app.EVAL_MD.read_text()  # the committed one: every row of every table read
    ev = streamlit_app.parse_eval_md(text)
    assert sum(len(v['table']) for v in ev.values()) == len(
        re.findall(r'^\| (?!policy \| return)', text, re.M)
    )
    assert all('policy' in v['table'] and 'oracle' in v['table'] for v in ev.values())


def test_first_screen_leads_with_the_comparison():
    """Above any single episode: the shipped policy against every baseline over the committed evaluation's episodes (its
    numbers and a figure), then the one-episode replay below it."""
    at = run_app()
    els = elements(at)
    heads = [i for i, (t, _) in enumerate(els) if t == 'header']
    assert [els[i][1] for i in heads] == [
        'The shipped policy against the baselines',
        'One episode, step by step',
    ]
    first, below = els[heads[0] : heads[1]], els[heads[1] :]
    assert not any(
        t in ('subheader', 'tab') for t, _ in els[: heads[1]]
    )  # no single episode before the comparison
    assert 'image' in [t for t, _ in first]  # the comparison figure
    ev = streamlit_app.parse_eval_md(streamlit_app.EVAL_MD.read_text())
    txt = '\n'.join(v for _, v in first)
    n = ev['heldout']['episodes']
    assert n >= 100 and f'**{n} episodes**' in txt
    for split, v in ev.items():
        assert f"trained policy **{v['table']['policy']['normalised']:.2f}**" in txt, split
    assert 'best scripted baseline adaptive-planner' in txt
    d = r'[-+]\d\.\d+'
    assert re.search(
        rf'paired on the same {n} episodes, policy − adaptive-planner = {d} \[{d}, {d}\] normalised: '
        rf'\*\*(level|ahead|behind)',
        txt,
    )
    assert any(t == 'subheader' and v == 'Trained policy' for t, v in below)  # the replay, below


def test_app_interactions():
    at = run_app()
    from spindleflow_rl.core.tasks import TaskBank

    bank = TaskBank.default()
    first = bank.ids[0]
    assert f'`{first}`' in page_text(at)
    assert '| policy | return |' in page_text(at)
    assert len(at.subheader) >= 2  # a plan and at least one baseline side by side
    assert called_ids(at), 'no calls table on the page'
    # another bank task
    other = bank.ids[5]
    at.selectbox(key='task_id').select(other).run()
    assert not at.exception and f'`{other}`' in page_text(at)
    # step back through an episode with the slider: the step shown changes
    sliders = [s for s in at.slider if s.key and s.key.startswith('step_')]
    if sliders:
        s = sliders[0]
        T = int(s.max)
        s.set_value(T).run()
        assert f'**Step {T}' in page_text(at)
    # a typed task goes through the decomposer
    at.radio(key='task_source').set_value('Type a task').run()
    at.text_area(key='task_text').input(
        'Threat-model the login flow, then write the security section of the docs'
    ).run()
    assert not at.exception
    txt = page_text(at)
    assert (
        re.search(r'`adhoc-[0-9a-f]{10}`', txt)
        and 'Threat-model the login flow' in txt
        and '**Subtasks**: 0.' in txt
    )
    # a picked roster is the roster every policy plays with
    ids = ['database_engineer', 'backend_freelancer', 'technical_writer']
    from spindleflow_rl.core.catalog import Catalog

    ids = [i for i in ids if i in Catalog.default()] or Catalog.default().ids[:3]
    at.radio(key='roster_mode').set_value('Pick specialists').run()
    at.multiselect(key='roster_pick').set_value(ids).run()
    assert not at.exception
    assert '**Roster**: ' + ', '.join(f'[{s}] `{r}`' for s, r in enumerate(ids)) in page_text(at)
    assert called_ids(at) <= set(ids)
    # the seed changes the simulated outcomes, the page still renders
    at.number_input(key='seed').set_value(7).run()
    assert not at.exception


def test_app_runs_the_shipped_policy():
    "No error banner: the shipped demo policy fits this version's environment and its plan is shown first."
    at = run_app()
    assert not at.error, f'the app shows an error: {[e.value for e in at.error]}'
    assert at.subheader[0].value == 'Trained policy'
    assert '| trained policy |' in page_text(at)


# ---------- the real app in a real browser ----------

FLAGS = [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--hide-scrollbars',
    '--window-size=1400,1800',
]


def find_chromium():
    for n in ('chromium', 'chromium-browser', 'google-chrome'):
        if shutil.which(n):
            return shutil.which(n)
    if os.environ.get('CI', '').lower() in ('1', 'true', 'yes'):
        pytest.fail('CI is set but no Chromium on PATH (apt-get install chromium).')
    pytest.skip('Chromium not installed (apt-get install chromium); CI=true makes this a failure.')


@pytest.fixture(scope='module')
def served():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    url = f'http://127.0.0.1:{port}'
    cmd = [
        sys.executable,
        '-m',
        'streamlit',
        'run',
        APP,
        '--server.port',
        str(port),
        '--server.address',
        '127.0.0.1',
        '--server.headless',
        'true',
        '--browser.gatherUsageStats',
        'false',
        '--server.fileWatcherType',
        'none',
    ]
    with served_process(cmd, f'{url}/_stcore/health', 60, cwd=ROOT):
        yield url


def cdp_page(exe, url: str, tmp: Path, wait_for, timeout: float = 180.0):
    """Open `url` in headless Chromium driven over the DevTools protocol; wait (real time: the app computes on the
    server) until `wait_for(page_text)`; return (DOM html, PNG screenshot bytes)."""
    import base64, json
    from websockets.sync.client import connect

    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        dport = s.getsockname()[1]
    p = subprocess.Popen(
        [
            exe,
            *FLAGS,
            f'--user-data-dir={tmp / "profile"}',
            f'--remote-debugging-port={dport}',
            'about:blank',
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, 'HOME': str(tmp)},
    )
    try:
        t0 = time.time()
        ws_url = None
        while ws_url is None:
            try:
                ws_url = next(
                    t['webSocketDebuggerUrl']
                    for t in requests.get(f'http://127.0.0.1:{dport}/json/list', timeout=1).json()
                    if t['type'] == 'page'
                )
            except Exception:
                if time.time() - t0 > 30:
                    pytest.fail('headless Chromium did not open its DevTools port')
                time.sleep(0.2)
        with connect(ws_url, max_size=64 * 2**20) as ws:
            n = [0]

            def call(method, **params):
                n[0] += 1
                ws.send(json.dumps({'id': n[0], 'method': method, 'params': params}))
                while True:
                    m = json.loads(ws.recv(timeout=60))
                    if m.get('id') == n[0]:
                        return m.get('result', {})

            js = lambda e: (
                call('Runtime.evaluate', expression=e, returnByValue=True).get('result', {}).get('value')
            )
            call('Page.enable')
            call('Page.navigate', url=url)
            t0 = time.time()
            while not wait_for(js('document.body ? document.body.innerText : ""') or ''):
                if time.time() - t0 > timeout:
                    pytest.fail(f'the app did not finish rendering within {timeout} s')
                time.sleep(0.5)
            time.sleep(2)  # images decode
            dom = js('document.documentElement.outerHTML')
            png = base64.b64decode(call('Page.captureScreenshot', format='png')['data'])
        return dom, png
    finally:
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()


def test_app_in_headless_chromium(served, tmp_path):
    exe = find_chromium()
    from spindleflow_rl.core.tasks import TaskBank

    first = TaskBank.default().ids[0]
    done = lambda text: first in text and 'specialist(s)' in text and 'Running' not in text
    dom, png = cdp_page(exe, served, tmp_path, done)
    assert 'SpindleFlow RL' in dom and first in dom
    ids_in_tables = set(
        re.findall(
            r'<td[^>]*>\s*\d+\s*</td>\s*<td[^>]*>\s*\w+\s*</td>\s*<td[^>]*>\s*<code[^>]*>([a-z0-9_]+)</code>',
            dom,
        )
    )
    assert ids_in_tables, 'no plan table with specialist ids in the DOM'
    roster = set(re.findall(r'\[\d\] <code[^>]*>([a-z0-9_]+)</code>', dom))
    assert ids_in_tables <= roster, (ids_in_tables, roster)  # the plan calls specialists of the roster shown
    shot = tmp_path / 'app.png'
    shot.write_bytes(png)
    from matplotlib.image import imread

    img = imread(shot)[..., :3]
    gray = img.mean(-1)
    assert img.shape[1] == 1400 and img.shape[0] > 600, img.shape
    assert gray.std() > 0.05 and (gray < 0.8).mean() > 0.01, f'the screenshot looks blank: {shot}'
    out = os.environ.get('SPINDLEFLOW_APP_SHOT')
    if out:
        shutil.copy(shot, out)
