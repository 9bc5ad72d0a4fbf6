"""Your own models and logs, end to end from the command line, as the README tells a user: a catalog whose ids are not
in the shipped one (`cheap-model`, `strong-model`), a log of their answers, then `spindleflow-train` (the
full-information learner, chapter 18c), its evaluation (the tuned routers at the policy's strong-call rate, at one
stated price) and `spindleflow-eval --sweep strong_rate=...` (JSON, markdown, PNG); flags a command would ignore are
refused by name; no held-out label reaches a decision; the PPO guard; the on-policy learner still available."""

import json, os, shutil, subprocess
import numpy as np
import pytest
import torch
from cli_harness import run_inproc
from spindleflow_rl.logs.routers import (
    make_two_model_log,
    write_csv,
    TWO_MODEL_CATALOG,
    LoggedTasks,
    BayesCascadeTeacher,
)
from spindleflow_rl.core.catalog import Catalog
from spindleflow_rl.core.config import ConfigError

COLS = ['id', 'role', 'domain', 'cost', 'latency', 'reliability', 'capability']
# one torch thread: the tests run two at a time on two cores; a training with a thread pool each then spins on the
# other's core (measured: over 900 s for one run under load, against about 60 s alone)
SMALL = [
    '--n-envs',
    '2',
    '--distil-episodes',
    '1500',
    '--distil-epochs',
    '30',
    '--distil-dagger-rounds',
    '1',
    '--no-progress',
    '--torch-threads',
    '1',
]


def _run(*cmd, ok=True):
    """A command as the user runs it (its console script, a new interpreter); `ok=False`, a refusal expected: the same
    `main` run in this process (no interpreter start-up per refused flag)."""
    env = {**os.environ, 'HF_HUB_OFFLINE': '1', 'TRANSFORMERS_OFFLINE': '1'}
    if not ok:
        r = run_inproc(cmd[0].removeprefix('spindleflow-'), list(cmd[1:]), os.getcwd(), env)
        assert 'Traceback' not in r.text, r.err[-3000:]
        return subprocess.CompletedProcess(list(cmd), r.rc, r.out, r.err)
    p = subprocess.run([shutil.which(cmd[0]), *cmd[1:]], env=env, capture_output=True, text=True, timeout=900)
    if ok:
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert 'Traceback' not in p.stdout + p.stderr, p.stderr[-3000:]
    return p


@pytest.fixture(scope='module')
def logdir(tmp_path_factory):
    d = tmp_path_factory.mktemp('own')
    write_csv(make_two_model_log(300, seed=5), d / 'log.csv')
    write_csv(TWO_MODEL_CATALOG, d / 'models.csv', COLS)
    assert not {'cheap-model', 'strong-model'} & set(Catalog.default().ids)
    return d


def _weights(z):
    from spindleflow_rl.agent.checkpoints import load_policy

    return load_policy(z).policy.state_dict()


def test_full_information_run_eval_and_sweep(logdir, tmp_path):
    d = logdir
    out = _run(
        'spindleflow-train',
        '--catalog',
        str(d / 'models.csv'),
        '--backend',
        'recorded',
        '--recorded',
        str(d / 'log.csv'),
        '--out',
        str(tmp_path / 'runs'),
        '--run-name',
        'mine',
        *SMALL,  # the sweep below needs a network that follows the price: with 600 episodes and 10 epochs the
        # network distilled from the cascade router (the Q's choice on this log) escalated every question at every price
    ).stdout
    run = tmp_path / 'runs' / 'mine'
    info = json.loads((run / 'log_learning.json').read_text())
    s = info['sizes']
    assert s['train'] + s['heldout'] == 300 and 30 < s['heldout'] < 90 and s['fitting'] == s['train']
    assert (
        out.index('log: 300 questions x 2 specialists') < out.index('fitting the Q') < out.index('distilling')
    )  # sizes first
    assert {
        'config.json',
        'final.zip',
        'warm_start.zip',
        'latest.json',
        'train_summary.json',
        'eval.json',
    } <= {p.name for p in run.iterdir()}
    lo, hi = info['cost_coef_range']
    assert lo == 0 and hi > info['price'] > 0 and info['cost_coef_range_from'] == 'the log'
    assert json.loads((run / 'config.json').read_text())['env']['cost_coef_range'] == [lo, hi]
    # the headline is the routing table at the run's price, not the simulator's baselines
    heads = [l for l in out.splitlines() if l.startswith('headline')]
    assert (
        len(heads) == 1
        and heads[0].startswith(f"headline (held-out, {s['heldout']} questions")
        and 'knn' in heads[0]
    ), heads
    rep = json.loads((run / 'eval.json').read_text())
    assert (
        rep['cost_coef']['value'] == info['price']
        and 'calibrated to a strong-call rate of 0.5' in rep['cost_coef']['why']
    )
    lg = rep['logged']
    pol = lg['policies']['policy']
    assert (
        lg['questions'] == s['heldout']
        and lg['cost_coef'] == info['price']
        and set(pol['vs']) == {'knn', 'gain', 'mf', 'cascade'}
    )
    for v in pol['vs'].values():
        assert v['x_router'] == pytest.approx(pol['x'], abs=1e-12)  # each router at the policy's rate
    assert (
        rep['kind'] == 'routing' and 'splits' not in rep
    )  # a routing report: no simulator baselines, splits or columns
    md = (run / 'eval.md').read_text()
    assert (
        'policy − it' in md
        and 'always strongest' in md
        and not any(w in md for w in ('adaptive-planner', 'greedy', 'recovery', 'nan'))
    )
    assert (run / 'routing.png').stat().st_size > 1000
    # the sweep, by strong-call rate
    _run(
        'spindleflow-eval',
        '--checkpoint',
        str(run),
        '--sweep',
        'strong_rate=0.2,0.5,0.8',
        '--json',
        str(tmp_path / 'sw.json'),
    )
    sw = json.loads((tmp_path / 'sw.json').read_text())
    sp = sw['policies']['policy']
    assert (
        sw['targets'] == [0.2, 0.5, 0.8]
        and sw['questions'] == s['heldout']
        and sw['prices_from'].startswith("the run's calibration")
    )
    assert (
        sp['prices'][0] > sp['prices'][1] > sp['prices'][2]
        and sp['x'][0] <= sp['x'][1] <= sp['x'][2]
        and sp['x'][2] > sp['x'][0]
    )
    apgr = {n: v['apgr_b'] for n, v in sp['vs'].items()}
    assert set(apgr) == {'knn', 'gain', 'mf', 'cascade'}
    assert all(v['apgr_diff_ci95'][0] <= v['apgr_diff'] <= v['apgr_diff_ci95'][1] for v in sp['vs'].values())
    assert 'APGR' in (tmp_path / 'sw.md').read_text() and (tmp_path / 'sw.png').stat().st_size > 1000
    for v in sp[
        'vs'
    ].values():  # the simultaneous band over the curve: wider than one point's, holding each estimate
        alike = all(lo == hi for lo, hi in v['diff_ci95'])  # the policy makes this router's calls: zero width
        assert (alike or v['band_k'] > 1.5) and all(
            lo <= d <= hi for d, (lo, hi) in zip(v['diff'], v['diff_band95'])
        )
    assert any(v['band_k'] > 1.5 for v in sp['vs'].values())
    assert (tmp_path / 'sw.md').read_text().count('over the whole curve (band x') == len(sp['vs'])
    # what the sweep would not use, or would overwrite, is refused by name; --baselines picks routers
    for extra, names in (
        (('--episodes', '5'), ('--episodes',)),
        (('--split', 'train'), ('--split train',)),
        ((), ('--overwrite',)),
        (('--baselines', 'random'), ('knn, gain, mf, cascade',)),
        (('--cost-coef', '10'), ('--cost-coef',)),
    ):
        p = _run(
            'spindleflow-eval',
            '--checkpoint',
            str(run),
            '--sweep',
            'strong_rate=0.5',
            '--json',
            str(tmp_path / 'sw.json'),
            *extra,
            ok=False,
        )
        assert p.returncode == 2 and all(n in p.stderr for n in names), (extra, p.stderr)
    p = _run(
        'spindleflow-eval',
        '--checkpoint',
        str(run),
        '--sweep',
        'spend_share=0.5',
        '--json',
        str(tmp_path / 'x.json'),
        ok=False,
    )
    assert p.returncode == 2 and 'strong_rate' in p.stderr and not (tmp_path / 'x.json').exists()
    _run(
        'spindleflow-eval',
        '--checkpoint',
        str(run),
        '--sweep',
        f'cost_coef=0,{hi}',
        '--baselines',
        'knn',
        '--json',
        str(tmp_path / 'c.json'),
    )
    c = json.loads((tmp_path / 'c.json').read_text())['policies']['policy']
    assert (
        set(c['vs']) == {'knn'} and c['x'][0] > 0.9 and c['x'][1] < 0.1
    )  # free escalation vs the top of the training range
    # an evaluation at a price the user states
    _run(
        'spindleflow-eval',
        '--checkpoint',
        str(run),
        '--split',
        'heldout',
        '--baselines',
        'random',
        '--cost-coef',
        str(hi),
        '--json',
        str(tmp_path / 'e.json'),
    )
    e = json.loads((tmp_path / 'e.json').read_text())
    assert (
        e['cost_coef'] == {'value': hi, 'why': '--cost-coef'}
        and e['logged']['policies']['policy']['x'][0] < 0.1
    )


def test_flags_the_learner_would_ignore_are_refused(logdir, tmp_path):
    d = logdir
    base = [
        '--catalog',
        str(d / 'models.csv'),
        '--backend',
        'recorded',
        '--recorded',
        str(d / 'log.csv'),
        '--out',
        str(tmp_path / 'r'),
    ]
    for extra, names in (
        (('--timesteps', '1000'), ('--timesteps', '--finetune-timesteps', '--log-learner ppo')),
        (('--imitation-teacher', 'bayes-cascade'), ('--imitation-teacher',)),
        (('--log-learner', 'ppo', '--distil-episodes', '10'), ('--distil-episodes',)),
    ):
        p = _run('spindleflow-train', *base, *extra, ok=False)
        assert p.returncode == 2 and all(n in p.stderr for n in names), (extra, p.stderr)
    p = _run(
        'spindleflow-train',
        '--demo-mode',
        '--heldout-fraction',
        '0.3',
        '--out',
        str(tmp_path / 'r'),
        ok=False,
    )
    assert p.returncode == 2 and '--heldout-fraction' in p.stderr
    assert not (tmp_path / 'r').exists()


def test_no_heldout_label_reaches_a_decision(logdir, tmp_path):
    """Flip every held-out grade: the same seed trains bit-identical
    weights (and calibration), so every call is the same."""
    from spindleflow_rl.sim.backends import RecordedOutcomesBackend
    from spindleflow_rl.cli import train_main

    d = logdir
    rows = make_two_model_log(300, seed=5)
    be = RecordedOutcomesBackend.from_file(d / 'log.csv', Catalog.from_file(d / 'models.csv'))
    held = {t.text for t in be.world.bank.tasks() if t.split == 'heldout'}
    assert held
    write_csv(
        [{**r, 'quality': 1 - r['quality']} if r['task'] in held else r for r in rows],
        tmp_path / 'flipped.csv',
    )
    # bit-identity holds at any size: a small distillation (DAgger
    # round included) keeps the check, in a fifth of the time
    runs = []
    for name, log in (('a', d / 'log.csv'), ('b', tmp_path / 'flipped.csv')):
        assert (
            train_main(
                [
                    '--catalog',
                    str(d / 'models.csv'),
                    '--backend',
                    'recorded',
                    '--recorded',
                    str(log),
                    '--out',
                    str(tmp_path),
                    '--run-name',
                    name,
                    '--eval-episodes',
                    '0',
                    *SMALL,
                    '--distil-episodes',
                    '300',
                    '--distil-epochs',
                    '3',
                ]
            )
            == 0
        )
        runs.append(tmp_path / name)
    ia, ib = (json.loads((r / 'log_learning.json').read_text()) for r in runs)
    assert (
        ia['sizes'] == ib['sizes'] and ia['calibration'] == ib['calibration'] and ia['price'] == ib['price']
    )
    wa, wb = _weights(runs[0] / 'final.zip'), _weights(runs[1] / 'final.zip')
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    from spindleflow_rl.logs.routers import log_table

    ta, tb = (
        log_table(LoggedTasks(be)),
        log_table(
            LoggedTasks(
                RecordedOutcomesBackend.from_file(
                    tmp_path / 'flipped.csv', Catalog.from_file(d / 'models.csv')
                )
            )
        ),
    )
    assert not np.array_equal(ta.Y[~ta.train], tb.Y[~tb.train]) and np.array_equal(
        ta.Y[ta.train], tb.Y[tb.train]
    )  # the outcome does change


def test_guard_keeps_the_distilled_policy_when_ppo_hurts(logdir, tmp_path):
    d = logdir
    (tmp_path / 'wild.yaml').write_text(
        'ppo: {learning_rate: 1.0, n_epochs: 10, n_steps: 32, batch_size: 64}\n'
    )
    _run(
        'spindleflow-train',
        '--config',
        str(tmp_path / 'wild.yaml'),
        '--catalog',
        str(d / 'models.csv'),
        '--backend',
        'recorded',
        '--recorded',
        str(d / 'log.csv'),
        '--out',
        str(tmp_path),
        '--run-name',
        'g',
        '--eval-episodes',
        '0',
        '--finetune-timesteps',
        '128',
        *SMALL,
    )
    f = json.loads((tmp_path / 'g' / 'log_learning.json').read_text())['finetune']
    assert (
        f['timesteps'] == 128
        and f['kept'] == 'warm start'
        and f['validation_area_fine_tuned'] < f['validation_area_warm_start']
    ), f
    wf, ww = _weights(tmp_path / 'g' / 'final.zip'), _weights(tmp_path / 'g' / 'warm_start.zip')
    assert all(torch.equal(wf[k], ww[k]) for k in wf)


def test_on_policy_learner_and_teacher_refusal(logdir, tmp_path):
    d = logdir
    (tmp_path / 'tiny.yaml').write_text(
        'train: {n_envs: 2, eval_episodes: 0, progress: false, imitation_teacher: "", torch_threads: 1}\n'
        'ppo: {n_steps: 32, batch_size: 64, n_epochs: 1}\n'
    )
    _run(
        'spindleflow-train',
        '--config',
        str(tmp_path / 'tiny.yaml'),
        '--catalog',
        str(d / 'models.csv'),
        '--backend',
        'recorded',
        '--recorded',
        str(d / 'log.csv'),
        '--log-learner',
        'ppo',
        '--timesteps',
        '128',
        '--cost-coef-range',
        '0,400',
        '--out',
        str(tmp_path / 'runs'),
        '--run-name',
        'ppo',
    )
    run = tmp_path / 'runs' / 'ppo'
    assert (
        json.loads((run / 'latest.json').read_text())['num_timesteps'] == 128
        and not (run / 'log_learning.json').exists()
    )
    _run(
        'spindleflow-eval',
        '--checkpoint',
        str(run),
        '--sweep',
        'strong_rate=0.5',
        '--baselines',
        'knn,cascade',
    )
    sw = json.loads((run / 'sweep.json').read_text())
    assert sw['prices_from'] == 'calibrated now on the training questions' and set(
        sw['policies']['policy']['vs']
    ) == {
        'knn',
        'cascade',
    }
    from spindleflow_rl.sim.backends import RecordedOutcomesBackend

    write_csv([{**r, 'response': ''} for r in make_two_model_log(40, seed=5)], tmp_path / 'noans.csv')
    lt = LoggedTasks(
        RecordedOutcomesBackend.from_file(tmp_path / 'noans.csv', Catalog.from_file(d / 'models.csv'))
    )
    with pytest.raises(ConfigError, match="no answer text"):
        BayesCascadeTeacher(lt)


def test_fixed_price_ppo_run_gets_the_routing_section(logdir, tmp_path):
    d = logdir
    (tmp_path / 'tiny.yaml').write_text(
        'train: {n_envs: 2, progress: false, imitation_teacher: "", torch_threads: 1}\n'
        'ppo: {n_steps: 32, batch_size: 64, n_epochs: 1}\n'
    )
    out = _run(
        'spindleflow-train',
        '--config',
        str(tmp_path / 'tiny.yaml'),
        '--catalog',
        str(d / 'models.csv'),
        '--backend',
        'recorded',
        '--recorded',
        str(d / 'log.csv'),
        '--log-learner',
        'ppo',
        '--timesteps',
        '64',
        '--cost-coef',
        '150',
        '--out',
        str(tmp_path),
        '--run-name',
        'fixed',
    ).stdout
    rep = json.loads((tmp_path / 'fixed' / 'eval.json').read_text())
    assert rep['cost_coef'] == {'value': 150.0, 'why': "the run's fixed cost_coef"} and set(
        rep['logged']['policies']['policy']['vs']
    ) == {'knn', 'gain', 'mf', 'cascade'}
    assert 'headline (held-out' in out
    p = _run(
        'spindleflow-eval', '--checkpoint', str(tmp_path / 'fixed'), '--sweep', 'strong_rate=0.5', ok=False
    )
    assert p.returncode == 2 and 'fixed cost_coef' in p.stderr


def test_a_log_whose_priciest_model_is_not_the_best_gets_a_report(logdir, tmp_path):
    """PGR is undefined when the strongest (priciest) model is no better
    than the cheapest: the report says so, by quality and cost."""
    from spindleflow_rl.sim.backends import load_recorded_outcomes, task_bank_from_outcomes

    rows = make_two_model_log(200, seed=7)
    q = {(r['task'], r['specialist_id']): r['quality'] for r in rows}
    write_csv(rows, tmp_path / 'plain.csv')
    cat = Catalog.from_file(logdir / 'models.csv')
    held = {
        t.text
        for t in task_bank_from_outcomes(load_recorded_outcomes(tmp_path / 'plain.csv', cat), cat).tasks()
        if t.split == 'heldout'
    }
    other = {
        'cheap-model': 'strong-model',
        'strong-model': 'cheap-model',
    }  # held-out grades swapped: the strong model is worse there
    write_csv(
        [
            {**r, 'quality': q[(r['task'], other[r['specialist_id']])]} if r['task'] in held else r
            for r in rows
        ],
        tmp_path / 'flipped.csv',
    )
    out = _run(
        'spindleflow-train',
        '--catalog',
        str(logdir / 'models.csv'),
        '--backend',
        'recorded',
        '--recorded',
        str(tmp_path / 'flipped.csv'),
        '--out',
        str(tmp_path),
        '--run-name',
        'flip',
        '--distil-episodes',
        '300',
        '--distil-epochs',
        '3',
        '--distil-dagger-rounds',
        '0',
        '--no-progress',
    ).stdout
    rep = json.loads((tmp_path / 'flip' / 'eval.json').read_text())
    lg = rep['logged']
    assert (
        lg['pgr_defined'] is False and lg['ends']['strongest']['quality'] <= lg['ends']['cheapest']['quality']
    )
    assert all(
        v['pgr_b'] is None and len(v['quality_diff_ci95']) == 1
        for v in lg['policies']['policy']['vs'].values()
    )
    md = (tmp_path / 'flip' / 'eval.md').read_text()
    assert (
        'PGR is undefined' in md
        and 'policy − it, quality' in md
        and 'headline (held-out' in out
        and 'quality' in out
    )


def test_recorded_errors(tmp_path):
    bad = tmp_path / 'bad.csv'
    bad.write_text('task,specialist_id,quality\nx,y,0.5\n')
    p = _run('spindleflow-train', '--backend', 'recorded', '--recorded', str(bad), ok=False)
    assert p.returncode == 2 and 'missing column(s)' in p.stderr


def test_a_wide_log_with_more_models_than_roster_slots(tmp_path):
    """RouterBench's wide format, no --catalog, 7 models (more than
    the 6 default slots): trained and reported by spend share."""
    import csv, dataclasses
    from spindleflow_rl.logs.multi_model_log import make_multi_model_log, MULTI_MODELS

    models = {
        **MULTI_MODELS,
        **{f"{k}-b": dataclasses.replace(m, base=m.base - 0.7) for k, m in list(MULTI_MODELS.items())[:3]},
    }
    rows = make_multi_model_log(90, seed=3, models=models)
    by = {}
    for r in rows:
        by.setdefault(r['task'], {})[r['specialist_id']] = r
    head = ['sample_id', 'prompt', 'eval_name'] + [
        c for m in models for c in (m, f"{m}|model_response", f"{m}|total_cost")
    ]
    with open(tmp_path / 'wide.csv', 'w', newline='') as f:
        w = csv.writer(f)
        w.writerow(head)
        for n, (task, rs) in enumerate(by.items()):
            w.writerow(
                [n, task, next(iter(rs.values()))['category']]
                + [
                    v
                    for m in models
                    for v in (
                        ('', '', '')
                        if (n == 0 and m == 'mini-b')
                        else (rs[m]['quality'], rs[m]['response'], rs[m]['cost_usd'])
                    )
                ]
            )
    out = _run(
        'spindleflow-train',
        '--backend',
        'recorded',
        '--recorded',
        str(tmp_path / 'wide.csv'),
        '--out',
        str(tmp_path),
        '--run-name',
        'wide',
        '--n-envs',
        '2',
        '--distil-episodes',
        '200',
        '--distil-epochs',
        '2',
        '--distil-dagger-rounds',
        '0',
        '--no-progress',
    ).stdout
    assert 'log: 90 questions x 7 specialists' in out and 'roster slots: 6 -> 7' in out, out[-2000:]
    cfg = json.loads((tmp_path / 'wide' / 'config.json').read_text())
    assert cfg['env']['max_specialists'] == 7
    rep = json.loads((tmp_path / 'wide' / 'eval.json').read_text())
    lg = rep['logged']
    assert rep['kind'] == 'routing' and lg['axis'] == 'spend_share' and len(lg['specialists']) == 7
    assert 'spend share' in (tmp_path / 'wide' / 'eval.md').read_text()
