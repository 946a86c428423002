"""Task-agnostic Gymnasium environment over a ``Simulator``.

``VLNVerseNavEnv`` exposes the sensor rig as a ``Dict`` observation space (one entry per sensor
output plus ``pose`` = float32 [x, y, yaw, pitch]) and either the six discrete VLN-CE actions
(``Discrete(6)``) or a continuous ``Box`` of (v, omega) held for ``velocity_duration`` seconds.
Reward is always 0 and an episode terminates on ``STOP``: the task layer adds goals and rewards.
"""
from __future__ import annotations

import warnings
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from ..core.errors import ConfigError
from ..scenes.description import SceneDescription
from .api import ControlConfig, make_simulator
from .body import DEFAULT_BODY, AgentBody, as_body
from .sensors import CameraSpec, LidarSpec, PanoramaSpec, SensorSpec, default_sensors
from .types import ActionResult, AgentPose, DiscreteAction, InvalidActionError, VelocityAction


def _camera_space(kind: str, spec, shape: tuple[int, ...], n_labels: int, max_instance: int) -> spaces.Box:
    if kind == "rgb":
        return spaces.Box(0, 255, (*shape, 3), np.uint8)
    if kind == "depth":
        lo, hi = (0.0, 1.0) if spec.normalize else (spec.min_depth, spec.max_depth)
        return spaces.Box(np.float32(lo), np.float32(hi), shape, np.float32)
    if kind == "semantic":
        return spaces.Box(0, max(n_labels - 1, 0), shape, np.int32)
    return spaces.Box(-1, max(max_instance, 0), shape, np.int32)


def observation_space_for(sensors: list[SensorSpec], n_labels: int, max_instance: int) -> spaces.Dict:
    """The ``Dict`` space of a sensor rig (plus ``pose``)."""
    entries: dict[str, spaces.Space] = {}
    for spec in sensors:
        if isinstance(spec, CameraSpec):
            entries[spec.name] = _camera_space(spec.kind, spec, (spec.height, spec.width), n_labels, max_instance)
        elif isinstance(spec, PanoramaSpec):
            for mod in spec.modalities:
                entries[f"{spec.name}_{mod}"] = _camera_space(mod, spec, (spec.views, spec.height, spec.width),
                                                              n_labels, max_instance)
        elif isinstance(spec, LidarSpec):
            entries[spec.name] = spaces.Box(np.float32(0.0), np.float32(np.inf), (spec.channels, spec.beams), np.float32)
    entries["pose"] = spaces.Box(-np.inf, np.inf, (4,), np.float32)
    return spaces.Dict(entries)


class VLNVerseNavEnv(gym.Env):
    """Drive an agent through a scene: ``reset(seed=..., options={"pose": (x, y, yaw)})``, ``step(action)``.

    Without a pose, ``reset`` draws a random collision-free start with ``self.np_random``: from the
    navigable cells (the body's height band, dilated by its radius; largest connected region) of
    ``vlnverse.scenes`` when the maps layer is installed, otherwise by
    sampling room interiors (or the scene bounds) and probing with teleports.
    ``info`` carries the ``ActionResult`` of the step (``collided``, ``obstacle_displacement``, ...).
    """

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, scene: SceneDescription, body: AgentBody | str = DEFAULT_BODY, sensors: list[SensorSpec] | None = None,
                 *, action_mode: str = "discrete", velocity_duration: float = 0.25, render_mode: str | None = None,
                 control: ControlConfig | dict | None = None, **sim_options: Any):
        if action_mode not in ("discrete", "velocity"):
            raise ConfigError(f"got {action_mode!r}", field="action_mode", expected="discrete or velocity")
        if render_mode not in (None, "rgb_array"):
            raise ConfigError(f"got {render_mode!r}", field="render_mode", expected="None or 'rgb_array'")
        self.body = as_body(body)
        self.scene = scene
        self.sim = make_simulator(scene, self.body, default_sensors() if sensors is None else sensors,
                                  control=control, **sim_options)
        self.action_mode, self.velocity_duration, self.render_mode = action_mode, float(velocity_duration), render_mode
        max_instance = max([g.instance_id for g in scene.geoms] + [0])
        self.observation_space = observation_space_for(list(self.sim.sensors.values()), len(self.sim.semantic_labels),
                                                       max_instance)
        if action_mode == "discrete":
            self.action_space = spaces.Discrete(len(DiscreteAction))
        else:
            high = np.array([self.body.max_linear_speed, self.body.max_angular_speed], np.float32)
            self.action_space = spaces.Box(-high, high, (2,), np.float32)
        self._free_cells: np.ndarray | None = None
        self._last_obs: dict[str, np.ndarray] | None = None
        self.last_result: ActionResult | None = None

    # ------------------------------------------------------------------ start poses
    def _navigable_points(self) -> np.ndarray | None:
        """World (x, y) of navigable cells from the maps layer, or ``None`` when unavailable."""
        if self._free_cells is None:
            try:
                from ..scenes.maps import compute_scene_maps
            except ImportError:
                self._free_cells = np.zeros((0, 2))
                return None
            from scipy import ndimage

            # the scene's navigable map for this body, from the same (disk-cached) maps as the
            # task and evaluation layers, and only its largest connected free region: navigable
            # pockets the agent cannot leave (inside a bathtub, a closed pen) make no start
            occ = compute_scene_maps(self.scene, self.body).navigable
            labels, n = ndimage.label(occ.free_mask())
            if n > 1:
                sizes = np.bincount(labels.ravel())
                sizes[0] = 0
                rc = np.argwhere(labels == int(sizes.argmax()))
            else:
                rc = np.argwhere(labels > 0)
            self._free_cells = occ.cell_to_world(rc) if len(rc) else np.zeros((0, 2))
        return self._free_cells if len(self._free_cells) else None

    def _sample_region_point(self) -> np.ndarray:
        rooms = self.scene.rooms
        if rooms:
            room = rooms[int(self.np_random.integers(len(rooms)))]
            lo, hi = room.polygon.min(axis=0), room.polygon.max(axis=0)
            for _ in range(100):
                p = self.np_random.uniform(lo, hi)
                if room.contains(p[None])[0]:
                    return p
            return room.centroid
        floors = [g for g in self.scene.geoms if g.label == "floor"] or self.scene.geoms
        g = floors[int(self.np_random.integers(len(floors)))]
        lo, hi = g.world_aabb()
        return self.np_random.uniform(lo[:2], hi[:2])

    def sample_start_pose(self) -> AgentPose:
        """A random collision-free pose drawn with ``self.np_random``."""
        yaw = float(self.np_random.uniform(-np.pi, np.pi))
        points = self._navigable_points()
        if points is not None:
            x, y = points[int(self.np_random.integers(len(points)))]
            return AgentPose(float(x), float(y), yaw)
        # Probe with teleports from the initial physics state (movable objects back in place).
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            self.sim.reset(self.sim.pose)
        result = None
        for _ in range(200):
            x, y = self._sample_region_point()
            result = self.sim.teleport(AgentPose(float(x), float(y), yaw))
            if not result.collided:
                break
        return result.achieved_pose

    # ------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Reset physics and place the agent at ``options["pose"]`` or a random free start."""
        super().reset(seed=seed)
        options = options or {}
        if options.get("pose") is not None:
            self._last_obs = self.sim.reset(AgentPose.coerce(options["pose"]))
        else:
            # A sampled map cell centre may graze an obstacle by up to half a cell; the simulator
            # settles it on the nearest free pose, which is expected here, so no warning.
            pose = self.sample_start_pose()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                self._last_obs = self.sim.reset(pose)
        self.last_result = None
        return self._last_obs, {"pose": self.sim.pose.to_dict()}

    def step(self, action):
        """Execute one action; ``terminated`` is True on STOP, reward is 0."""
        if not self.action_space.contains(np.asarray(action, dtype=self.action_space.dtype)
                                          if self.action_mode == "velocity" else action):
            raise InvalidActionError(f"action {action!r} is outside the action space {self.action_space}")
        if self.action_mode == "discrete":
            act = DiscreteAction.coerce(int(action))
            obs, result = self.sim.step(act)
            terminated = act == DiscreteAction.STOP
        else:
            v, w = (float(a) for a in np.asarray(action, dtype=float).reshape(2))
            obs, result = self.sim.step(VelocityAction(v, w, self.velocity_duration))
            terminated = False
        self._last_obs, self.last_result = obs, result
        info = {k: val for k, val in result.to_dict().items() if k not in ("trajectory", "wall_time")}
        return obs, 0.0, bool(terminated), False, info

    def render(self):
        """The latest frame of the first RGB camera (``render_mode="rgb_array"``), else ``None``."""
        if self.render_mode != "rgb_array" or self._last_obs is None:
            return None
        for name, spec in self.sim.sensors.items():
            if isinstance(spec, CameraSpec) and spec.kind == "rgb":
                return self._last_obs[name]
        return None

    def close(self):
        """Close the simulator."""
        self.sim.close()
