"""Fine-grained (R2R-style) step clauses in a single natural, second-person style.

Parts: ``exit``/``begin`` (leaving the start), ``pass`` (a landmark), ``turn``/``turn_at``/
``turn_around``/``turn_into`` (heading changes, optionally at a landmark or into a room),
``enter`` (a new room), ``straight`` (a long stretch: ``{dist}`` = "about five metres") and the
end point ``stop_at``/``stop_at_in``/``stop_in``/``stop``.
"""
from ...instructions.template_sets import Template, register_templates

PARTS = {
    "exit": ["exit {room}", "leave {room}", "walk out of {room}", "head out of {room}", "step out of {room}"],
    "begin": ["walk forward", "go straight ahead", "start walking forward", "move ahead"],
    "pass": ["walk past {landmark}", "go past {landmark}", "continue past {landmark}", "pass {landmark}",
             "keep going past {landmark}"],
    "turn_at": ["turn {dir} at {landmark}", "take a {dir} at {landmark}", "turn {dir} by {landmark}",
                "make a {dir} turn near {landmark}", "go {dir} when you reach {landmark}"],
    "turn": ["turn {dir}", "take a {dir}", "make a {dir} turn", "bear {dir}"],
    "turn_around": ["turn around", "turn all the way around", "make a U-turn"],
    "enter": ["enter {room}", "go into {room}", "walk into {room}", "step into {room}", "continue into {room}",
              "go through the doorway into {room}", "pass through the door into {room}"],
    "straight": ["walk straight for {dist}", "continue forward for {dist}", "go straight ahead for {dist}",
                 "keep walking for {dist}"],
    "turn_into": ["turn {dir} into {room}", "take a {dir} into {room}", "go {dir} into {room}",
                  "make a {dir} turn into {room}"],
    "stop_at": ["stop by {landmark}", "wait next to {landmark}", "stop in front of {landmark}",
                "stop when you reach {landmark}", "come to a stop near {landmark}", "stop at {landmark}"],
    "stop_at_in": ["stop by {landmark} in {room}", "wait next to {landmark} in {room}",
                   "stop at {landmark} in {room}"],
    "stop_in": ["stop once you are in {room}", "wait inside {room}", "stop in {room}", "stop as you enter {room}"],
    "stop": ["walk a few more steps and stop", "continue a little further and stop", "stop after a few steps",
             "go a bit further and wait there"],
}

register_templates("fine_grained", [Template(f"fine_{part}_{i:02d}", text, part=part)
                                    for part, texts in PARTS.items() for i, text in enumerate(texts)])
