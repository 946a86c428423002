"""Coarse-grained goal descriptions, language version 2: the version-1 templates plus more verbs,
connectives and clause orders in each of the three styles, kept apart by register.

* ``formal``: impersonal imperatives and written connectives ("Proceed to …", "Upon entering …",
  "kindly", "thereafter"), no contractions;
* ``natural``: polite spoken requests ("Could you …", "I'd like you to …", "please");
* ``casual``: lower-case, clipped, slangy ("yo", "gonna", "real quick"), no "please".

Slots as in ``templates`` (``{target}``, ``{a_target}``, ``{target_noun}``,
``{rel}``, ``{room}``, ``{room_noun}``). ``family(template_id)`` (even/odd position) partitions the
set for a language-shift split, as in ``instructions.route_language``.
"""
from __future__ import annotations

from ...instructions.template_sets import Template, TemplateSet
from .templates import CASUAL, FORMAL, NATURAL

FORMAL_V2 = [
    "Upon entering {room}, proceed to {target} {rel}.",
    "Kindly make your way to {room} and position yourself beside {target} {rel}.",
    "The objective is {target} {rel}, situated in {room}.",
    "Traverse to {room}; thereafter, approach {target} {rel}.",
    "You are required to reach {target} {rel} in {room}.",
    "Advance to {target} {rel} and remain there.",
    "Locate {target} {rel}, which is situated in {room}, and halt beside it.",
    "Your assignment is to navigate to {target} {rel}.",
    "Within {room}, identify {target} {rel} and proceed to it.",
    "Make your way to {target} {rel}; it is located in {room}.",
    "Approach {target} {rel} and conclude your route there.",
    "Proceed directly to {target} {rel} in {room} and await further instructions.",
    "Relocate to {room} and station yourself adjacent to {target} {rel}.",
    "Having entered {room}, position yourself next to {target} {rel}.",
    "The destination is {target}, which can be found in {room}.",
    "Navigate toward {target} {rel} and terminate the task upon arrival.",
]
NATURAL_V2 = [
    "Would you mind heading to {room} and finding {target} {rel}?",
    "I'd like you to find {target} {rel}. It should be in {room}.",
    "When you get to {room}, could you go over to {target} {rel}?",
    "Could you please stop next to {target} {rel} in {room}?",
    "Let's have you go to {target} {rel}, please.",
    "I think {target} {rel} is in {room}. Could you go there?",
    "Please make your way over to {target} {rel} in {room}.",
    "Head into {room} for me and stand by {target} {rel}, please.",
    "If you could walk to {target} {rel}, that would be great.",
    "Can you go to {room}? I need you by {target} {rel}.",
    "Please go find {a_target} {rel} in {room} and wait there.",
    "Could you go and stand beside {target} {rel}?",
    "I'd appreciate it if you went to {target} {rel} in {room}.",
    "There's {a_target} {rel} over in {room}. Can you head there?",
    "Do you see {target} {rel}? Please walk up to it.",
    "Please pop into {room} and go to {target} {rel}.",
]
CASUAL_V2 = [
    "yo, {target_noun} {rel} in {room}, go",
    "gonna need you at {target} {rel}",
    "hop over to {room} and hit {target} {rel}",
    "run to {target} {rel} real quick",
    "{room_noun}, {target_noun} {rel}, go",
    "cruise over to {target} {rel}, k?",
    "scoot into {room} and find {target} {rel}",
    "head to {target} {rel}, cool?",
    "just hit up {target} {rel} in {room}",
    "go chill by {target} {rel}",
    "you know {target} {rel}? Go there",
    "ok so, {room}, then {target} {rel}",
    "get yourself to {target} {rel}, thx",
    "zip over to {target} in {room}",
    "go park it by {target} {rel}",
    "wander over to {target} {rel} in {room}, no rush",
]


def family(template_id: str) -> int:
    """The language-split family (0 or 1) of a template id (its last number's parity)."""
    return int(template_id.rsplit("_", 1)[1]) % 2


def template_set(task_type: str = "coarse_grained") -> TemplateSet:
    """Version-1 coarse-grained templates plus the version-2 ones, by style."""
    templates = [Template(f"coarse_{style}_{i:02d}", text, style=style)
                 for style, texts in (("formal", FORMAL), ("natural", NATURAL), ("casual", CASUAL))
                 for i, text in enumerate(texts)]
    templates += [Template(f"coarse2_{style}_{i:02d}", text, style=style)
                  for style, texts in (("formal", FORMAL_V2), ("natural", NATURAL_V2), ("casual", CASUAL_V2))
                  for i, text in enumerate(texts)]
    return TemplateSet(task_type, templates)


__all__ = ["CASUAL_V2", "FORMAL_V2", "NATURAL_V2", "family", "template_set"]
