"""Several environments stepped in parallel through gymnasium's vector API: the one vector-env helper.

``make_vector_env(scenes, num_envs)`` builds a ``gymnasium.vector.AsyncVectorEnv`` (one
subprocess per environment, started with ``forkserver``/``spawn``) or a ``SyncVectorEnv``
(``asynchronous=False``, same results in one process) of ``VLNVerseNavEnv``; given an env class
or factory instead of scenes (``make_vector_env(VLNEnv, 4, episodes=...)``, the task env of
``vlnverse.learn.gym_env``) it makes ``num_envs`` of those. Observations are the single env's
``Dict`` entries stacked along a leading ``num_envs`` axis. Episodes that end (STOP, or
``max_episode_steps``) are reset automatically on the next ``step`` (gymnasium's next-step
auto-reset): ``reset(seed=s)`` seeds environment ``i`` with ``s + i``, so a run is reproducible
and equals ``num_envs`` separate environments seeded the same way.
"""
from __future__ import annotations

import functools
import multiprocessing as mp
from typing import Any, Callable, Sequence

from ..core.errors import ConfigError
from ..scenes.description import SceneDescription


def _make_env(scene: Any, max_episode_steps: int | None, kwargs: dict) -> Any:
    if isinstance(scene, SceneDescription):
        from .gym_env import VLNVerseNavEnv

        env = VLNVerseNavEnv(scene, **kwargs)
    else:
        env = scene(**kwargs)  # an env class or factory
    if max_episode_steps is not None:
        from gymnasium.wrappers import TimeLimit

        env = TimeLimit(env, max_episode_steps=max_episode_steps)
    return env


def make_vector_env(scenes: SceneDescription | Sequence[SceneDescription] | Callable[..., Any], num_envs: int, *,
                    asynchronous: bool = True, max_episode_steps: int | None = None,
                    autoreset_mode: str | None = None, shared_memory: bool = True, **env_kwargs: Any) -> Any:
    """``num_envs`` environments stepped together: navigation envs (environment ``i`` on
    ``scenes[i % len(scenes)]``; ``env_kwargs`` go to ``VLNVerseNavEnv``: ``body``, ``sensors``,
    ``action_mode``, ...), or, when ``scenes`` is an env class or factory, ``scenes(**env_kwargs)``
    each. ``asynchronous`` runs each in its own subprocess (its arguments must pickle).
    ``autoreset_mode`` is gymnasium's (``NextStep`` by default; ``Disabled``: the caller resets
    the environments it chooses with ``reset(options={"reset_mask": ...})``); ``shared_memory``
    False sends observations through the pipes (needed for spaces gymnasium cannot lay out in
    shared memory)."""
    from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv

    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
        raise ConfigError(f"got {num_envs!r}", field="num_envs", expected="an integer >= 1")
    if callable(scenes) and not isinstance(scenes, SceneDescription):
        scene_list = [scenes]
    else:
        scene_list = [scenes] if isinstance(scenes, SceneDescription) else list(scenes)
        if not scene_list or not all(isinstance(s, SceneDescription) for s in scene_list):
            raise ConfigError("no scenes", field="scenes",
                              expected="a SceneDescription, a non-empty list of them, or an env class")
    fns = [functools.partial(_make_env, scene_list[i % len(scene_list)], max_episode_steps, dict(env_kwargs))
           for i in range(num_envs)]
    options = {} if autoreset_mode is None else {"autoreset_mode": autoreset_mode}
    if not asynchronous:
        return SyncVectorEnv(fns, **options)
    method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
    return AsyncVectorEnv(fns, context=method, shared_memory=shared_memory, **options)
