"""Scene vocabulary: how object categories, room types and attributes are said in English.

Category names in scenes are snake_case identifiers (``coffee_table``, ``tv``); the lexicon maps
each to its spoken forms (first = preferred, the rest synonyms) and back. Categories not in the
table fall back to the identifier with spaces (``wine_rack`` → ``"wine rack"``), so any scene's
vocabulary can be spoken and recognised.

``Lexicon.find(text)`` returns every category / room-type phrase in a text (longest match,
whole words, case-insensitive, plurals included) — the Verifier uses it to catch words that no
grounded mention supports, and the LLM synthesizer uses it to re-extract mentions.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from .grammar import plural

#: Spoken forms of object categories (preferred form first).
OBJECT_PHRASES: dict[str, tuple[str, ...]] = {
    "sofa": ("sofa", "couch"),
    "armchair": ("armchair",),
    "chair": ("chair",),
    "office_chair": ("office chair", "desk chair"),
    "stool": ("stool",),
    "bench": ("bench",),
    "ottoman": ("ottoman", "footstool"),
    "table": ("table",),
    "dining_table": ("dining table",),
    "coffee_table": ("coffee table",),
    "side_table": ("side table", "end table"),
    "desk": ("desk",),
    "bed": ("bed",),
    "nightstand": ("nightstand", "bedside table"),
    "wardrobe": ("wardrobe",),
    "dresser": ("dresser", "chest of drawers"),
    "cabinet": ("cabinet", "cupboard"),
    "bookshelf": ("bookshelf", "bookcase"),
    "shelf": ("shelf",),
    "tv": ("TV", "television"),
    "tv_stand": ("TV stand", "TV cabinet"),
    "fridge": ("fridge", "refrigerator"),
    "refrigerator": ("refrigerator", "fridge"),
    "stove": ("stove", "cooktop"),
    "oven": ("oven",),
    "microwave": ("microwave",),
    "dishwasher": ("dishwasher",),
    "sink": ("sink",),
    "counter": ("counter", "countertop"),
    "kitchen_counter": ("kitchen counter", "counter"),
    "kitchen_island": ("kitchen island",),
    "toilet": ("toilet",),
    "bathtub": ("bathtub", "tub"),
    "shower": ("shower",),
    "washing_machine": ("washing machine", "washer"),
    "mirror": ("mirror",),
    "lamp": ("lamp",),
    "floor_lamp": ("floor lamp", "standing lamp"),
    "table_lamp": ("table lamp",),
    "plant": ("plant",),
    "potted_plant": ("potted plant", "houseplant"),
    "rug": ("rug", "carpet"),
    "painting": ("painting", "picture"),
    "picture": ("picture", "framed picture"),
    "clock": ("clock",),
    "vase": ("vase",),
    "mug": ("mug",),
    "cup": ("cup",),
    "bowl": ("bowl",),
    "plate": ("plate",),
    "bottle": ("bottle",),
    "book": ("book",),
    "laptop": ("laptop",),
    "monitor": ("monitor", "computer screen"),
    "computer": ("computer",),
    "pillow": ("pillow", "cushion"),
    "cushion": ("cushion",),
    "towel": ("towel",),
    "basket": ("basket",),
    "box": ("box",),
    "trash_can": ("trash can", "bin", "wastebasket"),
    "piano": ("piano",),
    "fireplace": ("fireplace",),
    "speaker": ("speaker",),
    "kettle": ("kettle",),
    "toaster": ("toaster",),
    "teddy_bear": ("teddy bear",),
    "shoe_rack": ("shoe rack",),
    "coat_rack": ("coat rack",),
    "umbrella": ("umbrella",),
    "candle": ("candle",),
    "remote": ("remote", "remote control"),
    "phone": ("phone",),
    "fruit_bowl": ("fruit bowl",),
    "apple": ("apple",),
    "towel_rack": ("towel rack", "towel rail"),
    "kitchen_cabinet": ("kitchen cabinet", "kitchen cupboard"),
    "sideboard": ("sideboard", "buffet"),
    "dryer": ("dryer", "tumble dryer"),
    "laundry_basket": ("laundry basket", "hamper"),
    "storage_shelf": ("storage shelf", "shelving unit"),
    "keyboard": ("keyboard",),
    "soap_dispenser": ("soap dispenser",),
    "picture_frame": ("picture frame", "photo frame"),
    "pot": ("pot", "cooking pot"),
    "teapot": ("teapot",),
}

#: Spoken forms of room types (preferred form first).
ROOM_PHRASES: dict[str, tuple[str, ...]] = {
    "living_room": ("living room", "lounge"),
    "kitchen": ("kitchen",),
    "dining_room": ("dining room",),
    "bedroom": ("bedroom",),
    "master_bedroom": ("master bedroom", "main bedroom"),
    "kids_room": ("kids' room", "children's room"),
    "guest_room": ("guest room",),
    "bathroom": ("bathroom", "washroom"),
    "toilet_room": ("toilet room", "restroom"),
    "office": ("office", "study"),
    "study": ("study", "office"),
    "hallway": ("hallway", "corridor", "hall"),
    "corridor": ("corridor", "hallway"),
    "entryway": ("entryway", "foyer", "entrance hall"),
    "laundry_room": ("laundry room", "utility room"),
    "storage": ("storage room", "storeroom"),
    "closet": ("walk-in closet",),
    "garage": ("garage",),
    "balcony": ("balcony",),
    "library": ("library",),
    "playroom": ("playroom",),
    "gym": ("home gym", "gym"),
}

#: How attribute values are said before a noun (``wood`` → ``wooden``).
MATERIAL_ADJECTIVES: dict[str, str] = {
    "wood": "wooden", "wooden": "wooden", "metal": "metal", "steel": "steel", "glass": "glass",
    "ceramic": "ceramic", "fabric": "fabric", "leather": "leather", "plastic": "plastic",
    "stone": "stone", "marble": "marble", "porcelain": "porcelain", "wicker": "wicker",
}
#: Colour words recognised in free text (scene attribute values are added on top).
COLOR_WORDS = ("red", "orange", "yellow", "green", "blue", "purple", "violet", "pink", "brown", "black", "white",
               "gray", "grey", "silver", "gold", "golden", "beige", "navy", "teal", "turquoise", "cream", "tan",
               "maroon", "ivory", "walnut", "oak", "charcoal", "olive", "terracotta", "dark gray", "dark grey",
               "dark brown", "dark green", "light blue", "light wood", "light gray", "light grey")
#: Colours that already say "wood" ("oak bed", not "oak wooden bed").
WOOD_TONES = frozenset({"oak", "walnut", "cherry", "mahogany", "pine", "teak", "maple", "birch", "ash", "ebony"})
SIZE_ADJECTIVES: dict[str, str] = {"small": "small", "medium": "medium-sized", "large": "large",
                                   "big": "big", "tiny": "tiny"}


def _default_phrase(identifier: str) -> str:
    return identifier.replace("_", " ").strip()


@dataclass(frozen=True)
class VocabularyHit:
    """One vocabulary phrase found in a text: ``kind`` is ``object`` or ``room``; ``names`` are the
    categories (or room types) the phrase can denote; ``span`` is the character range."""

    kind: str
    phrase: str
    names: frozenset[str]
    span: tuple[int, int]


class Lexicon:
    """Spoken forms for a set of object categories and room types, and a matcher over texts.

    ``extra_object_forms`` / ``extra_room_forms`` append spoken forms (language version 2).
    ``Lexicon.for_names(categories, room_types)`` covers the given names plus the built-in tables,
    so phrases of categories *absent* from a scene are still recognised (and then flagged).
    """

    def __init__(self, categories: Iterable[str] = (), room_types: Iterable[str] = (), *,
                 extra_object_forms: dict[str, tuple[str, ...]] | None = None,
                 extra_room_forms: dict[str, tuple[str, ...]] | None = None):
        self.object_forms = {c: OBJECT_PHRASES.get(c, (_default_phrase(c),)) for c in OBJECT_PHRASES}
        self.object_forms.update({c: OBJECT_PHRASES.get(c, (_default_phrase(c),)) for c in categories})
        self.room_forms = {r: ROOM_PHRASES.get(r, (_default_phrase(r),)) for r in ROOM_PHRASES}
        self.room_forms.update({r: ROOM_PHRASES.get(r, (_default_phrase(r),)) for r in room_types})
        for forms, extra in ((self.object_forms, extra_object_forms), (self.room_forms, extra_room_forms)):
            for name, more in (extra or {}).items():   # appended: the preferred form stays first
                forms[name] = tuple(forms.get(name, (_default_phrase(name),))) + tuple(more)
        index: dict[tuple[str, str], set[str]] = {}
        for kind, table in (("object", self.object_forms), ("room", self.room_forms)):
            for name, forms in table.items():
                for form in forms:
                    for variant in (form, plural(form)):
                        index.setdefault((kind, variant.lower()), set()).add(name)
        self._index = {k: frozenset(v) for k, v in index.items()}
        phrases = sorted({p for _, p in self._index}, key=len, reverse=True)
        body = "|".join(re.escape(p) for p in phrases)
        self._pattern = re.compile(rf"(?<![\w-])({body})(?![\w-])", re.IGNORECASE)

    def object_phrase(self, category: str, variant: int = 0) -> str:
        """Spoken form ``variant`` (modulo the number of forms) of an object category."""
        forms = self.object_forms.get(category) or (_default_phrase(category),)
        return forms[variant % len(forms)]

    def object_variants(self, category: str) -> tuple[str, ...]:
        """All spoken forms of an object category."""
        return self.object_forms.get(category) or (_default_phrase(category),)

    def room_phrase(self, room_type: str, variant: int = 0) -> str:
        """Spoken form ``variant`` (modulo the number of forms) of a room type."""
        forms = self.room_forms.get(room_type) or (_default_phrase(room_type),)
        return forms[variant % len(forms)]

    def room_variants(self, room_type: str) -> tuple[str, ...]:
        """All spoken forms of a room type."""
        return self.room_forms.get(room_type) or (_default_phrase(room_type),)

    def find(self, text: str) -> list[VocabularyHit]:
        """Every object/room phrase in ``text`` (longest match first, whole words), in text order.

        A phrase that is both an object and a room word (``closet``) yields one hit per kind.
        """
        hits: list[VocabularyHit] = []
        for m in self._pattern.finditer(text):
            phrase = m.group(1).lower()
            for kind in ("object", "room"):
                names = self._index.get((kind, phrase))
                if names:
                    hits.append(VocabularyHit(kind, phrase, names, (m.start(1), m.end(1))))
        return hits


def attribute_adjectives(attributes: dict, keys: Iterable[str] = ("size", "color", "material")) -> list[str]:
    """Adjectives for the selected attributes in English order (size, colour, material)."""
    out = []
    if attributes and attributes.get("color") in WOOD_TONES and attributes.get("material") in ("wood", "wooden"):
        keys = [k for k in keys if k != "material"]
    for key in ("size", "color", "material"):
        if key not in keys:
            continue
        value = attributes.get(key) if attributes else None
        if not isinstance(value, str) or not value:
            continue
        if key == "material":
            out.append(MATERIAL_ADJECTIVES.get(value, value))
        elif key == "size":
            out.append(SIZE_ADJECTIVES.get(value, value))
        else:
            out.append(value.replace("_", " "))
    return out
