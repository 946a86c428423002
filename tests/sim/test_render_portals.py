"""Portal culling (``RoomPortals``): geoms of rooms seen through no door in view are not drawn,
and the images are exactly those of a full draw."""
from __future__ import annotations

import math

import numpy as np
import pytest

from vlnverse.sim import AgentPose, make_sensor


def test_rooms_behind_walls_are_not_drawn_and_images_do_not_change(gl_context):
    procgen = pytest.importorskip("vlnverse.scenes.procgen", reason="needs the scene generator")
    from vlnverse.sim.gym_env import VLNVerseNavEnv

    env = VLNVerseNavEnv(procgen.generate_home(3, min_rooms=10, max_rooms=10), "r2r_ce", sensors=[])
    try:
        renderer = env.sim._renderer
        portals = renderer._portals
        assert portals is not None and (portals.geom_room >= 0).sum() > env.sim._m.ngeom // 3
        spec = make_sensor("depth", width=48, height=48)
        rng = np.random.default_rng(0)
        fewer = 0
        for k in range(12):
            env.reset(seed=k)
            pose = AgentPose(env.sim.pose.x, env.sim.pose.y, float(rng.uniform(-math.pi, math.pi)))
            culled = env.sim.render_at(pose, spec)["depth"]
            drawn = renderer.last_drawn
            renderer._portals = None
            try:
                full = env.sim.render_at(pose, spec)["depth"]
                drawn_full = renderer.last_drawn
            finally:
                renderer._portals = portals
            np.testing.assert_array_equal(culled, full)
            assert drawn <= drawn_full
            fewer += drawn < drawn_full
        assert fewer >= 6  # most views skip whole rooms
    finally:
        env.close()
