"""``MujocoSimulator``: the embedded physics backend behind ``make_simulator(backend="mujoco")``.

Physics at 200 Hz (``ControlConfig.physics_dt``), controllers at ``control_hz`` (50 Hz). The agent
is moved only by its actuators (velocity servos; a holonomic body's planar servo runs here, with one
limit on the planar force's magnitude); ``teleport``/``reset`` are the only writes to its
position, and they resolve penetration with a ring search for the nearest free spot instead of
letting the solver eject the agent. What to command (go-to profiles, stall detection, the velocity
reference, the planar servo force, the de-penetration search) is the backend-neutral
``vlnverse.sim.controller``; this module only talks to MuJoCo.
"""
from __future__ import annotations

import copy
import math
import time as _time
import warnings
from typing import Any, Callable

import numpy as np

from ...core.errors import ConfigError, UnknownNameError
from ...scenes.description import SceneDescription
from ..api import ControlConfig, Simulator
from ..body import AgentBody
from ..controller import (RING_MAX, RING_STEP, GoToController, ReferenceServo, clip_velocity, nearest_free,
                          planar_servo_force)
from ..sensors import LidarSpec, PanoramaSpec, SensorSpec, sensor_world_pose, validate_sensor
from ..types import (ActionResult, AgentPose, Contact, DiscreteAction, InvalidActionError, VelocityAction,
                     WaypointAction, wrap_angle)
from .builder import SERVO_TAU, build_model
from .gl import import_mujoco
from .render import RaycastRenderer, lidar_scan, make_renderer

#: Penetration deeper than this (m) counts as "inside an obstacle" for teleports.
PENETRATION_TOL = 1e-3


class MujocoSimulator(Simulator):
    """MuJoCo implementation of ``Simulator`` (see ``vlnverse.sim.api``).

    Options: ``renderer`` = auto | gl | raycast; ``step_height`` (m, default the body's ``step_height``: obstacles lower
    than this do not block the agent, as in the occupancy map); ``label_table`` (label names whose
    order fixes the semantic ids; scene labels not in it are appended sorted); ``antialias``
    (4× MSAA for GL RGB at ``fast``); ``quality`` = fast | default | high (render preset, see
    ``vlnverse.sim.mujoco.render.GLRenderer``; depth and segmentation do not depend on it).
    """

    def __init__(self, scene: SceneDescription, body: AgentBody, *, sensors: list[SensorSpec],
                 control: ControlConfig, renderer: str = "auto", step_height: float | None = None,
                 label_table: list[str] | None = None, antialias: bool = False, quality: str = "default"):
        self._mj = import_mujoco()
        self.scene, self.body, self.control = scene, body, control
        self._built = build_model(scene, body, step_height=step_height, physics_dt=control.physics_dt,
                                  label_table=label_table, quality=quality)
        self._m = copy.copy(self._built.model)
        self._d = self._mj.MjData(self._m)
        self._mj.mj_forward(self._m, self._d)
        self._renderer = make_renderer(renderer, self._built, self._m, antialias, quality, scene)
        self._caster = self._renderer if isinstance(self._renderer, RaycastRenderer) else RaycastRenderer(self._built, self._m)
        self._sensors: dict[str, SensorSpec] = {}
        self._frames: dict[str, tuple[float, dict[str, np.ndarray]]] = {}
        self.render_counts: dict[str, int] = {}
        self._pitch = 0.0
        lo, hi = scene.bounds()
        self._scene_xy_bounds = (lo[:2], hi[:2])
        self._qadr, self._dadr, self._act = self._built.qpos_adr, self._built.dof_adr, self._built.actuators
        # Holonomic bodies: the planar (forward, lateral) servo is computed here at every physics
        # step so that its force limit applies to the force's magnitude (see ``_planar_servo``).
        self._target = [0.0, 0.0, 0.0]
        self._planar = body.holonomic
        self._planar_kv = body.mass / SERVO_TAU
        self._planar_fmax = body.mass * body.max_linear_accel
        self._ix, self._iy, self._iyaw = (int(i) for i in self._dadr)
        self._qyaw = int(self._qadr[2])
        self._af, self._al, self._ayaw = (int(i) for i in self._act)
        for spec in sensors:
            self.attach_sensor(spec)

    # ------------------------------------------------------------------ state
    @property
    def renderer_name(self) -> str:
        """``gl`` or ``raycast``: the camera renderer in use."""
        return self._renderer.name

    @property
    def pose(self) -> AgentPose:
        q = self._d.qpos[self._qadr]
        return AgentPose(float(q[0]), float(q[1]), float(wrap_angle(q[2])), self._pitch)

    @property
    def time(self) -> float:
        return float(self._d.time)

    @property
    def semantic_labels(self) -> list[str]:
        return list(self._built.labels)

    @property
    def sensors(self) -> dict[str, SensorSpec]:
        return dict(self._sensors)

    def _velocity(self) -> np.ndarray:
        """Body-frame (forward, lateral, yaw rate)."""
        vx, vy, wz = self._d.qvel[self._dadr]
        yaw = self._d.qpos[self._qadr[2]]
        c, s = math.cos(yaw), math.sin(yaw)
        return np.array([c * vx + s * vy, -s * vx + c * vy, wz])

    def object_positions(self) -> dict[int, np.ndarray]:
        return {inst: self._d.xpos[b].copy() for inst, b in self._built.movable_bodies.items()}

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

    def _render_sensor(self, spec: SensorSpec, pose: AgentPose) -> dict[str, np.ndarray]:
        floor = self._built.floor_z
        if isinstance(spec, LidarSpec):
            # LiDAR ignores the articulated camera pitch: only the mount pitch tilts it.
            pos, rot = sensor_world_pose(AgentPose(pose.x, pose.y, pose.yaw, 0.0), spec.mount, self.body.height / 2.0,
                                         floor_z=floor)
            return {spec.name: lidar_scan(self._caster, self._d, pos, rot, spec.directions(), spec.min_range,
                                          spec.max_range)}
        if isinstance(spec, PanoramaSpec):
            views: dict[str, list[np.ndarray]] = {m: [] for m in spec.modalities}
            for i in range(spec.views):
                raw = self._render_camera(spec, pose, 2 * math.pi * i / spec.views, spec.modalities)
                for m in spec.modalities:
                    views[m].append(raw[m])
            return {f"{spec.name}_{m}": np.stack(v) for m, v in views.items()}
        return {spec.name: self._render_camera(spec, pose, 0.0, (spec.kind,))[spec.kind]}

    def _render_camera(self, spec, pose: AgentPose, yaw_offset: float, kinds) -> dict[str, np.ndarray]:
        pos, rot = sensor_world_pose(pose, spec.mount, self.body.camera_height, yaw_offset, self._built.floor_z)
        raw_kinds = {"rgb" if k == "rgb" else "depth" if k == "depth" else "geom" for k in kinds}
        raw = self._renderer.render(self._d, pos, rot, spec.width, spec.height, spec.hfov_deg, raw_kinds)
        out = {}
        for k in kinds:
            if k == "rgb":
                out[k] = raw["rgb"]
            elif k == "depth":
                d = np.clip(np.nan_to_num(raw["depth"], posinf=spec.max_depth), spec.min_depth, spec.max_depth)
                if spec.normalize:
                    d = (d - spec.min_depth) / (spec.max_depth - spec.min_depth)
                out[k] = d.astype(np.float32)
            elif k == "semantic":
                g = raw["geom"]
                out[k] = np.where(g >= 0, self._built.geom_label_id[np.maximum(g, 0)], 0).astype(np.int32)
            else:
                g = raw["geom"]
                out[k] = np.where(g >= 0, self._built.geom_instance[np.maximum(g, 0)], -1).astype(np.int32)
        return out

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
    def _set_agent(self, x: float, y: float, yaw: float) -> None:
        self._d.qpos[self._qadr] = (x, y, yaw)
        self._d.qvel[self._dadr] = 0.0
        self._set_target((0.0, 0.0, 0.0))

    def _set_target(self, target) -> None:
        """Body-frame velocity target (forward, lateral, yaw rate) of the agent's servos."""
        self._target = [float(v) for v in target]
        if self._planar:
            self._d.ctrl[self._ayaw] = self._target[2]
            self._planar_servo()
        else:
            self._d.ctrl[self._act] = self._target

    def _planar_servo(self) -> None:
        """Holonomic bodies: planar force = kv × (target − velocity) in the body frame, scaled down
        to ``mass × max_linear_accel`` in magnitude; written to the forward/lateral motors. Called
        before every physics step (MuJoCo's per-actuator limits would clip each axis separately)."""
        d = self._d
        qvel = d.qvel
        ff, fl = planar_servo_force(self._target[0], self._target[1], qvel[self._ix], qvel[self._iy],
                                    d.qpos[self._qyaw], self._planar_kv, self._planar_fmax)
        ctrl = d.ctrl
        ctrl[self._af] = ff
        ctrl[self._al] = fl

    def _penetrating(self, x: float, y: float, yaw: float) -> list[int]:
        """Geom ids the agent would penetrate at (x, y) (kinematics + collision probe only)."""
        mj = self._mj
        self._d.qpos[self._qadr] = (x, y, yaw)
        mj.mj_kinematics(self._m, self._d)
        mj.mj_collision(self._m, self._d)
        return self._agent_contacts(-PENETRATION_TOL)

    def _agent_contacts(self, max_dist: float = 0.0) -> list[int]:
        n = self._d.ncon
        if n == 0:
            return []
        con = self._d.contact
        g = con.geom[:n]
        ag = self._built.agent_geom
        mask = ((g[:, 0] == ag) | (g[:, 1] == ag)) & (con.dist[:n] <= max_dist)
        if not mask.any():
            return []
        other = np.where(g[mask, 0] == ag, g[mask, 1], g[mask, 0])
        return [int(o) for o in other]

    def _nearest_free(self, x: float, y: float, yaw: float) -> tuple[float, float, list[int]]:
        """Nearest collision-free agent position to (x, y) (``controller.nearest_free`` with this
        scene's penetration probe). Returns (x, y, geoms penetrated at the original spot)."""
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
        self._set_agent(x, y, pose.yaw)
        self._pitch = pitch
        self._mj.mj_forward(self._m, self._d)
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
        self._mj.mj_resetData(self._m, self._d)
        self._frames.clear()
        result = self._place(pose)
        if result.collided:
            warnings.warn(f"vlnverse.sim: {result.message}", RuntimeWarning, stacklevel=2)
        return self.get_observations()

    # ------------------------------------------------------------------ contacts
    def _contacts_from(self, geom_ids) -> list[Contact]:
        built = self._built
        seen: dict[tuple[int, str], Contact] = {}
        for gid in geom_ids:
            label = built.labels[built.geom_label_id[gid]]
            key = (int(built.geom_instance[gid]), label)
            if key not in seen:
                pos = tuple(float(v) for v in self._d.geom_xpos[gid])
                seen[key] = Contact(label, key[0], built.geom_name[gid], pos, bool(built.geom_movable[gid]))
        return list(seen.values())

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
        mj, m, d = self._mj, self._m, self._d
        t0, sim0 = _time.perf_counter(), d.time
        start = self.pose
        touched: list[int] = []
        traj = [(start.x, start.y, start.yaw)]
        # rows continue the wrapped start heading (the hinge's qpos is unwrapped): no 2π jumps
        yaw_offset = start.yaw - float(d.qpos[self._qyaw])
        sub = self.control.substeps

        mj_step, agent_contacts, qadr = mj.mj_step, self._agent_contacts, self._qadr
        qpos, qvel, ctrl = d.qpos, d.qvel, d.ctrl
        if self._planar:  # the planar servo (``_planar_servo``) inlined: it runs every physics step
            ix, iy, iyaw, af, al = (int(self._ix), int(self._iy), int(self._qyaw), int(self._af), int(self._al))
            kv, fmax = self._planar_kv, self._planar_fmax

            def tick_physics() -> None:
                tf, tl = self._target[0], self._target[1]
                for _ in range(sub):
                    # .item(): plain floats, ~3x faster arithmetic than numpy scalars
                    ctrl[af], ctrl[al] = planar_servo_force(tf, tl, qvel.item(ix), qvel.item(iy), qpos.item(iyaw),
                                                            kv, fmax)
                    mj_step(m, d)
                    if d.ncon:
                        touched.extend(agent_contacts())
                q = qpos[qadr]
                traj.append((float(q[0]), float(q[1]), float(q[2]) + yaw_offset))
        else:  # differential drive: MuJoCo velocity servos (actuator level); only contacts are read here

            def tick_physics() -> None:
                for _ in range(sub):
                    mj_step(m, d)
                    if d.ncon:
                        touched.extend(agent_contacts())
                q = qpos[qadr]
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
                            message=status, physics_steps=steps, sim_time=float(d.time - sim0),
                            wall_time=_time.perf_counter() - t0, trajectory=np.array(traj))

    def _goto(self, name: str, goal_xy: np.ndarray, goal_yaw: float, timeout: float) -> ActionResult:
        """Closed-loop go-to-pose (``controller.GoToController``: trapezoidal speed profiles, stall
        detection) until the goal, a stall or the timeout."""
        controller = GoToController(self.body, self.control, goal_xy, goal_yaw)
        pitch = self._pitch
        goal_yaw_wrapped = float(wrap_angle(goal_yaw))

        def command(tick: int):
            q = self._d.qpos[self._qadr]
            return controller.command(float(q[0]), float(q[1]), float(q[2]))

        max_ticks = max(1, int(math.ceil(timeout * self.control.control_hz)))
        return self._run(name, command, max_ticks,
                         lambda: AgentPose(float(goal_xy[0]), float(goal_xy[1]), goal_yaw_wrapped, pitch), brake=True)

    def _velocity_action(self, action: VelocityAction) -> ActionResult:
        """Hold the (clipped) body-frame velocity for ``action.duration``; the commanded pose is
        the unobstructed reference (``controller.ReferenceServo``) with the same servos."""
        cfg = self.control
        target, was_clipped = clip_velocity(self.body, action)
        ticks = max(1, int(round(action.duration * cfg.control_hz)))
        reference = ReferenceServo(self.body, cfg, target, tuple(self._d.qpos[self._qadr]),
                                   tuple(self._d.qvel[self._dadr]), SERVO_TAU)

        def command(tick: int):
            if tick >= ticks:
                return None, "ok"
            reference.advance()
            return target, None

        pitch = self._pitch
        result = self._run(repr(action), command, ticks + 1,
                           lambda: AgentPose(float(reference.ideal[0]), float(reference.ideal[1]),
                                             float(wrap_angle(reference.ideal[2])), pitch),
                           brake=False)
        result.message += " (clipped to body limits)" if was_clipped else ""
        return result

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

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
