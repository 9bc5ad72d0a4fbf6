"""The Gymnasium / Stable-Baselines3 idioms on `SpindleFlow-v0`: `make_vec_env` (which asks for `render_mode='rgb_array'`),
each render mode through `gymnasium.make`, `RecordEpisodeStatistics`, and `RecordVideo` writing a real mp4 that is read
back frame by frame. Needs `SpindleFlowEnv.metadata['render_modes']` to list 'ansi' and 'rgb_array' (chapter 07)."""

import os
import numpy as np
import pytest
import gymnasium as gym
import spindleflow_rl  # registers SpindleFlow-v0
from spindleflow_rl.envs.env import SpindleFlowEnv, encode_action
from spindleflow_rl.core.world import default_world
from spindleflow_rl.envs.render import FRAME_SHAPE, render_frame, render_ansi

PLAN = [dict(slots=[0, 1], mode='parallel'), dict(slots=[2], mode='sequential'), dict(stop=True)]


def play(env, seed=3):
    "Reset with `seed` and play PLAN; return (rewards, last info). Works on a wrapped env."
    env.reset(seed=seed)
    M = env.unwrapped.cfg.max_specialists
    rewards, info = [], {}
    for a in PLAN:
        _, r, term, trunc, info = env.step(encode_action(M, **a))
        rewards.append(r)
        if term or trunc:
            break
    return rewards, info


def test_render_modes_declared():
    modes = SpindleFlowEnv.metadata.get('render_modes', [])
    assert 'ansi' in modes and 'rgb_array' in modes, (
        f"SpindleFlowEnv.metadata['render_modes'] is {modes}; it must list 'ansi' and 'rgb_array' (render() returns "
        "spindleflow_rl.envs.render.render_ansi / render_frame)."
    )


def test_make_vec_env_sb3():
    from stable_baselines3.common.env_util import make_vec_env

    default_world()  # the embedded world is shared by both envs
    venv = make_vec_env('SpindleFlow-v0', n_envs=2, seed=0)
    try:
        obs = venv.reset()
        assert obs.shape == (2,) + venv.observation_space.shape
        assert venv.get_attr('render_mode') == ['rgb_array', 'rgb_array']
        rng = np.random.default_rng(0)
        for _ in range(3):
            obs, r, done, infos = venv.step(
                rng.uniform(-1, 1, (2,) + venv.action_space.shape).astype(np.float32)
            )
            assert obs.shape[0] == 2 and r.shape == (2,) and np.isfinite(r).all()
        frames = venv.get_images()
        assert [f.shape for f in frames] == [FRAME_SHAPE] * 2
    finally:
        venv.close()


@pytest.mark.parametrize('mode', ['ansi', 'rgb_array'])
def test_render_mode_through_make(mode):
    env = gym.make('SpindleFlow-v0', render_mode=mode)
    env.reset(seed=3)
    first = env.render()
    play(env)
    out = env.render()
    u = env.unwrapped
    if mode == 'ansi':
        assert isinstance(out, str) and out == render_ansi(u)
        assert all(sid in out for sid in u.roster[:3]) and out.splitlines()[0].endswith('[done]')
        assert first != out
    else:
        assert out.dtype == np.uint8 and out.shape == FRAME_SHAPE
        assert np.array_equal(out, render_frame(u)) and out.std() > 20
        assert np.abs(out.astype(int) - first).mean() > 0.5
    env.close()


def test_render_none_returns_none():
    env = gym.make('SpindleFlow-v0')
    env.reset(seed=3)
    assert env.unwrapped.render_mode is None and env.render() is None


def test_record_episode_statistics():
    env = gym.wrappers.RecordEpisodeStatistics(gym.make('SpindleFlow-v0'))
    rewards, info = play(env)
    assert 'episode' in info, (
        'RecordEpisodeStatistics did not add episode statistics at the end of the episode'
    )
    np.testing.assert_allclose(float(info['episode']['r']), sum(rewards), rtol=1e-5, atol=1e-6)
    assert int(info['episode']['l']) == len(rewards) == 3
    np.testing.assert_allclose(sum(rewards), env.unwrapped.return_, rtol=1e-6)


def test_record_video_writes_mp4(tmp_path):
    # moviepy and imageio-ffmpeg (which ships an ffmpeg binary) come with the [video] extra, which [dev] includes
    try:
        import moviepy, imageio_ffmpeg  # noqa: F401
    except ImportError as e:
        pytest.fail(f"RecordVideo needs moviepy and imageio-ffmpeg: pip install -e '.[video]' ({e})")
    import imageio.v2 as iio

    env = gym.wrappers.RecordVideo(
        gym.make('SpindleFlow-v0', render_mode='rgb_array'),
        str(tmp_path / 'videos'),
        episode_trigger=lambda i: True,
        name_prefix='sf',
        disable_logger=True,
    )
    rewards, _ = play(env)
    env.close()
    vids = sorted((tmp_path / 'videos').glob('*.mp4'))
    assert len(vids) == 1 and vids[0].stat().st_size > 1000, vids
    r = iio.get_reader(str(vids[0]), 'ffmpeg')
    frames = [f for f in r]
    r.close()
    assert len(frames) == len(rewards) + 1  # the reset frame and one per step
    assert frames[0].shape == FRAME_SHAPE
    assert np.abs(frames[-1].astype(int) - frames[0]).mean() > 0.5  # the episode moved on
