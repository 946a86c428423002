"""Object-goal (zero-grained) instructions: only a category name."""
from ...instructions.template_sets import Template, register_templates

TEXTS = [
    "Find {a_category}.",
    "Go to {a_category}.",
    "Navigate to {a_category}.",
    "Locate {a_category}.",
    "Find the nearest {category}.",
    "Go to the closest {category}.",
    "Navigate to any {category}.",
    "Search the house for {a_category}.",
    "Look for {a_category} and stop next to it.",
    "Find {a_category} in this house.",
    "Go stand next to {a_category}.",
    "Stop near {a_category}.",
    "Take me to {a_category}.",
    "Where is {a_category}? Go there.",
    "Walk to {a_category}.",
    "Reach {a_category}.",
    "Go find {a_category}.",
    "Can you find {a_category}?",
    "Please go to {a_category}.",
    "Head to the nearest {category}.",
    "Any {category} will do: go to one.",
    "Find one of the {categories}.",
    "Go to one of the {categories} in the house.",
    "Object goal: {category}.",
    "Target: {category}.",
    "{category}.",
    "Find {the_category}.",
    "Go to {the_category}.",
    "Bring yourself next to {a_category}.",
    "Explore until you find {a_category}.",
    "Move to {a_category} and stop.",
    "Approach {a_category}.",
]

register_templates("object_goal", [Template(f"objnav_{i:02d}", t) for i, t in enumerate(TEXTS)])
