"""Teacher-labelled rollouts in the simulator, through the eval runner's own ``run_episode``.

``TeacherForcingAgent`` wraps the teacher (the oracle's ``best_action(pose)``, the one source of
truth for the correct discrete action) and optionally a learner: at every visited state it records
the sensor frames, the teacher's label and the pose, then executes the teacher's action with
probability ``beta`` and the learner's otherwise (β = 1: teacher forcing for the observation
cache; β = p^round: DAgger). Episodes run through the runner's ``run_scene`` / ``Rollout`` (the
same collision-mode rules as evaluation); a rollout hook writes each finished episode to the store.
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


def collect(episodes: list, *, settings: Any, sensors: list, collision_mode: str, store: Any,
            scene_loader: Callable[[str, Any, float], Any] | None = None, mode_params: dict | None = None,
            learner: Any = None, beta: float = 1.0, seed: int = 0, backend: str = "auto",
            progress: bool = True, desc: str = "collect", teacher: Any = None) -> dict[str, Any]:
    """Run ``episodes`` with a ``TeacherForcingAgent`` through the runner's ``run_scene`` (one
    simulator per scene, the rollout seam) and append every visited step to ``store`` (a
    ``StoreEpisodes`` hook); returns ``{"episodes", "steps", "seconds", "steps_per_s", "records"}``.
    ``teacher`` (a policy's teacher spec with ``make_agent(learner, beta, sensors, seed)``, e.g.
    RDP's continuous waypoint teacher) replaces the discrete oracle teacher."""
    from tqdm import tqdm

    from ..eval.rollout import run_scene

    names = tuple(s.name for s in sensors)
    agent = (teacher.make_agent(learner=learner, beta=beta, sensors=names, seed=seed) if teacher is not None else
             TeacherForcingAgent(learner=learner, beta=beta, sensors=names, seed=seed))
    writer = StoreEpisodes(agent, store)
    by_scene: dict[str, list] = {}
    for ep in episodes:
        by_scene.setdefault(str(ep.scene_path), []).append(ep)
    records: list[dict] = []
    t0 = time.perf_counter()
    bar = tqdm(total=len(episodes), desc=desc, unit="ep", disable=not progress)
    try:
        for scene_path, scene_eps in by_scene.items():
            run_scene(scene_path, scene_eps, settings, agent, collision_mode=collision_mode,
                      mode_params=(mode_params or {}).get(collision_mode, {}), sensors=sensors, backend=backend,
                      scene_loader=scene_loader, hooks=[writer], on_record=lambda r: (records.append(r), bar.update(1)))
    finally:
        bar.close()
    seconds = time.perf_counter() - t0
    return {"episodes": len(records), "steps": writer.steps, "seconds": round(seconds, 3),
            "steps_per_s": round(writer.steps / seconds, 2) if seconds > 0 else None, "records": records}
