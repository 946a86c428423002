"""2D occupancy maps rasterised from a scene's collision geometry.

Grid convention
---------------
``grid[row, col]`` covers the world square ``[ox + col*res, ox + (col+1)*res) ×
[oy + row*res, oy + (row+1)*res)`` where ``(ox, oy) = origin`` is the outer corner of cell
(0, 0): the row index grows with world y, the column index with world x. ``cell_to_world``
returns cell centres ``(ox + (col + 0.5)*res, oy + (row + 0.5)*res)``; ``world_to_cell``
floors, so a point on a cell's lower/left edge belongs to that cell.

Which cells are occupied
------------------------
Only colliding geoms count, and only their part inside the height band
``[floor_z + step_height, floor_z + agent_height]`` (the agent can step over anything lower
and pass under anything higher). That part's vertical projection is the geom's *footprint*:
a convex polygon for boxes (the clipped box's corners, hull taken), a disc for upright
cylinders and spheres (a sphere's disc is its widest cross-section inside the band), a
polygon for tilted cylinders, and for meshes the union of the projected band-clipped
triangles and (for closed meshes) the cross-sections at the band's bottom and top.

**A cell is OCCUPIED when its centre lies inside (or on the boundary of) some footprint.**
Two exceptions keep thin obstacles on the map: a zero-area footprint — a vertical plane of an
open (non-watertight) mesh, e.g. a single-quad wall — marks every cell its projected segment
passes through, so that thin walls never leave gaps; and a footprint that contains no cell
centre at all (a pole or bar thinner than a cell, lying between centres) marks every cell it
overlaps.

**Navigable maps** (``build_navigable_map``) keep a FREE cell for a disc agent of radius r iff
its centre is at least r from every footprint (exact distance to the footprint: inside it, or to
its boundary segments) and at least r + one cell from every UNKNOWN centre.

A cell is UNKNOWN (outside the home) when it is not occupied and its centre is not above a
floor geom: geoms labelled ``floor``, plus any colliding geom whose top lies within
``FLOOR_TOLERANCE`` of ``floor_z``. Every other cell is FREE. The grid covers the floor's
bounds plus a one-cell UNKNOWN margin, with the origin snapped to a multiple of the
resolution, so cell boundaries fall on round coordinates.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import ndimage
from scipy.spatial import ConvexHull, QhullError

from ..core.body import R2R_CE
from ..core.errors import ConfigError, NoNavigableSpaceError, SceneError
from ..core.io import write_npz  # noqa: F401  (re-exported: maps and tours import it from here)
from ..core.precision import LENGTH_DECIMALS, round_array
from .description import Geom, SceneDescription

FREE, OCCUPIED, UNKNOWN = 0, 1, 2

#: Limits of a map (docs/reliability.md): cell size in metres and the number of cells of one grid
#: (a scene of 200 m x 200 m at 0.05 m). A larger scene is almost always a unit or scale error.
MIN_RESOLUTION, MAX_RESOLUTION = 0.01, 1.0
MAX_GRID_CELLS = 16_000_000

#: A geom whose top is within this distance (m) of ``floor_z`` counts as floor.
FLOOR_TOLERANCE = 0.02

#: Number of sides of the polygon approximating a tilted cylinder's cross-section.
_CYLINDER_SIDES = 32

_EPS = 1e-9


@dataclass
class OccupancyMap:
    """A FREE/OCCUPIED/UNKNOWN grid with its world placement (see the module docstring).

    ``source`` names the scene (file path or scene id) for error messages; ``radius`` is the
    dilation radius this map was produced with (0 for a raw map).
    """

    grid: np.ndarray
    resolution: float
    origin: np.ndarray
    source: str = ""
    radius: float = 0.0

    def __post_init__(self) -> None:
        self.grid = np.asarray(self.grid, dtype=np.uint8)
        if self.grid.ndim != 2:
            raise ConfigError(f"grid has shape {self.grid.shape}", file=self.source or None, field="grid",
                              expected="a 2D (H, W) array")
        self.resolution = _check_resolution(self.resolution, self.source)
        # rounded as on disk (core.precision), so a map read back from .npz equals the one built
        self.origin = round_array(np.asarray(self.origin, dtype=float).reshape(2), LENGTH_DECIMALS)

    @property
    def shape(self) -> tuple[int, int]:
        """Grid shape (H rows along y, W columns along x)."""
        return self.grid.shape  # type: ignore[return-value]

    def world_to_cell(self, xy: np.ndarray) -> np.ndarray:
        """Cells ``(N, 2)`` int ``[row, col]`` containing world points ``xy (N, 2)``; may be out of bounds."""
        pts = np.atleast_2d(np.asarray(xy, dtype=float))[:, :2]
        cols = np.floor((pts[:, 0] - self.origin[0]) / self.resolution + _EPS)
        rows = np.floor((pts[:, 1] - self.origin[1]) / self.resolution + _EPS)
        return np.stack([rows, cols], axis=1).astype(np.int64)

    def cell_to_world(self, rc: np.ndarray) -> np.ndarray:
        """World ``(N, 2)`` ``[x, y]`` centres of cells ``rc (N, 2)`` given as ``[row, col]``."""
        cells = np.atleast_2d(np.asarray(rc, dtype=float))
        x = self.origin[0] + (cells[:, 1] + 0.5) * self.resolution
        y = self.origin[1] + (cells[:, 0] + 0.5) * self.resolution
        return np.stack([x, y], axis=1)

    def in_bounds(self, rc: np.ndarray) -> np.ndarray:
        """Boolean mask of which ``[row, col]`` cells ``(N, 2)`` lie inside the grid."""
        cells = np.atleast_2d(np.asarray(rc))
        h, w = self.shape
        return (cells[:, 0] >= 0) & (cells[:, 0] < h) & (cells[:, 1] >= 0) & (cells[:, 1] < w)

    def free_mask(self) -> np.ndarray:
        """Boolean ``(H, W)`` mask of FREE cells."""
        return self.grid == FREE

    def is_free(self, xy: np.ndarray) -> np.ndarray:
        """Boolean mask of which world points ``(N, 2)`` fall in FREE cells (out of bounds → False)."""
        cells = self.world_to_cell(xy)
        ok = self.in_bounds(cells)
        out = np.zeros(len(cells), dtype=bool)
        out[ok] = self.grid[cells[ok, 0], cells[ok, 1]] == FREE
        return out

    def navigable_area_m2(self) -> float:
        """Total area of FREE cells in m²."""
        return float(np.count_nonzero(self.grid == FREE) * self.resolution ** 2)

    def extent(self) -> tuple[float, float, float, float]:
        """World extent ``(xmin, xmax, ymin, ymax)`` of the grid (matplotlib ``imshow`` order)."""
        h, w = self.shape
        return (float(self.origin[0]), float(self.origin[0] + w * self.resolution),
                float(self.origin[1]), float(self.origin[1] + h * self.resolution))

    def dilate(self, radius: float) -> "OccupancyMap":
        """Grow OCCUPIED and UNKNOWN cells by ``radius`` metres (Euclidean disk), from the grid alone.

        A FREE cell stays FREE only when the distance between its centre and the nearest
        non-free cell's centre is at least ``radius + resolution``; otherwise it takes the value
        (OCCUPIED or UNKNOWN) of that cell. Raises ``NoNavigableSpaceError`` when no FREE cell is left.

        The extra cell covers an obstacle face, which may reach almost one cell beyond the last
        centre it covers, but not every corner: along a diagonal a box corner may reach almost
        √2 cells beyond a marked centre (a rotated corner or a thin slanted slat further), which
        no grid-only margin bounds. Where the body must never overlap geometry (the navigable
        maps of ``compute_scene_maps``), use ``build_navigable_map``, which measures the true
        distance to every footprint.
        """
        if not (math.isfinite(radius) and radius >= 0):
            raise ConfigError(f"got {radius}", file=self.source or None, field="radius", expected="a radius >= 0 m")
        free = self.grid == FREE
        grid = self.grid.copy()
        if (~free).any() and radius > 0:
            dist, (ri, ci) = ndimage.distance_transform_edt(free, return_indices=True)
            reach = radius + self.resolution
            blocked = free & (dist * self.resolution < reach - 1e-9)  # tolerance: 7 * 0.05 == 0.35
            grid[blocked] = self.grid[ri[blocked], ci[blocked]]
        if not (grid == FREE).any():
            raise NoNavigableSpaceError(
                f"{self.source or 'scene'}: agent radius {radius:.3f} m leaves no navigable cell "
                f"(map {self.shape[1]}x{self.shape[0]} cells at {self.resolution} m)")
        return OccupancyMap(grid, self.resolution, self.origin.copy(), source=self.source, radius=float(radius))

    def save(self, path: str | Path) -> Path:
        """Write the map as a compressed ``.npz`` atomically (byte-identical for equal maps); returns the path."""
        return write_npz(path, grid=self.grid, resolution=np.float64(self.resolution), origin=self.origin,
                         source=np.str_(self.source), radius=np.float64(self.radius))

    @classmethod
    def load(cls, path: str | Path) -> "OccupancyMap":
        """Read a map written by ``save``; a missing or malformed file raises ``ConfigError`` naming it."""
        path = Path(path)
        if not path.is_file():
            raise ConfigError("file not found", file=path)
        try:
            with np.load(path, allow_pickle=False) as data:
                fields = {k: data[k] for k in ("grid", "resolution", "origin")}
                source = str(data["source"]) if "source" in data else ""
                radius = float(data["radius"]) if "radius" in data else 0.0
        except (OSError, ValueError, KeyError) as exc:
            raise ConfigError(f"not an occupancy map ({exc})", file=path,
                              expected="an .npz with grid, resolution, origin") from None
        return cls(fields["grid"], float(fields["resolution"]), fields["origin"], source=source, radius=radius)


def _check_resolution(resolution: float, source: str | None) -> float:
    try:
        value = float(resolution)
    except (TypeError, ValueError):
        value = float("nan")
    if not (math.isfinite(value) and MIN_RESOLUTION <= value <= MAX_RESOLUTION):
        raise ConfigError(f"got {str(resolution)[:30]}", file=source or None, field="resolution",
                          expected=f"a cell size in [{MIN_RESOLUTION}, {MAX_RESOLUTION}] m, e.g. 0.05")
    return value


class _Raster:
    """Marks cells of a fixed grid whose centres fall inside shapes (all vectorised).

    With ``clearance`` > 0 it marks the cells whose centres lie closer than ``clearance`` to a
    shape instead (inside it, or within ``clearance`` of its boundary): where a disc of that
    radius would overlap the shape. Every ``fill_*`` then returns True for any shape with area,
    so the thin-obstacle exceptions (``fill_outline``) only run for zero-area shapes, whose
    segments are measured exactly too.
    """

    def __init__(self, origin: np.ndarray, resolution: float, shape: tuple[int, int], clearance: float = 0.0):
        self.origin, self.res, self.shape = origin, resolution, shape
        self.clearance = float(clearance)
        self.mask = np.zeros(shape, dtype=bool)

    def _cells_in_boxes(self, lo: np.ndarray, hi: np.ndarray):
        """All (shape index, row, col, centre x, centre y) with the cell centre inside the xy
        boxes ``[lo[k], hi[k]]`` (``(K, 2)`` each), enumerated at once."""
        c0 = np.maximum(np.ceil((lo[:, 0] - self.origin[0]) / self.res - 0.5 - _EPS), 0).astype(np.int64)
        c1 = np.minimum(np.floor((hi[:, 0] - self.origin[0]) / self.res - 0.5 + _EPS), self.shape[1] - 1).astype(np.int64)
        r0 = np.maximum(np.ceil((lo[:, 1] - self.origin[1]) / self.res - 0.5 - _EPS), 0).astype(np.int64)
        r1 = np.minimum(np.floor((hi[:, 1] - self.origin[1]) / self.res - 0.5 + _EPS), self.shape[0] - 1).astype(np.int64)
        nc, nr = np.maximum(c1 - c0 + 1, 0), np.maximum(r1 - r0 + 1, 0)
        counts = nc * nr
        idx = np.repeat(np.arange(len(lo)), counts)
        local = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        rows = r0[idx] + local // nc[idx]
        cols = c0[idx] + local % nc[idx]
        return idx, rows, cols, self.origin[0] + (cols + 0.5) * self.res, self.origin[1] + (rows + 0.5) * self.res

    def mark_near_segments(self, segs: np.ndarray) -> None:
        """Mark cells whose centres lie closer than ``clearance`` to any segment ``(S, 2, 2)``
        (exact point-to-segment distance; a centre exactly ``clearance`` away stays unmarked)."""
        r = self.clearance
        if len(segs) == 0 or r <= 0:
            return
        segs = np.asarray(segs, dtype=float)
        a, b = segs[:, 0], segs[:, 1]
        idx, rows, cols, px, py = self._cells_in_boxes(np.minimum(a, b) - r, np.maximum(a, b) + r)
        a, d = a[idx], (b - a)[idx]
        ux, uy = px - a[:, 0], py - a[:, 1]
        t = np.clip((ux * d[:, 0] + uy * d[:, 1]) / np.maximum(d[:, 0] ** 2 + d[:, 1] ** 2, 1e-300), 0.0, 1.0)
        near = (ux - t * d[:, 0]) ** 2 + (uy - t * d[:, 1]) ** 2 < (r - _EPS) ** 2
        self.mask[rows[near], cols[near]] = True

    def _window(self, lo: np.ndarray, hi: np.ndarray) -> tuple[slice, slice] | None:
        """Row/col slices of cells whose centres may lie in the xy box [lo, hi]."""
        c0 = max(int(math.ceil((lo[0] - self.origin[0]) / self.res - 0.5 - _EPS)), 0)
        c1 = min(int(math.floor((hi[0] - self.origin[0]) / self.res - 0.5 + _EPS)), self.shape[1] - 1)
        r0 = max(int(math.ceil((lo[1] - self.origin[1]) / self.res - 0.5 - _EPS)), 0)
        r1 = min(int(math.floor((hi[1] - self.origin[1]) / self.res - 0.5 + _EPS)), self.shape[0] - 1)
        if c1 < c0 or r1 < r0:
            return None
        return slice(r0, r1 + 1), slice(c0, c1 + 1)

    def _centres(self, win: tuple[slice, slice]) -> tuple[np.ndarray, np.ndarray]:
        rows, cols = win
        ys = self.origin[1] + (np.arange(rows.start, rows.stop) + 0.5) * self.res
        xs = self.origin[0] + (np.arange(cols.start, cols.stop) + 0.5) * self.res
        return np.meshgrid(xs, ys)

    def fill_convex(self, points: np.ndarray, *, ordered: bool = False) -> bool:
        """Mark centres inside the convex hull of ``points (K, 2)``; a degenerate hull marks nothing.

        With ``ordered`` the points already are a counter-clockwise convex polygon (no hull taken).
        Returns whether any cell centre was inside.
        """
        hull = points if ordered else _convex_hull(points)
        if hull is None:
            return False
        win = self._window(hull.min(axis=0), hull.max(axis=0))
        if win is None:
            if self.clearance > 0:
                self.mark_near_segments(np.stack([hull, np.roll(hull, -1, axis=0)], axis=1))
            return self.clearance > 0
        gx, gy = self._centres(win)
        inside = np.ones(gx.shape, dtype=bool)
        tol = _EPS * max(1.0, float(np.abs(hull).max()))
        for (x0, y0), (x1, y1) in zip(hull, np.roll(hull, -1, axis=0)):
            inside &= (x1 - x0) * (gy - y0) - (y1 - y0) * (gx - x0) >= -tol * math.hypot(x1 - x0, y1 - y0)
        self.mask[win] |= inside
        if self.clearance > 0:
            self.mark_near_segments(np.stack([hull, np.roll(hull, -1, axis=0)], axis=1))
            return True
        return bool(inside.any())

    def fill_disc(self, centre: np.ndarray, radius: float) -> bool:
        """Mark centres within ``radius`` of ``centre (2,)``; returns whether any centre was inside."""
        if radius <= 0:
            return False
        if self.clearance > 0:  # closer than clearance to the disc
            reach = radius + self.clearance
            win = self._window(centre - reach, centre + reach)
            if win is not None:
                gx, gy = self._centres(win)
                self.mask[win] |= (gx - centre[0]) ** 2 + (gy - centre[1]) ** 2 < (reach - _EPS) ** 2
            return True
        win = self._window(centre - radius, centre + radius)
        if win is None:
            return False
        gx, gy = self._centres(win)
        inside = (gx - centre[0]) ** 2 + (gy - centre[1]) ** 2 <= radius ** 2 + _EPS
        self.mask[win] |= inside
        return bool(inside.any())

    def fill_triangles(self, tris: np.ndarray) -> bool:
        """Mark centres inside any triangle of ``tris (T, 3, 2)`` (boundary included), all at once;
        returns whether any centre was inside."""
        if len(tris) == 0:
            return False
        area2 = _cross2(tris[:, 1] - tris[:, 0], tris[:, 2] - tris[:, 0])
        tris = tris[np.abs(area2) > 1e-12]
        area2 = area2[np.abs(area2) > 1e-12]
        if len(tris) == 0:
            return False
        tris = np.where((area2 < 0)[:, None, None], tris[:, ::-1], tris)  # make all counter-clockwise
        if self.clearance > 0:
            self.mark_near_segments(np.concatenate([tris[:, [k, (k + 1) % 3]] for k in range(3)]))
        tri_idx, rows, cols, px, py = self._cells_in_boxes(tris.min(axis=1), tris.max(axis=1))
        if len(tri_idx) == 0:
            return self.clearance > 0
        inside = np.ones(len(px), dtype=bool)
        t = tris[tri_idx]
        for k in range(3):
            a, b = t[:, k], t[:, (k + 1) % 3]
            edge = b - a
            length = np.hypot(edge[:, 0], edge[:, 1])
            inside &= edge[:, 0] * (py - a[:, 1]) - edge[:, 1] * (px - a[:, 0]) >= -_EPS * length
        self.mask[rows[inside], cols[inside]] = True
        return bool(inside.any()) or self.clearance > 0

    def fill_segments(self, segs: np.ndarray) -> None:
        """Mark every cell the segments ``(S, 2, 2)`` pass through (sampled at res/4 spacing); with
        ``clearance``, the cells closer than it to them."""
        if len(segs) == 0:
            return
        if self.clearance > 0:
            self.mark_near_segments(segs)
            return
        length = np.hypot(*(segs[:, 1] - segs[:, 0]).T)
        n = np.maximum(np.ceil(length / (self.res / 4)).astype(np.int64), 1) + 1
        seg_idx = np.repeat(np.arange(len(segs)), n)
        t = (np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n)) / np.repeat(n - 1, n)
        pts = segs[seg_idx, 0] + t[:, None] * (segs[seg_idx, 1] - segs[seg_idx, 0])
        cols = np.floor((pts[:, 0] - self.origin[0]) / self.res + _EPS).astype(np.int64)
        rows = np.floor((pts[:, 1] - self.origin[1]) / self.res + _EPS).astype(np.int64)
        ok = (rows >= 0) & (rows < self.shape[0]) & (cols >= 0) & (cols < self.shape[1])
        self.mask[rows[ok], cols[ok]] = True

    def fill_even_odd(self, segs: np.ndarray) -> bool:
        """Mark centres inside the closed loops formed by segments ``(S, 2, 2)`` (even-odd rule);
        returns whether any centre was inside."""
        if len(segs) == 0:
            return False
        a, b = segs[:, 0], segs[:, 1]
        lo_y, hi_y = np.minimum(a[:, 1], b[:, 1]), np.maximum(a[:, 1], b[:, 1])
        r0 = np.maximum(np.ceil((lo_y - self.origin[1]) / self.res - 0.5), 0).astype(np.int64)
        r1 = np.minimum(np.ceil((hi_y - self.origin[1]) / self.res - 0.5) - 1, self.shape[0] - 1).astype(np.int64)
        n = np.maximum(r1 - r0 + 1, 0)  # rows whose centre y satisfies lo_y <= y < hi_y (half-open)
        if n.sum() == 0:
            return False
        seg_idx = np.repeat(np.arange(len(segs)), n)
        rows = r0[seg_idx] + np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n)
        y = self.origin[1] + (rows + 0.5) * self.res
        sa, sb = a[seg_idx], b[seg_idx]
        x = sa[:, 0] + (y - sa[:, 1]) * (sb[:, 0] - sa[:, 0]) / (sb[:, 1] - sa[:, 1])
        # a crossing at x toggles the inside state of every cell whose centre lies right of x
        cols = np.clip(np.ceil((x - self.origin[0]) / self.res - 0.5), 0, self.shape[1]).astype(np.int64)
        toggles = np.zeros((self.shape[0], self.shape[1] + 1), dtype=np.int32)
        np.add.at(toggles, (rows, cols), 1)
        inside = (np.cumsum(toggles, axis=1)[:, :-1] % 2) == 1
        self.mask |= inside
        if self.clearance > 0:
            self.mark_near_segments(segs)
            return True
        return bool(inside.any())

    def fill_outline(self, points: np.ndarray) -> None:
        """Mark every cell the outline of the convex hull of ``points (K, 2)`` passes through (a
        segment between the farthest points when the hull is degenerate). For a footprint that
        contains no cell centre these are exactly the cells it overlaps."""
        pts = np.unique(np.round(np.asarray(points, dtype=float).reshape(-1, 2), 12), axis=0)
        if len(pts) == 0:
            return
        hull = _convex_hull(pts) if len(pts) >= 3 else None
        if hull is not None:
            segs = np.stack([hull, np.roll(hull, -1, axis=0)], axis=1)
        else:
            d = np.hypot(*(pts[:, None, :] - pts[None, :, :]).transpose(2, 0, 1))
            i, j = np.unravel_index(int(d.argmax()), d.shape)
            segs = np.array([[pts[i], pts[j]]])
        self.fill_segments(segs)


def _cross2(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    return u[..., 0] * v[..., 1] - u[..., 1] * v[..., 0]


def _convex_hull(points: np.ndarray) -> np.ndarray | None:
    """Counter-clockwise hull vertices of ``points (K, 2)``, or None when it has no area."""
    pts = np.unique(np.round(np.asarray(points, dtype=float), 12), axis=0)
    if len(pts) < 3:
        return None
    try:
        hull = ConvexHull(pts)
    except QhullError:
        return None
    if hull.volume <= 1e-12:  # 2D "volume" is the area
        return None
    return pts[hull.vertices]  # scipy orders 2D hull vertices counter-clockwise


def _clip_convex_to_band(vertices: np.ndarray, edges: np.ndarray, z_lo: float, z_hi: float) -> np.ndarray:
    """XY points whose hull is the projection of a convex solid clipped to ``z_lo <= z <= z_hi``.

    The solid is given by its vertices ``(K, 3)`` and edges ``(E, 2)`` vertex index pairs: the
    clipped solid's vertices are the original vertices inside the band plus the edges'
    crossings of the two planes.
    """
    z = vertices[:, 2]
    out = [vertices[(z >= z_lo) & (z <= z_hi), :2]]
    p, q = vertices[edges[:, 0]], vertices[edges[:, 1]]
    dz = q[:, 2] - p[:, 2]
    for plane in (z_lo, z_hi):
        with np.errstate(divide="ignore", invalid="ignore"):
            t = (plane - p[:, 2]) / dz
        hit = (dz != 0) & (t >= 0) & (t <= 1)
        out.append(p[hit, :2] + t[hit, None] * (q[hit, :2] - p[hit, :2]))
    return np.concatenate(out, axis=0)


_BOX_SIGNS = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], dtype=float)
_BOX_EDGES = np.array([(i, j) for i in range(8) for j in range(i + 1, 8)
                       if np.count_nonzero(_BOX_SIGNS[i] != _BOX_SIGNS[j]) == 1])


def _prism(radius: float, half_height: float, sides: int) -> tuple[np.ndarray, np.ndarray]:
    """Vertices and edges of a regular prism circumscribing a Z-aligned cylinder (local frame)."""
    ang = np.linspace(0, 2 * np.pi, sides, endpoint=False)
    r = radius / math.cos(math.pi / sides)
    ring = np.stack([r * np.cos(ang), r * np.sin(ang)], axis=1)
    verts = np.concatenate([np.c_[ring, -np.full(sides, half_height)], np.c_[ring, np.full(sides, half_height)]])
    i = np.arange(sides)
    edges = np.concatenate([np.c_[i, (i + 1) % sides], np.c_[i + sides, (i + 1) % sides + sides], np.c_[i, i + sides]])
    return verts, edges


def _world_mesh(geom: Geom) -> tuple[np.ndarray, np.ndarray]:
    verts = np.asarray(geom.vertices, dtype=float).reshape(-1, 3)
    faces = np.asarray(geom.faces, dtype=np.int64).reshape(-1, 3)
    return verts @ geom.transform[:3, :3].T + geom.transform[:3, 3], faces


def _is_watertight(verts: np.ndarray, faces: np.ndarray) -> bool:
    """Every edge shared by exactly two faces, after merging coincident vertices."""
    _, inverse = np.unique(np.round(verts, 6), axis=0, return_inverse=True)
    f = inverse.reshape(-1)[faces]
    edges = np.sort(np.concatenate([f[:, [0, 1]], f[:, [1, 2]], f[:, [2, 0]]]), axis=1)
    _, counts = np.unique(edges, axis=0, return_counts=True)
    return bool(len(counts)) and bool(np.all(counts == 2))


_TRI_EDGES = ((0, 1), (1, 2), (2, 0))


def _clip_triangles(tris: np.ndarray, z_lo: float, z_hi: float) -> np.ndarray:
    """Clip world triangles ``(T, 3, 3)`` to the band; returns projected XY triangles ``(T', 3, 2)``.

    Vectorised: a triangle ∩ slab is a convex polygon whose corners are among the triangle's
    corners inside the band and its edges' crossings of the two planes (at most 9 candidates);
    the candidates are ordered by angle around their mean and fanned into triangles.
    """
    z = tris[:, :, 2]
    tris = tris[~((z < z_lo).all(axis=1) | (z > z_hi).all(axis=1))]
    if len(tris) == 0:
        return np.zeros((0, 3, 2))
    z = tris[:, :, 2]
    points, valid = [tris[:, :, :2]], [(z >= z_lo) & (z <= z_hi)]
    for i, j in _TRI_EDGES:
        p, q = tris[:, i], tris[:, j]
        dz = q[:, 2] - p[:, 2]
        for plane in (z_lo, z_hi):
            with np.errstate(divide="ignore", invalid="ignore"):
                t = (plane - p[:, 2]) / dz
                points.append((p[:, :2] + t[:, None] * (q[:, :2] - p[:, :2]))[:, None])
            valid.append(((dz != 0) & (t >= 0) & (t <= 1))[:, None])
    pts = np.concatenate(points, axis=1)  # (T, 9, 2)
    ok = np.concatenate(valid, axis=1)    # (T, 9)
    pts = np.where(ok[:, :, None], pts, 0.0)
    count = ok.sum(axis=1)
    centre = pts.sum(axis=1) / np.maximum(count, 1)[:, None]
    angle = np.arctan2(pts[:, :, 1] - centre[:, 1, None], pts[:, :, 0] - centre[:, 0, None])
    order = np.argsort(np.where(ok, angle, np.inf), axis=1, kind="stable")
    pts = np.take_along_axis(pts, order[:, :, None], axis=1)
    fans = []
    for k in range(1, pts.shape[1] - 1):
        use = count > k + 1
        if not use.any():
            break
        fans.append(np.stack([pts[use, 0], pts[use, k], pts[use, k + 1]], axis=1))
    return np.concatenate(fans, axis=0) if fans else np.zeros((0, 3, 2))


def _slice_segments(tris: np.ndarray, z: float) -> np.ndarray:
    """Segments ``(S, 2, 2)`` where the plane ``z`` cuts triangles ``(T, 3, 3)``."""
    above = tris[:, :, 2] > z
    n_above = above.sum(axis=1)
    cut = tris[(n_above == 1) | (n_above == 2)]
    if len(cut) == 0:
        return np.zeros((0, 2, 2))
    pts = []
    for i, j in ((0, 1), (1, 2), (2, 0)):
        p, q = cut[:, i], cut[:, j]
        crosses = (p[:, 2] > z) != (q[:, 2] > z)
        with np.errstate(divide="ignore", invalid="ignore"):  # edges not crossing z are discarded below
            t = (z - p[:, 2]) / (q[:, 2] - p[:, 2])
            pts.append((p[:, :2] + t[:, None] * (q[:, :2] - p[:, :2]), crosses))
    # each cut triangle crosses exactly two of its three edges
    xy = np.stack([p for p, _ in pts], axis=1)  # (S, 3, 2)
    hits = np.stack([c for _, c in pts], axis=1)  # (S, 3)
    order = np.argsort(~hits, axis=1, kind="stable")[:, :2]
    return np.take_along_axis(xy, order[:, :, None], axis=1)


#: Corners of an upright box's footprint in counter-clockwise order (local x/y signs).
_RECT_SIGNS = np.array([[-1.0, -1.0], [1.0, -1.0], [1.0, 1.0], [-1.0, 1.0]])


def _rasterise_geom(raster: _Raster, geom: Geom, z_lo: float, z_hi: float,
                    aabb: tuple[np.ndarray, np.ndarray] | None = None) -> None:
    """Mark the cells covered by the part of ``geom`` between ``z_lo`` and ``z_hi``.

    Cells are marked by their centres; a footprint that contains no cell centre at all (a thin
    pole, bar or panel lying between centres) marks the cells it overlaps instead, so that thin
    obstacles never vanish from the map.
    """
    lo, hi = aabb if aabb is not None else geom.world_aabb()
    if hi[2] < z_lo or lo[2] > z_hi:
        return
    rot, pos = geom.transform[:3, :3], geom.transform[:3, 3]
    upright = abs(rot[2, 2]) > 1 - 1e-9
    if geom.kind == "box" and upright:
        # yaw-only rotation: the footprint is the rotated rectangle whatever the band cuts off
        corners = (_RECT_SIGNS * geom.size[:2]) @ rot[:2, :2].T + pos[:2]
        covered = geom.size[0] > 0 and geom.size[1] > 0 and \
            raster.fill_convex(corners if np.linalg.det(rot[:2, :2]) > 0 else corners[::-1], ordered=True)
        if not covered:
            raster.fill_outline(corners)
    elif geom.kind == "box":
        verts = (_BOX_SIGNS * geom.size) @ rot.T + pos
        pts = _clip_convex_to_band(verts, _BOX_EDGES, z_lo, z_hi)
        if not raster.fill_convex(pts):
            raster.fill_outline(pts)
    elif geom.kind in ("cylinder", "sphere") and (upright or geom.kind == "sphere"):
        r = float(geom.size[0])
        if geom.kind == "sphere":
            nearest_z = min(max(pos[2], z_lo), z_hi)
            r = math.sqrt(max(r * r - (nearest_z - pos[2]) ** 2, 0.0))
        if not raster.fill_disc(pos[:2], r):
            ang = np.linspace(0.0, 2 * np.pi, 16, endpoint=False)
            ring = r / math.cos(math.pi / 16)  # circumscribed 16-gon: covers the disc
            raster.fill_outline(pos[:2] + ring * np.stack([np.cos(ang), np.sin(ang)], axis=1))
    elif geom.kind == "cylinder":
        local, edges = _prism(float(geom.size[0]), float(geom.size[1]), _CYLINDER_SIDES)
        pts = _clip_convex_to_band(local @ rot.T + pos, edges, z_lo, z_hi)
        if not raster.fill_convex(pts):
            raster.fill_outline(pts)
    else:
        verts, faces = _world_mesh(geom)
        if len(faces) == 0:
            return
        tris = verts[faces]
        flat = _clip_triangles(tris, z_lo, z_hi)
        covered = raster.fill_triangles(flat)
        if _is_watertight(verts, faces):
            for z in (max(z_lo, lo[2]) + 1e-6, min(z_hi, hi[2]) - 1e-6):
                covered |= raster.fill_even_odd(_slice_segments(tris, z))
        else:
            area2 = np.abs(_cross2(flat[:, 1] - flat[:, 0], flat[:, 2] - flat[:, 0]))
            thin = flat[area2 <= 1e-12]
            if len(thin):
                # the projection of a vertical triangle is a segment: its two farthest-apart corners
                pairs = np.array([(0, 1), (1, 2), (0, 2)])
                d = np.stack([np.hypot(*(thin[:, j] - thin[:, i]).T) for i, j in pairs], axis=1)
                best = pairs[d.argmax(axis=1)]
                segs = np.stack([thin[np.arange(len(thin)), best[:, 0]], thin[np.arange(len(thin)), best[:, 1]]], axis=1)
                raster.fill_segments(segs)
                covered = True
        if not covered and len(flat):
            raster.fill_segments(np.concatenate([np.stack([flat[:, i], flat[:, (i + 1) % 3]], axis=1)
                                                 for i in range(3)]))


def floor_geoms(desc: SceneDescription) -> list[Geom]:
    """Geoms that form the walkable floor: labelled ``floor``, or colliding with their top at ``floor_z``."""
    return [desc.geoms[i] for i in _floor_indices(desc, [g.world_aabb() for g in desc.geoms])]


def _floor_indices(desc: SceneDescription, aabbs: list[tuple[np.ndarray, np.ndarray]]) -> list[int]:
    return [i for i, (g, (_, hi)) in enumerate(zip(desc.geoms, aabbs))
            if g.label == "floor" or (g.collides and abs(hi[2] - desc.floor_z) <= FLOOR_TOLERANCE)]


def scene_name(desc: SceneDescription) -> str:
    """How errors refer to a scene: its source file when known, else its id."""
    return str(desc.source_path) if desc.source_path else f"scene '{desc.scene_id}'"


def build_occupancy_map(desc: SceneDescription, *, resolution: float = 0.05, agent_height: float = R2R_CE.height,
                        step_height: float = R2R_CE.step_height) -> OccupancyMap:
    """Rasterise ``desc``'s collision geometry in the agent's height band (see the module docstring).

    Raises ``ConfigError`` for ``resolution <= 0`` or a band with ``agent_height <= step_height``,
    and ``SceneError`` naming the scene when it has no collision geometry or no floor.
    """
    name, res, aabbs, floor_idx, origin, shape = _scene_frame(desc, resolution, agent_height, step_height)
    floor_raster = _Raster(origin, res, shape)
    for i in floor_idx:
        _rasterise_geom(floor_raster, desc.geoms[i], -math.inf, math.inf, aabbs[i])
    grid = np.full(shape, UNKNOWN, dtype=np.uint8)
    grid[floor_raster.mask] = FREE
    grid[_obstacle_mask(desc, aabbs, floor_idx, origin, res, shape, agent_height, step_height, 0.0)] = OCCUPIED
    return OccupancyMap(grid, res, origin, source=name)


def build_navigable_map(desc: SceneDescription, radius: float, *, occupancy: OccupancyMap | None = None,
                        resolution: float = 0.05, agent_height: float = R2R_CE.height,
                        step_height: float = R2R_CE.step_height) -> OccupancyMap:
    """Where the centre of an upright disc agent of ``radius`` may stand, from the true geometry.

    A FREE cell of the occupancy map (``occupancy``, built here when not given) stays FREE iff its
    centre is at least ``radius`` from every obstacle footprint in the height band (exact
    point-to-footprint distance, so the agent's disc never overlaps an obstacle, corners included)
    and at least ``radius + resolution`` from every UNKNOWN cell's centre (outside the floor: a
    grid margin, as in ``OccupancyMap.dilate``). Cells too close to an obstacle become OCCUPIED,
    the others UNKNOWN. Raises ``NoNavigableSpaceError`` when no FREE cell is left.
    """
    if not (math.isfinite(radius) and radius >= 0):
        raise ConfigError(f"got {radius}", file=scene_name(desc), field="radius", expected="a radius >= 0 m")
    name, res, aabbs, floor_idx, origin, shape = _scene_frame(desc, resolution, agent_height, step_height)
    if occupancy is None:
        occupancy = build_occupancy_map(desc, resolution=res, agent_height=agent_height, step_height=step_height)
    if occupancy.shape != shape or not np.allclose(occupancy.origin, origin) or occupancy.resolution != res:
        raise ConfigError(f"occupancy map {occupancy.shape[1]}x{occupancy.shape[0]} at {occupancy.resolution} m does "
                          f"not match the scene's grid {shape[1]}x{shape[0]} at {res} m", file=name, field="occupancy",
                          expected="build_occupancy_map(desc) with the same resolution")
    grid = occupancy.grid.copy()
    if radius > 0:
        free = grid == FREE
        near_obstacle = _obstacle_mask(desc, aabbs, floor_idx, origin, res, shape, agent_height, step_height, radius)
        unknown = occupancy.grid == UNKNOWN
        near_unknown = np.zeros(shape, dtype=bool)
        if unknown.any():
            near_unknown = ndimage.distance_transform_edt(~unknown) * res < radius + res - 1e-9
        grid[free & near_unknown] = UNKNOWN
        grid[free & near_obstacle] = OCCUPIED
    if not (grid == FREE).any():
        raise NoNavigableSpaceError(f"{name}: agent radius {radius:.3f} m leaves no navigable cell "
                                    f"(map {shape[1]}x{shape[0]} cells at {res} m)")
    return OccupancyMap(grid, res, origin.copy(), source=name, radius=float(radius))


def _scene_frame(desc: SceneDescription, resolution: float, agent_height: float, step_height: float):
    """Validated (scene name, resolution, geom AABBs, floor geom indices, grid origin, grid shape)."""
    name = scene_name(desc)
    res = _check_resolution(resolution, name)
    if not (step_height >= 0 and agent_height > step_height):
        raise ConfigError(f"got agent_height={agent_height}, step_height={step_height}", file=name,
                          field="agent_height", expected="agent_height > step_height >= 0")
    if not any(g.collides for g in desc.geoms):
        raise SceneError(f"{name}: no collision geometry (no geom carries a collider)")
    aabbs = [g.world_aabb() for g in desc.geoms]
    floor_idx = _floor_indices(desc, aabbs)
    if not floor_idx:
        raise SceneError(f"{name}: no floor (no geom labelled 'floor' and no collider with its top at "
                         f"z={desc.floor_z:g} ± {FLOOR_TOLERANCE} m)")

    lo = np.min([aabbs[i][0][:2] for i in floor_idx], axis=0)
    hi = np.max([aabbs[i][1][:2] for i in floor_idx], axis=0)
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
        raise SceneError(f"{name}: the floor has non-finite bounds (NaN/inf in a transform or size)")
    cells = float(np.prod((hi - lo) / res + 3))
    if cells > MAX_GRID_CELLS:
        raise SceneError(f"{name}: the floor spans {hi[0] - lo[0]:.4g} m x {hi[1] - lo[1]:.4g} m, "
                         f"{cells:.3g} cells at {res} m (limit {MAX_GRID_CELLS:.3g}); check the USD's "
                         "metersPerUnit and scale, or use a coarser resolution")
    origin = np.floor(lo / res + _EPS) * res - res  # snapped to the lattice, one-cell margin
    w = int(math.ceil((hi[0] - origin[0]) / res - _EPS)) + 1
    h = int(math.ceil((hi[1] - origin[1]) / res - _EPS)) + 1
    return name, res, aabbs, floor_idx, origin, (h, w)


def _obstacle_mask(desc: SceneDescription, aabbs, floor_idx, origin: np.ndarray, res: float, shape: tuple[int, int],
                   agent_height: float, step_height: float, clearance: float) -> np.ndarray:
    """Cells marked by the obstacles' footprints in the height band; with ``clearance``, the cells
    closer than it to a footprint (``_Raster``)."""
    raster = _Raster(origin, res, shape, clearance)
    z_lo, z_hi = desc.floor_z + step_height, desc.floor_z + agent_height
    is_floor = set(floor_idx)
    for i, g in enumerate(desc.geoms):
        if g.collides and i not in is_floor:
            _rasterise_geom(raster, g, z_lo, z_hi, aabbs[i])
    return raster.mask
