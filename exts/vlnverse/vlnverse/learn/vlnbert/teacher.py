"""VLN-BERT's waypoint oracle (``VLNBertTeacher``) and its recording agent, ordered sub-goals of
long-horizon episodes."""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...core.geometry import wrap_angle
from ...sim.types import DiscreteAction, WaypointAction
from ...tasks.base import render_options
from ..collect import TeacherForcingAgent, TeacherSpec
from ..waypoints.grid import ObservationSetup, to_world
from ..waypoints.model import WaypointPredictor, load_predictor
from .perception import TURN_ANGLES_DEG, Perception, candidate_action, in_open_space, is_turn, relax_after


@dataclass(frozen=True)
class VLNBertTeacher(TeacherSpec):
    """The waypoint oracle of VLN-BERT (see the module docstring), used by the observation cache
    and DAgger instead of the discrete oracle."""

    predictor_path: str
    stop_distance: float = 1.5
    open_space_radius: float = 0.3
    turn_deg: float = 30.0
    #: what the agent sees (a multi-task run's ``tasks[i].observation``)
    observation: ObservationSetup = ObservationSetup()

    @property
    def key(self) -> dict[str, Any]:
        """Part of the observation-cache key (the predictor by content; a monocular setup and its
        turn candidates)."""
        digest = hashlib.sha256(Path(self.predictor_path).read_bytes()).hexdigest()[:16]
        key = {"kind": "vlnbert", "predictor": digest, "stop_distance": self.stop_distance,
               "open_space_radius": self.open_space_radius, "turn_deg": self.turn_deg,
               "route": "subgoals"}  # ordered sub-goals visited in turn (caches labelled before: rebuilt)
        if not self.observation.monocular:
            return key
        return {**key, "observation": self.observation.to_dict(), "turns": list(TURN_ANGLES_DEG)}

    def _predictor(self) -> WaypointPredictor:
        return load_predictor(self.predictor_path)

    @property
    def extra_fields(self) -> dict[str, list[int]]:
        """Per-step labels stored beside the frames."""
        p = self._predictor()
        return {"view_feats": [p.views, p.params["hidden_size"]], "candidates": [p.params["k"], 3], "target": []}

    def make_agent(self, *, learner: Any = None, beta: float = 1.0, sensors: tuple[str, ...] = (),
                   seed: int = 0) -> "VLNBertTeacherAgent":
        """The recording agent of ``collect``."""
        return VLNBertTeacherAgent(self, learner=learner, beta=beta, sensors=sensors, seed=seed)


#: how far ahead (m) along the shortest path the oracle's turn candidates aim (``path_heading``)
PATH_AHEAD = 0.5
#: the oracle labels at most one turn within this distance (m) of where it last labelled one
TURN_PLACE = 0.1


def ordered_subgoals(episode: Any, planner: Any) -> list[tuple[np.ndarray, Any]]:
    """(point, geodesic distance field) of each sub-goal before the last of an episode whose goals
    count in order (``tasks.scoring.has_ordered_goals``: long-horizon), else none."""
    from ...tasks.scoring import has_ordered_goals

    goals = [np.asarray(g.position[:2], dtype=float) for g in episode.goals]
    if not (has_ordered_goals(episode) and len(goals) > 1):
        return []
    return [(g, planner.distance_field(g)) for g in goals[:-1]]


class VLNBertTeacherAgent(TeacherForcingAgent):
    """Records frames, panorama features, candidates and the oracle's choice; executes the
    oracle's action with probability ``beta``, else the learner's (schedule sampling)."""

    name = "vlnbert_teacher"
    #: sub-goals still to reach, in order (``ordered_subgoals``; set by ``reset``)
    subgoals: list = []
    #: where the oracle last labelled a turn (``turn_towards_path``; None: not yet this episode)
    turned_at: np.ndarray | None = None

    def __init__(self, spec: VLNBertTeacher, **kwargs: Any):
        super().__init__(**kwargs)
        self.spec = spec
        self.perception = Perception(spec._predictor(), spec.observation)
        self.no_candidates = 0

    def reset(self, episode: Any, context: Any) -> None:
        """New episode: the scene context gives the panorama renderer its scene; an episode whose
        goals count in order (long-horizon) gives the route of its sub-goals before the last."""
        super().reset(episode, context)
        self.context = context
        self.no_candidates = self._empty = 0
        self.subgoals = ordered_subgoals(episode, context.planner)
        self.turned_at = None

    def target(self, state: Any) -> tuple[Any, np.ndarray | None]:
        """(geodesic distance function, point) of where the oracle heads: the next sub-goal not
        yet reached, or the episode's goal (``state.goal_distance``; point None)."""
        if self.subgoals:
            xy, field = self.subgoals[0]
            return (lambda pts: field.distance(np.atleast_2d(pts))), xy
        return state.goal_distance, None

    def _candidate_distances(self, state: Any, cands: np.ndarray, n: int, distance: Any) -> tuple[np.ndarray, np.ndarray]:
        """World points of the first ``n`` candidates and their geodesic distances under
        ``distance`` (infinite for a candidate off the navigable map or behind an obstacle)."""
        pose = state.pose
        xy = np.array([pose.x, pose.y])
        planner = self.context.planner
        pts = to_world((pose.x, pose.y, pose.yaw), cands[:n, :2])
        ok = planner.is_navigable(pts) & planner.segments_free(np.repeat(xy[None], n, 0), pts)
        return pts, np.where(ok, np.asarray(distance(pts), dtype=float), np.inf)

    def oracle(self, state: Any, cands: np.ndarray, n: int) -> int:
        """Index of the oracle action: a candidate (0..k-1) or STOP (k). Only candidates on
        navigable cells joined to the agent by a collision-free segment count (others are at an
        infinite distance). A sub-goal counts as reached where the goal would allow STOP (within
        ``stop_distance``, or within the success distance with no candidate leading closer); the
        oracle then heads for the next. Where no candidate leads closer and STOP is not allowed, a
        monocular setup's turn towards the path (``turn_towards_path``; a turn, at distance 0, is
        never closer)."""
        pose = state.pose
        xy = np.array([pose.x, pose.y])
        k = len(cands)
        stop = min(self.spec.stop_distance, state.success_distance)
        while True:
            distance, point = self.target(state)
            d = float(distance(xy[None])[0])
            pts, dist = self._candidate_distances(state, cands, n, distance)
            if point is None or not (d < stop or (not dist.min() < d and d <= state.success_distance)):
                break
            self.subgoals.pop(0)  # this sub-goal is reached here: on to the next
        best = int(np.argmin(dist))
        closer = bool(dist[best] < d)
        if point is None:  # the last goal: STOP there
            if d < stop and (not closer or in_open_space(self.context.planner, xy, self.spec.open_space_radius)):
                return k
            if not closer and d <= state.success_distance:
                return k  # no reachable candidate leads closer and the agent is within the success radius
        turn = self.turn_towards_path(state, cands, xy, point) if not closer else None
        if turn is not None:
            return turn
        aim = self_goal(state, xy) if point is None else point
        return best if np.isfinite(dist[best]) else int(np.argmin(np.linalg.norm(pts - aim, axis=1)))

    def turn_towards_path(self, state: Any, cands: np.ndarray, xy: np.ndarray, point: np.ndarray | None) -> int | None:
        """The turn candidate (``is_turn``) whose heading is nearest the geodesic path's direction
        (``path_heading``) when that direction lies outside the field of view; None with no turn
        candidate, no path, the path in view (a turn would not reveal a candidate there, and the
        next step would turn back), or a turn already labelled within ``TURN_PLACE`` of here
        (``turned_at``: one turn per place; where the predictor finds nothing along the path,
        its no-candidate sweep and a turn back would otherwise repeat forever)."""
        turns = np.flatnonzero(is_turn(cands))
        last = self.turned_at
        if not len(turns) or (last is not None and np.linalg.norm(xy - last) < TURN_PLACE):
            return None
        heading = self.path_heading(state, xy, point)
        if heading is None or self.spec.observation.in_view(heading):
            return None
        off = np.abs(wrap_angle(cands[turns, 0].astype(float) - heading))
        self.turned_at = np.array(xy, dtype=float)
        return int(turns[int(np.argmin(off))])

    def path_heading(self, state: Any, xy: np.ndarray, point: np.ndarray | None) -> float | None:
        """Direction (rad CCW, agent frame) of the planner's shortest path from ``xy`` to the
        target (``point``, else the episode's goal nearest by geodesic distance, the last of
        ordered goals): towards its dense point ``PATH_AHEAD`` m ahead (or its end); None when
        there is no path or no goal."""
        from ...core.errors import NoNavigableSpaceError
        from ...tasks.scoring import has_ordered_goals

        planner = self.context.planner
        if point is None:
            ep = getattr(state, "episode", None)
            goals = [np.asarray(g.position[:2], dtype=float) for g in (ep.goals if ep is not None else [])]
            if not goals:
                return None
            goals = goals[-1:] if has_ordered_goals(ep) else goals
            point = min(goals, key=lambda g: planner.geodesic_distance(xy, g))
        try:
            dense = planner.shortest_path(xy, point).dense
        except NoNavigableSpaceError:
            return None
        ahead = np.linalg.norm(dense - xy, axis=1) >= PATH_AHEAD
        aim = dense[int(np.argmax(ahead))] if ahead.any() else dense[-1]
        if np.allclose(aim, xy):
            return None
        return wrap_angle(math.atan2(aim[1] - xy[1], aim[0] - xy[0]) - state.pose.yaw)

    def act(self, observations: dict[str, Any], state: Any) -> Any:
        """Perceive, label, pick the executed action (oracle with probability β), record."""
        pose = state.pose
        feats, cands, n = self.perception(self.context.desc, self.context.body, (pose.x, pose.y, pose.yaw),
                                          relax=self._empty, options=render_options(self.context))
        if n == 0:  # no candidate: turn in place and predict again (not a training step)
            self.no_candidates += 1
            self._empty += 1
            return WaypointAction(0.0, 0.0, math.radians(self.spec.turn_deg))
        target = self.oracle(state, cands, n)
        choice = target
        if self.learner is not None:
            proposal = self.learner.policy.choose(self.learner.memory, feats, cands, self.learner)
            if self.rng.random() >= self.beta:
                choice = proposal
        k = len(cands)
        executed = self.execute(choice, cands, state)
        self._empty = relax_after(choice, cands, self._empty)
        step = {name: np.array(observations[name]) for name in self.sensors}
        step.update(label=0 if target == k else 1, executed=0 if choice == k else 1,
                    pose=np.array([pose.x, pose.y, pose.yaw], dtype=np.float32), view_feats=feats, candidates=cands,
                    target=np.float32(target))
        self.steps.append(step)
        return executed

    def execute(self, choice: int, cands: np.ndarray, state: Any) -> Any:
        """The simulator action of a chosen index: STOP (``len(cands)``) or the candidate's waypoint."""
        if choice == len(cands):
            return DiscreteAction.STOP
        return candidate_action(float(cands[choice, 0]), float(cands[choice, 1]))


def self_goal(state: Any, xy: np.ndarray) -> np.ndarray:
    """The episode's (last) goal position (x, y), or ``xy`` when the state carries no episode."""
    ep = getattr(state, "episode", None)
    return np.asarray(ep.goals[-1].position[:2], dtype=float) if ep is not None and ep.goals else np.asarray(xy, dtype=float)
