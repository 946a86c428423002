"""A study draws objects as render meshes unless its config says otherwise (people must name the
landmarks the instructions mention), and a study folder keeps the render it was started with."""
from __future__ import annotations

import json

import numpy as np
import pytest

from vlnverse.core.errors import ConfigError
from vlnverse.run.setup import RenderConfig
from vlnverse.paths import tasks_dir
from vlnverse.study.assign import STUDY_FILE, StudyStore
from vlnverse.study.config import StudyConfig, load_study_config


def test_study_configs_default_to_meshes(tmp_path):
    assert StudyConfig().render == RenderConfig("default", "meshes")
    assert load_study_config(tasks_dir() / "study" / "example.yaml").render == RenderConfig("default", "meshes")
    cfg = tmp_path / "s.yaml"
    cfg.write_text("title: t\n")
    assert load_study_config(cfg).render == RenderConfig("default", "meshes")
    cfg.write_text("render: {quality: high}\n")  # a quality alone keeps the study's objects
    assert load_study_config(cfg).render == RenderConfig("high", "meshes")
    cfg.write_text("render: {objects: primitives}\n")
    assert load_study_config(cfg).render == RenderConfig("default", "primitives")


def test_the_study_driver_draws_mesh_geometry_by_default(study_episodes, tmp_path):
    """The participant's simulator, built by the session from the default config, holds the
    shipped home's render meshes (visible ``mjGEOM_MESH`` geoms), and its first frame comes."""
    from vlnverse.scenes.object_meshes import render_meshes
    from vlnverse.sim.mujoco.builder import GROUP_COLLISION_ONLY
    from vlnverse.study.session import ParticipantDriver

    store = StudyStore(tmp_path / "study", StudyConfig(image_size=32), study_episodes)
    assert json.loads((tmp_path / "study" / STUDY_FILE).read_text())["config"]["render"] == {
        "quality": "default", "objects": "meshes"}
    frames = []
    driver = ParticipantDriver(store, "S01", on_frame=frames.append, on_event=lambda e: None, threaded=False,
                               backend="mujoco")
    try:
        driver.start(store.current("S01"))
        for _ in range(200):
            assert driver.pump()
            if frames:
                break
        assert frames and frames[0][:2] == b"\xff\xd8"  # a JPEG
        built = driver._sim._built
        m = built.model
        drawn = (np.asarray(m.geom_type) == 7) & (np.asarray(m.geom_group) != GROUP_COLLISION_ONLY)
        meshes = render_meshes(driver._sim.scene)
        assert driver._sim.scene.scene_id == "home_0002"  # the first test home: 39 of its 67 objects have meshes
        assert (len(meshes), sum(len(v) for v in meshes.values())) == (39, 119)
        # the objects drawn by mesh geoms are exactly those with render meshes
        objects = {o.instance_id for o in driver._sim.scene.objects}
        assert set(np.asarray(built.geom_instance)[drawn].tolist()) & objects == set(meshes)
        assert int(np.sum(np.asarray(m.geom_group) == GROUP_COLLISION_ONLY)) > 0  # their primitives, hidden
    finally:
        driver.close()
        driver.pump()


def test_a_study_folder_keeps_the_render_it_was_started_with(study_episodes, tmp_path):
    out = tmp_path / "study"
    StudyStore(out, StudyConfig(render=RenderConfig(objects="primitives")), study_episodes)
    with pytest.raises(ConfigError) as err:
        StudyStore(out, StudyConfig(), study_episodes)  # the new default, meshes
    line = str(err.value)
    assert "study.json" in line and "render" in line and "default:primitives" in line and "default:meshes" in line
    assert StudyStore(out, StudyConfig(render=RenderConfig(objects="primitives"))).config.render.objects == "primitives"
    # a folder written before the field existed was drawn with primitives
    data = json.loads((out / STUDY_FILE).read_text())
    del data["config"]["render"]
    (out / STUDY_FILE).write_text(json.dumps(data))
    with pytest.raises(ConfigError, match="started with render default:primitives"):
        StudyStore(out, StudyConfig())
