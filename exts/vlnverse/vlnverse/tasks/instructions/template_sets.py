"""Instruction template sets by task type: ``Template``, ``TemplateSet``, the ``TEMPLATES``
registry and ``register_templates``. Below the ``Synthesizer`` and the built-in sets (each task
type's ``tasks/types/<type>/templates.py``), which both import it.

The built-in sets are named lazily (the task-type folders holding a ``templates`` module,
:func:`~vlnverse.tasks.registry.builtin_task_types`): ``TEMPLATES.get`` imports the task type's
package, which registers its set.

Slots available to goal templates: ``{target}`` ("the red mug"), ``{a_target}`` ("a red mug"),
``{target_noun}`` ("red mug"), ``{target_plain}`` ("the mug"), ``{rel}`` ("on the dining
table"), ``{room}`` ("the kitchen"), ``{room_noun}`` ("kitchen"). Route templates use
``{room}``, ``{landmark}``, ``{dir}`` (left/right). Chain frames use ``{g1}``…``{g3}``. Object-goal
templates use ``{a_category}``, ``{category}``, ``{the_category}``, ``{categories}``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from ...core.errors import UnknownNameError
from ...core.registry import Registry
from ..registry import builtin_task_types
from .phrases import slot_names

STYLES = ("formal", "natural", "casual")


@dataclass(frozen=True)
class Template:
    """One instruction template: ``text`` with ``{slot}`` fields, its style and clause ``part``."""

    template_id: str
    text: str
    style: str = "natural"
    part: str = "goal"

    @property
    def slots(self) -> set[str]:
        """Slot names used by the template text."""
        return slot_names(self.text)


class TemplateSet:
    """The templates of one task type; ``select`` filters by style, part and fillable slots."""

    def __init__(self, task_type: str, templates: Iterable[Template]):
        self.task_type = task_type
        self.templates = list(templates)
        ids = [t.template_id for t in self.templates]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ValueError(f"task '{task_type}': duplicate template ids {duplicates}")

    def __len__(self) -> int:
        return len(self.templates)

    def styles(self) -> list[str]:
        """Styles present in the set, in ``STYLES`` order first."""
        present = {t.style for t in self.templates}
        return [s for s in STYLES if s in present] + sorted(present - set(STYLES))

    def select(self, part: str, style: str | None = None, available: set[str] | None = None) -> list[Template]:
        """Templates of ``part`` (and ``style``) whose slots are all in ``available``."""
        return [t for t in self.templates if t.part == part and (style is None or t.style == style)
                and (available is None or t.slots <= available)]


#: Template sets by task type.
TEMPLATES: Registry[TemplateSet] = Registry("instruction template set")
for _name, _package in builtin_task_types(having="templates").items():
    TEMPLATES.register_lazy(_name, _package)


def styled_templates(prefix: str, styles: dict[str, list[str]]) -> list[Template]:
    """Templates ``<prefix>_<style>_<NN>`` of each style's texts, styles in the order given."""
    return [Template(f"{prefix}_{style}_{i:02d}", text, style=style) for style, texts in styles.items()
            for i, text in enumerate(texts)]


def register_templates(task_type: str, templates: Iterable[Template]) -> TemplateSet:
    """Register (or extend) the template set of ``task_type``; returns the set. A built-in set is
    loaded before a plug-in extends it."""
    templates = list(templates)
    existing: TemplateSet | None = None
    if task_type in TEMPLATES:
        try:
            existing = TEMPLATES.get(task_type)
        except UnknownNameError:  # a built-in set's own registration, while its package is imported
            pass
    tset = TemplateSet(task_type, (existing.templates if existing is not None else []) + templates)
    TEMPLATES.register(task_type, overwrite=existing is not None)(tset)
    return tset
