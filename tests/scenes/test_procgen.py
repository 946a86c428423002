"""Procedural homes: determinism, floor plans, doors, furniture rules, support, reachability."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from scipy import ndimage

from vlnverse.core.errors import ConfigError
from vlnverse.scenes.catalog import CATEGORIES, SMALL_CATEGORIES
from vlnverse.scenes.description import STRUCTURE_LABELS
from vlnverse.scenes.occupancy import build_occupancy_map
from vlnverse.scenes.procgen import DOOR_CLEARANCE, WALL_THICKNESS, generate_home, generate_homes
from vlnverse.scenes.splits import resolve_scenes
from vlnverse.scenes.usd_io import load_scene, write_usd
from vlnverse.sim.body import load_body

SEEDS = (0, 3, 11, 14)


@pytest.fixture(scope="module")
def homes():
    return {s: generate_home(s) for s in SEEDS}


@pytest.fixture(scope="module")
def shipped():
    return [load_scene(p) for p in resolve_scenes("all")]


def test_same_seed_same_bytes_across_processes(tmp_path):
    code = ("import sys; from vlnverse.scenes.procgen import generate_home; from vlnverse.scenes.usd_io import write_usd; "
            "write_usd(generate_home(21), sys.argv[1])")
    for name in ("a.usd", "b.usd"):
        run = subprocess.run([sys.executable, "-c", code, str(tmp_path / name)], capture_output=True, text=True,
                             timeout=300)
        assert run.returncode == 0, f"writing {name} in a new process failed: {run.stderr}"
    assert (tmp_path / "a.usd").read_bytes() == (tmp_path / "b.usd").read_bytes()
    assert write_usd(generate_home(21), tmp_path / "c.usd").read_bytes() == (tmp_path / "a.usd").read_bytes()


def test_different_seeds_differ(homes):
    plans = {s: tuple(tuple(r.polygon.ravel()) for r in h.rooms) for s, h in homes.items()}
    assert len(set(plans.values())) == len(plans)


def test_room_counts_and_bounds():
    for seed in range(8):
        assert 4 <= len(generate_home(seed).rooms) <= 12
    assert len(generate_home(1, min_rooms=4, max_rooms=4).rooms) == 4
    assert len(generate_home(1, min_rooms=12, max_rooms=12).rooms) == 12


@pytest.mark.parametrize("kwargs", [dict(seed=-1), dict(seed=1, min_rooms=3), dict(seed=1, min_rooms=8, max_rooms=6),
                                    dict(seed=1, max_rooms=13)])
def test_bad_arguments(kwargs):
    seed = kwargs.pop("seed")
    with pytest.raises(ConfigError):
        generate_home(seed, **kwargs)


def test_floor_plan_structure(homes):
    for home in homes.values():
        height = home.metadata["wall_height"]
        assert 2.6 <= height <= 2.8
        floors = [g for g in home.geoms if g.label == "floor"]
        ceilings = [g for g in home.geoms if g.label == "ceiling"]
        assert len(floors) == len(ceilings) == len(home.rooms)
        for room, floor in zip(home.rooms, floors):
            lo, hi = floor.world_aabb()
            assert hi[2] == pytest.approx(0.0, abs=1e-12)  # floor top at z = 0
            assert np.all(lo[:2] <= room.polygon.min(axis=0)) and np.all(hi[:2] >= room.polygon.max(axis=0))
            side = room.polygon.max(axis=0) - room.polygon.min(axis=0)
            assert side.min() >= (1.4 if room.room_type == "hallway" else 2.4) - 1e-9
        walls = [g for g in home.geoms if g.label == "wall"]
        for w in walls:  # full height, except the pieces under a window's sill and above its head
            lo, hi = w.world_aabb()
            assert (lo[2], hi[2]) in ((pytest.approx(0.0), pytest.approx(height)), (pytest.approx(0.0), pytest.approx(0.9)),
                                      (pytest.approx(2.1), pytest.approx(height)))
            assert min(hi[:2] - lo[:2]) == pytest.approx(WALL_THICKNESS)
        assert sum(w.world_aabb()[1][2] == pytest.approx(0.9) for w in walls) == \
            sum(g.label == "window" and g.kind == "box" for g in home.geoms)  # one sill piece per window
        # rooms never overlap (rectangles may only share edges)
        boxes = np.array([np.r_[r.polygon.min(axis=0), r.polygon.max(axis=0)] for r in home.rooms])
        for i in range(len(boxes)):
            for j in range(i + 1, len(boxes)):
                dx = min(boxes[i, 2], boxes[j, 2]) - max(boxes[i, 0], boxes[j, 0])
                dy = min(boxes[i, 3], boxes[j, 3]) - max(boxes[i, 1], boxes[j, 1])
                assert dx <= 1e-9 or dy <= 1e-9


def test_doors_are_openings_that_connect_every_room(homes):
    for home in homes.values():
        graph = nx.Graph()
        graph.add_nodes_from(r.room_id for r in home.rooms)
        blocking = [g for g in home.geoms if g.label == "wall"]
        for door in home.doors:
            assert door.width >= 0.9
            graph.add_edge(*door.room_ids)
            # both rooms border the door, and no wall occupies the opening at head height
            for rid in door.room_ids:
                poly = home.room_by_id(rid).polygon
                assert np.all(door.center >= poly.min(axis=0) - 1e-9) and np.all(door.center <= poly.max(axis=0) + 1e-9)
            along = 0 if door.axis == "x" else 1
            for offset in np.linspace(-door.width / 2 + 0.01, door.width / 2 - 0.01, 7):
                p = np.array([door.center[0], door.center[1], 1.0])
                p[along] += offset
                for w in blocking:
                    lo, hi = w.world_aabb()
                    assert not np.all((p >= lo - 1e-9) & (p <= hi + 1e-9)), f"wall blocks door {door.door_id}"
            frames = [g for g in home.geoms if g.label == "door_frame"]
            assert any(np.allclose(f.position[:2], door.center) for f in frames)
        assert nx.is_connected(graph)


def test_labels_and_instance_ids(homes):
    for home in homes.values():
        ids = [o.instance_id for o in home.objects]
        assert len(ids) == len(set(ids))
        structure_ids = {g.instance_id for g in home.geoms if g.label in STRUCTURE_LABELS}
        assert structure_ids.isdisjoint(ids)
        for obj in home.objects:
            assert obj.category in CATEGORIES and obj.room_id is not None
            assert set(obj.attributes) == {"color", "material", "size"}
            for gi in obj.geom_indices:
                assert home.geoms[gi].label == obj.category and home.geoms[gi].instance_id == obj.instance_id
            room = home.room_by_id(obj.room_id)
            assert room.contains(obj.position[None, :2])[0]


def test_furniture_is_built_from_several_primitives(shipped):
    for home in shipped:
        for obj in home.objects:
            if obj.category in ("dining_table", "coffee_table", "chair", "bed", "sofa", "desk"):
                assert len(obj.geom_indices) >= 4, obj.category
            if obj.category not in SMALL_CATEGORIES and obj.category not in ("laundry_basket", "trash_can"):
                assert len(obj.geom_indices) >= 2, obj.category


def test_room_rules(shipped):
    expected = {"bedroom": "bed", "bathroom": "toilet", "kitchen": "fridge", "living_room": "sofa"}
    found = {t: 0 for t in expected}
    rooms = {t: 0 for t in expected}
    for home in shipped:
        cats = {}
        for obj in home.objects:
            cats.setdefault(obj.room_id, set()).add(obj.category)
        for room in home.rooms:
            if room.room_type in expected:
                rooms[room.room_type] += 1
                found[room.room_type] += expected[room.room_type] in cats.get(room.room_id, set())
    for t in expected:
        assert found[t] >= 0.8 * rooms[t] and found[t] >= 1, (t, found[t], rooms[t])
    kitchens_with_stove = sum("stove" in {o.category for o in h.objects if h.room_by_id(o.room_id).room_type == "kitchen"}
                              for h in shipped)
    assert kitchens_with_stove >= len(shipped) - 1


def test_masses_and_movability(shipped):
    objs = [o for h in shipped for o in h.objects]
    by_cat = {}
    for o in objs:
        by_cat.setdefault(o.category, []).append(o)
    assert all(o.movable and 0.1 < o.mass < 1.0 for o in by_cat["cup"])
    assert all(o.movable and 3 < o.mass < 10 for o in by_cat["chair"])
    assert all(not o.movable and o.mass > 30 for o in by_cat["sofa"])
    assert all(o.mass > 0 for o in objs)


def _supports(home, obj):
    """Objects with a geom whose top is at ``obj``'s bottom (±1 mm) under ``obj``'s footprint."""
    out = []
    for other in home.objects:
        if other.instance_id == obj.instance_id:
            continue
        for gi in other.geom_indices:
            lo, hi = home.geoms[gi].world_aabb()
            under = np.all(lo[:2] < obj.bounds_max[:2]) and np.all(hi[:2] > obj.bounds_min[:2])
            if abs(hi[2] - obj.bounds_min[2]) <= 1e-3 and under:
                out.append(other)
                break
    return out


def test_small_objects_rest_on_support(shipped):
    pairs = set()
    n_small = 0
    for home in shipped:
        for obj in home.objects:
            if obj.category not in SMALL_CATEGORIES:
                continue
            n_small += 1
            supports = _supports(home, obj)
            assert supports, f"{home.scene_id}: {obj.category} {obj.instance_id} floats"
            sup = supports[0]
            assert np.all(obj.bounds_min[:2] >= sup.bounds_min[:2] - 1e-6)  # within the support's footprint
            assert np.all(obj.bounds_max[:2] <= sup.bounds_max[:2] + 1e-6)
            assert obj.room_id == sup.room_id
            pairs.add((obj.category, sup.category))
    assert n_small >= 60
    assert {("tv", "tv_stand"), ("towel", "towel_rack")} <= pairs
    assert any(s == "nightstand" and c == "lamp" for c, s in pairs)


def test_furniture_keeps_doorways_clear(shipped):
    for home in shipped:
        for door in home.doors:
            along = 0 if door.axis == "x" else 1
            half = np.empty(2)
            half[along] = door.width / 2
            half[1 - along] = DOOR_CLEARANCE - 0.01
            lo_z, hi_z = door.center - half, door.center + half
            for obj in home.objects:
                if obj.category in SMALL_CATEGORIES:
                    continue
                overlap = np.all(obj.bounds_min[:2] < hi_z) and np.all(obj.bounds_max[:2] > lo_z)
                assert not overlap, f"{home.scene_id}: {obj.category} blocks door {door.door_id}"


def test_every_room_reachable_for_default_agent(shipped):
    radius = load_body("r2r_ce").radius
    for home in shipped:
        nav = build_occupancy_map(home).dilate(radius)
        labels, _ = ndimage.label(nav.free_mask())
        h, w = labels.shape
        rows, cols = np.mgrid[0:h, 0:w]
        centres = nav.cell_to_world(np.c_[rows.ravel(), cols.ravel()])
        comps = []
        for room in home.rooms:
            inside = room.contains(centres) & (labels.ravel() > 0)
            assert inside.any(), f"{home.scene_id}: room {room.room_id} has no navigable cell"
            comps.append(np.bincount(labels.ravel()[inside]).argmax())
        assert len(set(comps)) == 1, f"{home.scene_id}: rooms split over components {comps}"


def test_shipped_set_variety(shipped):
    categories = {o.category for h in shipped for o in h.objects}
    room_types = {r.room_type for h in shipped for r in h.rooms}
    assert len(categories) >= 40
    assert len(room_types) >= 8
    assert all(4 <= len(h.rooms) <= 12 for h in shipped)
    # with render meshes and baked light (measured: 7.19 MB of USD, 12.56 MB with textures and light maps)
    usd = resolve_scenes("all")
    assert sum(p.stat().st_size for p in usd) < 8e6
    folder = usd[0].parent
    assert sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) < 14e6
    assert all(sorted((folder / "lightmaps" / p.stem).glob("*.png")) for p in usd)  # every home has its light maps


def _widest_simd_paths() -> list[str]:
    """numpy's dispatched SIMD targets this CPU runs (disabling one the CPU lacks is an error)."""
    try:
        from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    except ImportError:  # numpy < 2
        from numpy.core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    return [name for name in __cpu_dispatch__ if __cpu_features__.get(name)]


def test_a_shipped_home_matches_the_generator(tmp_path):
    """The smallest shipped home is byte for byte what the generator writes from its seed (with its
    render meshes and baked light, as tools/generate_shipped_scenes.py writes it), textures and light
    maps included (the quick guard against a generator change without regenerating scenes_usd/;
    every home in two processes and on any SIMD path is the slow test below)."""
    import json

    from vlnverse.paths import scenes_dir
    from vlnverse.scenes.usd_io import write_usd

    shipped = scenes_dir()
    seeds = [seed for split in json.loads((shipped / "splits.json").read_text())["seeds"].values() for seed in split]
    seed = min(seeds, key=lambda s: (shipped / f"home_{s:04d}.usd").stat().st_size)
    fresh = write_usd(generate_home(seed), tmp_path / f"home_{seed:04d}.usd", objects="meshes")
    assert fresh.read_bytes() == (shipped / fresh.name).read_bytes(), \
        f"{fresh.name} differs from a fresh generation: run python tools/generate_shipped_scenes.py"
    textures = sorted((tmp_path / "textures").glob("*.png"))
    assert textures and all(p.read_bytes() == (shipped / "textures" / p.name).read_bytes() for p in textures)
    maps = sorted(p.relative_to(tmp_path) for p in (tmp_path / "lightmaps").rglob("*.png"))
    assert maps and maps == sorted(p.relative_to(shipped) for p in (shipped / "lightmaps" / fresh.stem).glob("*.png"))
    assert all((tmp_path / p).read_bytes() == (shipped / p).read_bytes() for p in maps)


@pytest.mark.slow  # every shipped home, twice (~110 s on a loaded 2-core machine)
def test_shipped_scenes_match_the_generator_on_any_simd_path():
    """scenes_usd/ is byte for byte what tools/generate_shipped_scenes.py produces from this code, in two
    separate processes: numpy's default dispatch and with its widest SIMD paths disabled (floats are
    rounded to a fixed precision before writing, so last-ulp differences never reach the files)."""
    tool = Path(__file__).resolve().parents[2] / "tools" / "generate_shipped_scenes.py"
    simd = _widest_simd_paths()
    envs = [dict(os.environ), dict(os.environ, NPY_DISABLE_CPU_FEATURES=" ".join(simd))]
    runs = [subprocess.Popen([sys.executable, str(tool), "--check", "--quiet"], env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE) for env in envs]
    for env, run in zip(envs, runs):
        _, err = run.communicate(timeout=1800)  # ends only a hung run
        assert run.returncode == 0, f"NPY_DISABLE_CPU_FEATURES={env.get('NPY_DISABLE_CPU_FEATURES', '')!r}: {err}"
    if simd:  # the second process really ran without them
        code = ("import sys, numpy as np; m = getattr(np, '_core', None) or np.core; "
                "f = m._multiarray_umath.__cpu_features__; print(' '.join(n for n in sys.argv[1:] if f.get(n)))")
        probe = subprocess.run([sys.executable, "-c", code, *simd], env=envs[1], capture_output=True, text=True,
                               timeout=300)
        assert probe.returncode == 0 and probe.stdout.split() == [], probe.stdout + probe.stderr


def test_generate_homes_writes_files(tmp_path):
    paths = generate_homes(2, 40, tmp_path / "out", ext=".usd", progress=False)
    assert [p.name for p in paths] == ["home_0040.usd", "home_0041.usd"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["home_0040.usd", "home_0041.usd", "textures"]
    assert all(p.suffix == ".png" for p in (tmp_path / "out" / "textures").iterdir())  # no temporaries
    assert load_scene(paths[1]).metadata["seed"] == 41
    with pytest.raises(ConfigError, match="ext"):
        generate_homes(1, 0, tmp_path, ext=".obj", progress=False)
