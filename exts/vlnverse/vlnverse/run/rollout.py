"""One episode, stepped from outside: the rollout seam behind the runner.

:class:`Rollout` applies the evaluation rules to one episode under one collision mode — the
start placement, the step budget, invalid actions recorded rather than raised, a STOP (or a
typed FOUND / NOT_FOUND decision) ending the episode, a Strict failure ending it, and the
task's scoring — so a training loop, a browser session or a remote worker can drive an episode
action by action and get exactly the record the runner writes::

    rollout = Rollout(episode, ctx, sim, mode, settings, agent=agent)
    obs = rollout.reset()
    while not rollout.done:
        result = rollout.step(agent.act(rollout.observations, rollout.state))
    record = rollout.record()

Hooks are objects with any of the optional methods ``on_reset(rollout)``,
``on_step(rollout, action, result)`` and ``on_episode_end(rollout, record)``; they run in the
order they were added (a DAgger trainer, a logger, a web session ...).

:func:`run_episode` is the loop above; :func:`run_scene` is the runner's per-scene body (one
simulator for a scene's episodes) as a function with no module state, for parallel engines.
"""
from __future__ import annotations

import logging
import math
import time
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np

from ..core.io import to_jsonable
from ..tasks.base import WORKER_PRELOAD as SCENE_WORKER_PRELOAD
from ..tasks.scoring import TaskScoring, has_ordered_goals, scoring_for
from .agents import Agent, AgentState
from .scoring import goal_distance_fn, score_rollout  # noqa: F401  (goal_distance_fn re-exported)

log = logging.getLogger(__name__)

#: modules every worker that runs episodes needs (scene loading, maps, rollouts; the backend's
#: module is added per run): imported once by the local fork server
WORKER_PRELOAD = SCENE_WORKER_PRELOAD + ("vlnverse.run.rollout", "vlnverse.run.modes", "vlnverse.run.diagnostics")


class NotEvaluated(Exception):
    """Raised by an agent whose model endpoint gave no answer (unreachable, timeout, 5xx, auth,
    a body that is not a chat completion ...): the episode ends *not evaluated*, its record says
    why (``outcome``, ``not_evaluated``) and the runner leaves it out of the metrics and runs it
    again on resume. ``kind`` is the reason (``vlnverse.run.chat_models.ENDPOINT_ERRORS``),
    ``component`` the model that gave no answer (:data:`COMPONENTS`: the ``navigator``, the
    ``captioner`` of its views; an ``assistant`` outage never ends an episode)."""

    def __init__(self, kind: str, message: str, component: str = "navigator"):
        super().__init__(f"{kind}: {message}")
        self.kind, self.message, self.component = kind, message, component


#: the models of an agent whose outage is reported apart (``not_evaluated.component``)
COMPONENTS = ("navigator", "captioner", "assistant")


@dataclass
class StepResult:
    """What one :meth:`Rollout.step` did.

    ``termination`` is ``"stop"`` (STOP or a decision), ``"failure"`` (Strict displacement),
    ``"max_steps"`` (budget used up) or ``None`` while the episode runs; ``info`` carries the
    step's ``displacement`` and ``contacts``, an invalid action's ``error``, or the ``decision``.
    """

    observations: dict[str, np.ndarray]
    pose: Any
    collided: bool
    done: bool
    termination: str | None
    info: dict = field(default_factory=dict)


def action_name(action: Any) -> Any:
    """The JSON form of an action in a record: its name, or ``{"type": ..., field: value}``."""
    name = getattr(action, "name", None)
    if isinstance(name, str):
        return name
    if hasattr(action, "__dataclass_fields__"):
        return {"type": type(action).__name__, **{k: float(getattr(action, k)) for k in action.__dataclass_fields__}}
    return to_jsonable(action)


def _decision_of(action: Any) -> str | None:
    """``"FOUND"`` / ``"NOT_FOUND"`` when ``action`` is a decision (typed or its name), else None."""
    from ..tasks.actions import Decision

    decision = Decision.parse(action)
    return None if decision is None else decision.value


class Rollout:
    """One episode under one collision mode: the same rules the runner applies.

    ``agent`` (optional) is reset with the episode and its ``outputs`` go into the record;
    without one, whatever the driver appends to :attr:`outputs` does. ``task`` says how the
    episode is scored: a :class:`~vlnverse.tasks.scoring.TaskScoring`, a task generator or a task
    name (default: the declaration of ``episode.task_type``), kept as :attr:`scoring`.
    ``scene_cache`` is a dict shared by the rollouts of one scene (view-blocking grids ...).
    """

    def __init__(self, episode: Any, ctx: Any, sim: Any, mode: Any, settings: Any, *, task: Any = None,
                 hooks: Iterable[Any] = (), agent: Agent | None = None, scene_cache: dict | None = None):
        self.episode, self.ctx, self.sim, self.mode, self.settings = episode, ctx, sim, mode, settings
        self.task = task
        self.scoring: TaskScoring = scoring_for(episode.task_type if task is None else task)
        self.agent = agent
        self.hooks: list[Any] = list(hooks)
        self.scene_cache = scene_cache if scene_cache is not None else {}
        self.outputs: list[Any] = []
        self._started = False
        self._record: dict | None = None

    # -- hooks ----------------------------------------------------------------------------

    def add_hook(self, hook: Any) -> None:
        """Attach ``hook`` (any object with ``on_reset`` / ``on_step`` / ``on_episode_end``)."""
        self.hooks.append(hook)

    def _fire(self, event: str, *args: Any) -> None:
        for hook in self.hooks:
            method = getattr(hook, event, None)
            if method is not None:
                method(self, *args)

    # -- episode --------------------------------------------------------------------------

    def reset(self) -> dict[str, np.ndarray]:
        """Place the agent at the episode's start (moved off an obstacle it touches), reset the
        agent if one is attached, and return the first observations."""
        from ..sim.types import AgentPose

        episode = self.episode
        self._t0 = time.perf_counter()
        self.start = AgentPose(float(episode.start_position[0]), float(episode.start_position[1]),
                               float(episode.start_yaw))
        with warnings.catch_warnings():  # a start touching an obstacle is moved off it: recorded, not printed
            warnings.simplefilter("ignore", RuntimeWarning)
            self._obs = self.mode.reset(self.start)
        self._pose = self.sim.pose
        if self.agent is not None:
            self.agent.reset(episode, self.ctx)
        self.goals_xy = np.array([g.position[:2] for g in episode.goals], dtype=float)
        self.goal_distance = goal_distance_fn(self.ctx, self.goals_xy[-1:] if has_ordered_goals(episode) else self.goals_xy)
        self.poses: list[list[float]] = [[self._pose.x, self._pose.y, self._pose.yaw]]
        self.actions: list[Any] = []
        self.collisions: list[dict] = []
        self.invalid: list[dict] = []
        self.termination: str | None = None
        self.failure: str | None = None
        self.not_evaluated: dict | None = None
        self.stopped = False
        self.decision: str | None = None
        self.selected_frame: int | None = None
        self.moves = 0
        self.steps = 0
        self._collided = False
        self._record = None
        self.outputs = []
        self._started = True
        if self.settings.max_steps <= 0:
            self.termination = "max_steps"
        self._fire("on_reset")
        return self._obs

    @property
    def observations(self) -> dict[str, Any]:
        """The latest observations (from the reset or the last step that moved the agent)."""
        self._require_started()
        return self._obs

    @property
    def pose(self) -> Any:
        """The agent's current pose."""
        self._require_started()
        return self._pose

    @property
    def done(self) -> bool:
        """Whether the episode is over (stop, decision, failure or step budget)."""
        self._require_started()
        return self.termination is not None

    @property
    def state(self) -> AgentState:
        """What an agent's ``act()`` receives beside the observations."""
        self._require_started()
        mode = self.mode
        node, neighbours = getattr(mode, "node", None), []
        if node is not None:
            neighbours = [(n, mode.position(n)) for n in mode.neighbours()]
        return AgentState(step=self.steps, pose=self._pose, max_steps=self.settings.max_steps,
                          success_distance=self.settings.success_distance, episode=self.episode, context=self.ctx,
                          goal_distance=self.goal_distance, collided=self._collided, mode=mode.name, node=node,
                          neighbours=neighbours, forward_step=mode.forward_step,
                          turn_angle_deg=math.degrees(mode.turn_angle))

    def _require_started(self) -> None:
        if not self._started:
            raise RuntimeError("Rollout: call reset() first")

    def _finish_step(self, action: Any, result: StepResult) -> StepResult:
        self.steps += 1
        if self.termination is None and self.steps >= self.settings.max_steps:
            self.termination = "max_steps"
        result.done, result.termination = self.done, self.termination
        self._fire("on_step", action, result)
        return result

    def agent_error(self, exc: BaseException) -> StepResult:
        """Record that the agent raised instead of acting: one used-up step, not a crashed run."""
        self._require_started()
        if self.done:
            raise RuntimeError("Rollout: the episode is over")
        error = f"agent raised {type(exc).__name__}: {exc}"
        self.invalid.append({"step": self.steps, "action": None, "error": error})
        log.warning("episode %s step %d: agent raised %s", self.episode.episode_id, self.steps,
                    traceback.format_exception_only(type(exc), exc)[-1].strip())
        self.actions.append(None)
        return self._finish_step(None, StepResult(self._obs, self._pose, False, False, None, {"error": error}))

    def abandon(self, exc: NotEvaluated) -> None:
        """End the episode as *not evaluated* (the agent's model endpoint gave no answer)."""
        self._require_started()
        self.not_evaluated = {"kind": exc.kind, "component": getattr(exc, "component", "navigator"),
                              "error": str(exc.message)[:500], "step": self.steps}
        self.termination = "not_evaluated"
        log.warning("episode %s step %d: not evaluated (%s)", self.episode.episode_id, self.steps, exc.kind)

    def step(self, action: Any) -> StepResult:
        """Apply one action: a ``DiscreteAction`` (or its name/int), a ``VelocityAction``, a
        ``WaypointAction``, a graph-mode node id, a :class:`~vlnverse.tasks.actions.Decision`
        (a STOP that states FOUND / NOT_FOUND) or a :class:`~vlnverse.tasks.actions.SelectFrame`
        (an answer that does not move the agent). An invalid action is recorded and uses up
        the step; it is not raised."""
        from ..sim.types import InvalidActionError
        from ..tasks.actions import SelectFrame

        self._require_started()
        if self.done:
            raise RuntimeError("Rollout: the episode is over; reset() to start again")
        step = self.steps
        if isinstance(action, SelectFrame):
            self.selected_frame = int(action.frame)
            self.actions.append({"type": "SelectFrame", "frame": int(action.frame)})
            return self._finish_step(action, StepResult(self._obs, self._pose, False, False, None,
                                                        {"selected_frame": self.selected_frame}))
        decision = _decision_of(action)
        if decision is not None:
            self.decision = decision
            self.actions.append(decision)
            self.termination, self.stopped = "stop", True
            return self._finish_step(action, StepResult(self._obs, self._pose, False, True, "stop",
                                                        {"decision": decision}))
        try:
            outcome = self.mode.step(action)
        except InvalidActionError as exc:
            self.invalid.append({"step": step, "action": repr(action)[:200], "error": str(exc)})
            log.warning("episode %s step %d: invalid action %r: %s", self.episode.episode_id, step, action, exc)
            self.actions.append(None)
            return self._finish_step(action, StepResult(self._obs, self._pose, False, False, None, {"error": str(exc)}))
        self.actions.append(action_name(action))
        if outcome.stop:
            self.termination, self.stopped = "stop", True
            return self._finish_step(action, StepResult(self._obs, self._pose, False, True, "stop", {}))
        self.moves += 1
        self._pose, self._obs, self._collided = outcome.pose, outcome.observations, outcome.collided
        self.poses.append([self._pose.x, self._pose.y, self._pose.yaw])
        info = {"displacement": float(outcome.displacement), "contacts": outcome.contacts}
        if outcome.collided:
            self.collisions.append({"step": step, "position": [self._pose.x, self._pose.y],
                                    "labels": sorted({c.get("label", "?") for c in outcome.contacts}),
                                    "displacement": round(float(outcome.displacement), 4)})
        if outcome.failure:
            self.termination, self.failure = "failure", outcome.failure
            info["failure"] = outcome.failure
        return self._finish_step(action, StepResult(self._obs, self._pose, bool(outcome.collided), False, None, info))

    # -- scoring --------------------------------------------------------------------------

    def metrics(self) -> dict[str, Any]:
        """The episode's metrics so far (final once :attr:`done`), as the task scores them."""
        self._require_started()
        return score_rollout(self)

    def record(self) -> dict[str, Any]:
        """The episode record the runner writes (metrics, trajectory, actions, collisions ...).
        Once the episode is over the record is fixed and ``on_episode_end`` hooks run (once)."""
        from ..sim.types import AgentPose

        self._require_started()
        if self._record is not None:
            return self._record
        episode = self.episode
        metrics = self.metrics()
        outputs = self.agent.outputs if self.agent is not None else self.outputs
        record = {
            "episode_id": episode.episode_id, "scene_id": episode.scene_id, "task_type": episode.task_type,
            "split": episode.split, "instruction": episode.instruction_text, "metrics": metrics,
            "decision": self.decision, "termination": self.termination, "failure": self.failure,
            "steps": len(self.actions), "moves": self.moves, "invalid_actions": len(self.invalid),
            "invalid": self.invalid[:20], "trajectory": np.round(self.poses, 4).tolist(), "actions": self.actions,
            "collisions": self.collisions, "agent_outputs": to_jsonable(outputs),
            "reference_path": np.round(np.asarray(episode.reference_path, dtype=float), 4).tolist(),
            "goals": self.goals_xy.tolist(),
            "start_adjusted_m": round(self.start.distance_to(AgentPose(*self.poses[0][:2])), 4),
            "duration_s": round(time.perf_counter() - self._t0, 3),
            "outcome": "not_evaluated" if self.not_evaluated else "evaluated",
        }
        if self.not_evaluated:
            record["not_evaluated"] = self.not_evaluated
        if self.done:  # the failed episode's first error (``vlnverse.run.diagnostics``), for every agent
            from .diagnostics import episode_first_error, scene_landmarks

            record["first_error"] = episode_first_error(
                record, landmarks=scene_landmarks(episode, self.ctx), success_distance=self.settings.success_distance,
                goal_distance=self.goal_distance(np.asarray(self.poses, dtype=float)[:, :2]),
                success_metric=self.scoring.headline)
        if self.done:
            self._record = record
            self._fire("on_episode_end", record)
        return record


def run_episode(episode: Any, ctx: Any, sim: Any, mode: Any, agent: Agent, settings: Any, *,
                hooks: Iterable[Any] = (), task: Any = None, scene_cache: dict | None = None) -> dict:
    """Run one episode to its end and return its record: ``reset``, then
    ``step(agent.act(observations, state))`` until done (an agent that raises uses up a step;
    one that raises :class:`NotEvaluated` ends the episode not evaluated)."""
    rollout = Rollout(episode, ctx, sim, mode, settings, task=task, hooks=hooks, agent=agent, scene_cache=scene_cache)
    rollout.reset()
    while not rollout.done:
        try:
            action = agent.act(rollout.observations, rollout.state)
        except NotEvaluated as exc:
            rollout.abandon(exc)
            break
        except Exception as exc:  # noqa: BLE001 - an agent bug is one failed step, not a crashed run
            rollout.agent_error(exc)
            continue
        rollout.step(action)
    return rollout.record()


def scene_mode(name: str, sim: Any, ctx: Any, params: dict | None = None) -> Any:
    """The collision mode ``name`` for ``sim`` with the simulator's action sizes (its
    ``ControlConfig``), the scene's planner (Tel-Hop, graph) and navigation graph (graph), and
    ``params`` (the eval config's ``mode_params.<name>``) on top."""
    from ..core.errors import ConfigError
    from .modes import check_mode_params, make_mode

    check_mode_params(name, params)  # a config built in code is checked here
    control = sim.control
    kwargs = {"forward_step": control.forward_step, "turn_angle_deg": control.turn_angle_deg,
              "look_angle_deg": control.look_angle_deg, **dict(params or {})}
    if name == "graph":
        kwargs.setdefault("navgraph", getattr(ctx.navgraph, "graph", ctx.navgraph))
    if name in ("telhop", "graph"):
        kwargs.setdefault("planner", ctx.planner)
    try:
        return make_mode(name, sim, **kwargs)
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(exc), field=f"mode_params.{name}") from None


def open_scene(scene_path: Any, settings: Any, *, sensors: Iterable[Any] | None = None, backend: str = "auto",
               scene_loader: Callable[[str, Any, float], Any] | None = None, quality: str | None = None,
               objects: str | None = None) -> tuple[Any, Callable[[], Any]]:
    """A scene's context (``scene_loader(path, body, resolution)``, default ``load_scene_context``,
    with the run's render options) and a function that builds a simulator of it with ``sensors``
    (see ``run_scene`` for ``quality`` and ``objects``)."""
    from ..sim import make_simulator
    from ..tasks.base import load_scene_context

    ctx = (scene_loader or load_scene_context)(str(scene_path), settings.body, settings.resolution)
    options = {**({} if quality is None else {"quality": quality}),
               **({} if objects in (None, "primitives") else {"objects": objects})}
    if hasattr(ctx, "with_render_options"):  # agents that render their own views use the run's settings
        ctx = ctx.with_render_options(options)

    def new_sim() -> Any:
        return make_simulator(ctx.desc, settings.body, sensors=None if sensors is None else list(sensors),
                              backend=backend, **options)

    return ctx, new_sim


def run_scene(scene_path: Any, episodes: Iterable[Any], settings: Any, agent: Agent, *, collision_mode: str = "strict",
              mode_params: dict | None = None, sensors: Iterable[Any] | None = None, backend: str = "auto",
              scene_loader: Callable[[str, Any, float], Any] | None = None, hooks: Iterable[Any] = (),
              extra: dict | None = None, visuals: Callable[[dict, Any, Any], None] | None = None,
              on_record: Callable[[dict], None] | None = None, quality: str | None = None,
              objects: str | None = None, threads: int = 1, agent_factory: Callable[[], Agent] | None = None) -> list[dict]:
    """Evaluate ``episodes`` of one scene: load its context (``scene_loader(path, body,
    resolution)``, default ``load_scene_context``), build one simulator and collision mode, run
    every episode and return their records. Everything it uses is an argument or lives in this
    call (the per-scene cache of the task scorers), so parallel workers can call it.

    ``extra`` is added to each record (e.g. agent name and collision mode); ``visuals(record,
    ctx, sim)`` runs while the simulator is alive (report maps/frames); ``on_record(record)``
    runs as each episode finishes (e.g. append it to the episode log). ``quality`` is the
    render preset (``fast | default | high``; the backend's default when None), ``objects`` how
    objects are drawn (``primitives | meshes``; passed to the backend only when ``meshes``). The
    agents get them too, on the scene context (``SceneContext.render_options``), for the views
    they render themselves.

    ``threads`` > 1 with ``agent_factory`` runs up to that many episodes at once in threads, each
    with its own simulator, collision mode and agent (``agent_factory()``), when the backend allows
    it (``Simulator.threadsafe_instances``: the simulator-free backend; otherwise one at a time).
    Episodes are independent (each resets its agent and simulator), so the records are the serial
    ones, and ``visuals`` / ``on_record`` run in this thread in the episodes' order."""
    ctx, new_sim = open_scene(scene_path, settings, sensors=sensors, backend=backend, scene_loader=scene_loader,
                              quality=quality, objects=objects)
    sim = new_sim()
    episodes = list(episodes)
    if threads > 1 and agent_factory is not None and len(episodes) > 1 and getattr(sim, "threadsafe_instances", False):
        try:
            return _run_scene_threaded(ctx, sim, new_sim, episodes, settings, agent, agent_factory, threads,
                                       collision_mode=collision_mode, mode_params=mode_params, hooks=hooks,
                                       extra=extra, visuals=visuals, on_record=on_record)
        finally:
            sim.close()
    scene_cache: dict = {}
    records = []
    try:
        mode = scene_mode(collision_mode, sim, ctx, mode_params)
        for episode in episodes:
            record = run_episode(episode, ctx, sim, mode, agent, settings, hooks=hooks, scene_cache=scene_cache)
            record.update(extra or {})
            if visuals is not None:
                visuals(record, ctx, sim)
            if on_record is not None:
                on_record(record)
            records.append(record)
    finally:
        sim.close()
    return records


def _run_scene_threaded(ctx: Any, sim: Any, new_sim: Callable[[], Any], episodes: list, settings: Any, agent: Agent,
                        agent_factory: Callable[[], Agent], threads: int, *, collision_mode: str,
                        mode_params: dict | None, hooks: Iterable[Any], extra: dict | None,
                        visuals: Callable | None, on_record: Callable | None) -> list[dict]:
    """``run_scene``'s body with up to ``threads`` episodes at once (see there)."""
    import queue
    import threading
    from concurrent.futures import ThreadPoolExecutor

    hooks = list(hooks)
    free: queue.Queue = queue.Queue()  # (simulator, mode, agent, scene cache) sets, one per busy thread
    made: list[Any] = []
    lock = threading.Lock()

    def take() -> tuple:
        try:
            return free.get_nowait()
        except queue.Empty:
            with lock:
                first = not made
                worker_sim = new_sim()
                made.append(worker_sim)
            return (worker_sim, scene_mode(collision_mode, worker_sim, ctx, mode_params),
                    agent if first else agent_factory(), {})

    def one(episode: Any) -> dict:
        kit = take()
        try:
            worker_sim, mode, worker_agent, cache = kit
            record = run_episode(episode, ctx, worker_sim, mode, worker_agent, settings, hooks=hooks, scene_cache=cache)
            record.update(extra or {})
            return record
        finally:
            free.put(kit)

    scene_mode(collision_mode, sim, ctx, mode_params)  # a bad mode_params value fails here, once
    records = []
    try:
        with ThreadPoolExecutor(max_workers=min(threads, len(episodes)), thread_name_prefix="episode") as pool:
            futures = [pool.submit(one, episode) for episode in episodes]
            try:
                for future in futures:  # the serial order: each record as soon as those before it are done
                    record = future.result()
                    if visuals is not None:
                        visuals(record, ctx, sim)
                    if on_record is not None:
                        on_record(record)
                    records.append(record)
            except BaseException:
                for future in futures:
                    future.cancel()
                raise
    finally:
        for worker_sim in made:
            worker_sim.close()
    return records
