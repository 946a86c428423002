"""Task plumbing shared by every task type: the registry, task configs, per-scene context, generators.

A task type is one registered ``TaskGenerator`` subclass::

    @register_task("fine_grained")
    class FineGrained(TaskGenerator):
        def generate(self, ctx, rng, n, split):
            ...

Its settings are a ``TaskConfig``; its default config is the YAML its ``register_task`` names (a
built-in task type's ``tasks/types/<name>/config.yaml``). ``SceneContext`` bundles what a
generator needs about one scene (description, maps, planner, lazily a navigation graph, and an
optional renderer injected by the CLI — the task layer never imports a simulator backend).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterator

import numpy as np

from ..core.body import DEFAULT_BODY, AgentBody, as_body
from ..core.cache_key import content_digest, content_key
from ..core.params import check_ranges, parse_params
from ..core.config import from_dict, load_config, require
from ..core.errors import ConfigError, UnknownNameError
from .episode import Episode, Goal, Instruction
from .pathing import PathPlanner, PlannedPath, StartGoal
from .registry import TASKS, builtin_task_types, load_task_types, register_task  # noqa: F401 - re-exported
from .scoring import DEFAULT_SCORING, TaskScoring

if TYPE_CHECKING:  # annotations only: the scene layer is imported where a scene is loaded
    from ..scenes.description import SceneDescription
    from ..scenes.maps import SceneMaps

#: modules a worker process working on scenes needs (task types, scene loading and maps, OpenUSD):
#: parallel runs have the local fork server import them once (``engines.local.start_fork_server``)
#: instead of every worker importing them on its first scene (``matplotlib.path``: room polygons,
#: about 0.1 CPU s per worker otherwise; ``scene_cache``: parsed scenes on disk)
WORKER_PRELOAD = ("vlnverse.tasks.base", *builtin_task_types().values(), "vlnverse.scenes.usd_io",
                  "vlnverse.scenes.maps", "vlnverse.scenes.scene_cache", "matplotlib.path",
                  "pxr.Usd", "pxr.UsdGeom", "pxr.UsdLux", "pxr.UsdPhysics", "pxr.UsdSemantics", "pxr.UsdShade")

@dataclass
class TaskConfig:
    """Settings of one task type (its default: ``tasks/types/<task>/config.yaml``); distances in metres.

    ``room_change_fraction`` is the share of episodes whose start and goal must lie in different
    rooms; ``params`` holds task-specific settings read by the generator.
    """

    task_type: str
    success_distance: float = 3.0
    max_steps: int = 200
    min_geodesic: float = 3.0
    max_geodesic: float = 20.0
    body: str = DEFAULT_BODY
    map_resolution: float = 0.05
    room_change_fraction: float = 0.8
    params: dict[str, Any] = field(default_factory=dict)

    def validate(self) -> None:
        """Check names are set and distances/limits are positive and ordered."""
        require(bool(self.task_type.strip()), "task_type", "empty", "a task type name")
        require(math.isfinite(self.success_distance) and self.success_distance > 0, "success_distance",
                f"got {self.success_distance}", "a positive distance in metres")
        require(self.max_steps > 0, "max_steps", f"got {self.max_steps}", "a positive integer")
        require(math.isfinite(self.min_geodesic) and self.min_geodesic >= 0, "min_geodesic",
                f"got {self.min_geodesic}", "a distance >= 0 m")
        require(math.isfinite(self.max_geodesic) and self.max_geodesic > self.min_geodesic, "max_geodesic",
                f"got {self.max_geodesic} with min_geodesic {self.min_geodesic}", "a distance > min_geodesic")
        require(bool(self.body.strip()), "body", "empty", "a body preset name (robots/*.yaml)")
        require(0.01 <= self.map_resolution <= 0.5, "map_resolution", f"got {self.map_resolution}",
                "a cell size in [0.01, 0.5] m")
        require(0.0 <= self.room_change_fraction <= 1.0, "room_change_fraction",
                f"got {self.room_change_fraction}", "a fraction in [0, 1]")


def load_task_config(name_or_path: str | Path, overrides: dict | None = None) -> TaskConfig:
    """Load a task config by YAML path, or by task name: the task type's default config (its
    ``config_file``, e.g. ``tasks/types/<name>/config.yaml``).

    A registered task type without a default config file gets the ``TaskConfig`` defaults. An
    unknown name raises ``UnknownNameError`` listing the registered task types.
    Its ``params`` are validated against the task type's ``Params`` dataclass on load (errors
    name the file and ``params.<key>``).
    """
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml"):
        return _checked_params(load_config(TaskConfig, path, overrides), path)
    name = str(name_or_path)
    if name in TASKS or name in load_task_types():
        default = TASKS.get(name).config_file
        if default is not None:
            return _checked_params(load_config(TaskConfig, default, overrides), default)
        data: dict[str, Any] = {"task_type": name}
        for key, value in (overrides or {}).items():
            data[key] = value
        source = f"<defaults for task '{name}'>"
        return _checked_params(from_dict(TaskConfig, data, file=source), source)
    raise UnknownNameError("task", name, TASKS.names())


def _checked_params(config: TaskConfig, file: Any) -> TaskConfig:
    """``config`` after parsing its ``params`` with its (registered) task type's ``Params``."""
    if config.task_type in TASKS or config.task_type in load_task_types():
        TASKS.get(config.task_type).parse_params(config, file=file)
    return config


# --------------------------------------------------------------------------------------------
# Per-scene context


@dataclass
class SceneContext:
    """Everything a task generator needs about one scene.

    ``renderer`` (optional) is a callable ``(x, y, yaw, pitch) -> RGB uint8 (H, W, 3)`` injected by
    the caller; generators needing images must check it is set.

    ``render_options`` are the ``make_simulator`` options (``quality``, ``objects``) of the run's
    cameras (set by the eval runner, :meth:`with_render_options`): every simulator an agent builds
    to render its own views passes them (:func:`render_options`), so it sees what the run's
    cameras see. Empty: the backend's defaults.
    """

    scene_path: Path
    desc: SceneDescription
    maps: SceneMaps
    planner: PathPlanner
    body: AgentBody
    renderer: Callable[..., np.ndarray] | None = None
    render_options: dict[str, str] = field(default_factory=dict)
    #: lazily built members (the navigation graph), shared by the copies ``dataclasses.replace`` makes
    _lazy: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def scene_id(self) -> str:
        """The scene's id."""
        return self.desc.scene_id

    @property
    def floor_z(self) -> float:
        """Height of the floor top (z of episode positions)."""
        return float(self.desc.floor_z)

    @property
    def room_map(self) -> np.ndarray:
        """Room id per navigable cell (-1 elsewhere), on the planner's grid."""
        return self.maps.room_map

    @property
    def navgraph(self):
        """The scene's navigation graph, built on first use (once for this context and its copies)."""
        if "navgraph" not in self._lazy:
            from .navgraph import build_navgraph

            self._lazy["navgraph"] = build_navgraph(self.planner, rooms=self.desc.rooms, doors=self.desc.doors,
                                                    room_map=self.room_map, scene_id=self.scene_id)
        return self._lazy["navgraph"]

    def with_render_options(self, options: dict[str, str] | None) -> "SceneContext":
        """This context with the run's render ``options`` (a copy sharing maps, planner and
        navigation graph; ``self`` when they are already these)."""
        options = dict(options or {})
        return self if options == self.render_options else dataclasses.replace(self, render_options=options)

    def to_3d(self, xy) -> list[float]:
        """A floor-level [x, y, z] list from an (x, y) point."""
        return [float(xy[0]), float(xy[1]), self.floor_z]


_CONTEXT_CACHE: dict[tuple, SceneContext] = {}


def render_options(ctx: Any) -> dict[str, str]:
    """The ``make_simulator`` render options of a scene context (``SceneContext.render_options``;
    none for a context without them: the backend's defaults)."""
    return dict(getattr(ctx, "render_options", None) or {})


def _body_key(body) -> tuple:
    return tuple(sorted(dataclasses.asdict(body).items()))


def load_scene_context(scene_path: str | Path, body, resolution: float = 0.05,
                       renderer: Callable[..., np.ndarray] | None = None) -> SceneContext:
    """Load a scene, compute its maps for ``body`` (an ``AgentBody`` or preset name) and a planner.

    Cached in-process per (file content hash, body, resolution); the renderer is not part of the
    key (each call gets its own context object sharing the cached maps and planner).
    """
    from ..scenes.maps import compute_scene_maps
    from ..scenes.usd_io import load_scene
    body = as_body(body)
    scene_path = Path(scene_path)
    digest = content_digest(scene_path.read_bytes()) if scene_path.is_file() else str(scene_path)
    key = (digest, _body_key(body), float(resolution))
    ctx = _CONTEXT_CACHE.get(key)
    if ctx is None:
        desc = load_scene(scene_path)
        maps = compute_scene_maps(desc, body, resolution=resolution)
        planner = PathPlanner(maps.navigable, scene_id=desc.scene_id)
        ctx = SceneContext(scene_path=scene_path, desc=desc, maps=maps, planner=planner, body=body)
        _CONTEXT_CACHE[key] = ctx
        if scene_path.is_file():
            _remember_bounds(_bounds_key(digest, body, resolution), navigable_bounds(maps))
    if ctx.scene_path != scene_path or renderer is not None:
        ctx = dataclasses.replace(ctx, scene_path=scene_path, renderer=renderer)
    return ctx


def navigable_bounds(maps: Any) -> tuple[list[float], list[float]] | None:
    """The (x, y) box around a scene's navigable cells, ``(lo, hi)`` in metres (cell edges
    included), or None when no cell is navigable."""
    from ..scenes.occupancy import FREE

    nav = maps.navigable
    cells = np.argwhere(nav.grid == FREE)
    if cells.size == 0:
        return None
    lo = nav.cell_to_world(cells.min(axis=0)[None])[0] - nav.resolution / 2
    hi = nav.cell_to_world(cells.max(axis=0)[None])[0] + nav.resolution / 2
    return [float(v) for v in lo[:2]], [float(v) for v in hi[:2]]


#: part of the stored bounds' key: bump when the navigable map computation changes
BOUNDS_VERSION = 1


def _bounds_key(digest: str, body: Any, resolution: float) -> str:
    from .. import __version__

    salt = content_key("bounds", BOUNDS_VERSION, [list(kv) for kv in _body_key(body)], __version__, length=12)
    return f"{digest}_{salt}_{float(resolution):g}"


def _bounds_file(key: str) -> Path:
    from ..paths import cache_dir

    return cache_dir() / "scene_bounds" / f"{key}.json"


def _remember_bounds(key: str, bounds: Any) -> None:
    """Store a scene's navigable bounds (best effort: a read-only cache only costs a reload later)."""
    from ..core.io import write_json_atomic

    try:
        if not _bounds_file(key).is_file():
            write_json_atomic(_bounds_file(key), {"bounds": bounds}, indent=None)
    except OSError:
        pass


def scene_navigable_bounds(scene_path: str | Path, body: Any, resolution: float = 0.05,
                           loader: Callable[[str, Any, float], Any] | None = None) -> tuple[list[float], list[float]] | None:
    """``navigable_bounds`` of a scene file for ``body`` at ``resolution`` without loading the
    scene when any process has loaded it before (``load_scene_context`` stores them under
    ``<VLNVERSE_CACHE>/scene_bounds``, keyed by the file's content hash, the body and the
    resolution); otherwise the scene is loaded (``loader``, default ``load_scene_context``)."""
    import json

    body = as_body(body)
    path = Path(scene_path)
    if loader is None and path.is_file():
        key = _bounds_key(content_digest(path.read_bytes()), body, resolution)
        try:
            data = json.loads(_bounds_file(key).read_text(encoding="utf-8"))
            return None if data["bounds"] is None else (list(data["bounds"][0]), list(data["bounds"][1]))
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            pass
    return navigable_bounds((loader or load_scene_context)(str(path), body, resolution).maps)


def context_from_description(desc, body, resolution: float = 0.05, scene_path: str | Path | None = None,
                             renderer: Callable[..., np.ndarray] | None = None) -> SceneContext:
    """A ``SceneContext`` for an in-memory ``SceneDescription`` (no file, no cache)."""
    from ..scenes.maps import compute_scene_maps
    body = as_body(body)
    maps = compute_scene_maps(desc, body, resolution=resolution)
    planner = PathPlanner(maps.navigable, scene_id=desc.scene_id)
    path = Path(scene_path) if scene_path is not None else Path(desc.source_path or f"{desc.scene_id}.usda")
    return SceneContext(scene_path=path, desc=desc, maps=maps, planner=planner, body=body, renderer=renderer)


# --------------------------------------------------------------------------------------------
# Generators


@dataclass
class NoParams:
    """The parameters of a task type that takes none (any ``params`` key is an error)."""


def check_param_ranges(params: Any, *, file: Any = None) -> None:
    """Every numeric field of a task's ``Params`` object finite and within its declared range
    (``vlnverse.core.params.param``)."""
    check_ranges(params, file=file, prefix="params")


class TaskGenerator:
    """Base class of a task type: ``generate(ctx, rng, n, split)`` returns ``n`` episodes.

    Subclasses set their behaviour from ``self.config`` (a ``TaskConfig``) and use the helpers
    below for start/goal sampling, planning and episode assembly so ids and geometry are uniform.
    ``scoring`` declares how the evaluator scores the task's episodes (``TaskScoring``: ordered
    goals, a FOUND / NOT_FOUND decision, frame selection, goal region, its own metrics and
    success rule); ``needs_renderer``: generation renders images (``ctx.renderer`` must be set);
    ``instruction_optional``: its episodes may carry no instruction (the goal category is it).
    ``Params`` is the task type's parameters dataclass: ``config.params`` parsed into it
    (validated) is ``self.params``.
    """

    name: str = ""
    #: the default config (set by ``register_task(name, config=...)``); None: the ``TaskConfig`` defaults
    config_file: ClassVar[Path | None] = None
    scoring: TaskScoring = DEFAULT_SCORING
    needs_renderer: bool = False
    instruction_optional: bool = False
    Params: ClassVar[type] = NoParams

    def __init__(self, config: TaskConfig | None = None):
        self.config = config if config is not None else TaskConfig(task_type=self.name or "task")
        self.params = self.parse_params(self.config)

    @classmethod
    def parse_params(cls, config: TaskConfig, *, file: Any = None) -> Any:
        """``config.params`` as a validated ``Params`` object; an unknown key, a wrong type or a
        failed check raises ``ConfigError`` naming ``file`` (default: the task type's default
        config) and ``params.<key>``."""
        file = file if file is not None else (cls.config_file or f"<config of task '{config.task_type}'>")
        return parse_params(cls.Params, config.params, owner=f"task '{config.task_type}'", file=file)

    def generate(self, ctx: SceneContext, rng: np.random.Generator, n: int, split: str) -> list[Episode]:
        """Produce ``n`` episodes for scene ``ctx`` (deterministic given ``rng``)."""
        raise NotImplementedError(f"{type(self).__name__} must implement generate()")

    # ------------------------------------------------------------ helpers

    #: Why the last ``generate`` call returned fewer episodes than asked (None when it did not).
    shortfall: str | None = None

    def partial(self, ctx: SceneContext, episodes: list[Episode], n: int, reason: str) -> list[Episode]:
        """Return the ``episodes`` found so far when fewer than ``n`` could be made, recording
        ``reason`` in ``self.shortfall`` (the dataset summary reports it); raise
        ``NoNavigableSpaceError`` naming the scene when there are none at all."""
        from ..core.errors import NoNavigableSpaceError

        if not episodes:
            raise NoNavigableSpaceError(f"scene '{ctx.scene_id}' ({ctx.scene_path}): no {self.name} episode "
                                        f"possible: {reason}")
        self.shortfall = f"{len(episodes)} of {n}: {reason}"
        return episodes

    def attempts(self, n: int, episodes: list[Episode]) -> Iterator[int]:
        """The attempts of a ``generate`` loop: yields while ``episodes`` holds fewer than ``n``, at
        most ``params.max_attempts_per_episode * max(n, 1)`` times; fewer than ``n`` episodes after
        the loop means the budget ran out (``partial``)."""
        for attempt in range(self.params.max_attempts_per_episode * max(n, 1)):
            if len(episodes) >= n:
                return
            yield attempt

    def episode_id(self, ctx: SceneContext, index: int) -> str:
        """Deterministic id ``"{task}-{scene_id}-{index:05d}"``."""
        return f"{self.name or self.config.task_type}-{ctx.scene_id}-{index:05d}"

    def sample_path(self, ctx: SceneContext, rng: np.random.Generator,
                    require_room_change: bool | None = None) -> tuple[StartGoal, PlannedPath]:
        """Sample a start/goal pair within the config's geodesic range and plan its reference path.

        ``require_room_change=None`` draws it with probability ``config.room_change_fraction``.
        """
        if require_room_change is None:
            require_room_change = bool(rng.random() < self.config.room_change_fraction)
        pair = ctx.planner.sample_start_goal(rng, self.config.min_geodesic, self.config.max_geodesic,
                                             require_room_change=require_room_change, room_map=ctx.room_map)
        return pair, ctx.planner.shortest_path(pair.start_xy, pair.goal_xy)

    def make_episode(self, ctx: SceneContext, index: int, split: str, path: PlannedPath,
                     instructions: list[Instruction], goals: list[Goal] | None = None,
                     geodesic_distance: float | None = None, start_yaw: float | None = None,
                     info: dict | None = None) -> Episode:
        """Assemble an ``Episode`` starting at the path's first waypoint, facing along it by default.

        ``goals`` defaults to one goal at the path's end with the config's success distance;
        ``geodesic_distance`` defaults to ``path.grid_cost`` — the grid geodesic, equal to the
        distance field at the start, the quantity every task type stores (the any-angle reference
        path is up to 8.2 % shorter; see docs/tasks.md, "Two geodesics").
        """
        start, end = path.waypoints[0], path.waypoints[-1]
        if goals is None:
            goals = [Goal(position=ctx.to_3d(end), radius=self.config.success_distance)]
        info = dict(info or {})
        if geodesic_distance is None:
            geodesic_distance = path.grid_cost
        return Episode(
            episode_id=self.episode_id(ctx, index),
            scene_id=ctx.scene_id,
            scene_path=str(ctx.scene_path),
            split=split,
            task_type=self.name or self.config.task_type,
            start_position=ctx.to_3d(start),
            start_yaw=float(path.start_yaw if start_yaw is None else start_yaw),
            goals=goals,
            reference_path=[ctx.to_3d(p) for p in path.waypoints],
            geodesic_distance=float(geodesic_distance),
            instructions=list(instructions),
            info=info,
        )
