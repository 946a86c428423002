"""A read-only, indexed view of a scene graph for the instruction pipeline.

It relies only on the public ``SceneGraph`` methods (``objects()``, ``rooms()``,
``relations(instance_id)``, ``room_of(instance_id)``), so any object offering them works.
"""
from __future__ import annotations

from collections import Counter

from .types import ObjectRef, RoomRef


class SceneGraphView:
    """Objects and rooms by id, relations as a set, category counts per room."""

    def __init__(self, scene_graph):
        self.graph = scene_graph
        self.objects: dict[int, dict] = {int(o["instance_id"]): o for o in scene_graph.objects()}
        self.rooms: dict[int, dict] = {int(r["room_id"]): r for r in scene_graph.rooms()}
        self._room_of = {iid: scene_graph.room_of(iid) for iid in self.objects}
        self._edges: dict[int, set[tuple[str, str]]] = {
            iid: {(rel, str(other)) for rel, other in scene_graph.relations(iid)} for iid in self.objects}
        self._category_room_counts = Counter((o["category"], self._room_of[i]) for i, o in self.objects.items())

    def categories(self) -> set[str]:
        """Object categories present in the scene."""
        return {o["category"] for o in self.objects.values()}

    def room_types(self) -> set[str]:
        """Room types present in the scene."""
        return {r["room_type"] for r in self.rooms.values()}

    def room_of(self, instance_id: int) -> int | None:
        """Room id holding the object, ``None`` if it is in no room."""
        return self._room_of.get(instance_id)

    def relations(self, instance_id: int) -> set[tuple[str, str]]:
        """Outgoing ``(relation, other_node_id)`` edges of an object."""
        return self._edges.get(instance_id, set())

    def has_relation(self, instance_id: int, relation: str, other_node: str, symmetric: bool = False) -> bool:
        """Whether the edge exists (in either direction when ``symmetric``)."""
        if (relation, other_node) in self.relations(instance_id):
            return True
        if symmetric and other_node.startswith("obj:"):
            other = int(other_node.split(":", 1)[1])
            return (relation, f"obj:{instance_id}") in self.relations(other)
        return False

    def count_in_room(self, category: str, room_id: int | None) -> int:
        """Number of objects of ``category`` in room ``room_id``."""
        return self._category_room_counts.get((category, room_id), 0)

    def room_ref(self, room_id: int | None) -> RoomRef | None:
        """``RoomRef`` for a room id (``None`` for unknown rooms)."""
        if room_id is None or room_id not in self.rooms:
            return None
        return RoomRef(int(room_id), str(self.rooms[room_id]["room_type"]))

    def object_ref(self, instance_id: int) -> ObjectRef:
        """``ObjectRef`` for an instance id (``KeyError`` if absent)."""
        obj = self.objects[instance_id]
        attrs = tuple(sorted((str(k), str(v)) for k, v in (obj.get("attributes") or {}).items()
                             if isinstance(v, str)))
        pos = tuple(float(v) for v in obj.get("position", (0.0, 0.0, 0.0)))
        return ObjectRef(int(instance_id), str(obj["category"]), self.room_ref(self._room_of[instance_id]), attrs, pos)
