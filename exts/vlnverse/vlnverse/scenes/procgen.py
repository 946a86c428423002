"""Procedural multi-room homes as backend-neutral ``SceneDescription``s (deterministic per seed).

How a home is made (all randomness from ``numpy.random.default_rng(seed)``):

1. **Floor plan** on a 5 cm lattice: a rectangular or L-shaped footprint (or two bands either
   side of a corridor that becomes the hallway) is split recursively into 4–12 rectangular
   rooms, each at least 2.4 m on a side.
2. **Room types** go to rooms by size (the largest is the living room; a kitchen and a
   bathroom are always present; bedrooms, dining room, office, closet, laundry fill the rest);
   bedrooms, living and dining rooms narrower than 2.9 m swap with a wider room of a more
   forgiving type.
3. **Doors**: a random spanning tree over rooms that share a wall (hallway and living room
   preferred as hubs) plus a few extra doors, each ≥ 0.9 m wide, cut as gaps in the walls
   with a lintel (``door_frame``) above.
4. **Structure**: 0.12 m walls on the room boundaries, a floor box per room (top at z = 0)
   and a ceiling box per room.
5. **Furniture** from ``catalog.ROOM_RULES``: groups (bed + nightstands, sofa + coffee table,
   desk + office chair, dining table + chairs) go against walls or in the room centre, never
   in the 1 m zone either side of a door and keeping a clear strip in front of each piece.
6. **Small objects** from ``catalog.SMALL_OBJECT_RULES`` rest on the supporting furniture's
   top (their bottom exactly at the surface height).
7. **Reachability**: the occupancy map dilated by the default agent radius (0.18 m) must
   connect every room; furniture is removed, largest first, from rooms that are cut off.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..core.body import R2R_CE
from ..core.errors import ConfigError
from ..core.geometry import wrap_angle
from .catalog import (CATEGORIES, COLORS, DEFAULT_FLOOR_STYLE, FLOOR_STYLES, MATERIALS, ROOM_RULES,
                      SMALL_OBJECT_RULES, WALL_COLORS, Companion, FurnitureRule, ObjectModel, make_model,
                      part_material, resolve_color)
from .description import Door, Geom, Room, SceneDescription, SceneObject

GENERATOR_VERSION = 2  # 2: window openings, textured gprims as Meshes with st

#: Lattice unit of the floor plan (m); every wall line and door edge lies on it.
UNIT = 0.05
WALL_THICKNESS = 0.12
DOOR_HEIGHT = 2.1
FLOOR_THICKNESS = 0.1
CEILING_THICKNESS = 0.1
#: Minimum room side (m); the hallway corridor may be narrower (1.4–1.6 m).
MIN_ROOM_SIDE = 2.4
#: Free depth kept on both sides of every door (m).
DOOR_CLEARANCE = 1.0
#: Radius of the default agent (r2r_ce) used for the reachability check (m).
REACHABILITY_RADIUS = R2R_CE.radius

_MIN_U = int(round(MIN_ROOM_SIDE / UNIT))
_DOOR_WIDTHS_U = (18, 20, 22)  # 0.9, 1.0, 1.1 m
_DOOR_MARGIN_U = 6  # 0.3 m of wall kept at either end of a shared wall
_LEAF_TYPES = ("bathroom", "closet", "laundry_room")
_NEEDS_WIDE = ("bedroom", "living_room", "dining_room")
_FORGIVING = ("office", "closet", "laundry_room", "bathroom", "kitchen")
_WIDE_U = 58  # 2.9 m
_SIZE_RANK = {"living_room": 0.0, "bedroom": 1.0, "kitchen": 1.6, "dining_room": 2.2, "office": 3.0,
              "bathroom": 4.5, "laundry_room": 5.0, "closet": 6.0}
#: Small objects that face the room the way their support does (screens, clocks, frames).
_FACING_SMALL = ("tv", "monitor", "laptop", "clock", "picture_frame", "microwave", "keyboard")
#: Place a category on the wall opposite another category when that one is in the room.
_PREFER_OPPOSITE = {"tv_stand": "sofa"}

Rect = tuple[int, int, int, int]  # x0, y0, x1, y1 in lattice units


@dataclass
class _Member:
    """One object of a furniture group in the group frame (offset and yaw)."""

    model: ObjectModel
    offset: tuple[float, float]
    yaw: float


@dataclass(eq=False)
class _Placed:
    """An object placed in the world: model, pose, room, and (for small objects) its support."""

    model: ObjectModel
    position: np.ndarray  # (3,) base centre
    yaw: float
    room_id: int
    group: int
    support: "_Placed | None" = None
    children: list["_Placed"] = field(default_factory=list)


def _rot(yaw: float) -> np.ndarray:
    """2×2 rotation; exact for multiples of 90°."""
    quarter = yaw / (math.pi / 2)
    if abs(quarter - round(quarter)) < 1e-12:
        c, s = [(1, 0), (0, 1), (-1, 0), (0, -1)][int(round(quarter)) % 4]
    else:
        c, s = math.cos(yaw), math.sin(yaw)
    return np.array([[c, -s], [s, c]], dtype=float)


def _pose_matrix(position: np.ndarray, yaw: float) -> np.ndarray:
    m = np.eye(4)
    m[:2, :2] = _rot(yaw)
    m[:3, 3] = position
    return m


_AXIS_ROT = {"z": np.eye(3), "y": np.array([[1.0, 0, 0], [0, 0, -1], [0, 1, 0]]),
             "x": np.array([[0.0, 0, 1], [0, 1, 0], [-1, 0, 0]])}


def _model_extent(model: ObjectModel) -> tuple[np.ndarray, np.ndarray]:
    """Local xy AABB (lo, hi) of a model's parts."""
    pts = []
    for p in model.parts:
        g = _part_geom(p, np.eye(4), "white")
        lo, hi = g.world_aabb()
        pts += [lo[:2], hi[:2]]
    pts = np.array(pts)
    return pts.min(axis=0), pts.max(axis=0)


def _part_geom(part, pose: np.ndarray, color: str, material: str = "plastic", **kw) -> Geom:
    """A catalog ``Part`` placed by the object pose ``pose`` (4×4) as a world ``Geom``."""
    local = np.eye(4)
    local[:3, :3] = _AXIS_ROT[part.axis]
    local[:3, 3] = part.center
    return Geom(part.kind, pose @ local, np.array(part.size, dtype=float), color=resolve_color(part.tone, color),
                material=part_material(part.tone, material, color), **kw)


def _rect_xy(pts: np.ndarray) -> np.ndarray:
    return np.array([pts[:, 0].min(), pts[:, 1].min(), pts[:, 0].max(), pts[:, 1].max()])


def _overlaps(a: np.ndarray, rects: list[np.ndarray], eps: float = 1e-9) -> bool:
    """Whether the xy box ``a`` (x0, y0, x1, y1) overlaps any box in ``rects`` with positive area."""
    if not rects:
        return False
    r = np.asarray(rects)
    return bool(np.any((a[0] < r[:, 2] - eps) & (r[:, 0] < a[2] - eps) & (a[1] < r[:, 3] - eps) & (r[:, 1] < a[3] - eps)))


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


# --------------------------------------------------------------------------- furniture
class _RoomLayout:
    """Free-space bookkeeping for furniture placement in one room (all boxes are xy AABBs)."""

    def __init__(self, room_id: int, rect: Rect, door_zones: list[np.ndarray]):
        self.room_id = room_id
        gap = WALL_THICKNESS / 2 + 0.01
        self.inner = np.array([rect[0] * UNIT + gap, rect[1] * UNIT + gap, rect[2] * UNIT - gap, rect[3] * UNIT - gap])
        self.solid: list[np.ndarray] = []  # furniture footprints
        self.keep_clear: list[np.ndarray] = list(door_zones)  # door zones and the fronts of furniture
        self.sides: dict[str, str] = {}  # category -> wall side it was placed on

    def fits(self, box: np.ndarray, clear: np.ndarray | None) -> bool:
        """Whether a footprint and its clear strip fit inside the room, the footprint off every
        door zone and clear strip, the clear strip off every footprint."""
        if not (self._inside(box) and (clear is None or self._inside(clear))):
            return False
        if _overlaps(box, self.solid) or _overlaps(box, self.keep_clear):
            return False
        return clear is None or not _overlaps(clear, self.solid)

    def _inside(self, box: np.ndarray) -> bool:
        inner = self.inner
        return bool(box[0] >= inner[0] - 1e-9 and box[1] >= inner[1] - 1e-9 and box[2] <= inner[2] + 1e-9
                    and box[3] <= inner[3] + 1e-9)


_SIDE_YAW = {"S": 0.0, "N": math.pi, "W": -math.pi / 2, "E": math.pi / 2}
_OPPOSITE = {"S": "N", "N": "S", "W": "E", "E": "W"}


def _group_members(rule: FurnitureRule, rng: np.random.Generator) -> list[_Member]:
    """The main piece at the origin (front +y) and its companions in the group frame."""
    main = make_model(rule.category, rng)
    w, d, _ = main.dims
    members = [_Member(main, (0.0, 0.0), 0.0)]
    for comp in rule.companions:
        members += _companions(comp, main, rng)
    return members


def _companions(comp: Companion, main: ObjectModel, rng: np.random.Generator) -> list[_Member]:
    w, d, _ = main.dims
    out = []
    if comp.where == "sides":
        model = make_model(comp.category, rng)  # a matching pair
        cw, cd, _ = model.dims
        for s in (-1, 1):
            if rng.random() < comp.prob:
                twin = ObjectModel(model.category, model.dims, model.color, model.material, model.parts, model.surfaces)
                out.append(_Member(twin, (s * (w / 2 + comp.gap + cw / 2), -d / 2 + cd / 2), 0.0))
    elif comp.where == "front" and rng.random() < comp.prob:
        model = make_model(comp.category, rng)
        cw, cd, _ = model.dims
        tuck = 0.15 if comp.category in ("office_chair", "chair") else 0.0
        out.append(_Member(model, (0.0, d / 2 + comp.gap - tuck + cd / 2), math.pi))
    elif comp.where == "around":
        model = make_model(comp.category, rng)
        cw, cd, _ = model.dims
        per_side = int(np.clip(math.floor(w / 0.62), 1, 3))
        xs = (np.arange(per_side) + 0.5) * w / per_side - w / 2
        for side, yaw in ((1, math.pi), (-1, 0.0)):
            for x in xs:
                if rng.random() < 0.9:
                    twin = ObjectModel(model.category, model.dims, model.color, model.material, model.parts, model.surfaces)
                    out.append(_Member(twin, (float(x), side * (d / 2 + cd / 2 - 0.12)), yaw))
    return out


def _member_boxes(members: list[_Member]) -> np.ndarray:
    """xy AABB of each member in the group frame, shape (K, 4)."""
    boxes = []
    for m in members:
        lo, hi = _model_extent(m.model)
        corners = np.array([[lo[0], lo[1]], [hi[0], lo[1]], [hi[0], hi[1]], [lo[0], hi[1]]]) @ _rot(m.yaw).T + m.offset
        boxes.append(_rect_xy(corners))
    return np.array(boxes)


def _place_group(layout: _RoomLayout, members: list[_Member], rng: np.random.Generator, group_id: int,
                 placement: str, clearance: float, prefer_side: str | None) -> list[_Placed] | None:
    """Try to put a furniture group in the room; returns the placed objects or None."""
    boxes = _member_boxes(members)
    glo, ghi = boxes[:, :2].min(axis=0), boxes[:, 2:].max(axis=0)
    local = np.array([[glo[0], glo[1]], [ghi[0], glo[1]], [ghi[0], ghi[1]], [glo[0], ghi[1]]])
    clear_local = np.array([[glo[0], ghi[1]], [ghi[0], ghi[1]], [ghi[0], ghi[1] + clearance], [glo[0], ghi[1] + clearance]])
    inner = layout.inner
    for attempt in range(40):
        if placement == "free":
            yaw = float(rng.choice([0.0, math.pi / 2]))
            rot = _rot(yaw)
            ext = _rect_xy(local @ rot.T)
            if attempt < 15:  # near the room centre first, then anywhere in the room
                centre = (inner[:2] + inner[2:]) / 2 + rng.uniform(-0.4, 0.4, 2)
            else:
                centre = rng.uniform(inner[:2], inner[2:])
            pos = np.round(centre - (ext[:2] + ext[2:]) / 2, 2)
            box = ext + np.tile(pos, 2)
            clear = box + np.array([-clearance, -clearance, clearance, clearance])
            if not layout.fits(box, clear):
                continue
            side = "C"
        else:
            side = prefer_side if (prefer_side and attempt < 10) else str(rng.choice(["S", "N", "W", "E"]))
            yaw = _SIDE_YAW[side]
            rot = _rot(yaw)
            ext = _rect_xy(local @ rot.T)
            if side in ("S", "N"):
                lo, hi = inner[0] - ext[0], inner[2] - ext[2]
                along = np.round(rng.uniform(lo, hi), 2) if hi > lo else None
                across = inner[1] - ext[1] if side == "S" else inner[3] - ext[3]
                pos = None if along is None else np.array([along, across])
            else:
                lo, hi = inner[1] - ext[1], inner[3] - ext[3]
                along = np.round(rng.uniform(lo, hi), 2) if hi > lo else None
                across = inner[0] - ext[0] if side == "W" else inner[2] - ext[2]
                pos = None if along is None else np.array([across, along])
            if pos is None:
                continue
            box = ext + np.tile(pos, 2)
            clear = _rect_xy(clear_local @ rot.T) + np.tile(pos, 2)
            if not layout.fits(box, clear):
                continue
        layout.solid.append(box)
        layout.keep_clear.append(clear)
        layout.sides.setdefault(members[0].model.category.name, side)
        placed = []
        for m in members:
            off = rot @ np.array(m.offset)
            placed.append(_Placed(m.model, np.array([pos[0] + off[0], pos[1] + off[1], 0.0]), wrap_angle(yaw + m.yaw),
                                  layout.room_id, group_id))
        return placed
    return None


def _place_small_objects(support: _Placed, rng: np.random.Generator) -> None:
    """Put small objects on ``support``'s surfaces per ``SMALL_OBJECT_RULES`` (bottom on the top)."""
    rule = SMALL_OBJECT_RULES.get(support.model.category.name)
    if rule is None or not support.model.surfaces:
        return
    candidates, max_items = rule
    rot = _rot(support.yaw)
    surfaces = []
    for s in support.model.surfaces:
        corners = np.array([[s.center[0] + sx * s.half[0], s.center[1] + sy * s.half[1]] for sx in (-1, 1) for sy in (-1, 1)])
        surfaces.append((s.z, _rect_xy(corners @ rot.T + support.position[:2]), []))
    for name, prob in candidates:
        if len(support.children) >= max_items or rng.random() >= prob:
            continue
        for _ in range(3 if prob >= 1.0 else 1):  # a required item gets fresh sizes if it does not fit
            if _place_one_small(make_model(name, rng), support, surfaces, rng):
                break


def _place_one_small(model: ObjectModel, support: _Placed, surfaces: list, rng: np.random.Generator) -> bool:
    """Try random poses of ``model`` on the support's free surface area; True when placed."""
    facing = model.category.name in _FACING_SMALL
    lo, hi = _model_extent(model)
    local = np.array([[lo[0], lo[1]], [hi[0], lo[1]], [hi[0], hi[1]], [lo[0], hi[1]]])
    for attempt in range(12):
        if facing:  # screens, clocks and frames face the room like their support
            yaw = support.yaw
        elif attempt % 2 == 0:
            yaw = float(np.round(rng.uniform(-math.pi, math.pi), 3))
        else:  # roughly aligned with the support's edges (long objects fit narrow tops)
            yaw = support.yaw + math.pi / 2 * int(rng.integers(4)) + float(np.round(rng.uniform(-0.1, 0.1), 3))
        ext = _rect_xy(local @ _rot(yaw).T)
        z, area, used = surfaces[int(rng.integers(len(surfaces)))]
        xlo, xhi = area[0] - ext[0], area[2] - ext[2]
        ylo, yhi = area[1] - ext[1], area[3] - ext[3]
        if xhi < xlo or yhi < ylo:
            continue
        pos = np.clip(np.round([rng.uniform(xlo, xhi), rng.uniform(ylo, yhi)], 3), [xlo, ylo], [xhi, yhi])
        box = ext + np.tile(pos, 2)
        if _overlaps(box + np.array([-0.02, -0.02, 0.02, 0.02]), used):
            continue
        used.append(box)
        support.children.append(_Placed(model, np.array([pos[0], pos[1], z]), wrap_angle(yaw), support.room_id,
                                        support.group, support))
        return True
    return False


# --------------------------------------------------------------------------- assembly
@dataclass
class _Plan:
    """Everything decided about a home before geometry is emitted."""

    seed: int
    scene_id: str
    rects: list[Rect]
    types: list[str]
    doors: list
    wall_height: float
    wall_color: str
    floor_styles: list[tuple[str, str]]
    placed: list[_Placed] = field(default_factory=list)


def _assemble(plan: _Plan) -> SceneDescription:
    """Emit geoms, objects, rooms and doors for a plan (instance ids in emission order)."""
    desc = SceneDescription(scene_id=plan.scene_id)
    next_id = 1
    H = plan.wall_height
    looks = _plan_looks(plan)

    def add(g: Geom) -> int:
        desc.geoms.append(g)
        return len(desc.geoms) - 1

    for rid, (rect, rtype) in enumerate(zip(plan.rects, plan.types)):
        x0, y0, x1, y1 = (v * UNIT for v in rect)
        poly = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]])
        desc.rooms.append(Room(rid, rtype, poly, name=f"room_{rid:02d}_{rtype}"))
        color, material = plan.floor_styles[rid]
        half_t = WALL_THICKNESS / 2
        add(_box_geom([(x0 + x1) / 2, (y0 + y1) / 2, -FLOOR_THICKNESS / 2],
                      [(x1 - x0) / 2 + half_t, (y1 - y0) / 2 + half_t, FLOOR_THICKNESS / 2],
                      label="floor", instance_id=next_id, color=COLORS[color], friction=MATERIALS[material],
                      name=f"/World/Structure/Floors/floor_{rid:02d}", material=f"{looks.floors[rid]}_{color}"))
        next_id += 1
    for rid, rect in enumerate(plan.rects):
        x0, y0, x1, y1 = (v * UNIT for v in rect)
        add(_box_geom([(x0 + x1) / 2, (y0 + y1) / 2, H + CEILING_THICKNESS / 2],
                      [(x1 - x0) / 2 + WALL_THICKNESS / 2, (y1 - y0) / 2 + WALL_THICKNESS / 2, CEILING_THICKNESS / 2],
                      label="ceiling", instance_id=next_id, color=COLORS["white"], friction=MATERIALS["plaster"],
                      name=f"/World/Structure/Ceilings/ceiling_{rid:02d}", material="paint_white"))
        next_id += 1
    windows = _plan_windows(plan, looks)
    for k, (axis, line, a, b, z0, z1) in enumerate(_split_for_windows(_wall_pieces(plan.rects, plan.doors), windows, H)):
        c = line * UNIT
        centre = [(a + b) / 2, c, (z0 + z1) / 2] if axis == "x" else [c, (a + b) / 2, (z0 + z1) / 2]
        half = [(b - a) / 2, WALL_THICKNESS / 2, (z1 - z0) / 2] if axis == "x" else [WALL_THICKNESS / 2, (b - a) / 2, (z1 - z0) / 2]
        add(_box_geom(centre, half, label="wall", instance_id=next_id, color=COLORS[plan.wall_color],
                      friction=MATERIALS["plaster"], name=f"/World/Structure/Walls/wall_{k:03d}",
                      material=f"{looks.walls}_{plan.wall_color}"))
        next_id += 1
    for did, (i, j, axis, line, centre_u, width_u) in enumerate(plan.doors):
        c, m, w = line * UNIT, centre_u * UNIT, width_u * UNIT
        center2 = np.array([m, c]) if axis == "x" else np.array([c, m])
        desc.doors.append(Door(did, (i, j), center2, w, axis))
        half = [w / 2, WALL_THICKNESS / 2, (H - DOOR_HEIGHT) / 2] if axis == "x" else [WALL_THICKNESS / 2, w / 2, (H - DOOR_HEIGHT) / 2]
        add(_box_geom([center2[0], center2[1], (H + DOOR_HEIGHT) / 2], half, label="door_frame", instance_id=next_id,
                      color=COLORS["white"], friction=MATERIALS["wood"], name=f"/World/Structure/DoorFrames/door_frame_{did:02d}",
                      material="wood_white"))
        add(_mesh_geom(_door_casing(center2, w, axis), label="door_frame", instance_id=next_id, color=COLORS["white"],
                       name=f"/World/Structure/DoorFrames/door_casing_{did:02d}", material="wood_white"))
        next_id += 1

    next_id = _add_details(desc, plan, looks, windows, next_id)
    for obj in _flatten(plan.placed):
        cat = obj.model.category
        path = f"/World/Objects/{cat.name}_{next_id:04d}"
        indices = []
        pose = _pose_matrix(obj.position, obj.yaw)
        for k, part in enumerate(obj.model.parts):
            indices.append(add(_part_geom(part, pose, obj.model.color, obj.model.material, label=cat.name, instance_id=next_id,
                                          friction=MATERIALS[obj.model.material], name=f"{path}/part_{k:02d}")))
        boxes = [desc.geoms[i].world_aabb() for i in indices]
        lo = np.min([b[0] for b in boxes], axis=0)
        hi = np.max([b[1] for b in boxes], axis=0)
        desc.objects.append(SceneObject(next_id, cat.name, path, lo, hi, indices, movable=cat.movable,
                                        mass=cat.mass_for(obj.model.dims), room_id=obj.room_id,
                                        attributes=obj.model.attributes))
        next_id += 1
    _vary_colours(desc, plan.seed)
    desc.metadata = {"generator": "vlnverse.scenes.procgen", "generator_version": GENERATOR_VERSION,
                     "seed": int(plan.seed), "wall_height": float(H)}
    return desc


# --------------------------------------------------------------------------- visual detail
#: Floor look per physics floor material; the second entry is drawn for a third of the rooms.
_FLOOR_LOOKS = {"wood": ("wood", "parquet"), "stone": ("stone", "marble"), "ceramic": ("tile", "tile"),
                "fabric": ("carpet", "carpet")}
#: Room types that get a rug, a painting.
_RUG_ROOMS = ("living_room", "bedroom", "dining_room", "office")
_ART_ROOMS = ("living_room", "bedroom", "dining_room", "office", "hallway")
_RUG_COLORS = ("red", "blue", "beige", "gray", "green", "navy", "terracotta", "cream")
SKIRTING_HEIGHT, SKIRTING_DEPTH = 0.08, 0.015
#: Window opening: sill and head height (m); frame member width and depth (m).
WINDOW_SILL, WINDOW_TOP = 0.9, 2.1
WINDOW_FRAME, WINDOW_FRAME_DEPTH = 0.05, 0.07
#: Windows per room (at most) and the shortest exterior wall that gets one (m).
MAX_WINDOWS_PER_ROOM, MIN_WINDOW_WALL = 2, 1.8


@dataclass(frozen=True)
class _Window:
    """A window opening in an exterior wall: room, index in the room, wall side and line (m), the
    opening's ends ``a`` < ``b`` along the wall, its centre ``c`` (the mullion), sill and head."""

    room_id: int
    k: int
    side: str
    line: float
    a: float
    b: float
    c: float
    sill: float
    top: float


def _plan_windows(plan: "_Plan", looks: "_Looks") -> list[_Window]:
    """Up to ``MAX_WINDOWS_PER_ROOM`` windows per room on its exterior walls of at least
    ``MIN_WINDOW_WALL``: width min(1.6 m, half the wall), centre drawn near the wall's middle
    (``looks.rng``), so the opening stays ≥ 0.3 m from the room's corners."""
    out = []
    top = min(WINDOW_TOP, plan.wall_height - 0.25)
    for rid, rect in enumerate(plan.rects):
        rect_m = tuple(v * UNIT for v in rect)
        k = 0
        for side, line, lo, hi, exterior in _room_edges(rect_m, rid, plan.rects):
            if not exterior or hi - lo < MIN_WINDOW_WALL or k >= MAX_WINDOWS_PER_ROOM:
                continue
            width = round(float(min(1.6, 0.5 * (hi - lo))), 2)
            c = round(float((lo + hi) / 2 + looks.rng.uniform(-0.15, 0.15) * (hi - lo - width)), 2)
            out.append(_Window(rid, k, side, float(line), round(c - width / 2, 6), round(c + width / 2, 6), c,
                               WINDOW_SILL, top))
            k += 1
    return out


def _split_for_windows(pieces, windows: list[_Window], height: float) -> list[tuple[str, int, float, float, float, float]]:
    """Wall pieces ``(axis, line, a, b)`` as boxes ``(axis, line, a, b, z0, z1)`` with each window's
    opening cut out: full-height pieces beside it, one below the sill and one above the head. The
    xy footprint of the wall is unchanged (the piece under the sill spans the opening), so for any
    body whose step height is below the sill (0.9 m) the occupancy map, the navigable area and the
    walls the agent touches are exactly those of the uncut wall."""
    out = []
    for axis, line, a, b in pieces:
        cuts = sorted((w.a, w.b, w.sill, w.top) for w in windows
                      if ("x" if w.side in ("S", "N") else "y") == axis and abs(w.line - line * UNIT) < 1e-9
                      and a < w.a and w.b < b)
        start = a
        for wa, wb, sill, top in cuts:
            out.append((axis, line, start, wa, 0.0, height))
            out.append((axis, line, wa, wb, 0.0, sill))
            out.append((axis, line, wa, wb, top, height))
            start = wb
        out.append((axis, line, start, b, 0.0, height))
    return out


@dataclass
class _Looks:
    """Visual choices of a home, drawn from their own generator so the layout does not change."""

    rng: np.random.Generator
    floors: list[str]
    walls: str


def _plan_looks(plan: _Plan) -> _Looks:
    rng = np.random.default_rng([plan.seed, 14])
    floors = []
    for color, material in plan.floor_styles:
        options = _FLOOR_LOOKS.get(material, ("wood", "wood"))
        floors.append(options[1] if rng.random() < 1 / 3 else options[0])
    walls = "wallpaper" if rng.random() < 0.3 else "plaster"
    return _Looks(rng, floors, walls)


def _boxes_mesh(boxes: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One triangle mesh of axis-aligned boxes (centre, half extents): (origin, vertices, faces)."""
    corners = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], dtype=float)
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    tri = np.array([t for a, b, c, d in quads for t in ((a, b, c), (a, c, d))])
    origin = np.mean([c for c, _ in boxes], axis=0)
    verts = np.concatenate([c - origin + corners * h for c, h in boxes])
    faces = np.concatenate([tri + 8 * k for k in range(len(boxes))])
    return origin, np.round(verts, 6), faces


def _mesh_geom(boxes, **kw) -> Geom:
    origin, verts, faces = _boxes_mesh(boxes)
    m = np.eye(4)
    m[:3, 3] = origin
    return Geom("mesh", m, vertices=verts, faces=faces, collides=False, **kw)


def _room_edges(rect_m, rid: int, rects: list[Rect]):
    """The four inner edges of a room: (side, fixed coordinate, lo, hi, exterior?)."""
    x0, y0, x1, y1 = rect_m
    out = []
    for side, line_u, axis in (("S", rects[rid][1], "x"), ("N", rects[rid][3], "x"), ("W", rects[rid][0], "y"),
                               ("E", rects[rid][2], "y")):
        lo_u, hi_u = (rects[rid][0], rects[rid][2]) if axis == "x" else (rects[rid][1], rects[rid][3])
        shared = False
        for j, r in enumerate(rects):
            if j == rid:
                continue
            if axis == "x" and line_u in (r[1], r[3]) and min(hi_u, r[2]) > max(lo_u, r[0]):
                shared = True
            if axis == "y" and line_u in (r[0], r[2]) and min(hi_u, r[3]) > max(lo_u, r[1]):
                shared = True
        out.append((side, line_u * UNIT, lo_u * UNIT, hi_u * UNIT, not shared))
    return out


def _door_gaps(doors, side: str, line: float) -> list[tuple[float, float]]:
    axis = "x" if side in ("S", "N") else "y"
    return [((c - w / 2) * UNIT, (c + w / 2) * UNIT) for _, _, a, ln, c, w in doors
            if a == axis and abs(ln * UNIT - line) < 1e-9]


def _wall_box(side: str, line: float, a: float, b: float, z0: float, z1: float, offset: float, depth: float):
    """(centre, half) of a thin box on the inner face of a room's ``side`` wall, ``offset`` m into the room."""
    half_t = WALL_THICKNESS / 2
    inward = {"S": 1, "N": -1, "W": 1, "E": -1}[side]
    across = line + inward * (half_t + offset + depth / 2)
    if side in ("S", "N"):
        return np.array([(a + b) / 2, across, (z0 + z1) / 2]), np.array([(b - a) / 2, depth / 2, (z1 - z0) / 2])
    return np.array([across, (a + b) / 2, (z0 + z1) / 2]), np.array([depth / 2, (b - a) / 2, (z1 - z0) / 2])


#: Door casing (architrave) board width and depth proud of the wall face (m).
CASING_WIDTH, CASING_DEPTH = 0.07, 0.015


def _door_casing(center: np.ndarray, width: float, axis: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """Boxes of a door's casing on both wall faces: two jambs beside the opening and a head above
    it (visual only; outside the opening, so the clear width is unchanged)."""
    half_t = WALL_THICKNESS / 2
    boxes = []
    for face in (-1, 1):
        across = face * (half_t + CASING_DEPTH / 2)
        for s in (-1, 1):
            along = s * (width / 2 + CASING_WIDTH / 2)
            boxes.append((along, across, DOOR_HEIGHT / 2, CASING_WIDTH / 2, DOOR_HEIGHT / 2))
        boxes.append((0.0, across, DOOR_HEIGHT + CASING_WIDTH / 2, width / 2 + CASING_WIDTH, CASING_WIDTH / 2))
    out = []
    for along, across, z, half_along, half_z in boxes:
        if axis == "x":  # the wall runs along x
            out.append((np.array([center[0] + along, center[1] + across, z]),
                        np.array([half_along, CASING_DEPTH / 2, half_z])))
        else:
            out.append((np.array([center[0] + across, center[1] + along, z]),
                        np.array([CASING_DEPTH / 2, half_along, half_z])))
    return out


def _add_details(desc: SceneDescription, plan: _Plan, looks: _Looks, windows: list["_Window"], next_id: int) -> int:
    """Visual-only detail per room (never collides, so maps and physics are unchanged): skirting
    boards (one merged mesh per room), frames and glass of the ``windows`` (their openings are cut
    out of the walls by ``_split_for_windows``), a ceiling light fixture, a rug and a framed
    painting in living spaces. Returns the next free instance id."""
    rng = looks.rng
    H = plan.wall_height
    half_t = WALL_THICKNESS / 2
    for rid, (rect, rtype) in enumerate(zip(plan.rects, plan.types)):
        x0, y0, x1, y1 = (v * UNIT for v in rect)
        edges = _room_edges((x0, y0, x1, y1), rid, plan.rects)
        base = f"/World/Structure/Rooms/room_{rid:02d}"
        # skirting boards along every inner edge, door openings cut out
        boards = []
        for side, line, lo, hi, _ in edges:
            a, b = lo + half_t, hi - half_t
            cuts = sorted(g for g in _door_gaps(plan.doors, side, line) if g[1] > a and g[0] < b)
            start = a
            for g0, g1 in cuts + [(b, b)]:
                if g0 - start > 0.05:
                    boards.append(_wall_box(side, line, start, g0, 0.0, SKIRTING_HEIGHT, 0.0, SKIRTING_DEPTH))
                start = max(start, g1)
        if boards:
            desc.geoms.append(_mesh_geom(boards, label="skirting", instance_id=next_id, color=COLORS["white"],
                                         name=f"{base}/skirting", material="wood_white"))
            next_id += 1
        # windows: a white frame with a mullion and an interior sill board inside the wall opening,
        # and a glass pane (visual only) in the wall's mid-plane
        for w in (w for w in windows if w.room_id == rid):
            f, d = WINDOW_FRAME, WINDOW_FRAME_DEPTH
            mid = -half_t - d / 2  # _wall_box offset that centres a box of depth d on the wall line
            frame = [_wall_box(w.side, w.line, w.a, w.b, w.sill, w.sill + f, mid, d),
                     _wall_box(w.side, w.line, w.a, w.b, w.top - f, w.top, mid, d),
                     _wall_box(w.side, w.line, w.a, w.a + f, w.sill + f, w.top - f, mid, d),
                     _wall_box(w.side, w.line, w.b - f, w.b, w.sill + f, w.top - f, mid, d),
                     _wall_box(w.side, w.line, w.c - f / 2, w.c + f / 2, w.sill + f, w.top - f, mid, d),
                     _wall_box(w.side, w.line, w.a - 0.04, w.b + 0.04, w.sill - 0.03, w.sill, -half_t, half_t + 0.04)]
            pane = _wall_box(w.side, w.line, w.a + f, w.b - f, w.sill + f, w.top - f, -half_t - 0.005, 0.01)
            desc.geoms.append(Geom("box", _translation(pane[0]), pane[1], label="window", instance_id=next_id,
                                   color=(0.55, 0.72, 0.92), collides=False, name=f"{base}/window_{w.k}_glass",
                                   material="window"))
            desc.geoms.append(_mesh_geom(frame, label="window", instance_id=next_id, color=COLORS["white"],
                                         name=f"{base}/window_{w.k}_frame", material="wood_white"))
            next_id += 1
        # ceiling light fixture at the room centre (the room's light sits just below it)
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        m = _translation([cx, cy, H - 0.02])
        desc.geoms.append(Geom("cylinder", m, [0.18, 0.02, 0.0], label="ceiling_light", instance_id=next_id,
                               color=(1.0, 0.97, 0.9), collides=False, name=f"{base}/ceiling_light",
                               material="light"))
        next_id += 1
        # a rug in living spaces
        if rtype in _RUG_ROOMS and rng.random() < 0.8:
            color = str(rng.choice(_RUG_COLORS))
            hx = round(float(min(1.4, (x1 - x0) * rng.uniform(0.25, 0.33))), 2)
            hy = round(float(min(1.0, (y1 - y0) * rng.uniform(0.25, 0.33))), 2)
            desc.geoms.append(_box_geom([cx, cy, 0.004], [hx, hy, 0.004], label="rug", instance_id=next_id,
                                        color=COLORS[color], collides=False, name=f"{base}/rug",
                                        material=f"carpet_{color}"))
            next_id += 1
        # a framed painting on an interior wall, clear of doors
        if rtype in _ART_ROOMS and rng.random() < 0.75:
            for side, line, lo, hi, exterior in sorted(edges, key=lambda e: (e[4], -(e[3] - e[2]))):
                w = 0.8 if hi - lo > 2.5 else 0.5
                c = (lo + hi) / 2
                if any(g0 - 0.2 < c + w / 2 and c - w / 2 < g1 + 0.2 for g0, g1 in _door_gaps(plan.doors, side, line)):
                    continue
                z0, z1 = 1.25, 1.25 + 0.75 * w
                frame = _wall_box(side, line, c - w / 2, c + w / 2, z0, z1, 0.0, 0.03)
                canvas = _wall_box(side, line, c - w / 2 + 0.04, c + w / 2 - 0.04, z0 + 0.04, z1 - 0.04, 0.03, 0.004)
                desc.geoms.append(Geom("box", _translation(frame[0]), frame[1], label="painting", instance_id=next_id,
                                       color=COLORS["black"], collides=False, name=f"{base}/painting_frame",
                                       material="wood_black"))
                desc.geoms.append(Geom("box", _translation(canvas[0]), canvas[1], label="painting",
                                       instance_id=next_id, color=(1.0, 1.0, 1.0), collides=False,
                                       name=f"{base}/painting_canvas", material=f"art_{int(rng.integers(4))}"))
                next_id += 1
                break
    return next_id


#: Labels whose colour stays exactly the named one (paint is uniform; glass and lights glow).
_UNVARIED = ("wall", "ceiling", "door_frame", "skirting", "window", "ceiling_light", "painting")
#: Largest per-instance brightness change (fraction) and per-channel tint change.
COLOUR_VARIATION, TINT_VARIATION = 0.07, 0.02


def _vary_colours(desc: SceneDescription, seed: int) -> None:
    """Per-instance colour variation (two oak chairs are not the exact same oak): every geom of an
    instance is scaled by one brightness factor and tint drawn from ``[seed, 14, instance_id]``,
    rounded to 4 decimals; paint, glass and lights keep their colour."""
    factors: dict[int, np.ndarray] = {}
    for g in desc.geoms:
        if g.label in _UNVARIED:
            continue
        if g.instance_id not in factors:
            rng = np.random.default_rng([seed, 14, g.instance_id])
            factors[g.instance_id] = (1 + rng.uniform(-COLOUR_VARIATION, COLOUR_VARIATION)) * (
                1 + rng.uniform(-TINT_VARIATION, TINT_VARIATION, 3))
        g.color = tuple(round(float(c), 4) for c in np.clip(np.asarray(g.color) * factors[g.instance_id], 0.0, 1.0))


def _translation(p) -> np.ndarray:
    m = np.eye(4)
    m[:3, 3] = p
    return m


def _flatten(placed: list[_Placed]) -> list[_Placed]:
    """Furniture in placement order, each followed by the small objects resting on it."""
    out = []
    for p in placed:
        out.append(p)
        out += p.children
    return out


def _door_zones(doors) -> list[np.ndarray]:
    """Boxes kept free of furniture: the door width + 0.3 m, ``DOOR_CLEARANCE`` either side."""
    zones = []
    for _, _, axis, line, centre, width in doors:
        c, m, hw = line * UNIT, centre * UNIT, width * UNIT / 2 + 0.15
        if axis == "x":
            zones.append(np.array([m - hw, c - DOOR_CLEARANCE, m + hw, c + DOOR_CLEARANCE]))
        else:
            zones.append(np.array([c - DOOR_CLEARANCE, m - hw, c + DOOR_CLEARANCE, m + hw]))
    return zones


def _furnish(plan: _Plan, rng: np.random.Generator) -> None:
    zones = _door_zones(plan.doors)
    group = 0
    for rid, (rect, rtype) in enumerate(zip(plan.rects, plan.types)):
        layout = _RoomLayout(rid, rect, zones)
        for rule in ROOM_RULES[rtype]:
            n = int(rng.integers(rule.count[0], rule.count[1] + 1))
            for _ in range(n):
                if rng.random() >= rule.prob:
                    continue
                cat = CATEGORIES[rule.category]
                partner = _PREFER_OPPOSITE.get(cat.name)
                prefer = _OPPOSITE.get(layout.sides.get(partner, ""), None) if partner else None
                placed = None
                # the full group first, then the main piece alone; a required piece gets fresh
                # sizes and, as a last resort, a narrower clear strip in front of it
                tries = [cat.clearance] * 3 + [min(cat.clearance, 0.3)] * 2 if rule.prob >= 1.0 else [cat.clearance]
                for clearance in tries:
                    members = _group_members(rule, rng)
                    for subset in (members, members[:1]) if len(members) > 1 else (members,):
                        placed = _place_group(layout, subset, rng, group, cat.placement, clearance, prefer)
                        if placed is not None:
                            break
                    if placed is not None:
                        break
                group += 1
                if placed is None:
                    continue
                for p in placed:
                    _place_small_objects(p, rng)
                plan.placed += placed


def _reachability_fix(plan: _Plan) -> SceneDescription:
    """Assemble the home; drop furniture (largest first) from rooms the agent cannot reach."""
    from scipy import ndimage

    from .occupancy import build_occupancy_map

    for _ in range(64):
        desc = _assemble(plan)
        nav = build_occupancy_map(desc, resolution=UNIT).dilate(REACHABILITY_RADIUS)
        labels, _n = ndimage.label(nav.free_mask())
        h, w = labels.shape
        rows, cols = np.mgrid[0:h, 0:w]
        centres = nav.cell_to_world(np.stack([rows.ravel(), cols.ravel()], axis=1))
        flat = labels.ravel()
        room_labels = []
        for room in desc.rooms:
            x0, y0 = room.polygon.min(axis=0)
            x1, y1 = room.polygon.max(axis=0)
            inside = (centres[:, 0] > x0) & (centres[:, 0] < x1) & (centres[:, 1] > y0) & (centres[:, 1] < y1) & (flat > 0)
            room_labels.append(flat[inside])
        counts = np.bincount(np.concatenate(room_labels), minlength=_n + 1) if any(len(r) for r in room_labels) else None
        main = int(np.argmax(counts)) if counts is not None else 0
        bad = [rid for rid, lab in enumerate(room_labels)
               if len(lab) == 0 or np.count_nonzero(lab == main) < 0.85 * len(lab)]
        if not bad:
            return desc
        removable = [p for p in plan.placed if p.room_id in bad]
        if not removable:
            return desc  # nothing left to move; the plan itself is disconnected (not expected)
        order = {id(p): k for k, p in enumerate(plan.placed)}
        victim = max(removable, key=lambda p: (p.model.dims[0] * p.model.dims[1], -order[id(p)]))
        plan.placed.remove(victim)
    return _assemble(plan)


def generate_home(seed: int, *, scene_id: str | None = None, min_rooms: int = 4, max_rooms: int = 12) -> SceneDescription:
    """A furnished multi-room home, deterministic per ``seed`` (see the module docstring).

    ``scene_id`` defaults to ``home_<seed>``; the room count is drawn from
    ``[min_rooms, max_rooms]`` (4 ≤ min ≤ max ≤ 12).
    """
    if not (isinstance(seed, (int, np.integer)) and seed >= 0):
        raise ConfigError(f"got {seed!r}", field="seed", expected="an integer >= 0")
    if not (4 <= min_rooms <= max_rooms <= 12):
        raise ConfigError(f"got min_rooms={min_rooms}, max_rooms={max_rooms}", field="min_rooms/max_rooms",
                          expected="4 <= min_rooms <= max_rooms <= 12")
    rng = np.random.default_rng(seed)
    n_rooms = int(rng.integers(min_rooms, max_rooms + 1))
    rects, hall_idx = _floor_plan(rng, n_rooms)
    types = _assign_types(rng, rects, hall_idx)
    doors = _plan_doors(rng, rects, types)
    height = round(float(rng.uniform(2.6, 2.8)), 2)
    wall_color = str(rng.choice(WALL_COLORS))
    styles = []
    for t in types:
        options = FLOOR_STYLES.get(t, DEFAULT_FLOOR_STYLE)
        styles.append(options[int(rng.integers(len(options)))])
    plan = _Plan(int(seed), scene_id or f"home_{int(seed):04d}", rects, types, doors, height, wall_color, styles)
    _furnish(plan, rng)
    return _reachability_fix(plan)


def generate_homes(count: int, seed: int, out_dir: str | Path, ext: str = ".usda", progress: bool = True) -> list[Path]:
    """Write ``count`` homes (seeds ``seed … seed+count-1``) as ``home_<seed>.<ext>`` into ``out_dir``.

    Each file is written atomically; returns the paths in seed order.
    """
    from tqdm import tqdm

    from .usd_io import WRITABLE_USD_SUFFIXES, write_usd

    if not (isinstance(count, (int, np.integer)) and count >= 1):
        raise ConfigError(f"got {count!r}", field="count", expected="an integer >= 1")
    if ext not in WRITABLE_USD_SUFFIXES:
        raise ConfigError(f"got {ext!r}", field="ext", expected=" or ".join(repr(s) for s in WRITABLE_USD_SUFFIXES))
    out = Path(out_dir)
    paths = []
    for s in tqdm(range(int(seed), int(seed) + int(count)), desc="homes", unit="home", disable=not progress):
        desc = generate_home(s)
        paths.append(write_usd(desc, out / f"{desc.scene_id}{ext}"))
    return paths
