"""Coarse-grained (REVERIE/SOON-style) goal descriptions in three styles."""
from ...instructions.template_sets import register_templates, styled_templates

FORMAL = [
    "Proceed to {room} and locate {target} {rel}.",
    "Navigate to {room}, where you will find {target} {rel}.",
    "Go to {room} and stop beside {target} {rel}.",
    "Locate {target} {rel} in {room}.",
    "Your destination is {target} {rel} in {room}.",
    "Enter {room} and approach {target} {rel}.",
    "Move to {target} {rel}.",
    "Find {target} that is {rel}.",
    "Proceed to {room} and stand next to {target}.",
    "Navigate to {target} located in {room}.",
    "Go to {target} and stop there.",
    "Approach {target} {rel} and wait there.",
    "Head to {room}; the target is {target} {rel}.",
]
NATURAL = [
    "Could you go to {room} and find {target} {rel}?",
    "Please head over to {target} {rel} in {room}.",
    "Can you find {target} {rel}? It's in {room}.",
    "Go into {room} and look for {target} {rel}.",
    "I'd like you to go to {target} {rel} in {room}, please.",
    "There's {a_target} {rel} in {room}. Please go to it.",
    "Please find {target} {rel}.",
    "Could you walk over to {target} in {room}?",
    "Head to {room} and stop when you reach {target}.",
    "Please go stand by {target}.",
    "Would you go find {target} {rel} for me?",
    "Go over to {room}, and find {a_target} {rel} there.",
    "Find {target} in {room}, please.",
]
CASUAL = [
    "grab me that {target_noun} {rel} in {room}, would ya?",
    "{room_noun}, {target_noun} {rel}. Go",
    "yo, head to {room} and find {target} {rel}",
    "go find that {target_noun} {rel}",
    "{target_noun} {rel} in {room}, go check it out",
    "that {target_noun} in {room}? Go there",
    "hey, go over to {target} {rel}",
    "swing by {room}, there's {a_target} {rel}",
    "find {target}, it's {rel}",
    "go to {target}, thanks",
    "{target_noun} in {room}, go find it",
    "need you at {target} {rel} in {room}",
    "just go find {target}",
]

register_templates("coarse_grained", styled_templates("coarse", {"formal": FORMAL, "natural": NATURAL, "casual": CASUAL}))
