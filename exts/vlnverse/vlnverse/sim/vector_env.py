"""Several ``VLNVerseNavEnv`` stepped in parallel through gymnasium's vector API.

``make_vector_env(scenes, num_envs)`` builds a ``gymnasium.vector.AsyncVectorEnv`` (one
subprocess per environment, started with ``forkserver``/``spawn``) or a ``SyncVectorEnv``
(``asynchronous=False``, same results in one process). Observations are the single env's
``Dict`` entries stacked along a leading ``num_envs`` axis. Episodes that end (STOP, or
``max_episode_steps``) are reset automatically on the next ``step`` (gymnasium's next-step
auto-reset): ``reset(seed=s)`` seeds environment ``i`` with ``s + i``, so a run is reproducible
and equals ``num_envs`` separate environments seeded the same way.
"""
from __future__ import annotations

import functools
import multiprocessing as mp
from typing import Any, Sequence

from ..core.errors import ConfigError
from ..scenes.description import SceneDescription


def _make_env(scene: SceneDescription, max_episode_steps: int | None, kwargs: dict) -> Any:
    from .gym_env import VLNVerseNavEnv

    env = VLNVerseNavEnv(scene, **kwargs)
    if max_episode_steps is not None:
        from gymnasium.wrappers import TimeLimit

        env = TimeLimit(env, max_episode_steps=max_episode_steps)
    return env


def make_vector_env(scenes: SceneDescription | Sequence[SceneDescription], num_envs: int, *,
                    asynchronous: bool = True, max_episode_steps: int | None = None, **env_kwargs: Any) -> Any:
    """``num_envs`` navigation environments (environment ``i`` on ``scenes[i % len(scenes)]``),
    stepped together; ``env_kwargs`` go to ``VLNVerseNavEnv`` (``body``, ``sensors``,
    ``action_mode``, ...). ``asynchronous`` runs each in its own subprocess."""
    from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv

    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
        raise ConfigError(f"got {num_envs!r}", field="num_envs", expected="an integer >= 1")
    scene_list = [scenes] if isinstance(scenes, SceneDescription) else list(scenes)
    if not scene_list or not all(isinstance(s, SceneDescription) for s in scene_list):
        raise ConfigError("no scenes", field="scenes", expected="a SceneDescription or a non-empty list of them")
    fns = [functools.partial(_make_env, scene_list[i % len(scene_list)], max_episode_steps, dict(env_kwargs))
           for i in range(num_envs)]
    if not asynchronous:
        return SyncVectorEnv(fns)
    method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
    return AsyncVectorEnv(fns, context=method)
