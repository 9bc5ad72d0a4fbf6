"""`spindleflow-export` end to end: the console script runs the shipped policy on a task in words and on a bank task, the
files it writes pass the workflow rules; scripted plans of every shape (sequential, parallel, debate, parallel then one,
multi-stage) are exported to files and validated; broken workflows and bad inputs are refused with clear messages."""

import copy, shutil, subprocess, sys
from pathlib import Path
import pytest
import yaml

from spindleflow_rl.commands.export import (
    validate_workflow,
    plan_to_workflow,
    episode_plan,
    write_workflow,
    export_workflow,
    AGGREGATOR_ID,
    MODERATOR_ID,
)
from spindleflow_rl.envs.env import SpindleFlowEnv, encode_action
from spindleflow_rl.core.world import default_world
from spindleflow_rl.core.config import ConfigError

SHAPES = {
    'sequential': ([dict(slots=[0]), dict(slots=[1, 2])], 'sequential'),
    'parallel': ([dict(slots=[0, 1, 2], mode='parallel')], 'parallel'),
    'debate': ([dict(slots=[0, 1], mode='debate', params=(0, 0, 0, 0))], 'parallel'),
    'parallel-then-one': ([dict(slots=[0, 1], mode='parallel'), dict(slots=[2])], 'parallel'),
    'staged': (
        [dict(slots=[0]), dict(slots=[1, 2], mode='debate'), dict(slots=[3, 4], mode='parallel')],
        'sequential',
    ),
}


def all_ids(wf):
    return [a['id'] for a in wf['agents']] + [s['id'] for a in wf['agents'] for s in a.get('sub_agents', [])]


def run_cli(*args):
    exe = shutil.which('spindleflow-export')
    cmd = (
        [exe]
        if exe
        else [
            sys.executable,
            '-c',
            'import sys; from spindleflow_rl.cli import export_main; sys.exit(export_main())',
        ]
    )
    return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=300)


@pytest.fixture(scope='module')
def env():
    return SpindleFlowEnv(world=default_world())


@pytest.fixture(scope='module')
def checkpoint(env, tmp_path_factory):
    """A real checkpoint of this version's shape: an untrained
    SpindleFlowPPO saved as a zip (the CLI treats it like any)."""
    from spindleflow_rl.agent.network import make_model

    p = tmp_path_factory.mktemp('ckpt') / 'policy.zip'
    make_model(env, seed=0, device='cpu').save(p)
    return p


@pytest.mark.parametrize('shape', list(SHAPES))
def test_every_plan_shape_exports_valid(env, shape, tmp_path):
    steps, wtype = SHAPES[shape]
    env.reset(seed=5)
    for s in steps:
        env.step(encode_action(6, **s))
    env.step(encode_action(6, stop=True))
    plan = episode_plan(env)
    called = [env.roster[s] for st in steps for s in st['slots']]
    assert [a for st in plan for a in st['agents']] == called
    p = write_workflow(plan_to_workflow(plan, env.world.catalog), tmp_path / 'wf.yml', {'shape': shape})
    text = p.read_text()
    wf = yaml.safe_load(text)
    assert text.startswith('# SpindleFlow workflow') and validate_workflow(wf) == []
    assert wf['workflow']['type'] == wtype
    assert set(called) <= set(all_ids(wf))  # every called specialist is an agent
    assert wf['models'][wf['provider']]['provider'] == 'openai'
    w = wf['workflow']
    if shape == 'sequential':
        assert [s['agent'] for s in w['steps']] == called
    if shape == 'parallel':
        assert w['branches'] == called and w['then'] == {'agent': AGGREGATOR_ID}
    if shape == 'debate':
        fl = w['then']['feedback_loop']
        assert (
            w['then']['agent'] == MODERATOR_ID and fl['enabled'] is True and fl['feedback_targets'] == called
        )
        assert (
            fl['max_iterations'] == 2 and fl['approval_keyword'] == 'APPROVED'
        )  # params[0]=0 -> 2 debate rounds
    if shape == 'parallel-then-one':
        assert w['branches'] == called[:2] and w['then']['agent'] == called[2]
    if shape == 'staged':
        stages = [a for a in wf['agents'] if 'sub_agents' in a]
        assert [[s['id'] for s in a['sub_agents']] for a in stages] == [called[1:3], called[3:5]]
        assert all(a['delegation_strategy'] == 'parallel' for a in stages)
        assert [s['agent'] for s in w['steps']][0] == called[0]


def test_cli_free_text_task(checkpoint, tmp_path):
    out = tmp_path / 'workflow.yml'
    r = run_cli(
        '--checkpoint',
        str(checkpoint),
        '--task',
        'Design a Postgres schema for invoices, then build a REST API for it and write its docs',
        '--out',
        str(out),
        '--provider',
        'gemini',
        '--model',
        'gemini-1.5-flash',
        '--max-tokens',
        '1024',
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert 'wrote' in r.stdout and 'adhoc-' in r.stdout
    wf = yaml.safe_load(out.read_text())
    assert validate_workflow(wf) == []
    assert wf['models'][wf['provider']] == {
        'provider': 'gemini',
        'model': 'gemini-1.5-flash',
        'max_tokens': 1024,
    }
    plan_line = next(l for l in out.read_text().splitlines() if l.startswith('# plan: '))
    for sid in all_ids(
        wf
    ):  # (an untrained policy stops at once: the generalist alone, named in the plan line)
        if sid not in (AGGREGATOR_ID, MODERATOR_ID) and not sid.startswith('stage_'):
            assert sid in plan_line


def test_export_bank_task_with_roster_and_yaml_catalog(checkpoint, tmp_path):
    from spindleflow_rl.core.catalog import Catalog

    cat = Catalog.default()
    keep = [s.to_dict() for s in cat.specialists[:24]]
    ids = {s['id'] for s in keep}
    for s in keep:
        s['fallbacks'] = [f for f in s['fallbacks'] if f in ids]
    (tmp_path / 'cat.yaml').write_text(yaml.safe_dump({'specialists': keep}))
    roster = [s['id'] for s in keep[:6]]
    res = export_workflow(
        checkpoint=checkpoint,
        task='p1-product-01',
        out=tmp_path / 'w.yml',
        catalog=tmp_path / 'cat.yaml',
        seed=1,
        roster=roster,
    )
    wf = yaml.safe_load((tmp_path / 'w.yml').read_text())
    assert validate_workflow(wf) == [] and wf == res['workflow']
    called = [a for st in res['plan'] for a in st['agents']]
    assert set(called) <= set(roster) and res['summary']['roster'] == roster
    assert set(all_ids(wf)) - {AGGREGATOR_ID, MODERATOR_ID} <= ids  # only specialists of the given catalog


def test_cli_bad_inputs(tmp_path):
    r = run_cli(
        '--task',
        'p1-product-01',
        '--checkpoint',
        str(tmp_path / 'missing.zip'),
        '--out',
        str(tmp_path / 'w.yml'),
    )
    assert r.returncode == 2 and 'not found' in r.stderr and not (tmp_path / 'w.yml').exists()
    (tmp_path / 'c.txt').write_text('id,role\n')
    r = run_cli(
        '--task', 'p1-product-01', '--catalog', str(tmp_path / 'c.txt'), '--out', str(tmp_path / 'w.yml')
    )
    assert (
        r.returncode == 2
        and "unknown catalog format '.txt'" in r.stderr
        and not (tmp_path / 'w.yml').exists()
    )
    (tmp_path / 'c.csv').write_text('id,role\n')  # a CSV catalog with no specialists
    r = run_cli(
        '--task', 'p1-product-01', '--catalog', str(tmp_path / 'c.csv'), '--out', str(tmp_path / 'w.yml')
    )
    assert r.returncode == 2 and 'c.csv' in r.stderr and not (tmp_path / 'w.yml').exists()
    r = run_cli('--task', '  ', '--out', str(tmp_path / 'w.yml'))
    assert r.returncode == 2 and 'argument --task: must not be empty' in r.stderr
    r = run_cli('--task', 'p1-product-01', '--max-tokens', '0', '--out', str(tmp_path / 'w.yml'))
    assert r.returncode == 2 and 'argument --max-tokens: must be >= 1' in r.stderr


def test_validator_negative_cases(env):
    env.reset(seed=5)
    env.step(encode_action(6, slots=[0, 1], mode='debate'))
    env.step(encode_action(6, stop=True))
    good = plan_to_workflow(episode_plan(env), env.world.catalog)
    assert validate_workflow(good) == []

    def broken(f):
        d = copy.deepcopy(good)
        f(d)
        return validate_workflow(d)

    b0 = good['workflow']['branches'][0]
    assert any('also a branch' in e for e in broken(lambda d: d['workflow']['then'].update(agent=b0)))
    assert any(
        'max_iterations' in e
        for e in broken(lambda d: d['workflow']['then']['feedback_loop'].update(max_iterations=0))
    )
    assert any(
        "'nobody' is not defined" in e for e in broken(lambda d: d['workflow']['branches'].append('nobody'))
    )
    assert any('duplicate agent id' in e for e in broken(lambda d: d['agents'].append(dict(d['agents'][0]))))
    assert any(
        "'max_tokens' must be a positive integer" in e
        for e in broken(lambda d: d['models']['default'].update(max_tokens=True))
    )
    assert any('must name one of the models' in e for e in broken(lambda d: d.update(provider='other')))
    assert any("unknown top-level key" in e for e in broken(lambda d: d.update(extra=1)))
    assert any("'goal' must be a non-empty string" in e for e in broken(lambda d: d['agents'][0].pop('goal')))
    with pytest.raises(ConfigError, match='refusing to write an invalid workflow'):
        write_workflow({**good, 'provider': 'other'}, '/tmp/never-written.yml')
    assert not Path('/tmp/never-written.yml').exists()


def test_shipped_demo_policy_exports(tmp_path):
    """The shipped policy (spindleflow_rl/assets/demo_policy.zip) must match this version's environment and export a
    valid workflow with the default command line (no --checkpoint)."""
    out = tmp_path / 'w.yml'
    r = run_cli(
        '--task', 'Write a PRD for sharing deals with teammates, then build the API for it', '--out', str(out)
    )
    assert r.returncode == 0, 'the shipped demo policy does not run on this environment: ' + r.stderr[-2000:]
    wf = yaml.safe_load(out.read_text())
    assert validate_workflow(wf) == [] and 'demo_policy.zip' in out.read_text()
