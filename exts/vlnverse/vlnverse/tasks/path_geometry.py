"""Grid moves, polylines and the results of path planning (``PathPlanner``'s vocabulary): the
8-connected moves without corner cutting, polyline length/resampling/heading, ``PlannedPath``,
``DistanceField`` and ``StartGoal``."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

SQRT2 = math.sqrt(2.0)

#: The 8 moves (d_row, d_col); diagonal moves also need (d_row, 0) and (0, d_col) navigable.
MOVES = np.array([(0, 1), (1, 0), (0, -1), (-1, 0), (1, 1), (1, -1), (-1, 1), (-1, -1)], dtype=np.int64)
MOVE_COSTS = np.hypot(MOVES[:, 0], MOVES[:, 1])


def shifted(mask: np.ndarray, dr: int, dc: int) -> np.ndarray:
    """``out[r, c] = mask[r + dr, c + dc]`` (False outside the grid)."""
    h, w = mask.shape
    out = np.zeros_like(mask)
    out[max(-dr, 0):h + min(-dr, 0), max(-dc, 0):w + min(-dc, 0)] = \
        mask[max(dr, 0):h + min(dr, 0), max(dc, 0):w + min(dc, 0)]
    return out


def cell_centres(origin: np.ndarray, resolution: float, rows, cols) -> np.ndarray:
    """World (x, y) centres (N, 2) of grid cells whose cell (0, 0) has its outer corner at ``origin``."""
    rows, cols = np.asarray(rows), np.asarray(cols)
    return np.stack([origin[0] + (cols + 0.5) * resolution, origin[1] + (rows + 0.5) * resolution], axis=-1)


def move_masks(free: np.ndarray) -> np.ndarray:
    """Bool (8, H, W): ``[m, r, c]`` — may the agent move from (r, c) by ``MOVES[m]``?"""
    masks = np.empty((len(MOVES),) + free.shape, dtype=bool)
    for m, (dr, dc) in enumerate(MOVES):
        ok = free & shifted(free, dr, dc)
        if dr and dc:  # no corner cutting
            ok &= shifted(free, dr, 0) & shifted(free, 0, dc)
        masks[m] = ok
    return masks


def resample_polyline(points: np.ndarray, spacing: float) -> np.ndarray:
    """Subdivide each segment into equal steps of at most ``spacing``; every vertex is kept."""
    pts = np.asarray(points, dtype=float).reshape(-1, np.shape(points)[-1])
    if len(pts) < 2:
        return pts.copy()
    seg = np.linalg.norm(np.diff(pts, axis=0), axis=1)
    steps = np.maximum(np.ceil(seg / spacing - 1e-9).astype(np.int64), 1)
    owner = np.repeat(np.arange(len(seg)), steps)
    t = (np.arange(steps.sum()) - np.repeat(np.cumsum(steps) - steps, steps)) / np.repeat(steps, steps)
    out = pts[owner] + t[:, None] * (pts[owner + 1] - pts[owner])
    return np.concatenate([out, pts[-1:]])


def polyline_length(points: np.ndarray) -> float:
    """Sum of segment lengths of an (N, 2) or (N, 3) polyline."""
    pts = np.asarray(points, dtype=float)
    if len(pts) < 2:
        return 0.0
    return float(np.linalg.norm(np.diff(pts, axis=0), axis=1).sum())


def yaw_towards(a_xy, b_xy) -> float:
    """Heading (rad, CCW from +X) of the direction from ``a_xy`` to ``b_xy``."""
    d = np.asarray(b_xy, dtype=float)[:2] - np.asarray(a_xy, dtype=float)[:2]
    return float(math.atan2(d[1], d[0]))


def path_heading(points: np.ndarray, min_length: float = 1e-6) -> float:
    """Heading of a path's first segment of non-zero length (0 for a degenerate path)."""
    pts = np.asarray(points, dtype=float).reshape(-1, np.shape(points)[-1])[:, :2]
    for p in pts[1:]:
        if np.linalg.norm(p - pts[0]) > min_length:
            return yaw_towards(pts[0], p)
    return 0.0


@dataclass
class PlannedPath:
    """A shortest path: the A* cell path, its line-of-sight waypoints and a dense resampling.

    ``length`` is the waypoint polyline length (≤ ``grid_cost``, the A* cost on the grid graph).
    """

    waypoints: np.ndarray
    dense: np.ndarray
    length: float
    grid_cost: float
    cells: np.ndarray = field(repr=False)

    @property
    def start_yaw(self) -> float:
        """Heading of the first waypoint segment."""
        return path_heading(self.waypoints)

    def waypoints_3d(self, z: float = 0.0) -> np.ndarray:
        """Waypoints as (K, 3) with constant height ``z``."""
        return np.column_stack([self.waypoints, np.full(len(self.waypoints), float(z))])


class StartGoal(NamedTuple):
    """A sampled start/goal pair with its geodesic distance and the goal's distance field."""

    start_xy: np.ndarray
    goal_xy: np.ndarray
    geodesic_distance: float
    field: "DistanceField"


class DistanceField:
    """Exact grid-geodesic distance (metres) from every navigable cell to one goal cell of ``planner``
    (a ``pathing.PathPlanner``: its ``snap`` places query points)."""

    def __init__(self, planner, goal_xy: np.ndarray, goal_cell: tuple[int, int], grid: np.ndarray):
        self.planner = planner
        self.goal_xy = np.asarray(goal_xy, dtype=float)
        self.goal_cell = goal_cell
        #: (H, W) float64 distances; ``inf`` on non-navigable or unreachable cells.
        self.grid = grid

    def distance(self, points) -> np.ndarray:
        """Geodesic distance (N,) from each (N, 2) world point to the goal (snapped; ``inf`` if unreachable)."""
        pts = np.atleast_2d(np.asarray(points, dtype=float))[:, :2]
        rows, cols, offset = self.planner.snap(pts)
        return self.grid[rows, cols] + offset

    def __call__(self, points) -> np.ndarray:
        return self.distance(points)

    def reachable_mask(self) -> np.ndarray:
        """Bool (H, W): cells from which the goal can be reached."""
        return np.isfinite(self.grid)
