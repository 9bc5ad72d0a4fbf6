"""SpindleFlow-v0 over OpenEnv, end to end: `spindleflow-serve` in a subprocess on a free loopback port, `openenv validate
--url` against it, full episodes through the typed client equal to in-process play (same seeds, same actions),
concurrent sessions that do not see each other's episodes, and malformed actions answered with a clear 4xx / error
while the server keeps serving."""

import json, os, shutil, subprocess, sys, time
from concurrent.futures import ThreadPoolExecutor
import numpy as np
import pytest
from conftest import served_process
import requests

from spindleflow_rl.commands.openenv import (
    SpindleFlowAction,
    SpindleFlowClient,
    free_port,
    verify_openenv_compliance,
    compliance_report,
)
from spindleflow_rl.envs.env import SpindleFlowEnv, encode_action, default_world

M = 6
PLANS = {
    3: [dict(slots=[0, 1], mode='parallel'), dict(slots=[2]), dict(stop=True)],
    7: [
        dict(slots=[1], mode='sequential'),
        dict(slots=[0, 3], mode='debate', params=(1, 0, 0, 0)),
        dict(stop=True),
    ],
    11: [dict(slots=[4, 2, 5], mode='sequential'), dict(stop=True)],
}


def in_process(seed):
    "Rewards, observations and return of PLANS[seed] played on a local SpindleFlowEnv."
    env = SpindleFlowEnv(world=default_world())
    obs, _ = env.reset(seed=seed)
    obs_l, rew = [obs], []
    for a in PLANS[seed]:
        obs, r, term, trunc, _ = env.step(encode_action(M, **a))
        obs_l.append(obs)
        rew.append(r)
        if term or trunc:
            break
    return rew, obs_l, env.return_, env.task.id


@pytest.fixture(scope='module')
def server():
    port = free_port()
    url = f'http://127.0.0.1:{port}'
    exe = shutil.which('spindleflow-serve')
    cmd = (
        [exe]
        if exe
        else [
            sys.executable,
            '-c',
            'import sys; from spindleflow_rl.cli import serve_main; sys.exit(serve_main())',
        ]
    )
    env = {**os.environ, 'HF_HUB_OFFLINE': '1', 'TRANSFORMERS_OFFLINE': '1'}
    with served_process(
        cmd + ['--host', '127.0.0.1', '--port', str(port), '--max-sessions', '8'],
        f'{url}/health',
        120,
        env=env,
    ) as p:
        yield url, p


def play_client(url, seed):
    with SpindleFlowClient(base_url=url).sync() as c:
        r = c.reset(seed=seed)
        obs_l, rew = [r.observation.vector], []
        for a in PLANS[seed]:
            r = c.step(SpindleFlowAction(**{k: list(v) if isinstance(v, tuple) else v for k, v in a.items()}))
            obs_l.append(r.observation.vector)
            rew.append(r.reward)
            if r.done:
                break
        return rew, obs_l, c.state(), r.observation


def test_console_script_help():
    exe = shutil.which('spindleflow-serve')
    assert exe, 'spindleflow-serve is not installed: pip install -e ".[openenv]"'
    out = subprocess.run([exe, '--help'], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and '--port' in out.stdout and '--host' in out.stdout


@pytest.mark.parametrize('seed', sorted(PLANS))
def test_episode_through_client_equals_in_process(server, seed):
    url, _ = server
    rew, obs_l, state, last = play_client(url, seed)
    ref_rew, ref_obs, ref_ret, task_id = in_process(seed)
    assert rew == ref_rew  # exactly: the same seed and actions give the same episode
    assert len(obs_l) == len(ref_obs)
    for a, b in zip(obs_l, ref_obs):
        np.testing.assert_array_equal(np.asarray(a, np.float32), b)
    assert (
        state.task_id == task_id and state.done and state.episode_return == pytest.approx(ref_ret, abs=1e-12)
    )
    assert last.done and last.summary['return'] == pytest.approx(ref_ret, abs=1e-12)
    assert sum(last.reward_terms.values()) == pytest.approx(rew[-1], abs=1e-9)


def test_openenv_validate_cli(server):
    url, _ = server
    exe = shutil.which('openenv')
    assert exe, 'the openenv CLI (openenv-core) is not installed: pip install -e ".[openenv]"'
    r = subprocess.run([exe, 'validate', '--url', url], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    rep = json.loads(r.stdout)
    assert rep['passed'] is True and rep['mode'] == 'simulation'
    assert (
        rep['summary']['failed_criteria'] == []
        and rep['summary']['passed_count'] == rep['summary']['total_count'] == 6
    )


def test_verify_openenv_compliance(server):
    url, _ = server
    assert verify_openenv_compliance(url) is True
    rep = compliance_report(url)
    ids = [c['id'] for c in rep['criteria'] if c['passed']]
    assert 'spindleflow_ws_episode' in ids and rep['openenv_passed'] is True and rep['failures'] == []


def test_verify_openenv_compliance_fails_without_server(capsys):
    assert verify_openenv_compliance(f'http://127.0.0.1:{free_port()}', timeout_s=1) is False
    err = capsys.readouterr().err
    assert 'FAIL health_endpoint' in err and 'FAIL spindleflow_ws_episode' in err


def test_concurrent_sessions_isolated(server):
    url, _ = server
    # interleaved: two sessions step in turn, each must follow its own seed's episode
    a, b = SpindleFlowClient(base_url=url).sync(), SpindleFlowClient(base_url=url).sync()
    with a, b:
        ra, rb = a.reset(seed=3), b.reset(seed=7)
        ref3, ref7 = in_process(3), in_process(7)
        assert ra.observation.task_id == ref3[3] and rb.observation.task_id == ref7[3]
        got3, got7 = [], []
        for x, y in zip(PLANS[3], PLANS[7]):
            got3.append(
                a.step(
                    SpindleFlowAction(**{k: list(v) if isinstance(v, tuple) else v for k, v in x.items()})
                ).reward
            )
            got7.append(
                b.step(
                    SpindleFlowAction(**{k: list(v) if isinstance(v, tuple) else v for k, v in y.items()})
                ).reward
            )
        assert got3 == ref3[0] and got7 == ref7[0]
        assert a.state().task_id == ref3[3] and b.state().task_id == ref7[3]
        assert a.state().episode_id != b.state().episode_id
    # truly at the same time: three sessions in threads
    with ThreadPoolExecutor(3) as ex:
        res = dict(zip(sorted(PLANS), ex.map(lambda s: play_client(url, s)[0], sorted(PLANS))))
    for s in PLANS:
        assert res[s] == in_process(s)[0]


def test_malformed_actions_get_clear_errors_and_server_stays_up(server):
    url, proc = server
    # HTTP: a wrongly typed action -> 422 naming the field
    r = requests.post(f'{url}/step', json={'action': {'vector': 'not a list'}}, timeout=30)
    assert r.status_code == 422 and 'vector' in r.text
    r = requests.post(f'{url}/step', json={'action': {'mode': 'shout'}}, timeout=30)
    assert r.status_code == 422 and 'mode' in r.text
    # HTTP /step is stateless: a clear 409 telling where episodes are played
    r = requests.post(f'{url}/step', json={'action': {'stop': True}}, timeout=30)
    assert r.status_code == 409 and 'WebSocket' in r.json()['detail']
    # WebSocket: wrong length and a slot outside the roster -> errors with the reason; the session goes on
    with SpindleFlowClient(base_url=url).sync() as c:
        c.reset(seed=3)
        with pytest.raises(RuntimeError, match='must have 12 numbers'):
            c.step(SpindleFlowAction(vector=[0.0] * 5))
        with pytest.raises(RuntimeError, match='outside the roster'):
            c.step(SpindleFlowAction(slots=[9]))
        with pytest.raises(RuntimeError, match='unknown specialist'):
            c.reset(seed=3, roster=['no_such_specialist'])
        c.reset(seed=3)
        rew = [
            c.step(
                SpindleFlowAction(**{k: list(v) if isinstance(v, tuple) else v for k, v in a.items()})
            ).reward
            for a in PLANS[3]
        ]
        assert rew == in_process(3)[0]
    assert proc.poll() is None and requests.get(f'{url}/health', timeout=30).json()['status'] == 'healthy'


def test_manifest_and_dockerfile_agree():
    "openenv.yaml names an importable app factory and the port the Dockerfile serves on."
    import importlib, yaml
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    m = yaml.safe_load((root / 'openenv.yaml').read_text())
    assert m['spec_version'] == 1 and m['runtime'] == 'fastapi' and m['name'] == 'spindleflow'
    mod, attr = m['app'].split(':')
    assert callable(getattr(importlib.import_module(mod), attr))
    d = (root / 'Dockerfile').read_text()
    assert (
        f"PORT={m['port']}" in d
        and 'spindleflow-serve --host 0.0.0.0 --port ${PORT}' in d
        and '".[openenv]"' in d
    )
