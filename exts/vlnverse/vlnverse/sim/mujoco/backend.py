"""``MujocoSimulator``: the embedded physics backend behind ``make_simulator(backend="mujoco")``.

Physics at 200 Hz (``ControlConfig.physics_dt``), controllers at ``control_hz`` (50 Hz). The agent
is moved only by its actuators (velocity servos; a holonomic body's planar servo runs here, with one
limit on the planar force's magnitude); ``teleport``/``reset`` are the only writes to its
position, and they resolve penetration with a ring search for the nearest free spot instead of
letting the solver eject the agent. What to command (go-to profiles, stall detection, the velocity
reference, the planar servo force, the de-penetration search) is the backend-neutral
``vlnverse.sim.controller``, and the tick loop, sensor rates and placement are
``vlnverse.sim.physics.PhysicsSimulator``; this module only implements its MuJoCo primitives.
"""
from __future__ import annotations

import copy
import math

import numpy as np

from ...scenes.description import SceneDescription
from ..api import ControlConfig
from ..body import AgentBody
from ..controller import planar_servo_force
from ..physics import PhysicsSimulator
from ..sensors import LidarSpec, SensorSpec, depth_output
from ..types import Contact
from .builder import SERVO_TAU, build_model
from .gl import import_mujoco
from .render import RaycastRenderer, lidar_scan, make_renderer

# MuJoCo itself (its GL platform chosen first) comes with this module: parallel runs preload the
# backend module into the process their workers are forked from (``sim.api.backend_module``).
# Where it cannot be imported (a broken GL install), importing this module still works and the
# error is raised where a simulator is made (``MujocoSimulator`` imports MuJoCo again), as before.
try:
    import_mujoco()
except Exception:  # noqa: BLE001 - any import-time failure, raised again by MujocoSimulator()
    pass

#: Penetration deeper than this (m) counts as "inside an obstacle" for teleports.
PENETRATION_TOL = 1e-3


class MujocoSimulator(PhysicsSimulator):
    """MuJoCo implementation of ``Simulator`` (see ``vlnverse.sim.api``; shared logic in
    ``vlnverse.sim.physics.PhysicsSimulator``).

    Options: ``renderer`` = auto | gl | raycast; ``step_height`` (m, default the body's ``step_height``: obstacles lower
    than this do not block the agent, as in the occupancy map); ``label_table`` (label names whose
    order fixes the semantic ids; scene labels not in it are appended sorted); ``antialias``
    (4× MSAA for GL RGB at ``fast``); ``quality`` = fast | default | high (render preset, see
    ``vlnverse.sim.mujoco.gl_render.GLRenderer``; depth and segmentation do not depend on it);
    ``objects`` = primitives | meshes (``scenes.object_meshes``: detailed render meshes, an opt-in that
    changes every image; the default is what the shipped policies were trained on).
    """

    servo_tau = SERVO_TAU

    def __init__(self, scene: SceneDescription, body: AgentBody, *, sensors: list[SensorSpec],
                 control: ControlConfig, renderer: str = "auto", step_height: float | None = None,
                 label_table: list[str] | None = None, antialias: bool = False, quality: str = "default",
                 objects: str = "primitives"):
        self._mj = import_mujoco()
        super().__init__(scene, body, control)
        self._built = build_model(scene, body, step_height=step_height, physics_dt=control.physics_dt,
                                  label_table=label_table, quality=quality, objects=objects)
        self._m = copy.copy(self._built.model)
        self._d = self._mj.MjData(self._m)
        self._mj.mj_forward(self._m, self._d)
        self._renderer = make_renderer(renderer, self._built, self._m, antialias, quality, scene)
        self._caster = self._renderer if isinstance(self._renderer, RaycastRenderer) else RaycastRenderer(self._built, self._m)
        self._qadr, self._dadr, self._act = self._built.qpos_adr, self._built.dof_adr, self._built.actuators
        # Holonomic bodies: the planar (forward, lateral) servo is computed here at every physics
        # step so that its force limit applies to the force's magnitude (see ``_planar_servo``).
        self._target = [0.0, 0.0, 0.0]
        self._planar = body.holonomic
        self._planar_kv = body.mass / SERVO_TAU
        self._planar_fmax = body.mass * body.max_linear_accel
        self._ix, self._iy, self._iyaw = (int(i) for i in self._dadr)
        self._qyaw = int(self._qadr[2])
        self._qadr_t = tuple(int(i) for i in self._qadr)
        self._af, self._al, self._ayaw = (int(i) for i in self._act)
        for spec in sensors:
            self.attach_sensor(spec)

    # ------------------------------------------------------------------ state
    @property
    def renderer_name(self) -> str:
        """``gl`` or ``raycast``: the camera renderer in use."""
        return self._renderer.name

    @property
    def time(self) -> float:
        return float(self._d.time)

    @property
    def semantic_labels(self) -> list[str]:
        return list(self._built.labels)

    def _read_qpos(self):
        q, (i, j, k) = self._d.qpos, self._qadr_t
        return q.item(i), q.item(j), q.item(k)

    def _read_qvel(self):
        v = self._d.qvel
        return v.item(self._ix), v.item(self._iy), v.item(self._iyaw)

    def object_positions(self) -> dict[int, np.ndarray]:
        return {inst: self._d.xpos[b].copy() for inst, b in self._built.movable_bodies.items()}

    # ------------------------------------------------------------------ sensors
    def _lidar(self, spec: LidarSpec, pos: np.ndarray, rot: np.ndarray) -> np.ndarray:
        return lidar_scan(self._caster, self._d, pos, rot, spec.directions(), spec.min_range, spec.max_range)

    def _render_camera(self, spec, pos: np.ndarray, rot: np.ndarray, kinds) -> dict[str, np.ndarray]:
        raw_kinds = {"rgb" if k == "rgb" else "depth" if k == "depth" else "geom" for k in kinds}
        raw = self._renderer.render(self._d, pos, rot, spec.width, spec.height, spec.hfov_deg, raw_kinds)
        return self._finish(spec, raw, kinds)

    def _render_views(self, spec, positions, rotations, kinds) -> list[dict[str, np.ndarray]]:
        """A panorama's views: the GL renderer updates the scene once for all views sharing a
        position and then only moves the camera (``GLRenderer.render_views``)."""
        render_views = getattr(self._renderer, "render_views", None)
        if render_views is None or any(not np.array_equal(p, positions[0]) for p in positions):
            return super()._render_views(spec, positions, rotations, kinds)
        raw_kinds = {"rgb" if k == "rgb" else "depth" if k == "depth" else "geom" for k in kinds}
        raws = render_views(self._d, positions[0], rotations, spec.width, spec.height, spec.hfov_deg, raw_kinds)
        return [self._finish(spec, raw, kinds) for raw in raws]

    def _finish(self, spec, raw: dict[str, np.ndarray], kinds) -> dict[str, np.ndarray]:
        """Raw renderer images → the outputs ``kinds`` as ``spec`` documents them."""
        out = {}
        for k in kinds:
            if k == "rgb":
                out[k] = raw["rgb"]
            elif k == "depth":
                out[k] = depth_output(raw["depth"], spec)
            elif k == "semantic":
                g = raw["geom"]
                out[k] = np.where(g >= 0, self._built.geom_label_id[np.maximum(g, 0)], 0).astype(np.int32)
            else:
                g = raw["geom"]
                out[k] = np.where(g >= 0, self._built.geom_instance[np.maximum(g, 0)], -1).astype(np.int32)
        return out

    # ------------------------------------------------------------------ placement
    def _write_agent(self, x: float, y: float, yaw: float) -> None:
        self._d.qpos[self._qadr] = (x, y, yaw)
        self._d.qvel[self._dadr] = 0.0
        self._set_target((0.0, 0.0, 0.0))

    def _set_target(self, target) -> None:
        """Body-frame velocity target (forward, lateral, yaw rate) of the agent's servos."""
        tf, tl, tw = (float(v) for v in target)
        self._target = [tf, tl, tw]
        ctrl = self._d.ctrl
        if self._planar:  # the forward/lateral motors are set before each physics step (``_planar_servo``)
            ctrl[self._ayaw] = tw
            self._planar_servo()
        else:
            ctrl[self._af], ctrl[self._al], ctrl[self._ayaw] = tf, tl, tw

    def _planar_servo(self) -> None:
        """Holonomic bodies: planar force = kv × (target − velocity) in the body frame, scaled down
        to ``mass × max_linear_accel`` in magnitude; written to the forward/lateral motors. Run
        before every physics step (MuJoCo's per-actuator limits would clip each axis separately);
        ``_physics_steps`` and ``_hold`` inline it."""
        d = self._d
        qvel = d.qvel
        ff, fl = planar_servo_force(self._target[0], self._target[1], qvel.item(self._ix), qvel.item(self._iy),
                                    d.qpos.item(self._qyaw), self._planar_kv, self._planar_fmax)
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

    def _settle(self) -> None:
        self._mj.mj_forward(self._m, self._d)

    def _reset_physics(self) -> None:
        self._mj.mj_resetData(self._m, self._d)

    # ------------------------------------------------------------------ stepping
    def _physics_steps(self, n: int, touched: list) -> None:
        """``n`` physics steps (``_hold`` with one tick of ``n`` steps)."""
        self._steps(1, n, touched, None)

    def _hold(self, target, ticks: int, touched: list) -> list[tuple[float, float, float]]:
        """``ticks`` control ticks at a constant target in one loop (same physics as ticking
        ``_physics_steps``): no return to the shared tick loop between them."""
        self._set_target(target)
        rows: list = []
        self._steps(ticks, self.control.substeps, touched, rows)
        return rows

    def _steps(self, ticks: int, sub: int, touched: list, rows: list | None) -> None:
        """``ticks`` × ``sub`` physics steps; a holonomic body's planar servo (``_planar_servo``) is
        evaluated before every step on plain floats;
        contacts are read only in steps that have any (``ncon``); (x, y, yaw) is appended to
        ``rows`` after every ``sub`` steps when given. Differential-drive bodies use MuJoCo's
        velocity servos (actuator level): Python only checks ``ncon`` between steps."""
        mj_step, m, d, agent_contacts = self._mj.mj_step, self._m, self._d, self._agent_contacts
        # memoryviews of MjData's arrays: indexing gives/takes plain floats (~3x faster than numpy)
        qpos, qvel, ctrl = memoryview(d.qpos), memoryview(d.qvel), memoryview(d.ctrl)
        qx, qy, qyaw = self._qadr_t
        if self._planar:
            ix, iy, af, al = self._ix, self._iy, self._af, self._al
            kv, fmax = self._planar_kv, self._planar_fmax
            tf, tl = self._target[0], self._target[1]
            cos, sin, hypot = math.cos, math.sin, math.hypot
            for _ in range(ticks):
                for _ in range(sub):
                    # ``controller.planar_servo_force`` inlined (the same expressions: same numbers)
                    vx, vy, yaw = qvel[ix], qvel[iy], qpos[qyaw]
                    c, s = cos(yaw), sin(yaw)
                    ff = kv * (tf - (c * vx + s * vy))
                    fl = kv * (tl - (c * vy - s * vx))
                    norm = hypot(ff, fl)
                    if norm > fmax:
                        scale = fmax / norm
                        ff, fl = ff * scale, fl * scale
                    ctrl[af] = ff
                    ctrl[al] = fl
                    mj_step(m, d)
                    if d.ncon:
                        touched.extend(agent_contacts())
                if rows is not None:
                    rows.append((qpos[qx], qpos[qy], qpos[qyaw]))
        else:
            for _ in range(ticks):
                for _ in range(sub):
                    mj_step(m, d)
                    if d.ncon:
                        touched.extend(agent_contacts())
                if rows is not None:
                    rows.append((qpos[qx], qpos[qy], qpos[qyaw]))

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

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
