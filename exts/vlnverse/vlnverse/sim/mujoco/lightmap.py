"""Baked light for the ``objects="meshes"`` opt-in: per-home light maps of the floors, rugs, walls
and ceilings and per-triangle factors of the objects' render meshes, computed once by casting rays
on the CPU and cached on disk (what is baked and how it is drawn: ``scenes.baked_light``).

For each texel of a baked face (``TEXEL_M`` by label, at most ``MAX_TEXELS`` a side) and each
cluster of an object's triangles (``OBJECT_CELL_M`` cells, by facing), one point 1 cm off the
surface casts: ``AO_RAYS`` fixed cosine-weighted directions about the surface normal (ambient
occlusion: a hit at distance d < ``AO_RANGE_M`` occludes by 1 - (d / range)²), shadow rays to
``LIGHT_SAMPLES`` points on its room's ceiling light (soft contact shadows under tables, beds,
sofas) and rays to points on every window pane within reach in front of it (light falling in
through windows). The factor, ``(AO_FLOOR + (1 - AO_FLOOR) ao) (1 - SHADOW + SHADOW v) (1 +
WINDOW_GAIN w)``, multiplies the surface's texture (objects: its colour); the real-time lights stay
as they are, so what is baked is only what they cannot draw (occlusion and shadows) and the run-time
cost is one texture lookup.

The rays see the home as the ``meshes`` opt-in draws it (render meshes, not collision boxes; no
agent). Results are deterministic (fixed directions, per-point turns from a golden-ratio sequence,
factors stored as uint8) and cached under ``cache_dir() / "lightmaps"`` keyed by the scene's content
hash (``scene_content_hash``) and ``LIGHTMAP_VERSION``, like the scene maps.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Callable

import numpy as np

from ...core.cache_key import content_key
from ...core.io import write_npz
from ...core.paths import cache_dir
from ...scenes.baked_light import (FACTOR_SCALE, BakedLight, box_atlas, box_bounds, box_mesh, face_frame, face_plane,
                                   is_axis_aligned_box, texel_grid)
from ...scenes.description import Geom, SceneDescription, scene_content_hash
from ...scenes.textures import room_light_positions
from .gl import import_mujoco

#: Bump when the bake's rules change (cached maps are keyed by it).
LIGHTMAP_VERSION = 3
#: Texel size by label (m): floors and rugs show contact shadows, walls and ceilings only soft gradients.
TEXEL_M = {"floor": 0.15, "rug": 0.15, "wall": 0.25, "ceiling": 0.3}
MAX_TEXELS = 96
#: Objects: triangles are grouped into cells of this size (m) and facing; one ray bundle per group.
OBJECT_CELL_M = 0.12
AO_RAYS = 32
AO_RANGE_M = 1.0
LIGHT_SAMPLES = 5
LIGHT_RADIUS_M = 0.15
LIGHT_FIXTURE_M = 0.3
#: Points sampled on a window pane, as fractions of its two large extents (80 % of the pane).
PANE_POINTS = ((-0.5, -0.5), (0.5, -0.5), (-0.5, 0.5), (0.5, 0.5), (0.0, 0.0), (0.0, 0.45))
WINDOW_SAMPLES = len(PANE_POINTS)
WINDOW_REACH_M = 5.0
#: Mix of the terms (see the module docstring): the darkest full occlusion keeps AO_FLOOR of the
#: texture; a full shadow of the ceiling light keeps 1 - SHADOW.
AO_FLOOR, SHADOW, WINDOW_GAIN = 0.3, 0.3, 0.6
#: How far in front of a wall face a room must be for the face to be baked (m).
ROOM_PROBE_M = 0.1
#: Calls of ``bake_lightmaps`` that computed (not read from the cache): tests count them.
BAKE_CALLS = {"computed": 0}
#: Labels of the axis-aligned boxes that get light maps.
BAKED_LABELS = ("floor", "rug", "wall", "ceiling")


def baked_faces(desc: SceneDescription) -> dict[int, list[str]]:
    """{geom index: faces baked} (``scenes.baked_light.FACES`` names): the top of floors and rugs,
    the bottom of ceilings and the two large vertical faces of a wall where a room lies in front."""
    out: dict[int, list[str]] = {}
    for i, g in enumerate(desc.geoms):
        if g.label not in BAKED_LABELS or not is_axis_aligned_box(g):
            continue
        if g.label in ("floor", "rug"):
            out[i] = ["+z"]
        elif g.label == "ceiling":
            out[i] = ["-z"]
        else:
            lo, hi = box_bounds(g)
            k = int(np.argmin((hi - lo)[:2]))
            faces = []
            for sign in "-+":
                f = sign + "xy"[k]
                p = (lo + hi) / 2
                p[k] = face_plane(g, f) + (ROOM_PROBE_M if sign == "+" else -ROOM_PROBE_M)
                if any(bool(r.contains(p[None, :2])[0]) for r in desc.rooms):
                    faces.append(f)
            if faces:
                out[i] = faces
    return out


def baked_surfaces(desc: SceneDescription) -> list[int]:
    """Indices of the geoms that get light maps (``baked_faces``)."""
    return sorted(baked_faces(desc))


def hemisphere_directions(n: int = AO_RAYS) -> np.ndarray:
    """``n`` fixed cosine-weighted unit directions about +z (stratified spiral; deterministic)."""
    k = np.arange(n) + 0.5
    r = np.sqrt(k / n)
    phi = k * math.pi * (3.0 - math.sqrt(5.0))
    return np.stack([r * np.cos(phi), r * np.sin(phi), np.sqrt(1.0 - r * r)], axis=1)


def _frames(normals: np.ndarray) -> np.ndarray:
    """(N, 3, 3) rows (t1, t2, n): orthonormal frames about unit normals (N, 3) (deterministic)."""
    helper = np.where(np.abs(normals[:, :1]) < 0.9, np.array([[1.0, 0.0, 0.0]]), np.array([[0.0, 1.0, 0.0]]))
    t1 = np.cross(helper, normals)
    t1 /= np.linalg.norm(t1, axis=1, keepdims=True)
    return np.stack([t1, np.cross(normals, t1), normals], axis=1)


def _window_samples(desc: SceneDescription) -> tuple[np.ndarray, np.ndarray, float]:
    """Points (P, 3) on the window panes, their normals (P, 3) and the area each stands for (m²)."""
    pts, normals, areas = [], [], []
    for g in desc.geoms:
        if g.label != "window" or g.kind != "box" or "window" not in (g.material or ""):
            continue
        size = np.asarray(g.size, float)
        rot, c = g.transform[:3, :3], g.transform[:3, 3]
        thin = int(np.argmin(size))
        a, b = [i for i in range(3) if i != thin]
        for s, t in PANE_POINTS:
            local = np.zeros(3)
            local[a], local[b] = s * size[a] * 2 * 0.8, t * size[b] * 2 * 0.8
            pts.append(c + rot @ local)
            normals.append(rot[:, thin])
            areas.append(4 * size[a] * size[b] / WINDOW_SAMPLES)
    if not pts:
        return np.zeros((0, 3)), np.zeros((0, 3)), 0.0
    return np.asarray(pts), np.asarray(normals), float(np.mean(areas))


class _Caster:
    """Casts the bake's rays (``mj_multiRay``) from surface points against one compiled model."""

    def __init__(self, desc: SceneDescription, model, exclude: int, groups: np.ndarray):
        self.mj = import_mujoco()
        self.model, self.exclude, self.groups = model, exclude, groups
        self.data = self.mj.MjData(model)
        self.mj.mj_forward(model, self.data)
        self.hemi = hemisphere_directions()
        self.win_pts, self.win_n, self.win_area = _window_samples(desc)
        by_room = dict(room_light_positions(desc))
        self.rooms = [(r, np.asarray(by_room[r.room_id], float)) for r in desc.rooms if r.room_id in by_room]
        ang = np.arange(LIGHT_SAMPLES - 1) * 2 * math.pi / max(LIGHT_SAMPLES - 1, 1)
        self.ring = LIGHT_RADIUS_M * np.stack([np.cos(ang), np.sin(ang), 0 * ang], 1)

    def lights_for(self, points: np.ndarray, normals: np.ndarray) -> list[np.ndarray | None]:
        """The ceiling light of the room each point (nudged along its normal) lies in, when in front
        of the surface; None otherwise."""
        probe = points[:, :2] + 0.05 * normals[:, :2]
        out: list[np.ndarray | None] = [None] * len(points)
        for room, pos in self.rooms:
            inside = room.contains(probe)
            front = np.einsum("ij,ij->i", pos[None, :] - points, normals)
            for i in np.flatnonzero(inside & (front > 0.01)):
                if out[i] is None:
                    out[i] = pos
        return out

    def factors(self, points: np.ndarray, normals: np.ndarray, start: int = 0) -> np.ndarray:
        """The factor of each surface point (N, 3) with unit normal (N, 3); ``start`` offsets the
        per-point turns (points of one surface share a sequence)."""
        mj, model, data, groups, exclude = self.mj, self.model, self.data, self.groups, self.exclude
        n_pts, n_ao = len(points), len(self.hemi)
        if n_pts == 0:
            return np.zeros(0)
        p = points + 0.01 * normals
        # the fixed directions, turned about the normal by a per-point golden-ratio angle
        t = (((start + np.arange(n_pts)) * ((math.sqrt(5.0) - 1.0) / 2.0)) % 1.0) * 2 * math.pi
        c, s_ = np.cos(t), np.sin(t)
        turn = np.zeros((n_pts, 3, 3))
        turn[:, 0, 0], turn[:, 0, 1], turn[:, 1, 0], turn[:, 1, 1], turn[:, 2, 2] = c, s_, -s_, c, 1.0
        ao_dirs = np.einsum("kj,ijl->ikl", self.hemi, turn @ _frames(normals))
        lights = self.lights_for(points, normals)
        has_l = np.array([x is not None for x in lights])
        lp = np.stack([np.vstack([x, x + self.ring]) if x is not None else np.zeros((LIGHT_SAMPLES, 3))
                       for x in lights])
        l_vec = lp - p[:, None]
        l_dist = np.linalg.norm(l_vec, axis=2)
        l_dirs = l_vec / np.maximum(l_dist, 1e-9)[..., None]
        w_vec = self.win_pts[None] - p[:, None]
        w_dist = np.linalg.norm(w_vec, axis=2)
        w_dirs = w_vec / np.maximum(w_dist, 1e-9)[..., None]
        w_keep = (w_dist < WINDOW_REACH_M) & (np.einsum("ijk,ik->ij", w_vec, normals) > 1e-3)
        ao_hit_d = np.full((n_pts, n_ao), np.inf)
        l_hit_d = np.full(l_dist.shape, np.inf)
        w_hit_d = np.full(w_dist.shape, np.inf)
        gid = np.empty(n_ao + LIGHT_SAMPLES + len(self.win_pts), np.int32)
        dist = np.empty(len(gid), np.float64)
        for i in range(n_pts):
            # two calls: the short occlusion rays cull every geom beyond their reach (3x cheaper)
            vec = np.ascontiguousarray(ao_dirs[i]).reshape(-1)
            mj.mj_multiRay(model, data, p[i], vec, groups, 1, exclude, gid[:n_ao], dist[:n_ao], None, n_ao, AO_RANGE_M)
            ao_hit_d[i] = np.where(gid[:n_ao] >= 0, dist[:n_ao], np.inf)
            keep = np.flatnonzero(w_keep[i])
            far = np.concatenate([l_dirs[i] if has_l[i] else np.zeros((0, 3)), w_dirs[i, keep]])
            if len(far):
                nf = len(far)
                mj.mj_multiRay(model, data, p[i], np.ascontiguousarray(far).reshape(-1), groups, 1, exclude,
                               gid[:nf], dist[:nf], None, nf, WINDOW_REACH_M + 0.5)
                hit = np.where(gid[:nf] >= 0, dist[:nf], np.inf)
                nl = LIGHT_SAMPLES if has_l[i] else 0
                l_hit_d[i, :nl] = hit[:nl]
                w_hit_d[i, keep] = hit[nl:]
        hit = ao_hit_d < AO_RANGE_M
        occl = np.where(hit, 1.0 - (np.where(hit, ao_hit_d, 0.0) / AO_RANGE_M) ** 2, 0.0)
        ao = 1.0 - occl.mean(axis=1)
        # the light's own fixture hangs around it: hits within LIGHT_FIXTURE_M of it do not shadow
        v = np.where(has_l, 1.0 - (l_hit_d < l_dist - LIGHT_FIXTURE_M).mean(axis=1), 1.0)
        vis = w_keep & ~(w_hit_d < w_dist - 0.08)
        cos_r = np.einsum("ijk,ik->ij", w_dirs, normals)
        cos_w = np.abs(np.einsum("ijk,jk->ij", w_dirs, self.win_n))
        ff = cos_r * cos_w / (math.pi * np.maximum(w_dist, 1e-9) ** 2) * self.win_area
        w = np.where(vis, ff, 0.0).sum(axis=1)
        return (AO_FLOOR + (1 - AO_FLOOR) * ao) * (1 - SHADOW + SHADOW * v) * (1 + WINDOW_GAIN * w)


def _bake_face(caster: _Caster, g: Geom, face: str) -> np.ndarray:
    """The (nv, nu) factor map of one face (float, before blurring and storing)."""
    k, sign, u, v, _, _ = face_frame(g, face)
    us, vs = texel_grid(g, face, TEXEL_M.get(g.label, 0.25), MAX_TEXELS)
    uu, vv = np.meshgrid(us, vs)
    pts = np.empty((uu.size, 3))
    pts[:, k], pts[:, u], pts[:, v] = face_plane(g, face), uu.ravel(), vv.ravel()
    normal = np.zeros(3)
    normal[k] = sign
    return caster.factors(pts, np.repeat(normal[None], len(pts), axis=0)).reshape(uu.shape)


def _object_clusters(g: Geom) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sample points (C, 3), unit normals (C, 3), cluster of each triangle (F,)) of a world-placed
    render mesh: triangles grouped by ``OBJECT_CELL_M`` cell of their centroid and dominant facing."""
    v = np.asarray(g.vertices, float) @ g.transform[:3, :3].T + g.transform[:3, 3]
    tri = v[np.asarray(g.faces, np.int64)]
    cen = tri.mean(axis=1)
    nrm = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]) / 2  # length = area
    axis = np.argmax(np.abs(nrm), axis=1)
    facing = 2 * axis + (nrm[np.arange(len(nrm)), axis] > 0)
    key = np.c_[np.floor(cen / OBJECT_CELL_M).astype(np.int64), facing]
    _, inv = np.unique(key, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    n_c = int(inv.max()) + 1
    area = np.linalg.norm(nrm, axis=1) + 1e-12
    pts = np.zeros((n_c, 3))
    np.add.at(pts, inv, cen * area[:, None])
    pts /= np.bincount(inv, weights=area, minlength=n_c)[:, None]
    nsum = np.zeros((n_c, 3))
    np.add.at(nsum, inv, nrm)
    length = np.linalg.norm(nsum, axis=1)
    fallback = np.zeros((n_c, 3))
    first = np.unique(inv, return_index=True)[1]
    fallback[np.arange(n_c), axis[first]] = np.where(nrm[first, axis[first]] > 0, 1.0, -1.0)
    normals = np.where(length[:, None] > 1e-9, nsum / np.maximum(length, 1e-12)[:, None], fallback)
    return pts, normals, inv


def _blur(a: np.ndarray) -> np.ndarray:
    """A 3×3 binomial blur (edges replicated): hides the ray noise."""
    p = np.pad(a, 1, mode="edge")
    k = np.array([1.0, 2.0, 1.0]) / 4.0
    rows = k[0] * p[:-2] + k[1] * p[1:-1] + k[2] * p[2:]
    return k[0] * rows[:, :-2] + k[1] * rows[:, 1:-1] + k[2] * rows[:, 2:]


def _store(f: np.ndarray) -> np.ndarray:
    return np.clip(np.round(f * FACTOR_SCALE), 0, 255).astype(np.uint8)


def lightmap_path(desc: SceneDescription) -> Path:
    """Where the home's light maps are cached (keyed by its content and ``LIGHTMAP_VERSION``)."""
    key = content_key("lightmaps", LIGHTMAP_VERSION, scene_content_hash(desc), sorted(TEXEL_M.items()), MAX_TEXELS,
                      AO_RAYS, OBJECT_CELL_M, length=20)
    return cache_dir() / "lightmaps" / f"{desc.scene_id}-{key}.npz"


def _face_key(gi: int, face: str) -> str:
    return f"s_{gi}_{'p' if face[0] == '+' else 'm'}{face[1]}"


def _read(path: Path) -> BakedLight | None:
    try:
        with np.load(path, allow_pickle=False) as d:
            out = BakedLight()
            objs: dict[int, dict[int, np.ndarray]] = {}
            for k in d.files:
                parts = k.split("_")
                if parts[0] == "s":
                    face = ("+" if parts[2][0] == "p" else "-") + parts[2][1]
                    out.surfaces.setdefault(int(parts[1]), {})[face] = np.asarray(d[k], np.uint8)
                elif parts[0] == "o":
                    objs.setdefault(int(parts[1]), {})[int(parts[2])] = np.asarray(d[k], np.uint8)
            out.objects = {i: [m[j] for j in sorted(m)] for i, m in objs.items()}
            return out
    except Exception:  # a corrupt entry is rebuilt
        return None


def bake_lightmaps(desc: SceneDescription, occluders: Callable[[], tuple], meshes: dict[int, list[Geom]], *,
                   cache: bool = True) -> BakedLight:
    """The home's ``BakedLight``: read from the disk cache when there (module docstring), else
    computed and written (atomically). ``occluders()`` gives (compiled MuJoCo model, body id to
    exclude, geom-group mask) to cast against; it is called only when the maps are computed
    (``builder.baked_lightmaps`` passes the meshes opt-in's model). ``meshes``: the objects' render
    meshes (``object_meshes.render_meshes``), whose triangles get factors."""
    path = lightmap_path(desc) if cache else None
    if path is not None and path.is_file():
        got = _read(path)
        if got is not None:
            return got
    model, exclude, groups = occluders()
    caster = _Caster(desc, model, exclude, groups)
    out = BakedLight()
    for gi, faces in sorted(baked_faces(desc).items()):
        out.surfaces[gi] = {f: _store(_blur(_bake_face(caster, desc.geoms[gi], f))) for f in faces}
    for inst in sorted(meshes):
        out.objects[inst] = []
        for g in meshes[inst]:
            pts, normals, inv = _object_clusters(g)
            out.objects[inst].append(_store(caster.factors(pts, normals)[inv]))
    BAKE_CALLS["computed"] += 1
    if path is not None:
        arrays = {_face_key(gi, f): m for gi, faces in out.surfaces.items() for f, m in faces.items()}
        arrays.update({f"o_{inst}_{k}": a for inst, lst in out.objects.items() for k, a in enumerate(lst)})
        try:
            write_npz(path, **arrays)
        except OSError:  # a read-only cache must not break building
            pass
    return out


def factor_at(desc: SceneDescription, baked: BakedLight, x: float, y: float) -> float:
    """The baked factor at floor point (x, y): the nearest texel of the topmost baked floor or rug
    there (a rug over the floor); NaN off them."""
    tops = [(gi, m["+z"]) for gi, m in baked.surfaces.items() if "+z" in m]
    for gi, m in sorted(tops, key=lambda item: -box_bounds(desc.geoms[item[0]])[1][2]):
        f = face_factor_at(desc.geoms[gi], "+z", m, x, y)
        if not math.isnan(f):
            return f
    return float("nan")


def face_factor_at(g: Geom, face: str, m: np.ndarray, pu: float, pv: float) -> float:
    """The stored factor of the texel of face map ``m`` nearest world coordinates (pu, pv) along
    the face's (u, v) axes; NaN off the face."""
    _, _, _, _, a, b = face_frame(g, face)
    if not (a[0] <= pu <= b[0] and a[1] <= pv <= b[1]):
        return float("nan")
    ny, nx = m.shape
    i = min(nx - 1, int((pu - a[0]) / (b[0] - a[0]) * nx))
    j = min(ny - 1, int((pv - a[1]) / (b[1] - a[1]) * ny))
    return float(m[j, i]) / FACTOR_SCALE


def add_baked_box(spec, g: Geom, name: str, maps: dict[str, np.ndarray], material: str, look) -> str:
    """Add the baked atlas texture, material and mesh (``mesh_<name>``, vertices about the box's
    centre along the world axes) of box ``g``; returns the material's name. ``material`` is the
    box's plain material (``looks.material_for``; its tint, shine and the like are copied), ``look``
    its ``textures.MaterialLook`` (None: untextured)."""
    from ...scenes.textures import texture_array

    mujoco = import_mujoco()
    detail = texture_array(look.texture) if look is not None and look.texture is not None else None
    img, regions = box_atlas(g, maps, detail, look.tile_m if look is not None else 1.0)
    tex = spec.add_texture(name=f"tex_{name}", type=mujoco.mjtTexture.mjTEXTURE_2D, width=img.shape[1],
                           height=img.shape[0], nchannel=3)
    tex.data = img.tobytes()
    base = spec.material(material) if material else None
    kw: dict = {"rgba": [*map(float, g.color), 1.0]}
    if base is not None:
        kw = dict(rgba=list(base.rgba), specular=base.specular, shininess=base.shininess,
                  reflectance=base.reflectance, emission=base.emission)
    mat = spec.add_material(name=f"mat_{name}", **kw)
    mat.textures[1] = f"tex_{name}"
    mat.texuniform = False
    mat.texrepeat = [1.0, 1.0]
    v, f, uv = box_mesh(g, regions, img.shape[:2])
    spec.add_mesh(name=f"mesh_{name}", uservert=v.reshape(-1).tolist(), userface=f.reshape(-1).tolist(),
                  usertexcoord=uv.reshape(-1).tolist())
    return f"mat_{name}"


__all__ = ["BakedLight", "LIGHTMAP_VERSION", "add_baked_box", "bake_lightmaps", "baked_faces", "baked_surfaces",
           "factor_at", "face_factor_at", "lightmap_path"]
