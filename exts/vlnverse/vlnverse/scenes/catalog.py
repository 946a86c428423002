"""What procedural homes are made of: room types, object categories and their primitive models.

Every category has a *builder* that turns sampled full extents ``(w, d, h)`` into a handful of
primitives (``Part``) in the object's local frame: origin at the centre of the footprint on
the floor (or on the supporting surface), ``+y`` is the object's front, ``-y`` its back (the
side that goes against a wall), ``z`` up. Builders also report the flat tops other objects
may rest on (``Surface``). Colours come from named palettes so objects can be described in
words (``"a red wooden chair"``); materials set the physics friction.

Room rules (``ROOM_RULES``) list which furniture goes in which room type, and
``SMALL_OBJECT_RULES`` which small objects go on which supporting furniture.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

#: Room types a generated home can contain.
ROOM_TYPES = ("living_room", "kitchen", "dining_room", "bedroom", "bathroom", "office", "hallway",
              "closet", "laundry_room")

#: Named colours (linear RGB in [0, 1]) used by palettes; names go into object attributes.
COLORS: dict[str, tuple[float, float, float]] = {
    "white": (0.92, 0.92, 0.90), "black": (0.08, 0.08, 0.09), "gray": (0.50, 0.50, 0.52),
    "dark_gray": (0.25, 0.25, 0.27), "silver": (0.75, 0.76, 0.78), "beige": (0.86, 0.79, 0.66),
    "cream": (0.95, 0.92, 0.82), "brown": (0.45, 0.29, 0.16), "dark_brown": (0.28, 0.18, 0.10),
    "light_wood": (0.78, 0.62, 0.42), "oak": (0.66, 0.50, 0.30), "walnut": (0.36, 0.24, 0.15),
    "red": (0.75, 0.14, 0.12), "orange": (0.90, 0.50, 0.15), "yellow": (0.93, 0.80, 0.22),
    "green": (0.22, 0.55, 0.25), "dark_green": (0.12, 0.33, 0.15), "olive": (0.50, 0.50, 0.20),
    "blue": (0.18, 0.35, 0.75), "navy": (0.10, 0.15, 0.38), "teal": (0.10, 0.50, 0.50),
    "light_blue": (0.55, 0.72, 0.90), "purple": (0.45, 0.25, 0.60), "pink": (0.92, 0.60, 0.70),
    "terracotta": (0.74, 0.38, 0.25),
}

#: Physics friction per material (static = dynamic; restitution 0).
MATERIALS: dict[str, float] = {
    "wood": 0.6, "metal": 0.4, "fabric": 0.9, "leather": 0.7, "plastic": 0.5, "ceramic": 0.5,
    "glass": 0.3, "marble": 0.4, "paper": 0.6, "stone": 0.7, "plaster": 0.8,
}

#: Accent colours used by builders for parts that are not the main colour.
TONES = {"dark": "black", "light": "white", "metal": "silver", "leaf": "green", "screen": "black",
         "soil": "dark_brown", "wood": "oak", "mattress": "white", "glass": "light_blue"}


#: Visual material kind (``scenes.textures.LOOKS``) of an object's physics material.
VISUAL_KIND = {"wood": "wood", "metal": "metal", "fabric": "fabric", "leather": "leather", "plastic": "plastic",
               "ceramic": "ceramic", "glass": "glass", "marble": "marble", "paper": "paper", "stone": "marble",
               "plaster": "plaster"}
#: Visual material kind of accent tones (``None``: the object's own material).
TONE_KIND = {"metal": "metal", "leaf": "leaf", "screen": "glass", "soil": "stone", "wood": "wood",
             "mattress": "fabric", "glass": "glass", "dark": None, "light": None, "main": None}


def part_material(tone: str, material: str, color: str) -> str:
    """Semantic visual material name (``<kind>_<colour>``) of a part with ``tone`` on an object made
    of ``material`` with main colour ``color`` (a ``shade`` is a glowing lampshade in that colour)."""
    if tone == "shade":
        return f"lampshade_{color}"
    if tone == "dark" and material in ("fabric", "leather"):  # legs and bases of upholstered pieces
        return f"wood_{TONES[tone]}"
    kind = TONE_KIND.get(tone) or VISUAL_KIND.get(material, "plastic")
    return f"{kind}_{color if tone == 'main' else TONES[tone]}"


@dataclass(frozen=True)
class Part:
    """One primitive of an object model in the object's local frame.

    ``size``: half extents for ``box``; ``(radius, half_height, 0)`` for ``cylinder`` (along
    ``axis``); ``(radius, 0, 0)`` for ``sphere``. ``tone`` is ``"main"`` (the object's sampled
    colour), ``"shade"`` (the main colour, glowing: lampshades) or a key of ``TONES``.
    """

    kind: str
    center: tuple[float, float, float]
    size: tuple[float, float, float]
    tone: str = "main"
    axis: str = "z"


@dataclass(frozen=True)
class Surface:
    """A flat, axis-aligned top in the local frame on which small objects may rest."""

    z: float
    center: tuple[float, float]
    half: tuple[float, float]


Model = tuple[list[Part], list[Surface]]
Builder = Callable[[float, float, float], Model]


def _box(cx: float, cy: float, z0: float, hx: float, hy: float, h: float, tone: str = "main") -> Part:
    """A box standing on ``z0`` with half extents ``hx, hy`` and full height ``h``."""
    return Part("box", (cx, cy, z0 + h / 2), (hx, hy, h / 2), tone)


def _cyl(cx: float, cy: float, z0: float, r: float, h: float, tone: str = "main") -> Part:
    """An upright cylinder standing on ``z0``."""
    return Part("cylinder", (cx, cy, z0 + h / 2), (r, h / 2, 0.0), tone)


def _legs(w: float, d: float, h: float, t: float, inset: float, tone: str = "main") -> list[Part]:
    """Four square legs of side ``t`` and height ``h`` at the corners of a ``w`` × ``d`` top."""
    ox, oy = w / 2 - inset - t / 2, d / 2 - inset - t / 2
    return [_box(sx * ox, sy * oy, 0.0, t / 2, t / 2, h, tone) for sx in (-1, 1) for sy in (-1, 1)]


# --------------------------------------------------------------------------- furniture builders
def build_table(w: float, d: float, h: float) -> Model:
    """Top slab on four legs."""
    t = 0.04
    parts = [_box(0, 0, h - t, w / 2, d / 2, t)] + _legs(w, d, h - t, 0.06, 0.05)
    return parts, [Surface(h, (0.0, 0.0), (w / 2, d / 2))]


def build_coffee_table(w: float, d: float, h: float) -> Model:
    """Low table: top, lower shelf, four legs."""
    t = 0.04
    parts = [_box(0, 0, h - t, w / 2, d / 2, t), _box(0, 0, 0.10, w / 2 - 0.06, d / 2 - 0.06, 0.02, "dark")]
    parts += _legs(w, d, h - t, 0.05, 0.03)
    return parts, [Surface(h, (0.0, 0.0), (w / 2, d / 2))]


def build_chair(w: float, d: float, h: float) -> Model:
    """Seat at 0.45 m on four legs with a backrest at the back."""
    seat = 0.45
    parts = [_box(0, 0, seat - 0.04, w / 2, d / 2, 0.04)] + _legs(w, d, seat - 0.04, 0.04, 0.02)
    parts.append(_box(0, -d / 2 + 0.025, seat, w / 2, 0.025, h - seat))
    return parts, []


def build_office_chair(w: float, d: float, h: float) -> Model:
    """Wheeled base, gas column, seat and backrest."""
    seat = 0.48
    parts = [_cyl(0, 0, 0.0, min(w, d) / 2, 0.06, "dark"), _cyl(0, 0, 0.06, 0.03, seat - 0.14, "metal"),
             _box(0, 0, seat - 0.08, w / 2, d / 2, 0.08), _box(0, -d / 2 + 0.04, seat + 0.05, w / 2 - 0.03, 0.04, h - seat - 0.05)]
    return parts, []


def build_bed(w: float, d: float, h: float) -> Model:
    """Frame, mattress, headboard against the wall and pillows."""
    frame_h, mat_h = 0.30, 0.20
    parts = [_box(0, 0.04, 0.0, w / 2, d / 2 - 0.04, frame_h),
             _box(0, 0.06, frame_h, w / 2 - 0.03, d / 2 - 0.08, mat_h, "mattress"),
             _box(0, -d / 2 + 0.04, 0.0, w / 2, 0.04, h)]
    n_pillows = 2 if w > 1.2 else 1
    pw = (w - 0.2) / n_pillows / 2 - 0.03
    for i in range(n_pillows):
        cx = -w / 2 + 0.1 + (2 * i + 1) * (pw + 0.03)
        parts.append(_box(cx, -d / 2 + 0.30, frame_h + mat_h, pw, 0.18, 0.12, "light"))
    return parts, []


def build_nightstand(w: float, d: float, h: float) -> Model:
    """Cabinet on short legs with a drawer front and knob."""
    parts = [_box(0, 0, 0.08, w / 2, d / 2, h - 0.08)] + _legs(w, d, 0.08, 0.04, 0.0)
    parts += [_box(0, d / 2 + 0.01, h - 0.20, w / 2 - 0.03, 0.01, 0.14, "wood"),
              Part("sphere", (0.0, d / 2 + 0.035, h - 0.13), (0.015, 0.0, 0.0), "metal")]
    return parts, [Surface(h, (0.0, 0.0), (w / 2, d / 2))]


def build_wardrobe(w: float, d: float, h: float) -> Model:
    """Tall body with two doors and handles on a plinth."""
    parts = [_box(0, 0, 0.0, w / 2, d / 2, 0.08, "dark"), _box(0, 0, 0.08, w / 2, d / 2, h - 0.08)]
    for s in (-1, 1):
        parts.append(_box(s * w / 4, d / 2 + 0.01, 0.12, w / 4 - 0.015, 0.01, h - 0.16, "wood"))
        parts.append(_box(s * 0.05, d / 2 + 0.03, h / 2, 0.01, 0.01, 0.15, "metal"))
    return parts, []


def build_dresser(w: float, d: float, h: float) -> Model:
    """Chest of drawers: body and three drawer fronts with handles."""
    parts = [_box(0, 0, 0.05, w / 2, d / 2, h - 0.05), _box(0, 0, 0.0, w / 2 - 0.03, d / 2 - 0.03, 0.05, "dark")]
    dh = (h - 0.12) / 3
    for i in range(3):
        z0 = 0.08 + i * dh
        parts.append(_box(0, d / 2 + 0.01, z0, w / 2 - 0.03, 0.01, dh - 0.03, "wood"))
        parts.append(_box(0, d / 2 + 0.03, z0 + dh / 2 - 0.03, 0.08, 0.01, 0.02, "metal"))
    return parts, [Surface(h, (0.0, 0.0), (w / 2, d / 2))]


def build_desk(w: float, d: float, h: float) -> Model:
    """Top on two side panels with a modesty panel at the back."""
    t = 0.04
    parts = [_box(0, 0, h - t, w / 2, d / 2, t)]
    parts += [_box(s * (w / 2 - 0.02), 0, 0.0, 0.02, d / 2 - 0.02, h - t) for s in (-1, 1)]
    parts.append(_box(0, -d / 2 + 0.03, 0.35, w / 2 - 0.04, 0.01, h - t - 0.35))
    return parts, [Surface(h, (0.0, 0.0), (w / 2, d / 2))]


def build_shelf(w: float, d: float, h: float, n_shelves: int = 5, books: bool = True) -> Model:
    """Open shelving: two sides, back panel, top and evenly spaced boards (optionally with books)."""
    t = 0.02
    parts = [_box(s * (w / 2 - t / 2), 0, 0.0, t / 2, d / 2, h) for s in (-1, 1)]
    parts.append(_box(0, -d / 2 + 0.005, 0.0, w / 2 - t, 0.005, h, "dark"))
    gap = h / n_shelves
    for i in range(n_shelves):
        parts.append(_box(0, 0, i * gap, w / 2 - t, d / 2, t))
        if books and i < n_shelves - 1:
            bh = min(gap - 0.06, 0.28)
            parts.append(_box(-w / 8, 0.0, i * gap + t, w / 4 - 0.02, d / 2 - 0.04, bh, "wood" if i % 2 else "dark"))
    parts.append(_box(0, 0, h - t, w / 2, d / 2, t))
    return parts, [Surface(h, (0.0, 0.0), (w / 2, d / 2))]


def build_bookshelf(w: float, d: float, h: float) -> Model:
    """Shelving with rows of books."""
    return build_shelf(w, d, h, 5, True)


def build_storage_shelf(w: float, d: float, h: float) -> Model:
    """Shelving unit with four empty boards."""
    return build_shelf(w, d, h, 4, False)


def build_shoe_rack(w: float, d: float, h: float) -> Model:
    """Low rack with three boards."""
    return build_shelf(w, d, h, 3, False)


def build_toilet(w: float, d: float, h: float) -> Model:
    """Bowl (cylinder), seat ring and cistern against the wall."""
    bowl_h = 0.40
    r = min(w, d * 0.6) / 2
    parts = [_cyl(0, d / 2 - r, 0.0, r * 0.8, bowl_h - 0.04), _cyl(0, d / 2 - r, bowl_h - 0.04, r, 0.04),
             _box(0, -d / 2 + 0.09, 0.0, w / 2 - 0.02, 0.09, h), _box(0, -d / 2 + 0.09, h, w / 2, 0.1, 0.03)]
    return parts, []


def build_sink(w: float, d: float, h: float) -> Model:
    """Vanity cabinet, counter top with a basin, faucet; the counter beside the basin holds objects."""
    t = 0.04
    parts = [_box(0, 0, 0.0, w / 2, d / 2, h - t, "wood"), _box(0, 0, h - t, w / 2, d / 2, t),
             Part("cylinder", (-w / 4, 0.02, h + 0.001), (min(w / 5, d / 3), 0.001, 0.0), "light"),
             _cyl(-w / 4, -d / 2 + 0.06, h, 0.015, 0.2, "metal")]
    return parts, [Surface(h, (w / 4, 0.0), (w / 4 - 0.03, d / 2 - 0.03))]


def build_bathtub(w: float, d: float, h: float) -> Model:
    """Open tub: bottom and four side walls."""
    t = 0.06
    parts = [_box(0, 0, 0.0, w / 2, d / 2, 0.08),
             _box(0, -d / 2 + t / 2, 0.0, w / 2, t / 2, h), _box(0, d / 2 - t / 2, 0.0, w / 2, t / 2, h),
             _box(-w / 2 + t / 2, 0, 0.0, t / 2, d / 2 - t, h), _box(w / 2 - t / 2, 0, 0.0, t / 2, d / 2 - t, h)]
    return parts, []


def build_towel_rack(w: float, d: float, h: float) -> Model:
    """Two posts, two rails and a top shelf on which towels rest."""
    parts = [_box(s * (w / 2 - 0.02), 0, 0.0, 0.02, d / 2, h - 0.02, "metal") for s in (-1, 1)]
    parts += [_box(0, 0, z, w / 2 - 0.04, 0.01, 0.02, "metal") for z in (0.4, 0.8)]
    parts.append(_box(0, 0, h - 0.02, w / 2, d / 2, 0.02))
    return parts, [Surface(h, (0.0, 0.0), (w / 2, d / 2))]


def build_fridge(w: float, d: float, h: float) -> Model:
    """Body, freezer and fridge doors, two handles."""
    split = h * 0.62
    parts = [_box(0, 0, 0.0, w / 2, d / 2, h),
             _box(0, d / 2 + 0.01, 0.05, w / 2 - 0.01, 0.01, split - 0.07, "light"),
             _box(0, d / 2 + 0.01, split, w / 2 - 0.01, 0.01, h - split - 0.03, "light"),
             _box(w / 2 - 0.07, d / 2 + 0.04, split * 0.55, 0.015, 0.02, 0.35, "metal"),
             _box(w / 2 - 0.07, d / 2 + 0.04, split + 0.05, 0.015, 0.02, 0.25, "metal")]
    return parts, []


def build_counter(w: float, d: float, h: float) -> Model:
    """Base cabinets with doors and an overhanging worktop."""
    t = 0.04
    parts = [_box(0, -0.02, 0.0, w / 2 - 0.01, d / 2 - 0.02, h - t, "wood"), _box(0, 0, h - t, w / 2, d / 2, t)]
    n = max(1, int(round(w / 0.6)))
    for i in range(n):
        cx = -w / 2 + (i + 0.5) * w / n
        parts.append(_box(cx, d / 2 - 0.03, 0.12, w / (2 * n) - 0.015, 0.01, h - t - 0.16, "light"))
    return parts, [Surface(h, (0.0, 0.0), (w / 2 - 0.02, d / 2 - 0.02))]


def build_kitchen_cabinet(w: float, d: float, h: float) -> Model:
    """Tall pantry cabinet with two doors and handles."""
    return build_wardrobe(w, d, h)


def build_stove(w: float, d: float, h: float) -> Model:
    """Oven body with glass door, control strip and four burners; pots rest on the burners."""
    bh = 0.02
    parts = [_box(0, 0, 0.0, w / 2, d / 2, h - bh), _box(0, d / 2 + 0.01, 0.15, w / 2 - 0.05, 0.01, h * 0.5, "glass"),
             _box(0, d / 2 + 0.01, h - 0.14, w / 2 - 0.02, 0.01, 0.08, "dark")]
    for sx in (-1, 1):
        for sy in (-1, 1):
            parts.append(_cyl(sx * w / 4, sy * d / 4, h - bh, min(w, d) / 8, bh, "dark"))
    return parts, [Surface(h, (0.0, 0.0), (w / 4 + min(w, d) / 8, d / 4 + min(w, d) / 8))]


def build_sofa(w: float, d: float, h: float) -> Model:
    """Base, backrest, two arms and seat cushions."""
    seat, arm = 0.42, 0.16
    parts = [_box(0, 0, 0.05, w / 2, d / 2, seat - 0.17), _box(0, -d / 2 + 0.1, 0.05, w / 2, 0.1, h - 0.05)]
    parts += [_box(s * (w / 2 - arm / 2), 0.02, 0.05, arm / 2, d / 2 - 0.02, 0.62 - 0.05) for s in (-1, 1)]
    parts += _legs(w, d, 0.05, 0.05, 0.02, "dark")
    n = 3 if w > 1.7 else 2
    cw = (w - 2 * arm) / n
    for i in range(n):
        cx = -w / 2 + arm + (i + 0.5) * cw
        parts.append(_box(cx, 0.1, seat - 0.12, cw / 2 - 0.01, d / 2 - 0.2, 0.12, "light"))
    return parts, []


def build_armchair(w: float, d: float, h: float) -> Model:
    """A one-seat sofa."""
    return build_sofa(w, d, h)


def build_tv_stand(w: float, d: float, h: float) -> Model:
    """Low cabinet: top, bottom, sides and a middle divider."""
    t = 0.03
    parts = [_box(0, 0, h - t, w / 2, d / 2, t), _box(0, 0, 0.05, w / 2, d / 2, t),
             _box(0, 0, 0.0, w / 2 - 0.05, d / 2 - 0.05, 0.05, "dark"),
             _box(0, -d / 2 + 0.01, 0.05, w / 2, 0.01, h - 0.05, "dark")]
    parts += [_box(x, 0, 0.05 + t, t / 2, d / 2, h - 0.05 - 2 * t) for x in (-w / 2 + t / 2, 0.0, w / 2 - t / 2)]
    return parts, [Surface(h, (0.0, 0.0), (w / 2, d / 2))]


def build_sideboard(w: float, d: float, h: float) -> Model:
    """Cabinet on legs with doors."""
    parts = [_box(0, 0, 0.15, w / 2, d / 2, h - 0.15)] + _legs(w, d, 0.15, 0.04, 0.03, "dark")
    parts += [_box(s * w / 4, d / 2 + 0.01, 0.18, w / 4 - 0.015, 0.01, h - 0.21, "wood") for s in (-1, 1)]
    return parts, [Surface(h, (0.0, 0.0), (w / 2, d / 2))]


def build_washing_machine(w: float, d: float, h: float) -> Model:
    """Box body with a round door and a control strip."""
    r = min(w, h) * 0.3
    parts = [_box(0, 0, 0.0, w / 2, d / 2, h), Part("cylinder", (0.0, d / 2 + 0.02, h * 0.45), (r, 0.02, 0.0), "glass", "y"),
             _box(0, d / 2 + 0.01, h - 0.12, w / 2 - 0.03, 0.01, 0.08, "dark")]
    return parts, [Surface(h, (0.0, 0.0), (w / 2, d / 2))]


def build_laundry_basket(w: float, d: float, h: float) -> Model:
    """Round basket with a rim."""
    return [_cyl(0, 0, 0.0, w / 2 - 0.02, h - 0.03), _cyl(0, 0, h - 0.03, w / 2, 0.03, "light")], []


def build_coat_rack(w: float, d: float, h: float) -> Model:
    """Weighted base, pole and hooks."""
    parts = [_cyl(0, 0, 0.0, w / 2, 0.04, "dark"), _cyl(0, 0, 0.04, 0.025, h - 0.04)]
    parts += [Part("sphere", (0.12 * np.cos(a), 0.12 * np.sin(a), h - 0.12), (0.03, 0.0, 0.0), "metal")
              for a in (0.0, np.pi / 2, np.pi, 3 * np.pi / 2)]
    return parts, []


def build_potted_plant(w: float, d: float, h: float) -> Model:
    """Pot, soil, stem and a crown of five leaf clusters."""
    pot_h = h * 0.35
    r = w / 2
    parts = [_cyl(0, 0, 0.0, r * 0.7, pot_h), _cyl(0, 0, pot_h - 0.01, r * 0.62, 0.01, "soil"),
             _cyl(0, 0, pot_h, 0.015, h * 0.3, "leaf"),
             Part("sphere", (0.0, 0.0, h - r * 0.8), (r * 0.7, 0.0, 0.0), "leaf")]
    # foliage: four leaf clusters around the crown
    parts += [Part("sphere", (sx * r * 0.45, sy * r * 0.45, h - r * 1.05), (r * 0.5, 0.0, 0.0), "leaf")
              for sx, sy in ((1, 1), (-1, 1), (1, -1), (-1, -1))]
    return parts, []


def build_floor_lamp(w: float, d: float, h: float) -> Model:
    """Base disc, pole and shade."""
    return [_cyl(0, 0, 0.0, w / 2 * 0.8, 0.03, "dark"), _cyl(0, 0, 0.03, 0.015, h - 0.33, "metal"),
            _cyl(0, 0, h - 0.30, w / 2, 0.30, "shade")], []


def build_trash_can(w: float, d: float, h: float) -> Model:
    """Bin with a lid."""
    return [_cyl(0, 0, 0.0, w / 2, h - 0.03), _cyl(0, 0, h - 0.03, w / 2 + 0.01, 0.03, "dark")], []


def build_bench(w: float, d: float, h: float) -> Model:
    """Seat board on four legs."""
    return [_box(0, 0, h - 0.05, w / 2, d / 2, 0.05)] + _legs(w, d, h - 0.05, 0.05, 0.04, "dark"), [
        Surface(h, (0.0, 0.0), (w / 2, d / 2))]


def build_mirror(w: float, d: float, h: float) -> Model:
    """Full-length standing mirror: frame, glass and foot."""
    return [_box(0, 0, 0.0, w / 2, d / 2, 0.03, "dark"), _box(0, -0.01, 0.03, w / 2, 0.015, h - 0.03),
            _box(0, 0.01, 0.08, w / 2 - 0.04, 0.005, h - 0.16, "glass")], []


def build_piano(w: float, d: float, h: float) -> Model:
    """Upright piano: body, keyboard shelf with white keys and two front legs."""
    parts = [_box(0, -d / 4, 0.0, w / 2, d / 4, h), _box(0, d / 4 - 0.02, 0.68, w / 2 - 0.02, d / 4, 0.06),
             _box(0, d / 4, 0.74, w / 2 - 0.06, d / 4 - 0.06, 0.015, "light")]
    parts += [_box(s * (w / 2 - 0.05), d / 2 - 0.05, 0.0, 0.03, 0.03, 0.68) for s in (-1, 1)]
    return parts, [Surface(h, (0.0, -d / 4), (w / 2, d / 4))]


# --------------------------------------------------------------------------- small-object builders
def build_cup(w: float, d: float, h: float) -> Model:
    """A plain cup."""
    return [_cyl(0, 0, 0.0, w / 2, h)], []


def build_mug(w: float, d: float, h: float) -> Model:
    """Cup body with a handle."""
    r = min(w, d) / 2
    return [_cyl(-(w / 2 - r), 0, 0.0, r, h), _box(w / 2 - 0.012, 0, h * 0.2, 0.012, 0.006, h * 0.6)], []


def build_book(w: float, d: float, h: float) -> Model:
    """Cover and pages."""
    return [_box(0, 0, 0.0, w / 2, d / 2, h), _box(0.003, 0, 0.003, w / 2 - 0.003, d / 2 - 0.006, h - 0.006, "light")], []


def build_lamp(w: float, d: float, h: float) -> Model:
    """Table lamp: base, stem and shade."""
    return [_cyl(0, 0, 0.0, w / 3, 0.03, "dark"), _cyl(0, 0, 0.03, 0.01, h * 0.55 - 0.03, "metal"),
            _cyl(0, 0, h * 0.55, w / 2, h * 0.45, "shade")], []


def build_plant(w: float, d: float, h: float) -> Model:
    """Small potted plant."""
    return build_potted_plant(w, d, h)


def build_vase(w: float, d: float, h: float) -> Model:
    """Round belly and neck."""
    r = w / 2
    return [_cyl(0, 0, 0.0, r * 0.6, 0.02), Part("sphere", (0.0, 0.0, r), (r, 0.0, 0.0)),
            _cyl(0, 0, r, r * 0.45, h - r)], []


def build_towel(w: float, d: float, h: float) -> Model:
    """A folded towel."""
    return [_box(0, 0, 0.0, w / 2, d / 2, h)], []


def build_laptop(w: float, d: float, h: float) -> Model:
    """Open laptop: base, keyboard area and upright screen."""
    return [_box(0, 0, 0.0, w / 2, d / 2, 0.02), _box(0, 0.02, 0.02, w / 2 - 0.02, d / 2 - 0.05, 0.002, "dark"),
            _box(0, -d / 2 + 0.005, 0.02, w / 2, 0.005, h - 0.02), _box(0, -d / 2 + 0.011, 0.035, w / 2 - 0.015, 0.001, h - 0.05, "screen")], []


def build_bowl(w: float, d: float, h: float) -> Model:
    """Foot and wide body."""
    return [_cyl(0, 0, 0.0, w / 4, 0.01), _cyl(0, 0, 0.01, w / 2, h - 0.01)], []


def build_fruit_bowl(w: float, d: float, h: float) -> Model:
    """A bowl with three fruits on it."""
    parts, _ = build_bowl(w, d, h * 0.5)
    r = min(w / 6, h * 0.25)
    parts += [Part("sphere", (w / 5 * np.cos(a), w / 5 * np.sin(a), h * 0.5 + r), (r, 0.0, 0.0), tone)
              for a, tone in ((0.3, "leaf"), (2.4, "main"), (4.4, "leaf"))]
    return parts, []


def build_remote(w: float, d: float, h: float) -> Model:
    """A flat remote control with a button strip."""
    return [_box(0, 0, 0.0, w / 2, d / 2, h), _box(0, d / 4, h, w / 2 - 0.01, d / 6, 0.002, "dark")], []


def build_clock(w: float, d: float, h: float) -> Model:
    """Standing round clock on a small foot, face to the front."""
    r = min(w, h) / 2
    return [_box(0, 0, 0.0, w / 2 * 0.6, d / 2, 0.02, "dark"),
            Part("cylinder", (0.0, 0.0, 0.02 + r), (r, d / 2, 0.0), "main", "y"),
            Part("cylinder", (0.0, d / 2 + 0.001, 0.02 + r), (r * 0.85, 0.001, 0.0), "light", "y")], []


def build_bottle(w: float, d: float, h: float) -> Model:
    """Body, neck and cap."""
    r = w / 2
    return [_cyl(0, 0, 0.0, r, h * 0.7), _cyl(0, 0, h * 0.7, r * 0.4, h * 0.25), _cyl(0, 0, h * 0.95, r * 0.45, h * 0.05, "dark")], []


def build_plate(w: float, d: float, h: float) -> Model:
    """A flat plate."""
    return [_cyl(0, 0, 0.0, w / 2, h)], []


def build_monitor(w: float, d: float, h: float) -> Model:
    """Foot, neck and screen."""
    return [_box(0, 0, 0.0, w / 6, d / 2, 0.015, "dark"), _box(0, -d / 4, 0.015, 0.02, 0.015, h * 0.35, "dark"),
            _box(0, -d / 4 + 0.03, h * 0.3, w / 2, 0.015, h * 0.7), _box(0, -d / 4 + 0.046, h * 0.3 + 0.015, w / 2 - 0.015, 0.001, h * 0.7 - 0.03, "screen")], []


def build_keyboard(w: float, d: float, h: float) -> Model:
    """A flat keyboard with a key field."""
    return [_box(0, 0, 0.0, w / 2, d / 2, h), _box(0, 0, h, w / 2 - 0.01, d / 2 - 0.01, 0.002, "light")], []


def build_tv(w: float, d: float, h: float) -> Model:
    """Flat screen on a foot."""
    return [_box(0, 0, 0.0, w / 5, d / 2, 0.02, "dark"), _box(0, 0, 0.02, 0.03, 0.02, 0.08, "dark"),
            _box(0, 0, 0.08, w / 2, 0.03, h - 0.08), _box(0, 0.031, 0.1, w / 2 - 0.02, 0.001, h - 0.12, "screen")], []


def build_soap_dispenser(w: float, d: float, h: float) -> Model:
    """Bottle with a pump."""
    return [_cyl(0, 0, 0.0, w / 2, h * 0.75), _cyl(0, 0, h * 0.75, 0.008, h * 0.2, "light"),
            _box(0.015, 0, h * 0.92, 0.02, 0.006, h * 0.08, "light")], []


def build_picture_frame(w: float, d: float, h: float) -> Model:
    """Standing frame with a picture."""
    return [_box(0, 0, 0.0, w / 2, d / 2, h), _box(0, d / 2 + 0.001, 0.015, w / 2 - 0.015, 0.001, h - 0.03, "light")], []


def build_candle(w: float, d: float, h: float) -> Model:
    """Candle with a wick."""
    return [_cyl(0, 0, 0.0, w / 2, h - 0.01), _cyl(0, 0, h - 0.01, 0.002, 0.01, "dark")], []


def build_kettle(w: float, d: float, h: float) -> Model:
    """Body on a base, lid knob, handle and spout."""
    r = min(w, d) / 2 * 0.75
    return [_cyl(0, 0, 0.0, r + 0.01, 0.02, "dark"), _cyl(0, 0, 0.02, r, h * 0.7), _cyl(0, 0, 0.02 + h * 0.7, 0.02, 0.02, "dark"),
            _box(-r - 0.015, 0, h * 0.2, 0.012, 0.01, h * 0.55, "dark"), _box(r + 0.02, 0, h * 0.4, 0.025, 0.01, 0.015)], []


def build_microwave(w: float, d: float, h: float) -> Model:
    """Box with a dark glass door and a control panel."""
    return [_box(0, 0, 0.0, w / 2, d / 2, h), _box(-w / 8, d / 2 + 0.005, 0.03, w * 3 / 8 - 0.03, 0.005, h - 0.06, "screen"),
            _box(w * 3 / 8 - 0.01, d / 2 + 0.005, 0.03, w / 8 - 0.02, 0.005, h - 0.06, "metal")], []


def build_toaster(w: float, d: float, h: float) -> Model:
    """Body with two slots and a lever."""
    return [_box(0, 0, 0.0, w / 2, d / 2, h - 0.002), _box(0, -d / 6, h - 0.002, w / 2 - 0.02, 0.012, 0.002, "dark"),
            _box(0, d / 6, h - 0.002, w / 2 - 0.02, 0.012, 0.002, "dark"), _box(w / 2 + 0.01, 0, h * 0.5, 0.01, 0.01, 0.02, "dark")], []


def build_pot(w: float, d: float, h: float) -> Model:
    """Cooking pot with two handles."""
    r = min(w, d) / 2 - 0.03
    return [_cyl(0, 0, 0.0, r, h), _box(-r - 0.015, 0, h * 0.7, 0.015, 0.02, 0.015, "dark"),
            _box(r + 0.015, 0, h * 0.7, 0.015, 0.02, 0.015, "dark")], []


def build_teapot(w: float, d: float, h: float) -> Model:
    """Round body, lid knob and spout."""
    r = min(h, w * 0.7) / 2
    return [Part("sphere", (0.0, 0.0, r), (r, 0.0, 0.0)), _cyl(0, 0, 2 * r, 0.012, max(h - 2 * r, 0.01)),
            _box(r + 0.02, 0, r * 0.9, 0.03, 0.01, 0.015)], []


def build_basket(w: float, d: float, h: float) -> Model:
    """A small woven basket: base and four low walls."""
    t = 0.01
    return [_box(0, 0, 0.0, w / 2, d / 2, t), _box(0, -d / 2 + t / 2, 0.0, w / 2, t / 2, h), _box(0, d / 2 - t / 2, 0.0, w / 2, t / 2, h),
            _box(-w / 2 + t / 2, 0, 0.0, t / 2, d / 2 - t, h), _box(w / 2 - t / 2, 0, 0.0, t / 2, d / 2 - t, h)], []


# --------------------------------------------------------------------------- category table
Range = tuple[float, float]


@dataclass(frozen=True)
class MeshRef:
    """A category's render-mesh generator: the name of a ``gen_*`` function of
    ``scenes.object_meshes`` (resolved there, so the catalog needs no mesh code) and how many
    shape variants it draws from."""

    generator: str
    variants: int


@dataclass(frozen=True)
class Category:
    """A semantic category: its model builder, size ranges (m), palette, mass and behaviour.

    ``mass`` is for the mid-range size and scales with volume; ``placement`` is ``"wall"``
    (back against a wall), ``"free"`` (room centre), ``"on"`` (rests on a supporting
    surface) or ``"companion"`` (placed next to another piece by its group rule).
    ``clearance`` is the free depth kept in front of it (m). ``mesh`` names its recognisable
    render mesh (``objects: meshes``; None: drawn as its primitives).
    """

    name: str
    builder: Builder
    width: Range
    depth: Range
    height: Range
    palette: tuple[tuple[str, str], ...]
    mass: float
    movable: bool
    placement: str = "wall"
    clearance: float = 0.5
    mesh: "MeshRef | None" = None

    def sample_dims(self, rng: np.random.Generator) -> tuple[float, float, float]:
        """Full extents ``(w, d, h)`` drawn uniformly from the ranges, rounded to 1 cm."""
        dims = [rng.uniform(lo, hi) if hi > lo else lo for lo, hi in (self.width, self.depth, self.height)]
        return tuple(round(float(v), 2) for v in dims)  # type: ignore[return-value]

    def size_word(self, dims: tuple[float, float, float]) -> str:
        """``small`` / ``medium`` / ``large`` by where the volume falls within the category's range."""
        lo = self.width[0] * self.depth[0] * self.height[0]
        hi = self.width[1] * self.depth[1] * self.height[1]
        if hi <= lo:
            return "medium"
        frac = (dims[0] * dims[1] * dims[2] - lo) / (hi - lo)
        return "small" if frac < 1 / 3 else ("medium" if frac < 2 / 3 else "large")

    def mass_for(self, dims: tuple[float, float, float]) -> float:
        """Mass (kg) scaled by volume relative to the mid-range size, rounded to 10 g."""
        mid = np.prod([(lo + hi) / 2 for lo, hi in (self.width, self.depth, self.height)])
        return round(float(self.mass * np.prod(dims) / mid), 2)


W, M, F, L, P, C, G, S = "wood", "metal", "fabric", "leather", "plastic", "ceramic", "glass", "stone"
_WOODS = (("oak", W), ("walnut", W), ("light_wood", W), ("white", W), ("black", W))
_FABRICS = (("gray", F), ("beige", F), ("blue", F), ("green", F), ("red", F), ("brown", L), ("black", L), ("navy", F))


def _c(name, builder, w, d, h, palette, mass, movable, placement="wall", clearance=0.5, mesh=None) -> Category:
    return Category(name, builder, w, d, h, tuple(palette), mass, movable, placement, clearance, mesh)


CATEGORIES: dict[str, Category] = {c.name: c for c in [
    # furniture
    _c("bed", build_bed, (1.0, 1.7), (1.95, 2.1), (0.9, 1.1), _WOODS, 80.0, False, clearance=0.6, mesh=MeshRef('gen_bed', 3)),
    _c("nightstand", build_nightstand, (0.4, 0.5), (0.38, 0.45), (0.5, 0.6), _WOODS, 12.0, True, "companion", 0.3, mesh=MeshRef('gen_nightstand', 3)),
    _c("wardrobe", build_wardrobe, (0.9, 1.4), (0.55, 0.62), (1.9, 2.1), _WOODS, 70.0, False, clearance=0.6, mesh=MeshRef('gen_wardrobe', 3)),
    _c("dresser", build_dresser, (0.8, 1.2), (0.45, 0.5), (0.75, 0.9), _WOODS, 40.0, False, mesh=MeshRef('gen_dresser', 3)),
    _c("desk", build_desk, (1.0, 1.4), (0.6, 0.7), (0.74, 0.76), _WOODS, 25.0, False, clearance=0.8, mesh=MeshRef('gen_desk', 2)),
    _c("office_chair", build_office_chair, (0.55, 0.6), (0.55, 0.6), (0.95, 1.1),
       (("black", F), ("gray", F), ("blue", F), ("red", F)), 12.0, True, "companion", mesh=MeshRef('gen_office_chair', 3)),
    _c("bookshelf", build_bookshelf, (0.6, 1.0), (0.3, 0.35), (1.5, 2.0), _WOODS, 35.0, False),
    _c("toilet", build_toilet, (0.38, 0.42), (0.65, 0.72), (0.75, 0.8), (("white", C),), 25.0, False, mesh=MeshRef('gen_toilet', 2)),
    _c("sink", build_sink, (0.6, 1.0), (0.45, 0.5), (0.82, 0.86), _WOODS[:3] + (("white", W),), 30.0, False, mesh=MeshRef('gen_sink', 3)),
    _c("bathtub", build_bathtub, (1.5, 1.7), (0.7, 0.8), (0.55, 0.6), (("white", C), ("cream", C)), 60.0, False, clearance=0.4, mesh=MeshRef('gen_bathtub', 2)),
    _c("towel_rack", build_towel_rack, (0.5, 0.7), (0.25, 0.3), (0.9, 1.0), (("silver", M), ("white", M), ("oak", W)), 4.0, True, clearance=0.3),
    _c("fridge", build_fridge, (0.6, 0.75), (0.65, 0.72), (1.7, 1.9), (("white", M), ("silver", M), ("black", M)), 75.0, False, clearance=0.7, mesh=MeshRef('gen_fridge', 3)),
    _c("counter", build_counter, (1.2, 2.4), (0.6, 0.62), (0.9, 0.92), (("white", S), ("gray", S), ("beige", S), ("black", S)), 80.0, False, clearance=0.7),
    _c("stove", build_stove, (0.6, 0.76), (0.6, 0.62), (0.88, 0.9), (("white", M), ("silver", M), ("black", M)), 50.0, False, clearance=0.7, mesh=MeshRef('gen_stove', 2)),
    _c("kitchen_cabinet", build_kitchen_cabinet, (0.6, 1.0), (0.55, 0.6), (2.0, 2.1), (("white", W), ("oak", W), ("gray", W), ("green", W)), 60.0, False, mesh=MeshRef('gen_kitchen_cabinet', 3)),
    _c("sofa", build_sofa, (1.7, 2.3), (0.85, 0.95), (0.8, 0.9), _FABRICS, 60.0, False, clearance=0.4, mesh=MeshRef('gen_sofa', 3)),
    _c("armchair", build_armchair, (0.8, 0.95), (0.8, 0.9), (0.8, 0.95), _FABRICS, 25.0, True, mesh=MeshRef('gen_sofa', 3)),
    _c("coffee_table", build_coffee_table, (0.9, 1.2), (0.5, 0.6), (0.4, 0.45), _WOODS + (("white", G),), 15.0, True, "companion", 0.3, mesh=MeshRef('gen_coffee_table', 3)),
    _c("tv_stand", build_tv_stand, (1.2, 1.8), (0.4, 0.45), (0.45, 0.55), _WOODS, 30.0, False, clearance=0.8),
    _c("dining_table", build_table, (1.2, 1.8), (0.8, 1.0), (0.74, 0.76), _WOODS + (("white", S),), 35.0, False, "free", 0.3, mesh=MeshRef('gen_table', 3)),
    _c("chair", build_chair, (0.42, 0.48), (0.45, 0.5), (0.85, 0.95), _WOODS + (("red", P), ("white", P)), 6.0, True, "companion", mesh=MeshRef('gen_chair', 3)),
    _c("sideboard", build_sideboard, (1.2, 1.6), (0.42, 0.48), (0.8, 0.9), _WOODS, 45.0, False, mesh=MeshRef('gen_sideboard', 2)),
    _c("washing_machine", build_washing_machine, (0.6, 0.6), (0.6, 0.62), (0.85, 0.85), (("white", M), ("silver", M)), 70.0, False, clearance=0.7),
    _c("dryer", build_washing_machine, (0.6, 0.6), (0.6, 0.62), (0.85, 0.85), (("white", M), ("gray", M)), 40.0, False, clearance=0.7),
    _c("laundry_basket", build_laundry_basket, (0.4, 0.5), (0.4, 0.5), (0.45, 0.6), (("white", P), ("blue", P), ("beige", F), ("gray", P)), 1.5, True),
    _c("shoe_rack", build_shoe_rack, (0.6, 0.9), (0.3, 0.35), (0.45, 0.6), _WOODS, 8.0, True),
    _c("coat_rack", build_coat_rack, (0.4, 0.45), (0.4, 0.45), (1.7, 1.8), (("black", M), ("walnut", W), ("silver", M)), 5.0, True, clearance=0.3),
    _c("potted_plant", build_potted_plant, (0.4, 0.6), (0.4, 0.6), (0.8, 1.3), (("terracotta", C), ("white", C), ("gray", S), ("black", C)), 10.0, True, clearance=0.2, mesh=MeshRef('gen_plant', 3)),
    _c("floor_lamp", build_floor_lamp, (0.35, 0.45), (0.35, 0.45), (1.5, 1.7), (("white", F), ("beige", F), ("black", M)), 5.0, True, clearance=0.2, mesh=MeshRef('gen_floor_lamp', 3)),
    _c("trash_can", build_trash_can, (0.25, 0.35), (0.25, 0.35), (0.4, 0.6), (("silver", M), ("white", P), ("black", P), ("green", P)), 2.0, True, clearance=0.2),
    _c("storage_shelf", build_storage_shelf, (0.8, 1.2), (0.4, 0.45), (1.6, 1.9), (("white", W), ("gray", M), ("oak", W)), 30.0, False),
    _c("bench", build_bench, (1.0, 1.4), (0.35, 0.4), (0.45, 0.48), _WOODS, 15.0, True),
    _c("mirror", build_mirror, (0.5, 0.7), (0.06, 0.08), (1.5, 1.7), (("black", W), ("white", W), ("oak", W), ("silver", M)), 10.0, True, clearance=0.3),
    _c("piano", build_piano, (1.4, 1.5), (0.55, 0.6), (1.2, 1.3), (("black", W), ("walnut", W), ("white", W)), 200.0, False, clearance=0.8),
    # small objects (rest on supporting furniture)
    _c("tv", build_tv, (0.9, 1.3), (0.22, 0.25), (0.6, 0.8), (("black", P), ("silver", P)), 12.0, True, "on", mesh=MeshRef('gen_tv', 2)),
    _c("cup", build_cup, (0.07, 0.08), (0.07, 0.08), (0.09, 0.11), (("white", C), ("red", C), ("blue", C), ("yellow", C), ("green", C)), 0.3, True, "on", mesh=MeshRef('gen_cup', 3)),
    _c("mug", build_mug, (0.11, 0.12), (0.08, 0.09), (0.09, 0.1), (("white", C), ("red", C), ("blue", C), ("black", C), ("yellow", C)), 0.35, True, "on"),
    _c("book", build_book, (0.15, 0.2), (0.22, 0.28), (0.03, 0.05), (("red", "paper"), ("blue", "paper"), ("green", "paper"), ("yellow", "paper"), ("black", "paper")), 0.6, True, "on", mesh=MeshRef('gen_book', 2)),
    _c("lamp", build_lamp, (0.25, 0.32), (0.25, 0.32), (0.4, 0.5), (("white", F), ("beige", F), ("yellow", F), ("black", M)), 2.0, True, "on", mesh=MeshRef('gen_lamp', 3)),
    _c("plant", build_plant, (0.15, 0.22), (0.15, 0.22), (0.25, 0.4), (("terracotta", C), ("white", C), ("blue", C)), 1.5, True, "on", mesh=MeshRef('gen_plant', 3)),
    _c("vase", build_vase, (0.12, 0.18), (0.12, 0.18), (0.25, 0.35), (("blue", G), ("white", C), ("green", G), ("red", C), ("yellow", C)), 1.0, True, "on"),
    _c("towel", build_towel, (0.3, 0.4), (0.2, 0.25), (0.06, 0.08), (("white", F), ("blue", F), ("pink", F), ("yellow", F), ("green", F)), 0.4, True, "on"),
    _c("laptop", build_laptop, (0.32, 0.36), (0.22, 0.25), (0.22, 0.25), (("silver", M), ("black", P), ("gray", M)), 1.8, True, "on"),
    _c("bowl", build_bowl, (0.16, 0.22), (0.16, 0.22), (0.07, 0.09), (("white", C), ("blue", C), ("red", C), ("green", C)), 0.4, True, "on"),
    _c("fruit_bowl", build_fruit_bowl, (0.24, 0.28), (0.24, 0.28), (0.14, 0.16), (("orange", C), ("white", C), ("yellow", C)), 1.2, True, "on"),
    _c("remote", build_remote, (0.05, 0.05), (0.17, 0.2), (0.02, 0.02), (("black", P), ("gray", P), ("white", P)), 0.15, True, "on"),
    _c("clock", build_clock, (0.16, 0.22), (0.04, 0.05), (0.18, 0.24), (("white", P), ("black", P), ("red", P), ("oak", W)), 0.5, True, "on"),
    _c("bottle", build_bottle, (0.07, 0.09), (0.07, 0.09), (0.25, 0.32), (("green", G), ("light_blue", G), ("white", P), ("red", G)), 0.8, True, "on", mesh=MeshRef('gen_bottle', 3)),
    _c("plate", build_plate, (0.24, 0.27), (0.24, 0.27), (0.02, 0.02), (("white", C), ("blue", C), ("cream", C)), 0.5, True, "on"),
    _c("monitor", build_monitor, (0.5, 0.65), (0.18, 0.22), (0.4, 0.5), (("black", P), ("silver", P), ("white", P)), 4.5, True, "on"),
    _c("keyboard", build_keyboard, (0.42, 0.45), (0.13, 0.15), (0.02, 0.03), (("black", P), ("white", P), ("gray", P)), 0.7, True, "on"),
    _c("soap_dispenser", build_soap_dispenser, (0.06, 0.08), (0.06, 0.08), (0.15, 0.18), (("white", C), ("green", P), ("pink", P), ("silver", M)), 0.3, True, "on"),
    _c("picture_frame", build_picture_frame, (0.15, 0.25), (0.02, 0.02), (0.2, 0.3), (("black", W), ("oak", W), ("silver", M), ("white", W)), 0.4, True, "on"),
    _c("candle", build_candle, (0.06, 0.08), (0.06, 0.08), (0.1, 0.15), (("white", "plastic"), ("red", P), ("cream", P)), 0.3, True, "on"),
    _c("kettle", build_kettle, (0.22, 0.25), (0.17, 0.2), (0.22, 0.26), (("silver", M), ("white", P), ("black", P), ("red", M)), 1.2, True, "on"),
    _c("microwave", build_microwave, (0.45, 0.5), (0.35, 0.4), (0.26, 0.3), (("white", M), ("silver", M), ("black", M)), 12.0, True, "on"),
    _c("toaster", build_toaster, (0.26, 0.3), (0.16, 0.2), (0.18, 0.2), (("silver", M), ("red", M), ("white", M)), 1.5, True, "on"),
    _c("pot", build_pot, (0.26, 0.3), (0.2, 0.24), (0.14, 0.18), (("silver", M), ("black", M), ("red", M)), 1.8, True, "on"),
    _c("teapot", build_teapot, (0.2, 0.24), (0.14, 0.16), (0.15, 0.18), (("white", C), ("blue", C), ("green", C)), 0.8, True, "on"),
    _c("basket", build_basket, (0.3, 0.4), (0.22, 0.3), (0.15, 0.2), (("beige", W), ("brown", W), ("white", P)), 0.6, True, "on"),
]}

#: Categories that rest on other furniture.
SMALL_CATEGORIES = tuple(sorted(n for n, c in CATEGORIES.items() if c.placement == "on"))

# --------------------------------------------------------------------------- placement rules


@dataclass(frozen=True)
class Companion:
    """A piece placed relative to a main piece: ``front`` (facing it), ``sides`` (left and right
    of it, backs on the same wall) or ``around`` (chairs on both long sides of a table)."""

    category: str
    where: str
    prob: float = 1.0
    gap: float = 0.05


@dataclass(frozen=True)
class FurnitureRule:
    """``count`` pieces of ``category`` (each kept with probability ``prob``) with companions."""

    category: str
    prob: float = 1.0
    count: tuple[int, int] = (1, 1)
    companions: tuple[Companion, ...] = ()


_R = FurnitureRule
ROOM_RULES: dict[str, tuple[FurnitureRule, ...]] = {
    "bedroom": (_R("bed", companions=(Companion("nightstand", "sides", 0.85),)), _R("wardrobe", 0.9),
                _R("dresser", 0.5), _R("desk", 0.25, companions=(Companion("office_chair", "front"),)),
                _R("potted_plant", 0.3), _R("mirror", 0.3), _R("floor_lamp", 0.3)),
    "bathroom": (_R("toilet"), _R("sink"), _R("bathtub", 0.75), _R("towel_rack", 0.85), _R("trash_can", 0.5),
                 _R("laundry_basket", 0.25)),
    "kitchen": (_R("counter"), _R("fridge"), _R("stove"), _R("kitchen_cabinet", 0.8), _R("counter", 0.4),
                _R("trash_can", 0.6)),
    "living_room": (_R("sofa", companions=(Companion("coffee_table", "front", 0.9, 0.4),)), _R("tv_stand"),
                    _R("armchair", 0.6, (1, 2)), _R("bookshelf", 0.5), _R("potted_plant", 0.6), _R("floor_lamp", 0.5),
                    _R("piano", 0.15), _R("sideboard", 0.3)),
    "dining_room": (_R("dining_table", companions=(Companion("chair", "around"),)), _R("sideboard", 0.7),
                    _R("potted_plant", 0.4), _R("storage_shelf", 0.2)),
    "office": (_R("desk", companions=(Companion("office_chair", "front"),)), _R("bookshelf", 0.9, (1, 2)),
               _R("armchair", 0.3), _R("potted_plant", 0.4), _R("trash_can", 0.5), _R("storage_shelf", 0.3)),
    "hallway": (_R("shoe_rack", 0.6), _R("coat_rack", 0.5), _R("bench", 0.4), _R("potted_plant", 0.3), _R("mirror", 0.3)),
    "closet": (_R("storage_shelf", 1.0, (1, 2)), _R("laundry_basket", 0.5), _R("shoe_rack", 0.4)),
    "laundry_room": (_R("washing_machine"), _R("dryer", 0.7), _R("storage_shelf", 0.6), _R("laundry_basket", 0.8),
                     _R("towel_rack", 0.3)),
}

#: For each supporting category: (small category, probability) pairs tried in order, and the
#: maximum number of small objects it holds.
SMALL_OBJECT_RULES: dict[str, tuple[tuple[tuple[str, float], ...], int]] = {
    "nightstand": ((("lamp", 0.8), ("clock", 0.4), ("book", 0.4), ("cup", 0.2)), 3),
    "dresser": ((("picture_frame", 0.5), ("vase", 0.3), ("lamp", 0.3), ("basket", 0.3)), 3),
    "desk": ((("monitor", 0.5), ("laptop", 0.5), ("keyboard", 0.4), ("mug", 0.5), ("lamp", 0.4), ("book", 0.5)), 4),
    "bookshelf": ((("plant", 0.4), ("vase", 0.3), ("clock", 0.3)), 1),
    "sink": ((("soap_dispenser", 0.8), ("cup", 0.3)), 2),
    "towel_rack": ((("towel", 1.0),), 1),
    "counter": ((("kettle", 0.5), ("microwave", 0.5), ("toaster", 0.4), ("bowl", 0.4), ("bottle", 0.4), ("plate", 0.3), ("mug", 0.3)), 4),
    "stove": ((("pot", 0.6), ("teapot", 0.3)), 1),
    "coffee_table": ((("remote", 0.6), ("book", 0.5), ("cup", 0.4), ("vase", 0.3), ("candle", 0.3)), 3),
    "tv_stand": ((("tv", 1.0), ("plant", 0.3), ("clock", 0.2)), 3),
    "dining_table": ((("fruit_bowl", 0.5), ("plate", 0.6), ("cup", 0.5), ("vase", 0.4), ("bottle", 0.3), ("bowl", 0.3)), 5),
    "sideboard": ((("vase", 0.5), ("lamp", 0.4), ("picture_frame", 0.4), ("candle", 0.3)), 3),
    "washing_machine": ((("basket", 0.5), ("bottle", 0.4)), 2),
    "dryer": ((("towel", 0.5),), 1),
    "bench": ((("basket", 0.3), ("book", 0.2)), 1),
    "storage_shelf": ((("basket", 0.4), ("plant", 0.3)), 1),
    "piano": ((("picture_frame", 0.4), ("candle", 0.3)), 2),
}

#: Floor colours/materials and wall colours per room type.
FLOOR_STYLES: dict[str, tuple[tuple[str, str], ...]] = {
    "bathroom": (("white", C), ("gray", S), ("light_blue", C)), "kitchen": (("gray", S), ("white", S), ("beige", C)),
    "laundry_room": (("gray", S), ("white", C)), "hallway": (("oak", W), ("gray", S), ("walnut", W)),
}
DEFAULT_FLOOR_STYLE: tuple[tuple[str, str], ...] = (("oak", W), ("light_wood", W), ("walnut", W), ("beige", F))
WALL_COLORS = ("white", "cream", "beige", "light_blue", "gray")


def resolve_color(tone: str, main: str) -> tuple[float, float, float]:
    """RGB of a part: ``main`` for ``tone`` ``"main"`` or ``"shade"``, else the tone's fixed colour."""
    return COLORS[main if tone in ("main", "shade") else TONES[tone]]


@dataclass
class ObjectModel:
    """A category instance with sampled dimensions, colour and material, ready to place."""

    category: Category
    dims: tuple[float, float, float]
    color: str
    material: str
    parts: list[Part] = field(default_factory=list)
    surfaces: list[Surface] = field(default_factory=list)

    @property
    def attributes(self) -> dict[str, str]:
        """Describable attributes: colour, material and size word."""
        return {"color": self.color, "material": self.material, "size": self.category.size_word(self.dims)}


def make_model(name: str, rng: np.random.Generator) -> ObjectModel:
    """Sample an instance of category ``name``: dimensions, palette entry and its primitives."""
    cat = CATEGORIES[name]
    dims = cat.sample_dims(rng)
    color, material = cat.palette[int(rng.integers(len(cat.palette)))]
    parts, surfaces = cat.builder(*dims)
    return ObjectModel(cat, dims, color, material, parts, surfaces)
