"""Optional LLM stage: rewrite template instructions through an OpenAI-compatible chat endpoint.

Used only when a URL is configured; the toolkit's chat client (``vlnverse.tasks.chat``). The rewrite
is re-grounded by matching the scene vocabulary (``extract_mentions``) against the facts the LLM
was given, and kept only if it names every entity of the template it replaces, is no refusal or
placeholder (``rewrite_problems``), the ``Verifier`` accepts it and it names nothing outside those
facts; otherwise the verified template instruction is returned unchanged and the fallback is
counted (``collect_llm_warnings``; the dataset summary's ``warnings``).
"""
from __future__ import annotations

import contextlib
import contextvars
import logging
import re
from collections import Counter
from dataclasses import replace
from typing import Iterable, Iterator

from ...core.io import redact_secrets, redact_url  # noqa: F401 - re-exported
from ..chat import SHARED_BREAKERS, ChatClient, LLMError  # noqa: F401 - re-exported
from .lexicon import COLOR_WORDS, MATERIAL_ADJECTIVES, SIZE_ADJECTIVES, Lexicon
from .types import GroundedInstruction, Mention, ObjectRef, RoomRef
from .verifier import Verifier

#: Gap words between an object and a following noun phrase that express a relation.
_RELATION_PATTERNS = (
    ("next_to", r"(?:right )?next to|beside|alongside"),
    ("on", r"on top of|sitting on|resting on|on|atop"),
    ("near", r"near|close to|by|nearby"),
    ("in", r"in|inside|within"),
)
_GAP = re.compile(r"^\s*,?\s*(?:(?:that|which) (?:is|are|sits|stands) )?(?:located |sitting |placed |standing )?"
                  r"(?P<rel>" + "|".join(p for _, p in _RELATION_PATTERNS) + r")\s+(?:the|a|an|that|this)\s+"
                  r"(?:[\w-]+\s+){0,3}$", re.IGNORECASE)


log = logging.getLogger(__name__)

#: Fallback counts of the LLM stage for the run in progress (see ``collect_llm_warnings``).
_WARNINGS: contextvars.ContextVar[Counter | None] = contextvars.ContextVar("vlnverse_llm_warnings", default=None)


@contextlib.contextmanager
def collect_llm_warnings() -> Iterator[Counter]:
    """Count the LLM stage's fallbacks (endpoint errors, rejected rewrites) made inside the block;
    the dataset summary reports them as ``warnings``."""
    counter: Counter = Counter()
    token = _WARNINGS.set(counter)
    breakers_token = SHARED_BREAKERS.set({})  # one circuit breaker per endpoint for the run
    try:
        yield counter
    finally:
        SHARED_BREAKERS.reset(breakers_token)
        _WARNINGS.reset(token)


def _warn(kind: str, message: str) -> None:
    counter = _WARNINGS.get()
    if counter is not None:
        counter[kind] += 1
        if counter[kind] <= 3:  # the first few of each kind are shown; the summary has the count
            log.warning("%s", message)
    else:
        log.warning("%s", message)


#: Phrases of a refusal, an apology, a meta answer or a placeholder: never an instruction.
_NOT_AN_INSTRUCTION = re.compile(
    r"\b(?:i'?m sorry|i am sorry|sorry,|i apologi[sz]e|i can(?:no|')t|i am unable|i'?m unable|unable to (?:help|assist|"
    r"comply)|as an ai|language model|i (?:won'?t|will not) |cannot (?:help|assist|comply)|can'?t (?:help|assist)|"
    r"request|lorem ipsum|placeholder|todo|tbd|n/a|null|none|undefined|unknown|nan|error|here is|here's|"
    r"rewritten instruction|instruction:)(?=\W|$)|<[a-z!/][^>]*>|[{}\[\]]|\\n|^\W*$", re.IGNORECASE)


def rewrite_problems(text: str, template: GroundedInstruction, rewritten: GroundedInstruction) -> list[str]:
    """Problems that make ``text`` unusable as a rewrite of ``template`` beyond the Verifier's
    fact checks: a refusal, a placeholder or markup, an unreasonable length, or a missing entity
    (every object category and room of the template, the target included, must be named)."""
    problems = []
    bad = _NOT_AN_INSTRUCTION.search(text)
    if bad is not None:
        problems.append(f"not an instruction (refusal, placeholder or markup: {bad.group(0)[:30]!r})")
    words = len(text.split())
    limit = 3 * len(template.text.split()) + 20
    if words < 2 or words > limit or len(text) > 2000:
        problems.append(f"{words} words (expected 2..{limit})")
    named_objects = {m.category for m in rewritten.mentions if m.kind == "object" and m.instance_id is not None}
    named_rooms = {m.room_id for m in rewritten.mentions if m.kind == "room" and m.room_id is not None}
    for m in template.mentions:
        if m.kind == "object" and m.category not in named_objects:
            problems.append(f"does not name the {m.category.replace('_', ' ')} of the template")
        elif m.kind == "room" and m.room_id is not None and m.room_id not in named_rooms:
            problems.append(f"does not name the {(m.category or 'room').replace('_', ' ')} of the template")
    return sorted(set(problems), key=problems.index)


def _attribute_words(objects: Iterable[dict]) -> dict[str, tuple[str, str]]:
    """Surface word → (attribute key, value): common colour, material and size words plus every
    attribute value in the scene (so "the blue mug" is a colour claim even if nothing is blue)."""
    words: dict[str, tuple[str, str]] = {c: ("color", c.replace(" ", "_")) for c in COLOR_WORDS}
    for table, key in ((MATERIAL_ADJECTIVES, "material"), (SIZE_ADJECTIVES, "size")):
        for value, adj in table.items():  # first entry wins: "wooden" means material "wood"
            words.setdefault(adj, (key, value))
            words.setdefault(value, (key, value))
    for obj in objects:
        for key, value in (obj.get("attributes") or {}).items():
            if not isinstance(value, str):
                continue
            surface = {"material": MATERIAL_ADJECTIVES, "size": SIZE_ADJECTIVES}.get(key, {}).get(value, value)
            for form in (surface, value, value.replace("_", " ")):
                words[form.lower()] = (key, value)
    return words


def extract_mentions(text: str, lexicon: Lexicon, objects: list[ObjectRef], rooms: list[RoomRef],
                     attribute_words: dict[str, tuple[str, str]]) -> tuple[list[Mention], list[str]]:
    """Re-ground free text: mentions for every vocabulary word, resolved against the given facts.

    Object words resolve to the given object of that category (attribute adjectives right before
    the noun become attribute claims); room words to the given room of that type; a relation word
    between an object and the next object/room becomes a relation claim. Returns the mentions
    and the words that matched no given fact (the caller rejects those).
    """
    mentions: list[Mention] = []
    unresolved: list[str] = []
    resolved: list[tuple[tuple[int, int], str]] = []  # (span, node id) in text order
    for hit in lexicon.find(text):
        word = text[hit.span[0]:hit.span[1]]
        if hit.kind == "object":
            match = next((o for o in objects if o.category in hit.names), None)
            if match is None:
                unresolved.append(word)
                mentions.append(Mention("object", hit.span, category=sorted(hit.names)[0]))
                continue
            start = hit.span[0]
            claims = []
            # Attribute adjectives right before the noun (two-word values such as "light wood" first).
            tokens = [t.strip(",.;:").lower() for t in text[max(0, start - 60):start].split()]
            while tokens:
                pair = " ".join(tokens[-2:]) if len(tokens) >= 2 else None
                word = pair if pair in attribute_words else tokens[-1]
                if word not in attribute_words:
                    break
                claims.append(attribute_words[word])
                found = text.lower().rfind(word, 0, start)
                start = found if found >= 0 else start
                tokens = tokens[:-len(word.split())]
            span = (min(start, hit.span[0]), hit.span[1])
            mentions.append(Mention("object", span, category=match.category, instance_id=match.instance_id,
                                    attributes=tuple(sorted(set(claims)))))
            resolved.append((hit.span, match.node_id))
        else:
            match = next((r for r in rooms if r.room_type in hit.names), None)
            if match is None:
                unresolved.append(word)
                mentions.append(Mention("room", hit.span, category=sorted(hit.names)[0]))
                continue
            mentions.append(Mention("room", hit.span, category=match.room_type, room_id=match.room_id))
            resolved.append((hit.span, match.node_id))
    for (span_a, node_a), (span_b, node_b) in zip(resolved, resolved[1:]):
        if not node_a.startswith("obj:"):
            continue
        gap = _GAP.match(text[span_a[1]:span_b[0]])
        if gap is None:
            continue
        said = gap.group("rel").lower()
        relation = next(name for name, pattern in _RELATION_PATTERNS if re.fullmatch(pattern, said, re.IGNORECASE))
        mentions.append(Mention("relation", (span_a[0], span_b[1]), relation=relation, subject=node_a, target=node_b))
    return mentions, unresolved


class LLMSynthesizer:
    """Rewrites verified template instructions with an LLM, keeping only verified rewrites."""

    SYSTEM_PROMPT = ("You rewrite navigation instructions for a home robot. Keep every object, room, colour, "
                     "material and spatial relation exactly as given; do not add any object or room that is not "
                     "listed. Answer with the rewritten instruction only.")

    def __init__(self, client: ChatClient, verifier: Verifier, max_tries: int = 2):
        self.client = client
        self.verifier = verifier
        self.max_tries = max_tries
        self.rejections: list[tuple[str, list[str]]] = []

    def _facts(self, instruction: GroundedInstruction) -> tuple[list[ObjectRef], list[RoomRef]]:
        view = self.verifier.view
        objects = [view.object_ref(m.instance_id) for m in instruction.mentions
                   if m.kind == "object" and m.instance_id is not None and m.instance_id in view.objects]
        rooms = [view.room_ref(m.room_id) for m in instruction.mentions if m.kind == "room" and m.room_id is not None]
        return objects, [r for r in rooms if r is not None]

    def check_rewrite(self, text: str, instruction: GroundedInstruction) -> tuple[GroundedInstruction, list[str]]:
        """Re-ground ``text`` against the facts of ``instruction``; returns it and its problems."""
        objects, rooms = self._facts(instruction)
        mentions, unresolved = extract_mentions(text, self.verifier.lexicon, objects, rooms,
                                                _attribute_words(self.verifier.view.objects.values()))
        rewritten = replace(instruction, text=text, mentions=mentions,
                            template_ids=instruction.template_ids + ("llm",))
        problems = rewrite_problems(text, instruction, rewritten)
        problems += [f"'{w}' is not among the instruction's facts" for w in unresolved]
        problems += self.verifier.check(rewritten)
        return rewritten, problems

    def rewrite(self, instruction: GroundedInstruction, *, style: str | None = None,
                seed: int | None = None) -> GroundedInstruction:
        """An LLM rewrite of ``instruction`` in ``style`` if one passes the checks, else ``instruction``."""
        style = style or instruction.style
        user = (f"Task: {instruction.task_type or 'navigation'}. Style: {style}.\n"
                f"Instruction: {instruction.text}\nRewrite it.")
        messages = [{"role": "system", "content": self.SYSTEM_PROMPT}, {"role": "user", "content": user}]
        for attempt in range(self.max_tries):
            try:
                text = self.client.complete(messages, seed=None if seed is None else seed + attempt)
            except LLMError as exc:
                self.rejections.append(("", [str(exc)]))
                _warn("llm_errors", f"LLM rewrite skipped, template kept: {exc}")
                return instruction
            text = text.strip().strip('"').strip()
            if not text:
                continue
            rewritten, problems = self.check_rewrite(text, instruction)
            if not problems:
                return rewritten
            self.rejections.append((text, problems))
            _warn("llm_rejected", f"LLM rewrite rejected ({problems[0]}): {text[:60]!r}")
        return instruction
