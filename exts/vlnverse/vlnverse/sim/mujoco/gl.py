"""Choose the OpenGL platform before MuJoCo is imported, and import MuJoCo through here.

Order: an explicit ``MUJOCO_GL`` wins; otherwise EGL when ``libEGL`` is present, then OSMesa when
``libOSMesa`` is, else EGL (renderer creation then fails and the backend falls back to the
ray-cast renderer with one warning).
"""
from __future__ import annotations

import ctypes.util
import os
import sys


def choose_gl_platform() -> str:
    """The ``MUJOCO_GL`` value to use on this machine (does not override an explicit setting)."""
    explicit = os.environ.get("MUJOCO_GL")
    if explicit:
        return explicit
    if ctypes.util.find_library("EGL"):
        return "egl"
    if ctypes.util.find_library("OSMesa"):
        return "osmesa"
    return "egl"


def import_mujoco():
    """Import and return the ``mujoco`` module with ``MUJOCO_GL`` set first."""
    if "mujoco" not in sys.modules:
        os.environ.setdefault("MUJOCO_GL", choose_gl_platform())
    import mujoco

    return mujoco


#: GL contexts no renderer holds, by (process, thread) that gave them back (``acquire_gl_context``).
_IDLE_CONTEXTS: dict[tuple[int, int], list] = {}


def acquire_gl_context():
    """An offscreen GL context for one renderer's exclusive use, made current; give it back with
    ``release_gl_context`` when the renderer closes. A context given back by this thread is reused
    (a worker rendering scene after scene sets GL up once: llvmpipe compiles its shader variants
    per context, ~0.3-0.4 s a scene; ``tests/sim/test_gl_setup.py``), else a new one is made.
    None when MuJoCo has no GL platform (``mujoco.gl_context.GLContext`` is None)."""
    import threading

    import_mujoco()
    from mujoco import gl_context

    idle = _IDLE_CONTEXTS.get((os.getpid(), threading.get_ident()), [])
    while idle:
        ctx = idle.pop()
        try:
            ctx.make_current()
            return ctx
        except Exception:  # noqa: BLE001 - still current in another thread (EGL_BAD_ACCESS): a new one
            continue
    if gl_context.GLContext is None:
        return None
    ctx = _pooled_class(gl_context.GLContext)(16, 16)  # the offscreen buffers are the model contexts'
    ctx.make_current()
    return ctx


def release_gl_context(ctx) -> None:
    """Give back a context from ``acquire_gl_context`` (its model resources freed) for reuse by
    later renderers of this thread."""
    import threading

    _IDLE_CONTEXTS.setdefault((os.getpid(), threading.get_ident()), []).append(ctx)


def _pooled_class(cls):
    """``cls`` without a finaliser: a pooled context lives as long as the process (freeing it at
    interpreter exit, before a renderer still holding it, would leave that renderer no context)."""
    sub = _POOLED.get(cls)
    if sub is None:
        sub = _POOLED[cls] = type(f"Pooled{cls.__name__}", (cls,), {"__del__": lambda self: None})
    return sub


_POOLED: dict = {}
