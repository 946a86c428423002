"""Teacher-labelled rollouts in the simulator, through the eval runner's own ``run_episode``.

``TeacherForcingAgent`` wraps the teacher (the oracle's ``best_action(pose)``, the one source of
truth for the correct discrete action) and optionally a learner: at every visited state it records
the sensor frames, the teacher's label and the pose, then executes the teacher's action with
probability ``beta`` and the learner's otherwise (β = 1: teacher forcing for the observation
cache; β = p^round: DAgger). Episodes run through the runner's ``run_scene`` / ``Rollout`` (the
same collision-mode rules as evaluation), scene by scene in this process or on parallel workers
(``vlnverse.core.jobs``); this process alone writes each finished episode to the store, in
the serial order. ``StoreEpisodes`` is the same writer as a rollout hook, for code that drives
``Rollout`` itself.

Two ways to render the teacher's observations (``RENDER_PATHS``): ``physics`` renders every
sensor at each step inside the rollout, as evaluation does; ``teleport`` (Tel-Hop with the
discrete oracle teacher) runs the same rollout with no sensor attached -- the simulator only
teleports the agent and probes the destination, so the poses and labels are the physics
rollout's -- and then renders each episode's frames at the recorded poses in one batch through
``render_at``, RGB and depth of a matching rig in one pass (``render_frames``). Either way the
simulator draws with the run's render settings (``render_settings``: the train config's
``render``, quality and objects; None or the defaults: the simulator's defaults).
"""
from __future__ import annotations

import time
import zlib
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np

from ..core.precision import timed_rate
from ..run.agents import Agent, AgentState, OracleAgent
from ..sim.types import DiscreteAction


class TeacherSpec:
    """A policy's teacher (``VLNPolicy.teacher_spec``): what ``collect`` and the observation cache
    use instead of the discrete oracle. Subclasses (frozen dataclasses) give ``key`` (its part of
    the cache key), ``extra_fields`` (per-step labels beside the frames) and ``make_agent``."""

    #: the observation setup it records (a field of teachers that take one; None: it takes none)
    observation: Any = None

    @property
    def key(self) -> dict[str, Any]:
        raise NotImplementedError

    def key_for(self, episodes: list) -> dict[str, Any]:
        """The cache key's teacher part for ``episodes``: ``key`` unless it depends on them."""
        return self.key

    @property
    def extra_fields(self) -> dict[str, list[int]]:
        return {}

    def make_agent(self, *, learner: Any = None, beta: float = 1.0, sensors: tuple[str, ...] = (),
                   seed: int = 0) -> "TeacherForcingAgent":
        raise NotImplementedError


class TeacherForcingAgent(Agent):
    """Records (frames, teacher label, executed action, pose) per step; acts as the teacher with
    probability ``beta``, else as ``learner`` (an object with ``reset``, ``propose(observations)``
    and ``set_previous(action)``, e.g. ``PolicyAgent``)."""

    name = "teacher_forcing"

    def __init__(self, *, learner: Any = None, beta: float = 1.0, sensors: tuple[str, ...] = (), seed: int = 0,
                 teacher_params: dict[str, Any] | None = None):
        super().__init__(seed=seed)
        if learner is None and beta < 1.0:
            raise ValueError("beta < 1 needs a learner")
        self.teacher = OracleAgent(**(teacher_params or {}))
        self.learner, self.beta, self.sensors = learner, float(beta), tuple(sensors)
        self.steps: list[dict[str, Any]] = []
        #: the full pose (float64, with pitch) of every recorded step: where a teleport render draws it
        self.poses: list[Any] = []
        self.rng = np.random.default_rng(seed)

    def reset(self, episode: Any, context: Any) -> None:
        """Reset teacher and learner; reseed the β draws from (seed, episode id)."""
        super().reset(episode, context)
        self.teacher.reset(episode, context)
        if self.learner is not None:
            self.learner.reset(episode, context)
        self.steps, self.poses = [], []
        self.rng = np.random.default_rng([self.seed, zlib.crc32(str(episode.episode_id).encode())])

    def act(self, observations: dict[str, Any], state: AgentState) -> DiscreteAction:
        """Label the state with the teacher, pick the executed action, record the step."""
        self.teacher.success_distance = state.success_distance
        self.teacher.use_control(state)  # the turn size in force, as the oracle agent does
        label = DiscreteAction(self.teacher.best_action(state.pose))
        proposal = self.learner.propose(observations) if self.learner is not None else None
        executed = label if proposal is None or self.rng.random() < self.beta else DiscreteAction(proposal)
        if self.learner is not None:
            self.learner.set_previous(executed)
        step = {name: np.array(observations[name]) for name in self.sensors}
        step.update(label=int(label), executed=int(executed),
                    pose=np.array([state.pose.x, state.pose.y, state.pose.yaw], dtype=np.float32))
        self.steps.append(step)
        self.poses.append(state.pose)
        return executed


class StoreEpisodes:
    """Rollout hook: on each episode's end, append the ``TeacherForcingAgent``'s recorded steps to ``store``."""

    def __init__(self, agent: TeacherForcingAgent, store: Any):
        self.agent, self.store = agent, store
        self.steps = 0

    def on_episode_end(self, rollout: Any, record: dict) -> None:
        """Write the episode's steps."""
        self.store.add_episode(rollout.episode.episode_id, rollout.episode.instruction_text, self.agent.steps)
        self.steps += len(self.agent.steps)


#: How the teacher's frames are rendered (see the module docstring).
RENDER_PATHS = ("physics", "teleport")


def resolve_render_path(requested: str, collision_mode: str, teacher: Any, sensors: list) -> str:
    """``physics`` or ``teleport`` for a cache render setting (``auto``: ``teleport`` where it gives
    the physics rollout's poses -- Tel-Hop, the discrete oracle teacher, sensors rendered at every
    step -- else ``physics``); ``teleport`` asked where it cannot apply is a ``ConfigError``."""
    from ..core.errors import ConfigError

    why = None
    if collision_mode != "telhop":
        why = f"collision_mode {collision_mode!r} moves the agent through physics"
    elif teacher is not None:
        why = "the policy's own teacher reads its observations while it acts"
    elif any(getattr(s, "rate_hz", None) is not None for s in sensors):
        why = "a sensor with rate_hz repeats frames on the simulation clock"
    if requested == "auto":
        return "physics" if why else "teleport"
    if requested not in RENDER_PATHS:
        raise ConfigError(f"got {requested!r}", field="cache.render", expected=f"auto or one of {RENDER_PATHS}")
    if requested == "teleport" and why:
        raise ConfigError(f"teleport rendering needs Tel-Hop and the oracle teacher: {why}", field="cache.render",
                          expected="auto or physics")
    return requested


def _rgbd_pass(sensors: list) -> Any:
    """A one-view ``PanoramaSpec`` drawing an RGB and a depth camera of the same image, field of
    view and mount in one render (the renderer reads depth from the RGB pass), or None."""
    from ..sim.sensors import CameraSpec, PanoramaSpec

    if len(sensors) != 2 or not all(isinstance(s, CameraSpec) for s in sensors):
        return None
    kinds = {s.kind: s for s in sensors}
    if set(kinds) != {"rgb", "depth"}:
        return None
    rgb, depth = kinds["rgb"], kinds["depth"]
    if (rgb.width, rgb.height, rgb.hfov_deg, tuple(rgb.mount)) != (depth.width, depth.height, depth.hfov_deg,
                                                                  tuple(depth.mount)):
        return None
    return PanoramaSpec(name="teacher_rgbd", views=1, modalities=("rgb", "depth"), camera=replace(depth, rate_hz=None))


def render_frames(sim: Any, poses: list, sensors: list) -> list[dict[str, np.ndarray]]:
    """Frames of ``sensors`` at each agent pose of ``poses``, by name, as the simulator's
    observations give them, rendered with ``sim.render_at`` (the agent stays where it is)."""
    both = _rgbd_pass(sensors)
    out = []
    for pose in poses:
        if both is not None:
            got = sim.render_at(pose, both)
            frames = {s.name: np.array(got[f"{both.name}_{s.kind}"][0]) for s in sensors}
        else:
            frames = {}
            for s in sensors:
                frames.update({k: np.array(v) for k, v in sim.render_at(pose, s).items()})
        out.append(frames)
    return out


@dataclass(frozen=True)
class CollectJob:
    """The payload of one scene's collection job (``collect_scene_job``; picklable for workers)."""

    teacher: Any
    learner: Any
    beta: float
    seed: int
    settings: Any
    sensors: list
    sensor_names: tuple
    collision_mode: str
    mode_params: dict
    backend: str
    scene_loader: Callable[..., Any] | None
    torch_threads: int | None
    render: str
    scene_path: str = ""
    #: the run's ``RenderConfig`` (quality, objects); None: the simulator's defaults
    render_settings: Any = None
    episodes: list = field(default_factory=list)


def collect_scene_job(payload: CollectJob, items: tuple, state: dict, emit: Callable[[str, Any], None]) -> None:
    """Parallel job (``vlnverse.core.jobs``): roll out the episodes ``items`` of one scene with
    a recording agent and ``emit(episode_id, {"record", "instruction", "steps"})`` as each ends;
    the driver writes the steps to the store in the serial order."""
    from ..run.rollout import run_scene

    if payload.torch_threads and state.get("torch_threads") != payload.torch_threads:
        import torch  # the learner's numbers match the driver's only with the same intra-op thread count

        torch.set_num_threads(int(payload.torch_threads))
        state["torch_threads"] = payload.torch_threads
    teacher, names = payload.teacher, payload.sensor_names
    kwargs = dict(learner=payload.learner, beta=payload.beta, sensors=names, seed=payload.seed)
    agent = teacher.make_agent(**kwargs) if teacher is not None else TeacherForcingAgent(**kwargs)
    wanted = set(items)
    episodes = [ep for ep in payload.episodes if ep.episode_id in wanted]
    teleport = payload.render == "teleport"
    if teleport:  # the rollout only moves the agent; frames are drawn afterwards at its poses
        agent.sensors = ()

    def draw(record: dict, ctx: Any, sim: Any) -> None:  # the episode's frames, while its simulator lives
        for step, frames in zip(agent.steps, render_frames(sim, agent.poses, payload.sensors)):
            step.update(frames)

    def done(record: dict) -> None:  # runs after the episode's last step, before the next reset
        emit(record["episode_id"], {"record": record, "instruction": record["instruction"], "steps": agent.steps})

    run_scene(payload.scene_path, episodes, payload.settings, agent, collision_mode=payload.collision_mode,
              mode_params=payload.mode_params, sensors=[] if teleport else payload.sensors,
              backend=payload.backend, scene_loader=payload.scene_loader, on_record=done,
              visuals=draw if teleport else None, **(payload.render_settings.options() if payload.render_settings is not None else {}))


def collect(episodes: list, *, settings: Any, sensors: list, collision_mode: str, store: Any,
            scene_loader: Callable[[str, Any, float], Any] | None = None, mode_params: dict | None = None,
            learner: Any = None, beta: float = 1.0, seed: int = 0, backend: str = "auto",
            progress: bool = True, desc: str = "collect", teacher: Any = None,
            workers: int = 1, engine: str = "local", address: str | None = None,
            job_timeout: float | None = None, render: str = "physics", render_settings: Any = None) -> dict[str, Any]:
    """Run ``episodes`` with a ``TeacherForcingAgent`` through the runner's ``run_scene`` (one
    simulator per scene, the rollout seam) and append every visited step to ``store``; returns
    ``{"episodes", "steps", "seconds", "steps_per_s", "records"}``. ``teacher`` (a policy's
    teacher spec with ``make_agent(learner, beta, sensors, seed)``, e.g. RDP's continuous
    waypoint teacher) replaces the discrete oracle teacher. ``render``: ``physics`` or
    ``teleport`` (``RENDER_PATHS``; teleport only with β = 1 and no learner: the frames are
    drawn after each episode, so nothing may act on them). ``render_settings``: the
    ``RenderConfig`` every simulator draws with (quality, objects; the teacher's and learner's own
    panoramas too, through the scene context's ``render_options``); None: the defaults.

    ``workers`` / ``engine`` / ``address`` / ``job_timeout`` roll scenes out in parallel
    (``vlnverse.core.jobs``; ``scene_loader``, ``teacher`` and ``learner`` are then pickled
    to the workers). The agent's draws are seeded per episode, and this process alone writes the
    store, episode by episode in the serial order (scene by scene, as given), so the store's
    files are byte-identical to a serial run's whatever the worker count or engine. A scene
    that keeps failing raises ``VLNVerseError`` naming it."""
    from tqdm import tqdm

    from ..core.errors import VLNVerseError
    from ..core.jobs import CONFIG_FIELDS, ParallelConfig, run_jobs
    from ..tasks.scene_jobs import scene_jobs

    parallel = ParallelConfig(workers, engine, address, job_timeout).checked(CONFIG_FIELDS)
    if render not in RENDER_PATHS or (render == "teleport" and (learner is not None or teacher is not None)):
        raise ValueError(f"render={render!r}: one of {RENDER_PATHS}; teleport only for the oracle teacher alone")
    by_scene: dict[str, list] = {}
    for ep in episodes:
        by_scene.setdefault(str(ep.scene_path), []).append(ep)
    inline = parallel.inline
    torch_threads = None
    if learner is not None and not inline:
        import torch

        torch_threads = torch.get_num_threads()
    common = CollectJob(teacher=teacher, learner=learner, beta=beta, seed=seed, settings=settings, sensors=sensors,
                        sensor_names=tuple(s.name for s in sensors), collision_mode=collision_mode,
                        mode_params=(mode_params or {}).get(collision_mode, {}), backend=backend,
                        scene_loader=scene_loader, torch_threads=torch_threads, render=render,
                        render_settings=render_settings)
    jobs = scene_jobs(by_scene, common, send=not inline, field_name="workers",
                      expected="1, or a module-level scene_loader and picklable teacher / learner")
    order = [ep.episode_id for eps in by_scene.values() for ep in eps]
    waiting: dict[str, dict] = {}
    records: list[dict] = []
    steps = 0
    t0 = time.perf_counter()
    bar = tqdm(total=len(episodes), desc=desc, unit="ep", disable=not progress)

    def on_result(episode_id: str, result: dict) -> None:
        nonlocal steps
        waiting[episode_id] = result
        bar.update(1)
        while len(records) < len(order) and order[len(records)] in waiting:  # the serial order, as soon as it can
            got = waiting.pop(order[len(records)])
            store.add_episode(order[len(records)], got["instruction"], got["steps"])
            steps += len(got["steps"])
            records.append(got["record"])

    try:
        from ..run.rollout import WORKER_PRELOAD
        from ..sim.api import backend_module

        report = run_jobs(collect_scene_job, jobs, on_result=on_result, parallel=parallel,
                          preload=WORKER_PRELOAD + (backend_module(backend),))
    finally:
        bar.close()
    if report.failures:
        raise VLNVerseError(f"collect: {report.failure_summary()}")
    seconds, steps_per_s = timed_rate(steps, time.perf_counter() - t0)
    return {"episodes": len(records), "steps": steps, "seconds": seconds, "steps_per_s": steps_per_s,
            "records": records}
