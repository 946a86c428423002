"""Fixtures for the simulator tests: hand-built rooms and an OpenGL probe (``gl`` tests skip without it)."""
from __future__ import annotations

import pytest

from vlnverse.sim.demo import BoxObject, room_scene


@pytest.fixture(scope="session")
def gl_context():
    """Skip the test unless MuJoCo can create an offscreen OpenGL context (EGL or OSMesa)."""
    try:
        from vlnverse.sim.mujoco.gl import import_mujoco

        mujoco = import_mujoco()
        model = mujoco.MjModel.from_xml_string("<mujoco><worldbody><geom size='1'/></worldbody></mujoco>")
        renderer = mujoco.Renderer(model, 8, 8)
        renderer.close()
    except Exception as exc:  # any GL/EGL/OSMesa failure means "no GL here"
        pytest.skip(f"no OpenGL context: {type(exc).__name__}: {exc}")
    return True


@pytest.fixture(scope="session")
def room():
    """A 6 m × 6 m room (inner wall faces at x=0, x=6, y=0, y=6; east wall instance id 2) with a
    1 kg crate centred at (2, 4.5) and a 500 kg safe centred at (4, 4.5), both 0.5 m cubes."""
    return room_scene(6.0, 6.0, objects=[
        BoxObject("crate", (2.0, 4.5, 0.25), (0.25, 0.25, 0.25), mass=1.0, color=(0.8, 0.6, 0.3)),
        BoxObject("safe", (4.0, 4.5, 0.25), (0.25, 0.25, 0.25), mass=500.0, color=(0.3, 0.3, 0.3)),
    ])
