"""`SpindleFlowPPO.learn` leaves nothing in the temp folder. Without a logger of the caller's, SB3 makes an empty
`SB3-<date>` folder there on every `learn` and never removes it (a log run's guarded fine-tune, every chapter and
script that calls `model.learn`); ours logs to stdout only. With the caller's logger or `tensorboard_log`, SB3's
behaviour is kept."""

import tempfile
import pytest
from stable_baselines3.common.logger import Logger
from spindleflow_rl.agent.network import make_model, SpindleFlowPPO
from spindleflow_rl.envs.env import SpindleFlowEnv


@pytest.fixture
def tmpdir_as_temp(tmp_path, monkeypatch):
    "Python's temp folder (what SB3's logger uses) pointed at an empty folder of this test."
    monkeypatch.setattr(tempfile, 'tempdir', str(tmp_path))
    return tmp_path


def sb3_folders(d):
    "SB3's default log folders in `d` (torch keeps a cache folder of its own there, reused, not counted)."
    return sorted(p.name for p in d.iterdir() if p.name.startswith('SB3-'))


def _tiny(verbose=0, **kw):
    return make_model(
        SpindleFlowEnv(), seed=0, device='cpu', n_steps=8, batch_size=8, n_epochs=1, verbose=verbose, **kw
    )


@pytest.mark.parametrize('verbose', [0, 1])
def test_learn_makes_no_folder_in_the_temp_folder(tmpdir_as_temp, verbose, capsys):
    m = _tiny(verbose)
    m.learn(8)
    assert sb3_folders(tmpdir_as_temp) == [] and m.num_timesteps >= 8
    out = capsys.readouterr().out
    # verbose 1 still prints SB3's table of training figures, without SB3's 'Logging to <temp folder>' line
    assert ('total_timesteps' in out) == (verbose == 1) and 'Logging to' not in out
    # a loaded model, whose logger SB3 does not save, neither
    m.save(tmpdir_as_temp / 'm.zip')
    m2 = SpindleFlowPPO.load(tmpdir_as_temp / 'm.zip', env=m.get_env(), device='cpu')
    m2.learn(8)
    assert sb3_folders(tmpdir_as_temp) == []


def test_the_callers_logger_and_tensorboard_log_are_kept(tmpdir_as_temp):
    plain = _tiny()  # SB3's behaviour, which the fix is measured against: a folder per learn
    super(SpindleFlowPPO, plain)._setup_learn(8)
    assert len(sb3_folders(tmpdir_as_temp)) == 1
    m = _tiny()
    own = Logger(None, [])
    m.set_logger(own)
    m.learn(8)
    assert m.logger is own
    tb = tmpdir_as_temp / 'tb'
    m = _tiny(tensorboard_log=str(tb))
    m.learn(8)
    assert tb.exists() and any(tb.iterdir())  # SB3's own TensorBoard folder, as asked
