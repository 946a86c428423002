"""Renderer/GL platform selection, the one-time fallback warning, cheap imports, velocity bookkeeping."""
from __future__ import annotations

import subprocess
import sys
import warnings

import pytest

from vlnverse.core.errors import VLNVerseError
from vlnverse.sim import VelocityAction, make_sensor, make_simulator
from vlnverse.sim.mujoco import gl, render


def test_gl_platform_prefers_explicit_then_egl_then_osmesa(monkeypatch):
    monkeypatch.setenv("MUJOCO_GL", "osmesa")
    assert gl.choose_gl_platform() == "osmesa"
    monkeypatch.delenv("MUJOCO_GL")
    libs = {"EGL": "libEGL.so.1", "OSMesa": "libOSMesa.so.8"}
    monkeypatch.setattr(gl.ctypes.util, "find_library", lambda name: libs.get(name))
    assert gl.choose_gl_platform() == "egl"
    libs.pop("EGL")
    assert gl.choose_gl_platform() == "osmesa"
    libs.clear()
    assert gl.choose_gl_platform() == "egl"  # fails later and falls back to ray casting


def test_no_gl_falls_back_to_raycast_with_one_warning(room, monkeypatch):
    def no_context(self, *args, **kwargs):
        raise RuntimeError("no EGL display")

    monkeypatch.setattr(render.GLRenderer, "__init__", no_context)
    monkeypatch.setattr(render, "_WARNED", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sims = [make_simulator(room, "r2r_ce", sensors=[make_sensor("rgb", width=16, height=16)]) for _ in range(2)]
    fallback = [w for w in caught if "ray-cast" in str(w.message)]
    assert len(fallback) == 1
    for sim in sims:
        assert sim.renderer_name == "raycast"
        assert sim.reset((3.0, 3.0, 0.0))["rgb"].shape == (16, 16, 3)
        sim.close()
    with pytest.raises(VLNVerseError, match="renderer 'gl'"):
        make_simulator(room, "r2r_ce", sensors=[], renderer="gl")


def test_importing_the_sim_package_does_not_import_mujoco():
    code = "import sys, vlnverse.sim; print('mujoco' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stdout + out.stderr


def test_velocity_arc_in_free_space_matches_its_commanded_pose(room):
    with make_simulator(room, "r2r_ce", sensors=[], renderer="raycast") as sim:
        sim.reset((2.0, 2.0, 0.0))
        _, result = sim.step(VelocityAction(v=0.5, omega=0.6, duration=1.5))
        assert not result.collided
        assert result.obstacle_displacement < 0.01
        assert abs(result.commanded_pose.yaw - result.achieved_pose.yaw) < 0.01
        assert result.physics_steps == 300  # 1.5 s at 200 Hz
        assert sim.time == pytest.approx(1.5)
