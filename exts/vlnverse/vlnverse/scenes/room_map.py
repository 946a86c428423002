"""Room maps: the room id of every free cell of an occupancy grid.

Labelling rule (scenes with rooms)
----------------------------------
A FREE cell takes the id of the room polygon containing its centre (boundary included).
Where polygons overlap or touch (a centre exactly on a shared wall line) the room whose
polygon centroid is nearer wins. FREE cells inside no polygon — door openings and the gaps
that wall thickness leaves between polygons — take the room of the nearest labelled cell
(Euclidean, ties broken by scipy's deterministic scan order) when it is at most
``max_gap`` metres away, so a door opening is split down its middle between its two rooms;
farther cells (e.g. a porch outside every room) stay -1. Non-free cells are always -1.

Scenes without rooms
--------------------
Rooms are inferred (with a warning): the free space is eroded with a disk of radius
``door_radius``, which removes every passage at most ``2 * door_radius`` wide (door
openings) while room interiors survive; the eroded space's 4-connected regions of at least
``min_seed_area`` m² become rooms (ids 0, 1, … in scan order), and every other free cell
joins the region that reaches it first when the regions grow one cell per step through free
space (a geodesic assignment, so a door is split down its middle; ties go to the higher id).
"""
from __future__ import annotations

import warnings

import numpy as np
from scipy import ndimage

from .description import SceneDescription
from .occupancy import FREE, OccupancyMap, scene_name

NO_ROOM = -1


def build_room_map(desc: SceneDescription, occ: OccupancyMap, *, max_gap: float = 0.5,
                   door_radius: float = 0.5, min_seed_area: float = 0.1) -> np.ndarray:
    """Room id (int32) of every FREE cell of ``occ``, ``-1`` elsewhere (see the module docstring).

    Works on raw and dilated maps alike. Scenes without rooms get inferred rooms and a
    ``UserWarning``.
    """
    free = occ.grid == FREE
    if not desc.rooms:
        room_map = infer_room_map(occ, door_radius=door_radius, min_seed_area=min_seed_area)
        n = int(room_map.max()) + 1 if (room_map >= 0).any() else 0
        warnings.warn(f"{scene_name(desc)}: no rooms recorded; inferred {n} room(s) from the free space",
                      stacklevel=2)
        return room_map

    h, w = occ.shape
    room_map = np.full((h, w), NO_ROOM, dtype=np.int32)
    best = np.full((h, w), np.inf)
    for room in desc.rooms:
        lo, hi = room.polygon.min(axis=0), room.polygon.max(axis=0)
        (r0, c0), (r1, c1) = occ.world_to_cell(np.stack([lo, hi]))
        r0, c0 = max(r0, 0), max(c0, 0)
        r1, c1 = min(r1, h - 1), min(c1, w - 1)
        if r1 < r0 or c1 < c0:
            continue
        rows, cols = np.mgrid[r0:r1 + 1, c0:c1 + 1]
        centres = occ.cell_to_world(np.stack([rows.ravel(), cols.ravel()], axis=1))
        inside = room.contains(centres).reshape(rows.shape) & free[r0:r1 + 1, c0:c1 + 1]
        dist = np.hypot(*(centres - room.centroid).T).reshape(rows.shape)
        win = (slice(r0, r1 + 1), slice(c0, c1 + 1))
        better = inside & (dist < best[win])
        room_map[win][better] = room.room_id
        best[win][better] = dist[better]

    labelled = room_map != NO_ROOM
    gaps = free & ~labelled
    if gaps.any() and labelled.any():
        dist, (ri, ci) = ndimage.distance_transform_edt(~labelled, return_indices=True)
        fill = gaps & (dist * occ.resolution <= max_gap + 1e-9)
        room_map[fill] = room_map[ri[fill], ci[fill]]
    return room_map


def infer_room_map(occ: OccupancyMap, *, door_radius: float = 0.5, min_seed_area: float = 0.1) -> np.ndarray:
    """Rooms of a scene that records none: free regions separated by door-sized gaps (module docstring)."""
    free = occ.grid == FREE
    r = max(int(round(door_radius / occ.resolution)), 1)
    yy, xx = np.mgrid[-r:r + 1, -r:r + 1]
    disk = xx ** 2 + yy ** 2 <= r * r
    seeds = ndimage.binary_erosion(free, structure=disk, border_value=0)
    labels, n = ndimage.label(seeds)
    if n == 0:
        return np.full(occ.shape, NO_ROOM, dtype=np.int32)
    sizes = ndimage.sum_labels(np.ones_like(labels), labels, index=np.arange(1, n + 1)) * occ.resolution ** 2
    keep = np.flatnonzero(sizes >= min_seed_area) + 1
    relabel = np.zeros(n + 1, dtype=np.int32)
    relabel[keep] = np.arange(1, len(keep) + 1)
    labels = relabel[labels]  # 0 = none, 1..K rooms

    # grow the rooms through free space one cell per step until nothing changes
    cross = ndimage.generate_binary_structure(2, 1)
    while True:
        grown = ndimage.grey_dilation(labels, footprint=cross)
        new = free & (labels == 0) & (grown > 0)
        if not new.any():
            break
        labels[new] = grown[new]
    return labels.astype(np.int32) - 1


def room_at(room_map: np.ndarray, occ: OccupancyMap, xy: np.ndarray) -> np.ndarray:
    """Room ids ``(N,)`` at world points ``xy (N, 2)``; ``-1`` off the map or outside every room."""
    cells = occ.world_to_cell(xy)
    ok = occ.in_bounds(cells)
    out = np.full(len(cells), NO_ROOM, dtype=np.int32)
    out[ok] = room_map[cells[ok, 0], cells[ok, 1]]
    return out


__all__ = ["NO_ROOM", "build_room_map", "infer_room_map", "room_at"]
