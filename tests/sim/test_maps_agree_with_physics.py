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


CASES = [(scene, body) for scene in ("home_0012", "home_0016") for body in ("r2r_ce", "stretch")]


def _corner_cells(desc, body, navigable) -> np.ndarray:
    """For every corner of every obstacle box footprint in the body's height band, the navigable
    cell whose centre is nearest to it: where a margin too small at corners shows first (an
    earlier map kept a cell 0.1668 m from a chair seat corner for Stretch's 0.17 m radius)."""
    lo_z, hi_z = desc.floor_z + body.step_height, desc.floor_z + body.height
    corners = []
    for g in desc.geoms:
        if g.kind != "box" or not g.collides or g.label == "floor":
            continue
        zlo, zhi = g.world_aabb()[0][2], g.world_aabb()[1][2]
        if zhi < lo_z or zlo > hi_z:
            continue
        rot, pos = g.transform[:3, :3], g.transform[:3, 3]
        signs = np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]], float)
        corners.append((signs * g.size[:2]) @ rot[:2, :2].T + pos[:2])
    corners = np.concatenate(corners)
    free = np.argwhere(navigable.free_mask())
    centres = navigable.cell_to_world(free)
    from scipy.spatial import cKDTree

    _, nearest = cKDTree(centres).query(corners)
    return np.unique(free[nearest], axis=0)


def _moved_by_teleport(sim, navigable, cells) -> list[tuple[float, float, float]]:
    """Cells where a teleport to the cell centre had to move the agent (it penetrated something)."""
    moved = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for x, y in navigable.cell_to_world(cells):
            result = sim.teleport(AgentPose(float(x), float(y), 0.0))
            shift = float(np.hypot(result.achieved_pose.x - x, result.achieved_pose.y - y))
            if shift > 1e-4:
                moved.append((round(float(x), 3), round(float(y), 3), round(shift, 4)))
    return moved


@pytest.mark.parametrize("scene_id, body_name", CASES)
def test_navigable_cells_are_collision_free_for_the_body(scene_id, body_name):
    """Sampled navigable cells and the navigable cell nearest every obstacle box corner."""
    path = scenes_dir() / f"{scene_id}.usd"
    if not path.is_file():
        pytest.skip(f"shipped scene {path} missing")
    body = load_body(body_name)
    desc = load_scene(path)
    maps = compute_scene_maps(desc, body)
    sampled = np.argwhere(maps.navigable.free_mask())[::53]
    corners = _corner_cells(desc, body, maps.navigable)
    assert len(sampled) > 20 and len(corners) > 200
    sim = make_simulator(desc, body, sensors=[], renderer="raycast")
    try:
        assert _moved_by_teleport(sim, maps.navigable, sampled) == []
        assert _moved_by_teleport(sim, maps.navigable, corners) == []
    finally:
        sim.close()


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
