"""Camera rendering for the MuJoCo backend: an OpenGL renderer (``mujoco.Renderer`` through EGL or
OSMesa) and a ray-cast fallback built on ``mj_multiRay`` that needs no OpenGL.

Both return *raw* images for one camera pose: ``rgb`` uint8 (H, W, 3), ``depth`` float32 planar
depth in metres (``inf`` where nothing is hit) and ``geom`` int32 geom ids (-1 = background); the
backend turns geom ids into semantic / instance images. The agent's own geom (group 3) is hidden
from both.
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Iterable

import numpy as np

from ..sensors import pixel_rays, vertical_fov_deg
from .builder import GROUP_AGENT, BuiltScene
from .gl import import_mujoco

#: Background colour of the ray-cast renderer (no geometry hit).
BACKGROUND_RGB = np.array([150, 170, 190], np.uint8)


def _visible_groups() -> np.ndarray:
    groups = np.ones(6, np.uint8)
    groups[GROUP_AGENT] = 0
    return groups


def _multiray_has_normal() -> bool:
    """Whether this MuJoCo's ``mj_multiRay`` takes a ``normal`` output (MuJoCo 3.12 and 4.x do,
    earlier 3.x do not): read from the binding's signature line, not guessed from the version."""
    signature = (import_mujoco().mj_multiRay.__doc__ or "").split("\n", 1)[0]
    return " normal:" in signature


class RaycastRenderer:
    """Pinhole images by casting one ray per pixel centre with a single ``mj_multiRay`` call.

    RGB is flat-shaded: geom colour × (0.35 + 0.65 |n · ray|) (a headlight), matching what the GL
    renderer shows closely enough for debugging and for policies trained on depth/semantics.
    """

    name = "raycast"

    def __init__(self, built: BuiltScene, model):
        self._mj = import_mujoco()
        self._has_normal = _multiray_has_normal()
        self._built = built
        self._model = model
        self._rays: dict[tuple[int, int, float], tuple[np.ndarray, np.ndarray]] = {}
        self._groups = _visible_groups()
        self._rgba = (np.asarray(model.geom_rgba)[:, :3] * 255.0).astype(np.float32)
        self.render_calls = 0

    def _camera_rays(self, width: int, height: int, hfov_deg: float) -> tuple[np.ndarray, np.ndarray]:
        key = (width, height, float(hfov_deg))
        if key not in self._rays:
            rays = pixel_rays(width, height, hfov_deg).reshape(-1, 3)
            norm = np.linalg.norm(rays, axis=1)
            self._rays[key] = (rays / norm[:, None], 1.0 / norm)  # unit rays, planar-depth factor
        return self._rays[key]

    def cast(self, data, origin: np.ndarray, directions: np.ndarray, cutoff: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Cast unit ``directions`` (N, 3) from ``origin``: (distance (N,) with -1 for no hit,
        geom id (N,), normal (N, 3))."""
        n = len(directions)
        geomid = np.empty(n, np.int32)
        dist = np.empty(n, np.float64)
        normal = np.empty(n * 3, np.float64)
        pnt = np.asarray(origin, np.float64)
        vec = np.ascontiguousarray(directions, np.float64).reshape(-1)
        if self._has_normal:  # surface normals come with the hits
            self._mj.mj_multiRay(self._model, data, pnt, vec, self._groups, 1, self._built.agent_body,
                                 geomid, dist, normal, n, float(cutoff))
            return dist, geomid, normal.reshape(n, 3)
        # MuJoCo 3.x has no normal output: shade as if every surface faced the ray (headlight)
        self._mj.mj_multiRay(self._model, data, pnt, vec, self._groups, 1, self._built.agent_body,
                             geomid, dist, n, float(cutoff))
        return dist, geomid, -np.asarray(directions, np.float64).reshape(n, 3)

    def render(self, data, position: np.ndarray, rotation: np.ndarray, width: int, height: int,
               hfov_deg: float, kinds: Iterable[str], cutoff: float = 100.0) -> dict[str, np.ndarray]:
        """Raw images of ``kinds`` (subset of rgb, depth, geom) from a camera at ``position`` with
        ``rotation`` columns (forward, left, up) in the world."""
        kinds = set(kinds)
        unit, planar = self._camera_rays(width, height, hfov_deg)
        forward, left, up = rotation[:, 0], rotation[:, 1], rotation[:, 2]
        cv_to_world = np.stack([-left, -up, forward], axis=1)
        world_dirs = unit @ cv_to_world.T
        dist, geomid, normal = self.cast(data, position, world_dirs, cutoff)
        self.render_calls += 1
        hit = geomid >= 0
        out: dict[str, np.ndarray] = {}
        if "depth" in kinds:
            depth = np.where(hit, dist * planar, np.inf).astype(np.float32)
            out["depth"] = depth.reshape(height, width)
        if "geom" in kinds:
            out["geom"] = np.where(hit, geomid, -1).astype(np.int32).reshape(height, width)
        if "rgb" in kinds:
            shade = 0.35 + 0.65 * np.abs(np.einsum("ij,ij->i", normal, world_dirs))
            colour = self._rgba[np.maximum(geomid, 0)] * shade[:, None]
            rgb = np.where(hit[:, None], np.clip(colour, 0, 255), BACKGROUND_RGB).astype(np.uint8)
            out["rgb"] = rgb.reshape(height, width, 3)
        return out

    def close(self) -> None:
        """Nothing to release."""


_LUMA = np.array([0.299, 0.587, 0.114], np.float32)


def antialias(rgb: np.ndarray, threshold: float = 12.0, span: float = 48.0) -> np.ndarray:
    """Edge anti-aliasing in the spirit of FXAA on an (H, W, 3) uint8 image: pixels on a luma edge
    (central difference above ``threshold``) are blended, up to half-way, with their two
    neighbours *along* the edge, which softens staircases without blurring flat areas or texture
    detail below the threshold. About 1/10 of MSAA's cost on llvmpipe; border pixels are kept.
    Only edge pixels are computed (the others have weight 0 and are returned as they are)."""
    img = rgb.astype(np.float32)
    luma = img @ _LUMA
    gx = np.abs(luma[1:-1, 2:] - luma[1:-1, :-2])
    gy = np.abs(luma[2:, 1:-1] - luma[:-2, 1:-1])
    weight = np.maximum(gx, gy)
    ys, xs = np.nonzero(weight > threshold)
    out = rgb.copy()
    if not len(ys):
        return out
    w = weight[ys, xs]
    w -= threshold
    w *= 1.0 / span
    np.clip(w, 0.0, 0.5, out=w)
    y, x = ys + 1, xs + 1
    # along x for edges running horizontally (gy > gx), else along y
    blend = np.where((gy[ys, xs] <= gx[ys, xs])[:, None], img[y + 1, x] + img[y - 1, x], img[y, x + 1] + img[y, x - 1])
    blend *= 0.5
    centre = img[y, x]
    blend -= centre
    blend *= w[:, None]
    centre += blend
    centre += 0.5
    out[y, x] = centre.astype(np.uint8)
    return out


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

#: Room lights switched on around the camera (nearest first); the others are off for that frame.
ACTIVE_ROOM_LIGHTS = 2


class GLRenderer:
    """Offscreen OpenGL rendering with one ``mujoco.Renderer`` per resolution; RGB, depth and
    segmentation of one camera pose share one scene update.

    ``quality``: ``fast`` (no shadows, reflections or anti-aliasing), ``default`` (edge
    anti-aliasing by ``antialias``: 4× MSAA would cost more than half the frame rate on llvmpipe),
    ``high`` (8× MSAA, shadows, reflections). With MSAA, depth and segmentation come from a
    second context without multisampling, so they are identical at every preset. Only the
    ``ACTIVE_ROOM_LIGHTS`` room lights nearest the camera are on in a frame (fixed cost per frame
    whatever the number of rooms).
    """

    name = "gl"

    def __init__(self, built: BuiltScene, model, antialias: bool = False, quality: str = "fast",
                 portals: RoomPortals | None = None):
        self._mj = import_mujoco()
        self._portals = portals if portals is not None and portals.useful else None
        self._has_normal = _multiray_has_normal()
        self._built = built
        self._model = model
        self.quality = quality
        # MSAA costs ~35 % of the frame time on llvmpipe and would blend depth/ids across edges:
        # only the RGB context gets it.
        self._samples = 8 if quality == "high" else 4 if antialias else 0
        self._post_aa = quality == "default" and not antialias
        from .looks import ROOM_LIGHT_PREFIX, shadowless_geoms

        # window glass lets the sun through: left out of the shadow maps (only ``high`` has them)
        self._shadowless = shadowless_geoms(model) if quality == "high" else np.zeros(0, np.int64)

        names = [model.light(i).name for i in range(model.nlight)]
        self._room_lights = np.array([i for i, n in enumerate(names) if n.startswith(ROOM_LIGHT_PREFIX)], int)
        self._room_light_pos = np.asarray(model.light_pos)[self._room_lights].copy() if len(self._room_lights) else None
        self._renderers: dict[tuple[int, int, bool], object] = {}
        # Frustum culling: geoms whose bounding sphere lies outside the view move to a hidden
        # group for the draw (rendering cost follows the geoms drawn, not the scene size).
        self._group = np.asarray(model.geom_group).copy()
        self._cullable = (np.asarray(model.geom_rbound) > 0) & (self._group != GROUP_AGENT)
        # Geoms drawn see-through in RGB (alpha < 1, own or material's): with one in a view, depth
        # needs its own pass (the RGB pass does not write glass into the depth buffer).
        matid = np.asarray(model.geom_matid)
        mat_alpha = np.asarray(model.mat_rgba)[np.maximum(matid, 0), 3] if model.nmat else np.ones(model.ngeom)
        self._transparent = (np.asarray(model.geom_rgba)[:, 3] < 1) | ((matid >= 0) & (mat_alpha < 1))
        self._transparent &= self._group != GROUP_AGENT
        self._option = self._mj.MjvOption()
        self._option.geomgroup[:] = 1
        self._option.geomgroup[GROUP_AGENT] = 0
        self._option.geomgroup[CULL_GROUP] = 0
        self._option.sitegroup[:] = 0
        self.render_calls = 0
        #: Geoms handed to OpenGL for the last frame (after culling): what rendering cost follows.
        self.last_drawn = 0
        self._renderer(16, 16, True)  # fail now (no GL context) rather than at the first observation

    def _renderer(self, width: int, height: int, rgb: bool):
        key = (width, height, rgb and self._samples > 0)
        if key not in self._renderers:
            vis = self._model.vis.global_
            vis.offwidth = max(int(vis.offwidth), width)
            vis.offheight = max(int(vis.offheight), height)
            self._model.vis.quality.offsamples = self._samples if key[2] else 0
            r = self._mj.Renderer(self._model, height=height, width=width)
            flags = r.scene.flags
            high = self.quality == "high" and key[2]
            flags[self._mj.mjtRndFlag.mjRND_SHADOW] = int(high)
            flags[self._mj.mjtRndFlag.mjRND_REFLECTION] = int(high)
            flags[self._mj.mjtRndFlag.mjRND_SKYBOX] = 0
            self._renderers[key] = r
        return self._renderers[key]

    def _light_rooms_near(self, position: np.ndarray) -> None:
        """Switch on the room lights nearest ``position`` and off the rest."""
        if self._room_light_pos is None:
            return
        d = np.linalg.norm(self._room_light_pos[:, :2] - position[:2], axis=1)
        on = np.zeros(len(d), bool)
        on[np.argsort(d, kind="stable")[:ACTIVE_ROOM_LIGHTS]] = True
        self._model.light_active[self._room_lights] = on

    def _place_camera(self, data, position: np.ndarray, rotation: np.ndarray) -> None:
        """Put the render camera at ``position`` with ``rotation`` columns (forward, left, up)."""
        cam = self._built.camera
        forward, left, up = rotation[:, 0], rotation[:, 1], rotation[:, 2]
        data.cam_xpos[cam] = position
        data.cam_xmat[cam] = np.stack([-left, up, -forward], axis=1).reshape(9)

    def _hidden(self, data, position: np.ndarray, rotation: np.ndarray, hfov_deg: float, vfov: float,
                place_movable: bool = True) -> np.ndarray:
        """Geoms not to draw for one view: outside the frustum, or in rooms it cannot see into
        (movable objects placed in rooms from ``data`` unless ``place_movable`` is False)."""
        visible = frustum_visible(data.geom_xpos, self._model.geom_rbound, position, rotation, hfov_deg, vfov)
        hidden = self._cullable & ~visible
        if self._portals is not None:  # rooms seen through no door in view
            behind_walls = self._portals.hidden_geoms(position, rotation, hfov_deg, vfov,
                                                      data.geom_xpos if place_movable else None)
            if behind_walls is not None:
                hidden |= self._cullable & behind_walls
        return hidden

    def _update(self, renderer, data, hidden: np.ndarray, rgb: bool = False) -> None:
        """``renderer``'s scene from ``data`` without the ``hidden`` geoms; for RGB (``rgb``),
        window glass is left out of the shadow maps (``high``)."""
        groups = self._model.geom_group
        groups[hidden] = CULL_GROUP
        try:
            renderer.update_scene(data, camera=self._built.camera, scene_option=self._option)
        finally:
            groups[:] = self._group
        if rgb and len(self._shadowless):
            from .looks import mark_shadowless

            mark_shadowless(renderer.scene, self._shadowless)
        self.last_drawn = int(renderer.scene.ngeom)

    def _read(self, rgb_renderer, aux_renderer, kinds: set, out: dict, hidden: np.ndarray) -> None:
        """Render the updated scenes and read ``kinds`` into ``out``. When RGB and depth come
        from the same context and no see-through geom is drawn (``hidden`` = the culled geoms),
        depth is read from the RGB pass's depth buffer: the same values as a depth pass
        (checked equal), one render fewer."""
        if "rgb" in kinds:
            out["rgb"] = antialias(rgb_renderer.render()) if self._post_aa else rgb_renderer.render()
        r = aux_renderer
        if "depth" in kinds and "rgb" in kinds and r is rgb_renderer and not (self._transparent & ~hidden).any():
            out["depth"] = self._depth_buffer(r)
        elif "depth" in kinds:
            r.enable_depth_rendering()
            depth = r.render()
            r.disable_depth_rendering()
            far = self._model.vis.map.zfar * self._model.stat.extent
            depth[depth >= far * 0.999] = np.inf
            out["depth"] = depth
        if "geom" in kinds:
            r.enable_segmentation_rendering()
            seg = r.render()
            r.disable_segmentation_rendering()
            out["geom"] = np.where(seg[..., 1] == int(self._mj.mjtObj.mjOBJ_GEOM), seg[..., 0], -1).astype(np.int32)

    def _depth_buffer(self, renderer) -> np.ndarray:
        """Planar depth (m, ``inf`` beyond the far plane) from the depth buffer of ``renderer``'s
        last render, converted exactly as ``mujoco.Renderer`` converts a depth render."""
        m = self._model
        buf = np.empty((renderer.height, renderer.width), np.float32)
        renderer._gl_context.make_current()
        self._mj.mjr_readPixels(None, buf, renderer._rect, renderer._mjr_context)
        extent = m.stat.extent
        znear, zfar = np.float32(m.vis.map.znear * extent), np.float32(m.vis.map.zfar * extent)
        c_coef = -(zfar + znear) / (zfar - znear)
        d_coef = -(np.float32(2) * zfar * znear) / (zfar - znear)
        c_coef = np.float32(-0.5) * c_coef - np.float32(0.5)  # reversed Z, as mujoco.Renderer
        d_coef = np.float32(-0.5) * d_coef
        depth = np.flipud((d_coef / (buf.astype(np.float64) + c_coef)).astype(np.float32))
        depth[depth >= m.vis.map.zfar * extent * 0.999] = np.inf
        return depth

    def render(self, data, position: np.ndarray, rotation: np.ndarray, width: int, height: int,
               hfov_deg: float, kinds: Iterable[str], cutoff: float = 100.0) -> dict[str, np.ndarray]:
        """Raw images of ``kinds`` (subset of rgb, depth, geom); see ``RaycastRenderer.render``."""
        kinds = set(kinds)
        self._place_camera(data, position, rotation)
        vfov = vertical_fov_deg(width, height, hfov_deg)
        self._model.cam_fovy[self._built.camera] = vfov
        self.render_calls += 1
        out: dict[str, np.ndarray] = {}
        hidden = self._hidden(data, position, rotation, hfov_deg, vfov)
        rgb_r = aux_r = None
        if "rgb" in kinds:
            self._light_rooms_near(position)
            rgb_r = self._renderer(width, height, True)
            # with shadows (``high``), geoms out of view still cast into it: draw them all
            self._update(rgb_r, data, hidden if self.quality != "high" else np.zeros_like(hidden), rgb=True)
        if kinds - {"rgb"}:
            aux_r = self._renderer(width, height, False)
            if aux_r is not rgb_r:
                self._update(aux_r, data, hidden)
        self._read(rgb_r, aux_r, kinds, out, hidden)
        return out

    def render_views(self, data, position: np.ndarray, rotations, width: int, height: int, hfov_deg: float,
                     kinds: Iterable[str]) -> list[dict[str, np.ndarray]]:
        """Raw images of ``kinds`` from several cameras at one ``position`` (a panorama), equal to
        ``render``'s for each view. What depends on the position only is done once (room
        lights, the camera's room, movable objects' rooms); per view only the culling of that
        view and the scene update that draws just its geoms. (One scene update shared by all
        views, moving only the camera, gave the same images but drew the union of the views'
        geoms in every view: 4.8 against 5.7 panoramas/s measured interleaved.)"""
        kinds = set(kinds)
        if self.quality == "high" or not rotations:  # shadows: every view draws everything anyway
            return [self.render(data, position, rot, width, height, hfov_deg, kinds) for rot in rotations]
        m, cam = self._model, self._built.camera
        vfov = vertical_fov_deg(width, height, hfov_deg)
        m.cam_fovy[cam] = vfov
        rgb_r = self._renderer(width, height, True) if "rgb" in kinds else None
        aux_r = self._renderer(width, height, False) if kinds - {"rgb"} else None
        if rgb_r is not None:
            self._light_rooms_near(position)
        renderers = [r for r in (rgb_r, aux_r) if r is not None]
        if len(renderers) == 2 and renderers[0] is renderers[1]:
            renderers.pop()
        views = []
        for i, rot in enumerate(rotations):
            self.render_calls += 1
            self._place_camera(data, position, rot)
            hidden = self._hidden(data, position, rot, hfov_deg, vfov, place_movable=i == 0)
            for r in renderers:
                self._update(r, data, hidden, rgb=r is rgb_r)
            out: dict[str, np.ndarray] = {}
            self._read(rgb_r, aux_r, kinds, out, hidden)
            views.append(out)
        return views

    def close(self) -> None:
        """Close every ``mujoco.Renderer`` (OSMesa complains at exit otherwise)."""
        for r in self._renderers.values():
            r.close()
        self._renderers.clear()


_WARNED = False


def make_renderer(choice: str, built: BuiltScene, model, antialias: bool = False, quality: str = "fast",
                  scene: Any = None):
    """``choice`` = gl | raycast | auto. ``auto`` tries OpenGL and falls back to ray casting with a
    single warning per process; ``gl`` raises if no OpenGL context can be created. ``antialias``
    turns on 4× multisampling for GL RGB at ``fast``; ``quality`` is the render preset (see
    ``GLRenderer``)."""
    global _WARNED
    if choice == "raycast":
        return RaycastRenderer(built, model)
    if choice not in ("gl", "auto"):
        from ...core.errors import ConfigError

        raise ConfigError(f"got {choice!r}", field="renderer", expected="one of auto, gl, raycast")
    try:
        portals = RoomPortals(scene.rooms, scene.doors, model, built.floor_z) if scene is not None and scene.rooms \
            else None
        return GLRenderer(built, model, antialias, quality, portals)
    except Exception as exc:  # no EGL/OSMesa/PyOpenGL: any of several exception types
        if choice == "gl":
            from ...core.errors import VLNVerseError

            raise VLNVerseError(f"renderer 'gl': cannot create an OpenGL context ({type(exc).__name__}: {exc})") from None
        if not _WARNED:
            warnings.warn(f"vlnverse.sim: no OpenGL context ({type(exc).__name__}: {exc}); "
                          "using the mj_multiRay ray-cast renderer (flat-shaded RGB)", RuntimeWarning, stacklevel=3)
            _WARNED = True
        return RaycastRenderer(built, model)


def lidar_scan(caster: RaycastRenderer, data, origin: np.ndarray, rotation: np.ndarray, directions: np.ndarray,
               min_range: float, max_range: float) -> np.ndarray:
    """Ranges (channels, beams) float32 for sensor-frame unit ``directions`` (channels, beams, 3);
    ``inf`` where nothing lies within [min_range, max_range]."""
    shape = directions.shape[:2]
    world = directions.reshape(-1, 3) @ rotation.T
    dist, geomid, _ = caster.cast(data, origin, world, max_range)
    ok = (geomid >= 0) & (dist >= min_range) & (dist <= max_range)
    return np.where(ok, dist, np.inf).astype(np.float32).reshape(shape)
