"""RDP's continuous teacher: the geodesic path with clearance, resampled into action chunks, and
the recording agent of ``collect`` (labels: chunk, progress, executed motion)."""
from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...sim.types import DiscreteAction, WaypointAction, wrap_angle
from ..collect import TeacherForcingAgent, TeacherSpec

ACTION_DIM = 3  # (dx, dy, dyaw)


def resample_by_length(points: np.ndarray, spacing: float) -> np.ndarray:
    """Points every ``spacing`` metres of arc length along an (N, 2) polyline (first point kept, last
    point appended when the remainder is shorter)."""
    pts = np.asarray(points, dtype=float)[:, :2]
    if len(pts) < 2:
        return pts.copy()
    seg = np.linalg.norm(np.diff(pts, axis=0), axis=1)
    s = np.concatenate([[0.0], np.cumsum(seg)])
    if s[-1] <= 1e-9:
        return pts[:1].copy()
    stations = np.arange(0.0, s[-1], spacing)
    if s[-1] - stations[-1] > 1e-6:
        stations = np.append(stations, s[-1])
    return np.stack([np.interp(stations, s, pts[:, 0]), np.interp(stations, s, pts[:, 1])], axis=1)


def relative_chunk(pose_xy: np.ndarray, yaw: float, points: np.ndarray, horizon: int) -> np.ndarray:
    """The (horizon, 3) action chunk that walks from (``pose_xy``, ``yaw``) through ``points`` (the
    resampled path after the current position): each action is the next point and the heading of
    its segment, relative to the pose the previous action reaches; padded with zero motion."""
    out = np.zeros((horizon, ACTION_DIM), dtype=np.float32)
    px, py, pyaw = float(pose_xy[0]), float(pose_xy[1]), float(yaw)
    for i, q in enumerate(points[:horizon]):
        dxw, dyw = float(q[0]) - px, float(q[1]) - py
        nyaw = math.atan2(dyw, dxw) if math.hypot(dxw, dyw) > 1e-4 else pyaw
        c, s = math.cos(pyaw), math.sin(pyaw)
        out[i] = (c * dxw + s * dyw, -s * dxw + c * dyw, wrap_angle(nyaw - pyaw))
        px, py, pyaw = float(q[0]), float(q[1]), nyaw
    return out


def path_length(points: np.ndarray) -> float:
    """Arc length of an (N, 2) polyline."""
    return float(np.linalg.norm(np.diff(np.asarray(points, dtype=float)[:, :2], axis=0), axis=1).sum())


def geodesic(distance: Any, xy: np.ndarray, target: np.ndarray) -> float:
    """``distance(xy)`` (a geodesic distance function to ``target``), or the straight-line
    distance where the map gives none (off the map or disconnected)."""
    d = float(distance(np.atleast_2d(np.asarray(xy, dtype=float)))[0])
    return d if np.isfinite(d) else float(np.linalg.norm(np.asarray(target, dtype=float) - xy))


def motion_vector(action: Any) -> np.ndarray:
    """(dx, dy, dyaw) of an executed action (zeros for STOP / discrete actions)."""
    if isinstance(action, WaypointAction):
        return np.array([action.dx, action.dy, action.dyaw], dtype=np.float32)
    return np.zeros(ACTION_DIM, dtype=np.float32)


_MARGIN_PLANNERS: "weakref.WeakKeyDictionary[Any, dict[float, Any]]" = weakref.WeakKeyDictionary()


def margin_planners(planner: Any, clearance: float) -> list[Any]:
    """Planners on ``planner``'s navigable map shrunk by ``clearance`` and by half of it (those
    that keep a free cell), then ``planner`` itself: the teacher's fallback chain. Shrunk maps are
    built once per planner (weakly cached)."""
    from ...tasks.pathing import NoNavigableSpaceError, PathPlanner

    out = []
    cache = _MARGIN_PLANNERS.setdefault(planner, {})
    for margin in (clearance, 0.5 * clearance):
        if margin < 0.5 * planner.resolution:
            continue
        if margin not in cache:
            try:  # a free cell of the shrunk map lies >= margin further from the obstacles than the edge cells
                cache[margin] = PathPlanner(planner.map.dilate(margin), scene_id=planner.scene_id)
            except NoNavigableSpaceError:
                cache[margin] = None
        if cache[margin] is not None:
            out.append(cache[margin])
    return out + [planner]


def teacher_path(planners: list[Any], xy: np.ndarray, goal_xy: np.ndarray) -> np.ndarray:
    """The (N, 2) path from ``xy`` to ``goal_xy`` on the first of ``planners`` (most margin first,
    the plain navigable map last) that connects them with the agent's and goal's snaps to that map
    in straight, free reach on the last (plain) map; starts at ``xy``, ends at ``goal_xy``. Raises
    ``NoNavigableSpaceError`` when even the plain map does not connect them."""
    from ...tasks.pathing import NoNavigableSpaceError

    base = planners[-1]
    for i, planner in enumerate(planners):
        last = i == len(planners) - 1
        if not last:
            start, goal = planner.snap_point(xy), planner.snap_point(goal_xy)
            if not (base.segment_free(xy, start) and base.segment_free(goal, goal_xy)):
                continue
        try:
            way = np.asarray(planner.shortest_path(xy, goal_xy).waypoints, dtype=float)[:, :2]
        except NoNavigableSpaceError:
            if last:
                raise
            continue
        pts = [xy[None], way[1:] if len(way) > 1 else goal_xy[None]]
        if np.linalg.norm(pts[-1][-1] - goal_xy) > 1e-6:
            pts.append(goal_xy[None])
        if len(way) > 1 and np.linalg.norm(way[0] - xy) > 1e-6:
            pts.insert(1, way[:1])  # the snap onto the margin map is part of the path
        return np.concatenate(pts)
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class WaypointTeacher(TeacherSpec):
    """Continuous-action teacher spec of RDP (see the module docstring): what ``collect`` and the
    observation cache use instead of the discrete oracle."""

    horizon: int = 4
    spacing: float = 0.5
    stop_radius: float | None = None
    clearance: float = 0.15
    turn_in_place_deg: float | None = None

    @property
    def key(self) -> dict[str, Any]:
        """Part of the observation-cache key (``turn_in_place_deg`` only when set: earlier caches keep their key)."""
        key = {"kind": "waypoint", "horizon": self.horizon, "spacing": self.spacing, "stop_radius": self.stop_radius,
               "clearance": self.clearance}
        return key if self.turn_in_place_deg is None else {**key, "turn_in_place_deg": self.turn_in_place_deg}

    def key_for(self, episodes: list) -> dict[str, Any]:
        """``key``, plus ``route: subgoals`` where an episode's goals count in order (labels that
        visit the sub-goals; caches labelled before are rebuilt, single-goal keys are unchanged)."""
        from ...tasks.scoring import has_ordered_goals

        ordered = any(has_ordered_goals(ep) and len(ep.goals) > 1 for ep in episodes)
        return {**self.key, "route": "subgoals"} if ordered else self.key

    @property
    def extra_fields(self) -> dict[str, list[int]]:
        """Per-step labels stored beside the frames."""
        return {"actions": [self.horizon, ACTION_DIM], "progress": [], "executed_action": [ACTION_DIM]}

    def make_agent(self, *, learner: Any = None, beta: float = 1.0, sensors: tuple[str, ...] = (),
                   seed: int = 0) -> "WaypointTeacherAgent":
        """The recording agent of ``collect``."""
        return WaypointTeacherAgent(self, learner=learner, beta=beta, sensors=sensors, seed=seed)


class WaypointTeacherAgent(TeacherForcingAgent):
    """Records frames, the teacher's action chunk and progress, and the executed motion; executes
    the teacher's first action (or STOP) with probability ``beta``, else the learner's."""

    name = "waypoint_teacher"

    def __init__(self, spec: WaypointTeacher, **kwargs: Any):
        super().__init__(**kwargs)
        self.spec = spec
        self._d0: float | None = None

    def reset(self, episode: Any, context: Any) -> None:
        """New episode: the planner and goal come from the scene context and the episode; an
        episode whose goals count in order (long-horizon) gives the route of its sub-goals before
        the last (``vlnbert.ordered_subgoals``)."""
        from ..vlnbert.teacher import ordered_subgoals

        super().reset(episode, context)
        self.planner = context.planner
        self.planners = margin_planners(context.planner, self.spec.clearance)
        self.goal_xy = np.asarray(episode.goals[-1].position[:2], dtype=float)
        self.subgoals = ordered_subgoals(episode, context.planner)
        self._tails: list[float] | None = None  # route length from each sub-goal on (set by the first labels)
        self._d0 = None

    def _route_tails(self, state: Any) -> list[float]:
        """Geodesic route length from each remaining sub-goal through the later ones to the goal."""
        points = [g for g, _ in self.subgoals] + [self.goal_xy]
        legs = [geodesic(field.distance, points[i], points[i + 1]) for i, (_, field) in enumerate(self.subgoals[1:])]
        legs.append(geodesic(state.goal_distance, points[-2], points[-1]))
        return [float(t) for t in np.cumsum(legs[::-1])[::-1]]

    def labels(self, state: Any) -> tuple[np.ndarray, float, bool]:
        """(action chunk, progress, stop) at ``state.pose``. With sub-goals left, the teacher
        heads for the next (popped once within r of it) and never stops; progress and the chunk
        run over the whole remaining route (module docstring)."""
        from ...tasks.pathing import NoNavigableSpaceError

        pose = state.pose
        xy = np.array([pose.x, pose.y])
        r = self.spec.stop_radius if self.spec.stop_radius is not None else 0.5 * state.success_distance
        if self.subgoals and self._tails is None:
            self._tails = self._route_tails(state)
        while self.subgoals and geodesic(self.subgoals[0][1].distance, xy, self.subgoals[0][0]) <= r:
            self.subgoals.pop(0)  # this sub-goal is reached here: on to the next
            self._tails.pop(0)
        if self.subgoals:  # the remaining route: to the next sub-goal, then on through the others to the goal
            point, field = self.subgoals[0]
            d = geodesic(field.distance, xy, point) + self._tails[0]
        else:
            d = geodesic(state.goal_distance, xy, self.goal_xy)
        if self._d0 is None:
            self._d0 = d
        progress = float(np.clip(1.0 - max(d - r, 0.0) / max(self._d0 - r, 1e-6), 0.0, 1.0))
        if d <= r and not self.subgoals:
            return np.zeros((self.spec.horizon, ACTION_DIM), np.float32), 1.0, True
        route = [g for g, _ in self.subgoals] + [self.goal_xy]
        try:
            path = teacher_path(self.planners, xy, route[0])
            for a, b in zip(route, route[1:]):  # a chunk past a sub-goal goes on towards the next target
                if path_length(path) >= self.spec.horizon * self.spec.spacing:
                    break
                path = np.concatenate([path, teacher_path(self.planners, a, b)[1:]])
        except NoNavigableSpaceError:
            return np.zeros((self.spec.horizon, ACTION_DIM), np.float32), progress, True
        points = resample_by_length(path, self.spec.spacing)[1:]
        chunk = relative_chunk(xy, pose.yaw, points, self.spec.horizon)
        turn = float(chunk[0, 2])
        if self.spec.turn_in_place_deg is not None and abs(turn) > math.radians(self.spec.turn_in_place_deg):
            chunk = np.concatenate([np.array([[0.0, 0.0, turn]], np.float32),
                                    relative_chunk(xy, pose.yaw + turn, points, self.spec.horizon - 1)])
        return chunk, progress, False

    def act(self, observations: dict[str, Any], state: Any) -> Any:
        """Label the state, pick the executed action, record the step."""
        chunk, progress, stop = self.labels(state)
        teacher_action = DiscreteAction.STOP if stop else WaypointAction(*map(float, chunk[0]))
        proposal = self.learner.propose(observations) if self.learner is not None else None
        executed = teacher_action if proposal is None or self.rng.random() < self.beta else proposal
        if self.learner is not None:
            self.learner.set_previous(executed)
        step = {name: np.array(observations[name]) for name in self.sensors}
        moved = isinstance(executed, WaypointAction)
        step.update(label=0 if stop else 1, executed=1 if moved else 0,
                    pose=np.array([state.pose.x, state.pose.y, state.pose.yaw], dtype=np.float32),
                    actions=chunk, progress=np.float32(progress), executed_action=motion_vector(executed))
        self.steps.append(step)
        return executed
