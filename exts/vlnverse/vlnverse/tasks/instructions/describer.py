"""Describer: grounded facts about a goal object or a planned path, from the scene-graph prior.

* ``describe_target(instance_id)`` → ``TargetFacts``: the object, its room, attributes that
  distinguish it from same-category objects in that room, and a scene-graph relation to another
  object (``on`` preferred, then ``next_to``/``near``/``in``) chosen to disambiguate when possible.
* ``describe_route(dense, waypoints, start_yaw)`` → ``RouteFacts``: the rooms crossed (room map
  sampled at dense path points), landmarks within ``landmark_radius`` of the path, turns at the
  waypoints (left/right/around from heading changes, with the landmark nearest each turn) and
  the end point (its room and the nearest landmark or the goal object).

An optional ``FrameCaptioner`` (any callable ``frames -> str``) may caption rendered frames;
it is off by default and its caption is only attached to the facts (the Verifier still rules).
"""
from __future__ import annotations

import math
from typing import Callable, Protocol, Sequence

import numpy as np

from ...core.geometry import wrap_angle
from .graph import SceneGraphView
from .types import ObjectRef, RelationFact, RoomRef, RouteEvent, RouteFacts, TargetFacts

#: Relations usable to single out a target, in order of preference.
TARGET_RELATIONS = ("on", "next_to", "near", "in")
#: Structural categories never used as landmarks.
NON_LANDMARKS = frozenset({"wall", "floor", "ceiling", "door_frame", "door", "window", "rug"})


class FrameCaptioner(Protocol):
    """Optional vision-language hook: caption a list of RGB frames (H, W, 3) uint8."""

    def __call__(self, frames: Sequence[np.ndarray]) -> str: ...


def turn_direction(delta_yaw: float, turn_deg: float = 35.0, around_deg: float = 150.0) -> str | None:
    """``left``/``right``/``around`` for a heading change (rad, CCW positive), ``None`` if straight."""
    deg = math.degrees(float(wrap_angle(delta_yaw)))
    if abs(deg) >= around_deg:
        return "around"
    if abs(deg) >= turn_deg:
        return "left" if deg > 0 else "right"
    return None


class Describer:
    """Produces ``TargetFacts``/``RouteFacts`` from a scene graph, a room map and its grid.

    ``room_map`` is the (H, W) int room-id grid and ``grid`` the ``OccupancyMap`` it lives on
    (anything with ``world_to_cell``/``in_bounds``); both are needed for ``describe_route``.
    Landmarks along the path lie within ``landmark_radius`` of it (in the room it crosses there);
    the end point may be described by a landmark up to ``end_radius`` away; heading changes
    less than ``turn_merge`` metres apart along the path are merged into one turn.
    """

    def __init__(self, scene_graph, room_map: np.ndarray | None = None, grid=None, *,
                 landmark_radius: float = 1.5, end_radius: float = 3.0, min_landmark_extent: float = 0.35,
                 turn_merge: float = 1.0, captioner: FrameCaptioner | None = None):
        self.view = scene_graph if isinstance(scene_graph, SceneGraphView) else SceneGraphView(scene_graph)
        self.room_map = room_map
        self.grid = grid
        self.landmark_radius = float(landmark_radius)
        self.end_radius = float(end_radius)
        self.turn_merge = float(turn_merge)
        self.min_landmark_extent = float(min_landmark_extent)
        self.captioner = captioner
        ids = sorted(self.view.objects)
        self._ids = np.array(ids, dtype=np.int64)
        if ids:
            self._bmin = np.array([self.view.objects[i].get("bounds_min", self.view.objects[i]["position"])
                                   for i in ids], dtype=float)[:, :2]
            self._bmax = np.array([self.view.objects[i].get("bounds_max", self.view.objects[i]["position"])
                                   for i in ids], dtype=float)[:, :2]
        else:
            self._bmin = self._bmax = np.zeros((0, 2))

    @classmethod
    def from_context(cls, ctx, **kwargs) -> "Describer":
        """Build from a task ``SceneContext`` (its scene graph, room map and navigable grid)."""
        maps = ctx.maps
        return cls(maps.scene_graph, maps.room_map, maps.navigable, **kwargs)

    # ------------------------------------------------------------------ targets
    def describe_target(self, instance_id: int, frames: Sequence[np.ndarray] | None = None) -> TargetFacts:
        """Facts singling out object ``instance_id`` in the whole scene.

        Rivals are the other objects of its category. Attributes are added (colour, size,
        material) while they exclude rivals; naming the room type excludes rivals in rooms of
        other types (``needs_room``); a relation to an anchor object excludes rivals without the
        same relation to an anchor of the same category (``needs_relation``).
        """
        view = self.view
        target = view.object_ref(instance_id)
        room_id = view.room_of(instance_id)
        room_type = target.room.room_type if target.room else None
        rivals = [i for i, o in view.objects.items() if i != instance_id and o["category"] == target.category]
        attrs = target.attribute_dict
        distinguishing: list[str] = []
        remaining = list(rivals)
        for key in ("color", "size", "material"):
            if not remaining or key not in attrs:
                continue
            kept = [i for i in remaining if (view.objects[i].get("attributes") or {}).get(key) == attrs[key]]
            if len(kept) < len(remaining):
                distinguishing.append(key)
                remaining = kept

        def room_type_of(i: int) -> str | None:
            ref = view.room_ref(view.room_of(i))
            return ref.room_type if ref else None

        same_type = [i for i in remaining if room_type_of(i) == room_type]
        needs_room = len(same_type) < len(remaining)
        relation = self._pick_relation(instance_id, same_type)
        needs_relation = False
        if relation is not None and same_type:
            kept = [i for i in same_type if self._shares_relation(i, relation)]
            needs_relation = len(kept) < len(same_type)
            same_type = kept
        caption = self.captioner(frames) if (self.captioner is not None and frames is not None) else None
        peers_in_room = sum(1 for i in rivals if view.room_of(i) == room_id)
        return TargetFacts(target=target, room=target.room, relation=relation,
                           distinguishing_attributes=tuple(distinguishing), same_category_in_room=peers_in_room + 1,
                           unique=not same_type, needs_room=needs_room, needs_relation=needs_relation,
                           caption=caption)

    def _shares_relation(self, other_id: int, fact: RelationFact) -> bool:
        """Whether ``other_id`` has the same relation to an anchor of the same category."""
        for rel, node in self.view.relations(other_id):
            if rel != fact.relation or not node.startswith("obj:"):
                continue
            anchor = self.view.objects.get(int(node.split(":", 1)[1]))
            if anchor is not None and anchor["category"] == fact.anchor.category:
                return True
        return False

    def _pick_relation(self, instance_id: int, rivals: list[int]) -> RelationFact | None:
        """The best relation to an unambiguous anchor (its category unique in its room): one that
        excludes every rival first, then by ``TARGET_RELATIONS`` order, then anchor id."""
        view = self.view
        target_cat = view.objects[instance_id]["category"]
        candidates = []
        for rel, node in sorted(view.relations(instance_id)):
            if rel not in TARGET_RELATIONS or not node.startswith("obj:"):
                continue
            anchor_id = int(node.split(":", 1)[1])
            anchor = view.objects.get(anchor_id)
            if anchor is None or anchor["category"] == target_cat or anchor["category"] in NON_LANDMARKS:
                continue
            # The anchor must be nameable unambiguously: unique category in its room.
            if view.count_in_room(anchor["category"], view.room_of(anchor_id)) > 1:
                continue
            fact = RelationFact(rel, view.object_ref(anchor_id))
            distinguishes = not any(self._shares_relation(r, fact) for r in rivals)
            candidates.append((not distinguishes, TARGET_RELATIONS.index(rel), anchor_id, fact))
        if not candidates:
            return None
        return min(candidates, key=lambda c: c[:3])[3]

    # ------------------------------------------------------------------ routes
    def rooms_at(self, points: np.ndarray) -> np.ndarray:
        """Room id (``-1`` outside rooms/off the map) at each (N, 2) world point."""
        pts = np.asarray(points, dtype=float).reshape(-1, 2)
        if self.room_map is None or self.grid is None:
            raise ValueError("Describer needs room_map and grid to locate rooms along a path")
        rc = np.asarray(self.grid.world_to_cell(pts))
        ok = np.asarray(self.grid.in_bounds(rc), dtype=bool)
        out = np.full(len(pts), -1, dtype=np.int64)
        out[ok] = self.room_map[rc[ok, 0], rc[ok, 1]]
        return out

    def _landmark_ids(self, exclude_categories: set[str]) -> np.ndarray:
        """Indices (into ``self._ids``) of objects usable as landmarks: big enough, not structure,
        unique category in their room (so "the sofa" is unambiguous)."""
        view = self.view
        extent = (self._bmax - self._bmin).max(axis=1) if len(self._ids) else np.zeros(0)
        keep = []
        for k, iid in enumerate(self._ids):
            obj = view.objects[int(iid)]
            cat = obj["category"]
            if cat in NON_LANDMARKS or cat in exclude_categories or extent[k] < self.min_landmark_extent:
                continue
            if view.room_of(int(iid)) is None or view.count_in_room(cat, view.room_of(int(iid))) != 1:
                continue
            keep.append(k)
        return np.array(keep, dtype=np.int64)

    def _box_distances(self, idx: np.ndarray, points: np.ndarray) -> np.ndarray:
        """(len(idx), N) distance from each object's 2-D footprint to each point."""
        bmin, bmax = self._bmin[idx][:, None, :], self._bmax[idx][:, None, :]
        d = np.maximum(np.maximum(bmin - points[None], points[None] - bmax), 0.0)
        return np.hypot(d[..., 0], d[..., 1])

    def describe_route(self, dense: np.ndarray, waypoints: np.ndarray, start_yaw: float | None = None,
                       goal_instance: int | None = None, frames: Sequence[np.ndarray] | None = None) -> RouteFacts:
        """Rooms, landmarks, turns and end point along a planned path (world x, y in metres)."""
        dense = np.asarray(dense, dtype=float).reshape(-1, 2)
        waypoints = np.asarray(waypoints, dtype=float).reshape(-1, 2)
        seg = np.hypot(*np.diff(dense, axis=0).T) if len(dense) > 1 else np.zeros(0)
        arc = np.concatenate([[0.0], np.cumsum(seg)])
        length = float(arc[-1])
        view = self.view
        room_ids = self.rooms_at(dense)

        # Rooms crossed, in order (cells outside any room, e.g. doorways, are skipped).
        rooms: list[RoomRef] = []
        enters: list[tuple[float, RoomRef]] = []
        for k in np.flatnonzero(room_ids >= 0):
            ref = view.room_ref(int(room_ids[k]))
            if ref is not None and (not rooms or rooms[-1].room_id != ref.room_id):
                if rooms:
                    enters.append((float(arc[k]), ref))
                rooms.append(ref)

        exclude = set()
        if goal_instance is not None and goal_instance in view.objects:
            exclude.add(view.objects[goal_instance]["category"])
        cand = self._landmark_ids(exclude)
        dist = self._box_distances(cand, dense) if len(cand) else np.zeros((0, len(dense)))
        near = dist.min(axis=1) <= self.landmark_radius if len(cand) else np.zeros(0, bool)
        closest = dist.argmin(axis=1) if len(cand) else np.zeros(0, np.int64)
        # A landmark must be in the room the path is in where it passes closest (not behind a wall).
        landmark_list = sorted((float(arc[closest[j]]), int(self._ids[cand[j]])) for j in np.flatnonzero(near)
                               if view.room_of(int(self._ids[cand[j]])) == int(room_ids[closest[j]]))
        landmarks = tuple(view.object_ref(iid) for _, iid in landmark_list)

        # Turns at interior waypoints (and an initial turn from the start heading).
        turns: list[tuple[float, str, ObjectRef | None]] = []
        used_landmarks: set[int] = set()
        if len(waypoints) >= 2:
            vec = np.diff(waypoints, axis=0)
            keep = np.hypot(*vec.T) > 1e-6
            vec, pts = vec[keep], waypoints[:-1][keep]
            heading = np.arctan2(vec[:, 1], vec[:, 0])
            if start_yaw is not None and len(heading):
                direction = turn_direction(heading[0] - start_yaw)
                if direction is not None:
                    turns.append((0.0, direction, None))
            # Heading changes at the waypoints; changes closer than ``turn_merge`` metres along the
            # path (a corner cut into several short segments) count as one turn.
            raw: list[list] = []   # [s, delta, waypoint index]
            for j in range(1, len(heading)):
                delta = float(wrap_angle(heading[j] - heading[j - 1]))
                s = float(arc[np.argmin(np.hypot(*(dense - pts[j]).T))])
                if raw and s - raw[-1][0] < self.turn_merge:
                    raw[-1][1] += delta
                else:
                    raw.append([s, delta, j])
            for s, delta, j in raw:
                direction = turn_direction(delta)
                if direction is None:
                    continue
                lm = None
                if len(cand):
                    d = self._box_distances(cand, pts[j][None])[:, 0]
                    here = int(self.rooms_at(pts[j][None])[0])
                    d[[view.room_of(int(i)) != here for i in self._ids[cand]]] = np.inf
                    k = int(np.argmin(d))
                    if d[k] <= self.landmark_radius:
                        lm = view.object_ref(int(self._ids[cand[k]]))
                        used_landmarks.add(lm.instance_id)
                turns.append((s, direction, lm))

        events: list[RouteEvent] = [RouteEvent("start", 0.0, room=rooms[0] if rooms else None)]
        events += [RouteEvent("turn", s, direction=d, landmark=lm) for s, d, lm in turns]
        events += [RouteEvent("enter", s, room=r) for s, r in enters]
        # At most one "pass" landmark per room segment, away from turns and the end.
        room_at_s = lambda s: int(room_ids[min(np.searchsorted(arc, s), len(arc) - 1)])  # noqa: E731
        passed_rooms: set[int] = set()
        for s, iid in landmark_list:
            r = room_at_s(s)
            if iid in used_landmarks or r in passed_rooms or s < 0.5 or length - s < 1.5:
                continue
            passed_rooms.add(r)
            events.append(RouteEvent("pass", s, landmark=view.object_ref(iid)))

        end_room = view.room_ref(int(room_ids[-1])) if len(room_ids) and room_ids[-1] >= 0 else None
        end_room = end_room or (rooms[-1] if rooms else None)
        stop_lm = None
        if goal_instance is not None and goal_instance in view.objects:
            stop_lm = view.object_ref(goal_instance)
        elif len(cand):
            d = dist[:, -1].copy()
            d[[view.room_of(int(i)) != int(room_ids[-1]) for i in self._ids[cand]]] = np.inf
            k = int(np.argmin(d))
            if d[k] <= self.end_radius:
                stop_lm = view.object_ref(int(self._ids[cand[k]]))
        if stop_lm is not None and end_room is not None and stop_lm.room is not None \
                and stop_lm.room.room_id != end_room.room_id:
            stop_lm = None
        events = [e for e in events if not (e.kind == "pass" and stop_lm is not None
                                            and e.landmark.instance_id == stop_lm.instance_id)]
        events.sort(key=lambda e: (e.s, ("start", "turn", "enter", "pass").index(e.kind)))
        events.append(RouteEvent("stop", length, room=end_room, landmark=stop_lm))
        caption = self.captioner(frames) if (self.captioner is not None and frames is not None) else None
        return RouteFacts(rooms=tuple(rooms), landmarks=landmarks, events=tuple(events), length=length, caption=caption)


__all__ = ["Describer", "FrameCaptioner", "TARGET_RELATIONS", "turn_direction"]
