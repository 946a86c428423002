"""Episode scoring: the navigation metrics plus what the episode's task type declares.

The evaluator reads each task type's :class:`~vlnverse.tasks.scoring.TaskScoring` (ordered goals,
a FOUND / NOT_FOUND decision, frame selection, the goal region, room success, its own metrics and
success rule) and holds no task names: a new task type is scored without touching this module
or the runner.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..tasks.scoring import EpisodeOutcome, TaskScoring, object_viewpoints, scoring_for
from . import metrics as M


def goal_distance_fn(ctx: Any, goals_xy: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """Geodesic distance to the nearest of ``goals_xy`` on the scene's navigable map."""
    fields = [ctx.planner.distance_field(g) for g in goals_xy]

    def distance(points: np.ndarray) -> np.ndarray:
        pts = np.atleast_2d(np.asarray(points, dtype=float))[:, :2]
        return np.min([f.distance(pts) for f in fields], axis=0)

    return distance


#: Metrics every navigation episode reports (VLNVerse Tab. 5 plus sDTW and CLS).
STANDARD_METRICS = ("TL", "NE", "SR", "OSR", "SPL", "nDTW", "sDTW", "CLS", "CR")
#: point-goal success metrics that do not apply to decision (VLN-NF) episodes
POINT_SUCCESS_METRICS = ("SR", "SPL", "sDTW")
#: Metrics that a Strict failure (or a missing STOP) forces to 0.
SUCCESS_METRICS = ("SR", "SPL", "sDTW")


def shortest_length(episode: Any) -> float:
    """SPL's shortest length L: the length of the episode's reference path (see :func:`score_episode`)."""
    reference_xy = np.asarray(episode.reference_path, dtype=float)[:, :2]
    return M.trajectory_length(reference_xy) if len(reference_xy) >= 2 else float(episode.geodesic_distance)


def score_episode(episode: Any, ctx: Any, path_xy: np.ndarray, *, stopped: bool, failed: bool, collisions: int,
                  actions: int, success_distance: float, reference_spacing: float = 0.25,
                  scoring: TaskScoring | None = None) -> dict[str, Any]:
    """All metrics of one finished episode (``None`` for those that do not apply).

    The episode's reference path (its corner waypoints) is resampled every ``reference_spacing``
    metres (the forward step) before nDTW/sDTW/CLS, so both sequences have the same point
    density, as DTW assumes (Ilharco et al. 2019); otherwise a sparse reference would make even
    a perfect follower score near 0. Success needs a STOP and, under Strict, no failure.

    SPL's shortest length L is the length of the episode's reference path — the any-angle
    shortest path, within 2% of the true geodesic — rather than ``episode.geodesic_distance``,
    the 8-connected grid distance, which reads up to 8% long in open space and would inflate SPL.
    Episodes without a reference polyline fall back to ``geodesic_distance``.

    ``scoring`` (default: the episode's task type's declaration) decides the rest: ordered
    sub-goals (SR needs all, in order; ``goals_reached`` for SR_n); an ``object_viewpoints`` goal
    region (VCN-Bench) measures NE/SR/OSR as the Euclidean distance to the nearest viewpoint of
    any goal object (:func:`~vlnverse.tasks.scoring.object_viewpoints`, VCN-Bench App. C.1),
    with the task's 1 m threshold, instead of the geodesic distance to one point near the
    object; ``room_success`` adds RSR.
    """
    from ..tasks.pathing import resample_polyline

    scoring = scoring_for(episode.task_type) if scoring is None else scoring

    goals_xy = np.array([g.position[:2] for g in episode.goals], dtype=float)
    reference_xy = np.asarray(episode.reference_path, dtype=float)[:, :2]
    reference = resample_polyline(reference_xy, reference_spacing)
    shortest = shortest_length(episode)
    ordered = scoring.ordered_goals or bool(episode.info.get("ordered_goals"))
    if ordered:
        fns = [goal_distance_fn(ctx, g[None]) for g in goals_xy]
        final_goal, final_fn = goals_xy[-1:], fns[-1]
    else:
        final_goal, final_fn = goals_xy, goal_distance_fn(ctx, goals_xy)
        viewpoints = object_viewpoints(ctx, episode.goals) if scoring.goal_region == "object_viewpoints" else None
        if viewpoints is not None and len(viewpoints):
            final_goal, final_fn = viewpoints, None  # Euclidean to the nearest viewpoint
    out = M.compute(STANDARD_METRICS, path=path_xy, goal=final_goal, reference=reference,
                    shortest_length=shortest, threshold=success_distance,
                    distance_fn=final_fn, collisions=collisions, actions=actions)
    if ordered:
        reached = M.goals_reached(path_xy, goals_xy, success_distance, fns)
        out["goals_reached"] = [bool(r) for r in reached]
        if not reached.all():  # a sub-goal skipped: no success, so none of the metrics that need one
            for name in SUCCESS_METRICS:
                out[name] = 0.0
    room_id = episode.info.get("target_room_id", episode.goals[0].room_id)
    if scoring.room_success and room_id is not None:
        try:
            out["RSR"] = M.rsr(path_xy, ctx.desc.room_by_id(int(room_id)).polygon)
        except KeyError:
            out["RSR"] = None
    if not stopped or failed:  # success needs a STOP and no Strict failure; goals_reached keeps SR_n
        for name in SUCCESS_METRICS:
            out[name] = 0.0
    return out


def score_decision(episode: Any, ctx: Any, poses: np.ndarray, decision: str | None, *,
                   blocked: tuple[np.ndarray, np.ndarray]) -> dict[str, Any]:
    """VLN-NF metrics of a false-premise episode (VLN-NF Sec. 3.3): ``reach_SR`` (a visited pose
    in the target room), ``decision_SR`` (the stated FOUND / NOT_FOUND is right), ``RD_SR``
    (both), ``coverage`` of the room's objects seen from the in-room poses, ``REV_SPL`` with
    the in-room path length against ``reference_exploration_length``, ``len_reach`` / ``len_explore``
    (VLN-NF Tab. 2's Len columns) and ``reach_SPL`` against the geodesic from the start to the
    room's entry viewpoint. As in VLN-NF (panoramic
    viewpoints) and the task's reference exploration, an object is seen from a pose when it is
    in line of sight at camera height within the task's ``visibility_range``, in any direction."""
    from ..tasks.tours import object_visibility

    info = episode.info
    room = ctx.desc.room_by_id(int(info["target_room_id"]))
    expected = str(info["decision"]).upper()
    reached = M.reach_success(poses[:, :2], room.polygon)
    inside = room.contains(poses[:, :2])
    room_ids = [int(i) for i in info.get("room_object_ids", [])]
    seen: list[int] = []
    if inside.any() and room_ids:
        objects = [ctx.desc.object_by_id(i) for i in room_ids]
        grid, origin = blocked
        visible = object_visibility(grid, origin, ctx.planner.resolution, poses[inside, :2],
                                    np.array([o.bounds_min for o in objects]), np.array([o.bounds_max for o in objects]),
                                    max_range=float(info.get("visibility_range", 4.0)))
        seen = [i for i, v in zip(room_ids, visible.any(axis=0)) if v]
    coverage = M.object_coverage(seen, room_ids)
    explored = M.exploration_length(poses[:, :2], inside)
    len_reach = M.reach_length(poses[:, :2], inside)
    entry = info.get("entry_viewpoint")
    shortest_reach = float(ctx.planner.geodesic_distance(poses[0, :2], np.asarray(entry, dtype=float)[:2])) \
        if entry is not None and not inside[0] else 0.0
    if not np.isfinite(shortest_reach):
        shortest_reach = 0.0
    correct = decision is not None and decision.upper() == expected
    return {"reach_SR": reached, "decision_SR": float(correct),
            "len_reach": None if len_reach is None else round(len_reach, 3), "len_explore": round(explored, 3),
            "reach_SPL": M.reach_spl(bool(reached), len_reach, shortest_reach),
            "RD_SR": M.reach_decision_success(bool(reached), decision or "", expected),
            "coverage": coverage, "REV_SPL": M.rev_spl(bool(reached), correct, coverage, explored,
                                                       float(info.get("reference_exploration_length", 0.0)))}


def score_frame_selection(episode: Any, selected_frame: int | None) -> dict[str, float]:
    """VCN-Bench goal identification (Sec. 5.3): ``info["target_frames"]`` are the window frames
    in the target room (room-to-object kinds) or showing the target object (``instance``), so
    the selected frame scores Rid-SR or Oid-SR by membership."""
    info = episode.info
    hit = selected_frame is not None and int(selected_frame) in {int(f) for f in info.get("target_frames", [])}
    if info.get("kind") == "instance":
        target = int(info.get("target_object_id", -1))
        return {"Oid_SR": M.oid_sr([target] if hit else [], target)}
    room = int(info.get("target_room_id", -1))
    return {"Rid_SR": M.rid_sr(room if hit else None, room)}


def view_blocking(ctx: Any, cache: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The scene's view-blocking grid at camera height; kept in ``cache`` (a per-scene dict,
    e.g. a :class:`~vlnverse.run.rollout.Rollout`'s ``scene_cache``) when one is given."""
    from ..tasks.tours import view_blocking_grid

    key = ("view_blocking", id(ctx.desc), ctx.planner.resolution, ctx.body.camera_height)
    if cache is not None and key in cache:
        return cache[key]
    grid = view_blocking_grid(ctx.desc, ctx.planner.resolution, ctx.body.camera_height)
    if cache is not None:
        cache[key] = grid
    return grid


def score_rollout(rollout: Any) -> dict[str, Any]:
    """All metrics of a rollout's episode as its task type declares them
    (:class:`~vlnverse.tasks.scoring.TaskScoring`): the navigation metrics (:func:`score_episode`),
    the decision metrics (:func:`score_decision`), goal identification
    (:func:`score_frame_selection`), then the task's own metrics and success rule."""
    episode, ctx, settings = rollout.episode, rollout.ctx, rollout.settings
    scoring = rollout.scoring
    poses = np.asarray(rollout.poses, dtype=float)
    metrics = score_episode(episode, ctx, poses[:, :2], stopped=rollout.stopped, failed=rollout.failure is not None,
                            collisions=len(rollout.collisions), actions=rollout.moves,
                            success_distance=settings.success_distance, reference_spacing=rollout.mode.forward_step,
                            scoring=scoring)
    if scoring.applies_decision(episode):
        metrics.update(score_decision(episode, ctx, poses, rollout.decision,
                                      blocked=view_blocking(ctx, rollout.scene_cache)))
        # VLN-NF success is reaching the room AND stating the right decision (RD_SR, REV_SPL);
        # a point-goal SR/SPL/sDTW would score a correct exploration that ends away from the
        # goal point as a failure, so they are reported as not applicable
        for name in POINT_SUCCESS_METRICS:
            metrics[name] = None
    if scoring.frame_selection and rollout.selected_frame is not None and "target_frames" in episode.info:
        metrics.update(score_frame_selection(episode, rollout.selected_frame))
    if scoring.metrics is not None or scoring.success is not None:
        outcome = EpisodeOutcome(episode, poses, rollout.stopped, rollout.failure, rollout.decision,
                                 rollout.selected_frame, len(rollout.collisions), rollout.moves, dict(metrics))
        if scoring.metrics is not None:
            metrics.update(scoring.metrics(outcome, ctx))
        if scoring.success is not None:
            apply_success_rule(metrics, bool(scoring.success(outcome, ctx)), shortest_length(episode),
                               stopped=rollout.stopped, failed=rollout.failure is not None)
    return metrics


def apply_success_rule(metrics: dict[str, Any], success: bool, shortest: float, *, stopped: bool,
                       failed: bool) -> None:
    """Set SR from a task's own success rule, with SPL = SR · L / max(P, L) (L = ``shortest``,
    P = TL) and sDTW = SR · nDTW, as they are defined; success still needs a STOP and no Strict
    failure."""
    sr = float(success and stopped and not failed)
    path_length = float(metrics.get("TL") or 0.0)
    metrics["SR"] = sr
    metrics["SPL"] = sr * shortest / max(path_length, shortest) if max(path_length, shortest) > 0 else sr
    metrics["sDTW"] = sr * float(metrics.get("nDTW") or 0.0)


