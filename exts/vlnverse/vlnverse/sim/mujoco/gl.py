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
