"""`spindleflow-train --catalog FILE`: a roster whose ids are not in the shipped catalog trains from the command line,
is pinned in the run's config (absolute path + sha256), and a resume uses the same roster (and refuses a changed
file); bad catalog rows stop the command with an error naming the file, the row and the fix; the cost flags reach
their config keys. Small scale: a few dozen timesteps in-process."""

import json
from pathlib import Path
import pytest
from stable_baselines3.common.callbacks import BaseCallback
from spindleflow_rl.core.config import ConfigError, RewardConfig, EnvConfig
from spindleflow_rl.training.train import train
from spindleflow_rl.cli import (
    train_main as main,
    train_parser as build_parser,
    train_overrides as args_to_overrides,
)
from spindleflow_rl.agent.runs import load_run_config, build_world, file_sha256, resolve_checkpoint

TINY = """
train:
  n_envs: 2
  vec_env: dummy
  checkpoint_every: 32
  eval_episodes: 0
  progress: false
  torch_threads: 1
  imitation_teacher: ''
ppo:
  n_steps: 16
  batch_size: 32
  n_epochs: 1
"""
ROSTER = (
    "id,capability,domain,cost,latency,reliability,fallbacks\n"
    "acme-fast,Answers short questions about our REST API and writes small code fixes "
    "quickly.,support,0.0004,1.5,0.8,acme-deep\n"
    "acme-deep,Designs database schemas and solves hard multi-step backend and data "
    "problems.,engineering,0.006,6,0.97,\n"
)


@pytest.fixture
def roster(tmp_path):
    (tmp_path / 'tiny.yaml').write_text(TINY)
    (tmp_path / 'acme.csv').write_text(ROSTER)
    (tmp_path / 'no.env').write_text('')  # an empty env file: no .env of the working folder is read
    return tmp_path


def _args(d, *extra):
    return [
        '--config',
        str(d / 'tiny.yaml'),
        '--out',
        str(d),
        '--run-name',
        'acme',
        '--demo-mode',
        '--no-progress',
        '--env-file',
        str(d / 'no.env'),
        *extra,
    ]


class RosterSpy(BaseCallback):
    "Every specialist id the training environments put in a roster."

    def __init__(self):
        super().__init__(0)
        self.ids = set()

    def _on_step(self):
        for roster in self.training_env.get_attr('roster'):
            self.ids.update(r for r in roster if r is not None)
        return True


def test_custom_catalog_trains_and_resumes_on_the_same_roster(roster, capsys):
    d = roster
    assert main(_args(d, '--catalog', str(d / 'acme.csv'), '--timesteps', '32')) == 0
    run = d / 'acme'
    saved = json.loads((run / 'config.json').read_text())['train']
    assert saved['catalog'] == str((d / 'acme.csv').resolve()) and Path(saved['catalog']).is_absolute()
    assert saved['catalog_sha256'] == file_sha256(d / 'acme.csv') and saved['tasks'] == ''
    assert json.loads((run / 'latest.json').read_text())['num_timesteps'] == 32
    # the resumed run rebuilds the world from its own config: the same two specialists, nothing from the shipped catalog
    _, st = resolve_checkpoint(run)
    cfg = load_run_config(
        None,
        {
            **{k: v for k, v in st['config'].items() if v is not None},
            'train': {**st['config']['train'], 'timesteps': 64},
        },
    )
    assert build_world(cfg).catalog.ids == ['acme-fast', 'acme-deep']
    spy = RosterSpy()
    train(cfg, checkpoint=run, quiet=True, callbacks=[spy])
    assert spy.ids == {'acme-fast', 'acme-deep'}
    assert json.loads((run / 'latest.json').read_text())['num_timesteps'] == 64
    # and through the command line, without repeating --catalog
    assert main(_args(d, '--checkpoint', str(run), '--timesteps', '96')) == 0
    assert json.loads((run / 'latest.json').read_text())['num_timesteps'] == 96
    assert json.loads((run / 'config.json').read_text())['train']['catalog_sha256'] == saved['catalog_sha256']
    # the roster file changed since: resuming refuses, naming the file and what to do
    (d / 'acme.csv').write_text(ROSTER.replace('0.0004', '0.0005'))
    capsys.readouterr()
    assert main(_args(d, '--checkpoint', str(run), '--timesteps', '128')) == 2
    err = capsys.readouterr().err
    assert (
        'acme.csv: this run was trained on a different version of this catalog file' in err
        and 'start a new run' in err
    )
    assert json.loads((run / 'latest.json').read_text())['num_timesteps'] == 96


@pytest.mark.parametrize(
    'body, message',
    [
        ("id,capability\n,Does a.\n", "bad.csv: row 2: missing or empty 'id'"),
        (
            "id,capability\na,Does a.\na,Does b.\n",
            "bad.csv: row 3 (id 'a'): duplicate id, already used by row 2",
        ),
        ("id,capability\na,\n", "bad.csv: row 2 (id 'a'): missing or empty 'capability'"),
        (
            "id,capability,cost\na,Does a.,two cents\n",
            "bad.csv: row 2 (id 'a'): field 'cost' must be a number (USD per call), got 'two cents'",
        ),
        (
            "id,capability,fallbacks\na,Does a.,gpt-5\n",
            "bad.csv: row 2 (id 'a'): unknown fallback id 'gpt-5'",
        ),
        (
            "id,capability,fallbacks\na,Does a.,b\nb,Does b.,a\n",
            "bad.csv: row 2 (id 'a'): fallback cycle a -> b -> a",
        ),
        (
            "id,capability,reliability\na,Does a.,1.5\n",
            "bad.csv: row 2 (id 'a'): field 'reliability' must be in (0, 1]",
        ),
    ],
)
def test_bad_catalog_rows_stop_the_command_with_named_errors(roster, capsys, body, message):
    (roster / 'bad.csv').write_text(body)
    assert main(_args(roster, '--catalog', str(roster / 'bad.csv'), '--timesteps', '32')) == 2
    assert message in capsys.readouterr().err
    assert not (roster / 'acme').exists()  # nothing was created for a bad roster


def test_missing_catalog_and_tasks_files(roster, capsys):
    assert main(_args(roster, '--catalog', str(roster / 'nope.csv'))) == 2
    err = capsys.readouterr().err
    assert '--catalog' in err and 'not found' in err
    assert main(_args(roster, '--tasks', str(roster / 'nope.yaml'))) == 2
    assert '--tasks' in capsys.readouterr().err


def test_cost_flags_reach_their_config_keys(capsys):
    ov = args_to_overrides(build_parser().parse_args(['--cost-coef', '0.5', '--cost-coef-range', '0,2']))
    assert ov['reward'] == {'cost_coef': 0.5} and ov['env'] == {'cost_coef_range': (0.0, 2.0)}
    for bad in ('2', '2,1', '-1,1', 'a,b', '0,1,2'):
        with pytest.raises(SystemExit) as e:
            build_parser().parse_args([f'--cost-coef-range={bad}'])  # a usage error: exit 2
        assert e.value.code == 2 and 'argument --cost-coef-range' in capsys.readouterr().err
    if 'cost_coef' in RewardConfig.__dataclass_fields__:  # the fields of chapter 00 (cost in the reward)
        cfg = load_run_config(None, ov)
        assert cfg['reward'].cost_coef == 0.5 and tuple(cfg['env'].cost_coef_range) == (0.0, 2.0)


TASKS = """tasks:
- id: t-train-1
  phase: 1
  split: train
  text: Our REST endpoint for invoices returns 500 on empty input. Fix it.
  subtasks:
  - {text: Fix the invoices REST endpoint so empty input returns a 400 with a clear message, domain: backend}
- id: t-train-2
  phase: 1
  split: train
  text: Design the table for customer refunds.
  subtasks:
  - {text: Design a PostgreSQL schema for customer refunds with indexes, domain: data}
- id: t-held-1
  phase: 1
  split: heldout
  text: Add pagination to the orders API.
  subtasks:
  - {text: Add cursor pagination to the orders REST API, domain: backend}
"""


def test_custom_tasks_with_one_phase_train_through_the_cli(roster, capsys):
    d = roster
    (d / 'tasks.yaml').write_text(TASKS)
    assert (
        main(
            _args(d, '--catalog', str(d / 'acme.csv'), '--tasks', str(d / 'tasks.yaml'), '--timesteps', '32')
        )
        == 0
    )
    out = capsys.readouterr().out
    assert 'training tasks in phase(s) [1] only' in out
    saved = json.loads((d / 'acme' / 'config.json').read_text())['train']
    assert saved['tasks'] == str((d / 'tasks.yaml').resolve()) and saved['tasks_sha256'] == file_sha256(
        d / 'tasks.yaml'
    )
    w = build_world(saved and {'train': saved})
    assert w.bank.ids == ['t-train-1', 't-train-2', 't-held-1'] and w.catalog.ids == [
        'acme-fast',
        'acme-deep',
    ]
    st = json.loads((d / 'acme' / 'latest.json').read_text())
    assert st['phase'] == 1 and st['curriculum']['history'] == []
    (d / 'bad_tasks.yaml').write_text(
        TASKS.replace('phase: 1\n  split: heldout', 'phase: 7\n  split: heldout')
    )
    assert main(_args(d, '--tasks', str(d / 'bad_tasks.yaml'), '--run-name', 'bad')) == 2
    assert 'bad_tasks.yaml' in capsys.readouterr().err


def test_evaluation_helpers_use_the_runs_pinned_roster(roster):
    from spindleflow_rl.agent.runs import with_roster

    d = roster
    saved = load_run_config(None, {'train': {'catalog': str(d / 'acme.csv')}})[
        'train'
    ].to_dict()  # as in config.json
    assert build_world(with_roster(saved)).catalog.ids == ['acme-fast', 'acme-deep']
    (d / 'acme.csv').write_text(ROSTER.replace('acme-deep', 'acme-deeper'))
    with pytest.raises(ConfigError, match='trained on a different version of this catalog file'):
        with_roster(saved)
    assert build_world(with_roster(saved, str(d / 'acme.csv'))).catalog.ids == [
        'acme-fast',
        'acme-deeper',
    ]  # on purpose: pinned afresh


def test_demo_plays_the_shipped_policy_on_your_roster(roster, capsys):
    "`spindleflow-demo --catalog FILE`: every recorded roster holds only your specialists, the report is written."
    from spindleflow_rl.cli import demo_main
    from spindleflow_rl.agent.replay import read_episodes

    d = roster
    assert (
        demo_main(
            ['--catalog', str(d / 'acme.csv'), '--episodes', '4', '--record', '1', '--out', str(d / 'demo')]
        )
        == 0
    )
    eps = read_episodes(d / 'demo' / 'episodes.jsonl')
    assert eps and {r for e in eps for r in e['roster'] if r} <= {'acme-fast', 'acme-deep'}, [
        e['roster'] for e in eps
    ]
    assert (d / 'demo' / 'report.md').exists() and 'headline (held-out return)' in capsys.readouterr().out
    assert demo_main(['--catalog', str(d / 'missing.csv'), '--episodes', '4', '--out', str(d / 'demo2')]) == 2
    assert 'missing.csv' in capsys.readouterr().err


def test_eval_plays_the_shipped_policy_on_your_roster(roster, capsys):
    """`spindleflow-eval --catalog FILE`: the report's episodes use only
    your specialists; no unseen-roster split when none is held out."""
    from spindleflow_rl.cli import eval_main
    from spindleflow_rl.core.config import PACKAGE_DIR

    d = roster
    out = d / 'ev' / 'eval.json'
    assert (
        eval_main(
            [
                '--checkpoint',
                str(PACKAGE_DIR / 'assets' / 'demo_policy.zip'),
                '--catalog',
                str(d / 'acme.csv'),
                '--episodes',
                '3',
                '--record',
                '1',
                '--baselines',
                'random,oracle,adaptive-planner',
                '--json',
                str(out),
            ]
        )
        == 0
    )
    rep = json.loads(out.read_text())
    assert set(rep['splits']) == {'train', 'heldout'}, rep['splits'].keys()
    assert 'no unseen-roster split' in capsys.readouterr().out
    rosters = [
        json.loads(l)['roster'] for l in (d / 'ev' / 'eval' / 'episodes.jsonl').read_text().splitlines()
    ]
    assert rosters and {r for ro in rosters for r in ro if r} <= {'acme-fast', 'acme-deep'}


def test_bayes_cascade_teacher_from_the_cli(roster, capsys):
    """`--imitation-teacher bayes-cascade` clones chapter 18's
    cost-aware cascade on a log; on the simulator it is refused."""
    from spindleflow_rl.core.config import PACKAGE_DIR

    d = roster
    a = PACKAGE_DIR / 'assets'
    assert (
        main(
            [
                '--config',
                str(d / 'tiny.yaml'),
                '--out',
                str(d),
                '--run-name',
                'bc',
                '--no-progress',
                '--env-file',
                str(d / 'no.env'),
                '--backend',
                'recorded',
                '--recorded',
                str(a / 'two_model_log.csv'),
                '--catalog',
                str(a / 'two_model_catalog.csv'),
                '--cost-coef-range',
                '0,300',
                '--log-learner',
                'ppo',
                '--imitation-teacher',
                'bayes-cascade',
                '--timesteps',
                '3200',
            ]
        )
        == 0
    )
    im = json.loads((d / 'bc' / 'imitation.json').read_text())
    assert (
        im['teacher'] == 'bayes-cascade'
        and im['episodes'] == 32
        and im['dagger_rounds'] == 1
        and im['loss_last'] < im['loss_first']
    ), im
    assert json.loads((d / 'bc' / 'config.json').read_text())['env']['cost_coef_range'] == [0.0, 300.0]
    capsys.readouterr()
    assert main(_args(d, '--imitation-teacher', 'bayes-cascade', '--timesteps', '32')) == 2
    assert 'bayes-cascade' in capsys.readouterr().err
