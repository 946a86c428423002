"""Video-contextualized (VCN-Bench) task: tours, prior videos, and answers recomputed from the tour.

Every Count / Order / Distance / Orientation answer is recomputed here from the stored tour (frame
positions → rooms by the hand-built rectangles, rooms in order of first appearance in the window,
geodesic distances to rectangle centres) without the task module's rule functions.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from test_false_premise import _segment_blocked, grid_home, grounded, make_context
from vlnverse.core.errors import ConfigError
from vlnverse.tasks.base import TaskConfig
from vlnverse.tasks.tours import RoomVisit, line_of_sight, load_prior_video, object_visibility, plan_tour
from vlnverse.tasks.types.video_contextualized.generator import (VideoContextualizedTask, count_answers, distance_answers,
                                                       order_answers, orientation_answers)

ROOM_W, ROOM_D = 5.0, 4.0
LAYOUT = [["bedroom", "bathroom", "bedroom", "bedroom"], ["living_room", "kitchen", "bedroom", "bathroom"]]
OBJECTS = [
    ("fridge", (8.0, 7.5), (0.8, 0.6, 1.8), {"color": "white"}),
    ("counter", (6.5, 7.6), (1.5, 0.6, 0.9), {"color": "gray"}),
    ("stove", (9.3, 5.0), (0.6, 0.6, 0.9), {"color": "black"}),
    ("bed", (2.5, 1.5), (1.6, 2.0, 0.6), {"color": "blue"}),
    ("nightstand", (1.2, 0.4), (0.4, 0.4, 0.5), {"color": "oak"}),
    ("bed", (12.5, 1.5), (1.6, 2.0, 0.6), {"color": "red"}),
    ("wardrobe", (14.6, 3.2), (0.6, 1.2, 2.0), {"color": "oak"}),
    ("bed", (12.5, 6.5), (1.6, 2.0, 0.6), {"color": "green"}),
    ("dresser", (14.6, 7.3), (0.5, 1.0, 0.9), {"color": "white"}),
    ("sofa", (2.5, 7.5), (2.0, 0.8, 0.8), {"color": "gray"}),
    ("tv_stand", (2.5, 4.4), (1.2, 0.4, 0.5), {"color": "black"}),
    ("toilet", (7.5, 0.4), (0.4, 0.6, 0.8), {"color": "white"}),
    ("sink", (9.6, 1.0), (0.5, 0.5, 0.9), {"color": "white"}),
    ("bed", (17.5, 1.5), (1.6, 2.0, 0.6), {"color": "blue"}),
    ("toilet", (17.5, 7.6), (0.4, 0.6, 0.8), {"color": "white"}),
]
FRAME = 16


def pose_renderer(x, y, yaw, pitch=0.0):
    """A cheap deterministic camera: the image encodes the pose (x, y in cm/5, yaw in 1/40 rad)."""
    img = np.zeros((FRAME, FRAME, 3), np.uint8)
    img[..., 0] = int(round(x * 20)) % 256
    img[..., 1] = int(round(y * 20)) % 256
    img[..., 2] = int(round((yaw % (2 * math.pi)) * 40)) % 256
    return img


@pytest.fixture(scope="module")
def ctx():
    return make_context(grid_home(LAYOUT, OBJECTS, size=(ROOM_W, ROOM_D), scene_id="vcn_home"), body="stretch",
                        renderer=pose_renderer)


def _task(tmp: Path, **params) -> VideoContextualizedTask:
    cfg = TaskConfig("video_contextualized", success_distance=1.0, max_steps=1000, max_geodesic=40.0, body="stretch",
                     params={"frame_size": FRAME, **params})
    return VideoContextualizedTask(cfg, assets_dir=tmp / "assets")


@pytest.fixture(scope="module")
def generated(ctx, tmp_path_factory):
    root = tmp_path_factory.mktemp("vcn")
    episodes = _task(root).generate(ctx, np.random.default_rng(3), 40, "val_unseen")
    return root, episodes


# -------------------------------------------------------------------- independent recomputation

def rooms_of_frames(positions: np.ndarray) -> np.ndarray:
    """Room id per frame from the grid rectangles; frames on a shared wall line are -1."""
    x, y = positions[:, 0], positions[:, 1]
    col, row = np.floor(x / ROOM_W).astype(int), np.floor(y / ROOM_D).astype(int)
    on_line = (np.abs(x / ROOM_W - np.round(x / ROOM_W)) < 1e-9) | (np.abs(y / ROOM_D - np.round(y / ROOM_D)) < 1e-9)
    out = row * len(LAYOUT[0]) + col
    out[on_line] = -1
    return out


def visit_sequence(room_ids: np.ndarray) -> list[int]:
    """Rooms of consecutive stays (unknown frames skipped)."""
    seq: list[int] = []
    for r in room_ids:
        if r >= 0 and (not seq or seq[-1] != r):
            seq.append(int(r))
    return seq


def room_type(r: int) -> str:
    return LAYOUT[r // len(LAYOUT[0])][r % len(LAYOUT[0])]


def room_rect(r: int) -> tuple[np.ndarray, np.ndarray]:
    i, j = r % len(LAYOUT[0]), r // len(LAYOUT[0])
    return np.array([i * ROOM_W, j * ROOM_D]), np.array([(i + 1) * ROOM_W, (j + 1) * ROOM_D])


def _window(root: Path, e):
    frames, arrays = load_prior_video(root / e.info["video"])
    s, t = e.info["window"]
    return frames, arrays, s, t


def test_every_kind_is_generated(generated):
    _, episodes = generated
    assert len(episodes) == 40
    assert {e.info["kind"] for e in episodes} == {"instance", "count", "order", "distance", "orientation"}
    assert all(e.task_type == "video_contextualized" for e in episodes)


def test_start_is_the_last_frame_of_the_window(generated):
    root, episodes = generated
    for e in episodes:
        _, arrays, s, t = _window(root, e)
        assert 0 <= s < t <= len(arrays["positions"])
        assert e.start_position[:2] == pytest.approx(arrays["positions"][t - 1].tolist())
        assert e.start_yaw == pytest.approx(float(arrays["yaws"][t - 1]))


def test_count_order_answers_recomputed_from_the_tour(generated):
    root, episodes = generated
    checked = 0
    subclasses: set[str] = set()
    for e in episodes:
        kind = e.info["kind"]
        if kind not in ("count", "order"):
            continue
        _, arrays, s, t = _window(root, e)
        seq = visit_sequence(rooms_of_frames(arrays["positions"][s:t]))
        target, ttype = e.info["target_room_id"], e.info["answer"]["room_type"]
        assert room_type(target) == ttype
        assert seq[-1] != target, "the target is not the room you start in"
        same_type = list(dict.fromkeys(r for r in seq if room_type(r) == ttype))
        subclass = e.info["answer"].get("subclass")
        if subclass == "entry":  # the room right after the k-th entry into the room you stand in
            k = e.info["answer"]["ordinal"]
            entries = [i for i, r in enumerate(seq) if r == seq[-1]]
            assert len(entries) >= 2 and e.info["answer"]["anchor_room_id"] == seq[-1]
            assert seq[entries[k - 1] + 1] == target
            subclasses.add(subclass)
        elif subclass == "single_room":  # of two single rooms of different types, the one on that side
            anchor = e.info["answer"]["anchor_room_id"]
            assert seq.count(anchor) == 1 and sum(room_type(r) == room_type(anchor) for r in set(seq)) == 1
            i = seq.index(anchor)
            side, other = (seq[:i], seq[i + 1:]) if e.info["answer"]["relation"] == "before" else (seq[i + 1:], seq[:i])
            (distractor,) = set(e.info["answer"]["choices"]) - {ttype}
            for rtype, here, there in ((ttype, side, other), (distractor, other, side)):
                assert len({r for r in seq if room_type(r) == rtype}) == 1
                assert any(room_type(r) == rtype for r in here) and not any(room_type(r) == rtype for r in there)
            assert e.info["answer"]["choices"] == sorted([ttype, distractor])
            subclasses.add(subclass)
        elif kind == "count":
            assert len(same_type) >= 2, "a distractor room of the same type must be in the video"
            k = e.info["answer"]["ordinal"]
            assert same_type[k - 1] == target
            first = seq.index(target)
            assert not set(same_type[:k - 1]) & set(seq[first + 1:]), "an earlier room is revisited"
        else:
            assert len(same_type) >= 2, "a distractor room of the same type must be in the video"
            anchor = e.info["answer"]["anchor_room_id"]
            assert seq.count(anchor) == 1
            assert sum(room_type(r) == room_type(anchor) for r in set(seq)) == 1
            i = seq.index(anchor)
            relation = e.info["answer"]["relation"]
            if relation == "next":
                assert seq[i + 1] == target
            elif relation == "previous":
                assert seq[i - 1] == target
            else:
                side = seq[i + 1:] if relation == "after" else seq[:i]
                assert {r for r in side if room_type(r) == ttype} == {target}
        checked += 1
    assert checked >= 4
    assert subclasses == {"entry", "single_room"}   # VCN-Bench's second Count and first Order subclasses


def test_distance_answers_recomputed_with_a_5m_margin(ctx, generated):
    root, episodes = generated
    checked = 0
    for e in [e for e in episodes if e.info["kind"] == "distance"]:
        _, arrays, s, t = _window(root, e)
        seq = visit_sequence(rooms_of_frames(arrays["positions"][s:t]))
        ttype = e.info["answer"]["room_type"]
        reference = e.info["answer"]["reference"]
        if reference == "start":
            origin = np.array(e.start_position[:2])
        else:  # an anchor room named by its type: the only one of that type in the video
            assert sum(room_type(r) == room_type(reference) for r in set(seq)) == 1
            origin = sum(room_rect(reference)) / 2
        dist = {r: ctx.planner.geodesic_distance(origin, sum(room_rect(r)) / 2) for r in set(seq)
                if room_type(r) == ttype and r != reference}
        ranked = sorted(dist, key=dist.get)
        assert len(ranked) >= 2
        if e.info["answer"]["extreme"] == "closest":
            assert ranked[0] == e.info["target_room_id"]
            assert dist[ranked[1]] - dist[ranked[0]] >= 5.0
        else:
            assert ranked[-1] == e.info["target_room_id"]
            assert dist[ranked[-1]] - dist[ranked[-2]] >= 5.0
        checked += 1
    assert checked >= 3


def _extreme(rooms: list[int], d: np.ndarray, margin: float = 5.0) -> set[int]:
    """The benchmark's rule: candidates reach within ``margin`` of the farthest extent along ``d``;
    extreme if no room centred within their lateral extent lies farther along ``d``."""
    perp = np.array([-d[1], d[0]])

    def corners(r):
        lo, hi = room_rect(r)
        return np.array([[lo[0], lo[1]], [hi[0], lo[1]], [hi[0], hi[1]], [lo[0], hi[1]]])

    far = {r: (corners(r) @ d).max() for r in rooms}
    top = max(far.values())
    out = set()
    for r in rooms:
        lat = corners(r) @ perp
        c = sum(room_rect(r)) / 2
        if far[r] > top - margin and not any(
                q != r and lat.min() <= (sum(room_rect(q)) / 2) @ perp <= lat.max()
                and (sum(room_rect(q)) / 2) @ d > c @ d + 1e-9 for q in rooms):
            out.add(r)
    return out


def test_orientation_answers_recomputed_and_never_corner_rooms(generated):
    root, episodes = generated
    angle = {"ahead": 0.0, "left": math.pi / 2, "behind": math.pi, "right": -math.pi / 2}
    checked = 0
    for e in [e for e in episodes if e.info["kind"] == "orientation"]:
        _, arrays, s, t = _window(root, e)
        rooms = sorted(set(visit_sequence(rooms_of_frames(arrays["positions"][s:t]))))
        side = e.info["answer"]["side"]
        vec = lambda name: np.array([math.cos(e.start_yaw + angle[name]), math.sin(e.start_yaw + angle[name])])  # noqa: E731
        ext = _extreme(rooms, vec(side))
        ttype = e.info["answer"]["room_type"]
        assert [r for r in ext if room_type(r) == ttype] == [e.info["target_room_id"]]
        assert sum(room_type(r) == ttype for r in rooms) >= 2
        perpendicular = ("left", "right") if side in ("ahead", "behind") else ("ahead", "behind")
        for p in perpendicular:
            assert e.info["target_room_id"] not in _extreme(rooms, vec(p)), "corner room"
        checked += 1
    assert checked >= 1


def test_target_frames_show_the_target(ctx, generated):
    root, episodes = generated
    for e in episodes:
        _, arrays, s, t = _window(root, e)
        pos, yaws = arrays["positions"][s:t], arrays["yaws"][s:t]
        frames = np.array(e.info["target_frames"], dtype=int)
        assert len(frames) > 0 and frames.min() >= 0 and frames.max() < t - s
        if e.info["kind"] == "instance":
            obj = ctx.desc.object_by_id(e.info["target_object_id"])
            for f in frames:
                nearest = np.clip(pos[f], obj.bounds_min[:2], obj.bounds_max[:2])
                assert np.linalg.norm(nearest - pos[f]) <= 3.0 + 1e-9
                d = obj.position[:2] - pos[f]
                off = abs((math.atan2(d[1], d[0]) - yaws[f] + math.pi) % (2 * math.pi) - math.pi)
                assert off <= math.radians(45.0) + 1e-9
            assert e.goals[0].object_id == e.info["target_object_id"]
        else:
            lo, hi = room_rect(e.info["target_room_id"])
            inside = np.all((pos >= lo) & (pos <= hi), axis=1)
            strictly = np.all((pos > lo + 1e-9) & (pos < hi - 1e-9), axis=1)
            assert inside[frames].all()
            assert set(np.flatnonzero(strictly)) <= set(frames.tolist())
            for g in e.goals:  # R2O goals: every instance of the named category in the target room
                obj = ctx.desc.object_by_id(g.object_id)
                assert obj.category == e.info["answer"]["category"]
                assert np.all((obj.position[:2] >= lo) & (obj.position[:2] <= hi))


def test_instance_descriptions_are_unique_among_objects_seen_in_the_video(ctx, generated):
    root, episodes = generated
    eye = ctx.body.camera_height
    for e in [e for e in episodes if e.info["kind"] == "instance"][:4]:
        _, arrays, s, t = _window(root, e)
        pos, yaws = arrays["positions"][s:t], arrays["yaws"][s:t]
        seen = set()
        for o in ctx.desc.objects:
            c = o.position[:2]
            own = {o.instance_id} | {q.instance_id for q in ctx.desc.objects
                                     if np.all((c >= q.bounds_min[:2]) & (c <= q.bounds_max[:2]))}
            for p, yaw in zip(pos, yaws):
                d = c - p
                off = abs((math.atan2(d[1], d[0]) - yaw + math.pi) % (2 * math.pi) - math.pi)
                near = np.linalg.norm(np.clip(p, o.bounds_min[:2], o.bounds_max[:2]) - p) <= 3.0
                if near and off <= math.pi / 4 and not _segment_blocked(ctx.desc, p, c, own, eye):
                    seen.add(o.instance_id)
                    break
        target = ctx.desc.object_by_id(e.info["target_object_id"])
        keys = e.info["answer"]["description_keys"]
        assert target.instance_id in seen

        def sig(o):
            room = int(o.position[0] // ROOM_W) + len(LAYOUT[0]) * int(o.position[1] // ROOM_D)
            return (o.category,) + tuple(o.attributes.get("color") if k == "color" else room_type(room) for k in keys)

        assert [i for i in seen if sig(ctx.desc.object_by_id(i)) == sig(target)] == [target.instance_id]


def test_instructions_pass_the_verifier(ctx, generated):
    from vlnverse.tasks.instructions.synthesizer import TEMPLATES
    from vlnverse.tasks.instructions.verifier import Verifier

    assert len(TEMPLATES.get("video_contextualized")) >= 30
    verifier = Verifier(ctx.maps.scene_graph)
    _, episodes = generated
    for e in episodes:
        assert verifier.check(grounded(e)) == [], e.instructions[0].text
        rooms = [m for m in grounded(e).mentions if m.kind == "room" and m.room_id == e.info["target_room_id"]]
        if e.info["kind"] != "instance" and e.info["answer"].get("relation") not in ("next", "previous") \
                and e.info["answer"].get("subclass") != "entry":  # "the room right after ..." names no type
            assert rooms, "R2O instructions name the target room's type"


def test_video_frames_are_the_renderer_at_the_tour_poses(generated):
    root, episodes = generated
    frames, arrays = load_prior_video(root / episodes[0].info["video"])
    assert frames.dtype == np.uint8 and frames.shape == (len(arrays["positions"]), FRAME, FRAME, 3)
    expected = np.stack([pose_renderer(x, y, yaw) for (x, y), yaw in zip(arrays["positions"], arrays["yaws"])])
    assert np.array_equal(frames, expected)
    assert (root / episodes[0].info["video"]).with_suffix(".gif").is_file()


def test_tour_visits_every_room_along_navigable_steps(ctx):
    tour = plan_tour(ctx.desc, ctx.planner, ctx.maps.navigable, start_room=0, spacing=0.5)
    assert set(tour.room_order) == {r.room_id for r in ctx.desc.rooms}
    assert set(rooms_of_frames(tour.positions)) - {-1} == {r.room_id for r in ctx.desc.rooms}
    steps = np.linalg.norm(np.diff(tour.positions, axis=0), axis=1)
    assert steps.max() <= 0.5 + 1e-9
    assert ctx.maps.navigable.is_free(tour.positions).all()
    moving = np.flatnonzero(steps > 1e-9)
    heading = np.arctan2(*np.diff(tour.positions, axis=0)[moving][:, ::-1].T)
    # a frame reached by a step looks along that step
    assert np.allclose(np.cos(heading - tour.yaws[moving + 1]), 1.0, atol=1e-6), "yaw follows the motion"
    # at each stop the camera turns once around in 45 degree steps
    still = np.flatnonzero(steps <= 1e-9)
    turn = np.abs((np.diff(tour.yaws)[still] + math.pi) % (2 * math.pi) - math.pi)
    assert np.allclose(turn, math.pi / 4)


def test_same_seed_gives_identical_episodes_and_videos(ctx, generated, tmp_path):
    root, episodes = generated
    again = _task(tmp_path).generate(ctx, np.random.default_rng(3), 40, "val_unseen")
    assert [e.to_dict() for e in again] == [e.to_dict() for e in episodes]
    name = episodes[0].info["video"]
    assert (tmp_path / name).read_bytes() == (root / name).read_bytes()


def test_needs_a_renderer(ctx, tmp_path):
    import dataclasses

    blind = dataclasses.replace(ctx, renderer=None)
    with pytest.raises(ConfigError, match="renderer"):
        _task(tmp_path).generate(blind, np.random.default_rng(0), 2, "train")


def test_bad_params_name_the_field(tmp_path):
    with pytest.raises(ConfigError, match=r"params\.kinds"):
        _task(tmp_path, kinds=["instance", "colour"])


# -------------------------------------------------------------------- ambiguity rules, hand-built

TYPES = {1: "bedroom", 2: "kitchen", 3: "bedroom", 4: "bathroom", 5: "bathroom", 6: "hallway", 7: "bedroom"}


def _visits(rooms: list[int]) -> list[RoomVisit]:
    return [RoomVisit(r, 10 * i, 10 * i + 10) for i, r in enumerate(rooms)]


def test_count_rejects_a_revisited_earlier_room():
    # bedroom 1, kitchen, bedroom 3, bedroom 1 again: "the second bedroom" is ambiguous (1 came back).
    answers = {(a.room_id, a.details["ordinal"]) for a in count_answers(_visits([1, 2, 3, 1]), TYPES)}
    assert (3, 2) not in answers and (1, 1) in answers
    clean = {(a.room_id, a.details["ordinal"]) for a in count_answers(_visits([1, 2, 3, 7]), TYPES)}
    assert clean == {(1, 1), (3, 2), (7, 3)}
    assert count_answers(_visits([1, 2, 4]), TYPES) == []  # no distractor of the same type


def test_order_needs_a_single_visit_anchor_and_one_room_on_that_side():
    after = {(a.room_id, a.details["relation"]) for a in order_answers(_visits([1, 2, 3, 4]), TYPES)
             if a.details["anchor_room_id"] == 2}
    assert after == {(3, "after"), (1, "before"), (3, "next"), (1, "previous")}
    # The kitchen seen twice is no anchor.
    assert not [a for a in order_answers(_visits([1, 2, 3, 2, 4]), TYPES) if a.details["anchor_room_id"] == 2]
    # Two bedrooms after the kitchen: "the bedroom after the kitchen" is ambiguous.
    amb = [a for a in order_answers(_visits([1, 2, 3, 7]), TYPES)
           if a.details["anchor_room_id"] == 2 and a.details["relation"] == "after"]
    assert amb == []


def test_distance_needs_a_5m_margin():
    near = {4: 3.0, 5: 7.9}
    assert distance_answers([4, 5], TYPES, near) == []
    far = {4: 3.0, 5: 8.0}
    got = {(a.room_id, a.details["extreme"]) for a in distance_answers([4, 5], TYPES, far)}
    assert got == {(4, "closest"), (5, "farthest")}
    assert distance_answers([4], TYPES, {4: 1.0}) == []


def _rect(i, j):
    return np.array([[i * 5.0, j * 4.0], [(i + 1) * 5.0, j * 4.0], [(i + 1) * 5.0, (j + 1) * 4.0], [i * 5.0, (j + 1) * 4.0]])


def test_orientation_rejects_corner_rooms():
    # Rooms on a 3x2 grid; facing +x, "left" is +y (top row). Agent-independent geometry.
    polys = {10: _rect(0, 1), 11: _rect(1, 1), 12: _rect(2, 1), 13: _rect(0, 0), 14: _rect(1, 0), 15: _rect(2, 0)}
    types = {10: "kitchen", 11: "bedroom", 12: "office", 13: "bedroom", 14: "bathroom", 15: "office"}
    got = {(a.room_id, a.details["side"]) for a in orientation_answers(polys, types, yaw=0.0)}
    assert (11, "left") in got              # top middle: leftmost bedroom, not a corner
    assert (13, "right") not in got         # bottom-left corner (also "behind"-most)
    corner = {**types, 11: "kitchen", 10: "bedroom"}  # the only top-row bedroom is now a corner
    got = {(a.room_id, a.details["side"]) for a in orientation_answers(polys, corner, yaw=0.0)}
    assert not any(r == 10 for r, _ in got)


def test_line_of_sight_and_visibility_on_a_grid():
    blocked = np.zeros((40, 40), bool)
    blocked[:, 20] = True  # a wall at x in [1.0, 1.05)
    origin, res = np.zeros(2), 0.05
    starts = np.array([[0.5, 0.5], [0.5, 0.5]])
    ends = np.array([[0.9, 1.5], [1.5, 0.5]])
    assert line_of_sight(blocked, origin, res, starts, ends).tolist() == [True, False]
    # An object standing against the wall's near side is visible; behind it, not; out of range, not.
    bmin = np.array([[0.7, 0.4, 0.0], [1.2, 0.4, 0.0], [0.7, 1.9, 0.0]])
    bmax = np.array([[0.9, 0.6, 1.0], [1.4, 0.6, 1.0], [0.9, 1.99, 1.0]])
    vis = object_visibility(blocked, origin, res, np.array([[0.2, 0.5]]), bmin, bmax, max_range=1.2)
    assert vis.tolist() == [[True, False, False]]
    # Facing away (yaw = pi) with a 90 degree field of view hides the first object.
    vis = object_visibility(blocked, origin, res, np.array([[0.2, 0.5]]), bmin, bmax, max_range=1.2,
                            yaws=np.array([math.pi]), hfov_deg=90.0)
    assert vis.tolist() == [[False, False, False]]


def test_kind_quotas_follow_the_weights():
    from vlnverse.tasks.types.video_contextualized.generator import kind_quotas

    assert kind_quotas(40, dict.fromkeys(["instance", "count", "order", "distance", "orientation"], 1.0)) == \
        dict.fromkeys(["instance", "count", "order", "distance", "orientation"], 8)
    assert kind_quotas(7, {"count": 2.0, "order": 1.0}) == {"count": 5, "order": 2}   # 4.67 / 2.33
    assert kind_quotas(3, {"count": 1.0, "order": 0.0}) == {"count": 3, "order": 0}


def test_default_mix_is_balanced_and_reported(generated):
    _, episodes = generated
    counts = {k: sum(e.info["kind"] == k for e in episodes) for k in ("instance", "count", "order", "distance",
                                                                         "orientation")}
    assert counts == dict.fromkeys(counts, 8), counts   # 40 episodes, five kinds, the scene allows all


def test_kind_mix_from_the_config(ctx, tmp_path):
    task = _task(tmp_path, kind_mix={"count": 3, "order": 1, "instance": 0, "distance": 0, "orientation": 0})
    episodes = task.generate(ctx, np.random.default_rng(5), 8, "val_unseen")
    kinds = [e.info["kind"] for e in episodes]
    assert {k: kinds.count(k) for k in set(kinds)} == {"count": 6, "order": 2}
    assert task.achieved_mix == {"count": 6, "order": 2}
    with pytest.raises(ConfigError, match=r"params.kind_mix: got \{'nope': 1\}"):
        _task(tmp_path, kind_mix={"nope": 1})
