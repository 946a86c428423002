"""The backend-neutral simulator interface and ``make_simulator``.

A ``Simulator`` owns one scene, one agent body and a rig of named sensors. Backends register in
``BACKENDS`` as ``"module:attribute"`` import paths so that importing ``vlnverse.sim`` never
imports a physics engine: ``mujoco`` (embedded, default) and ``isaac`` (Isaac Sim 6.x / 5.x,
``vlnverse.sim.isaac``) are always registered; building an ``isaac`` simulator where Isaac Sim is not
installed fails at once with one line saying how to install it.
"""
from __future__ import annotations

import abc
import importlib
import math
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

from ..core.config import require, validate
from ..core.errors import ConfigError, UnknownNameError
from ..core.registry import Registry
from ..scenes.description import SceneDescription
from .body import DEFAULT_BODY, AgentBody, as_body
from .sensors import SensorSpec, default_sensors, validate_sensor
from .types import Action, ActionResult, AgentPose


@dataclass
class ControlConfig:
    """Controller and timing parameters shared by every backend.

    Physics runs at ``1 / physics_dt`` Hz (default 200 Hz); the controllers update their commands
    at ``control_hz`` (default 50 Hz, a multiple of which must divide the physics rate). Discrete
    action sizes follow VLN-CE: forward 0.25 m, turns 15°, camera tilt 15°.
    """

    forward_step: float = 0.25
    turn_angle_deg: float = 15.0
    look_angle_deg: float = 15.0
    physics_dt: float = 0.005
    control_hz: float = 50.0
    position_tolerance: float = 0.003
    yaw_tolerance_deg: float = 0.2
    stall_window: float = 0.2
    stall_progress: float = 0.002
    action_timeout: float = 5.0

    def validate(self) -> None:
        """Raise ``ConfigError`` naming the field for any invalid value."""
        for name in ("forward_step", "turn_angle_deg", "look_angle_deg", "physics_dt", "control_hz",
                     "position_tolerance", "yaw_tolerance_deg", "stall_window", "stall_progress", "action_timeout"):
            v = getattr(self, name)
            require(isinstance(v, (int, float)) and math.isfinite(v) and v > 0, name, f"got {v!r}", "a positive number")
        require(self.physics_dt <= 0.02, "physics_dt", f"got {self.physics_dt}", "at most 0.02 s")
        ratio = 1.0 / (self.physics_dt * self.control_hz)
        require(ratio >= 1 and abs(ratio - round(ratio)) < 1e-6, "control_hz",
                f"{self.control_hz} Hz does not divide the physics rate {1 / self.physics_dt:g} Hz",
                "physics rate / control rate to be a whole number")

    @property
    def substeps(self) -> int:
        """Physics steps per control tick."""
        return int(round(1.0 / (self.physics_dt * self.control_hz)))


class Simulator(abc.ABC):
    """A scene + an agent body + named sensors, stepped by actions through physics.

    Observations are dicts ``{sensor output key: np.ndarray, "pose": float32 [x, y, yaw, pitch]}``.
    No backend type appears in this interface.
    """

    scene: SceneDescription
    body: AgentBody
    control: ControlConfig
    #: whether several instances may step at once in threads of one process (a simulator-free
    #: backend: yes; a physics/GL backend: no, one simulator per process at a time)
    threadsafe_instances: bool = False

    @abc.abstractmethod
    def reset(self, pose: AgentPose | Any) -> dict[str, np.ndarray]:
        """Restore the initial physics state, place the agent at ``pose`` (resolved to the nearest
        free pose with a warning if it penetrates an obstacle) and return the first observation."""

    @abc.abstractmethod
    def step(self, action: Action) -> tuple[dict[str, np.ndarray], ActionResult]:
        """Execute one action through physics; return the observation after it and what happened."""

    @abc.abstractmethod
    def teleport(self, pose: AgentPose | Any) -> ActionResult:
        """Set the agent pose directly (resets, Tel-Hop); penetration is resolved by moving to the
        nearest free position, reported in the result."""

    @property
    @abc.abstractmethod
    def pose(self) -> AgentPose:
        """Current agent pose."""

    @property
    @abc.abstractmethod
    def time(self) -> float:
        """Simulation clock in seconds since the last reset."""

    @property
    @abc.abstractmethod
    def semantic_labels(self) -> list[str]:
        """Label names indexed by the ids in semantic images (0 = background)."""

    @abc.abstractmethod
    def attach_sensor(self, spec: SensorSpec) -> None:
        """Add a sensor (validated); its name must be new."""

    @abc.abstractmethod
    def detach_sensor(self, name: str) -> None:
        """Remove a sensor by name (``UnknownNameError`` if absent)."""

    @property
    @abc.abstractmethod
    def sensors(self) -> dict[str, SensorSpec]:
        """Attached sensors by name."""

    @abc.abstractmethod
    def get_observations(self) -> dict[str, np.ndarray]:
        """Observation at the current state (honouring each sensor's rate)."""

    @abc.abstractmethod
    def render_at(self, pose: AgentPose | Any, spec: SensorSpec) -> dict[str, np.ndarray]:
        """Render ``spec`` from an arbitrary agent pose without moving the agent or touching
        the sensor's cached frame."""

    @abc.abstractmethod
    def object_positions(self) -> dict[int, np.ndarray]:
        """World position (3,) of every movable object by instance id."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release renderers and engine resources."""

    def camera_intrinsics(self, name: str) -> np.ndarray:
        """3×3 K of an attached camera or panorama sensor."""
        spec = self.sensors.get(name)
        if spec is None or not hasattr(spec, "intrinsics"):
            raise UnknownNameError("camera sensor", name, [n for n, s in self.sensors.items() if hasattr(s, "intrinsics")])
        return spec.intrinsics

    def camera_extrinsics(self, name: str, view: int = 0) -> np.ndarray:
        """4×4 camera-to-world (OpenCV axes) of an attached camera at the current pose; for a
        panorama, of view ``view``."""
        from .sensors import PanoramaSpec, camera_extrinsics

        spec = self.sensors.get(name)
        if spec is None or not hasattr(spec, "intrinsics"):
            raise UnknownNameError("camera sensor", name, [n for n, s in self.sensors.items() if hasattr(s, "intrinsics")])
        yaw_offset = 2 * math.pi * view / spec.views if isinstance(spec, PanoramaSpec) else 0.0
        return camera_extrinsics(self.pose, spec.mount, self.body.camera_height, yaw_offset, self.scene.floor_z)

    def __enter__(self) -> "Simulator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


#: Backend name → ``"module:factory"``; the factory has ``make_simulator``'s signature minus ``backend``.
BACKENDS: Registry[str] = Registry("simulator backend")
BACKENDS.register("mujoco")("vlnverse.sim.mujoco.backend:MujocoSimulator")
BACKENDS.register("isaac")("vlnverse.sim.isaac:IsaacSimulator")


def backend_module(name: str) -> str | None:
    """The module that implements backend ``name`` (``auto``: MuJoCo's), without importing it;
    None for an unknown name. Parallel runs preload it into their worker processes."""
    try:
        return BACKENDS.get("mujoco" if name == "auto" else name).split(":")[0]
    except Exception:  # noqa: BLE001 - unknown names fail later, in check_backend, with the usual message
        return None


def check_backend(name: str) -> None:
    """Raise at once if backend ``name`` is unknown (``UnknownNameError``) or its engine is not
    installed here (the backend module's ``require_available()``: one line saying how to install it)."""
    if name == "auto":
        return
    module_name, _attr = BACKENDS.get(name).split(":")
    require = getattr(importlib.import_module(module_name), "require_available", None)
    if require is not None:
        require()


def make_simulator(scene: SceneDescription, body: AgentBody | str = DEFAULT_BODY,
                   sensors: Iterable[SensorSpec] | None = None, backend: str = "auto",
                   control: ControlConfig | dict | None = None, **options: Any) -> Simulator:
    """Build a simulator for ``scene`` with ``body`` (an ``AgentBody`` or preset name) and
    ``sensors`` (default: ``default_sensors()``; pass ``[]`` for none).

    ``backend="auto"`` picks ``mujoco``. Backend options (MuJoCo: ``renderer`` = auto | gl |
    raycast, ``step_height``, ``label_table``, ``quality`` = fast | default | high; Isaac:
    ``headless``, ``step_height``, ``label_table``, ``stage_dir``) pass through ``options``.
    """
    if not isinstance(scene, SceneDescription):
        raise ConfigError(f"got {type(scene).__name__}", field="scene", expected="a SceneDescription")
    body = as_body(body)
    validate(body)
    if control is None:
        control = ControlConfig()
    elif isinstance(control, dict):
        from ..core.config import from_dict

        control = from_dict(ControlConfig, control, prefix="control")
    else:
        validate(control, prefix="control")
    sensors = default_sensors() if sensors is None else list(sensors)
    for spec in sensors:
        validate_sensor(spec)
    name = "mujoco" if backend == "auto" else backend
    check_backend(name)
    module_name, attr = BACKENDS.get(name).split(":")
    factory = getattr(importlib.import_module(module_name), attr)
    return factory(scene, body, sensors=sensors, control=control, **options)
