"""The navigable map and the physics agree: at every sampled navigable cell the agent's body
touches nothing, so a teleport there is not moved (Tel-Hop would count that as a collision)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from vlnverse.paths import scenes_dir
from vlnverse.scenes.maps import compute_scene_maps
from vlnverse.scenes.usd_io import load_scene
from vlnverse.sim import AgentPose, make_simulator
from vlnverse.sim.body import load_body


# Known bug (OccupancyMap.dilate): the margin radius + 1 cell assumes an obstacle reaches at most one cell
# beyond a marked centre, but along a diagonal (a box corner) it reaches up to √2 cells. In home_0016 the
# chair_0064 seat corner (9.68, 1.8325) is 0.1668 m from the FREE cell (9.625, 1.675), inside Stretch's
# 0.17 m radius. Widening the margin changes navigable maps everywhere (graph-mode SPL, dilation tests):
# a maps change of its own. strict: this test fails as soon as the bug is fixed, so the mark is removed then.
_DIAGONAL_MARGIN_BUG = pytest.mark.xfail(strict=True, reason="dilate() margin too small at box corners: "
                                         "home_0016 chair_0064 seat corner within Stretch's radius")
CASES = [pytest.param(scene, body, marks=[_DIAGONAL_MARGIN_BUG] if (scene, body) == ("home_0016", "stretch") else [])
         for scene in ("home_0012", "home_0016") for body in ("r2r_ce", "stretch")]


@pytest.mark.parametrize("scene_id, body_name", CASES)
def test_navigable_cells_are_collision_free_for_the_body(scene_id, body_name):
    path = scenes_dir() / f"{scene_id}.usd"
    if not path.is_file():
        pytest.skip(f"shipped scene {path} missing")
    body = load_body(body_name)
    desc = load_scene(path)
    maps = compute_scene_maps(desc, body)
    cells = np.argwhere(maps.navigable.free_mask())[::53]
    assert len(cells) > 20
    sim = make_simulator(desc, body, sensors=[], renderer="raycast")
    try:
        moved = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            for x, y in maps.navigable.cell_to_world(cells):
                result = sim.teleport(AgentPose(float(x), float(y), 0.0))
                shift = float(np.hypot(result.achieved_pose.x - x, result.achieved_pose.y - y))
                if shift > 1e-4:
                    moved.append((round(float(x), 3), round(float(y), 3), round(shift, 4)))
    finally:
        sim.close()
    assert moved == []


def test_a_pose_outside_the_scene_is_refused():
    from vlnverse.sim.demo import room_scene
    from vlnverse.sim.types import InvalidActionError

    sim = make_simulator(room_scene(), "r2r_ce", sensors=[], renderer="raycast")
    try:
        lo, hi = sim.scene.bounds()
        with pytest.raises(InvalidActionError, match="outside scene"):
            sim.reset((100.0, 100.0, 0.0))
        with pytest.raises(InvalidActionError, match="outside scene"):
            sim.teleport((float(lo[0]) - 1.0, float(lo[1] + hi[1]) / 2, 0.0))
        with pytest.raises(InvalidActionError, match="finite"):
            sim.teleport((float("nan"), 1.0, 0.0))
    finally:
        sim.close()
