"""The evaluation runner behind ``vlnverse eval CONFIG``.

For every episode: place the agent, let it act until it STOPs, fails (Strict displacement) or
runs out of steps, and score the trajectory with the task's metrics (geodesic NE/SR/OSR/SPL on
the scene's navigable map). One simulator is built per scene and reused across its episodes.

Output folder (``cfg.out``):

- ``config.json`` — the resolved config (a resumed run must match it);
- ``input_episodes.jsonl`` — the episodes evaluated (generated ones are kept for resume);
- ``episodes.jsonl`` — one line per finished episode, appended and flushed as each finishes;
  a resumed run skips the episodes already there; a line that is not a valid record (a truncated
  last line after a crash, a corrupt line) moves verbatim to ``episodes.rejected.jsonl``;
- ``summary.json`` — aggregated metrics per task/mode; ``report.html`` — the human view;
- ``maps/`` and ``frames/`` — per-episode top-down maps and first-person frames.
"""
from __future__ import annotations

import json
import logging
import os
import re
import time
import traceback
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from ..core.errors import ConfigError
from ..core.io import claim_output_dir, folder_lock, redact_secrets, to_jsonable, write_bytes_atomic, write_json_atomic
from . import metrics as M
from .agents import Agent, AgentState, has_ordered_goals, make_agent
from .config import EvalConfig
from .modes import CollisionMode, make_mode

log = logging.getLogger(__name__)

#: Metrics every navigation episode reports (VLNVerse Tab. 5 plus sDTW and CLS).
STANDARD_METRICS = ("TL", "NE", "SR", "OSR", "SPL", "nDTW", "sDTW", "CLS", "CR")
#: Task types that also report the room success rate (goal carries a ``room_id``).
ROOM_GOAL_TASKS = ("video_contextualized", "video_context", "vcn")
#: Task types with a FOUND / NOT_FOUND decision and VLN-NF metrics (``info["decision"]``).
DECISION_TASKS = ("false_premise",)
#: point-goal success metrics that do not apply to decision (VLN-NF) episodes
POINT_SUCCESS_METRICS = ("SR", "SPL", "sDTW")
#: Stop actions that also state a decision (VLN-NF action space).
DECISIONS = ("FOUND", "NOT_FOUND")
#: Metrics that a Strict failure (or a missing STOP) forces to 0.
SUCCESS_METRICS = ("SR", "SPL", "sDTW")

EPISODES_FILE = "episodes.jsonl"
INPUT_FILE = "input_episodes.jsonl"
SUMMARY_FILE = "summary.json"
CONFIG_FILE = "config.json"


@dataclass
class RunSettings:
    """Per-run values resolved from the eval config and the task config."""

    max_steps: int
    success_distance: float
    body: Any
    resolution: float
    task_type: str


def resolve_settings(cfg: EvalConfig) -> RunSettings:
    """Fill unset eval settings from the task config (``tasks/<task>.yaml``)."""
    from ..sim.body import load_body
    from ..tasks.base import load_task_config

    task_cfg = load_task_config(cfg.task)
    return RunSettings(max_steps=cfg.max_steps or task_cfg.max_steps,
                       success_distance=cfg.success_distance or task_cfg.success_distance,
                       body=load_body(cfg.body or task_cfg.body), resolution=task_cfg.map_resolution,
                       task_type=task_cfg.task_type)


# --------------------------------------------------------------------------------------------
# episodes


def generate_episodes(task: str, scenes: Any, episodes_per_scene: int, seed: int, out_dir: str | Path, *,
                      body: str | None = None, max_scenes: int | None = None, progress: bool = True) -> list:
    """Generate a dataset of ``task`` into ``out_dir`` with the task layer's generator
    (``vlnverse.tasks.dataset.generate_dataset``: per-scene seeding, splits from
    ``splits.json``, assets such as reference images or prior videos rendered with the
    simulator's camera) on ``scenes`` (a split name, ``all``, ids or paths; the first
    ``max_scenes``), and return its episodes."""
    from ..tasks.dataset import generate_dataset, resolve_scene_paths, simulator_renderer_factory
    from ..tasks.episode import load_episodes

    paths = resolve_scene_paths(scenes)
    if max_scenes is not None:
        paths = paths[:max_scenes]
    generate_dataset(task, paths, episodes_per_scene, seed, out_dir, body=body, progress=progress,
                     renderer_factory=simulator_renderer_factory())
    return load_episodes(out_dir)


def resolve_episodes(cfg: EvalConfig, settings: RunSettings, out: Path, *, progress: bool = True) -> list:
    """The run's episodes: reloaded from ``out/input_episodes.jsonl`` when resuming, else loaded
    from ``episodes.path`` or generated into ``out/dataset``, filtered to the config's task (and
    ``split``), and saved."""
    from ..tasks.episode import load_episodes, save_episodes

    saved = out / INPUT_FILE
    if saved.is_file() and (out / CONFIG_FILE).is_file():  # without a config record: a failed start
        episodes = load_episodes(saved)
    elif cfg.episodes.path is not None:
        path = Path(cfg.episodes.path)
        if not path.exists():
            raise ConfigError("episode file or folder not found", field="episodes.path", expected="an existing JSONL file/folder",
                              file=path)
        episodes = load_episodes(path)
    else:
        gen = cfg.episodes.generate
        episodes = generate_episodes(gen.task or cfg.task, gen.scenes, gen.episodes_per_scene, gen.seed,
                                     out / "dataset", body=cfg.body, max_scenes=gen.max_scenes, progress=progress)
    if cfg.split is not None:
        episodes = [e for e in episodes if e.split == cfg.split]
    matching = [e for e in episodes if e.task_type == settings.task_type]
    if episodes and not matching:
        raise ConfigError(f"no '{settings.task_type}' episodes in the episode source", field="task",
                          expected=f"one of {sorted({e.task_type for e in episodes})}")
    episodes = matching
    if not episodes:
        raise ConfigError("no episodes to evaluate", field="episodes", expected="at least one episode")
    if not saved.is_file():
        save_episodes(saved, episodes)  # all of them: ``limit`` may change between resumes
    return episodes[:cfg.limit] if cfg.limit is not None else episodes


#: How far beyond the navigable area's bounding box a start (m) may lie; a goal may lie its
#: success radius (at least ``GOAL_BOUNDS_MARGIN``) beyond it (objects stand on furniture, by walls).
START_BOUNDS_MARGIN = 0.5
GOAL_BOUNDS_MARGIN = 1.0


def check_episode_bounds(episodes: Iterable, ctx: Any) -> None:
    """Reject an episode whose start or goal lies outside the scene's navigable bounds (the box
    around its navigable cells): a ``ConfigError`` names the episode file, line and field.

    Without this, a goal 640 m away is snapped onto the map by the distance field and scores."""
    from ..scenes.occupancy import FREE

    nav = ctx.maps.navigable
    cells = np.argwhere(nav.grid == FREE)
    if cells.size == 0:
        return  # load_scene_context already refuses a scene without navigable space
    lo = nav.cell_to_world(cells.min(axis=0)[None])[0] - nav.resolution / 2
    hi = nav.cell_to_world(cells.max(axis=0)[None])[0] + nav.resolution / 2
    for ep in episodes:
        file, line = getattr(ep, "source", None) or (None, None)
        checks = [("start_position", ep.start_position, START_BOUNDS_MARGIN)]
        checks += [(f"goals[{i}].position", g.position, max(GOAL_BOUNDS_MARGIN, float(g.radius)))
                   for i, g in enumerate(ep.goals)]
        for field_name, pos, margin in checks:
            xy = np.asarray(pos, dtype=float)[:2]
            if not (np.all(np.isfinite(xy)) and np.all(xy >= lo - margin) and np.all(xy <= hi + margin)):
                raise ConfigError(f"episode '{ep.episode_id}': ({xy[0]:.2f}, {xy[1]:.2f}) lies outside scene "
                                  f"'{ctx.scene_id}'", file=file, line=line, field=field_name,
                                  expected=f"x in [{lo[0] - margin:.2f}, {hi[0] + margin:.2f}], "
                                           f"y in [{lo[1] - margin:.2f}, {hi[1] + margin:.2f}]")


# --------------------------------------------------------------------------------------------
# resumable episode log


#: Lines of ``episodes.jsonl`` that are not valid records are moved here, verbatim (see ``read_finished``).
REJECTED_FILE = "episodes.rejected.jsonl"


def _parse_record(line: bytes) -> dict | None:
    """One episode record from a log line, or None when it is not one."""
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):  # bad JSON, non-UTF-8 bytes, 5000-digit numbers, deep nesting
        return None
    if not isinstance(record, dict) or not isinstance(record.get("episode_id"), str) \
            or not isinstance(record.get("metrics"), dict):
        return None
    return record


def read_finished(path: Path) -> list[dict]:
    """Finished episode records from ``episodes.jsonl``, keeping every valid one.

    A line that is not a valid record (a crash mid-write, a corrupt or hand-edited line) or that
    repeats an episode already recorded is moved, verbatim, to ``episodes.rejected.jsonl`` beside
    it; the log is rewritten atomically without it and a warning names the line numbers."""
    if not path.is_file():
        return []
    raw = path.read_bytes()
    records: list[dict] = []
    kept: list[bytes] = []
    rejected: list[tuple[int, bytes]] = []
    seen: set[str] = set()
    for number, line in enumerate(raw.splitlines(keepends=True), start=1):
        if not line.strip():
            continue
        record = _parse_record(line)
        if record is None or record["episode_id"] in seen:
            rejected.append((number, line))
            continue
        seen.add(record["episode_id"])
        records.append(record)
        kept.append(line if line.endswith(b"\n") else line + b"\n")
    if rejected or b"".join(kept) != raw:
        if rejected:
            side = path.with_name(REJECTED_FILE)
            with open(side, "ab") as fh:
                fh.write(b"".join(line if line.endswith(b"\n") else line + b"\n" for _, line in rejected))
                fh.flush()
                os.fsync(fh.fileno())
            numbers = ", ".join(str(n) for n, _ in rejected[:20]) + (" ..." if len(rejected) > 20 else "")
            log.warning("%s: %d invalid or repeated record(s) at line(s) %s moved to %s; %d valid record(s) kept",
                        path, len(rejected), numbers, side, len(records))
        write_bytes_atomic(path, b"".join(kept))
    return records


#: The config record of a run that has not written an episode yet (see ``stage_config_record``).
PENDING_CONFIG_FILE = ".config.pending.json"


def stage_config_record(out: Path, record: dict) -> None:
    """Stage the run's config record; it becomes ``config.json`` with the first episode record
    (``commit_config_record``), so a config that fails at run time (a bad ``mode_params`` value,
    a scene that does not load) leaves no record behind and the corrected config is not refused."""
    if (out / CONFIG_FILE).is_file():
        return
    write_json_atomic(out / PENDING_CONFIG_FILE, record)


def commit_config_record(out: Path) -> None:
    """Promote the staged config record to ``config.json`` (no-op when there is none)."""
    pending = out / PENDING_CONFIG_FILE
    if pending.is_file() and not (out / CONFIG_FILE).is_file():
        os.replace(pending, out / CONFIG_FILE)


def append_record(path: Path, record: dict) -> None:
    """Append one episode record as a single flushed and fsync'ed JSON line (committing the
    run's staged config record first)."""
    commit_config_record(path.parent)
    line = json.dumps(to_jsonable(record), sort_keys=True, separators=(",", ":")) + "\n"
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line)
        fh.flush()
        os.fsync(fh.fileno())


# --------------------------------------------------------------------------------------------
# one episode


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:120]


def goal_distance_fn(ctx: Any, goals_xy: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """Geodesic distance to the nearest of ``goals_xy`` on the scene's navigable map."""
    fields = [ctx.planner.distance_field(g) for g in goals_xy]

    def distance(points: np.ndarray) -> np.ndarray:
        pts = np.atleast_2d(np.asarray(points, dtype=float))[:, :2]
        return np.min([f.distance(pts) for f in fields], axis=0)

    return distance


#: VCN-Bench App. C.1: a target's viewpoints are sampled every ``VIEWPOINT_SPACING`` metres within
#: ``VIEWPOINT_MARGIN`` metres around its bounding box and kept when in the target's room.
VIEWPOINT_MARGIN = 0.6
VIEWPOINT_SPACING = 0.1


def object_viewpoints(ctx: Any, goals: Iterable[Any], *, margin: float = VIEWPOINT_MARGIN,
                      spacing: float = VIEWPOINT_SPACING) -> np.ndarray:
    """The viewpoints (V, 2) of the goal objects (VCN-Bench App. C.1): grid points every
    ``spacing`` within ``margin`` of each object's xy bounding box, inside the object's room
    (the goal's ``room_id``; any room when it has none). Empty when no goal names a known object."""
    from ..tasks.types.goals import footprint_distance

    out = []
    for goal in goals:
        if goal.object_id is None:
            continue
        try:
            obj = ctx.desc.object_by_id(int(goal.object_id))
        except KeyError:
            continue
        lo = np.asarray(obj.bounds_min, dtype=float)[:2] - margin
        hi = np.asarray(obj.bounds_max, dtype=float)[:2] + margin
        xs = np.arange(lo[0], hi[0] + 1e-9, spacing)
        ys = np.arange(lo[1], hi[1] + 1e-9, spacing)
        pts = np.stack(np.meshgrid(xs, ys), axis=-1).reshape(-1, 2)
        pts = pts[footprint_distance(obj.bounds_min, obj.bounds_max, pts) <= margin + 1e-9]
        if goal.room_id is not None:
            try:
                pts = pts[ctx.desc.room_by_id(int(goal.room_id)).contains(pts)]
            except KeyError:
                pass
        out.append(pts)
    return np.concatenate(out) if out else np.zeros((0, 2))


def score_episode(episode: Any, ctx: Any, path_xy: np.ndarray, *, stopped: bool, failed: bool, collisions: int,
                  actions: int, success_distance: float, reference_spacing: float = 0.25) -> dict[str, Any]:
    """All metrics of one finished episode (``None`` for those that do not apply).

    The episode's reference path (its corner waypoints) is resampled every ``reference_spacing``
    metres (the forward step) before nDTW/sDTW/CLS, so both sequences have the same point
    density, as DTW assumes (Ilharco et al. 2019); otherwise a sparse reference would make even
    a perfect follower score near 0. Success needs a STOP and, under Strict, no failure.

    SPL's shortest length L is the length of the episode's reference path — the any-angle
    shortest path, within 2% of the true geodesic — rather than ``episode.geodesic_distance``,
    the 8-connected grid distance, which reads up to 8% long in open space and would inflate SPL.
    Episodes without a reference polyline fall back to ``geodesic_distance``.

    Video-contextualized (VCN-Bench) episodes measure NE/SR/OSR as the Euclidean distance to the
    nearest viewpoint of any goal object (:func:`object_viewpoints`, VCN-Bench App. C.1), with the
    task's 1 m threshold, instead of the geodesic distance to one point near the object.
    """
    from ..tasks.pathing import resample_polyline

    goals_xy = np.array([g.position[:2] for g in episode.goals], dtype=float)
    reference_xy = np.asarray(episode.reference_path, dtype=float)[:, :2]
    reference = resample_polyline(reference_xy, reference_spacing)
    shortest = (M.trajectory_length(reference_xy) if len(reference_xy) >= 2
                else float(episode.geodesic_distance))
    ordered = has_ordered_goals(episode)
    if ordered:
        fns = [goal_distance_fn(ctx, g[None]) for g in goals_xy]
        final_goal, final_fn = goals_xy[-1:], fns[-1]
    else:
        final_goal, final_fn = goals_xy, goal_distance_fn(ctx, goals_xy)
        viewpoints = object_viewpoints(ctx, episode.goals) if episode.task_type in ROOM_GOAL_TASKS else None
        if viewpoints is not None and len(viewpoints):
            final_goal, final_fn = viewpoints, None  # Euclidean to the nearest viewpoint
    out = M.compute(STANDARD_METRICS, path=path_xy, goal=final_goal, reference=reference,
                    shortest_length=shortest, threshold=success_distance,
                    distance_fn=final_fn, collisions=collisions, actions=actions)
    if ordered:
        reached = M.goals_reached(path_xy, goals_xy, success_distance, fns)
        out["goals_reached"] = [bool(r) for r in reached]
        out["SR"] = float(out["SR"] and reached.all())
    room_id = episode.info.get("target_room_id", episode.goals[0].room_id)
    if episode.task_type in ROOM_GOAL_TASKS and room_id is not None:
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
    (both), ``coverage`` of the room's objects seen from the in-room poses and ``REV_SPL`` with
    the in-room path length against ``reference_exploration_length``. As in VLN-NF (panoramic
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
    steps = np.linalg.norm(np.diff(poses[:, :2], axis=0), axis=1)
    explored = float(steps[inside[:-1] & inside[1:]].sum()) if len(poses) > 1 else 0.0
    correct = decision is not None and decision.upper() == expected
    return {"reach_SR": reached, "decision_SR": float(correct),
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


_view_cache: list[Any] = [None, None]  # [scene description, its view-blocking grid]


def _view_blocking(ctx: Any) -> tuple[np.ndarray, np.ndarray]:
    """The scene's view-blocking grid at camera height (kept for the scene being evaluated)."""
    from ..tasks.tours import view_blocking_grid

    if _view_cache[0] is not ctx.desc:
        _view_cache[:] = [ctx.desc, view_blocking_grid(ctx.desc, ctx.planner.resolution, ctx.body.camera_height)]
    return _view_cache[1]


def _state(episode, ctx, mode, pose, step, settings, goal_fn, collided) -> AgentState:
    node, neighbours = getattr(mode, "node", None), []
    if node is not None:
        neighbours = [(n, mode.position(n)) for n in mode.neighbours()]
    return AgentState(step=step, pose=pose, max_steps=settings.max_steps, success_distance=settings.success_distance,
                      episode=episode, context=ctx, goal_distance=goal_fn, collided=collided, mode=mode.name,
                      node=node, neighbours=neighbours)


def run_episode(episode: Any, ctx: Any, sim: Any, mode: CollisionMode, agent: Agent, settings: RunSettings) -> dict:
    """Run one episode to its end and return its record (metrics, trajectory, actions, collisions)."""
    from ..sim.types import AgentPose, InvalidActionError

    t0 = time.perf_counter()
    start = AgentPose(float(episode.start_position[0]), float(episode.start_position[1]), float(episode.start_yaw))
    with warnings.catch_warnings():  # a start touching an obstacle is moved off it: recorded, not printed
        warnings.simplefilter("ignore", RuntimeWarning)
        obs = mode.reset(start)
    pose = sim.pose
    agent.reset(episode, ctx)
    goals_xy = np.array([g.position[:2] for g in episode.goals], dtype=float)
    goal_fn = goal_distance_fn(ctx, goals_xy[-1:] if has_ordered_goals(episode) else goals_xy)
    poses = [[pose.x, pose.y, pose.yaw]]
    actions: list[Any] = []
    collisions: list[dict] = []
    invalid: list[dict] = []
    termination, failure, stopped, collided = "max_steps", None, False, False
    decision: str | None = None
    n_moves = 0
    for step in range(settings.max_steps):
        state = _state(episode, ctx, mode, pose, step, settings, goal_fn, collided)
        try:
            action = agent.act(obs, state)
        except Exception as exc:  # noqa: BLE001 - an agent bug is one failed step, not a crashed run
            invalid.append({"step": step, "action": None, "error": f"agent raised {type(exc).__name__}: {exc}"})
            log.warning("episode %s step %d: agent raised %s", episode.episode_id, step,
                        traceback.format_exception_only(type(exc), exc)[-1].strip())
            actions.append(None)
            continue
        if isinstance(action, str) and action.strip().upper().replace("-", "_") in DECISIONS:
            decision = action.strip().upper().replace("-", "_")  # a STOP that states a decision
            actions.append(decision)
            termination, stopped = "stop", True
            break
        try:
            outcome = mode.step(action)
        except InvalidActionError as exc:
            invalid.append({"step": step, "action": repr(action)[:200], "error": str(exc)})
            log.warning("episode %s step %d: invalid action %r: %s", episode.episode_id, step, action, exc)
            actions.append(None)
            continue
        actions.append(_action_name(action))
        if outcome.stop:
            termination, stopped = "stop", True
            break
        n_moves += 1
        pose, obs, collided = outcome.pose, outcome.observations, outcome.collided
        poses.append([pose.x, pose.y, pose.yaw])
        if outcome.collided:
            collisions.append({"step": step, "position": [pose.x, pose.y],
                               "labels": sorted({c.get("label", "?") for c in outcome.contacts}),
                               "displacement": round(float(outcome.displacement), 4)})
        if outcome.failure:
            termination, failure = "failure", outcome.failure
            break
    path_xy = np.asarray(poses, dtype=float)[:, :2]
    metrics = score_episode(episode, ctx, path_xy, stopped=stopped, failed=failure is not None,
                            collisions=len(collisions), actions=n_moves, success_distance=settings.success_distance,
                            reference_spacing=mode.forward_step)
    if episode.task_type in DECISION_TASKS and "decision" in episode.info:
        metrics.update(score_decision(episode, ctx, np.asarray(poses, dtype=float), decision,
                                      blocked=_view_blocking(ctx)))
        # VLN-NF success is reaching the room AND stating the right decision (RD_SR, REV_SPL);
        # a point-goal SR/SPL/sDTW would score a correct exploration that ends away from the
        # goal point as a failure, so they are reported as not applicable
        for name in POINT_SUCCESS_METRICS:
            metrics[name] = None
    if getattr(agent, "selected_frame", None) is not None and "target_frames" in episode.info:
        metrics.update(score_frame_selection(episode, agent.selected_frame))
    return {
        "episode_id": episode.episode_id, "scene_id": episode.scene_id, "task_type": episode.task_type,
        "split": episode.split, "instruction": episode.instruction_text, "metrics": metrics, "decision": decision,
        "termination": termination, "failure": failure, "steps": len(actions), "moves": n_moves,
        "invalid_actions": len(invalid), "invalid": invalid[:20], "trajectory": np.round(poses, 4).tolist(),
        "actions": actions, "collisions": collisions, "agent_outputs": to_jsonable(agent.outputs),
        "reference_path": np.round(np.asarray(episode.reference_path, dtype=float), 4).tolist(),
        "goals": goals_xy.tolist(), "start_adjusted_m": round(start.distance_to(AgentPose(*poses[0][:2])), 4),
        "duration_s": round(time.perf_counter() - t0, 3),
    }


def _action_name(action: Any) -> Any:
    name = getattr(action, "name", None)
    if isinstance(name, str):
        return name
    if hasattr(action, "__dataclass_fields__"):
        return {"type": type(action).__name__, **{k: float(getattr(action, k)) for k in action.__dataclass_fields__}}
    return to_jsonable(action)


# --------------------------------------------------------------------------------------------
# report artefacts made while the simulator is alive


def save_episode_visuals(record: dict, ctx: Any, sim: Any, out: Path, *, rgb_sensor: Any, frames: bool) -> None:
    """Top-down map (occupancy, reference, agent path, collisions) and first-person RGB frames at
    key steps (start, middle, end, collisions); file paths are stored in ``record``."""
    from PIL import Image

    from ..sim.types import AgentPose

    stem = _safe_name(record["episode_id"])
    try:
        from ..scenes.render_map import render_map_png

        traj = np.asarray(record["trajectory"], dtype=float)
        markers = [{"xy": traj[0, :2], "color": "tab:green", "label": "start", "size": 50},
                   {"xy": np.asarray(record["goals"]), "color": "tab:red", "marker": "*", "label": "goal", "size": 90}]
        if record["collisions"]:
            markers.append({"xy": np.array([c["position"] for c in record["collisions"]]), "color": "black",
                            "marker": "x", "label": "collision", "size": 45})
        map_path = out / "maps" / f"{stem}.png"
        render_map_png(ctx.desc, ctx.maps, map_path,
                       paths=[{"xy": np.asarray(record["reference_path"])[:, :2], "color": "tab:blue", "label": "reference"},
                              {"xy": traj[:, :2], "color": "tab:orange", "label": "agent"}],
                       markers=markers, title=f"{record['episode_id']} ({record['termination']})", dpi=90)
        record["map"] = str(map_path.relative_to(out))
    except ImportError:
        log.warning("vlnverse.scenes.render_map is unavailable: no top-down map in the report")
    except Exception as exc:  # noqa: BLE001 - a failed picture must not lose the episode
        log.warning("map for %s failed: %s", record["episode_id"], exc)
    if not frames or rgb_sensor is None:
        return
    traj = record["trajectory"]
    last = len(traj) - 1
    keys = {0: "start", last // 2: "middle", last: "end"}
    for c in record["collisions"][:3]:
        idx = min(last, 1 + sum(1 for a in record["actions"][:c["step"]] if a not in (None, "STOP")))
        keys.setdefault(idx, "collision")
    saved = []
    for idx in sorted(keys):
        x, y, yaw = traj[idx]
        try:
            image = sim.render_at(AgentPose(x, y, yaw), rgb_sensor)
        except Exception as exc:  # noqa: BLE001
            log.warning("frame %d of %s failed: %s", idx, record["episode_id"], exc)
            continue
        rgb = image.get(rgb_sensor.name, next(iter(image.values())))
        path = out / "frames" / stem / f"{idx:04d}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.asarray(rgb, dtype=np.uint8)).save(path)
        saved.append({"index": idx, "label": keys[idx], "file": str(path.relative_to(out))})
    record["frames"] = saved


# --------------------------------------------------------------------------------------------
# summary


def summarize(records: list[dict], *, run: dict[str, Any]) -> dict[str, Any]:
    """Aggregate per-episode records: overall and per task type, plus SR_n for ordered-goal tasks."""
    def block(recs: list[dict]) -> dict[str, Any]:
        agg = M.aggregate([{k: v for k, v in r["metrics"].items() if k != "goals_reached"} for r in recs])
        agg["invalid_actions"] = int(sum(r["invalid_actions"] for r in recs))
        agg["terminations"] = dict(sorted(Counter(r["termination"] for r in recs).items()))
        ordered = [r["metrics"] for r in recs if "goals_reached" in r["metrics"]]
        if ordered:
            # ragged: an episode with 2 sub-goals does not count for SR_3; SR_all = task completion
            # (the episode's SR: all goals in order and a STOP near the last)
            agg["sr_n"] = M.sr_n([m["goals_reached"] for m in ordered],
                                 final_success=[float(m.get("SR") or 0.0) for m in ordered])
        return agg

    by_task: dict[str, list[dict]] = {}
    for r in records:
        by_task.setdefault(f"{r['task_type']}/{run['collision_mode']}", []).append(r)
    return {"run": run, "overall": block(records),
            "by_task": {k: block(v) for k, v in sorted(by_task.items())}}


TABLE_COLUMNS = ("TL", "NE", "SR", "OSR", "SPL", "nDTW", "CLS", "CR")
TABLE_PERCENT = ("SR", "OSR", "SPL", "nDTW", "CLS", "CR")
#: aggregated but left out of the stdout table (in summary.json and the report)
TABLE_HIDDEN = ("sDTW",)


def print_table(rows: Iterable[tuple[tuple[str, ...], dict]], *, title: str = "vlnverse eval",
                label_headers: tuple[str, ...] = ("task", "agent", "mode")) -> None:
    """Print a metrics table (rich): one row per (label cells, aggregate block)."""
    from rich.console import Console
    from rich.table import Table

    rows = list(rows)
    # task-specific rates (SR_n, RD_SR, REV_SPL, coverage, RSR, Rid_SR ...) get columns of their own
    extras = sorted({k for _, agg in rows for k, v in agg["means"].items()
                     if k not in TABLE_COLUMNS and k not in TABLE_HIDDEN and v is not None})
    console = Console()
    if not console.is_terminal:  # piped output: do not squeeze the table to 80 columns
        console = Console(width=max(120, 48 + 9 * (len(TABLE_COLUMNS) + len(extras) + 2)))
    table = Table(title=title)
    for header in label_headers:
        table.add_column(header, no_wrap=True)
    table.add_column("eps", justify="right")
    for name in TABLE_COLUMNS:
        table.add_column(name + (" %" if name in TABLE_PERCENT else " m"), justify="right")
    for name in extras:
        table.add_column(name + " %", justify="right")
    table.add_column("invalid", justify="right")
    for labels, agg in rows:
        means = agg["means"]
        cells = []
        for name in TABLE_COLUMNS:
            v = means.get(name)
            cells.append("-" if v is None else (f"{100 * v:.1f}" if name in TABLE_PERCENT else f"{v:.2f}"))
        cells += ["-" if means.get(name) is None else f"{100 * means[name]:.1f}" for name in extras]
        table.add_row(*labels, str(agg["episodes"]), *cells, str(agg.get("invalid_actions", 0)))
    console.print(table)


# --------------------------------------------------------------------------------------------
# the run


def run_eval(cfg: EvalConfig, **kwargs: Any) -> dict[str, Any]:
    """Run (or resume) the evaluation ``cfg``; returns the summary written to ``summary.json``.

    ``cfg.out`` must be new, empty or an eval folder (``core.io.claim_output_dir``) and is locked
    for the run (``core.io.folder_lock``): a second run on the same folder is refused.
    Keyword arguments: see ``run_eval_locked``.
    """
    out = claim_output_dir(cfg.out, command="eval", field="out")
    with folder_lock(out):
        return run_eval_locked(cfg, **kwargs)


def run_eval_locked(cfg: EvalConfig, *, progress: bool = True, print_summary: bool = True,
                    agent_factory: Callable[[], Agent] | None = None,
                    scene_loader: Callable[[str, Any, float], Any] | None = None) -> dict[str, Any]:
    """``run_eval``'s body, for a caller that holds ``cfg.out``'s lock.

    ``agent_factory`` overrides the registry lookup (e.g. an agent object built in code);
    ``scene_loader(scene_path, body, resolution) -> SceneContext`` overrides
    ``load_scene_context`` (e.g. for in-memory scenes).
    """
    from tqdm import tqdm

    from ..sim import make_simulator
    from ..tasks.base import load_scene_context, load_task_types
    from .models import make_model
    from .report import write_report

    load_task_types()
    out = Path(cfg.out)
    config_path = out / CONFIG_FILE
    key = redact_secrets(to_jsonable(cfg.run_key()))  # never a key from a URL in a file
    if config_path.is_file():
        previous = json.loads(config_path.read_text(encoding="utf-8"))
        if previous.get("run_key") != key:
            raise ConfigError("the output folder holds a run with a different config", field="out",
                              expected="a new 'out' folder, or the same config to resume", file=config_path)
    settings = resolve_settings(cfg)
    model = make_model(cfg.model.name, cfg.model.params) if cfg.model is not None else None
    agent = agent_factory() if agent_factory else make_agent(cfg.agent.name, cfg.agent.params, seed=cfg.seed, model=model)
    episodes = resolve_episodes(cfg, settings, out, progress=progress)
    stage_config_record(out, {"run_key": key, "config": redact_secrets(to_jsonable(cfg.to_dict()))})

    log_path = out / EPISODES_FILE
    finished = read_finished(log_path)
    done = {r["episode_id"] for r in finished}
    todo = [e for e in episodes if e.episode_id not in done]
    report_budget = max(0, cfg.report.max_episodes - sum(1 for r in finished if r.get("map") or r.get("frames")))
    sensors = [s.to_spec() for s in cfg.sensors]
    rgb_sensor = next((s for s in sensors if s.kind == "rgb"), None)
    if rgb_sensor is not None and cfg.report.frames:
        from dataclasses import replace

        frame_w = cfg.report.frame_width
        rgb_sensor = replace(rgb_sensor, name="report_rgb", width=frame_w,
                             height=max(8, round(frame_w * rgb_sensor.height / rgb_sensor.width)))

    by_scene: dict[str, list] = {}
    for ep in todo:
        by_scene.setdefault(str(ep.scene_path), []).append(ep)
    t_start = time.perf_counter()
    bar = tqdm(total=len(episodes), initial=len(finished), desc=f"{cfg.agent.name}/{cfg.collision_mode}",
               unit="ep", disable=not progress)
    try:
        for scene_path, scene_eps in by_scene.items():
            ctx = (scene_loader or load_scene_context)(scene_path, settings.body, settings.resolution)
            check_episode_bounds(scene_eps, ctx)
            sim = make_simulator(ctx.desc, settings.body, sensors=sensors, backend=cfg.backend)
            try:
                control = sim.control
                params = {"forward_step": control.forward_step, "turn_angle_deg": control.turn_angle_deg,
                          "look_angle_deg": control.look_angle_deg, **cfg.mode_params.get(cfg.collision_mode, {})}
                if cfg.collision_mode == "graph":
                    params.setdefault("navgraph", getattr(ctx.navgraph, "graph", ctx.navgraph))
                if cfg.collision_mode in ("telhop", "graph"):
                    params.setdefault("planner", ctx.planner)
                try:
                    mode = make_mode(cfg.collision_mode, sim, **params)
                except (TypeError, ValueError) as exc:
                    raise ConfigError(str(exc), field=f"mode_params.{cfg.collision_mode}") from None
                for ep in scene_eps:
                    record = run_episode(ep, ctx, sim, mode, agent, settings)
                    record.update(agent=cfg.agent.name, collision_mode=cfg.collision_mode)
                    if cfg.report.enabled and report_budget > 0:
                        save_episode_visuals(record, ctx, sim, out, rgb_sensor=rgb_sensor, frames=cfg.report.frames)
                        report_budget -= 1
                    append_record(log_path, record)
                    finished.append(record)
                    bar.update(1)
                    key = "RD_SR" if settings.task_type in DECISION_TASKS else "SR"  # the task's headline success
                    scores = [r["metrics"].get(key) for r in finished if r["metrics"].get(key) is not None]
                    if scores:
                        bar.set_postfix({key: f"{np.mean(scores):.2f}"})
            finally:
                sim.close()
    except KeyboardInterrupt:
        bar.close()
        print(f"interrupted: {len(finished)} of {len(episodes)} episodes are saved in {log_path}; "
              "run the same command again to resume")
        raise
    finally:
        bar.close()
    elapsed = time.perf_counter() - t_start
    commit_config_record(out)
    order = {e.episode_id: i for i, e in enumerate(episodes)}
    finished = sorted((r for r in finished if r["episode_id"] in order), key=lambda r: order[r["episode_id"]])
    run = {"agent": cfg.agent.name, "model": cfg.model.name if cfg.model else None, "task": cfg.task,
           "collision_mode": cfg.collision_mode, "split": cfg.split, "seed": cfg.seed,
           "max_steps": settings.max_steps, "success_distance": settings.success_distance,
           "body": settings.body.name}
    summary = summarize(finished, run=run)
    summary["timing"] = {"episodes_run_now": len(todo), "seconds": round(elapsed, 2),
                         "episodes_per_min": round(60.0 * len(todo) / elapsed, 2) if todo and elapsed > 0 else None}
    write_json_atomic(out / SUMMARY_FILE, summary)
    if cfg.report.enabled:
        write_report(out / "report.html", [(f"{cfg.agent.name} / {cfg.collision_mode}", summary, finished)], base_dir=out)
    if print_summary:
        print_table([((k.split("/")[0], cfg.agent.name, cfg.collision_mode), v) for k, v in summary["by_task"].items()])
        print(f"wrote {out / SUMMARY_FILE}, {out / EPISODES_FILE}" + (f", {out / 'report.html'}" if cfg.report.enabled else ""))
    return summary
