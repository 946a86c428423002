"""Furnishing a procedural home (steps 5–6 of ``procgen``): furniture groups against walls or in the
room centre, kept clear of doors, and small objects on their supports; the ``_Plan`` they fill."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ...core.geometry import wrap_angle
from ..catalog import (CATEGORIES, ROOM_RULES, SMALL_OBJECT_RULES, Companion, FurnitureRule, ObjectModel, make_model,
                       part_material, resolve_color)
from ..description import Geom
from .layout import UNIT, WALL_THICKNESS, Rect

#: Free depth kept on both sides of every door (m).
DOOR_CLEARANCE = 1.0
#: Small objects that face the room the way their support does (screens, clocks, frames).
_FACING_SMALL = ("tv", "monitor", "laptop", "clock", "picture_frame", "microwave", "keyboard")
#: Place a category on the wall opposite another category when that one is in the room.
_PREFER_OPPOSITE = {"tv_stand": "sofa"}



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
