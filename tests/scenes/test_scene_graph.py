"""Scene-graph relations on a hand-built two-room home, and the JSON export read back by networkx."""
from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pytest

from vlnverse.core.errors import ConfigError
from vlnverse.scenes.description import Door, Geom, Room, SceneDescription, SceneObject
from vlnverse.scenes.scene_graph import SceneGraph, build_scene_graph


def _box_geom(lo, hi, label, iid):
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    t = np.eye(4)
    t[:3, 3] = (lo + hi) / 2
    return Geom("box", t, (hi - lo) / 2, label=label, instance_id=iid)


def _add(desc, iid, category, *boxes, movable=False):
    """Add an object made of axis-aligned boxes given as (lo, hi) corner pairs."""
    start = len(desc.geoms)
    desc.geoms.extend(_box_geom(lo, hi, category, iid) for lo, hi in boxes)
    lo = np.min([b[0] for b in boxes], axis=0)
    hi = np.max([b[1] for b in boxes], axis=0)
    desc.objects.append(SceneObject(iid, category, f"/World/Objects/{category}_{iid}", lo, hi,
                                    geom_indices=list(range(start, len(desc.geoms))), movable=movable,
                                    attributes={"color": "red"} if category == "cup" else {}))


@pytest.fixture(scope="module")
def home():
    """Living room x in [0, 2.95], bedroom x in [3.05, 6] (y in [0, 3]), one door at (3, 1.5)."""
    desc = SceneDescription(
        "graph_home", floor_z=0.0,
        rooms=[Room(0, "living_room", [[0, 0], [2.95, 0], [2.95, 3], [0, 3]]),
               Room(1, "bedroom", [[3.05, 0], [6, 0], [6, 3], [3.05, 3]])],
        doors=[Door(7, (0, 1), (3.0, 1.5), 1.0, axis="y")])
    desc.geoms.append(_box_geom((0, 0, -0.1), (6, 3, 0), "floor", 1))
    legs = [((x, y, 0), (x + 0.05, y + 0.05, 0.73)) for x in (0.5, 1.45) for y in (1.1, 1.85)]
    _add(desc, 10, "table", ((0.5, 1.1, 0.73), (1.5, 1.9, 0.75)), *legs)   # top at 0.75
    _add(desc, 11, "cup", ((1.06, 1.56, 0.75), (1.14, 1.64, 0.85)), movable=True)
    _add(desc, 12, "chair", ((0.3, 0.1, 0.0), (0.7, 0.5, 0.9)))
    _add(desc, 13, "chair", ((0.9, 0.1, 0.0), (1.3, 0.5, 0.9)))            # 0.2 m from chair 12
    _add(desc, 14, "plant", ((2.5, 2.6, 0.0), (2.8, 2.9, 1.2)))            # > 1 m from everything
    _add(desc, 15, "tray", ((1.2, 1.2, 0.75), (1.45, 1.45, 0.77)), movable=True)
    _add(desc, 16, "cup", ((1.3, 1.3, 0.77), (1.36, 1.36, 0.87)), movable=True)  # touches tray AND table
    _add(desc, 20, "bed", ((4.5, 1.0, 0.0), (5.9, 2.9, 0.6)))
    _add(desc, 21, "shelf", ((3.3, 0.2, 0.38), (3.9, 0.5, 0.40)), ((3.3, 0.2, 0.98), (3.9, 0.5, 1.0)),
         ((3.3, 0.2, 0.0), (3.32, 0.5, 1.0)))                              # boards at 0.40 and 1.00
    _add(desc, 22, "book", ((3.5, 0.3, 0.40), (3.55, 0.45, 0.62)), movable=True)
    _add(desc, 23, "wall", ((3.0, 0.0, 0.0), (3.05, 1.0, 2.7)))            # structure: not a node
    return desc


def rels(graph, iid):
    return set(graph.relations(iid))


def test_on_relations(home):
    g = build_scene_graph(home)
    assert ("on", "obj:10") in rels(g, 11)          # cup on table
    assert ("on", "obj:15") in rels(g, 16)          # highest support: the tray, not the table below it
    assert ("on", "obj:10") not in rels(g, 16)
    assert ("on", "obj:21") in rels(g, 22)          # book on the lower shelf board (top 0.40)
    assert not any(r == "on" for r, _ in rels(g, 12))  # chairs stand on the floor
    edge = [d for _, v, d in g.graph.out_edges("obj:22", data=True) if d["relation"] == "on"][0]
    assert edge["height"] == pytest.approx(0.40)


def test_in_near_next_to(home):
    g = build_scene_graph(home)
    assert [g.room_of(i) for i in (10, 11, 12, 14, 20, 21, 22)] == [0, 0, 0, 0, 1, 1, 1]
    assert {o["instance_id"] for o in g.objects_in_room(0)} == {10, 11, 12, 13, 14, 15, 16}
    assert g.categories_in_room(1) == {"bed", "shelf", "book"}
    # chairs 0.2 m apart, both on the floor: next_to (and near), both ways
    assert {("next_to", "obj:13"), ("near", "obj:13")} <= rels(g, 12)
    assert {("next_to", "obj:12"), ("near", "obj:12")} <= rels(g, 13)
    # chair 12 to table: gap 0.6 m in y -> near, not next_to (the table is not within 0.3 m)
    assert ("near", "obj:10") in rels(g, 12) and ("next_to", "obj:10") not in rels(g, 12)
    # the plant is > 1 m from everything in its room: only `in`
    assert rels(g, 14) == {("in", "room:0")}
    # objects in different rooms are never near: book (bedroom) vs plant (living room, 0.5 m gap in x)
    assert ("near", "obj:14") not in rels(g, 22)
    # a cup on the table is not also `near` it
    assert ("near", "obj:10") not in rels(g, 11)
    assert "obj:23" not in g.graph  # walls are structure


def test_rooms_adjacent_through_the_door(home):
    g = build_scene_graph(home)
    edges = [d for _, v, d in g.graph.out_edges("room:0", data=True) if v == "room:1"]
    assert len(edges) == 1 and edges[0]["relation"] == "adjacent" and edges[0]["door_id"] == 7
    assert edges[0]["door_center"] == [3.0, 1.5]
    assert g.graph.has_edge("room:1", "room:0")
    rooms = g.rooms()
    assert [r["room_type"] for r in rooms] == ["living_room", "bedroom"]
    assert rooms[0]["area"] == pytest.approx(2.95 * 3)


def test_json_round_trip_through_networkx(home, tmp_path):
    g = build_scene_graph(home)
    path = g.save(tmp_path / "scene_graph.json")
    data = json.loads(path.read_text())
    assert data["graph"]["version"] == 1 and data["graph"]["scene_id"] == "graph_home"
    try:
        raw = nx.node_link_graph(data, edges="links")
    except TypeError:  # networkx < 3.4
        raw = nx.node_link_graph(data)
    assert isinstance(raw, nx.MultiDiGraph)
    assert raw.number_of_nodes() == g.graph.number_of_nodes() == 2 + 10  # rooms + objects (the wall is structure)
    assert raw.number_of_edges() == g.graph.number_of_edges()
    assert raw.nodes["obj:11"]["category"] == "cup" and raw.nodes["obj:11"]["attributes"] == {"color": "red"}
    back = SceneGraph.load(path)
    assert back.relations(11) == g.relations(11) and back.edge_counts() == g.edge_counts()
    assert back.to_json() == g.to_json()
    (tmp_path / "bad.json").write_text('{"graph": {"version": 99}}')
    with pytest.raises(ConfigError, match=r"bad.json: graph.version: got 99"):
        SceneGraph.load(tmp_path / "bad.json")


def test_scene_without_rooms_gets_inferred_room_nodes(home):
    """Same home with rooms and doors removed: rooms come from the inferred room map."""
    import dataclasses

    from vlnverse.scenes.maps import compute_scene_maps

    bare = dataclasses.replace(home, rooms=[], doors=[], geoms=list(home.geoms))
    # the home fixture has no walls between the rooms: add the wall at x = 3 with its 1 m door
    bare.geoms += [_box_geom((2.95, 0.0, 0.0), (3.05, 1.0, 2.7), "wall", 90),
                   _box_geom((2.95, 2.0, 0.0), (3.05, 3.0, 2.7), "wall", 90)]
    with pytest.warns(UserWarning, match="inferred 2 room"):
        maps = compute_scene_maps(bare, "r2r_ce", cache=False)
    g = maps.scene_graph
    rooms = g.rooms()
    assert all(r["inferred"] for r in rooms)
    left = g.room_of(10)                          # the table (its centre sits on occupied cells)
    right = g.room_of(20)                         # the bed
    # typed by their objects: the bed's room is a bedroom; the table-and-cup room stays a "room"
    types = {r["room_id"]: r["room_type"] for r in rooms}
    assert types[right] == "bedroom" and types[left] == "room"
    assert {left, right} == {0, 1} and g.room_of(12) == left and g.room_of(22) == right
    edges = [d for _, v, d in g.graph.out_edges(f"room:{left}", data=True) if v == f"room:{right}"]
    assert len(edges) == 1 and edges[0]["relation"] == "adjacent"
    np.testing.assert_allclose(edges[0]["door_center"], [3.0, 1.5], atol=0.05)
    assert edges[0]["door_width"] == pytest.approx(1.0, abs=0.05)
