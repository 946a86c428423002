"""Dialogue-task goal descriptions: brief goals that invite questions to the oracle."""
from ...instructions.template_sets import register_templates, styled_templates

FORMAL = [
    "Locate {target} {rel}. You may ask for directions at any time.",
    "Proceed to {target}. Ask the guide if you are unsure of the way.",
    "Find {target} in {room}. Questions to the guide are permitted.",
    "Navigate to {target} {rel}; consult the guide when needed.",
    "Your goal is {target}. Request assistance if required.",
    "Go to {room} and find {target}. You may ask where it is.",
    "Locate {a_target} {rel}. Ask for help if you lose your way.",
    "Find {target}. The guide can tell you which room it is in.",
    "Proceed to {target} {rel} in {room}; ask if you need directions.",
    "Approach {target}. Directions are available on request.",
    "Go to {target} {rel}. The guide will answer your questions.",
]
NATURAL = [
    "Could you find {target}? Feel free to ask me if you get lost.",
    "Please go to {target} {rel}. Ask me anything along the way.",
    "Can you find {target} in {room}? I'm here if you need help.",
    "Go look for {target}, and ask me if you're not sure where it is.",
    "Please find {a_target} {rel}. Just ask if you need a hint.",
    "I need you at {target}. Ask me for directions whenever you like.",
    "Find {target} {rel}, please. I can tell you which way to go.",
    "Could you head to {target}? Ask if you can't find it.",
    "Please go to {room} and find {target}. I'll help if you ask.",
    "Try to find {target} {rel}, and ask me if you get stuck.",
    "Go find {target}. I can tell you which room it's in.",
]
CASUAL = [
    "find {target}, ask me if you're lost",
    "go get to {target} {rel}, holler if you need help",
    "{target_noun} somewhere around, ask me where",
    "head to {target}, I'll give hints",
    "find that {target_noun} {rel}, just ask if stuck",
    "go to {target} in {room}, ask away",
    "need you at {target}, ping me for directions",
    "find {a_target} {rel}, I'm around if you need me",
    "{target_noun} {rel}. Go, ask if lost",
    "go find {target}, shout if you can't",
    "get to {target}, ask me which way",
]

register_templates("dialogue", styled_templates("dialogue", {"formal": FORMAL, "natural": NATURAL, "casual": CASUAL}))
