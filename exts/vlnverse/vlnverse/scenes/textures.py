"""Procedural surface materials: semantic material names, their look, and seamless textures.

A *material* is named ``<kind>`` or ``<kind>_<colour>`` (``wood_oak``, ``tile_white``,
``fabric_blue``); the kind decides the pattern and the shading, the colour (a name from
``catalog.COLORS`` or the geom's own colour) tints it. Textures are greyscale detail maps
(mean ≈ 0.85, so the tint stays close to the named colour), tileable, generated from a fixed seed
per kind with numpy only and quantised to uint8, so the same kind gives byte-identical PNGs on
every machine. They are small (``TEXTURE_SIZE``² pixels) and shared by every home.

Kinds: wood (planks with grain), parquet, tile (square tiles with grout), carpet, fabric (weave),
leather, plaster, paint (ceilings), wallpaper (stripes), marble (veins), stone (mottled), metal (brushed),
ceramic, plastic, glass, paper, leaf, emissive ``light``, ``lampshade`` and ``window`` (daylight).
"""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

#: Side of every generated texture (pixels).
TEXTURE_SIZE = 128
#: Seed of the texture library (textures are shared, colour varies per instance).
TEXTURE_SEED = 14
#: Folder beside a USD file holding its textures.
TEXTURE_DIR = "textures"
#: Direction the sunlight travels (world, Z up; unit): from the south-west, 45° high, so it comes
#: in through windows on west and south walls. The USD's ``DistantLight`` and MuJoCo's sun share it.
SUN_DIRECTION = (0.5, 0.5, -0.7071068)


@dataclass(frozen=True)
class MaterialLook:
    """How a material kind renders: its texture (or None), metres per texture tile, and shading."""

    texture: str | None
    tile_m: float = 1.0
    roughness: float = 0.7
    metallic: float = 0.0
    specular: float = 0.2
    opacity: float = 1.0
    emission: float = 0.0


LOOKS: dict[str, MaterialLook] = {
    "wood": MaterialLook("wood", 1.2, 0.55, 0.0, 0.3),
    "parquet": MaterialLook("parquet", 0.8, 0.5, 0.0, 0.3),
    "tile": MaterialLook("tile", 0.6, 0.3, 0.0, 0.5),
    "carpet": MaterialLook("carpet", 0.5, 0.95, 0.0, 0.05),
    "fabric": MaterialLook("fabric", 0.25, 0.9, 0.0, 0.05),
    "leather": MaterialLook("leather", 0.4, 0.45, 0.0, 0.35),
    "plaster": MaterialLook("plaster", 2.0, 0.9, 0.0, 0.05),
    # ceilings: plaster with a little self-illumination standing in for light bounced off the floor
    "paint": MaterialLook("plaster", 2.0, 0.9, 0.0, 0.05, emission=0.25),
    "wallpaper": MaterialLook("wallpaper", 0.7, 0.85, 0.0, 0.05),
    "marble": MaterialLook("marble", 1.0, 0.2, 0.0, 0.6),
    "stone": MaterialLook("stone", 0.8, 0.6, 0.0, 0.25),
    "metal": MaterialLook("metal", 0.3, 0.3, 0.9, 0.7),
    "ceramic": MaterialLook(None, 1.0, 0.2, 0.0, 0.6),
    "plastic": MaterialLook(None, 1.0, 0.5, 0.0, 0.3),
    "glass": MaterialLook(None, 1.0, 0.05, 0.0, 0.9, opacity=0.35),
    "paper": MaterialLook(None, 1.0, 0.8, 0.0, 0.1),
    "leaf": MaterialLook("leaf", 0.2, 0.6, 0.0, 0.2),
    "art": MaterialLook("art", 1.0, 0.6, 0.0, 0.1),
    "lampshade": MaterialLook("fabric", 0.25, 0.9, 0.0, 0.05, emission=0.45),
    "light": MaterialLook(None, 1.0, 0.5, 0.0, 0.0, emission=0.8),
    # window glass: clear in the USD (Isaac Sim renders what lies outside); the MuJoCo look draws
    # it as bright sky instead (there is nothing outside a home to see), see sim.mujoco.looks
    "window": MaterialLook(None, 1.0, 0.05, 0.0, 0.9, opacity=0.2),
}
#: Material kinds used when a geom carries none (e.g. a third-party stage), by label.
DEFAULT_KIND_BY_LABEL = {"floor": "wood", "wall": "plaster", "ceiling": "paint", "door_frame": "wood"}


def material_kind(name: str) -> str:
    """The kind of a material name (``wood_oak`` → ``wood``); unknown names give ``""``."""
    name = (name or "").lower()
    head = name.split("_", 1)[0]
    if head in LOOKS:
        return head
    return next((k for k in LOOKS if k in name), "")


# --------------------------------------------------------------------------- noise
def _value_noise(rng: np.random.Generator, n: int, cells: int) -> np.ndarray:
    """Tileable smooth value noise (n×n) with ``cells`` lattice cells per side, in [0, 1]."""
    grid = rng.random((cells, cells))
    t = np.arange(n) * cells / n
    i0 = np.floor(t).astype(int)
    f = t - i0
    f = f * f * (3 - 2 * f)
    i1 = (i0 + 1) % cells
    rows0, rows1 = grid[i0], grid[i1]
    a = rows0[:, i0] * (1 - f) + rows0[:, i1] * f
    b = rows1[:, i0] * (1 - f) + rows1[:, i1] * f
    return a * (1 - f[:, None]) + b * f[:, None]


def _fbm(rng: np.random.Generator, n: int, base: int, octaves: int = 4) -> np.ndarray:
    """Tileable fractal noise in [0, 1]."""
    out, amp, total = np.zeros((n, n)), 1.0, 0.0
    for o in range(octaves):
        out += amp * _value_noise(rng, n, base * 2 ** o)
        total += amp
        amp *= 0.5
    return out / total


def _pattern(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """Luminance pattern of ``kind`` (n×n floats, roughly in [0, 1])."""
    y, x = np.mgrid[0:n, 0:n] / n
    if kind in ("wood", "parquet"):
        planks = 4
        row = np.floor(y * planks).astype(int)
        shift = rng.random(planks)[row]
        grain = _fbm(rng, n, 2, 3)
        u = (x + shift) % 1.0
        rings = 0.5 + 0.5 * np.sin(2 * np.pi * (y * planks * 5 + 2.0 * grain + 0.3 * np.sin(2 * np.pi * u)))
        fine = _fbm(rng, n, 16, 2)
        tone = 0.82 + 0.16 * rng.random(planks)[row]
        lum = tone * (0.78 + 0.14 * rings + 0.08 * fine)
        seam = (np.abs(((y * planks) % 1.0) - 0.0) < 1.5 / n * planks) | (np.abs(u - 0.5) < 0.8 / n)
        if kind == "parquet":
            seam |= (np.abs(((x * 8) % 1.0)) < 8.0 / n)
        return np.where(seam, lum * 0.55, lum)
    if kind == "tile":
        tiles = 2
        gx, gy = (x * tiles) % 1.0, (y * tiles) % 1.0
        grout = (np.minimum(gx, 1 - gx) < 0.025) | (np.minimum(gy, 1 - gy) < 0.025)
        idx = (np.floor(x * tiles) + tiles * np.floor(y * tiles)).astype(int)
        tone = 0.9 + 0.08 * rng.random(tiles * tiles)[idx]
        return np.where(grout, 0.55, tone * (0.95 + 0.05 * _fbm(rng, n, 8, 2)))
    if kind == "carpet":
        return 0.7 + 0.25 * _fbm(rng, n, 32, 2) + 0.05 * rng.random((n, n))
    if kind == "fabric":
        weave = 0.5 + 0.5 * np.sign(np.sin(2 * np.pi * x * 32)) * np.sign(np.sin(2 * np.pi * y * 32))
        return 0.78 + 0.12 * weave + 0.1 * _fbm(rng, n, 16, 2)
    if kind == "leather":
        cells = _fbm(rng, n, 24, 3)
        return 0.75 + 0.25 * np.abs(cells - 0.5) * 2
    if kind == "plaster":
        return 0.9 + 0.1 * _fbm(rng, n, 8, 4)
    if kind == "wallpaper":
        stripes = 0.5 + 0.5 * np.cos(2 * np.pi * x * 6)
        motif = 0.5 + 0.5 * np.cos(2 * np.pi * x * 12) * np.cos(2 * np.pi * y * 12)
        return 0.82 + 0.1 * stripes + 0.06 * (motif > 0.85) + 0.02 * _fbm(rng, n, 8, 2)
    if kind == "marble":
        turb = _fbm(rng, n, 4, 5)
        veins = np.abs(np.sin(2 * np.pi * (x + y + 2.5 * turb)))
        return 0.72 + 0.28 * veins ** 0.3
    if kind == "stone":
        return 0.6 + 0.4 * _fbm(rng, n, 8, 5)
    if kind == "metal":
        streak = _value_noise(rng, n, 64)[:, :1] * np.ones((1, n))
        return 0.82 + 0.12 * streak + 0.06 * _fbm(rng, n, 32, 2)
    if kind == "leaf":
        veins = np.abs(np.sin(2 * np.pi * (x * 8 + 0.4 * np.abs(y - 0.5) * 8)))
        return 0.7 + 0.2 * veins ** 0.2 + 0.1 * _fbm(rng, n, 8, 2)
    raise ValueError(f"no texture pattern for kind '{kind}'")


@lru_cache(maxsize=None)
def texture_array(kind: str, size: int = TEXTURE_SIZE, seed: int = TEXTURE_SEED) -> np.ndarray:
    """The (size, size, 3) uint8 greyscale texture of ``kind`` (deterministic per seed); read-only."""
    # A stable per-kind seed: the kind's name bytes mixed with the library seed.
    rng = np.random.default_rng([seed, *kind.encode()])
    if kind == "art":  # the only coloured texture: an abstract painting of soft colour fields
        palette = rng.random((5, 3)) * 0.8 + 0.15
        field = _fbm(rng, size, 3, 3)
        idx = np.clip((field - field.min()) / (np.ptp(field) + 1e-9) * 5, 0, 4.999).astype(int)
        rgb = palette[idx] * (0.85 + 0.15 * _fbm(rng, size, 16, 2))[..., None]
        img = np.round(np.clip(rgb, 0, 1) * 255.0).astype(np.uint8)
    else:
        lum = np.clip(_pattern(kind, size, rng), 0.0, 1.0)
        img = np.repeat(np.round(lum * 255.0).astype(np.uint8)[..., None], 3, axis=2)
    img.setflags(write=False)
    return img


def png_bytes(image: np.ndarray) -> bytes:
    """Encode an (H, W, 3) uint8 image as a PNG with no metadata (deterministic bytes)."""
    h, w, _ = image.shape
    raw = b"".join(b"\x00" + image[r].tobytes() for r in range(h))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def _png_filtered_rows(image: np.ndarray) -> bytes:
    """PNG scanlines of an (H, W) uint8 image, each row with the filter (None, Sub, Up, Average,
    Paeth) whose residuals have the least sum of magnitudes (libpng's heuristic; first on ties)."""
    a = image.astype(np.int16)
    up = np.vstack([np.zeros((1, a.shape[1]), np.int16), a[:-1]])
    left = np.hstack([np.zeros((a.shape[0], 1), np.int16), a[:, :-1]])
    upleft = np.hstack([np.zeros((a.shape[0], 1), np.int16), up[:, :-1]])
    p = left + up - upleft
    pa, pb, pc = np.abs(p - left), np.abs(p - up), np.abs(p - upleft)
    paeth = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, up, upleft))
    cands = np.stack([a, a - left, a - up, a - (left + up) // 2, a - paeth]) % 256  # (5, H, W)
    cost = np.minimum(cands, 256 - cands).sum(axis=2)  # residuals as signed bytes
    best = np.argmin(cost, axis=0)
    rows = cands[best, np.arange(a.shape[0])].astype(np.uint8)
    return np.hstack([best.astype(np.uint8)[:, None], rows]).tobytes()


def grey_png_bytes(image: np.ndarray) -> bytes:
    """Encode an (H, W) uint8 image as an 8-bit greyscale PNG (per-row adaptive filters, zlib level 9,
    no metadata: deterministic bytes)."""
    image = np.ascontiguousarray(image, dtype=np.uint8)
    h, w = image.shape

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(_png_filtered_rows(image), 9)) + chunk(b"IEND", b""))


def texture_file_name(kind: str) -> str:
    """Relative path of a kind's texture beside a USD file (``textures/<kind>.png``)."""
    return f"{TEXTURE_DIR}/{kind}.png"


def write_textures(folder: str | Path, kinds) -> list[Path]:
    """Write the PNG of each texture the material ``kinds`` use under ``folder/textures`` (atomically,
    only when missing or different); returns their paths, sorted."""
    from ..core.io import atomic_path

    out = []
    textures = {LOOKS[k].texture for k in kinds if k in LOOKS} - {None}
    for tex in sorted(textures):
        path = Path(folder) / texture_file_name(tex)
        data = png_bytes(texture_array(tex))
        if not (path.exists() and path.read_bytes() == data):
            path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(path) as tmp:
                Path(tmp).write_bytes(data)
        out.append(path)
    return out


def room_light_positions(desc) -> list[tuple[int, tuple[float, float, float]]]:
    """(room id, position) of each room's ceiling light: above the room's centroid, 0.3 m under the
    ceiling (``metadata['wall_height']``, else the top of the scene). The USD writer authors these
    as ``UsdLux.SphereLight``s and the MuJoCo builder as point lights."""
    if not desc.rooms:
        return []
    height = float(desc.metadata.get("wall_height", desc.bounds()[1][2]))
    return [(room.room_id, (round(float(room.centroid[0]), 4), round(float(room.centroid[1]), 4),
                            round(height - 0.3, 4))) for room in desc.rooms]
