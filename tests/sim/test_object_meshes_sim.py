"""``objects="meshes"`` in the MuJoCo backend: render meshes drawn instead of the objects'
collision geoms, which still collide; segmentation labels every object; the default untouched."""
from __future__ import annotations

import json

import numpy as np
import pytest

from vlnverse.scenes.object_meshes import GENERATORS, render_meshes
from vlnverse.scenes.procgen import generate_home
from vlnverse.sim import make_sensor, make_simulator
from vlnverse.sim.body import as_body
from vlnverse.sim.mujoco.builder import GROUP_COLLISION_ONLY, build_model, scene_hash


@pytest.fixture(scope="module")
def home():
    return generate_home(3)


def test_default_model_and_key_are_unchanged_and_meshes_are_opt_in(home):
    body = as_body("r2r_ce")
    plain = build_model(home, body)
    assert build_model(home, body, objects="primitives") is plain  # the same cache key
    assert scene_hash(home, body, step_height=body.step_height, physics_dt=0.005) == plain.key
    assert not np.any(np.asarray(plain.model.geom_group) == GROUP_COLLISION_ONLY)
    meshed = build_model(home, body, objects="meshes")
    assert meshed.key != plain.key
    assert meshed.model.ngeom > plain.model.ngeom
    with pytest.raises(Exception, match="objects"):
        build_model(home, body, objects="nice")


def test_every_object_is_drawn_and_still_collides(home):
    body = as_body("r2r_ce")
    built = build_model(home, body, objects="meshes")
    m = built.model
    group = np.asarray(m.geom_group)
    visible = (group != GROUP_COLLISION_ONLY) & (group != 3)
    meshes = render_meshes(home)
    for obj in home.objects:
        mine = built.geom_instance == obj.instance_id
        assert np.any(mine & visible), f"object {obj.instance_id} ({obj.category}) is drawn by no geom"
        labels = {built.labels[i] for i in built.geom_label_id[mine]}
        assert labels == {home.geoms[obj.geom_indices[0]].label}
        if obj.instance_id in meshes:
            drawn = mine & visible
            assert np.all(m.geom_contype[drawn] == 0) and np.all(m.geom_conaffinity[drawn] == 0)
            assert np.all(m.geom_type[drawn] == 7)  # mjGEOM_MESH
            hidden = mine & ~visible
            assert hidden.sum() == len(obj.geom_indices) and np.all(m.geom_contype[hidden] > 0)
            if obj.movable:  # the meshes ride on the object's body
                assert len(set(m.geom_bodyid[mine].tolist())) == 1
    plain = build_model(home, body)
    assert int(built.geom_blocks_agent.sum()) == int(plain.geom_blocks_agent.sum())


def test_segmentation_labels_every_visible_object_with_its_mesh(home, gl_context):
    from vlnverse.sim.gallery import room_views

    spec = make_sensor("instance", width=96, height=96)
    sem = make_sensor("semantic", width=96, height=96)
    label_of = {o.instance_id: o.category for o in home.objects}
    seen = set()
    # ``fast``: the same geometry as every preset, without baking home 3's light (its bands' labels:
    # tests/sim/test_lightmap.py)
    with make_simulator(home, sensors=[], quality="fast", objects="meshes") as sim:
        labels = sim.semantic_labels
        for _, pose in room_views(home, rooms=6):
            inst = sim.render_at(pose, spec)["instance"]
            cls = sim.render_at(pose, sem)["semantic"]
            for iid in np.unique(inst):
                if iid in label_of:
                    seen.add(int(iid))
                    assert {labels[c] for c in np.unique(cls[inst == iid])} == {label_of[iid]}
    meshed = set(render_meshes(home))
    assert len(seen & meshed) >= 5, "render meshes carry their objects' instance ids into segmentation"


def test_object_sheet_command_writes_close_ups(tmp_path, gl_context):
    from vlnverse.cli import main

    rc = main(["scenes", "gallery", "--object-sheet", "--categories", "sofa,cup", "--out", str(tmp_path),
               "--no-progress"])
    assert rc == 0
    data = json.loads((tmp_path / "objects.json").read_text())
    assert [v["category"] for v in data["views"]] == ["sofa", "sofa", "cup", "cup"]
    assert [v["variant"] for v in data["views"]] == [0, 1, 0, 1]
    assert all(v["distinct_colours"] > 40 for v in data["views"])
    from PIL import Image

    sheet = Image.open(tmp_path / "objects.png")
    assert sheet.width >= 4 * 224 and sheet.height >= 224
    assert (tmp_path / "objects_thumb.png").stat().st_size < sheet.width * sheet.height


def test_object_sheet_rejects_unknown_categories(tmp_path, capsys):
    from vlnverse.cli import main

    rc = main(["scenes", "gallery", "--object-sheet", "--categories", "sofa,spaceship", "--out", str(tmp_path)])
    assert rc == 2
    assert "--categories" in capsys.readouterr().err
    assert set(GENERATORS) >= {"sofa", "cup"}
