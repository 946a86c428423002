"""Referring expressions that pick out exactly one object or room from where they are said
(instruction language version 2).

A *scope* is what a listener standing somewhere can mean: for an object, the objects of the room the
agent is in when the clause is said and, with ``Sightlines`` (the occupancy grid) and the point it
is said at (``viewpoint``: where the path passes closest to the object), every object of another
room in view from there (a straight line of at most ``VIEW_RADIUS`` m to its footprint crossing no
wall: "the sofa" is not unique when another sofa shows through the doorway); for a room, the rooms
next to the agent's room (through a door, the scene graph's ``adjacent`` edges) and that room
itself, or every room when the graph has no ``adjacent`` edges. Within its scope an object is told
apart, in this order, by

1. its category alone ("the sofa") when no other object of that category is in scope;
2. attributes (colour, material, size: the fewest that exclude every rival, "the red armchair");
   a rival lacking an attribute is *not* excluded by it (it might have that colour);
3. a scene-graph relation to an anchor that is itself unique by category in the same scope, i.e.
   from where the reference is said ("the lamp on the nightstand" only when no other nightstand is
   in the room or in view from there); rivals without that edge to that anchor are excluded;
4. an object resting on it, said with an indefinite article ("the desk with a laptop on it"):
   rivals without an object of that category on them are excluded;
5. an ordinal along the path ("the second armchair on your left"): the rivals on the same side of
   the path, ordered by where the path passes closest to them (needs the path; positions closer
   than ``ORDINAL_GAP`` along it, or too close to the path to have a side, cannot be ordered).

A doorway is named by an ordinal along the path from the room it leaves ("the second doorway on
your left"): the doors of that room (the graph's ``adjacent`` edges and their ``door_center``)
within ``DOOR_VISIBLE`` metres of the path, on the side the path turns to through the doorway,
counted in the order the path reaches them (``doorways_along``); ``doors_between`` counts a room's
doors (into one room), which tells whether "the doorway into the kitchen" is one.

A room whose type is not unique in scope is named by its contents ("the bedroom with the desk"):
a category present in it and absent from every same-type room in scope. What cannot be made
unique is ``None``; the caller drops it and counts it (``dropped`` reasons).

``resolve_object`` / ``resolve_room`` are the inverse used by the ``Verifier``: from the claims of
a mention (category, attributes, relation, ordinal, contents) and its scope they list every
object/room the words could denote; a valid reference denotes exactly one.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np

from ...scenes.occupancy import FREE
from .graph import SceneGraphView
from .types import SYMMETRIC_RELATIONS, ObjectRef, RelationFact, RoomRef

#: Attribute keys in the order they are tried (one key first, then pairs, then all three).
ATTRIBUTE_KEYS = ("color", "material", "size")
#: Relations usable to tell an object apart, by preference.
REFERENCE_RELATIONS = ("on", "next_to", "near")
#: Categories never referred to (structure).
STRUCTURE = frozenset({"wall", "floor", "ceiling", "door_frame", "door", "window", "rug"})
#: Two objects whose closest approaches along the path are nearer than this (m) are not ordered.
ORDINAL_GAP = 0.5
#: An object whose footprint centre is nearer the path than this (m) has no side.
SIDE_MIN_OFFSET = 0.25
#: A room is named by contents only of this footprint (m, longer side) or more: furniture.
CONTENTS_MIN_EXTENT = 0.5
#: A door is passed through when the path comes this close (m) to its centre, and counted when
#: the path passes within ``DOOR_VISIBLE`` of it.
DOOR_THROUGH = 0.6
DOOR_VISIBLE = 3.0
#: Ordinals beyond this are not said ("the fifth chair" is not something a person counts).
MAX_ORDINAL = 3
#: Objects of other rooms farther than this (m) from where a reference is said are not in view.
VIEW_RADIUS = 6.0


@dataclass(frozen=True)
class Reference:
    """How an object is told apart in its scope room.

    ``needs`` is what made it unique: ``category`` (alone), ``attribute``, ``relation``
    (including ``carries``: an object resting on it) or ``ordinal``; ``attributes``, ``relation``
    and ``carries`` may be set without being needed (a decorative colour or relation).
    ``ordinal`` is ``(n, side)`` with side ``left``/``right``. ``viewpoint`` is where it is said
    (``None``: the room alone is the scope); ``seen_rivals`` counts the rivals of other rooms in
    view from there.
    """

    obj: ObjectRef
    scope_room: int | None
    needs: str = "category"
    attributes: tuple[str, ...] = ()
    relation: RelationFact | None = None
    ordinal: tuple[int, str] | None = None
    carries: ObjectRef | None = None
    viewpoint: tuple[float, float] | None = None
    seen_rivals: int = 0


@dataclass(frozen=True)
class RoomReference:
    """A room as named from ``scope_room``: by type, by type and a category it contains ("the
    bedroom with the desk"), by type and a piece of furniture told apart by what it looks like
    (``contents_attributes``: "the bedroom with the oak wardrobe"), or, ``generic``, by contents
    alone ("the room with the piano")."""

    room: RoomRef
    scope_room: int | None
    contents: ObjectRef | None = None
    generic: bool = False
    contents_attributes: tuple[str, ...] = ()


class PathFrame:
    """Arc length and side of points relative to a dense 2-D path (for ordinals)."""

    def __init__(self, dense: np.ndarray):
        self.dense = np.asarray(dense, dtype=float).reshape(-1, 2)
        seg = np.diff(self.dense, axis=0)
        self.arc = np.concatenate([[0.0], np.cumsum(np.hypot(*seg.T))]) if len(self.dense) > 1 else np.zeros(1)
        self._dirs = seg if len(seg) else np.array([[1.0, 0.0]])

    def locate(self, point) -> tuple[float, str | None]:
        """``(s, side)``: arc length of the path point closest to ``point`` and the side (``left``/
        ``right``) it lies on there (``None`` when within ``SIDE_MIN_OFFSET`` of the path)."""
        p = np.asarray(point, dtype=float)[:2]
        k = int(np.argmin(np.hypot(*(self.dense - p).T)))
        d = self._dirs[min(k, len(self._dirs) - 1)]
        off = p - self.dense[k]
        if np.hypot(*off) < SIDE_MIN_OFFSET:
            return float(self.arc[k]), None
        cross = d[0] * off[1] - d[1] * off[0]
        return float(self.arc[k]), ("left" if cross > 0 else "right")

    def closest(self, point) -> tuple[float, float]:
        """``(s, distance)``: arc length of the path point closest to ``point`` and how far it is."""
        p = np.asarray(point, dtype=float)[:2]
        dist = np.hypot(*(self.dense - p).T)
        k = int(np.argmin(dist))
        return float(self.arc[k]), float(dist[k])

    def viewpoint(self, point) -> tuple[float, float]:
        """The path point closest to ``point``: where a reference to an object there is said."""
        p = np.asarray(point, dtype=float)[:2]
        k = int(np.argmin(np.hypot(*(self.dense - p).T)))
        return float(self.dense[k, 0]), float(self.dense[k, 1])

    def approach_side(self, point, s: float, back: float = 1.5) -> str | None:
        """The side ``point`` lies on as seen ``back`` metres before arc length ``s``, facing along
        the path there (the side a doorway the path turns into is on), ``None`` straight ahead."""
        k = int(np.searchsorted(self.arc, max(s - back, 0.0)))
        k = min(k, len(self._dirs) - 1)
        d, off = self._dirs[k], np.asarray(point, dtype=float)[:2] - self.dense[k]
        norm = np.hypot(*d) * np.hypot(*off)
        if norm < 1e-9:
            return None
        cross = (d[0] * off[1] - d[1] * off[0]) / norm
        if abs(cross) < 0.35:       # within ~20 degrees of straight ahead
            return None
        return "left" if cross > 0 else "right"


def _footprint(obj: dict) -> tuple[np.ndarray, np.ndarray]:
    """An object's 2-D footprint ``(lo, hi)`` (its position when it has no bounds)."""
    lo = np.asarray(obj.get("bounds_min", obj["position"]), dtype=float)[:2]
    hi = np.asarray(obj.get("bounds_max", obj["position"]), dtype=float)[:2]
    return np.minimum(lo, hi), np.maximum(lo, hi)


class Sightlines:
    """What is in view from a point, on the occupancy grid of the scene's height band: a straight
    line sees past furniture (cells inside a non-structure object's footprint) but not through a
    wall (any other OCCUPIED or UNKNOWN cell)."""

    def __init__(self, occupancy, scene_graph):
        view = scene_graph if isinstance(scene_graph, SceneGraphView) else SceneGraphView(scene_graph)
        self.occupancy = occupancy
        grid = np.asarray(occupancy.grid)
        see_through = np.zeros(grid.shape, dtype=bool)
        for obj in view.objects.values():
            if obj["category"] in STRUCTURE:
                continue
            lo, hi = _footprint(obj)
            (r0, c0), (r1, c1) = occupancy.world_to_cell(np.stack([lo, hi]))
            r0, c0 = max(int(r0), 0), max(int(c0), 0)
            see_through[r0:max(int(r1) + 1, r0), c0:max(int(c1) + 1, c0)] = True
        self.wall = (grid != FREE) & ~see_through

    def clear(self, a, b) -> bool:
        """Whether the segment from ``a`` to ``b`` (world x, y) stays on the map and crosses no wall."""
        a, b = np.asarray(a, dtype=float)[:2], np.asarray(b, dtype=float)[:2]
        steps = max(int(np.ceil(np.hypot(*(b - a)) / (self.occupancy.resolution / 2))), 1)
        cells = self.occupancy.world_to_cell(a + np.linspace(0.0, 1.0, steps + 1)[:, None] * (b - a))
        if not np.asarray(self.occupancy.in_bounds(cells), dtype=bool).all():
            return False
        return not self.wall[cells[:, 0], cells[:, 1]].any()

    def sees(self, point, obj: dict) -> bool:
        """Whether object ``obj`` is in view from ``point``: its footprint within ``VIEW_RADIUS`` and
        a clear line to its nearest footprint point or to its centre."""
        p = np.asarray(point, dtype=float)[:2]
        lo, hi = _footprint(obj)
        nearest = np.clip(p, lo, hi)
        if np.hypot(*(nearest - p)) > VIEW_RADIUS:
            return False
        return self.clear(p, nearest) or self.clear(p, (lo + hi) / 2)


def _attrs(view: SceneGraphView, iid: int) -> dict:
    return view.objects[iid].get("attributes") or {}


def _excluded_by_attributes(view: SceneGraphView, target: int, rival: int, keys) -> bool:
    """A rival is excluded when it has one of ``keys`` with a value different from the target's."""
    mine, theirs = _attrs(view, target), _attrs(view, rival)
    return any(k in theirs and theirs[k] != mine.get(k) for k in keys)


class Referrer:
    """Builds and resolves references in one scene graph (``SceneGraphView``)."""

    def __init__(self, scene_graph, sightlines: Sightlines | None = None):
        self.view = scene_graph if isinstance(scene_graph, SceneGraphView) else SceneGraphView(scene_graph)
        self.sightlines = sightlines
        self._adjacent: dict[int, set[int]] = {}
        self._doors: dict[int, list[tuple[int, tuple[float, float]]]] = {}
        graph = getattr(self.view.graph, "graph", None)   # the networkx graph: room ``adjacent`` edges
        if graph is not None:
            for u, v, data in sorted(graph.edges(data=True), key=lambda e: (str(e[0]), str(e[1]))):
                if data.get("relation") == "adjacent" and str(u).startswith("room:") and str(v).startswith("room:"):
                    a, b = int(str(u)[5:]), int(str(v)[5:])
                    self._adjacent.setdefault(a, set()).add(b)
                    self._adjacent.setdefault(b, set()).add(a)
                    if data.get("door_center") is not None:
                        door = (b, tuple(float(x) for x in data["door_center"][:2]))
                        if door not in self._doors.setdefault(a, []):
                            self._doors[a].append(door)

    # ------------------------------------------------------------------ scopes
    def objects_in(self, room_id: int | None, category: str) -> list[int]:
        """Instance ids of ``category`` in room ``room_id`` (the object scope)."""
        view = self.view
        return sorted(i for i, o in view.objects.items() if o["category"] == category and view.room_of(i) == room_id)

    def scope_objects(self, room_id: int | None, category: str,
                      viewpoint: tuple[float, float] | None = None) -> list[int]:
        """The object scope: ``objects_in(room_id, category)`` and, with sightlines and a
        ``viewpoint``, the objects of ``category`` in other rooms in view from it."""
        here = self.objects_in(room_id, category)
        if self.sightlines is None or viewpoint is None:
            return here
        view = self.view
        seen = [i for i, o in view.objects.items() if o["category"] == category and view.room_of(i) != room_id
                and self.sightlines.sees(viewpoint, o)]
        return sorted(here + seen)

    def adjacent(self, room_a: int, room_b: int) -> bool | None:
        """Whether rooms ``room_a`` and ``room_b`` are neighbours (scene-graph ``adjacent``); ``None``
        when the graph records no adjacency at all."""
        if not self._adjacent:
            return None
        return room_b in self._adjacent.get(room_a, set())

    def room_scope(self, room_id: int | None) -> list[int]:
        """Rooms a listener in ``room_id`` can mean: it and its neighbours (every room without
        adjacency data or outside any room)."""
        if room_id is None or not self._adjacent:
            return sorted(self.view.rooms)
        return sorted({room_id} | self._adjacent.get(room_id, set()))

    # ------------------------------------------------------------------ objects
    def refer(self, instance_id: int, scope_room: int | None = None, *, path: PathFrame | None = None,
              rng: np.random.Generator | None = None, decorate: float = 0.0) -> Reference | None:
        """The simplest reference to ``instance_id`` unique among its category in its scope: the
        room ``scope_room`` (default: its own room) and, with sightlines and a ``path``, what is in
        view from where the path passes closest to it. ``None`` when none is. With ``rng``, a
        category-only reference gets, with probability ``decorate`` each, one attribute, a relation
        or a carried object it does not need."""
        view = self.view
        obj = view.object_ref(instance_id)
        if obj.category in STRUCTURE:
            return None
        scope_room = view.room_of(instance_id) if scope_room is None else scope_room
        if view.room_of(instance_id) != scope_room:
            return None
        viewpoint = path.viewpoint(view.objects[instance_id]["position"]) if path is not None \
            and self.sightlines is not None else None
        rivals = [i for i in self.scope_objects(scope_room, obj.category, viewpoint) if i != instance_id]
        seen = sum(1 for r in rivals if view.room_of(r) != scope_room)
        made = dict(viewpoint=viewpoint, seen_rivals=seen)
        if not rivals:
            if rng is None or decorate <= 0:
                return Reference(obj, scope_room, "category", **made)
            keys = [k for k in ATTRIBUTE_KEYS if k in obj.attribute_dict]
            extra = (keys[int(rng.integers(len(keys)))],) if keys and rng.random() < decorate else ()
            fact = self._distinguishing_relation(instance_id, [], scope_room, viewpoint) \
                if rng.random() < decorate else None
            carried = self._carried(instance_id, []) if fact is None and rng.random() < decorate else None
            return Reference(obj, scope_room, "category", attributes=extra, relation=fact, carries=carried, **made)
        mine = obj.attribute_dict
        keys_avail = [k for k in ATTRIBUTE_KEYS if k in mine]
        for n in range(1, len(keys_avail) + 1):
            for keys in combinations(keys_avail, n):
                if all(_excluded_by_attributes(view, instance_id, r, keys) for r in rivals):
                    return Reference(obj, scope_room, "attribute", attributes=keys, **made)
        fact = self._distinguishing_relation(instance_id, rivals, scope_room, viewpoint)
        if fact is not None:
            return Reference(obj, scope_room, "relation", relation=fact, **made)
        carried = self._carried(instance_id, rivals)
        if carried is not None:
            return Reference(obj, scope_room, "relation", carries=carried, **made)
        if path is not None:
            ordinal = self._ordinal(instance_id, rivals, path)
            if ordinal is not None:
                return Reference(obj, scope_room, "ordinal", ordinal=ordinal, **made)
        return None

    def _has_edge(self, iid: int, relation: str, anchor: int) -> bool:
        return self.view.has_relation(iid, relation, f"obj:{anchor}", symmetric=relation in SYMMETRIC_RELATIONS)

    def _distinguishing_relation(self, instance_id: int, rivals: list[int], scope_room: int | None,
                                 viewpoint: tuple[float, float] | None) -> RelationFact | None:
        """A relation to an anchor that is the only one of its category in the scope (``scope_room``
        and what is in view from ``viewpoint``) and that no rival has (lowest relation, anchor id)."""
        view = self.view
        category = view.objects[instance_id]["category"]
        best = None
        for rel, node in sorted(view.relations(instance_id)):
            if rel not in REFERENCE_RELATIONS or not node.startswith("obj:"):
                continue
            anchor = int(node[4:])
            a = view.objects.get(anchor)
            if a is None or a["category"] == category or a["category"] in STRUCTURE:
                continue
            if self.scope_objects(scope_room, a["category"], viewpoint) != [anchor]:
                continue
            if any(self._has_edge(r, rel, anchor) for r in rivals):
                continue
            key = (REFERENCE_RELATIONS.index(rel), anchor)
            if best is None or key < best[0]:
                best = (key, RelationFact(rel, view.object_ref(anchor)))
        return best[1] if best else None

    def _on_top(self, iid: int) -> list[int]:
        """Objects resting on ``iid`` (scene-graph ``on`` edges into it), by instance id."""
        node = f"obj:{iid}"
        return sorted(o for o in self.view.objects if ("on", node) in self.view.relations(o))

    def _carried(self, instance_id: int, rivals: list[int]) -> ObjectRef | None:
        """An object on ``instance_id`` whose category is on no rival (lowest instance id)."""
        view = self.view
        for other in self._on_top(instance_id):
            category = view.objects[other]["category"]
            if category in STRUCTURE:
                continue
            if not any(view.objects[o]["category"] == category for r in rivals for o in self._on_top(r)):
                return view.object_ref(other)
        return None

    def _ordinal(self, instance_id: int, rivals: list[int], path: PathFrame) -> tuple[int, str] | None:
        s, side = path.locate(self.view.objects[instance_id]["position"])
        if side is None:
            return None
        same_side = []
        for r in rivals:
            rs, rside = path.locate(self.view.objects[r]["position"])
            if rside is None:
                if abs(rs - s) < ORDINAL_GAP:
                    return None       # a rival straight ahead at the same place: not countable
                continue
            if rside == side:
                if abs(rs - s) < ORDINAL_GAP:
                    return None
                same_side.append(rs)
        n = 1 + sum(1 for rs in same_side if rs < s)
        return (n, side) if n <= MAX_ORDINAL else None

    # ------------------------------------------------------------------ rooms
    def refer_room(self, room_id: int, scope_room: int | None, by_contents: bool = False,
                   generic: bool = False) -> RoomReference | None:
        """The room ``room_id`` named from ``scope_room``: by type when no other room of its type is
        in scope, else by a piece of furniture it holds that no same-type room in scope holds (the
        category found in fewest rooms of the scene first), else by a piece of furniture told apart
        by its attributes from every one of its category in those rooms ("the bedroom with the oak
        wardrobe", ``contents_attributes``; the fewest attributes first). ``by_contents``: by
        contents even when the type would do; ``generic`` (with ``by_contents``): "the room with …"
        when no room at all in scope holds that category."""
        view = self.view
        room = view.room_ref(room_id)
        if room is None:
            return None
        scope = self.room_scope(scope_room)
        same = [r for r in scope if r != room_id and view.rooms[r]["room_type"] == room.room_type]
        if not same and not by_contents:
            return RoomReference(room, scope_room)
        here = self._furniture(room_id)
        spread = {c: sum(1 for r in view.rooms if view.count_in_room(c, r)) for c in here}
        others = [r for r in scope if r != room_id]
        for category, ids in sorted(here.items(), key=lambda kv: (len(kv[1]) != 1, spread[kv[0]], kv[0])):
            if len(ids) != 1 or any(view.count_in_room(category, r) for r in same):
                continue
            alone = generic and by_contents and not any(view.count_in_room(category, r) for r in others)
            return RoomReference(room, scope_room, contents=view.object_ref(ids[0]), generic=alone)
        if not same:
            return RoomReference(room, scope_room)
        return self._room_by_attributes(room, scope_room, here, same)

    def _furniture(self, room_id: int) -> dict[str, list[int]]:
        """{category: instance ids} of the pieces of furniture (``CONTENTS_MIN_EXTENT``) in a room."""
        view = self.view
        here: dict[str, list[int]] = {}
        for iid, o in sorted(view.objects.items()):
            lo, hi = o.get("bounds_min", o["position"]), o.get("bounds_max", o["position"])
            extent = max(abs(float(hi[0]) - float(lo[0])), abs(float(hi[1]) - float(lo[1])))
            if view.room_of(iid) == room_id and o["category"] not in STRUCTURE and extent >= CONTENTS_MIN_EXTENT:
                here.setdefault(o["category"], []).append(iid)
        return here

    def _room_by_attributes(self, room: RoomRef, scope_room: int | None, here: dict[str, list[int]],
                            same: list[int]) -> RoomReference | None:
        """``room`` named by one of its pieces of furniture and the fewest attributes that tell it
        from every other object of its category (of any size) in the room and in the same-type
        rooms ``same``."""
        view = self.view
        candidates = []
        for category, ids in here.items():
            rivals_elsewhere = [i for r in same for i in self.objects_in(r, category)]
            for iid in ids:
                rivals = [i for i in self.objects_in(room.room_id, category) if i != iid] + rivals_elsewhere
                mine = [k for k in ATTRIBUTE_KEYS if k in _attrs(view, iid)]
                for n in range(1, len(mine) + 1):
                    keys = next((keys for keys in combinations(mine, n)
                                 if all(_excluded_by_attributes(view, iid, r, keys) for r in rivals)), None)
                    if keys is not None:
                        candidates.append((n, ATTRIBUTE_KEYS.index(keys[0]), category, iid, keys))
                        break
        if not candidates:
            return None
        _, _, _, iid, keys = min(candidates)
        return RoomReference(room, scope_room, contents=view.object_ref(iid), contents_attributes=keys)

    # ------------------------------------------------------------------ doorways
    def doorways_along(self, from_room: int, path: PathFrame) -> list[tuple[float, str, int, bool]]:
        """The doors of ``from_room`` the path passes within ``DOOR_VISIBLE`` m of, in path order:
        ``(s, side, to_room, through)``; ``through`` when the path goes through it (its side is
        then the side it turns to, else the side it lies on); doors straight ahead are left out."""
        out = []
        for to_room, centre in self._doors.get(from_room, []):
            s, dist = path.closest(centre)
            if dist > DOOR_VISIBLE:
                continue
            through = dist <= DOOR_THROUGH
            side = path.approach_side(centre, s) if through else path.locate(centre)[1]
            if side is not None:
                out.append((s, side, to_room, through))
        return sorted(out)

    def doors_between(self, room_a: int | None, room_b: int | None = None) -> int:
        """How many doors (the ``adjacent`` edges' ``door_center``) room ``room_a`` has, into room
        ``room_b`` only when given; 0 when the graph records none."""
        return sum(1 for to_room, _ in self._doors.get(room_a, []) if room_b is None or to_room == room_b)

    def doorway_ordinal(self, from_room: int | None, to_room: int, path: PathFrame) -> tuple[int, str] | None:
        """``(n, side)``: the doorway the path takes from ``from_room`` into ``to_room`` is the n-th
        on that side; ``None`` when it is straight ahead, not found, tied with another or beyond
        ``MAX_ORDINAL``."""
        if from_room is None:
            return None
        doors = self.doorways_along(from_room, path)
        target = next((d for d in doors if d[2] == to_room and d[3]), None)
        if target is None:
            return None
        s_t, side = target[0], target[1]
        same = [d for d in doors if d[1] == side and d is not target]
        if any(abs(d[0] - s_t) < ORDINAL_GAP for d in same):
            return None
        n = 1 + sum(1 for d in same if d[0] < s_t)
        return (n, side) if n <= MAX_ORDINAL else None

    def resolve_doorway(self, from_room: int, ordinal: tuple[int, str], path: PathFrame) -> list[int]:
        """The rooms the n-th doorway on ``side`` (from ``from_room``, along ``path``) may lead to:
        one room when that doorway is taken and not tied with another on that side."""
        n, side = ordinal
        on_side = [d for d in self.doorways_along(from_room, path) if d[1] == side]
        if not (1 <= n <= len(on_side)):
            return []
        s_n, _, to_room, through = on_side[n - 1]
        ties = [d for d in on_side if d is not on_side[n - 1] and abs(d[0] - s_n) < ORDINAL_GAP]
        return [to_room] + [-1] * len(ties) if through else []

    # ------------------------------------------------------------------ resolving (Verifier)
    def resolve_object(self, category: str, scope_room: int | None, attributes: dict | None = None,
                       relation: tuple[str, int] | None = None, ordinal: tuple[int, str] | None = None,
                       path: PathFrame | None = None, carries: str | None = None,
                       viewpoint: tuple[float, float] | None = None) -> list[int]:
        """Every object in scope (``scope_objects``) the words could denote (conservatively: an
        object without a claimed attribute might have it). ``relation`` is ``(relation, anchor id)``;
        the words name only the anchor's category, so an object related to any object of that
        category in the same scope matches (the anchor's own uniqueness is its own mention's check)."""
        view = self.view
        out = []
        anchors = []
        if relation is not None:
            anchor = view.objects.get(relation[1])
            anchors = self.scope_objects(scope_room, anchor["category"], viewpoint) if anchor is not None else []
        for iid in self.scope_objects(scope_room, category, viewpoint):
            have = _attrs(view, iid)
            if any(k in have and have[k] != v for k, v in (attributes or {}).items()):
                continue
            if relation is not None and not any(self._has_edge(iid, relation[0], a) for a in anchors):
                continue
            if carries is not None and not any(view.objects[o]["category"] == carries for o in self._on_top(iid)):
                continue
            out.append(iid)
        if ordinal is not None:
            if path is None:
                return out
            n, side = ordinal
            located = sorted((path.locate(view.objects[i]["position"]) + (i,) for i in out),
                             key=lambda t: t[0])
            on_side = [(s, i) for s, sd, i in located if sd == side]
            unsided_near = [s for s, sd, _ in located if sd is None]
            if not (1 <= n <= len(on_side)):
                return []
            s_n, pick = on_side[n - 1]
            ties = [s for s, _ in on_side if s != s_n and abs(s - s_n) < ORDINAL_GAP]
            ties += [s for s in unsided_near if abs(s - s_n) < ORDINAL_GAP]
            return [pick] + [-1] * len(ties)     # a tie makes the count ambiguous
        return out

    def resolve_room(self, room_type: str | None, scope_room: int | None, contents: str | None = None,
                     contents_attributes: dict | None = None) -> list[int]:
        """Every room in scope of type ``room_type`` (any type: ``None``) containing an object of
        category ``contents`` when given, with the claimed ``contents_attributes`` (conservatively:
        an object without a claimed attribute might have it)."""
        view = self.view
        claimed = dict(contents_attributes or {})

        def holds(room_id: int) -> bool:
            if not claimed:
                return view.count_in_room(contents, room_id) > 0
            return any(not any(k in _attrs(view, i) and _attrs(view, i)[k] != v for k, v in claimed.items())
                       for i in self.objects_in(room_id, contents))

        return [r for r in self.room_scope(scope_room) if room_type in (None, view.rooms[r]["room_type"])
                and (contents is None or holds(r))]


__all__ = ["ATTRIBUTE_KEYS", "DOOR_THROUGH", "DOOR_VISIBLE", "MAX_ORDINAL", "ORDINAL_GAP", "PathFrame", "Reference",
           "Referrer", "RoomReference", "REFERENCE_RELATIONS", "Sightlines", "VIEW_RADIUS"]
