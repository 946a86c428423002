"""The one place the Isaac Sim backend talks to Omniverse: every call it makes is listed in :data:`CALLS`.

Nothing in this module imports Omniverse at import time. :class:`IsaacAdapter` resolves each
symbol through :meth:`IsaacAdapter.load`, which refuses any ``module:attribute`` missing from
:data:`API` (the loadable rows of :data:`CALLS`). Each row of :data:`CALLS` also says how the adapter
calls the symbol (positional count, keyword names, argument types) and in which Isaac Sim major
versions it exists, so the same table drives

- ``tools/check_isaac_api.py --python PY``: imports every module named here in an environment holding
  the real Isaac Sim packages, resolves every class/function/method/attribute and binds the adapter's
  calls against ``inspect.signature`` (0 mismatches against the Isaac Sim 6.2.0.0 pip wheels);
- ``tests/sim/isaac_fake.py``: the recording fake serves exactly these modules and symbols and fails
  any call whose shape differs from its row, so adapter code, table and fake cannot disagree.

Isaac Sim 6.x (the release with installable wheels: 6.2.0.0, CPython 3.12) and 5.x (Python 3.11) are
both served by the same calls: ``isaacsim.core.api``, ``isaacsim.core.prims``, ``isaacsim.core.utils``
and ``isaacsim.sensors.camera`` are deprecated since 6.0 (still shipped and enabled by the base
experience) in favour of ``isaacsim.core.experimental.*`` / ``isaacsim.sensors.experimental.rtx``;
rows say so in ``deprecated_since``. In 6.x the instance-id annotator behind
``Camera.add_instance_id_segmentation_to_frame`` is ``instance_id_segmentation_fast`` (frame key still
``instance_id_segmentation``). What ran where is in ``exts/vlnverse/docs/isaac.md``: nothing here has
stepped PhysX or rendered with RTX (no GPU where it was written).
"""
from __future__ import annotations

import atexit
import importlib
import importlib.util
import math
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ...core.errors import BackendError, SceneError, VLNVerseError


@dataclass(frozen=True)
class Call:
    """One Omniverse symbol the adapter uses and how it uses it.

    ``symbol``: ``"module:attr"`` (loaded with :meth:`IsaacAdapter.load`) or ``"module:Class.member"``
    (a method, property or attribute of what the backend gets from a loaded symbol). ``kind``:
    ``"call"`` (called with ``nargs`` positional arguments and keywords from ``kwargs``), ``"class"``
    (constructed that way), ``"type"`` (a class used only through its members), ``"classmethod"``,
    ``"property"`` (read, not called).
    ``types`` maps a parameter name to the type the adapter passes (checked against the annotation).
    ``versions``: Isaac Sim major versions the symbol exists in.
    """

    symbol: str
    purpose: str
    kind: str = "call"
    nargs: int = 0
    kwargs: tuple[str, ...] = ()
    types: tuple[tuple[str, str], ...] = ()
    versions: tuple[int, ...] = (5, 6)
    deprecated_since: int | None = None

    @property
    def module(self) -> str:
        return self.symbol.split(":")[0]

    @property
    def path(self) -> str:
        """``Class.member`` / ``function`` inside the module."""
        return self.symbol.split(":")[1]

    @property
    def loadable(self) -> bool:
        return "." not in self.path


_CORE_API, _PRIMS, _CAMERA = "isaacsim.core.api:World", "isaacsim.core.prims:RigidPrim", "isaacsim.sensors.camera:Camera"
_PHYSX = "omni.physx.bindings._physx"

#: Every Omniverse symbol the backend uses. Rows of one class follow the class row.
CALLS: tuple[Call, ...] = (
    Call("isaacsim:SimulationApp", "standalone Kit app; constructed before any other Omniverse import", "class",
         1, types=(("launch_config", "dict"),)),
    Call("isaacsim:SimulationApp.close", "close the app this adapter constructed"),
    Call("omni.kit.app:get_app", "whether a Kit app already runs here (raises RuntimeError when none does)"),
    Call("carb.logging:acquire_logging", "Kit's log, read while SimulationApp starts (its reason if it fails)"),
    Call("carb.logging:ILogging.add_logger", "collect Kit's error lines during the start", nargs=1),
    Call("carb.logging:ILogging.remove_logger", "stop collecting", nargs=1),
    Call("isaacsim.core.utils.stage:open_stage", "open the authored physics stage", nargs=1,
         types=(("usd_path", "str"),), deprecated_since=6),
    Call("isaacsim.core.utils.stage:get_current_stage", "the open Usd.Stage (cameras, contact-report API, labels)",
         deprecated_since=6),
    Call(_CORE_API, "physics/render loop on the stage's own UsdPhysics.Scene", "class",
         kwargs=("physics_dt", "rendering_dt", "stage_units_in_meters", "physics_prim_path"),
         types=(("physics_prim_path", "str"),), deprecated_since=6),
    Call(f"{_CORE_API}.clear_instance", "drop the World singleton", "classmethod", deprecated_since=6),
    Call(f"{_CORE_API}.reset", "start PhysX on the stage", deprecated_since=6),
    Call(f"{_CORE_API}.step", "one physics step (and render step)", kwargs=("render",),
         types=(("render", "bool"),), deprecated_since=6),
    Call(f"{_CORE_API}.render", "one render update, physics not stepped", deprecated_since=6),
    Call(f"{_CORE_API}.current_time", "simulation time (s)", "property", deprecated_since=6),
    Call(_PRIMS, "agent and movable objects: a view of one rigid body", "class", kwargs=("prim_paths_expr",),
         deprecated_since=6),
    Call(f"{_PRIMS}.initialize", "bind the view to PhysX after World.reset", deprecated_since=6),
    Call(f"{_PRIMS}.is_physics_handle_valid", "PhysX accepted the body", deprecated_since=6),
    Call(f"{_PRIMS}.get_world_poses", "positions (N, 3), orientations (N, 4) w-first", deprecated_since=6),
    Call(f"{_PRIMS}.set_world_poses", "teleport", kwargs=("positions", "orientations"), deprecated_since=6),
    Call(f"{_PRIMS}.get_velocities", "(N, 6) linear then angular", deprecated_since=6),
    Call(f"{_PRIMS}.set_velocities", "hold at rest / set", nargs=1, deprecated_since=6),
    Call(f"{_PRIMS}.apply_forces_and_torques_at_pos", "the servo wrench, world frame",
         kwargs=("forces", "torques", "is_global"), types=(("is_global", "bool"),), deprecated_since=6),
    Call("isaacsim.core.utils.semantics:add_labels", "semantic class labels for segmentation", nargs=1,
         kwargs=("labels", "instance_name"), types=(("labels", "list"), ("instance_name", "str")),
         deprecated_since=6),
    Call(_CAMERA, "RGB, planar depth, semantic and instance segmentation of an authored USD camera", "class",
         kwargs=("prim_path", "resolution", "frequency"), types=(("frequency", "int"), ("prim_path", "str")),
         deprecated_since=6),
    Call(f"{_CAMERA}.initialize", "create the render product and RGB annotator", deprecated_since=6),
    Call(f"{_CAMERA}.add_distance_to_image_plane_to_frame", "planar depth annotator", deprecated_since=6),
    Call(f"{_CAMERA}.add_semantic_segmentation_to_frame", "semantic annotator", deprecated_since=6),
    Call(f"{_CAMERA}.add_instance_id_segmentation_to_frame",
         "instance annotator (6.x: instance_id_segmentation_fast; frame key instance_id_segmentation)",
         deprecated_since=6),
    Call(f"{_CAMERA}.set_world_pose", "camera pose in Isaac's 'world' camera axes (+X forward, +Z up)",
         kwargs=("position", "orientation", "camera_axes"), types=(("camera_axes", "str"),), deprecated_since=6),
    Call(f"{_CAMERA}.get_current_frame", "annotator outputs", deprecated_since=6),
    Call(f"{_CAMERA}.get_rgba", "the RGBA image", deprecated_since=6),
    Call("omni.physx:get_physx_simulation_interface", "contact reports after each physics step"),
    Call(f"{_PHYSX}:IPhysxSimulation.get_contact_report", "(headers, data) of the last step"),
    Call(f"{_PHYSX}:ContactEventHeader.actor0", "rigid body 0 (encoded path)", "property"),
    Call(f"{_PHYSX}:ContactEventHeader.actor1", "rigid body 1 (encoded path)", "property"),
    Call(f"{_PHYSX}:ContactEventHeader.collider0", "collider 0 (encoded path)", "property"),
    Call(f"{_PHYSX}:ContactEventHeader.collider1", "collider 1 (encoded path)", "property"),
    Call("omni.physx:get_physx_scene_query_interface", "LiDAR ray casts and the teleport penetration probe"),
    Call(f"{_PHYSX}:PhysXSceneQuery.raycast_all", "all hits along a ray", nargs=5,
         types=(("distance", "float"), ("bothSides", "bool"))),
    Call(f"{_PHYSX}:PhysXSceneQuery.overlap_shape", "colliders overlapping the agent collider", nargs=4,
         types=(("meshPath0", "int"), ("meshPath1", "int"), ("anyHit", "bool"))),
    Call(f"{_PHYSX}:SceneQueryHitObject.collision", "hit collider path", "property"),
    Call(f"{_PHYSX}:SceneQueryHitObject.rigid_body", "hit rigid body path", "property"),
    Call(f"{_PHYSX}:RaycastHit.distance", "hit distance along the ray", "property"),
    Call("pxr.PhysxSchema:PhysxContactReportAPI", "contact reporting on the agent body", "type"),
    Call("pxr.PhysxSchema:PhysxContactReportAPI.Apply", "apply the API to the agent prim", "classmethod", 1),
    Call("pxr.PhysxSchema:PhysxContactReportAPI.CreateThresholdAttr", "threshold 0: every touch"),
    Call("pxr.PhysicsSchemaTools:intToSdfPath", "decode contact-report prim paths", nargs=1),
    Call("pxr.PhysicsSchemaTools:encodeSdfPath", "encode the agent collider path for overlap_shape", nargs=1,
         types=(("path", "Sdf.Path"),)),
    Call("pxr.Sdf:Path", "the Sdf.Path encodeSdfPath takes", "class", 1, types=(("path", "str"),)),
    Call("carb:Float3", "vectors passed to scene queries", "class", 3),
)

#: The loadable symbols, ``"module:attribute"`` → what for (:meth:`IsaacAdapter.load` accepts only these).
API: dict[str, str] = {c.symbol: c.purpose for c in CALLS if c.loadable}
#: Every row by symbol.
CALL_BY_SYMBOL: dict[str, Call] = {c.symbol: c for c in CALLS}

#: Physics + render steps run before a frame is captured at a teleported pose (the paper's warm-up).
WARMUP_STEPS = 20
#: The symbol that starts Kit; it is the only one :meth:`IsaacAdapter.load` serves before :meth:`IsaacAdapter.start`.
SIMULATION_APP = "isaacsim:SimulationApp"

INSTALL_HINT = ("backend 'isaac' needs Isaac Sim, which is not installed here: Isaac Sim 6.x "
                "(Python 3.12: pip install 'isaacsim[all,extscache]==6.2.0.0') or 5.x (Python 3.11: "
                "pip install 'isaacsim[all,extscache]==5.1.0' --extra-index-url https://pypi.nvidia.com), "
                "NVIDIA RTX GPU; or run with Isaac Sim's own ./python.sh")


class IsaacNotInstalledError(VLNVerseError, ImportError):
    """``backend: isaac`` was asked for where Isaac Sim cannot be imported."""


def isaacsim_available() -> bool:
    """Whether the ``isaacsim`` package is installed (found on the path, without importing it)."""
    try:
        return importlib.util.find_spec("isaacsim") is not None
    except (ImportError, ValueError):
        return False


def isaacsim_unusable_reason() -> str | None:
    """Why this Python cannot run Isaac Sim, or ``None`` when the ``SimulationApp`` class resolves.

    Stronger than :func:`isaacsim_available`: it imports ``isaacsim`` (which bootstraps the Kit
    kernel, no GPU needed; its ``sys.exit`` on a bad install is caught) and looks up
    ``isaacsim.SimulationApp``. It does not start Kit, so it cannot tell whether the extensions Kit
    needs resolve — :meth:`IsaacAdapter.start` reports that as a :class:`BackendError`."""
    if not isaacsim_available():
        return "Isaac Sim is not installed here (no isaacsim package)"
    try:
        module = importlib.import_module("isaacsim")
    except SystemExit as exc:
        return f"import isaacsim exited: {one_line(exc.code)}"
    except Exception as exc:  # noqa: BLE001 - any import failure is the reason
        return f"import isaacsim failed: {type(exc).__name__}: {one_line(exc)}"
    if getattr(module, "SimulationApp", None) is None:
        return "isaacsim.SimulationApp does not resolve (isaacsim.simulation_app extension missing)"
    return None


def require_isaacsim() -> None:
    """Raise :class:`IsaacNotInstalledError` (one line: how to install) unless ``isaacsim`` is installed."""
    if not isaacsim_available():
        raise IsaacNotInstalledError(INSTALL_HINT)


def kit_running() -> bool:
    """Whether a Kit app runs in this process (the Isaac Sim GUI, an extension, a started SimulationApp).

    ``import isaacsim`` alone imports ``omni.kit.app`` without starting any app, so the module being
    loaded proves nothing: ``omni.kit.app.get_app()`` raises ``RuntimeError`` until Kit's app plugin is
    loaded, and the app it returns must also be running (a SimulationApp whose start failed is not)."""
    if "omni.kit.app" not in sys.modules:  # Kit imports it first thing; never import Omniverse from here
        return False
    try:
        app = sys.modules["omni.kit.app"].get_app()
    except RuntimeError:
        return False
    if app is None:
        return False
    is_running = getattr(app, "is_running", None)
    return bool(is_running()) if callable(is_running) else True


def one_line(text: Any, limit: int = 400) -> str:
    """``text`` on one line, at most ``limit`` characters."""
    out = " ".join(str(text).split())
    return out if len(out) <= limit else out[:limit - 3] + "..."


#: carb log levels: error and fatal (verbose -2, info -1, warn 0).
_KIT_ERROR_LEVEL = 1


def kit_failure_reason(errors: list[tuple[str, str]]) -> str | None:
    """Kit's own reason for a failed start from its ``(source, message)`` error lines: the extension
    system's error if any (dependency solver), else the first that is neither the registry's (unreachable
    offline, not fatal) nor ``SimulationApp``'s own generic line; on one line."""
    def rank(item):
        source, message = item
        if source.startswith("omni.ext"):
            return 0
        if "registry" in source or "SimulationApp" in message or source.startswith("simulation_app"):
            return 2
        return 1
    if not errors:
        return None
    source, message = min(errors, key=rank)  # min is stable: the first of the best rank
    return one_line(f"[{source}] {message}", limit=600)


#: pip distributions that ship their own OpenUSD ``pxr`` (a second USD runtime next to Kit's).
PIP_USD = ("usd-core", "usd-exchange")


def usd_core_pxr() -> str | None:
    """The file of an already imported ``pxr`` when a pip OpenUSD build (:data:`PIP_USD`) provided it
    — not Kit's USD — else None. Inside Kit the toolkit must use Kit's ``pxr``: two USD runtimes in one
    process are unsupported."""
    pxr = sys.modules.get("pxr")
    where = getattr(pxr, "__file__", None) if pxr is not None else None
    if not where:
        paths = list(getattr(pxr, "__path__", []) or [])
        where = os.path.join(paths[0], "__init__.py") if paths else None
    if not where:
        return None
    from importlib.metadata import PackageNotFoundError, distribution

    for name in PIP_USD:
        try:
            root = os.path.realpath(str(distribution(name).locate_file("pxr")))
        except PackageNotFoundError:
            continue
        if os.path.realpath(where).startswith(root + os.sep):
            return f"{where} ({name})"
    return None


_STANDALONE_APP = None
#: The BackendError message of a failed SimulationApp start in this process (Kit cannot be started again).
_START_FAILURE: str | None = None


def start_standalone_app(headless: bool = True):
    """For scripts run with Isaac Sim's Python (``tools/``): construct ``SimulationApp`` now, before
    anything imports Omniverse or ``pxr``, and close it at exit; simulators built later find Kit
    running and reuse it. Fails in one line where Isaac Sim is missing or Kit cannot start."""
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
        self._started = self._starting = False

    # ------------------------------------------------------------------ plumbing
    def load(self, name: str) -> Any:
        """The symbol ``"module:attribute"``; it must be listed in :data:`API`."""
        if name not in API:
            raise KeyError(f"{name} is not in vlnverse.sim.isaac.adapter.API; add it there first")
        if not (self._started or self._starting) and name != SIMULATION_APP:
            raise RuntimeError(f"{name} used before IsaacAdapter.start(): SimulationApp must come first")
        module, attr = name.split(":")
        return getattr(self._import(module), attr)

    def start(self, headless: bool = True, running: bool | None = None) -> None:
        """Construct ``SimulationApp({"headless": headless})`` unless Kit already runs here.

        Kit sees a clean command line (``SimulationApp`` parses ``sys.argv``: the caller's own
        arguments, ``vlnverse``'s or pytest's, must not reach it). Kit's error lines are collected while
        it starts; when it fails (``SimulationApp`` calls ``sys.exit``; that ``SystemExit`` never escapes)
        the :class:`BackendError` carries Kit's reason on one line, and later starts in this process
        raise the same error. Refuses to start Kit after a pip OpenUSD ``pxr`` was imported (two USD
        runtimes in one process)."""
        if self._started:
            return
        if not (kit_running() if running is None else running):
            if self._import is importlib.import_module and usd_core_pxr():
                raise BackendError(f"pxr was imported from a pip OpenUSD build, {usd_core_pxr()}, before Isaac "
                                   "Sim started; inside Kit the toolkit uses Kit's USD: create the Isaac simulator "
                                   "(or call start_standalone_app) before loading scenes, and do not install "
                                   "usd-core into Isaac Sim's Python")
            self.app = self._construct_app({"headless": bool(headless)})
        self._started = True

    def _construct_app(self, config: dict) -> Any:
        global _START_FAILURE
        if _START_FAILURE is not None:  # Kit cannot start twice in one process ("App instance already exists")
            raise BackendError(_START_FAILURE)
        argv, sys.argv = sys.argv, [sys.argv[0] if sys.argv else "vlnverse"]
        errors: list[tuple[str, str]] = []
        logging = handle = None
        try:
            cls = self.load(SIMULATION_APP)  # `import isaacsim` bootstraps the kernel (may exit: EULA, install)
            self._starting = True
            logging = self.load("carb.logging:acquire_logging")()
            handle = logging.add_logger(lambda source, level, _file, _line, message: errors.append((source, message))
                                        if level >= _KIT_ERROR_LEVEL else None)
            return cls(config)
        except SystemExit as exc:
            reason = kit_failure_reason(errors) or f"SimulationApp exited with status {one_line(exc.code)}"
            _START_FAILURE = f"Isaac Sim could not start: {reason}"
            raise BackendError(_START_FAILURE) from None
        finally:
            sys.argv = argv
            self._starting = False
            if handle is not None:
                logging.remove_logger(handle)

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

        path = self.load("pxr.Sdf:Path")(collider_path)
        p0, p1 = self.load("pxr.PhysicsSchemaTools:encodeSdfPath")(path)
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
            kwargs["frequency"] = max(1, int(round(rate_hz)))  # typed int (Hz) in 5.x and 6.x
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
