"""Agent embodiment, the one definition every layer uses: a cylinder body with a height band,
a step height, mass, kinematic limits and a camera mount, loaded from ``robots/*.yaml``.

The maps (``vlnverse.scenes``: footprint, height band, step height), the simulator
(``vlnverse.sim``: collision cylinder, servos, camera), the samplers (``vlnverse.tasks``) and the
oracle (``vlnverse.eval``) all take an :class:`AgentBody` object; :data:`R2R_CE` holds the
defaults (the R2R-CE / VLN-CE body) and :func:`as_body` turns a preset name into a body.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from .config import from_dict, load_yaml, require
from .errors import ConfigError, UnknownNameError
from .paths import robots_dir

#: Physically sensible ranges of a body's sizes (m), mass (kg) and limits (m/s, deg/s, m/s²,
#: deg/s²): outside them the simulation is meaningless (a 1e30 kg body never moves).
BODY_LIMITS = {"height": (0.05, 3.0), "radius": (0.02, 2.0), "mass": (0.1, 2000.0),
               "max_linear_speed": (0.01, 20.0), "max_angular_speed_deg": (1.0, 3600.0),
               "max_linear_accel": (0.01, 100.0), "max_angular_accel_deg": (1.0, 36000.0)}


@dataclass
class AgentBody:
    """A cylinder agent moving on the floor plane (x, y, yaw).

    The body occupies the height band [``step_height``, ``height``] above the floor: obstacles
    lower than ``step_height`` are stepped over (maps and physics alike). ``holonomic=False``
    means differential drive: no sideways velocity. ``camera_height`` (the camera mount) is
    measured from the floor; camera pitch is limited to ``[pitch_min_deg, pitch_max_deg]``.
    The field defaults are the R2R-CE body (:data:`R2R_CE`, ``robots/r2r_ce.yaml``).
    """

    name: str
    height: float = 0.88
    radius: float = 0.18
    step_height: float = 0.15
    mass: float = 40.0
    max_linear_speed: float = 1.0
    max_angular_speed_deg: float = 90.0
    max_linear_accel: float = 2.0
    max_angular_accel_deg: float = 360.0
    camera_height: float = 0.88
    pitch_min_deg: float = -60.0
    pitch_max_deg: float = 60.0
    holonomic: bool = True
    friction: float = 0.0
    description: str = ""

    def validate(self) -> None:
        """Check sizes and limits are positive and the camera sits within the body's height range."""
        for name in ("height", "radius", "mass", "max_linear_speed", "max_angular_speed_deg",
                     "max_linear_accel", "max_angular_accel_deg"):
            value = getattr(self, name)
            lo, hi = BODY_LIMITS[name]
            require(math.isfinite(value) and lo <= value <= hi, name, f"got {value}", f"a number in [{lo:g}, {hi:g}]")
        require(0.0 < self.camera_height <= self.height, "camera_height",
                f"got {self.camera_height} for body height {self.height}",
                f"a value inside the body's height range (0, height] = (0, {self.height:.2f}]")
        require(self.pitch_min_deg <= 0.0 <= self.pitch_max_deg and -90 <= self.pitch_min_deg
                and self.pitch_max_deg <= 90, "pitch_min_deg/pitch_max_deg",
                f"got [{self.pitch_min_deg}, {self.pitch_max_deg}]", "-90 <= min <= 0 <= max <= 90")
        require(math.isfinite(self.step_height) and 0.0 <= self.step_height < self.height, "step_height",
                f"got {self.step_height} for body height {self.height}", f"a height in [0, {self.height:.2f})")
        require(self.friction >= 0, "friction", f"got {self.friction}", "a value >= 0")

    @property
    def max_angular_speed(self) -> float:
        """Maximum yaw rate in rad/s."""
        return math.radians(self.max_angular_speed_deg)


#: The default body (R2R-CE / VLN-CE cylinder): every default size in the package comes from it.
R2R_CE = AgentBody(name="r2r_ce", description="R2R-CE standard cylinder agent")
#: Name of the default body preset (``robots/r2r_ce.yaml``).
DEFAULT_BODY = R2R_CE.name


def list_bodies(folder: Path | None = None) -> list[str]:
    """Names of the body presets in ``robots/``."""
    return sorted(p.stem for p in (folder or robots_dir()).glob("*.yaml"))


def load_body(name_or_path: str | Path) -> AgentBody:
    """Load a body preset by name (``r2r_ce``) or YAML path; validated on load."""
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        path = robots_dir() / f"{name_or_path}.yaml"
        if not path.is_file():
            raise UnknownNameError("body preset", str(name_or_path), list_bodies())
    data = load_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError("not a mapping", file=path, expected="a YAML mapping of body fields")
    data.setdefault("name", path.stem)
    return from_dict(AgentBody, data, file=path)


def as_body(body: "AgentBody | str | Path | None" = None) -> AgentBody:
    """``body`` itself when it is an ``AgentBody``, else the preset it names (``None``: the
    default preset) loaded with :func:`load_body`."""
    if isinstance(body, AgentBody):
        return body
    return load_body(DEFAULT_BODY if body is None else body)
