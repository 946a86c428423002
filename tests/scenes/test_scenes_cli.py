"""The ``vlnverse scenes`` commands on a tiny USD stage built here with pxr, the maps bundle and its
disk cache, and map pictures."""
from __future__ import annotations

import json

import numpy as np
import pytest

from vlnverse.cli import main
from vlnverse.scenes.description import Door, Geom, Room, SceneDescription, SceneObject
from vlnverse.scenes.occupancy import FREE, OCCUPIED

def _cube(stage, path, centre, half, label, instance_id):
    from pxr import Gf, Sdf, UsdGeom, UsdPhysics, UsdSemantics

    cube = UsdGeom.Cube.Define(stage, path)
    cube.CreateSizeAttr(2.0)
    xf = UsdGeom.Xformable(cube)
    xf.AddTranslateOp().Set(Gf.Vec3d(*centre))
    xf.AddScaleOp().Set(Gf.Vec3f(*half))
    UsdPhysics.CollisionAPI.Apply(cube.GetPrim())
    labels = UsdSemantics.LabelsAPI.Apply(cube.GetPrim(), "class")
    labels.CreateLabelsAttr().Set([label])
    cube.GetPrim().CreateAttribute("vlnverse:instanceId", Sdf.ValueTypeNames.Int).Set(instance_id)
    return cube


def write_stage(path, rooms=True):
    """Floor 6 x 3 m (top at z=0); a wall at x=3 (0.1 m thick) with a 1 m door at y in [1, 2];
    a 1.0 x 0.6 m 'table' box at (1.0, 1.0). Rooms/doors are recorded as in the scene contract."""
    from pxr import Gf, Sdf, Usd, UsdGeom, Vt

    stage = Usd.Stage.CreateNew(str(path))
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    world = UsdGeom.Xform.Define(stage, "/World")
    stage.SetDefaultPrim(world.GetPrim())
    _cube(stage, "/World/Floor", (3.0, 1.5, -0.05), (3.0, 1.5, 0.05), "floor", 1)
    _cube(stage, "/World/WallA", (3.0, 0.5, 1.35), (0.05, 0.5, 1.35), "wall", 2)
    _cube(stage, "/World/WallB", (3.0, 2.5, 1.35), (0.05, 0.5, 1.35), "wall", 3)
    _cube(stage, "/World/Table", (1.0, 1.0, 0.375), (0.5, 0.3, 0.375), "table", 4)
    if rooms:
        UsdGeom.Scope.Define(stage, "/World/Rooms")
        for rid, rtype, poly in ((0, "kitchen", [(0, 0), (2.95, 0), (2.95, 3), (0, 3)]),
                                 (1, "bedroom", [(3.05, 0), (6, 0), (6, 3), (3.05, 3)])):
            prim = UsdGeom.Scope.Define(stage, f"/World/Rooms/{rtype}").GetPrim()
            prim.CreateAttribute("vlnverse:roomId", Sdf.ValueTypeNames.Int).Set(rid)
            prim.CreateAttribute("vlnverse:roomType", Sdf.ValueTypeNames.String).Set(rtype)
            prim.CreateAttribute("vlnverse:polygon", Sdf.ValueTypeNames.Float2Array).Set(
                Vt.Vec2fArray([Gf.Vec2f(x, y) for x, y in poly]))
        UsdGeom.Scope.Define(stage, "/World/Doors")
        door = UsdGeom.Scope.Define(stage, "/World/Doors/door_00").GetPrim()
        door.CreateAttribute("vlnverse:doorId", Sdf.ValueTypeNames.Int).Set(0)
        door.CreateAttribute("vlnverse:roomIds", Sdf.ValueTypeNames.Int2).Set(Gf.Vec2i(0, 1))
        door.CreateAttribute("vlnverse:center", Sdf.ValueTypeNames.Double2).Set(Gf.Vec2d(3.0, 1.5))
        door.CreateAttribute("vlnverse:width", Sdf.ValueTypeNames.Double).Set(1.0)
        door.CreateAttribute("vlnverse:axis", Sdf.ValueTypeNames.String).Set("y")
    stage.GetRootLayer().Save()
    return path


#: 120 x 60 floor cells minus 2 x 40 wall cells and 20 x 12 table cells, at 0.05 m
FREE_M2 = (120 * 60 - 80 - 240) * 0.05 ** 2


@pytest.fixture()
def stage(tmp_path, monkeypatch):
    monkeypatch.setenv("VLNVERSE_CACHE", str(tmp_path / "cache"))
    return write_stage(tmp_path / "tiny.usda")


def test_info_reports_rooms_areas_and_objects(stage, capsys):
    assert main(["scenes", "info", str(stage), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["free_area_m2"] == pytest.approx(FREE_M2)
    assert 0 < info["navigable_area_m2"] < info["free_area_m2"]
    assert [(r["room_id"], r["room_type"]) for r in info["rooms"]] == [(0, "kitchen"), (1, "bedroom")]
    assert info["rooms"][0]["area_m2"] == pytest.approx(2.95 * 3)
    # the kitchen holds the table; the door cells are split between the rooms
    assert info["rooms"][0]["free_area_m2"] + info["rooms"][1]["free_area_m2"] == pytest.approx(FREE_M2)
    assert info["rooms"][1]["free_area_m2"] == pytest.approx((59 * 60 + 20) * 0.05 ** 2)
    assert info["objects_per_category"] == {"table": 1} and info["door_count"] == 1
    assert info["graph_edges"]["adjacent"] == 2 and info["graph_edges"]["in"] == 1
    assert main(["scenes", "info", str(stage)]) == 0
    text = capsys.readouterr().out
    assert "kitchen" in text and "table 1" in text and "navigable" in text


def test_info_on_a_stage_without_rooms_infers_them(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("VLNVERSE_CACHE", str(tmp_path / "cache"))
    path = write_stage(tmp_path / "bare.usda", rooms=False)
    assert main(["scenes", "info", str(path), "--json"]) == 0
    captured = capsys.readouterr()
    info = json.loads(captured.out)
    # typed by their contents: a table says nothing about a room's use, so both are plain "room"s
    assert [r["room_type"] for r in info["rooms"]] == ["room", "room"]
    assert all(r["inferred"] for r in info["rooms"])
    assert sum(r["free_area_m2"] for r in info["rooms"]) == pytest.approx(FREE_M2)
    warning = [line for line in captured.err.splitlines() if "inferred 2 room" in line]
    assert len(warning) == 1 and warning[0].startswith(f"vlnverse: warning: {path}")


def _mesh_box(stage, path, lo, hi):
    from pxr import Gf, UsdGeom, UsdPhysics, Vt

    (x0, y0, z0), (x1, y1, z1) = lo, hi
    corners = [(x0, y0, z0), (x1, y0, z0), (x1, y1, z0), (x0, y1, z0),
               (x0, y0, z1), (x1, y0, z1), (x1, y1, z1), (x0, y1, z1)]
    quads = [(0, 3, 2, 1), (4, 5, 6, 7), (0, 1, 5, 4), (1, 2, 6, 5), (2, 3, 7, 6), (3, 0, 4, 7)]
    mesh = UsdGeom.Mesh.Define(stage, path)
    mesh.CreatePointsAttr(Vt.Vec3fArray([Gf.Vec3f(*c) for c in corners]))
    mesh.CreateFaceVertexCountsAttr([4] * 6)
    mesh.CreateFaceVertexIndicesAttr([i for q in quads for i in q])
    UsdPhysics.CollisionAPI.Apply(mesh.GetPrim())


def test_third_party_mesh_stage_without_labels_or_rooms(tmp_path, monkeypatch, capsys):
    """Meshes only, no semantics, no rooms: same free area as the box stage, two inferred rooms."""
    from pxr import Usd, UsdGeom

    monkeypatch.setenv("VLNVERSE_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "third_party.usda"
    stage = Usd.Stage.CreateNew(str(path))
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    UsdGeom.Xform.Define(stage, "/World")
    _mesh_box(stage, "/World/slab", (0, 0, -0.1), (6, 3, 0))
    _mesh_box(stage, "/World/partition_a", (2.95, 0, 0), (3.05, 1, 2.7))
    _mesh_box(stage, "/World/partition_b", (2.95, 2, 0), (3.05, 3, 2.7))
    _mesh_box(stage, "/World/crate", (0.5, 0.5, 0), (1.5, 1.1, 0.75))
    stage.GetRootLayer().Save()
    assert main(["scenes", "info", str(path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["free_area_m2"] == pytest.approx(FREE_M2) and info["room_count"] == 2


def test_render_map_writes_a_picture(stage, tmp_path, capsys):
    from PIL import Image

    out = tmp_path / "maps" / "map.png"
    assert main(["scenes", "render-map", str(stage), "--out", str(out)]) == 0
    img = np.asarray(Image.open(out).convert("RGB"))
    assert img.shape[0] > 200 and img.shape[1] > 300
    assert len(np.unique(img.reshape(-1, 3), axis=0)) > 20  # not a blank canvas
    bad = tmp_path / "map.txt"
    assert main(["scenes", "render-map", str(stage), "--out", str(bad)]) == 2
    assert "--out" in capsys.readouterr().err and not bad.exists()


def test_export_maps_writes_every_artifact(stage, tmp_path):
    import networkx as nx

    from vlnverse.scenes.occupancy import OccupancyMap

    out = tmp_path / "export"
    assert main(["scenes", "export-maps", str(stage), "--out", str(out), "--body", "r2r_ce"]) == 0
    names = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    assert names == ["map.png", "navigable.npz", "occupancy.npz", "room_map.npz", "scene_graph.json", "summary.json"]
    occ, nav = OccupancyMap.load(out / "occupancy.npz"), OccupancyMap.load(out / "navigable.npz")
    assert (occ.grid == OCCUPIED).sum() == 80 + 20 * 12 and nav.radius == pytest.approx(0.18)
    data = json.loads((out / "scene_graph.json").read_text())
    try:
        graph = nx.node_link_graph(data, edges="links")
    except TypeError:
        graph = nx.node_link_graph(data)
    assert any(d.get("category") == "table" for _, d in graph.nodes(data=True))


def test_export_maps_is_byte_identical_across_runs(stage, tmp_path, monkeypatch):
    for run in ("a", "b"):
        monkeypatch.setenv("VLNVERSE_CACHE", str(tmp_path / f"cache_{run}"))  # no shared cache
        assert main(["scenes", "export-maps", str(stage), "--out", str(tmp_path / run)]) == 0
    for name in ("occupancy.npz", "navigable.npz", "room_map.npz", "scene_graph.json", "map.png", "summary.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


@pytest.mark.parametrize("argv_tail, needle", [
    (["--resolution", "0"], "--resolution: got 0.0"),
    (["--body", "no_such_robot"], "unknown body preset 'no_such_robot'"),
])
def test_bad_options_exit_2_with_one_line(stage, tmp_path, capsys, argv_tail, needle):
    out = tmp_path / "bad.png"
    assert main(["scenes", "render-map", str(stage), "--out", str(out), *argv_tail]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err
    assert not out.exists() and not any(p.name.startswith(".bad") for p in tmp_path.iterdir())


def test_missing_and_corrupt_files_exit_2_naming_the_file(tmp_path, capsys):
    out = tmp_path / "map.png"
    missing = tmp_path / "nope.usda"
    assert main(["scenes", "render-map", str(missing), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(missing) in err
    corrupt = tmp_path / "corrupt.usda"
    corrupt.write_text("#usda 1.0\n(\n this is not usd {{{\n")
    assert main(["scenes", "info", str(corrupt)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(corrupt) in err
    assert not out.exists()


def test_no_navigable_space_exits_2(stage, tmp_path, capsys):
    body = tmp_path / "huge.yaml"
    body.write_text("name: huge\nradius: 2.0\nheight: 1.0\ncamera_height: 1.0\n")
    out = tmp_path / "export"
    assert main(["scenes", "export-maps", str(stage), "--out", str(out), "--body", str(body)]) == 2
    err = capsys.readouterr().err.strip()
    assert "radius 2.000 m leaves no navigable cell" in err and str(stage) in err
    assert not out.exists()


# ------------------------------------------------------------------ maps bundle and pictures
def _scene():
    def box(lo, hi, label, iid):
        lo, hi = np.asarray(lo, float), np.asarray(hi, float)
        t = np.eye(4)
        t[:3, 3] = (lo + hi) / 2
        return Geom("box", t, (hi - lo) / 2, label=label, instance_id=iid)

    geoms = [box((0, 0, -0.1), (6, 3, 0), "floor", 1), box((2.95, 0, 0), (3.05, 1, 2.7), "wall", 2),
             box((2.95, 2, 0), (3.05, 3, 2.7), "wall", 2), box((0.5, 0.5, 0), (1.5, 1.1, 0.75), "table", 3)]
    return SceneDescription(
        "two_rooms", geoms=geoms, source_path="two_rooms.usda",
        objects=[SceneObject(3, "table", "/World/table", (0.5, 0.5, 0), (1.5, 1.1, 0.75), geom_indices=[3])],
        rooms=[Room(0, "kitchen", [[0, 0], [2.95, 0], [2.95, 3], [0, 3]]),
               Room(1, "bedroom", [[3.05, 0], [6, 0], [6, 3], [3.05, 3]])],
        doors=[Door(0, (0, 1), (3.0, 1.5), 1.0, axis="y")])


def test_compute_scene_maps_and_disk_cache(tmp_path, monkeypatch):
    from vlnverse.scenes.maps import compute_scene_maps, scene_summary
    from vlnverse.sim.body import load_body

    monkeypatch.setenv("VLNVERSE_CACHE", str(tmp_path / "cache"))
    body = load_body("r2r_ce")
    maps = compute_scene_maps(_scene(), body)
    assert maps.navigable.radius == body.radius and maps.room_map.shape == maps.occupancy.shape
    # every navigable cell has a room; the table is in the kitchen
    assert (maps.room_map[maps.navigable.grid == FREE] >= 0).all()
    assert maps.scene_graph.room_of(3) == 0
    cached = list((tmp_path / "cache" / "maps").glob("two_rooms-*.npz"))
    assert len(cached) == 1
    again = compute_scene_maps(_scene(), body)
    np.testing.assert_array_equal(again.navigable.grid, maps.navigable.grid)
    np.testing.assert_array_equal(again.room_map, maps.room_map)
    assert again.scene_graph.to_json() == maps.scene_graph.to_json()
    # a different body or a moved table is a different cache entry
    moved = _scene()
    moved.geoms[3].transform[0, 3] += 0.5
    compute_scene_maps(moved, body)
    compute_scene_maps(_scene(), "turtlebot4")
    assert len(list((tmp_path / "cache" / "maps").glob("*.npz"))) == 3
    # a corrupt cache entry is rebuilt, not trusted
    cached[0].write_bytes(b"garbage")
    np.testing.assert_array_equal(compute_scene_maps(_scene(), body).navigable.grid, maps.navigable.grid)
    summary = scene_summary(_scene(), maps)
    assert [r["room_type"] for r in summary["rooms"]] == ["kitchen", "bedroom"]
    assert summary["door_count"] == 1 and summary["objects_per_category"] == {"table": 1}
    assert summary["graph_edges"]["adjacent"] == 2


def test_computed_and_cached_maps_are_equal_to_the_last_float(tmp_path, monkeypatch):
    """Episodes must not depend on whether the map cache was warm: a bundle computed afresh and
    one read from the cache hold the same scene graph attributes (floats included), on a
    shipped home whose USD holds float32 coordinates (2.4249999523 vs 2.425 before the fix)."""
    from vlnverse.paths import scenes_dir
    from vlnverse.scenes.maps import scene_maps_for

    monkeypatch.setenv("VLNVERSE_CACHE", str(tmp_path / "cache"))
    scene = scenes_dir() / "home_0001.usd"
    fresh = scene_maps_for(scene).scene_graph.graph
    cached = scene_maps_for(scene).scene_graph.graph
    assert list((tmp_path / "cache" / "maps").glob("home_0001-*.npz"))
    assert dict(fresh.nodes(data=True)) == dict(cached.nodes(data=True))
    assert sorted(fresh.edges(data=True), key=repr) == sorted(cached.edges(data=True), key=repr)
    assert fresh.nodes["room:0"]["position"][0] == 2.425


def test_render_map_array_shows_rooms_overlays_and_is_deterministic(tmp_path, monkeypatch):
    from vlnverse.scenes.maps import compute_scene_maps
    from vlnverse.scenes.render_map import render_map_array, render_map_png

    monkeypatch.setenv("VLNVERSE_CACHE", str(tmp_path / "cache"))
    desc = _scene()
    maps = compute_scene_maps(desc, "r2r_ce", cache=False)
    plain = render_map_array(desc, maps)
    path = [{"xy": np.array([[1.0, 2.0], [3.0, 1.5], [5.0, 1.5]]), "color": "#00ff00", "label": "reference"}]
    marks = [{"xy": (5.0, 1.5), "marker": "x", "color": "#ff0000", "label": "stop"}]
    drawn = render_map_array(desc, maps, paths=path, markers=marks)
    assert plain.dtype == np.uint8 and plain.ndim == 3 and plain.shape == drawn.shape
    green = (drawn[..., 1] > 200) & (drawn[..., 0] < 60) & (drawn[..., 2] < 60)
    assert green.sum() > 100 and ((plain[..., 1] > 200) & (plain[..., 0] < 60) & (plain[..., 2] < 60)).sum() == 0
    np.testing.assert_array_equal(render_map_array(desc, maps), plain)
    out = render_map_png(desc, maps, tmp_path / "m.png", title="two rooms")
    assert out.stat().st_size > 10_000 and [p.name for p in tmp_path.glob("*.png")] == ["m.png"]


def test_generate_is_deterministic_and_prints_the_paths(tmp_path, capsys):
    for run in ("a", "b"):
        assert main(["scenes", "generate", "--count", "1", "--seed", "3", "--out", str(tmp_path / run),
                     "--no-progress", "--min-rooms", "4", "--max-rooms", "5"]) == 0
    printed = capsys.readouterr().out.split()
    assert printed == [str(tmp_path / "a" / "home_0003.usda"), str(tmp_path / "b" / "home_0003.usda")]
    assert (tmp_path / "a" / "home_0003.usda").read_bytes() == (tmp_path / "b" / "home_0003.usda").read_bytes()
    assert main(["scenes", "generate", "--count", "0", "--out", str(tmp_path / "c")]) == 2
    assert "--count: got 0" in capsys.readouterr().err and not (tmp_path / "c").exists()


def test_stage_without_floor_exits_2_naming_the_file(tmp_path, monkeypatch, capsys):
    from pxr import Usd, UsdGeom

    monkeypatch.setenv("VLNVERSE_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "no_floor.usda"
    stage = Usd.Stage.CreateNew(str(path))
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    UsdGeom.Xform.Define(stage, "/World")
    _cube(stage, "/World/Table", (1.0, 1.0, 0.375), (0.5, 0.3, 0.375), "table", 4)
    stage.GetRootLayer().Save()
    out = tmp_path / "out"
    assert main(["scenes", "export-maps", str(path), "--out", str(out)]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("vlnverse: error:")]
    assert len(err) == 1 and str(path) in err[0] and "no floor" in err[0]
    assert not out.exists()


def test_scene_maps_for_matches_the_cli(stage, tmp_path, capsys):
    from vlnverse.scenes.maps import scene_maps_for
    from vlnverse.scenes.occupancy import OccupancyMap

    maps = scene_maps_for(stage, "r2r_ce")
    assert main(["scenes", "export-maps", str(stage), "--out", str(tmp_path / "e")]) == 0
    np.testing.assert_array_equal(OccupancyMap.load(tmp_path / "e" / "navigable.npz").grid, maps.navigable.grid)
    assert maps.occupancy.navigable_area_m2() == pytest.approx(FREE_M2)
