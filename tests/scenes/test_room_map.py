"""Room maps on a hand-built two-room scene: polygon labels, the door split, inferred rooms."""
from __future__ import annotations

import numpy as np
import pytest

from vlnverse.scenes.description import Door, Geom, Room, SceneDescription
from vlnverse.scenes.occupancy import FREE, build_occupancy_map
from vlnverse.scenes.room_map import NO_ROOM, build_room_map, room_at


def _box(cx, cy, cz, hx, hy, hz, label="wall"):
    t = np.eye(4)
    t[:3, 3] = (cx, cy, cz)
    return Geom("box", t, (hx, hy, hz), label=label)


def two_rooms(with_rooms=True):
    """Floor 6 x 3 m; a wall at x = 3 (0.1 m thick) with a 1 m door at y in [1, 2].

    Room 0 (living room) is x in [0, 2.95], room 1 (bedroom) x in [3.05, 6].
    """
    geoms = [_box(3.0, 1.5, -0.05, 3.0, 1.5, 0.05, label="floor"),
             _box(3.0, 0.5, 1.35, 0.05, 0.5, 1.35),   # wall y in [0, 1]
             _box(3.0, 2.5, 1.35, 0.05, 0.5, 1.35)]   # wall y in [2, 3]
    rooms = [Room(0, "living_room", [[0, 0], [2.95, 0], [2.95, 3], [0, 3]]),
             Room(1, "bedroom", [[3.05, 0], [6, 0], [6, 3], [3.05, 3]])] if with_rooms else []
    doors = [Door(0, (0, 1), (3.0, 1.5), 1.0, axis="y")] if with_rooms else []
    return SceneDescription("two_rooms", geoms=geoms, rooms=rooms, doors=doors, source_path="two_rooms.usda")


def test_points_in_each_room_get_its_id():
    desc = two_rooms()
    occ = build_occupancy_map(desc)
    rm = build_room_map(desc, occ)
    assert rm.dtype == np.int32 and rm.shape == occ.shape
    pts = np.array([[1.0, 1.0], [2.5, 2.8], [4.0, 0.5], [5.9, 2.9], [3.0, 0.5], [-0.5, 1.0]])
    # living, living, bedroom, bedroom, inside the wall (-1), outside the floor (-1)
    assert room_at(rm, occ, pts).tolist() == [0, 0, 1, 1, NO_ROOM, NO_ROOM]
    # every free cell is labelled, nothing else is
    np.testing.assert_array_equal(rm != NO_ROOM, occ.grid == FREE)


def test_door_opening_is_split_down_the_middle():
    desc = two_rooms()
    occ = build_occupancy_map(desc)
    rm = build_room_map(desc, occ)
    # door cells have centres x = 2.975, 3.025 (inside no polygon): nearest labelled cell decides
    assert room_at(rm, occ, np.array([[2.975, 1.5], [3.025, 1.5]])).tolist() == [0, 1]


def test_room_map_on_the_dilated_map():
    desc = two_rooms()
    nav = build_occupancy_map(desc).dilate(0.2)
    rm = build_room_map(desc, nav)
    np.testing.assert_array_equal(rm != NO_ROOM, nav.grid == FREE)
    assert room_at(rm, nav, np.array([[1.5, 1.5], [4.5, 1.5], [0.1, 1.5]])).tolist() == [0, 1, NO_ROOM]


def test_rooms_are_inferred_with_a_warning_when_none_are_recorded():
    desc = two_rooms(with_rooms=False)
    occ = build_occupancy_map(desc)
    with pytest.warns(UserWarning, match=r"two_rooms.usda: no rooms recorded; inferred 2 room"):
        rm = build_room_map(desc, occ)
    left, right = room_at(rm, occ, np.array([[1.0, 1.5], [5.0, 1.5]]))
    assert left != right and {left, right} == {0, 1}
    np.testing.assert_array_equal(rm != NO_ROOM, occ.grid == FREE)
    # the regions meet in the door: everything left of the wall is one room, right the other
    rows, cols = np.nonzero(rm >= 0)
    xs = occ.cell_to_world(np.stack([rows, cols], axis=1))[:, 0]
    assert (rm[rows[xs < 2.9], cols[xs < 2.9]] == left).all()
    assert (rm[rows[xs > 3.1], cols[xs > 3.1]] == right).all()


@pytest.mark.parametrize("seed", [0, 7])
def test_generated_home_every_room_reachable_on_the_navigable_map(seed):
    """Default agent (r2r_ce): each room has navigable cells, all in one 8-connected component."""
    from scipy import ndimage

    from vlnverse.scenes.maps import compute_scene_maps
    from vlnverse.scenes.procgen import generate_home

    desc = generate_home(seed)
    maps = compute_scene_maps(desc, "r2r_ce", cache=False)
    nav = maps.navigable.grid == FREE
    labels, _ = ndimage.label(nav, structure=np.ones((3, 3)))
    main = np.bincount(labels[nav]).argmax()
    for room in desc.rooms:
        in_room = nav & (maps.room_map == room.room_id)
        assert in_room.sum() * 0.05 ** 2 > 0.5, f"room {room.room_id} ({room.room_type}) has no navigable space"
        assert (labels[in_room] == main).any(), f"room {room.room_id} ({room.room_type}) unreachable"
    # the room map covers every navigable cell of a generated home
    assert (maps.room_map[nav] >= 0).all()
