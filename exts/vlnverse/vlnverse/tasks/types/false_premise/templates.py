"""False-premise (VLN-NF) goal descriptions: one template renders both episodes of a pair.

The feasible (FOUND) and the false-premise (NOT_FOUND) instruction of a pair come from the same
template and slots, only ``{target}``/``{a_target}``/``{target_noun}`` differ (the real target vs.
a plausible object absent from the room). Part ``landmark`` names a landmark through ``{rel}``
("on the counter"), which selects the landmark-cued reference exploration; part ``room`` only
names the room, which selects the greedy room-coverage exploration. Every template tells the agent
it may report that the object is not there.
"""
from ...instructions.template_sets import Template, register_templates

LANDMARK = {
    "formal": [
        "Proceed to {room} and locate {target} {rel}. If it is not there, report that it cannot be found.",
        "Navigate to {room} and find {target} {rel}; should it be absent, declare it not found.",
        "Go to {room} and verify whether {target} {rel} is present.",
        "Enter {room} and search for {target} {rel}. Report whether you found it.",
        "Locate {target} {rel} in {room}, or state that it is not there.",
        "Your task is to find {target} {rel} in {room}; report if it is missing.",
    ],
    "natural": [
        "Could you go to {room} and check for {target} {rel}? Tell me if it isn't there.",
        "Head into {room} and look for {target} {rel}. Let me know if you can't find it.",
        "I think there's {a_target} {rel} in {room}. Can you go find it?",
        "Please go to {room} and find {target} {rel}, or tell me it's not there.",
        "Go check {room} for {target} {rel}, please.",
        "There should be {a_target} {rel} in {room}. Could you look for it?",
    ],
    "casual": [
        "go check {room} for that {target_noun} {rel}",
        "pretty sure I left {a_target} {rel} in {room}, can you look?",
        "{room_noun}, {target_noun} {rel}. Is it there?",
        "hey, swing by {room} and find {target} {rel}",
        "look for {target} {rel} in {room}, tell me if it's gone",
        "find me {target} {rel} in {room}, or say it ain't there",
    ],
}
ROOM_ONLY = {
    "formal": [
        "Proceed to {room} and locate {target}. If it is not there, report that it cannot be found.",
        "Navigate to {room} and search it for {target}.",
        "Go to {room} and determine whether it contains {a_target}.",
        "Enter {room}, find {target}, or declare it not found.",
        "Search {room} thoroughly for {target} and report the outcome.",
        "Your task is to locate {target} in {room}; report if it is missing.",
    ],
    "natural": [
        "Could you go to {room} and see if there's {a_target}?",
        "Head into {room} and look around for {target}.",
        "I think I left {a_target} in {room}. Can you find it?",
        "Please check {room} for {target} and tell me if it's missing.",
        "Go to {room} and find {target}, please.",
        "Is there {a_target} in {room}? Go take a look.",
    ],
    "casual": [
        "check {room} for {a_target}",
        "{room_noun}, {target_noun}. There or not?",
        "go see if {target} is in {room}",
        "hunt down {target} in {room}, k?",
        "dig around {room} for {a_target}",
        "find {target} in {room} or tell me it's not there",
    ],
}

TEMPLATES = [Template(f"fp_{part}_{style}_{i:02d}", text, style=style, part=part)
             for part, table in (("landmark", LANDMARK), ("room", ROOM_ONLY))
             for style, texts in table.items() for i, text in enumerate(texts)]

register_templates("false_premise", TEMPLATES)
