"""Training data of the waypoint predictor: depth panoramas at seeded poses of the scenes and their
ground-truth heatmaps, with the next reference waypoint of a shortest path for the metrics."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .grid import PANORAMA_HFOV_DEG, WaypointGrid, graph_nodes, gt_heatmap, target_points


class PanoramaRenderer:
    """Renders the ``views``-view depth (and RGB) panorama at a pose, one simulator per scene
    description (a panorama sensor mounted on the agent: only the pose is used). ``options``: the
    ``make_simulator`` render options (``quality``, ``objects``; ``RenderConfig.options()``), which
    ``render(..., options=)`` replaces per call (an agent's scene context's)."""

    def __init__(self, views: int = 12, size: int = 32, hfov_deg: float = PANORAMA_HFOV_DEG, rgb: bool = False,
                 max_depth: float = 10.0, options: dict[str, str] | None = None):
        from ...sim.sensors import PanoramaSpec

        self.spec = PanoramaSpec.of(name="wp", views=views, width=size, height=size, hfov_deg=hfov_deg,
                                 modalities=("depth", "rgb") if rgb else ("depth",), max_depth=max_depth)
        self.options = dict(options or {})
        self._desc: Any = None
        self._sim: Any = None
        self._made_with: dict[str, str] = {}

    def render(self, desc: Any, body: Any, pose: tuple[float, float, float],
               options: dict[str, str] | None = None) -> dict[str, np.ndarray]:
        """``{"depth": (V, H, W) float32, ["rgb": (V, H, W, 3) uint8]}`` at ``pose`` (x, y, yaw),
        drawn with ``options`` (None: the renderer's own)."""
        from ...sim import make_simulator
        from ...sim.types import AgentPose

        options = self.options if options is None else dict(options)
        if self._desc is not desc or options != self._made_with:
            self.close()
            self._sim = make_simulator(desc, body, sensors=[], **options)
            self._desc, self._made_with = desc, options
        out = self._sim.render_at(AgentPose(float(pose[0]), float(pose[1]), float(pose[2])), self.spec)
        res = {"depth": np.asarray(out["wp_depth"], dtype=np.float32)}
        if "wp_rgb" in out:
            res["rgb"] = np.asarray(out["wp_rgb"])
        return res

    def close(self) -> None:
        """Close the simulator, if any."""
        if self._sim is not None:
            self._sim.close()
        self._sim = self._desc = None


def next_reference_waypoint(planner: Any, xy: np.ndarray, goal: np.ndarray, lookahead: float = 2.0) -> np.ndarray:
    """The next waypoint of the reference path (the planner's any-angle shortest path from ``xy``
    to ``goal``): its first corner, or the point ``lookahead`` metres along the first straight
    segment when that corner is farther (the goal when it is nearer). It is always in line of sight."""
    path = np.asarray(planner.shortest_path(xy, goal).waypoints, dtype=float)[:, :2]
    xy = np.asarray(xy, dtype=float)[:2]
    first = path[1] if len(path) > 1 else np.asarray(goal, dtype=float)[:2]
    d = float(np.linalg.norm(first - xy))
    return first.copy() if d <= lookahead else xy + (first - xy) * (lookahead / d)


def sample_poses(ctx: Any, n: int, rng: np.random.Generator, *, min_goal: float = 3.0, lookahead: float = 2.0,
                 tries: int = 20) -> list[dict[str, Any]]:
    """``n`` poses on navigable cells (uniform heading) with a random goal at least ``min_goal``
    geodesic metres away and the next reference waypoint toward it."""
    from ...tasks.pathing import NoNavigableSpaceError

    out = []
    for xy in ctx.planner.sample_navigable_points(rng, n):
        yaw = float(rng.uniform(-math.pi, math.pi))
        for _ in range(tries):
            goal = ctx.planner.sample_navigable_points(rng, 1)[0]
            field_ = ctx.planner.distance_field(goal)
            if np.isfinite(d := float(field_.distance(xy[None])[0])) and d >= min_goal:
                break
        else:
            continue
        try:
            nxt = next_reference_waypoint(ctx.planner, xy, goal, lookahead)
        except NoNavigableSpaceError:
            continue
        out.append({"x": float(xy[0]), "y": float(xy[1]), "yaw": yaw, "goal": goal.tolist(), "next": nxt.tolist()})
    return out


@dataclass
class WaypointData:
    """Rendered samples: depth (N, V, H, W) float16, optional rgb, targets (N, A, D) float16, the
    target points per sample and the pose records (scene, x, y, yaw, goal, next waypoint)."""

    depth: np.ndarray
    targets: np.ndarray
    poses: list[dict[str, Any]]
    points: list[np.ndarray]
    rgb: np.ndarray | None = None


def build_dataset(scenes: list, poses_per_scene: int, seed: int, *, grid: WaypointGrid, renderer: PanoramaRenderer,
                  body: Any = "r2r_ce", node_spacing: float = 0.75, sigma: tuple[float, float] = (2.0, 1.0),
                  context_loader: Callable[[Any], Any] | None = None, progress: bool = True) -> WaypointData:
    """Render ``poses_per_scene`` seeded poses of each scene (paths or contexts via
    ``context_loader``) with their ground-truth heatmaps."""
    from tqdm import tqdm

    from ...tasks.base import load_scene_context

    load = context_loader or (lambda s: load_scene_context(s, body))
    depth, rgb, targets, poses, points = [], [], [], [], []
    bar = tqdm(total=len(scenes) * poses_per_scene, desc="render panoramas", unit="pose", disable=not progress)
    for i, scene in enumerate(scenes):
        ctx = load(scene)
        rng = np.random.default_rng([seed, i])
        nodes = graph_nodes(ctx, node_spacing, seed)
        for rec in sample_poses(ctx, poses_per_scene, rng):
            pose = (rec["x"], rec["y"], rec["yaw"])
            img = renderer.render(ctx.desc, ctx.body, pose)
            pts = target_points(ctx.planner, nodes, pose, grid)
            depth.append(img["depth"].astype(np.float16))
            if "rgb" in img:
                rgb.append(img["rgb"])
            targets.append(gt_heatmap(pts, grid, *sigma).astype(np.float16))
            poses.append({"scene": str(scene if not hasattr(scene, "scene_id") else scene.scene_id), **rec})
            points.append(pts)
            bar.update(1)
    bar.close()
    return WaypointData(np.stack(depth), np.stack(targets), poses, points, np.stack(rgb) if rgb else None)
