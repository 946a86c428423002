"""The backend contract: the same physics and sensor tests, parametrised by backend.

MuJoCo runs everywhere (CI); Isaac Sim runs wherever ``isaacsim`` imports and exposes ``SimulationApp``
(``adapter.isaacsim_unusable_reason``) and is skipped otherwise with that reason. Where Kit itself
cannot start (the Isaac Sim 6.2 pip wheels without the placeholder ``isaacsim-extscache-kit``), each
Isaac test fails with the backend's one-line ``BackendError`` carrying Kit's reason. Both run the shared controller/sensor-rate/collision-mode code
(``vlnverse.sim.physics``, ``vlnverse.run.modes``), so a difference here is an engine difference.
Scene: the ``room`` fixture (6 m × 6 m, inner wall faces at 0 and 6, east wall instance 2; a 1 kg
crate at (2, 4.5), a 500 kg safe at (4, 4.5), both 0.5 m cubes).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from vlnverse.run.modes import make_mode
from vlnverse.sim import CameraSpec, DiscreteAction, PanoramaSpec, VelocityAction, make_simulator
from vlnverse.sim.isaac.adapter import isaacsim_unusable_reason

_ISAAC_UNUSABLE = isaacsim_unusable_reason()
BACKENDS = ["mujoco", pytest.param("isaac", marks=[pytest.mark.isaac, pytest.mark.skipif(
    _ISAAC_UNUSABLE is not None, reason=str(_ISAAC_UNUSABLE))])]


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


def _make(backend, scene, sensors=(), body="r2r_ce"):
    options = {"renderer": "raycast"} if backend == "mujoco" else {}
    return make_simulator(scene, body, sensors=list(sensors), backend=backend, **options)


def test_forward_moves_a_quarter_metre(room, backend):
    with _make(backend, room) as sim:
        sim.reset((1.0, 1.0, 0.0))
        _, r = sim.step(DiscreteAction.MOVE_FORWARD)
        assert r.success and not r.collided
        assert sim.pose.x - 1.0 == pytest.approx(0.25, abs=0.005) and abs(sim.pose.y - 1.0) < 0.005


def test_turn_left_turns_fifteen_degrees(room, backend):
    with _make(backend, room) as sim:
        sim.reset((3.0, 2.0, 0.0))
        _, r = sim.step(DiscreteAction.TURN_LEFT)
        assert r.success and math.degrees(sim.pose.yaw) == pytest.approx(15.0, abs=0.5)


def test_wall_contact_stops_the_agent(room, backend):
    with _make(backend, room) as sim:
        radius = sim.body.radius
        sim.reset((5.4, 2.0, 0.0))
        results = [sim.step(DiscreteAction.MOVE_FORWARD)[1] for _ in range(4)]
        assert sim.pose.x <= 6.0 - radius + 0.01
        hit = [r for r in results if r.collided]
        assert hit and {c.label for c in hit[-1].contacts} == {"wall"} and hit[-1].contacts[0].instance_id == 2


def test_strict_mode_fails_an_episode_displaced_by_a_heavy_obstacle(room, backend):
    with _make(backend, room) as sim:
        sim.reset((4.0, 3.6, math.pi / 2))  # the 500 kg safe's face is at y = 4.25
        mode = make_mode("strict", sim)
        outcomes = [mode.step(DiscreteAction.MOVE_FORWARD) for _ in range(3)]
        failed = [o for o in outcomes if o.failure]
        assert failed and failed[0].displacement >= 0.1 and "displaced" in failed[0].failure
        assert any("safe" in {c["label"] for c in o.contacts} for o in outcomes)


def test_depth_and_semantic_label_of_the_wall_two_metres_ahead(room, backend):
    depth = CameraSpec("depth", "depth", 32, 24, 90.0)
    sem = CameraSpec("semantic", "semantic", 32, 24, 90.0)
    with _make(backend, room, [depth, sem]) as sim:
        obs = sim.reset((4.0, 3.0, 0.0))
        assert obs["depth"][12, 16] == pytest.approx(2.0, abs=0.02)
        assert sim.semantic_labels[obs["semantic"][12, 16]] == "wall"


def test_teleport_out_of_an_obstacle(room, backend):
    with _make(backend, room) as sim:
        sim.reset((1.0, 1.0, 0.0))
        r = sim.teleport((2.0, 4.5, 0.0))  # the crate's centre
        assert r.collided and "crate" in {c.label for c in r.contacts}
        half, radius = 0.25, sim.body.radius
        dx, dy = abs(sim.pose.x - 2.0), abs(sim.pose.y - 4.5)
        assert max(dx - half, 0.0) ** 2 + max(dy - half, 0.0) ** 2 >= (radius - 0.01) ** 2  # outside the crate
        assert r.obstacle_displacement < radius + half + 0.05


def test_sensor_rate_renders_one_frame_per_period(room, backend):
    spec = CameraSpec("depth", "depth", 16, 16, 90.0, rate_hz=5.0)
    with _make(backend, room, [spec]) as sim:
        sim.reset((1.0, 3.0, 0.0))
        for _ in range(20):  # 20 ticks of 20 ms
            sim.step(VelocityAction(v=0.5, omega=0.0, duration=0.02))
        assert sim.render_counts["depth"] == 3


def test_panorama_views_turn_counter_clockwise(room, backend):
    pano = PanoramaSpec.of("pano", views=4, width=16, height=16, modalities=("depth",))
    with _make(backend, room, [pano]) as sim:
        obs = sim.reset((4.0, 3.0, 0.0))
        centre = obs["pano_depth"][:, 8, 8]
        # view i faces i × 90° CCW from east: east wall 2 m, north 3 m, west 4 m, south 3 m
        assert centre == pytest.approx(np.array([2.0, 3.0, 4.0, 3.0]), abs=0.03)
