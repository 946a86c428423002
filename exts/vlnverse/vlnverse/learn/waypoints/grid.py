"""The waypoint grid around the agent (polar bins), ground-truth heatmaps, NMS to candidates and the
free-space check on the depth panorama."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np



@dataclass(frozen=True)
class WaypointGrid:
    """The angle × distance grid around the agent (see the module docstring)."""

    angles: int = 120
    distances: int = 12
    max_distance: float = 3.0

    @property
    def angle_step(self) -> float:
        """Width of an angle bin (rad)."""
        return 2 * math.pi / self.angles

    @property
    def distance_step(self) -> float:
        """Width of a distance bin (m)."""
        return self.max_distance / self.distances

    def angle_of(self, a: Any) -> Any:
        """Centre angle (rad, CCW from the heading, in (-π, π]) of angle bin(s) ``a``."""
        ang = np.asarray(a, dtype=float) * self.angle_step
        return np.where(ang > math.pi, ang - 2 * math.pi, ang)

    def distance_of(self, j: Any) -> Any:
        """Centre distance (m) of distance bin(s) ``j``."""
        return (np.asarray(j, dtype=float) + 1.0) * self.distance_step

    def bins(self, angle: Any, distance: Any) -> tuple[np.ndarray, np.ndarray]:
        """(angle bin, distance bin) of polar points; distances clipped into the grid."""
        a = np.round(np.asarray(angle, dtype=float) / self.angle_step).astype(int) % self.angles
        j = np.clip(np.round(np.asarray(distance, dtype=float) / self.distance_step).astype(int) - 1, 0, self.distances - 1)
        return a, j


def to_polar(pose: tuple[float, float, float], points: np.ndarray) -> np.ndarray:
    """(N, 2) world points → (N, 2) (angle rad CCW from the heading in (-π, π], distance m)."""
    pts = np.atleast_2d(np.asarray(points, dtype=float))[:, :2] - np.asarray(pose[:2], dtype=float)
    ang = np.arctan2(pts[:, 1], pts[:, 0]) - float(pose[2])
    return np.stack([np.arctan2(np.sin(ang), np.cos(ang)), np.hypot(pts[:, 0], pts[:, 1])], axis=1)


def to_world(pose: tuple[float, float, float], polar: np.ndarray) -> np.ndarray:
    """(N, 2) (angle, distance) relative to ``pose`` → (N, 2) world points."""
    p = np.atleast_2d(np.asarray(polar, dtype=float)).reshape(-1, 2)
    ang = float(pose[2]) + p[:, 0]
    return np.stack([pose[0] + p[:, 1] * np.cos(ang), pose[1] + p[:, 1] * np.sin(ang)], axis=1)


def target_points(planner: Any, nodes_xy: np.ndarray, pose: tuple[float, float, float], grid: WaypointGrid) -> np.ndarray:
    """Polar (angle, distance) of the graph viewpoints ``nodes_xy`` reachable from ``pose`` along a
    collision-free straight segment, at least one distance bin and at most ``max_distance`` (plus
    half a bin) away."""
    nodes = np.asarray(nodes_xy, dtype=float).reshape(-1, 2)
    polar = to_polar(pose, nodes)
    near = (polar[:, 1] >= grid.distance_step * 0.5) & (polar[:, 1] <= grid.max_distance + 0.5 * grid.distance_step)
    if not near.any():
        return np.zeros((0, 2))
    origin = np.repeat(np.asarray(pose[:2], dtype=float)[None], int(near.sum()), axis=0)
    free = planner.segments_free(origin, nodes[near])
    return polar[near][free]


def gt_heatmap(polar: np.ndarray, grid: WaypointGrid, sigma_angle: float = 2.0, sigma_distance: float = 1.0) -> np.ndarray:
    """(angles, distances) float32 target: per point a Gaussian blob (σ in bins; angles wrap) centred
    on the point's exact (fractional) bin position, blobs combined by maximum; zeros without points."""
    out = np.zeros((grid.angles, grid.distances), dtype=np.float32)
    a_idx = np.arange(grid.angles, dtype=float)[:, None]
    j_idx = np.arange(grid.distances, dtype=float)[None, :]
    for ang, dist in np.asarray(polar, dtype=float).reshape(-1, 2):
        a0 = (ang / grid.angle_step) % grid.angles
        j0 = dist / grid.distance_step - 1.0
        da = np.abs(a_idx - a0)
        da = np.minimum(da, grid.angles - da)
        blob = np.exp(-0.5 * (da / sigma_angle) ** 2 - 0.5 * ((j_idx - j0) / sigma_distance) ** 2)
        np.maximum(out, blob.astype(np.float32), out=out)
    return out


def nms(heatmap: np.ndarray, *, k: int = 12, threshold: float = 0.3, nms_angle: int = 5,
        nms_distance: int = 2) -> list[tuple[int, int, float]]:
    """Non-maximum suppression on an (angles, distances) score map: up to ``k`` (angle bin,
    distance bin, score), highest first; each pick suppresses ± ``nms_angle`` angle bins (wrapping)
    × ± ``nms_distance`` distance bins; stops below ``threshold``. Ties go to the lowest flat index."""
    h = np.array(heatmap, dtype=float, copy=True)
    n_a, n_d = h.shape
    out: list[tuple[int, int, float]] = []
    while len(out) < k:
        flat = int(np.argmax(h))
        a, j = divmod(flat, n_d)
        score = h[a, j]
        if not score >= threshold:  # also stops on -inf / NaN
            break
        out.append((a, j, float(score)))
        rows = [(a + d) % n_a for d in range(-nms_angle, nms_angle + 1)]
        h[np.ix_(rows, list(range(max(0, j - nms_distance), min(n_d, j + nms_distance + 1))))] = -np.inf
    return out


def candidates_polar(picks: list[tuple[int, int, float]], grid: WaypointGrid) -> np.ndarray:
    """(K, 2) (angle rad, distance m) of NMS picks."""
    if not picks:
        return np.zeros((0, 2))
    a = np.array([p[0] for p in picks])
    j = np.array([p[1] for p in picks])
    return np.stack([grid.angle_of(a), grid.distance_of(j)], axis=1)


#: Horizontal (= vertical) field of view of each panorama view the predictor reads.
PANORAMA_HFOV_DEG = 90.0

#: the observation setups of ``ObservationSetup.view``
VIEWS = ("panoramic", "monocular")


@dataclass(frozen=True)
class ObservationSetup:
    """What the waypoint agent sees (the VLNVerse paper's "diverse observation spaces", GAMA
    appendix A.1.2; per task in a multi-task run: ``tasks[i].observation``). ``panoramic`` (the
    default): the predictor's 360° panorama. ``monocular``: a forward camera of ``hfov_deg``
    (at least one panorama view's 90°): only the panorama views that lie wholly inside it are
    seen (``visible``: 90° → the forward view alone; 150° → the forward view and its two
    neighbours); the others read as blank (depth 0, black RGB) for the waypoint predictor, their
    view features are zero, and candidates outside ±``hfov_deg``/2 are dropped (a monocular agent
    with no candidate turns in place, as when the predictor finds none); the waypoint perception
    adds turn candidates in their place (``vlnbert.TURN_ANGLES_DEG``)."""

    view: str = "panoramic"
    hfov_deg: float = 90.0

    @classmethod
    def parse(cls, spec: Any, field: str = "observation") -> "ObservationSetup":
        """An ``ObservationSetup`` from a mapping ``{view, hfov_deg}`` (None: panoramic); bad
        input is a one-line ``ConfigError`` naming ``field``."""
        from ...core.errors import ConfigError

        if spec is None or isinstance(spec, cls):
            return spec or cls()
        if not isinstance(spec, dict) or set(spec) - {"view", "hfov_deg"}:
            raise ConfigError(f"got {spec!r}", field=field, expected="a mapping with keys view, hfov_deg")
        view, hfov = spec.get("view", "panoramic"), spec.get("hfov_deg", PANORAMA_HFOV_DEG)
        if view not in VIEWS:
            raise ConfigError(f"got {view!r}", field=f"{field}.view", expected=f"one of {VIEWS}")
        if isinstance(hfov, bool) or not isinstance(hfov, (int, float)) or not PANORAMA_HFOV_DEG <= hfov < 360:
            raise ConfigError(f"got {hfov!r}", field=f"{field}.hfov_deg",
                              expected=f"degrees in [{PANORAMA_HFOV_DEG:g}, 360) (one panorama view is {PANORAMA_HFOV_DEG:g})")
        return cls(str(view), float(hfov))

    @property
    def monocular(self) -> bool:
        return self.view == "monocular"

    def to_dict(self) -> dict[str, Any]:
        return {"view": self.view, "hfov_deg": self.hfov_deg}

    def visible(self, views: int, view_hfov_deg: float) -> np.ndarray:
        """(views,) bool: the panorama views (view v faces 360°·v/V CCW) this setup sees."""
        if not self.monocular:
            return np.ones(views, dtype=bool)
        ang = np.degrees(np.arange(views) * 2 * math.pi / views)
        ang = np.abs(np.where(ang > 180, ang - 360, ang))
        return ang + view_hfov_deg / 2 <= self.hfov_deg / 2 + 1e-6

    def in_view(self, angles: np.ndarray) -> np.ndarray:
        """Whether candidate angles (rad CCW from the heading) lie within the field of view."""
        if not self.monocular:
            return np.ones(np.shape(angles), dtype=bool)
        a = (np.asarray(angles, dtype=float) + math.pi) % (2 * math.pi) - math.pi
        return np.abs(a) <= math.radians(self.hfov_deg) / 2 + 1e-6



def obstacle_points(depth: np.ndarray, *, hfov_deg: float, camera_height: float, band: tuple[float, float],
                    max_depth: float) -> tuple[np.ndarray, np.ndarray]:
    """Obstacles seen by a ``V``-view depth panorama (V, H, W; planar depth in metres, view v
    facing v·360°/V CCW from the heading): (angle rad CCW, horizontal range m) of every pixel whose
    point lies between ``band[0]`` and ``band[1]`` above the floor (floor, ceiling and misses are
    not obstacles)."""
    v_count, h, w = depth.shape
    f_x = (w / 2) / math.tan(math.radians(hfov_deg) / 2)
    u = (np.arange(w) + 0.5 - w / 2) / f_x             # right of the optical axis, per unit depth
    up = -(np.arange(h) + 0.5 - h / 2) / f_x           # above it (square pixels)
    z = np.asarray(depth, dtype=float)
    height = camera_height + z * up[None, :, None]
    ok = np.isfinite(z) & (z > 0) & (z < max_depth * 0.999) & (height > band[0]) & (height < band[1])
    ranges = z * np.sqrt(1.0 + u ** 2)[None, None, :]
    angles = (np.arange(v_count) * 2 * math.pi / v_count)[:, None, None] - np.arctan(u)[None, None, :] + 0 * z
    return angles[ok], ranges[ok]


def free_space_filter(cands: np.ndarray, depth: np.ndarray, *, hfov_deg: float, camera_height: float,
                      band: tuple[float, float], radius: float, clearance: float, max_depth: float) -> np.ndarray:
    """The candidates (K, 2) (angle, distance) the depth panorama shows free: no obstacle
    (``obstacle_points``) within ± atan(``radius`` / distance) of the candidate's angle nearer than
    distance + ``clearance``."""
    if len(cands) == 0:
        return cands
    angles, ranges = obstacle_points(depth, hfov_deg=hfov_deg, camera_height=camera_height, band=band,
                                     max_depth=max_depth)
    keep = []
    for angle, dist in cands:
        off = np.abs((angles - angle + math.pi) % (2 * math.pi) - math.pi)
        near = ranges[off <= math.atan2(radius, dist)]
        keep.append(len(near) == 0 or float(near.min()) >= dist + clearance)
    return cands[np.asarray(keep, dtype=bool)]


_NODES: dict[tuple, np.ndarray] = {}


def graph_nodes(ctx: Any, spacing: float = 0.75, seed: int = 0) -> np.ndarray:
    """(N, 2) viewpoints of the dense navigation graph of a scene context (cached per planner)."""
    from ...tasks.navgraph import build_navgraph

    key = (id(ctx.planner), float(spacing), int(seed))
    if key not in _NODES:
        g = build_navgraph(ctx.planner, rooms=ctx.desc.rooms, doors=ctx.desc.doors, room_map=None,
                           spacing=spacing, max_edge=max(3.0, spacing), seed=seed, scene_id=ctx.scene_id)
        _NODES[key] = g.positions()
    return _NODES[key]
