"""Shared render work gives the same images: depth read from the RGB pass (same context, no
see-through geom drawn) equals a depth pass, and a panorama's views (``GLRenderer.render_views``:
position-dependent set-up once) equal single renders of each view."""
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
