"""Verifier: checks every claim of a ``GroundedInstruction`` against the scene graph.

A claim is a ``Mention``: an object of a category (with attributes), a room of a type, or a
relation edge (``mug on table``, ``mug in kitchen``). The text is also scanned with the
``Lexicon``: every object/room word in it must be covered by a verified mention of a matching
category, so a free-text hallucination ("walk past the piano" in a house without one, or an
LLM rewrite adding an unsupported object) is caught even when no mention claims it.
"""
from __future__ import annotations

import re

from ...scenes.labels import GENERIC_ROOM
from .graph import SceneGraphView
from .lexicon import Lexicon
from .types import MENTION_KINDS, SYMMETRIC_RELATIONS, GroundedInstruction, Mention


#: What a placeholder looks like in generated text: filler words standing in for a missing
#: name, unfilled template slots (``{room}``, ``<obj>``, ``[target]``, ``$x``) and raw
#: identifiers (``room_3``, ``obj:12``, ``living_room``) that never belong in an instruction.
PLACEHOLDER_PATTERN = re.compile(
    r"(?<![\w-])(unknown|unnamed|unlabel(?:l)?ed|undefined|none|null|nan|n/a|todo|tbd|xxx|placeholder)(?![\w-])"
    r"|\{[^{}]*\}|<[^<>]*>|\[[^\[\]]*\]|\$\w+"
    r"|\b(?:room|obj|object)[_:]\d+\b|\b[a-z]+_[a-z_]+\b",
    re.IGNORECASE)


def placeholder_problems(text: str) -> list[str]:
    """One problem per placeholder in ``text`` (``unknown``, ``None``, ``{slot}``, ``room_3``,
    ``living_room`` ...): an instruction containing any of them is rejected by the Verifier."""
    return [f"'{m.group(0)}' at {m.start()}: placeholder in the instruction text"
            for m in PLACEHOLDER_PATTERN.finditer(text)]


def _node_kind_id(node: str | None) -> tuple[str, int] | None:
    if not node or ":" not in node:
        return None
    kind, _, ident = node.partition(":")
    try:
        return kind, int(ident)
    except ValueError:
        return None


class Verifier:
    """Checks instructions against a scene graph; ``check`` returns problems (empty = verified)."""

    def __init__(self, scene_graph, lexicon: Lexicon | None = None):
        self.view = scene_graph if isinstance(scene_graph, SceneGraphView) else SceneGraphView(scene_graph)
        self.lexicon = lexicon or Lexicon(self.view.categories(), self.view.room_types())

    # ------------------------------------------------------------------ mentions
    def check_mention(self, mention: Mention, text: str) -> list[str]:
        """Problems with one mention (empty list when the scene graph supports it)."""
        where = f"'{text[mention.span[0]:mention.span[1]]}' at {mention.span[0]}"
        if mention.kind not in MENTION_KINDS:
            return [f"{where}: unknown mention kind '{mention.kind}'"]
        if not (0 <= mention.span[0] < mention.span[1] <= len(text)):
            return [f"mention span {mention.span} outside the text (length {len(text)})"]
        if mention.kind == "object":
            return self._check_object(mention, text, where)
        if mention.kind == "room":
            return self._check_room(mention, text, where)
        return self._check_relation(mention, where)

    def _words_match(self, mention: Mention, text: str, kind: str) -> bool:
        segment = text[mention.span[0]:mention.span[1]]
        return any(hit.kind == kind and mention.category in hit.names for hit in self.lexicon.find(segment))

    def _check_object(self, m: Mention, text: str, where: str) -> list[str]:
        problems = []
        if not self._words_match(m, text, "object"):
            problems.append(f"{where}: text does not name a {m.category}")
        if m.instance_id is None:
            if m.category not in self.view.categories():
                problems.append(f"{where}: the scene has no object of category '{m.category}'")
            return problems
        obj = self.view.objects.get(m.instance_id)
        if obj is None:
            return problems + [f"{where}: object {m.instance_id} does not exist in the scene"]
        if obj["category"] != m.category:
            problems.append(f"{where}: object {m.instance_id} is a '{obj['category']}', not a '{m.category}'")
        actual = obj.get("attributes") or {}
        for key, value in m.attributes:
            if actual.get(key) != value:
                problems.append(f"{where}: object {m.instance_id} has {key}={actual.get(key)!r}, not {value!r}")
        return problems

    def _check_room(self, m: Mention, text: str, where: str) -> list[str]:
        problems = []
        if not self._words_match(m, text, "room"):
            problems.append(f"{where}: text does not name a {m.category}")
        if m.room_id is None:
            if m.category not in self.view.room_types():
                problems.append(f"{where}: the scene has no room of type '{m.category}'")
            return problems
        room = self.view.rooms.get(m.room_id)
        if room is None:
            return problems + [f"{where}: room {m.room_id} does not exist in the scene"]
        if room["room_type"] != m.category:
            problems.append(f"{where}: room {m.room_id} is a '{room['room_type']}', not a '{m.category}'")
        return problems

    def _check_relation(self, m: Mention, where: str) -> list[str]:
        subject, target = _node_kind_id(m.subject), _node_kind_id(m.target)
        if subject is None or target is None or subject[0] != "obj":
            return [f"{where}: relation '{m.relation}' needs an object subject and a node target, "
                    f"got {m.subject!r} -> {m.target!r}"]
        if subject[1] not in self.view.objects:
            return [f"{where}: relation subject object {subject[1]} does not exist"]
        if target[0] == "room":
            if m.relation != "in":
                return [f"{where}: relation '{m.relation}' to a room is not supported (expected 'in')"]
            actual = self.view.room_of(subject[1])
            if actual != target[1]:
                return [f"{where}: object {subject[1]} is in room {actual}, not room {target[1]}"]
            return []
        if target[1] not in self.view.objects:
            return [f"{where}: relation target object {target[1]} does not exist"]
        if self.view.has_relation(subject[1], m.relation, m.target, symmetric=m.relation in SYMMETRIC_RELATIONS):
            return []
        return [f"{where}: the scene graph has no edge {m.subject} --{m.relation}--> {m.target}"]

    # ------------------------------------------------------------------ whole instruction
    def check(self, instruction: GroundedInstruction) -> list[str]:
        """All problems of an instruction: placeholders (``placeholder_problems``), unsupported
        mentions and uncovered vocabulary words."""
        text = instruction.text
        problems: list[str] = placeholder_problems(text)
        verified: list[Mention] = []
        for mention in instruction.mentions:
            found = self.check_mention(mention, text)
            problems.extend(found)
            if not found:
                verified.append(mention)
        for hit in self.lexicon.find(text):
            covered = any(m.kind == hit.kind and m.category in hit.names
                          and m.span[0] <= hit.span[0] and hit.span[1] <= m.span[1] for m in verified)
            if not covered and hit.kind == "room" and hit.names == {GENERIC_ROOM}:
                continue  # the plain noun "room" ("which room it is in") claims nothing by itself
            if not covered:
                problems.append(f"'{text[hit.span[0]:hit.span[1]]}' at {hit.span[0]}: {hit.kind} word not "
                                f"supported by any verified mention")
        return problems

    def is_valid(self, instruction: GroundedInstruction) -> bool:
        """True when ``check`` finds no problem."""
        return not self.check(instruction)
