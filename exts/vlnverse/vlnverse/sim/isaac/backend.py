"""``IsaacSimulator``: the Isaac Sim 6.x / 5.x (PhysX + RTX) backend behind ``make_simulator(backend="isaac")``.

Only the engine primitives of ``vlnverse.sim.physics.PhysicsSimulator`` live here — the tick loop,
actions, controller, sensor rates, collision modes and episode logic are the shared ones the
MuJoCo backend runs. Every Omniverse call goes through ``vlnverse.sim.isaac.adapter`` (its ``API``
lists them); the stage is authored with plain OpenUSD by ``vlnverse.sim.isaac.stage``.

- The agent is a PhysX rigid body (planar D6 joint) with ``PhysxContactReportAPI``; its velocity
  servos are applied as a world-frame wrench before every physics step
  (``controller.servo_wrench``: the MuJoCo model's gains and limits).
- Contacts are read from PhysX's contact report after every physics step.
- ``reset``/``teleport`` write the pose, then run the paper's rendering warm-up (20 physics +
  render steps, ``adapter.WARMUP_STEPS``) so the next frame shows the new pose; the agent is held
  at rest meanwhile. ``render_at`` (no state change) renders the same number of frames without
  stepping physics.
- Cameras are USD cameras authored at the configured resolution and horizontal FoV (aperture and
  focal length, ``stage.author_camera``), read through ``isaacsim.sensors.camera.Camera`` with the
  distance-to-image-plane (planar depth), semantic and instance-id annotators; LiDAR is PhysX ray
  casts in the ``LidarSpec`` directions.

Options: ``headless`` (default True; ignored inside a running Kit app), ``step_height``,
``label_table`` (as the MuJoCo backend), ``objects`` = primitives | meshes (``meshes``: the
objects' render meshes and the baked surfaces' light-mapped meshes are authored, visual only,
with the home's baked light as the USD writer draws it, and the collision primitives they draw
hidden from the cameras; ``stage.author_stage``), ``quality`` (checked like the MuJoCo backend's;
RTX draws every preset the same), ``stage_dir`` (where the
authored stage is written; default a temporary folder), ``adapter`` (an ``IsaacAdapter``, for tests).
"""
from __future__ import annotations

import math
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from ...scenes.description import SceneDescription
from ..api import ControlConfig
from ..body import AgentBody
from ..controller import servo_wrench
from ..labels import label_table_for
from ..physics import PhysicsSimulator
from ..sensors import CameraSpec, LidarSpec, PanoramaSpec, SensorSpec, depth_output
from ..types import Contact, wrap_angle
from .adapter import WARMUP_STEPS, IsaacAdapter, require_isaacsim
from .stage import (AGENT_COLLIDER, AGENT_PATH, CAMERA_ROOT, PHYSICS_SCENE, author_camera, author_stage, quat_wxyz,
                    yaw_of_wxyz)


class IsaacSimulator(PhysicsSimulator):
    """Isaac Sim implementation of ``Simulator`` (see module doc)."""

    def __init__(self, scene: SceneDescription, body: AgentBody, *, sensors: list[SensorSpec],
                 control: ControlConfig, headless: bool = True, step_height: float | None = None,
                 label_table: list[str] | None = None, stage_dir: str | Path | None = None,
                 adapter: IsaacAdapter | None = None, quality: str = "default", objects: str = "primitives"):
        from ...core.errors import ConfigError
        from ...scenes.object_meshes import check_objects
        from ..types import RENDER_QUALITIES

        if quality not in RENDER_QUALITIES:
            raise ConfigError(f"got {quality!r}", field="quality", expected="one of " + ", ".join(RENDER_QUALITIES))
        check_objects(objects, "objects")
        if adapter is None:
            require_isaacsim()
            adapter = IsaacAdapter()
        adapter.start(headless)  # SimulationApp before any other Omniverse import
        super().__init__(scene, body, control)
        self._a = adapter
        self._labels = label_table_for(scene, label_table)
        self._label_id = {name: i for i, name in enumerate(self._labels)}
        self._own_dir = stage_dir is None
        self._dir = Path(tempfile.mkdtemp(prefix="vlnverse-isaac-")) if stage_dir is None else Path(stage_dir)
        self.layout = author_stage(scene, body, self._dir / f"{scene.scene_id or 'scene'}.usda", step_height=step_height,
                                   objects=objects)
        adapter.open_stage(self.layout.usd_path, control.physics_dt, PHYSICS_SCENE)
        adapter.enable_contact_report(AGENT_PATH)
        for path, info in {**self.layout.colliders, **self.layout.visuals}.items():
            adapter.add_semantic_label(path, info.label)
        self._agent = adapter.rigid_prim(AGENT_PATH)
        self._objects = {iid: adapter.rigid_prim(path) for iid, path in self.layout.objects.items()}
        adapter.reset({AGENT_PATH: self._agent, **{self.layout.objects[i]: v for i, v in self._objects.items()}})
        self._target = (0.0, 0.0, 0.0)
        self._yaw = 0.0  # unwrapped heading, as a hinge joint would report it
        self._cameras: dict[tuple, Any] = {}
        self._frames_per_capture = 1
        for spec in sensors:
            self.attach_sensor(spec)

    # ------------------------------------------------------------------ state
    @property
    def time(self) -> float:
        return self._a.time

    @property
    def semantic_labels(self) -> list[str]:
        return list(self._labels)

    def _read_qpos(self):
        pos, quat = self._a.pose(self._agent)
        self._yaw += float(wrap_angle(yaw_of_wxyz(quat) - self._yaw))
        return (float(pos[0]), float(pos[1]), self._yaw)

    def _read_qvel(self):
        v = self._a.velocity(self._agent)
        return (float(v[0]), float(v[1]), float(v[5]))

    def object_positions(self) -> dict[int, np.ndarray]:
        return {iid: self._a.pose(view)[0].copy() for iid, view in self._objects.items()}

    # ------------------------------------------------------------------ actuation and stepping
    def _set_target(self, target) -> None:
        self._target = tuple(float(v) for v in target)

    def _apply_servo(self) -> None:
        x, y, yaw = self._read_qpos()
        vx, vy, wz = self._read_qvel()
        fx, fy, tz = servo_wrench(self.body, self._target, vx, vy, wz, yaw, self.servo_tau, self.layout.inertia_z)
        self._a.apply_wrench(self._agent, (fx, fy, 0.0), (0.0, 0.0, tz))

    def _physics_steps(self, n: int, touched: list) -> None:
        for _ in range(n):
            self._apply_servo()
            self._a.step(render=False)
            touched.extend(self._a.contacts_of(AGENT_PATH))

    def _write_agent(self, x: float, y: float, yaw: float) -> None:
        self._a.set_pose(self._agent, (x, y, self.scene.floor_z), quat_wxyz(_yaw_matrix(yaw)))
        self._a.set_velocity(self._agent, np.zeros(6))
        self._yaw = float(yaw)
        self._target = (0.0, 0.0, 0.0)

    def _penetrating(self, x: float, y: float, yaw: float) -> list:
        self._a.set_pose(self._agent, (x, y, self.scene.floor_z), quat_wxyz(_yaw_matrix(yaw)))
        return self._a.overlaps(AGENT_COLLIDER, AGENT_PATH)

    def _settle(self) -> None:
        """The rendering warm-up (20 physics + render steps) with the agent held at its new pose."""
        x, y, yaw = self._read_qpos()
        for _ in range(WARMUP_STEPS):
            self._a.set_velocity(self._agent, np.zeros(6))
            self._a.step(render=True)
        self._a.set_pose(self._agent, (x, y, self.scene.floor_z), quat_wxyz(_yaw_matrix(yaw)))
        self._a.set_velocity(self._agent, np.zeros(6))

    def _reset_physics(self) -> None:
        for iid, view in self._objects.items():
            self._a.set_pose(view, self.layout.object_start[iid], (1.0, 0.0, 0.0, 0.0))
            self._a.set_velocity(view, np.zeros(6))

    def _contacts_from(self, keys) -> list[Contact]:
        seen: dict[tuple[int, str], Contact] = {}
        for path in keys:
            info = self.layout.info(str(path))
            key = (info.instance, info.label)
            if key not in seen:
                pos = tuple(float(v) for v in self._a.pose(self._objects[info.instance])[0]) \
                    if info.instance in self._objects else (math.nan, math.nan, math.nan)
                seen[key] = Contact(info.label, info.instance, info.name, pos, info.movable)
        return list(seen.values())

    # ------------------------------------------------------------------ sensors
    def _camera_for(self, spec) -> Any:
        kinds = tuple(spec.modalities) if isinstance(spec, PanoramaSpec) else (spec.kind,)
        key = (spec.width, spec.height, float(spec.hfov_deg), float(spec.min_depth), float(spec.max_depth), kinds)
        if key not in self._cameras:
            path = f"{CAMERA_ROOT}/camera_{len(self._cameras)}"
            author_camera(self._a.stage, path, spec.width, spec.height, spec.hfov_deg,
                          max(spec.min_depth, 0.01), spec.max_depth)
            self._cameras[key] = self._a.camera(path, spec.width, spec.height, None, kinds)
        return self._cameras[key]

    def attach_sensor(self, spec: SensorSpec) -> None:
        super().attach_sensor(spec)
        if isinstance(spec, (CameraSpec, PanoramaSpec)):
            self._camera_for(spec)

    def render_at(self, pose, spec: SensorSpec) -> dict[str, np.ndarray]:
        """Render from an arbitrary pose without stepping physics: the camera jumps there, so
        ``WARMUP_STEPS`` render-only frames run before the capture."""
        self._frames_per_capture = WARMUP_STEPS
        try:
            return super().render_at(pose, spec)
        finally:
            self._frames_per_capture = 1

    def _render_camera(self, spec, pos: np.ndarray, rot: np.ndarray, kinds) -> dict[str, np.ndarray]:
        cam = self._camera_for(spec)
        self._a.place_camera(cam, pos, quat_wxyz(rot))  # Isaac's "world" camera axes: forward, left, up
        for _ in range(self._frames_per_capture):
            self._a.render()
        frame = self._a.frame(cam)
        out: dict[str, np.ndarray] = {}
        for k in kinds:
            if k == "rgb":
                out[k] = np.ascontiguousarray(np.asarray(frame["rgba"])[..., :3], dtype=np.uint8)
            elif k == "depth":
                out[k] = depth_output(np.asarray(frame["distance_to_image_plane"], float), spec)
            elif k == "semantic":
                out[k] = self._semantic_ids(frame["semantic_segmentation"])
            else:
                out[k] = self._instance_ids(frame["instance_id_segmentation"])
        return out

    def _semantic_ids(self, annotated: dict) -> np.ndarray:
        """Annotator ids → this simulator's label ids (unknown/background → 0)."""
        data = np.asarray(annotated["data"]).astype(np.int64)
        lut = {int(k): self._label_id.get(str(v.get("class", "")).split(",")[0], 0)
               for k, v in annotated["info"]["idToLabels"].items()}
        return np.vectorize(lambda i: lut.get(int(i), 0), otypes=[np.int32])(data) if data.size else data.astype(np.int32)

    def _instance_ids(self, annotated: dict) -> np.ndarray:
        """Annotator ids (prim paths in ``idToLabels``) → scene instance ids (background → -1)."""
        data = np.asarray(annotated["data"]).astype(np.int64)
        lut = {int(k): self.layout.info(str(v)).instance for k, v in annotated["info"]["idToLabels"].items()}
        return np.vectorize(lambda i: lut.get(int(i), -1), otypes=[np.int32])(data) if data.size else data.astype(np.int32)

    def _lidar(self, spec: LidarSpec, pos: np.ndarray, rot: np.ndarray) -> np.ndarray:
        dirs = spec.directions()
        world = dirs.reshape(-1, 3) @ rot.T
        dist = self._a.ray_distances(pos, world, spec.max_range, AGENT_PATH)
        ok = (dist >= spec.min_range) & (dist <= spec.max_range)
        return np.where(ok, dist, np.inf).astype(np.float32).reshape(dirs.shape[:2])

    def close(self) -> None:
        self._cameras.clear()
        self._a.close()
        if self._own_dir:
            shutil.rmtree(self._dir, ignore_errors=True)


def _yaw_matrix(yaw: float) -> np.ndarray:
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
