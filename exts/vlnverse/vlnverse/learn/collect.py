"""Teacher-labelled rollouts in the simulator, through the eval runner's own ``run_episode``.

``TeacherForcingAgent`` wraps the teacher (the oracle's ``best_action(pose)``, the one source of
truth for the correct discrete action) and optionally a learner: at every visited state it records
the sensor frames, the teacher's label and the pose, then executes the teacher's action with
probability ``beta`` and the learner's otherwise (β = 1: teacher forcing for the observation
cache; β = p^round: DAgger). Episodes run through the runner's ``run_scene`` / ``Rollout`` (the
same collision-mode rules as evaluation), scene by scene in this process or on parallel workers
(``vlnverse.core.parallel``); this process alone writes each finished episode to the store, in
the serial order. ``StoreEpisodes`` is the same writer as a rollout hook, for code that drives
``Rollout`` itself.
"""
from __future__ import annotations

import time
import zlib
from typing import Any, Callable

import numpy as np

from ..eval.agents import Agent, AgentState, OracleAgent
from ..sim.types import DiscreteAction


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
        self.rng = np.random.default_rng(seed)

    def reset(self, episode: Any, context: Any) -> None:
        """Reset teacher and learner; reseed the β draws from (seed, episode id)."""
        super().reset(episode, context)
        self.teacher.reset(episode, context)
        if self.learner is not None:
            self.learner.reset(episode, context)
        self.steps = []
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


def collect_scene_job(payload: dict, items: tuple, state: dict, emit: Callable[[str, Any], None]) -> None:
    """Parallel job (``vlnverse.core.parallel``): roll out the episodes ``items`` of one scene with
    a recording agent and ``emit(episode_id, {"record", "instruction", "steps"})`` as each ends;
    the driver writes the steps to the store in the serial order."""
    from ..eval.rollout import run_scene

    if payload.get("torch_threads") and state.get("torch_threads") != payload["torch_threads"]:
        import torch  # the learner's numbers match the driver's only with the same intra-op thread count

        torch.set_num_threads(int(payload["torch_threads"]))
        state["torch_threads"] = payload["torch_threads"]
    teacher, names = payload["teacher"], payload["sensor_names"]
    kwargs = dict(learner=payload["learner"], beta=payload["beta"], sensors=names, seed=payload["seed"])
    agent = teacher.make_agent(**kwargs) if teacher is not None else TeacherForcingAgent(**kwargs)
    wanted = set(items)
    episodes = [ep for ep in payload["episodes"] if ep.episode_id in wanted]

    def done(record: dict) -> None:  # runs after the episode's last step, before the next reset
        emit(record["episode_id"], {"record": record, "instruction": record["instruction"], "steps": agent.steps})

    run_scene(payload["scene_path"], episodes, payload["settings"], agent, collision_mode=payload["collision_mode"],
              mode_params=payload["mode_params"], sensors=payload["sensors"], backend=payload["backend"],
              scene_loader=payload["scene_loader"], on_record=done)


def collect(episodes: list, *, settings: Any, sensors: list, collision_mode: str, store: Any,
            scene_loader: Callable[[str, Any, float], Any] | None = None, mode_params: dict | None = None,
            learner: Any = None, beta: float = 1.0, seed: int = 0, backend: str = "auto",
            progress: bool = True, desc: str = "collect", teacher: Any = None,
            workers: int = 1, engine: str = "local", address: str | None = None,
            job_timeout: float | None = None) -> dict[str, Any]:
    """Run ``episodes`` with a ``TeacherForcingAgent`` through the runner's ``run_scene`` (one
    simulator per scene, the rollout seam) and append every visited step to ``store``; returns
    ``{"episodes", "steps", "seconds", "steps_per_s", "records"}``. ``teacher`` (a policy's
    teacher spec with ``make_agent(learner, beta, sensors, seed)``, e.g. RDP's continuous
    waypoint teacher) replaces the discrete oracle teacher.

    ``workers`` / ``engine`` / ``address`` / ``job_timeout`` roll scenes out in parallel
    (``vlnverse.core.parallel``; ``scene_loader``, ``teacher`` and ``learner`` are then pickled
    to the workers). The agent's draws are seeded per episode, and this process alone writes the
    store, episode by episode in the serial order (scene by scene, as given), so the store's
    files are byte-identical to a serial run's whatever the worker count or engine. A scene
    that keeps failing raises ``VLNVerseError`` naming it."""
    from tqdm import tqdm

    from ..core.errors import VLNVerseError
    from ..core.parallel import check_engine, check_job_timeout, check_workers, run_jobs, scene_jobs

    check_workers(workers, "workers")
    check_engine(engine, address)
    check_job_timeout(job_timeout)
    by_scene: dict[str, list] = {}
    for ep in episodes:
        by_scene.setdefault(str(ep.scene_path), []).append(ep)
    inline = workers == 1 and engine == "local"
    torch_threads = None
    if learner is not None and not inline:
        import torch

        torch_threads = torch.get_num_threads()
    common = {"teacher": teacher, "learner": learner, "beta": beta, "seed": seed, "settings": settings,
              "sensors": sensors, "sensor_names": tuple(s.name for s in sensors), "collision_mode": collision_mode,
              "mode_params": (mode_params or {}).get(collision_mode, {}), "backend": backend,
              "scene_loader": scene_loader, "torch_threads": torch_threads}
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
        from ..eval.runner import WORKER_PRELOAD
        from ..sim.api import backend_module

        report = run_jobs(collect_scene_job, jobs, on_result=on_result, workers=workers, engine=engine,
                          address=address, job_timeout=job_timeout, preload=WORKER_PRELOAD + (backend_module(backend),))
    finally:
        bar.close()
    if report.failures:
        raise VLNVerseError(f"collect: {report.failure_summary()}")
    seconds = time.perf_counter() - t0
    return {"episodes": len(records), "steps": steps, "seconds": round(seconds, 3),
            "steps_per_s": round(steps / seconds, 2) if seconds > 0 else None, "records": records}
