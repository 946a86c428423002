"""Gymnasium wrapper, scene conversion (mass, cache, contact layout) and a generated-home smoke test."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from vlnverse.core.errors import SceneError
from vlnverse.sim import DiscreteAction, InvalidActionError, make_sensor, make_simulator
from vlnverse.sim.demo import BoxObject, demo_home, room_scene
from vlnverse.sim.gym_env import VLNVerseNavEnv
from vlnverse.sim.mujoco.builder import build_model, scene_hash


def _small_rig():
    return [make_sensor("rgb", width=32, height=24), make_sensor("depth", width=32, height=24),
            make_sensor("semantic", width=32, height=24), make_sensor("lidar2d", beams=90)]


@pytest.mark.parametrize("mode", ["discrete", "velocity"])
def test_check_env_passes(mode):
    from gymnasium.utils.env_checker import check_env

    env = VLNVerseNavEnv(demo_home(0), "r2r_ce", _small_rig(), action_mode=mode, renderer="raycast")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # gymnasium's advice on unbounded pose/LiDAR boxes
        check_env(env, skip_render_check=True)
    env.close()


def test_env_reset_is_seeded_and_steps_report_collisions():
    env = VLNVerseNavEnv(room_scene(4.0, 4.0), "r2r_ce", [make_sensor("depth", width=16, height=16)], renderer="raycast")
    a, _ = env.reset(seed=7)
    b, _ = env.reset(seed=7)
    np.testing.assert_array_equal(a["pose"], b["pose"])
    x, y = a["pose"][:2]
    assert 0.18 - 0.01 <= x <= 4.0 - 0.18 + 0.01 and 0.18 - 0.01 <= y <= 4.0 - 0.18 + 0.01
    obs, _ = env.reset(options={"pose": (3.5, 2.0, 0.0)})  # 0.5 m from the east wall
    collided = []
    for _ in range(4):
        obs, reward, terminated, truncated, info = env.step(int(DiscreteAction.MOVE_FORWARD))
        collided.append(info["collided"])
        assert reward == 0.0 and not terminated and not truncated
    assert collided[-1] and info["contacts"][0]["label"] == "wall"
    assert obs["pose"][0] == pytest.approx(4.0 - 0.18, abs=0.01)
    _, _, terminated, _, _ = env.step(0)
    assert terminated
    with pytest.raises(InvalidActionError):
        env.step(9)
    env.close()


def test_movable_object_mass_is_distributed_and_floor_does_not_touch_agent():
    desc = room_scene(4.0, 4.0, objects=[BoxObject("crate", (2.0, 3.0, 0.2), (0.2, 0.2, 0.2), mass=7.5)])
    built = build_model(desc, __import__("vlnverse.sim", fromlist=["load_body"]).load_body("r2r_ce"))
    m = built.model
    body_id = built.movable_bodies[desc.objects[0].instance_id]
    assert m.body_mass[body_id] == pytest.approx(7.5)
    floor = [i for i in range(m.ngeom) if built.labels[built.geom_label_id[i]] == "floor"][0]
    agent = built.agent_geom
    blocks = lambda a, b: bool((m.geom_contype[a] & m.geom_conaffinity[b]) | (m.geom_contype[b] & m.geom_conaffinity[a]))
    assert not blocks(agent, floor) and blocks(floor, m.body_geomadr[body_id])
    assert m.geom_condim[agent] == 1 and m.geom_priority[agent] > 0


def test_model_cache_is_keyed_by_content():
    from vlnverse.sim import load_body

    body = load_body("r2r_ce")
    a, b = room_scene(4.0, 4.0), room_scene(4.0, 4.0)
    assert build_model(a, body) is build_model(b, body)
    b.geoms[0].transform[0, 3] += 0.01
    assert scene_hash(a, body, step_height=0.15, physics_dt=0.005) != scene_hash(b, body, step_height=0.15, physics_dt=0.005)
    assert build_model(a, body) is not build_model(b, body)
    # the key is the scene's one fingerprint (scene_content_hash) plus what compiling adds: a colour
    # leaves the fingerprint alone and changes the compiled model's key
    from vlnverse.scenes.description import scene_content_hash

    c = room_scene(4.0, 4.0)
    c.geoms[0].color = (0.1, 0.2, 0.3)
    assert scene_content_hash(c) == scene_content_hash(a) and scene_content_hash(b) != scene_content_hash(a)
    assert scene_hash(c, body, step_height=0.15, physics_dt=0.005) != scene_hash(a, body, step_height=0.15, physics_dt=0.005)


def test_empty_scene_is_rejected():
    from vlnverse.scenes.description import SceneDescription

    with pytest.raises(SceneError, match="no geometry"):
        make_simulator(SceneDescription("empty"), "r2r_ce", sensors=[])


def test_low_obstacles_under_step_height_do_not_block():
    desc = room_scene(4.0, 4.0, objects=[BoxObject("rug", (2.0, 2.0, 0.01), (0.5, 0.5, 0.01))])
    with make_simulator(desc, "r2r_ce", sensors=[], renderer="raycast") as sim:
        sim.reset((1.0, 2.0, 0.0))
        for _ in range(8):
            _, r = sim.step("MOVE_FORWARD")
            assert not r.collided
        assert sim.pose.x == pytest.approx(3.0, abs=0.03)


def test_generated_home_smoke():
    procgen = pytest.importorskip("vlnverse.scenes.procgen")
    home = procgen.generate_home(3)
    env = VLNVerseNavEnv(home, "r2r_ce", _small_rig(), renderer="raycast")
    obs, _ = env.reset(seed=0)
    for action in [1, 2, 1, 1, 3, 1, 4, 5]:
        obs, *_ = env.step(action)
    labels = env.sim.semantic_labels
    seen = {labels[i] for i in np.unique(obs["semantic"])}
    assert seen - {"background"}, "the camera must see labelled geometry"
    assert obs["semantic"].max() < len(labels)
    assert np.isfinite(obs["depth"]).all() and obs["depth"].max() <= 10.0
    env.close()


def test_shipped_home_smoke():
    from vlnverse.paths import scenes_dir

    usd = sorted(scenes_dir().glob("*.usd*")) if scenes_dir().is_dir() else []
    if not usd:
        pytest.skip("no shipped scenes in scenes_usd/")
    usd_io = pytest.importorskip("vlnverse.scenes.usd_io")
    desc = usd_io.load_scene(usd[0])
    env = VLNVerseNavEnv(desc, "r2r_ce", [make_sensor("depth", width=32, height=32)], renderer="raycast")
    env.reset(seed=1)
    for _ in range(3):
        _, _, _, _, info = env.step(1)
    assert math.isfinite(info["obstacle_displacement"])
    env.close()


def test_semantic_ids_are_stable_across_generated_homes():
    procgen = pytest.importorskip("vlnverse.scenes.procgen")
    tables = []
    for seed in (0, 1):
        with make_simulator(procgen.generate_home(seed), "r2r_ce", sensors=[], renderer="raycast") as sim:
            tables.append(sim.semantic_labels)
    from vlnverse.sim.mujoco.builder import default_label_table

    # Every generated label is a catalog category, so both homes use the same global table.
    assert tables[0] == tables[1] == default_label_table()
    assert tables[0][:5] == ["background", "wall", "floor", "ceiling", "door_frame"]
    # A scene label outside the table is appended after it, never renumbering the table.
    extra = room_scene(3.0, 3.0, objects=[BoxObject("zz_prototype", (1.5, 1.5, 0.2), (0.2, 0.2, 0.2))])
    with make_simulator(extra, "r2r_ce", sensors=[], renderer="raycast") as sim:
        assert sim.semantic_labels == default_label_table() + ["zz_prototype"]


def _start_points(env, n=300):
    env.reset(seed=0)
    return np.array([[p.x, p.y] for p in (env.sample_start_pose() for _ in range(n))])


def test_random_starts_avoid_enclosed_pockets():
    """Navigable cells the agent cannot reach (the inside of a closed pen, a bathtub) are no start."""
    pen = [BoxObject("pen_wall", c, h) for c, h in (((4.5, 3.55, 0.5), (1.05, 0.05, 0.5)), ((4.5, 5.45, 0.5), (1.05, 0.05, 0.5)),
                                                     ((3.45, 4.5, 0.5), (0.05, 1.0, 0.5)), ((5.55, 4.5, 0.5), (0.05, 1.0, 0.5)))]
    env = VLNVerseNavEnv(room_scene(6.0, 6.0, objects=pen), "r2r_ce", [], renderer="raycast")
    pts = _start_points(env)
    inside = (pts[:, 0] > 3.5) & (pts[:, 0] < 5.5) & (pts[:, 1] > 3.6) & (pts[:, 1] < 5.4)
    assert not inside.any(), f"{inside.sum()} of {len(pts)} starts inside the closed pen"
    env.close()


def test_random_starts_use_the_body_height_band():
    """A tall body (Stretch, 1.41 m) cannot start under a shelf hanging at 1.0-1.3 m."""
    shelf = [BoxObject("shelf", (1.5, 3.0, 1.15), (1.5, 3.0, 0.15))]  # covers the west half, x < 3
    env = VLNVerseNavEnv(room_scene(6.0, 6.0, objects=shelf), "stretch", [], renderer="raycast")
    pts = _start_points(env)
    assert (pts[:, 0] >= 3.0 + 0.17 - 0.01).all(), "a start under the shelf penetrates it"
    env.close()


def test_objects_at_the_agents_compile_origin_start_awake_without_a_mujoco_warning():
    """Generated home 1029 has a nightstand (and what stands on it) over the origin, where the
    agent's cylinder (never asleep) is compiled: they start awake, so MuJoCo no longer warns that
    it could not sleep them (a stray MUJOCO_LOG.TXT); every other movable object starts asleep."""
    import warnings

    import mujoco

    from vlnverse.core.body import as_body
    from vlnverse.scenes.procgen import generate_home

    if not hasattr(mujoco.mjtSleepPolicy, "mjSLEEP_INIT"):
        pytest.skip("MuJoCo without island sleeping")
    desc = generate_home(1029)
    body = as_body("r2r_ce")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = build_model(desc, body).model
    assert not [w for w in caught if "could be slept" in str(w.message)]
    movable = [o for o in desc.objects if o.movable and o.geom_indices]
    at_origin = [o for o in movable if o.bounds_min[0] < body.radius and o.bounds_min[1] < body.radius
                 and o.bounds_max[0] > -body.radius and o.bounds_max[1] > -body.radius]
    near = {o.instance_id for o in at_origin}
    assert 126 in near and len(near) < len(movable)
    init = int(mujoco.mjtSleepPolicy.mjSLEEP_INIT)
    policy = {o.instance_id: int(model.tree_sleep_policy[model.body_treeid[model.body(f"obj{o.instance_id}").id]])
              for o in movable}
    assert {i for i, p in policy.items() if p != init} == near
