"""Baked light as data (the ``objects="meshes"`` opt-in): which faces of a home carry light maps, the
textures and meshes that draw them and the darkened bands of the objects' render meshes. Pure numpy:
the rays are cast by ``vlnverse.sim.mujoco.lightmap`` (MuJoCo's ``mj_multiRay``); the MuJoCo builder
and the USD writer both draw from here, so the two show the same light.

- Surfaces (axis-aligned boxes): floors and rugs bake their top face, ceilings their bottom face,
  walls the large faces that face a room. A face's map is (nv, nu) uint8 factors
  (``FACTOR_SCALE``: 200 = 1.0) over texels along its two world axes ``FACE_AXES`` (u the lower
  axis index, v the higher; row 0 at the low v).
- Each baked box is drawn by one visual-only mesh (24 vertices, 12 triangles) whose texture is an
  atlas (``box_atlas``): every face gets a region, its material's detail texture tiled in world
  metres times the bilinearly upsampled factor (faces without a map: factor 1, coarser pixels).
- Objects: one uint8 factor per triangle of each render mesh, quantised to levels and reduced to
  at most ``OBJECT_MAX_BANDS`` per mesh (``face_levels``, the one place both renderers take them
  from); ``banded_meshes`` splits a mesh into bands of equal level for MuJoCo (which has no vertex
  colours), each drawn darkened by its level (the material's tint, after the detail texture's mean
  is undone): one more geom per mesh at most (each drawn geom is a draw call, which is what a frame
  costs on llvmpipe); the USD keeps the mesh whole and binds each darker level's triangles (a
  ``GeomSubset``) to the look darkened by it (the colour, ``darkened``): darker undersides, lower
  parts and corners, no texture and no light.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from itertools import combinations

import numpy as np

from ..core.registry import Registry
from .description import Geom

#: Factors are stored as uint8 ``round(factor * FACTOR_SCALE)`` (so at most 1.275).
FACTOR_SCALE = 200.0
#: Pixels per metre of a baked face (at most the detail texture's own), of a face without a map,
#: the cap of a region's side and the gutter (edge pixels repeated) around each region.
BAKED_PX_PER_M, UNBAKED_PX_PER_M, BAKED_MAX_PX, GUTTER_PX = 50.0, 25.0, 1024, 2
#: Pixels per metre by label where not ``BAKED_PX_PER_M`` (MuJoCo's atlases). Every texel of an
#: atlas is its own (the detail is multiplied in), and llvmpipe's frame time grows with the texels a
#: view reads, so the sizes follow what a 224² view resolves: a pixel spans ~1 cm of floor 1 m
#: ahead, ~3 cm of a wall 3 m away; ceilings, whose paint detail no view shows
#: (``LIGHT_ONLY_LABELS``), hold the light alone, 3 pixels per 30 cm light texel.
BAKED_PX_PER_M_BY_LABEL = {"wall": 32.0, "ceiling": 10.0}
#: Labels whose MuJoCo atlases hold only the light times the detail texture's mean (no detail).
LIGHT_ONLY_LABELS = ("ceiling",)
#: The USD's light-map PNGs (``write_usd``) have their own two densities, whatever the label and
#: with the detail kept (pixels per metre of a baked face, of a face without a map): a 224² agent
#: view with a 90° field of view resolves 56 px/m on a wall 2 m away (112 / distance) and less on
#: the floor seen at a slant; faces without a map (under floors, tops of walls) are never seen from
#: inside the home.
USD_PX_PER_M = (50.0, 10.0)
#: Faces of a box: the sign and the world axis of their outward normal.
FACES = ("-x", "+x", "-y", "+y", "-z", "+z")
#: (u, v) world axes across each normal axis (the USD writer's box projection uses the same).
FACE_AXES = ((1, 2), (0, 2), (0, 1))
#: The darkness of object bands is quantised to this step and clipped to [OBJECT_MIN_LEVEL, 1]; a
#: render mesh gets at most OBJECT_MAX_BANDS bands (``fewest_levels``: its levels in that many runs).
OBJECT_LEVEL_STEP, OBJECT_MIN_LEVEL, OBJECT_MAX_BANDS = 0.15, 0.3, 2

#: Who bakes a home's light (``SceneDescription`` → ``BakedLight``): MuJoCo's ray casts live above
#: this layer, so ``write_usd`` finds them by name.
LIGHT_BAKERS: Registry = Registry("light baker")
LIGHT_BAKERS.register_lazy("mujoco", "vlnverse.sim.mujoco.builder")


@dataclass
class BakedLight:
    """A home's baked light: ``surfaces`` {geom index: {face: (nv, nu) uint8 map}} and ``objects``
    {instance id: one (n_faces,) uint8 array per render mesh, in ``render_meshes`` order}."""

    surfaces: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)
    objects: dict[int, list[np.ndarray]] = field(default_factory=dict)


def is_axis_aligned_box(g: Geom) -> bool:
    """A box whose rotation only permutes or flips the world axes."""
    return g.kind == "box" and bool(np.allclose(np.abs(g.transform[:3, :3]), np.eye(3)))


def box_bounds(g: Geom) -> tuple[np.ndarray, np.ndarray]:
    """World (lo (3,), hi (3,)) of an axis-aligned box."""
    c, h = g.transform[:3, 3], np.abs(g.transform[:3, :3]) @ np.asarray(g.size, float)
    return c - h, c + h


def face_frame(g: Geom, face: str) -> tuple[int, float, int, int, np.ndarray, np.ndarray]:
    """(normal axis k, normal sign, u axis, v axis, (u0, v0), (u1, v1)) of a face of an axis-aligned box."""
    k = "xyz".index(face[1])
    u, v = FACE_AXES[k]
    lo, hi = box_bounds(g)
    return k, (1.0 if face[0] == "+" else -1.0), u, v, np.array([lo[u], lo[v]]), np.array([hi[u], hi[v]])


def face_plane(g: Geom, face: str) -> float:
    """World coordinate of the face's plane along its normal axis."""
    k = "xyz".index(face[1])
    lo, hi = box_bounds(g)
    return float(hi[k] if face[0] == "+" else lo[k])


def texel_grid(g: Geom, face: str, texel_m: float, max_texels: int) -> tuple[np.ndarray, np.ndarray]:
    """Texel centres (us (nu,), vs (nv,)) over a face: ``texel_m`` apart, at least 2 and at most
    ``max_texels`` a side."""
    _, _, _, _, a, b = face_frame(g, face)
    n = [int(min(max_texels, max(2, math.ceil((b[i] - a[i]) / texel_m)))) for i in (0, 1)]
    return tuple(a[i] + (np.arange(n[i]) + 0.5) * (b[i] - a[i]) / n[i] for i in (0, 1))


def upsample(factor: np.ndarray, fu: np.ndarray, fv: np.ndarray) -> np.ndarray:
    """Bilinear samples of a (nv, nu) uint8 factor map at fractional texel positions (texel centres
    at 0.5, 1.5, …; clamped at the edges): (len(fv), len(fu)) floats, 1.0 = ``FACTOR_SCALE``."""
    ny, nx = factor.shape
    fx = np.clip(fu * nx - 0.5, 0, nx - 1)
    fy = np.clip(fv * ny - 0.5, 0, ny - 1)
    ix, iy = np.minimum(fx.astype(int), max(nx - 2, 0)), np.minimum(fy.astype(int), max(ny - 2, 0))
    ax, ay = (fx - ix)[None, :], (fy - iy)[:, None]
    f = factor.astype(np.float64) / FACTOR_SCALE
    ix1, iy1 = np.minimum(ix + 1, nx - 1), np.minimum(iy + 1, ny - 1)
    return ((1 - ay) * ((1 - ax) * f[iy][:, ix] + ax * f[iy][:, ix1])
            + ay * ((1 - ax) * f[iy1][:, ix] + ax * f[iy1][:, ix1]))


def face_texture(detail: np.ndarray | None, tile_m: float, factor: np.ndarray | None, g: Geom,
                 face: str, density: tuple[float, float] | None = None) -> np.ndarray:
    """The (h, w) uint8 grey texture of a face: the detail texture tiled every ``tile_m`` world
    metres along the face's axes (white without one) times the upsampled ``factor`` (1 without);
    row 0 at the face's low v. ``density`` None (MuJoCo's atlases): ``BAKED_PX_PER_M_BY_LABEL``
    pixels per metre on a baked face (``UNBAKED_PX_PER_M`` without a map), and the detail's mean
    instead of the detail for ``LIGHT_ONLY_LABELS``; else (pixels per metre of a baked face, of a
    face without a map) for every label, detail kept (the USD's ``USD_PX_PER_M``)."""
    _, _, _, _, a, b = face_frame(g, face)
    if density is None:
        baked_ppm, unbaked_ppm = BAKED_PX_PER_M_BY_LABEL.get(g.label, BAKED_PX_PER_M), UNBAKED_PX_PER_M
    else:
        baked_ppm, unbaked_ppm = density
    ppm = baked_ppm if factor is not None else unbaked_ppm
    light_only = density is None and detail is not None and g.label in LIGHT_ONLY_LABELS
    if detail is not None and not light_only:
        ppm = min(ppm, detail.shape[1] / tile_m)
    w, h = (int(min(BAKED_MAX_PX, max(2, round((b[i] - a[i]) * ppm)))) for i in (0, 1))
    pu = a[0] + (np.arange(w) + 0.5) * (b[0] - a[0]) / w
    pv = a[1] + (np.arange(h) + 0.5) * (b[1] - a[1]) / h
    if detail is None or light_only:
        base = np.full((h, w), 255.0 if detail is None else float(detail[:, :, 0].mean()))
    else:
        n = detail.shape[0]
        tu = (np.floor(pu / tile_m * n).astype(int)) % n
        tv = (np.floor(pv / tile_m * n).astype(int)) % n
        base = detail[:, :, 0].astype(np.float64)[tv][:, tu]
    if factor is not None:
        base = base * upsample(factor, (np.arange(w) + 0.5) / w, (np.arange(h) + 0.5) / h)
    return np.clip(np.round(base), 0, 255).astype(np.uint8)


def box_atlas(g: Geom, maps: dict[str, np.ndarray], detail: np.ndarray | None, tile_m: float,
              density: tuple[float, float] | None = None) -> tuple[np.ndarray, dict[str, tuple[int, int, int]]]:
    """(the (H, W, 3) uint8 texture of a baked box, {face: (first row, h, w)} of each face's region).
    Regions are stacked in ``FACES`` order, left-aligned, each inside a ``GUTTER_PX`` border of its
    edge pixels (so filtering never mixes neighbours). ``density``: see ``face_texture`` (the USD
    writes ``USD_PX_PER_M``)."""
    tiles = {f: face_texture(detail, tile_m, maps.get(f), g, f, density) for f in FACES}
    width = max(t.shape[1] for t in tiles.values()) + 2 * GUTTER_PX
    rows, regions, r = [], {}, 0
    for f in FACES:
        t = np.pad(tiles[f], GUTTER_PX, mode="edge")
        t = np.pad(t, ((0, 0), (0, width - t.shape[1])), mode="edge")
        regions[f] = (r + GUTTER_PX, tiles[f].shape[0], tiles[f].shape[1])
        rows.append(t)
        r += t.shape[0]
    img = np.concatenate(rows)
    return np.repeat(img[..., None], 3, axis=2), regions


def box_mesh(g: Geom, regions: dict[str, tuple[int, int, int]], shape: tuple[int, int]
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(vertices (24, 3) relative to the box centre along the world axes, triangles (12, 3)
    counter-clockwise from outside, texture coordinates (24, 2) into the atlas of ``shape`` (H, W);
    v = 0 at the atlas' row 0)."""
    lo, hi = box_bounds(g)
    centre = (lo + hi) / 2
    height, width = shape
    verts, faces, uv = [], [], []
    for f in FACES:
        k, s, u, v, a, b = face_frame(g, f)
        row, h, w = regions[f]
        quad = []
        for du, dv in ((0, 0), (1, 0), (1, 1), (0, 1)):
            p = np.empty(3)
            p[k] = face_plane(g, f)
            p[u] = b[0] if du else a[0]
            p[v] = b[1] if dv else a[1]
            quad.append(p - centre)
            uv.append(((GUTTER_PX + du * w) / width, (row + dv * h) / height))
        base = len(verts)
        verts.extend(quad)
        normal = np.cross(quad[1] - quad[0], quad[2] - quad[0])
        if normal[k] * s > 0:
            faces += [(base, base + 1, base + 2), (base, base + 2, base + 3)]
        else:
            faces += [(base, base + 2, base + 1), (base, base + 3, base + 2)]
    return np.asarray(verts, float), np.asarray(faces, np.int64), np.asarray(uv, float)


def object_levels(factors: np.ndarray) -> np.ndarray:
    """Per-triangle darkening levels of a render mesh: its stored factors quantised to
    ``OBJECT_LEVEL_STEP`` within [``OBJECT_MIN_LEVEL``, 1]."""
    f = np.asarray(factors, float) / FACTOR_SCALE
    return np.clip(np.round(f / OBJECT_LEVEL_STEP) * OBJECT_LEVEL_STEP, OBJECT_MIN_LEVEL, 1.0).round(4)


def triangle_areas(g: Geom) -> np.ndarray:
    """(n_faces,) areas of a mesh ``Geom``'s triangles (its own frame: rotations keep them)."""
    tri = np.asarray(g.vertices, float)[np.asarray(g.faces, np.int64)]
    return np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1) / 2


def fewest_levels(levels: np.ndarray, areas: np.ndarray, k: int = OBJECT_MAX_BANDS) -> np.ndarray:
    """Per-triangle ``levels`` reduced to at most ``k`` distinct values: the sorted distinct levels
    split into ``k`` runs with the least area-weighted squared error (every split is tried; ties go
    to the first), each run drawn at its area-weighted mean (rounded to 0.01)."""
    values = sorted(set(np.asarray(levels).tolist()))
    if len(values) <= k:
        return levels
    vals = np.asarray(values)
    w = np.array([float(areas[levels == v].sum()) for v in values]) + 1e-12
    best: tuple | None = None
    for cuts in combinations(range(1, len(vals)), k - 1):
        bounds = (0, *cuts, len(vals))
        err, means = 0.0, []
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            m = float((w[lo:hi] * vals[lo:hi]).sum() / w[lo:hi].sum())
            err += float((w[lo:hi] * (vals[lo:hi] - m) ** 2).sum())
            means.append(round(m, 2))
        if best is None or err < best[0] - 1e-15:
            best = (err, bounds, means)
    _, bounds, means = best
    out = np.array(levels, float)
    for (lo, hi), m in zip(zip(bounds[:-1], bounds[1:]), means):
        out[np.isin(levels, vals[lo:hi])] = m
    return out


def face_levels(g: Geom, factors: np.ndarray) -> np.ndarray | None:
    """The darkening level of each triangle of render mesh ``g``, as MuJoCo's bands and the USD's
    subsets both draw it: ``object_levels``, at most ``OBJECT_MAX_BANDS`` of them
    (``fewest_levels``, area-weighted), a band with fewer than 4 vertices (MuJoCo's least mesh)
    joined to the nearest level; None when the factors do not match its triangles."""
    faces = np.asarray(g.faces, np.int64)
    if len(factors) != len(faces):
        return None
    levels = fewest_levels(object_levels(factors), triangle_areas(g))
    while True:
        present = sorted(set(levels.tolist()), reverse=True)
        small = [lv for lv in present if len(np.unique(faces[levels == lv])) < 4]
        if not small or len(present) == 1:
            return levels
        lv = small[0]
        others = [o for o in present if o != lv]
        levels[levels == lv] = min(others, key=lambda o: (abs(o - lv), -o))


def banded_meshes(parts: list[Geom], factors: list[np.ndarray]) -> list[tuple[Geom, float]]:
    """MuJoCo's object light: render meshes ``parts`` split into bands of equal level
    (``face_levels``: at most ``OBJECT_MAX_BANDS``), brightest first: (band, level) pairs; a band
    keeps its part's colour and material (MuJoCo multiplies the material's tint by the level) and
    its ``name`` gains ``_l<level %>``. A part whose factors do not match its triangles is kept
    whole (level 1). The USD draws the same levels as subsets of the whole mesh."""
    out: list[tuple[Geom, float]] = []
    for g, fac in zip(parts, factors):
        faces = np.asarray(g.faces, np.int64)
        levels = face_levels(g, fac)
        if levels is None:
            out.append((g, 1.0))
            continue
        for level in sorted(set(levels.tolist()), reverse=True):
            sub = faces[levels == level]
            used, inv = np.unique(sub, return_inverse=True)
            uv = None if g.texcoords is None else np.asarray(g.texcoords)[used]
            out.append((replace(g, vertices=np.asarray(g.vertices)[used], faces=inv.reshape(-1, 3), texcoords=uv,
                                name=f"{g.name}_l{int(round(level * 100)):03d}"), float(level)))
    return out


def darkened(g: Geom, level: float) -> Geom:
    """``g`` with its colour times ``level`` (rounded to 4 decimals; the USD's look of a band)."""
    return g if level >= 1.0 else replace(g, color=tuple(round(float(c) * level, 4) for c in g.color))


def home_light(desc, baked: BakedLight | None = None) -> BakedLight:
    """The home's baked light: ``baked`` when given, else the ``mujoco`` light baker's (computed
    once per home and read from its cache); what the USD writer and the Isaac stage both draw."""
    return baked if baked is not None else LIGHT_BAKERS.get("mujoco")(desc)


def object_face_levels(light: BakedLight | None, instance_id: int, parts: list[Geom]) -> list[np.ndarray | None]:
    """``face_levels`` of each of an object's render meshes ``parts`` under ``light`` (None per part
    without light: no light, no factors for the object, or factors that do not match)."""
    factors = light.objects.get(instance_id) if light is not None else None
    return [face_levels(g, f) for g, f in zip(parts, factors)] if factors else [None] * len(parts)
