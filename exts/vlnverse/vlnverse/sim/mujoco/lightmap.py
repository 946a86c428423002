"""Baked light for the ``objects="meshes"`` opt-in: per-home light maps of the room floors and rugs,
computed once by casting rays on the CPU and cached on disk, drawn as textures.

For each floor texel (``TEXEL_M``, at most ``MAX_TEXELS`` a side) one ``mj_multiRay`` call from
just above the floor casts ``AO_RAYS`` fixed cosine-weighted hemisphere directions (ambient
occlusion: a hit at distance d < ``AO_RANGE_M`` occludes by 1 - (d / range)²), shadow rays to
``LIGHT_SAMPLES`` points on the room's ceiling light (soft contact shadows under tables, beds,
sofas) and to points on every window pane within reach (light falling in through windows). The
texel's factor, ``(AO_FLOOR + (1 - AO_FLOOR) ao) (1 - SHADOW + SHADOW v) (1 + WINDOW_GAIN w)``,
multiplies the floor's texture; the real-time lights stay as they are, so what is baked is only
what they cannot draw (occlusion and shadows) and the run-time cost is one texture lookup.

The rays see the home as the ``meshes`` opt-in draws it (render meshes, not collision boxes; no
agent). Maps are deterministic (fixed directions, per-texel rotations from a golden-ratio sequence,
factors stored as uint8) and cached under ``cache_dir() / "lightmaps"`` keyed by the scene's
content hash (``scene_content_hash``) and ``LIGHTMAP_VERSION``, like the scene maps.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Callable

import numpy as np

from ...core.cache_key import content_key
from ...core.io import write_npz
from ...core.paths import cache_dir
from ...scenes.description import Geom, SceneDescription, scene_content_hash
from ...scenes.textures import room_light_positions
from .gl import import_mujoco

#: Bump when the bake's rules change (cached maps are keyed by it).
LIGHTMAP_VERSION = 1
TEXEL_M = 0.15
MAX_TEXELS = 96
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
#: Factors are stored as uint8 ``round(factor * FACTOR_SCALE)`` (so at most 1.275).
FACTOR_SCALE = 200.0
#: Pixels per metre of a baked floor texture (at most the detail texture's own) and its cap a side.
BAKED_PX_PER_M, BAKED_MAX_PX = 100.0, 1024
#: Calls of ``bake_lightmaps`` that computed (not read from the cache): tests count them.
BAKE_CALLS = {"computed": 0}


#: Labels of the horizontal boxes that get light maps: the room floors and the rugs on them.
BAKED_LABELS = ("floor", "rug")


def baked_surfaces(desc: SceneDescription) -> list[int]:
    """Indices of the axis-aligned boxes labelled ``BAKED_LABELS`` that get light maps."""
    return [i for i, g in enumerate(desc.geoms) if g.label in BAKED_LABELS and g.kind == "box"
            and np.allclose(np.abs(g.transform[:3, :3]), np.eye(3))]


def floor_rect(g: Geom) -> tuple[float, float, float, float, float]:
    """(x0, y0, x1, y1, top z) of an axis-aligned floor box."""
    c, h = g.transform[:3, 3], np.abs(g.transform[:3, :3]) @ np.asarray(g.size, float)
    return float(c[0] - h[0]), float(c[1] - h[1]), float(c[0] + h[0]), float(c[1] + h[1]), float(c[2] + h[2])


def texel_grid(g: Geom) -> tuple[np.ndarray, np.ndarray]:
    """Texel centres (xs (nx,), ys (ny,)) over the floor's top face."""
    x0, y0, x1, y1, _ = floor_rect(g)
    nx = int(min(MAX_TEXELS, max(2, math.ceil((x1 - x0) / TEXEL_M))))
    ny = int(min(MAX_TEXELS, max(2, math.ceil((y1 - y0) / TEXEL_M))))
    xs = x0 + (np.arange(nx) + 0.5) * (x1 - x0) / nx
    ys = y0 + (np.arange(ny) + 0.5) * (y1 - y0) / ny
    return xs, ys


def hemisphere_directions(n: int = AO_RAYS) -> np.ndarray:
    """``n`` fixed cosine-weighted unit directions about +z (stratified spiral; deterministic)."""
    k = np.arange(n) + 0.5
    r = np.sqrt(k / n)
    phi = k * math.pi * (3.0 - math.sqrt(5.0))
    return np.stack([r * np.cos(phi), r * np.sin(phi), np.sqrt(1.0 - r * r)], axis=1)


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


def _bake_floor(mj, model, data, groups, exclude: int, g: Geom, light: np.ndarray | None,
                win_pts: np.ndarray, win_n: np.ndarray, win_area: float) -> np.ndarray:
    """The (ny, nx) factor map of one floor (float, before storing)."""
    xs, ys = texel_grid(g)
    z = floor_rect(g)[4] + 0.01
    hemi = hemisphere_directions()
    golden = (math.sqrt(5.0) - 1.0) / 2.0
    if light is not None:
        ang = np.arange(LIGHT_SAMPLES - 1) * 2 * math.pi / max(LIGHT_SAMPLES - 1, 1)
        lights = np.vstack([light, light + LIGHT_RADIUS_M * np.stack([np.cos(ang), np.sin(ang), 0 * ang], 1)])
    else:
        lights = np.zeros((0, 3))
    out = np.empty((len(ys), len(xs)))
    n_ao, n_l = len(hemi), len(lights)
    for j, y in enumerate(ys):
        for i, x in enumerate(xs):
            p = np.array([x, y, z])
            t = ((j * len(xs) + i) * golden % 1.0) * 2 * math.pi  # a per-texel turn of the fixed directions
            c, s = math.cos(t), math.sin(t)
            dirs = [hemi @ np.array([[c, s, 0.0], [-s, c, 0.0], [0.0, 0.0, 1.0]])]
            dist_to = [np.full(n_ao, AO_RANGE_M)]
            near = np.zeros((0, 3))
            if n_l:
                d = lights - p
                dist_to.append(np.linalg.norm(d, axis=1))
                dirs.append(d / dist_to[-1][:, None])
            if len(win_pts):
                d = win_pts - p
                dn = np.linalg.norm(d, axis=1)
                keep = (dn < WINDOW_REACH_M) & (d[:, 2] > 0)
                near = win_n[keep]
                dist_to.append(dn[keep])
                dirs.append(d[keep] / dn[keep][:, None])
            vec = np.ascontiguousarray(np.vstack(dirs), np.float64)
            lim = np.concatenate(dist_to)
            nray = len(vec)
            gid = np.empty(nray, np.int32)
            dist = np.empty(nray, np.float64)
            # two calls: the short occlusion rays cull every geom beyond their reach (3x cheaper)
            for lo, hi, cut in ((0, n_ao, AO_RANGE_M), (n_ao, nray, WINDOW_REACH_M + 0.5)):
                if hi > lo:
                    mj.mj_multiRay(model, data, p, vec[lo:hi].reshape(-1), groups, 1, exclude, gid[lo:hi],
                                   dist[lo:hi], None, hi - lo, float(cut))
            hit = (gid >= 0) & (dist >= 0)
            occl = np.where(hit[:n_ao] & (dist[:n_ao] < AO_RANGE_M), 1.0 - (dist[:n_ao] / AO_RANGE_M) ** 2, 0.0)
            ao = 1.0 - float(occl.mean())
            v = 1.0
            if n_l:
                # the light's own fixture hangs around it: hits within LIGHT_FIXTURE_M of it do not shadow
                lh = hit[n_ao:n_ao + n_l] & (dist[n_ao:n_ao + n_l] < lim[n_ao:n_ao + n_l] - LIGHT_FIXTURE_M)
                v = 1.0 - float(lh.mean())
            w = 0.0
            if len(near):
                k0 = n_ao + n_l
                vis = ~(hit[k0:] & (dist[k0:] < lim[k0:] - 0.08))
                dv = vec[k0:]
                ff = dv[:, 2] * np.abs(np.einsum("ij,ij->i", dv, near)) / (math.pi * lim[k0:] ** 2) * win_area
                w = float(np.sum(ff * vis))
            out[j, i] = (AO_FLOOR + (1 - AO_FLOOR) * ao) * (1 - SHADOW + SHADOW * v) * (1 + WINDOW_GAIN * w)
    return out


def _blur(a: np.ndarray) -> np.ndarray:
    """A 3×3 binomial blur (edges replicated): hides the ray noise."""
    p = np.pad(a, 1, mode="edge")
    k = np.array([1.0, 2.0, 1.0]) / 4.0
    rows = k[0] * p[:-2] + k[1] * p[1:-1] + k[2] * p[2:]
    return k[0] * rows[:, :-2] + k[1] * rows[:, 1:-1] + k[2] * rows[:, 2:]


def lightmap_path(desc: SceneDescription) -> Path:
    """Where the home's light maps are cached (keyed by its content and ``LIGHTMAP_VERSION``)."""
    key = content_key("lightmaps", LIGHTMAP_VERSION, scene_content_hash(desc), TEXEL_M, MAX_TEXELS, AO_RAYS,
                      length=20)
    return cache_dir() / "lightmaps" / f"{desc.scene_id}-{key}.npz"


def _light_for_floor(desc: SceneDescription, g: Geom) -> np.ndarray | None:
    """The ceiling light above the floor (the room light whose xy lies on the floor's rectangle)."""
    x0, y0, x1, y1, _ = floor_rect(g)
    for _rid, pos in room_light_positions(desc):
        if x0 <= pos[0] <= x1 and y0 <= pos[1] <= y1:
            return np.asarray(pos, float)
    return None


def bake_lightmaps(desc: SceneDescription, occluders: Callable[[], tuple], *, cache: bool = True) -> dict[int, np.ndarray]:
    """{surface geom index: (ny, nx) uint8 factor map (``FACTOR_SCALE``)} of ``desc``; read from the
    disk cache when there (module docstring), else computed and written (atomically). ``occluders()``
    gives (compiled MuJoCo model, body id to exclude, geom-group mask) to cast against; it is called
    only when the maps are computed (``builder.baked_lightmaps`` passes the meshes opt-in's model)."""
    path = lightmap_path(desc) if cache else None
    if path is not None and path.is_file():
        try:
            with np.load(path, allow_pickle=False) as d:
                return {int(k[6:]): np.asarray(d[k], np.uint8) for k in d.files if k.startswith("floor_")}
        except Exception:  # a corrupt entry is rebuilt
            pass
    mj = import_mujoco()
    model, exclude, groups = occluders()
    data = mj.MjData(model)
    mj.mj_forward(model, data)
    win_pts, win_n, win_area = _window_samples(desc)
    maps: dict[int, np.ndarray] = {}
    for gi in baked_surfaces(desc):
        g = desc.geoms[gi]
        f = _blur(_bake_floor(mj, model, data, groups, exclude, g, _light_for_floor(desc, g),
                              win_pts, win_n, win_area))
        maps[gi] = np.clip(np.round(f * FACTOR_SCALE), 0, 255).astype(np.uint8)
    BAKE_CALLS["computed"] += 1
    if path is not None:
        try:
            write_npz(path, **{f"floor_{gi}": m for gi, m in maps.items()})
        except OSError:  # a read-only cache must not break building
            pass
    return maps


def factor_at(desc: SceneDescription, maps: dict[int, np.ndarray], x: float, y: float) -> float:
    """The baked factor at floor point (x, y): the nearest texel of the topmost baked surface there
    (a rug over the floor); NaN off them."""
    for gi, m in sorted(maps.items(), key=lambda item: -floor_rect(desc.geoms[item[0]])[4]):
        x0, y0, x1, y1, _ = floor_rect(desc.geoms[gi])
        if x0 <= x <= x1 and y0 <= y <= y1:
            ny, nx = m.shape
            i = min(nx - 1, int((x - x0) / (x1 - x0) * nx))
            j = min(ny - 1, int((y - y0) / (y1 - y0) * ny))
            return float(m[j, i]) / FACTOR_SCALE
    return float("nan")


def baked_texture(detail: np.ndarray | None, tile_m: float, factor: np.ndarray, g: Geom) -> np.ndarray:
    """The (H, W, 3) uint8 texture of a floor: its detail texture tiled every ``tile_m`` metres
    (white without one) times the bilinearly upsampled ``factor`` map; row 0 at the floor's y0."""
    x0, y0, x1, y1, _ = floor_rect(g)
    ppm = BAKED_PX_PER_M if detail is None else min(BAKED_PX_PER_M, detail.shape[1] / tile_m)
    w = int(min(BAKED_MAX_PX, max(4, round((x1 - x0) * ppm))))
    h = int(min(BAKED_MAX_PX, max(4, round((y1 - y0) * ppm))))
    px = x0 + (np.arange(w) + 0.5) * (x1 - x0) / w
    py = y0 + (np.arange(h) + 0.5) * (y1 - y0) / h
    ny, nx = factor.shape
    fx = np.clip((px - x0) / (x1 - x0) * nx - 0.5, 0, nx - 1)
    fy = np.clip((py - y0) / (y1 - y0) * ny - 0.5, 0, ny - 1)
    ix, iy = np.minimum(fx.astype(int), nx - 2 if nx > 1 else 0), np.minimum(fy.astype(int), ny - 2 if ny > 1 else 0)
    ax, ay = (fx - ix)[None, :], (fy - iy)[:, None]
    f = factor.astype(np.float64) / FACTOR_SCALE
    ix1, iy1 = np.minimum(ix + 1, nx - 1), np.minimum(iy + 1, ny - 1)
    up = ((1 - ay) * ((1 - ax) * f[iy][:, ix] + ax * f[iy][:, ix1])
          + ay * ((1 - ax) * f[iy1][:, ix] + ax * f[iy1][:, ix1]))
    if detail is None:
        base = np.full((h, w), 255.0)
    else:
        n = detail.shape[0]
        tx = (np.floor(px / tile_m * n).astype(int)) % n
        ty = (np.floor(py / tile_m * n).astype(int)) % n
        base = detail[:, :, 0].astype(np.float64)[ty][:, tx]
    img = np.clip(np.round(base * up), 0, 255).astype(np.uint8)
    return np.repeat(img[..., None], 3, axis=2)


def floor_mesh(g: Geom) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(vertices (24, 3) in the floor's frame, faces (12, 3), texcoords (24, 2)) of the floor box:
    the top face spans the baked texture once, the sides take its edge texels."""
    hx, hy, hz = (float(v) for v in g.size)
    x0, y0, x1, y1, _ = floor_rect(g)
    corners = {"top": [(-hx, -hy, hz), (hx, -hy, hz), (hx, hy, hz), (-hx, hy, hz)],
               "bottom": [(-hx, -hy, -hz), (-hx, hy, -hz), (hx, hy, -hz), (hx, -hy, -hz)],
               "-y": [(-hx, -hy, -hz), (hx, -hy, -hz), (hx, -hy, hz), (-hx, -hy, hz)],
               "+y": [(hx, hy, -hz), (-hx, hy, -hz), (-hx, hy, hz), (hx, hy, hz)],
               "-x": [(-hx, hy, -hz), (-hx, -hy, -hz), (-hx, -hy, hz), (-hx, hy, hz)],
               "+x": [(hx, -hy, -hz), (hx, hy, -hz), (hx, hy, hz), (hx, -hy, hz)]}
    verts, faces, uv = [], [], []
    for quad in corners.values():
        k = len(verts)
        verts.extend(quad)
        uv.extend([((x + hx) / (2 * hx), (y + hy) / (2 * hy)) for x, y, _ in quad])
        faces.extend([(k, k + 1, k + 2), (k, k + 2, k + 3)])
    return np.asarray(verts, float), np.asarray(faces, int), np.asarray(uv, float)


def add_baked_floor(spec, g: Geom, name: str, factor: np.ndarray, material: str, look) -> str:
    """Add the baked texture, material and mesh (``mesh_<name>``) of floor ``g``; returns the material's name.
    ``material`` is the floor's plain material (``looks.material_for``; its tint, shine and the
    like are copied), ``look`` its ``textures.MaterialLook`` (None: untextured)."""
    from ...scenes.textures import texture_array

    mujoco = import_mujoco()
    detail = texture_array(look.texture) if look is not None and look.texture is not None else None
    img = baked_texture(detail, look.tile_m if look is not None else 1.0, factor, g)
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
    v, f, uv = floor_mesh(g)
    spec.add_mesh(name=f"mesh_{name}", uservert=v.reshape(-1).tolist(), userface=f.reshape(-1).tolist(),
                  usertexcoord=uv.reshape(-1).tolist())
    return f"mat_{name}"
