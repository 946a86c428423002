"""Visual-only decor of a procedural home (never collides, so maps and physics are unchanged): floor and
wall looks, windows cut into exterior walls, skirting, door casings, lights, rugs, paintings, and
per-instance colour variation. Drawn from its own generator, so the layout does not depend on it."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..catalog import COLORS
from ..description import Geom, SceneDescription
from .furnish import _Plan
from .layout import DOOR_HEIGHT, UNIT, WALL_THICKNESS, Rect, _box_geom

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
