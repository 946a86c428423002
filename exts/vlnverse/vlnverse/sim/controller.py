"""Backend-neutral parts of the agent controller, shared by every physics backend.

A backend owns the physics (stepping, contacts, actuators); what to command and when an action is
over does not depend on it:

- :func:`speed_profile` — trapezoidal speed toward a goal (acceleration-limited braking, a speed
  cap, a proportional gain near the goal);
- :class:`GoToController` — closed-loop go-to-pose for ``MOVE_FORWARD`` / turns / waypoints:
  each control tick, the body-frame velocity target from the current pose (holonomic and
  differential-drive bodies), ``"ok"`` at the goal, a failure message when stalled;
- :class:`StallDetector` — "told to move but made no progress over ``stall_window`` seconds";
- :func:`clip_velocity` and :class:`ReferenceServo` — a ``VelocityAction`` clipped to the body's
  limits, and the commanded pose: the same command run by an unobstructed body with first-order
  velocity servos and acceleration limits (so free-space motion has ~0 obstacle displacement);
- :func:`planar_servo_force` — a holonomic body's planar servo force with one limit on its
  magnitude; :func:`servo_wrench` — the whole servo as a world-frame wrench, for engines without
  velocity actuators;
- :func:`nearest_free` — the de-penetration search for teleports: rings outward, then bisection
  back to the obstacle boundary, given only a "does the body penetrate at (x, y)" probe.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from ..core.errors import SceneError
from .types import InvalidActionError, VelocityAction, wrap_angle

#: Proportional gains of the closed-loop controller near its goal (1/s).
KP_LINEAR = 8.0
KP_ANGULAR = 8.0
#: Ring spacing (m) and maximum radius (m) of the nearest-free-pose search.
RING_STEP = 0.02
RING_MAX = 3.0
#: Stall progress counts a turn as this many metres per radian.
STALL_TURN_WEIGHT = 0.2


def speed_profile(err: float, amax: float, vcap: float, kp: float) -> float:
    """Signed speed toward a goal ``err`` away: ``min(vcap, sqrt(2·amax·|err|), kp·|err|)``
    (cap, acceleration-limited braking distance, proportional approach)."""
    mag = min(vcap, math.sqrt(2.0 * amax * abs(err)), kp * abs(err))
    return math.copysign(mag, err)


class StallDetector:
    """Reports a stall when the base moved (plus ``STALL_TURN_WEIGHT`` m per radian turned) less
    than ``control.stall_progress`` over the last ``control.stall_window`` seconds."""

    def __init__(self, control) -> None:
        self.window = max(1, int(round(control.stall_window * control.control_hz)))
        self.progress = control.stall_progress
        self.history: list[tuple[float, float, float]] = []

    def update(self, x: float, y: float, yaw: float) -> bool:
        """Record the pose of this control tick; True when the agent is stalled."""
        history, window = self.history, self.window
        history.append((x, y, yaw))
        return len(history) > window and (math.hypot(history[-1][0] - history[-window - 1][0],
                                                     history[-1][1] - history[-window - 1][1])
                                          + STALL_TURN_WEIGHT * abs(history[-1][2] - history[-window - 1][2])) \
            < self.progress


class GoToController:
    """Closed-loop go-to-pose with trapezoidal speed profiles and stall detection.

    ``command(x, y, yaw)`` (called once per control tick with the agent's pose) returns
    ``(target, None)`` — the body-frame velocity target (forward, lateral, yaw rate) — or
    ``(None, status)`` when the action is over: ``"ok"`` within ``position_tolerance`` and
    ``yaw_tolerance_deg`` of the goal, else a stall message. Profiles are planned with half the
    body's accelerations so that first-order velocity servos keep up while braking. A
    differential-drive body turns toward the goal, drives (reversing when the goal is behind),
    then turns to the goal heading.
    """

    def __init__(self, body, control, goal_xy, goal_yaw: float) -> None:
        self.body = body
        self.goal_xy = np.asarray(goal_xy, dtype=float)
        self.goal_yaw = goal_yaw
        self.a_lin, self.a_ang = 0.5 * body.max_linear_accel, 0.5 * math.radians(body.max_angular_accel_deg)
        self.vmax, self.wmax = body.max_linear_speed, body.max_angular_speed
        self.pos_tol, self.yaw_tol = control.position_tolerance, math.radians(control.yaw_tolerance_deg)
        self.stall = StallDetector(control)

    def command(self, x: float, y: float, yaw: float) -> tuple[np.ndarray | None, str | None]:
        """The velocity target at pose (x, y, yaw), or ``(None, status)`` when the action is over."""
        err = self.goal_xy - np.array([x, y])
        dist = float(np.hypot(*err))
        yaw_err = float(wrap_angle(self.goal_yaw - yaw))
        pos_tol = self.pos_tol
        if dist < pos_tol and abs(yaw_err) < self.yaw_tol:
            return None, "ok"
        if self.stall.update(x, y, yaw):
            return None, f"stalled {dist:.3f} m / {math.degrees(abs(yaw_err)):.1f} deg from the goal"
        a_lin, a_ang, vmax, wmax = self.a_lin, self.a_ang, self.vmax, self.wmax
        c, s = math.cos(yaw), math.sin(yaw)
        ex, ey = c * err[0] + s * err[1], -s * err[0] + c * err[1]  # goal offset in the body frame
        if self.body.holonomic:
            speed = speed_profile(dist, a_lin, vmax, KP_LINEAR) if dist >= pos_tol else 0.0
            vx, vy = (speed * ex / dist, speed * ey / dist) if dist > 1e-9 else (0.0, 0.0)
            w = speed_profile(yaw_err, a_ang, wmax, KP_ANGULAR)
        else:
            vy = 0.0
            if dist >= max(pos_tol, 0.05):
                heading_err = math.atan2(ey, ex)
                if abs(heading_err) > math.pi / 2:  # goal behind: reverse rather than spin round
                    heading_err = float(wrap_angle(heading_err - math.pi))
                    direction = -1.0
                else:
                    direction = 1.0
                w = speed_profile(heading_err, a_ang, wmax, KP_ANGULAR)
                vx = direction * abs(speed_profile(dist, a_lin, vmax, KP_LINEAR)) * max(0.0, math.cos(heading_err)) ** 4 \
                    if abs(heading_err) < 0.35 else 0.0
            else:
                vx = speed_profile(ex, a_lin, vmax, KP_LINEAR) if abs(ex) >= pos_tol else 0.0
                w = speed_profile(yaw_err, a_ang, wmax, KP_ANGULAR)
        return np.array([vx, vy, w]), None


def clip_velocity(body, action: VelocityAction) -> tuple[np.ndarray, bool]:
    """``action``'s body-frame target (v, lateral, omega) clipped to ``body``'s speed limits (the
    planar speed as a whole), and whether it was clipped; sideways motion on a differential-drive
    body raises ``InvalidActionError``."""
    if not body.holonomic and action.lateral != 0.0:
        raise InvalidActionError(f"VelocityAction.lateral = {action.lateral}: body '{body.name}' is differential "
                                 "drive (holonomic: false) and cannot move sideways; expected 0")
    vmax, wmax = body.max_linear_speed, body.max_angular_speed  # plain floats: this runs every action
    v = min(max(float(action.v), -vmax), vmax)
    lat = min(max(float(action.lateral), -vmax), vmax)
    speed = math.hypot(v, lat)
    if speed > vmax:
        v, lat = v * vmax / speed, lat * vmax / speed
    w = min(max(float(action.omega), -wmax), wmax)
    asked = (float(action.v), float(action.lateral), float(action.omega))
    clipped = any(abs(t - a) > 1e-8 + 1e-5 * abs(a) for t, a in zip((v, lat, w), asked))  # np.allclose's test
    return np.array([v, lat, w]), clipped


class ReferenceServo:
    """The commanded pose of a velocity action: ``target`` (body-frame v, lateral, omega) run by an
    unobstructed body whose velocity servos have time constant ``servo_tau`` and whose
    accelerations are limited like the real actuators (one limit on the planar magnitude for a
    holonomic body; per axis, with a 9.81 m/s² lateral limit, for differential drive).

    ``advance()`` integrates one control tick (``control.substeps`` physics steps); ``pose``
    is (x, y, yaw) after the ticks so far.
    """

    def __init__(self, body, control, target: np.ndarray, pose: tuple[float, float, float],
                 velocity: tuple[float, float, float], servo_tau: float) -> None:
        lateral_accel = body.max_linear_accel if body.holonomic else 9.81
        acc_max = np.array([body.max_linear_accel, lateral_accel, math.radians(body.max_angular_accel_deg)])
        self.ideal = [*map(float, pose)]  # x, y, yaw (plain floats: this runs every step)
        self.ideal_vel = [*map(float, velocity)]  # world-frame vx, vy, yaw rate
        (self.tf, self.tl, self.tw), (self.af, self.al, self.aw) = np.asarray(target).tolist(), acc_max.tolist()
        self.holonomic = body.holonomic
        self.substeps, self.dt, self.tau = control.substeps, control.physics_dt, servo_tau

    @property
    def pose(self) -> tuple[float, float, float]:
        """(x, y, yaw) of the unobstructed body now."""
        return self.ideal[0], self.ideal[1], self.ideal[2]

    def advance(self, ticks: int = 1) -> None:
        """Integrate ``ticks`` control ticks."""
        tf, tl, tw, af, al, aw = self.tf, self.tl, self.tw, self.af, self.al, self.aw
        sub_dt, tau, holonomic = self.dt, self.tau, self.holonomic
        vx, vy, w = self.ideal_vel
        x, y, yaw = self.ideal
        cos, sin, hypot = math.cos, math.sin, math.hypot
        for _ in range(self.substeps * ticks):
            c, s = cos(yaw), sin(yaw)
            acc_f = (tf - (c * vx + s * vy)) / tau
            acc_l = (tl - (-s * vx + c * vy)) / tau
            if holonomic:  # one limit on the planar acceleration's magnitude (``planar_servo_force``)
                norm = hypot(acc_f, acc_l)
                if norm > af:
                    acc_f, acc_l = acc_f * af / norm, acc_l * af / norm
            else:
                acc_f, acc_l = min(af, max(-af, acc_f)), min(al, max(-al, acc_l))
            acc_w = min(aw, max(-aw, (tw - w) / tau))
            vx += sub_dt * (c * acc_f - s * acc_l)
            vy += sub_dt * (s * acc_f + c * acc_l)
            w += sub_dt * acc_w
            x, y, yaw = x + sub_dt * vx, y + sub_dt * vy, yaw + sub_dt * w
        self.ideal_vel[:] = (vx, vy, w)
        self.ideal[:] = (x, y, yaw)


def planar_servo_force(target_forward: float, target_lateral: float, vx: float, vy: float, yaw: float, kv: float,
                       fmax: float) -> tuple[float, float]:
    """A holonomic body's planar servo: force = ``kv`` × (target − velocity) in the body frame
    (world velocity ``vx, vy``, heading ``yaw``), scaled down to ``fmax`` in magnitude (one limit
    on the planar force, not one per axis)."""
    c, s = math.cos(yaw), math.sin(yaw)
    ff = kv * (target_forward - (c * vx + s * vy))
    fl = kv * (target_lateral - (c * vy - s * vx))
    norm = math.hypot(ff, fl)
    if norm > fmax:
        scale = fmax / norm
        ff, fl = ff * scale, fl * scale
    return ff, fl


def servo_wrench(body, target, vx: float, vy: float, wz: float, yaw: float, servo_tau: float,
                 inertia_z: float) -> tuple[float, float, float]:
    """World-frame (fx, fy, torque_z) of the agent's velocity servos toward the body-frame ``target``
    (forward, lateral, yaw rate), for engines without velocity actuators (Isaac Sim): the same
    servos as the MuJoCo model — gain ``mass / servo_tau`` (``inertia_z / servo_tau`` for yaw),
    forward force limited to ``mass × max_linear_accel``, a holonomic body's planar force limited in
    magnitude (:func:`planar_servo_force`), a differential-drive body's lateral force to
    ``mass × 9.81`` (tyre grip), the yaw torque to ``inertia_z × max_angular_accel``."""
    kv = body.mass / servo_tau
    if body.holonomic:
        ff, fl = planar_servo_force(target[0], target[1], vx, vy, yaw, kv, body.mass * body.max_linear_accel)
    else:
        c, s = math.cos(yaw), math.sin(yaw)
        fmax, lmax = body.mass * body.max_linear_accel, body.mass * 9.81
        ff = min(fmax, max(-fmax, kv * (target[0] - (c * vx + s * vy))))
        fl = min(lmax, max(-lmax, kv * (target[1] - (c * vy - s * vx))))
    tmax = inertia_z * math.radians(body.max_angular_accel_deg)
    tz = min(tmax, max(-tmax, inertia_z / servo_tau * (target[2] - wz)))
    c, s = math.cos(yaw), math.sin(yaw)
    return c * ff - s * fl, s * ff + c * fl, tz


def nearest_free(x: float, y: float, penetrates: Callable[[float, float], bool], *, ring_step: float = RING_STEP,
                 ring_max: float = RING_MAX, where: str = "the scene", subject: str = "the agent") -> tuple[float, float]:
    """The nearest position to (x, y) where ``penetrates(x, y)`` is False: rings ``ring_step``
    apart outward; on the first ring with free points, each free direction is bisected back to
    the obstacle boundary (1 mm) and the closest kept. (x, y) itself when it is free. Raises
    ``SceneError`` (naming ``where`` and ``subject``) when nothing is free within ``ring_max``."""
    if not penetrates(x, y):
        return x, y
    for r in np.arange(ring_step, ring_max + 1e-9, ring_step):
        n = max(8, int(math.ceil(2 * math.pi * r / ring_step)))
        dirs = np.stack([np.cos(2 * math.pi * np.arange(n) / n), np.sin(2 * math.pi * np.arange(n) / n)], axis=1)
        free = [d for d in dirs if not penetrates(x + r * d[0], y + r * d[1])]
        if not free:
            continue
        best = (r, free[0])
        for d in free:
            lo, hi = r - ring_step, r
            while hi - lo > 1e-3:
                mid = (lo + hi) / 2
                if penetrates(x + mid * d[0], y + mid * d[1]):
                    lo = mid
                else:
                    hi = mid
            if hi < best[0]:
                best = (hi, d)
        return x + best[0] * best[1][0], y + best[0] * best[1][1]
    raise SceneError(f"{where}: no collision-free pose within {ring_max} m of ({x:.3f}, {y:.3f}) for {subject}")


__all__ = ["GoToController", "KP_ANGULAR", "KP_LINEAR", "RING_MAX", "RING_STEP", "ReferenceServo", "StallDetector",
           "clip_velocity", "nearest_free", "planar_servo_force", "speed_profile"]
