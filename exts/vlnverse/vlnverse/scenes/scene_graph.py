"""Spatial-semantic scene graphs: rooms and objects as nodes, spatial relations as edges.

Nodes (``networkx.MultiDiGraph``)
---------------------------------
``room:<room_id>``: ``kind="room"``, ``room_id``, ``room_type``, ``name``, ``position``
(polygon centroid at floor height), ``bounds_min``/``bounds_max`` (polygon box, floor to
``floor_z + ROOM_HEIGHT``), ``area`` (m²), ``polygon``.
``obj:<instance_id>``: ``kind="object"``, ``category``, ``instance_id``, ``position``
(bounds centre), ``bounds_min``, ``bounds_max``, ``attributes``, ``room_id`` (or None),
``movable``, ``prim_path``. Structure (walls, floors, ceilings, door frames) is left out.

Edges (attribute ``relation``)
------------------------------
``in``       object → room whose polygon contains the object's footprint centre (the xy
             centre of its bounds); a centre on a shared boundary goes to the nearer room
             centroid; an object outside every polygon falls back to its recorded ``room_id``.
``on``       object → support: the object's bottom lies within ``ON_TOLERANCE`` (2 cm) of
             the top of one of the support's geoms (its bounds when it has none) and the
             object's footprint centre lies inside that geom's xy bounds. Of several
             candidates the highest support surface wins. Attribute ``height`` = that top.
``near``     both ways between objects in the same room whose horizontal bounds gap
             (the distance between their xy boxes, 0 when they overlap) is at most
             ``NEAR_DISTANCE`` (1.0 m), except pairs already linked by ``on``. Attribute
             ``distance`` = that gap.
``next_to``  both ways, a stricter subset of ``near``: gap at most ``NEXT_TO_DISTANCE``
             (0.3 m), both resting on the floor (bottom within ``FLOOR_CONTACT`` = 5 cm of
             ``floor_z``) with base heights within ``FLOOR_CONTACT`` of each other.
             Pairs that are ``next_to`` are also ``near``.
``adjacent`` both ways between the two rooms of every door, attributes ``door_id``,
             ``door_center`` [x, y] and ``door_width``; two doors give two edges.

Scenes without recorded rooms: given the inferred room map (``room_map.infer_room_map``),
rooms become nodes with ``inferred=True`` whose ``room_type`` is voted by the objects in them
(``labels.infer_room_type``: a bed → ``bedroom``, a toilet → ``bathroom`` ...; otherwise
``room``, never ``unknown``); an object is ``in`` the room at
its footprint centre (or the nearest room cell within 1 m, as furniture centres sit on
occupied cells); rooms whose free cells touch are ``adjacent`` (``door_center`` = the mean
point of the contact, ``door_width`` its extent).

The JSON export is networkx node-link data (``links`` key) with ``graph.version`` and
``graph.scene_id``, so ``networkx.node_link_graph(json.load(f), edges="links")`` reads it.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import networkx as nx
import numpy as np

from ..core.errors import ConfigError
from ..core.io import to_jsonable, write_text_atomic
from .description import STRUCTURE_LABELS, SceneDescription, SceneObject
from .labels import GENERIC_ROOM, infer_room_type

if TYPE_CHECKING:
    from .occupancy import OccupancyMap

GRAPH_VERSION = 1
ON_TOLERANCE = 0.02
NEAR_DISTANCE = 1.0
NEXT_TO_DISTANCE = 0.3
FLOOR_CONTACT = 0.05
ROOM_HEIGHT = 2.7
RELATIONS = ("in", "on", "near", "next_to", "adjacent")


def room_node(room_id: int) -> str:
    """Node id of a room."""
    return f"room:{int(room_id)}"


def object_node(instance_id: int) -> str:
    """Node id of an object."""
    return f"obj:{int(instance_id)}"


def _node_link_data(graph: nx.MultiDiGraph) -> dict:
    try:
        return nx.node_link_data(graph, edges="links")
    except TypeError:  # networkx < 3.4 has no ``edges`` keyword and always writes "links"
        return nx.node_link_data(graph)


def _node_link_graph(data: dict) -> nx.MultiDiGraph:
    try:
        return nx.node_link_graph(data, directed=True, multigraph=True, edges="links")
    except TypeError:
        return nx.node_link_graph(data, directed=True, multigraph=True)


class SceneGraph:
    """A scene's rooms, objects and relations (see the module docstring); ``graph`` is the networkx graph."""

    def __init__(self, graph: nx.MultiDiGraph):
        self.graph = graph

    @property
    def scene_id(self) -> str:
        """Id of the scene the graph was built from."""
        return str(self.graph.graph.get("scene_id", ""))

    # ----------------------------------------------------------------- queries
    def rooms(self) -> list[dict]:
        """Attribute dicts (with ``node``) of every room, ordered by room id."""
        out = [dict(d, node=n) for n, d in self.graph.nodes(data=True) if d.get("kind") == "room"]
        return sorted(out, key=lambda d: d["room_id"])

    def objects(self) -> list[dict]:
        """Attribute dicts (with ``node``) of every object, ordered by instance id."""
        out = [dict(d, node=n) for n, d in self.graph.nodes(data=True) if d.get("kind") == "object"]
        return sorted(out, key=lambda d: d["instance_id"])

    def objects_in_room(self, room_id: int) -> list[dict]:
        """Objects linked to room ``room_id`` by an ``in`` edge, ordered by instance id."""
        target = room_node(room_id)
        if target not in self.graph:
            return []
        nodes = {u for u, _, rel in self.graph.in_edges(target, data="relation") if rel == "in"}
        return sorted((dict(self.graph.nodes[n], node=n) for n in nodes), key=lambda d: d["instance_id"])

    def room_of(self, instance_id: int) -> int | None:
        """Room id of the object ``instance_id`` (its ``in`` edge), or None."""
        node = object_node(instance_id)
        if node not in self.graph:
            return None
        for _, other, rel in self.graph.out_edges(node, data="relation"):
            if rel == "in":
                return int(self.graph.nodes[other]["room_id"])
        return None

    def relations(self, instance_id: int) -> list[tuple[str, str]]:
        """Outgoing ``(relation, other_node_id)`` pairs of the object ``instance_id``, sorted."""
        node = object_node(instance_id)
        if node not in self.graph:
            return []
        return sorted((rel, other) for _, other, rel in self.graph.out_edges(node, data="relation"))

    def categories_in_room(self, room_id: int) -> set[str]:
        """Object categories present in room ``room_id``."""
        return {d["category"] for d in self.objects_in_room(room_id)}

    def edge_counts(self) -> dict[str, int]:
        """Number of edges per relation (symmetric relations count both directions)."""
        counts = {rel: 0 for rel in RELATIONS}
        for _, _, rel in self.graph.edges(data="relation"):
            counts[rel] = counts.get(rel, 0) + 1
        return counts

    # ------------------------------------------------------------------ export
    def to_dict(self) -> dict[str, Any]:
        """Node-link data (JSON types only) with ``graph.version`` and ``graph.scene_id``."""
        return to_jsonable(_node_link_data(self.graph))

    def to_json(self) -> str:
        """The graph as a JSON string (sorted keys, so equal graphs give equal text)."""
        return json.dumps(self.to_dict(), sort_keys=True, indent=1) + "\n"

    @classmethod
    def from_json(cls, data: str | dict, *, source: str | Path | None = None) -> "SceneGraph":
        """Rebuild a graph from ``to_json``/``to_dict`` output; bad data raises ``ConfigError``."""
        try:
            payload = json.loads(data) if isinstance(data, str) else data
            version = payload.get("graph", {}).get("version")
            if version != GRAPH_VERSION:
                raise ConfigError(f"got {version!r}", file=source, field="graph.version", expected=GRAPH_VERSION)
            return cls(_node_link_graph(payload))
        except ConfigError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError, nx.NetworkXError) as exc:
            raise ConfigError(f"not a scene graph ({exc})", file=source,
                              expected="networkx node-link JSON written by SceneGraph.save") from None

    def save(self, path: str | Path) -> Path:
        """Write the JSON export atomically; returns the path."""
        return write_text_atomic(path, self.to_json())

    @classmethod
    def load(cls, path: str | Path) -> "SceneGraph":
        """Read a graph written by ``save``; a missing/bad file raises ``ConfigError`` naming it."""
        path = Path(path)
        if not path.is_file():
            raise ConfigError("file not found", file=path)
        return cls.from_json(path.read_text(encoding="utf-8"), source=path)


def _scene_objects(desc: SceneDescription) -> list[SceneObject]:
    return [o for o in desc.objects if o.category not in STRUCTURE_LABELS]


def _support_surfaces(desc: SceneDescription, obj: SceneObject) -> np.ndarray:
    """Top surfaces of ``obj`` as rows ``[xmin, ymin, xmax, ymax, top_z]``."""
    boxes = [desc.geoms[i].world_aabb() for i in obj.geom_indices if 0 <= i < len(desc.geoms)]
    if not boxes:
        boxes = [(obj.bounds_min, obj.bounds_max)]
    return np.array([[lo[0], lo[1], hi[0], hi[1], hi[2]] for lo, hi in boxes])


def _assign_rooms(desc: SceneDescription, objects: list[SceneObject]) -> list[int | None]:
    """Room id of each object by its footprint centre (module docstring rule)."""
    if not objects:
        return []
    centres = np.array([o.position[:2] for o in objects])
    best = np.full(len(objects), np.inf)
    room = np.full(len(objects), -1)
    for r in desc.rooms:
        inside = r.contains(centres)
        dist = np.hypot(*(centres - r.centroid).T)
        better = inside & (dist < best)
        room[better], best[better] = r.room_id, dist[better]
    return [int(room[i]) if room[i] >= 0 else o.room_id for i, o in enumerate(objects)]


def _add_inferred_rooms(g: nx.MultiDiGraph, room_map: np.ndarray, grid: "OccupancyMap", z0: float) -> None:
    """Room nodes and ``adjacent`` edges from an inferred room map (scenes that record no rooms)."""
    ids = np.unique(room_map[room_map >= 0])
    if len(ids) == 0:
        return
    cells = np.argwhere(room_map >= 0)
    xy = grid.cell_to_world(cells)
    labels = room_map[cells[:, 0], cells[:, 1]]
    half = grid.resolution / 2
    for rid in ids:
        pts = xy[labels == rid]
        lo, hi = pts.min(axis=0) - half, pts.max(axis=0) + half
        g.add_node(room_node(rid), kind="room", room_id=int(rid), room_type=GENERIC_ROOM, name=f"room_{int(rid)}",
                   position=[*map(float, pts.mean(axis=0)), z0], bounds_min=[float(lo[0]), float(lo[1]), z0],
                   bounds_max=[float(hi[0]), float(hi[1]), z0 + ROOM_HEIGHT],
                   area=round(len(pts) * grid.resolution ** 2, 6), polygon=[], inferred=True)
    # rooms whose cells touch (4-neighbours) are adjacent; the contact's mean point stands for the door
    a = np.concatenate([room_map[:, :-1].ravel(), room_map[:-1, :].ravel()])
    b = np.concatenate([room_map[:, 1:].ravel(), room_map[1:, :].ravel()])
    rows, cols = np.indices(room_map.shape)
    mid_r = np.concatenate([rows[:, :-1].ravel(), rows[:-1, :].ravel() + 0.5])
    mid_c = np.concatenate([cols[:, :-1].ravel() + 0.5, cols[:-1, :].ravel()])
    touch = (a >= 0) & (b >= 0) & (a != b)
    pairs = np.stack([np.minimum(a[touch], b[touch]), np.maximum(a[touch], b[touch])], axis=1)
    mids = grid.cell_to_world(np.stack([mid_r[touch], mid_c[touch]], axis=1))
    for door_id, (ra, rb) in enumerate(np.unique(pairs, axis=0) if len(pairs) else []):
        sel = (pairs[:, 0] == ra) & (pairs[:, 1] == rb)
        attrs = dict(relation="adjacent", door_id=door_id, door_center=mids[sel].mean(axis=0).round(6).tolist(),
                     door_width=round(float(np.ptp(mids[sel], axis=0).max()) + grid.resolution, 6), inferred=True)
        g.add_edge(room_node(ra), room_node(rb), **attrs)
        g.add_edge(room_node(rb), room_node(ra), **attrs)


def _rooms_from_map(objects: list[SceneObject], room_map: np.ndarray, grid: "OccupancyMap") -> list[int | None]:
    """Room of each object: the inferred room at its footprint centre, else the nearest one within 1 m."""
    from scipy import ndimage

    if not objects or not (room_map >= 0).any():
        return [None] * len(objects)
    dist, (ri, ci) = ndimage.distance_transform_edt(room_map < 0, return_indices=True)
    cells = grid.world_to_cell(np.array([o.position[:2] for o in objects]))
    out: list[int | None] = []
    for (r, c), ok in zip(cells, grid.in_bounds(cells)):
        if ok and dist[r, c] * grid.resolution <= 1.0:
            out.append(int(room_map[ri[r, c], ci[r, c]]))
        else:
            out.append(None)
    return out


def build_scene_graph(desc: SceneDescription, *, room_map: np.ndarray | None = None,
                      grid: "OccupancyMap | None" = None) -> SceneGraph:
    """Build the scene graph of ``desc`` (rules in the module docstring).

    When ``desc`` records no rooms, pass the inferred ``room_map`` and the ``grid`` it lives on
    to get room nodes typed by their objects (``inferred=True``), ``in`` edges by the room map and
    ``adjacent`` edges between rooms whose free cells touch.
    """
    g = nx.MultiDiGraph(version=GRAPH_VERSION, scene_id=desc.scene_id)
    z0 = desc.floor_z
    infer = not desc.rooms and room_map is not None and grid is not None
    if infer:
        _add_inferred_rooms(g, room_map, grid, z0)
    for r in sorted(desc.rooms, key=lambda r: r.room_id):
        lo, hi = r.polygon.min(axis=0), r.polygon.max(axis=0)
        g.add_node(room_node(r.room_id), kind="room", room_id=int(r.room_id), room_type=r.room_type,
                   name=r.name or f"{r.room_type}_{r.room_id}", position=[*map(float, r.centroid), z0],
                   bounds_min=[float(lo[0]), float(lo[1]), z0], bounds_max=[float(hi[0]), float(hi[1]), z0 + ROOM_HEIGHT],
                   area=round(r.area, 6), polygon=r.polygon.tolist())
    for d in sorted(desc.doors, key=lambda d: d.door_id):
        a, b = room_node(d.room_ids[0]), room_node(d.room_ids[1])
        if a in g and b in g and a != b:
            attrs = dict(relation="adjacent", door_id=int(d.door_id), door_center=d.center.tolist(), door_width=float(d.width))
            g.add_edge(a, b, **attrs)
            g.add_edge(b, a, **attrs)

    objects = sorted(_scene_objects(desc), key=lambda o: o.instance_id)
    rooms = _rooms_from_map(objects, room_map, grid) if infer else _assign_rooms(desc, objects)
    for obj, room_id in zip(objects, rooms):
        g.add_node(object_node(obj.instance_id), kind="object", category=obj.category,
                   instance_id=int(obj.instance_id), position=obj.position.tolist(),
                   bounds_min=obj.bounds_min.tolist(), bounds_max=obj.bounds_max.tolist(),
                   attributes=to_jsonable(dict(obj.attributes)), room_id=room_id,
                   movable=bool(obj.movable), prim_path=obj.prim_path)
        if room_id is not None and room_node(room_id) in g:
            g.add_edge(object_node(obj.instance_id), room_node(room_id), relation="in")
    if infer:  # name inferred rooms after what they contain
        for rid in {r for r in rooms if r is not None}:
            node = g.nodes.get(room_node(rid))
            if node is not None:
                node["room_type"] = infer_room_type(o.category for o, r in zip(objects, rooms) if r == rid)
                node["name"] = f"{node['room_type']}_{int(rid)}"
    if not objects:
        return SceneGraph(g)

    n = len(objects)
    lo = np.array([o.bounds_min for o in objects])
    hi = np.array([o.bounds_max for o in objects])
    centre = (lo[:, :2] + hi[:, :2]) / 2

    # on: each object rests on the highest support surface below its footprint centre
    surfaces = [_support_surfaces(desc, o) for o in objects]
    owner = np.concatenate([np.full(len(s), i) for i, s in enumerate(surfaces)])
    surf = np.concatenate(surfaces)
    touches = np.abs(lo[:, 2][:, None] - surf[None, :, 4]) <= ON_TOLERANCE + 1e-6  # 0.88 - 0.86 > 0.02 in floats
    covers = ((surf[None, :, 0] <= centre[:, 0, None]) & (centre[:, 0, None] <= surf[None, :, 2]) &
              (surf[None, :, 1] <= centre[:, 1, None]) & (centre[:, 1, None] <= surf[None, :, 3]))
    candidate = touches & covers & (owner[None, :] != np.arange(n)[:, None])
    on_matrix = np.zeros((n, n), dtype=bool)
    for i in np.flatnonzero(candidate.any(axis=1)):
        cand = np.flatnonzero(candidate[i])
        heights = surf[cand, 4]
        top = heights.max()
        j = int(owner[cand[heights == top]].min())  # highest surface; ties → lowest instance id
        on_matrix[i, j] = True
        g.add_edge(object_node(objects[i].instance_id), object_node(objects[j].instance_id),
                   relation="on", height=float(top))

    # near / next_to: horizontal gap between bounds boxes, same room only
    gap_xy = np.maximum(0.0, np.maximum(lo[None, :, :2] - hi[:, None, :2], lo[:, None, :2] - hi[None, :, :2]))
    gap = np.hypot(gap_xy[..., 0], gap_xy[..., 1])
    room_arr = np.array([-1 if r is None else r for r in rooms])
    same_room = (room_arr[:, None] == room_arr[None, :]) & (room_arr[:, None] >= 0)
    on_floor = np.abs(lo[:, 2] - z0) <= FLOOR_CONTACT + 1e-6
    iu, ju = np.triu_indices(n, k=1)
    linked = on_matrix[iu, ju] | on_matrix[ju, iu]
    near = same_room[iu, ju] & (gap[iu, ju] <= NEAR_DISTANCE) & ~linked
    next_to = near & (gap[iu, ju] <= NEXT_TO_DISTANCE) & on_floor[iu] & on_floor[ju] & \
        (np.abs(lo[iu, 2] - lo[ju, 2]) <= FLOOR_CONTACT)
    for rel, mask in (("near", near), ("next_to", next_to)):
        for i, j in zip(iu[mask], ju[mask]):
            a, b = object_node(objects[i].instance_id), object_node(objects[j].instance_id)
            dist = round(float(gap[i, j]), 6)
            g.add_edge(a, b, relation=rel, distance=dist)
            g.add_edge(b, a, relation=rel, distance=dist)
    return SceneGraph(g)
