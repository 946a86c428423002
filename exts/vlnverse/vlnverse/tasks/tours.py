"""Home tours: a trajectory through every room, rendered as a prior video, cut into windows.

Used by the video-contextualized task (VCN-Bench style). The pieces are:

* ``visibility`` helpers on a 2-D view-blocking grid: ``line_of_sight`` for segments and
  ``object_visibility`` for (viewpoint × object) pairs (range limit, optional field of view, the
  object's own footprint and its support surfaces never block it);
* ``plan_tour``: a nearest-neighbour order over room anchors (geodesic distances from the
  planner), A* legs between them, a look-around spin in every room, resampled at a fixed
  spacing with the yaw along the motion; every frame knows its room;
* ``render_tour`` / ``save_prior_video``: frames from an injected renderer callable (never a
  simulator import), stored as a compressed ``.npz`` (uint8) plus a small GIF preview;
* ``room_visits`` / ``sliding_windows``: run-length room visits of a frame range and windows
  that start where a new room begins.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from ..core.errors import ConfigError, NoNavigableSpaceError
from ..core.io import atomic_path
from ..core.precision import ANGLE_DECIMALS, LENGTH_DECIMALS, round_array
from .pathing import resample_polyline, wrap_angle

#: Frames of the look-around spin added at each room's anchor (45° apart).
DEFAULT_SPIN_FRAMES = 8


class TourPose(NamedTuple):
    """A camera pose of a tour frame: world x, y (m), yaw (rad, CCW from +X), pitch (rad)."""

    x: float
    y: float
    yaw: float
    pitch: float = 0.0


# ------------------------------------------------------------------------------------------
# Visibility on a 2-D grid


def _cells(points: np.ndarray, origin: np.ndarray, resolution: float) -> np.ndarray:
    """(..., 2) world xy → (..., 2) integer (row, col); row follows y, column follows x."""
    rc = np.floor((points[..., ::-1] - origin[::-1]) / resolution)
    return rc.astype(np.int64)


def line_of_sight(blocked: np.ndarray, origin: np.ndarray, resolution: float, starts: np.ndarray,
                  ends: np.ndarray, *, ignore: Callable[[np.ndarray], np.ndarray] | None = None) -> np.ndarray:
    """Whether each segment ``starts[i] → ends[i]`` (N, 2) crosses no blocked cell.

    ``blocked`` is a boolean (H, W) grid whose cell (0, 0) has its outer corner at ``origin``;
    cells outside the grid block. Segments are sampled at most every half cell. ``ignore``
    optionally maps sample points (N, K, 2) to a boolean mask of samples that never block
    (e.g. inside the looked-at object). Returns a boolean (N,) array.
    """
    starts = np.atleast_2d(np.asarray(starts, dtype=float))
    ends = np.atleast_2d(np.asarray(ends, dtype=float))
    if len(starts) == 0:
        return np.zeros(0, dtype=bool)
    lengths = np.linalg.norm(ends - starts, axis=1)
    k = int(max(2, math.ceil(float(lengths.max()) / (0.5 * resolution)) + 1))
    t = np.linspace(0.0, 1.0, k)
    pts = starts[:, None, :] + t[None, :, None] * (ends - starts)[:, None, :]
    rc = _cells(pts, np.asarray(origin, dtype=float), resolution)
    h, w = blocked.shape
    inside = (rc[..., 0] >= 0) & (rc[..., 0] < h) & (rc[..., 1] >= 0) & (rc[..., 1] < w)
    hit = np.ones(rc.shape[:2], dtype=bool)
    hit[inside] = blocked[rc[..., 0][inside], rc[..., 1][inside]]
    if ignore is not None:
        hit &= ~ignore(pts)
    return ~hit.any(axis=1)


def _footprints(bounds_min: np.ndarray, bounds_max: np.ndarray) -> list[np.ndarray]:
    """For every object, the xy boxes (M, 4: xmin, ymin, xmax, ymax) that never block its view:
    its own footprint and the footprints of objects under its centre (support surfaces)."""
    centres = (bounds_min[:, :2] + bounds_max[:, :2]) / 2.0
    boxes = np.concatenate([bounds_min[:, :2], bounds_max[:, :2]], axis=1)
    under = ((centres[:, None, 0] >= boxes[None, :, 0]) & (centres[:, None, 0] <= boxes[None, :, 2])
             & (centres[:, None, 1] >= boxes[None, :, 1]) & (centres[:, None, 1] <= boxes[None, :, 3]))
    np.fill_diagonal(under, True)
    return [boxes[under[i]] for i in range(len(boxes))]


def object_visibility(blocked: np.ndarray, origin: np.ndarray, resolution: float, viewpoints: np.ndarray,
                      bounds_min: np.ndarray, bounds_max: np.ndarray, *, max_range: float = 4.0,
                      yaws: np.ndarray | None = None, hfov_deg: float | None = None) -> np.ndarray:
    """Boolean (V, O) matrix: object ``o`` is visible from viewpoint ``v``.

    Visible means: the horizontal distance from the viewpoint to the object's footprint is at most
    ``max_range``; the segment to the footprint centre crosses no blocked cell except inside the
    object's own footprint or a footprint under its centre (a mug on a table); and, when ``yaws``
    (V,) and ``hfov_deg`` are given, the object's centre lies within the horizontal field of view.
    """
    viewpoints = np.atleast_2d(np.asarray(viewpoints, dtype=float))[:, :2]
    bmin = np.atleast_2d(np.asarray(bounds_min, dtype=float))
    bmax = np.atleast_2d(np.asarray(bounds_max, dtype=float))
    n_v, n_o = len(viewpoints), len(bmin)
    out = np.zeros((n_v, n_o), dtype=bool)
    if n_v == 0 or n_o == 0:
        return out
    centres = (bmin[:, :2] + bmax[:, :2]) / 2.0
    nearest = np.clip(viewpoints[:, None, :], bmin[None, :, :2], bmax[None, :, :2])
    in_range = np.linalg.norm(nearest - viewpoints[:, None, :], axis=2) <= max_range
    if yaws is not None and hfov_deg is not None:
        d = centres[None, :, :] - viewpoints[:, None, :]
        bearing = np.arctan2(d[..., 1], d[..., 0]) - np.asarray(yaws, dtype=float)[:, None]
        off_axis = np.abs(wrap_angle(bearing))
        inside_box = np.all((viewpoints[:, None, :] >= bmin[None, :, :2]) & (viewpoints[:, None, :] <= bmax[None, :, :2]), axis=2)
        in_range &= (off_axis <= math.radians(hfov_deg) / 2.0) | inside_box
    margin = resolution
    for o, boxes in enumerate(_footprints(bmin, bmax)):
        rows = np.flatnonzero(in_range[:, o])
        if len(rows) == 0:
            continue

        def ignore(pts: np.ndarray, boxes: np.ndarray = boxes) -> np.ndarray:
            p = pts[..., None, :]
            return np.any((p[..., 0] >= boxes[:, 0] - margin) & (p[..., 0] <= boxes[:, 2] + margin)
                          & (p[..., 1] >= boxes[:, 1] - margin) & (p[..., 1] <= boxes[:, 3] + margin), axis=-1)

        ends = np.repeat(centres[o][None, :], len(rows), axis=0)
        out[rows, o] = line_of_sight(blocked, origin, resolution, viewpoints[rows], ends, ignore=ignore)
    return out


def view_blocking_grid(desc, resolution: float, eye_height: float) -> tuple[np.ndarray, np.ndarray]:
    """Boolean grid of what blocks a horizontal view at ``eye_height`` above the floor, and its origin.

    Built with the maps layer's ``build_occupancy_map`` over a thin slab around eye height, so
    walls and tall furniture block while tables and beds do not (you look over them).
    """
    from ..scenes.occupancy import OCCUPIED, build_occupancy_map

    occ = build_occupancy_map(desc, resolution=resolution, agent_height=eye_height + 0.05,
                              step_height=max(eye_height - 0.05, 0.0))
    return occ.grid == OCCUPIED, np.asarray(occ.origin, dtype=float)


# ------------------------------------------------------------------------------------------
# Rooms of points


def room_of_points(rooms: Sequence[Any], points: np.ndarray) -> np.ndarray:
    """Room id of each (N, 2) point from the rooms' polygons (first containing room), -1 if none."""
    pts = np.atleast_2d(np.asarray(points, dtype=float))[:, :2]
    out = np.full(len(pts), -1, dtype=np.int64)
    for room in rooms:
        mask = (out < 0) & room.contains(pts)
        out[mask] = room.room_id
    return out


# ------------------------------------------------------------------------------------------
# Tours


@dataclass
class Tour:
    """A camera trajectory through a home: one pose and one room id per frame."""

    scene_id: str
    positions: np.ndarray  # (N, 2) world xy
    yaws: np.ndarray  # (N,) rad
    room_ids: np.ndarray  # (N,) int, -1 outside every room polygon
    spacing: float
    room_order: list[int]

    def __post_init__(self) -> None:
        # poses at the precision they are stored with (core.precision), so frames rendered from this
        # tour are exactly the frames of the tour read back from its .npz
        self.positions = round_array(np.asarray(self.positions, dtype=float), LENGTH_DECIMALS)
        self.yaws = round_array(np.asarray(self.yaws, dtype=float), ANGLE_DECIMALS)

    def __len__(self) -> int:
        return len(self.positions)

    def poses(self, pitch: float = 0.0) -> list[TourPose]:
        """One ``TourPose`` per frame."""
        return [TourPose(float(x), float(y), float(t), pitch) for (x, y), t in zip(self.positions, self.yaws)]

    def length(self) -> float:
        """Travelled distance in metres."""
        return float(np.linalg.norm(np.diff(self.positions, axis=0), axis=1).sum()) if len(self) > 1 else 0.0

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Arrays for ``np.savez`` (positions, yaws, room ids, spacing, room order)."""
        return {"positions": self.positions, "yaws": self.yaws, "room_ids": self.room_ids,
                "spacing": np.float64(self.spacing), "room_order": np.asarray(self.room_order, dtype=np.int64)}


def _motion_yaws(points: np.ndarray, initial: float = 0.0) -> np.ndarray:
    """Yaw along the motion (the heading of the next step; the last point keeps the previous one)."""
    if len(points) < 2:
        return np.full(len(points), initial)
    d = np.diff(points, axis=0)
    yaw = np.arctan2(d[:, 1], d[:, 0])
    return np.append(yaw, yaw[-1])


def room_anchors(rooms: Sequence[Any], navigable) -> dict[int, np.ndarray]:
    """For each room, the navigable cell centre inside its polygon closest to its centroid.

    Rooms without a navigable cell inside are left out.
    """
    free_rc = np.argwhere(navigable.free_mask())
    if len(free_rc) == 0:
        return {}
    free_xy = navigable.cell_to_world(free_rc)
    anchors: dict[int, np.ndarray] = {}
    for room in rooms:
        inside = room.contains(free_xy)
        if not inside.any():
            continue
        cand = free_xy[inside]
        anchors[room.room_id] = cand[np.argmin(np.linalg.norm(cand - room.centroid, axis=1))]
    return anchors


def plan_tour(desc, planner, navigable, *, start_room: int | None = None, spacing: float = 0.5,
              spin_frames: int = DEFAULT_SPIN_FRAMES) -> Tour:
    """A tour visiting every reachable room of ``desc``.

    Rooms are ordered nearest-neighbour by geodesic distance between their anchors (see
    ``room_anchors``), starting in ``start_room`` (default: the first room with an anchor); legs
    come from ``planner.shortest_path`` and are resampled every ``spacing`` metres with the yaw
    along the motion; at each anchor the camera turns once around in ``spin_frames`` steps so
    the video shows the room. Raises ``NoNavigableSpaceError`` if fewer than two rooms are reachable.
    """
    if spacing <= 0:
        raise ConfigError(f"got {spacing}", field="tour_spacing", expected="a positive number of metres")
    anchors = room_anchors(desc.rooms, navigable)
    ids = sorted(anchors)
    if start_room is not None and start_room not in anchors:
        raise ConfigError(f"room {start_room} has no navigable cell", field="start_room",
                          expected=f"one of {ids}")
    if len(ids) < 2:
        raise NoNavigableSpaceError(f"scene '{desc.scene_id}': a tour needs at least two rooms with navigable "
                                    f"space, found {len(ids)}")
    pts = np.array([anchors[i] for i in ids])
    dist = np.stack([planner.distance_field(pts[i]).distance(pts) for i in range(len(ids))])
    current = ids.index(start_room) if start_room is not None else 0
    order = [current]
    remaining = set(range(len(ids))) - {current}
    while remaining:
        cand = sorted(remaining)
        d = dist[current, cand]
        if not np.isfinite(d).any():
            break
        current = cand[int(np.argmin(d))]
        order.append(current)
        remaining.discard(current)
    if len(order) < 2:
        raise NoNavigableSpaceError(f"scene '{desc.scene_id}': no other room is reachable from room {ids[order[0]]}")

    positions: list[np.ndarray] = []
    yaws: list[np.ndarray] = []
    spin = np.arange(1, spin_frames + 1) * (2 * np.pi / max(spin_frames, 1))

    def add_spin(xy: np.ndarray, yaw0: float) -> None:
        if spin_frames > 0:
            positions.append(np.repeat(xy[None, :], spin_frames, axis=0))
            yaws.append(wrap_angle(yaw0 + spin))

    first = pts[order[0]]
    positions.append(first[None, :])
    yaws.append(np.zeros(1))
    add_spin(first, 0.0)
    for a, b in zip(order[:-1], order[1:]):
        path = planner.shortest_path(pts[a], pts[b])
        leg = resample_polyline(np.asarray(path.dense, dtype=float)[:, :2], spacing)[1:]
        if len(leg) == 0:
            continue
        prev = positions[-1][-1]
        leg_yaw = _motion_yaws(np.concatenate([prev[None, :], leg]))[:-1]
        positions.append(leg)
        yaws.append(leg_yaw)
        add_spin(leg[-1], float(leg_yaw[-1]))
    xy = np.concatenate(positions)
    yaw = np.concatenate(yaws)
    return Tour(scene_id=desc.scene_id, positions=xy, yaws=yaw, room_ids=room_of_points(desc.rooms, xy),
                spacing=float(spacing), room_order=[ids[i] for i in order])


# ------------------------------------------------------------------------------------------
# Rendering and storage


def render_tour(tour: Tour, renderer: Callable[..., np.ndarray] | None, *, pitch: float = 0.0,
                size: int | None = None, progress: bool = False) -> np.ndarray:
    """Render every tour frame with ``renderer(x, y, yaw, pitch)`` → (N, H, W, 3) uint8.

    With ``size`` set, frames of another size are resized (bilinear) to ``size × size``.

    ``renderer`` is the callable injected into the task context (``SceneContext.renderer``, the
    simulator's camera). ``None`` raises ``ConfigError`` naming the missing renderer.
    """
    if renderer is None:
        raise ConfigError("no renderer: the prior video of a tour must be rendered from the simulator's camera",
                          field="renderer", expected="a callable pose -> RGB image (pass one to load_scene_context)")
    poses = tour.poses(pitch)
    if progress:
        from tqdm import tqdm

        poses = tqdm(poses, desc=f"tour {tour.scene_id}", unit="frame", leave=False)
    frames = []
    for i, pose in enumerate(poses):
        img = np.asarray(renderer(pose.x, pose.y, pose.yaw, pose.pitch))
        if img.ndim != 3 or img.shape[2] < 3:
            raise ConfigError(f"frame {i} has shape {img.shape}", field="renderer", expected="an (H, W, 3) RGB image")
        if i and size is None and img.shape[:2] != frames[0].shape[:2]:
            raise ConfigError(f"frame {i} has shape {img.shape}, frame 0 {frames[0].shape}", field="renderer",
                              expected="every frame the same size")
        if img.dtype != np.uint8:
            img = np.clip(img * 255.0 if np.issubdtype(img.dtype, np.floating) and img.max() <= 1.0 else img,
                          0, 255).astype(np.uint8)
        img = img[..., :3]
        if size is not None and img.shape[:2] != (size, size):
            from PIL import Image

            img = np.asarray(Image.fromarray(np.ascontiguousarray(img)).resize((size, size), Image.BILINEAR))
        frames.append(img)
    return np.stack(frames)


def save_prior_video(path: str | Path, frames: np.ndarray, tour: Tour, *, preview: bool = True,
                     preview_frames: int = 48, preview_size: int = 96, fps: float = 4.0) -> dict[str, str]:
    """Store a tour video: ``path`` (.npz: ``frames`` uint8 (N,H,W,3) + the tour arrays), atomically,
    and a GIF preview beside it (``<stem>.gif``, at most ``preview_frames`` frames). Returns the paths."""
    from ..scenes.occupancy import write_npz  # atomic, byte-identical for equal arrays

    path = write_npz(path, frames=np.asarray(frames, dtype=np.uint8), **tour.to_arrays())
    out = {"video": str(path)}
    if preview and len(frames):
        from PIL import Image

        idx = np.unique(np.linspace(0, len(frames) - 1, min(preview_frames, len(frames))).round().astype(int))
        images = [Image.fromarray(frames[i]).resize((preview_size, preview_size)) for i in idx]
        gif = path.with_suffix(".gif")
        with atomic_path(gif, suffix=".gif") as tmp:
            images[0].save(tmp, format="GIF", save_all=True, append_images=images[1:],
                           duration=int(1000 / fps), loop=0)
        out["preview"] = str(gif)
    return out


def load_prior_video(path: str | Path) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Read a video written by ``save_prior_video``: (frames (N,H,W,3) uint8, tour arrays)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError("prior video not found", file=path, expected="an .npz written by save_prior_video")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except (OSError, ValueError) as exc:
        raise ConfigError(f"unreadable prior video ({exc})", file=path) from None
    if "frames" not in arrays:
        raise ConfigError("no 'frames' array", file=path, expected="an .npz written by save_prior_video")
    return arrays.pop("frames"), arrays


# ------------------------------------------------------------------------------------------
# Windows


@dataclass(frozen=True)
class RoomVisit:
    """One contiguous stay in a room: frames ``[start, end)`` (window-relative or absolute)."""

    room_id: int
    start: int
    end: int


def room_visits(room_ids: np.ndarray) -> list[RoomVisit]:
    """Run-length room visits of a frame sequence; frames outside every room (-1, e.g. in a
    doorway) are absorbed: a gap between two stays in the same room does not split the stay."""
    room_ids = np.asarray(room_ids, dtype=np.int64)
    known = np.flatnonzero(room_ids >= 0)
    if len(known) == 0:
        return []
    vals = room_ids[known]
    change = np.flatnonzero(np.diff(vals) != 0) + 1
    starts = np.concatenate([[0], change])
    ends = np.concatenate([change, [len(vals)]])
    return [RoomVisit(int(vals[s]), int(known[s]), int(known[e - 1]) + 1) for s, e in zip(starts, ends)]


def sliding_windows(tour: Tour, rng: np.random.Generator, count: int, *, min_frames: int = 40,
                    max_frames: int = 160, length_step: int = 10) -> list[tuple[int, int]]:
    """``count`` windows ``(start, end)`` (end exclusive) of the tour, deterministic for ``rng``.

    A window starts on the first frame of a room visit (so its first frame shows a new room, as in
    VCN-Bench) and its length is a multiple of ``length_step`` in ``[min_frames, max_frames]``
    (clipped to the tour's end). Windows may repeat when the tour is short.
    """
    n = len(tour)
    if n == 0 or count <= 0:
        return []
    starts = np.array([v.start for v in room_visits(tour.room_ids)] or [0])
    lo = max(length_step, (min_frames // length_step) * length_step)
    hi = max(lo, (max_frames // length_step) * length_step)
    lengths = np.arange(lo, hi + 1, length_step)
    out = []
    for _ in range(count):
        s = int(starts[rng.integers(len(starts))])
        length = int(lengths[rng.integers(len(lengths))])
        out.append((s, min(n, s + length)))
    return out
