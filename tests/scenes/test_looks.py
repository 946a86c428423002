"""Procedural textures, semantic materials in the USD, and visual-only detail of generated homes."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from vlnverse.scenes.catalog import CATEGORIES, make_model
from vlnverse.scenes.description import STRUCTURE_LABELS
from vlnverse.scenes.occupancy import build_occupancy_map
from vlnverse.scenes.procgen import generate_home
from vlnverse.scenes.textures import LOOKS, material_kind, png_bytes, texture_array, write_textures
from vlnverse.scenes.usd_io import load_scene, write_usd

DETAIL_LABELS = ("window", "skirting", "rug", "painting", "ceiling_light")


@pytest.fixture(scope="module")
def home():
    return generate_home(2)


def test_textures_are_deterministic_small_and_decodable(tmp_path):
    from PIL import Image

    kinds = sorted({look.texture for look in LOOKS.values() if look.texture})
    assert {"wood", "tile", "carpet", "fabric", "plaster", "marble", "wallpaper", "leather", "stone"} <= set(kinds)
    first = write_textures(tmp_path / "a", LOOKS)
    texture_array.cache_clear()
    second = write_textures(tmp_path / "b", LOOKS)
    assert [p.name for p in first] == [p.name for p in second] and len(first) == len(kinds)
    for a, b in zip(first, second):
        assert a.read_bytes() == b.read_bytes()  # same seed, same bytes
        assert a.stat().st_size < 40_000
    decoded = np.asarray(Image.open(io.BytesIO(png_bytes(texture_array("wood")))))
    assert np.array_equal(decoded, texture_array("wood"))
    # patterns differ between kinds and are not flat: real detail to see
    assert not np.array_equal(texture_array("wood"), texture_array("tile"))
    for kind in kinds:
        lum = texture_array(kind)[..., 0].astype(float)
        assert lum.std() > 2.0, kind
    # a tile texture has dark grout lines: its darkest row is much darker than the median row
    rows = texture_array("tile")[..., 0].mean(axis=1)
    assert rows.min() < np.median(rows) - 30


def test_every_generated_surface_has_a_known_material(home):
    assert all(material_kind(g.material) for g in home.geoms), [g.name for g in home.geoms if not material_kind(g.material)]
    floors = {material_kind(g.material) for g in generate_home(1).geoms + home.geoms if g.label == "floor"}
    assert floors & {"wood", "parquet", "tile", "stone", "marble", "carpet"}
    walls = {material_kind(g.material) for g in home.geoms if g.label == "wall"}
    assert walls <= {"plaster", "wallpaper"}


def test_detail_is_visual_only_and_leaves_the_maps_unchanged(home):
    labels = {g.label for g in home.geoms}
    assert {"window", "skirting", "ceiling_light"} <= labels
    assert set(DETAIL_LABELS) <= set(STRUCTURE_LABELS)
    detail = [g for g in home.geoms if g.label in DETAIL_LABELS]
    assert detail and not any(g.collides for g in detail)
    bare = type(home)(scene_id=home.scene_id, geoms=[g for g in home.geoms if g.label not in DETAIL_LABELS],
                      rooms=home.rooms, doors=home.doors, floor_z=home.floor_z)
    a = build_occupancy_map(home, resolution=0.05)
    b = build_occupancy_map(bare, resolution=0.05)
    assert np.array_equal(a.grid, b.grid)
    # every door has a casing (jambs and head on both wall faces), visual only and outside the opening
    casings = [g for g in home.geoms if g.label == "door_frame" and g.kind == "mesh"]
    assert len(casings) == len(home.doors) and not any(g.collides for g in casings)
    for door, casing in zip(home.doors, casings):
        pts = casing.world_points()
        along = 0 if door.axis == "x" else 1
        offset = np.abs(pts[:, along] - door.center[along])
        low = pts[:, 2] < 2.0  # jamb corners (the head spans the opening above 2.1 m)
        assert np.all(offset[low] >= door.width / 2 - 1e-9)
    # a window is an opening in an exterior wall: glass (1 cm, in the wall's mid-plane, inside the
    # 5 cm frame) where no wall is, a wall piece below the sill (it blocks the agent) and above the head
    from vlnverse.scenes.procgen import WINDOW_FRAME, WINDOW_SILL

    panes = [g for g in home.geoms if g.label == "window" and g.kind == "box"]
    walls = [g.world_aabb() for g in home.geoms if g.label == "wall"]
    assert len(panes) >= 3
    for pane in panes:
        lo, hi = pane.world_aabb()
        assert lo[2] == pytest.approx(WINDOW_SILL + WINDOW_FRAME) and hi[2] <= home.metadata["wall_height"]
        assert min(hi[:2] - lo[:2]) == pytest.approx(0.01)
        centre = (lo + hi) / 2

        def covered(z):
            p = np.array([centre[0], centre[1], z])
            return any(np.all(wlo - 1e-9 <= p) and np.all(p <= whi + 1e-9) for wlo, whi in walls)

        assert not covered(centre[2])                                      # the opening
        assert covered(WINDOW_SILL / 2) and covered(hi[2] + WINDOW_FRAME + 0.1)  # sill and head walls
        assert not any(g.collides for g in home.geoms if g.label == "window")


def test_objects_have_recognisable_parts():
    rng = np.random.default_rng(0)

    def parts(name):
        return make_model(name, rng).parts

    chair = parts("chair")
    assert len(chair) == 6  # seat, four legs, back
    sofa = parts("sofa")
    assert len(sofa) >= 2 + 2 + 4 + 2  # base, back, two arms, four legs, >= 2 cushions
    fridge = parts("fridge")
    assert sum(p.tone == "metal" for p in fridge) == 2 and sum(p.tone == "light" for p in fridge) == 2  # handles, doors
    plant = parts("potted_plant")
    assert sum(p.tone == "leaf" for p in plant) >= 5
    assert any(p.tone == "shade" for p in parts("lamp")) and any(p.tone == "shade" for p in parts("floor_lamp"))
    assert len(parts("book")) == 2  # cover and pages
    assert all(CATEGORIES[n].builder for n in ("chair", "sofa", "fridge", "potted_plant", "book"))


def test_usd_carries_preview_surface_materials_and_resolvable_textures(home, tmp_path):
    from pxr import Sdf, Usd, UsdShade

    path = write_usd(home, tmp_path / "h.usda")
    stage = Usd.Stage.Open(str(path))
    looks = [UsdShade.Material(p) for p in stage.Traverse() if p.IsA(UsdShade.Material) and
             str(p.GetPath()).startswith("/World/Looks/")]
    assert looks
    files = set()
    for mat in looks:
        shader = mat.ComputeSurfaceSource()[0]
        assert shader and shader.GetIdAttr().Get() == "UsdPreviewSurface"
        for child in mat.GetPrim().GetChildren():
            sh = UsdShade.Shader(child)
            if sh.GetIdAttr().Get() == "UsdUVTexture":
                asset = sh.GetInput("file").Get()
                resolved = Path(Sdf.ComputeAssetPathRelativeToLayer(stage.GetRootLayer(), asset.path))
                assert resolved.is_file(), resolved
                files.add(resolved.name)
    assert {"wood.png", "plaster.png"} & files
    # every gprim of the home is bound to a semantic material, read back unchanged
    back = load_scene(path)
    assert [g.material for g in back.geoms] == [g.material for g in home.geoms]
    names = {m.GetPrim().GetName() for m in looks}
    assert any(n.startswith("wood_") for n in names) and any(n.startswith(("fabric_", "leather_")) for n in names)
    # a second write gives the same bytes (USD and textures)
    again = write_usd(home, tmp_path / "again" / "h.usda")
    assert again.read_bytes() == path.read_bytes()
    for tex in (tmp_path / "textures").iterdir():
        assert (tmp_path / "again" / "textures" / tex.name).read_bytes() == tex.read_bytes()


def test_colour_varies_per_instance_around_the_named_colour(home):
    from vlnverse.scenes.catalog import COLORS

    by_name: dict[str, list[tuple]] = {}
    for obj in home.objects:
        named = np.asarray(COLORS[obj.attributes["color"]])
        cols = [np.asarray(home.geoms[i].color) for i in obj.geom_indices]
        nearest = min(cols, key=lambda c: float(np.abs(c - named).max()))
        assert np.allclose(nearest, named, rtol=0.1, atol=0.01), (obj.category, nearest, named)
        by_name.setdefault(obj.attributes["color"], []).append(tuple(nearest))
    # two instances of one named colour get two shades
    assert any(len(set(cols)) > 1 for cols in by_name.values() if len(cols) >= 2)
    walls = {g.color for g in home.geoms if g.label == "wall"}
    assert len(walls) == 1  # paint stays uniform


def test_shipped_homes_carry_materials_with_resolvable_textures():
    """Every gprim of every shipped home is bound to a UsdPreviewSurface material whose texture
    files resolve from the file's folder (``scenes_usd/textures``)."""
    from pxr import Sdf, Usd, UsdGeom, UsdShade

    from vlnverse.scenes.splits import resolve_scenes

    for path in resolve_scenes("all"):
        stage = Usd.Stage.Open(str(path))
        gprims = [p for p in stage.Traverse() if p.IsA(UsdGeom.Gprim)]
        bound, _ = UsdShade.MaterialBindingAPI.ComputeBoundMaterials(gprims)
        assert all(bound), f"{path.name}: gprims without a visual material"
        for prim in stage.Traverse():
            sh = UsdShade.Shader(prim)
            if prim.IsA(UsdShade.Shader) and sh.GetIdAttr().Get() == "UsdUVTexture":
                asset = sh.GetInput("file").Get().path
                assert Path(Sdf.ComputeAssetPathRelativeToLayer(stage.GetRootLayer(), asset)).is_file(), (path, asset)


def _textured_gprims(stage):
    """(gprim, material kind, texture asset path) of every gprim bound to a textured material."""
    from pxr import UsdGeom, UsdShade

    out = []
    for prim in stage.Traverse():
        if not prim.IsA(UsdGeom.Gprim):
            continue
        mat = UsdShade.MaterialBindingAPI(prim).ComputeBoundMaterial()[0]
        if not mat:
            continue
        files = [UsdShade.Shader(c).GetInput("file").Get() for c in mat.GetPrim().GetChildren()
                 if UsdShade.Shader(c).GetIdAttr().Get() == "UsdUVTexture"]
        if files:
            out.append((prim, material_kind(mat.GetPrim().GetAttribute("vlnverse:material").Get()), files[0]))
    return out


def test_textured_gprims_carry_st_texcoords_in_metres_per_tile(home, tmp_path):
    """Every textured gprim is a Mesh with a face-varying ``primvars:st`` (one per face corner) that
    its material's UsdPrimvarReader_float2 reads; one texture tile spans ``tile_m`` metres; the
    texture file resolves from the stage's folder and from a copy elsewhere (as in a wheel)."""
    import shutil

    from pxr import Sdf, Usd, UsdGeom, UsdShade

    path = write_usd(home, tmp_path / "h.usd")
    copy_dir = tmp_path / "site-packages" / "vlnverse" / "resources" / "scenes_usd"
    shutil.copytree(tmp_path, copy_dir, ignore=shutil.ignore_patterns("site-packages"))
    for where in (path, copy_dir / "h.usd"):
        stage = Usd.Stage.Open(str(where))
        textured = _textured_gprims(stage)
        assert len(textured) > 200  # walls, floors, furniture parts, frames …
        kinds = set()
        for prim, kind, asset in textured:
            assert prim.GetTypeName() == "Mesh", prim.GetPath()
            mesh = UsdGeom.Mesh(prim)
            st = UsdGeom.PrimvarsAPI(prim).GetPrimvar("st")
            assert st and st.GetInterpolation() == UsdGeom.Tokens.faceVarying, prim.GetPath()
            values = np.asarray(st.Get())
            assert values.shape == (sum(mesh.GetFaceVertexCountsAttr().Get()), 2), prim.GetPath()
            resolved = Path(Sdf.ComputeAssetPathRelativeToLayer(stage.GetRootLayer(), asset.path))
            assert resolved.is_file() and resolved.is_relative_to(where.parent), resolved
            kinds.add(kind)
        assert {"wood", "plaster"} & kinds and len(kinds) >= 5
    # the material network reads 'st': PrimvarReader_float2 → UsdUVTexture.st → diffuseColor
    stage = Usd.Stage.Open(str(path))
    prim, kind, _ = next(t for t in _textured_gprims(stage) if t[0].GetName().startswith("floor"))
    mat = UsdShade.MaterialBindingAPI(prim).ComputeBoundMaterial()[0]
    tex = UsdShade.Shader(mat.GetPrim().GetChild("Texture"))
    reader = tex.GetInput("st").GetConnectedSources()[0][0].source
    assert UsdShade.Shader(reader.GetPrim()).GetIdAttr().Get() == "UsdPrimvarReader_float2"
    assert UsdShade.Shader(reader.GetPrim()).GetInput("varname").Get() == "st"
    # a floor's st spans its size / tile_m: one texture tile per LOOKS[kind].tile_m metres
    # (world coordinates across each face's normal / tile_m, so the floor's top face reads its xy)
    floor = next(g for g in home.geoms if g.name == str(prim.GetPath()))
    mesh = UsdGeom.Mesh(prim)
    st = np.asarray(UsdGeom.PrimvarsAPI(prim).GetPrimvar("st").Get())
    pts = np.asarray(mesh.GetPointsAttr().Get(), float) + floor.transform[:3, 3]
    quads = np.asarray(mesh.GetFaceVertexIndicesAttr().Get()).reshape(-1, 4)
    up = [k for k, q in enumerate(quads) if np.cross(pts[q[1]] - pts[q[0]], pts[q[2]] - pts[q[0]])[2] > 0]
    assert len(up) == 1
    corners = pts[quads[up[0]]]
    assert np.allclose(st[4 * up[0]: 4 * up[0] + 4] * LOOKS[kind].tile_m, corners[:, :2], atol=1e-4)
    assert np.allclose(np.ptp(st[4 * up[0]: 4 * up[0] + 4], axis=0), 2 * floor.size[:2] / LOOKS[kind].tile_m, atol=1e-4)


def test_textured_meshes_read_back_as_the_primitives_they_stand_for(home, tmp_path):
    """Writing textured boxes/cylinders/spheres as Meshes changes nothing for the toolkit: the
    loaded description has the same geom kinds, sizes and transforms (bit for bit) as one written
    with implicit Cube/Cylinder/Sphere prims, so occupancy and physics are unchanged."""
    import vlnverse.scenes.usd_write as usd_write

    plain = tmp_path / "plain.usd"
    original = usd_write._texture_tile
    try:
        usd_write._texture_tile = lambda g: None  # the writer's path for untextured primitives
        write_usd(home, plain)
    finally:
        usd_write._texture_tile = original
    meshed = load_scene(write_usd(home, tmp_path / "meshed.usd"))
    prims = load_scene(plain)
    assert [g.kind for g in meshed.geoms] == [g.kind for g in prims.geoms] == [g.kind for g in home.geoms]
    for a, b in zip(meshed.geoms, prims.geoms):
        assert np.array_equal(a.transform, b.transform) and np.array_equal(a.size, b.size), a.name
    assert np.array_equal(build_occupancy_map(meshed).grid, build_occupancy_map(prims).grid)


def test_shipped_homes_have_st_on_every_textured_gprim():
    from pxr import Sdf, Usd, UsdGeom

    from vlnverse.paths import scenes_dir

    homes = sorted(scenes_dir().glob("home_*.usd"))
    assert len(homes) == 10
    for path in homes:
        stage = Usd.Stage.Open(str(path))
        textured = _textured_gprims(stage)
        assert len(textured) > 100, path
        for prim, _, asset in textured:
            st = UsdGeom.PrimvarsAPI(prim).GetPrimvar("st")
            mesh = UsdGeom.Mesh(prim)
            # face-varying on the gprims, per vertex on the baked-light meshes (their atlas corners)
            expected = len(mesh.GetPointsAttr().Get()) if st and st.GetInterpolation() == UsdGeom.Tokens.vertex \
                else sum(mesh.GetFaceVertexCountsAttr().Get())
            assert st and len(st.Get()) == expected, prim.GetPath()
            assert Path(Sdf.ComputeAssetPathRelativeToLayer(stage.GetRootLayer(), asset.path)).is_file()
