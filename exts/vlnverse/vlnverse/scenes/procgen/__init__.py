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

Steps 1–4 live in ``layout``, 5–6 in ``furnish``, the visual-only detail (windows, skirting, casings,
lights, rugs, paintings, colour variation) in ``decor``; this module assembles the geoms and runs 7.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ...core.body import R2R_CE
from ...core.errors import ConfigError
from ..catalog import COLORS, DEFAULT_FLOOR_STYLE, FLOOR_STYLES, MATERIALS, WALL_COLORS
from ..description import Door, Geom, Room, SceneDescription, SceneObject
from .decor import (CASING_DEPTH, CASING_WIDTH, COLOUR_VARIATION, MAX_WINDOWS_PER_ROOM, MIN_WINDOW_WALL,
                    SKIRTING_DEPTH, SKIRTING_HEIGHT, TINT_VARIATION, WINDOW_FRAME, WINDOW_FRAME_DEPTH, WINDOW_SILL,
                    WINDOW_TOP, _add_details, _door_casing, _mesh_geom, _plan_looks, _plan_windows,
                    _split_for_windows, _vary_colours)
from .furnish import DOOR_CLEARANCE, _flatten, _furnish, _part_geom, _Plan, _pose_matrix
from .layout import (CEILING_THICKNESS, DOOR_HEIGHT, FLOOR_THICKNESS, MIN_ROOM_SIDE, UNIT, WALL_THICKNESS, Rect,
                     _assign_types, _box_geom, _floor_plan, _plan_doors, _wall_pieces)

#: The public names (constants re-exported from the step modules for ``from procgen import ...``).
__all__ = ["GENERATOR_VERSION", "REACHABILITY_RADIUS", "generate_home", "generate_homes", "Rect", "UNIT",
           "WALL_THICKNESS", "DOOR_HEIGHT", "FLOOR_THICKNESS", "CEILING_THICKNESS", "MIN_ROOM_SIDE", "DOOR_CLEARANCE",
           "SKIRTING_HEIGHT", "SKIRTING_DEPTH", "WINDOW_SILL", "WINDOW_TOP", "WINDOW_FRAME", "WINDOW_FRAME_DEPTH",
           "MAX_WINDOWS_PER_ROOM", "MIN_WINDOW_WALL", "CASING_WIDTH", "CASING_DEPTH", "COLOUR_VARIATION",
           "TINT_VARIATION"]

GENERATOR_VERSION = 2  # 2: window openings, textured gprims as Meshes with st

#: Radius of the default agent (r2r_ce) used for the reachability check (m).
REACHABILITY_RADIUS = R2R_CE.radius


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



def _reachability_fix(plan: _Plan) -> SceneDescription:
    """Assemble the home; drop furniture (largest first) from rooms the agent cannot reach."""
    from scipy import ndimage

    from ..occupancy import build_occupancy_map

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

    from ..usd_io import WRITABLE_USD_SUFFIXES, write_usd

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
