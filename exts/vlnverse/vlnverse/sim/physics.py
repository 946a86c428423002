"""``PhysicsSimulator``: everything a physics backend shares, on top of a few engine primitives.

Every backend (MuJoCo, Isaac Sim) runs the same action semantics: the control-tick loop with
per-physics-step contact collection and braking, closed-loop go-to-pose actions
(``controller.GoToController``), velocity actions against their unobstructed reference
(``controller.ReferenceServo``), camera tilt, sensor rates (a rate-limited sensor re-renders only
when its period has elapsed on the simulation clock; teleports invalidate cached frames), the
de-penetrating placement of ``reset``/``teleport`` (``controller.nearest_free``) and the
``ActionResult`` each produces. A backend subclasses this and implements only what talks to its
engine:

========================  ===================================================================
``_read_qpos()``          agent (x, y, yaw) — yaw unwrapped as the engine holds it
``_read_qvel()``          agent world-frame (vx, vy, yaw rate)
``_set_target(target)``   body-frame velocity target (forward, lateral, yaw rate) of the servos
``_physics_steps(n, t)``  ``n`` physics steps; append the contact keys of the agent to ``t``
``_hold(target, k, t)``   optional: hold a velocity target for ``k`` control ticks in one call
                          (the default loops ``_physics_steps``; MuJoCo runs them in one tight loop)
``_write_agent(x,y,yaw)`` set the agent pose, zero its velocity and target
``_penetrating(x,y,yaw)`` contact keys the agent would penetrate at that pose (probe only)
``_settle()``             make the state consistent after a placement (kinematics)
``_reset_physics()``      restore the initial physics state (objects back in place)
``_contacts_from(keys)``  ``Contact`` records for contact keys (deduplicated by instance)
``_render_camera(...)``   raw camera images (rgb, depth, semantic, instance) at a sensor pose
``_lidar(spec, pos, rot)`` LiDAR ranges from a sensor pose
``time``, ``semantic_labels``, ``object_positions()``, ``close()``
========================  ===================================================================

``servo_tau`` (s) is the first-order time constant of the agent's velocity servos; the velocity
action's reference uses it.
"""
from __future__ import annotations

import abc
import math
import time as _time
import warnings
from typing import Any, Callable, Sequence

import numpy as np

from ..core.errors import ConfigError, UnknownNameError
from ..scenes.description import SceneDescription
from .api import ControlConfig, Simulator
from .body import AgentBody
from .controller import RING_MAX, RING_STEP, GoToController, ReferenceServo, clip_velocity, nearest_free
from .sensors import LidarSpec, PanoramaSpec, SensorSpec, sensor_world_pose, validate_sensor
from .types import (ActionResult, AgentPose, Contact, DiscreteAction, InvalidActionError, VelocityAction,
                    WaypointAction, wrap_angle)


class PhysicsSimulator(Simulator):
    """Shared action, sensor-rate and placement logic of every physics backend (see module doc)."""

    #: First-order time constant (s) of the agent's velocity servos.
    servo_tau: float = 0.04

    def __init__(self, scene: SceneDescription, body: AgentBody, control: ControlConfig):
        self.scene, self.body, self.control = scene, body, control
        self._sensors: dict[str, SensorSpec] = {}
        self._frames: dict[str, tuple[float, dict[str, np.ndarray]]] = {}
        self.render_counts: dict[str, int] = {}
        self._pitch = 0.0
        lo, hi = scene.bounds()
        self._scene_xy_bounds = (lo[:2], hi[:2])

    # ------------------------------------------------------------------ engine primitives
    @abc.abstractmethod
    def _read_qpos(self) -> Sequence[float]:
        """Agent (x, y, yaw) as the engine holds it (yaw unwrapped)."""

    @abc.abstractmethod
    def _read_qvel(self) -> Sequence[float]:
        """Agent world-frame (vx, vy, yaw rate)."""

    @abc.abstractmethod
    def _set_target(self, target) -> None:
        """Body-frame velocity target (forward, lateral, yaw rate) of the agent's servos."""

    @abc.abstractmethod
    def _physics_steps(self, n: int, touched: list) -> None:
        """Advance physics ``n`` steps; append the keys of everything touching the agent to ``touched``."""

    def _hold(self, target, ticks: int, touched: list) -> list[tuple[float, float, float]]:
        """Hold the body-frame velocity ``target`` for ``ticks`` control ticks (``control.substeps``
        physics steps each), appending contact keys to ``touched`` as ``_physics_steps`` does;
        returns the agent's (x, y, engine yaw) after each tick. A backend may override this with a
        tighter loop that gives the same physics (no per-tick return to this class)."""
        self._set_target(target)
        sub = self.control.substeps
        rows = []
        for _ in range(ticks):
            self._physics_steps(sub, touched)
            q = self._read_qpos()
            rows.append((float(q[0]), float(q[1]), float(q[2])))
        return rows

    @abc.abstractmethod
    def _write_agent(self, x: float, y: float, yaw: float) -> None:
        """Set the agent pose, zero its velocity and its servo target."""

    @abc.abstractmethod
    def _penetrating(self, x: float, y: float, yaw: float) -> list:
        """Contact keys of what the agent would penetrate at (x, y, yaw) (a probe: no physics step)."""

    @abc.abstractmethod
    def _settle(self) -> None:
        """Make derived state (kinematics, render transforms) consistent after a placement."""

    @abc.abstractmethod
    def _reset_physics(self) -> None:
        """Restore the initial physics state (movable objects back where the scene puts them)."""

    @abc.abstractmethod
    def _contacts_from(self, keys) -> list[Contact]:
        """``Contact`` records for contact keys (one per touched instance and label)."""

    @abc.abstractmethod
    def _render_camera(self, spec, pos: np.ndarray, rot: np.ndarray, kinds) -> dict[str, np.ndarray]:
        """Images ``kinds`` (rgb | depth | semantic | instance, finished as ``CameraSpec`` documents:
        see ``sensors.depth_output``) of camera ``spec`` at world position ``pos`` and rotation
        ``rot`` (columns forward, left, up)."""

    def _render_views(self, spec, positions: Sequence[np.ndarray], rotations: Sequence[np.ndarray],
                      kinds) -> list[dict[str, np.ndarray]]:
        """``_render_camera`` for several camera poses (a panorama's views); a backend may share
        the scene set-up between them."""
        return [self._render_camera(spec, p, r, kinds) for p, r in zip(positions, rotations)]

    @abc.abstractmethod
    def _lidar(self, spec: LidarSpec, pos: np.ndarray, rot: np.ndarray) -> np.ndarray:
        """LiDAR ranges (channels, beams) float32 from ``pos``/``rot``; ``inf`` where nothing lies
        within [min_range, max_range]."""

    def _render_sensor(self, spec: SensorSpec, pose: AgentPose) -> dict[str, np.ndarray]:
        """Outputs of one sensor at agent pose ``pose`` (panorama views in CCW yaw order)."""
        floor = self.scene.floor_z
        if isinstance(spec, LidarSpec):
            # LiDAR ignores the articulated camera pitch: only the mount pitch tilts it.
            pos, rot = sensor_world_pose(AgentPose(pose.x, pose.y, pose.yaw, 0.0), spec.mount, self.body.height / 2.0,
                                         floor_z=floor)
            return {spec.name: self._lidar(spec, pos, rot)}
        if isinstance(spec, PanoramaSpec):
            poses = [sensor_world_pose(pose, spec.mount, self.body.camera_height, 2 * math.pi * i / spec.views, floor)
                     for i in range(spec.views)]
            raws = self._render_views(spec, [p for p, _ in poses], [r for _, r in poses], spec.modalities)
            return {f"{spec.name}_{m}": np.stack([raw[m] for raw in raws]) for m in spec.modalities}
        pos, rot = sensor_world_pose(pose, spec.mount, self.body.camera_height, 0.0, floor)
        return {spec.name: self._render_camera(spec, pos, rot, (spec.kind,))[spec.kind]}

    # ------------------------------------------------------------------ state
    @property
    def pose(self) -> AgentPose:
        q = self._read_qpos()
        return AgentPose(float(q[0]), float(q[1]), float(wrap_angle(q[2])), self._pitch)

    @property
    def sensors(self) -> dict[str, SensorSpec]:
        return dict(self._sensors)

    def _velocity(self) -> np.ndarray:
        """Body-frame (forward, lateral, yaw rate)."""
        vx, vy, wz = self._read_qvel()
        yaw = self._read_qpos()[2]
        c, s = math.cos(yaw), math.sin(yaw)
        return np.array([c * vx + s * vy, -s * vx + c * vy, wz])

    # ------------------------------------------------------------------ sensors
    def attach_sensor(self, spec: SensorSpec) -> None:
        validate_sensor(spec)
        if spec.name in self._sensors or spec.name == "pose":
            raise ConfigError(f"a sensor named '{spec.name}' is already attached", field="sensor.name",
                              expected="a name not in use (and not the reserved 'pose')")
        self._sensors[spec.name] = spec
        self.render_counts[spec.name] = 0

    def detach_sensor(self, name: str) -> None:
        if name not in self._sensors:
            raise UnknownNameError("attached sensor", name, list(self._sensors))
        del self._sensors[name]
        self._frames.pop(name, None)
        self.render_counts.pop(name, None)

    def get_observations(self) -> dict[str, np.ndarray]:
        pose = self.pose
        obs: dict[str, np.ndarray] = {}
        now = self.time
        for name, spec in self._sensors.items():
            cached = self._frames.get(name)
            period = 0.0 if spec.rate_hz is None else 1.0 / spec.rate_hz
            if cached is None or now - cached[0] >= period - 1e-6:
                cached = (now, self._render_sensor(spec, pose))
                self._frames[name] = cached
                self.render_counts[name] += 1
            obs.update(cached[1])
        obs["pose"] = np.array([pose.x, pose.y, pose.yaw, pose.pitch], np.float32)
        return obs

    def render_at(self, pose: AgentPose | Any, spec: SensorSpec) -> dict[str, np.ndarray]:
        validate_sensor(spec)
        return self._render_sensor(spec, AgentPose.coerce(pose))

    # ------------------------------------------------------------------ placement
    def _nearest_free(self, x: float, y: float, yaw: float) -> tuple[float, float, list]:
        """Nearest collision-free agent position to (x, y) (``controller.nearest_free`` with this
        backend's penetration probe). Returns (x, y, keys penetrated at the original spot)."""
        hits = self._penetrating(x, y, yaw)
        if not hits:
            return x, y, []
        fx, fy = nearest_free(x, y, lambda px, py: bool(self._penetrating(px, py, yaw)), ring_step=RING_STEP,
                              ring_max=RING_MAX, where=f"scene '{self.scene.scene_id}'",
                              subject=f"an agent of radius {self.body.radius} m")
        return fx, fy, hits

    def _place(self, pose: AgentPose) -> ActionResult:
        t0 = _time.perf_counter()
        lo, hi = self._scene_xy_bounds
        if not (lo[0] <= pose.x <= hi[0] and lo[1] <= pose.y <= hi[1]):
            raise InvalidActionError(
                f"pose ({pose.x:.3f}, {pose.y:.3f}) lies outside scene '{self.scene.scene_id}' "
                f"(x in [{lo[0]:.2f}, {hi[0]:.2f}], y in [{lo[1]:.2f}, {hi[1]:.2f}])")
        pitch = float(np.clip(pose.pitch, math.radians(self.body.pitch_min_deg), math.radians(self.body.pitch_max_deg)))
        x, y, hits = self._nearest_free(pose.x, pose.y, pose.yaw)
        self._write_agent(x, y, pose.yaw)
        self._pitch = pitch
        self._settle()
        achieved = self.pose
        moved = math.hypot(x - pose.x, y - pose.y)
        contacts = self._contacts_from(hits)
        msg = (f"start pose ({pose.x:.3f}, {pose.y:.3f}) penetrated {', '.join(c.label for c in contacts)}; "
               f"moved {moved:.3f} m to the nearest free pose") if hits else "ok"
        return ActionResult("TELEPORT", AgentPose(pose.x, pose.y, pose.yaw, pitch), achieved, collided=bool(hits),
                            contacts=contacts, obstacle_displacement=moved, success=True, message=msg,
                            wall_time=_time.perf_counter() - t0,
                            trajectory=np.array([[achieved.x, achieved.y, achieved.yaw]]))

    def teleport(self, pose: AgentPose | Any) -> ActionResult:
        pose = AgentPose.coerce(pose)
        self._frames.clear()  # the clock does not move, the agent does: no frame from the old pose
        return self._place(pose)

    def reset(self, pose: AgentPose | Any) -> dict[str, np.ndarray]:
        pose = AgentPose.coerce(pose)
        self._reset_physics()
        self._frames.clear()
        result = self._place(pose)
        if result.collided:
            warnings.warn(f"vlnverse.sim: {result.message}", RuntimeWarning, stacklevel=2)
        return self.get_observations()

    # ------------------------------------------------------------------ stepping
    def step(self, action: Any) -> tuple[dict[str, np.ndarray], ActionResult]:
        result = self.execute(action)
        return self.get_observations(), result

    def execute(self, action: Any) -> ActionResult:
        """Run ``action`` through physics without rendering (``step`` = this + observations)."""
        if isinstance(action, VelocityAction):
            action.validate()
            return self._velocity_action(action)
        if isinstance(action, WaypointAction):
            action.validate()
            pose = self.pose
            c, s = math.cos(pose.yaw), math.sin(pose.yaw)
            goal = np.array([pose.x + c * action.dx - s * action.dy, pose.y + s * action.dx + c * action.dy])
            return self._goto(repr(action), goal, pose.yaw + action.dyaw, action.timeout)
        act = DiscreteAction.coerce(action)
        pose = self.pose
        cfg = self.control
        if act == DiscreteAction.STOP:
            return ActionResult("STOP", pose, pose, trajectory=np.array([[pose.x, pose.y, pose.yaw]]))
        if act == DiscreteAction.MOVE_FORWARD:
            goal = pose.xy + cfg.forward_step * np.array([math.cos(pose.yaw), math.sin(pose.yaw)])
            return self._goto(act.name, goal, pose.yaw, cfg.action_timeout)
        if act in (DiscreteAction.TURN_LEFT, DiscreteAction.TURN_RIGHT):
            sign = 1.0 if act == DiscreteAction.TURN_LEFT else -1.0
            return self._goto(act.name, pose.xy, pose.yaw + sign * math.radians(cfg.turn_angle_deg), cfg.action_timeout)
        return self._look(act)

    def _run(self, name: str, command: Callable[[int], tuple[np.ndarray, str | None]], max_ticks: int,
             commanded: Callable[[], AgentPose], brake: bool) -> ActionResult:
        """Tick loop: ``command(tick)`` returns the body-frame velocity target and, when the action
        is over, a status (``"ok"`` or a failure message). Contacts are collected every physics step."""
        t0, sim0 = _time.perf_counter(), self.time
        start = self.pose
        touched: list = []
        traj = [(start.x, start.y, start.yaw)]
        # rows continue the wrapped start heading (an engine's yaw joint may be unwrapped): no 2π jumps
        yaw_offset = start.yaw - float(self._read_qpos()[2])
        sub = self.control.substeps

        def tick_physics() -> None:
            self._physics_steps(sub, touched)
            q = self._read_qpos()
            traj.append((float(q[0]), float(q[1]), float(q[2]) + yaw_offset))

        status = f"timed out after {max_ticks} control ticks"
        for tick in range(max_ticks):
            target, done = command(tick)
            if done is not None:
                status = done
                break
            self._set_target(target)
            tick_physics()
        if brake:  # come to rest (at most 0.5 s) so the achieved pose is where the agent stays
            self._set_target((0.0, 0.0, 0.0))
            for _ in range(int(0.5 * self.control.control_hz)):
                v = self._velocity()
                if abs(v[0]) < 5e-3 and abs(v[1]) < 5e-3 and abs(v[2]) < 1e-2:
                    break
                tick_physics()
        steps = (len(traj) - 1) * sub
        achieved = self.pose
        cmd = commanded()
        contacts = self._contacts_from(dict.fromkeys(touched))
        return ActionResult(name, cmd, achieved, collided=bool(contacts), contacts=contacts,
                            obstacle_displacement=cmd.distance_to(achieved), success=status == "ok",
                            message=status, physics_steps=steps, sim_time=float(self.time - sim0),
                            wall_time=_time.perf_counter() - t0, trajectory=np.array(traj))

    def _goto(self, name: str, goal_xy: np.ndarray, goal_yaw: float, timeout: float) -> ActionResult:
        """Closed-loop go-to-pose (``controller.GoToController``: trapezoidal speed profiles, stall
        detection) until the goal, a stall or the timeout."""
        controller = GoToController(self.body, self.control, goal_xy, goal_yaw)
        pitch = self._pitch
        goal_yaw_wrapped = float(wrap_angle(goal_yaw))

        def command(tick: int):
            q = self._read_qpos()
            return controller.command(float(q[0]), float(q[1]), float(q[2]))

        max_ticks = max(1, int(math.ceil(timeout * self.control.control_hz)))
        return self._run(name, command, max_ticks,
                         lambda: AgentPose(float(goal_xy[0]), float(goal_xy[1]), goal_yaw_wrapped, pitch), brake=True)

    def _velocity_action(self, action: VelocityAction) -> ActionResult:
        """Hold the (clipped) body-frame velocity for ``action.duration``; the commanded pose is
        the unobstructed reference (``controller.ReferenceServo``) with the same servos. The
        target is constant, so the ticks run in one backend call (``_hold``) and the reference is
        integrated afterwards: no per-tick Python between physics steps."""
        t0, sim0 = _time.perf_counter(), self.time
        cfg = self.control
        target, was_clipped = clip_velocity(self.body, action)
        ticks = max(1, int(round(action.duration * cfg.control_hz)))
        q0 = tuple(float(v) for v in self._read_qpos())
        reference = ReferenceServo(self.body, cfg, target, q0, tuple(self._read_qvel()), self.servo_tau)
        start = self.pose
        # rows continue the wrapped start heading (an engine's yaw joint may be unwrapped): no 2π jumps
        yaw_offset = start.yaw - q0[2]
        touched: list = []
        rows = self._hold(target, ticks, touched)
        reference.advance(ticks)
        traj = np.empty((len(rows) + 1, 3))
        traj[0] = (start.x, start.y, start.yaw)
        traj[1:] = rows
        traj[1:, 2] += yaw_offset
        achieved = self.pose
        cmd = AgentPose(float(reference.ideal[0]), float(reference.ideal[1]), float(wrap_angle(reference.ideal[2])),
                        self._pitch)
        contacts = self._contacts_from(dict.fromkeys(touched))
        msg = "ok" + (" (clipped to body limits)" if was_clipped else "")
        return ActionResult(repr(action), cmd, achieved, collided=bool(contacts), contacts=contacts,
                            obstacle_displacement=cmd.distance_to(achieved), success=True, message=msg,
                            physics_steps=ticks * cfg.substeps, sim_time=float(self.time - sim0),
                            wall_time=_time.perf_counter() - t0, trajectory=traj)

    def _look(self, act: DiscreteAction) -> ActionResult:
        """Tilt the camera by ``look_angle_deg`` (clamped to the body's pitch range) at the body's
        angular speed; the base holds still while physics keeps running."""
        body = self.body
        sign = 1.0 if act == DiscreteAction.LOOK_UP else -1.0
        start = self._pitch
        goal = float(np.clip(start + sign * math.radians(self.control.look_angle_deg),
                             math.radians(body.pitch_min_deg), math.radians(body.pitch_max_deg)))
        ticks = int(math.ceil(abs(goal - start) / body.max_angular_speed * self.control.control_hz))
        rate = (goal - start) / max(ticks, 1)

        def command(tick: int):
            if tick >= ticks:
                self._pitch = goal
                return None, "ok"
            self._pitch = start + rate * (tick + 1)
            return np.zeros(3), None

        pose = self.pose
        result = self._run(act.name, command, ticks + 1, lambda: AgentPose(pose.x, pose.y, pose.yaw, goal), brake=True)
        if goal == start:
            result.message = f"camera pitch already at its {'upper' if sign > 0 else 'lower'} limit"
        return result
