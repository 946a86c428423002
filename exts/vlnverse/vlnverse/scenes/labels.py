"""Semantics guessed for third-party stages: room types from their objects, categories from prim names.

Room types (stages without room records)
----------------------------------------
A room inferred from the free space gets the type a person would use, voted by the objects in
it: each category in ``ROOM_EVIDENCE`` adds its weight to one room type (a bed 3 to
``bedroom``, a toilet 3 to ``bathroom``, a stove 3 to ``kitchen`` ...). The type with the
highest total wins when it reaches ``MIN_ROOM_EVIDENCE`` (ties: the order of
``ROOM_EVIDENCE``); otherwise the room is just ``"room"`` — never ``unknown``.

Categories from names (stages without semantic labels)
------------------------------------------------------
``category_from_name(name)`` maps a prim or mesh name to a category:

1. tokenise: split camelCase, then on ``_ - . /`` and spaces, lower-case
   (``DiningTable_02`` → ``dining table``, ``SM_Sofa-3`` → ``sm sofa``);
2. strip trailing digits from every token and drop pure numbers and asset-pipeline noise
   (``sm``, ``geo``, ``mesh``, ``lod``, ``mat`` ... — ``NAME_NOISE``);
3. look up the longest run of tokens (at most three) joined by ``_`` — first as a category of
   the catalog (``CATEGORIES`` and the instruction phrase table), then in ``NAME_SYNONYMS``
   (``couch`` → ``sofa``, ``fridge``/``refrigerator`` → ``fridge``, ``tv``/``television`` →
   ``tv`` ...) — preferring longer runs (``coffee table`` → ``coffee_table``, not ``table``);
4. the building structure is recognised too: ``wall``, ``partition``; ``floor``, ``ground``,
   ``slab`` → ``floor``; ``ceiling``/``roof``; ``door`` (a door leaf; ``doorframe``,
   ``door_frame`` → ``door_frame``); ``window``; and, only as the whole name of a gprim itself
   (not of a parent group), the one-letter abbreviations ``w`` (wall: ``w1``..``w4``), ``f``
   (floor), ``c`` (ceiling), ``d`` (door).

A gprim whose own name matches nothing takes the category of its nearest ancestor whose name
does (``/World/Table/Leg_1`` is part of the table).

A name that matches nothing gives ``None`` (the geometry still counts for occupancy; it is
just not an object).
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Iterable

#: Weight each category adds to a room type's vote (module docstring).
ROOM_EVIDENCE: dict[str, dict[str, int]] = {
    "bedroom": {"bed": 3, "nightstand": 2, "wardrobe": 1, "dresser": 1},
    "bathroom": {"toilet": 3, "bathtub": 3, "shower": 3, "towel_rack": 1, "soap_dispenser": 1, "towel": 1,
                 "sink": 1},
    "kitchen": {"stove": 3, "oven": 3, "fridge": 3, "refrigerator": 3, "dishwasher": 3, "kitchen_island": 3,
                "microwave": 2, "kitchen_counter": 2, "kitchen_cabinet": 2, "toaster": 1, "kettle": 1,
                "counter": 1, "sink": 1},
    "dining_room": {"dining_table": 3, "sideboard": 1},
    "living_room": {"sofa": 3, "tv": 2, "tv_stand": 2, "coffee_table": 2, "fireplace": 2, "armchair": 1,
                    "piano": 1, "ottoman": 1},
    "office": {"desk": 2, "office_chair": 2, "monitor": 1, "computer": 1, "keyboard": 1},
    "laundry_room": {"washing_machine": 3, "dryer": 3, "laundry_basket": 1},
    "entryway": {"shoe_rack": 1, "coat_rack": 1},
}
#: A room type needs at least this total weight; below it the room is called ``"room"``.
MIN_ROOM_EVIDENCE = 2
#: The type of a room whose objects say nothing about its use.
GENERIC_ROOM = "room"


def infer_room_type(categories: Iterable[str]) -> str:
    """The room type voted by the categories of the objects in a room (module docstring)."""
    counts = Counter(categories)
    best, best_score = GENERIC_ROOM, 0
    for room_type, weights in ROOM_EVIDENCE.items():
        score = sum(w * counts[c] for c, w in weights.items())
        if score > best_score:
            best, best_score = room_type, score
    return best if best_score >= MIN_ROOM_EVIDENCE else GENERIC_ROOM


#: Tokens that asset pipelines add to names and that never name a thing.
NAME_NOISE = frozenset({"sm", "geo", "geom", "geometry", "mesh", "lod", "mat", "obj", "model", "prop", "grp",
                        "group", "node", "xform", "part", "shape", "collision", "collider", "visual", "low",
                        "high", "hi", "lo", "inst", "instance", "prototype", "default", "the", "a", "of",
                        "primitive", "cube", "cylinder", "sphere", "cone", "capsule", "plane", "root", "world"})

#: Synonyms (joined tokens) → category of the catalog or the structure labels.
NAME_SYNONYMS: dict[str, str] = {
    # structure
    "wall": "wall", "walls": "wall", "partition": "wall",
    "floor": "floor", "ground": "floor", "slab": "floor", "flooring": "floor",
    "ceiling": "ceiling", "roof": "ceiling",
    "door": "door", "doors": "door", "door_leaf": "door", "doorframe": "door_frame", "door_frame": "door_frame",
    "window": "window", "windows": "window",
    # furniture and objects
    "couch": "sofa", "settee": "sofa", "loveseat": "sofa", "sofa": "sofa",
    "refrigerator": "fridge", "fridge": "fridge",
    "television": "tv", "tv": "tv", "telly": "tv",
    "desk_lamp": "table_lamp", "standing_lamp": "floor_lamp",
    "cupboard": "cabinet", "closet": "wardrobe", "armoire": "wardrobe",
    "bookcase": "bookshelf", "book_shelf": "bookshelf", "shelves": "shelf",
    "night_stand": "nightstand", "bedside_table": "nightstand",
    "dinner_table": "dining_table", "dining_table": "dining_table", "kitchen_table": "dining_table",
    "coffee_table": "coffee_table", "tea_table": "coffee_table", "end_table": "side_table",
    "tub": "bathtub", "bath": "bathtub", "bath_tub": "bathtub", "wc": "toilet", "lavatory": "toilet",
    "washbasin": "sink", "basin": "sink", "wash_basin": "sink",
    "cooker": "stove", "range": "stove", "hob": "stove", "cooktop": "stove",
    "washer": "washing_machine", "washing_machine": "washing_machine",
    "bin": "trash_can", "trash": "trash_can", "garbage_can": "trash_can", "wastebasket": "trash_can",
    "plant": "plant", "houseplant": "potted_plant", "flower_pot": "potted_plant",
    "mug": "mug", "cup": "cup", "glass": "cup", "tumbler": "cup",
    "picture": "picture", "painting": "painting", "frame": "picture_frame", "photo": "picture_frame",
    "pc": "computer", "screen": "monitor", "display": "monitor",
    "chair": "chair", "seat": "chair", "stool": "stool", "bench": "bench", "table": "table", "bed": "bed",
}


#: Everyday categories outside the procedural catalog that a name may still name.
EXTRA_CATEGORIES = ("table", "oven", "shower", "cabinet", "shelf", "side_table", "table_lamp", "picture",
                    "painting", "computer", "phone", "pillow", "cushion", "rug", "fireplace", "ottoman",
                    "refrigerator", "kitchen_counter", "kitchen_island", "speaker", "teddy_bear", "umbrella",
                    "apple", "box", "dishwasher")
#: Structure labels recognised in names (walls, floors, ceilings, doors, windows).
STRUCTURE_NAMES = ("wall", "floor", "ceiling", "door", "door_frame", "window")

_CATEGORY_SET: frozenset[str] | None = None


def category_set() -> frozenset[str]:
    """Every category a name may map to: the catalog's, ``EXTRA_CATEGORIES`` and ``STRUCTURE_NAMES``."""
    global _CATEGORY_SET
    if _CATEGORY_SET is None:
        from .catalog import CATEGORIES

        _CATEGORY_SET = frozenset(CATEGORIES) | frozenset(EXTRA_CATEGORIES) | frozenset(STRUCTURE_NAMES)
    return _CATEGORY_SET


def name_tokens(name: str) -> list[str]:
    """Lower-case tokens of a prim name: camelCase split, separators split, trailing digits
    stripped, numbers and ``NAME_NOISE`` dropped (``SM_DiningTable_02`` → ``[dining, table]``)."""
    spaced = re.sub(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", name)
    out = []
    for token in re.split(r"[\s_\-./:]+", spaced.lower()):
        token = re.sub(r"\d+$", "", token)
        if token and not token.isdigit() and token not in NAME_NOISE:
            out.append(token)
    return out


#: One-letter structure abbreviations, recognised only as a whole name (``w1``..``w4``, ``f``).
SHORT_STRUCTURE_NAMES = {"w": "wall", "f": "floor", "c": "ceiling", "d": "door"}


def category_from_name(name: str, *, abbreviations: bool = True) -> str | None:
    """The category a prim or mesh name stands for, or None (rules in the module docstring).

    ``abbreviations=False`` ignores the one-letter structure names (for ancestors' names: a
    group ``/W`` is no wall)."""
    tokens = name_tokens(name)
    if abbreviations and len(tokens) == 1 and tokens[0] in SHORT_STRUCTURE_NAMES:
        return SHORT_STRUCTURE_NAMES[tokens[0]]
    cats = category_set()
    for size in (3, 2, 1):
        for start in range(len(tokens) - size + 1):
            key = "_".join(tokens[start:start + size])
            if key in NAME_SYNONYMS:
                return NAME_SYNONYMS[key]
            if key in cats:
                return key
            if key.endswith("s") and key[:-1] in cats:  # plural: chairs → chair
                return key[:-1]
    return None
