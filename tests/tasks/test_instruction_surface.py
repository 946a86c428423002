"""Surface form of generated instructions across task types: sentences start with a capital,
end with punctuation, and no placeholder or doubled word leaks through."""
from __future__ import annotations

import re

import numpy as np
import pytest

from vlnverse.scenes.procgen import generate_home
from vlnverse.tasks.base import TASKS, context_from_description, load_task_config, load_task_types

load_task_types()
TEXT_TASKS = ["fine_grained", "coarse_grained", "long_horizon", "dialogue", "object_goal", "false_premise"]


@pytest.fixture(scope="module")
def ctx():
    return context_from_description(generate_home(5), "r2r_ce")


@pytest.mark.parametrize("task", TEXT_TASKS)
def test_instructions_are_well_formed_sentences(ctx, task):
    episodes = TASKS.get(task)(load_task_config(task)).generate(ctx, np.random.default_rng(3), 6, "train")
    assert episodes, f"{task}: no episodes generated"
    for ep in episodes:
        for instr in ep.instructions:
            text = instr.text
            assert text[:1].isupper(), (task, text)
            assert text[-1] in ".!?", (task, text)
            assert not re.search(r"[.!?] +[a-z]", text), (task, text)  # a sentence starting lower-case
            assert not re.search(r"[{}_]|\s{2,}|\s[,.!?]", text), (task, text)  # placeholder / spacing
            assert not re.search(r"\b(\w+) \1\b", text, re.IGNORECASE), (task, text)  # "the the"


def test_no_template_starts_a_sentence_in_lower_case():
    """Template literals: after a full stop, question or exclamation mark inside the text the next
    sentence starts with a capital (slots are filled with noun phrases, never sentence starts)."""
    from vlnverse.tasks.instructions.synthesizer import TEMPLATES

    assert len(TEMPLATES.names()) >= 8
    for task in TEMPLATES.names():
        for template in TEMPLATES.get(task).templates:
            literal = re.sub(r"\{[a-z_]+\}", "X", template.text)
            assert not re.search(r"[.!?] +[a-z]", literal), (task, template.template_id, template.text)
