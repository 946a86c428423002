"""Why an episode's first collision happened, from its record and the scene's navigable map.

The navigable map (``SceneMaps.navigable``) holds the cells where the body's centre fits, so a
commanded target off it is a pose whose footprint overlaps an obstacle. For the first recorded
collision of an episode the commanded target is recomputed from the pose before the step and
the recorded action (``CollisionMode.target_pose``'s geometry), and the collision is put in one
of :data:`CAUSES`, in this order:

=========================  ===========================================================================
``past_goal``              the agent stood within the success distance of the goal (geodesic): it
                           should have stopped (an overshoot; needs ``goal_distance``)
``execution``              the commanded target is navigable: the motion that carried the body into the
                           obstacle deviated from the command (tracking, corner cutting, or the
                           physics resolving a target the map calls free)
``prediction_out_of_view`` the target is off the navigable map and its bearing from the agent lies
                           outside the camera's horizontal field of view: a move into space it did
                           not see
``prediction_in_view``     the target is off the navigable map, in view: a move into an obstacle the
                           camera showed
=========================  ===========================================================================

Analysis only (the map is privileged): no agent reads it.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Iterable

import numpy as np

CAUSES = ("past_goal", "execution", "prediction_out_of_view", "prediction_in_view")


def action_target(pose: Any, action: Any, *, forward_step: float = 0.25,
                  turn_angle_deg: float = 15.0) -> tuple[float, float, float]:
    """(x, y, yaw) that a recorded ``action`` (a waypoint dict ``{dx, dy, dyaw}`` in the agent's
    frame, or a discrete action's name) commands from ``pose`` (x, y, yaw)."""
    x, y, yaw = (float(v) for v in pose[:3])
    turn = math.radians(turn_angle_deg)
    if isinstance(action, dict):
        c, s = math.cos(yaw), math.sin(yaw)
        dx, dy = float(action.get("dx", 0.0)), float(action.get("dy", 0.0))
        new_yaw = yaw + float(action.get("dyaw", 0.0))
        return x + c * dx - s * dy, y + s * dx + c * dy, math.atan2(math.sin(new_yaw), math.cos(new_yaw))
    if action == "MOVE_FORWARD":
        return x + forward_step * math.cos(yaw), y + forward_step * math.sin(yaw), yaw
    if action in ("TURN_LEFT", "TURN_RIGHT"):
        new_yaw = yaw + (turn if action == "TURN_LEFT" else -turn)
        return x, y, math.atan2(math.sin(new_yaw), math.cos(new_yaw))
    return x, y, yaw


def _angle_deg(a: float) -> float:
    return math.degrees(math.atan2(math.sin(a), math.cos(a)))


def first_collision(record: dict, planner: Any, *, success_distance: float, hfov_deg: float = 90.0,
                    goal_distance: Callable[[np.ndarray], float] | None = None,
                    teacher_heading: Callable[[np.ndarray], float | None] | None = None,
                    forward_step: float = 0.25, turn_angle_deg: float = 15.0) -> dict[str, Any] | None:
    """The first collision of an episode record (its ``trajectory``, ``actions`` and ``collisions``)
    and its cause (module docstring), or None without one. ``planner``: the scene's
    ``PathPlanner`` on the navigable map; ``goal_distance(xy)``: geodesic metres to the goal;
    ``teacher_heading(xy)``: the world heading (rad) an expert would move in from ``xy``.

    Returns ``{step, cause, bearing_deg, hop_m, target_depth_m, run, heading_error_deg,
    goal_distance_m}``: the commanded move's bearing in the agent's frame, its length, how far the
    target lies from the nearest navigable cell (0 when navigable), the number of consecutive
    colliding steps from this one, and the move's heading against the teacher's."""
    collided = {int(c["step"]) for c in record.get("collisions") or []}
    if not collided:
        return None
    trajectory, moves = record["trajectory"], 0
    for step, action in enumerate(record["actions"]):
        if action is None or action == "STOP" or isinstance(action, str) and action in ("FOUND", "NOT_FOUND"):
            continue
        pose = trajectory[moves]
        moves += 1
        if step not in collided:
            continue
        tx, ty, _ = action_target(pose, action, forward_step=forward_step, turn_angle_deg=turn_angle_deg)
        xy = np.array(pose[:2], dtype=float)
        move = np.array([tx, ty]) - xy
        hop = float(np.linalg.norm(move))
        heading = math.atan2(move[1], move[0]) if hop > 1e-6 else float(pose[2])
        bearing = _angle_deg(heading - float(pose[2]))
        depth = float(planner.snap(np.array([[tx, ty]]))[2][0])
        d_goal = None if goal_distance is None else float(goal_distance(xy))
        if d_goal is not None and d_goal <= success_distance:
            cause = "past_goal"
        elif depth == 0.0:
            cause = "execution"
        elif abs(bearing) > hfov_deg / 2:
            cause = "prediction_out_of_view"
        else:
            cause = "prediction_in_view"
        run = 1
        while step + run in collided:
            run += 1
        expert = None if teacher_heading is None or hop <= 1e-6 else teacher_heading(xy)
        return {"step": step, "cause": cause, "bearing_deg": round(bearing, 1), "hop_m": round(hop, 3),
                "target_depth_m": round(depth, 3), "run": run,
                "heading_error_deg": None if expert is None else round(abs(_angle_deg(heading - expert)), 1),
                "goal_distance_m": None if d_goal is None else round(d_goal, 3)}
    return None


def summarize(firsts: Iterable[dict | None], *, turned_within_deg: float = 30.0) -> dict[str, Any]:
    """Counts of the causes over episodes (None: no collision), with the median step of the first
    collision, target depth, heading error and the share of heading errors within
    ``turned_within_deg`` (a move in the expert's direction that still hit: clearance)."""
    firsts = list(firsts)
    hits = [f for f in firsts if f is not None]
    errors = [f["heading_error_deg"] for f in hits if f["heading_error_deg"] is not None]

    def median(values: list) -> float | None:
        return None if not values else round(float(np.median(values)), 3)

    return {"episodes": len(firsts), "with_collision": len(hits),
            "causes": {c: sum(f["cause"] == c for f in hits) for c in CAUSES},
            "median_step": median([f["step"] for f in hits]),
            "median_target_depth_m": median([f["target_depth_m"] for f in hits]),
            "median_heading_error_deg": median(errors),
            "heading_error_within": None if not errors else round(sum(e <= turned_within_deg for e in errors) / len(errors), 3),
            "median_run": median([f["run"] for f in hits])}
