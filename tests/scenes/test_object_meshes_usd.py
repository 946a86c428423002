"""Render meshes in the USD (``write_usd(..., objects="meshes")``): UsdGeom.Mesh prototypes with
``st`` and UsdPreviewSurface, shared by instanceable references; collision gprims invisible but
colliding; ``load_scene`` reads the same description as from the primitives file."""
from __future__ import annotations

import numpy as np
import pytest

from vlnverse.scenes.baked_light import BakedLight
from vlnverse.scenes.description import scene_content_hash
from vlnverse.scenes.object_meshes import render_meshes
from vlnverse.scenes.procgen import generate_home
from vlnverse.scenes.usd_conventions import RENDER_ONLY_ATTR, RENDER_PROTOTYPES
from vlnverse.scenes.usd_io import load_scene, write_usd


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    out = tmp_path_factory.mktemp("usd_meshes")
    home = generate_home(11, min_rooms=4, max_rooms=5)
    # without baked light (its light maps in the USD: tests/sim/test_lightmap.py), so no bake here
    return home, write_usd(home, out / "plain.usda"), write_usd(home, out / "meshes.usda", objects="meshes",
                                                                baked=BakedLight())


def test_meshes_file_holds_instanced_prototypes_with_st_and_preview_surfaces(files):
    from pxr import Usd, UsdGeom, UsdPhysics, UsdShade

    home, _, path = files
    stage = Usd.Stage.Open(str(path))
    protos = stage.GetPrimAtPath(RENDER_PROTOTYPES)
    assert protos and protos.IsAbstract()
    meshes = [p for p in Usd.PrimRange(protos, Usd.PrimAllPrimsPredicate) if p.IsA(UsdGeom.Mesh)]
    assert meshes
    for prim in meshes:
        mesh = UsdGeom.Mesh(prim)
        st = UsdGeom.PrimvarsAPI(prim).GetPrimvar("st")
        assert st and st.GetInterpolation() == UsdGeom.Tokens.vertex
        assert len(st.Get()) == len(mesh.GetPointsAttr().Get()) > 0
        assert set(mesh.GetFaceVertexCountsAttr().Get()) == {3}
        material = UsdShade.MaterialBindingAPI(prim).GetDirectBinding().GetMaterial()
        shader = material.ComputeSurfaceSource()[0]
        assert shader and shader.GetIdAttr().Get() == "UsdPreviewSurface"
    renders = [p for p in stage.Traverse() if p.GetAttribute(RENDER_ONLY_ATTR).Get()]
    expected = render_meshes(home)
    assert len(renders) == len(expected) > 5
    assert all(p.IsInstance() and str(p.GetParent().GetPath()).startswith("/World/Objects/") for p in renders)
    n_protos = len([c for c in protos.GetChildren()])
    assert n_protos <= len(renders)  # twins (chairs of a set, nightstand pairs) share one prototype
    # collision gprims of meshed objects: invisible, still colliding
    meshed_paths = {str(p.GetParent().GetPath()) for p in renders}
    for path_str in meshed_paths:
        parts = [c for c in stage.GetPrimAtPath(path_str).GetChildren() if c.IsA(UsdGeom.Gprim)]
        assert parts and all(c.HasAPI(UsdPhysics.CollisionAPI) for c in parts)
        assert all(UsdGeom.Imageable(c).ComputeVisibility() == UsdGeom.Tokens.invisible for c in parts)


def test_load_scene_reads_the_same_home_from_either_file_and_the_same_meshes(files):
    home, plain, meshes = files
    a, b = load_scene(plain), load_scene(meshes)
    assert scene_content_hash(a) == scene_content_hash(b)
    assert len(a.geoms) == len(b.geoms) and all(g.collides == h.collides for g, h in zip(a.geoms, b.geoms))
    from_file, generated = render_meshes(b), render_meshes(home)
    assert sorted(from_file) == sorted(generated)
    for iid in generated:
        for g, h in zip(generated[iid], from_file[iid]):
            assert g.material == h.material and np.array_equal(g.faces, h.faces)
            np.testing.assert_allclose(g.vertices, h.vertices, atol=2e-4)


def test_meshes_file_is_byte_identical_when_written_twice(files, tmp_path):
    home, _, path = files
    again = write_usd(home, tmp_path / "again.usda", objects="meshes", baked=BakedLight())
    assert again.read_bytes() == path.read_bytes()
