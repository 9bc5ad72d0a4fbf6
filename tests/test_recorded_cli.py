"""Your own models and logs, end to end from the command line, as the README tells a user: a catalog whose ids are not
in the shipped one (`cheap-model`, `strong-model`), a log of their answers, then `spindleflow-train` (the
full-information learner, chapter 18c), its evaluation (the tuned routers at the policy's strong-call rate, at one
stated price) and `spindleflow-eval --sweep strong_rate=...` (JSON, markdown, PNG); flags a command would ignore are
refused by name; no held-out label reaches a decision; the PPO guard; the on-policy learner still available."""
import json, os, shutil, subprocess
import numpy as np
import pytest
import torch
from spindleflow_rl.routers import make_two_model_log, write_csv, TWO_MODEL_CATALOG, LoggedTasks, BayesCascadeTeacher
from spindleflow_rl.catalog import Catalog
from spindleflow_rl.config import ConfigError

COLS = ['id', 'role', 'domain', 'cost', 'latency', 'reliability', 'capability']
SMALL = ['--n-envs', '2', '--distil-episodes', '1500', '--distil-epochs', '30', '--no-progress']

def _run(*cmd, ok=True):
    env = {**os.environ, 'HF_HUB_OFFLINE': '1', 'TRANSFORMERS_OFFLINE': '1'}
    p = subprocess.run([shutil.which(cmd[0]), *cmd[1:]], env=env, capture_output=True, text=True, timeout=900)
    if ok: assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert 'Traceback' not in p.stdout + p.stderr, p.stderr[-3000:]
    return p

@pytest.fixture(scope='module')
def logdir(tmp_path_factory):
    d = tmp_path_factory.mktemp('own')
    write_csv(make_two_model_log(300, seed=5), d/'log.csv'); write_csv(TWO_MODEL_CATALOG, d/'models.csv', COLS)
    assert not {'cheap-model', 'strong-model'} & set(Catalog.default().ids)
    return d

def _weights(z):
    from spindleflow_rl.checkpoints import load_policy
    return load_policy(z).policy.state_dict()

def test_full_information_run_eval_and_sweep(logdir, tmp_path):
    d = logdir
    out = _run('spindleflow-train', '--catalog', str(d/'models.csv'), '--backend', 'recorded', '--recorded', str(d/'log.csv'),
               '--out', str(tmp_path/'runs'), '--run-name', 'mine', *SMALL).stdout
    run = tmp_path/'runs'/'mine'
    info = json.loads((run/'log_learning.json').read_text())
    s = info['sizes']; assert s['train'] + s['heldout'] == 300 and 30 < s['heldout'] < 90 and s['fitting'] == s['train']
    assert out.index('log: 300 questions x 2 specialists') < out.index('fitting the Q') < out.index('distilling')   # sizes first
    assert {'config.json', 'final.zip', 'warm_start.zip', 'latest.json', 'train_summary.json', 'eval.json'} <= {p.name for p in run.iterdir()}
    lo, hi = info['cost_coef_range']; assert lo == 0 and hi > info['price'] > 0 and info['cost_coef_range_from'] == 'the log'
    assert json.loads((run/'config.json').read_text())['env']['cost_coef_range'] == [lo, hi]
    # the headline is the routing table at the run's price, not the simulator's baselines
    heads = [l for l in out.splitlines() if l.startswith('headline')]
    assert len(heads) == 1 and heads[0].startswith(f"headline (held-out, {s['heldout']} questions") and 'knn' in heads[0], heads
    rep = json.loads((run/'eval.json').read_text())
    assert rep['cost_coef']['value'] == info['price'] and 'calibrated to a strong-call rate of 0.5' in rep['cost_coef']['why']
    lg = rep['logged']; pol = lg['policies']['policy']
    assert lg['questions'] == s['heldout'] and lg['cost_coef'] == info['price'] and set(pol['vs']) == {'knn', 'gain', 'mf', 'cascade'}
    for v in pol['vs'].values(): assert v['x_router'] == pytest.approx(pol['x'], abs=1e-12)       # each router at the policy's rate
    assert {v['episodes'] for v in rep['splits']['heldout'].values()} == {s['heldout']}           # every held-out question once
    assert 'policy − it' in (run/'eval.md').read_text()
    # the sweep, by strong-call rate
    _run('spindleflow-eval', '--checkpoint', str(run), '--sweep', 'strong_rate=0.2,0.5,0.8', '--json', str(tmp_path/'sw.json'))
    sw = json.loads((tmp_path/'sw.json').read_text()); sp = sw['policies']['policy']
    assert sw['targets'] == [0.2, 0.5, 0.8] and sw['questions'] == s['heldout'] and sw['prices_from'].startswith("the run's calibration")
    assert sp['prices'][0] > sp['prices'][1] > sp['prices'][2] and sp['x'][0] <= sp['x'][1] <= sp['x'][2] and sp['x'][2] > sp['x'][0]
    apgr = {n: v['apgr_b'] for n, v in sp['vs'].items()}; assert set(apgr) == {'knn', 'gain', 'mf', 'cascade'}
    assert all(v['apgr_diff_ci95'][0] <= v['apgr_diff'] <= v['apgr_diff_ci95'][1] for v in sp['vs'].values())
    assert 'APGR' in (tmp_path/'sw.md').read_text() and (tmp_path/'sw.png').stat().st_size > 1000
    # what the sweep would not use, or would overwrite, is refused by name; --baselines picks routers
    for extra, names in ((('--episodes', '5'), ('--episodes',)), (('--split', 'train'), ('--split train',)), ((), ('--overwrite',)),
                         (('--baselines', 'random'), ('knn, gain, mf, cascade',)), (('--cost-coef', '10'), ('--cost-coef',))):
        p = _run('spindleflow-eval', '--checkpoint', str(run), '--sweep', 'strong_rate=0.5', '--json', str(tmp_path/'sw.json'), *extra, ok=False)
        assert p.returncode == 2 and all(n in p.stderr for n in names), (extra, p.stderr)
    p = _run('spindleflow-eval', '--checkpoint', str(run), '--sweep', 'spend_share=0.5', '--json', str(tmp_path/'x.json'), ok=False)
    assert p.returncode == 2 and 'strong_rate' in p.stderr and not (tmp_path/'x.json').exists()
    _run('spindleflow-eval', '--checkpoint', str(run), '--sweep', f'cost_coef=0,{hi}', '--baselines', 'knn', '--json', str(tmp_path/'c.json'))
    c = json.loads((tmp_path/'c.json').read_text())['policies']['policy']
    assert set(c['vs']) == {'knn'} and c['x'][0] > 0.9 and c['x'][1] < 0.1       # free escalation vs the top of the training range
    # an evaluation at a price the user states
    _run('spindleflow-eval', '--checkpoint', str(run), '--split', 'heldout', '--baselines', 'random', '--cost-coef', str(hi),
         '--json', str(tmp_path/'e.json'))
    e = json.loads((tmp_path/'e.json').read_text())
    assert e['cost_coef'] == {'value': hi, 'why': '--cost-coef'} and e['logged']['policies']['policy']['x'][0] < 0.1

def test_flags_the_learner_would_ignore_are_refused(logdir, tmp_path):
    d = logdir; base = ['--catalog', str(d/'models.csv'), '--backend', 'recorded', '--recorded', str(d/'log.csv'), '--out', str(tmp_path/'r')]
    for extra, names in ((('--timesteps', '1000'), ('--timesteps', '--finetune-timesteps', '--log-learner ppo')),
                         (('--imitation-teacher', 'bayes-cascade'), ('--imitation-teacher',)),
                         (('--log-learner', 'ppo', '--distil-episodes', '10'), ('--distil-episodes',))):
        p = _run('spindleflow-train', *base, *extra, ok=False)
        assert p.returncode == 2 and all(n in p.stderr for n in names), (extra, p.stderr)
    p = _run('spindleflow-train', '--demo-mode', '--heldout-fraction', '0.3', '--out', str(tmp_path/'r'), ok=False)
    assert p.returncode == 2 and '--heldout-fraction' in p.stderr
    assert not (tmp_path/'r').exists()

def test_no_heldout_label_reaches_a_decision(logdir, tmp_path):
    "Flip every held-out grade: the same seed trains bit-identical weights (and calibration), so every call is the same."
    from spindleflow_rl.backends import RecordedOutcomesBackend
    from spindleflow_rl.cli import train_main
    d = logdir; rows = make_two_model_log(300, seed=5)
    be = RecordedOutcomesBackend.from_file(d/'log.csv', Catalog.from_file(d/'models.csv'))
    held = {t.text for t in be.world.bank.tasks() if t.split == 'heldout'}; assert held
    write_csv([{**r, 'quality': 1 - r['quality']} if r['task'] in held else r for r in rows], tmp_path/'flipped.csv')
    runs = []
    for name, log in (('a', d/'log.csv'), ('b', tmp_path/'flipped.csv')):
        assert train_main(['--catalog', str(d/'models.csv'), '--backend', 'recorded', '--recorded', str(log), '--out', str(tmp_path),
                           '--run-name', name, '--eval-episodes', '0', '--torch-threads', '1', *SMALL]) == 0
        runs.append(tmp_path/name)
    ia, ib = (json.loads((r/'log_learning.json').read_text()) for r in runs)
    assert ia['sizes'] == ib['sizes'] and ia['calibration'] == ib['calibration'] and ia['price'] == ib['price']
    wa, wb = _weights(runs[0]/'final.zip'), _weights(runs[1]/'final.zip')
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    from spindleflow_rl.logs_learning import log_table
    ta, tb = log_table(LoggedTasks(be)), log_table(LoggedTasks(RecordedOutcomesBackend.from_file(tmp_path/'flipped.csv', Catalog.from_file(d/'models.csv'))))
    assert not np.array_equal(ta.Y[~ta.train], tb.Y[~tb.train]) and np.array_equal(ta.Y[ta.train], tb.Y[tb.train])   # the outcome does change

def test_guard_keeps_the_distilled_policy_when_ppo_hurts(logdir, tmp_path):
    d = logdir; (tmp_path/'wild.yaml').write_text('ppo: {learning_rate: 1.0, n_epochs: 10, n_steps: 32, batch_size: 64}\n')
    _run('spindleflow-train', '--config', str(tmp_path/'wild.yaml'), '--catalog', str(d/'models.csv'), '--backend', 'recorded',
         '--recorded', str(d/'log.csv'), '--out', str(tmp_path), '--run-name', 'g', '--eval-episodes', '0', '--finetune-timesteps', '128', *SMALL)
    f = json.loads((tmp_path/'g'/'log_learning.json').read_text())['finetune']
    assert f['timesteps'] == 128 and f['kept'] == 'warm start' and f['validation_area_fine_tuned'] < f['validation_area_warm_start'], f
    wf, ww = _weights(tmp_path/'g'/'final.zip'), _weights(tmp_path/'g'/'warm_start.zip')
    assert all(torch.equal(wf[k], ww[k]) for k in wf)

def test_on_policy_learner_and_teacher_refusal(logdir, tmp_path):
    d = logdir; (tmp_path/'tiny.yaml').write_text('train: {n_envs: 2, eval_episodes: 0, progress: false, imitation_teacher: ""}\n'
                                                   'ppo: {n_steps: 32, batch_size: 64, n_epochs: 1}\n')
    _run('spindleflow-train', '--config', str(tmp_path/'tiny.yaml'), '--catalog', str(d/'models.csv'), '--backend', 'recorded',
         '--recorded', str(d/'log.csv'), '--log-learner', 'ppo', '--timesteps', '128', '--cost-coef-range', '0,400',
         '--out', str(tmp_path/'runs'), '--run-name', 'ppo')
    run = tmp_path/'runs'/'ppo'
    assert json.loads((run/'latest.json').read_text())['num_timesteps'] == 128 and not (run/'log_learning.json').exists()
    _run('spindleflow-eval', '--checkpoint', str(run), '--sweep', 'strong_rate=0.5', '--baselines', 'knn,cascade')
    sw = json.loads((run/'sweep.json').read_text())
    assert sw['prices_from'] == 'calibrated now on the training questions' and set(sw['policies']['policy']['vs']) == {'knn', 'cascade'}
    from spindleflow_rl.backends import RecordedOutcomesBackend
    write_csv([{**r, 'response': ''} for r in make_two_model_log(40, seed=5)], tmp_path/'noans.csv')
    lt = LoggedTasks(RecordedOutcomesBackend.from_file(tmp_path/'noans.csv', Catalog.from_file(d/'models.csv')))
    with pytest.raises(ConfigError, match="no answer text"): BayesCascadeTeacher(lt)

def test_fixed_price_ppo_run_gets_the_routing_section(logdir, tmp_path):
    d = logdir; (tmp_path/'tiny.yaml').write_text('train: {n_envs: 2, progress: false, imitation_teacher: ""}\n'
                                                   'ppo: {n_steps: 32, batch_size: 64, n_epochs: 1}\n')
    out = _run('spindleflow-train', '--config', str(tmp_path/'tiny.yaml'), '--catalog', str(d/'models.csv'), '--backend', 'recorded',
               '--recorded', str(d/'log.csv'), '--log-learner', 'ppo', '--timesteps', '64', '--cost-coef', '150',
               '--out', str(tmp_path), '--run-name', 'fixed').stdout
    rep = json.loads((tmp_path/'fixed'/'eval.json').read_text())
    assert rep['cost_coef'] == {'value': 150.0, 'why': "the run's fixed cost_coef"} and set(rep['logged']['policies']['policy']['vs']) == {'knn', 'gain', 'mf', 'cascade'}
    assert 'headline (held-out' in out
    p = _run('spindleflow-eval', '--checkpoint', str(tmp_path/'fixed'), '--sweep', 'strong_rate=0.5', ok=False)
    assert p.returncode == 2 and 'fixed cost_coef' in p.stderr

def test_recorded_errors(tmp_path):
    bad = tmp_path/'bad.csv'; bad.write_text('task,specialist_id,quality\nx,y,0.5\n')
    p = _run('spindleflow-train', '--backend', 'recorded', '--recorded', str(bad), ok=False)
    assert p.returncode == 2 and 'missing column(s)' in p.stderr
