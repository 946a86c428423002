"""Navigation graphs on a hand-built two-room map with one door."""
from __future__ import annotations

import numpy as np
import pytest

from vlnverse.scenes.description import Door, Room
from vlnverse.scenes.occupancy import FREE, OCCUPIED, OccupancyMap
from vlnverse.tasks.navgraph import NavGraph, build_navgraph
from vlnverse.tasks.pathing import PathPlanner

RES = 0.05


def two_rooms():
    """8 m × 4 m floor, wall at x = 4 m with a 0.9 m door centred at y = 3.0 m."""
    g = np.zeros((80, 160), np.uint8)
    g[0, :] = g[-1, :] = OCCUPIED
    g[:, 0] = g[:, -1] = OCCUPIED
    g[:, 79:81] = OCCUPIED
    g[51:69, 79:81] = FREE  # y in [2.55, 3.45)
    navigable = OccupancyMap(g, RES, np.zeros(2)).dilate(0.18)
    rooms = [Room(0, "bedroom", [[0, 0], [4, 0], [4, 4], [0, 4]]), Room(1, "kitchen", [[4, 0], [8, 0], [8, 4], [4, 4]])]
    doors = [Door(0, (0, 1), (4.0, 3.0), 0.9, axis="y")]
    planner = PathPlanner(navigable)
    cols = np.arange(g.shape[1])[None, :].repeat(g.shape[0], 0)
    room_map = np.where(planner.free, np.where(cols < 80, 0, 1), -1).astype(np.int32)
    return planner, rooms, doors, room_map


@pytest.fixture(scope="module")
def scene():
    planner, rooms, doors, room_map = two_rooms()
    return planner, rooms, doors, room_map, build_navgraph(planner, rooms=rooms, doors=doors, room_map=room_map, seed=3)


def test_graph_is_connected_with_collision_free_short_edges(scene):
    planner, _, _, _, nav = scene
    assert nav.is_connected()
    pos = nav.positions()
    assert np.all(planner.is_navigable(pos))
    u, v = np.array(list(nav.graph.edges)).T
    a, b = pos[u], pos[v]  # node ids are 0..N-1
    assert np.all(planner.segments_free(a, b))
    lengths = np.linalg.norm(a - b, axis=1)
    assert lengths.max() <= 3.0 + 1e-9
    np.testing.assert_allclose([nav.graph.edges[e]["weight"] for e in zip(u, v)], lengths)


def test_viewpoints_cover_rooms_and_door(scene):
    _, _, _, _, nav = scene
    kinds = [d["kind"] for _, d in nav.graph.nodes(data=True)]
    assert kinds.count("door") == 1 and kinds.count("room") == 2
    door = [n for n, d in nav.graph.nodes(data=True) if d["kind"] == "door"][0]
    np.testing.assert_allclose(nav.graph.nodes[door]["position"], [4.0, 3.0], atol=RES)
    assert {d["room_id"] for _, d in nav.graph.nodes(data=True)} >= {0, 1}
    # Poisson spacing: grid viewpoints are at least 1.5 m from each other.
    grid = nav.positions()[[d["kind"] == "grid" for _, d in sorted(nav.graph.nodes(data=True))]]
    gaps = np.linalg.norm(grid[:, None] - grid[None], axis=2) + np.eye(len(grid)) * 99
    assert gaps.min() >= 1.5 - 1e-9


def test_route_between_rooms_passes_the_door(scene):
    planner, _, _, _, nav = scene
    a, b = nav.nearest_node([1.0, 0.6]), nav.nearest_node([7.0, 0.6])
    route = nav.path_positions(nav.shortest_path(a, b))
    assert np.any(np.linalg.norm(route - [4.0, 3.0], axis=1) < 0.5)
    assert nav.path_length(nav.shortest_path(a, b)) >= planner.shortest_path(route[0], route[-1]).length - 1e-9


def test_separate_regions_stay_separate_and_a_pinched_corridor_is_bridged():
    # Two rooms with no door: two components, no edge through the wall.
    g = np.zeros((40, 80), np.uint8)
    g[:, 39:41] = OCCUPIED
    nav = build_navgraph(PathPlanner(OccupancyMap(g, RES, np.zeros(2))), seed=0)
    assert not nav.is_connected()
    xs = nav.positions()[:, 0]
    for u, v in nav.graph.edges:
        assert (xs[u] < 2.0) == (xs[v] < 2.0)
    # A long, 1-cell-wide zig-zag corridor between two open areas is bridged: connected again.
    g = np.full((60, 60), OCCUPIED, np.uint8)
    g[:, :10] = FREE
    g[:, 50:] = FREE
    g[30, 10:30] = FREE
    g[10:31, 30] = FREE
    g[10, 30:50] = FREE
    planner = PathPlanner(OccupancyMap(g, RES, np.zeros(2)))
    nav = build_navgraph(planner, spacing=1.5, max_edge=3.0, seed=1)
    assert nav.is_connected()
    assert any(d["kind"] == "bridge" for _, d in nav.graph.nodes(data=True))
    u, v = np.array(list(nav.graph.edges)).T
    assert np.all(planner.segments_free(nav.positions()[u], nav.positions()[v]))


def test_json_round_trip_and_determinism(scene, tmp_path):
    planner, rooms, doors, room_map, nav = scene
    path = nav.save(tmp_path / "nav.json")
    back = NavGraph.load(path)
    assert back.to_json() == nav.to_json()
    again = build_navgraph(planner, rooms=rooms, doors=doors, room_map=room_map, seed=3)
    assert again.to_json() == nav.to_json()
    other = build_navgraph(planner, rooms=rooms, doors=doors, room_map=room_map, seed=4)
    assert other.to_json() != nav.to_json()


def test_load_rejects_bad_files(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": 1, "nodes": [{"id": 0, "position": [1, 2, 3], "kind": "grid"}], "edges": []}')
    with pytest.raises(Exception, match=r"bad.json: nodes\[0\].position"):
        NavGraph.load(bad)
    bad.write_text("{not json")
    with pytest.raises(Exception, match="bad.json:1: malformed JSON"):
        NavGraph.load(bad)
