"""The semantic label table shared by every simulator backend (MuJoCo, Isaac Sim): semantic id →
label name, the same ids in every generated home."""
from __future__ import annotations

from typing import Sequence

from ..scenes.description import STRUCTURE_LABELS, SceneDescription


def default_label_table() -> list[str]:
    """``background``, the structure labels, then every object category of the scene catalog in
    sorted order: semantic ids are the same in every generated home."""
    try:
        from ..scenes.catalog import CATEGORIES
    except ImportError:  # scene catalog not installed: structure labels only
        CATEGORIES = {}
    structure = ["background", *STRUCTURE_LABELS]
    return structure + sorted(set(CATEGORIES) - set(structure))


def label_table_for(desc: SceneDescription, base: Sequence[str] | None = None) -> list[str]:
    """Label table of a scene: ``base`` (default ``default_label_table()``) followed by the scene's
    labels missing from it, sorted; index 0 is always ``background``."""
    table = list(base) if base else default_label_table()
    if not table or table[0] != "background":
        table = ["background", *[t for t in table if t != "background"]]
    known = set(table)
    extra = sorted({g.label for g in desc.geoms} | {o.category for o in desc.objects} - known)
    return table + [label for label in extra if label not in known]
