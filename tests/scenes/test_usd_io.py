"""USD writer/loader: round trip, determinism, third-party stages and bad input."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from pxr import Gf, Sdf, Usd, UsdGeom, UsdPhysics, UsdShade

from vlnverse.core.errors import ConfigError, SceneError
from vlnverse.scenes.description import Geom, SceneDescription, SceneObject
from vlnverse.scenes.procgen import generate_home
from vlnverse.scenes.usd_io import SceneLoadWarning, clear_cache, load_scene, write_usd
from vlnverse.scenes.usd_read import _triangulate


@pytest.fixture(scope="module")
def home():
    return generate_home(5)


def _assert_same_scene(a: SceneDescription, b: SceneDescription) -> None:
    assert b.scene_id == a.scene_id and b.floor_z == a.floor_z and b.metadata == a.metadata
    assert len(b.geoms) == len(a.geoms)
    for ga, gb in zip(a.geoms, b.geoms):
        assert (gb.kind, gb.label, gb.instance_id, gb.name, gb.collides) == (ga.kind, ga.label, ga.instance_id, ga.name, ga.collides)
        np.testing.assert_allclose(gb.transform, ga.transform, atol=1e-6)
        np.testing.assert_allclose(gb.size, ga.size, atol=1e-6)
        np.testing.assert_allclose(gb.color, ga.color, atol=1e-6)
        assert gb.friction == pytest.approx(ga.friction, abs=1e-9)
    assert len(b.objects) == len(a.objects)
    for oa, ob in zip(a.objects, b.objects):
        assert (ob.instance_id, ob.category, ob.prim_path, ob.geom_indices, ob.movable, ob.room_id, ob.attributes) == \
               (oa.instance_id, oa.category, oa.prim_path, oa.geom_indices, oa.movable, oa.room_id, oa.attributes)
        assert ob.mass == pytest.approx(oa.mass, abs=1e-9)
        np.testing.assert_allclose(ob.bounds_min, oa.bounds_min, atol=1e-6)
        np.testing.assert_allclose(ob.bounds_max, oa.bounds_max, atol=1e-6)
    assert [(r.room_id, r.room_type, r.name) for r in b.rooms] == [(r.room_id, r.room_type, r.name) for r in a.rooms]
    for ra, rb in zip(a.rooms, b.rooms):
        np.testing.assert_allclose(rb.polygon, ra.polygon, atol=1e-6)
    assert [(d.door_id, d.room_ids, d.axis) for d in b.doors] == [(d.door_id, d.room_ids, d.axis) for d in a.doors]
    for da, db in zip(a.doors, b.doors):
        np.testing.assert_allclose(db.center, da.center, atol=1e-9)
        assert db.width == pytest.approx(da.width, abs=1e-9)


@pytest.mark.parametrize("suffix", [".usda", ".usd"])
def test_round_trip_generated_home(home, tmp_path, suffix):
    path = write_usd(home, tmp_path / f"home{suffix}")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # our own files need no guessing
        loaded = load_scene(path)
    _assert_same_scene(home, loaded)
    assert loaded.source_path == str(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"home{suffix}", "textures"]  # no temporary left behind
    assert all(p.suffix == ".png" for p in (tmp_path / "textures").iterdir())


def test_same_description_gives_identical_bytes(home, tmp_path):
    for suffix in (".usda", ".usd"):
        a = write_usd(home, tmp_path / f"a{suffix}").read_bytes()
        b = write_usd(generate_home(5), tmp_path / f"b{suffix}").read_bytes()
        assert a == b


def test_stage_conventions_for_isaac_sim(home, tmp_path):
    stage = Usd.Stage.Open(str(write_usd(home, tmp_path / "h.usda")))
    assert UsdGeom.GetStageUpAxis(stage) == UsdGeom.Tokens.z
    assert UsdGeom.GetStageMetersPerUnit(stage) == 1.0
    assert stage.GetDefaultPrim().GetPath() == Sdf.Path("/World")
    assert stage.GetRootLayer().customLayerData["vlnverse"]["metadata"]["seed"] == 5
    cup_or_chair = next(o for o in home.objects if o.category in ("chair", "cup", "mug", "book"))
    prim = stage.GetPrimAtPath(cup_or_chair.prim_path)
    assert prim.HasAPI(UsdPhysics.RigidBodyAPI) and prim.HasAPI(UsdPhysics.MassAPI)
    assert UsdPhysics.MassAPI(prim).GetMassAttr().Get() == pytest.approx(cup_or_chair.mass, rel=1e-6)
    child = prim.GetChildren()[0]
    assert child.HasAPI(UsdPhysics.CollisionAPI)
    mat = _bound_physics_material(child)
    assert UsdPhysics.MaterialAPI(mat.GetPrim()).GetDynamicFrictionAttr().Get() > 0
    walls = [p for p in stage.Traverse() if p.GetName().startswith("wall_")]
    assert walls and all(p.HasAPI(UsdPhysics.CollisionAPI) for p in walls)
    assert [str(p.GetName()) for p in stage.GetPrimAtPath("/World/Rooms").GetChildren()] == [r.name for r in home.rooms]


def test_openusd_validators_find_no_error(home, tmp_path):
    """OpenUSD's validators (stage metadata, physics colliders/rigid bodies, material bindings …) pass."""
    UsdValidation = pytest.importorskip("pxr.UsdValidation")
    registry = UsdValidation.ValidationRegistry()
    validators = [registry.GetOrLoadValidatorByName(m.name) for m in registry.GetAllValidatorMetadata()
                  if "Package" not in m.name and "Usdz" not in m.name]
    stage = Usd.Stage.Open(str(write_usd(home, tmp_path / "v.usd")))
    errors = UsdValidation.ValidationContext(validators).Validate(stage)
    assert [e.GetMessage() for e in errors] == []


def test_openusd_validators_find_no_error_in_a_shipped_home():
    """The shipped homes carry render meshes, GeomSubsets of their light and light-map meshes: the
    validators (subset families, material bindings …) pass on the smallest one too."""
    UsdValidation = pytest.importorskip("pxr.UsdValidation")
    from vlnverse.paths import scenes_dir

    registry = UsdValidation.ValidationRegistry()
    validators = [registry.GetOrLoadValidatorByName(m.name) for m in registry.GetAllValidatorMetadata()
                  if "Package" not in m.name and "Usdz" not in m.name]
    path = min(scenes_dir().glob("home_*.usd"), key=lambda p: p.stat().st_size)
    stage = Usd.Stage.Open(str(path))
    assert any(p.GetName() == "Render" for p in stage.Traverse())  # the meshes are there
    errors = UsdValidation.ValidationContext(validators).Validate(stage)
    assert [e.GetMessage() for e in errors] == []


def _bound_physics_material(prim):
    return UsdShade.MaterialBindingAPI(prim).ComputeBoundMaterial("physics")[0]


def test_hand_built_mesh_description_round_trips(tmp_path):
    """A mesh geom with a rotation keeps its local vertices; a sphere and a cylinder their sizes."""
    yaw = math.radians(30)
    m = np.eye(4)
    m[:2, :2] = [[math.cos(yaw), -math.sin(yaw)], [math.sin(yaw), math.cos(yaw)]]
    m[:3, 3] = [1.0, 2.0, 0.5]
    verts = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=float)
    faces = np.array([[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]])
    below = np.eye(4)
    below[2, 3] = -0.05
    floor = Geom("box", below, [3, 3, 0.05], label="floor", instance_id=1, name="/World/Structure/floor")
    tetra = Geom("mesh", m, label="statue", instance_id=2, vertices=verts, faces=faces, name="/World/Objects/statue/body")
    ball = Geom("sphere", np.eye(4), [0.25, 0, 0], label="statue", instance_id=2, name="/World/Objects/statue/ball")
    ball.transform[:3, 3] = [1, 2, 1.75]
    lo = np.minimum(tetra.world_aabb()[0], ball.world_aabb()[0])
    hi = np.maximum(tetra.world_aabb()[1], ball.world_aabb()[1])
    desc = SceneDescription("hand", [floor, tetra, ball],
                            [SceneObject(2, "statue", "/World/Objects/statue", lo, hi, [1, 2], True, 3.5)])
    with pytest.warns(SceneLoadWarning, match="no rooms"):
        back = load_scene(write_usd(desc, tmp_path / "hand.usda"))
    _assert_same_scene(desc, back)
    np.testing.assert_allclose(back.geoms[1].vertices, verts, atol=1e-6)
    assert back.geoms[1].faces.tolist() == faces.tolist()


def _cube_mesh_points() -> tuple[list, list, list]:
    pts = [(-1, -1, -1), (1, -1, -1), (1, 1, -1), (-1, 1, -1), (-1, -1, 1), (1, -1, 1), (1, 1, 1), (-1, 1, 1)]
    quads = [0, 3, 2, 1, 4, 5, 6, 7, 0, 1, 5, 4, 2, 3, 7, 6, 1, 2, 6, 5, 0, 4, 7, 3]
    return pts, [4] * 6, quads


def _third_party_stage(path, *, physics: bool = False):
    """A Y-up, centimetre stage of meshes only: an unlabelled floor quad and a table with a legacy label."""
    stage = Usd.Stage.CreateNew(str(path))
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.y)
    UsdGeom.SetStageMetersPerUnit(stage, 0.01)
    UsdGeom.Xform.Define(stage, "/Env")
    floor = UsdGeom.Mesh.Define(stage, "/Env/Floor")
    floor.CreatePointsAttr([(-500, 0, -500), (500, 0, -500), (500, 0, 500), (-500, 0, 500)])
    floor.CreateFaceVertexCountsAttr([4])
    floor.CreateFaceVertexIndicesAttr([0, 3, 2, 1])  # normal +Y (up)
    table = UsdGeom.Xform.Define(stage, "/Env/Table_01")
    table.AddTranslateOp().Set(Gf.Vec3d(200, 50, -100))
    table.AddRotateYOp().Set(90.0)
    table.AddScaleOp().Set(Gf.Vec3f(50, 40, 30))
    tprim = table.GetPrim()
    tprim.CreateAttribute("semantic:Semantics:params:semanticType", Sdf.ValueTypeNames.String).Set("class")
    tprim.CreateAttribute("semantic:Semantics:params:semanticData", Sdf.ValueTypeNames.String).Set("table")
    mesh = UsdGeom.Mesh.Define(stage, "/Env/Table_01/mesh")
    pts, counts, idx = _cube_mesh_points()
    mesh.CreatePointsAttr(pts)
    mesh.CreateFaceVertexCountsAttr(counts)
    mesh.CreateFaceVertexIndicesAttr(idx)
    if physics:
        UsdPhysics.CollisionAPI.Apply(floor.GetPrim())
        UsdPhysics.CollisionAPI.Apply(mesh.GetPrim())
        UsdPhysics.RigidBodyAPI.Apply(tprim)
        UsdPhysics.MassAPI.Apply(tprim).CreateMassAttr().Set(20.0)
    stage.GetRootLayer().Save()
    return path


def test_third_party_y_up_centimetre_meshes(tmp_path):
    path = _third_party_stage(tmp_path / "thirdparty.usda")
    with pytest.warns(SceneLoadWarning) as record:
        desc = load_scene(path)
    messages = " | ".join(str(w.message) for w in record)
    assert "no UsdPhysics" in messages and "no rooms" in messages and "prim names" in messages
    assert desc.rooms == [] and desc.floor_z == pytest.approx(0.0, abs=1e-9)
    assert {g.label for g in desc.geoms} == {"floor", "table"}
    assert all(g.collides for g in desc.geoms)
    (table,) = desc.objects
    assert table.category == "table" and table.prim_path == "/Env/Table_01" and not table.movable
    # translate (200, 50, -100) cm, rotateY 90°, scale (50, 40, 30): x ∈ [170, 230], y ∈ [10, 90],
    # z ∈ [-150, -50] cm in Y-up; Z-up metres (x, -z, y) → x ∈ [1.7, 2.3], y ∈ [0.5, 1.5], z ∈ [0.1, 0.9]
    np.testing.assert_allclose(table.bounds_min, [1.7, 0.5, 0.1], atol=1e-6)
    np.testing.assert_allclose(table.bounds_max, [2.3, 1.5, 0.9], atol=1e-6)
    tmesh = desc.geoms[table.geom_indices[0]]
    assert tmesh.kind == "mesh" and len(tmesh.faces) == 12  # 6 quads fan-triangulated
    floor = next(g for g in desc.geoms if g.label == "floor")
    lo, hi = floor.world_aabb()
    np.testing.assert_allclose(lo, [-5, -5, 0], atol=1e-9)
    np.testing.assert_allclose(hi, [5, 5, 0], atol=1e-9)


@pytest.mark.filterwarnings("ignore::vlnverse.scenes.usd_io.SceneLoadWarning")
def test_third_party_with_physics_reads_rigid_body_and_mass(tmp_path):
    path = _third_party_stage(tmp_path / "phys.usda", physics=True)
    with pytest.warns(SceneLoadWarning, match="no rooms"):
        desc = load_scene(path)
    (table,) = desc.objects
    assert table.movable and table.mass == 20.0


@pytest.mark.filterwarnings("ignore::vlnverse.scenes.usd_io.SceneLoadWarning")
def test_primitive_axes_and_approximations(tmp_path):
    stage = Usd.Stage.CreateNew(str(tmp_path / "prims.usda"))
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    floor = UsdGeom.Cube.Define(stage, "/W/floor")
    floor.AddTranslateOp().Set(Gf.Vec3d(0, 0, -0.5))
    floor.AddScaleOp().Set(Gf.Vec3f(5, 5, 0.5))
    cyl = UsdGeom.Cylinder.Define(stage, "/W/pipe")
    cyl.CreateAxisAttr("X")
    cyl.CreateRadiusAttr(0.5)
    cyl.CreateHeightAttr(2.0)
    cyl.AddTranslateOp().Set(Gf.Vec3d(1, 1, 1))
    cap = UsdGeom.Capsule.Define(stage, "/W/pill")
    cap.CreateRadiusAttr(0.1)
    cap.CreateHeightAttr(0.4)
    cone = UsdGeom.Cone.Define(stage, "/W/funnel")
    cone.CreateRadiusAttr(0.3)
    cone.CreateHeightAttr(1.0)
    egg = UsdGeom.Sphere.Define(stage, "/W/egg")
    egg.AddScaleOp().Set(Gf.Vec3f(1, 1, 2))
    for p in stage.Traverse():
        if p.IsA(UsdGeom.Gprim):
            UsdPhysics.CollisionAPI.Apply(p)
    stage.GetRootLayer().Save()
    with pytest.warns(SceneLoadWarning, match="no rooms"):
        desc = load_scene(tmp_path / "prims.usda")
    by = {g.label: g for g in desc.geoms}
    assert by["floor"].kind == "box" and desc.floor_z == pytest.approx(0.0)
    pipe = by["pipe"]
    assert pipe.kind == "cylinder"
    np.testing.assert_allclose(pipe.size, [0.5, 1.0, 0.0])
    np.testing.assert_allclose(pipe.world_aabb()[0], [0, 0.5, 0.5], atol=1e-9)
    np.testing.assert_allclose(pipe.world_aabb()[1], [2, 1.5, 1.5], atol=1e-9)
    assert by["pill"].kind == "cylinder" and by["pill"].size[1] == pytest.approx(0.3)  # 0.4/2 + radius
    assert by["funnel"].kind == "mesh" and by["funnel"].world_aabb()[1][2] == pytest.approx(0.5)
    assert by["egg"].kind == "mesh" and by["egg"].world_aabb()[1][2] == pytest.approx(2.0)


def test_fan_triangulation():
    tris = _triangulate(np.array([3, 4, 2, 5]), np.array([0, 1, 2, 3, 4, 5, 6, 9, 9, 7, 8, 10, 11, 12]))
    assert tris.tolist() == [[0, 1, 2], [3, 4, 5], [3, 5, 6], [7, 8, 10], [7, 10, 11], [7, 11, 12]]


def test_cache_keyed_by_content(home, tmp_path):
    clear_cache()
    path = write_usd(home, tmp_path / "c.usd")
    first = load_scene(path)
    first.geoms.clear()  # callers get copies: mutating one must not touch the cache
    assert len(load_scene(path).geoms) == len(home.geoms)
    other = generate_home(6)
    write_usd(other, path)
    assert load_scene(path).scene_id == other.scene_id


def test_missing_file(tmp_path):
    with pytest.raises(SceneError, match="nope.usd.*not found"):
        load_scene(tmp_path / "nope.usd")


@pytest.mark.parametrize("name, data", [("notes.usda", b"this is not a USD file\n"), ("junk.usd", b"\x00\x01garbage" * 10)])
def test_file_that_is_not_usd(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(SceneError, match=f"{name}: not a readable USD file"):
        load_scene(path)


def test_stage_without_floor(tmp_path):
    stage = Usd.Stage.CreateNew(str(tmp_path / "nofloor.usda"))
    wall = UsdGeom.Mesh.Define(stage, "/W/wall")
    wall.CreatePointsAttr([(0, 0, 0), (4, 0, 0), (4, 0, 2.5), (0, 0, 2.5)])
    wall.CreateFaceVertexCountsAttr([4])
    wall.CreateFaceVertexIndicesAttr([0, 1, 2, 3])
    UsdPhysics.CollisionAPI.Apply(wall.GetPrim())
    stage.GetRootLayer().Save()
    with pytest.raises(SceneError, match="nofloor.usda: no floor"), warnings.catch_warnings():
        warnings.simplefilter("ignore", SceneLoadWarning)
        load_scene(tmp_path / "nofloor.usda")


@pytest.mark.filterwarnings("ignore::vlnverse.scenes.usd_io.SceneLoadWarning")
def test_stage_without_collision_geometry(tmp_path):
    stage = Usd.Stage.CreateNew(str(tmp_path / "nocoll.usda"))
    body = UsdGeom.Xform.Define(stage, "/W/crate")
    UsdPhysics.RigidBodyAPI.Apply(body.GetPrim())  # physics is authored, but no collider anywhere
    UsdGeom.Cube.Define(stage, "/W/crate/box")
    stage.GetRootLayer().Save()
    with pytest.raises(SceneError, match="nocoll.usda: no collision geometry"), warnings.catch_warnings():
        warnings.simplefilter("ignore", SceneLoadWarning)
        load_scene(tmp_path / "nocoll.usda")
    empty = Usd.Stage.CreateNew(str(tmp_path / "empty.usda"))
    UsdGeom.Xform.Define(empty, "/W")
    empty.GetRootLayer().Save()
    with pytest.raises(SceneError, match="empty.usda: no collision geometry"):
        load_scene(tmp_path / "empty.usda")


def test_write_rejects_unknown_suffix(home, tmp_path):
    with pytest.raises(ConfigError, match=r"scene\.obj.*unsupported suffix"):
        write_usd(home, tmp_path / "scene.obj")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.filterwarnings("ignore::vlnverse.scenes.usd_io.SceneLoadWarning")
def test_instanced_references_load_once_per_instance(tmp_path):
    asset = Usd.Stage.CreateNew(str(tmp_path / "chair.usda"))
    UsdGeom.SetStageMetersPerUnit(asset, 1.0)
    root = UsdGeom.Xform.Define(asset, "/Chair")
    asset.SetDefaultPrim(root.GetPrim())
    seat = UsdGeom.Cube.Define(asset, "/Chair/seat")
    seat.AddTranslateOp().Set(Gf.Vec3d(0, 0, 0.45))
    seat.AddScaleOp().Set(Gf.Vec3f(0.2, 0.2, 0.02))
    UsdPhysics.CollisionAPI.Apply(seat.GetPrim())
    asset.GetRootLayer().Save()
    stage = Usd.Stage.CreateNew(str(tmp_path / "room.usda"))
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    floor = UsdGeom.Cube.Define(stage, "/World/floor")
    floor.AddTranslateOp().Set(Gf.Vec3d(0, 0, -0.05))
    floor.AddScaleOp().Set(Gf.Vec3f(3, 3, 0.05))
    UsdPhysics.CollisionAPI.Apply(floor.GetPrim())
    for i, x in enumerate((1.0, -1.0)):
        chair = UsdGeom.Xform.Define(stage, f"/World/chair_{i}")
        chair.AddTranslateOp().Set(Gf.Vec3d(x, 0, 0))
        chair.GetPrim().GetReferences().AddReference(str(tmp_path / "chair.usda"))
        chair.GetPrim().SetInstanceable(True)
        chair.GetPrim().CreateAttribute("semantic:Semantics:params:semanticData", Sdf.ValueTypeNames.String).Set("chair")
    stage.GetRootLayer().Save()
    desc = load_scene(tmp_path / "room.usda")
    chairs = [o for o in desc.objects if o.category == "chair"]
    assert [o.prim_path for o in chairs] == ["/World/chair_0", "/World/chair_1"]
    assert chairs[0].instance_id != chairs[1].instance_id
    np.testing.assert_allclose(chairs[0].bounds_min, [0.8, -0.2, 0.43], atol=1e-6)
    np.testing.assert_allclose(chairs[1].bounds_max, [-0.8, 0.2, 0.47], atol=1e-6)
