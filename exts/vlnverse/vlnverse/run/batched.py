"""Batched evaluation (``vlnverse eval --envs N``): N episodes at once, one batched agent call for
the slots that are ready.

Each of the N *slots* is an :class:`EpisodeEnv`, a gymnasium environment that runs one
:class:`~vlnverse.run.rollout.Rollout` at a time (its scene's context, simulator and collision
mode live there), in its own process forked from the fork server, driven on its own pipe (or,
inside a parallel worker, in the worker itself). The agent stays in this process: it acts, in
one batched policy forward (``Agent.act_batch``), for every slot whose observations have
arrived, and sends each its action at once; meanwhile the other slots' environments apply their
actions, render and score. So the agent's forward overlaps the environments' rendering, and no
slot waits for the slowest one of a lockstep. Episodes end independently; a slot whose episode
ended takes the next one: of the scene it has loaded when there is one, else of the scene with
the most pending episodes per slot holding it, so the slots spread over the scenes and a scene
is loaded by few slots (a scene loads in its slot's process while the others go on).

The records are the serial runner's: the same rollout rules and scoring run in the environment,
the agent's batched forward gives each episode the action it would give it alone whatever the
other rows of the batch (``learn.row_exact``), and only the timing field ``duration_s`` differs.
Agents that do not act in batches (``Agent.acts_in_batches`` False: oracle, random, MLLM agents
...) are evaluated by the serial runner instead.
"""
from __future__ import annotations

import functools
import pickle
from dataclasses import dataclass, replace
from multiprocessing import connection as mp_connection
from typing import Any, Callable, Iterable

import gymnasium

from ..core.io import to_jsonable
from .agents import Agent
from .rollout import NotEvaluated, Rollout, open_scene, scene_mode


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
    """One slot of batched evaluation: ``reset(options={"episode": ep})`` starts an episode,
    loading its scene when it differs from the last; ``step(action)`` applies one action; when the
    episode ends the step is ``terminated`` and ``info["record"]`` holds its record. Observations
    are the rollout's dicts; ``info["state"]`` is the ``AgentState`` without the scene context.
    Construction loads nothing."""

    def __init__(self, *, settings: Any, collision_mode: str, mode_params: dict | None = None,
                 sensors: Iterable[Any] | None = None, backend: str = "auto",
                 scene_loader: Callable[[str, Any, float], Any] | None = None, quality: str | None = None,
                 objects: str | None = None, extra: dict | None = None, visuals: Visuals | None = None):
        self.settings, self.collision_mode, self.mode_params = settings, collision_mode, mode_params
        self.sensors = None if sensors is None else list(sensors)
        self.backend, self.scene_loader, self.quality, self.objects = backend, scene_loader, quality, objects
        self.extra, self.visuals = dict(extra or {}), visuals
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
        return {"record": record}

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        """Start ``options["episode"]``; returns its first observations."""
        super().reset(seed=seed)
        episode = (options or {}).get("episode")
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


class _LocalEnv:
    """A slot's environment in this process: ``send`` runs the command at once."""

    def __init__(self, factory: Callable[[], EpisodeEnv]):
        self.env = factory()
        self.result: Any = None

    def send(self, command: str, value: Any) -> None:
        self.result = _run_command(self.env, command, value)

    def receive(self) -> tuple:
        result, self.result = self.result, None
        return result

    def close(self) -> None:
        self.env.close()


class _ProcessEnv:
    """A slot's environment in its own process (forked from the fork server), on its own pipe:
    ``send`` starts a command there, ``receive`` waits for its result."""

    def __init__(self, factory: Callable[[], EpisodeEnv], ctx: Any):
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_env_worker, args=(child, factory), daemon=True,
                                   name="vlnverse-batched-env")
        self.process.start()
        child.close()

    def send(self, command: str, value: Any) -> None:
        self.conn.send((command, value))

    def receive(self) -> tuple:
        try:
            status, value = self.conn.recv()
        except EOFError:
            raise RuntimeError(f"batched evaluation: environment process {self.process.pid} exited "
                               f"(exit code {self.process.exitcode})") from None
        if status == "error":
            raise value
        return value

    def close(self) -> None:
        """Ask the process to close its simulator and exit; end it if it does not within 10 s."""
        try:
            self.conn.send(("close", None))
        except (OSError, ValueError):
            pass
        self.process.join(10)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()


def _run_command(env: EpisodeEnv, command: str, value: Any) -> tuple:
    """``reset`` (``value``: the episode) or ``step`` (``value``: the action): (observations, info)."""
    if command == "reset":
        return env.reset(options={"episode": value})
    observations, _, _, _, info = env.step(value)
    return observations, info


def _env_worker(conn: Any, factory: Callable[[], EpisodeEnv]) -> None:
    """An environment process: run the commands from ``conn`` until ``close`` or the parent is gone;
    an error is sent back (the parent raises it)."""
    import os
    import signal
    import traceback

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it closes this process
    # one llvmpipe rasteriser thread (read when GL starts): the slots' processes share the cores already
    os.environ.setdefault("LP_NUM_THREADS", "1")
    env = None
    try:
        env = factory()
        while True:
            try:
                command, value = conn.recv()
            except EOFError:
                return
            if command == "close":
                return
            try:
                reply = ("ok", _run_command(env, command, value))
            except Exception as exc:  # noqa: BLE001 - raised again in the parent
                try:
                    pickle.dumps(exc)
                    reply = ("error", exc)
                except Exception:  # noqa: BLE001
                    reply = ("error", RuntimeError(traceback.format_exc()))
            try:
                conn.send(reply)
            except (BrokenPipeError, OSError):
                return
    finally:
        if env is not None:
            env.close()
        conn.close()


def run_batched(episodes: Iterable[Any], settings: Any, agent: Agent, *, envs: int, asynchronous: bool = True,
                collision_mode: str = "strict", mode_params: dict | None = None, sensors: Iterable[Any] | None = None,
                backend: str = "auto", scene_loader: Callable[[str, Any, float], Any] | None = None,
                quality: str | None = None, objects: str | None = None, extra: dict | None = None,
                visuals: Visuals | None = None, on_record: Callable[[dict], None] | None = None) -> list[dict]:
    """Evaluate ``episodes`` (any scenes) with ``envs`` slots; returns the records in the order the
    episodes finished (``on_record(record)`` runs as each does). ``agent`` must act in batches
    (``Agent.acts_in_batches``); ``asynchronous`` puts each slot's environment in its own process
    (their arguments must pickle), else they run in this process. The other arguments are
    ``rollout.run_scene``'s; ``visuals`` says which episodes get report pictures.

    With processes, each environment is driven on its own pipe: the agent acts, in one batched
    forward, for every slot whose observations have arrived and sends each its action at once,
    so while the agent computes, the other slots' environments step and render (and load their
    scenes), and neither side waits for the slowest slot of a lockstep."""
    pending = list(episodes)
    n = min(int(envs), len(pending))
    if n == 0:
        return []
    factory = functools.partial(EpisodeEnv, settings=settings, collision_mode=collision_mode, mode_params=mode_params,
                                sensors=None if sensors is None else list(sensors), backend=backend,
                                scene_loader=scene_loader, quality=quality, objects=objects, extra=extra,
                                visuals=visuals)
    slots: list[Any] = []
    running: list[Any] = [None] * n  # the episode of each slot
    scenes: list[Any] = [None] * n  # the scene each slot has loaded
    waiting: set[int] = set()  # slots whose environment is running a command
    starting: set[int] = set()  # slots whose environment is starting an episode
    records: list[dict] = []

    def start(slot: int) -> None:
        """Send slot ``slot`` its next episode, if any is left."""
        if pending:
            running[slot] = _next_episode(pending, scenes[slot], scenes)
            scenes[slot] = str(running[slot].scene_path)
            slots[slot].send("reset", running[slot])
            waiting.add(slot)
            starting.add(slot)

    try:
        if asynchronous:
            from ..engines.local import process_context

            ctx = process_context()
            slots.extend(_ProcessEnv(factory, ctx) for _ in range(n))
        else:
            slots.extend(_LocalEnv(factory) for _ in range(n))
        for slot in range(n):
            start(slot)
        by_conn = {id(env.conn): slot for slot, env in enumerate(slots) if asynchronous}
        while waiting:
            if asynchronous:
                ready = [by_conn[id(c)] for c in mp_connection.wait([slots[s].conn for s in waiting])]
            else:
                ready = list(waiting)
            acting, observations, states = [], [], []
            for slot in sorted(ready):
                waiting.discard(slot)
                obs, info = slots[slot].receive()
                record = info.get("record")
                if slot in starting:
                    starting.discard(slot)
                    agent.begin_slot(slot, running[slot])
                if record is None:
                    acting.append(slot)
                    observations.append(obs)
                    states.append(replace(info["state"], episode=running[slot]))
                    continue
                record["agent_outputs"] = to_jsonable(agent.slot_outputs(slot))
                running[slot] = None
                records.append(record)
                if on_record is not None:
                    on_record(record)
                start(slot)
            if not acting:
                continue
            try:
                actions = list(agent.act_batch(acting, observations, states))
            except Exception as exc:  # noqa: BLE001 - as run_episode: an agent bug is a failed step of each episode
                actions = [AgentRaised(exc)] * len(acting)
            for slot, action in zip(acting, actions):
                slots[slot].send("step", action)
                waiting.add(slot)
    finally:
        for env in slots:
            env.close()
    return records
