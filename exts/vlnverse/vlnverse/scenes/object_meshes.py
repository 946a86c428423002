"""Detailed render meshes of scene objects (the ``objects: meshes`` opt-in; ``primitives`` is the default).

Each object of a category whose ``catalog.CATEGORIES`` record names a mesh (``Category.mesh``,
collected in ``GENERATORS``) gets visual-only meshes — a sofa with arms,
cushions and legs, a bed with headboard, duvet and pillows, a sink with a basin and a faucet —
built by ``vlnverse.scenes.meshkit`` in the category's local frame (``catalog``: origin at the
footprint centre on the floor, ``+y`` the front) and placed by the object's pose. The object's
collision geoms stay as they are (physics, occupancy maps and hashes unchanged); a renderer shows
the meshes instead of them. Everything is recovered from the scene itself (category, collision
geoms, colour and material attributes), so it works for generated and loaded homes alike:

- the pose's yaw comes from an upright part and the catalog dimensions ``(w, d, h)`` are solved
  from the parts' local bounds (``object_frame``: the catalog builders are deterministic);
- the variant (shape parameters, accent colours) is drawn from a seed derived from the scene id,
  the category and the object's model (``variant_seed``): byte-identical meshes for a home, twins
  alike; an
  object's ``render_variant`` attribute pins the shape variant (the object sheet's showrooms);
- every mesh stays within the union of the object's collision footprints (``footprint_contains``,
  tested per category), so the navigable map is still exact.

One mesh ``Geom`` per tone (material) of an object, labelled with the object's label and instance
id, ``collides=False``; ``texcoords`` (per vertex, metres) for textured materials.
"""
from __future__ import annotations

import hashlib
import math
from collections import OrderedDict
from functools import lru_cache
from typing import Callable

import numpy as np

from .catalog import CATEGORIES, COLORS, part_material, resolve_color
from .description import Geom, SceneDescription, SceneObject
from .meshkit import MeshBuilder

#: How objects are drawn: ``primitives`` (their collision primitives, the default every figure was
#: measured with) or ``meshes`` (this module's render meshes where a generator exists).
OBJECT_STYLES = ("primitives", "meshes")
#: The style where people and vision-language models look at the homes (the study, MLLM agents, the
#: gallery): objects they can recognise. The learning recipe keeps ``primitives``, its trained render.
RECOGNISABLE_OBJECTS = "meshes"
#: Decimals of the written vertices (0.01 mm) and texture coordinates.
VERTEX_DECIMALS, UV_DECIMALS = 5, 4


def check_objects(value: str, field: str = "render.objects") -> str:
    """``value`` if it names an object style, else ``ConfigError`` naming ``field``."""
    from ..core.errors import ConfigError

    if value not in OBJECT_STYLES:
        raise ConfigError(f"got {value!r}", field=field, expected="one of " + ", ".join(OBJECT_STYLES))
    return value


def variant_seed(scene_id: str, category: str, dims, color: str, material: str) -> int:
    """Seed of an object's variant: stable across runs, machines and USD round trips. Objects of one
    model in a home (a set of dining chairs, a pair of nightstands) share it, so they match and a
    USD file stores their meshes once."""
    key = f"{scene_id}|{category}|{np.round(np.asarray(dims, float), 3).tolist()}|{color}|{material}"
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little")


# --------------------------------------------------------------------------- tones
def tone_look(tone: str, color: str, material: str) -> tuple[tuple[float, float, float], str]:
    """(RGB, semantic material name) of a tone: a catalog tone (``main``, ``dark``, ``metal`` …) or
    ``as:<kind>:<colour>`` (a named colour in material kind ``kind``)."""
    if tone.startswith("as:"):
        _, kind, cname = tone.split(":")
        return COLORS[cname], f"{kind}_{cname}"
    return resolve_color(tone, color), part_material(tone, material, color)


def _accent(rng: np.random.Generator, kind: str, choices=("red", "blue", "yellow", "teal", "green", "orange",
                                                           "cream", "navy", "pink", "beige")) -> str:
    return f"as:{kind}:{choices[int(rng.integers(len(choices)))]}"


# --------------------------------------------------------------------------- generators
# Each takes (builder, w, d, h, rng, variant) with the catalog's dimensions and draws in its frame.
def _legs_at(b: MeshBuilder, tone: str, xs, ys, z0: float, z1: float, top: float, bottom: float, style: int) -> None:
    for x in xs:
        for y in ys:
            if style == 0:  # square, tapered
                b.loft(tone, [(top, top, z1), (bottom, bottom, z0)][::-1], exponent=10, segments=10, center=(x, y))
            elif style == 1:  # turned
                r = top
                b.loft(tone, [(bottom, bottom, z0), (r * 0.8, r * 0.8, z0 + (z1 - z0) * 0.4),
                              (r, r, z0 + (z1 - z0) * 0.7), (r * 0.7, r * 0.7, z0 + (z1 - z0) * 0.85), (r, r, z1)],
                       segments=8, center=(x, y))
            else:  # thin metal rod
                b.cylinder(tone, x, y, z0, z1, min(top, bottom) * 0.6, segments=8)


def gen_sofa(b, w, d, h, rng, variant):
    """Sofa / armchair: base, back, arms, seat and back cushions, legs, throw pillows."""
    seat = 0.42
    arm_w = (0.16, 0.15, 0.09)[variant]
    leg_h = (0.05, 0.09, 0.12)[variant]
    r = (0.025, 0.06, 0.015)[variant]
    b.rounded_box("main", (-w / 2, -d / 2, leg_h), (w / 2, d / 2, seat - 0.13), r, exponent=12)
    b.rounded_box("main", (-w / 2, -d / 2, leg_h), (w / 2, -d / 2 + 0.2, h - (0.0 if variant != 1 else 0.02)),
                  r * 1.5, exponent=12)
    arm_top = (0.62, 0.60, 0.56)[variant]
    for s in (-1, 1):
        x0, x1 = sorted((s * (w / 2 - arm_w), s * w / 2))
        b.rounded_box("main", (x0, -d / 2 + 0.04, leg_h), (x1, d / 2, arm_top), min(r * 2, 0.07), exponent=10)
    inner = w - 2 * arm_w
    n = 3 if inner > 1.55 else 2 if inner > 0.9 else 1
    cw = inner / n
    for i in range(n):
        x0 = -w / 2 + arm_w + i * cw + 0.004
        b.rounded_box("main", (x0, -d / 2 + 0.2, seat - 0.14), (x0 + cw - 0.008, d / 2 - 0.015, seat + 0.03), 0.05,
                      exponent=6)
        if variant != 2:
            b.rounded_box("main", (x0 + 0.01, -d / 2 + 0.19, seat + 0.03), (x0 + cw - 0.018, -d / 2 + 0.36, h - 0.05),
                          0.07, exponent=5)
    if rng.random() < 0.7:
        tone = _accent(rng, "fabric")
        for s in (-1, 1) if n > 1 else (1,):
            xc = s * (w / 2 - arm_w - 0.2)
            b.rounded_box(tone, (xc - 0.17, -d / 2 + 0.36, seat + 0.03), (xc + 0.17, -d / 2 + 0.48, seat + 0.36), 0.06,
                          exponent=3)
    inset = 0.06
    _legs_at(b, "dark", (-w / 2 + inset, w / 2 - inset), (-d / 2 + inset, d / 2 - inset), 0.0, leg_h + 0.01,
             0.025, 0.018, (0, 1, 2)[variant])


def gen_chair(b, w, d, h, rng, variant):
    """Dining chair: legs, seat, back (slats, upholstered panel or ladder rails)."""
    seat = 0.45
    t = 0.035
    _legs_at(b, "main", (-w / 2 + 0.03, w / 2 - 0.03), (-d / 2 + 0.03, d / 2 - 0.03), 0.0, seat - 0.03, 0.018, 0.014,
             (0, 1, 0)[variant])
    b.rounded_box("main", (-w / 2, -d / 2, seat - 0.04), (w / 2, d / 2, seat), 0.012, exponent=8)
    if variant == 1:
        b.rounded_box(_accent(rng, "fabric"), (-w / 2 + 0.02, -d / 2 + 0.05, seat), (w / 2 - 0.02, d / 2 - 0.02,
                                                                                    seat + 0.04), 0.02, exponent=6)
    for s in (-1, 1):  # back posts
        b.box("main", (s * (w / 2 - t / 2) - t / 2, -d / 2, seat), (s * (w / 2 - t / 2) + t / 2, -d / 2 + t, h))
    if variant == 0:  # vertical slats and a top rail
        b.box("main", (-w / 2, -d / 2, h - 0.08), (w / 2, -d / 2 + t, h))
        for x in np.linspace(-w / 2 + 0.09, w / 2 - 0.09, 3):
            b.box("main", (x - 0.02, -d / 2 + 0.008, seat + 0.05), (x + 0.02, -d / 2 + 0.027, h - 0.08))
    elif variant == 1:  # upholstered back panel
        b.rounded_box("main", (-w / 2 + 0.01, -d / 2, seat + 0.12), (w / 2 - 0.01, -d / 2 + 0.05, h),
                      0.02, exponent=6)
    else:  # ladder back
        for z in np.linspace(seat + 0.12, h - 0.04, 4):
            b.box("main", (-w / 2 + 0.02, -d / 2 + 0.005, z - 0.025), (w / 2 - 0.02, -d / 2 + 0.03, z + 0.025))


def gen_office_chair(b, w, d, h, rng, variant):
    """Five-star base with casters, gas column, seat, backrest, optional arms and headrest."""
    seat = 0.48
    rad = min(w, d) / 2 - 0.035
    for k in range(5):
        a = 2 * math.pi * k / 5 + math.pi / 2
        tip = np.array([rad * math.cos(a), rad * math.sin(a)])
        b.tube("dark", [(0, 0, 0.09), (tip[0] * 0.5, tip[1] * 0.5, 0.075), (tip[0], tip[1], 0.06)], 0.018, segments=6)
        b.loft("dark", [(0.02, 0.02, 0.0), (0.028, 0.028, 0.025), (0.02, 0.02, 0.05)], segments=8,
               center=(tip[0], tip[1]))
    b.cylinder("metal", 0, 0, 0.07, seat - 0.08, 0.025, segments=8)
    b.rounded_box("main", (-w / 2, -d / 2 + 0.02, seat - 0.08), (w / 2, d / 2, seat), 0.035, exponent=5)
    back = "main" if variant != 1 else "as:fabric:black"
    b.rounded_box(back, (-w / 2 + 0.04, -d / 2, seat + 0.06), (w / 2 - 0.04, -d / 2 + 0.07, h - (0.12 if variant == 2 else 0)),
                  0.035, exponent=4)
    b.box("dark", (-0.025, -d / 2 + 0.02, seat - 0.06), (0.025, -d / 2 + 0.045, seat + 0.1))
    if variant == 2:  # headrest
        b.rounded_box(back, (-w / 4, -d / 2, h - 0.1), (w / 4, -d / 2 + 0.06, h), 0.025, exponent=4)
    if variant != 0:  # arm rests
        for s in (-1, 1):
            x = s * (w / 2 - 0.03)
            b.box("dark", (x - 0.012, -0.05, seat), (x + 0.012, -0.02, seat + 0.18))
            b.rounded_box("dark", (x - 0.03, -0.12, seat + 0.18), (x + 0.03, 0.12, seat + 0.21), 0.012, exponent=6)


def gen_table(b, w, d, h, rng, variant, *, shelf: bool = False, desk: bool = False):
    """Dining / coffee table or desk: a top (rectangular or rounded), legs or a trestle, apron."""
    t = 0.04
    shape = 12 if variant != 1 else 4
    b.rounded_box("main", (-w / 2, -d / 2, h - t), (w / 2, d / 2, h), 0.008, exponent=shape, segments=20)
    inset = 0.07 if variant != 1 else 0.14
    if variant == 2 and not shelf:  # trestle: two end panels and a stretcher
        for s in (-1, 1):
            x = s * (w / 2 - 0.12)
            b.box("main", (x - 0.03, -d / 2 + 0.1, 0.05), (x + 0.03, d / 2 - 0.1, h - t))
            b.box("main", (x - 0.04, -d / 2 + 0.06, 0.0), (x + 0.04, d / 2 - 0.06, 0.05))
        b.box("main", (-w / 2 + 0.12, -0.03, 0.25), (w / 2 - 0.12, 0.03, 0.31))
    else:
        style = 1 if variant == 1 else 0
        _legs_at(b, "main", (-w / 2 + inset, w / 2 - inset), (-d / 2 + inset, d / 2 - inset), 0.0, h - t,
                 0.03, 0.02, style)
        if variant == 0:  # apron
            b.box("main", (-w / 2 + inset, -d / 2 + inset, h - t - 0.08), (w / 2 - inset, -d / 2 + inset + 0.02, h - t))
            b.box("main", (-w / 2 + inset, d / 2 - inset - 0.02, h - t - 0.08), (w / 2 - inset, d / 2 - inset, h - t))
    if shelf:
        b.box("dark", (-w / 2 + 0.06, -d / 2 + 0.06, 0.10), (w / 2 - 0.06, d / 2 - 0.06, 0.125))
    if desk:  # drawer pedestal on the right
        x0 = w / 2 - 0.42
        b.box("main", (x0, -d / 2 + 0.02, 0.0), (w / 2 - 0.02, d / 2 - 0.04, h - t))
        for k in range(3):
            z0 = 0.04 + k * (h - t - 0.06) / 3
            z1 = z0 + (h - t - 0.06) / 3 - 0.015
            b.box("wood", (x0 + 0.015, d / 2 - 0.04, z0), (w / 2 - 0.035, d / 2 - 0.02, z1))
            b.tube("metal", [((x0 + w / 2) / 2 - 0.06, d / 2 - 0.02, (z0 + z1) / 2),
                             ((x0 + w / 2) / 2 - 0.06, d / 2 - 0.005, (z0 + z1) / 2),
                             ((x0 + w / 2) / 2 + 0.04, d / 2 - 0.005, (z0 + z1) / 2),
                             ((x0 + w / 2) / 2 + 0.04, d / 2 - 0.02, (z0 + z1) / 2)], 0.005, segments=6)


def gen_coffee_table(b, w, d, h, rng, variant):
    gen_table(b, w, d, h, rng, variant, shelf=True)


def gen_desk(b, w, d, h, rng, variant):
    gen_table(b, w, d, h, rng, variant, desk=True)


def gen_bed(b, w, d, h, rng, variant):
    """Bed: frame on legs, mattress, duvet folded back, pillows, headboard (panel, upholstered, slats)."""
    frame, mat = 0.30, 0.20
    y0 = -d / 2 + 0.08
    b.rounded_box("main", (-w / 2, y0, 0.08), (w / 2, d / 2, frame), 0.01, exponent=12)
    _legs_at(b, "main", (-w / 2 + 0.05, w / 2 - 0.05), (y0 + 0.05, d / 2 - 0.05), 0.0, 0.09, 0.03, 0.025, 0)
    b.rounded_box("mattress", (-w / 2 + 0.03, y0 + 0.02, frame), (w / 2 - 0.03, d / 2 - 0.02, frame + mat), 0.05,
                  exponent=8)
    duvet = _accent(rng, "fabric", ("white", "cream", "beige", "light_blue", "gray", "navy", "teal", "pink", "green"))
    fold = y0 + (d - 0.08) * 0.34
    b.rounded_box(duvet, (-w / 2 + 0.01, fold, frame + 0.05), (w / 2 - 0.01, d / 2 - 0.005, frame + mat + 0.05), 0.05,
                  exponent=6)
    b.rounded_box(duvet, (-w / 2 + 0.015, fold - 0.12, frame + mat - 0.01), (w / 2 - 0.015, fold + 0.02,
                                                                           frame + mat + 0.07), 0.04, exponent=4)
    n = 2 if w > 1.2 else 1
    pw = (w - 0.2) / n
    for i in range(n):
        x0 = -w / 2 + 0.1 + i * pw + 0.02
        b.rounded_box("light", (x0, y0 + 0.05, frame + mat - 0.02), (x0 + pw - 0.04, y0 + 0.40, frame + mat + 0.13),
                      0.06, exponent=3)
    if variant == 0:  # wooden panel with a rounded crest
        b.rounded_box("main", (-w / 2, -d / 2, 0.0), (w / 2, y0, h - 0.08), 0.01, exponent=12)
        b.loft("main", [(w / 2, 0.04, h - 0.08, 12), (w / 2 * 0.98, 0.04, h - 0.03, 6), (w / 2 * 0.8, 0.035, h, 4)],
               segments=20, center=(0.0, -d / 2 + 0.04))
    elif variant == 1:  # upholstered, tufted rows
        tone = _accent(rng, "fabric", ("gray", "beige", "navy", "dark_gray", "cream"))
        b.box("main", (-w / 2, -d / 2, 0.0), (w / 2, y0, frame + 0.1))
        b.rounded_box(tone, (-w / 2, -d / 2, frame + 0.05), (w / 2, y0, h), 0.035, exponent=6)
        for k, z in enumerate(np.linspace(frame + mat + 0.12, h - 0.1, 3)):
            for x in np.linspace(-w / 2 + 0.15, w / 2 - 0.15, max(2, int(w / 0.25))):
                b.tube(tone, [(x, y0 - 0.005, z), (x, y0 + 0.0, z)], 0.012, segments=6)
    else:  # posts and slats
        for s in (-1, 1):
            b.box("main", (s * w / 2 - (0.06 if s > 0 else 0), -d / 2, 0.0), (s * w / 2 + (0.06 if s < 0 else 0), y0, h))
        b.box("main", (-w / 2, -d / 2 + 0.01, h - 0.1), (w / 2, y0 - 0.01, h - 0.04))
        for x in np.linspace(-w / 2 + 0.14, w / 2 - 0.14, max(3, int(w / 0.16))):
            b.box("main", (x - 0.025, -d / 2 + 0.02, frame), (x + 0.025, y0 - 0.02, h - 0.1))


def _handle(b, x: float, y: float, z: float, length: float, vertical: bool, style: int) -> None:
    """A bar handle (two stand-offs, ``y`` is the door face, reaching ``y + 0.02``) or a knob."""
    if style == 2:
        b.tube("metal", [(x, y, z), (x, y + 0.012, z)], 0.005, segments=6)
        b.tube("metal", [(x, y + 0.012, z), (x, y + 0.019, z)], 0.011, segments=8)
        return
    half = length / 2
    if vertical:
        pts = [(x, y, z - half), (x, y + 0.016, z - half), (x, y + 0.016, z + half), (x, y, z + half)]
    else:
        pts = [(x - half, y, z), (x - half, y + 0.016, z), (x + half, y + 0.016, z), (x + half, y, z)]
    b.tube("metal", pts, 0.005 if style == 0 else 0.007, segments=6)


def gen_wardrobe(b, w, d, h, rng, variant, *, plinth: float = 0.08, legs: bool = False, handles: bool = True):
    """Wardrobe / pantry / sideboard: body, plinth or legs, two doors (flat or framed), handles, crown."""
    z0 = plinth if not legs else 0.15
    b.box("main", (-w / 2, -d / 2, z0), (w / 2, d / 2, h - 0.02))
    b.box("main", (-w / 2, -d / 2, h - 0.02), (w / 2, d / 2, h))
    if legs:
        _legs_at(b, "dark", (-w / 2 + 0.05, w / 2 - 0.05), (-d / 2 + 0.05, d / 2 - 0.05), 0.0, z0, 0.02, 0.014, 0)
    else:
        b.box("dark", (-w / 2 + 0.02, -d / 2 + 0.02, 0.0), (w / 2 - 0.02, d / 2 - 0.02, plinth))
    dz0, dz1 = z0 + 0.03, h - 0.03
    for s in (-1, 1):
        x0, x1 = sorted((s * 0.017, s * (w / 2 - 0.017)))
        b.box("wood", (x0, d / 2, dz0), (x1, d / 2 + 0.012, dz1))
        if variant == 1:  # framed panel doors
            b.box("wood", (x0 + 0.06, d / 2 + 0.012, dz0 + 0.07), (x1 - 0.06, d / 2 + 0.018, dz1 - 0.07))
        if handles:
            style = (0, 1, 2)[variant]
            if (dz1 - dz0) > 1.0:
                _handle(b, s * 0.05, d / 2 + 0.012, (dz0 + dz1) / 2 + 0.05, 0.22, True, style)
            else:
                _handle(b, s * 0.05, d / 2 + 0.012, dz1 - 0.12, 0.08, True, style)
        else:  # a flat pull inside the door strip
            b.box("metal", (s * 0.03 - 0.004, d / 2 + 0.012, dz1 - 0.2), (s * 0.03 + 0.004, d / 2 + 0.019, dz1 - 0.05))


def gen_kitchen_cabinet(b, w, d, h, rng, variant):
    gen_wardrobe(b, w, d, h, rng, variant)


def gen_sideboard(b, w, d, h, rng, variant):
    gen_wardrobe(b, w, d, h, rng, variant, legs=True, handles=False)


def gen_dresser(b, w, d, h, rng, variant, *, drawers: int = 3, z_base: float = 0.05, knob: bool = False):
    """Chest of drawers: body, plinth, drawer fronts and handles (bars or knobs; a nightstand's drawer
    fronts stand out 2 cm and hold only its knob, so its other handles are flat pulls)."""
    b.box("main", (-w / 2, -d / 2, z_base), (w / 2, d / 2, h - 0.025))
    b.rounded_box("main", (-w / 2, -d / 2, h - 0.03), (w / 2, d / 2, h), 0.006, exponent=14)
    b.box("dark", (-w / 2 + 0.03, -d / 2 + 0.03, 0.0), (w / 2 - 0.03, d / 2 - 0.03, z_base))
    if knob:  # nightstand: one drawer with a knob, an open shelf below
        zt = h - 0.20
        b.box("wood", (-w / 2 + 0.03, d / 2, zt), (w / 2 - 0.03, d / 2 + 0.015, zt + 0.14))
        b.tube("metal", [(0.0, d / 2 + 0.015, zt + 0.07), (0.0, d / 2 + 0.03, zt + 0.07)], 0.011, segments=8)
        b.box("dark", (-w / 2 + 0.03, d / 2, z_base + 0.03), (w / 2 - 0.03, d / 2 + 0.002, zt - 0.03))
        return
    dh = (h - 0.12) / drawers
    for i in range(drawers):
        z0 = 0.08 + i * dh
        z1 = z0 + dh - 0.02
        if z_base > 0.05:  # nightstand drawers: flat pulls inside the 2 cm drawer-front strip
            b.box("wood", (-w / 2 + 0.03, d / 2, z0), (w / 2 - 0.03, d / 2 + 0.01, z1))
            b.box("metal", (-0.06, d / 2 + 0.01, z1 - 0.04), (0.06, d / 2 + 0.018, z1 - 0.025))
            continue
        if variant == 2 and i == drawers - 1:  # two small drawers on top
            for s in (-1, 1):
                x0, x1 = sorted((s * 0.008, s * (w / 2 - 0.03)))
                b.box("wood", (x0, d / 2, z0), (x1, d / 2 + 0.015, z1))
                _handle(b, s * 0.07, d / 2 + 0.015, (z0 + z1) / 2, 0.0, False, 2)
            continue
        b.box("wood", (-w / 2 + 0.03, d / 2, z0), (w / 2 - 0.03, d / 2 + 0.015, z1))
        if variant == 1:
            for s in (-1, 1):
                _handle(b, s * 0.06, d / 2 + 0.015, (z0 + z1) / 2, 0.0, False, 2)
        else:
            _handle(b, 0.0, d / 2 + 0.015, (z0 + z1) / 2, 0.13, False, 0)


def gen_nightstand(b, w, d, h, rng, variant):
    if variant == 0:
        gen_dresser(b, w, d, h, rng, 0, knob=True, z_base=0.08)
    else:
        gen_dresser(b, w, d, h, rng, variant, drawers=2, z_base=0.08)


def gen_fridge(b, w, d, h, rng, variant):
    """Fridge: rounded body, freezer and fridge doors, bar or pocket handles, a dispenser."""
    split = h * 0.62
    b.rounded_box("main", (-w / 2, -d / 2, 0.0), (w / 2, d / 2, h), 0.02, exponent=12)
    b.box("dark", (-w / 2 + 0.03, d / 2 - 0.01, 0.0), (w / 2 - 0.03, d / 2 + 0.005, 0.05))
    for z0, z1 in ((0.05, split - 0.02), (split, h - 0.03)):
        b.rounded_box("main", (-w / 2 + 0.01, d / 2 - 0.005, z0), (w / 2 - 0.01, d / 2 + 0.016, z1), 0.008, exponent=12)
    hx = w / 2 - 0.07
    if variant == 0:  # long bars
        for zc, ln in ((split * 0.55 + 0.175, 0.30), (split + 0.175, 0.2)):
            b.tube("metal", [(hx, d / 2 + 0.016, zc - ln / 2), (hx, d / 2 + 0.048, zc - ln / 2 + 0.02),
                             (hx, d / 2 + 0.048, zc + ln / 2 - 0.02), (hx, d / 2 + 0.016, zc + ln / 2)], 0.01, segments=6)
    else:  # pocket handles
        for zc in (split - 0.12, split + 0.1):
            b.box("dark", (hx - 0.012, d / 2 + 0.016, zc - 0.1), (hx + 0.012, d / 2 + 0.035, zc + 0.1))
    if variant == 2:  # water dispenser on the fridge door
        b.box("as:glass:dark_gray", (-w / 2 + 0.08, d / 2 + 0.016, split - 0.45), (-w / 2 + 0.24, d / 2 + 0.0195,
                                                                                  split - 0.17))


def gen_stove(b, w, d, h, rng, variant):
    """Oven: body, framed door with a dark window and a bar handle, control panel with knobs, hob."""
    bh = 0.02
    b.rounded_box("main", (-w / 2, -d / 2, 0.0), (w / 2, d / 2, h - bh), 0.01, exponent=12)
    dz0, dz1 = 0.15, 0.15 + h * 0.5
    b.box("main", (-w / 2 + 0.05, d / 2, dz0), (w / 2 - 0.05, d / 2 + 0.008, dz1))
    b.box("glass", (-w / 2 + 0.1, d / 2 + 0.008, dz0 + 0.06), (w / 2 - 0.1, d / 2 + 0.012, dz1 - 0.1))
    b.tube("metal", [(-w / 2 + 0.08, d / 2 + 0.004, dz1 - 0.04), (-w / 2 + 0.08, d / 2 + 0.013, dz1 - 0.04),
                     (w / 2 - 0.08, d / 2 + 0.013, dz1 - 0.04), (w / 2 - 0.08, d / 2 + 0.004, dz1 - 0.04)], 0.006,
           segments=6)
    b.box("dark", (-w / 2 + 0.02, d / 2, h - 0.14), (w / 2 - 0.02, d / 2 + 0.008, h - 0.06))
    for x in np.linspace(-w / 2 + 0.08, w / 2 - 0.08, 5):
        b.tube("metal", [(x, d / 2 + 0.008, h - 0.1), (x, d / 2 + 0.019, h - 0.1)], 0.014, segments=8)
    if variant == 0:  # glass ceramic hob with four rings
        b.box("as:glass:black", (-w / 2 + 0.005, -d / 2 + 0.005, h - bh), (w / 2 - 0.005, d / 2 - 0.005, h - 0.01))
        for sx in (-1, 1):
            for sy in (-1, 1):
                r = min(w, d) / 8
                b.loft("as:metal:dark_gray", [(r, r, h - 0.01), (r, r, h - 0.009)], segments=14,
                       center=(sx * w / 4, sy * d / 4))
    else:  # gas burners with grates
        b.box("main", (-w / 2, -d / 2, h - bh), (w / 2, d / 2, h - 0.012))
        for sx in (-1, 1):
            for sy in (-1, 1):
                r = min(w, d) / 8
                cx, cy = sx * w / 4, sy * d / 4
                b.loft("dark", [(r * 0.55, r * 0.55, h - 0.012), (r * 0.45, r * 0.45, h - 0.002)], segments=10,
                       center=(cx, cy))
                for k in range(4):
                    a = math.pi / 4 + k * math.pi / 2
                    b.tube("dark", [(cx + 0.3 * r * math.cos(a), cy + 0.3 * r * math.sin(a), h - 0.004),
                                    (cx + 0.95 * r * math.cos(a), cy + 0.95 * r * math.sin(a), h - 0.004)], 0.005,
                           segments=6)


def gen_sink(b, w, d, h, rng, variant):
    """Vanity: cabinet with doors, counter top, a vessel basin, a faucet with a spout and handles."""
    t = 0.04
    b.box("wood", (-w / 2, -d / 2, 0.06), (w / 2, d / 2 - 0.03, h - t))
    b.box("dark", (-w / 2 + 0.03, -d / 2 + 0.02, 0.0), (w / 2 - 0.03, d / 2 - 0.05, 0.06))
    for s in (-1, 1):
        x0, x1 = sorted((s * 0.006, s * (w / 2 - 0.01)))
        b.box("wood", (x0, d / 2 - 0.03, 0.09), (x1, d / 2 - 0.012, h - t - 0.02))
        b.tube("metal", [(s * 0.04, d / 2 - 0.007, h - t - 0.16), (s * 0.04, d / 2 - 0.007, h - t - 0.07)], 0.005,
               segments=6)
    b.rounded_box("main", (-w / 2, -d / 2, h - t), (w / 2, d / 2, h), 0.008, exponent=14)
    cx, cy = -w / 4, 0.02
    r = min(w / 5, d / 3) * 1.1
    if variant == 2:  # square vessel
        b.loft("light", [(r * 0.9, r * 0.75, h, 8), (r, r * 0.85, h + 0.12, 8), (r * 0.9, r * 0.75, h + 0.12, 8),
                         (r * 0.78, r * 0.64, h + 0.03, 6)], segments=20, center=(cx, cy), cap_top=True)
    else:  # round bowl
        b.loft("light", [(r * 0.5, r * 0.5, h), (r * 0.85, r * 0.85, h + 0.05), (r, r, h + 0.12),
                         (r * 0.92, r * 0.92, h + 0.12), (r * 0.75, r * 0.75, h + 0.06), (r * 0.35, r * 0.35, h + 0.03)],
               segments=20, center=(cx, cy))
    fx, fy = cx, -d / 2 + 0.06
    if variant == 1:  # straight spout
        b.cylinder("metal", fx, fy, h, h + 0.25, 0.016, segments=8)
        b.tube("metal", [(fx, fy, h + 0.23), (fx, fy + 0.14, h + 0.23)], 0.012, segments=8)
    else:  # gooseneck
        pts = [(fx, fy, h)] + [(fx, fy + 0.09 - 0.09 * math.cos(a), h + 0.26 + 0.09 * math.sin(a))
                               for a in np.linspace(0, math.pi * 0.9, 8)]
        pts.insert(1, (fx, fy, h + 0.26))
        b.tube("metal", pts, 0.012, segments=8)
    for s in (-1, 1):
        b.tube("metal", [(fx + s * 0.07, fy, h), (fx + s * 0.07, fy, h + 0.05)], 0.014, segments=8)
        b.tube("metal", [(fx + s * 0.07, fy, h + 0.05), (fx + s * 0.07, fy + 0.05, h + 0.055)], 0.005, segments=6)


def gen_toilet(b, w, d, h, rng, variant):
    """Toilet: pedestal bowl, seat and lid, cistern with its lid and flush button."""
    r = min(w, d * 0.6) / 2
    cy = d / 2 - r
    rr = r * 0.985
    b.loft("main", [(rr * 0.55, rr * 0.6, 0.0), (rr * 0.5, rr * 0.55, 0.12), (rr * 0.75, rr * 0.8, 0.28),
                    (rr * 0.95, rr, 0.37)], segments=20, center=(0.0, cy - rr * 0.0))
    b.tube("light", [(rr * 0.84 * math.sin(a), cy + rr * 0.88 * math.cos(a), 0.39)
                     for a in np.linspace(0, 2 * math.pi, 21)], 0.025 * rr / 0.2, segments=6, caps=False)
    if variant == 0:  # lid closed
        b.loft("light", [(rr * 0.9, rr * 0.95, 0.405), (rr * 0.88, rr * 0.93, 0.425)], segments=20, center=(0.0, cy))
    else:  # lid up against the cistern: water seen in the bowl
        b.loft("as:glass:light_blue", [(rr * 0.6, rr * 0.65, 0.35), (rr * 0.6, rr * 0.65, 0.372)], segments=14,
               center=(0.0, cy))
    b.rounded_box("main", (-w / 2 + 0.025, -d / 2 + 0.005, 0.36), (w / 2 - 0.025, -d / 2 + 0.175, h), 0.02, exponent=10)
    b.box("main", (-0.06, -d / 2 + 0.01, 0.0), (0.06, -d / 2 + 0.17, 0.36))
    b.rounded_box("main", (-w / 2 + 0.003, -d / 2 - 0.007, h), (w / 2 - 0.003, -d / 2 + 0.187, h + 0.03), 0.01,
                  exponent=10)
    if variant == 1 and (d / 2 - 2 * r) > -d / 2 + 0.19:
        b.box("light", (-rr * 0.8, -d / 2 + 0.18, 0.42), (rr * 0.8, -d / 2 + 0.19, 0.42 + rr * 1.5))
    b.loft("metal", [(0.02, 0.02, h + 0.03), (0.02, 0.02, h + 0.037)], segments=10, center=(0.0, -d / 2 + 0.09))


def gen_bathtub(b, w, d, h, rng, variant):
    """Bathtub: outer shell, rim and a rounded basin inside, faucet and handles at one end."""
    e_in = 4.0
    if variant == 1:  # freestanding on feet, curved sides
        rings = [(w / 2 - 0.12, d / 2 - 0.1, 0.08, 6), (w / 2 - 0.03, d / 2 - 0.03, h * 0.6, 8), (w / 2, d / 2, h, 8)]
        for sx in (-1, 1):
            for sy in (-1, 1):
                b.loft("metal", [(0.03, 0.03, 0.0), (0.025, 0.025, 0.05), (0.04, 0.04, 0.09)], segments=8,
                       center=(sx * (w / 2 - 0.2), sy * (d / 2 - 0.16)))
    else:
        rings = [(w / 2, d / 2, 0.0, 14), (w / 2, d / 2, h - 0.02, 14), (w / 2 - 0.005, d / 2 - 0.005, h, 12)]
    rings += [(w / 2 - 0.07, d / 2 - 0.07, h, e_in), (w / 2 - 0.09, d / 2 - 0.085, h - 0.1, e_in),
              (w / 2 - 0.16, d / 2 - 0.14, 0.1, e_in)]
    b.loft("main", rings, segments=24)
    fx = -w / 2 + 0.035
    b.tube("metal", [(fx, 0.0, h), (fx, 0.0, h + 0.12), (fx + 0.12, 0.0, h + 0.12), (fx + 0.14, 0.0, h + 0.08)], 0.015,
           segments=8)
    for s in (-1, 1):
        b.tube("metal", [(fx, s * 0.1, h), (fx, s * 0.1, h + 0.05)], 0.016, segments=8)


def gen_tv(b, w, d, h, rng, variant):
    """Flat TV: thin panel with bezel and a dark glass screen, pedestal or twin feet."""
    b.rounded_box("dark", (-w / 2, -0.028, 0.08), (w / 2, 0.02, h), 0.006, exponent=14)
    b.box("screen", (-w / 2 + 0.012, 0.02, 0.095), (w / 2 - 0.012, 0.026, h - 0.012))
    if variant == 0:  # pedestal
        r = min(w / 5, d / 2) * 0.97
        b.loft("dark", [(r, r * 0.8, 0.0, 4), (r * 0.95, r * 0.75, 0.015, 4)], segments=20)
        b.box("dark", (-0.028, -0.018, 0.015), (0.028, 0.012, 0.12))
    else:  # two feet near the middle
        for s in (-1, 1):
            x = s * (w / 5 - 0.03)
            b.tube("dark", [(x, -d / 2 + 0.01, 0.005), (x, 0.0, 0.1), (x, d / 2 - 0.01, 0.005)], 0.009, segments=6)


def gen_lamp(b, w, d, h, rng, variant, *, floor: bool = False):
    """Lamp: base (turned jar, disc or tripod), stem, shade (drum or tapered) with a finial."""
    r = w / 2 * 0.98
    shade_z0 = h - 0.30 if floor else h * 0.55
    if variant == 0 and not floor:  # ceramic jar base
        rb = w / 3 * 0.98
        b.loft("dark", [(rb * 0.6, rb * 0.6, 0.0), (rb, rb, shade_z0 * 0.3), (rb * 0.9, rb * 0.9, shade_z0 * 0.5),
                        (rb * 0.35, rb * 0.35, shade_z0 * 0.65)], segments=14)
        b.cylinder("metal", 0, 0, shade_z0 * 0.65, shade_z0 + 0.05, 0.008, segments=6)
    elif variant == 2:  # tripod
        for k in range(3):
            a = 2 * math.pi * k / 3
            b.tube("metal" if floor else "dark", [(0.8 * r * math.cos(a), 0.8 * r * math.sin(a), 0.0),
                                                  (0.0, 0.0, shade_z0 * 0.6)], 0.009 if floor else 0.005, segments=6)
        b.cylinder("metal", 0, 0, shade_z0 * 0.55, shade_z0 + 0.05, 0.01 if floor else 0.007, segments=6)
    else:  # disc and straight stem
        rb = (w / 2 * 0.8 if floor else w / 3) * 0.97
        b.loft("dark", [(rb, rb, 0.0), (rb, rb, 0.02), (rb * 0.6, rb * 0.6, 0.035)], segments=14)
        b.cylinder("metal", 0, 0, 0.03, shade_z0 + 0.05, 0.013 if floor else 0.008, segments=8)
    top = h - 0.01
    if variant == 1:  # drum
        rings = [(r, r, shade_z0), (r, r, top)]
    else:  # tapered
        rings = [(r, r, shade_z0), (r * 0.65, r * 0.65, top)]
    b.loft("shade", rings, segments=20)
    b.loft("metal", [(0.01, 0.01, top), (0.012, 0.012, top + 0.01)], segments=6)


def gen_floor_lamp(b, w, d, h, rng, variant):
    gen_lamp(b, w, d, h, rng, variant, floor=True)


def _plant_reach(r: float, phi: float) -> float:
    """How far from the axis foliage may reach at angle ``phi``: inside the catalog's crown sphere
    (0.7 r) or one of its four leaf clusters (0.5 r at 0.45 r diagonally), with 5 % margin."""
    u = np.array([math.cos(phi), math.sin(phi)])
    best = 0.7 * r
    for sx, sy in ((1, 1), (-1, 1), (1, -1), (-1, -1)):
        c = np.array([sx, sy]) * 0.45 * r
        cu = float(c @ u)
        disc = (0.5 * r) ** 2 - float(c @ c) + cu * cu
        if disc >= 0:
            best = max(best, cu + math.sqrt(disc))
    return 0.93 * best


def gen_plant(b, w, d, h, rng, variant):
    """Potted plant: flared pot with a rim and soil, and foliage (drooping rosette, upright blades,
    or a bushy crown of small leaves), inside the collision crown."""
    r = w / 2
    pot_h = h * 0.35
    pr = r * 0.69
    b.loft("main", [(pr * 0.72, pr * 0.72, 0.0), (pr * 0.92, pr * 0.92, pot_h * 0.85), (pr, pr, pot_h * 0.86),
                    (pr, pr, pot_h), (pr * 0.9, pr * 0.9, pot_h), (pr * 0.88, pr * 0.88, pot_h - 0.02)], segments=14)
    b.loft("soil", [(pr * 0.88, pr * 0.88, pot_h - 0.025), (pr * 0.88, pr * 0.88, pot_h - 0.02)], segments=12)
    base = np.array([0.0, 0.0, pot_h - 0.02])
    crown = h - pot_h
    if variant == 0:  # rosette of broad leaves
        n = 14
        for k in range(n):
            phi = 2 * math.pi * k / n + float(rng.uniform(-0.15, 0.15))
            tilt = float(rng.uniform(0.75, 1.35))
            length = min(_plant_reach(r, phi) / (math.cos(tilt) + 0.16), crown * 1.1)
            b.leaf("leaf", base, phi, tilt, length, length * 0.32, droop=0.35)
    elif variant == 1:  # upright blades
        n = 11
        for k in range(n):
            phi = 2 * math.pi * k / n + float(rng.uniform(-0.2, 0.2))
            off = 0.25 * pr
            start = base + np.array([off * math.cos(phi), off * math.sin(phi), 0.0])
            tilt = float(rng.uniform(1.25, 1.45))
            width = min(0.06, r * 0.3)
            room = (_plant_reach(r, phi) - off - width / 2) / math.cos(tilt)
            length = min(crown * float(rng.uniform(0.75, 1.0)), room)
            b.leaf("leaf", start, phi, tilt, length, width, droop=0.02)
    else:  # bushy: a stem and small leaves all around a crown
        top = np.array([0.0, 0.0, h - crown * 0.45])
        b.tube("as:wood:dark_brown", [base, top], 0.012 * w / 0.5 + 0.004, segments=6)
        for k in range(40):
            phi = float(rng.uniform(0, 2 * math.pi))
            up = float(rng.uniform(-0.3, 1.0))
            start = top + np.array([0.0, 0.0, float(rng.uniform(-0.2, 0.25)) * crown])
            length = min(_plant_reach(r, phi) * 0.55, crown * 0.4)
            b.leaf("leaf", start, phi, up, length, length * 0.5, droop=0.2, steps=4)


def gen_book(b, w, d, h, rng, variant):
    """Book lying flat: covers, a spine and the page block (hardcover with overhang, or paperback)."""
    c = 0.003
    if variant == 0:
        b.box("main", (-w / 2, -d / 2, 0.0), (w / 2, d / 2, c))
        b.box("main", (-w / 2, -d / 2, h - c), (w / 2, d / 2, h))
        b.rounded_box("main", (-w / 2, -d / 2, 0.0), (-w / 2 + 0.012, d / 2, h), 0.006, exponent=3)
        b.box("light", (-w / 2 + 0.004, -d / 2 + 0.004, c), (w / 2 - 0.004, d / 2 - 0.004, h - c))
    else:
        b.box("light", (-w / 2, -d / 2, 0.0015), (w / 2 - 0.001, d / 2 - 0.001, h - 0.0015))
        b.box("main", (-w / 2, -d / 2, h - 0.0015), (w / 2, d / 2, h))
        b.box("main", (-w / 2, -d / 2, 0.0), (w / 2, d / 2, 0.0015))
        b.box("main", (-w / 2, -d / 2, 0.0), (-w / 2 + 0.0015, d / 2, h))
        b.box("as:paper:white", (-w / 2 + 0.02, -d / 2 + 0.04, h), (w / 2 - 0.02, -d / 2 + 0.09, h + 0.0005))


def gen_cup(b, w, d, h, rng, variant):
    """Cup (hollow): tumbler, tea cup with a handle, or a cup on a saucer."""
    r = w / 2 * 0.98
    if variant == 0:
        b.loft("main", [(r * 0.75, r * 0.75, 0.0), (r, r, h), (r * 0.9, r * 0.9, h), (r * 0.68, r * 0.68, 0.01)],
               segments=14)
    elif variant == 1:
        rb = r * 0.7
        b.loft("main", [(rb * 0.6, rb * 0.6, 0.0), (rb * 0.85, rb * 0.85, h * 0.4), (rb, rb, h), (rb * 0.9, rb * 0.9, h),
                        (rb * 0.5, rb * 0.5, 0.01)], segments=14)
        pts = [(rb * 0.8 + 0.35 * (r - rb) * 2 * math.sin(a), 0.0, h * 0.55 + h * 0.22 * math.cos(a))
               for a in np.linspace(0, math.pi, 9)]
        b.tube("main", pts, min(0.005, (r - rb) * 0.3), segments=6)
    else:
        b.loft("as:ceramic:white", [(r * 0.5, r * 0.5, 0.0), (r, r, 0.008), (r * 0.9, r * 0.9, 0.012)], segments=16)
        b.loft("main", [(r * 0.4, r * 0.4, 0.012), (r * 0.7, r * 0.7, h), (r * 0.63, r * 0.63, h),
                        (r * 0.35, r * 0.35, 0.02)], segments=14)


def gen_bottle(b, w, d, h, rng, variant):
    """Bottle: wine (long neck), water (ridged) or sauce (round) profile, a label band, a cap."""
    r = w / 2 * 0.97
    if variant == 0:
        prof = [(r * 0.9, 0.0), (r, 0.01), (r, h * 0.6), (r * 0.55, h * 0.72), (r * 0.32, h * 0.78), (r * 0.32, h * 0.93)]
        label = (h * 0.2, h * 0.45)
    elif variant == 1:
        prof = [(r * 0.9, 0.0), (r, 0.01)]
        for k in range(5):
            z = 0.02 + k * h * 0.12
            prof += [(r, z), (r * 0.93, z + h * 0.06)]
        prof += [(r, h * 0.65), (r * 0.4, h * 0.85), (r * 0.35, h * 0.93)]
        label = (h * 0.3, h * 0.5)
    else:
        prof = [(r * 0.8, 0.0), (r, h * 0.15), (r, h * 0.55), (r * 0.7, h * 0.7), (r * 0.3, h * 0.8), (r * 0.3, h * 0.93)]
        label = (h * 0.2, h * 0.5)
    b.loft("main", [(a, a, z) for a, z in prof], segments=12)
    b.loft(_accent(rng, "paper", ("white", "cream", "yellow", "red", "black")),
           [(r * 1.005, r * 1.005, label[0]), (r * 1.005, r * 1.005, label[1])], segments=12, cap_bottom=False,
           cap_top=False)
    b.loft("dark", [(r * 0.36, r * 0.36, h * 0.93), (r * 0.36, r * 0.36, h)], segments=8)


#: Category → (generator, number of variants), from each ``catalog.CATEGORIES`` record's ``mesh``.
GENERATORS: dict[str, tuple[Callable, int]] = {
    name: (globals()[c.mesh.generator], c.mesh.variants) for name, c in CATEGORIES.items() if c.mesh is not None}


def build_local(category: str, dims, seed: int, variant: int | None = None) -> dict:
    """``{tone: MeshPart}`` of a ``category`` object with catalog dimensions ``dims`` in its local
    frame; the variant is drawn from ``seed`` unless given. Vertices rounded to 0.01 mm. Cached
    (twins are built once): treat the result as read-only."""
    return _build_cached(category, tuple(float(x) for x in dims), int(seed), None if variant is None else int(variant))


@lru_cache(maxsize=256)
def _build_cached(category: str, dims: tuple, seed: int, variant: int | None) -> dict:
    gen, n = GENERATORS[category]
    rng = np.random.default_rng(seed)
    v = int(rng.integers(n))
    if variant is not None:
        v = int(variant) % n
    b = MeshBuilder()
    gen(b, *(float(x) for x in dims), rng, v)
    parts = b.parts()
    for p in parts.values():
        p.vertices = np.round(p.vertices, VERTEX_DECIMALS) + 0.0
        p.uv = np.round(p.uv, UV_DECIMALS) + 0.0
    return parts


# --------------------------------------------------------------------------- object frames
def _catalog_bounds(category: str, dims) -> tuple[np.ndarray, np.ndarray]:
    """Local 3-D bounds of the catalog builder's parts for ``dims`` (as the scene's geoms bound them)."""
    from .procgen.furnish import _part_geom

    parts, _ = CATEGORIES[category].builder(*dims)
    boxes = [_part_geom(p, np.eye(4), "white").world_aabb() for p in parts]
    return np.min([b[0] for b in boxes], axis=0), np.max([b[1] for b in boxes], axis=0)


def _yaw_of(geoms: list[Geom]) -> float | None:
    for g in geoms:
        rot = g.transform[:3, :3]
        if abs(rot[2, 2] - 1.0) < 1e-6:
            return math.atan2(rot[1, 0], rot[0, 0])
    return None


def object_frame(obj: SceneObject, geoms: list[Geom]) -> tuple[np.ndarray, np.ndarray, float] | None:
    """(catalog dims (w, d, h), world origin (3,), yaw) of an object made by a catalog builder, or
    None when its geoms do not match the builder (a hand-made or edited object)."""
    cat = CATEGORIES.get(obj.category)
    yaw = _yaw_of(geoms)
    if cat is None or yaw is None:
        return None
    c, s = math.cos(yaw), math.sin(yaw)
    to_local = np.array([[c, s, 0.0], [-s, c, 0.0], [0.0, 0.0, 1.0]])
    pts = np.concatenate([g.world_points() for g in geoms]) @ to_local.T
    lo_m, hi_m = pts.min(axis=0), pts.max(axis=0)
    target = hi_m - lo_m
    x = target.copy()
    for _ in range(12):
        lo, hi = _catalog_bounds(obj.category, x)
        res = (hi - lo) - target
        if np.max(np.abs(res)) < 1e-7:
            break
        jac = np.empty((3, 3))
        for k in range(3):
            step = np.zeros(3)
            step[k] = 1e-4
            lo2, hi2 = _catalog_bounds(obj.category, x + step)
            jac[:, k] = ((hi2 - lo2) - (hi - lo)) / 1e-4
        x = x - np.linalg.lstsq(jac, res, rcond=None)[0]
        x = np.maximum(x, 1e-3)
    lo, hi = _catalog_bounds(obj.category, x)
    if np.max(np.abs((hi - lo) - target)) > 1e-4:
        return None
    origin_local = lo_m - lo
    return x, origin_local @ to_local, yaw  # to_local is orthonormal: its transpose maps back


def render_meshes(desc: SceneDescription) -> dict[int, list[Geom]]:
    """Render meshes (world-placed visual-only mesh ``Geom``s) per instance id, for the objects of
    ``desc`` whose category has a generator and whose geoms match their catalog builder. Cached
    in-process by the scene's content hash (a home's presets share them): treat as read-only."""
    from .description import scene_content_hash

    key = scene_content_hash(desc)
    if key in _MESH_CACHE:
        _MESH_CACHE.move_to_end(key)
        return _MESH_CACHE[key]
    out = _render_meshes(desc)
    _MESH_CACHE[key] = out
    while len(_MESH_CACHE) > 4:
        _MESH_CACHE.popitem(last=False)
    return out


_MESH_CACHE: "OrderedDict[str, dict[int, list[Geom]]]" = OrderedDict()


def clear_cache() -> None:
    """Forget cached render meshes (homes and built models)."""
    _MESH_CACHE.clear()
    _build_cached.cache_clear()


def _render_meshes(desc: SceneDescription) -> dict[int, list[Geom]]:
    out: dict[int, list[Geom]] = {}
    for obj in desc.objects:
        if obj.category not in GENERATORS or not obj.geom_indices:
            continue
        geoms = [desc.geoms[i] for i in obj.geom_indices]
        frame = object_frame(obj, geoms)
        if frame is None:
            continue
        dims, origin, yaw = frame
        pose = np.eye(4)
        c, s = math.cos(yaw), math.sin(yaw)
        pose[:2, :2] = [[c, -s], [s, c]]
        pose[:3, 3] = np.round(origin, 6)
        color = str(obj.attributes.get("color", "white"))
        material = str(obj.attributes.get("material", "plastic"))
        if color not in COLORS:
            color = "white"
        label = geoms[0].label
        seed = variant_seed(desc.scene_id, obj.category, dims, color, material)
        pinned = obj.attributes.get("render_variant")
        parts = build_local(obj.category, np.round(dims, 6), seed, None if pinned is None else int(pinned))
        out[obj.instance_id] = [
            Geom("mesh", pose, label=label, instance_id=obj.instance_id, color=tone_look(tone, color, material)[0],
                 collides=False, name=f"{obj.prim_path}/render_{k:02d}", vertices=p.vertices, faces=p.faces,
                 material=tone_look(tone, color, material)[1], texcoords=p.uv)
            for k, (tone, p) in enumerate(parts.items())]
    return out


# --------------------------------------------------------------------------- footprints
def _footprint_polygon(g: Geom) -> np.ndarray:
    """Convex xy polygon (K, 2) of a collision geom's footprint (cylinders and spheres as 48-gons)."""
    if g.kind in ("cylinder", "sphere"):
        r = g.size[0]
        t = np.linspace(0, 2 * math.pi, 48, endpoint=False)
        ring = np.stack([r * np.cos(t), r * np.sin(t)], axis=1)
        if g.kind == "cylinder":  # both caps (a lying cylinder's footprint is their hull)
            pts = np.concatenate([np.c_[ring, np.full(48, z)] for z in (-g.size[1], g.size[1])])
        else:  # a sphere's footprint is its equator's
            pts = np.c_[ring, np.zeros(48)]
        world = pts @ g.transform[:3, :3].T + g.transform[:3, 3]
    else:
        world = g.world_points()
    from scipy.spatial import ConvexHull

    xy = world[:, :2]
    try:
        return xy[ConvexHull(xy).vertices]
    except Exception:  # noqa: BLE001 - degenerate (flat) footprint: a segment
        return xy


def footprint_contains(geoms: list[Geom], points: np.ndarray, tol: float = 0.002) -> np.ndarray:
    """Whether each xy point (N, 2) lies in the union of ``geoms``' footprints, within ``tol`` m
    (a 48-gon's chord is 0.2 % of the radius inside its circle: within the tolerance)."""
    pts = np.asarray(points, float).reshape(-1, 2)
    inside = np.zeros(len(pts), bool)
    for g in geoms:
        poly = _footprint_polygon(g)
        if len(poly) < 3:
            continue
        edges = np.roll(poly, -1, axis=0) - poly
        normals = np.stack([edges[:, 1], -edges[:, 0]], axis=1)
        normals /= np.linalg.norm(normals, axis=1, keepdims=True)
        # counter-clockwise hull: outward normals are (dy, -dx)
        dist = np.einsum("nkd,kd->nk", pts[:, None, :] - poly[None, :, :], normals)
        inside |= np.all(dist <= tol, axis=1)
    return inside


def mesh_sample_points(g: Geom) -> np.ndarray:
    """World points of a mesh geom to test: its vertices, triangle centroids and edge midpoints."""
    v = np.asarray(g.vertices, float)
    f = np.asarray(g.faces)
    tri = v[f]
    local = np.concatenate([v, tri.mean(axis=1), (tri[:, 0] + tri[:, 1]) / 2, (tri[:, 1] + tri[:, 2]) / 2,
                            (tri[:, 2] + tri[:, 0]) / 2])
    return local @ g.transform[:3, :3].T + g.transform[:3, 3]
