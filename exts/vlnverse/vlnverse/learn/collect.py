"""Teacher-labelled rollouts in the simulator, through the eval runner's own ``run_episode``.

``TeacherForcingAgent`` wraps the teacher (the oracle's ``best_action(pose)``, the one source of
truth for the correct discrete action) and optionally a learner: at every visited state it records
the sensor frames, the teacher's label and the pose, then executes the teacher's action with
probability ``beta`` and the learner's otherwise (β = 1: teacher forcing for the observation
cache; β = p^round: DAgger). Episodes run under the runner's collision mode rules (Strict, Tel-Hop).
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


def make_mode_for(sim: Any, ctx: Any, collision_mode: str, mode_params: dict[str, Any] | None = None) -> Any:
    """The runner's collision mode over ``sim`` (control steps from the simulator, the planner for Tel-Hop)."""
    from ..eval.modes import make_mode

    control = sim.control
    params = {"forward_step": control.forward_step, "turn_angle_deg": control.turn_angle_deg,
              "look_angle_deg": control.look_angle_deg, **(mode_params or {}).get(collision_mode, {})}
    if collision_mode in ("telhop", "graph"):
        params.setdefault("planner", ctx.planner)
    return make_mode(collision_mode, sim, **params)


def collect(episodes: list, *, settings: Any, sensors: list, collision_mode: str, store: Any,
            scene_loader: Callable[[str, Any, float], Any] | None = None, mode_params: dict | None = None,
            learner: Any = None, beta: float = 1.0, seed: int = 0, backend: str = "auto",
            progress: bool = True, desc: str = "collect") -> dict[str, Any]:
    """Run ``episodes`` with a ``TeacherForcingAgent`` and append every visited step to ``store``;
    returns ``{"episodes", "steps", "seconds", "steps_per_s", "records"}`` (records: the runner's
    episode records)."""
    from tqdm import tqdm

    from ..eval.runner import run_episode
    from ..sim import make_simulator
    from ..tasks.base import load_scene_context

    agent = TeacherForcingAgent(learner=learner, beta=beta, sensors=tuple(s.name for s in sensors), seed=seed)
    by_scene: dict[str, list] = {}
    for ep in episodes:
        by_scene.setdefault(str(ep.scene_path), []).append(ep)
    steps, records, t0 = 0, [], time.perf_counter()
    bar = tqdm(total=len(episodes), desc=desc, unit="ep", disable=not progress)
    try:
        for scene_path, scene_eps in by_scene.items():
            ctx = (scene_loader or load_scene_context)(scene_path, settings.body, settings.resolution)
            sim = make_simulator(ctx.desc, settings.body, sensors=sensors, backend=backend)
            try:
                mode = make_mode_for(sim, ctx, collision_mode, mode_params)
                for ep in scene_eps:
                    record = run_episode(ep, ctx, sim, mode, agent, settings)
                    store.add_episode(ep.episode_id, ep.instruction_text, agent.steps)
                    steps += len(agent.steps)
                    records.append(record)
                    bar.update(1)
            finally:
                sim.close()
    finally:
        bar.close()
    seconds = time.perf_counter() - t0
    return {"episodes": len(records), "steps": steps, "seconds": round(seconds, 3),
            "steps_per_s": round(steps / seconds, 2) if seconds > 0 else None, "records": records}
