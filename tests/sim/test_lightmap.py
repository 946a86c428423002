"""Baked light (``sim.mujoco.lightmap``) for the ``objects="meshes"`` opt-in: floor light maps with
ambient occlusion and soft shadows, from a real generated home; cached; the default untouched."""
from __future__ import annotations

import re

import numpy as np
import pytest

from vlnverse.scenes.procgen import generate_home
from vlnverse.sim.body import as_body
from vlnverse.sim.mujoco import lightmap
from vlnverse.sim.mujoco.builder import GROUP_COLLISION_ONLY, baked_lightmaps, build_model


@pytest.fixture(scope="module")
def baked(tmp_path_factory):
    """Home 11 (5 rooms, 55 m²) baked once into a fresh cache; a second call must read that cache."""
    mp = pytest.MonkeyPatch()
    mp.setenv("VLNVERSE_CACHE", str(tmp_path_factory.mktemp("cache")))
    home = generate_home(11)
    before = lightmap.BAKE_CALLS["computed"]
    maps = baked_lightmaps(home)
    yield home, maps, before
    mp.undo()


def test_occlusion_under_furniture_and_in_corners_open_floor_stays_bright(baked):
    home, maps, _ = baked
    assert sorted(maps) == lightmap.baked_surfaces(home)
    assert {home.geoms[k].label for k in maps} == {"floor", "rug"} and len(maps) == len(home.rooms) + 2
    under = {o.category: lightmap.factor_at(home, maps, *o.position[:2]) for o in home.objects
             if o.category in ("bed", "sofa")}
    assert set(under) == {"bed", "sofa"}
    assert max(under.values()) < 0.45, under  # measured: bed 0.225, sofa 0.23
    kitchen = home.rooms[0]
    assert kitchen.room_type == "kitchen"
    centre = lightmap.factor_at(home, maps, *kitchen.centroid)  # open floor, under the ceiling light
    assert centre > 0.9, centre  # measured 1.025
    lo, hi = kitchen.polygon.min(axis=0), kitchen.polygon.max(axis=0)
    for corner in (lo + 0.08, hi - 0.08, [lo[0] + 0.08, hi[1] - 0.08], [hi[0] - 0.08, lo[1] + 0.08]):
        assert lightmap.factor_at(home, maps, *corner) < 0.6 * centre, corner  # measured 0.235-0.255


def test_bake_is_cached_by_content(baked):
    home, maps, before = baked
    assert lightmap.BAKE_CALLS["computed"] == before + 1
    path = lightmap.lightmap_path(home)
    assert path.is_file()
    again = baked_lightmaps(generate_home(11))
    assert lightmap.BAKE_CALLS["computed"] == before + 1  # read, not recomputed
    assert all(np.array_equal(again[k], maps[k]) for k in maps)
    other = generate_home(14)
    assert lightmap.lightmap_path(other) != path


def test_meshes_default_draws_floors_with_baked_maps_and_primitives_untouched(baked):
    home, maps, before = baked
    body = as_body("r2r_ce")
    plain = build_model(home, body, quality="default")
    assert not any(re.fullmatch(r"b\d+", plain.model.geom(k).name) for k in range(plain.model.ngeom))
    assert not np.any(np.asarray(plain.model.geom_group) == GROUP_COLLISION_ONLY)
    fast = build_model(home, body, quality="fast", objects="meshes")
    assert not any(re.fullmatch(r"b\d+", fast.model.geom(k).name) for k in range(fast.model.ngeom))  # fast stays the unlit speed reference
    meshed = build_model(home, body, quality="default", objects="meshes")
    assert lightmap.BAKE_CALLS["computed"] == before + 1  # the builder read the cache
    m = meshed.model
    for gi in maps:
        hidden, drawn = m.geom(f"g{gi}").id, m.geom(f"b{gi}").id
        label = home.geoms[gi].label
        assert m.geom_group[hidden] == GROUP_COLLISION_ONLY  # floors still collide, rugs never did
        assert (m.geom_contype[hidden] > 0) == (label == "floor")
        assert m.geom_contype[drawn] == 0 and m.geom_type[drawn] == 7  # a visual-only mesh
        assert meshed.labels[meshed.geom_label_id[drawn]] == label
        assert meshed.geom_instance[drawn] == meshed.geom_instance[hidden]
        tex = m.mat_texid[m.geom_matid[drawn]][1]
        assert tex >= 0 and m.tex_width[tex] >= 100  # its own baked texture
    high = build_model(home, body, quality="high", objects="meshes").model
    assert all(high.geom(f"b{gi}").matid >= 0 for gi in maps)
    assert lightmap.BAKE_CALLS["computed"] == before + 1


def test_baked_texture_multiplies_the_factor_into_the_detail():
    home = generate_home(11)
    g = home.geoms[lightmap.baked_surfaces(home)[0]]
    detail = np.full((8, 8, 3), 200, np.uint8)
    factor = np.full((4, 4), 100, np.uint8)  # 0.5
    factor[:2] = 200  # 1.0 on the low-y half
    img = lightmap.baked_texture(detail, 1.0, factor, g)
    assert img[0, 0, 0] == 200 and img[-1, -1, 0] == 100  # row 0 at the floor's low y


def test_bake_is_deterministic(baked):
    home, maps, _ = baked
    fresh = baked_lightmaps(home, cache=False)
    assert sorted(fresh) == sorted(maps) and all(np.array_equal(fresh[k], maps[k]) for k in maps)
