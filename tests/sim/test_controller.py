"""The backend-neutral controller (``vlnverse.sim.controller``) driving a second, pure-numpy backend:
a kinematic plant with first-order velocity servos and disc obstacles. What a new physics backend
shares with MuJoCo — go-to profiles, stall detection, the velocity reference, the planar servo
force and the de-penetration search — is checked here without MuJoCo."""
from __future__ import annotations

import math

import numpy as np
import pytest

from vlnverse.core.body import R2R_CE, load_body
from vlnverse.core.errors import SceneError
from vlnverse.sim import ControlConfig
from vlnverse.sim.controller import (GoToController, ReferenceServo, StallDetector, clip_velocity, nearest_free,
                                     planar_servo_force, speed_profile)
from vlnverse.sim.types import InvalidActionError, VelocityAction, wrap_angle

TAU = 0.04  # servo time constant of the plant (the MuJoCo backend's SERVO_TAU)


class KinematicPlant:
    """A minimal backend: body-frame velocity servos (time constant ``TAU``, acceleration-limited),
    integrated at ``physics_dt``; a disc obstacle (centre, radius) stops motion into it."""

    def __init__(self, body, control, pose=(0.0, 0.0, 0.0), obstacle=None):
        self.body, self.control = body, control
        self.pose = list(pose)
        self.vel = [0.0, 0.0, 0.0]  # body-frame forward, lateral, yaw rate
        self.obstacle = obstacle

    def blocked(self, x, y) -> bool:
        if self.obstacle is None:
            return False
        (cx, cy), r = self.obstacle
        return math.hypot(x - cx, y - cy) < r + self.body.radius

    def tick(self, target) -> None:
        """One control tick of ``control.substeps`` physics steps toward ``target``."""
        a = [self.body.max_linear_accel, self.body.max_linear_accel, math.radians(self.body.max_angular_accel_deg)]
        for _ in range(self.control.substeps):
            for i in range(3):
                acc = max(-a[i], min(a[i], (target[i] - self.vel[i]) / TAU))
                self.vel[i] += self.control.physics_dt * acc
            x, y, yaw = self.pose
            c, s = math.cos(yaw), math.sin(yaw)
            nx = x + self.control.physics_dt * (c * self.vel[0] - s * self.vel[1])
            ny = y + self.control.physics_dt * (s * self.vel[0] + c * self.vel[1])
            if self.blocked(nx, ny):
                nx, ny, self.vel[0], self.vel[1] = x, y, 0.0, 0.0
            self.pose = [nx, ny, yaw + self.control.physics_dt * self.vel[2]]

    def goto(self, goal_xy, goal_yaw, timeout=10.0) -> tuple[str, int]:
        controller = GoToController(self.body, self.control, goal_xy, goal_yaw)
        for tick in range(int(timeout * self.control.control_hz)):
            target, status = controller.command(*self.pose)
            if status is not None:
                return status, tick
            self.tick(target)
        return "timeout", tick


def test_speed_profile_is_capped_braking_limited_and_proportional():
    assert speed_profile(10.0, 1.0, 0.5, 8.0) == 0.5  # cruising at the cap
    assert speed_profile(-0.02, 1.0, 0.5, 8.0) == pytest.approx(-0.16)  # proportional near the goal
    assert speed_profile(0.08, 1.0, 5.0, 100.0) == pytest.approx(math.sqrt(0.16))  # can still brake in time


@pytest.mark.parametrize("body_name, goal, goal_yaw", [("r2r_ce", (0.25, 0.0), 0.0), ("r2r_ce", (1.0, 0.6), 0.8),
                                                        ("r2r_ce", (0.0, 0.0), math.radians(15)),
                                                        ("stretch", (1.0, 0.5), 0.5), ("stretch", (-0.6, 0.0), 0.0)])
def test_goto_reaches_the_pose_within_the_tolerances(body_name, goal, goal_yaw):
    control = ControlConfig()
    plant = KinematicPlant(load_body(body_name), control)
    status, ticks = plant.goto(goal, goal_yaw)
    x, y, yaw = plant.pose
    assert status == "ok"
    assert math.hypot(x - goal[0], y - goal[1]) < control.position_tolerance
    assert abs(wrap_angle(yaw - goal_yaw)) < math.radians(control.yaw_tolerance_deg)
    if body_name == "stretch" and goal[0] < 0:  # differential drive reverses to a goal behind it
        assert ticks < 5 * control.control_hz


def test_goto_into_an_obstacle_reports_a_stall_in_about_a_stall_window():
    control = ControlConfig()
    plant = KinematicPlant(R2R_CE, control, obstacle=((0.6, 0.0), 0.2))
    status, ticks = plant.goto((1.0, 0.0), 0.0)
    assert status.startswith("stalled") and "from the goal" in status
    assert plant.pose[0] < 0.6 - 0.2 - R2R_CE.radius + 1e-9
    assert ticks < 3 * control.control_hz  # ~0.5 s to arrive, then one 0.2 s window without progress


def test_stall_detector_counts_turning_as_progress():
    control = ControlConfig()
    stall = StallDetector(control)
    assert not any(stall.update(0.0, 0.0, 0.05 * i) for i in range(30))  # turning in place: progress
    stall = StallDetector(control)
    flags = [stall.update(0.0, 0.0, 0.0) for _ in range(stall.window + 1)]
    assert flags[-1] and not any(flags[:-1])


def test_nearest_free_finds_the_obstacle_boundary():
    radius = 0.5 + R2R_CE.radius

    def penetrates(x, y):
        return math.hypot(x, y) < radius

    x, y = nearest_free(0.1, 0.0, penetrates)
    assert radius <= math.hypot(x, y) <= radius + 0.002  # on the boundary, within the 1 mm bisection
    assert math.hypot(x - 0.1, y) == pytest.approx(radius - 0.1, abs=0.01)  # the closest boundary point
    assert nearest_free(2.0, 1.0, penetrates) == (2.0, 1.0)  # already free
    with pytest.raises(SceneError, match="no collision-free pose"):
        nearest_free(0.0, 0.0, lambda x, y: True, ring_max=0.1, where="scene 'solid'")


def _first_order_distance(target: float, accel: float, t: float) -> float:
    """Distance covered in ``t`` s from rest by a servo ``dv/dt = clip((target - v) / TAU, ±accel)``:
    a ramp at ``accel`` until the error is ``accel·TAU``, then an exponential approach."""
    t1 = max(0.0, (target - accel * TAU) / accel)
    return 0.5 * accel * t1 ** 2 + target * (t - t1) - accel * TAU * TAU * (1 - math.exp(-(t - t1) / TAU))


@pytest.mark.parametrize("v, omega", [(0.5, 0.0), (0.0, 0.6)])
def test_reference_servo_follows_the_acceleration_limited_first_order_servo(v, omega):
    """The commanded pose of a velocity action is where an unobstructed body with first-order
    velocity servos ends up: a straight line and a turn in place against their closed forms."""
    control = ControlConfig()
    target, clipped = clip_velocity(R2R_CE, VelocityAction(v=v, omega=omega, duration=1.0))
    assert not clipped
    reference = ReferenceServo(R2R_CE, control, target, (1.0, 2.0, 0.0), (0.0, 0.0, 0.0), TAU)
    for _ in range(int(control.control_hz)):  # 1 s
        reference.advance()
    x, y, yaw = reference.pose
    expected_x = 1.0 + _first_order_distance(v, R2R_CE.max_linear_accel, 1.0) if v else 1.0
    expected_yaw = _first_order_distance(omega, math.radians(R2R_CE.max_angular_accel_deg), 1.0) if omega else 0.0
    # semi-implicit Euler at 200 Hz against the continuous solution: a few millimetres ahead
    assert x == pytest.approx(expected_x, abs=4e-3) and y == pytest.approx(2.0, abs=1e-9)
    assert yaw == pytest.approx(expected_yaw, abs=4e-3)
    assert (expected_x - 1.0 if v else expected_yaw) == pytest.approx(0.436 if v else 0.566, abs=1e-3)


def test_clip_velocity_and_planar_force_limits():
    target, clipped = clip_velocity(R2R_CE, VelocityAction(v=3.0, lateral=3.0, omega=10.0, duration=0.5))
    assert clipped and math.hypot(target[0], target[1]) == pytest.approx(R2R_CE.max_linear_speed)
    assert target[2] == pytest.approx(R2R_CE.max_angular_speed)
    with pytest.raises(InvalidActionError, match="differential"):
        clip_velocity(load_body("stretch"), VelocityAction(v=0.1, lateral=0.1, omega=0.0, duration=0.5))
    ff, fl = planar_servo_force(1.0, 1.0, 0.0, 0.0, math.pi / 2, kv=1000.0, fmax=80.0)
    assert math.hypot(ff, fl) == pytest.approx(80.0) and ff == pytest.approx(fl)  # one limit, direction kept
    assert planar_servo_force(0.1, 0.0, 0.0, 0.0, 0.0, kv=10.0, fmax=80.0) == pytest.approx((1.0, 0.0))
    assert np.isfinite(target).all()
