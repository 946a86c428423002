"""Instruction language version 2 (issue 57): references unique from where they are said, the
route Verifier's rejections, the template partition and the fine-grained generator's output."""
from __future__ import annotations

import hashlib
import re
from dataclasses import replace

import networkx as nx
import numpy as np
import pytest

from vlnverse.scenes.scene_graph import SceneGraph
from vlnverse.tasks.instructions import GroundedInstruction, Lexicon, Mention
from vlnverse.tasks.instructions import route_language
from vlnverse.tasks.instructions.references import PathFrame, Referrer
from vlnverse.tasks.instructions.route_v2 import RouteSynthesizerV2
from vlnverse.tasks.instructions.route_verifier import RouteVerifier
from vlnverse.tasks.instructions.types import RouteEvent, RouteFacts


def _obj(iid, category, lo, hi, room, **attrs):
    lo, hi = np.array(lo, float), np.array(hi, float)
    return (f"obj:{iid}", dict(kind="object", instance_id=iid, category=category, bounds_min=lo.tolist(),
                               bounds_max=hi.tolist(), position=((lo + hi) / 2).tolist(), attributes=attrs,
                               room_id=room))


def _graph(objects, edges, rooms=((0, "living_room"), (1, "hallway"), (2, "bedroom")), adjacent=((0, 1), (1, 2))):
    g = nx.MultiDiGraph(scene_id="constructed")
    for rid, rtype in rooms:
        g.add_node(f"room:{rid}", kind="room", room_id=rid, room_type=rtype)
    for node, attrs in objects:
        g.add_node(node, **attrs)
        g.add_edge(node, f"room:{attrs['room_id']}", relation="in")
    for u, v, rel in edges:
        g.add_edge(u, v, relation=rel)
        if rel in ("near", "next_to"):
            g.add_edge(v, u, relation=rel)
    for a, b in adjacent:
        g.add_edge(f"room:{a}", f"room:{b}", relation="adjacent")
        g.add_edge(f"room:{b}", f"room:{a}", relation="adjacent")
    return SceneGraph(g)


# A living room (x in [0, 6]) with two armchairs of different colours, a hallway and a bedroom.
COLOURED = [_obj(1, "armchair", [1, 1, 0], [2, 2, 1], 0, color="red", material="fabric"),
            _obj(2, "armchair", [4, 1, 0], [5, 2, 1], 0, color="blue", material="fabric"),
            _obj(3, "sofa", [1, 4, 0], [3, 5, 1], 0, color="gray")]
# The same room with two identical armchairs, one next to the only floor lamp.
IDENTICAL = [_obj(1, "armchair", [1, 1, 0], [2, 2, 1], 0, color="red", material="fabric"),
             _obj(2, "armchair", [4, 1, 0], [5, 2, 1], 0, color="red", material="fabric"),
             _obj(4, "floor_lamp", [5.1, 1, 0], [5.4, 1.3, 1.6], 0, color="black")]
# No attributes at all (a third-party stage) and no relations: only an ordinal along a path can help.
BARE = [_obj(1, "armchair", [1, 0.5, 0], [2, 1.5, 1], 0), _obj(2, "armchair", [4, 0.5, 0], [5, 1.5, 1], 0),
        _obj(5, "armchair", [2.5, 3.5, 0], [3.5, 4.5, 1], 0)]


def test_two_armchairs_of_different_colours_are_told_apart_by_colour():
    ref = Referrer(_graph(COLOURED, []))
    for iid, colour in ((1, "red"), (2, "blue")):
        r = ref.refer(iid)
        assert (r.needs, r.attributes) == ("attribute", ("color",))
        assert r.obj.attribute_dict["color"] == colour
        assert ref.resolve_object("armchair", 0, {"color": colour}) == [iid]
    assert ref.resolve_object("armchair", 0) == [1, 2]          # "the armchair" alone: two
    assert ref.refer(3).needs == "category"                      # the only sofa needs nothing


def test_two_identical_armchairs_are_told_apart_by_a_relation():
    ref = Referrer(_graph(IDENTICAL, [("obj:2", "obj:4", "next_to")]))
    r = ref.refer(2)
    assert r.needs == "relation" and r.relation.relation == "next_to" and r.relation.anchor.instance_id == 4
    assert ref.resolve_object("armchair", 0, {"color": "red"}, ("next_to", 4)) == [2]
    assert ref.refer(1) is None        # the other one has nothing of its own, and no path to count along


def test_without_attributes_references_fall_back_to_ordinals_or_are_dropped():
    ref = Referrer(_graph(BARE, []))
    path = PathFrame(np.column_stack([np.linspace(0, 6, 61), np.full(61, 2.5)]))   # y = 2.5, heading +x
    first, second = ref.refer(1, path=path), ref.refer(2, path=path)
    assert (first.needs, first.ordinal) == ("ordinal", (1, "right"))
    assert (second.needs, second.ordinal) == ("ordinal", (2, "right"))
    assert ref.refer(5, path=path).ordinal == (1, "left")
    assert ref.resolve_object("armchair", 0, ordinal=(2, "right"), path=path) == [2]
    assert ref.refer(1) is None                                   # no path: cannot be made unique
    # The synthesizer leaves such a landmark out and counts it.
    synth = RouteSynthesizerV2(ref)
    facts = RouteFacts(rooms=(), landmarks=(), length=6.0, events=(
        RouteEvent("start", 0.0, room=ref.view.room_ref(0)),
        RouteEvent("pass", 2.0, landmark=ref.view.object_ref(1)),
        RouteEvent("stop", 6.0, room=ref.view.room_ref(0))))
    out = synth.route(facts, np.array([[0.0, 3.0], [0.0, 6.0]]), np.random.default_rng(0))   # no side: dropped
    assert synth.dropped["ambiguous_landmark"] == 1 and out.references == ()


# Two rooms side by side (grid cells of 0.1 m): a living room x < 5 and a bedroom x > 5.2, the wall
# between them open at 1.5 <= y < 3.5 (a doorway). The path runs along y = 1 in the living room.
SIGHT_OBJECTS = [_obj(1, "armchair", [2, 3, 0], [3, 3.6, 1], 0, color="red", material="fabric"),
                 _obj(2, "armchair", [7, 2.2, 0], [8, 2.8, 1], 1, color="blue", material="fabric"),
                 _obj(3, "armchair", [7, 0.2, 0], [8, 0.8, 1], 1, color="red", material="fabric"),
                 _obj(4, "sofa", [1, 0.2, 0], [2, 0.6, 1], 0, color="gray"),
                 _obj(5, "table", [3.3, 1.15, 0], [3.7, 1.45, 0.7], 0, color="brown")]
SIGHT_PATH = np.column_stack([np.linspace(0, 4.8, 97), np.full(97, 1.0)])


def _sight_scene(objects=SIGHT_OBJECTS):
    from vlnverse.scenes.occupancy import OCCUPIED, OccupancyMap
    from vlnverse.tasks.instructions.references import Sightlines

    graph = _graph(objects, [], rooms=((0, "living_room"), (1, "bedroom")), adjacent=((0, 1),))
    occ = OccupancyMap(np.zeros((40, 100), np.uint8), 0.1, np.zeros(2))
    occ.grid[:15, 50:52] = OCCUPIED          # the wall, with the doorway at rows 15..34
    occ.grid[35:, 50:52] = OCCUPIED
    for _, o in objects:                      # furniture occupies its footprint
        (r0, c0), (r1, c1) = occ.world_to_cell(np.array([o["bounds_min"][:2], o["bounds_max"][:2]]))
        occ.grid[r0:r1, c0:c1] = OCCUPIED
    return graph, Sightlines(occ, graph)


def test_sightlines_see_through_the_doorway_and_past_furniture_but_not_through_walls():
    graph, sight = _sight_scene()
    objects = dict(SIGHT_OBJECTS)
    assert sight.occupancy.grid[12, 35] and not sight.wall[12, 35]     # the table's cells do not block
    assert sight.wall[5, 50] and not sight.wall[20, 50]                 # the wall, the doorway
    # From (2.5, 1) the lines to the blue armchair pass the table (furniture) and the doorway.
    assert sight.sees((2.5, 1.0), objects["obj:2"])
    assert not sight.clear((2.5, 1.0), (7.0, 0.8))            # crosses the wall at y = 0.89
    assert not sight.sees((2.5, 1.0), objects["obj:3"])        # the red one behind the wall
    assert not sight.sees((2.5, 0.2), objects["obj:2"])        # lines cross the wall at y < 1.5
    assert sight.clear((0.5, 2.5), (7.0, 2.5))                 # a clear line, but 6.5 m > VIEW_RADIUS
    assert not sight.sees((0.5, 2.5), objects["obj:2"])


def test_an_armchair_seen_through_the_doorway_makes_the_colour_needed():
    from vlnverse.tasks.instructions.references import Referrer

    graph, sight = _sight_scene()
    path = PathFrame(SIGHT_PATH)
    assert Referrer(graph).refer(1, path=path).needs == "category"        # alone in its room
    ref = Referrer(graph, sight)
    r = ref.refer(1, path=path)
    assert (r.needs, r.attributes, r.viewpoint, r.seen_rivals) == ("attribute", ("color",), (2.5, 1.0), 1)
    assert ref.scope_objects(0, "armchair", (2.5, 1.0)) == [1, 2]        # the red one in room 1: not in view
    assert ref.resolve_object("armchair", 0, viewpoint=(2.5, 1.0)) == [1, 2]
    assert ref.resolve_object("armchair", 0, {"color": "red"}, viewpoint=(2.5, 1.0)) == [1]
    assert ref.refer(4, path=path).needs == "category"                    # no other sofa anywhere
    # The Verifier: "the armchair" said at (2.5, 1) denotes two; "the red armchair" one.
    verifier = RouteVerifier(graph, referrer=ref)
    plain = Mention("object", (10, 22), category="armchair", instance_id=1, scope=0, viewpoint=(2.5, 1.0))
    assert [r for r, _ in verifier.reasons(_instruction("Walk past the armchair.", [plain]))] == \
        ["ambiguous_reference"]
    red = Mention("object", (10, 26), category="armchair", instance_id=1, scope=0, attributes=(("color", "red"),),
                  viewpoint=(2.5, 1.0))
    assert verifier.reasons(_instruction("Walk past the red armchair.", [red])) == []


def test_the_synthesizer_names_the_armchair_by_colour_and_the_describer_prefers_it():
    from vlnverse.tasks.instructions.references import Referrer
    from vlnverse.tasks.instructions.route_v2 import RouteDescriberV2

    graph, sight = _sight_scene()
    ref = Referrer(graph, sight)
    view = ref.view
    sofa, chair = view.object_ref(4), view.object_ref(1)
    facts = RouteFacts(rooms=(view.room_ref(0),), landmarks=(sofa, chair), length=4.8, events=(
        RouteEvent("start", 0.0, room=view.room_ref(0)), RouteEvent("pass", 1.5, landmark=sofa),
        RouteEvent("stop", 4.8, room=view.room_ref(0))))
    # Room counts alone tie (one sofa, one armchair): the pass stays on the sofa. In view of the
    # blue armchair, the red one has a rival and is preferred.
    assert RouteDescriberV2(graph).prefer_shared_landmarks(facts, SIGHT_PATH).events[1].landmark == sofa
    preferred = RouteDescriberV2(graph, referrer=ref).prefer_shared_landmarks(facts, SIGHT_PATH)
    assert [(e.kind, e.s, e.landmark) for e in preferred.events[1:2]] == [("pass", 2.5, chair)]
    synth = RouteSynthesizerV2(ref)
    verifier = RouteVerifier(graph, referrer=ref)
    for seed in range(5):
        out = synth.route(preferred, SIGHT_PATH, np.random.default_rng(seed))
        assert [{k: v for k, v in r.items() if k != "span"} for r in out.references] == \
            [{"instance_id": 1, "needs": "attribute", "seen_rivals": 1}]
        a, b = out.references[0]["span"]
        assert "red" in out.text[a:b].split(), out.text
        assert verifier.reasons(out, SIGHT_PATH) == []


def test_a_turn_or_the_stop_names_a_landmark_with_rivals_when_it_is_hardly_farther():
    """Turn at (2.5, 1) by the sofa (0.64 m; the table 0.81 m, the red armchair 2.0 m); stop at
    (4.8, 1) by the table (1.11 m; the armchair 2.69 m, the sofa 2.83 m). Only the armchair has a
    rival (the blue one in view)."""
    from vlnverse.tasks.instructions.references import Referrer
    from vlnverse.tasks.instructions.route_v2 import RouteDescriberV2

    graph, sight = _sight_scene()
    ref = Referrer(graph, sight)
    view = ref.view
    sofa, chair, table = (view.object_ref(i) for i in (4, 1, 5))
    facts = RouteFacts(rooms=(view.room_ref(0),), landmarks=(), length=4.8, events=(
        RouteEvent("start", 0.0, room=view.room_ref(0)), RouteEvent("turn", 2.5, direction="left", landmark=sofa),
        RouteEvent("stop", 4.8, room=view.room_ref(0), landmark=table)))

    def named(describer):
        return [e.landmark.instance_id for e in describer.prefer_shared_anchors(facts, SIGHT_PATH).events[1:]]

    assert named(RouteDescriberV2(graph, referrer=ref)) == [4, 5]      # the armchair is too far for either
    wide = RouteDescriberV2(graph, referrer=ref)
    wide.landmark_slack = 2.0                                           # 2.69 <= 1.11 + 2 and <= end_radius 3
    assert named(wide) == [4, 1]
    both = RouteDescriberV2(graph, referrer=ref, landmark_radius=2.5)
    both.landmark_slack = 1.5                                           # 2.0 <= 0.64 + 1.5: the turn takes it
    assert named(both) == [1, 5]
    by_room = RouteDescriberV2(graph, landmark_radius=2.5)               # no sightlines: room counts alone,
    by_room.landmark_slack = 1.5                                        # one of each, so the nearest stays
    assert named(by_room) == [4, 5]


def test_without_attributes_a_relation_tells_the_armchair_from_the_one_in_view():
    """A third-party stage: no attributes at all. The armchair next to the table is told apart from
    the one seen through the doorway by the relation, without it by an ordinal along the path; where
    the path has no side to count on, it is dropped and counted."""
    from vlnverse.tasks.instructions.references import Referrer

    bare = [(n, {**o, "attributes": {}}) for n, o in SIGHT_OBJECTS]
    graph, sight = _sight_scene(bare)
    graph_rel = _graph(bare, [("obj:1", "obj:5", "next_to")], rooms=((0, "living_room"), (1, "bedroom")),
                       adjacent=((0, 1),))
    path = PathFrame(SIGHT_PATH)
    r = Referrer(graph_rel, sight).refer(1, path=path)
    assert (r.needs, r.relation.relation, r.relation.anchor.instance_id, r.seen_rivals) == ("relation", "next_to", 5, 1)
    assert Referrer(graph_rel, sight).resolve_object("armchair", 0, relation=("next_to", 5),
                                                     viewpoint=(2.5, 1.0)) == [1]
    # Without the relation, an ordinal: the blue armchair in view is passed later on the same side.
    plain = Referrer(graph, sight)
    assert (plain.refer(1, path=path).needs, plain.refer(1, path=path).ordinal) == ("ordinal", (1, "left"))
    assert plain.resolve_object("armchair", 0, ordinal=(1, "left"), path=path, viewpoint=(2.5, 1.0)) == [1]
    assert plain.resolve_object("armchair", 0, ordinal=(2, "left"), path=path, viewpoint=(2.5, 1.0)) == [2]
    # Without a path (no side, no count) nothing tells them apart: the landmark is dropped and counted.
    assert plain.refer(1) is not None and plain.refer(1).needs == "category"   # no viewpoint: its room alone
    synth = RouteSynthesizerV2(plain)
    view = plain.view
    facts = RouteFacts(rooms=(view.room_ref(0),), landmarks=(), length=4.8, events=(
        RouteEvent("start", 0.0, room=view.room_ref(0)), RouteEvent("pass", 2.5, landmark=view.object_ref(1)),
        RouteEvent("stop", 4.8, room=view.room_ref(0))))
    out = synth.route(facts, SIGHT_PATH, np.random.default_rng(0))
    assert [r["needs"] for r in out.references] == ["ordinal"] and synth.dropped["ambiguous_landmark"] == 0
    ahead = np.column_stack([np.full(60, 2.5), np.linspace(1.0, 3.95, 60)])    # walking straight at it: no side
    out = synth.route(replace(facts, length=2.95), ahead, np.random.default_rng(0))
    assert out.references == () and synth.dropped["ambiguous_landmark"] == 1


# A lamp on the only nightstand of the living room, another lamp on a desk, and a second nightstand
# in the bedroom in view through the doorway from where the path (y = 1) passes the first lamp.
NIGHTSTANDS = [_obj(1, "lamp", [2.1, 3.1, 0.6], [2.4, 3.4, 1.0], 0),
               _obj(2, "nightstand", [2, 3, 0], [2.5, 3.5, 0.6], 0),
               _obj(3, "lamp", [3.5, 0.2, 0.8], [3.8, 0.5, 1.2], 0), _obj(4, "desk", [3.3, 0.1, 0], [4.2, 0.6, 0.8], 0),
               _obj(5, "nightstand", [7, 2.2, 0], [7.5, 2.7, 0.6], 1)]
NIGHTSTAND_EDGES = [("obj:1", "obj:2", "on"), ("obj:3", "obj:4", "on")]


def test_a_relation_anchor_must_itself_be_unique_from_where_it_is_said():
    """"The lamp on the nightstand" said at (2.25, 1) is ambiguous: the bedroom's nightstand is in
    view there. The lamp is then counted along the path instead; the lamp on the desk (the only
    desk in view) keeps its relation. Without sightlines the room alone is the scope."""
    graph, sight = _sight_scene(NIGHTSTANDS)
    graph = _graph(NIGHTSTANDS, NIGHTSTAND_EDGES, rooms=((0, "living_room"), (1, "bedroom")), adjacent=((0, 1),))
    path = PathFrame(SIGHT_PATH)
    assert Referrer(graph).refer(1, path=path).relation.anchor.instance_id == 2      # room alone: fine
    ref = Referrer(graph, sight)
    assert ref.scope_objects(0, "nightstand", (2.25, 1.0)) == [2, 5]
    r = ref.refer(1, path=path)
    assert (r.needs, r.relation, r.ordinal, r.viewpoint) == ("ordinal", None, (1, "left"), (2.25, 1.0))
    desk = ref.refer(3, path=path)
    assert (desk.needs, desk.relation.relation, desk.relation.anchor.instance_id) == ("relation", "on", 4)
    # The Verifier: the anchor mention is checked from the same viewpoint (two nightstands), and
    # the relation resolves by the anchor's category in that scope.
    verifier = RouteVerifier(graph, referrer=ref)
    text = "Walk past the lamp on the nightstand."
    lamp = Mention("object", (10, 18), category="lamp", instance_id=1, scope=0, viewpoint=(2.25, 1.0))
    stand = Mention("object", (22, 36), category="nightstand", instance_id=2, scope=0, viewpoint=(2.25, 1.0))
    on = Mention("relation", (19, 36), relation="on", subject="obj:1", target="obj:2")
    assert ref.resolve_object("lamp", 0, relation=("on", 2), viewpoint=(2.25, 1.0)) == [1]
    assert [r for r, _ in verifier.reasons(_instruction(text, [lamp, stand, on]))] == ["ambiguous_reference"]
    # What the synthesizer says of the first lamp always verifies, and never leans on the nightstand.
    synth = RouteSynthesizerV2(ref)
    view = ref.view
    facts = RouteFacts(rooms=(view.room_ref(0),), landmarks=(), length=4.8, events=(
        RouteEvent("start", 0.0, room=view.room_ref(0)), RouteEvent("pass", 2.25, landmark=view.object_ref(1)),
        RouteEvent("stop", 4.8, room=view.room_ref(0))))
    for seed in range(8):
        out = synth.route(facts, SIGHT_PATH, np.random.default_rng(seed))
        assert [x["needs"] for x in out.references] == ["ordinal"], out.text
        assert "nightstand" not in out.text and verifier.reasons(out, SIGHT_PATH) == [], out.text


def test_bad_input_without_attributes_an_ambiguous_anchor_is_dropped_and_counted():
    """A third-party stage: NIGHTSTANDS has no attributes. Walking straight at the first lamp
    (ending at (2.25, 3.05), 0.2 m from its centre: no side to count on) from where the bedroom's
    nightstand is in view, neither its relation nor an ordinal makes it unique: every attempt of
    the pipeline leaves it out and counts it, and what is said verifies."""
    from vlnverse.tasks.instructions.route_v2 import RouteLanguageV2

    _, sight = _sight_scene(NIGHTSTANDS)
    graph = _graph(NIGHTSTANDS, NIGHTSTAND_EDGES, rooms=((0, "living_room"), (1, "bedroom")), adjacent=((0, 1),))
    language = RouteLanguageV2(graph, occupancy=sight.occupancy)
    ahead = np.column_stack([np.full(29, 2.25), np.linspace(0.25, 3.05, 29)])
    assert language.referrer.refer(1, path=PathFrame(ahead)) is None
    view = language.referrer.view
    facts = RouteFacts(rooms=(view.room_ref(0),), landmarks=(), length=2.8, events=(
        RouteEvent("start", 0.0, room=view.room_ref(0)), RouteEvent("pass", 1.5, landmark=view.object_ref(1)),
        RouteEvent("stop", 2.8, room=view.room_ref(0))))
    chosen, info = language.instructions(facts, ahead, np.random.default_rng(0), 3)
    attempts = info["verifier"]["accepted"] + sum(info["verifier"]["rejected"].values())
    assert chosen and info["verifier"]["rejected"] == {}
    assert info["dropped"] == {"ambiguous_landmark": attempts}
    for g in chosen:
        assert g.references == () and "lamp" not in g.text and "nightstand" not in g.text, g.text


def _instruction(text, mentions=(), actions=()):
    return GroundedInstruction(text, list(mentions), actions=tuple(actions))


def test_verifier_rejects_an_ambiguous_reference_and_accepts_a_unique_one():
    verifier = RouteVerifier(_graph(COLOURED, []))
    text = "Walk past the armchair."
    ambiguous = Mention("object", (10, 22), category="armchair", instance_id=1, scope=0)
    assert [r for r, _ in verifier.reasons(_instruction(text, [ambiguous]))] == ["ambiguous_reference"]
    text = "Walk past the red armchair."
    unique = Mention("object", (10, 26), category="armchair", instance_id=1, scope=0, attributes=(("color", "red"),))
    assert verifier.reasons(_instruction(text, [unique])) == []
    wrong = Mention("object", (10, 26), category="armchair", instance_id=2, scope=0, attributes=(("color", "red"),))
    assert "unsupported" in [r for r, _ in verifier.reasons(_instruction(text, [wrong]))]


@pytest.mark.parametrize("actions, reason", [
    ([("start", 0), ("exit", 0), ("enter", 1), ("exit", 1), ("enter", 2), ("exit", 2), ("enter", 1)],
     "repeated_room_entry"),
    ([("start", 0), ("enter", 0)], "enter_current_room"),
    ([("start", 0), ("exit", 0), ("enter", 1), ("exit", 1), ("enter", 1)], "exit_enter_same_room"),
    ([("start", 0), ("exit", 1)], "exit_other_room"),
    ([("start", 0), ("exit", 0), ("enter", 1), ("stop_in", 2)], "stop_elsewhere"),
])
def test_verifier_rejects_contradictory_route_claims(actions, reason):
    verifier = RouteVerifier(_graph(COLOURED, []))
    assert [r for r, _ in verifier.reasons(_instruction("Walk forward.", actions=actions))] == [reason]


def test_verifier_accepts_a_consistent_route_and_rejects_a_repeated_clause():
    verifier = RouteVerifier(_graph(COLOURED, []))
    good = [("start", 0), ("exit", 0), ("enter", 1), ("exit", 1), ("enter", 2), ("stop_in", 2)]
    assert verifier.reasons(_instruction("Walk forward.", actions=good)) == []
    assert [r for r, _ in verifier.reasons(_instruction("Turn left and walk forward a bit. Turn left and walk "
                                                        "forward a bit."))] == ["repeated_clause"]


def test_the_pipeline_verifies_every_attempt_and_counts_rejections_by_reason():
    """Route facts that re-enter the living room: every attempt (4 per instruction asked for) is
    rejected as ``repeated_room_entry`` and counted; the same route without the return is accepted."""
    from vlnverse.tasks.instructions.route_v2 import RouteLanguageV2

    graph, sight = _sight_scene()
    language = RouteLanguageV2(graph, occupancy=sight.occupancy)
    view = language.referrer.view
    living, bedroom = view.room_ref(0), view.room_ref(1)
    back = RouteFacts(rooms=(living, bedroom, living), landmarks=(), length=4.8, events=(
        RouteEvent("start", 0.0, room=living), RouteEvent("enter", 2.0, room=bedroom),
        RouteEvent("enter", 4.0, room=living), RouteEvent("stop", 4.8, room=living)))
    chosen, info = language.instructions(back, SIGHT_PATH, np.random.default_rng(0), 3)
    assert chosen == [] and info["verifier"] == {"accepted": 0, "rejected": {"repeated_room_entry": 12}}
    there = replace(back, rooms=(living, bedroom), events=back.events[:2] + (RouteEvent("stop", 4.8, room=bedroom),))
    chosen, info = language.instructions(there, SIGHT_PATH, np.random.default_rng(0), 3)
    assert len(chosen) == 3 and info["verifier"] == {"accepted": 3, "rejected": {}}
    assert {g.actions for g in chosen} == {(("start", 0), ("exit", 0), ("enter", 1), ("stop_in", 1))}


def test_rooms_of_the_same_type_are_named_by_their_contents():
    objects = [_obj(6, "desk", [10, 1, 0], [11.5, 1.8, 0.8], 2), _obj(7, "wardrobe", [14, 1, 0], [15, 1.6, 2], 3),
               _obj(8, "bed", [10, 3, 0], [12, 5, 0.5], 2), _obj(9, "bed", [14, 3, 0], [16, 5, 0.5], 3)]
    graph = _graph(objects, [], rooms=((1, "hallway"), (2, "bedroom"), (3, "bedroom")), adjacent=((1, 2), (1, 3)))
    ref = Referrer(graph)
    r = ref.refer_room(2, 1)
    assert r.contents.category == "desk" and ref.resolve_room("bedroom", 1, "desk") == [2]
    assert ref.refer_room(3, 1).contents.category == "wardrobe"
    assert ref.resolve_room("bedroom", 1) == [2, 3]               # "the bedroom" from the hallway: two
    assert ref.refer_room(1, 2).contents is None                  # the only hallway
    generic = ref.refer_room(2, 1, by_contents=True, generic=True)     # no other room here has a desk
    assert generic.generic and generic.contents.category == "desk"
    assert ref.resolve_room(None, 1, "desk") == [2] and ref.resolve_room(None, 1, "bed") == [2, 3]
    assert not ref.refer_room(2, 1, by_contents=True, generic=False).generic
    # The Verifier: "the room with the desk" denotes one room from the hallway, "the room with the bed" two.
    verifier = RouteVerifier(graph)
    for text, category, expected in (("Enter the room with the desk.", "desk", []),
                                     ("Enter the room with the bed.", "bed", ["ambiguous_reference"])):
        target = 6 if category == "desk" else 8
        start = text.index("the room")
        obj_start = text.index("the " + category)
        mentions = [Mention("room", (start, len(text) - 1), category="bedroom", room_id=2, scope=1, contents=category),
                    Mention("object", (obj_start, len(text) - 1), category=category, instance_id=target, scope=2),
                    Mention("relation", (obj_start, len(text) - 1), relation="in", subject=f"obj:{target}",
                            target="room:2")]
        assert [r for r, _ in verifier.reasons(_instruction(text, mentions))] == expected


def test_rooms_alike_in_furniture_are_named_by_what_their_furniture_looks_like():
    """Two bedrooms off the hallway, each with one bed and one wardrobe: no category tells them
    apart, the wardrobes' colours do (room 2's oak, room 3's white); the beds differ only in size."""
    objects = [_obj(6, "wardrobe", [10, 1, 0], [11, 1.6, 2], 2, color="oak", material="wood"),
               _obj(7, "wardrobe", [14, 1, 0], [15, 1.6, 2], 3, color="white", material="wood"),
               _obj(8, "bed", [10, 3, 0], [12, 5, 0.5], 2, color="white", material="wood", size="large"),
               _obj(9, "bed", [14, 3, 0], [15.5, 5, 0.5], 3, color="white", material="wood", size="small")]
    graph = _graph(objects, [], rooms=((1, "hallway"), (2, "bedroom"), (3, "bedroom")), adjacent=((1, 2), (1, 3)))
    ref = Referrer(graph)
    for room, wardrobe, colour in ((2, 6, "oak"), (3, 7, "white")):
        r = ref.refer_room(room, 1)
        assert (r.contents.instance_id, r.contents_attributes) == (wardrobe, ("color",))
        assert ref.resolve_room("bedroom", 1, "wardrobe", {"color": colour}) == [room]
    assert ref.resolve_room("bedroom", 1, "wardrobe") == [2, 3]
    assert ref.resolve_room("bedroom", 1, "bed", {"size": "small"}) == [3]
    # Identical furniture in both: nothing names either room, so the route is dropped.
    twins = [_obj(6, "wardrobe", [10, 1, 0], [11, 1.6, 2], 2, color="oak"),
             _obj(7, "wardrobe", [14, 1, 0], [15, 1.6, 2], 3, color="oak")]
    same = Referrer(_graph(twins, [], rooms=((1, "hallway"), (2, "bedroom"), (3, "bedroom")),
                           adjacent=((1, 2), (1, 3))))
    assert same.refer_room(2, 1) is None
    # The Verifier reads the colour off the contents' own mention.
    verifier = RouteVerifier(graph)
    for text, attributes, expected in (("Enter the bedroom with the oak wardrobe.", (("color", "oak"),), []),
                                       ("Enter the bedroom with the wardrobe.", (), ["ambiguous_reference"])):
        start, obj_start = text.index("the bedroom"), text.index("the ", text.index("with"))
        mentions = [Mention("room", (start, len(text) - 1), category="bedroom", room_id=2, scope=1,
                            contents="wardrobe"),
                    Mention("object", (obj_start, len(text) - 1), category="wardrobe", instance_id=6, scope=2,
                            attributes=attributes),
                    Mention("relation", (obj_start, len(text) - 1), relation="in", subject="obj:6",
                            target="room:2")]
        assert [r for r, _ in verifier.reasons(_instruction(text, mentions))] == expected
    # The synthesizer says it: entering room 2 from the hallway.
    facts = RouteFacts(rooms=(ref.view.room_ref(1), ref.view.room_ref(2)), landmarks=(), length=4.0, events=(
        RouteEvent("start", 0.0, room=ref.view.room_ref(1)), RouteEvent("enter", 2.0, room=ref.view.room_ref(2)),
        RouteEvent("stop", 4.0, room=ref.view.room_ref(2))))
    synth = RouteSynthesizerV2(ref, RouteVerifier(graph, referrer=ref).lexicon)
    dense = np.array([[9.0, 0.0], [10.5, 2.0], [11.0, 2.5]])
    texts = [g.text for g in (synth.route(facts, dense, np.random.default_rng(k)) for k in range(10)) if g]
    assert texts and all(re.search(r"(oak|white) (wardrobe|armoire|clothes press)", t) for t in texts), texts
    assert not synth.dropped["ambiguous_room"]


def test_a_short_stay_is_kept_when_the_rooms_around_it_are_not_neighbours():
    """kitchen (0) -> 0.6 m of bedroom (1) -> bathroom (2): the kitchen and the bathroom share no
    door, so the bedroom stays in the route; with a door between them it is left unsaid."""
    from vlnverse.tasks.instructions.route_v2 import RouteDescriberV2

    rooms = ((0, "kitchen"), (1, "bedroom"), (2, "bathroom"))
    for adjacent, expected in ((((0, 1), (1, 2)), [0, 1, 2]), (((0, 1), (1, 2), (0, 2)), [0, 2])):
        graph = _graph([], [], rooms=rooms, adjacent=adjacent)
        ref = Referrer(graph)
        view = ref.view
        facts = RouteFacts(rooms=tuple(view.room_ref(r) for r in (0, 1, 2)), landmarks=(), length=5.0, events=(
            RouteEvent("start", 0.0, room=view.room_ref(0)), RouteEvent("enter", 2.0, room=view.room_ref(1)),
            RouteEvent("enter", 2.6, room=view.room_ref(2)), RouteEvent("stop", 5.0, room=view.room_ref(2))))
        cleaned = RouteDescriberV2(graph, referrer=ref).clean_rooms(facts)
        assert [r.room_id for r in cleaned.rooms] == expected
        assert [e.room.room_id for e in cleaned.events if e.kind == "enter"] == expected[1:]


def test_the_third_doorway_on_the_left_is_counted_along_the_path():
    """A hallway along y = 0 with doors on its left at x = 2, 4, 6 into rooms 2, 3, 4; the path
    walks to x = 6 and turns left through the third."""
    g = nx.MultiDiGraph(scene_id="doors")
    for rid, rtype in ((1, "hallway"), (2, "bedroom"), (3, "bathroom"), (4, "kitchen")):
        g.add_node(f"room:{rid}", kind="room", room_id=rid, room_type=rtype)
    for rid, x in ((2, 2.0), (3, 4.0), (4, 6.0)):
        for a, b in ((1, rid), (rid, 1)):
            g.add_edge(f"room:{a}", f"room:{b}", relation="adjacent", door_id=rid, door_center=[x, 1.0])
    graph = SceneGraph(g)
    ref = Referrer(graph)
    dense = np.concatenate([np.column_stack([np.linspace(0, 6, 61), np.zeros(61)]),
                            np.column_stack([np.full(20, 6.0), np.linspace(0.1, 2.0, 20)])])
    path = PathFrame(dense)
    assert ref.doorway_ordinal(1, 4, path) == (3, "left")
    assert ref.resolve_doorway(1, (3, "left"), path) == [4]
    assert ref.resolve_doorway(1, (2, "left"), path) == []          # the second one is passed, not taken
    assert ref.doorway_ordinal(1, 3, path) is None                  # the path does not go through it
    verifier = RouteVerifier(graph)
    text = "Take the third doorway on your left into the kitchen."
    span = (5, len(text) - 1)
    for ordinal, expected in (((3, "left"), []), ((2, "left"), ["ambiguous_reference"])):
        mention = Mention("room", span, category="kitchen", room_id=4, scope=1, ordinal=ordinal)
        assert [r for r, _ in verifier.reasons(_instruction(text, [mention]), dense)] == expected


def test_a_doorway_is_counted_wherever_more_than_one_leads_into_the_room():
    """A hallway (y < 1) with two doors on its left into the living room, at x = 2 and x = 4 (and
    one on its right at x = 1 into a bathroom); the path walks along y = 0 and turns left through
    the second. "Enter the living room" does not say which door: the ordinal is needed every time,
    and no clause claims "the doorway" of the hallway (three doors) or into the living room (two)."""
    g = nx.MultiDiGraph(scene_id="two doors")
    for rid, rtype in ((1, "hallway"), (2, "living_room"), (3, "bathroom")):
        g.add_node(f"room:{rid}", kind="room", room_id=rid, room_type=rtype)
    for door, (rid, centre) in enumerate(((2, [2.0, 1.0]), (2, [4.0, 1.0]), (3, [1.0, -1.0]))):
        for a, b in ((1, rid), (rid, 1)):
            g.add_edge(f"room:{a}", f"room:{b}", relation="adjacent", door_id=door, door_center=centre)
    graph = SceneGraph(g)
    ref = Referrer(graph)
    counts = (ref.doors_between(1), ref.doors_between(1, 2), ref.doors_between(2, 1), ref.doors_between(3))
    assert counts == (3, 2, 2, 1)
    dense = np.concatenate([np.column_stack([np.linspace(0, 4, 41), np.zeros(41)]),
                            np.column_stack([np.full(20, 4.0), np.linspace(0.1, 2.0, 20)])])
    assert ref.doorway_ordinal(1, 2, PathFrame(dense)) == (2, "left")
    view = ref.view
    hall, living = view.room_ref(1), view.room_ref(2)
    facts = RouteFacts(rooms=(hall, living), landmarks=(), length=5.9, events=(
        RouteEvent("start", 0.0, room=hall), RouteEvent("enter", 5.0, room=living),
        RouteEvent("stop", 5.9, room=living)))
    synth, verifier = RouteSynthesizerV2(ref), RouteVerifier(graph, referrer=ref)
    one_doorway = route_language.ONE_DOORWAY
    for seed in range(12):
        out = synth.route(facts, dense, np.random.default_rng(seed))
        assert [(r.get("kind"), r["needs"]) for r in out.references] == [("doorway", "ordinal")], out.text
        assert "second" in out.text and "left" in out.text, out.text
        assert not any(one_doorway.search(synth._by_id[t].text) for t in out.template_ids), out.text
        assert verifier.reasons(out, dense) == [], out.text
    # With one door each way, the single-doorway wording is allowed and the ordinal is optional.
    single = nx.MultiDiGraph(g)
    single.remove_edges_from([(u, v, k) for u, v, k, d in g.edges(keys=True, data=True) if d.get("door_id") == 0])
    alone = Referrer(SceneGraph(single))
    assert alone.doors_between(1, 2) == 1 and alone.doorway_ordinal(1, 2, PathFrame(dense)) == (1, "left")
    synth = RouteSynthesizerV2(alone)
    needs = {r["needs"] for seed in range(12)
             for r in synth.route(facts, dense, np.random.default_rng(seed)).references}
    assert needs <= {"category"}


def test_no_v2_template_names_an_object_or_room_and_families_partition_every_part():
    lexicon = Lexicon(extra_object_forms=route_language.EXTRA_OBJECT_FORMS,
                      extra_room_forms=route_language.EXTRA_ROOM_FORMS)
    for part, texts in route_language.PARTS.items():
        for text in texts:
            assert not lexicon.find(re.sub(r"\{\w+\}", "X", text)), (part, text)
    for words in (route_language.LEADS, route_language.OPENERS, route_language.CLOSINGS, route_language.MANNERS):
        assert not any(lexicon.find(w) for w in words)
    both = route_language.template_set((0, 1))
    a, b = route_language.template_set((0,)), route_language.template_set((1,))
    assert {t.template_id for t in a.templates}.isdisjoint(t.template_id for t in b.templates)
    assert len(a) + len(b) == len(both)
    for part in route_language.PARTS:
        assert a.select(part) and b.select(part), part


# ---------------------------------------------------------------------------------------------
# The generator: version 2 is opt-in, deterministic and pinned; version 1 stays the default.

GOLDEN_V2 = "4d556e5d872d540b176a3e91e65fcb16cb223c41047ffbe117624130d76d1d0d"


def _generate(tmp_path, name, *overrides):
    from vlnverse.paths import scenes_dir
    from vlnverse.tasks.dataset import generate_dataset

    sets = dict(o.split("=", 1) for o in overrides)
    sets = {k: (int(v) if v.isdigit() else v == "true") for k, v in sets.items()}
    generate_dataset("fine_grained", [str(scenes_dir() / "home_0014.usd")], 2, 3, tmp_path / name, progress=False,
                     overrides=sets)
    return tmp_path / name


def test_version_2_is_deterministic_and_matches_its_golden_hash(tmp_path):
    first = _generate(tmp_path, "a", "params.instruction_version=2")
    second = _generate(tmp_path, "b", "params.instruction_version=2")
    data = (first / "val_unseen.jsonl").read_bytes()
    assert data == (second / "val_unseen.jsonl").read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    assert digest == GOLDEN_V2, f"fine_grained v2: generated episodes changed (sha256 {digest})"


def test_language_split_writes_held_out_wording_for_held_out_homes(tmp_path):
    from vlnverse.tasks.episode import load_episodes

    out = _generate(tmp_path, "s", "params.instruction_version=2", "params.language_split=true")
    seen = load_episodes(out / "val_unseen.jsonl")
    shifted = load_episodes(out / "val_unseen_language.jsonl")
    assert len(seen) == len(shifted) == 2
    for a, b in zip(seen, shifted):
        assert a.reference_path == b.reference_path and b.episode_id == a.episode_id + "-language"
        assert a.info["language"]["families"] == [0] and b.info["language"]["families"] == [1]
        for ids in a.info["template_ids"]:
            assert all(route_language.family(t) == 0 for t in ids)
        for ids in b.info["template_ids"]:
            assert all(route_language.family(t) == 1 for t in ids)


def test_stats_count_words_trigrams_references_and_rejections():
    from types import SimpleNamespace as NS

    from vlnverse.tasks.instructions.stats import instruction_stats

    ins = lambda t: NS(text=t)  # noqa: E731
    episodes = [NS(instructions=[ins("Walk past the red sofa."), ins("Walk past the sofa.")],
                   info={"references": [[{"needs": "attribute", "seen_rivals": 1},
                                         {"kind": "doorway", "needs": "ordinal", "seen_rivals": 1}],
                                        [{"needs": "category"}]],
                         "verifier": {"accepted": 2, "rejected": {"repeated_room_entry": 2}},
                         "dropped": {"ambiguous_landmark": 1}}),
                NS(instructions=[ins("Stop.")], info={})]
    out = instruction_stats(episodes)
    assert out["instructions"] == 3 and out["vocabulary"] == 6          # walk past the red sofa stop
    assert out["trigrams_per_100"] == round(4 * 100 / 3, 2)             # 3 + 1 new ("walk past the" twice)
    assert out["mean_words"] == round((5 + 4 + 1) / 3, 2)
    assert out["references"]["attribute_or_relation_share"] == 0.5 and out["references"]["count"] == 2
    assert out["references"]["doorways"] == {"ordinal": 1}
    assert out["references"]["in_view_share"] == 0.5                   # 1 of the 2 object references
    assert out["verifier"]["rejected_share"] == 0.5 and out["verifier"]["rejected_by_reason"] == {"repeated_room_entry": 2}
    assert instruction_stats(episodes, max_instructions=1)["vocabulary"] == 5
    assert instruction_stats([NS(instructions=[ins("Go.")], info={})])["references"] is None


def test_review_card_says_how_many_rivals_in_view_a_reference_was_told_apart_from():
    from types import SimpleNamespace as NS

    from vlnverse.tasks.instructions.review import _card

    ep = NS(episode_id="e0", split="val_unseen", scene_id="s", geodesic_distance=4.8)
    instr = NS(text="Walk past the red armchair, then the sofa.")
    refs = [{"instance_id": 1, "needs": "attribute", "span": [10, 26], "seen_rivals": 2},
            {"instance_id": 4, "needs": "category", "span": [33, 41]}]
    card = _card(ep, 0, instr, refs, {1: {"category": "armchair"}, 4: {"category": "sofa"}}, Lexicon(), None)
    assert "<td>1</td><td>armchair #1</td><td>needs attribute, 2 rivals in view in another room</td>" in card
    assert "<td>2</td><td>sofa #4</td><td>needs category</td>" in card


def test_version_2_instructions_are_well_formed_and_verified_on_a_generated_home():
    from vlnverse.scenes.procgen import generate_home
    from vlnverse.tasks.base import TASKS, context_from_description, load_task_config, load_task_types

    load_task_types()
    config = load_task_config("fine_grained", {"params.instruction_version": 2})
    generator = TASKS.get("fine_grained")(config)
    episodes = generator.generate(context_from_description(generate_home(5), "r2r_ce"), np.random.default_rng(3),
                                  12, "train")
    assert len(episodes) == 12
    for ep in episodes:
        assert ep.info["language"]["version"] == 2 and len(ep.instructions) == 3
        for instr, refs in zip(ep.instructions, ep.info["references"]):
            text = instr.text
            assert text[:1].isupper() and text[-1] in ".!?", text
            assert not re.search(r"[.!?] +[a-z]", text), text
            assert not re.search(r"[{}_]|\s{2,}|\s[,.!?]", text), text
            assert not re.search(r"\b(\w+) \1\b", text, re.IGNORECASE), text
            for ref in refs:    # every recorded reference span names its object's category
                words = text[ref["span"][0]:ref["span"][1]].lower()
                assert words.startswith("the "), (words, text)


def test_review_page_has_one_card_per_instruction_with_references_and_maps(tmp_path):
    import html as html_lib

    from vlnverse.cli import main
    from vlnverse.tasks.episode import load_episodes

    data = _generate(tmp_path, "r", "params.instruction_version=2")
    assert main(["data", "review", str(data), "--n", "2", "--out", str(tmp_path / "page")]) == 0
    page = (tmp_path / "page" / "index.html").read_text()
    assert page.count('<div class="card">') == 2
    assert sorted(p.name for p in (tmp_path / "page" / "maps").iterdir()) == ["0000.png", "0001.png"]
    episode = load_episodes(data)[0]
    for k in range(2):
        text, refs = episode.instructions[k].text, episode.info["references"][k]
        marked = [html_lib.unescape(m) for m in re.findall(r"<mark [^>]*>([^<]*)<sup>", page)]
        for ref in refs:     # each recorded reference is highlighted with exactly its words
            assert text[ref["span"][0]:ref["span"][1]] in marked
    assert main(["data", "review", str(data), "--n", "0", "--out", str(tmp_path / "bad")]) != 0


@pytest.mark.parametrize("sets, field", [(["params.instruction_version=3"], "params.instruction_version"),
                                         (["params.language_split=true"], "params.language_split"),
                                         (["params.instruction_version=2", "params.llm_url=http://x"], "params.llm_url")])
def test_bad_language_settings_are_refused_in_one_line(tmp_path, capsys, sets, field):
    from vlnverse.cli import main

    argv = ["data", "generate", "--task", "fine_grained", "--scenes", "home_0014", "--episodes-per-scene", "1",
            "--out", str(tmp_path / "ds"), "--no-progress"]
    for s in sets:
        argv += ["--set", s]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and field in err[0], err
    assert not (tmp_path / "ds").exists()


# ---------------------------------------------------------------------------------------------
# Coarse-grained version 2: more phrasings per style, the three registers kept apart.

GOLDEN_COARSE_V2 = "de4afe296ac2c9c2d65737de13ba88b3b06a10c7f43606248fb69889b1e4d4e2"


def test_coarse_grained_version_2_templates_name_nothing_and_keep_their_register():
    from vlnverse.tasks.types.coarse_grained import templates_v2 as goal_language

    lexicon = Lexicon()
    tset = goal_language.template_set()
    assert len(tset.select("goal", "formal")) > 2 * len(TEMPLATES_V1_FORMAL())
    for t in tset.templates:
        assert not lexicon.find(re.sub(r"\{\w+\}", "X", t.text)), t.text
        literal = re.sub(r"\{\w+\}", "X", t.text)
        assert not re.search(r"[.!?] +[a-z]", literal), t.text
    for text in goal_language.FORMAL_V2:     # formal: no contractions, no slang
        assert "'" not in text and not re.search(r"\b(yo|gonna|k)\b", text), text
    for text in goal_language.CASUAL_V2:     # casual: never "please"
        assert "please" not in text.lower(), text


def TEMPLATES_V1_FORMAL():
    from vlnverse.tasks.types.coarse_grained.templates import FORMAL

    return FORMAL


def test_coarse_grained_version_2_is_pinned_and_its_styles_stay_apart(tmp_path):
    from vlnverse.paths import scenes_dir
    from vlnverse.tasks.dataset import generate_dataset
    from vlnverse.tasks.episode import load_episodes
    from vlnverse.tasks.instructions.stats import instruction_stats

    out = tmp_path / "c"
    generate_dataset("coarse_grained", [str(scenes_dir() / "home_0014.usd")], 2, 3, out, progress=False,
                     overrides={"params.instruction_version": 2})
    digest = hashlib.sha256((out / "val_unseen.jsonl").read_bytes()).hexdigest()
    assert digest == GOLDEN_COARSE_V2, f"coarse_grained v2: generated episodes changed (sha256 {digest})"
    generate_dataset("coarse_grained", [str(scenes_dir() / "home_0014.usd")], 20, 3, tmp_path / "c20",
                     progress=False, overrides={"params.instruction_version": 2})
    styles = instruction_stats(load_episodes(tmp_path / "c20"))["styles"]
    assert sorted(styles) == ["casual", "formal", "natural"]
    for style, st in styles.items():     # most of each register's word 3-grams are its own
        assert st["own_trigram_share"] > 0.4, (style, st)


def test_version_2_is_refused_for_task_types_with_their_own_goal_templates(capsys, tmp_path):
    from vlnverse.cli import main

    argv = ["data", "generate", "--task", "dialogue", "--scenes", "home_0014", "--episodes-per-scene", "1",
            "--out", str(tmp_path / "d"), "--no-progress", "--set", "params.instruction_version=2"]
    assert main(argv) == 2
    assert "params.instruction_version" in capsys.readouterr().err


def test_coarse_grained_language_split_holds_out_the_natural_and_casual_styles(tmp_path):
    from vlnverse.paths import scenes_dir
    from vlnverse.tasks.dataset import generate_dataset
    from vlnverse.tasks.episode import load_episodes

    out = tmp_path / "c"
    generate_dataset("coarse_grained", [str(scenes_dir() / "home_0014.usd")], 3, 3, out, progress=False,
                     overrides={"params.instruction_version": 2, "params.language_split": True})
    seen, shifted = load_episodes(out / "val_unseen.jsonl"), load_episodes(out / "val_unseen_language.jsonl")
    assert len(seen) == len(shifted) == 3
    for a, b in zip(seen, shifted):
        assert [i.style for i in a.instructions] == ["formal"]
        assert [i.style for i in b.instructions] == ["natural", "casual"]
        assert b.episode_id == a.episode_id + "-language" and a.goals == b.goals
