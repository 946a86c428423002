"""The tolerant action parser on realistic MLLM answers (VLN-MME App. D.5)."""
from __future__ import annotations

import pytest

from vlnverse.eval.mllm.parsing import parse_action

MARKERS = [1, 2, 3, 4]
DIRECTIONS = {"left": [1], "front": [2, 3], "right": [4]}

# (answer, expected kind, expected marker)
CASES = [
    ("Action: 2", "move", 2),
    ("action: 3", "move", 3),
    ("ACTION: 1", "move", 1),
    ("Action:4", "move", 4),
    ("**Action:** 2", "move", 2),
    ("### Action\n: 3", "move", 3),
    ("```\nAction: 1\n```", "move", 1),
    ("Thought: the kitchen is on the left.\nAction: 1", "move", 1),
    ("<Reasoning>I see a staircase ahead (marker 3), but the instruction says turn left first.</Reasoning>\nAction: 1",
     "move", 1),
    ("Action: marker 3", "move", 3),
    ("Action: Marker #4", "move", 4),
    ("Action: [2]", "move", 2),
    ("Action: option two", "move", 2),
    ("Action: Three", "move", 3),
    ("Action: '4'", "move", 4),
    ("Action: 2 (the doorway in front)", "move", 2),
    ("Action: go to viewpoint 3.", "move", 3),
    ("Final Action: 4", "move", 4),
    ("Next action - 1", "move", 1),
    ('{"action": 2}', "move", 2),
    ('```json\n{"Action": "3", "reason": "hallway"}\n```', "move", 3),
    ('{"thought": "the bedroom is behind me", "action": "STOP"}', "stop", None),
    ("Action: STOP", "stop", None),
    ("action: stop", "stop", None),
    ("Action: Stop.", "stop", None),
    ("**Action: STOP** — I have reached the bathroom.", "stop", None),
    ("STOP", "stop", None),
    ("3", "move", 3),
    ("three", "move", 3),
    ("Left", "move", 1),
    ("Action: Front", "move", 2),
    ("Action: turn right", "move", 4),
    ("Action: go straight ahead", "move", 2),
    ("I will choose marker 4 because it leads to the hallway with the paintings.", "move", 4),
    ("Looking at the views, the best option is to go to viewpoint 1, near the sofa.", "move", 1),
    ("After careful thought I select option #2 since it passes the dining table.", "move", 2),
    ("I have arrived next to the bed, so I will stop here.", "stop", None),
    ("<Reasoning>The table is at marker 2.</Reasoning>\n<Reflection>Moving to 2 matches the instruction.</Reflection>\n"
     "<Final Decision> keep\nAction: 2", "move", 2),
    ("Action: 3\n<Reflection>Marker 3 goes back where I came from; the instruction says continue forward.</Reflection>\n"
     "Final Decision: revise\nAction: 2", "move", 2),
    ("Reasoning: 1) progress: passed the kitchen. 2) next: enter the hallway.\nPrediction: the hallway is at 4.\nAction: 4",
     "move", 4),
    ("action : 1\n\nExplanation: this leads to the stairs (marker 3 is a dead end).", "move", 1),
    ("<Reasoning>The sofa is behind me, so I go ahead.\nAction: 2", "move", 2),  # unclosed tag
    ("<Reasoning>Maybe marker 4?</Reasoning> Action: 3", "move", 3),
]


@pytest.mark.parametrize("answer,kind,marker", CASES)
def test_realistic_answers(answer, kind, marker):
    parsed = parse_action(answer, MARKERS, DIRECTIONS)
    assert parsed.ok, parsed.error
    assert (parsed.kind, parsed.marker) == (kind, marker)


def test_at_least_forty_realistic_answers():
    assert len(CASES) + len(FAILURES) + len(DECISIONS) >= 40


FAILURES = [
    ("", "empty"),
    ("   \n", "empty"),
    ("Action: 7", "invalid_marker"),
    ("Action: marker 12", "invalid_marker"),
    ("Action: Back", "invalid_direction"),
    ("I am not sure where to go; the picture is dark and there are many doors.", "malformed"),
    ("Action: I don't know", "malformed"),
    ("Action: FOUND", "not_allowed"),
]


@pytest.mark.parametrize("answer,kind", FAILURES)
def test_bad_answers_name_the_problem(answer, kind):
    parsed = parse_action(answer, MARKERS, DIRECTIONS)
    assert not parsed.ok and parsed.error_kind == kind
    assert parsed.error  # the text sent back in the re-prompt


DECISIONS = [
    ("Action: NOT_FOUND", "not_found"),
    ("Action: not found", "not_found"),
    ("Action: Not-Found", "not_found"),
    ("Action: FOUND", "found"),
    ('{"action": "found"}', "found"),
    ("I searched the whole kitchen and the kettle is not found.", "not_found"),
]


@pytest.mark.parametrize("answer,kind", DECISIONS)
def test_false_premise_decisions(answer, kind):
    assert parse_action(answer, MARKERS, DIRECTIONS, decisions=True).kind == kind


@pytest.mark.parametrize("answer,kind", [
    ("Action: STOP", "found"), ("STOP", "found"), ("FOUND", "found"), ("Action: NOT FOUND", "not_found"),
    ("not_found", "not_found"), ("Action: not-found", "not_found"), ('{"decision": "NOT_FOUND"}', "not_found"),
    ('{"found": false}', "not_found"), ('{"target_found": true}', "found"), ('{"action": "found"}', "found"),
    ("**Action:** NOT_FOUND", "not_found"), ("The mug is not here.\nAction: NOT FOUND", "not_found"),
])
def test_decision_variants_on_false_premise_tasks(answer, kind):
    """The forms the false-premise prompt states, and the obvious variants; a plain STOP is the
    ordinary stop, which claims the goal: FOUND."""
    assert parse_action(answer, MARKERS, DIRECTIONS, decisions=True).kind == kind


def test_the_false_premise_prompt_states_the_accepted_forms():
    from vlnverse.eval.mllm.agents import DECISION_RULE

    for form in ("'Action: FOUND'", "'Action: NOT_FOUND'", "'Action: NOT FOUND'", '{"action": "NOT_FOUND"}',
                 "'Action: STOP' counts as FOUND"):
        assert form in DECISION_RULE
        if form.startswith("'Action"):
            assert parse_action(form.strip("'").split("' ")[0], MARKERS, DIRECTIONS, decisions=True).ok
    # FOUND is not an action of an ordinary episode
    assert parse_action("Action: FOUND", MARKERS, DIRECTIONS).error_kind == "not_allowed"


def test_frame_answers():
    assert parse_action("Frame: 5", [], frames=12).frame == 5
    assert parse_action('{"frame": 3}', [], frames=12).frame == 3
    assert parse_action("The bedroom appears in frame index eleven.", [], frames=12).frame == 11
    assert parse_action("Frame: 12", [], frames=12).error_kind == "invalid_frame"


def test_questions_to_the_oracle():
    parsed = parse_action("Question: Is the bathroom upstairs?", MARKERS, DIRECTIONS, questions=True)
    assert parsed.kind == "ask" and parsed.question == "Is the bathroom upstairs?"
    assert parse_action("Question: Is the bathroom upstairs?", MARKERS, DIRECTIONS).error_kind == "malformed"


def test_reflection_fields_are_kept():
    parsed = parse_action(CASES[38][0], MARKERS, DIRECTIONS)
    assert parsed.decision == "revise" and "goes back" in parsed.reflection
