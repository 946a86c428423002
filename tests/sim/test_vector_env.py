"""The vector env (gymnasium ``AsyncVectorEnv``, one subprocess per env, next-step auto-reset)
steps N environments exactly as N separate environments seeded the same way."""
from __future__ import annotations

import numpy as np
import pytest

from vlnverse.core.errors import ConfigError
from vlnverse.sim.gym_env import VLNVerseNavEnv
from vlnverse.sim.sensors import LidarSpec
from vlnverse.sim.vector_env import make_vector_env

N = 2
SEED = 11
# forward, left, forward, STOP (episode ends: auto-reset on the next step), forward, right, forward
ACTIONS = [[1, 1], [2, 1], [1, 3], [0, 1], [1, 0], [3, 1], [1, 1]]


def _serial(room, sensors):
    envs = [VLNVerseNavEnv(room, sensors=sensors) for _ in range(N)]
    obs = [env.reset(seed=SEED + i)[0] for i, env in enumerate(envs)]
    out = [{k: np.stack([o[k] for o in obs]) for k in obs[0]}]
    done = [False] * N
    for step in ACTIONS:
        row = []
        for i, env in enumerate(envs):
            if done[i]:  # next-step auto-reset: this step's action is ignored
                o, _ = env.reset()
                done[i] = False
            else:
                o, _, terminated, truncated, _ = env.step(step[i])
                done[i] = terminated or truncated
            row.append(o)
        out.append({k: np.stack([o[k] for o in row]) for k in row[0]})
    for env in envs:
        env.close()
    return out


def test_async_vector_env_matches_serial_envs(room):
    sensors = [LidarSpec("lidar", beams=36)]
    expected = _serial(room, sensors)
    venv = make_vector_env(room, N, sensors=sensors)
    try:
        obs, _ = venv.reset(seed=SEED)
        got = [obs]
        for step in ACTIONS:
            obs, rewards, terminated, truncated, _ = venv.step(np.array(step))
            got.append(obs)
            if step[0] == 0:
                assert terminated.tolist() == [True, False]
    finally:
        venv.close()
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        assert set(a) == set(b)
        for key in a:
            np.testing.assert_allclose(a[key], b[key], atol=1e-5, err_msg=key)
    # the two envs really differ (different seeds, different starts), and env 0 was reset after STOP
    assert not np.allclose(got[0]["pose"][0], got[0]["pose"][1])
    assert not np.allclose(got[5]["pose"][0], got[4]["pose"][0])  # got[4]: after STOP; got[5]: reset


def test_bad_env_count_is_a_config_error(room):
    with pytest.raises(ConfigError, match="num_envs"):
        make_vector_env(room, 0)
