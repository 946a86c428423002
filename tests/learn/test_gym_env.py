"""The ``vlnverse/VLN-v0`` gymnasium environment."""
from __future__ import annotations

import numpy as np
import pytest

from learn_helpers import make_episodes

SENSORS = [{"name": "rgb", "kind": "rgb", "width": 16, "height": 16},
           {"name": "depth", "kind": "depth", "width": 16, "height": 16}]


def _kwargs(corridor):
    return dict(episodes=make_episodes(corridor), sensors=SENSORS, scene_loader=lambda *a: corridor, max_steps=60,
                success_distance=1.5)


def test_env_passes_the_gymnasium_checker(corridor):
    import gymnasium
    from gymnasium.utils.env_checker import check_env

    import vlnverse.learn  # noqa: F401 - registers the env

    env = gymnasium.make("vlnverse/VLN-v0", **_kwargs(corridor))
    check_env(env.unwrapped, skip_render_check=True)
    obs, info = env.reset(seed=1, options={"episode": "corridor-2"})
    assert obs["instruction"] == "pass the opening and stop just inside the kitchen"
    vocab = env.unwrapped.vocab
    assert vocab.decode(obs["instruction_tokens"]) == "pass the opening and stop just inside the kitchen".split()
    assert obs["rgb"].shape == (16, 16, 3) and obs["depth"].shape == (16, 16)
    env.close()


def test_rewards_sum_to_geodesic_progress_and_success_adds_the_bonus(corridor):
    from vlnverse.run.agents import OracleAgent
    from vlnverse.learn.gym_env import VLNEnv

    env = VLNEnv(**_kwargs(corridor), success_bonus=0.0, collision_penalty=0.0)
    _, info = env.reset(options={"episode": 1})
    d0 = info["distance_to_goal"]
    teacher = OracleAgent()
    teacher.reset(env.episode, env.context)
    teacher.success_distance = 1.5
    total, done, steps = 0.0, False, 0
    while not done:
        _, reward, terminated, truncated, info = env.step(int(teacher.best_action(env.sim.pose)))
        total, done, steps = total + reward, terminated or truncated, steps + 1
    assert info["success"] and steps > 20
    assert total == pytest.approx(d0 - info["distance_to_goal"], abs=1e-9) and total > 8.0
    record = env.rollout.record()  # the env's episode is the runner's Rollout: its record, scored by the task
    assert record["termination"] == "stop" and record["steps"] == steps and record["metrics"]["SR"] == 1.0
    assert record["metrics"]["NE"] == pytest.approx(info["distance_to_goal"], abs=1e-3)
    env.success_bonus = 2.5
    env.reset(options={"episode": 1})
    _, reward, terminated, _, info = env.step(0)  # STOP at the start: far from the goal, no bonus
    assert terminated and reward == 0.0 and not info["success"]
    env.close()


def test_collision_penalty_and_vector_copies(corridor):
    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.gym_env import VLNEnv
    from vlnverse.sim.vector_env import make_vector_env

    env = VLNEnv(**_kwargs(corridor), collision_penalty=0.5)
    env.reset(options={"episode": 0})  # faces +x at (1.3, 1.5): the dividing wall is 3.6 m ahead
    rewards = [env.step(1)[1] for _ in range(16)]
    info = env.step(1)[4]
    assert info["collided"] and env.step(1)[1] <= -0.5 + 0.25  # bumping: penalty, at most one step of progress
    assert rewards[0] == pytest.approx(0.25, abs=0.02)
    with pytest.raises(ConfigError, match="out of range"):
        env.reset(options={"episode": 9})
    env.close()
    vec = make_vector_env(VLNEnv, 2, asynchronous=False, **_kwargs(corridor))  # the one vector-env helper
    obs, _ = vec.reset(seed=0)
    assert obs["rgb"].shape == (2, 16, 16, 3) and obs["instruction_tokens"].shape == (2, 80)
    _, rewards, *_ = vec.step(np.array([1, 2]))
    assert rewards[1] == 0.0 and rewards[0] != 0.0  # a turn makes no progress; a forward step does
    vec.close()
    with pytest.raises(ConfigError, match="episodes"):
        VLNEnv([], sensors=SENSORS)


def test_the_step_budget_truncates_as_the_runner_does(corridor):
    from vlnverse.learn.gym_env import VLNEnv

    env = VLNEnv(**{**_kwargs(corridor), "max_steps": 3})
    env.reset(options={"episode": 0})
    ends = [env.step(2)[2:4] for _ in range(3)]  # turning: no STOP, no failure
    assert ends == [(False, False), (False, False), (False, True)]
    assert env.rollout.record()["termination"] == "max_steps"
    env.close()


@pytest.mark.slow
def test_make_with_no_arguments_runs_on_the_shipped_train_homes(tmp_path, monkeypatch):
    import gymnasium

    import vlnverse.learn  # noqa: F401 - registers the env
    from vlnverse.scenes.splits import load_splits

    monkeypatch.setenv("VLNVERSE_CACHE", str(tmp_path))
    env = gymnasium.make("vlnverse/VLN-v0")
    episodes = env.unwrapped.episodes
    train = set(load_splits()["train"])
    assert len(episodes) == 5 * len(train) and {e.scene_id for e in episodes} == train
    assert {e.task_type for e in episodes} == {"fine_grained"}
    obs, info = env.reset(seed=0)
    assert obs["rgb"].shape == (64, 64, 3) and info["distance_to_goal"] > 0
    _, reward, terminated, truncated, _ = env.step(1)
    assert isinstance(reward, float) and not truncated
    env.close()
    again = gymnasium.make("vlnverse/VLN-v0")  # the generated episodes are reused from the cache
    assert [e.episode_id for e in again.unwrapped.episodes] == [e.episode_id for e in episodes]
    again.close()
