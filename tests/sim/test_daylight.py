"""Windows with daylight: at ``high`` (shadows on) the sun reaches the floor only through window
openings, so the floor patch the sun lights through a window is measurably brighter than the rest
of that room's floor in the same frame; at ``default`` (no shadows) it is not singled out."""
from __future__ import annotations

import math

import numpy as np
import pytest

from vlnverse.scenes.procgen import WINDOW_FRAME, generate_home
from vlnverse.scenes.textures import SUN_DIRECTION
from vlnverse.sim import AgentPose, make_sensor, make_simulator
from vlnverse.sim.sensors import pixel_rays

pytestmark = pytest.mark.gl
SIZE = dict(width=160, height=120)


def _sunlit_window(desc):
    """(room, glass geom, floor polygon lit through it) of the first window the sun shines through
    (on a west or south wall: SUN_DIRECTION travels +x, +y) onto floor clear of furniture."""
    d = np.asarray(SUN_DIRECTION, float)
    for g in desc.geoms:
        if not (g.label == "window" and g.kind == "box"):
            continue
        lo, hi = g.world_aabb()
        room = next((r for r in desc.rooms if r.contains(((lo[:2] + hi[:2]) / 2 + 0.3 * d[:2])[None])[0]), None)
        if room is None:  # the sun shines on this window from inside: not lit
            continue
        rlo, rhi = room.polygon.min(axis=0), room.polygon.max(axis=0)
        west, south = abs(lo[0] - rlo[0]) < 0.2, abs(lo[1] - rlo[1]) < 0.2
        if not (west or south):
            continue
        # corners of the glass, carried along the sun's direction down to the floor (z = 0)
        corners = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
        floor = corners[:, :2] + (-corners[:, 2:3] / d[2]) * d[:2]
        # the light's path from the window to the floor (xy box) must cross no furniture
        plo, phi = np.minimum(floor.min(axis=0), lo[:2]) - 0.1, np.maximum(floor.max(axis=0), hi[:2]) + 0.1
        if any(np.all(o.bounds_min[:2] < phi) and np.all(plo < o.bounds_max[:2]) for o in desc.objects):
            continue
        return room, g, floor
    return None


def _floor_luminance(sim, desc, pose, room, patch_poly):
    """Mean luminance of the room's floor pixels inside and outside the (shrunk) sun patch."""
    from matplotlib.path import Path as MplPath

    rgb_s, depth_s, sem_s = (make_sensor(k, **SIZE) for k in ("rgb", "depth", "semantic"))
    for s in (rgb_s, depth_s, sem_s):
        sim.attach_sensor(s)
    sim.teleport(pose)
    obs = sim.get_observations()
    ext = sim.camera_extrinsics(depth_s.name)
    rays = pixel_rays(SIZE["width"], SIZE["height"], depth_s.hfov_deg)
    pts = (rays * obs[depth_s.name][..., None]) @ ext[:3, :3].T + ext[:3, 3]
    floor = obs[sem_s.name] == sim.semantic_labels.index("floor")
    inside_room = room.contains(pts[..., :2].reshape(-1, 2)).reshape(floor.shape)
    from scipy.spatial import ConvexHull

    hull = patch_poly[ConvexHull(patch_poly).vertices]
    centre = hull.mean(axis=0)
    core = MplPath(centre + 0.6 * (hull - centre))   # well inside the patch (mullion, soft edges aside)
    outer = MplPath(centre + 1.6 * (hull - centre))  # well outside it
    xy = pts[..., :2].reshape(-1, 2)
    in_patch = core.contains_points(xy).reshape(floor.shape) & floor & inside_room
    away = ~outer.contains_points(xy).reshape(floor.shape) & floor & inside_room
    luma = obs[rgb_s.name].astype(float) @ np.array([0.299, 0.587, 0.114])
    _floor_luminance.masks = (obs[rgb_s.name], in_patch, away)
    return float(luma[in_patch].mean()), float(luma[away].mean()), int(in_patch.sum()), int(away.sum())


def test_sunlight_through_a_window_brightens_the_floor_at_high():
    for seed in range(2, 30):
        desc = generate_home(seed)
        found = _sunlit_window(desc)
        if found is not None:
            break
    assert found is not None, "no home among seeds 2..29 has a window on a west or south wall"
    room, glass, patch = found
    # stand back from the patch, on the far side of the room, looking at it
    centre = patch.mean(axis=0)
    rlo, rhi = room.polygon.min(axis=0), room.polygon.max(axis=0)
    inner = np.clip(centre + 1.6 * np.asarray(SUN_DIRECTION[:2]) / np.hypot(*SUN_DIRECTION[:2]), rlo + 0.4, rhi - 0.4)
    yaw = math.atan2(centre[1] - inner[1], centre[0] - inner[0])
    pose = AgentPose(float(inner[0]), float(inner[1]), yaw, pitch=-0.5)
    result = {}
    for quality in ("default", "high"):
        with make_simulator(desc, "r2r_ce", sensors=[], renderer="gl", quality=quality) as sim:
            result[quality] = _floor_luminance(sim, desc, pose, room, patch)
    print("floor luminance (patch, rest, pixels, pixels):", result)
    lit, shade, n_lit, n_shade = result["high"]
    assert n_lit >= 30 and n_shade >= 30, result
    assert lit > 1.25 * shade, result  # the sun patch is >= 25 % brighter than the rest of the floor
    d_lit, d_shade, *_ = result["default"]
    assert lit / shade > 1.15 * d_lit / d_shade, result  # and that comes from the shadowed sun
