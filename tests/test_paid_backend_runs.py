"""Runs on the paid backend (issue 20, item 2), against real loopback OpenAI-compatible servers (`spindleflow_rl.llms.testing`)
with the real `openai` client: a run's config records its server (base URL, never the key) and evaluation uses it or
refuses, never the default endpoint; calls that fail beyond a threshold make training or evaluation fail (exit 1),
never a comparison; the README's 64-timestep smoke run trains what it was asked and ends with an evaluation sized to
it (the policy and at most two deployable baselines, one split) inside a default budget printed before it starts,
also promptly when the server misbehaves. The default endpoint is made unreachable in every case (HTTPS_PROXY to a
closed port), so a case that falls back to it fails fast instead of calling the public API. See `cli_harness`."""

import itertools, json, re, shutil
from pathlib import Path
import pytest, yaml
from spindleflow_rl.llms.testing import ScriptedOpenAIServer, ScriptedReply
from cli_harness import Case, Ctx, run_case, run_inproc, TINY

KEY = 'sk-test-SECRET-paid-2020'
DEAD = 'http://127.0.0.1:9'  # nothing listens on the discard port: the "public API" fails at once
ENV = {
    'OPENAI_API_KEY': KEY,
    'HTTPS_PROXY': DEAD,
    'HTTP_PROXY': DEAD,
    'https_proxy': DEAD,
    'http_proxy': DEAD,
    'NO_PROXY': '127.0.0.1,localhost',
    'no_proxy': '127.0.0.1,localhost',
}
QUICK = {'cache': False, 'max_retries': 1, 'backoff_base_s': 0.05, 'backoff_max_s': 0.2, 'timeout_s': 5}


def paid_config(path: Path) -> Path:
    "The tiny config with quick retries and no reply cache (every evaluation asks its server afresh)."
    d = yaml.safe_load(TINY)
    d['openai'] = dict(QUICK)
    path.write_text(yaml.safe_dump(d, sort_keys=False))
    return path


EVAL = [
    '--checkpoint',
    '{paid}',
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
TRAIN = [
    '--config',
    '{pcfg}',
    '--backend',
    'openai',
    '--tier',
    '2',
    '--phase',
    '1',
    '--timesteps',
    '64',
    '--eval-episodes',
    '0',
    '--no-progress',
    '--out',
    '{tmp}/runs',
    '--run-name',
    'x',
]


def count(srv_key):
    "setup: remember how many requests the server has had."

    def setup(ctx):
        ctx[f'_{srv_key}0'] = ctx[srv_key].n_requests

    return setup


def used_own_server(ctx, res):
    "Evaluated on the run's own server (A) -- or refused, naming the base URL."
    if res.rc == 2:
        assert any(n in res.text for n in ('--base-url', 'base_url', 'base URL')), (
            'refused without naming the base URL'
        )
        return
    assert ctx['A'].n_requests > ctx['_A0'], (
        "the evaluation never asked the run's own server (it called another endpoint)"
    )


def other_server_untouched(ctx, res):
    assert ctx['B'].n_requests == 0, (
        f"{ctx['B'].n_requests} requests went to $OPENAI_BASE_URL, not to the run's recorded server"
    )
    used_own_server(ctx, res)


def no_comparison(path):
    def check(ctx, res):
        p = ctx.path(path)
        if p.exists():
            rep = json.loads(p.read_text())
            assert rep.get('failed') or not rep.get('vs_best_baseline'), (
                'a comparison was reported although the calls failed'
            )

    return check


def records_base_url(ctx, res):
    run = ctx.path('{paid}')
    cfg = (run / 'config.json').read_text()
    assert ctx['A'].base_url in cfg or ctx['A'].base_url.removesuffix('/v1') in cfg, (
        "config.json does not record the run's base URL"
    )
    for f in run.rglob('*'):
        if f.is_file():
            assert KEY.encode() not in f.read_bytes(), f'the API key is in {f}'


def sized_evaluation(ctx, res):
    """The smoke run: trained what was asked, one split, the policy
    and at most two baselines, a budget printed first and kept."""
    run = ctx.path('{tmp}/runs/smoke')
    summ = json.loads((run / 'train_summary.json').read_text())
    assert summ['num_timesteps'] <= 128, f"--timesteps 64 trained {summ['num_timesteps']} timesteps"
    rep = json.loads((run / 'eval.json').read_text())
    assert len(rep['splits']) == 1, f"evaluated {len(rep['splits'])} splits {sorted(rep['splits'])}, want one"
    tab = next(iter(rep['splits'].values()))
    assert 'policy' in tab and len(tab) <= 3, (
        f"evaluated {len(tab)} policies {sorted(tab)}: want the policy and at most two baselines"
    )
    head = res.out.split('evaluating on')[0]
    lines = [l for l in head.splitlines() if '$' in l and re.search(r'budget|limit|max-cost', l, re.I)]
    assert lines and 'no --max-cost-usd limit' not in head, (
        'no default budget printed before the evaluation started'
    )
    budget = max(float(x) for l in lines for x in re.findall(r'\$([0-9]+(?:\.[0-9]+)?)', l))
    assert rep['eval_cost_usd'] <= budget, (
        f"the evaluation spent ${rep['eval_cost_usd']:.4f}, over the ${budget:.4f} printed"
    )


def smoke_env(ctx, srv):
    """The README's environment: key and server in environment
    variables; a private cache seeded with the warm embeddings."""
    import os

    cache = ctx.tmp / 'cache'
    warm = Path(os.environ.get('SPINDLEFLOW_CACHE', Path.home() / '.cache' / 'spindleflow_rl')) / 'embeddings'
    if warm.exists() and not (cache / 'embeddings').exists():
        shutil.copytree(warm, cache / 'embeddings')
    ctx['cache'] = str(cache)
    ctx['url'] = ctx[srv].base_url


SMOKE = [
    '--backend',
    'openai',
    '--tier',
    '2',
    '--phase',
    '1',
    '--timesteps',
    '64',
    '--no-progress',
    '--out',
    '{tmp}/runs',
    '--run-name',
    'smoke',
]
SMOKE_ENV = {**ENV, 'OPENAI_BASE_URL': '{url}', 'SPINDLEFLOW_CACHE': '{cache}'}

FIRED = {'500': 0, '429': 0, 'slow': 0}  # the faults server F served, counted for the case's check


def faulty(srv):
    """Every 10th request a 500, of the rest every 10th a 429 (Retry-After 1 s), of the rest every 10th 1.5 s late: each
    kind fires a few times in the smoke run (a 500 costs the client's default 1 s backoff: every 4th made the case wait
    ~100 s)."""

    def every(k, kind):
        c = itertools.count()

        def match(body):
            hit = next(c) % 10 == k
            if hit:
                FIRED[kind] += 1
            return hit

        return match

    srv.script(ScriptedReply(status=500), match=every(9, '500'), times=None)
    srv.script(ScriptedReply(status=429, retry_after=1), match=every(8, '429'), times=None)
    srv.script(ScriptedReply(delay_s=1.5), match=every(7, 'slow'), times=None)
    return srv


def every_fault_served(ctx, res):
    assert all(FIRED.values()), f"the smoke run met no fault of some kind: {FIRED}"


CASES = [
    Case(
        'paid-eval-without-base-url',
        'eval',
        EVAL,
        (0, 2),
        (),
        "a run trained with --base-url, evaluated without it: use the run's recorded server, or refuse naming "
        "--base-url; "
        'never the default endpoint',
        env=ENV,
        setup=count('A'),
        check=used_own_server,
    ),
    Case(
        'paid-eval-other-env-base-url',
        'eval',
        EVAL,
        (0, 2),
        (),
        "$OPENAI_BASE_URL names another server: evaluate on the run's recorded one (or refuse); the other gets nothing",
        env={**ENV, 'OPENAI_BASE_URL': '{B_url}'},
        setup=count('A'),
        check=other_server_untouched,
    ),
    Case(
        'paid-run-records-base-url',
        'eval',
        EVAL + ['--base-url', '{A_url}'],
        0,
        (),
        "the run's config.json records its base URL (never the key); an evaluation on it works",
        env=ENV,
        check=records_base_url,
    ),
    Case(
        'paid-eval-all-calls-fail',
        'eval',
        EVAL + ['--base-url', '{C_url}'],
        1,
        ('fail',),
        'every call fails (HTTP 500): exit 1 saying the calls failed, no comparison reported',
        env=ENV,
        check=no_comparison('{tmp}/e.json'),
    ),
    Case(
        'paid-eval-judge-garbage',
        'eval',
        EVAL + ['--base-url', '{G_url}'],
        (0, 1),
        (),
        'the judge answers garbage: re-score on a lower tier or fail clearly (exit 1); no traceback',
        env=ENV,
    ),
    Case(
        'paid-train-all-calls-fail',
        'train',
        TRAIN + ['--base-url', '{C_url}'],
        1,
        ('fail',),
        'training where every call fails: exit 1 saying so (not a trained run)',
        env=ENV,
    ),
    Case(
        'paid-train-no-key',
        'train',
        TRAIN + ['--base-url', '{A_url}'],
        2,
        ('OPENAI_API_KEY',),
        'no API key: refuse before anything runs, naming OPENAI_API_KEY',
        env={**ENV, 'OPENAI_API_KEY': None},
        absent=('{tmp}/runs/x',),
    ),
    Case(
        'paid-train-base-url-malformed',
        'train',
        TRAIN + ['--base-url', 'not a url'],
        2,
        (('--base-url', 'base URL'),),
        'refuse a base URL that is not a URL, before anything runs',
        env=ENV,
        absent=('{tmp}/runs/x',),
    ),
    Case(
        'paid-train-base-url-unreachable',
        'train',
        TRAIN + ['--base-url', DEAD + '/v1'],
        1,
        ('127.0.0.1:9',),
        'a server that does not answer: exit 1 naming it, promptly',
        env=ENV,
    ),
    Case(
        'paid-train-smoke',
        'train',
        SMOKE,
        0,
        (),
        "the README's smoke run (--backend openai --tier 2 --phase 1 --timesteps 64): trains ~64 timesteps, then an "
        'evaluation sized to it (policy + at most 2 baselines, one split) inside a default budget printed first',
        proc=True,
        env=SMOKE_ENV,
        setup=lambda c: smoke_env(c, 'A'),
        check=sized_evaluation,
        timeout=180,
    ),
    Case(
        'paid-train-smoke-faults',
        'train',
        SMOKE,
        (0, 1),
        (),
        'the same smoke run against a server with faults (500s, 429 with Retry-After, slow replies): finishes '
        'promptly, '
        'exit 0 or a clear failure, no traceback',
        proc=True,
        env=SMOKE_ENV,
        setup=lambda c: smoke_env(c, 'F'),
        check=every_fault_served,
        timeout=180,
    ),
]


@pytest.fixture(scope='module')
def servers():
    with (
        ScriptedOpenAIServer(usage=(100, 50), tag='[A]') as a,
        ScriptedOpenAIServer(usage=(100, 50), tag='[B]') as b,
        ScriptedOpenAIServer(usage=(100, 50)) as c,
        ScriptedOpenAIServer(usage=(100, 50)) as g,
        ScriptedOpenAIServer(usage=(100, 50)) as f,
    ):
        c.script(ScriptedReply(status=500, message='scripted outage'), times=None)
        g.script(ScriptedReply(content='I would rather not score this.'), match='"score', times=None)
        yield {'A': a, 'B': b, 'C': c, 'G': g, 'F': faulty(f)}


@pytest.fixture(scope='module')
def base(servers, tmp_path_factory):
    "A tiny run trained on server A with --base-url (the key in the environment only)."
    root = tmp_path_factory.mktemp('paid')
    pcfg = paid_config(root / 'paid.yaml')
    res = run_inproc(
        'train',
        [
            '--config',
            str(pcfg),
            '--backend',
            'openai',
            '--tier',
            '2',
            '--phase',
            '1',
            '--timesteps',
            '64',
            '--base-url',
            servers['A'].base_url,
            '--eval-episodes',
            '0',
            '--no-progress',
            '--out',
            str(root),
            '--run-name',
            'paid',
        ],
        root,
        ENV,
    )
    assert res.rc == 0, res.text[-3000:]
    assert servers['A'].n_requests > 0
    return {
        '@paid': str(root / 'paid'),
        'pcfg': str(pcfg),
        **servers,
        **{f'{k}_url': s.base_url for k, s in servers.items()},
    }


# slow (`bash tools/test.sh --slow`; CI runs it): the faults server answers 1.5 s late on purpose, and every 500 costs
# the client's 1 s backoff (about 66 s on 2 cores)
SLOW_CASES = {'paid-train-smoke-faults'}


@pytest.mark.parametrize(
    'case', [pytest.param(c, marks=pytest.mark.slow) if c.id in SLOW_CASES else c for c in CASES], ids=str
)
def test_paid_backend_case(case, base, tmp_path):
    run_case(case, Ctx(base, tmp_path), 'test_paid_backend_runs')
