"""Simulator layer: agent bodies, physics-aware controllers and sensor rigs.

Backend-neutral API (no MuJoCo types): ``make_simulator(scene, body, sensors, backend="auto")``
returns a ``Simulator`` driven by ``DiscreteAction`` / ``VelocityAction`` / ``WaypointAction``
and returning observation dicts plus an ``ActionResult``. Importing this package is cheap: the
MuJoCo backend (``vlnverse.sim.mujoco``) is imported only when a simulator is built, after
``MUJOCO_GL`` has been chosen. See ``exts/vlnverse/docs/simulator.md``.
"""
from .api import BACKENDS, ControlConfig, Simulator, make_simulator
from .body import AgentBody, list_bodies, load_body
from .sensors import (SENSORS, CameraSpec, LidarSpec, PanoramaSpec, camera_extrinsics, camera_intrinsics,
                      default_sensors, make_sensor, validate_sensor)
from .types import (ActionResult, AgentPose, Contact, DiscreteAction, InvalidActionError, VelocityAction,
                    WaypointAction, wrap_angle)

__all__ = [
    "BACKENDS", "ControlConfig", "Simulator", "make_simulator", "AgentBody", "list_bodies", "load_body",
    "SENSORS", "CameraSpec", "LidarSpec", "PanoramaSpec", "camera_extrinsics", "camera_intrinsics",
    "default_sensors", "make_sensor", "validate_sensor", "ActionResult", "AgentPose", "Contact",
    "DiscreteAction", "InvalidActionError", "VelocityAction", "WaypointAction", "wrap_angle",
]
