"""``vlnverse/VLN-v0``: a gymnasium environment for VLN episodes (``import vlnverse.learn`` registers it).

    import gymnasium, vlnverse.learn
    env = gymnasium.make("vlnverse/VLN-v0")   # fine_grained episodes on the shipped homes' train split
    env = gymnasium.make("vlnverse/VLN-v0", episodes="data/fine_grained/train.jsonl",
                         sensors=[{"name": "rgb", "kind": "rgb", "width": 64, "height": 64}])
    from vlnverse.sim.vector_env import make_vector_env
    vec = make_vector_env(VLNEnv, 4, asynchronous=False, episodes=...)   # batch collection

Each episode is an ``eval.rollout.Rollout``: the evaluation's own rules (start placement, step
budget, STOP, Strict failures under the runner's collision modes), so the env's episodes end as
``vlnverse eval``'s do and ``env.unwrapped.rollout.record()`` is the record the runner writes.
Settings (step budget, success distance, body) come from the task config unless given
(``run.episodes.run_settings``). Without ``episodes``, the env generates ``DEFAULT_EPISODES`` of
the task (default ``fine_grained``) once into the learn cache and reuses them.

Observation (``Dict``): each sensor of the rig (RGB uint8 (H, W, 3), depth float32 (H, W) in
metres), ``pose`` (float32 [x, y, yaw, pitch], as the task-agnostic ``sim`` env), the
instruction as ``instruction_tokens`` (int64 ids of the vocabulary, zero-padded) and as
``instruction`` text. Actions: ``Discrete(6)``, the VLN-CE actions (``DiscreteAction`` values).

Reward per step (``info`` carries its parts):

    reward = (d_before - d_after)               geodesic progress toward the goal (metres)
             - collision_penalty * collided     (default 0.1)
             + success_bonus * success          on STOP within ``success_distance`` (default 2.5)

so with ``collision_penalty = success_bonus = 0`` the rewards of an episode sum to the geodesic
distance covered toward the goal, d_start - d_end. ``terminated`` on STOP or a Strict failure,
``truncated`` at ``max_steps``. The task-agnostic ``vlnverse.sim`` env (reward 0) stays in the
simulator layer; this env adds the task (episodes, goals, instructions) on top of the same
simulator and the runner's collision modes.
"""
from __future__ import annotations

import string
from pathlib import Path
from typing import Any, Callable

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from ..core.errors import ConfigError
from ..sim.types import DiscreteAction
from .vocab import Vocabulary

TEXT_CHARSET = "".join(c for c in string.printable if c not in "\t\n\r\x0b\x0c")
TEXT_MAX = 4096
#: The episodes of an env made without ``episodes``: generated on the shipped homes' train split (cached).
DEFAULT_EPISODES = {"generate": {"scenes": "train", "episodes_per_scene": 5, "seed": 0}}
#: The task of an env made without ``episodes`` or ``task``.
DEFAULT_TASK = "fine_grained"


def _sensor_configs(sensors: Any) -> list:
    from ..run.setup import SensorConfig, sensor_config

    if sensors is None:
        return [SensorConfig("rgb", "rgb", 64, 64), SensorConfig("depth", "depth", 64, 64)]
    return [sensor_config(s, field=f"sensors[{i}]") for i, s in enumerate(sensors)]


class VLNEnv(gym.Env):
    """A VLN episode per ``reset`` (see the module docstring).

    ``episodes``: a JSONL path/folder, a list of ``Episode``, or None (``DEFAULT_EPISODES`` of
    ``task``, generated once into ``cache_dir``, default ``$VLNVERSE_CACHE/learn``);
    ``reset(options={"episode": i})`` picks episode ``i`` (an index or an id), else one is drawn
    with the env's seeded generator. Scenes are found as ``vlnverse eval`` finds them:
    ``scene_root`` (folder or list), the episode file's folder, the shipped scenes
    (``vlnverse.tasks.scene_roots``). ``render``: how the simulator draws, the train / eval
    configs' ``render`` (a mapping ``{quality, objects}``, a ``RenderConfig`` or ``QUALITY:OBJECTS``;
    default ``default:primitives``); agents reading ``env.unwrapped.context`` see it as its
    ``render_options``.
    """

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, episodes: Any = None, *, sensors: Any = None, collision_mode: str = "telhop",
                 task: str | None = None, body: str | None = None, max_steps: int | None = None,
                 success_distance: float | None = None, vocab: Vocabulary | dict | None = None,
                 max_instruction_length: int = 80, success_bonus: float = 2.5, collision_penalty: float = 0.1,
                 mode_params: dict | None = None, scene_loader: Callable | None = None, backend: str = "auto",
                 render_mode: str | None = None, scene_root: Any = None, cache_dir: Any = None, render: Any = None):
        from ..run.setup import RenderConfig
        from ..run.episodes import run_settings
        from ..sim.gym_env import observation_space_for
        from ..tasks.episode import load_episodes
        from ..tasks.scene_roots import SceneResolver, root_args, scene_roots

        dataset_dir = None
        if episodes is None:
            from .cache import generated_episodes
            from .config import episode_source

            task = task or DEFAULT_TASK
            episodes = generated_episodes(episode_source(DEFAULT_EPISODES, "episodes").generate, task=task, body=body,
                                          cache_dir=cache_dir, progress=False)
        elif isinstance(episodes, (str, Path)):
            if not Path(episodes).exists():
                raise ConfigError("episode file or folder not found", field="episodes", file=episodes)
            dataset_dir = Path(episodes) if Path(episodes).is_dir() else Path(episodes).parent
            episodes = load_episodes(episodes)
        # the one scene resolver: scene_root, the dataset's folder, the shipped scenes (as vlnverse eval)
        self.resolve_scene = SceneResolver(scene_roots(root_args(scene_root, "scene_root"), dataset_dir))
        self.episodes = list(episodes or [])
        if not self.episodes:
            raise ConfigError("no episodes", field="episodes", expected="a non-empty episode list or JSONL path")
        if collision_mode not in ("strict", "telhop"):
            raise ConfigError(f"got {collision_mode!r}", field="collision_mode", expected="strict or telhop")
        if render_mode not in (None, "rgb_array"):
            raise ConfigError(f"got {render_mode!r}", field="render_mode", expected="None or 'rgb_array'")
        for name, value in (("max_steps", max_steps), ("success_distance", success_distance)):
            if value is not None and not value > 0:
                raise ConfigError(f"got {value!r}", field=name, expected="a positive number or None (the task's)")
        self.render = RenderConfig.parse(render, "render")
        self.sensor_configs = _sensor_configs(sensors)
        self.settings = run_settings(task or self.episodes[0].task_type, body=body, max_steps=max_steps,
                                     success_distance=success_distance)
        self.collision_mode, self.mode_params, self.backend = collision_mode, mode_params or {}, backend
        self.scene_loader, self.render_mode = scene_loader, render_mode
        self.success_bonus, self.collision_penalty = float(success_bonus), float(collision_penalty)
        if isinstance(vocab, dict):
            vocab = Vocabulary.from_dict(vocab)
        self.vocab = vocab or Vocabulary.build(e.instruction_text for e in self.episodes)
        self.max_instruction_length = int(max_instruction_length)
        self.sensor_specs = [s.to_spec() for s in self.sensor_configs]
        space = observation_space_for(self.sensor_specs, 1, 0).spaces
        space["instruction_tokens"] = spaces.Box(0, len(self.vocab) - 1, (self.max_instruction_length,), np.int64)
        space["instruction"] = spaces.Text(TEXT_MAX, min_length=0, charset=TEXT_CHARSET)
        self.observation_space = spaces.Dict(space)
        self.action_space = spaces.Discrete(len(DiscreteAction))
        self.sim = self.mode = self.context = self.episode = None
        #: the current episode's ``eval.rollout.Rollout`` (``rollout.record()``: the runner's record)
        self.rollout: Any = None
        self._scene: str | None = None
        self._obs: dict[str, Any] = {}
        self._distance = 0.0

    # ------------------------------------------------------------------ internals

    def _load_scene(self, scene_path: str) -> None:
        from ..sim import make_simulator
        from ..tasks.base import load_scene_context
        from ..run.rollout import scene_mode

        if self._scene == scene_path:
            return
        if self.sim is not None:
            self.sim.close()
        s = self.settings
        self.context = (self.scene_loader or load_scene_context)(scene_path, s.body, s.resolution)
        options = self.render.options()
        if hasattr(self.context, "with_render_options"):
            self.context = self.context.with_render_options(options)
        self.sim = make_simulator(self.context.desc, s.body, sensors=self.sensor_specs, backend=self.backend, **options)
        self.mode = scene_mode(self.collision_mode, self.sim, self.context, self.mode_params.get(self.collision_mode, {}))
        self._scene = scene_path
        space = self.observation_space.spaces  # the semantic/instance bounds need the loaded scene
        for spec in self.sensor_specs:
            if spec.kind in ("semantic", "instance"):
                from ..sim.gym_env import observation_space_for

                space[spec.name] = observation_space_for([spec], len(self.sim.semantic_labels),
                                                         max([g.instance_id for g in self.context.desc.geoms] + [0]))[spec.name]

    def _observation(self, sensor_obs: dict[str, Any]) -> dict[str, Any]:
        pose = self.sim.pose
        out = {name: np.array(sensor_obs[name]) for name in self.observation_space.spaces if name in sensor_obs}
        out["pose"] = np.array([pose.x, pose.y, pose.yaw, getattr(self.sim, "camera_pitch", 0.0) or 0.0], dtype=np.float32)
        text = self.episode.instruction_text
        out["instruction"] = "".join(c if c in TEXT_CHARSET else "?" for c in text)[:TEXT_MAX]
        out["instruction_tokens"] = self.vocab.encode(text, self.max_instruction_length)
        return out

    def _goal_distance(self) -> float:
        return float(self.rollout.goal_distance(self.rollout.pose.xy[None])[0])

    # ------------------------------------------------------------------ gym API

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Start an episode (``options["episode"]``: index or id; default: a seeded draw)."""
        from ..run.rollout import Rollout

        super().reset(seed=seed)
        choice = (options or {}).get("episode")
        if choice is None:
            index = int(self.np_random.integers(len(self.episodes)))
        elif isinstance(choice, str):
            ids = [e.episode_id for e in self.episodes]
            if choice not in ids:
                raise ConfigError(f"unknown episode id {choice!r}", field="options.episode", expected="an episode id")
            index = ids.index(choice)
        else:
            index = int(choice)
            if not 0 <= index < len(self.episodes):
                raise ConfigError(f"episode index {index} out of range", field="options.episode",
                                  expected=f"0..{len(self.episodes) - 1}")
        self.episode = ep = self.episodes[index]
        self._load_scene(str(ep.scene_path) if self.scene_loader is not None else str(self.resolve_scene(ep)))
        self.rollout = Rollout(ep, self.context, self.sim, self.mode, self.settings)
        self._obs = self._observation(self.rollout.reset())
        self._distance = self._goal_distance()
        return _copy(self._obs), {"episode_id": ep.episode_id, "distance_to_goal": self._distance}

    def step(self, action: Any):
        """Apply a VLN-CE action through the rollout; reward = progress - collision penalty
        (+ success bonus on STOP)."""
        if self.rollout is None:
            raise RuntimeError("call reset() before step()")
        if isinstance(action, np.ndarray):
            action = action.item()
        result = self.rollout.step(DiscreteAction.coerce(action))
        info: dict[str, Any] = {"episode_id": self.episode.episode_id, "collided": bool(result.collided),
                                "failure": result.info.get("failure")}
        if result.termination == "stop":
            success = self._distance < self.settings.success_distance
            info.update(progress=0.0, success=bool(success), distance_to_goal=self._distance)
            return _copy(self._obs), float(self.success_bonus * success), True, False, info
        self._obs = self._observation(result.observations)
        distance = self._goal_distance()
        progress = self._distance - distance
        self._distance = distance
        reward = progress - self.collision_penalty * bool(result.collided)
        info.update(progress=progress, success=False, distance_to_goal=distance)
        return _copy(self._obs), float(reward), result.termination == "failure", result.termination == "max_steps", info

    def render(self):
        """The first RGB sensor's current frame (``render_mode="rgb_array"``)."""
        for spec in self.sensor_specs:
            if spec.kind == "rgb" and spec.name in self._obs:
                return np.asarray(self._obs[spec.name])
        return None

    def close(self):
        """Release the simulator."""
        if self.sim is not None:
            self.sim.close()
            self.sim, self._scene = None, None


def _copy(obs: dict[str, Any]) -> dict[str, Any]:
    """Fresh arrays (users keep what an env returns)."""
    return {k: (np.array(v) if isinstance(v, np.ndarray) else v) for k, v in obs.items()}
