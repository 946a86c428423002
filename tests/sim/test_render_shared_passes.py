"""Shared render work gives the same images: depth read from the RGB pass (same context; with
window glass in view, drawn over it by a glass-only pass) equals a depth pass, one GL context
draws every image size as fresh contexts of each size would, and a panorama's views
(``GLRenderer.render_views``: position-dependent set-up once) equal single renders of each view."""
from __future__ import annotations

import math

import numpy as np
import pytest

from vlnverse.sim import AgentPose, make_sensor

pytestmark = pytest.mark.gl


@pytest.fixture(scope="module")
def home():
    procgen = pytest.importorskip("vlnverse.scenes.procgen", reason="needs the scene generator")
    return procgen.generate_home(0)


@pytest.mark.parametrize("quality", ["fast", "default"])
def test_depth_from_the_rgb_pass_equals_a_depth_pass(home, gl_context, quality):
    from vlnverse.sim.gym_env import VLNVerseNavEnv
    from vlnverse.sim.sensors import sensor_world_pose

    env = VLNVerseNavEnv(home, "r2r_ce", sensors=[], quality=quality)
    try:
        sim, renderer = env.sim, env.sim._renderer
        rgb = renderer._renderer(96, 96, True)
        shared = 0
        for k in range(12):
            env.reset(seed=k)
            pose = AgentPose(sim.pose.x, sim.pose.y, 0.55 * k)
            pos, rot = sensor_world_pose(pose, (0.0, 0.0, None, 0.0), sim.body.camera_height, 0.0, home.floor_z)
            both = renderer.render(sim._d, pos, rot, 96, 96, 90.0, {"rgb", "depth"})
            glass = bool((renderer._transparent[[rgb.scene.geoms[i].objid for i in range(rgb.scene.ngeom)]]).any())
            alone = renderer.render(sim._d, pos, rot, 96, 96, 90.0, {"depth"})
            np.testing.assert_array_equal(both["depth"], alone["depth"])
            shared += not glass
        assert shared >= 4  # most views share the pass (at ``fast`` nothing is see-through)
    finally:
        env.close()


def _views_with_glass(env, renderer, size, want):
    """Camera poses (pos, rot) of views with window glass drawn, from ``env``'s start poses turned around."""
    from vlnverse.sim.sensors import sensor_world_pose

    sim, found = env.sim, []
    for k in range(40):
        env.reset(seed=k)
        for turn in range(8):
            pose = AgentPose(sim.pose.x, sim.pose.y, turn * math.pi / 4)
            pos, rot = sensor_world_pose(pose, (0.0, 0.0, None, 0.0), sim.body.camera_height, 0.0, env.sim.scene.floor_z)
            renderer.render(sim._d, pos, rot, size, size, 90.0, {"rgb"})
            scene = renderer._renderer(size, size, True).scene
            if renderer._transparent[[scene.geoms[i].objid for i in range(scene.ngeom)]].any():
                found.append((pos, rot))
                break
        if len(found) >= want:
            break
    return found


def test_glass_only_depth_pass_equals_the_full_depth_pass(home, gl_context):
    """With window glass in view, depth is the RGB pass's buffer with a glass-only pass drawn over
    it (``glass_depth="glass"``): the same bytes as redrawing the view for depth (``full``) and as
    a depth render alone, with the same RGB and segmentation in the same call."""
    from vlnverse.sim.gym_env import VLNVerseNavEnv

    env = VLNVerseNavEnv(home, "r2r_ce", sensors=[], quality="default")
    try:
        sim, renderer = env.sim, env.sim._renderer
        views = _views_with_glass(env, renderer, 64, 4)
        assert len(views) >= 4
        kinds = {"rgb", "depth", "geom"}
        for pos, rot in views:
            got = {}
            for mode in ("glass", "full"):
                renderer.glass_depth = mode
                got[mode] = renderer.render(sim._d, pos, rot, 64, 64, 90.0, kinds)
            alone = renderer.render(sim._d, pos, rot, 64, 64, 90.0, {"depth"})
            for kind in kinds:
                np.testing.assert_array_equal(got["glass"][kind], got["full"][kind])
            np.testing.assert_array_equal(got["glass"]["depth"], alone["depth"])
            assert np.isfinite(got["glass"]["depth"]).any() and (got["glass"]["geom"] >= 0).any()
        renderer.glass_depth = "glass"
        changed = 0  # the glass pass matters: the RGB pass's depth buffer alone misses the glass
        for pos, rot in views:
            renderer.render(sim._d, pos, rot, 64, 64, 90.0, {"rgb"})
            opaque = renderer._depth_buffer(renderer._renderer(64, 64, True))
            changed += not np.array_equal(opaque, renderer.render(sim._d, pos, rot, 64, 64, 90.0, {"rgb", "depth"})["depth"])
        assert changed >= 1
    finally:
        env.close()


def test_one_gl_context_draws_every_image_size(home, gl_context):
    """Sizes share one ``mujoco.Renderer`` (a GL context and the model's GL resources are made
    once per scene) and give the images a renderer made for that size alone gives."""
    from vlnverse.sim.gym_env import VLNVerseNavEnv
    from vlnverse.sim.mujoco.render import GLRenderer

    env = VLNVerseNavEnv(home, "r2r_ce", sensors=[], quality="default")
    try:
        sim, shared = env.sim, env.sim._renderer
        views = _views_with_glass(env, shared, 48, 1)
        env.reset(seed=3)
        from vlnverse.sim.sensors import sensor_world_pose

        pos, rot = sensor_world_pose(AgentPose(sim.pose.x, sim.pose.y, 0.7), (0.0, 0.0, None, 0.0),
                                     sim.body.camera_height, 0.0, sim.scene.floor_z)
        kinds = {"rgb", "depth", "geom"}
        for p, r in [(pos, rot)] + views:
            for w, h in ((64, 64), (32, 24), (64, 64), (700, 500), (48, 48)):
                got = shared.render(sim._d, p, r, w, h, 90.0, kinds)
                fresh = GLRenderer(sim._built, sim._m, False, "default", shared._portals)
                try:
                    want = fresh.render(sim._d, p, r, w, h, 90.0, kinds)
                finally:
                    fresh.close()
                for kind in kinds:
                    assert got[kind].shape[:2] == (h, w)
                    np.testing.assert_array_equal(got[kind], want[kind])
        assert len(shared._renderers) == 1  # no MSAA at ``default``: one context for all sizes and kinds
    finally:
        env.close()


@pytest.mark.parametrize("quality", ["fast", "default"])
def test_panorama_views_equal_single_renders(home, gl_context, quality):
    from vlnverse.sim.gym_env import VLNVerseNavEnv

    env = VLNVerseNavEnv(home, "r2r_ce", sensors=[], quality=quality)
    try:
        sim = env.sim
        pano = make_sensor("panorama", modalities=("rgb", "depth", "instance"), width=48, height=48)
        for k, pitch in ((0, 0.0), (1, 0.3)):
            env.reset(seed=k)
            pose = AgentPose(sim.pose.x, sim.pose.y, 0.4, pitch)
            views = sim.render_at(pose, pano)
            for i in (0, 4, 9):
                view_pose = AgentPose(pose.x, pose.y, pose.yaw + 2 * math.pi * i / pano.views, pitch)
                for kind in ("rgb", "depth", "instance"):
                    spec = make_sensor(kind, width=48, height=48)
                    np.testing.assert_array_equal(views[f"panorama_{kind}"][i], sim.render_at(view_pose, spec)[kind])
    finally:
        env.close()


def _antialias_full_image(rgb, threshold=12.0, span=48.0):
    """The whole-image formula ``antialias`` computes on edge pixels only."""
    from vlnverse.sim.mujoco.gl_render import _LUMA

    img = rgb.astype(np.float32)
    luma = img @ _LUMA
    gx = np.abs(luma[1:-1, 2:] - luma[1:-1, :-2])
    gy = np.abs(luma[2:, 1:-1] - luma[:-2, 1:-1])
    weight = np.clip((np.maximum(gx, gy) - threshold) * (1.0 / span), 0.0, 0.5)
    blend = img[1:-1, 2:] + img[1:-1, :-2]
    np.copyto(blend, img[2:, 1:-1] + img[:-2, 1:-1], where=(gy <= gx)[..., None])
    centre = img[1:-1, 1:-1]
    centre += (blend * 0.5 - centre) * weight[..., None]
    return (img + 0.5).astype(np.uint8)


def test_edge_only_antialias_equals_the_whole_image_formula():
    from vlnverse.sim.mujoco.render import antialias

    rng = np.random.default_rng(0)
    noise = rng.integers(0, 256, (40, 50, 3), dtype=np.uint8)
    steps = np.zeros((40, 50, 3), np.uint8)
    steps[np.arange(40)[:, None] > 0.7 * np.arange(50)[None, :]] = (200, 120, 40)  # a jagged edge
    flat = np.full((20, 20, 3), 77, np.uint8)
    for image in (noise, steps, flat):
        np.testing.assert_array_equal(antialias(image), _antialias_full_image(image))
    assert not np.array_equal(antialias(steps), steps)  # the edge was softened


def test_both_renderers_satisfy_the_renderer_protocol(room, gl_context):
    """``render.Renderer`` states what the backend uses of a camera renderer; the GL and ray-cast
    renderers both have it, and an object without ``render`` does not."""
    from vlnverse.sim import make_simulator
    from vlnverse.sim.mujoco.render import GLRenderer, RaycastRenderer, Renderer

    for choice, cls in (("gl", GLRenderer), ("raycast", RaycastRenderer)):
        sim = make_simulator(room, "r2r_ce", sensors=[make_sensor("rgb")], renderer=choice)
        try:
            renderer = sim._renderer
            assert type(renderer) is cls and isinstance(renderer, Renderer) and renderer.name == choice
            assert sim.reset(AgentPose(3.0, 3.0, 0.0))["rgb"].shape[2] == 3
        finally:
            sim.close()

    class NoRender:
        name = "none"

        def close(self):
            pass

    assert not isinstance(NoRender(), Renderer)
