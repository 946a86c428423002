"""Text fragments that carry their grounding: ``Phrase`` = text + mentions with spans.

Templates are ``str.format``-style strings whose slots are filled with ``Phrase``s; rendering
concatenates text and shifts every mention's span, so the final instruction knows exactly which
characters ground which scene-graph claim.
"""
from __future__ import annotations

import string
from dataclasses import dataclass, field

from .grammar import capitalize_first, indefinite_article, plural
from .lexicon import WOOD_TONES, Lexicon, attribute_adjectives
from .types import Mention, ObjectRef, RelationFact, RoomRef

_FORMATTER = string.Formatter()

#: Ways to say a relation before its anchor noun phrase (``on`` → ``"on"``, ``"on top of"``).
RELATION_WORDS: dict[str, tuple[str, ...]] = {
    "on": ("on", "on top of", "sitting on"),
    "near": ("near", "close to", "by"),
    "next_to": ("next to", "beside", "right next to"),
    "in": ("in", "inside"),
}


@dataclass
class Phrase:
    """A piece of instruction text and the mentions grounding it (spans relative to ``text``)."""

    text: str
    mentions: list[Mention] = field(default_factory=list)

    def __add__(self, other: "Phrase | str") -> "Phrase":
        other = other if isinstance(other, Phrase) else Phrase(other)
        shift = len(self.text)
        return Phrase(self.text + other.text, self.mentions + [m.shifted(shift) for m in other.mentions])

    @staticmethod
    def join(parts: list["Phrase"], sep: str = " ") -> "Phrase":
        """Concatenate phrases with ``sep`` between them."""
        out = Phrase("")
        for i, part in enumerate(parts):
            out = out + (Phrase(sep) if i else Phrase("")) + part
        return out

    def capitalized(self) -> "Phrase":
        """First letter upper-cased (spans unchanged: same length)."""
        return Phrase(capitalize_first(self.text), list(self.mentions))


def slot_names(template: str) -> set[str]:
    """Names of the ``{slot}`` fields in a template string."""
    return {name for _, name, _, _ in _FORMATTER.parse(template) if name}


def render(template: str, slots: dict[str, Phrase | str]) -> Phrase:
    """Fill ``template``'s ``{slot}`` fields with phrases, keeping every mention's span exact."""
    out = Phrase("")
    for literal, name, spec, conv in _FORMATTER.parse(template):
        out = out + literal
        if name:
            if name not in slots:
                raise KeyError(f"template slot '{name}' has no value")
            value = slots[name]
            out = out + (value if isinstance(value, Phrase) else Phrase(str(value)))
    return out


def object_phrase(obj: ObjectRef, lexicon: Lexicon, *, determiner: str = "the", attribute_keys=(),
                  variant: int = 0, plural_form: bool = False) -> Phrase:
    """Noun phrase for an object (``"the small red mug"``) with an object mention over it."""
    noun = lexicon.object_phrase(obj.category, variant)
    if plural_form:
        noun = plural(noun)
    attrs = obj.attribute_dict
    keys = tuple(k for k in ("size", "color", "material") if k in attribute_keys and k in attrs)
    if attrs.get("color") in WOOD_TONES and attrs.get("material") in ("wood", "wooden") and "color" in keys:
        keys = tuple(k for k in keys if k != "material")    # "the oak bed", not "the oak wooden bed"
    adjectives = attribute_adjectives(attrs, keys)
    core = " ".join(adjectives + [noun])
    if determiner in ("a", "an"):
        det = indefinite_article(core) + " "
    else:
        det = f"{determiner} " if determiner else ""
    text = det + core
    claimed = tuple((k, attrs[k]) for k in keys)
    mention = Mention("object", (0, len(text)), category=obj.category, instance_id=obj.instance_id,
                      attributes=claimed)
    return Phrase(text, [mention])


def category_phrase(category: str, lexicon: Lexicon, *, determiner: str = "a", variant: int = 0,
                    plural_form: bool = False) -> Phrase:
    """Noun phrase for a category without a specific instance (``"a plant"``, ``"plants"``)."""
    noun = lexicon.object_phrase(category, variant)
    if plural_form:
        noun = plural(noun)
    det = (indefinite_article(noun) + " ") if determiner in ("a", "an") else (f"{determiner} " if determiner else "")
    text = det + noun
    return Phrase(text, [Mention("object", (0, len(text)), category=category)])


def room_phrase(room: RoomRef, lexicon: Lexicon, *, determiner: str = "the", variant: int = 0,
                contains: ObjectRef | None = None) -> Phrase:
    """Noun phrase for a room (``"the kitchen"``) with a room mention; ``contains`` adds the claim
    that this object is in the room (relation ``in``)."""
    noun = lexicon.room_phrase(room.room_type, variant)
    det = (indefinite_article(noun) + " ") if determiner in ("a", "an") else (f"{determiner} " if determiner else "")
    text = det + noun
    mentions = [Mention("room", (0, len(text)), category=room.room_type, room_id=room.room_id)]
    if contains is not None:
        mentions.append(Mention("relation", (0, len(text)), relation="in", subject=contains.node_id,
                                target=room.node_id))
    return Phrase(text, mentions)


def relation_phrase(subject: ObjectRef, fact: RelationFact, lexicon: Lexicon, *, variant: int = 0,
                    anchor_attribute_keys=()) -> Phrase:
    """``"on the dining table"``: a relation mention over the whole phrase plus the anchor's mention."""
    words = RELATION_WORDS.get(fact.relation, (fact.relation.replace("_", " "),))
    prep = words[variant % len(words)]
    anchor = object_phrase(fact.anchor, lexicon, attribute_keys=anchor_attribute_keys, variant=variant // 3)
    phrase = Phrase(prep + " ") + anchor
    phrase.mentions.append(Mention("relation", (0, len(phrase.text)), relation=fact.relation,
                                   subject=subject.node_id, target=fact.anchor.node_id))
    return phrase
