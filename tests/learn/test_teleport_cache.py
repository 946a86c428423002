"""Teleport rendering of the teacher's observations (``learn.collect``: ``render: teleport``):
the rollout runs without sensors and the frames are drawn afterwards at the recorded poses. Under
Tel-Hop with the oracle teacher it must give the physics-rendered cache's labels, poses and frames
exactly, under its own cache key; where it cannot apply it is refused in one line."""
from __future__ import annotations

import numpy as np
import pytest

from learn_helpers import make_episodes


def _settings(ctx):
    from vlnverse.run.episodes import RunSettings

    return RunSettings(max_steps=60, success_distance=1.5, body=ctx.body, resolution=0.05, task_type="fine_grained")


def _sensors(size=16, **depth):
    from vlnverse.sim.sensors import CameraSpec

    return [CameraSpec("rgb", "rgb", size, size), CameraSpec("depth", "depth", size, size, **depth)]


@pytest.mark.parametrize("depth", [{}, {"max_depth": 3.0, "normalize": True}])
def test_teleport_rendered_cache_equals_the_physics_rendered_one(corridor, tmp_path, depth):
    from vlnverse.learn.cache import teacher_cache

    episodes = make_episodes(corridor)[:3]
    kw = dict(sensors=_sensors(**depth), settings=_settings(corridor), collision_mode="telhop", base_dir=tmp_path,
              scene_loader=lambda *a: corridor, progress=False, report=lambda s: None)
    physics, p_stats = teacher_cache(episodes, render="physics", **kw)
    teleport, t_stats = teacher_cache(episodes, render="teleport", **kw)
    assert (p_stats["render"], t_stats["render"]) == ("physics", "teleport")
    assert p_stats["path"] != t_stats["path"] and t_stats["status"] == "built"
    assert physics.num_steps == teleport.num_steps > 30 and t_stats["teacher_SR"] == p_stats["teacher_SR"] == 1.0
    for i in range(len(episodes)):
        a, b = physics.episode(i), teleport.episode(i)
        for field in ("label", "executed", "pose", "rgb", "depth"):
            assert a[field].dtype == b[field].dtype and np.array_equal(a[field], b[field]), (i, field)
        assert a["rgb"].std() > 0 and 0 < float(a["depth"].max())  # real frames, not blanks
    _, auto = teacher_cache(episodes, render="auto", **kw)  # auto under Tel-Hop = teleport: reused
    assert auto["status"] == "reused" and auto["path"] == t_stats["path"]


def test_render_frames_of_a_mixed_rig_match_the_simulator_observations(corridor):
    """A rig that cannot share one pass (different sizes) is drawn camera by camera, as observed."""
    from vlnverse.learn.collect import render_frames
    from vlnverse.sim import make_simulator
    from vlnverse.sim.sensors import CameraSpec
    from vlnverse.sim.types import AgentPose

    rig = [CameraSpec("rgb", "rgb", 16, 16), CameraSpec("depth", "depth", 8, 8)]
    sim = make_simulator(corridor.desc, corridor.body, sensors=rig)
    try:
        pose = AgentPose(2.0, 1.5, 0.3)
        obs = sim.reset(pose)
        (frames,) = render_frames(sim, [sim.pose], rig)
        assert frames["rgb"].shape == (16, 16, 3) and frames["depth"].shape == (8, 8)
        assert np.array_equal(frames["rgb"], obs["rgb"]) and np.array_equal(frames["depth"], obs["depth"])
    finally:
        sim.close()


def test_cache_key_names_the_render_path(corridor):
    from vlnverse.learn.cache import cache_key

    episodes = make_episodes(corridor)[:1]
    kw = dict(sensors=_sensors(), settings=_settings(corridor), collision_mode="telhop", mode_params=None)
    physics, teleport = cache_key(episodes, render="physics", **kw), cache_key(episodes, render="teleport", **kw)
    assert physics["render"] == "physics" and teleport["render"] == "teleport"
    assert {k: v for k, v in physics.items() if k != "render"} == {k: v for k, v in teleport.items() if k != "render"}


def test_render_path_is_teleport_only_where_it_gives_the_physics_poses():
    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.collect import resolve_render_path
    from vlnverse.sim.sensors import CameraSpec

    rig = _sensors()
    assert resolve_render_path("auto", "telhop", None, rig) == "teleport"
    assert resolve_render_path("auto", "strict", None, rig) == "physics"
    assert resolve_render_path("auto", "telhop", object(), rig) == "physics"  # RDP / VLN-BERT teachers
    assert resolve_render_path("auto", "telhop", None, [CameraSpec("rgb", "rgb", 16, 16, rate_hz=2.0)]) == "physics"
    assert resolve_render_path("physics", "telhop", None, rig) == "physics"
    with pytest.raises(ConfigError, match=r"cache\.render.*strict"):
        resolve_render_path("teleport", "strict", None, rig)
    with pytest.raises(ConfigError, match=r"cache\.render"):
        resolve_render_path("raytrace", "telhop", None, rig)


def test_train_config_rejects_an_unknown_render_path(tmp_path, episodes_file):
    from vlnverse.core.errors import ConfigError
    from learn_helpers import small_config

    with pytest.raises(ConfigError, match="render"):
        small_config(tmp_path / "x", episodes_file, cache__render="gpu")
