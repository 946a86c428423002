"""Batched evaluation (``vlnverse eval --envs N``): N episodes in lockstep, one agent call per step.

Each of the N *slots* is an :class:`EpisodeEnv`, a gymnasium environment that runs one
:class:`~vlnverse.run.rollout.Rollout` at a time (its scene's context, simulator and collision
mode live there); ``sim.vector_env.make_vector_env`` puts them in subprocesses (gymnasium's
``AsyncVectorEnv``, auto-reset disabled) or, inside a parallel worker, in the worker itself. The
agent stays in this process: every step it acts for all live episodes at once
(``Agent.act_batch``: one batched policy forward), and the environments apply the actions, render
and score in parallel. Episodes end independently; a slot whose episode ended takes the next one: of the scene it has loaded
when there is one, else of the scene with the most pending episodes per slot holding it, so the
slots spread over the scenes and a scene is loaded by few slots.

The records are the serial runner's: the same rollout rules and scoring run in the environment,
the agent's batched forward gives each episode the action it would give it alone
(``learn.row_exact``), and only the timing field ``duration_s`` differs. Agents that do not act
in batches (``Agent.acts_in_batches`` False: oracle, random, MLLM agents ...) are evaluated by
the serial runner instead.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable

import gymnasium
import numpy as np

from ..core.io import to_jsonable
from .agents import Agent
from .rollout import NotEvaluated, Rollout, open_scene, scene_mode


class AnyValue(gymnasium.Space):
    """A space of any Python object: an action, or a dict of observations, sent through the
    vector environment's pipe as it is (``shared_memory=False``)."""

    def __init__(self) -> None:
        super().__init__(None, None)

    def contains(self, x: Any) -> bool:
        """Every value belongs."""
        return True

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, AnyValue)

    def __hash__(self) -> int:
        return hash(AnyValue)

    @property
    def is_np_flattenable(self) -> bool:
        """Not a fixed-size array."""
        return False


@dataclass(frozen=True)
class Finished:
    """An episode's record in a step's ``info`` (wrapped, so gymnasium does not split the dict)."""

    record: dict


@dataclass(frozen=True)
class AgentRaised:
    """The action of a slot whose agent raised: the environment records it as ``run_episode`` does."""

    error: BaseException


@dataclass(frozen=True)
class Visuals:
    """Which episodes get report pictures, and how: ``save(record, ctx, sim, out, rgb_sensor=...,
    frames=...)`` (the runner's ``save_episode_visuals``; a module-level function, so it pickles)."""

    out: Any
    episodes: frozenset
    rgb_sensor: Any
    frames: bool
    save: Callable[..., None]


class EpisodeEnv(gymnasium.Env):
    """One slot of batched evaluation: ``reset(options={"episode": ep})`` (or the attribute
    ``next_episode`` set before a masked reset) starts an episode, loading its scene when it
    differs from the last; ``step(action)`` applies one action; when the episode ends the step
    is ``terminated`` and ``info["record"]`` holds its ``Finished`` record. Observations are the
    rollout's dicts; ``info["state"]`` is the ``AgentState`` without the scene context.
    Construction loads nothing (gymnasium builds one in the parent to read the spaces)."""

    def __init__(self, *, settings: Any, collision_mode: str, mode_params: dict | None = None,
                 sensors: Iterable[Any] | None = None, backend: str = "auto",
                 scene_loader: Callable[[str, Any, float], Any] | None = None, quality: str | None = None,
                 objects: str | None = None, extra: dict | None = None, visuals: Visuals | None = None):
        self.settings, self.collision_mode, self.mode_params = settings, collision_mode, mode_params
        self.sensors = None if sensors is None else list(sensors)
        self.backend, self.scene_loader, self.quality, self.objects = backend, scene_loader, quality, objects
        self.extra, self.visuals = dict(extra or {}), visuals
        self.observation_space, self.action_space = AnyValue(), AnyValue()
        self.next_episode: Any = None
        self._scene: Any = None
        self._ctx = self._sim = self._mode = None
        self._cache: dict = {}
        self._rollout: Rollout | None = None

    def _open(self, scene_path: Any) -> None:
        if self._scene == str(scene_path):
            return
        self._close_sim()
        self._ctx, new_sim = open_scene(scene_path, self.settings, sensors=self.sensors, backend=self.backend,
                                        scene_loader=self.scene_loader, quality=self.quality, objects=self.objects)
        self._sim = new_sim()
        self._mode = scene_mode(self.collision_mode, self._sim, self._ctx, self.mode_params)
        self._scene, self._cache = str(scene_path), {}

    def _state(self) -> Any:
        return replace(self._rollout.state, context=None, goal_distance=None, episode=None)

    def _info(self) -> dict:
        rollout = self._rollout
        if not rollout.done:
            return {"state": self._state()}
        record = rollout.record()
        record.update(self.extra)
        v = self.visuals
        if v is not None and record["episode_id"] in v.episodes:
            v.save(record, self._ctx, self._sim, v.out, rgb_sensor=v.rgb_sensor, frames=v.frames)
        self._rollout = None
        return {"record": Finished(record)}

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        """Start ``options["episode"]`` (else ``next_episode``); returns its first observations."""
        super().reset(seed=seed)
        episode = (options or {}).get("episode", self.next_episode)
        self.next_episode = None
        if episode is None:
            return None, {}
        self._open(episode.scene_path)
        self._rollout = Rollout(episode, self._ctx, self._sim, self._mode, self.settings, scene_cache=self._cache)
        observations = self._rollout.reset()
        return observations, self._info()

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        """Apply ``action`` (an ``AgentRaised`` is recorded as the agent's error); a slot without an
        episode (none was left to start) ignores it."""
        rollout = self._rollout
        if rollout is None:
            return None, 0.0, False, False, {}
        if isinstance(action, AgentRaised):
            if isinstance(action.error, NotEvaluated):
                rollout.abandon(action.error)
            else:
                rollout.agent_error(action.error)
        else:
            rollout.step(action)
        observations = rollout.observations
        info = self._info()
        return observations, 0.0, "record" in info, False, info

    def _close_sim(self) -> None:
        if self._sim is not None:
            self._sim.close()
        self._sim = self._ctx = self._mode = self._scene = None

    def close(self) -> None:
        """Close the simulator."""
        self._close_sim()


def _next_episode(pending: list, scene: Any, scenes: list) -> Any:
    """The next episode (removed from ``pending``) for a slot that has ``scene`` loaded while the
    slots hold ``scenes``: one of its scene when there is one, else the first of the scene with
    the most pending episodes per slot holding it (so the slots spread over the scenes and each
    scene is loaded by few slots)."""
    index = next((i for i, ep in enumerate(pending) if str(ep.scene_path) == scene), None)
    if index is None:
        count: dict[str, int] = {}
        for ep in pending:
            count[str(ep.scene_path)] = count.get(str(ep.scene_path), 0) + 1
        best = max(count, key=lambda s: count[s] / (1 + scenes.count(s)))  # the first such scene on ties
        index = next(i for i, ep in enumerate(pending) if str(ep.scene_path) == best)
    return pending.pop(index)


class _Group:
    """A vector environment and the (run-wide) slots it holds; ``send`` starts a step of all its
    environments, ``receive`` waits for it (a synchronous vector env steps in ``send``)."""

    def __init__(self, vec: Any, slots: list[int], asynchronous: bool):
        self.vec, self.slots, self.asynchronous = vec, slots, asynchronous
        self.result: Any = None
        self.stepping = False

    def send(self, actions: tuple) -> None:
        if self.asynchronous:
            self.vec.step_async(actions)
        else:
            self.result = self.vec.step(actions)
        self.stepping = True

    def receive(self) -> tuple:
        self.stepping = False
        result, self.result = (self.vec.step_wait() if self.asynchronous else self.result), None
        return result


def run_batched(episodes: Iterable[Any], settings: Any, agent: Agent, *, envs: int, asynchronous: bool = True,
                collision_mode: str = "strict", mode_params: dict | None = None, sensors: Iterable[Any] | None = None,
                backend: str = "auto", scene_loader: Callable[[str, Any, float], Any] | None = None,
                quality: str | None = None, objects: str | None = None, extra: dict | None = None,
                visuals: Visuals | None = None, on_record: Callable[[dict], None] | None = None) -> list[dict]:
    """Evaluate ``episodes`` (any scenes) with ``envs`` slots in lockstep; returns the records in
    the order the episodes finished (``on_record(record)`` runs as each does). ``agent`` must act
    in batches (``Agent.acts_in_batches``); ``asynchronous`` puts the environments in subprocesses
    (their arguments must pickle), else they run in this process. The other arguments are
    ``rollout.run_scene``'s; ``visuals`` says which episodes get report pictures.

    With subprocesses and two or more slots, the slots form two halves, each a vector env stepped
    in lockstep, taking turns: while one half's environments step and render, the agent acts for
    the other half, so the agent's forward does not leave the environments idle."""
    from ..sim.vector_env import make_vector_env

    pending = list(episodes)
    n = min(int(envs), len(pending))
    if n == 0:
        return []
    factory = functools.partial(EpisodeEnv, settings=settings, collision_mode=collision_mode, mode_params=mode_params,
                                sensors=None if sensors is None else list(sensors), backend=backend,
                                scene_loader=scene_loader, quality=quality, objects=objects, extra=extra,
                                visuals=visuals)
    sizes = [n - n // 2, n // 2] if asynchronous and n >= 2 else [n]
    groups: list[_Group] = []
    running: list[Any] = [None] * n  # the episode of each slot
    scenes: list[Any] = [None] * n  # the scene each slot has loaded
    observations: list[Any] = [None] * n
    states: list[Any] = [None] * n
    ended = [False] * n  # the slot's episode ended since its environment was last reset
    records: list[dict] = []

    def settle(slot: int, obs: Any, info: dict) -> None:
        """Take slot ``slot``'s result: a finished record, or its next observations and state."""
        finished = info.get("record")
        if finished is None:
            observations[slot], states[slot] = obs, replace(info["state"], episode=running[slot])
            return
        record = finished.record
        record["agent_outputs"] = to_jsonable(agent.slot_outputs(slot))
        running[slot], ended[slot] = None, True
        records.append(record)
        if on_record is not None:
            on_record(record)

    def start_episodes(group: _Group) -> None:
        """Hand the group's free slots their next episodes: a masked reset of those environments
        and of those whose episode ended with none left to start (a terminated environment is
        reset before it steps again)."""
        starts = [None] * len(group.slots)
        for j, slot in enumerate(group.slots):
            if running[slot] is None and pending:
                starts[j] = running[slot] = _next_episode(pending, scenes[slot], scenes)
                scenes[slot] = str(starts[j].scene_path)
        mask = np.array([ep is not None or ended[slot] for ep, slot in zip(starts, group.slots)])
        for slot in group.slots:
            ended[slot] = False
        if not mask.any():
            return
        group.vec.set_attr("next_episode", starts)
        obs, infos = group.vec.reset(options={"reset_mask": mask})
        for j in np.flatnonzero(mask):
            if starts[j] is not None:
                agent.begin_slot(group.slots[j], starts[j])
                settle(group.slots[j], obs[j], _slot_info(infos, j))

    try:
        first = 0
        for size in sizes:
            groups.append(_Group(make_vector_env(factory, size, asynchronous=asynchronous, autoreset_mode="Disabled",
                                                 shared_memory=False), list(range(first, first + size)), asynchronous))
            first += size
        while True:
            for group in groups:
                if group.stepping:
                    obs, _, _, _, infos = group.receive()
                    for j, slot in enumerate(group.slots):
                        if running[slot] is not None:
                            settle(slot, obs[j], _slot_info(infos, j))
                start_episodes(group)
                live = [slot for slot in group.slots if running[slot] is not None]
                if not live:
                    continue
                actions: dict[int, Any] = {}
                try:
                    actions = dict(zip(live, agent.act_batch(live, [observations[s] for s in live],
                                                             [states[s] for s in live])))
                except Exception as exc:  # noqa: BLE001 - as run_episode: an agent bug is a failed step of each episode
                    actions = {slot: AgentRaised(exc) for slot in live}
                group.send(tuple(actions.get(slot) for slot in group.slots))
            if not any(group.stepping for group in groups):
                break
    finally:
        for group in groups:
            group.vec.close()
    return records


def _slot_info(infos: dict, slot: int) -> dict:
    """Slot ``slot``'s entries of a vector environment's ``info`` (gymnasium stacks them per key)."""
    return {key: infos[key][slot] for key in ("record", "state") if key in infos and infos[f"_{key}"][slot]}
