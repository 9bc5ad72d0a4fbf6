"""Transfer (chapter 19): `--init-from` copies a trained policy's weights into a new run on another roster, refuses a
policy whose observation layout differs, and the fine-tuning curve's first point of the init-from arm is exactly the
source policy (small scale, in-process)."""

import json
import pytest
import torch
from spindleflow_rl.training.train import init_from_checkpoint
from spindleflow_rl.cli import train_main as main
from spindleflow_rl.agent.runs import load_run_config, make_vec_env, DEMO_POLICY, file_sha256
from spindleflow_rl.agent.network import make_model, SpindleFlowPPO
from spindleflow_rl.agent.policies import ModelPolicy
from spindleflow_rl.commands.transfer import TRANSFER_CATALOG, transfer_config, transfer_curve, evaluate_on
from spindleflow_rl.agent.runs import build_world

TINY = {
    'n_envs': 2,
    'vec_env': 'dummy',
    'eval_episodes': 0,
    'progress': False,
    'torch_threads': 1,
    'imitation_teacher': '',
}
PPO = {'n_steps': 16, 'batch_size': 32, 'n_epochs': 1}


def _yaml(tmp_path, extra=''):
    p = tmp_path / 'tiny.yaml'
    (tmp_path / 'no.env').write_text('')  # an empty env file: no .env of the working folder is read
    p.write_text(
        'train:\n'
        + ''.join(
            f"  {k}: {v!r}\n"
            if isinstance(v, str)
            else f"  {k}: {str(v).lower() if isinstance(v, bool) else v}\n"
            for k, v in TINY.items()
        )
        + 'ppo:\n'
        + ''.join(f"  {k}: {v}\n" for k, v in PPO.items())
        + extra
    )
    return p


def test_init_from_copies_the_demo_policy_weights():
    cfg = transfer_config(**TINY, timesteps=32)
    cfg['ppo'] = {**cfg['ppo'], **PPO}
    venv = make_vec_env(cfg, 1, 0, 1, vec_env='dummy')
    try:
        model = make_model(venv, cfg['policy'], seed=0, device='cpu', **cfg['ppo'])
        ref = SpindleFlowPPO.load(DEMO_POLICY, device='cpu').policy.state_dict()
        mine = model.policy.state_dict()
        assert not all(torch.equal(mine[k], ref[k]) for k in ref)  # a fresh model is not the demo policy ...
        info = init_from_checkpoint(model, 'demo', quiet=True)
        mine = model.policy.state_dict()
        assert set(mine) == set(ref) and all(torch.equal(mine[k], ref[k]) for k in ref)  # ... and then it is
        assert info['sha256'] == file_sha256(DEMO_POLICY) and info['source_timesteps'] > 0
    finally:
        venv.close()


def test_init_from_on_the_command_line(tmp_path):
    args = [
        '--config',
        str(_yaml(tmp_path)),
        '--out',
        str(tmp_path),
        '--demo-mode',
        '--no-progress',
        '--timesteps',
        '32',
        '--env-file',
        str(tmp_path / 'no.env'),
        '--catalog',
        str(TRANSFER_CATALOG),
    ]
    assert main([*args, '--run-name', 'ft', '--init-from', 'demo']) == 0
    run = tmp_path / 'ft'
    init = json.loads((run / 'init_from.json').read_text())
    assert init['init_from'].endswith('demo_policy.zip') and init['sha256'] == file_sha256(DEMO_POLICY)
    assert not (run / 'imitation.json').exists()
    assert json.loads((run / 'config.json').read_text())['train']['init_from'] == 'demo'
    # a run folder works as a source too
    assert main([*args, '--run-name', 'ft2', '--init-from', str(run)]) == 0
    assert json.loads((tmp_path / 'ft2' / 'init_from.json').read_text())['init_from'].endswith('.zip')


def test_init_from_refuses_a_different_observation_layout(tmp_path, capsys):
    cfg = _yaml(tmp_path, 'env:\n  max_specialists: 4\n')
    args = [
        '--config',
        str(cfg),
        '--out',
        str(tmp_path),
        '--demo-mode',
        '--no-progress',
        '--timesteps',
        '32',
        '--env-file',
        str(tmp_path / 'no.env'),
        '--run-name',
        'm4',
    ]
    assert main([*args, '--init-from', 'demo']) == 2
    err = capsys.readouterr().err
    assert '--init-from demo: that policy sees observations of shape' in err and 'train from scratch' in err
    assert not (tmp_path / 'm4').exists()
    assert main([*args, '--init-from', str(tmp_path / 'nowhere.zip')]) == 2
    assert "--init-from" in capsys.readouterr().err


def test_init_from_refuses_a_policy_without_the_cost_scalar(tmp_path, capsys):
    "The demo policy was trained without `cost_coef_range`: a run that shows the policy the price has one scalar more."
    from spindleflow_rl.core.config import EnvConfig

    if 'cost_coef_range' not in EnvConfig.__dataclass_fields__:
        pytest.skip('EnvConfig.cost_coef_range (chapter 00) not there yet')
    args = [
        '--config',
        str(_yaml(tmp_path)),
        '--out',
        str(tmp_path),
        '--demo-mode',
        '--no-progress',
        '--timesteps',
        '32',
        '--env-file',
        str(tmp_path / 'no.env'),
        '--run-name',
        'cc',
        '--init-from',
        'demo',
        '--cost-coef-range',
        '0,2',
    ]
    assert main(args) == 2
    assert (
        'that policy sees observations of shape' in capsys.readouterr().err and not (tmp_path / 'cc').exists()
    )


def test_fine_tuning_curve_starts_at_the_source_policy(tmp_path):
    res = transfer_curve(
        milestones=(0, 32),
        arms=('init-from-demo', 'scratch'),
        episodes=4,
        out=tmp_path,
        ppo=PPO,
        json_out=tmp_path / 'curve.json',
        n_envs=2,
        torch_threads=1,
    )
    assert json.loads((tmp_path / 'curve.json').read_text()) == json.loads(json.dumps(res))
    assert set(res['arms']) == {'init-from-demo', 'scratch'} and set(res['baselines']) == {
        'adaptive-planner',
        'random',
    }
    for cells in res['arms'].values():
        assert sorted(cells) == ['0', '32'] and cells['32']['timesteps'] >= 32
    cfg = transfer_config()
    tab, _ = evaluate_on(
        build_world(cfg),
        {'policy': ModelPolicy(SpindleFlowPPO.load(DEMO_POLICY, device='cpu'))},
        cfg['env'],
        4,
        0,
    )
    assert res['arms']['init-from-demo']['0']['return'] == pytest.approx(tab['policy']['return'], abs=1e-9)
