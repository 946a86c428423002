"""Backend-neutral value types of the simulator API: poses, actions, contacts, action results.

Conventions: metres and radians, Z up, yaw counter-clockwise from +X, pitch positive looking up.
Agent-frame vectors (``WaypointAction``) use x forward, y left.
"""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Any, Union

import numpy as np

from ..core.errors import VLNVerseError
from ..core.geometry import wrap_angle  # noqa: F401 (part of the simulator API)


#: Render quality presets (``render.quality``): ``fast`` (flat colours under even light),
#: ``default`` (materials, textures, room lights, anti-aliasing), ``high`` (plus shadows,
#: reflections, multisampling). Depth and segmentation do not depend on the preset.
RENDER_QUALITIES = ("fast", "default", "high")


class InvalidActionError(VLNVerseError, ValueError):
    """An action is malformed (NaN/inf, unknown name, outside the action space); raised before
    anything reaches the physics."""


@dataclass(frozen=True)
class AgentPose:
    """Pose of the agent on the floor plane: position (m), yaw (rad, CCW from +X), camera pitch (rad)."""

    x: float
    y: float
    yaw: float = 0.0
    pitch: float = 0.0

    @classmethod
    def coerce(cls, value: Any) -> "AgentPose":
        """Accept an ``AgentPose``, a mapping with x/y/yaw[/pitch], or a sequence (x, y[, yaw[, pitch]]).

        Raises ``InvalidActionError`` for anything else or for non-finite numbers.
        """
        if isinstance(value, AgentPose):
            pose = value
        elif isinstance(value, dict):
            try:
                pose = cls(float(value["x"]), float(value["y"]), float(value.get("yaw", 0.0)),
                           float(value.get("pitch", 0.0)))
            except (KeyError, TypeError, ValueError):
                raise InvalidActionError(f"pose {value!r}: expected a mapping with numeric x, y[, yaw, pitch]") from None
        else:
            try:
                vals = [float(v) for v in np.asarray(value, dtype=float).reshape(-1)]
            except (TypeError, ValueError):
                raise InvalidActionError(f"pose {value!r}: expected (x, y[, yaw[, pitch]])") from None
            if not 2 <= len(vals) <= 4:
                raise InvalidActionError(f"pose {value!r}: expected 2 to 4 numbers (x, y[, yaw[, pitch]])")
            pose = cls(*vals)
        if not all(math.isfinite(v) for v in (pose.x, pose.y, pose.yaw, pose.pitch)):
            raise InvalidActionError(f"pose {pose}: all components must be finite")
        return pose

    @property
    def xy(self) -> np.ndarray:
        """Position (2,)."""
        return np.array([self.x, self.y])

    def to_dict(self) -> dict[str, float]:
        """Plain dict (JSON-friendly)."""
        return {"x": float(self.x), "y": float(self.y), "yaw": float(self.yaw), "pitch": float(self.pitch)}

    def distance_to(self, other: "AgentPose") -> float:
        """Planar Euclidean distance in metres."""
        return float(math.hypot(self.x - other.x, self.y - other.y))


class DiscreteAction(enum.IntEnum):
    """The six discrete VLN-CE actions (integer values as in Habitat/VLN-CE)."""

    STOP = 0
    MOVE_FORWARD = 1
    TURN_LEFT = 2
    TURN_RIGHT = 3
    LOOK_UP = 4
    LOOK_DOWN = 5

    @classmethod
    def coerce(cls, value: Any) -> "DiscreteAction":
        """Accept a member, its integer value or its name (case-insensitive)."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            try:
                return cls[value.strip().upper()]
            except KeyError:
                raise InvalidActionError(f"unknown discrete action '{value}' (expected one of {[m.name for m in cls]})") from None
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            try:
                return cls(int(value))
            except ValueError:
                raise InvalidActionError(f"discrete action {value} out of range (expected 0..{len(cls) - 1})") from None
        raise InvalidActionError(f"cannot interpret {value!r} as a discrete action")


def _check_finite(action: Any, **values: float) -> None:
    for name, v in values.items():
        if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) or not math.isfinite(v):
            raise InvalidActionError(f"{type(action).__name__}.{name} = {v!r}: expected a finite number")


@dataclass(frozen=True)
class VelocityAction:
    """Hold body-frame velocity command (``v`` m/s forward, ``omega`` rad/s CCW, ``lateral`` m/s to
    the left, holonomic bodies only) for ``duration`` seconds; clipped to the body's limits."""

    v: float
    omega: float
    duration: float
    lateral: float = 0.0

    def validate(self) -> None:
        """Raise ``InvalidActionError`` on NaN/inf or a non-positive duration."""
        _check_finite(self, v=self.v, omega=self.omega, duration=self.duration, lateral=self.lateral)
        if not 0.0 < self.duration <= 600.0:
            raise InvalidActionError(f"VelocityAction.duration = {self.duration}: expected 0 < duration <= 600 s")


@dataclass(frozen=True)
class WaypointAction:
    """Go to a relative pose (``dx`` forward, ``dy`` left in metres, ``dyaw`` rad CCW, agent frame at
    the time of the command) under a closed-loop controller through physics; give up after ``timeout`` s."""

    dx: float
    dy: float
    dyaw: float = 0.0
    timeout: float = 10.0

    def validate(self) -> None:
        """Raise ``InvalidActionError`` on NaN/inf or a non-positive timeout."""
        _check_finite(self, dx=self.dx, dy=self.dy, dyaw=self.dyaw, timeout=self.timeout)
        if not 0.0 < self.timeout <= 600.0:
            raise InvalidActionError(f"WaypointAction.timeout = {self.timeout}: expected 0 < timeout <= 600 s")


Action = Union[DiscreteAction, VelocityAction, WaypointAction, int, str]


@dataclass(frozen=True)
class Contact:
    """One distinct obstacle the agent touched during an action."""

    label: str
    instance_id: int
    name: str = ""
    position: tuple[float, float, float] = (0.0, 0.0, 0.0)
    movable: bool = False

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (JSON-friendly)."""
        return {"label": self.label, "instance_id": int(self.instance_id), "name": self.name,
                "position": [float(v) for v in self.position], "movable": bool(self.movable)}


@dataclass
class ActionResult:
    """What happened when an action was executed.

    ``obstacle_displacement`` is the planar distance between the commanded and the achieved end
    position: how far obstacles held or pushed the agent off the motion it was told to make
    (the VLNVerse *Strict* protocol fails an episode when it exceeds 0.1 m). ``trajectory``
    holds (x, y, yaw) at every control tick, starting with the start pose.
    """

    action: str
    commanded_pose: AgentPose
    achieved_pose: AgentPose
    collided: bool = False
    contacts: list[Contact] = field(default_factory=list)
    obstacle_displacement: float = 0.0
    success: bool = True
    message: str = ""
    physics_steps: int = 0
    sim_time: float = 0.0
    wall_time: float = 0.0
    trajectory: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (JSON-friendly; trajectory as a list of [x, y, yaw])."""
        return {
            "action": self.action, "commanded_pose": self.commanded_pose.to_dict(),
            "achieved_pose": self.achieved_pose.to_dict(), "collided": bool(self.collided),
            "contacts": [c.to_dict() for c in self.contacts],
            "obstacle_displacement": float(self.obstacle_displacement), "success": bool(self.success),
            "message": self.message, "physics_steps": int(self.physics_steps),
            "sim_time": float(self.sim_time), "wall_time": float(self.wall_time),
            "trajectory": np.asarray(self.trajectory, dtype=float).tolist(),
        }
