"""The OpenEnv server never answers 500 to a client's mistake. Against `spindleflow-serve` in a subprocess (one for the
module), with real HTTP and WebSocket clients: a table of bad inputs for every field of every route, over HTTP (4xx,
the message names the field) and over the WebSocket (an error message naming the field, and the session goes on);
the request-size limit (413 before the body is read: six 60 MB bodies at once leave memory flat); capacity (of 50
simultaneous clients every refused one is told "server at capacity"); and the command line (a bad port or host, a
port in use: a one-line error, exit 2 or 1, no traceback). The server is checked healthy after every case."""

import json, os, shutil, subprocess, sys, threading, time
import numpy as np
from concurrent.futures import ThreadPoolExecutor
import pytest
import requests
from websockets.sync.client import connect
from conftest import served_process

from spindleflow_rl.commands.openenv import (
    SpindleFlowAction,
    SpindleFlowClient,
    free_port,
    largest_valid_request,
    MAX_REQUEST_BYTES,
)
from spindleflow_rl.envs.env import SpindleFlowEnv, default_world

MAX_SESSIONS = 4
ENV = {**os.environ, 'HF_HUB_OFFLINE': '1', 'TRANSFORMERS_OFFLINE': '1'}


def serve_cmd():
    exe = shutil.which('spindleflow-serve')
    return (
        [exe]
        if exe
        else [
            sys.executable,
            '-c',
            'import sys; from spindleflow_rl.cli import serve_main; sys.exit(serve_main())',
        ]
    )


@pytest.fixture(scope='module')
def server():
    port = free_port()
    url = f'http://127.0.0.1:{port}'
    with served_process(
        serve_cmd() + ['--port', str(port), '--max-sessions', str(MAX_SESSIONS)],
        f'{url}/health',
        120,
        env=ENV,
    ) as p:
        yield url, p


def assert_healthy(url, proc):
    assert proc.poll() is None, 'the server process died'
    assert requests.get(f'{url}/health', timeout=30).json()['status'] == 'healthy'


def wait_sessions_closed(url, timeout_s=30):
    "The server frees a session when it sees the client go: wait for that before counting capacity."
    t0 = time.time()
    while (
        requests.get(f'{url}/capacity', timeout=30).json()['active_sessions'] and time.time() - t0 < timeout_s
    ):
        time.sleep(0.1)
    assert requests.get(f'{url}/capacity', timeout=30).json()['active_sessions'] == 0


def rss_mb(pid):
    for line in open(f'/proc/{pid}/status'):
        if line.startswith('VmRSS'):
            return int(line.split()[1]) / 1024


V = lambda first: (
    '[' + ', '.join([first] + ['0'] * 11) + ']'
)  # a 12-number vector (M=6) starting with `first`
JSON = 'application/json'
VEC = lambda first, more='': '{"action": {"vector": ' + V(first) + more + '}}'  # a /step body with a vector
# (case, body, status, text the message must hold: the field and what it takes[, content type when not JSON]); the
# route is the case's first word
ROWS = [
    ('reset tier 9', '{"tier": 9}', 422, 'tier: Input should be less than or equal to 3'),
    ('reset tier -1', '{"tier": -1}', 422, 'tier: Input should be greater than or equal to 0'),
    ('reset tier "x"', '{"tier": "x"}', 422, 'tier: Input should be a valid integer'),
    ('reset tier 1.5', '{"tier": 1.5}', 422, 'tier: Input should be a valid integer'),
    ('reset tier true', '{"tier": true}', 422, 'tier: Input should be a valid integer, got true'),
    ('reset tier [1]', '{"tier": [1]}', 422, 'tier: Input should be a valid integer'),
    ('reset tier 1e300', '{"tier": 1e300}', 422, 'tier: '),
    ('reset seed NaN', '{"seed": NaN}', 422, 'seed: Input should be a valid integer, got NaN'),
    ('reset seed Infinity', '{"seed": Infinity}', 422, 'seed: '),
    ('reset seed -1', '{"seed": -1}', 422, 'seed: Input should be greater than or equal to 0'),
    (
        'reset seed 2**70',
        f'{{"seed": {2**70}}}',
        422,
        'seed: Input should be less than or equal to 18446744073709551615',
    ),
    ('reset seed 5000 digits', '{"seed": ' + '9' * 5000 + '}', 400, 'could not be parsed'),
    ('reset seed "1"', '{"seed": "1"}', 422, 'seed: Input should be a valid integer'),
    ('reset seed true', '{"seed": true}', 422, 'seed: Input should be a valid integer'),
    ('reset task 5', '{"task": 5}', 422, 'task: Input should be a valid string'),
    ('reset task {}', '{"task": {}}', 422, 'task: Input should be a valid string'),
    ('reset task ""', '{"task": ""}', 422, 'task: String should have at least 1 character'),
    (
        'reset task unknown',
        '{"task": "p1-frontend-1"}',
        422,
        'task: unknown task id "p1-frontend-1" (339 known; closest: p1-frontend-',
    ),
    ('reset task unicode', '{"task": "\u00e9\u4e2d\U0001f600"}', 422, 'task: unknown task id'),
    ('reset task NUL', '{"task": "a\\u0000b"}', 422, 'task: unknown task id'),
    ('reset task lone surrogate', '{"task": "\\ud800"}', 422, 'task: '),
    (
        'reset task 200 chars',
        '{"task": "' + 'x' * 200 + '"}',
        422,
        'task: String should have at most 128 characters',
    ),
    ('reset roster nested', '{"roster": [["a"]]}', 422, 'roster[0]: Input should be a valid string'),
    ('reset roster string', '{"roster": "abc"}', 422, 'roster: Input should be a valid list'),
    ('reset roster ints', '{"roster": [1, 2]}', 422, 'roster[1]: Input should be a valid string'),
    ('reset roster object', '{"roster": {"a": 1}}', 422, 'roster: Input should be a valid list'),
    (
        'reset roster unknown id',
        '{"roster": ["copywritter"]}',
        422,
        'roster[0]: unknown specialist id "copywritter" (46 known; closest: copywriter)',
    ),
    (
        'reset roster 7 slots',
        '{"roster": [null, null, null, null, null, null, null]}',
        422,
        'roster: 7 entries, at most max_specialists=6',
    ),
    (
        'reset episode_id 300',
        '{"episode_id": "' + 'e' * 300 + '"}',
        422,
        'episode_id: String should have at most 255 characters',
    ),
    ('reset episode_id 5', '{"episode_id": 5}', 422, 'episode_id: Input should be a valid string'),
    (
        'reset unknown field',
        '{"teir": 1}',
        422,
        'teir: unknown field; SpindleFlowResetRequest takes seed, episode_id, task, roster, tier',
    ),
    ('reset body list', '[1, 2]', 422, 'the body must be a JSON object with the fields seed, episode_id'),
    ('reset body number', '5', 422, 'the body must be a JSON object'),
    ('reset body string', '"x"', 422, 'the body must be a JSON object'),
    ('reset body null', 'null', 422, 'the body must be a JSON object'),
    ('reset invalid JSON', '{"seed": ', 422, 'the body is not valid JSON'),
    ('reset text/plain', '{"seed": 1}', 422, 'Content-Type: application/json', 'text/plain'),
    ('reset form', 'seed=1', 422, 'Content-Type: application/json', 'application/x-www-form-urlencoded'),
    (
        'reset deep nesting',
        '{"task": ' + '[' * 20000 + ']' * 20000 + '}',
        400,
        'could not be parsed (RecursionError',
    ),
    ('reset not UTF-8', b'{"task": "\xff\xfe"}', 400, 'could not be parsed'),
    (
        'step both forms',
        VEC('0', ', "slots": [0]'),
        422,
        'action: give either `vector` or `stop`/`slots`/`mode`/`params`, not both',
    ),
    ('step vector and mode', VEC('0', ', "mode": "debate"'), 422, 'not both (got `vector` and `mode`)'),
    ('step vector NaN', VEC('NaN'), 422, 'action.vector[0]: Input should be a finite number, got NaN'),
    ('step vector Infinity', VEC('Infinity'), 422, 'action.vector[0]: Input should be a finite number'),
    ('step vector 1e400', VEC('1e400'), 422, 'action.vector[0]: Input should be a finite number'),
    ('step vector strings', VEC('"a"'), 422, 'action.vector[0]: Input should be a valid number'),
    ('step vector booleans', VEC('true'), 422, 'action.vector[0]: Input should be a valid number, got true'),
    (
        'step vector empty',
        '{"action": {"vector": []}}',
        422,
        'vector: the action vector must have 12 numbers',
    ),
    (
        'step vector 13',
        '{"action": {"vector": ' + V('0')[:-1] + ', 0]}}',
        422,
        'must have 12 numbers (M+6 for a roster of M=6), got 13',
    ),
    (
        'step vector nested',
        '{"action": {"vector": [[0]]}}',
        422,
        'action.vector[0]: Input should be a valid number',
    ),
    ('step vector 1e300', VEC('1e300'), 409, 'send reset first'),
    (
        'step params NaN',
        '{"action": {"slots": [0], "params": [NaN, 0, 0, 0]}}',
        422,
        'action.params[0]: Input should be a finite number',
    ),
    (
        'step params -inf',
        '{"action": {"slots": [0], "params": [0, -Infinity, 0, 0]}}',
        422,
        'action.params[1]: Input should be a finite number',
    ),
    (
        'step params 5',
        '{"action": {"slots": [0], "params": [5, 0, 0, 0]}}',
        422,
        'action.params[0]: Input should be less than or equal to 1',
    ),
    (
        'step params 3 items',
        '{"action": {"params": [0, 0, 0]}}',
        422,
        'action.params: List should have at least 4 items',
    ),
    (
        'step slots -1',
        '{"action": {"slots": [-1]}}',
        422,
        'action.slots[0]: Input should be greater than or equal to 0',
    ),
    ('step slots 99', '{"action": {"slots": [99]}}', 422, 'slots: [99] are outside the roster: use 0..5'),
    ('step slots 2**70', f'{{"action": {{"slots": [{2**70}]}}}}', 422, 'are outside the roster'),
    (
        'step slots "a"',
        '{"action": {"slots": ["a"]}}',
        422,
        'action.slots[0]: Input should be a valid integer',
    ),
    (
        'step slots 1.5',
        '{"action": {"slots": [1.5]}}',
        422,
        'action.slots[0]: Input should be a valid integer',
    ),
    (
        'step slots true',
        '{"action": {"slots": [true]}}',
        422,
        'action.slots[0]: Input should be a valid integer, got true',
    ),
    ('step slots twice', '{"action": {"slots": [0, 0]}}', 422, '`slots` lists [0] more than once'),
    (
        'step stop with slots',
        '{"action": {"stop": true, "slots": [1]}}',
        422,
        '`stop: true` ends the episode',
    ),
    (
        'step mode 5',
        '{"action": {"mode": 5}}',
        422,
        "action.mode: Input should be 'sequential', 'parallel' or 'debate'",
    ),
    ('step stop "yes"', '{"action": {"stop": "yes"}}', 422, 'action.stop: Input should be a valid boolean'),
    ('step stop 1', '{"action": {"stop": 1}}', 422, 'action.stop: Input should be a valid boolean'),
    (
        'step action unknown field',
        '{"action": {"stop": true, "colour": 1}}',
        422,
        'action.colour: unknown field; SpindleFlowAction takes',
    ),
    ('step MCP action type', '{"action": {"type": "list_tools"}}', 422, 'action.type: unknown field'),
    ('step action missing', '{}', 422, 'action: required'),
    ('step action "x"', '{"action": "x"}', 422, 'action: Input should be a valid dictionary'),
    ('step action null', '{"action": null}', 422, 'action: '),
    (
        'step timeout NaN',
        '{"action": {"stop": true}, "timeout_s": NaN}',
        422,
        'timeout_s: Input should be a finite number',
    ),
    (
        'step timeout -1',
        '{"action": {"stop": true}, "timeout_s": -1}',
        422,
        'timeout_s: Input should be greater than 0',
    ),
    (
        'step request_id 300',
        '{"action": {"stop": true}, "request_id": "' + 'r' * 300 + '"}',
        422,
        'request_id: String should have at most 255',
    ),
    (
        'step unknown field',
        '{"action": {"stop": true}, "colour": 1}',
        422,
        'colour: unknown field; SpindleFlowStepRequest takes action',
    ),
    ('step invalid JSON', '{', 422, 'the body is not valid JSON'),
    ('step empty body', '', 422, 'the body must be a JSON object with the fields action'),
    ('step valid but stateless', '{"action": {"stop": true}}', 409, 'play episodes over the WebSocket'),
]
HTTP_CASES = [(r[0], '/' + r[0].split()[0], r[1], r[4] if len(r) > 4 else JSON, r[2], r[3]) for r in ROWS]


@pytest.mark.parametrize('case,path,body,ctype,status,text', HTTP_CASES, ids=[c[0] for c in HTTP_CASES])
def test_http_bad_input_gets_4xx_naming_the_field(server, case, path, body, ctype, status, text):
    url, proc = server
    r = requests.post(
        url + path,
        data=body if isinstance(body, bytes) else body.encode(),
        headers={'content-type': ctype},
        timeout=30,
    )
    assert r.status_code == status, r.text[:500]
    detail = r.json()['detail']
    assert isinstance(detail, str) and text in detail, detail
    if status == 422:
        assert r.json()['errors'] and all({'field', 'message', 'type'} <= set(e) for e in r.json()['errors'])
    assert_healthy(url, proc)


def test_other_routes_answer_without_500(server):
    url, proc = server
    got = {
        (m, p): requests.request(m, url + p, timeout=30).status_code
        for m, p in [
            ('GET', '/state'),
            ('GET', '/state?x=1'),
            ('POST', '/state'),
            ('GET', '/reset'),
            ('GET', '/metadata'),
            ('GET', '/schema'),
            ('GET', '/capacity'),
            ('GET', '/nope'),
            ('DELETE', '/step'),
        ]
    }
    assert got == {
        ('GET', '/state'): 200,
        ('GET', '/state?x=1'): 200,
        ('POST', '/state'): 405,
        ('GET', '/reset'): 405,
        ('GET', '/metadata'): 200,
        ('GET', '/schema'): 200,
        ('GET', '/capacity'): 200,
        ('GET', '/nope'): 404,
        ('DELETE', '/step'): 405,
    }
    schema = requests.get(f'{url}/schema', timeout=30).json()['action']['properties']
    assert {'vector', 'stop', 'slots', 'mode', 'params'} <= set(schema)
    assert_healthy(url, proc)


def test_mcp_answers_json_rpc_and_holds_no_sessions(server):
    "OpenEnv's /mcp `openenv/session/create` kept sessions forever and counted them against the WebSocket capacity."
    url, proc = server
    wait_sessions_closed(url)
    for body in ['{}', '{', '[1]', '{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": []}'] + [
        '{"jsonrpc": "2.0", "id": 7, "method": "openenv/session/create", "params": {}}'
    ] * (MAX_SESSIONS + 2):
        r = requests.post(f'{url}/mcp', data=body, headers={'content-type': JSON}, timeout=30)
        assert (
            r.status_code == 200
            and r.json()['jsonrpc'] == '2.0'
            and r.json()['error']['code'] in (-32700, -32600, -32601)
        )
    assert r.json()['id'] == 7 and 'no MCP tools' in r.json()['error']['message']
    assert requests.get(f'{url}/capacity', timeout=30).json()['active_sessions'] == 0
    with SpindleFlowClient(base_url=url).sync() as c:
        assert c.reset(seed=1).observation.task_id  # still a free session
    with connect(url.replace('http', 'ws') + '/mcp') as ws:
        ws.send('{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}')
        assert json.loads(ws.recv(timeout=30))['error']['code'] == -32601
        ws.send('not json')
        assert json.loads(ws.recv(timeout=30))['error']['code'] == -32700
    assert_healthy(url, proc)


STEP = lambda data: json.dumps({'type': 'step', 'data': data})
RESET = lambda data: json.dumps({'type': 'reset', 'data': data})
# (case, message sent after a good reset, error code, text the message must hold)
WS_CASES = [
    (
        'step vector NaN',
        '{"type": "step", "data": {"vector": ' + V('NaN') + '}}',
        'VALIDATION_ERROR',
        'data.vector[0]: Input should be a finite number, got NaN',
    ),
    (
        'step vector Infinity',
        '{"type": "step", "data": {"vector": ' + V('Infinity') + '}}',
        'VALIDATION_ERROR',
        'data.vector[0]: Input should be a finite number',
    ),
    (
        'step params inf',
        '{"type": "step", "data": {"slots": [0], "params": [Infinity, 0, 0, 0]}}',
        'VALIDATION_ERROR',
        'data.params[0]: Input should be a finite number',
    ),
    ('step both forms', STEP({'vector': [0.0] * 12, 'slots': [0]}), 'VALIDATION_ERROR', 'not both'),
    ('step vector short', STEP({'vector': [0.0] * 5}), 'VALIDATION_ERROR', 'must have 12 numbers'),
    (
        'step vector booleans',
        STEP({'vector': [True] * 12}),
        'VALIDATION_ERROR',
        'data.vector[0]: Input should be a valid number',
    ),
    ('step slots 99', STEP({'slots': [99]}), 'VALIDATION_ERROR', 'outside the roster: use 0..5'),
    (
        'step slots "a"',
        STEP({'slots': ['a']}),
        'VALIDATION_ERROR',
        'data.slots[0]: Input should be a valid integer',
    ),
    ('step slots twice', STEP({'slots': [1, 1]}), 'VALIDATION_ERROR', 'more than once'),
    ('step mode "x"', STEP({'mode': 'x'}), 'VALIDATION_ERROR', "data.mode: Input should be 'sequential'"),
    (
        'step stop "yes"',
        STEP({'stop': 'yes'}),
        'VALIDATION_ERROR',
        'data.stop: Input should be a valid boolean',
    ),
    (
        'step unknown field',
        STEP({'stop': False, 'colour': 1}),
        'VALIDATION_ERROR',
        'data.colour: unknown field',
    ),
    ('step data missing', '{"type": "step"}', 'VALIDATION_ERROR', 'data: required'),
    ('step data list', '{"type": "step", "data": [1]}', 'VALIDATION_ERROR', 'data: must be a JSON object'),
    (
        'reset tier 9',
        RESET({'tier': 9}),
        'VALIDATION_ERROR',
        'data.tier: Input should be less than or equal to 3',
    ),
    (
        'reset tier "x"',
        RESET({'tier': 'x'}),
        'VALIDATION_ERROR',
        'data.tier: Input should be a valid integer',
    ),
    (
        'reset seed NaN',
        '{"type": "reset", "data": {"seed": NaN}}',
        'VALIDATION_ERROR',
        'data.seed: Input should be a valid integer',
    ),
    (
        'reset seed -1',
        RESET({'seed': -1}),
        'VALIDATION_ERROR',
        'data.seed: Input should be greater than or equal to 0',
    ),
    ('reset task 5', RESET({'task': 5}), 'VALIDATION_ERROR', 'data.task: Input should be a valid string'),
    ('reset task unknown', RESET({'task': 'nope'}), 'VALIDATION_ERROR', 'task: unknown task id'),
    (
        'reset roster nested',
        RESET({'roster': [['a']]}),
        'VALIDATION_ERROR',
        'data.roster[0]: Input should be a valid string',
    ),
    (
        'reset roster unknown',
        RESET({'roster': ['nobody']}),
        'VALIDATION_ERROR',
        'roster[0]: unknown specialist id',
    ),
    ('reset unknown field', RESET({'teir': 1}), 'VALIDATION_ERROR', 'data.teir: unknown field'),
    ('reset data "x"', '{"type": "reset", "data": "x"}', 'VALIDATION_ERROR', 'data: must be a JSON object'),
    (
        'unknown type',
        '{"type": "dance"}',
        'UNKNOWN_TYPE',
        'type: "dance" is not a message type; use reset, step, state, close',
    ),
    ('type missing', '{"data": {}}', 'UNKNOWN_TYPE', 'is not a message type'),
    ('MCP type', '{"type": "mcp", "data": {}}', 'UNKNOWN_TYPE', 'is not a message type'),
    ('extra envelope field', '{"type": "state", "x": 1}', 'VALIDATION_ERROR', 'x: unknown field'),
    ('list message', '[1, 2]', 'VALIDATION_ERROR', 'a message is a JSON object'),
    ('number message', '5', 'VALIDATION_ERROR', 'a message is a JSON object'),
    ('null message', 'null', 'VALIDATION_ERROR', 'a message is a JSON object'),
    ('invalid JSON', '{"type": ', 'INVALID_JSON', 'not valid JSON'),
    ('deep nesting', '[' * 20000 + ']' * 20000, 'INVALID_JSON', 'not valid JSON (maximum recursion depth'),
    ('binary frame', b'\x00\x01', 'INVALID_JSON', 'not binary'),
    (
        'message over the limit',
        STEP({'stop': False, 'metadata': {'x': 'x' * (MAX_REQUEST_BYTES + 1)}}),
        'MESSAGE_TOO_BIG',
        f'the limit is {MAX_REQUEST_BYTES} bytes',
    ),
]


@pytest.mark.parametrize('case,message,code,text', WS_CASES, ids=[c[0] for c in WS_CASES])
def test_websocket_bad_message_gets_error_and_session_goes_on(server, case, message, code, text):
    url, proc = server
    with connect(url.replace('http', 'ws') + '/ws', open_timeout=30, max_size=None) as ws:
        ws.send(RESET({'seed': 3}))
        first = json.loads(ws.recv(timeout=60))
        assert first['type'] == 'observation'
        ws.send(message)
        err = json.loads(ws.recv(timeout=60))
        assert err['type'] == 'error' and err['data']['code'] == code, err
        assert text in err['data']['message'], err['data']['message']
        ws.send(STEP({'slots': [0]}))
        after = json.loads(ws.recv(timeout=60))  # the same episode goes on
        assert after['type'] == 'observation' and after['data']['observation']['step'] == 1
        ws.send('{"type": "state"}')
        state = json.loads(ws.recv(timeout=60))
        assert (
            state['type'] == 'state' and state['data']['task_id'] == first['data']['observation']['task_id']
        )
    assert_healthy(url, proc)


def test_websocket_huge_finite_vector_is_clipped_as_in_process(server):
    """1e300 is finite and valid (clipped to [-1, 1], as in-process);
    cast to float32 first it became inf and a server error."""
    url, proc = server
    vec = [-1e300, 1e300, -1e300, 1e300, -1e300, -1e300, -1e300, 0.0, 1e300, -1e300, 0.5, -1e300]
    env = SpindleFlowEnv(world=default_world())
    env.reset(seed=5)
    _, ref_r, *_ = env.step(np.clip(vec, -1, 1).astype(np.float32))
    with connect(url.replace('http', 'ws') + '/ws', open_timeout=30) as ws:
        ws.send(RESET({'seed': 5}))
        json.loads(ws.recv(timeout=60))
        ws.send(STEP({'vector': vec}))
        r = json.loads(ws.recv(timeout=60))
    assert r['type'] == 'observation' and r['data']['reward'] == ref_r
    assert_healthy(url, proc)


def test_typed_client_session_survives_server_errors(server):
    url, _ = server
    with SpindleFlowClient(base_url=url).sync() as c:
        c.reset(seed=7)
        with pytest.raises(RuntimeError, match='data.tier: Input should be less than or equal to 3'):
            c.reset(seed=7, tier=9)
        with pytest.raises(RuntimeError, match='data.teir: unknown field'):
            c.reset(seed=7, teir=1)
        with pytest.raises(RuntimeError, match='outside the roster'):
            c.step(SpindleFlowAction(slots=[8]))
        r0 = c.reset(seed=7)
        assert r0.observation.step == 0 and c.state().seed == 7


def test_websocket_message_past_transport_cap_closes_with_reason(server):
    """Past 16x the limit the transport itself refuses the frame:
    the connection closes with 1009 and a reason, not silently."""
    url, proc = server
    from websockets.exceptions import ConnectionClosed

    with connect(url.replace('http', 'ws') + '/ws', open_timeout=30, max_size=None) as ws:
        ws.send(STEP({'metadata': {'x': 'x' * (16 * MAX_REQUEST_BYTES + 10)}}))
        with pytest.raises(ConnectionClosed) as e:
            ws.recv(timeout=60)
    assert e.value.rcvd.code == 1009 and 'exceeds limit' in e.value.rcvd.reason
    assert_healthy(url, proc)


def test_big_bodies_refused_before_read_and_memory_stays_flat(server):
    "The issue's case: six 60 MB bodies at once got 200 and took the server from 232 to 656 MB."
    url, proc = server
    before, peak, stop = rss_mb(proc.pid), [0.0], threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], rss_mb(proc.pid))
            time.sleep(0.01)

    sampler = threading.Thread(target=sample)
    sampler.start()
    big = b'x' * 60_000_000
    bodies = [
        ('/reset', b'{"colour": "' + big + b'"}'),
        ('/step', b'{"action": {"stop": true, "metadata": {"x": "' + big + b'"}}}'),
    ] * 3

    def chunks():  # no Content-Length: counted as it arrives
        yield b'{"colour": "'
        for _ in range(60):
            yield b'x' * 1_000_000
        yield b'"}'

    try:
        with ThreadPoolExecutor(8) as ex:
            sized = list(
                ex.map(
                    lambda pb: requests.post(
                        url + pb[0], data=pb[1], headers={'content-type': JSON}, timeout=120
                    ),
                    bodies,
                )
            )
            chunked = list(
                ex.map(
                    lambda _: requests.post(
                        f'{url}/reset', data=chunks(), headers={'content-type': JSON}, timeout=120
                    ),
                    range(2),
                )
            )
    finally:
        stop.set()
        sampler.join()
    del big
    assert [r.status_code for r in sized + chunked] == [413] * 8
    assert all(f'the limit is {MAX_REQUEST_BYTES} bytes' in r.json()['detail'] for r in sized + chunked)
    assert 'request body is 60000014 bytes' in sized[0].json()['detail']
    assert peak[0] - before < 50, (
        f'server RSS grew {peak[0] - before:.0f} MB ({before:.0f} -> {peak[0]:.0f})'
    )  # before the fix: +424 MB
    assert_healthy(url, proc)


def test_largest_valid_request_is_under_the_limit_and_parsed(server):
    "The limit refuses nothing valid: the largest valid body is parsed (its made-up ids are then named as unknown)."
    url, proc = server
    s = '\U0001f600'
    body = json.dumps(
        {'seed': 2**64 - 1, 'episode_id': s * 255, 'task': s * 128, 'roster': [s * 128] * 6, 'tier': 3}
    )
    assert len(body) == largest_valid_request(6) and len(body) < MAX_REQUEST_BYTES
    r = requests.post(f'{url}/reset', data=body, headers={'content-type': JSON}, timeout=30)
    assert r.status_code == 422 and r.json()['detail'].startswith('task: unknown task id')
    meta = json.dumps({'action': {'stop': True, 'metadata': {'note': 'x' * (MAX_REQUEST_BYTES - 100)}}})
    assert (
        requests.post(f'{url}/step', data=meta, headers={'content-type': JSON}, timeout=30).status_code == 409
    )  # read, not 413
    assert_healthy(url, proc)


def test_capacity_every_refused_client_is_told(server):
    "The issue's case: of 50 simultaneous clients, 31 were closed with no message."
    url, proc = server
    wait_sessions_closed(url)
    n = 50
    barrier, done, out = threading.Barrier(n), threading.Barrier(n), [None] * n

    def client(i):
        barrier.wait(60)
        try:
            with connect(url.replace('http', 'ws') + '/ws', open_timeout=60) as ws:
                ws.send(RESET({'seed': i}))
                r = json.loads(ws.recv(timeout=120))
                out[i] = 'session' if r['type'] == 'observation' else r['data']['message']
                done.wait(120)  # hold the session until every client has its answer
        except Exception as e:
            out[i] = f'{type(e).__name__}: {e}'

    with ThreadPoolExecutor(n) as ex:
        list(ex.map(client, range(n)))
    refused = [o for o in out if o != 'session']
    assert out.count('session') == MAX_SESSIONS, out
    assert all(o.startswith(f'server at capacity ({MAX_SESSIONS} sessions)') for o in refused), set(refused)
    wait_sessions_closed(url)
    with SpindleFlowClient(base_url=url).sync() as c:
        assert c.reset(seed=1).observation.task_id  # capacity is back
    assert_healthy(url, proc)


def test_capacity_typed_client_gets_message_or_close_reason(server):
    url, proc = server
    wait_sessions_closed(url)
    held = [SpindleFlowClient(base_url=url).sync() for _ in range(MAX_SESSIONS)]
    try:
        for c in held:
            c.connect()
            c.reset(seed=1)
        with SpindleFlowClient(base_url=url).sync() as extra:  # asks at once: reads the error message
            with pytest.raises(
                RuntimeError, match=rf'server at capacity \({MAX_SESSIONS} sessions\).*CAPACITY_REACHED'
            ):
                extra.reset(seed=1)
        with SpindleFlowClient(
            base_url=url
        ).sync() as late:  # asks after the server gave up waiting: the close reason
            time.sleep(6)
            with pytest.raises(
                ConnectionError, match=rf'1013: server at capacity \({MAX_SESSIONS} sessions\); retry later'
            ):
                late.reset(seed=1)
    finally:
        for c in held:
            c.close()
    assert_healthy(url, proc)


def test_cli_bad_port_or_port_in_use_exit_cleanly(server):
    "The real command (two runs at once: each start imports openenv-core, which imports gradio, for ~10 s)."
    url, _ = server
    busy = int(url.rsplit(':', 1)[1])
    runs = [
        (['--port', '99999'], 2, 'argument --port: must be 0-65535 (0: any free port), got 99999'),
        (
            ['--port', str(busy)],
            1,
            f'cannot listen on 127.0.0.1:{busy}: Address already in use; another process listens there',
        ),
    ]
    with ThreadPoolExecutor(len(runs)) as ex:
        res = list(
            ex.map(
                lambda r: subprocess.run(
                    serve_cmd() + r[0], capture_output=True, text=True, timeout=300, env=ENV
                ),
                runs,
            )
        )
    for (args, rc, text), p in zip(runs, res):
        assert p.returncode == rc and text in p.stderr and 'Traceback' not in p.stderr + p.stdout, (
            args,
            p.returncode,
            p.stderr[-2000:],
        )


@pytest.mark.parametrize(
    'args,rc,text',
    [
        (['--port', 'x'], 2, "argument --port: expected a whole number, got 'x'"),
        (['--port', '-1'], 2, 'must be 0-65535'),
        (
            ['--host', 'no-such-host.invalid', '--port', '0'],
            2,
            "--host 'no-such-host.invalid' does not resolve",
        ),
        (['--host', '192.0.2.1', '--port', '0'], 2, '--host 192.0.2.1 is not an address of this machine'),
        (['--max-sessions', '0', '--port', '0'], 2, 'argument --max-sessions: must be >= 1, got 0'),
        (
            ['--max-request-bytes', '100', '--port', '0'],
            2,
            'max_request_bytes=100 is below the largest valid request',
        ),
    ],
)
def test_cli_usage_errors(capsys, args, rc, text):
    "The same `main` in-process (the real command is above): a one-line error and the exit status, no traceback."
    from spindleflow_rl.cli import serve_main as main

    try:
        got = main(args)
    except SystemExit as e:
        got = e.code  # argparse's own usage errors
    err = capsys.readouterr().err
    assert got == rc and text in err and 'Traceback' not in err, err
