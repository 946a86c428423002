"""Backend-neutral scene description: what every layer reads instead of USD or MuJoCo types.

Conventions (also used in the USD files): metres, Z up, the floor top at ``floor_z`` (0 for
generated homes), yaw measured counter-clockwise from +X. A scene is a list of primitive
``Geom``s in world coordinates (walls, floors, furniture parts, small objects), grouped into
labelled ``SceneObject``s, plus ``Room`` polygons and ``Door`` openings where known.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

GEOM_KINDS = ("box", "cylinder", "sphere", "mesh")

#: Semantic labels of the building structure (not scene-graph objects).
#: ``window``, ``skirting``, ``rug``, ``painting`` and ``ceiling_light`` are visual-only detail of
#: generated homes (they never collide).
STRUCTURE_LABELS = ("wall", "floor", "ceiling", "door_frame", "window", "skirting", "rug", "painting", "ceiling_light")


@dataclass
class Geom:
    """One primitive in world coordinates.

    ``size`` holds half extents for a box (hx, hy, hz), (radius, half_height, 0) for a
    Z-aligned cylinder (in its local frame), (radius, 0, 0) for a sphere; meshes keep local
    ``vertices``/``faces`` (optionally ``texcoords``) and ignore ``size``. ``transform`` is the 4×4 local→world matrix
    (rotation and translation only; scale is baked into ``size`` or ``vertices``). ``material`` is
    a semantic visual material name (``wood_oak``, ``tile_white``; see ``scenes.textures``), empty
    when unknown.
    """

    kind: str
    transform: np.ndarray
    size: np.ndarray = field(default_factory=lambda: np.zeros(3))
    label: str = "unknown"
    instance_id: int = 0
    color: tuple[float, float, float] = (0.7, 0.7, 0.7)
    collides: bool = True
    friction: float = 0.8
    name: str = ""
    vertices: np.ndarray | None = None
    faces: np.ndarray | None = None
    material: str = ""
    #: Per-vertex texture coordinates (N, 2) in metres of a render mesh (``scenes.object_meshes``);
    #: visual only, outside every hash.
    texcoords: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.kind not in GEOM_KINDS:
            raise ValueError(f"geom '{self.name}': kind '{self.kind}' not in {GEOM_KINDS}")
        self.transform = np.asarray(self.transform, dtype=float).reshape(4, 4)
        self.size = np.asarray(self.size, dtype=float).reshape(3)

    @property
    def position(self) -> np.ndarray:
        """World position of the geom's local origin."""
        return self.transform[:3, 3].copy()

    def local_corners(self) -> np.ndarray:
        """Points in the local frame whose convex hull bounds the geom, shape (K, 3)."""
        if self.kind == "mesh":
            return np.asarray(self.vertices, dtype=float)
        if self.kind == "box":
            hx, hy, hz = self.size
        elif self.kind == "cylinder":
            hx = hy = self.size[0]
            hz = self.size[1]
        else:
            hx = hy = hz = self.size[0]
        signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], dtype=float)
        return signs * np.array([hx, hy, hz])

    def world_points(self) -> np.ndarray:
        """``local_corners`` transformed to world coordinates, shape (K, 3)."""
        pts = self.local_corners()
        return pts @ self.transform[:3, :3].T + self.transform[:3, 3]

    def world_aabb(self) -> tuple[np.ndarray, np.ndarray]:
        """Axis-aligned world bounds (min, max), each shape (3,)."""
        pts = self.world_points()
        return pts.min(axis=0), pts.max(axis=0)


@dataclass
class SceneObject:
    """A labelled object (furniture or small item) made of one or more geoms."""

    instance_id: int
    category: str
    prim_path: str
    bounds_min: np.ndarray
    bounds_max: np.ndarray
    geom_indices: list[int] = field(default_factory=list)
    movable: bool = False
    mass: float = 0.0
    room_id: int | None = None
    attributes: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.bounds_min = np.asarray(self.bounds_min, dtype=float).reshape(3)
        self.bounds_max = np.asarray(self.bounds_max, dtype=float).reshape(3)

    @property
    def position(self) -> np.ndarray:
        """Centre of the object's bounds, shape (3,)."""
        return (self.bounds_min + self.bounds_max) / 2.0

    @property
    def size(self) -> np.ndarray:
        """Full extents of the bounds, shape (3,)."""
        return self.bounds_max - self.bounds_min


@dataclass
class Room:
    """A room: id, type (``bedroom``, ``kitchen`` …) and floor polygon (K, 2), counter-clockwise."""

    room_id: int
    room_type: str
    polygon: np.ndarray
    name: str = ""

    def __post_init__(self) -> None:
        self.polygon = np.asarray(self.polygon, dtype=float).reshape(-1, 2)

    @property
    def centroid(self) -> np.ndarray:
        """Area centroid of the polygon, shape (2,)."""
        x, y = self.polygon[:, 0], self.polygon[:, 1]
        xn, yn = np.roll(x, -1), np.roll(y, -1)
        cross = x * yn - xn * y
        area = cross.sum() / 2.0
        if abs(area) < 1e-12:
            return self.polygon.mean(axis=0)
        return np.array([((x + xn) * cross).sum(), ((y + yn) * cross).sum()]) / (6.0 * area)

    @property
    def area(self) -> float:
        """Polygon area in m²."""
        x, y = self.polygon[:, 0], self.polygon[:, 1]
        return float(abs((x * np.roll(y, -1) - np.roll(x, -1) * y).sum()) / 2.0)

    def contains(self, points: np.ndarray) -> np.ndarray:
        """Boolean mask of which (N, 2) points lie inside the polygon (boundary counts as inside)."""
        from matplotlib.path import Path as MplPath

        pts = np.atleast_2d(np.asarray(points, dtype=float))[:, :2]
        return MplPath(self.polygon).contains_points(pts, radius=1e-9) | MplPath(self.polygon[::-1]).contains_points(pts, radius=1e-9)


@dataclass
class Door:
    """An opening connecting two rooms: centre (x, y), width along the wall, wall direction."""

    door_id: int
    room_ids: tuple[int, int]
    center: np.ndarray
    width: float
    axis: str = "x"  # direction the wall runs: "x" or "y"

    def __post_init__(self) -> None:
        self.center = np.asarray(self.center, dtype=float).reshape(2)
        self.room_ids = (int(self.room_ids[0]), int(self.room_ids[1]))


@dataclass
class SceneDescription:
    """Everything a backend, a map builder or a task generator needs to know about a scene."""

    scene_id: str
    geoms: list[Geom] = field(default_factory=list)
    objects: list[SceneObject] = field(default_factory=list)
    rooms: list[Room] = field(default_factory=list)
    doors: list[Door] = field(default_factory=list)
    floor_z: float = 0.0
    source_path: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """World AABB of all geoms, (min (3,), max (3,))."""
        if not self.geoms:
            return np.zeros(3), np.zeros(3)
        boxes = [g.world_aabb() for g in self.geoms]
        return np.min([b[0] for b in boxes], axis=0), np.max([b[1] for b in boxes], axis=0)

    def object_by_id(self, instance_id: int) -> SceneObject:
        """The object with ``instance_id``; ``KeyError`` if absent."""
        for obj in self.objects:
            if obj.instance_id == instance_id:
                return obj
        raise KeyError(f"scene '{self.scene_id}' has no object with instance id {instance_id}")

    def room_by_id(self, room_id: int) -> Room:
        """The room with ``room_id``; ``KeyError`` if absent."""
        for room in self.rooms:
            if room.room_id == room_id:
                return room
        raise KeyError(f"scene '{self.scene_id}' has no room {room_id}")

    def label_of_instance(self) -> dict[int, str]:
        """Map every geom instance id to its semantic label (for segmentation)."""
        return {g.instance_id: g.label for g in self.geoms}


def _put_array(h: Any, arr: Any, dtype: Any = float, decimals: int | None = None) -> None:
    """Feed ``arr`` (its shape, then its bytes) to hash ``h``; with ``decimals``, the values as
    float32 rounded to that many decimals (and no -0.0)."""
    if decimals is None:
        a = np.ascontiguousarray(np.asarray(arr, dtype=dtype))
    else:
        a = np.round(np.asarray(arr, dtype=np.float32).astype(np.float64), decimals) + 0.0
    h.update(str(a.shape).encode())
    h.update(a.tobytes())


def scene_content_hash(desc: SceneDescription, *, portable: bool = False) -> str:
    """SHA-256 (hex) of a scene's content, never of its file path.

    By default everything the derived maps depend on: scene id, floor height, geoms (with
    instance ids and mesh faces), objects, rooms and doors (``scenes.maps`` keys its cache by it).
    ``portable=True`` hashes only what the home *is* -- geoms (kind, label, collision, pose, size,
    mesh vertices) and room types and polygons -- without scene id, ids, names or prim paths,
    floats rounded to 0.1 mm (a USD round trip keeps them to float32): the same home under another
    id or file format hashes the same (``learn.homes`` split guard). The two byte layouts are those
    of the cache keys and fingerprints already written; do not change them without a version bump.
    """
    put = (lambda h, a, dtype=float: _put_array(h, a, decimals=4)) if portable else _put_array
    h = hashlib.sha256()
    if not portable:
        h.update(f"{desc.scene_id}|{desc.floor_z!r}".encode())
    for g in desc.geoms:
        h.update((f"|{g.kind}|{g.label}|{bool(g.collides)}" if portable
                  else f"|g|{g.kind}|{g.label}|{g.instance_id}|{g.collides}").encode())
        put(h, g.transform)
        put(h, g.size)
        if g.vertices is not None:
            put(h, g.vertices)
            if not portable:
                put(h, g.faces, dtype=np.int64)
    for o in [] if portable else desc.objects:
        h.update(f"|o|{o.instance_id}|{o.category}|{o.prim_path}|{o.movable}|{o.room_id}|".encode())
        h.update(json.dumps(o.attributes, sort_keys=True, default=str).encode())
        put(h, np.concatenate([o.bounds_min, o.bounds_max]))
        put(h, o.geom_indices, dtype=np.int64)
    for r in desc.rooms:
        h.update((f"|r|{r.room_type}" if portable else f"|r|{r.room_id}|{r.room_type}|{r.name}").encode())
        put(h, r.polygon)
    for d in [] if portable else desc.doors:
        h.update(f"|d|{d.door_id}|{d.room_ids}|{d.width!r}|{d.axis}".encode())
        put(h, d.center)
    return h.hexdigest()
