"""The Isaac physics stage (``sim.isaac.stage.author_stage``) with ``objects="meshes"`` carries the
same baked light as the USD writer (``write_usd(..., objects="meshes")``): the objects' render
meshes with the same light subsets bound to the same darkened looks, and each baked floor, rug,
wall and ceiling drawn by a render-only light-mapped mesh whose PNG, beside the stage, holds the
writer's grey levels; ``objects="primitives"`` is what it was. usd-core only, no Isaac Sim."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest

from vlnverse.scenes import baked_light
from vlnverse.scenes.object_meshes import render_meshes
from vlnverse.scenes.procgen import generate_home
from vlnverse.scenes.usd_conventions import BAKED_LIGHT_ROOT
from vlnverse.sim.body import load_body
from vlnverse.sim.isaac.stage import author_stage
from vlnverse.sim.mujoco import lightmap
from vlnverse.sim.mujoco.builder import baked_lightmaps

#: sha256 of home 11's primitives stage as ``author_stage`` wrote it before the meshes mode
#: carried the baked light (commit c455bd2): the primitives output must not move.
PRIMITIVES_SHA256 = "593e553fac0dfd0d348a104fbe43b8605d8bb38df93d580a3eb8d0adea245d36"


@pytest.fixture(scope="module")
def stages(tmp_path_factory):
    """Home 11 baked once into a fresh cache, then written by the USD writer and by ``author_stage``
    (meshes and primitives), both reading that cache."""
    from vlnverse.scenes.usd_io import write_usd

    mp = pytest.MonkeyPatch()
    mp.setenv("VLNVERSE_CACHE", str(tmp_path_factory.mktemp("cache")))
    home = generate_home(11)
    light = baked_lightmaps(home)
    computed = lightmap.BAKE_CALLS["computed"]
    out = tmp_path_factory.mktemp("stages")
    usd = write_usd(home, out / "usd" / "home.usda", objects="meshes")
    layout = author_stage(home, load_body("r2r_ce"), out / "isaac" / "home.usda", objects="meshes")
    plain = author_stage(home, load_body("r2r_ce"), out / "plain" / "home.usda")
    assert lightmap.BAKE_CALLS["computed"] == computed  # both read the cache: baked once per home
    yield home, light, usd, layout, plain
    mp.undo()


def _open(path):
    from pxr import Usd

    return Usd.Stage.Open(str(path))


def _light_map(stage, prim, folder):
    """The file path of the light map a baked mesh's material reads, and the material's tint."""
    from pxr import UsdShade

    material = UsdShade.MaterialBindingAPI(prim).GetDirectBinding().GetMaterial()
    shader = material.ComputeSurfaceSource()[0]
    tex = UsdShade.Shader(shader.GetInput("diffuseColor").GetConnectedSources()[0][0].source.GetPrim())
    assert tex.GetIdAttr().Get() == "UsdUVTexture"
    return folder / tex.GetInput("file").Get().path, tuple(tex.GetInput("scale").Get())


def _looks(prim):
    """(subset name, triangle indices, diffuse colour) of a mesh and its light subsets."""
    from pxr import UsdShade

    def colour(p):
        pbr = UsdShade.MaterialBindingAPI(p).GetDirectBinding().GetMaterial().ComputeSurfaceSource()[0]
        diffuse = pbr.GetInput("diffuseColor")
        src = diffuse.GetConnectedSources()[0]
        value = UsdShade.Shader(src[0].source.GetPrim()).GetInput("scale").Get() if src else diffuse.Get()
        return tuple(round(float(c), 4) for c in list(value)[:3])

    out = [("", None, colour(prim))]
    for subset in UsdShade.MaterialBindingAPI(prim).GetMaterialBindSubsets():
        out.append((subset.GetPrim().GetName(), list(subset.GetIndicesAttr().Get()), colour(subset.GetPrim())))
    return out


def test_baked_surfaces_are_light_mapped_meshes_with_the_writers_grey_levels(stages):
    from PIL import Image
    from pxr import Usd, UsdGeom, UsdPhysics

    from vlnverse.scenes.textures import DEFAULT_KIND_BY_LABEL, LOOKS, material_kind, texture_array

    home, light, usd, layout, _ = stages
    stage, written = _open(layout.usd_path), _open(usd)
    folder = usd.parent.parent / "isaac"
    drawn = [p for p in written.GetPrimAtPath(BAKED_LIGHT_ROOT).GetChildren() if p.IsA(UsdGeom.Mesh)]
    baked = {p: i for p, i in layout.visuals.items() if p.startswith(BAKED_LIGHT_ROOT + "/")}
    assert len(baked) == len(drawn) == len(light.surfaces) > 20
    labels = {home.geoms[gi].label for gi in light.surfaces}
    assert {"wall", "floor", "ceiling"} <= labels
    by_geom = {int(p.rsplit("_", 1)[1]): p for p in baked}
    assert sorted(by_geom) == sorted(light.surfaces)
    for gi, ref in zip(sorted(light.surfaces), drawn):  # the writer's, in geom order
        g, path = home.geoms[gi], by_geom[gi]
        prim = stage.GetPrimAtPath(path)
        assert prim.IsA(UsdGeom.Mesh) and not prim.HasAPI(UsdPhysics.CollisionAPI)
        info = layout.info(path)  # segmentation maps the mesh back to its geom
        assert (info.label, info.instance) == (g.label, g.instance_id)
        assert prim.GetAttribute("vlnverse:label").Get() == g.label
        # the same mesh in the same place as the writer's
        np.testing.assert_array_equal(np.array(UsdGeom.Mesh(prim).GetPointsAttr().Get()),
                                      np.array(UsdGeom.Mesh(ref).GetPointsAttr().Get()))
        np.testing.assert_array_equal(np.array(UsdGeom.PrimvarsAPI(prim).GetPrimvar("st").Get()),
                                      np.array(UsdGeom.PrimvarsAPI(ref).GetPrimvar("st").Get()))
        world = [np.array(UsdGeom.Xformable(p).ComputeLocalToWorldTransform(Usd.TimeCode.Default()))
                 for p in (prim, ref)]
        np.testing.assert_allclose(world[0], world[1], atol=1e-9)
        # its light map beside the stage: the writer's bytes, the atlas' grey levels
        file, tint = _light_map(stage, prim, folder)
        ref_file, ref_tint = _light_map(written, ref, usd.parent)
        assert file.is_file() and file.read_bytes() == ref_file.read_bytes() and tint == ref_tint
        kind = material_kind(g.material) or DEFAULT_KIND_BY_LABEL.get(g.label, "")
        look = LOOKS[kind]
        atlas, _ = baked_light.box_atlas(g, light.surfaces[gi], texture_array(look.texture) if look.texture else None,
                                         look.tile_m, baked_light.USD_PX_PER_M)
        image = Image.open(file)
        assert image.mode == "L"
        assert np.array_equal(np.asarray(image)[::-1], atlas[..., 0])
        # the primitive keeps colliding, hidden from the cameras
        primitive = stage.GetPrimAtPath("/World/Scene/Static/" + path.rsplit("/", 1)[1])
        assert UsdGeom.Imageable(primitive).ComputePurpose() == UsdGeom.Tokens.guide
        assert primitive.HasAPI(UsdPhysics.CollisionAPI) == g.collides
        assert (str(primitive.GetPath()) in layout.colliders) == g.collides
    pngs = sorted((folder / "lightmaps").rglob("*.png"))
    assert len(pngs) == len(light.surfaces)
    assert not [p for p in folder.rglob("*") if ".tmp" in p.name]  # atomic: no temp file left
    # a wall darker in its corners than in the middle: real light, not a flat grey
    wall = next(gi for gi in sorted(light.surfaces) if home.geoms[gi].label == "wall")
    grey = np.asarray(Image.open(_light_map(stage, stage.GetPrimAtPath(by_geom[wall]), folder)[0]))
    assert grey.min() < grey.max()


def test_render_meshes_carry_the_writers_light_subsets_and_looks(stages):
    from pxr import UsdGeom, UsdShade

    home, light, usd, layout, _ = stages
    stage, written = _open(layout.usd_path), _open(usd)
    meshes = render_meshes(home)
    renders = {int(p.GetParent().GetAttribute("vlnverse:instanceId").Get()): p
               for p in written.Traverse() if p.GetName() == "Render"}
    visuals = {p: i for p, i in layout.visuals.items() if "_render_" in p}
    assert len(visuals) == sum(len(parts) for parts in meshes.values())
    n_subsets = 0
    for path, info in visuals.items():
        k = int(path.rsplit("_", 1)[1])
        mine = _looks(stage.GetPrimAtPath(path))
        ref = _looks(renders[info.instance].GetPrototype().GetChildren()[k])
        assert mine == ref, path
        levels = baked_light.object_face_levels(light, info.instance, meshes[info.instance])[k]
        assert len(mine) == len(set(levels.tolist()))  # the brightest level on the mesh, the rest as subsets
        for name, faces, _ in mine[1:]:
            subset = stage.GetPrimAtPath(f"{path}/{name}")
            assert subset.IsA(UsdGeom.Subset)
            assert layout.info(str(subset.GetPath())).instance == info.instance  # segmentation of a subset
            assert faces == np.flatnonzero(np.isclose(levels, int(name.split("_")[1]) / 100)).tolist()
            n_subsets += 1
        # textured looks read files that exist beside the stage
        for mat in {UsdShade.MaterialBindingAPI(p).GetDirectBinding().GetMaterial()
                    for p in [stage.GetPrimAtPath(path), *stage.GetPrimAtPath(path).GetChildren()]}:
            for shader in mat.GetPrim().GetChildren():
                file = shader.GetAttribute("inputs:file")
                if file and file.Get() is not None:
                    assert (usd.parent.parent / "isaac" / file.Get().path).is_file()
    assert n_subsets > 20


def test_primitives_stage_unchanged_and_without_looks_or_files(stages):
    from pxr import UsdGeom

    home, _, usd, _, plain = stages
    data = open(plain.usd_path, "rb").read()
    assert hashlib.sha256(data).hexdigest() == PRIMITIVES_SHA256
    stage = _open(plain.usd_path)
    assert plain.visuals == {}
    assert not stage.GetPrimAtPath("/World/Looks") and not stage.GetPrimAtPath(BAKED_LIGHT_ROOT)
    folder = usd.parent.parent / "plain"
    assert sorted(p.name for p in folder.iterdir()) == ["home.usda"]
    guides = [p for p in stage.Traverse() if UsdGeom.Imageable(p) and
              UsdGeom.Imageable(p).GetPurposeAttr().Get() == UsdGeom.Tokens.guide]
    assert [str(p.GetPath()) for p in guides] == ["/World/Agent/collider"]


def test_meshes_stage_is_byte_identical_when_authored_twice(stages, tmp_path):
    home, light, _, layout, _ = stages
    again = author_stage(home, load_body("r2r_ce"), tmp_path / "home.usda", objects="meshes", baked=light)
    assert open(again.usd_path, "rb").read() == open(layout.usd_path, "rb").read()
    assert again.visuals.keys() == layout.visuals.keys()


def test_a_baked_box_of_a_movable_object_rides_on_its_rigid_body(room, tmp_path):
    from pxr import Usd, UsdGeom

    crate = next(o for o in room.objects if o.category == "crate")
    gi = crate.geom_indices[0]
    light = baked_light.BakedLight(surfaces={gi: {"+z": np.full((3, 3), 150, np.uint8)}})  # 0.75 everywhere
    layout = author_stage(room, load_body("r2r_ce"), tmp_path / "room.usda", objects="meshes", baked=light)
    (path,) = [p for p in layout.visuals if p.endswith("_baked")]
    assert path.startswith(layout.objects[crate.instance_id] + "/") and layout.visuals[path].movable
    stage = _open(layout.usd_path)
    world = np.array(UsdGeom.Xformable(stage.GetPrimAtPath(path)).ComputeLocalToWorldTransform(Usd.TimeCode.Default())).T
    np.testing.assert_allclose(world[:3, 3], sum(baked_light.box_bounds(room.geoms[gi])) / 2, atol=1e-6)
    file, _ = _light_map(stage, stage.GetPrimAtPath(path), tmp_path)
    assert file.is_file()
