"""Agent motion through physics: discrete steps, walls, sliding, pushing, drive types, teleports."""
from __future__ import annotations

import math

import numpy as np
import pytest

from vlnverse.sim import (AgentPose, ControlConfig, DiscreteAction, InvalidActionError, VelocityAction, WaypointAction,
                          make_simulator)

RADIUS = 0.18  # r2r_ce


@pytest.fixture()
def sim(room):
    s = make_simulator(room, "r2r_ce", sensors=[], renderer="raycast")
    yield s
    s.close()


def test_forward_in_free_space_moves_a_quarter_metre(sim):
    sim.reset((1.0, 2.0, 0.3))
    _, result = sim.step(DiscreteAction.MOVE_FORWARD)
    moved = sim.pose.distance_to(AgentPose(1.0, 2.0))
    assert moved == pytest.approx(0.25, abs=0.02)
    heading = math.atan2(sim.pose.y - 2.0, sim.pose.x - 1.0)
    assert heading == pytest.approx(0.3, abs=0.01)
    assert not result.collided and result.success
    assert result.obstacle_displacement < 0.02
    assert 20 <= result.physics_steps <= 400


@pytest.mark.parametrize("action,sign", [(DiscreteAction.TURN_LEFT, 1.0), (DiscreteAction.TURN_RIGHT, -1.0)])
def test_turn_turns_fifteen_degrees(sim, action, sign):
    sim.reset((3.0, 2.0, 0.0))
    _, result = sim.step(action)
    assert math.degrees(sim.pose.yaw) == pytest.approx(sign * 15.0, abs=1.0)
    assert sim.pose.distance_to(AgentPose(3.0, 2.0)) < 0.01
    assert result.success and not result.collided


def test_turn_angle_and_forward_step_are_configurable(room):
    with make_simulator(room, "r2r_ce", sensors=[], renderer="raycast",
                        control=ControlConfig(turn_angle_deg=30.0, forward_step=0.5)) as s:
        s.reset((1.0, 1.0, 0.0))
        s.step("TURN_LEFT")
        assert math.degrees(s.pose.yaw) == pytest.approx(30.0, abs=1.0)
        s.step("MOVE_FORWARD")
        assert s.pose.distance_to(AgentPose(1.0, 1.0)) == pytest.approx(0.5, abs=0.02)


def test_forward_into_wall_stops_before_it_and_reports_the_wall(sim):
    sim.reset((5.3, 2.0, 0.0))  # east wall inner face at x = 6
    results = [sim.step(DiscreteAction.MOVE_FORWARD)[1] for _ in range(4)]
    assert 6.0 - sim.pose.x >= RADIUS - 0.01
    assert 6.0 - sim.pose.x < RADIUS + 0.01  # it did reach the wall
    blocked = [r for r in results if r.collided]
    assert blocked, "driving into the wall must report a collision"
    assert {c.label for c in blocked[-1].contacts} == {"wall"}
    assert blocked[-1].contacts[0].instance_id == 2  # wall_east
    assert not blocked[-1].success and "stalled" in blocked[-1].message
    assert blocked[-1].obstacle_displacement > 0.2  # the wall held it ~0.25 m short of the command
    assert all(r.obstacle_displacement < 0.02 for r in results if not r.collided)


def test_diagonal_push_slides_along_frictionless_wall(sim):
    sim.reset((5.75, 1.0, math.radians(45.0)))
    _, result = sim.step(VelocityAction(v=0.6, omega=0.0, duration=1.5))
    assert result.collided and {c.label for c in result.contacts} == {"wall"}
    assert 6.0 - sim.pose.x >= RADIUS - 0.01
    # Without the wall the agent would have gained ~0.6 m in y; sliding keeps most of that component.
    assert sim.pose.y - 1.0 > 0.45


def test_light_object_is_pushed_heavy_object_is_not(room):
    with make_simulator(room, "r2r_ce", sensors=[], renderer="raycast") as s:
        s.reset((2.0, 3.5, math.pi / 2))  # crate (1 kg) 1 m ahead
        start = s.object_positions()
        crate_id, safe_id = (o.instance_id for o in room.objects)
        for _ in range(6):
            _, r = s.step("MOVE_FORWARD")
        pushed = s.object_positions()[crate_id] - start[crate_id]
        assert pushed[1] > 0.3, f"a 40 kg agent should push a 1 kg crate, moved {pushed}"
        s.reset((4.0, 3.5, math.pi / 2))  # safe (500 kg) 1 m ahead
        results = [s.step("MOVE_FORWARD")[1] for _ in range(6)]
        moved = np.linalg.norm(s.object_positions()[safe_id][:2] - start[safe_id][:2])
        assert moved < 0.01, f"a 500 kg safe must not be pushed aside, moved {moved:.3f} m"
        assert any("safe" in {c.label for c in r.contacts} for r in results)
        assert s.pose.y <= 4.25 - RADIUS + 0.01  # stopped at the safe's face


def test_differential_drive_never_moves_sideways(room):
    with make_simulator(room, "turtlebot4", sensors=[], renderer="raycast") as s:
        s.reset((2.0, 2.0, 0.0))
        _, result = s.step(WaypointAction(dx=0.0, dy=0.6, dyaw=0.0, timeout=20.0))
        assert result.success, result.message
        assert s.pose.distance_to(AgentPose(2.0, 2.6)) < 0.02
        traj = result.trajectory
        step = np.diff(traj[:, :2], axis=0)
        yaw = (traj[1:, 2] + traj[:-1, 2]) / 2
        sideways = -np.sin(yaw) * step[:, 0] + np.cos(yaw) * step[:, 1]
        assert np.abs(sideways).max() < 1e-3, "a differential-drive base must not slide sideways"
        with pytest.raises(InvalidActionError, match="differential"):
            s.step(VelocityAction(v=0.0, omega=0.0, duration=0.5, lateral=0.2))


def test_holonomic_waypoint_reaches_relative_pose(sim):
    sim.reset((2.0, 2.0, 0.0))
    _, result = sim.step(WaypointAction(dx=1.0, dy=0.5, dyaw=math.radians(90), timeout=10.0))
    assert result.success, result.message
    assert sim.pose.distance_to(AgentPose(3.0, 2.5)) < 0.02
    assert math.degrees(sim.pose.yaw) == pytest.approx(90.0, abs=1.0)


def test_velocity_command_is_clipped_to_body_limits(sim):
    sim.reset((1.0, 3.0, 0.0))
    _, result = sim.step(VelocityAction(v=10.0, omega=0.0, duration=2.0))
    # r2r_ce: max 1 m/s reached after 0.5 s at 2 m/s²: 0.25 + 1.5 = 1.75 m at most.
    assert sim.pose.x - 1.0 == pytest.approx(1.75, abs=0.05)
    assert "clipped" in result.message
    # free space: only motor lag separates achieved from commanded (3.0 cm on MuJoCo 4.0, 3.1 cm
    # on 3.3), far below the 0.1 m Strict threshold
    assert result.obstacle_displacement < 0.04


def test_look_actions_tilt_camera_and_clamp(sim):
    sim.reset((3.0, 3.0, 0.0))
    sim.step(DiscreteAction.LOOK_DOWN)
    assert math.degrees(sim.pose.pitch) == pytest.approx(-15.0, abs=1e-6)
    for _ in range(6):
        _, result = sim.step(DiscreteAction.LOOK_UP)
    assert math.degrees(sim.pose.pitch) == pytest.approx(60.0, abs=1e-6)  # r2r_ce pitch_max_deg
    assert "limit" in result.message
    assert sim.pose.distance_to(AgentPose(3.0, 3.0)) < 1e-3


def test_teleport_into_box_resolves_to_nearest_free_pose_with_warning(room):
    with make_simulator(room, "r2r_ce", sensors=[], renderer="raycast") as s:
        with pytest.warns(RuntimeWarning, match="nearest free pose"):
            s.reset((4.1, 4.5, 0.0))  # inside the safe (x in [3.75, 4.25])
        # Nearest free centre: the safe's east face (4.25) + radius = 4.43, i.e. 0.33 m away.
        assert s.pose.x == pytest.approx(4.25 + RADIUS, abs=0.003)
        assert s.pose.y == pytest.approx(4.5, abs=1e-6)
        result = s.teleport((2.0, 4.4, 0.0))  # inside the crate: reported, no warning needed
        assert result.collided and {c.label for c in result.contacts} == {"crate"}
        assert result.obstacle_displacement == pytest.approx(0.25 + RADIUS - 0.1, abs=0.003)
        free = s.teleport((1.0, 1.0, 0.0))
        assert not free.collided and free.obstacle_displacement == 0.0


def test_nan_and_malformed_actions_raise_before_physics(sim):
    sim.reset((3.0, 3.0, 0.0))
    before_time, before_pose = sim.time, sim.pose
    bad = [VelocityAction(float("nan"), 0.0, 1.0), VelocityAction(0.5, float("inf"), 1.0), VelocityAction(0.5, 0.0, 0.0),
           WaypointAction(float("nan"), 0.0), WaypointAction(1.0, 0.0, timeout=-1.0), 6, -1, "JUMP", 2.5, None]
    for action in bad:
        with pytest.raises(ValueError):
            sim.step(action)
    assert sim.time == before_time and sim.pose == before_pose


def test_stop_does_not_move_and_same_actions_give_same_trajectory(room):
    poses = []
    for _ in range(2):
        with make_simulator(room, "r2r_ce", sensors=[], renderer="raycast") as s:
            s.reset((1.5, 1.5, 0.2))
            for a in ["MOVE_FORWARD", "TURN_LEFT", "MOVE_FORWARD", "STOP"]:
                _, r = s.step(a)
            assert r.physics_steps == 0
            poses.append(s.pose)
    assert poses[0] == poses[1]


def test_body_friction_makes_the_wall_grip(room):
    import dataclasses

    from vlnverse.sim import load_body

    gains = {}
    for friction in (0.0, 1.0):
        body = dataclasses.replace(load_body("r2r_ce"), friction=friction)
        with make_simulator(room, body, sensors=[], renderer="raycast") as s:
            s.reset((5.75, 1.0, math.radians(45.0)))
            s.step(VelocityAction(v=0.6, omega=0.0, duration=1.5))
            gains[friction] = s.pose.y - 1.0
    assert gains[0.0] > 0.45 and gains[1.0] < 0.5 * gains[0.0]


def test_wrap_angle_scalar_and_array_agree():
    from vlnverse.sim import wrap_angle

    angles = np.linspace(-20.0, 20.0, 401)
    wrapped = wrap_angle(angles)
    assert np.all((wrapped > -math.pi) & (wrapped <= math.pi))
    np.testing.assert_allclose(np.sin(wrapped), np.sin(angles), atol=1e-12)
    assert [wrap_angle(float(a)) for a in angles] == pytest.approx(list(wrapped), abs=1e-12)
    assert wrap_angle(-math.pi) == math.pi


@pytest.mark.parametrize("heading_deg", [30.0, 45.0, 60.0])
def test_sliding_along_a_wall_follows_the_commanded_tangential_motion(sim, heading_deg):
    """Pressed against a frictionless wall the agent keeps exactly the wall-parallel part of its
    command, whatever its heading: the actuators' force limit is the same in every direction
    (a per-axis limit in the body frame made a 30° step slide 0.02 m instead of 0.125 m and a
    45° step slide 0.32 m, further than the 0.25 m step itself)."""
    a = math.radians(heading_deg)
    start_x = 6.0 - RADIUS  # touching the east wall (inner face x = 6)
    sim.reset((start_x, 1.0, a))
    _, result = sim.step(DiscreteAction.MOVE_FORWARD)
    assert result.collided and {c.label for c in result.contacts} == {"wall"}
    # within 3.5 cm of the goal's projection onto the wall (most of the force limit is spent
    # pressing into the wall, so the slide brakes a little late); never further than the step
    assert sim.pose.y - 1.0 == pytest.approx(0.25 * math.sin(a), abs=0.035)
    assert sim.pose.distance_to(AgentPose(start_x, 1.0)) <= 0.25 + 0.02
    assert 6.0 - sim.pose.x >= RADIUS - 0.01
    sim.reset((start_x, 1.0, a))
    _, result = sim.step(VelocityAction(v=0.6, omega=0.0, duration=1.5))
    # the commanded (unobstructed) motion's y component is what sliding along the wall keeps
    assert sim.pose.y - 1.0 == pytest.approx(result.commanded_pose.y - 1.0, abs=0.05)


@pytest.mark.parametrize("body", ["r2r_ce", "stretch"])
def test_velocity_actions_in_one_backend_loop_equal_the_per_tick_loop(room, body):
    """``MujocoSimulator._hold`` (all ticks of a velocity action in one loop) gives bit-identical
    trajectories, contacts and commanded poses to the shared per-tick loop it replaces
    (``PhysicsSimulator._hold``: ``_set_target`` + ``_physics_steps`` per tick)."""
    from vlnverse.sim import VelocityAction, make_simulator
    from vlnverse.sim.physics import PhysicsSimulator

    lateral = 0.2 if body == "r2r_ce" else 0.0
    actions = [VelocityAction(0.8, 0.0, 3.0),  # north into the crate
               VelocityAction(-0.3, 0.3, 0.7, lateral=lateral), VelocityAction(-0.3, -0.9, 0.4),
               VelocityAction(2.0, 4.0, 0.3)]  # the last one clipped
    runs = []
    for per_tick in (False, True):
        with make_simulator(room, body, sensors=[], renderer="raycast") as sim:
            if per_tick:
                sim._hold = PhysicsSimulator._hold.__get__(sim)
            sim.reset((2.0, 3.6, 1.5708))  # facing north, 0.65 m short of the crate
            runs.append([sim.execute(a) for a in actions])
    assert runs[0][0].collided and runs[0][-1].message.endswith("(clipped to body limits)")
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a.trajectory, b.trajectory)
        assert (a.commanded_pose, a.achieved_pose, a.message, a.physics_steps) == \
            (b.commanded_pose, b.achieved_pose, b.message, b.physics_steps)
        assert [c.instance_id for c in a.contacts] == [c.instance_id for c in b.contacts]
