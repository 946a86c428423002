"""``MujocoSimulator``: the embedded physics backend behind ``make_simulator(backend="mujoco")``.

Physics at 200 Hz (``ControlConfig.physics_dt``), controllers at ``control_hz`` (50 Hz). The agent
is moved only by its actuators (velocity servos; a holonomic body's planar servo runs here, with one
limit on the planar force's magnitude); ``teleport``/``reset`` are the only writes to its
position, and they resolve penetration with a ring search for the nearest free spot instead of
letting the solver eject the agent.
"""
from __future__ import annotations

import copy
import math
import time as _time
import warnings
from typing import Any, Callable

import numpy as np

from ...core.errors import ConfigError, SceneError, UnknownNameError
from ...scenes.description import SceneDescription
from ..api import ControlConfig, Simulator
from ..body import AgentBody
from ..sensors import LidarSpec, PanoramaSpec, SensorSpec, sensor_world_pose, validate_sensor
from ..types import (ActionResult, AgentPose, Contact, DiscreteAction, InvalidActionError, VelocityAction,
                     WaypointAction, wrap_angle)
from .builder import SERVO_TAU, build_model
from .gl import import_mujoco
from .render import RaycastRenderer, lidar_scan, make_renderer

#: Penetration deeper than this (m) counts as "inside an obstacle" for teleports.
PENETRATION_TOL = 1e-3
#: Ring spacing (m) and maximum radius (m) of the nearest-free-pose search.
RING_STEP = 0.02
RING_MAX = 3.0
#: Proportional gains of the closed-loop controller near its goal (1/s).
KP_LINEAR = 8.0
KP_ANGULAR = 8.0


class MujocoSimulator(Simulator):
    """MuJoCo implementation of ``Simulator`` (see ``vlnverse.sim.api``).

    Options: ``renderer`` = auto | gl | raycast; ``step_height`` (m, default 0.15: obstacles lower
    than this do not block the agent, as in the occupancy map); ``label_table`` (label names whose
    order fixes the semantic ids; scene labels not in it are appended sorted); ``antialias``
    (4× MSAA for GL RGB at ``fast``); ``quality`` = fast | default | high (render preset, see
    ``vlnverse.sim.mujoco.render.GLRenderer``; depth and segmentation do not depend on it).
    """

    def __init__(self, scene: SceneDescription, body: AgentBody, *, sensors: list[SensorSpec],
                 control: ControlConfig, renderer: str = "auto", step_height: float = 0.15,
                 label_table: list[str] | None = None, antialias: bool = False, quality: str = "default"):
        self._mj = import_mujoco()
        self.scene, self.body, self.control = scene, body, control
        self._built = build_model(scene, body, step_height=step_height, physics_dt=control.physics_dt,
                                  label_table=label_table, quality=quality)
        self._m = copy.copy(self._built.model)
        self._d = self._mj.MjData(self._m)
        self._mj.mj_forward(self._m, self._d)
        self._renderer = make_renderer(renderer, self._built, self._m, antialias, quality)
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
        vx, vy = qvel[self._ix], qvel[self._iy]
        yaw = d.qpos[self._qyaw]
        c, s = math.cos(yaw), math.sin(yaw)
        kv = self._planar_kv
        ff = kv * (self._target[0] - (c * vx + s * vy))
        fl = kv * (self._target[1] - (c * vy - s * vx))
        norm = math.hypot(ff, fl)
        if norm > self._planar_fmax:
            scale = self._planar_fmax / norm
            ff, fl = ff * scale, fl * scale
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
        """Nearest collision-free agent position to (x, y): rings ``RING_STEP`` apart outward; on the
        first ring with free points, bisect each free direction back to the obstacle boundary
        (1 mm) and keep the closest. Returns (x, y, geoms penetrated at the original spot)."""
        hits = self._penetrating(x, y, yaw)
        if not hits:
            return x, y, []
        for r in np.arange(RING_STEP, RING_MAX + 1e-9, RING_STEP):
            n = max(8, int(math.ceil(2 * math.pi * r / RING_STEP)))
            dirs = np.stack([np.cos(2 * math.pi * np.arange(n) / n), np.sin(2 * math.pi * np.arange(n) / n)], axis=1)
            free = [d for d in dirs if not self._penetrating(x + r * d[0], y + r * d[1], yaw)]
            if not free:
                continue
            best = (r, free[0])
            for d in free:
                lo, hi = r - RING_STEP, r
                while hi - lo > 1e-3:
                    mid = (lo + hi) / 2
                    if self._penetrating(x + mid * d[0], y + mid * d[1], yaw):
                        lo = mid
                    else:
                        hi = mid
                if hi < best[0]:
                    best = (hi, d)
            return x + best[0] * best[1][0], y + best[0] * best[1][1], hits
        raise SceneError(f"scene '{self.scene.scene_id}': no collision-free pose within {RING_MAX} m of "
                         f"({x:.3f}, {y:.3f}) for an agent of radius {self.body.radius} m")

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
        sub = self.control.substeps

        planar = self._planar_servo if self._planar else None

        def tick_physics() -> None:
            for _ in range(sub):
                if planar is not None:
                    planar()
                mj.mj_step(m, d)
                if d.ncon:
                    touched.extend(self._agent_contacts())
            q = d.qpos[self._qadr]
            traj.append((float(q[0]), float(q[1]), float(q[2])))

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
        """Closed-loop go-to-pose with trapezoidal speed profiles, stall and timeout detection."""
        body, cfg = self.body, self.control
        # Plan with half the actuators' acceleration so the servos (time constant SERVO_TAU) keep up
        # while braking; the force limits still cap the true acceleration at the body's maximum.
        a_lin, a_ang = 0.5 * body.max_linear_accel, 0.5 * math.radians(body.max_angular_accel_deg)
        vmax, wmax = body.max_linear_speed, body.max_angular_speed
        pos_tol, yaw_tol = cfg.position_tolerance, math.radians(cfg.yaw_tolerance_deg)
        window = max(1, int(round(cfg.stall_window * cfg.control_hz)))
        history: list[tuple[float, float, float]] = []
        pitch = self._pitch
        goal_yaw_wrapped = float(wrap_angle(goal_yaw))

        def profile(err: float, amax: float, vcap: float, kp: float) -> float:
            mag = min(vcap, math.sqrt(2.0 * amax * abs(err)), kp * abs(err))
            return math.copysign(mag, err)

        def command(tick: int):
            q = self._d.qpos[self._qadr]
            yaw = float(q[2])
            err = goal_xy - q[:2]
            dist = float(np.hypot(*err))
            yaw_err = float(wrap_angle(goal_yaw - yaw))
            if dist < pos_tol and abs(yaw_err) < yaw_tol:
                return None, "ok"
            # Stalled: told to move but the base moved (and turned, 0.2 m per rad) less than
            # stall_progress over the last stall_window seconds.
            history.append((float(q[0]), float(q[1]), yaw))
            if len(history) > window and (math.hypot(history[-1][0] - history[-window - 1][0],
                                                     history[-1][1] - history[-window - 1][1])
                                          + 0.2 * abs(history[-1][2] - history[-window - 1][2])) < cfg.stall_progress:
                return None, f"stalled {dist:.3f} m / {math.degrees(abs(yaw_err)):.1f} deg from the goal"
            c, s = math.cos(yaw), math.sin(yaw)
            ex, ey = c * err[0] + s * err[1], -s * err[0] + c * err[1]  # goal offset in the body frame
            if body.holonomic:
                speed = profile(dist, a_lin, vmax, KP_LINEAR) if dist >= pos_tol else 0.0
                vx, vy = (speed * ex / dist, speed * ey / dist) if dist > 1e-9 else (0.0, 0.0)
                w = profile(yaw_err, a_ang, wmax, KP_ANGULAR)
            else:
                vy = 0.0
                if dist >= max(pos_tol, 0.05):
                    heading_err = math.atan2(ey, ex)
                    if abs(heading_err) > math.pi / 2:  # goal behind: reverse rather than spin round
                        heading_err = float(wrap_angle(heading_err - math.pi))
                        direction = -1.0
                    else:
                        direction = 1.0
                    w = profile(heading_err, a_ang, wmax, KP_ANGULAR)
                    vx = direction * abs(profile(dist, a_lin, vmax, KP_LINEAR)) * max(0.0, math.cos(heading_err)) ** 4 \
                        if abs(heading_err) < 0.35 else 0.0
                else:
                    vx = profile(ex, a_lin, vmax, KP_LINEAR) if abs(ex) >= pos_tol else 0.0
                    w = profile(yaw_err, a_ang, wmax, KP_ANGULAR)
            return np.array([vx, vy, w]), None

        max_ticks = max(1, int(math.ceil(timeout * cfg.control_hz)))
        return self._run(name, command, max_ticks,
                         lambda: AgentPose(float(goal_xy[0]), float(goal_xy[1]), goal_yaw_wrapped, pitch), brake=True)

    def _velocity_action(self, action: VelocityAction) -> ActionResult:
        body, cfg = self.body, self.control
        if not body.holonomic and action.lateral != 0.0:
            raise InvalidActionError(f"VelocityAction.lateral = {action.lateral}: body '{body.name}' is differential "
                                     "drive (holonomic: false) and cannot move sideways; expected 0")
        v = float(np.clip(action.v, -body.max_linear_speed, body.max_linear_speed))
        lat = float(np.clip(action.lateral, -body.max_linear_speed, body.max_linear_speed))
        speed = math.hypot(v, lat)
        if speed > body.max_linear_speed:
            v, lat = v * body.max_linear_speed / speed, lat * body.max_linear_speed / speed
        w = float(np.clip(action.omega, -body.max_angular_speed, body.max_angular_speed))
        target = np.array([v, lat, w])
        ticks = max(1, int(round(action.duration * cfg.control_hz)))
        # The commanded pose: the same command executed by an unobstructed body with the same
        # body-frame velocity servos (time constant SERVO_TAU, force limits as accelerations), so
        # free-space motion, arcs included, has (near) zero obstacle displacement.
        sub_dt = cfg.physics_dt
        lateral_accel = body.max_linear_accel if body.holonomic else 9.81
        acc_max = np.array([body.max_linear_accel, lateral_accel, math.radians(body.max_angular_accel_deg)])
        ideal = [*map(float, self._d.qpos[self._qadr])]  # x, y, yaw (plain floats: this runs every step)
        ideal_vel = [*map(float, self._d.qvel[self._dadr])]  # world-frame vx, vy, yaw rate
        (tf, tl, tw), (af, al, aw) = target.tolist(), acc_max.tolist()
        holonomic = body.holonomic

        def command(tick: int):
            if tick >= ticks:
                return None, "ok"
            vx, vy, w = ideal_vel
            x, y, yaw = ideal
            for _ in range(cfg.substeps):
                c, s = math.cos(yaw), math.sin(yaw)
                acc_f = (tf - (c * vx + s * vy)) / SERVO_TAU
                acc_l = (tl - (-s * vx + c * vy)) / SERVO_TAU
                if holonomic:  # one limit on the planar acceleration's magnitude (``_planar_servo``)
                    norm = math.hypot(acc_f, acc_l)
                    if norm > af:
                        acc_f, acc_l = acc_f * af / norm, acc_l * af / norm
                else:
                    acc_f, acc_l = min(af, max(-af, acc_f)), min(al, max(-al, acc_l))
                acc_w = min(aw, max(-aw, (tw - w) / SERVO_TAU))
                vx += sub_dt * (c * acc_f - s * acc_l)
                vy += sub_dt * (s * acc_f + c * acc_l)
                w += sub_dt * acc_w
                x, y, yaw = x + sub_dt * vx, y + sub_dt * vy, yaw + sub_dt * w
            ideal_vel[:] = (vx, vy, w)
            ideal[:] = (x, y, yaw)
            return target, None

        pitch = self._pitch
        clipped = "" if np.allclose(target, [action.v, action.lateral, action.omega]) else " (clipped to body limits)"
        result = self._run(repr(action), command, ticks + 1,
                           lambda: AgentPose(float(ideal[0]), float(ideal[1]), float(wrap_angle(ideal[2])), pitch),
                           brake=False)
        result.message += clipped
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
