"""Synthesizer: turns verified facts into instruction text through task-specific templates.

Templates are registered per task type (``register_templates("coarse_grained", [...])``); each
``Template`` has a style (``formal``/``natural``/``casual``), a ``part`` (which kind of clause it
renders: ``goal``, ``exit``, ``turn_at``, ``chain3`` …) and ``{slot}`` fields. The
``Synthesizer`` chooses among the templates whose slots the facts can fill, using the caller's
``numpy`` generator, so the same seed gives the same text.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ...core.errors import VLNVerseError
from .grammar import capitalize_first, number_word
from .lexicon import Lexicon
from .phrases import Phrase, category_phrase, object_phrase, relation_phrase, render, room_phrase
from .template_sets import STYLES, TEMPLATES, Template, TemplateSet, register_templates  # noqa: F401 - re-exported
from .types import GroundedInstruction, RouteEvent, RouteFacts, TargetFacts


class InstructionError(VLNVerseError):
    """No instruction could be produced (no template fits the facts, or none passed the Verifier)."""


def _pick(rng: np.random.Generator, items: list):
    return items[int(rng.integers(len(items)))]


def _finish(phrase: Phrase) -> Phrase:
    text = phrase.text.rstrip()
    text = capitalize_first(text)
    if text[-1:] not in ".!?":
        text += "."
    return Phrase(text, phrase.mentions)


def distance_phrase(metres: float) -> str:
    """``"about five metres"`` (rounded to the metre; ``"about one metre"`` below 1.5 m)."""
    n = max(1, int(metres + 0.5))
    return f"about {number_word(n)} metre{'s' if n != 1 else ''}"


class Synthesizer:
    """Composes grounded instructions for one task type from its registered templates.

    ``straight_min``: a route stretch at least this long (m) without anything to mention gets a
    "walk straight for about N metres" clause.
    """

    straight_min = 4.0

    def __init__(self, task_type: str, lexicon: Lexicon | None = None, templates: TemplateSet | None = None):
        self.task_type = task_type
        self.lexicon = lexicon or Lexicon()
        self.templates = templates or TEMPLATES.get(task_type)
        self.templates_by_id = {t.template_id: t for t in self.templates.templates}

    # ------------------------------------------------------------------ helpers
    def _template(self, rng, part: str, style: str | None, available: set[str], *,
                  required: tuple[set[str], ...] = (), avoid: set[str] | None = None,
                  avoid_first_word: str | None = None) -> Template:
        """A random template of ``part``/``style`` fillable from ``available``; each set in
        ``required`` must intersect the template's slots; ids in ``avoid`` are used only as a
        last resort (keeps one instruction from repeating a clause)."""
        choices = [t for t in self.templates.select(part, style, available)
                   if all(t.slots & need for need in required)]
        if avoid:
            fresh = [t for t in choices if t.template_id not in avoid]
            choices = fresh or choices
        if avoid_first_word:
            varied = [t for t in choices if t.text.split(" ", 1)[0] != avoid_first_word]
            choices = varied or choices
        if not choices:
            raise InstructionError(f"task '{self.task_type}': no '{part}' template in style '{style}' "
                                   f"fits the available facts {sorted(available)}")
        return _pick(rng, choices)

    def goal_slots(self, facts: TargetFacts, rng: np.random.Generator) -> dict[str, Phrase]:
        """Slot phrases describing a goal object: ``target``, ``a_target``, ``target_noun`` (with the
        distinguishing attributes, sometimes more), ``target_plain`` (no attributes; only when none
        are needed), ``rel`` (when a relation is known), ``room``, ``room_noun``."""
        lex = self.lexicon
        target = facts.target
        attrs = set(facts.distinguishing_attributes)
        for key in ("color", "material", "size"):  # sometimes add a non-distinguishing attribute
            if key in target.attribute_dict and key not in attrs and rng.random() < 0.35:
                attrs.add(key)
        variant = int(rng.integers(8))
        slots: dict[str, Phrase] = {
            "target": object_phrase(target, lex, attribute_keys=attrs, variant=variant),
            "a_target": object_phrase(target, lex, determiner="a", attribute_keys=attrs, variant=variant),
            "target_noun": object_phrase(target, lex, determiner="", attribute_keys=attrs, variant=variant),
        }
        if not facts.distinguishing_attributes:   # the bare noun is only offered when it is unambiguous
            slots["target_plain"] = object_phrase(target, lex, attribute_keys=(), variant=variant)
        if facts.relation is not None:
            slots["rel"] = relation_phrase(target, facts.relation, lex, variant=int(rng.integers(9)))
        if facts.room is not None:
            room_variant = int(rng.integers(4))
            slots["room"] = room_phrase(facts.room, lex, variant=room_variant, contains=target)
            slots["room_noun"] = room_phrase(facts.room, lex, determiner="", variant=room_variant, contains=target)
        return slots

    # ------------------------------------------------------------------ goals
    @staticmethod
    def goal_requirements(facts: TargetFacts) -> tuple[set[str], ...]:
        """Slot groups a goal template must use so the description stays unambiguous."""
        required = []
        if facts.needs_room:
            required.append({"room", "room_noun"})
        if facts.needs_relation:
            required.append({"rel"})
        return tuple(required)

    def goal(self, facts: TargetFacts, style: str, rng: np.random.Generator, part: str = "goal") -> GroundedInstruction:
        """A goal description (coarse-grained style) of ``facts.target`` in ``style``."""
        slots = self.goal_slots(facts, rng)
        tmpl = self._template(rng, part, style, set(slots), required=self.goal_requirements(facts))
        phrase = _finish(render(tmpl.text, slots))
        return GroundedInstruction(phrase.text, phrase.mentions, style=style, task_type=self.task_type,
                                   template_ids=(tmpl.template_id,))

    def category(self, category: str, rng: np.random.Generator, style: str = "natural",
                 count: int | None = None) -> GroundedInstruction:
        """A zero-grained instruction naming only an object category (object-goal navigation).

        With ``count`` (instances in the scene), "the X" is said only of a single instance and
        "one of the Xs" only of several.
        """
        variant = int(rng.integers(4))
        slots = {"a_category": category_phrase(category, self.lexicon, variant=variant),
                 "category": category_phrase(category, self.lexicon, determiner="", variant=variant),
                 "the_category": category_phrase(category, self.lexicon, determiner="the", variant=variant),
                 "categories": category_phrase(category, self.lexicon, determiner="", variant=variant,
                                               plural_form=True)}
        if count is not None:
            del slots["categories" if count == 1 else "the_category"]
        tmpl = self._template(rng, "goal", style, set(slots))
        phrase = _finish(render(tmpl.text, slots))
        return GroundedInstruction(phrase.text, phrase.mentions, style=style, task_type=self.task_type,
                                   template_ids=(tmpl.template_id,))

    def chain(self, subgoals: list[TargetFacts], rng: np.random.Generator, style: str = "natural") -> GroundedInstruction:
        """One instruction visiting ``subgoals`` in order ("First …, then …, and finally …")."""
        n = len(subgoals)
        clauses, used = [], []
        for facts in subgoals:
            slots = self.goal_slots(facts, rng)
            tmpl = self._template(rng, "subgoal", None, set(slots), required=self.goal_requirements(facts),
                                  avoid=set(used))
            clauses.append(render(tmpl.text, slots))
            used.append(tmpl.template_id)
        frame = self._template(rng, f"chain{n}", None, {f"g{i + 1}" for i in range(n)})
        phrase = _finish(render(frame.text, {f"g{i + 1}": c for i, c in enumerate(clauses)}))
        return GroundedInstruction(phrase.text, phrase.mentions, style=style, task_type=self.task_type,
                                   template_ids=(frame.template_id, *used))

    # ------------------------------------------------------------------ routes
    def route(self, facts: RouteFacts, rng: np.random.Generator, style: str = "natural") -> GroundedInstruction:
        """Step-by-step second-person instruction following the route events in order.

        A turn at the very start comes first ("Turn right and exit the bedroom"); leaving the
        start room is said right before entering the next room when landmarks or turns come
        first ("Walk past the bed, exit the bedroom, and enter the hallway"); no clause template
        is repeated within one instruction while unused ones remain.
        Each landmark category is named at most once ("the dining table" never twice): the stop
        landmark is kept for the stop, an earlier turn near an already named (or the stop's)
        category becomes a plain turn, and such a pass is left out.
        """
        lex = self.lexicon
        clauses: list[Phrase] = []
        used: list[str] = []

        def clause(part: str, slots: dict[str, Phrase | str]) -> None:
            previous = self.templates_by_id[used[-1]].text.split(" ", 1)[0] if used else None
            tmpl = self._template(rng, part, None, set(slots), avoid=set(used), avoid_first_word=previous)
            clauses.append(render(tmpl.text, slots))
            used.append(tmpl.template_id)

        def lm(obj) -> Phrase:
            return object_phrase(obj, lex, variant=int(rng.integers(4)))

        def rm(room) -> Phrase:
            return room_phrase(room, lex, variant=int(rng.integers(3)))

        events = list(facts.events)
        stop_landmark = next((e.landmark.category for e in events if e.kind == "stop" and e.landmark is not None),
                             None)
        named: set[str] = set()

        def fresh(obj, at_stop: bool = False) -> bool:
            """True (and remembered) when ``obj``'s category may still be named here."""
            if obj is None or obj.category in named or (obj.category == stop_landmark and not at_stop):
                return False
            named.add(obj.category)
            return True

        start = next((e for e in events if e.kind == "start"), None)
        events = [e for e in events if e.kind != "start"]
        initial_turns = [e for e in events if e.kind == "turn" and e.s <= 1e-9]
        events = [e for e in events if not (e.kind == "turn" and e.s <= 1e-9)]
        first_enter = next((k for k, e in enumerate(events) if e.kind == "enter"), None)
        pending_exit = start.room if (start is not None and start.room is not None and first_enter is not None) else None

        for ev in initial_turns:
            clause("turn_around" if ev.direction == "around" else "turn", {} if ev.direction == "around"
                   else {"dir": ev.direction})
        if pending_exit is not None and first_enter == 0:
            clause("exit", {"room": rm(pending_exit)})
            pending_exit = None
        elif pending_exit is None and not initial_turns:
            clause("begin", {})
        current_room = start.room if start is not None else None
        last_s = 0.0
        i = 0
        while i < len(events):
            ev = events[i]
            nxt = events[i + 1] if i + 1 < len(events) else None
            if ev.s - last_s >= self.straight_min:   # a long stretch with nothing to mention
                clause("straight", {"dist": distance_phrase(ev.s - last_s)})
            last_s = ev.s
            if pending_exit is not None and (ev.kind == "enter" or (nxt is not None and nxt.kind == "enter"
                                                                    and ev.kind == "turn")):
                clause("exit", {"room": rm(pending_exit)})
                pending_exit = None
            if ev.kind == "turn":
                if ev.direction == "around":
                    clause("turn_around", {})
                elif nxt is not None and nxt.kind == "enter" and nxt.room is not None and nxt.s - ev.s < 2.0:
                    clause("turn_into", {"dir": ev.direction, "room": rm(nxt.room)})
                    current_room = nxt.room
                    last_s = nxt.s
                    i += 1
                elif fresh(ev.landmark):
                    clause("turn_at", {"dir": ev.direction, "landmark": lm(ev.landmark)})
                else:
                    clause("turn", {"dir": ev.direction})
            elif ev.kind == "enter" and ev.room is not None:
                clause("enter", {"room": rm(ev.room)})
                current_room = ev.room
            elif ev.kind == "pass" and fresh(ev.landmark):
                clause("pass", {"landmark": lm(ev.landmark)})
            elif ev.kind == "stop":
                named_stop = fresh(ev.landmark, at_stop=True)
                if named_stop and ev.room is not None and rng.random() < 0.5:
                    slots = {"landmark": lm(ev.landmark), "room": room_phrase(ev.room, lex, contains=ev.landmark)}
                    clause("stop_at_in", slots)
                elif named_stop:
                    clause("stop_at", {"landmark": lm(ev.landmark)})
                elif ev.room is not None and ev.room != current_room:
                    clause("stop_in", {"room": rm(ev.room)})
                else:
                    clause("stop", {})
            i += 1
        phrase = self._join_clauses(clauses, rng)
        return GroundedInstruction(phrase.text, phrase.mentions, style=style, task_type=self.task_type,
                                   template_ids=tuple(used))

    def _join_clauses(self, clauses: list[Phrase], rng: np.random.Generator) -> Phrase:
        """Group clauses into sentences of 2–3 with commas/"and", linking sentences with "Then"."""
        sentences: list[Phrase] = []
        i = 0
        while i < len(clauses):
            size = min(len(clauses) - i, int(rng.integers(2, 4)))
            group = clauses[i:i + size]
            lead = _pick(rng, ["", "", "then ", "after that, ", "next, "]) if sentences else ""
            # Never "Then …, then …": a sentence opened by a sequencing word links with "and".
            pair_links = [" and "] if lead else [" and ", ", then ", " and then "]
            last_links = [", and "] if lead else [", and ", ", then "]
            if len(group) == 1:
                sent = group[0]
            elif len(group) == 2:
                sent = group[0] + _pick(rng, pair_links) + group[1]
            else:
                sent = Phrase.join(group[:-1], ", ") + _pick(rng, last_links) + group[-1]
            sent = Phrase(lead) + sent
            sentences.append(_finish(sent))
            i += size
        return Phrase.join(sentences, " ")


def synthesize_verified(make: Callable[[], GroundedInstruction], verifier, max_tries: int = 20) -> GroundedInstruction:
    """Call ``make()`` until its instruction passes ``verifier.check``; raise after ``max_tries``."""
    problems: list[str] = []
    for _ in range(max_tries):
        instruction = make()
        problems = verifier.check(instruction)
        if not problems:
            return instruction
    raise InstructionError(f"no instruction passed the verifier in {max_tries} tries; last problems: {problems}")


__all__ = ["STYLES", "InstructionError", "Template", "TemplateSet", "TEMPLATES", "register_templates",
           "Synthesizer", "synthesize_verified"]
