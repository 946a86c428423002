"""OpenGL camera rendering for the MuJoCo backend (``mujoco.Renderer`` through EGL or OSMesa): render
presets, room lights near the camera, culling (``culling``) and edge anti-aliasing (``antialias``).

Returns the raw images ``render.py`` documents (``rgb``, ``depth``, ``geom``).
"""
from __future__ import annotations

import functools
from typing import Iterable

import numpy as np

from ..sensors import vertical_fov_deg
from .builder import GROUP_AGENT, GROUP_COLLISION_ONLY, BuiltScene
from .culling import CULL_GROUP, RoomPortals, frustum_visible
from .gl import acquire_gl_context, import_mujoco, release_gl_context
from .raycast import _multiray_has_normal

_LUMA = np.array([0.299, 0.587, 0.114], np.float32)


def antialias(rgb: np.ndarray, threshold: float = 12.0, span: float = 48.0) -> np.ndarray:
    """Edge anti-aliasing in the spirit of FXAA on an (H, W, 3) uint8 image: pixels on a luma edge
    (central difference above ``threshold``) are blended, up to half-way, with their two
    neighbours *along* the edge, which softens staircases without blurring flat areas or texture
    detail below the threshold. About 1/10 of MSAA's cost on llvmpipe; border pixels are kept.
    Only edge pixels are computed (the others have weight 0 and are returned as they are)."""
    img = rgb.astype(np.float32)
    luma = img @ _LUMA
    gx = np.abs(luma[1:-1, 2:] - luma[1:-1, :-2])
    gy = np.abs(luma[2:, 1:-1] - luma[:-2, 1:-1])
    weight = np.maximum(gx, gy)
    ys, xs = np.nonzero(weight > threshold)
    out = rgb.copy()
    if not len(ys):
        return out
    w = weight[ys, xs]
    w -= threshold
    w *= 1.0 / span
    np.clip(w, 0.0, 0.5, out=w)
    y, x = ys + 1, xs + 1
    # along x for edges running horizontally (gy > gx), else along y
    blend = np.where((gy[ys, xs] <= gx[ys, xs])[:, None], img[y + 1, x] + img[y - 1, x], img[y, x + 1] + img[y, x - 1])
    blend *= 0.5
    centre = img[y, x]
    blend -= centre
    blend *= w[:, None]
    centre += blend
    centre += 0.5
    out[y, x] = centre.astype(np.uint8)
    return out


def _pooled_renderer(mj, model, height: int, width: int):
    """A ``mujoco.Renderer`` drawing in a GL context from ``gl.acquire_gl_context`` (reused across
    the scenes a process renders) instead of one made and destroyed with it; the model's GL
    resources (``MjrContext``) are its own, as with ``mujoco.Renderer``."""
    ctx = acquire_gl_context()
    if ctx is None:
        return mj.Renderer(model, height=height, width=width)  # no GL platform: mujoco's own error
    return _pooled_renderer_class(mj.Renderer)(mj, model, height, width, ctx)


#: Model GL resources whose context could not be made current to free them (``close`` from another
#: thread than the one that last drew): kept so that nothing frees them in the wrong context.
_UNFREED: list = []


@functools.lru_cache(maxsize=None)
def _pooled_renderer_class(base: type) -> type:
    """``base`` (``mujoco.Renderer``, ``mujoco.rendering.classic``) with a context it borrows:
    ``__init__`` does what mujoco's does with ``ctx`` in place of a new context; ``close`` frees
    the model's GL resources in it and gives it back."""

    def __init__(self, mj, model, height: int, width: int, ctx) -> None:
        self._gl_context, self._mjr_context = None, None
        self._width, self._height, self._model = width, height, model
        self._scene = mj.MjvScene(model=model, maxgeom=10000)
        self._scene_option = mj.MjvOption()
        self._rect = mj.MjrRect(0, 0, width, height)
        self._gl_context = ctx
        ctx.make_current()
        self._mjr_context = mj.MjrContext(model, mj.mjtFontScale.mjFONTSCALE_150.value)
        mj.mjr_setBuffer(mj.mjtFramebuffer.mjFB_OFFSCREEN.value, self._mjr_context)
        self._mjr_context.readDepthMap = mj.mjtDepthMap.mjDEPTH_ZEROFAR
        self._depth_rendering = False
        self._segmentation_rendering = False

    def close(self) -> None:
        ctx = self._gl_context
        if self._mjr_context is not None:
            if ctx is not None:
                try:
                    ctx.make_current()  # the model's GL objects are freed in their own context
                except Exception:  # current in another thread: kept, never freed from this one
                    _UNFREED.append((self._mjr_context, ctx))
                    self._mjr_context = self._gl_context = None
                    raise
            self._mjr_context.free()
            self._mjr_context = None
        self._gl_context = None
        if ctx is not None:
            release_gl_context(ctx)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # at interpreter exit EGL's display is already gone: the process frees it all
            pass

    return type("PooledRenderer", (base,), {"__init__": __init__, "close": close, "__del__": __del__,
                                            "__doc__": _pooled_renderer_class.__doc__})


#: Room lights switched on around the camera (nearest first); the others are off for that frame.
ACTIVE_ROOM_LIGHTS = 2


class GLRenderer:
    """Offscreen OpenGL rendering with one ``mujoco.Renderer`` (GL context, model resources and
    offscreen buffer) per multisampling setting, drawing any image size up to its buffer; RGB,
    depth and segmentation of one camera pose share one scene update.

    ``quality``: ``fast`` (no shadows, reflections or anti-aliasing), ``default`` (edge
    anti-aliasing by ``antialias``: 4× MSAA would cost more than half the frame rate on llvmpipe),
    ``high`` (8× MSAA, shadows, reflections). With MSAA, depth and segmentation come from a
    second context without multisampling, so they are identical at every preset. Only the
    ``ACTIVE_ROOM_LIGHTS`` room lights nearest the camera are on in a frame (fixed cost per frame
    whatever the number of rooms).

    Depth of a view with window glass in it (``glass_depth``): ``glass`` (default) keeps the RGB
    pass's depth buffer (which has every opaque geom but no glass) and draws only the glass in a
    second, depth-only pass, keeping the nearer of the two per pixel; ``full`` redraws the whole
    view for depth. Both give the same bytes (depth testing keeps the nearest fragment either
    way; tests compare them); ``glass`` draws a few geoms instead of the view again.
    """

    name = "gl"
    #: see the class docstring: ``glass`` | ``full`` (the reference the tests compare against)
    glass_depth = "glass"

    def __init__(self, built: BuiltScene, model, antialias: bool = False, quality: str = "fast",
                 portals: RoomPortals | None = None):
        self._mj = import_mujoco()
        self._portals = portals if portals is not None and portals.useful else None
        self._has_normal = _multiray_has_normal()
        self._built = built
        self._model = model
        self.quality = quality
        # MSAA costs ~35 % of the frame time on llvmpipe and would blend depth/ids across edges:
        # only the RGB context gets it.
        self._samples = 8 if quality == "high" else 4 if antialias else 0
        self._post_aa = quality == "default" and not antialias
        from .looks import ROOM_LIGHT_PREFIX, shadowless_geoms

        # window glass lets the sun through: left out of the shadow maps (only ``high`` has them)
        self._shadowless = shadowless_geoms(model) if quality == "high" else np.zeros(0, np.int64)

        names = [model.light(i).name for i in range(model.nlight)]
        self._room_lights = np.array([i for i, n in enumerate(names) if n.startswith(ROOM_LIGHT_PREFIX)], int)
        self._room_light_pos = np.asarray(model.light_pos)[self._room_lights].copy() if len(self._room_lights) else None
        self._renderers: dict[bool, object] = {}  # by multisampling (MSAA RGB or not)
        # Frustum culling: geoms whose bounding sphere lies outside the view move to a hidden
        # group for the draw (rendering cost follows the geoms drawn, not the scene size).
        self._group = np.asarray(model.geom_group).copy()
        self._cullable = (np.asarray(model.geom_rbound) > 0) & (self._group != GROUP_AGENT)
        # Geoms drawn see-through in RGB (alpha < 1, own or material's): with one in a view, depth
        # needs its own pass (the RGB pass does not write glass into the depth buffer).
        matid = np.asarray(model.geom_matid)
        mat_alpha = np.asarray(model.mat_rgba)[np.maximum(matid, 0), 3] if model.nmat else np.ones(model.ngeom)
        self._transparent = (np.asarray(model.geom_rgba)[:, 3] < 1) | ((matid >= 0) & (mat_alpha < 1))
        self._transparent &= self._group != GROUP_AGENT
        self._option = self._mj.MjvOption()
        self._option.geomgroup[:] = 1
        self._option.geomgroup[GROUP_AGENT] = 0
        self._option.geomgroup[GROUP_COLLISION_ONLY] = 0  # drawn by their render meshes
        self._option.geomgroup[CULL_GROUP] = 0
        self._option.sitegroup[:] = 0
        self.render_calls = 0
        #: Geoms handed to OpenGL for the last frame (after culling): what rendering cost follows.
        self.last_drawn = 0
        self._renderer(16, 16, True)  # fail now (no GL context) rather than at the first observation

    def _renderer(self, width: int, height: int, rgb: bool):
        """The ``mujoco.Renderer`` for RGB (``rgb``) or depth / segmentation, set to draw
        ``width`` × ``height``. One per multisampling setting, shared by every image size: a GL
        context and the model's GL resources cost ~0.2 s to make (per scene), and drawing into
        the lower-left ``width`` × ``height`` of a larger offscreen buffer gives the same pixels
        as a buffer of that size (the viewport is the image). A request larger than the buffer
        makes a new one."""
        key = rgb and self._samples > 0
        r = self._renderers.get(key)
        vis = self._model.vis.global_
        if r is None or width > int(vis.offwidth) or height > int(vis.offheight):
            if r is not None:
                r.close()
            vis.offwidth = max(int(vis.offwidth), width)
            vis.offheight = max(int(vis.offheight), height)
            self._model.vis.quality.offsamples = self._samples if key else 0
            r = _pooled_renderer(self._mj, self._model, height, width)
            flags = r.scene.flags
            high = self.quality == "high" and key
            flags[self._mj.mjtRndFlag.mjRND_SHADOW] = int(high)
            flags[self._mj.mjtRndFlag.mjRND_REFLECTION] = int(high)
            flags[self._mj.mjtRndFlag.mjRND_SKYBOX] = 0
            self._renderers[key] = r
        if (r.width, r.height) != (width, height):  # the size this draw reads (see ``mujoco.Renderer.render``)
            r._width, r._height, r._rect = width, height, self._mj.MjrRect(0, 0, width, height)
        return r

    def _light_rooms_near(self, position: np.ndarray) -> None:
        """Switch on the room lights nearest ``position`` and off the rest."""
        if self._room_light_pos is None:
            return
        d = np.linalg.norm(self._room_light_pos[:, :2] - position[:2], axis=1)
        on = np.zeros(len(d), bool)
        on[np.argsort(d, kind="stable")[:ACTIVE_ROOM_LIGHTS]] = True
        self._model.light_active[self._room_lights] = on

    def _place_camera(self, data, position: np.ndarray, rotation: np.ndarray) -> None:
        """Put the render camera at ``position`` with ``rotation`` columns (forward, left, up)."""
        cam = self._built.camera
        forward, left, up = rotation[:, 0], rotation[:, 1], rotation[:, 2]
        data.cam_xpos[cam] = position
        data.cam_xmat[cam] = np.stack([-left, up, -forward], axis=1).reshape(9)

    def _hidden(self, data, position: np.ndarray, rotation: np.ndarray, hfov_deg: float, vfov: float,
                place_movable: bool = True) -> np.ndarray:
        """Geoms not to draw for one view: outside the frustum, or in rooms it cannot see into
        (movable objects placed in rooms from ``data`` unless ``place_movable`` is False)."""
        visible = frustum_visible(data.geom_xpos, self._model.geom_rbound, position, rotation, hfov_deg, vfov)
        hidden = self._cullable & ~visible
        if self._portals is not None:  # rooms seen through no door in view
            behind_walls = self._portals.hidden_geoms(position, rotation, hfov_deg, vfov,
                                                      data.geom_xpos if place_movable else None)
            if behind_walls is not None:
                hidden |= self._cullable & behind_walls
        return hidden

    def _update(self, renderer, data, hidden: np.ndarray, rgb: bool = False) -> None:
        """``renderer``'s scene from ``data`` without the ``hidden`` geoms; for RGB (``rgb``),
        window glass is left out of the shadow maps (``high``)."""
        groups = self._model.geom_group
        groups[hidden] = CULL_GROUP
        try:
            renderer.update_scene(data, camera=self._built.camera, scene_option=self._option)
        finally:
            groups[:] = self._group
        if rgb and len(self._shadowless):
            from .looks import mark_shadowless

            mark_shadowless(renderer.scene, self._shadowless)
        self.last_drawn = int(renderer.scene.ngeom)

    def _read(self, rgb_renderer, aux_renderer, kinds: set, out: dict, hidden: np.ndarray, data) -> None:
        """Render the updated scenes and read ``kinds`` into ``out``. When RGB and depth come
        from the same context, depth is read from the RGB pass's depth buffer (the same values
        as a depth pass: checked equal), with the window glass in view (``hidden`` = the culled
        geoms) drawn over it in a glass-only depth pass (``glass_depth``)."""
        if "rgb" in kinds:
            out["rgb"] = antialias(rgb_renderer.render()) if self._post_aa else rgb_renderer.render()
        r = aux_renderer
        shared = "depth" in kinds and "rgb" in kinds and r is rgb_renderer
        glass = self._transparent & ~hidden if shared else None
        if shared and not glass.any():
            out["depth"] = self._depth_buffer(r)
        elif shared and self.glass_depth == "glass":
            opaque, drawn = self._depth_raw(r), self.last_drawn
            self._update(r, data, ~glass)  # the glass alone
            flags = r.scene.flags
            saved = flags.copy()
            flags[self._mj.mjtRndFlag.mjRND_SEGMENT] = 1  # as ``mujoco.Renderer`` draws depth: glass opaque
            flags[self._mj.mjtRndFlag.mjRND_IDCOLOR] = 1
            try:
                r._gl_context.make_current()
                self._mj.mjr_render(r._rect, r.scene, r._mjr_context)
            finally:
                flags[:] = saved
            # reversed Z (``mjDEPTH_ZEROFAR``): the nearer fragment has the larger buffer value
            out["depth"] = self._depth_metres(np.maximum(opaque, self._depth_raw(r)))
            if "geom" in kinds:  # the whole view again for segmentation
                self._update(r, data, hidden)
            self.last_drawn = drawn
        elif "depth" in kinds:
            r.enable_depth_rendering()
            depth = r.render()
            r.disable_depth_rendering()
            far = self._model.vis.map.zfar * self._model.stat.extent
            depth[depth >= far * 0.999] = np.inf
            out["depth"] = depth
        if "geom" in kinds:
            r.enable_segmentation_rendering()
            seg = r.render()
            r.disable_segmentation_rendering()
            out["geom"] = np.where(seg[..., 1] == int(self._mj.mjtObj.mjOBJ_GEOM), seg[..., 0], -1).astype(np.int32)

    def _depth_raw(self, renderer) -> np.ndarray:
        """The depth buffer of ``renderer``'s last render (reversed Z, float32, rows bottom up)."""
        buf = np.empty((renderer.height, renderer.width), np.float32)
        renderer._gl_context.make_current()
        self._mj.mjr_readPixels(None, buf, renderer._rect, renderer._mjr_context)
        return buf

    def _depth_buffer(self, renderer) -> np.ndarray:
        """Planar depth (m, ``inf`` beyond the far plane) from the depth buffer of ``renderer``'s
        last render, converted exactly as ``mujoco.Renderer`` converts a depth render."""
        return self._depth_metres(self._depth_raw(renderer))

    def _depth_metres(self, buf: np.ndarray) -> np.ndarray:
        """``_depth_buffer``'s conversion of a raw depth buffer ``buf``."""
        m = self._model
        extent = m.stat.extent
        znear, zfar = np.float32(m.vis.map.znear * extent), np.float32(m.vis.map.zfar * extent)
        c_coef = -(zfar + znear) / (zfar - znear)
        d_coef = -(np.float32(2) * zfar * znear) / (zfar - znear)
        c_coef = np.float32(-0.5) * c_coef - np.float32(0.5)  # reversed Z, as mujoco.Renderer
        d_coef = np.float32(-0.5) * d_coef
        depth = np.flipud((d_coef / (buf.astype(np.float64) + c_coef)).astype(np.float32))
        depth[depth >= m.vis.map.zfar * extent * 0.999] = np.inf
        return depth

    def render(self, data, position: np.ndarray, rotation: np.ndarray, width: int, height: int,
               hfov_deg: float, kinds: Iterable[str], cutoff: float = 100.0) -> dict[str, np.ndarray]:
        """Raw images of ``kinds`` (subset of rgb, depth, geom); see ``RaycastRenderer.render``."""
        kinds = set(kinds)
        self._place_camera(data, position, rotation)
        vfov = vertical_fov_deg(width, height, hfov_deg)
        self._model.cam_fovy[self._built.camera] = vfov
        self.render_calls += 1
        out: dict[str, np.ndarray] = {}
        hidden = self._hidden(data, position, rotation, hfov_deg, vfov)
        rgb_r = aux_r = None
        if "rgb" in kinds:
            self._light_rooms_near(position)
            rgb_r = self._renderer(width, height, True)
            # with shadows (``high``), geoms out of view still cast into it: draw them all
            self._update(rgb_r, data, hidden if self.quality != "high" else np.zeros_like(hidden), rgb=True)
        if kinds - {"rgb"}:
            aux_r = self._renderer(width, height, False)
            if aux_r is not rgb_r:
                self._update(aux_r, data, hidden)
        self._read(rgb_r, aux_r, kinds, out, hidden, data)
        return out

    def render_views(self, data, position: np.ndarray, rotations, width: int, height: int, hfov_deg: float,
                     kinds: Iterable[str]) -> list[dict[str, np.ndarray]]:
        """Raw images of ``kinds`` from several cameras at one ``position`` (a panorama), equal to
        ``render``'s for each view. What depends on the position only is done once (room
        lights, the camera's room, movable objects' rooms); per view only the culling of that
        view and the scene update that draws just its geoms. (One scene update shared by all
        views, moving only the camera, gave the same images but drew the union of the views'
        geoms in every view: 4.8 against 5.7 panoramas/s measured interleaved.)"""
        kinds = set(kinds)
        if self.quality == "high" or not rotations:  # shadows: every view draws everything anyway
            return [self.render(data, position, rot, width, height, hfov_deg, kinds) for rot in rotations]
        m, cam = self._model, self._built.camera
        vfov = vertical_fov_deg(width, height, hfov_deg)
        m.cam_fovy[cam] = vfov
        rgb_r = self._renderer(width, height, True) if "rgb" in kinds else None
        aux_r = self._renderer(width, height, False) if kinds - {"rgb"} else None
        if rgb_r is not None:
            self._light_rooms_near(position)
        renderers = [r for r in (rgb_r, aux_r) if r is not None]
        if len(renderers) == 2 and renderers[0] is renderers[1]:
            renderers.pop()
        views = []
        for i, rot in enumerate(rotations):
            self.render_calls += 1
            self._place_camera(data, position, rot)
            hidden = self._hidden(data, position, rot, hfov_deg, vfov, place_movable=i == 0)
            for r in renderers:
                self._update(r, data, hidden, rgb=r is rgb_r)
            out: dict[str, np.ndarray] = {}
            self._read(rgb_r, aux_r, kinds, out, hidden, data)
            views.append(out)
        return views

    def close(self) -> None:
        """Close every ``mujoco.Renderer`` (OSMesa complains at exit otherwise)."""
        for r in self._renderers.values():
            r.close()
        self._renderers.clear()
