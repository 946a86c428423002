"""What the GL renderer may skip drawing: frustum culling of bounding spheres and per-room portal
culling through the scene's doors (conservative: nothing visible is ever culled)."""
from __future__ import annotations

import math

import numpy as np

#: Geom group that culled geoms are moved to while a frame is drawn (never shown).
CULL_GROUP = 5


def frustum_visible(centres: np.ndarray, radii: np.ndarray, position: np.ndarray, rotation: np.ndarray,
                    hfov_deg: float, vfov_deg: float) -> np.ndarray:
    """Whether each bounding sphere (``centres`` (N, 3), ``radii`` (N,)) touches the view frustum of
    a camera at ``position`` with ``rotation`` columns (forward, left, up); conservative."""
    rel = centres - position
    fwd = rel @ rotation[:, 0]
    side = np.abs(rel @ rotation[:, 1])
    vert = np.abs(rel @ rotation[:, 2])
    th, tv = math.tan(math.radians(hfov_deg) / 2), math.tan(math.radians(vfov_deg) / 2)
    # distance of the centre outside each side plane, compared with the radius
    ok_h = (side - fwd * th) / math.sqrt(1 + th * th) <= radii
    ok_v = (vert - fwd * tv) / math.sqrt(1 + tv * tv) <= radii
    return (fwd >= -radii) & ok_h & ok_v


def _static_geom_footprints(model) -> tuple[np.ndarray, np.ndarray]:
    """World xy bounding boxes (lo, hi; (ngeom, 2) each) of geoms from their local AABBs and
    model-frame poses (exact for geoms of the world body)."""
    aabb = np.asarray(model.geom_aabb).reshape(-1, 6)
    q = np.asarray(model.geom_quat)
    w, x, y, z = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    rot = np.stack([np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
                    np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1)], 1)  # rows x, y
    centre = np.asarray(model.geom_pos)[:, :2] + np.einsum("nij,nj->ni", rot, aabb[:, :3])
    half = np.einsum("nij,nj->ni", np.abs(rot), aabb[:, 3:])
    return centre - half, centre + half


class RoomPortals:
    """Per-room visibility from the scene's rooms and doors (portal culling): from the room the
    camera is in, a room next door is visible only when their door lies in the view frustum, and
    so on room by room (a line of sight into a room passes through every door on the way, so
    each of them touches the frustum: conservative for opaque full-height walls). For a level
    camera the horizontal view is narrowed door by door, and a geom of a room seen only through
    doors is drawn only when its footprint's horizontal angles meet that room's view through them.

    A geom belongs to every room whose (bounding box of its) polygon its footprint touches: a wall
    to the rooms on both sides, a door frame to both rooms of the door, furniture to its room. A
    point of a geom that the camera sees lies in a room the line of sight reached, so a geom is
    drawn when one of its rooms is visible; geoms that touch no room (and everything while the
    camera is in no room) are left to frustum culling. Movable objects are assigned by their
    current position each frame."""

    #: door portal: a sphere round the opening (height above the floor, half-height, margin), m
    DOOR_Z, DOOR_HALF_HEIGHT, MARGIN = 1.25, 1.4, 0.1
    #: half the depth (m) of the box round a door opening (across the wall: half its thickness + margin)
    DOOR_DEPTH = 0.2
    #: closer than this (m) to a door's box, the camera sees through it whatever the direction
    DOOR_NEAR = 0.3
    #: a footprint must overlap a room's box by more than this (m) to belong to it
    OVERLAP_TOL = 1e-4

    def __init__(self, rooms, doors, model, floor_z: float = 0.0):
        from matplotlib.path import Path as MplPath

        self.paths = [MplPath(np.asarray(r.polygon, float)[:, :2]) for r in rooms]
        index = {r.room_id: i for i, r in enumerate(rooms)}
        self.room_lo = np.array([np.asarray(r.polygon, float)[:, :2].min(axis=0) for r in rooms]).reshape(-1, 2)
        self.room_hi = np.array([np.asarray(r.polygon, float)[:, :2].max(axis=0) for r in rooms]).reshape(-1, 2)
        lo, hi = _static_geom_footprints(model)
        bodies = np.asarray(model.geom_bodyid)
        sized = np.asarray(model.geom_rbound) > 0
        static = (bodies == 0) & sized
        self.movable = np.flatnonzero((bodies != 0) & sized)
        self._rbound = np.asarray(model.geom_rbound)
        self.foot_lo, self.foot_hi = lo, hi
        self.member = np.zeros((model.ngeom, len(self.paths)), bool)  # geom touches room
        self.member[static] = self._touching(lo[static], hi[static])
        #: one room per geom (the first it touches; -1 for none), kept for inspection
        self.geom_room = np.where(self.member.any(axis=1), self.member.argmax(axis=1), -1)
        self.doors = [(index[a], index[b]) for d in doors for a, b in [d.room_ids] if a in index and b in index]
        self.door_centres = np.array([[*np.asarray(d.center, float)[:2], floor_z + self.DOOR_Z] for d in doors
                                      if d.room_ids[0] in index and d.room_ids[1] in index]).reshape(-1, 3)
        self.door_radii = np.array([math.hypot(d.width / 2 + self.MARGIN, self.DOOR_HALF_HEIGHT) for d in doors
                                    if d.room_ids[0] in index and d.room_ids[1] in index])
        self.doors_of = {i: [k for k, (a, b) in enumerate(self.doors) if i in (a, b)] for i in range(len(self.paths))}
        # each door as a box round its opening: along the wall (width + margin), across it
        # (wall thickness + margin); its corners bound what can be seen through it
        boxes = []
        for d in doors:
            if d.room_ids[0] in index and d.room_ids[1] in index:
                along = np.array([1.0, 0.0]) if d.axis == "x" else np.array([0.0, 1.0])
                across = np.array([-along[1], along[0]])
                c, ha, hc = np.asarray(d.center, float)[:2], d.width / 2 + self.MARGIN, self.DOOR_DEPTH
                boxes.append([c + sa * ha * along + sc * hc * across for sa in (-1, 1) for sc in (-1, 1)])
        self.door_corners = np.array(boxes, float).reshape(-1, 4, 2)
        self.in_room = self.member.any(axis=1)
        self._placed: np.ndarray | None = None  # movable geoms' xy at their last placement
        self.useful = bool(self.in_room.any())
        self._last_key: tuple | None = None
        self._last_start: list[int] = []

    def _touching(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """(N, rooms) bool: whether footprint boxes ``lo``/``hi`` (N, 2) overlap each room's
        bounding box by more than ``OVERLAP_TOL`` on both axes (a box that only meets a room's
        edge does not belong to it)."""
        tol = self.OVERLAP_TOL
        return ((lo[:, None, :] < self.room_hi[None] - tol) & (hi[:, None, :] > self.room_lo[None] + tol)).all(-1)

    def _update_movable(self, geom_xpos: np.ndarray) -> None:
        """Room membership and footprints of movable geoms at their current positions."""
        ids = self.movable
        if not len(ids):
            return
        centre = np.asarray(geom_xpos)[ids, :2]
        if self._placed is not None and np.array_equal(centre, self._placed):
            return  # nothing moved (resting objects sleep): keep the placement
        self._placed = centre.copy()
        r = self._rbound[ids, None]
        self.foot_lo[ids], self.foot_hi[ids] = centre - r, centre + r
        self.member[ids] = self._touching(centre - r, centre + r)
        self.in_room = self.member.any(axis=1)

    def _door_angles(self, position: np.ndarray, rotation: np.ndarray) -> list:
        """Per door, the interval of horizontal view angles (rad, left positive) its box covers
        from a level camera, ``(-inf, inf)`` when the camera is at or in it, ``None`` when it is
        behind the camera."""
        fwd = rotation[:2, 0] / max(np.linalg.norm(rotation[:2, 0]), 1e-12)
        left = np.array([-fwd[1], fwd[0]])
        rel = self.door_corners - position[:2]  # (doors, 4, 2)
        f, l_ = rel @ fwd, rel @ left
        lo, hi = rel.min(axis=1), rel.max(axis=1)
        gap = np.linalg.norm(np.maximum(np.maximum(lo, -hi), 0.0), axis=1)  # camera to the (axis-aligned) box
        ahead = f > 1e-6
        angles = np.arctan2(l_, np.maximum(f, 1e-9))
        amin, amax = angles.min(axis=1).tolist(), angles.max(axis=1).tolist()
        all_ahead, none_ahead = ahead.all(axis=1).tolist(), (~ahead).all(axis=1).tolist()
        near = (gap < self.DOOR_NEAR).tolist()
        out: list = []
        for k in range(len(rel)):
            if near[k] or not all_ahead[k] and not none_ahead[k]:
                out.append((-math.inf, math.inf))
            elif none_ahead[k]:
                out.append(None)
            else:
                out.append((amin[k], amax[k]))
        return out

    def _footprint_angles(self, ids: np.ndarray, position: np.ndarray, rotation: np.ndarray):
        """Horizontal view angles (min, max; rad, left positive) of the footprint boxes of geoms
        ``ids`` from a level camera; (-inf, inf) where a box reaches beside or behind the camera."""
        fwd = rotation[:2, 0] / max(np.linalg.norm(rotation[:2, 0]), 1e-12)
        left = np.array([-fwd[1], fwd[0]])
        lo, hi = self.foot_lo[ids] - position[:2], self.foot_hi[ids] - position[:2]
        corners = np.stack([lo, np.c_[lo[:, 0], hi[:, 1]], hi, np.c_[hi[:, 0], lo[:, 1]]], axis=1)  # (N, 4, 2)
        f, l_ = corners @ fwd, corners @ left
        angles = np.arctan2(l_, np.maximum(f, 1e-9))
        amin, amax = angles.min(axis=1), angles.max(axis=1)
        full = (f <= 1e-6).any(axis=1)
        amin[full], amax[full] = -math.inf, math.inf
        return amin, amax

    def hidden_geoms(self, position: np.ndarray, rotation: np.ndarray, hfov_deg: float,
                     vfov_deg: float, geom_xpos: np.ndarray | None = None) -> np.ndarray | None:
        """Geoms in rooms the camera cannot see into (bool, per geom), or ``None`` when the camera
        is in no room (then nothing is culled by room). ``geom_xpos`` (current geom positions)
        places the movable objects; without it they keep their last placement."""
        key = (float(position[0]), float(position[1]))
        if key != self._last_key:  # the views of a panorama share their position: look it up once
            self._last_key = key
            near = np.flatnonzero(((self.room_lo - 1e-5 <= key) & (key <= self.room_hi + 1e-5)).all(axis=1))
            self._last_start = [int(i) for i in near if self.paths[i].contains_point(key, radius=1e-6)
                                or self.paths[i].contains_point(key, radius=-1e-6)]
        start = self._last_start
        if not start:
            return None
        if geom_xpos is not None:
            self._update_movable(geom_xpos)
        seen = set(start)
        views: dict[int, list[tuple[float, float]]] | None = None  # room -> horizontal angle intervals
        fwd = rotation[:, 0]
        if abs(fwd[2]) > 1e-6 or not len(self.doors):  # pitched camera: doors in the frustum open rooms
            door_seen = frustum_visible(self.door_centres, self.door_radii, position, rotation, hfov_deg, vfov_deg) \
                if len(self.doors) else np.zeros(0, bool)
            frontier = list(start)
            while frontier:
                room = frontier.pop()
                for k in self.doors_of[room]:
                    other = self.doors[k][1] if self.doors[k][0] == room else self.doors[k][0]
                    if door_seen[k] and other not in seen:
                        seen.add(other)
                        frontier.append(other)
        else:  # level camera: narrow the horizontal view through each door on the way
            views = {}
            intervals = self._door_angles(position, rotation)
            half = math.radians(hfov_deg) / 2 + 1e-3
            stack = [(room, -half, half, frozenset([room])) for room in start]
            while stack:
                room, lo, hi, path = stack.pop()
                for k in self.doors_of[room]:
                    other = self.doors[k][1] if self.doors[k][0] == room else self.doors[k][0]
                    if other in path or intervals[k] is None:
                        continue
                    new_lo, new_hi = max(lo, intervals[k][0]), min(hi, intervals[k][1])
                    if new_lo < new_hi:
                        seen.add(other)
                        views.setdefault(other, []).append((new_lo, new_hi))
                        stack.append((other, new_lo, new_hi, path | {other}))
        member, in_room = self.member, self.in_room
        seen_list = sorted(seen)
        visible = ~in_room | member[:, start].any(axis=1)  # the camera's own rooms: all of them
        through = ~visible & member[:, seen_list].any(axis=1)  # seen only through doors
        if views is None:
            visible |= through
        elif through.any():
            ids = np.flatnonzero(through)
            amin, amax = self._footprint_angles(ids, position, rotation)
            ok = np.zeros(len(ids), bool)
            for room, spans in views.items():
                if room in start:
                    continue
                rows = member[ids, room]
                for lo, hi in spans:
                    ok |= rows & (amin <= hi) & (amax >= lo)
            visible[ids[ok]] = True
        return ~visible
