"""Instruction pipeline: grammar helpers, lexicon, Describer facts, Verifier, Synthesizer, LLM stage."""
from __future__ import annotations

import re
from mllm_server import openai_server

import networkx as nx
import numpy as np
import pytest

from vlnverse.scenes.occupancy import OccupancyMap
from vlnverse.scenes.scene_graph import SceneGraph
from vlnverse.tasks.instructions import (STYLES, TEMPLATES, Describer, GroundedInstruction, Lexicon, Mention,
                                         Synthesizer, Verifier, synthesize_verified, turn_direction)
from vlnverse.tasks.instructions.grammar import (capitalize_first, count_phrase, finish_sentence, indefinite_article,
                                                 join_list, plural)
from vlnverse.tasks.instructions.llm import ChatClient, LLMSynthesizer

OWN_TASKS = ("fine_grained", "coarse_grained", "visual_reference", "long_horizon", "dialogue", "object_goal")


# ---------------------------------------------------------------------------------------------
# A hand-built two-room apartment: living room (x < 5) and kitchen (x >= 5), y in [0, 6).

def _obj(iid, category, lo, hi, room, **attrs):
    lo, hi = np.array(lo, float), np.array(hi, float)
    return (f"obj:{iid}", dict(kind="object", instance_id=iid, category=category, bounds_min=lo.tolist(),
                               bounds_max=hi.tolist(), position=((lo + hi) / 2).tolist(), attributes=attrs,
                               room_id=room))


OBJECTS = [
    _obj(1, "sofa", [2.0, 1.5, 0.0], [3.0, 2.2, 0.8], 0, color="gray", material="fabric"),
    _obj(2, "mug", [6.0, 4.6, 0.75], [6.1, 4.7, 0.85], 1, color="red", material="ceramic"),
    _obj(3, "dining_table", [5.6, 4.4, 0.0], [6.6, 5.4, 0.75], 1, material="wood"),
    _obj(4, "mug", [8.0, 3.6, 0.9], [8.1, 3.7, 1.0], 1, color="white", material="ceramic"),
    _obj(5, "counter", [7.5, 3.5, 0.0], [9.0, 4.0, 0.9], 1),
    _obj(6, "fridge", [7.5, 0.2, 0.0], [8.5, 0.8, 1.8], 1, color="white"),
    _obj(7, "tv", [0.2, 4.0, 0.5], [1.2, 4.2, 1.1], 0, color="black"),
]
EDGES = [("obj:1", "room:0", "in"), ("obj:7", "room:0", "in")] + \
        [(f"obj:{i}", "room:1", "in") for i in (2, 3, 4, 5, 6)] + \
        [("obj:2", "obj:3", "on"), ("obj:4", "obj:5", "on"), ("obj:5", "obj:6", "near"), ("obj:6", "obj:5", "near")]


@pytest.fixture(scope="module")
def graph() -> SceneGraph:
    g = nx.MultiDiGraph(scene_id="hand")
    g.add_node("room:0", kind="room", room_id=0, room_type="living_room")
    g.add_node("room:1", kind="room", room_id=1, room_type="kitchen")
    for node, attrs in OBJECTS:
        g.add_node(node, **attrs)
    for u, v, rel in EDGES:
        g.add_edge(u, v, relation=rel)
    return SceneGraph(g)


@pytest.fixture(scope="module")
def grid_and_rooms():
    res = 0.1
    grid = OccupancyMap(np.zeros((60, 100), np.uint8), res, np.zeros(2), source="hand")
    cols = np.arange(100)
    room_map = np.where(cols[None, :] < 50, 0, 1).repeat(60, axis=0).astype(np.int32)
    return grid, room_map


# ---------------------------------------------------------------------------------------------
# Grammar and lexicon

@pytest.mark.parametrize("word, article", [("apple", "an"), ("mug", "a"), ("umbrella", "an"), ("hour", "an"),
                                           ("university", "a"), ("one", "a"), ("TV", "a"), ("LED lamp", "an"),
                                           ("oven", "an"), ("honest", "an"), ("ukulele", "a"), ("egg", "an"),
                                           ("U-turn", "a"), ("X-ray", "an")])
def test_indefinite_article(word, article):
    assert indefinite_article(word) == article


@pytest.mark.parametrize("noun, expected", [("mug", "mugs"), ("box", "boxes"), ("couch", "couches"),
                                            ("shelf", "shelves"), ("bookshelf", "bookshelves"),
                                            ("coffee table", "coffee tables"), ("toy", "toys"),
                                            ("berry", "berries"), ("knife", "knives"), ("TV", "TVs"),
                                            ("glass", "glasses"), ("dish", "dishes"), ("person", "people")])
def test_plural(noun, expected):
    assert plural(noun) == expected


def test_list_and_sentence_helpers():
    assert join_list(["a sofa"]) == "a sofa"
    assert join_list(["a sofa", "a lamp"]) == "a sofa and a lamp"
    assert join_list(["a sofa", "a lamp", "a rug"], "or") == "a sofa, a lamp, or a rug"
    assert count_phrase(1, "chair") == "one chair" and count_phrase(3, "shelf") == "three shelves"
    assert finish_sentence("walk past the TV") == "Walk past the TV."
    assert finish_sentence("is it here?") == "Is it here?"
    assert capitalize_first("  tV stand") == "  TV stand"


def test_lexicon_longest_match_plurals_and_word_boundaries():
    lex = Lexicon(["wine_rack"], ["sunroom"])
    hits = lex.find("Pass the dining table and the couches in the bedroom, then the wine rack in the sunroom.")
    found = [(h.kind, h.phrase, sorted(h.names)) for h in hits]
    assert ("object", "dining table", ["dining_table"]) in found
    assert ("object", "couches", ["sofa"]) in found            # synonym + plural
    assert ("room", "bedroom", ["bedroom"]) in found
    assert ("object", "wine rack", ["wine_rack"]) in found     # category outside the built-in table
    assert ("room", "sunroom", ["sunroom"]) in found
    assert not any(h.phrase in ("table", "bed") for h in hits)  # no sub-word or shorter overlapping hit
    assert [h.phrase for h in lex.find("the TV and the television")] == ["tv", "television"]


# ---------------------------------------------------------------------------------------------
# Describer

def test_describe_target_distinguishes_the_two_mugs(graph):
    facts = Describer(graph).describe_target(2)
    assert facts.target.category == "mug" and facts.room.room_type == "kitchen"
    assert facts.distinguishing_attributes == ("color",)      # red vs white; material is shared
    assert facts.relation.relation == "on" and facts.relation.anchor.instance_id == 3
    assert facts.same_category_in_room == 2 and facts.unique
    assert not facts.needs_room                              # both mugs are in the only kitchen


def test_describe_target_unique_object_needs_nothing_extra(graph):
    facts = Describer(graph).describe_target(6)
    assert facts.distinguishing_attributes == () and facts.unique and not facts.needs_relation
    assert facts.relation.relation == "near" and facts.relation.anchor.category == "counter"


@pytest.mark.parametrize("deg, expected", [(90, "left"), (-90, "right"), (40, "left"), (-40, "right"),
                                           (10, None), (-20, None), (170, "around"), (-175, "around"),
                                           (270, "right")])
def test_turn_direction(deg, expected):
    assert turn_direction(np.radians(deg)) == expected


def test_describe_route_rooms_landmarks_turns_and_end(graph, grid_and_rooms):
    grid, room_map = grid_and_rooms
    waypoints = np.array([[1.0, 1.0], [7.0, 1.0], [7.0, 4.8]])
    dense = np.concatenate([np.linspace(waypoints[0], waypoints[1], 61), np.linspace(waypoints[1], waypoints[2], 39)[1:]])
    route = Describer(graph, room_map, grid).describe_route(dense, waypoints, start_yaw=0.0)
    assert [r.room_type for r in route.rooms] == ["living_room", "kitchen"]
    kinds = [e.kind for e in route.events]
    assert kinds == ["start", "pass", "enter", "turn", "stop"]
    passed = route.events[1]
    assert passed.landmark.category == "sofa" and passed.s == pytest.approx(1.0, abs=0.11)   # first closest at x = 2
    assert route.events[2].room.room_type == "kitchen" and route.events[2].s == pytest.approx(4.0, abs=0.11)
    turn = route.events[3]
    assert turn.direction == "left" and turn.landmark.category == "fridge"   # 0.54 m from the corner
    stop = route.events[4]
    assert stop.room.room_type == "kitchen" and stop.landmark.category == "dining_table"  # mugs are too small
    assert route.length == pytest.approx(6.0 + 3.8)
    # The TV (4 m from the path) is no landmark; the white mug is too small to be one.
    assert {lm.category for lm in route.landmarks} <= {"sofa", "fridge", "counter", "dining_table"}


def test_route_instruction_follows_the_events(graph, grid_and_rooms):
    grid, room_map = grid_and_rooms
    waypoints = np.array([[1.0, 1.0], [7.0, 1.0], [7.0, 4.8]])
    dense = np.concatenate([np.linspace(waypoints[0], waypoints[1], 61), np.linspace(waypoints[1], waypoints[2], 39)[1:]])
    route = Describer(graph, room_map, grid).describe_route(dense, waypoints, start_yaw=0.0)
    verifier, synth = Verifier(graph), Synthesizer("fine_grained")
    rng = np.random.default_rng(3)
    for _ in range(20):
        instr = synthesize_verified(lambda: synth.route(route, rng), verifier, max_tries=1)
        text = instr.text.lower()
        sofa = min(text.find(w) for w in ("sofa", "couch") if w in text)
        kitchen = text.find("kitchen")
        fridge = min(text.find(w) for w in ("fridge", "refrigerator") if w in text)
        assert 0 <= sofa < kitchen < fridge            # landmarks and rooms in path order
        assert "left" in text and "right" not in text
        assert _grammar_problems(instr.text) == [], instr.text


# ---------------------------------------------------------------------------------------------
# Verifier

def _mug_instruction(text: str, *extra: Mention) -> GroundedInstruction:
    start = text.index("red mug")
    return GroundedInstruction(text, [Mention("object", (start, start + 7), category="mug", instance_id=2,
                                              attributes=(("color", "red"),)), *extra])


def test_verifier_accepts_a_true_instruction(graph):
    text = "Find the red mug on the dining table in the kitchen."
    a, b, k = text.index("red mug"), text.index("dining table"), text.index("kitchen")
    instr = _mug_instruction(text,
                             Mention("object", (b, b + 12), category="dining_table", instance_id=3),
                             Mention("relation", (a, b + 12), relation="on", subject="obj:2", target="obj:3"),
                             Mention("room", (k, k + 7), category="kitchen", room_id=1),
                             Mention("relation", (k, k + 7), relation="in", subject="obj:2", target="room:1"))
    assert Verifier(graph).check(instr) == []


def test_verifier_rejects_an_absent_object(graph):
    text = "Find the red mug next to the piano."
    p = text.index("piano")
    claimed = _mug_instruction(text, Mention("object", (p, p + 5), category="piano"))
    problems = Verifier(graph).check(claimed)
    assert any("no object of category 'piano'" in p for p in problems)
    unclaimed = _mug_instruction(text)                          # free-text hallucination, no mention at all
    assert any("'piano'" in p and "not supported" in p for p in Verifier(graph).check(unclaimed))


def test_verifier_rejects_a_wrong_room(graph):
    text = "Find the red mug in the living room."
    k = text.index("living room")
    instr = _mug_instruction(text, Mention("room", (k, k + 11), category="living_room", room_id=0),
                             Mention("relation", (k, k + 11), relation="in", subject="obj:2", target="room:0"))
    problems = Verifier(graph).check(instr)
    assert problems == ["'living room' at 24: object 2 is in room 1, not room 0"]


def test_verifier_rejects_a_false_relation(graph):
    text = "Find the red mug on the counter."
    a, c = text.index("red mug"), text.index("counter")
    instr = _mug_instruction(text, Mention("object", (c, c + 7), category="counter", instance_id=5),
                             Mention("relation", (a, c + 7), relation="on", subject="obj:2", target="obj:5"))
    problems = Verifier(graph).check(instr)
    assert len(problems) == 1 and "no edge obj:2 --on--> obj:5" in problems[0]


def test_verifier_rejects_wrong_attribute_category_and_room_type(graph):
    v = Verifier(graph)
    text = "Find the blue mug."
    blue = GroundedInstruction(text, [Mention("object", (9, 17), category="mug", instance_id=2,
                                              attributes=(("color", "blue"),))])
    assert any("color='red', not 'blue'" in p for p in v.check(blue))
    wrong_cat = GroundedInstruction("Find the sofa.", [Mention("object", (9, 13), category="sofa", instance_id=2)])
    assert any("is a 'mug', not a 'sofa'" in p for p in v.check(wrong_cat))
    wrong_type = GroundedInstruction("Go to the bedroom.", [Mention("room", (10, 17), category="bedroom", room_id=1)])
    assert any("is a 'kitchen', not a 'bedroom'" in p for p in v.check(wrong_type))
    # Symmetric relations hold either way round.
    near = GroundedInstruction("The fridge near the counter.", [
        Mention("object", (4, 10), category="fridge", instance_id=6),
        Mention("object", (20, 27), category="counter", instance_id=5),
        Mention("relation", (4, 27), relation="near", subject="obj:6", target="obj:5")])
    assert v.check(near) == []


# ---------------------------------------------------------------------------------------------
# Synthesizer and templates

def test_at_least_30_templates_per_task_type():
    for task in OWN_TASKS:
        tset = TEMPLATES.get(task)
        assert len({t.text for t in tset.templates}) >= 30, task


def test_coarse_styles_are_distinct():
    tset = TEMPLATES.get("coarse_grained")
    by_style = {s: {t.text for t in tset.select("goal", s)} for s in STYLES}
    assert all(len(v) >= 10 for v in by_style.values())
    assert not (by_style["formal"] & by_style["natural"]) and not (by_style["natural"] & by_style["casual"])
    # Casual phrasing is shorter and chattier than formal phrasing on average.
    mean_len = {s: np.mean([len(t) for t in v]) for s, v in by_style.items()}
    assert mean_len["casual"] < mean_len["formal"]


_ARTICLE = re.compile(r"\b(a|an) ([A-Za-z-]+)")


def _grammar_problems(text: str) -> list[str]:
    problems = []
    if not text[0].isupper():
        problems.append("does not start with a capital")
    if text[-1] not in ".?!":
        problems.append("does not end with punctuation")
    if "  " in text or " ," in text or " ." in text or ",," in text or "{" in text:
        problems.append("spacing/punctuation glitch")
    for sentence_start in re.finditer(r"[.?!] +([a-z])", text):
        problems.append(f"lower-case sentence start at {sentence_start.start(1)}")
    for m in _ARTICLE.finditer(text):
        if m.group(1) != indefinite_article(m.group(2)):
            problems.append(f"'{m.group(0)}'")
    if re.search(r"\b(the|a|an) (the|a|an)\b", text, re.IGNORECASE):
        problems.append("double determiner")
    for sentence in re.split(r"(?<=[.?!]) ", text):
        if len(re.findall(r"\bthen\b", sentence, re.IGNORECASE)) > 1:
            problems.append(f"'then' twice in '{sentence}'")
    return problems


@pytest.mark.parametrize("task", ["coarse_grained", "visual_reference", "dialogue"])
def test_every_goal_template_renders_grammatical_verified_text(graph, task):
    describer, verifier, synth = Describer(graph), Verifier(graph), Synthesizer(task)
    rng = np.random.default_rng(0)
    seen_templates = set()
    for iid in (2, 4, 6, 1, 7):
        facts = describer.describe_target(iid)
        for style in STYLES:
            for _ in range(25):
                instr = synth.goal(facts, style, rng)
                seen_templates.update(instr.template_ids)
                assert verifier.check(instr) == [], instr.text
                assert _grammar_problems(instr.text) == [], instr.text
                for m in instr.mentions:                 # every span names what it claims
                    words = instr.text[m.span[0]:m.span[1]]
                    assert words.strip() == words and words
    assert len(seen_templates) >= 30


def test_object_goal_and_chain_render(graph):
    verifier = Verifier(graph)
    rng = np.random.default_rng(1)
    og = Synthesizer("object_goal")
    texts = {og.category("mug", rng).text for _ in range(60)}
    assert len(texts) >= 20 and all(not _grammar_problems(t) for t in texts)
    assert all(verifier.check(og.category("mug", rng)) == [] for _ in range(20))
    assert verifier.check(og.category("piano", rng)) != []    # category absent from the scene
    single = {og.category("mug", rng, count=1).text for _ in range(80)}
    several = {og.category("mug", rng, count=3).text for _ in range(80)}
    assert not any("mugs" in t for t in single) and any(t.startswith("Find the mug") for t in single)
    assert not any(re.search(r"\b(Find|Go to) the mug\b", t) for t in several) and any("mugs" in t for t in several)
    describer, lh = Describer(graph), Synthesizer("long_horizon")
    subgoals = [describer.describe_target(i) for i in (1, 2, 6)]
    for _ in range(20):
        instr = lh.chain(subgoals, rng)
        assert verifier.check(instr) == [] and not _grammar_problems(instr.text), instr.text
        low = instr.text.lower()
        positions = [min(low.find(w) for w in words if w in low)
                     for words in (("sofa", "couch"), ("mug",), ("fridge", "refrigerator"))]
        assert positions == sorted(positions)               # sub-goals named in visiting order


def test_synthesis_is_deterministic_per_seed(graph):
    facts = Describer(graph).describe_target(2)
    synth = Synthesizer("coarse_grained")
    a = [synth.goal(facts, s, np.random.default_rng(7)).text for s in STYLES]
    b = [synth.goal(facts, s, np.random.default_rng(7)).text for s in STYLES]
    assert a == b and len(set(a)) == 3


# ---------------------------------------------------------------------------------------------
# LLM stage against a local fake OpenAI-compatible endpoint

class _FakeChat:
    """Queued replies for the fake endpoint (default "Find the red mug.") and the requests seen."""

    replies: list[str] = []
    requests: list[dict] = []


@pytest.fixture()
def fake_endpoint():
    _FakeChat.replies = []
    with openai_server(lambda body, n: _FakeChat.replies.pop(0) if _FakeChat.replies else "Find the red mug.") \
            as (url, requests):
        _FakeChat.requests = requests
        yield url


def _template_instruction(graph):
    facts = Describer(graph).describe_target(2)
    verifier = Verifier(graph)
    synth = Synthesizer("coarse_grained")
    rng = np.random.default_rng(0)
    while True:
        instr = synth.goal(facts, "formal", rng)
        if "{rel}" in synth.templates_by_id[instr.template_ids[0]].text:
            return instr, verifier


def test_llm_synthesizer_keeps_a_grounded_rewrite(graph, fake_endpoint):
    instr, verifier = _template_instruction(graph)
    good = "Please pick up the red mug sitting on the dining table in the kitchen."
    _FakeChat.replies = [good]
    llm = LLMSynthesizer(ChatClient(fake_endpoint, model="tiny", api_key="k"), verifier)
    out = llm.rewrite(instr, seed=5)
    assert out.text == good and out.template_ids[-1] == "llm"
    kinds = sorted((m.kind, m.relation or m.category) for m in out.mentions)
    assert ("relation", "on") in kinds and ("relation", "in") in kinds and ("room", "kitchen") in kinds
    on = next(m for m in out.mentions if m.relation == "on")
    assert (on.subject, on.target) == ("obj:2", "obj:3")
    colour = next(m for m in out.mentions if m.kind == "object" and m.instance_id == 2)
    assert colour.attributes == (("color", "red"),) and good[colour.span[0]:colour.span[1]] == "red mug"
    req = _FakeChat.requests[0]
    assert req["path"] == "/v1/chat/completions" and req["body"]["model"] == "tiny" and req["auth"] == "Bearer k"
    assert req["body"]["messages"][0]["role"] == "system" and instr.text in req["body"]["messages"][1]["content"]


@pytest.mark.parametrize("bad", [
    "Find the red mug next to the piano in the kitchen.",        # object absent from the scene
    "Find the red mug on the counter in the kitchen.",           # false relation (it is on the table)
    "Find the blue mug on the dining table.",                    # wrong colour
    "Find the red mug on the dining table in the living room.",  # wrong room
    "Find the red mug near the sofa.",                           # object not among the facts
])
def test_llm_synthesizer_rejects_ungrounded_rewrites(graph, fake_endpoint, bad):
    instr, verifier = _template_instruction(graph)
    _FakeChat.replies = [bad, bad]
    llm = LLMSynthesizer(ChatClient(fake_endpoint), verifier, max_tries=2)
    assert llm.rewrite(instr) is instr                       # falls back to the verified template text
    assert len(llm.rejections) == 2 and all(problems for _, problems in llm.rejections)


def test_llm_synthesizer_survives_an_unreachable_endpoint(graph):
    instr, verifier = _template_instruction(graph)
    llm = LLMSynthesizer(ChatClient("http://127.0.0.1:9/v1", timeout=0.5), verifier)
    assert llm.rewrite(instr) is instr and "127.0.0.1:9" in llm.rejections[0][1][0]


def test_frame_captioner_is_off_by_default_and_only_annotates(graph, grid_and_rooms):
    frames = [np.zeros((8, 8, 3), np.uint8)]
    assert Describer(graph).describe_target(2, frames=frames).caption is None
    calls = []

    def captioner(seen):
        calls.append(len(seen))
        return "a red mug on a wooden table"

    grid, room_map = grid_and_rooms
    described = Describer(graph, room_map, grid, captioner=captioner)
    facts = described.describe_target(2, frames=frames)
    assert facts.caption == "a red mug on a wooden table" and calls == [1]
    assert facts.relation.anchor.instance_id == 3            # the scene graph still decides the facts
    assert described.describe_target(2).caption is None and calls == [1]   # no frames, no call


def test_extract_mentions_reads_two_word_colours():
    from vlnverse.tasks.instructions.llm import _attribute_words, extract_mentions
    from vlnverse.tasks.instructions.types import ObjectRef, RoomRef

    bedroom = RoomRef(4, "bedroom")
    wardrobe = ObjectRef(73, "wardrobe", bedroom, (("color", "light_wood"), ("material", "wood")))
    words = _attribute_words([{"attributes": {"color": "light_wood", "material": "wood"}}])
    text = "Open the large light wood wardrobe in the bedroom."
    mentions, unresolved = extract_mentions(text, Lexicon(), [wardrobe], [bedroom], words)
    obj = next(m for m in mentions if m.kind == "object")
    assert unresolved == [] and text[obj.span[0]:obj.span[1]] == "large light wood wardrobe"
    assert sorted(obj.attributes) == [("color", "light_wood"), ("size", "large")]
    rel = next(m for m in mentions if m.kind == "relation")
    assert (rel.relation, rel.subject, rel.target) == ("in", "obj:73", "room:4")
    _, unresolved = extract_mentions("Open the wardrobe next to the piano.", Lexicon(), [wardrobe], [bedroom], words)
    assert unresolved == ["piano"]


def test_corner_cut_into_short_segments_is_one_turn(graph, grid_and_rooms):
    grid, room_map = grid_and_rooms
    # Two 45-degree bends 0.4 m apart make one left turn; a 20-degree jog 3 m later makes none.
    waypoints = np.array([[1.0, 1.0], [3.0, 1.0], [3.3, 1.3], [3.3, 3.3], [3.3 - 0.36, 4.3]])
    dense = np.concatenate([np.linspace(a, b, max(2, int(np.hypot(*(b - a)) / 0.05)))[:-1]
                            for a, b in zip(waypoints[:-1], waypoints[1:])] + [waypoints[-1:]])
    route = Describer(graph, room_map, grid).describe_route(dense, waypoints, start_yaw=0.0)
    turns = [e for e in route.events if e.kind == "turn"]
    assert [t.direction for t in turns] == ["left"]
    assert turns[0].s == pytest.approx(2.0, abs=0.06)
    apart = Describer(graph, room_map, grid, turn_merge=0.2).describe_route(dense, waypoints, start_yaw=0.0)
    assert [e.direction for e in apart.events if e.kind == "turn"] == ["left", "left"]


def test_long_stretches_get_a_distance_clause(graph, grid_and_rooms):
    grid, room_map = grid_and_rooms
    waypoints = np.array([[0.5, 3.0], [9.5, 3.0]])
    dense = np.linspace(waypoints[0], waypoints[1], 181)
    # With a 0.6 m landmark radius the sofa (0.8 m) and the dining table (1.4 m) are not passed.
    route = Describer(graph, room_map, grid, landmark_radius=0.6).describe_route(dense, waypoints, start_yaw=0.0)
    assert [(e.kind, round(e.s, 1)) for e in route.events] == [("start", 0.0), ("enter", 4.5), ("stop", 9.0)]
    assert route.events[-1].landmark.category == "counter"          # 0.7 m from the end point
    synth, verifier = Synthesizer("fine_grained"), Verifier(graph)
    rng = np.random.default_rng(0)
    for _ in range(10):
        text = synthesize_verified(lambda: synth.route(route, rng), verifier, max_tries=1).text
        assert len(re.findall(r"about five metres", text)) == 2, text   # 4.5 m before and after the door
        assert _grammar_problems(text) == [], text


def test_verifier_rejects_placeholders(graph):
    """A placeholder ("unknown", "None", an unfilled slot, a raw id) never passes the Verifier."""
    from vlnverse.tasks.instructions.verifier import placeholder_problems

    text = "Find the red mug in the unknown."
    at = text.index("unknown")
    assert any(f"'unknown' at {at}: placeholder" in p for p in Verifier(graph).check(_mug_instruction(text)))

    bad = ["Head to the unknown; the target is the cup on the table.", "Cup in the unknown. Go go go.",
           "Go to the {room} and stop.", "Walk to room_3.", "Find the None.", "Stop at the <target>.",
           "Go to the living_room."]
    for text in bad:
        assert placeholder_problems(text), text
    assert placeholder_problems("Head to the unknown; the cup.")[0].startswith("'unknown' at 12")
    good = ["Go to the kids' room, then find the mug on the dining table.", "Head to the room; the cup is there.",
            "Turn left (about 90 degrees) and stop at the T-shirt."]
    for text in good:
        assert placeholder_problems(text) == [], text


def test_every_casual_template_carries_the_target():
    """A casual line always names what to find ("Go go go." alone says nothing)."""
    target_slots = ("{target", "{a_target", "{object", "{a_object", "{category", "{a_category", "{the_category",
                    "{categories", "{g1")
    casual = [t for task in TEMPLATES.names() for t in TEMPLATES.get(task).templates
              if getattr(t, "style", None) == "casual"]
    assert len(casual) >= 30
    assert [t.template_id for t in casual if not any(slot in t.text for slot in target_slots)] == []
    assert not [t.template_id for t in casual if "go go" in t.text.lower()]


def test_route_names_each_landmark_once(graph):
    """The audit's case: a turn near the dining table, another turn at it, the stop by it — the
    dining table is said once, at the stop; turns near it become plain turns."""
    from vlnverse.tasks.instructions.types import ObjectRef, RoomRef, RouteEvent, RouteFacts

    kitchen = RoomRef(1, "kitchen")
    table = ObjectRef(3, "dining_table", room=kitchen)
    sofa = ObjectRef(1, "sofa", room=RoomRef(0, "living_room"))
    events = (RouteEvent("turn", 1.0, landmark=table, direction="left"),
              RouteEvent("pass", 1.5, landmark=sofa),
              RouteEvent("turn", 2.0, landmark=table, direction="left"),
              RouteEvent("pass", 2.5, landmark=sofa),
              RouteEvent("stop", 3.0, room=kitchen, landmark=table))
    facts = RouteFacts(rooms=(kitchen,), landmarks=(table, sofa), events=events, length=3.0)
    synth = Synthesizer("fine_grained")
    for seed in range(30):
        text = synth.route(facts, np.random.default_rng(seed)).text.lower()
        assert text.count("dining table") + text.count("table") - text.count("dining table") == 1, text
        assert text.count("sofa") + text.count("couch") == 1, text
        assert text.count("left") == 2, text                    # both turns are still said
