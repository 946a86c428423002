"""Ray-cast camera and lidar for the MuJoCo backend: one ``mj_multiRay`` call per image, no OpenGL.

Returns the raw images ``render.py`` documents (``rgb``, ``depth``, ``geom``); RGB is flat-shaded.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from ..sensors import pixel_rays
from .builder import GROUP_AGENT, GROUP_COLLISION_ONLY, BuiltScene
from .gl import import_mujoco

#: Background colour of the ray-cast renderer (no geometry hit).
BACKGROUND_RGB = np.array([150, 170, 190], np.uint8)


def _visible_groups() -> np.ndarray:
    groups = np.ones(6, np.uint8)
    groups[GROUP_AGENT] = 0
    groups[GROUP_COLLISION_ONLY] = 0  # collision geoms drawn by render meshes (``objects="meshes"``)
    return groups


def _multiray_has_normal() -> bool:
    """Whether this MuJoCo's ``mj_multiRay`` takes a ``normal`` output (MuJoCo 3.12 and 4.x do,
    earlier 3.x do not): read from the binding's signature line, not guessed from the version."""
    signature = (import_mujoco().mj_multiRay.__doc__ or "").split("\n", 1)[0]
    return " normal:" in signature


class RaycastRenderer:
    """Pinhole images by casting one ray per pixel centre with a single ``mj_multiRay`` call.

    RGB is flat-shaded: geom colour × (0.35 + 0.65 |n · ray|) (a headlight), matching what the GL
    renderer shows closely enough for debugging and for policies trained on depth/semantics.
    """

    name = "raycast"

    def __init__(self, built: BuiltScene, model):
        self._mj = import_mujoco()
        self._has_normal = _multiray_has_normal()
        self._built = built
        self._model = model
        self._rays: dict[tuple[int, int, float], tuple[np.ndarray, np.ndarray]] = {}
        self._groups = _visible_groups()
        self._rgba = (np.asarray(model.geom_rgba)[:, :3] * 255.0).astype(np.float32)
        self.render_calls = 0

    def _camera_rays(self, width: int, height: int, hfov_deg: float) -> tuple[np.ndarray, np.ndarray]:
        key = (width, height, float(hfov_deg))
        if key not in self._rays:
            rays = pixel_rays(width, height, hfov_deg).reshape(-1, 3)
            norm = np.linalg.norm(rays, axis=1)
            self._rays[key] = (rays / norm[:, None], 1.0 / norm)  # unit rays, planar-depth factor
        return self._rays[key]

    def cast(self, data, origin: np.ndarray, directions: np.ndarray, cutoff: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Cast unit ``directions`` (N, 3) from ``origin``: (distance (N,) with -1 for no hit,
        geom id (N,), normal (N, 3))."""
        n = len(directions)
        geomid = np.empty(n, np.int32)
        dist = np.empty(n, np.float64)
        normal = np.empty(n * 3, np.float64)
        pnt = np.asarray(origin, np.float64)
        vec = np.ascontiguousarray(directions, np.float64).reshape(-1)
        if self._has_normal:  # surface normals come with the hits
            self._mj.mj_multiRay(self._model, data, pnt, vec, self._groups, 1, self._built.agent_body,
                                 geomid, dist, normal, n, float(cutoff))
            return dist, geomid, normal.reshape(n, 3)
        # MuJoCo 3.x has no normal output: shade as if every surface faced the ray (headlight)
        self._mj.mj_multiRay(self._model, data, pnt, vec, self._groups, 1, self._built.agent_body,
                             geomid, dist, n, float(cutoff))
        return dist, geomid, -np.asarray(directions, np.float64).reshape(n, 3)

    def render(self, data, position: np.ndarray, rotation: np.ndarray, width: int, height: int,
               hfov_deg: float, kinds: Iterable[str], cutoff: float = 100.0) -> dict[str, np.ndarray]:
        """Raw images of ``kinds`` (subset of rgb, depth, geom) from a camera at ``position`` with
        ``rotation`` columns (forward, left, up) in the world."""
        kinds = set(kinds)
        unit, planar = self._camera_rays(width, height, hfov_deg)
        forward, left, up = rotation[:, 0], rotation[:, 1], rotation[:, 2]
        cv_to_world = np.stack([-left, -up, forward], axis=1)
        world_dirs = unit @ cv_to_world.T
        dist, geomid, normal = self.cast(data, position, world_dirs, cutoff)
        self.render_calls += 1
        hit = geomid >= 0
        out: dict[str, np.ndarray] = {}
        if "depth" in kinds:
            depth = np.where(hit, dist * planar, np.inf).astype(np.float32)
            out["depth"] = depth.reshape(height, width)
        if "geom" in kinds:
            out["geom"] = np.where(hit, geomid, -1).astype(np.int32).reshape(height, width)
        if "rgb" in kinds:
            shade = 0.35 + 0.65 * np.abs(np.einsum("ij,ij->i", normal, world_dirs))
            colour = self._rgba[np.maximum(geomid, 0)] * shade[:, None]
            rgb = np.where(hit[:, None], np.clip(colour, 0, 255), BACKGROUND_RGB).astype(np.uint8)
            out["rgb"] = rgb.reshape(height, width, 3)
        return out

    def close(self) -> None:
        """Nothing to release."""


def lidar_scan(caster: RaycastRenderer, data, origin: np.ndarray, rotation: np.ndarray, directions: np.ndarray,
               min_range: float, max_range: float) -> np.ndarray:
    """Ranges (channels, beams) float32 for sensor-frame unit ``directions`` (channels, beams, 3);
    ``inf`` where nothing lies within [min_range, max_range]."""
    shape = directions.shape[:2]
    world = directions.reshape(-1, 3) @ rotation.T
    dist, geomid, _ = caster.cast(data, origin, world, max_range)
    ok = (geomid >= 0) & (dist >= min_range) & (dist <= max_range)
    return np.where(ok, dist, np.inf).astype(np.float32).reshape(shape)
