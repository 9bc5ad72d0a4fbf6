"""Issue 31, one name for the price: a log run is reported at `reward.cost_coef` (the `--cost-coef` flag, a config file,
a sweep's axis) when its config gives one, else at a price calibrated on the training questions; the config records
which layer gave it (`_price_from`). 0.2's `train.log_price` still loads (a saved run quietly, a user's file with an
`OldPathWarning`) as `reward.cost_coef`. Regression: a sweep over `reward.cost_coef` on a log changed nothing, every
trial was reported at its calibrated price."""

import json
import warnings
import pytest
from spindleflow_rl._compat import OldPathWarning
from spindleflow_rl.agent.runs import PRICE_FROM, load_run_config
from spindleflow_rl.core.catalog import Catalog
from spindleflow_rl.commands.sweep import run_sweep
from spindleflow_rl.logs.routers import make_two_model_log, write_csv, TWO_MODEL_CATALOG
from spindleflow_rl.training.log_runs import LOG_RUN_FILE, given_price

COLS = ['id', 'role', 'domain', 'cost', 'latency', 'reliability', 'capability']


@pytest.fixture(scope='module')
def logdir(tmp_path_factory):
    d = tmp_path_factory.mktemp('price')
    write_csv(make_two_model_log(200, seed=3), d / 'log.csv')
    write_csv(TWO_MODEL_CATALOG, d / 'models.csv', COLS)
    assert not {'cheap-model', 'strong-model'} & set(Catalog.default().ids)
    return d


def _log(d):
    return {'backend': 'recorded', 'recorded': str(d / 'log.csv'), 'catalog': str(d / 'models.csv')}


def test_where_a_log_runs_price_comes_from(logdir, tmp_path):
    d = logdir
    cfg = load_run_config(None, {'train': _log(d)}, 'the command line')
    assert PRICE_FROM not in cfg and given_price(cfg) == (None, '')  # none given: the run calibrates
    cfg = load_run_config(None, {'train': _log(d), 'reward': {'cost_coef': 0.0}}, 'the command line')
    assert given_price(cfg) == (0.0, '--cost-coef')  # 0 is a price (free escalation), not "calibrate"
    f = tmp_path / 'mine.yaml'
    f.write_text('reward:\n  cost_coef: 40\n')
    cfg = load_run_config(f, {'train': _log(d)}, 'the command line')
    assert given_price(cfg) == (40.0, f"reward.cost_coef from {f}")
    sim = load_run_config(None, {'reward': {'cost_coef': 0.5}}, 'the command line')
    assert (
        PRICE_FROM not in sim and sim['reward'].cost_coef == 0.5
    )  # the simulator: the reward's price, as ever


def test_the_retired_log_price_loads_as_the_price(logdir, tmp_path):
    d = logdir
    f = tmp_path / 'old.yaml'
    f.write_text('train:\n  log_price: 25\n')
    with pytest.warns(OldPathWarning, match=r'train.log_price is now reward.cost_coef'):
        cfg = load_run_config(f, {'train': _log(d)}, 'the command line')
    assert (
        given_price(cfg) == (25.0, f"reward.cost_coef from {f}") and 'log_price' not in cfg['train'].to_dict()
    )
    f.write_text('train:\n  log_price: -1\n')  # 0.2's "calibrate": no price
    with pytest.warns(OldPathWarning):
        cfg = load_run_config(f, {'train': _log(d)}, 'the command line')
    assert given_price(cfg) == (None, '')
    # a 0.2 run's saved config (the base of a resume): read without a warning, its --cost-coef kept
    old = {'train': {**_log(d), 'log_price': 12.0}, 'reward': {'cost_coef': 0.0}, '_run_dir': str(tmp_path)}
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        cfg = load_run_config(None, {}, 'the command line', base=old)
        assert given_price(cfg) == (12.0, "reward.cost_coef from the run's --cost-coef")
        calibrated = {**old, 'train': {**old['train'], 'log_price': -1.0}}
        assert given_price(load_run_config(None, {}, 'the command line', base=calibrated)) == (None, '')
        # this release's saved config: its record of where the price came from is kept
        new = {'train': _log(d), 'reward': {'cost_coef': 7.0}, PRICE_FROM: 'the command line'}
        assert given_price(load_run_config(None, {}, 'the command line', base=new)) == (7.0, '--cost-coef')
        # a calibrated run's saved price is its calibration, not a given price
        cal = {'train': _log(d), 'reward': {'cost_coef': 7.0}}
        assert given_price(load_run_config(None, {}, 'the command line', base=cal)) == (None, '')


def test_a_sweep_over_the_price_of_a_log_run_reports_each_trial_at_its_price(logdir, tmp_path):
    d = logdir
    tiny = {
        **{f'train.{k}': v for k, v in _log(d).items()},
        'train.n_envs': 2,
        'train.progress': False,
        'train.torch_threads': 1,
        'train.distil_episodes': 200,
        'train.distil_epochs': 5,
    }
    rec = run_sweep(
        sweep={'reward.cost_coef': [0.0, 1e6]},
        set=tiny,
        out=tmp_path / 'sw',
        eval_episodes=0,
        engine='local',
        quiet=True,
    )
    got = []
    for r in rec['trials']:
        run = r['run_dir']
        info = json.loads((tmp_path / 'sw' / 'trials' / run.split('/')[-1] / LOG_RUN_FILE).read_text())
        cfg = json.loads((tmp_path / 'sw' / 'trials' / run.split('/')[-1] / 'config.json').read_text())
        got.append((info['price'], info['price_why'], cfg['reward']['cost_coef'], cfg[PRICE_FROM]))
    assert got == [
        (0.0, 'reward.cost_coef from --sweep/--set', 0.0, '--sweep/--set'),
        (1e6, 'reward.cost_coef from --sweep/--set', 1e6, '--sweep/--set'),
    ]


def test_a_ppo_log_run_is_reported_at_its_given_price(logdir, tmp_path):
    "The on-policy learner on a log, cost-conditioned over a range, with `--cost-coef`: reported at that price."
    from spindleflow_rl.cli import train_main
    from spindleflow_rl.training.log_runs import run_price

    d = logdir
    (tmp_path / 'tiny.yaml').write_text(
        'train: {n_envs: 2, progress: false, imitation_teacher: "", torch_threads: 1, eval_episodes: 0}\n'
        'ppo: {n_steps: 16, batch_size: 32, n_epochs: 1}\n'
    )
    common = [
        '--config',
        str(tmp_path / 'tiny.yaml'),
        '--catalog',
        str(d / 'models.csv'),
        '--backend',
        'recorded',
    ]
    common += ['--recorded', str(d / 'log.csv'), '--log-learner', 'ppo', '--timesteps', '32']
    common += ['--cost-coef-range', '0,300', '--out', str(tmp_path)]
    assert train_main(common + ['--cost-coef', '150', '--run-name', 'given']) == 0
    assert train_main(common + ['--run-name', 'ranged']) == 0
    assert run_price(tmp_path / 'given') == (150.0, "the run's --cost-coef")
    assert run_price(tmp_path / 'ranged') == (
        150.0,
        "the middle of the run's range 0-300; --cost-coef to choose",
    )
    saved = json.loads((tmp_path / 'given' / 'config.json').read_text())
    assert saved[PRICE_FROM] == 'the command line' and saved['reward']['cost_coef'] == 150.0
    assert PRICE_FROM not in json.loads((tmp_path / 'ranged' / 'config.json').read_text())
