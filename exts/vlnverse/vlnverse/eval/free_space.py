"""FREE (VLN-NF Sec. 4.3): free-space clearance per candidate heading from depth views.

The four 90° depth views at a viewpoint are back-projected into world points (pinhole model,
:func:`vlnverse.sim.sensors.camera_extrinsics`). Points within ``floor_tolerance`` of the floor
(the body's step height: it steps over anything lower) are the navigable-floor segmentation;
points above it and below the body's height are obstacles
(a geometric segmentation standing in for the paper's Grounded-SAM mask). The obstacle points
are rasterised on a local grid of ``cell`` metres and a ray is cast from the agent along each
heading: the clearance is the distance travelled before the ray comes within ``margin`` (the
body radius) of an obstacle cell — the same rule that makes the toolkit's navigable map (free
cells at least the body radius from every obstacle) — capped at ``max_range``. Cells never
observed count as free: the depth sees every obstacle in the body's height band around it.

:func:`map_clearance` is the reference: the same ray cast on the scene's navigable map.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..sim.sensors import camera_extrinsics, camera_intrinsics
from ..sim.types import AgentPose


def backproject(depth: np.ndarray, hfov_deg: float, cam_to_world: np.ndarray, *, max_depth: float = 10.0) -> np.ndarray:
    """World points (N, 3) of the pixels of a planar ``depth`` image (H, W) with a hit (< ``max_depth``)."""
    depth = np.asarray(depth, dtype=float)
    h, w = depth.shape
    k = camera_intrinsics(w, h, hfov_deg)
    v, u = np.mgrid[0:h, 0:w]
    ok = np.isfinite(depth) & (depth > 0) & (depth < max_depth - 1e-3)
    z = depth[ok]
    x = (u[ok] + 0.5 - k[0, 2]) / k[0, 0] * z
    y = (v[ok] + 0.5 - k[1, 2]) / k[1, 1] * z
    cam = np.stack([x, y, z, np.ones_like(z)], axis=0)
    return (cam_to_world @ cam)[:3].T


def view_points(views_depth: np.ndarray, xy: Sequence[float], camera_height: float, *, hfov_deg: float = 90.0,
                pitch_deg: float = 0.0, floor_z: float = 0.0, max_depth: float = 10.0) -> np.ndarray:
    """World points (N, 3) of the four global depth views (east, north, west, south) at ``xy``,
    cameras pitched ``pitch_deg`` (negative: down)."""
    pts = []
    for i, depth in enumerate(np.asarray(views_depth)):
        mat = camera_extrinsics(AgentPose(float(xy[0]), float(xy[1]), i * math.pi / 2), (0.0, 0.0, None, pitch_deg),
                                camera_height, floor_z=floor_z)
        pts.append(backproject(depth, hfov_deg, mat, max_depth=max_depth))
    return np.concatenate(pts) if pts else np.zeros((0, 3))


def clearance(points: np.ndarray, xy: Sequence[float], headings: Sequence[float], *, floor_z: float = 0.0,
              body_height: float = 1.8, margin: float = 0.18, floor_tolerance: float = 0.05, cell: float = 0.05,
              max_range: float = 5.0) -> np.ndarray:
    """Clearance (m) along each world heading (radians, 0 = east, CCW) from ``xy`` given the
    back-projected ``points`` (see the module docstring)."""
    from scipy.ndimage import distance_transform_edt

    pts = np.asarray(points, dtype=float).reshape(-1, 3)
    height = pts[:, 2] - floor_z
    obstacle = pts[(height > floor_tolerance) & (height < body_height)]
    half = max_range + margin + 2 * cell
    n = int(math.ceil(2 * half / cell))
    origin = np.asarray(xy, dtype=float)[:2] - half
    blocked = np.zeros((n, n), dtype=bool)
    rc = np.floor((obstacle[:, [1, 0]] - origin[[1, 0]]) / cell).astype(int)
    ok = (rc >= 0).all(axis=1) & (rc < n).all(axis=1)
    blocked[rc[ok, 0], rc[ok, 1]] = True
    dist = distance_transform_edt(~blocked) * cell if blocked.any() else np.full((n, n), np.inf)
    steps = np.arange(0.0, max_range + 1e-9, cell / 2)
    out = []
    for theta in headings:
        ray = np.asarray(xy, dtype=float)[:2] + steps[:, None] * np.array([math.cos(theta), math.sin(theta)])
        cells = np.floor((ray[:, [1, 0]] - origin[[1, 0]]) / cell).astype(int)
        near = dist[cells[:, 0], cells[:, 1]] < margin
        hit = np.flatnonzero(near)
        out.append(float(steps[hit[0] - 1]) if len(hit) and hit[0] > 0 else (0.0 if len(hit) else float(max_range)))
    return np.round(np.asarray(out, dtype=float), 3)


def map_clearance(navigable: Any, xy: Sequence[float], headings: Sequence[float], *, max_range: float = 5.0) -> np.ndarray:
    """Reference clearance: how far a ray along each heading stays on FREE cells of the navigable
    map (an :class:`~vlnverse.scenes.occupancy.OccupancyMap`), capped at ``max_range``."""
    step = navigable.resolution / 2
    steps = np.arange(0.0, max_range + 1e-9, step)
    out = []
    for theta in headings:
        ray = np.asarray(xy, dtype=float)[:2] + steps[:, None] * np.array([math.cos(theta), math.sin(theta)])
        free = navigable.is_free(ray)
        bad = np.flatnonzero(~free)
        out.append(float(steps[bad[0] - 1]) if len(bad) and bad[0] > 0 else (0.0 if len(bad) else float(max_range)))
    return np.round(np.asarray(out, dtype=float), 3)


class DepthViews:
    """Renders (and keeps, per scene and position) the four global depth views at a viewpoint,
    pitched ``pitch_deg`` down so that the floor next to the body is in view (a level 90° camera
    at 0.88 m misses everything lower than its height minus the distance: the edge of a coffee
    table 0.3 m away)."""

    def __init__(self, size: int = 96, hfov_deg: float = 90.0, max_depth: float = 10.0, pitch_deg: float = -40.0):
        self.size, self.hfov_deg, self.max_depth = int(size), float(hfov_deg), float(max_depth)
        self.pitch_deg = float(pitch_deg)
        self._desc: Any = None
        self._options: dict = {}
        self._sim: Any = None
        self._memo: dict[tuple, np.ndarray] = {}

    def depth(self, ctx: Any, xy: Sequence[float]) -> np.ndarray:
        """(4, H, W) float32 planar depth (m) facing east, north, west, south."""
        from ..sim import make_simulator
        from ..sim.sensors import PanoramaSpec
        from ..tasks.base import render_options

        options = render_options(ctx)
        key = (id(ctx.desc), tuple(sorted(options.items())), round(float(xy[0]), 3), round(float(xy[1]), 3))
        if key in self._memo:
            return self._memo[key]
        if self._desc is not ctx.desc or self._options != options:
            self.close()
            self._sim = make_simulator(ctx.desc, ctx.body, sensors=[], **options)
            self._desc, self._options = ctx.desc, options
        spec = PanoramaSpec.of(name="free", views=4, width=self.size, height=self.size, hfov_deg=self.hfov_deg,
                            modalities=("depth",), max_depth=self.max_depth,
                            mount=(0.0, 0.0, None, self.pitch_deg))
        depth = np.asarray(self._sim.render_at(AgentPose(float(xy[0]), float(xy[1]), 0.0), spec)["free_depth"])
        self._memo[key] = depth
        return depth

    def clearance(self, ctx: Any, xy: Sequence[float], headings: Sequence[float], *, max_range: float = 5.0) -> np.ndarray:
        """FREE clearance along ``headings`` at ``xy`` (see :func:`clearance`)."""
        pts = view_points(self.depth(ctx, xy), xy, float(ctx.body.camera_height), hfov_deg=self.hfov_deg,
                          pitch_deg=self.pitch_deg, floor_z=float(getattr(ctx, "floor_z", 0.0)), max_depth=self.max_depth)
        return clearance(pts, xy, headings, floor_z=float(getattr(ctx, "floor_z", 0.0)),
                         body_height=float(ctx.body.height), margin=float(ctx.body.radius),
                         floor_tolerance=float(ctx.body.step_height), max_range=max_range)

    def close(self) -> None:
        """Close the simulator."""
        if self._sim is not None:
            self._sim.close()
        self._sim = self._desc = None
        self._options = {}
