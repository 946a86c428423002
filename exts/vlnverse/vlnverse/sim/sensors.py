"""Sensor specifications (cameras, LiDAR, panorama rig), the ``SENSORS`` preset registry, and
camera intrinsics/extrinsics.

Camera frame convention (OpenCV): x right, y down, z forward (optical axis). ``extrinsics`` are
4×4 camera-to-world matrices in that convention; world is Z up. ``intrinsics`` are 3×3 pinhole
matrices with square pixels and the principal point at the image centre (pixel (u, v) covers
[u, u+1) × [v, v+1), so the centre of the top-left pixel is (0.5, 0.5)). Depth images hold planar
depth (distance along the optical axis) in metres.

The mount of every sensor is given relative to the agent base: ``(x forward, y left, z up from
the floor, pitch_deg)``; ``z=None`` means the body's ``camera_height``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Union

import numpy as np

from ..core.config import require
from ..core.errors import ConfigError
from ..core.registry import Registry
from .types import AgentPose

CAMERA_KINDS = ("rgb", "depth", "semantic", "instance")


def _validate_mount(mount: tuple, prefix: str = "mount") -> None:
    require(isinstance(mount, (tuple, list)) and len(mount) == 4, prefix, f"got {mount!r}",
            "(x, y, z or None, pitch_deg)")
    for i, v in enumerate(mount):
        if i == 2 and v is None:
            continue
        require(isinstance(v, (int, float)) and math.isfinite(v), f"{prefix}[{i}]", f"got {v!r}", "a finite number")
    require(-90.0 <= mount[3] <= 90.0, f"{prefix}[3]", f"pitch {mount[3]}", "a pitch in [-90, 90] degrees")


#: The one set of camera limits: every camera (``CameraSpec``, a ``PanoramaSpec``'s camera, and the configs'
#: ``vlnverse.run.setup.SensorConfig``, which is made of ``CameraSpec``'s fields) is checked against these by ``check_camera``.
IMAGE_SIDE_PX = (1, 4096)  # image width and height, pixels (inclusive)
HFOV_DEG = (0.0, 180.0)  # horizontal field of view, degrees (low, high), both excluded
MAX_DEPTH_M = (0.1, 1000.0)  # the depth range's far end, metres (inclusive)


def check_camera(*, kind: str | None = None, kinds: tuple = CAMERA_KINDS, width: Any, height: Any, hfov_deg: Any,
                 max_depth: Any, min_depth: Any = 0.0) -> None:
    """Raise ``ConfigError`` naming the field when a camera's kind (when given), image size, field
    of view or depth range is outside the limits (``IMAGE_SIDE_PX``, ``HFOV_DEG``, ``MAX_DEPTH_M``)."""
    if kind is not None:
        require(kind in kinds, "kind", f"got {kind!r}", f"one of {kinds}")
    lo, hi = IMAGE_SIDE_PX
    for name, v in (("width", width), ("height", height)):
        require(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and lo <= v <= hi, name,
                f"got {v!r}", f"an integer in [{lo}, {hi}] pixels")
    lo, hi = HFOV_DEG
    require(isinstance(hfov_deg, (int, float)) and not isinstance(hfov_deg, bool) and math.isfinite(hfov_deg)
            and lo < hfov_deg < hi, "hfov_deg", f"got {hfov_deg!r}", f"a field of view in ({lo:g}, {hi:g}) degrees")
    lo, hi = MAX_DEPTH_M
    require(isinstance(max_depth, (int, float)) and not isinstance(max_depth, bool) and math.isfinite(max_depth)
            and lo <= max_depth <= hi, "max_depth", f"got {max_depth!r}", f"metres in [{lo:g}, {hi:g}]")
    require(isinstance(min_depth, (int, float)) and 0.0 <= min_depth < max_depth, "min_depth",
            f"got [{min_depth}, {max_depth}]", "0 <= min_depth < max_depth")


def _validate_rate(rate_hz: Any) -> None:
    require(rate_hz is None or (isinstance(rate_hz, (int, float)) and math.isfinite(rate_hz) and rate_hz > 0),
            "rate_hz", f"got {rate_hz!r}", "None (every observation) or a positive rate in Hz")


#: The ``CameraSpec`` fields a config file's camera entry sets (``vlnverse.run.setup.SensorConfig``,
#: made from them: ``name`` required, the rest with the defaults below); the others keep their defaults.
CONFIG_CAMERA_FIELDS = ("name", "kind", "width", "height", "hfov_deg", "max_depth")


@dataclass
class CameraSpec:
    """A pinhole camera: ``kind`` in rgb | depth | semantic | instance.

    Outputs: rgb ``uint8 (H, W, 3)``; depth ``float32 (H, W)`` metres clipped to
    [``min_depth``, ``max_depth``] (no hit reads ``max_depth``), divided by ``max_depth`` after
    subtracting ``min_depth`` when ``normalize``; semantic ``int32 (H, W)`` label ids into the
    simulator's ``semantic_labels`` (0 = background); instance ``int32 (H, W)`` instance ids
    (-1 = background). ``rate_hz=None`` renders at every observation; otherwise the sensor renders
    when its period has elapsed on the simulation clock and returns its last frame in between.
    """

    name: str = "rgb"
    kind: str = "rgb"
    width: int = 224
    height: int = 224
    hfov_deg: float = 90.0
    mount: tuple = (0.0, 0.0, None, 0.0)
    rate_hz: float | None = None
    min_depth: float = 0.0
    max_depth: float = 10.0
    normalize: bool = False

    def validate(self) -> None:
        """Raise ``ConfigError`` naming the field for any invalid parameter."""
        require(isinstance(self.name, str) and self.name.isidentifier(), "name", f"got {self.name!r}",
                "a Python identifier")
        check_camera(kind=self.kind, width=self.width, height=self.height, hfov_deg=self.hfov_deg,
                     min_depth=self.min_depth, max_depth=self.max_depth)
        _validate_mount(self.mount)
        _validate_rate(self.rate_hz)

    @property
    def intrinsics(self) -> np.ndarray:
        """3×3 pinhole matrix K (square pixels, principal point at the image centre)."""
        return camera_intrinsics(self.width, self.height, self.hfov_deg)

    @property
    def vfov_deg(self) -> float:
        """Vertical field of view implied by ``hfov_deg`` and the aspect ratio."""
        return vertical_fov_deg(self.width, self.height, self.hfov_deg)


#: What a panorama reads through from its camera (``pano.width`` is ``pano.camera.width``).
_CAMERA_ATTRS = frozenset({"width", "height", "hfov_deg", "mount", "rate_hz", "min_depth", "max_depth", "normalize",
                           "intrinsics", "vfov_deg"})


@dataclass
class PanoramaSpec:
    """``views`` copies of one ``camera`` sharing its mount, view i turned ``i * 360 / views``
    degrees CCW from the agent's heading, each drawing ``modalities`` (the camera's own name and
    kind are not used). VLNVerse online setting: 12 views at 30°, 224², 90° FoV, RGB + depth.
    The camera's fields read through: ``pano.width`` is ``pano.camera.width``.

    Outputs one array per modality, key ``<name>_<modality>``, stacked over views: e.g.
    ``panorama_rgb`` ``uint8 (V, H, W, 3)`` and ``panorama_depth`` ``float32 (V, H, W)``.
    """

    name: str = "panorama"
    views: int = 12
    modalities: tuple = ("rgb", "depth")
    camera: CameraSpec = field(default_factory=CameraSpec)

    @classmethod
    def of(cls, name: str = "panorama", views: int = 12, modalities: tuple = ("rgb", "depth"),
           **camera: Any) -> "PanoramaSpec":
        """A panorama from flat fields (the ``panorama`` preset's): ``camera`` holds ``CameraSpec`` fields but ``name`` and ``kind``."""
        if "kind" in camera:
            raise TypeError("a panorama has modalities, not a kind: unexpected keyword argument 'kind'")
        return cls(name=name, views=views, modalities=modalities, camera=CameraSpec(**camera))

    def __getattr__(self, attr: str) -> Any:
        if attr in _CAMERA_ATTRS and "camera" in self.__dict__:
            return getattr(self.__dict__["camera"], attr)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {attr!r}")

    def validate(self) -> None:
        """Raise ``ConfigError`` naming the field for any invalid parameter."""
        require(isinstance(self.name, str) and self.name.isidentifier(), "name", f"got {self.name!r}",
                "a Python identifier")
        require(isinstance(self.views, int) and 1 <= self.views <= 72, "views", f"got {self.views!r}",
                "an integer in [1, 72]")
        require(isinstance(self.camera, CameraSpec), "camera", f"got {type(self.camera).__name__}", "a CameraSpec")
        self.camera.validate()
        mods = tuple(self.modalities)
        require(len(mods) > 0 and len(set(mods)) == len(mods) and all(m in CAMERA_KINDS for m in mods),
                "modalities", f"got {self.modalities!r}", f"distinct names from {CAMERA_KINDS}")

    def view_specs(self) -> list[tuple[float, CameraSpec]]:
        """(yaw offset rad, CameraSpec) for each view and modality, in view-major order."""
        return [(2 * math.pi * i / self.views, replace(self.camera, name=f"{self.name}_{mod}", kind=mod, rate_hz=None,
                                                       mount=tuple(self.camera.mount)))
                for i in range(self.views) for mod in self.modalities]


@dataclass
class LidarSpec:
    """A ray-cast LiDAR: ``channels`` rows between ``vertical_fov_deg`` (min, max elevation; a single
    channel looks horizontally) × ``beams`` columns over ``horizontal_fov_deg`` centred on the
    heading, starting at the right (column 0 = -fov/2, increasing CCW). Output ``<name>``:
    ``float32 (channels, beams)`` ranges in metres; no return within [``min_range``,
    ``max_range``] reads ``inf``. Mount z defaults to half the body height for a LiDAR."""

    name: str = "lidar"
    beams: int = 360
    channels: int = 1
    horizontal_fov_deg: float = 360.0
    vertical_fov_deg: tuple = (-15.0, 15.0)
    min_range: float = 0.05
    max_range: float = 10.0
    mount: tuple = (0.0, 0.0, None, 0.0)
    rate_hz: float | None = None

    def validate(self) -> None:
        """Raise ``ConfigError`` naming the field for any invalid parameter."""
        require(isinstance(self.name, str) and self.name.isidentifier(), "name", f"got {self.name!r}",
                "a Python identifier")
        require(isinstance(self.beams, int) and 1 <= self.beams <= 16384, "beams", f"got {self.beams!r}",
                "an integer in [1, 16384]")
        require(isinstance(self.channels, int) and 1 <= self.channels <= 256, "channels",
                f"got {self.channels!r}", "an integer in [1, 256]")
        require(0.0 < self.horizontal_fov_deg <= 360.0, "horizontal_fov_deg", f"got {self.horizontal_fov_deg}",
                "a value in (0, 360]")
        lo, hi = self.vertical_fov_deg
        require(-90.0 <= lo <= hi <= 90.0, "vertical_fov_deg", f"got {self.vertical_fov_deg}",
                "(min, max) elevations with -90 <= min <= max <= 90")
        require(0.0 <= self.min_range < self.max_range and math.isfinite(self.max_range), "min_range/max_range",
                f"got [{self.min_range}, {self.max_range}]", "0 <= min_range < max_range < inf")
        _validate_mount(self.mount)
        _validate_rate(self.rate_hz)

    def directions(self) -> np.ndarray:
        """Unit ray directions (channels, beams, 3) in the sensor frame (x forward, y left, z up)."""
        if self.horizontal_fov_deg >= 360.0:
            az = np.linspace(-math.pi, math.pi, self.beams, endpoint=False)
        else:
            half = math.radians(self.horizontal_fov_deg) / 2
            az = np.linspace(-half, half, self.beams)
        lo, hi = np.radians(self.vertical_fov_deg)
        el = np.array([0.0]) if self.channels == 1 else np.linspace(lo, hi, self.channels)
        el, az = np.meshgrid(el, az, indexing="ij")
        return np.stack([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)], axis=-1)

    def points(self, ranges: np.ndarray) -> np.ndarray:
        """Sensor-frame points (N, 3) of the finite returns in ``ranges`` (channels, beams)."""
        ranges = np.asarray(ranges, dtype=float)
        ok = np.isfinite(ranges)
        return self.directions()[ok] * ranges[ok][:, None]


SensorSpec = Union[CameraSpec, PanoramaSpec, LidarSpec]

#: Sensor presets by name; ``make_sensor(name, **overrides)`` builds and validates one.
SENSORS: Registry[Callable[..., SensorSpec]] = Registry("sensor preset")

SENSORS.register("rgb")(lambda **kw: CameraSpec(**{"name": "rgb", "kind": "rgb", "width": 224, "height": 224, **kw}))
SENSORS.register("depth")(lambda **kw: CameraSpec(**{"name": "depth", "kind": "depth", "width": 256, "height": 256, **kw}))
SENSORS.register("semantic")(lambda **kw: CameraSpec(**{"name": "semantic", "kind": "semantic", **kw}))
SENSORS.register("instance")(lambda **kw: CameraSpec(**{"name": "instance", "kind": "instance", **kw}))
SENSORS.register("panorama")(PanoramaSpec.of)
SENSORS.register("lidar2d")(lambda **kw: LidarSpec(**{"name": "lidar2d", "beams": 360, "channels": 1, **kw}))
SENSORS.register("lidar3d")(lambda **kw: LidarSpec(**{"name": "lidar3d", "beams": 1024, "channels": 32,
                                                      "vertical_fov_deg": (-22.5, 22.5), **kw}))


def make_sensor(preset: str, **overrides: Any) -> SensorSpec:
    """Build the preset ``preset`` (see ``SENSORS``) with field overrides, validated.

    Unknown presets raise ``UnknownNameError``; unknown fields and bad values ``ConfigError``.
    """
    factory = SENSORS.get(preset)
    try:
        spec = factory(**overrides)
    except TypeError as exc:
        raise ConfigError(f"sensor preset '{preset}': {exc}", expected="fields of the sensor spec") from None
    validate_sensor(spec)
    return spec


def validate_sensor(spec: Any) -> None:
    """Validate a sensor spec; errors name the sensor and the field."""
    if not isinstance(spec, (CameraSpec, PanoramaSpec, LidarSpec)):
        raise ConfigError(f"got {type(spec).__name__}", field="sensor", expected="CameraSpec, PanoramaSpec or LidarSpec")
    try:
        spec.validate()
    except ConfigError as exc:
        name = getattr(spec, "name", "?")
        raise ConfigError(exc.problem, field=f"sensor '{name}'.{exc.field}" if exc.field else f"sensor '{name}'",
                          expected=exc.expected) from None


def default_sensors() -> list[SensorSpec]:
    """The VLNVerse default rig: 224² RGB (90° FoV) and 256² depth."""
    return [make_sensor("rgb"), make_sensor("depth")]


def camera_intrinsics(width: int, height: int, hfov_deg: float) -> np.ndarray:
    """3×3 pinhole intrinsics: fx = fy = (W/2) / tan(hfov/2), (cx, cy) = (W/2, H/2)."""
    fx = (width / 2.0) / math.tan(math.radians(hfov_deg) / 2.0)
    return np.array([[fx, 0.0, width / 2.0], [0.0, fx, height / 2.0], [0.0, 0.0, 1.0]])


def vertical_fov_deg(width: int, height: int, hfov_deg: float) -> float:
    """Vertical FoV of a square-pixel camera with horizontal FoV ``hfov_deg``."""
    return math.degrees(2.0 * math.atan(math.tan(math.radians(hfov_deg) / 2.0) * height / width))


def mount_position(mount: tuple, camera_height: float) -> np.ndarray:
    """Mount offset (x forward, y left, z up) with ``z=None`` replaced by ``camera_height``."""
    return np.array([mount[0], mount[1], camera_height if mount[2] is None else mount[2]], dtype=float)


def sensor_rotation(yaw: float, pitch: float) -> np.ndarray:
    """3×3 rotation whose columns are the sensor's forward, left and up axes in the world."""
    cy, sy, cp, sp = math.cos(yaw), math.sin(yaw), math.cos(pitch), math.sin(pitch)
    forward = np.array([cp * cy, cp * sy, sp])
    left = np.array([-sy, cy, 0.0])
    up = np.cross(forward, left)
    return np.stack([forward, left, up], axis=1)


def sensor_world_pose(pose: AgentPose, mount: tuple, camera_height: float, yaw_offset: float = 0.0,
                      floor_z: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """World position (3,) and rotation (3×3, columns forward/left/up) of a sensor mounted on an
    agent at ``pose``; the camera pitch is the mount pitch plus the agent's articulated pitch."""
    offset = mount_position(mount, camera_height)
    c, s = math.cos(pose.yaw), math.sin(pose.yaw)
    pos = np.array([pose.x + c * offset[0] - s * offset[1], pose.y + s * offset[0] + c * offset[1],
                    floor_z + offset[2]])
    rot = sensor_rotation(pose.yaw + yaw_offset, pose.pitch + math.radians(mount[3]))
    return pos, rot


def camera_extrinsics(pose: AgentPose, mount: tuple, camera_height: float, yaw_offset: float = 0.0,
                      floor_z: float = 0.0) -> np.ndarray:
    """4×4 camera-to-world matrix in the OpenCV camera convention (x right, y down, z forward)."""
    pos, rot = sensor_world_pose(pose, mount, camera_height, yaw_offset, floor_z)
    forward, left, up = rot[:, 0], rot[:, 1], rot[:, 2]
    mat = np.eye(4)
    mat[:3, :3] = np.stack([-left, -up, forward], axis=1)
    mat[:3, 3] = pos
    return mat


def depth_output(depth: np.ndarray, spec) -> np.ndarray:
    """Planar depth in metres (``inf``/NaN = no hit) finished as a camera's ``spec`` documents:
    no hit reads ``max_depth``, clipped to [``min_depth``, ``max_depth``], normalised to [0, 1] when
    ``spec.normalize``; float32."""
    d = np.clip(np.nan_to_num(depth, posinf=spec.max_depth), spec.min_depth, spec.max_depth)
    if spec.normalize:
        d = (d - spec.min_depth) / (spec.max_depth - spec.min_depth)
    return d.astype(np.float32)


def pixel_rays(width: int, height: int, hfov_deg: float) -> np.ndarray:
    """Camera-frame (OpenCV) ray directions through every pixel centre, (H, W, 3), z component 1."""
    k = camera_intrinsics(width, height, hfov_deg)
    u = (np.arange(width) + 0.5 - k[0, 2]) / k[0, 0]
    v = (np.arange(height) + 0.5 - k[1, 2]) / k[1, 1]
    uu, vv = np.meshgrid(u, v)
    return np.stack([uu, vv, np.ones_like(uu)], axis=-1)

