"""Floor plan and structure of a procedural home (steps 1–4 of ``procgen``): the room rectangles on the
5 cm lattice, room types, doors, and the wall pieces with door gaps cut out."""
from __future__ import annotations

import math

import numpy as np

from ..description import Geom

#: Lattice unit of the floor plan (m); every wall line and door edge lies on it.
#: Lattice unit of the floor plan (m); every wall line and door edge lies on it.
UNIT = 0.05
WALL_THICKNESS = 0.12
DOOR_HEIGHT = 2.1
FLOOR_THICKNESS = 0.1
CEILING_THICKNESS = 0.1
#: Minimum room side (m); the hallway corridor may be narrower (1.4–1.6 m).
MIN_ROOM_SIDE = 2.4
_MIN_U = int(round(MIN_ROOM_SIDE / UNIT))
_DOOR_WIDTHS_U = (18, 20, 22)  # 0.9, 1.0, 1.1 m
_DOOR_MARGIN_U = 6  # 0.3 m of wall kept at either end of a shared wall
_LEAF_TYPES = ("bathroom", "closet", "laundry_room")
_NEEDS_WIDE = ("bedroom", "living_room", "dining_room")
_FORGIVING = ("office", "closet", "laundry_room", "bathroom", "kitchen")
_WIDE_U = 58  # 2.9 m
_SIZE_RANK = {"living_room": 0.0, "bedroom": 1.0, "kitchen": 1.6, "dining_room": 2.2, "office": 3.0,
              "bathroom": 4.5, "laundry_room": 5.0, "closet": 6.0}

Rect = tuple[int, int, int, int]  # x0, y0, x1, y1 in lattice units


# --------------------------------------------------------------------------- floor plan
def _split(rect: Rect, k: int, rng: np.random.Generator) -> list[Rect]:
    """Split ``rect`` recursively into up to ``k`` rooms with sides ≥ ``MIN_ROOM_SIDE``."""
    if k <= 1:
        return [rect]
    x0, y0, x1, y1 = rect
    w, h = x1 - x0, y1 - y0
    axes = ["x", "y"] if w >= h else ["y", "x"]
    if max(w, h) < 1.25 * min(w, h) and rng.random() < 0.5:
        axes.reverse()
    for axis in axes:
        length = w if axis == "x" else h
        if length < 2 * _MIN_U:
            continue
        frac = float(np.clip(rng.uniform(0.35, 0.65), _MIN_U / length, 1 - _MIN_U / length))
        cut = int(round(length * frac))
        k1 = int(np.clip(round(k * cut / length), 1, k - 1))
        if axis == "x":
            a, b = (x0, y0, x0 + cut, y1), (x0 + cut, y0, x1, y1)
        else:
            a, b = (x0, y0, x1, y0 + cut), (x0, y0 + cut, x1, y1)
        return _split(a, k1, rng) + _split(b, k - k1, rng)
    return [rect]


def _area(r: Rect) -> int:
    return (r[2] - r[0]) * (r[3] - r[1])


def _split_regions(regions: list[Rect], k: int, rng: np.random.Generator) -> list[Rect]:
    """Share ``k`` rooms among regions by area and split each."""
    areas = np.array([_area(r) for r in regions], dtype=float)
    counts = np.maximum(1, np.floor(k * areas / areas.sum()).astype(int))
    while counts.sum() < k:
        counts[int(np.argmax(areas / counts))] += 1
    while counts.sum() > k and counts.max() > 1:
        counts[int(np.argmax(counts))] -= 1
    out: list[Rect] = []
    for region, c in zip(regions, counts):
        out += _split(region, int(c), rng)
    return out


def _floor_plan(rng: np.random.Generator, n_rooms: int) -> tuple[list[Rect], int | None]:
    """Room rectangles (lattice units) and the index of the hallway corridor (or None)."""
    for attempt in range(50):
        hallway = n_rooms >= 6 and rng.random() < 0.6
        area = n_rooms * rng.uniform(11.0, 15.0) * (1 + 0.1 * attempt)
        aspect = rng.uniform(1.15, 1.7)
        width = math.sqrt(area * aspect)
        depth = area / width
        if hallway:
            depth = max(depth, 2 * MIN_ROOM_SIDE + 1.6 + 0.6)
        W, D = int(round(width / UNIT)), int(round(depth / UNIT))
        hall_idx = None
        if hallway:
            cw = int(rng.integers(28, 33))
            y_lo = _MIN_U + int(round((D - 2 * _MIN_U - cw) * rng.uniform(0.3, 0.7)))
            corridor = (0, y_lo, W, y_lo + cw)
            rooms = _split_regions([(0, 0, W, y_lo), (0, y_lo + cw, W, D)], n_rooms - 1, rng)
            rooms.append(corridor)
            hall_idx = len(rooms) - 1
        elif rng.random() < 0.45:
            cut_w = int(round(W * rng.uniform(0.3, 0.45)))
            cut_d = int(round(D * rng.uniform(0.3, 0.5)))
            if W - cut_w < _MIN_U or D - cut_d < _MIN_U or cut_d < _MIN_U:
                continue
            regions = [(0, 0, W, D - cut_d), (0, D - cut_d, W - cut_w, D)]
            rooms = _split_regions(regions, n_rooms, rng)
            if rng.random() < 0.5:  # mirror so the missing corner varies
                rooms = [(W - r[2], r[1], W - r[0], r[3]) for r in rooms]
        else:
            rooms = _split((0, 0, W, D), n_rooms, rng)
        if len(rooms) == n_rooms:
            return rooms, hall_idx
    raise RuntimeError(f"could not lay out {n_rooms} rooms")  # pragma: no cover - 50 growing footprints


def _assign_types(rng: np.random.Generator, rects: list[Rect], hall_idx: int | None) -> list[str]:
    """Room types by size: living room largest, then bedrooms, kitchen …, closets smallest."""
    idx = [i for i in range(len(rects)) if i != hall_idx]
    n = len(idx)
    types = ["living_room", "kitchen", "bathroom"][:n]
    n_bed = max(1, int(round((n - 3) * 0.4))) if n > 3 else 0
    types += ["bedroom"] * n_bed
    extras = [str(t) for t in rng.permutation(["dining_room", "office", "closet", "laundry_room"])]
    extras += ["bedroom", "bathroom", "office", "closet", "bedroom"]
    types += extras[: n - len(types)]
    rank = np.array([_SIZE_RANK[t] + rng.uniform(0.0, 1.2) for t in types])
    types_sorted = [types[i] for i in np.argsort(rank, kind="stable")]
    by_area = sorted(idx, key=lambda i: (-_area(rects[i]), i))
    out = ["hallway"] * len(rects)
    for i, t in zip(by_area, types_sorted):
        out[i] = t
    # rooms whose furniture needs depth (a bed is ~2.1 m long plus walking space) swap with
    # a wider room of a more forgiving type
    def narrow(i: int) -> bool:
        return min(rects[i][2] - rects[i][0], rects[i][3] - rects[i][1]) < _WIDE_U

    for i in by_area:
        if out[i] in _NEEDS_WIDE and narrow(i):
            swap = next((j for j in by_area if out[j] in _FORGIVING and not narrow(j)), None)
            if swap is not None:
                out[i], out[swap] = out[swap], out[i]
    return out


def _shared_walls(rects: list[Rect]) -> list[tuple[int, int, str, int, int, int]]:
    """Pairs of rooms sharing a wall long enough for a door: (i, j, axis, line, lo, hi) in units.

    ``axis`` is the direction the wall runs ("x": a wall at y = line).
    """
    out = []
    need = _DOOR_WIDTHS_U[0] + 2 * _DOOR_MARGIN_U
    for i, a in enumerate(rects):
        for j in range(i + 1, len(rects)):
            b = rects[j]
            for axis, (la, lb) in (("y", (a[2], b[0])), ("y", (b[2], a[0])), ("x", (a[3], b[1])), ("x", (b[3], a[1]))):
                if la != lb:
                    continue
                lo, hi = (max(a[1], b[1]), min(a[3], b[3])) if axis == "y" else (max(a[0], b[0]), min(a[2], b[2]))
                if hi - lo >= need:
                    out.append((i, j, axis, la, lo, hi))
    return out


def _plan_doors(rng: np.random.Generator, rects: list[Rect], types: list[str]) -> list[tuple[int, int, str, int, int, int]]:
    """Doors as (i, j, axis, line, centre, width) in units: a spanning tree plus a few extras."""
    walls = _shared_walls(rects)
    weights = []
    for i, j, *_ in walls:
        w = rng.random()
        for t in (types[i], types[j]):
            w += -1.0 if t == "hallway" else (-0.5 if t == "living_room" else (0.8 if t in _LEAF_TYPES else 0.0))
        weights.append(w)
    parent = list(range(len(rects)))

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    chosen = []
    order = sorted(range(len(walls)), key=lambda e: (weights[e], e))
    for e in order:
        i, j = walls[e][:2]
        ri, rj = find(i), find(j)
        if ri != rj:
            parent[ri] = rj
            chosen.append(e)
    if len({find(i) for i in range(len(rects))}) != 1:
        raise RuntimeError("floor plan is not connected")  # pragma: no cover - rectangles tile a connected footprint
    linked = {frozenset(walls[e][:2]) for e in chosen}
    for e in order:
        i, j = walls[e][:2]
        if e in chosen or frozenset((i, j)) in linked or types[i] in _LEAF_TYPES or types[j] in _LEAF_TYPES:
            continue
        if rng.random() < 0.3:
            chosen.append(e)
            linked.add(frozenset((i, j)))
    doors = []
    for e in sorted(chosen):
        i, j, axis, line, lo, hi = walls[e]
        widths = [w for w in _DOOR_WIDTHS_U if hi - lo >= w + 2 * _DOOR_MARGIN_U]
        width = widths[int(rng.integers(len(widths)))]
        half = width // 2
        centre = int(rng.integers(lo + _DOOR_MARGIN_U + half, hi - _DOOR_MARGIN_U - half + 1))
        doors.append((i, j, axis, line, centre, width))
    return doors


# --------------------------------------------------------------------------- structure
def _wall_pieces(rects: list[Rect], doors) -> list[tuple[str, int, float, float]]:
    """Wall pieces (axis, line, start m, end m): room edges merged per line, door gaps cut out.

    Piece ends that are not door edges are extended by half the wall thickness so corners close.
    """
    lines: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for x0, y0, x1, y1 in rects:
        lines.setdefault(("x", y0), []).append((x0, x1))
        lines.setdefault(("x", y1), []).append((x0, x1))
        lines.setdefault(("y", x0), []).append((y0, y1))
        lines.setdefault(("y", x1), []).append((y0, y1))
    gaps: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for _, _, axis, line, centre, width in doors:
        gaps.setdefault((axis, line), []).append((centre - width // 2, centre + width // 2))
    half_t = WALL_THICKNESS / 2
    pieces = []
    for key in sorted(lines):
        merged: list[list[int]] = []
        for lo, hi in sorted(lines[key]):
            if merged and lo <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], hi)
            else:
                merged.append([lo, hi])
        for lo, hi in merged:
            cuts = sorted(g for g in gaps.get(key, []) if lo <= g[0] and g[1] <= hi)
            start, start_ext = lo, True
            for g0, g1 in cuts:
                if g0 > start:
                    pieces.append((key[0], key[1], start * UNIT - half_t * start_ext, g0 * UNIT))
                start, start_ext = g1, False
            if hi > start:
                pieces.append((key[0], key[1], start * UNIT - half_t * start_ext, hi * UNIT + half_t))
    return pieces


def _box_geom(center, half, **kw) -> Geom:
    m = np.eye(4)
    m[:3, 3] = center
    return Geom("box", m, np.asarray(half, dtype=float), **kw)
