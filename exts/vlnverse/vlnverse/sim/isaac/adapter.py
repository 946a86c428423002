"""The one place the Isaac Sim backend talks to Omniverse: every call it makes is listed in :data:`API`.

Nothing in this module imports Omniverse at import time. :class:`IsaacAdapter` resolves each
symbol through :meth:`IsaacAdapter.load`, which refuses any ``module:attribute`` missing from
:data:`API` — so the list below *is* the backend's whole Omniverse surface, and the first person
who runs it on a GPU machine knows exactly what to check. ``tests/sim/test_isaac_adapter.py``
drives the adapter and the backend against a recording fake of these modules (construction of
``SimulationApp`` before any other Omniverse import, the 20-step rendering warm-up, camera
parameters, and that every call is one listed here).

None of this was run on Isaac Sim (no RTX GPU where it was written). Checked against Isaac Sim
documentation and source with the ``search`` tool (docs and code corpora, Isaac Sim 5.x / 6.x
``isaac-sim/IsaacSim`` sources and the omni.physx Python stubs):

- ``isaacsim.simulation_app.SimulationApp(launch_config)`` must be constructed before any other
  Omniverse import — Isaac Sim docs "Python Environment" (manual_standalone_python) and
  ``isaacsim.simulation_app/docs/Overview.md``.
- ``isaacsim.sensors.camera.Camera``: ``add_distance_to_image_plane_to_frame``,
  ``add_semantic_segmentation_to_frame``, ``add_instance_id_segmentation_to_frame``, ``get_current_frame``,
  ``get_rgba`` (isaacsim.sensors.camera camera.py).
- ``omni.physx.get_physx_simulation_interface().get_contact_report()`` → (headers, data); headers carry
  ``actor0/actor1/collider0/collider1`` decoded with ``pxr.PhysicsSchemaTools.intToSdfPath`` (PhysX
  contact-report snippets).
- ``omni.physx.get_physx_scene_query_interface()``: ``raycast_all(origin, dir, distance, reportFn, bothSides)``
  and ``overlap_shape(path0, path1, reportFn, anyHit)`` with ``PhysicsSchemaTools.encodeSdfPath``
  (omni.physx bindings stub).
- ``isaacsim.core.prims.RigidPrim.apply_forces_and_torques_at_pos(forces=, torques=, positions=,
  indices=, is_global=True)``, ``get_velocities``/``set_velocities``, ``get_world_poses``/``set_world_poses``.
- ``isaacsim.core.utils.semantics.add_labels`` (the successor of ``add_update_semantics``).
- ``World(physics_dt=, rendering_dt=, stage_units_in_meters=, physics_prim_path=)`` (World /
  SimulationContext ``__init__``; the default physics prim is ``/physicsScene``, so the stage's own
  scene path is passed); ``RigidPrim.is_physics_handle_valid()``; ``Camera.set_world_pose(...,
  camera_axes=)`` where ``"world"`` is +X forward, +Z up.

Written from the documented API but not looked up here — check these first on a GPU machine:
``World.reset``, ``step(render=)``, ``render``, ``current_time``, ``clear_instance``;
``isaacsim.core.utils.stage.open_stage`` / ``get_current_stage``; ``RigidPrim(prim_paths_expr=)``,
``initialize()`` and the (N, 6) velocity layout; ``Camera(prim_path=, resolution=, frequency=)``;
``add_labels(prim, labels=, instance_name=)``
keywords; ``PhysxSchema.PhysxContactReportAPI.Apply(prim).CreateThresholdAttr()``; the hit attributes
``collision``/``rigid_body``/``distance`` in scene-query callbacks; the ``idToLabels`` formats.

Deprecated ``omni.isaac.*`` modules are not used anywhere.
"""
from __future__ import annotations

import atexit
import importlib
import importlib.util
import math
import sys
from typing import Any, Callable

import numpy as np

from ...core.errors import SceneError, VLNVerseError

#: Every Omniverse symbol the backend uses, ``"module:attribute"`` → what for.
API: dict[str, str] = {
    "isaacsim.simulation_app:SimulationApp": "standalone Kit app (headless); constructed before any other Omniverse import",
    "isaacsim.core.utils.stage:open_stage": "open the authored physics stage",
    "isaacsim.core.utils.stage:get_current_stage": "the open Usd.Stage (camera prims, contact-report API, labels)",
    "isaacsim.core.api:World": "physics/render loop: physics_dt, rendering_dt, reset, step(render), render, current_time",
    "isaacsim.core.prims:RigidPrim": "agent and movable objects: poses, velocities, servo forces, handle validity",
    "isaacsim.core.utils.semantics:add_labels": "semantic class labels for segmentation",
    "isaacsim.sensors.camera:Camera": "RGB, distance-to-image-plane depth, semantic and instance segmentation",
    "omni.physx:get_physx_simulation_interface": "contact reports after each physics step",
    "omni.physx:get_physx_scene_query_interface": "LiDAR ray casts and the teleport penetration probe",
    "pxr.PhysxSchema:PhysxContactReportAPI": "contact reporting on the agent body",
    "pxr.PhysicsSchemaTools:intToSdfPath": "decode contact-report prim paths",
    "pxr.PhysicsSchemaTools:encodeSdfPath": "encode the agent collider path for overlap_shape",
    "carb:Float3": "vectors passed to scene queries",
}

#: Physics + render steps run before a frame is captured at a teleported pose (the paper's warm-up).
WARMUP_STEPS = 20

INSTALL_HINT = ("backend 'isaac' needs Isaac Sim 5.x, which is not installed here: "
                "pip install 'isaacsim[all,extscache]==5.1.0' --extra-index-url https://pypi.nvidia.com "
                "(Python 3.11, NVIDIA RTX GPU), or run with Isaac Sim's own ./python.sh")


class IsaacNotInstalledError(VLNVerseError, ImportError):
    """``backend: isaac`` was asked for where Isaac Sim cannot be imported."""


def isaacsim_available() -> bool:
    """Whether the ``isaacsim`` package can be imported (without importing it)."""
    try:
        return importlib.util.find_spec("isaacsim") is not None
    except (ImportError, ValueError):
        return False


def require_isaacsim() -> None:
    """Raise :class:`IsaacNotInstalledError` (one line: how to install) unless ``isaacsim`` imports."""
    if not isaacsim_available():
        raise IsaacNotInstalledError(INSTALL_HINT)


def kit_running() -> bool:
    """Whether a Kit app already runs in this process (the Isaac Sim GUI, or a SimulationApp)."""
    return "omni.kit.app" in sys.modules


_STANDALONE_APP = None


def start_standalone_app(headless: bool = True):
    """For scripts run with Isaac Sim's own ``python.sh`` (``tools/``): construct ``SimulationApp``
    now, before anything imports Omniverse, and close it at exit; simulators built later find Kit
    running and reuse it. Fails in one line (how to install) where Isaac Sim is missing."""
    global _STANDALONE_APP
    require_isaacsim()
    if _STANDALONE_APP is None and not kit_running():
        adapter = IsaacAdapter()
        adapter.start(headless=headless, running=False)
        _STANDALONE_APP = adapter.app
        atexit.register(_STANDALONE_APP.close)
    return _STANDALONE_APP


def wants_isaac(argv: list[str]) -> bool:
    """Whether command-line arguments select the Isaac backend (``--backend isaac``,
    ``--backend=isaac`` or a ``backend=isaac`` override)."""
    for i, arg in enumerate(argv):
        if arg in ("--backend=isaac", "backend=isaac") or (arg == "--backend" and argv[i + 1:i + 2] == ["isaac"]):
            return True
    return False


class IsaacAdapter:
    """Thin wrapper over the Omniverse calls of :data:`API`; one per simulator.

    ``importer`` (default ``importlib.import_module``) resolves modules — tests pass a recording fake.
    Call :meth:`start` first: it constructs ``SimulationApp`` unless Kit already runs (GUI/extension).
    """

    def __init__(self, importer: Callable[[str], Any] | None = None):
        self._import = importer or importlib.import_module
        self.app = None
        self.world = None
        self.stage = None
        self._started = False

    # ------------------------------------------------------------------ plumbing
    def load(self, name: str) -> Any:
        """The symbol ``"module:attribute"``; it must be listed in :data:`API`."""
        if name not in API:
            raise KeyError(f"{name} is not in vlnverse.sim.isaac.adapter.API; add it there first")
        if not self._started and name != "isaacsim.simulation_app:SimulationApp":
            raise RuntimeError(f"{name} used before IsaacAdapter.start(): SimulationApp must come first")
        module, attr = name.split(":")
        return getattr(self._import(module), attr)

    def start(self, headless: bool = True, running: bool | None = None) -> None:
        """Construct ``SimulationApp({"headless": headless})`` unless Kit already runs here."""
        if self._started:
            return
        if not (kit_running() if running is None else running):
            self.app = self.load("isaacsim.simulation_app:SimulationApp")({"headless": bool(headless)})
        self._started = True

    # ------------------------------------------------------------------ stage and world
    def open_stage(self, usd_path: str, physics_dt: float, physics_scene: str) -> None:
        """Open the authored stage and create the ``World`` stepping physics at ``physics_dt`` on the
        stage's own ``UsdPhysics.Scene`` at ``physics_scene`` (not a default ``/physicsScene``)."""
        if not self.load("isaacsim.core.utils.stage:open_stage")(usd_path):
            raise SceneError(f"{usd_path}: Isaac Sim could not open the stage")
        self.stage = self.load("isaacsim.core.utils.stage:get_current_stage")()
        world_cls = self.load("isaacsim.core.api:World")
        world_cls.clear_instance()
        self.world = world_cls(physics_dt=physics_dt, rendering_dt=physics_dt, stage_units_in_meters=1.0,
                               physics_prim_path=physics_scene)

    def prim(self, path: str):
        """The ``Usd.Prim`` at ``path`` on the open stage."""
        return self.stage.GetPrimAtPath(path)

    def enable_contact_report(self, path: str) -> None:
        """Apply ``PhysxContactReportAPI`` (threshold 0: every touch) to the rigid body at ``path``."""
        api = self.load("pxr.PhysxSchema:PhysxContactReportAPI").Apply(self.prim(path))
        api.CreateThresholdAttr().Set(0.0)

    def add_semantic_label(self, path: str, label: str) -> None:
        """Semantic class ``label`` on the prim at ``path``."""
        self.load("isaacsim.core.utils.semantics:add_labels")(self.prim(path), labels=[label], instance_name="class")

    def rigid_prim(self, path: str):
        """A ``RigidPrim`` view of the single rigid body at ``path``."""
        return self.load("isaacsim.core.prims:RigidPrim")(prim_paths_expr=path)

    def reset(self, bodies: dict[str, Any]) -> None:
        """``World.reset()`` (starts PhysX on the stage), then initialise every rigid-body view;
        a body PhysX did not accept raises ``SceneError`` naming its prim path."""
        self.world.reset()
        for path, view in bodies.items():
            view.initialize()
            if not view.is_physics_handle_valid():
                raise SceneError(f"PhysX rejected the rigid body at prim {path} (no physics handle after World.reset())")

    def step(self, render: bool = False) -> None:
        """One physics step (and one render step when ``render``)."""
        self.world.step(render=render)

    def render(self) -> None:
        """One render update without stepping physics."""
        self.world.render()

    def warm_up(self, steps: int = WARMUP_STEPS) -> None:
        """The paper's rendering warm-up: ``steps`` physics + render steps before a frame is captured."""
        for _ in range(steps):
            self.world.step(render=True)

    @property
    def time(self) -> float:
        """Simulation time (s) of the world."""
        return float(self.world.current_time)

    # ------------------------------------------------------------------ bodies
    @staticmethod
    def pose(view) -> tuple[np.ndarray, np.ndarray]:
        """World position (3,) and orientation (w, x, y, z) of a single-body view."""
        pos, quat = view.get_world_poses()
        return np.asarray(pos, float).reshape(-1, 3)[0], np.asarray(quat, float).reshape(-1, 4)[0]

    @staticmethod
    def set_pose(view, position, orientation_wxyz) -> None:
        """Set a single-body view's world pose."""
        view.set_world_poses(positions=np.asarray(position, float).reshape(1, 3),
                             orientations=np.asarray(orientation_wxyz, float).reshape(1, 4))

    @staticmethod
    def velocity(view) -> np.ndarray:
        """(vx, vy, vz, wx, wy, wz) of a single-body view in the world frame."""
        return np.asarray(view.get_velocities(), float).reshape(-1, 6)[0]

    @staticmethod
    def set_velocity(view, velocity6) -> None:
        """Set (vx, vy, vz, wx, wy, wz) of a single-body view."""
        view.set_velocities(np.asarray(velocity6, float).reshape(1, 6))

    @staticmethod
    def apply_wrench(view, force_xyz, torque_xyz) -> None:
        """World-frame force and torque on a single-body view for the next physics step."""
        view.apply_forces_and_torques_at_pos(forces=np.asarray(force_xyz, float).reshape(1, 3),
                                             torques=np.asarray(torque_xyz, float).reshape(1, 3), is_global=True)

    # ------------------------------------------------------------------ contacts and queries
    def contacts_of(self, body_path: str) -> list[str]:
        """Collider paths touching the rigid body ``body_path`` in the last physics step's contact report."""
        headers, _data = self.load("omni.physx:get_physx_simulation_interface")().get_contact_report()
        to_path = self.load("pxr.PhysicsSchemaTools:intToSdfPath")
        out = []
        for h in headers:
            a0, a1 = str(to_path(h.actor0)), str(to_path(h.actor1))
            if a0 == body_path:
                out.append(str(to_path(h.collider1)))
            elif a1 == body_path:
                out.append(str(to_path(h.collider0)))
        return out

    def overlaps(self, collider_path: str, body_path: str) -> list[str]:
        """Collider paths the shape at ``collider_path`` overlaps now (its own body excluded)."""
        hits: list[str] = []

        def report(hit) -> bool:
            if str(hit.rigid_body) != body_path:
                hits.append(str(hit.collision))
            return True

        p0, p1 = self.load("pxr.PhysicsSchemaTools:encodeSdfPath")(collider_path)
        self.load("omni.physx:get_physx_scene_query_interface")().overlap_shape(p0, p1, report, False)
        return hits

    def ray_distances(self, origin, directions: np.ndarray, max_range: float, skip_body: str) -> np.ndarray:
        """Distance along each unit world ``direction`` from ``origin`` to the nearest collider not
        belonging to ``skip_body`` (``inf`` when none within ``max_range``)."""
        query = self.load("omni.physx:get_physx_scene_query_interface")()
        float3 = self.load("carb:Float3")
        o = float3(*map(float, origin))
        out = np.full(len(directions), np.inf)
        for i, d in enumerate(directions):
            best = [math.inf]

            def report(hit, best=best) -> bool:
                if str(hit.rigid_body) != skip_body and hit.distance < best[0]:
                    best[0] = float(hit.distance)
                return True

            query.raycast_all(o, float3(*map(float, d)), float(max_range), report, False)
            out[i] = best[0]
        return out

    # ------------------------------------------------------------------ cameras
    def camera(self, path: str, width: int, height: int, rate_hz: float | None, kinds) -> Any:
        """An ``isaacsim.sensors.camera.Camera`` on the (already authored) USD camera at ``path``
        with the annotators ``kinds`` needs (depth, semantic, instance)."""
        kwargs: dict[str, Any] = {"prim_path": path, "resolution": (int(width), int(height))}
        if rate_hz is not None:
            kwargs["frequency"] = float(rate_hz)
        cam = self.load("isaacsim.sensors.camera:Camera")(**kwargs)
        cam.initialize()
        if "depth" in kinds:
            cam.add_distance_to_image_plane_to_frame()
        if "semantic" in kinds:
            cam.add_semantic_segmentation_to_frame()
        if "instance" in kinds:
            cam.add_instance_id_segmentation_to_frame()
        return cam

    @staticmethod
    def place_camera(cam, position, orientation_wxyz) -> None:
        """World pose of a camera; the orientation is in Isaac's ``"world"`` camera axes (+X forward,
        +Z up, so +Y left: the toolkit's sensor frame, columns forward/left/up)."""
        cam.set_world_pose(position=np.asarray(position, float), orientation=np.asarray(orientation_wxyz, float),
                           camera_axes="world")

    @staticmethod
    def frame(cam) -> dict[str, Any]:
        """The camera's current outputs: ``rgba`` and the annotators' dicts/arrays."""
        out = dict(cam.get_current_frame())
        out["rgba"] = cam.get_rgba()
        return out

    def close(self) -> None:
        """Stop the world and, if this adapter constructed it, close the ``SimulationApp``."""
        if self.world is not None:
            self.world.clear_instance()
            self.world = None
        if self.app is not None:
            self.app.close()
            self.app = None
