"""Camera rendering for the MuJoCo backend: an OpenGL renderer (``mujoco.Renderer`` through EGL or
OSMesa) and a ray-cast fallback built on ``mj_multiRay`` that needs no OpenGL.

Both return *raw* images for one camera pose: ``rgb`` uint8 (H, W, 3), ``depth`` float32 planar
depth in metres (``inf`` where nothing is hit) and ``geom`` int32 geom ids (-1 = background); the
backend turns geom ids into semantic / instance images. The agent's own geom (group 3) is hidden
from both.

The renderers live in ``gl_render`` (``GLRenderer``), ``raycast`` (``RaycastRenderer``, ``lidar_scan``)
and ``culling`` (frustum and room-portal culling); this module picks one (``make_renderer``) and
states what every renderer offers (``Renderer``).
"""
from __future__ import annotations

import warnings
from typing import Any, Iterable, Protocol, runtime_checkable

import numpy as np

from .builder import BuiltScene
from .culling import CULL_GROUP, RoomPortals, frustum_visible
from .gl_render import ACTIVE_ROOM_LIGHTS, GLRenderer, antialias
from .raycast import BACKGROUND_RGB, RaycastRenderer, lidar_scan

__all__ = ["ACTIVE_ROOM_LIGHTS", "BACKGROUND_RGB", "CULL_GROUP", "GLRenderer", "RaycastRenderer", "Renderer",
           "RoomPortals", "antialias", "frustum_visible", "lidar_scan", "make_renderer"]


@runtime_checkable
class Renderer(Protocol):
    """A camera renderer of the MuJoCo backend (``GLRenderer``, ``RaycastRenderer``)."""

    #: ``gl`` or ``raycast``
    name: str

    def render(self, data, position: np.ndarray, rotation: np.ndarray, width: int, height: int,
               hfov_deg: float, kinds: Iterable[str], cutoff: float = 100.0) -> dict[str, np.ndarray]:
        """Raw images ``kinds`` (of ``rgb``, ``depth``, ``geom``) of a camera at ``position`` whose
        ``rotation`` columns are (forward, left, up)."""

    def close(self) -> None:
        """Release what the renderer holds (GL contexts)."""


_WARNED = False


def make_renderer(choice: str, built: BuiltScene, model, antialias: bool = False, quality: str = "fast",
                  scene: Any = None) -> Renderer:
    """``choice`` = gl | raycast | auto. ``auto`` tries OpenGL and falls back to ray casting with a
    single warning per process; ``gl`` raises if no OpenGL context can be created. ``antialias``
    turns on 4× multisampling for GL RGB at ``fast``; ``quality`` is the render preset (see
    ``GLRenderer``)."""
    global _WARNED
    if choice == "raycast":
        return RaycastRenderer(built, model)
    if choice not in ("gl", "auto"):
        from ...core.errors import ConfigError

        raise ConfigError(f"got {choice!r}", field="renderer", expected="one of auto, gl, raycast")
    try:
        portals = RoomPortals(scene.rooms, scene.doors, model, built.floor_z) if scene is not None and scene.rooms \
            else None
        return GLRenderer(built, model, antialias, quality, portals)
    except Exception as exc:  # no EGL/OSMesa/PyOpenGL: any of several exception types
        if choice == "gl":
            from ...core.errors import VLNVerseError

            raise VLNVerseError(f"renderer 'gl': cannot create an OpenGL context ({type(exc).__name__}: {exc})") from None
        if not _WARNED:
            warnings.warn(f"vlnverse.sim: no OpenGL context ({type(exc).__name__}: {exc}); "
                          "using the mj_multiRay ray-cast renderer (flat-shaded RGB)", RuntimeWarning, stacklevel=3)
            _WARNED = True
        return RaycastRenderer(built, model)
