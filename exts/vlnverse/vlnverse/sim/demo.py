"""Small hand-built scenes for tests, benchmarks and examples, independent of the scene generator.

``room_scene`` is one rectangular room (floor, ceiling, four walls) with optional box objects;
``demo_home`` is a seeded grid of rooms joined by doorways and furnished with boxes, a stand-in
for a generated home (about 20 walls and 40-60 objects).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..scenes.description import Door, Geom, Room, SceneDescription, SceneObject

WALL_COLOR = (0.85, 0.82, 0.76)
FLOOR_COLOR = (0.55, 0.42, 0.30)
CEILING_COLOR = (0.95, 0.95, 0.95)


@dataclass
class BoxObject:
    """An axis-aligned box object: centre (x, y, z), half extents, category, mass (movable if > 0)."""

    category: str
    center: Sequence[float]
    half_size: Sequence[float]
    mass: float = 0.0
    color: tuple[float, float, float] = (0.4, 0.5, 0.7)
    yaw: float = 0.0
    friction: float = 0.8


def _box(center, half, label, instance_id, color, name="", yaw=0.0, friction=0.8) -> Geom:
    t = np.eye(4)
    c, s = np.cos(yaw), np.sin(yaw)
    t[:2, :2] = [[c, -s], [s, c]]
    t[:3, 3] = center
    return Geom("box", t, np.asarray(half, float), label=label, instance_id=instance_id, color=color,
                name=name, friction=friction)


def wall(x0: float, y0: float, x1: float, y1: float, *, instance_id: int, thickness: float = 0.1,
         height: float = 2.7, name: str = "") -> Geom:
    """An axis-aligned wall box along the segment (x0, y0)–(x1, y1), centred on it."""
    half = np.array([abs(x1 - x0) / 2, abs(y1 - y0) / 2, height / 2])
    half[:2] = np.maximum(half[:2], thickness / 2)
    return _box([(x0 + x1) / 2, (y0 + y1) / 2, height / 2], half, "wall", instance_id, WALL_COLOR, name=name)


def _add_objects(desc: SceneDescription, objects: Sequence[BoxObject], first_id: int) -> None:
    for k, obj in enumerate(objects):
        inst = first_id + k
        geom = _box(obj.center, obj.half_size, obj.category, inst, obj.color, name=f"{obj.category}_{inst}",
                    yaw=obj.yaw, friction=obj.friction)
        desc.geoms.append(geom)
        lo, hi = geom.world_aabb()
        desc.objects.append(SceneObject(inst, obj.category, f"/World/Objects/{obj.category}_{inst}", lo, hi,
                                        geom_indices=[len(desc.geoms) - 1], movable=obj.mass > 0, mass=obj.mass))


def room_scene(width: float = 6.0, depth: float = 6.0, *, height: float = 2.7, thickness: float = 0.1,
               objects: Sequence[BoxObject] = (), ceiling: bool = True, scene_id: str = "room") -> SceneDescription:
    """One room with its interior spanning [0, width] × [0, depth]; wall inner faces lie exactly on
    x = 0, x = width, y = 0, y = depth. Walls get instance ids 1-4, floor 5, ceiling 6, objects 10+."""
    t = thickness
    desc = SceneDescription(scene_id=scene_id)
    desc.geoms += [
        wall(-t / 2, -t, -t / 2, depth + t, instance_id=1, thickness=t, height=height, name="wall_west"),
        wall(width + t / 2, -t, width + t / 2, depth + t, instance_id=2, thickness=t, height=height, name="wall_east"),
        wall(0, -t / 2, width, -t / 2, instance_id=3, thickness=t, height=height, name="wall_south"),
        wall(0, depth + t / 2, width, depth + t / 2, instance_id=4, thickness=t, height=height, name="wall_north"),
        _box([width / 2, depth / 2, -0.05], [width / 2 + t, depth / 2 + t, 0.05], "floor", 5, FLOOR_COLOR, "floor"),
    ]
    if ceiling:
        desc.geoms.append(_box([width / 2, depth / 2, height + 0.05], [width / 2 + t, depth / 2 + t, 0.05], "ceiling",
                               6, CEILING_COLOR, "ceiling"))
    desc.rooms.append(Room(0, "living_room", [[0, 0], [width, 0], [width, depth], [0, depth]]))
    _add_objects(desc, objects, 10)
    return desc


def demo_home(seed: int = 0, *, rooms_x: int = 3, rooms_y: int = 2, room_size: float = 4.0,
              objects_per_room: int = 8) -> SceneDescription:
    """A seeded grid of ``rooms_x × rooms_y`` square rooms joined by 1 m doorways, furnished with
    static and movable boxes kept clear of the doorways. The same seed gives the same scene."""
    rng = np.random.default_rng(seed)
    size, t, h, door = room_size, 0.1, 2.7, 1.0
    W, D = rooms_x * size, rooms_y * size
    desc = SceneDescription(scene_id=f"demo_home_{seed}")
    inst = 1
    walls: list[tuple[float, float, float, float]] = [(0, 0, W, 0), (0, D, W, D), (0, 0, 0, D), (W, 0, W, D)]
    doors = []
    for i in range(1, rooms_x):  # interior walls along y with one doorway per room row
        x = i * size
        for j in range(rooms_y):
            y0, y1 = j * size, (j + 1) * size
            yc = y0 + size / 2
            walls += [(x, y0, x, yc - door / 2), (x, yc + door / 2, x, y1)]
            doors.append(Door(len(doors), (j * rooms_x + i - 1, j * rooms_x + i), [x, yc], door, axis="y"))
    for j in range(1, rooms_y):
        y = j * size
        for i in range(rooms_x):
            x0, x1 = i * size, (i + 1) * size
            xc = x0 + size / 2
            walls += [(x0, y, xc - door / 2, y), (xc + door / 2, y, x1, y)]
            doors.append(Door(len(doors), ((j - 1) * rooms_x + i, j * rooms_x + i), [xc, y], door, axis="x"))
    for x0, y0, x1, y1 in walls:
        desc.geoms.append(wall(x0, y0, x1, y1, instance_id=inst, thickness=t, height=h))
        inst += 1
    desc.geoms.append(_box([W / 2, D / 2, -0.05], [W / 2 + t, D / 2 + t, 0.05], "floor", inst, FLOOR_COLOR, "floor"))
    desc.geoms.append(_box([W / 2, D / 2, h + 0.05], [W / 2 + t, D / 2 + t, 0.05], "ceiling", inst + 1, CEILING_COLOR, "ceiling"))
    inst += 2
    room_types = ["living_room", "kitchen", "bedroom", "bathroom", "office", "dining_room"]
    categories = [("table", 0.0, (0.6, 0.4, 0.2)), ("cabinet", 0.0, (0.5, 0.3, 0.2)), ("chair", 6.0, (0.2, 0.4, 0.6)),
                  ("box", 3.0, (0.8, 0.6, 0.3)), ("plant", 2.0, (0.2, 0.6, 0.2)), ("sofa", 0.0, (0.6, 0.2, 0.2))]
    objects: list[BoxObject] = []
    for j in range(rooms_y):
        for i in range(rooms_x):
            rid = j * rooms_x + i
            x0, y0 = i * size, j * size
            desc.rooms.append(Room(rid, room_types[rid % len(room_types)],
                                   [[x0, y0], [x0 + size, y0], [x0 + size, y0 + size], [x0, y0 + size]]))
            # Objects hug the room's edges so the centre and the doorways stay clear; a draw that
            # would overlap an earlier object in the room is dropped.
            placed: list[tuple[np.ndarray, np.ndarray]] = []
            for _ in range(objects_per_room):
                cat, mass, color = categories[int(rng.integers(len(categories)))]
                half = rng.uniform([0.15, 0.15, 0.2], [0.45, 0.45, 0.5])
                side = rng.integers(4)
                along = rng.uniform(0.2 + half.max(), size - 0.2 - half.max())
                if abs(along - size / 2) < door / 2 + half.max():
                    along = 0.2 + half.max() + 0.05
                margin = t / 2 + half.max() + 0.02
                cx, cy = [(x0 + along, y0 + margin), (x0 + along, y0 + size - margin),
                          (x0 + margin, y0 + along), (x0 + size - margin, y0 + along)][side]
                lo_xy, hi_xy = np.array([cx, cy]) - half[:2] - 0.05, np.array([cx, cy]) + half[:2] + 0.05
                if any(np.all(lo_xy < h) and np.all(l < hi_xy) for l, h in placed):
                    continue
                placed.append((lo_xy, hi_xy))
                objects.append(BoxObject(cat, (cx, cy, half[2]), half, mass=mass, color=color))
    _add_objects(desc, objects, inst)
    desc.doors = doors
    return desc
