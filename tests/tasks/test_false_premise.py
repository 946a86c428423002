"""False-premise (VLN-NF) task: absent substitutes, pairing, reference exploration and coverage.

Checks recompute facts straight from the hand-built scene description (object footprints, room
rectangles, wall boxes), never through the task module's own helpers.
"""
from __future__ import annotations

import itertools
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from vlnverse.core.errors import ConfigError
from vlnverse.scenes.description import Geom, Room, SceneDescription, SceneObject
from vlnverse.tasks.base import SceneContext, TaskConfig
from vlnverse.tasks.episode import load_episodes, save_episodes
from vlnverse.tasks.types.false_premise.generator import (FOUND, NOT_FOUND, FalsePremiseTask, absent_categories, conflicts,
                                                greedy_coverage, shortest_visit_order)

WALL_H = 2.7


def _box(center, half, label, iid):
    t = np.eye(4)
    t[:3, 3] = center
    return Geom("box", t, np.asarray(half, float), label=label, instance_id=iid, name=f"{label}_{iid}")


def grid_home(layout: list[list[str]], objects=(), size=(5.0, 4.0), door=1.0, scene_id="grid") -> SceneDescription:
    """Rooms on a grid (``layout[row][col]`` room types; room id = row * ncols + col), each
    ``size`` metres, 0.1 m walls 2.7 m high with a ``door``-wide opening in the middle of every
    shared wall. ``objects``: (category, (x, y), (w, d, h), attributes) boxes standing on the floor."""
    w_room, d_room = size
    ny, nx = len(layout), len(layout[0])
    t = 0.05
    geoms = [_box([nx * w_room / 2, ny * d_room / 2, -0.05], [nx * w_room / 2 + 0.2, ny * d_room / 2 + 0.2, 0.05],
                  "floor", 1)]

    def wall(x0, y0, x1, y1):
        geoms.append(_box([(x0 + x1) / 2, (y0 + y1) / 2, WALL_H / 2],
                          [max((x1 - x0) / 2, t), max((y1 - y0) / 2, t), WALL_H / 2], "wall", 2))

    wall(0, -t, nx * w_room, -t)
    wall(0, ny * d_room + t, nx * w_room, ny * d_room + t)
    wall(-t, 0, -t, ny * d_room)
    wall(nx * w_room + t, 0, nx * w_room + t, ny * d_room)
    for j in range(ny):
        for i in range(nx - 1):
            x, yc = (i + 1) * w_room, (j + 0.5) * d_room
            wall(x, j * d_room, x, yc - door / 2)
            wall(x, yc + door / 2, x, (j + 1) * d_room)
    for j in range(ny - 1):
        for i in range(nx):
            y, xc = (j + 1) * d_room, (i + 0.5) * w_room
            wall(i * w_room, y, xc - door / 2, y)
            wall(xc + door / 2, y, (i + 1) * w_room, y)
    rooms = [Room(j * nx + i, layout[j][i], [[i * w_room, j * d_room], [(i + 1) * w_room, j * d_room],
                                             [(i + 1) * w_room, (j + 1) * d_room], [i * w_room, (j + 1) * d_room]])
             for j in range(ny) for i in range(nx)]
    objs = []
    for k, (cat, (x, y), (w, d, h), attrs) in enumerate(objects):
        iid = 100 + k
        geoms.append(_box([x, y, h / 2], [w / 2, d / 2, h / 2], cat, iid))
        room_id = int(x // w_room) + nx * int(y // d_room)
        objs.append(SceneObject(iid, cat, f"/World/Objects/{cat}_{iid}", [x - w / 2, y - d / 2, 0], [x + w / 2, y + d / 2, h],
                                geom_indices=[len(geoms) - 1], room_id=room_id, attributes=dict(attrs)))
    return SceneDescription(scene_id, geoms=geoms, objects=objs, rooms=rooms)


def make_context(desc: SceneDescription, body: str = "r2r_ce", renderer=None) -> SceneContext:
    """A task context from the maps layer's builders (occupancy, dilation, room map, scene graph)."""
    from vlnverse.scenes.occupancy import build_occupancy_map
    from vlnverse.scenes.room_map import build_room_map
    from vlnverse.scenes.scene_graph import build_scene_graph
    from vlnverse.sim.body import load_body
    from vlnverse.tasks.pathing import PathPlanner

    b = load_body(body)
    occ = build_occupancy_map(desc, resolution=0.05, agent_height=b.height)
    nav = occ.dilate(b.radius)
    maps = SimpleNamespace(occupancy=occ, navigable=nav, room_map=build_room_map(desc, nav),
                           scene_graph=build_scene_graph(desc))
    return SceneContext(scene_path=Path(f"{desc.scene_id}.usda"), desc=desc, maps=maps,
                        planner=PathPlanner(nav, scene_id=desc.scene_id), body=b, renderer=renderer)


#: Kitchen (room 4), two bedrooms (0, 2), bathroom (1), living room (3), office (5).
OBJECTS = [
    ("fridge", (8.0, 7.5), (0.8, 0.6, 1.8), {"color": "white"}),
    ("counter", (6.4, 7.6), (1.5, 0.6, 0.9), {"color": "gray"}),
    ("stove", (9.4, 5.0), (0.6, 0.6, 0.9), {"color": "black"}),
    ("trash_can", (5.4, 4.5), (0.3, 0.3, 0.5), {"color": "silver"}),
    ("bed", (2.5, 1.5), (1.6, 2.0, 0.6), {"color": "blue"}),
    ("nightstand", (1.2, 0.4), (0.4, 0.4, 0.5), {"color": "oak"}),
    ("wardrobe", (0.4, 3.0), (0.6, 1.2, 2.0), {"color": "white"}),
    ("toilet", (7.5, 0.4), (0.4, 0.6, 0.8), {"color": "white"}),
    ("sink", (9.6, 1.0), (0.5, 0.5, 0.9), {"color": "white"}),
    ("bathtub", (6.0, 3.3), (1.6, 0.7, 0.6), {"color": "white"}),
    ("bed", (12.5, 1.5), (1.6, 2.0, 0.6), {"color": "red"}),
    ("dresser", (14.6, 2.0), (0.5, 1.0, 0.9), {"color": "walnut"}),
    ("sofa", (2.5, 7.5), (2.0, 0.8, 0.8), {"color": "gray"}),
    ("armchair", (0.6, 5.5), (0.8, 0.8, 0.9), {"color": "green"}),
    ("tv_stand", (2.5, 4.4), (1.2, 0.4, 0.5), {"color": "black"}),
    ("desk", (12.5, 7.6), (1.2, 0.6, 0.75), {"color": "oak"}),
    ("office_chair", (12.5, 6.9), (0.5, 0.5, 0.9), {"color": "black"}),
    ("bookshelf", (14.7, 6.0), (0.4, 1.2, 1.9), {"color": "walnut"}),
]
LAYOUT = [["bedroom", "bathroom", "bedroom"], ["living_room", "kitchen", "office"]]


@pytest.fixture(scope="module")
def ctx():
    return make_context(grid_home(LAYOUT, OBJECTS, scene_id="fp_home"))


@pytest.fixture(scope="module")
def episodes(ctx):
    task = FalsePremiseTask(TaskConfig("false_premise", success_distance=3.0, max_geodesic=25.0))
    return task.generate(ctx, np.random.default_rng(7), 16, "train")


def _room_rect(desc, room_id):
    poly = desc.room_by_id(room_id).polygon
    return poly.min(axis=0), poly.max(axis=0)


def _categories_in_rect(desc, room_id) -> set[str]:
    lo, hi = _room_rect(desc, room_id)
    return {o.category for o in desc.objects
            if np.all((o.position[:2] >= lo) & (o.position[:2] <= hi))}


def test_generates_pairs_and_both_search_modes(episodes):
    assert len(episodes) == 16
    modes = {e.info["search_mode"] for e in episodes}
    assert modes == {"landmark", "coverage"}


def test_not_found_targets_absent_and_found_targets_present(ctx, episodes):
    for e in episodes:
        room = e.info["target_room_id"]
        present = _categories_in_rect(ctx.desc, room)
        if e.info["decision"] == NOT_FOUND:
            cat = e.info["absent_category"]
            assert cat not in present, (e.episode_id, cat, present)
            # not even a head-noun clash ("side table" when a coffee table is there)
            head = cat.split("_")[-1]
            assert all(p.split("_")[-1] != head for p in present), (cat, present)
            assert e.goals[0].object_id is None and e.goals[0].room_id == room
        else:
            assert e.info["decision"] == FOUND
            assert e.info["named_category"] in present
            for g in e.goals:
                obj = ctx.desc.object_by_id(g.object_id)
                assert obj.category == e.info["named_category"]
                lo, hi = _room_rect(ctx.desc, room)
                assert np.all((obj.position[:2] >= lo) & (obj.position[:2] <= hi))


def test_pairs_share_context_and_differ_only_in_the_object(episodes):
    pairs: dict[str, list] = {}
    for e in episodes:
        pairs.setdefault(e.info["pair_id"], []).append(e)
    assert len(pairs) == 8
    for pid, (found, nf) in pairs.items():
        assert (found.info["decision"], nf.info["decision"]) == (FOUND, NOT_FOUND)
        assert found.start_position == nf.start_position and found.start_yaw == nf.start_yaw
        for key in ("target_room_id", "reference_exploration_path", "coverage", "search_mode", "template_id",
                    "original_object_id"):
            assert found.info[key] == nf.info[key], key
        # The texts are identical outside the object phrase (FOUND: the original target's mention,
        # NOT_FOUND: the absent category's mention).
        a, b = found.instructions[0].text, nf.instructions[0].text
        (s1, e1), = {tuple(m["span"]) for m in found.info["mentions"]
                     if m["kind"] == "object" and m.get("instance_id") == found.info["original_object_id"]}
        (s2, e2), = {tuple(m["span"]) for m in nf.info["mentions"]
                     if m["kind"] == "object" and m.get("category") == nf.info["absent_category"]}
        assert a[:s1] == b[:s2] and a[e1:] == b[e2:]
        assert a[s1:e1] != b[s2:e2]


def _segment_blocked(desc, a, b, own, eye):
    """Exact test: does segment a→b (xy) pass through a box geom spanning eye height, other than
    the looked-at object's own geoms and those under its centre? Sampled every 1 cm."""
    n = max(2, int(np.linalg.norm(b - a) / 0.01))
    pts = a + np.linspace(0, 1, n)[:, None] * (b - a)
    for g in desc.geoms:
        lo, hi = g.world_aabb()
        if g.label == "floor" or not (lo[2] <= eye <= hi[2]) or g.instance_id in own:
            continue
        inside = np.all((pts >= lo[:2] - 1e-9) & (pts <= hi[:2] + 1e-9), axis=1)
        if inside.any():
            return True
    return False


def _seen_from(desc, viewpoints, objects, eye, max_range=4.0):
    seen = set()
    for o in objects:
        c = o.position[:2]
        own = {o.instance_id} | {q.instance_id for q in desc.objects
                                 if np.all((c >= q.bounds_min[:2]) & (c <= q.bounds_max[:2]))}
        for v in viewpoints:
            nearest = np.clip(v, o.bounds_min[:2], o.bounds_max[:2])
            if np.linalg.norm(nearest - v) <= max_range and not _segment_blocked(desc, v, c, own, eye):
                seen.add(o.instance_id)
                break
    return seen


def test_coverage_recomputed_independently(ctx, episodes):
    eye = ctx.body.camera_height
    for e in episodes[::2]:  # pairs share the reference
        room = e.info["target_room_id"]
        lo, hi = _room_rect(ctx.desc, room)
        objs = [o for o in ctx.desc.objects if np.all((o.position[:2] >= lo) & (o.position[:2] <= hi))]
        assert sorted(o.instance_id for o in objs) == sorted(e.info["room_object_ids"])
        vps = np.array(e.info["reference_exploration_path"])[:, :2]
        assert np.all((vps >= lo) & (vps <= hi)), "reference viewpoints must lie in the target room"
        seen = _seen_from(ctx.desc, vps, objs, eye)
        coverage = len(seen) / len(objs)
        assert coverage >= 0.85, (e.episode_id, coverage)
        assert abs(coverage - e.info["coverage"]) <= 1.0 / len(objs) + 1e-9


def test_landmark_reference_is_the_optimal_visiting_order(ctx, episodes):
    checked = 0
    for e in episodes[::2]:
        if e.info["search_mode"] != "landmark":
            continue
        vps = np.array(e.info["reference_exploration_path"])[:, :2]
        target = ctx.desc.object_by_id(e.info["original_object_id"])
        # every viewpoint after the entry sees the original target
        for v in vps[1:]:
            assert e.info["original_object_id"] in _seen_from(ctx.desc, [v], [target], ctx.body.camera_height)
        # no other order of the same viewpoints is shorter (geodesic distances from the planner)
        d = lambda a, b: ctx.planner.geodesic_distance(a, b)  # noqa: E731
        length = sum(d(a, b) for a, b in zip(vps[:-1], vps[1:]))
        assert length == pytest.approx(e.info["reference_exploration_length"], abs=1e-6)
        for perm in itertools.permutations(range(1, len(vps))):
            seq = [vps[0]] + [vps[i] for i in perm]
            assert sum(d(a, b) for a, b in zip(seq[:-1], seq[1:])) >= length - 1e-6
        checked += 1
    assert checked > 0


def test_exploration_route_is_collision_free_through_the_viewpoints(ctx, episodes):
    for e in episodes[::2]:
        route = np.array(e.info["reference_exploration_route"])[:, :2]
        vps = np.array(e.info["reference_exploration_path"])[:, :2]
        assert np.allclose(route[0], vps[0])
        for v in vps[1:]:  # every viewpoint is a corner of the route
            assert np.min(np.linalg.norm(route - v, axis=1)) < 1e-9
        assert all(ctx.planner.segment_free(a, b) for a, b in zip(route[:-1], route[1:]))
        length = float(np.linalg.norm(np.diff(route, axis=0), axis=1).sum())
        assert length <= e.info["reference_exploration_length"] + 1e-6


def test_exhaustive_order_beats_nearest_neighbour_on_a_line():
    # entry at x=0, targets at x=1, -2, 4 (distances |a-b|). Nearest-neighbour: 1, -2, 4 → 1+3+6 = 10.
    # Optimal: -2, 1, 4 → 2+3+3 = 8.
    xs = np.array([1.0, -2.0, 4.0])
    order, cost = shortest_visit_order(np.abs(xs), np.abs(xs[:, None] - xs[None, :]))
    assert order == [1, 0, 2]
    assert cost == pytest.approx(8.0)
    assert shortest_visit_order(np.zeros(0), np.zeros((0, 0))) == ([], 0.0)


def test_greedy_coverage_takes_biggest_gain_then_nearest():
    sees = np.array([[1, 0, 0, 0, 0],   # entry sees object 0
                     [0, 1, 1, 0, 0],   # gain 2, far
                     [0, 1, 1, 1, 0],   # gain 3, far
                     [0, 0, 0, 0, 1],   # gain 1
                     [0, 0, 0, 1, 1]],  # gain 2, near
                    dtype=bool)
    x = np.array([0.0, 10.0, 12.0, 1.0, 2.0])
    dist = np.abs(x[:, None] - x[None, :])
    # 2 (gain 3), then 4 (gain 1 for object 4; ties with 3 → nearer to 2 is 4 at 10 vs 3 at 11).
    assert greedy_coverage(0, sees, dist) == [0, 2, 4]


def test_absent_candidates_never_clash_with_present_objects():
    from vlnverse.tasks.instructions.lexicon import Lexicon

    lex = Lexicon()
    assert conflicts("refrigerator", {"fridge"}, lex)          # shared spoken form
    assert conflicts("side_table", {"coffee_table"}, lex)     # shared head noun
    assert conflicts("floor_lamp", {"lamp"}, lex)
    assert not conflicts("toaster", {"fridge", "counter"}, lex)
    absent = absent_categories("kitchen", {"fridge", "kettle", "counter", "mug"}, lex)
    assert "toaster" in absent and "blender" in absent
    assert not {"fridge", "refrigerator", "kettle", "mug", "counter", "kitchen_counter"} & set(absent)


def grounded(episode):
    """The episode's first instruction with the mentions stored in ``info["mentions"]``."""
    from vlnverse.tasks.instructions.types import GroundedInstruction, Mention

    mentions = [Mention(m["kind"], tuple(m["span"]), category=m.get("category"), instance_id=m.get("instance_id"),
                        room_id=m.get("room_id"), relation=m.get("relation"), subject=m.get("subject"),
                        target=m.get("target"), attributes=tuple((m.get("attributes") or {}).items()))
                for m in episode.info["mentions"]]
    return GroundedInstruction(episode.instructions[0].text, mentions)


def test_instructions_pass_the_verifier(ctx, episodes):
    from vlnverse.tasks.instructions.synthesizer import TEMPLATES
    from vlnverse.tasks.instructions.verifier import Verifier

    assert len(TEMPLATES.get("false_premise")) >= 30
    verifier = Verifier(ctx.maps.scene_graph)
    for e in episodes:
        problems = verifier.check(grounded(e))
        if e.info["decision"] == FOUND:
            assert problems == []
        else:  # anything the Verifier objects to lies in the absent object's phrase, nowhere else
            absent = [m for m in grounded(e).mentions if m.category == e.info["absent_category"]]
            assert len(absent) == 1 and absent[0].instance_id is None
            a, b = absent[0].span
            for problem in problems:
                assert a <= int(re.search(r"' at (\d+)", problem).group(1)) < b, problem


def test_same_seed_same_episodes_and_roundtrip(ctx, episodes, tmp_path):
    task = FalsePremiseTask(TaskConfig("false_premise", success_distance=3.0, max_geodesic=25.0))
    again = task.generate(ctx, np.random.default_rng(7), 16, "train")
    assert [e.to_dict() for e in again] == [e.to_dict() for e in episodes]
    other = task.generate(ctx, np.random.default_rng(8), 16, "train")
    assert [e.to_dict() for e in other] != [e.to_dict() for e in episodes]
    path = save_episodes(tmp_path / "fp.jsonl", episodes)
    assert [e.to_dict() for e in load_episodes(path)] == [e.to_dict() for e in episodes]


def test_bad_params_name_the_field():
    with pytest.raises(ConfigError, match=r"params\.min_coverage"):
        FalsePremiseTask(TaskConfig("false_premise", params={"min_coverage": 1.5}))
    with pytest.raises(ConfigError, match=r"unknown field"):
        FalsePremiseTask(TaskConfig("false_premise", params={"coverage": 0.9}))


def test_room_without_enough_objects_yields_a_clear_error():
    from vlnverse.core.errors import NoNavigableSpaceError

    bare = make_context(grid_home([["kitchen", "bedroom"]], [("fridge", (2.0, 3.5), (0.8, 0.6, 1.8), {})],
                                  scene_id="bare"))
    with pytest.raises(NoNavigableSpaceError, match="bare"):
        FalsePremiseTask(TaskConfig("false_premise")).generate(bare, np.random.default_rng(0), 2, "train")


def test_low_coverage_references_are_dropped():
    # A tall partition in the living room hides part of it from the viewpoints that see the sofa,
    # so some landmark-cued references cover < 85% of the room: kept only with a lax threshold.
    objs = OBJECTS + [("partition", (2.5, 5.6), (0.1, 3.2, 2.4), {})]
    c = make_context(grid_home(LAYOUT, objs, scene_id="fp_partition"))

    def run(min_coverage):
        cfg = TaskConfig("false_premise", max_geodesic=25.0,
                         params={"landmark_fraction": 1.0, "min_coverage": min_coverage})
        return FalsePremiseTask(cfg).generate(c, np.random.default_rng(1), 30, "train")

    lax = run(0.01)
    assert any(e.info["coverage"] < 0.85 for e in lax)
    strict = run(0.85)
    assert strict and all(e.info["coverage"] >= 0.85 for e in strict)
    for e in strict[::2]:
        lo, hi = _room_rect(c.desc, e.info["target_room_id"])
        objs_in = [o for o in c.desc.objects if np.all((o.position[:2] >= lo) & (o.position[:2] <= hi))]
        seen = _seen_from(c.desc, np.array(e.info["reference_exploration_path"])[:, :2], objs_in, c.body.camera_height)
        assert len(seen) / len(objs_in) >= 0.85


def test_dataset_keeps_pairs_in_one_split(tmp_path):
    # generate_dataset holds out a share of train episodes as val_seen: pairs move together.
    from vlnverse.tasks.dataset import generate_dataset

    generate_dataset("false_premise", ["home_0001"], 8, 6, tmp_path / "ds", val_seen_fraction=0.5, progress=False)
    splits: dict[str, set] = {}
    for e in load_episodes(tmp_path / "ds"):
        splits.setdefault(e.info["pair_id"], set()).add(e.split)
    assert len(splits) == 4 and all(len(s) == 1 for s in splits.values())
    assert {next(iter(s)) for s in splits.values()} == {"train", "val_seen"}
