"""The training and evaluation commands, each from the real CLI or its in-process `main`: validation before a run folder
exists, same seed -> same weights across processes, simulated spend labelled, plain-text progress with one
throughput figure, --torch-threads, .env loading, reports that never overwrite another report, a finished run."""

import json, os, shutil, subprocess, sys
from pathlib import Path
import pytest, torch
from spindleflow_rl.core.config import ConfigError
from spindleflow_rl.agent.runs import load_run_config, spend_from
from spindleflow_rl.cli import train_main, eval_main, eval_plan

TINY = """
train:
  n_envs: 2
  eval_episodes: 0
  checkpoint_every: 64
  progress_every_s: 0.2
ppo:
  n_steps: 16
  batch_size: 32
  n_epochs: 1
"""


def cli(args, cwd=None, env=None):
    exe = shutil.which('spindleflow-train')
    assert exe, 'spindleflow-train is not on PATH: pip install -e .'
    return subprocess.run(
        [exe, *args], capture_output=True, text=True, timeout=600, cwd=cwd, env={**os.environ, **(env or {})}
    )


def test_config_errors_name_the_file_and_leave_nothing(tmp_path, capsys):
    bad = tmp_path / 'typo.yaml'
    bad.write_text('ppo:\n  n_step: 16\n')
    with pytest.raises(ConfigError) as e:
        load_run_config(bad)
    msg = str(e.value)
    assert str(bad) in msg and "['n_step']" in msg and 'n_steps' in msg and '_init_setup_model' not in msg
    assert train_main(['--config', str(bad), '--out', str(tmp_path / 'runs'), '--demo-mode']) == 2
    csv = tmp_path / 'bad.csv'
    csv.write_text('task,specialist_id,quality\nx,y,0.5\n')
    assert (
        train_main(
            [
                '--backend',
                'recorded',
                '--recorded',
                str(csv),
                '--log-learner',
                'ppo',
                '--timesteps',
                '64',
                '--out',
                str(tmp_path / 'runs'),
            ]
        )
        == 2
    )
    assert 'missing column(s)' in capsys.readouterr().err
    assert not (tmp_path / 'runs').exists()  # a failed start leaves no stub run folder


def test_same_seed_same_weights_progress_and_simulated_spend(tmp_path):
    (tmp_path / 'tiny.yaml').write_text(TINY)
    runs = []
    for name, hashseed in (('a', '1'), ('b', '2')):  # separate processes, different hash seeds
        p = cli(
            [
                '--config',
                str(tmp_path / 'tiny.yaml'),
                '--demo-mode',
                '--timesteps',
                '128',
                '--torch-threads',
                '1',
                '--out',
                str(tmp_path),
                '--run-name',
                name,
            ],
            env={'PYTHONHASHSEED': hashseed},
        )
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        runs.append((tmp_path / name, p.stdout))
    from spindleflow_rl.agent.network import SpindleFlowPPO

    wa, wb = (SpindleFlowPPO.load(r / 'final.zip', device='cpu').policy.state_dict() for r, _ in runs)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)  # bit for bit
    run, out = runs[0]
    summ = json.loads((run / 'train_summary.json').read_text())
    assert summ['cost_kind'] == 'simulated' and summ['cost_usd'] == 0.0 and summ['simulated_cost_usd'] > 0
    assert json.loads((run / 'config.json').read_text())['train']['torch_threads'] == 1
    lines = [l for l in out.splitlines() if l.startswith('timesteps ') and 'timesteps/s' in l]
    assert lines and '\r' not in out and 'it/s' not in out  # plain lines when stdout is not a terminal
    assert f"({summ['timesteps_per_s']:,.0f} timesteps/s)" in out  # the summary's figure, in the same unit


def test_dotenv_is_read_and_the_environment_wins(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv('SPINDLEFLOW_PROBE_A', raising=False)
    monkeypatch.setenv('SPINDLEFLOW_PROBE_B', 'from-shell')
    (tmp_path / '.env').write_text('SPINDLEFLOW_PROBE_A=from-file\nSPINDLEFLOW_PROBE_B=from-file\n')
    (tmp_path / 'bad.yaml').write_text('train:\n  timesteps: 0\n')
    assert train_main(['--config', 'bad.yaml']) == 2  # fails on the config, after reading .env
    assert (
        os.environ['SPINDLEFLOW_PROBE_A'] == 'from-file' and os.environ['SPINDLEFLOW_PROBE_B'] == 'from-shell'
    )
    assert 'read SPINDLEFLOW_PROBE_A from .env' in capsys.readouterr().out
    monkeypatch.delenv('SPINDLEFLOW_PROBE_A')
    assert (
        eval_main(['--checkpoint', str(tmp_path / 'nowhere')]) == 2
        and os.environ['SPINDLEFLOW_PROBE_A'] == 'from-file'
    )


def test_reports_never_overwrite_and_finished_run_stops(tmp_path, capsys):
    (tmp_path / 'tiny.yaml').write_text(TINY)
    assert (
        train_main(
            [
                '--config',
                str(tmp_path / 'tiny.yaml'),
                '--demo-mode',
                '--timesteps',
                '64',
                '--no-progress',
                '--out',
                str(tmp_path),
                '--run-name',
                'r',
            ]
        )
        == 0
    )
    run = tmp_path / 'r'
    base = [
        '--checkpoint',
        str(run),
        '--episodes',
        '2',
        '--record',
        '1',
        '--baselines',
        'random,greedy-topk-par,oracle',
    ]
    assert eval_main(base) == 0  # the run's own report
    own = {f: (run / f).read_bytes() for f in ('eval.json', 'eval.md', 'episodes.jsonl', 'pareto.png')}
    assert eval_main(base + ['--split', 'heldout', '--json', str(run / 'eval.json')]) == 2
    assert 'already holds a report' in capsys.readouterr().err
    assert eval_main(base + ['--split', 'heldout', '--json', str(tmp_path / 'x' / 'e.json')]) == 0
    assert (
        (tmp_path / 'x' / 'e.md').exists()
        and (tmp_path / 'x' / 'e' / 'episodes.jsonl').exists()
        and (tmp_path / 'x' / 'e' / 'pareto.png').exists()
    )
    assert sorted(p.name for p in (tmp_path / 'x').iterdir()) == ['e', 'e.json', 'e.md']
    assert {f: (run / f).read_bytes() for f in own} == own  # the run's own report untouched
    assert eval_main(base + ['--split', 'heldout', '--overwrite']) == 0
    assert list(json.loads((run / 'eval.json').read_text())['splits']) == ['heldout']  # replaced, as asked
    capsys.readouterr()
    before = (run / 'eval.json').read_bytes()
    assert train_main(['--checkpoint', str(run)]) == 0
    out = capsys.readouterr().out
    assert 'this run is finished (64 of 64 timesteps)' in out and 'training' not in out
    assert (run / 'eval.json').read_bytes() == before  # no evaluation rerun


def test_paid_backend_defaults_to_a_small_evaluation(tmp_path):
    """A paid run's evaluation is sized to its training: 30 episodes played -> 10 per policy (3 policies), one split, the
    best deployable baselines, inside the default budget or what --max-cost-usd left (less)."""
    (tmp_path / 'latest.json').write_text(json.dumps({'cost_kind': 'real', 'cost_usd': 0.3, 'episodes': 30}))
    cfg = load_run_config(overrides={'train': {'backend': 'openai', 'max_cost_usd': 1.0}})
    plan = eval_plan(cfg, False, tmp_path)
    assert (plan['episodes'], plan['splits'], plan['baselines']) == (10, ('heldout',), ('adaptive-planner',))
    assert plan['max_cost_usd'] == pytest.approx(0.7) and plan['cost_per_episode'] == pytest.approx(0.01)
    assert (
        eval_plan(cfg, True, tmp_path)['episodes'] == cfg['train'].eval_episodes
    )  # --eval-episodes given: as asked (500 shipped)
    big = load_run_config(overrides={'train': {'backend': 'openai'}})
    (tmp_path / 'latest.json').write_text(
        json.dumps({'cost_kind': 'real', 'cost_usd': 0.3, 'episodes': 3000})
    )
    assert (
        eval_plan(big, False, tmp_path)['episodes'] == big['train'].paid_eval_episodes
    )  # at most paid_eval_episodes (50)
    assert (
        eval_plan(big, False, tmp_path)['max_cost_usd'] == big['train'].paid_eval_budget_usd
    )  # the default budget
    sim = load_run_config(overrides={'train': {'max_cost_usd': 1.0}})
    assert eval_plan(sim, False, tmp_path) == {
        'episodes': sim['train'].eval_episodes
    }  # simulated spend is not money
    assert spend_from({'cost_kind': 'simulated', 'cost_usd': 0.0, 'simulated_cost_usd': 12.5}) == 12.5


def test_help_shows_the_defaults_a_run_uses(monkeypatch):
    """Flags are generated from the dataclasses, so their help cannot drift from the config (the issue found
    `--timesteps` help 400000 against the config's 250000, `--eval-episodes` 1000 against train.yaml's 500): every
    default `spindleflow-train --help` shows is what a run without the flag uses, and every other command's help shows
    its options dataclass's defaults."""
    import dataclasses, re

    monkeypatch.setenv('COLUMNS', '100000')  # one line per flag: long defaults are not wrapped
    from spindleflow_rl.cli import train_parser, add_fields, parser, _show, TRAIN_EXTRA

    def defaults(ap):
        return dict(
            re.findall(
                r'(--[a-z0-9-]+)(?:, --[a-z0-9-]+)*(?: [A-Z_]+)?\s.*?\(default: ([^;)]*)',
                ' '.join(ap.format_help().split()),
            )
        )

    shown, cfg = defaults(train_parser()), load_run_config()
    assert shown['--timesteps'] == '250000' and shown['--eval-episodes'] == '500'
    checked = 0
    for sec, obj in (('train', cfg['train']), ('reward', cfg['reward']), ('env', cfg['env'])):
        for f in dataclasses.fields(obj):
            flag = '--' + f.name.replace('_', '-')
            if (
                flag in shown
                and not f.metadata.get('show')
                and (sec == 'train' or any(f.name in names for s, names in TRAIN_EXTRA if s == sec))
            ):
                assert shown[flag] == _show(getattr(obj, f.name)), (flag, shown[flag], getattr(obj, f.name))
                checked += 1
    assert checked >= 30, checked
    from spindleflow_rl.commands.evaluate import EvalOptions
    from spindleflow_rl.commands.demo import DemoOptions
    from spindleflow_rl.commands.export import ExportOptions
    from spindleflow_rl.commands.audit import AuditOptions
    from spindleflow_rl.commands.sweep import SweepOptions

    for cls in (EvalOptions, DemoOptions, ExportOptions, AuditOptions, SweepOptions):
        shown = defaults(add_fields(parser('x', ''), cls))
        for f in dataclasses.fields(cls):
            if f.metadata.get('positional') or f.metadata.get('required') or f.metadata.get('show'):
                continue
            d = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            assert shown['--' + f.name.replace('_', '-')] == _show(d), (cls.__name__, f.name)
