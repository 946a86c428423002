"""Third-party stages without semantic labels (issue 11): categories inferred from prim names
through the documented lexicon become objects, so the scene graph and the object tasks work."""
from __future__ import annotations

import json

import numpy as np
import pytest

from vlnverse.cli import main
from vlnverse.scenes.labels import category_from_name, infer_room_type, name_tokens

W, D = 8.0, 6.0
#: Z-up metre boxes (lo, hi) of the hand-built stage, written Y-up in centimetres.
PARTS = {"floor": ((0, 0, -0.1), (W, D, 0)),
         "w1": ((0, -0.1, 0), (W, 0, 2.5)), "w2": ((0, D, 0), (W, D + 0.1, 2.5)),
         "w3": ((-0.1, 0, 0), (0, D, 2.5)), "w4": ((W, 0, 0), (W + 0.1, D, 2.5)),
         "table": ((1.0, 1.0, 0), (2.2, 1.8, 0.75)), "sofa": ((5.5, 4.6, 0), (7.5, 5.5, 0.85)),
         "cup": ((1.55, 1.35, 0.75), (1.63, 1.43, 0.85))}


def write_unlabelled_stage(path):
    """Y-up, centimetres, no semantics, no physics, no rooms: prims named floor, w1..w4, table, sofa, cup."""
    from pxr import Gf, Usd, UsdGeom

    stage = Usd.Stage.CreateNew(str(path))
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.y)
    UsdGeom.SetStageMetersPerUnit(stage, 0.01)
    UsdGeom.Xform.Define(stage, "/World")
    for name, ((x0, y0, z0), (x1, y1, z1)) in PARTS.items():
        lo, hi = (100 * x0, 100 * z0, -100 * y1), (100 * x1, 100 * z1, -100 * y0)  # Z-up m → Y-up cm
        cube = UsdGeom.Cube.Define(stage, f"/World/{name}")
        cube.CreateSizeAttr(1.0)
        xf = UsdGeom.Xformable(cube)
        xf.AddTranslateOp().Set(Gf.Vec3d(*[(a + b) / 2 for a, b in zip(lo, hi)]))
        xf.AddScaleOp().Set(Gf.Vec3f(*[b - a for a, b in zip(lo, hi)]))
    stage.GetRootLayer().Save()
    return path


@pytest.fixture(scope="module")
def stage(tmp_path_factory):
    return write_unlabelled_stage(tmp_path_factory.mktemp("unlabelled") / "unlabelled.usda")


def test_name_lexicon():
    assert name_tokens("SM_DiningTable_02") == ["dining", "table"]
    cases = {"floor": "floor", "w1": "wall", "w4": "wall", "Wall_07": "wall", "ceiling": "ceiling",
             "DoorFrame": "door_frame", "door_3": "door", "table": "table", "sofa": "sofa", "Couch_01": "sofa",
             "cup": "cup", "CoffeeTable3": "coffee_table", "Refrigerator": "fridge", "chairs": "chair",
             "bedside_table": "nightstand", "Mesh_37": None, "crate": None, "sw1": None}
    assert {name: category_from_name(name) for name in cases} == cases
    assert category_from_name("W", abbreviations=False) is None  # a parent group /W is no wall


def test_room_types_from_contents():
    assert infer_room_type(["bed", "cup"]) == "bedroom"
    assert infer_room_type(["toilet", "sink"]) == "bathroom"
    assert infer_room_type(["sofa", "table", "cup"]) == "living_room"
    assert infer_room_type(["table", "cup"]) == "room" and infer_room_type([]) == "room"


def test_unlabelled_stage_yields_objects_relations_and_rooms(stage):
    from vlnverse.scenes.maps import compute_scene_maps
    from vlnverse.scenes.usd_io import load_scene

    with pytest.warns(UserWarning, match=r"labels inferred from prim names for 8 prim\(s\): cup, floor, sofa, table, wall"):
        desc = load_scene(stage)
    assert sorted(o.category for o in desc.objects) == ["cup", "sofa", "table"]
    labels = {g.name.rsplit("/", 1)[1]: g.label for g in desc.geoms}
    assert labels == {"floor": "floor", "w1": "wall", "w2": "wall", "w3": "wall", "w4": "wall",
                      "table": "table", "sofa": "sofa", "cup": "cup"}
    table = next(o for o in desc.objects if o.category == "table")
    np.testing.assert_allclose(table.bounds_min, [1.0, 1.0, 0.0], atol=1e-5)   # cm, Y-up → m, Z-up
    np.testing.assert_allclose(table.bounds_max, [2.2, 1.8, 0.75], atol=1e-5)
    assert desc.floor_z == pytest.approx(0.0, abs=1e-6)
    with pytest.warns(UserWarning, match="inferred 1 room"):
        maps = compute_scene_maps(desc, "r2r_ce", cache=False)
    graph = maps.scene_graph
    ids = {o["category"]: o["instance_id"] for o in graph.objects()}
    assert ("on", f"obj:{ids['table']}") in set(graph.relations(ids["cup"]))   # cup on table
    assert [r["room_type"] for r in graph.rooms()] == ["living_room"]          # the sofa says so


def test_scenes_info_says_which_labels_were_inferred(stage, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("VLNVERSE_CACHE", str(tmp_path / "cache"))
    assert main(["scenes", "info", str(stage), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["inferred_labels"] == {"/World/cup": "cup", "/World/floor": "floor", "/World/sofa": "sofa",
                                       "/World/table": "table", "/World/w1": "wall", "/World/w2": "wall",
                                       "/World/w3": "wall", "/World/w4": "wall"}
    assert info["objects_per_category"] == {"cup": 1, "sofa": 1, "table": 1}
    assert info["free_area_m2"] == pytest.approx(W * D - 1.2 * 0.8 - 2.0 * 0.9, abs=0.05)
    assert main(["scenes", "info", str(stage)]) == 0
    text = capsys.readouterr().out
    assert "8 inferred from prim names" in text and "/World/w1 → wall" in text and "living_room*" in text


def test_coarse_grained_episode_on_the_unlabelled_stage(stage, tmp_path):
    from vlnverse.tasks.dataset import generate_dataset
    from vlnverse.tasks.episode import load_episodes

    generate_dataset("coarse_grained", [stage], 3, 0, tmp_path / "cg", progress=False)
    episodes = load_episodes(tmp_path / "cg")
    assert len(episodes) == 3
    for ep in episodes:
        assert ep.info["target"]["category"] in {"cup", "sofa", "table"}
        assert ep.info["target"]["room_type"] == "living_room"
        for instruction in ep.instructions:
            assert "unknown" not in instruction.text.lower()


def test_a_generator_short_of_the_request_says_how_many_and_why(stage, tmp_path, capsys):
    """One room and 80% of the episodes asked to change rooms: 20 requested, far fewer possible."""
    import json as _json

    out = tmp_path / "short"
    assert main(["data", "generate", "--task", "coarse_grained", "--scenes", str(stage), "--episodes-per-scene",
                 "20", "--seed", "0", "--out", str(out), "--no-progress",
                 "--set", "params.max_attempts_per_episode=1"]) == 0
    summary = _json.loads((out / "summary.json").read_text())
    (short,) = summary["shortfall"]
    assert short["requested"] == 20 == summary["requested_episodes"]
    assert 0 < short["written"] == summary["total_episodes"] < 20
    assert "attempt budget" in short["reason"]
    text = capsys.readouterr().out
    assert f"short of the request: {short['written']} of 20 episodes" in text
    assert f"wrote {short['written']} of 20 episodes" in text
