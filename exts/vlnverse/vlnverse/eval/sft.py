"""Chat-format fine-tuning data for the MV-DualVLN pixel-goal agent (VCN-Bench Sec. 4), from
video-contextualized episodes: ``vlnverse data export-sft --task video_contextualized``.

Per episode the exporter walks a teacher from the start: an occupancy map of what it has seen
(navigable cells in line of sight within ``sight`` m of any pose it stood at, on the scene's
view-blocking grid), the **frontier** (seen navigable cells next to unseen navigable ones) nearest
the target (geodesic) as the next goal, written as the pixel where that floor point appears in
the current view with the smallest rotation to it (a frontier cell whose pixel does not
back-project onto a navigable cell is skipped for the next nearest); once the target's nearest
navigable viewpoint is seen and within ``stop_distance`` (3 m) geodesic, the sample is STOP with
the object's centroid pixel. The teacher then moves to the goal and the next sample is taken,
at most ``max_samples`` per episode.

Each JSONL line: ``id``, ``episode_id``, ``images`` (PNG paths relative to the output folder:
the shown prior-video frames, the four start views, the four current views, Front / Left /
Back / Right), ``messages`` (system, user — the agent's own prompt — and the assistant's target
answer), ``target`` (``frame``, ``stop``, ``view``, ``u``, ``v``, the teacher's ``pose`` [x, y, yaw]
and, for a move, ``waypoint`` [x, y], the pixel's floor point). Images are content-addressed under ``images/``; every file is written atomically.
"""
from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..core.errors import ConfigError
from .pixel_goal import SYSTEM, VIEW_NAMES, Panorama, PixelGoalError, floor_to_pixel, pixel_to_floor


def seen_cells(blocked: np.ndarray, origin: np.ndarray, resolution: float, poses: Sequence[Sequence[float]],
               sight: float, rays: int = 180) -> np.ndarray:
    """Boolean grid of the cells in line of sight within ``sight`` m of any of ``poses``."""
    seen = np.zeros(blocked.shape, dtype=bool)
    steps = np.arange(0.0, sight, resolution / 2)
    angles = np.linspace(0, 2 * math.pi, rays, endpoint=False)
    for xy in poses:
        for a in angles:
            pts = np.asarray(xy, dtype=float)[:2] + steps[:, None] * np.array([math.cos(a), math.sin(a)])
            rc = np.floor((pts[:, [1, 0]] - origin[[1, 0]]) / resolution).astype(int)
            ok = (rc >= 0).all(axis=1) & (rc[:, 0] < blocked.shape[0]) & (rc[:, 1] < blocked.shape[1])
            rc = rc[: int(np.argmin(ok)) if not ok.all() else len(rc)]
            hit = np.flatnonzero(blocked[rc[:, 0], rc[:, 1]])
            rc = rc[: hit[0] + 1] if len(hit) else rc
            seen[rc[:, 0], rc[:, 1]] = True
    return seen


def frontier_cells(navigable: np.ndarray, seen: np.ndarray) -> np.ndarray:
    """(K, 2) [row, col] of seen navigable cells with an unseen navigable 4-neighbour."""
    unseen = navigable & ~seen
    nb = np.zeros_like(unseen)
    nb[1:] |= unseen[:-1]
    nb[:-1] |= unseen[1:]
    nb[:, 1:] |= unseen[:, :-1]
    nb[:, :-1] |= unseen[:, 1:]
    return np.argwhere(navigable & seen & nb)


def _png(image: np.ndarray, folder: Path) -> str:
    from ..core.io import write_bytes_atomic
    from ..run.chat_models import png_bytes

    data = png_bytes(image)
    name = f"images/{hashlib.sha256(data).hexdigest()[:24]}.png"
    path = folder / name
    if not path.is_file():
        write_bytes_atomic(path, data)
    return name


def export_sft(episodes_path: str | Path, out: str | Path, *, view_size: int = 224, video_frames: int = 50,
               sight: float = 3.0, stop_distance: float = 3.0, max_samples: int = 8, body: str = "r2r_ce",
               scene_root: Any = None) -> dict[str, Any]:
    """Write ``out/sft.jsonl`` and ``out/images/`` from a video-contextualized episode file (or
    dataset folder); returns counts. Episodes of another task type are a ``ConfigError``."""
    from ..core.body import load_body
    from ..core.io import write_text_atomic
    from ..tasks.base import load_scene_context
    from ..tasks.episode import load_episodes
    from ..tasks.scene_roots import resolve_episode_scenes, scene_roots
    from ..tasks.tours import load_prior_video
    from ..tasks.types.goals import nearest_viewpoint
    from .mllm.views import snapped_front
    from ..run.scoring import view_blocking

    src = Path(episodes_path)
    files = sorted(src.glob("*.jsonl")) if src.is_dir() else [src]
    if not files or not all(f.is_file() for f in files):
        raise ConfigError("no episode file", file=str(src), expected="a JSONL file or a dataset folder of them")
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    agent_body = load_body(body)
    lines: list[str] = []
    counts = {"episodes": 0, "samples": 0, "stop_samples": 0, "skipped_episodes": 0}
    contexts: dict[str, Any] = {}
    for file in files:
        episodes = load_episodes(file)
        bad = [e.episode_id for e in episodes if e.task_type != "video_contextualized"]
        if bad:
            raise ConfigError(f"episode {bad[0]} is {episodes[0].task_type!r}", file=str(file), field="task_type",
                              expected="video_contextualized episodes")
        episodes = resolve_episode_scenes(episodes, scene_roots(scene_root, file.parent))
        for ep in episodes:
            if ep.scene_path not in contexts:
                contexts = {ep.scene_path: load_scene_context(ep.scene_path, agent_body, 0.05)}
            ctx = contexts[ep.scene_path]
            video = Path(ep.info["video"])
            frames, _ = load_prior_video(video if video.is_absolute() else file.parent / video)
            start, end = (int(v) for v in ep.info["window"])
            window = frames[start:end]
            ids = np.unique(np.linspace(0, len(window) - 1, min(video_frames, len(window))).round().astype(int))
            targets = [int(f) for f in ep.info.get("target_frames", [])]
            frame = min(ids, key=lambda i: (i not in targets, min((abs(i - t) for t in targets), default=0)))
            video_images = [_png(window[i], folder) for i in ids]
            samples = _teacher(ctx, ep, view_size, sight, stop_distance, max_samples, nearest_viewpoint,
                               view_blocking, snapped_front)
            if not samples:
                counts["skipped_episodes"] += 1
                continue
            counts["episodes"] += 1
            start_views = [_png(v, folder) for v in samples[0]["views"]]
            history: list[str] = []
            listing = ", ".join(f"image {k + 1} = frame {int(i)}" for k, i in enumerate(ids))
            for k, s in enumerate(samples):
                n = len(ids)
                prompt = (f"Instruction: {ep.instruction_text}\nVideo frames: {listing}.\n"
                          f"Images {n + 1}-{n + 4}: start views (Front, Left, Back, Right); images {n + 5}-{n + 8}: "
                          f"current views (Front, Left, Back, Right).\nHistory:\n{chr(10).join(history) or 'none yet'}")
                view = VIEW_NAMES[s["view"]]
                answer = (f"Frame: {int(frame)}\nView: {view}\nPixel: {s['u']}, {s['v']}"
                          + ("\nAction: STOP" if s["stop"] else ""))
                target = {"frame": int(frame), "stop": s["stop"], "view": view, "u": s["u"], "v": s["v"],
                          "pose": [round(float(s["xy"][0]), 4), round(float(s["xy"][1]), 4), round(float(s["yaw"]), 6)]}
                if not s["stop"]:
                    target["waypoint"] = [round(float(c), 3) for c in s["waypoint"]]
                lines.append(json.dumps({
                    "id": f"{ep.episode_id}-{k:02d}", "episode_id": ep.episode_id,
                    "images": video_images + start_views + [_png(v, folder) for v in s["views"]],
                    "messages": [{"role": "system", "content": SYSTEM.format(size=view_size)},
                                 {"role": "user", "content": prompt}, {"role": "assistant", "content": answer}],
                    "target": target}))
                counts["samples"] += 1
                counts["stop_samples"] += int(s["stop"])
                if not s["stop"]:
                    dist = float(np.linalg.norm(np.asarray(s["waypoint"]) - np.asarray(s["xy"])))
                    history.append(f"Step {len(history) + 1}: walked {dist:.1f} m toward a floor point in the {view} view "
                                   f"(frame {int(frame)}).")
    write_text_atomic(folder / "sft.jsonl", "".join(line + "\n" for line in lines))
    return {**counts, "out": str(folder / "sft.jsonl")}


def _teacher(ctx, ep, view_size, sight, stop_distance, max_samples, nearest_viewpoint, view_blocking, snapped_front):
    """The frontier teacher's samples: dicts with the current ``views``, ``xy``, ``stop``, ``view``, ``u``, ``v``, ``waypoint``."""
    nav = ctx.maps.navigable
    navigable = nav.free_mask()
    blocked, origin = view_blocking(ctx)
    res = ctx.planner.resolution
    goal = nearest_viewpoint(ctx, ep.start_position[:2], ep.goals)
    if goal is None:
        return []
    goal_xy = np.asarray(goal[0], dtype=float)
    to_goal = ctx.planner.distance_field(goal_xy)
    obj = ctx.desc.object_by_id(int(ep.info["target_object_id"])) if ep.info.get("target_object_id") is not None else None
    xy, yaw = np.asarray(ep.start_position[:2], dtype=float), float(ep.start_yaw)
    pano = Panorama(view_size)
    poses, samples = [xy], []
    try:
        for _ in range(max_samples):
            rgb, depth = pano.render(ctx, xy)
            front = snapped_front(yaw)
            order = [(front + k) % 4 for k in range(4)]
            views, depths = rgb[order], depth[order]
            seen = seen_cells(blocked, origin, res, poses, sight)
            g_rc = nav.world_to_cell(goal_xy[None])[0]
            here_to_goal = float(to_goal.distance(xy[None])[0])
            if seen[g_rc[0], g_rc[1]] and here_to_goal <= stop_distance and obj is not None:
                centre = (np.asarray(obj.bounds_min) + np.asarray(obj.bounds_max)) / 2
                pix = _project_point(centre, xy, yaw, ctx.body.camera_height, view_size, snapped_front)
                if pix is not None:
                    samples.append({"views": views, "xy": xy, "yaw": yaw, "stop": True, "view": pix[0], "u": pix[1], "v": pix[2]})
                    break
            cells = frontier_cells(navigable, seen)
            if len(cells) == 0:
                break
            pts = nav.cell_to_world(cells)
            d = to_goal.distance(pts)
            if seen[g_rc[0], g_rc[1]]:  # the goal is mapped: walk to it (toward its viewpoint)
                pts, d = np.concatenate([goal_xy[None], pts]), np.concatenate([[0.0], d])
            chosen = None
            for i in np.argsort(d, kind="stable")[:200]:
                if not np.isfinite(d[i]) or np.linalg.norm(pts[i] - xy) < 1.0:
                    continue
                pix = floor_to_pixel(pts[i], xy, yaw, ctx.body.camera_height, view_size)
                if pix is None:
                    continue
                k, u, v = pix
                try:
                    floor = pixel_to_floor(u, v, depths[k], ((front + k) % 4) * math.pi / 2, xy, ctx.body.camera_height,
                                           floor_z=ctx.floor_z, floor_tolerance=ctx.body.step_height)
                except PixelGoalError:
                    continue
                if not nav.is_free(floor[None])[0] or not np.isfinite(to_goal.distance(floor[None])[0]):
                    continue
                chosen = (k, u, v, floor)
                break
            if chosen is None:
                break
            k, u, v, floor = chosen
            samples.append({"views": views, "xy": xy, "yaw": yaw, "stop": False, "view": k, "u": u, "v": v, "waypoint": floor})
            d_move = floor - xy
            yaw = math.atan2(d_move[1], d_move[0])
            xy = floor
            poses.append(xy)
    finally:
        pano.close()
    return samples


def _project_point(point3, xy, yaw, camera_height, size, snapped_front):
    """(view, u, v) of a 3-D point in the agent-centred view with the smallest rotation to it."""
    from ..sim.sensors import camera_extrinsics, camera_intrinsics
    from ..sim.types import AgentPose

    d = np.asarray(point3[:2], dtype=float) - np.asarray(xy, dtype=float)
    front = snapped_front(yaw)
    k = min(range(4), key=lambda k: abs(math.remainder(math.atan2(d[1], d[0]) - (front + k) * math.pi / 2, 2 * math.pi)))
    mat = camera_extrinsics(AgentPose(float(xy[0]), float(xy[1]), (front + k) * math.pi / 2), (0.0, 0.0, None, 0.0),
                            camera_height)
    cam = np.linalg.inv(mat) @ np.array([*np.asarray(point3, dtype=float)[:3], 1.0])
    if cam[2] <= 1e-6:
        return None
    km = camera_intrinsics(size, size, 90.0)
    u, v = km[0, 0] * cam[0] / cam[2] + km[0, 2], km[1, 1] * cam[1] / cam[2] + km[1, 2]
    return (k, int(u), int(v)) if 0 <= u < size and 0 <= v < size else None
