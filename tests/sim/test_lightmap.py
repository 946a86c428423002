"""Baked light (``sim.mujoco.lightmap``, ``scenes.baked_light``) for the ``objects="meshes"`` opt-in:
light maps of floors, rugs, walls and ceilings and darkened bands of the objects' render meshes,
from a real generated home; cached; in the USD as textures; the default untouched."""
from __future__ import annotations

import re

import numpy as np
import pytest

from vlnverse.scenes import baked_light
from vlnverse.scenes.description import Geom
from vlnverse.scenes.object_meshes import render_meshes
from vlnverse.scenes.procgen import generate_home
from vlnverse.sim.body import as_body
from vlnverse.sim.mujoco import lightmap
from vlnverse.sim.mujoco.builder import GROUP_COLLISION_ONLY, baked_lightmaps, build_model


@pytest.fixture(scope="module")
def baked(tmp_path_factory):
    """Home 11 (5 rooms, 55 m², 19 meshed objects) baked once into a fresh cache; a second call
    must read that cache."""
    mp = pytest.MonkeyPatch()
    mp.setenv("VLNVERSE_CACHE", str(tmp_path_factory.mktemp("cache")))
    home = generate_home(11)
    before = lightmap.BAKE_CALLS["computed"]
    light = baked_lightmaps(home)
    yield home, light, before
    mp.undo()


def wall_factor(home, light, point, normal) -> float:
    """The stored factor of the wall texel nearest ``point`` (x, y, z) on a wall face facing ``normal``."""
    for gi, faces in light.surfaces.items():
        g = home.geoms[gi]
        if g.label != "wall":
            continue
        for face, m in faces.items():
            k, sign, u, v, _, _ = baked_light.face_frame(g, face)
            if normal[k] != sign or abs(point[k] - baked_light.face_plane(g, face)) > 0.1:
                continue
            f = lightmap.face_factor_at(g, face, m, point[u], point[v])
            if not np.isnan(f):
                return f
    return float("nan")


def test_floors_occlusion_under_furniture_and_in_corners_open_floor_stays_bright(baked):
    home, light, _ = baked
    assert sorted(light.surfaces) == lightmap.baked_surfaces(home)
    labels = [home.geoms[k].label for k in light.surfaces]
    assert labels.count("floor") == labels.count("ceiling") == len(home.rooms) and labels.count("rug") == 2
    assert labels.count("wall") > 20
    under = {o.category: lightmap.factor_at(home, light, *o.position[:2]) for o in home.objects
             if o.category in ("bed", "sofa")}
    assert set(under) == {"bed", "sofa"}
    assert max(under.values()) < 0.45, under  # measured: bed 0.225, sofa 0.23
    kitchen = home.rooms[0]
    assert kitchen.room_type == "kitchen"
    centre = lightmap.factor_at(home, light, *kitchen.centroid)  # open floor, under the ceiling light
    assert centre > 0.9, centre  # measured 1.025
    lo, hi = kitchen.polygon.min(axis=0), kitchen.polygon.max(axis=0)
    for corner in (lo + 0.08, hi - 0.08, [lo[0] + 0.08, hi[1] - 0.08], [hi[0] - 0.08, lo[1] + 0.08]):
        assert lightmap.factor_at(home, light, *corner) < 0.6 * centre, corner  # measured 0.235-0.255


def test_walls_darker_in_corners_and_beside_a_wardrobe_than_in_the_open(baked):
    home, light, _ = baked
    kitchen = home.rooms[0]
    lo, hi = kitchen.polygon.min(axis=0), kitchen.polygon.max(axis=0)
    # the kitchen's north wall (facing -y) at 1.4 m: 5 cm from the west corner and 1 m into the room
    corner = wall_factor(home, light, (lo[0] + 0.05, hi[1], 1.4), (0, -1, 0))
    open_wall = wall_factor(home, light, (lo[0] + 1.0, hi[1], 1.4), (0, -1, 0))
    assert open_wall > 0.9 and corner < 0.6 * open_wall, (corner, open_wall)  # measured 0.41, 1.03
    # the bedroom's wardrobe stands against its north wall: the wall beside it, against 2.4 m away
    wardrobe = next(o for o in home.objects if o.category == "wardrobe")
    room = next(r for r in home.rooms if r.room_id == wardrobe.room_id)
    north = room.polygon.max(axis=0)[1]
    assert wardrobe.bounds_max[1] > north - 0.2  # against that wall
    beside = wall_factor(home, light, (wardrobe.bounds_min[0] + 0.05, north, 1.4), (0, -1, 0))
    away = wall_factor(home, light, (wardrobe.bounds_min[0] - 1.55, north, 1.4), (0, -1, 0))
    assert beside < 0.6 * away, (beside, away)  # measured 0.33, 0.895
    # ceilings: darker along the walls than above the room's centre
    ceil = {gi: m for gi, m in light.surfaces.items() if home.geoms[gi].label == "ceiling"}
    assert len(ceil) == len(home.rooms)
    for gi, m in ceil.items():
        assert m["-z"][1:-1, 1:-1].mean() > m["-z"][0].mean() + 5, gi


def test_objects_darker_below_than_on_top(baked):
    home, light, _ = baked
    meshes = render_meshes(home)
    assert sorted(light.objects) == sorted(meshes)
    checked = 0
    for obj in home.objects:
        if obj.category not in ("sofa", "armchair", "fridge", "sink"):
            continue
        factors, heights, up = [], [], []
        for g, fac in zip(meshes[obj.instance_id], light.objects[obj.instance_id]):
            assert fac.dtype == np.uint8 and len(fac) == len(g.faces)
            v = np.asarray(g.vertices) @ g.transform[:3, :3].T + g.transform[:3, 3]
            tri = v[np.asarray(g.faces)]
            n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
            factors.append(fac / baked_light.FACTOR_SCALE)
            heights.append(tri.mean(axis=1)[:, 2])
            up.append(n[:, 2] / np.maximum(np.linalg.norm(n, axis=1), 1e-12))
        f, z, nz = np.concatenate(factors), np.concatenate(heights), np.concatenate(up)
        r = (z - z.min()) / np.ptp(z)
        low, top = f[r < 0.2].mean(), f[(r > 0.8) & (nz > 0.5)].mean()
        assert top > 1.5 * low, (obj.category, low, top)  # measured: sofa 0.33 / 0.79, fridge 0.375 / 0.92
        checked += 1
    assert checked >= 4


def test_bake_is_cached_by_content(baked):
    home, light, before = baked
    assert lightmap.BAKE_CALLS["computed"] == before + 1
    path = lightmap.lightmap_path(home)
    assert path.is_file()
    again = baked_lightmaps(generate_home(11))
    assert lightmap.BAKE_CALLS["computed"] == before + 1  # read, not recomputed
    assert sorted(again.surfaces) == sorted(light.surfaces)
    assert all(np.array_equal(again.surfaces[k][f], m) for k in light.surfaces for f, m in light.surfaces[k].items())
    assert all(np.array_equal(a, b) for k in light.objects for a, b in zip(again.objects[k], light.objects[k]))
    other = generate_home(14)
    assert lightmap.lightmap_path(other) != path


def test_meshes_default_draws_baked_boxes_and_bands_and_primitives_untouched(baked):
    home, light, before = baked
    body = as_body("r2r_ce")
    plain = build_model(home, body, quality="default")
    assert not any(re.fullmatch(r"b\d+", plain.model.geom(k).name) for k in range(plain.model.ngeom))
    assert not np.any(np.asarray(plain.model.geom_group) == GROUP_COLLISION_ONLY)
    fast = build_model(home, body, quality="fast", objects="meshes")
    names = [fast.model.geom(k).name for k in range(fast.model.ngeom)]
    assert not any(re.fullmatch(r"b\d+", n) for n in names)  # fast stays the unlit speed reference
    n_fast = sum(1 for n in names if n.startswith("r"))
    meshed = build_model(home, body, quality="default", objects="meshes")
    assert lightmap.BAKE_CALLS["computed"] == before + 1  # the builder read the cache
    m = meshed.model
    for gi in light.surfaces:
        hidden, drawn = m.geom(f"g{gi}").id, m.geom(f"b{gi}").id
        label = home.geoms[gi].label
        assert m.geom_group[hidden] == GROUP_COLLISION_ONLY  # floors and walls still collide, rugs never did
        assert (m.geom_contype[hidden] > 0) == home.geoms[gi].collides
        assert m.geom_contype[drawn] == 0 and m.geom_type[drawn] == 7  # a visual-only mesh
        assert meshed.labels[meshed.geom_label_id[drawn]] == label
        assert meshed.geom_instance[drawn] == meshed.geom_instance[hidden]
        tex = m.mat_texid[m.geom_matid[drawn]][1]
        assert tex >= 0 and m.tex_width[tex] >= 20  # its own baked atlas
    # objects: more geoms (bands), darker colours, the same labels and instances
    bands = [k for k in range(m.ngeom) if m.geom(k).name.startswith("r")]
    assert n_fast < len(bands) <= baked_light.OBJECT_MAX_BANDS * n_fast  # at most two bands per render mesh
    by_inst = {}
    for k in bands:
        by_inst.setdefault(int(meshed.geom_instance[k]), set()).add(meshed.labels[meshed.geom_label_id[k]])
    assert sorted(by_inst) == sorted(light.objects) and all(len(v) == 1 for v in by_inst.values())
    darker = [k for k in bands if m.geom_matid[k] >= 0 and re.search(r"_l\d{3}$", m.material(m.geom_matid[k]).name)]
    assert len(darker) > len(light.objects)  # the material's tint times the band's level
    for k in darker:
        name = m.material(m.geom_matid[k]).name
        base = m.material(name.rsplit("_l", 1)[0])
        np.testing.assert_allclose(m.mat_rgba[m.geom_matid[k]][:3], base.rgba[:3] * int(name[-3:]) / 100, atol=1e-6)
        assert m.mat_texid[m.geom_matid[k]][1] == base.texid[1]
    high = build_model(home, body, quality="high", objects="meshes").model
    assert all(high.geom(f"b{gi}").matid >= 0 for gi in light.surfaces)
    assert lightmap.BAKE_CALLS["computed"] == before + 1


def test_a_fresh_bake_of_some_faces_and_objects_equals_the_cached_one(baked):
    home, light, _ = baked
    built = build_model(home, as_body("r2r_ce"), quality="fast", objects="meshes")
    groups = np.ones(6, np.uint8)
    groups[3] = groups[GROUP_COLLISION_ONLY] = 0
    caster = lightmap._Caster(home, built.model, built.agent_body, groups)
    walls = [gi for gi in light.surfaces if home.geoms[gi].label == "wall"]
    for gi in (min(light.surfaces), walls[0], walls[-1]):
        for face, m in light.surfaces[gi].items():
            fresh = lightmap._store(lightmap._blur(lightmap._bake_face(caster, home.geoms[gi], face)))
            assert np.array_equal(fresh, m), (gi, face)
    meshes = render_meshes(home)
    inst = min(light.objects)
    for g, stored in zip(meshes[inst], light.objects[inst]):
        pts, normals, inv = lightmap._object_clusters(g)
        assert np.array_equal(lightmap._store(caster.factors(pts, normals)[inv]), stored)


@pytest.mark.slow
def test_bake_is_deterministic(baked):
    home, light, _ = baked
    fresh = baked_lightmaps(home, cache=False)
    assert sorted(fresh.surfaces) == sorted(light.surfaces)
    assert all(np.array_equal(fresh.surfaces[k][f], m) for k in light.surfaces for f, m in light.surfaces[k].items())
    assert sorted(fresh.objects) == sorted(light.objects)
    assert all(np.array_equal(a, b) for k in light.objects for a, b in zip(fresh.objects[k], light.objects[k]))


def test_usd_with_meshes_carries_the_light_maps_as_textures(baked, tmp_path):
    from PIL import Image
    from pxr import Usd, UsdGeom, UsdShade

    from vlnverse.scenes.textures import DEFAULT_KIND_BY_LABEL, LOOKS, grey_png_bytes, material_kind, texture_array
    from vlnverse.scenes.usd_conventions import BAKED_LIGHT_ROOT
    from vlnverse.scenes.usd_io import write_usd

    home, light, _ = baked
    before = lightmap.BAKE_CALLS["computed"]
    path = write_usd(home, tmp_path / "a" / "home.usda", objects="meshes")  # the registered baker: the cache
    assert lightmap.BAKE_CALLS["computed"] == before
    stage = Usd.Stage.Open(str(path))
    root = stage.GetPrimAtPath(BAKED_LIGHT_ROOT)
    drawn = [p for p in root.GetChildren() if p.IsA(UsdGeom.Mesh)]
    assert len(drawn) == len(light.surfaces)
    for gi, prim in zip(sorted(light.surfaces), drawn):  # written in geom order
        g = home.geoms[gi]
        assert UsdGeom.Imageable(stage.GetPrimAtPath(g.name)).ComputePurpose() == UsdGeom.Tokens.guide \
            or UsdGeom.Imageable(stage.GetPrimAtPath(g.name)).ComputeVisibility() == UsdGeom.Tokens.invisible
        st = UsdGeom.PrimvarsAPI(prim).GetPrimvar("st")
        assert st and len(st.Get()) == len(UsdGeom.Mesh(prim).GetPointsAttr().Get()) == 24
        material = UsdShade.MaterialBindingAPI(prim).GetDirectBinding().GetMaterial()
        shader = material.ComputeSurfaceSource()[0]
        tex = shader.GetInput("diffuseColor").GetConnectedSources()[0][0].source
        assert UsdShade.Shader(tex.GetPrim()).GetIdAttr().Get() == "UsdUVTexture"
        file = path.parent / UsdShade.Shader(tex.GetPrim()).GetInput("file").Get().path
        assert file.is_file()
        kind = material_kind(g.material) or DEFAULT_KIND_BY_LABEL.get(g.label, "")
        look = LOOKS[kind]
        atlas, _ = baked_light.box_atlas(g, light.surfaces[gi], texture_array(look.texture) if look.texture else None,
                                         look.tile_m, baked_light.USD_PX_PER_M)
        image = Image.open(file)
        assert image.mode == "L"  # 8-bit greyscale: the atlas is grey
        assert np.array_equal(np.asarray(image)[::-1], atlas[..., 0])  # st v = 0 is the image's bottom row
        assert file.read_bytes() == grey_png_bytes(atlas[::-1, :, 0])  # no metadata: deterministic bytes
        if g.label in ("wall", "ceiling"):  # the USD's density: 50 px/m on every baked face (MuJoCo: 32, 10)
            face = next(iter(light.surfaces[gi]))
            _, _, _, _, a, b = baked_light.face_frame(g, face)
            usd_w = baked_light.face_texture(None, 1.0, light.surfaces[gi][face], g, face, baked_light.USD_PX_PER_M)
            mj_w = baked_light.face_texture(None, 1.0, light.surfaces[gi][face], g, face)
            for tex, ppm in ((usd_w, 50), (mj_w, 32 if g.label == "wall" else 10)):
                assert tex.shape[1] == min(baked_light.BAKED_MAX_PX, max(2, round((b[0] - a[0]) * ppm))), g.label
    pngs = sorted((path.parent / "lightmaps").rglob("*.png"))
    assert len(pngs) == len(light.surfaces)
    # the objects' light: one prototype mesh per render mesh, its darker levels as GeomSubsets bound
    # to looks darkened by the level (MuJoCo's bands), not as separate meshes
    meshes = render_meshes(home)
    renders = [p for p in stage.Traverse() if p.GetName() == "Render"]
    assert len(renders) == len(meshes)
    n_subsets = 0
    for prim in renders:
        inst = int(prim.GetParent().GetAttribute("vlnverse:instanceId").Get())
        parts = [p for p in prim.GetPrototype().GetChildren() if p.IsA(UsdGeom.Mesh)]
        assert len(parts) == len(meshes[inst])
        for mesh_prim, g, fac in zip(parts, meshes[inst], light.objects[inst]):
            levels = baked_light.face_levels(g, fac)
            # the same levels as MuJoCo's bands: at most two per render mesh
            assert sorted(set(levels.tolist()), reverse=True) == [lv for _, lv in baked_light.banded_meshes([g], [fac])]
            assert len(set(levels.tolist())) <= baked_light.OBJECT_MAX_BANDS == 2
            binding = UsdShade.MaterialBindingAPI(mesh_prim)
            subsets = binding.GetMaterialBindSubsets()
            assert sorted(round(lv, 2) for lv in set(levels.tolist()))[:-1] == \
                sorted(int(s.GetPrim().GetName().split("_")[1]) / 100 for s in subsets)
            for subset in subsets:
                level = int(subset.GetPrim().GetName().split("_")[1]) / 100
                assert list(subset.GetIndicesAttr().Get()) == np.flatnonzero(np.isclose(levels, level)).tolist()
                look = UsdShade.MaterialBindingAPI(subset.GetPrim()).GetDirectBinding().GetMaterial()
                pbr = look.ComputeSurfaceSource()[0]
                diffuse = pbr.GetInput("diffuseColor")
                src = diffuse.GetConnectedSources()[0]
                colour = UsdShade.Shader(src[0].source.GetPrim()).GetInput("scale").Get() if src else diffuse.Get()
                np.testing.assert_allclose(list(colour)[:3], [round(c * level, 4) for c in g.color], atol=1e-6)
                n_subsets += 1
    assert n_subsets > 20
    # this home is the shipped home_0011: crate 586 265 B and light maps 288 275 B (docs/scenes.md; before
    # the GeomSubsets and the grey 50 px/m PNGs, home 12's were 1.12 MB and 2.57 MB)
    crate = write_usd(home, tmp_path / "b" / "home.usd", objects="meshes")
    assert crate.stat().st_size < 650_000 and sum(p.stat().st_size for p in pngs) < 350_000


def test_atlas_regions_and_uvs_multiply_the_factor_into_the_detail():
    home = generate_home(11)
    gi = next(i for i in lightmap.baked_surfaces(home) if home.geoms[i].label == "floor")
    g = home.geoms[gi]
    detail = np.full((8, 8, 3), 200, np.uint8)
    factor = np.full((4, 4), 100, np.uint8)  # 0.5
    factor[:2] = 200  # 1.0 on the low-y half
    img, regions = baked_light.box_atlas(g, {"+z": factor}, detail, 1.0)
    row, h, w = regions["+z"]
    top = img[row:row + h, baked_light.GUTTER_PX:baked_light.GUTTER_PX + w, 0]
    assert top[0, 0] == 200 and top[-1, -1] == 100  # row 0 at the floor's low y
    assert np.all(img[regions["-z"][0]:regions["-z"][0] + regions["-z"][1], 2:-2, 0] == 200)  # no map: factor 1
    verts, faces, uv = baked_light.box_mesh(g, regions, img.shape[:2])
    lo, hi = baked_light.box_bounds(g)
    np.testing.assert_allclose(verts.min(axis=0), lo - (lo + hi) / 2)
    tri = verts[faces]
    normals = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    assert np.all(np.einsum("ij,ij->i", normals, tri.mean(axis=1)) > 0)  # counter-clockwise from outside
    # "+z" is the last of the six faces: its corners span its region of the atlas
    np.testing.assert_allclose(verts[20:24, 2], (hi - lo)[2] / 2)
    px = uv[20:24] * [img.shape[1], img.shape[0]]
    np.testing.assert_allclose(np.sort(np.unique(px[:, 1])), [row, row + h])
    np.testing.assert_allclose(np.sort(np.unique(px[:, 0])), [baked_light.GUTTER_PX, baked_light.GUTTER_PX + w])


def test_atlas_sizes_by_label_and_light_only_ceilings():
    """Floors at 50 px/m and walls at 32 px/m keep the detail (a floor 50 px per metre, a wall 32);
    a ceiling's atlas holds the light times the detail's mean, at 10 px/m."""
    home = generate_home(11)
    stripes = np.zeros((8, 8, 3), np.uint8)
    stripes[:, ::2] = 200  # mean 100
    for label, ppm in (("floor", 50.0), ("wall", 32.0), ("ceiling", 10.0)):
        gi = next(i for i, faces in lightmap.baked_faces(home).items() if home.geoms[i].label == label)
        g = home.geoms[gi]
        face = lightmap.baked_faces(home)[gi][0]
        factor = np.full((4, 4), 100, np.uint8)  # 0.5
        tex = baked_light.face_texture(stripes, 0.01, factor, g, face)  # a 1 cm tile: 800 px/m of its own
        _, _, _, _, a, b = baked_light.face_frame(g, face)
        expect = [int(min(baked_light.BAKED_MAX_PX, max(2, round((b[i] - a[i]) * ppm)))) for i in (1, 0)]
        assert list(tex.shape) == expect, label
    assert np.all(tex == 50)  # the ceiling: 0.5 x the stripes' mean 100
    gi = next(i for i, faces in lightmap.baked_faces(home).items() if home.geoms[i].label == "floor")
    fine = baked_light.face_texture(stripes, 0.16, np.full((4, 4), 200, np.uint8), home.geoms[gi], "+z")
    assert set(np.unique(fine).tolist()) == {0, 200}  # detail kept (8 px / 0.16 m = 50 px/m)


def test_banded_meshes_split_by_level_with_darker_colours():
    home = generate_home(11)
    meshes = render_meshes(home)
    inst = next(iter(meshes))
    g = meshes[inst][0]
    n = len(g.faces)
    fac = np.full(n, 200, np.uint8)
    fac[: n // 2] = 90  # half the triangles at 0.45
    bands = baked_light.banded_meshes([g], [fac])
    assert [(b.name, level) for b, level in bands] == [(f"{g.name}_l100", 1.0), (f"{g.name}_l045", 0.45)]
    assert sum(len(b.faces) for b, _ in bands) == n
    assert all(b.color == g.color and b.material == g.material for b, _ in bands)
    assert baked_light.darkened(bands[1][0], 0.45).color == tuple(round(c * 0.45, 4) for c in g.color)
    for b, _ in bands:
        assert b.faces.max() < len(b.vertices) and len(b.texcoords) == len(b.vertices)
    # a band too small for MuJoCo (under 4 vertices) joins its nearest level
    fac[:] = 200
    fac[0] = 60
    assert len(baked_light.banded_meshes([g], [fac])) == 1


def test_banded_meshes_keep_at_most_two_bands_at_area_weighted_levels():
    """Four levels on a strip of equal triangles (8 at 1.0, 8 at 0.9, 4 at 0.45, 2 at 0.3): the split
    with the least area-weighted error is {1.0, 0.9} | {0.45, 0.3}, drawn at their means 0.95 and 0.4."""
    n_quads = 11
    xs = np.arange(n_quads + 1, dtype=float)
    verts = np.concatenate([np.c_[xs, np.zeros_like(xs), np.zeros_like(xs)], np.c_[xs, np.ones_like(xs), np.zeros_like(xs)]])
    top = n_quads + 1
    faces = np.array([t for i in range(n_quads) for t in ((i, i + 1, top + i + 1), (i, top + i + 1, top + i))])
    g = Geom("mesh", np.eye(4), label="sofa", instance_id=3, color=(0.5, 0.4, 0.3), collides=False,
                         name="/World/sofa/render_00", vertices=verts, faces=faces, material="fabric_red",
                         texcoords=verts[:, :2].copy())
    fac = np.array([200] * 8 + [180] * 8 + [90] * 4 + [60] * 2, np.uint8)  # levels 1.0, 0.9, 0.45, 0.3
    np.testing.assert_allclose(baked_light.triangle_areas(g), 0.5)
    bands = baked_light.banded_meshes([g], [fac])
    assert [(b.name, level) for b, level in bands] == [(f"{g.name}_l095", 0.95), (f"{g.name}_l040", 0.4)]
    assert [len(b.faces) for b, _ in bands] == [16, 6]
    np.testing.assert_array_equal(bands[1][0].vertices[bands[1][0].faces], verts[faces[16:]])
    # three bands when allowed; fewer levels than that are kept as they are
    levels = baked_light.object_levels(fac)
    assert sorted(set(baked_light.fewest_levels(levels, baked_light.triangle_areas(g), 3).tolist())) == [0.4, 0.9, 1.0]
    assert sorted(set(baked_light.fewest_levels(levels[:16], np.full(16, 0.5)).tolist())) == [0.9, 1.0]
