"""``EvalConfig``: what ``vlnverse eval CONFIG`` runs, loaded from YAML and validated on load.

Example (``tasks/eval/oracle_fine_grained_strict.yaml``)::

    agent: {name: oracle}
    task: fine_grained
    episodes:
      generate: {scenes: val_unseen, episodes_per_scene: 5, seed: 0}
    collision_mode: strict
    sensors:
      - {name: rgb, kind: rgb, width: 224, height: 224, hfov_deg: 90}
      - {name: depth, kind: depth, width: 224, height: 224, hfov_deg: 90}
    out: runs/oracle_fine_grained_strict

``episodes`` is either a JSONL file/folder path or a ``generate:`` block; with ``benchmark: NAME``
and ``split: val_unseen | test`` the episodes are instead that held-out split of the benchmark
(``vlnverse.tasks.benchmark``, made and checked on first use; another task than the benchmark's:
that task's episodes generated on its held-out homes) and ``episodes`` is ignored. Unset
``body``, ``max_steps`` and ``success_distance`` come from the task config (``tasks/types/<task>/config.yaml``).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..core.config import load_config, parse_overrides, require
from ..core.errors import ConfigError, UnknownNameError
from ..run.setup import EpisodeSetup, EpisodeSource, NamedSpec
from ..scenes.object_meshes import RECOGNISABLE_OBJECTS


@dataclass
class ModelSpec(NamedSpec):
    """The agent's model: a ``MODELS`` name, its ``params``, and ``concurrency``: how many
    requests the run may have in flight to the model's endpoint at once, across all its
    threads and workers (unset: no run-wide limit; each worker evaluates one episode at a
    time). Simulator-free runs (``backend: viewpoints``) evaluate up to that many episodes of a
    scene at once in threads; records do not depend on it."""

    concurrency: int | None = None

    def validate(self) -> None:
        """Name non-empty; ``concurrency`` unset or an integer in 1..256."""
        super().validate()
        require(self.concurrency is None or (isinstance(self.concurrency, int) and not isinstance(self.concurrency, bool)
                                             and 1 <= self.concurrency <= 256),
                "concurrency", f"got {self.concurrency!r}", "an integer in 1..256 (or unset)")


@dataclass
class ReportConfig:
    """HTML report options: per-episode maps and first-person frames for at most ``max_episodes``."""

    enabled: bool = True
    frames: bool = True
    max_episodes: int = 40
    frame_width: int = 160

    def validate(self) -> None:
        """Counts must be non-negative."""
        require(self.max_episodes >= 0, "max_episodes", f"got {self.max_episodes}", "an integer >= 0")
        require(16 <= self.frame_width <= 1024, "frame_width", f"got {self.frame_width}", "16..1024 pixels")


#: the most episodes ``envs`` runs at once (one environment process each)
MAX_ENVS = 256


@dataclass(kw_only=True)
class EvalConfig(EpisodeSetup):
    """One evaluation run: an agent (optionally wrapping a model) on a task's episodes under a
    collision mode; the ``EpisodeSetup`` fields (task, collision mode, sensors, body, limits,
    backend, render) and these."""

    agent: NamedSpec
    #: a JSONL path or ``{path | generate}``; ignored (set to null) with a ``benchmark``
    episodes: Any = None
    model: ModelSpec | None = None
    #: only the episodes of this split; with a ``benchmark``, which of its held-out splits
    split: str | None = None
    #: a benchmark's name (``scenes_usd/benchmarks/<name>.json``) or definition file: the episodes
    #: are its ``split`` (``val_unseen`` or ``test``)
    benchmark: str | None = None
    seed: int = 0
    out: str = "runs/eval"
    limit: int | None = None
    report: ReportConfig = field(default_factory=ReportConfig)
    #: folder(s) of custom scenes searched first for the episodes' scenes (then the dataset's own
    #: folder, then the shipped scenes; see ``vlnverse.tasks.scene_roots``)
    scene_root: Any = None
    #: modules imported before the run (they register agents, task types, models ...):
    #: dotted names or ``.py`` paths; see ``vlnverse.core.plugins``
    plugins: list[str] = field(default_factory=list)
    #: episodes run at once with batched agent calls (``run.batched``; agents
    #: that act in batches); the records do not depend on it
    envs: int = 1

    def validate(self) -> None:
        """Check fields and normalise ``episodes`` into an ``EpisodeSource``."""
        from ..core.config import from_dict

        if self.benchmark is not None:
            self.episodes = None  # the benchmark's split is the episode source
            self.check_benchmark()
            return self._validate_rest()
        if isinstance(self.episodes, str):
            self.episodes = EpisodeSource(path=self.episodes)
        elif isinstance(self.episodes, dict):
            try:
                self.episodes = from_dict(EpisodeSource, self.episodes)
            except ConfigError as exc:
                raise ConfigError(exc.problem, field=f"episodes.{exc.field}" if exc.field else "episodes",
                                  expected=exc.expected) from None
        require(isinstance(self.episodes, EpisodeSource), "episodes", f"got {self.episodes!r}",
                "a JSONL path or a mapping with 'path' or 'generate', or a benchmark")
        self._validate_rest()

    def benchmark_split(self) -> str:
        """The benchmark's held-out split the episodes come from (``val_unseen_language``'s twins
        come with val_unseen)."""
        from ..tasks.episode import LANGUAGE_SPLIT

        return "val_unseen" if self.split == LANGUAGE_SPLIT else self.split

    def check_benchmark(self) -> Any:
        """The ``benchmark``, loaded (its file validated), with ``split`` one of its held-out
        splits (or, with ``language: v2-split``, ``val_unseen_language``: val_unseen's paths in the
        held-out wording; ``ConfigError`` otherwise); returns the ``Benchmark``. A ``task`` other
        than the benchmark's is generated on its held-out homes (``Benchmark.task_folder``)."""
        from ..tasks.benchmark import HELD_OUT, load_benchmark
        from ..tasks.episode import LANGUAGE_SPLIT

        require(isinstance(self.benchmark, str) and bool(self.benchmark.strip()), "benchmark",
                f"got {self.benchmark!r}", "a benchmark name (vlnverse benchmark list) or definition file")
        try:
            bench = load_benchmark(self.benchmark)
        except UnknownNameError as exc:
            raise ConfigError(str(exc), field="benchmark", expected="a shipped benchmark or a definition file (.json)") \
                from None
        shifted = self.language == "v2-split" and self.split == LANGUAGE_SPLIT
        require(self.split in HELD_OUT or shifted, "split", f"got {self.split!r}",
                f"{' or '.join(HELD_OUT)}: a held-out split of benchmark '{bench.name}' (or {LANGUAGE_SPLIT} "
                "with language v2-split)")
        return bench

    def _validate_rest(self) -> None:
        require(bool(self.task.strip()), "task", "empty", "a task name (tasks/types/<task>/config.yaml)")
        self.language_overrides()
        from ..run.modes import MODES, check_mode_params

        require(self.collision_mode in MODES, "collision_mode", f"got {self.collision_mode!r}",
                f"one of {MODES.names()}")
        for mode, params in self.mode_params.items():  # keyed per mode, so collision_mode=... overrides work
            require(mode in MODES, f"mode_params.{mode}", "not a collision mode",
                    f"a mapping keyed by mode name, one of {MODES.names()}")
            require(isinstance(params, dict), f"mode_params.{mode}", f"got {params!r}", "a mapping of parameters")
            check_mode_params(mode, params)
        require(self.max_steps is None or self.max_steps > 0, "max_steps", f"got {self.max_steps}",
                "a positive integer or null (task default)")
        require(self.success_distance is None or (math.isfinite(self.success_distance) and self.success_distance > 0),
                "success_distance", f"got {self.success_distance}", "a positive distance or null (task default)")
        require(self.limit is None or self.limit > 0, "limit", f"got {self.limit}", "a positive integer or null")
        require(isinstance(self.envs, int) and not isinstance(self.envs, bool) and 1 <= self.envs <= MAX_ENVS, "envs",
                f"got {self.envs!r}", f"an integer in 1..{MAX_ENVS}")
        require(0 <= self.seed < 2 ** 63, "seed", f"got {self.seed}", "an integer in 0..2**63-1")
        require(self.max_steps is None or self.max_steps <= 100_000, "max_steps", f"got {self.max_steps}",
                "at most 100000 steps")
        names = [s.name for s in self.sensors]
        require(len(names) == len(set(names)), "sensors", f"duplicate names {names}", "unique sensor names")
        require(bool(str(self.out).strip()), "out", "empty", "an output folder")
        from ..sim.api import BACKENDS, check_backend

        register_eval_backends()

        require(self.backend == "auto" or self.backend in BACKENDS, "backend", f"got {self.backend!r}",
                f"auto or one of {BACKENDS.names()}")
        check_backend(self.backend)  # e.g. backend: isaac without Isaac Sim fails here, before any episode
        require(self.scene_root is None or isinstance(self.scene_root, str) or (
            isinstance(self.scene_root, list) and all(isinstance(r, str) for r in self.scene_root)),
            "scene_root", f"got {self.scene_root!r}", "a folder, a list of folders, or null")

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (for ``config.json`` and resume checks)."""
        return asdict(self)

    def run_key(self) -> dict[str, Any]:
        """The settings that must match for a run folder to be resumed (everything but ``out``,
        ``limit``, report options, ``scene_root``, ``plugins``, ``envs`` and ``model.concurrency``, which do not change
        any episode's result). ``render.objects`` is left out when ``primitives`` (the default), so
        run folders written before the field existed resume."""
        data = self.to_dict()
        for key in ("out", "limit", "report", "scene_root", "plugins", "envs"):
            data.pop(key, None)
        if isinstance(data.get("render"), dict) and data["render"].get("objects") == "primitives":
            data["render"].pop("objects")
        if isinstance(data.get("model"), dict):
            data["model"].pop("concurrency", None)
        return data


def load_eval_config(path: str | Path, overrides: list[str] | dict[str, Any] | None = None) -> EvalConfig:
    """Load and validate an eval config; ``overrides`` are ``key.sub=value`` strings or a dict.

    Its ``plugins`` (and the installed ``vlnverse.plugins`` entry points) are imported first, so
    the agents, task types, models and collision modes they register validate like built-in ones.
    """
    from ..core.plugins import load_config_plugins

    if isinstance(overrides, list):
        overrides = parse_overrides(overrides, file=path)
    load_config_plugins(path, overrides)
    return load_config(EvalConfig, path, overrides, defaults=default_agent_render)


#: How the homes of vision-language agents are drawn unless a config says otherwise: an object a
#: person cannot name in a 224² view is a landmark no such agent can ground
VISION_LANGUAGE_OBJECTS = RECOGNISABLE_OBJECTS


def default_agent_render(data: dict[str, Any]) -> None:
    """Fill ``render.objects`` of an eval config that leaves it unset with the agent's default:
    ``VISION_LANGUAGE_OBJECTS`` for agents whose views a vision-language model reads (registered
    with ``agents.VISION_LANGUAGE``, plug-ins too), ``RenderConfig``'s ``primitives`` (what the
    learned policies were trained on) for the rest."""
    from ..run.agents import is_vision_language

    agent = data.get("agent")
    if is_vision_language(agent.get("name") if isinstance(agent, dict) else agent):
        fill_render_objects(data, VISION_LANGUAGE_OBJECTS)


def fill_render_objects(data: dict[str, Any], objects: str) -> None:
    """Set ``render.objects`` of a config's raw ``data`` to ``objects`` when the file and its
    overrides leave it unset (a malformed ``render`` is left for ``from_dict`` to report)."""
    render = data.get("render")
    if render is None or (isinstance(render, dict) and render.get("objects") is None):
        data["render"] = {**(render or {}), "objects": objects}


def register_eval_backends() -> None:
    """Backends the evaluation layer adds to the simulator's registry, by import path (nothing is
    imported until one is made): ``viewpoints``, the simulator-free cached views of graph mode."""
    from ..sim.api import BACKENDS

    if "viewpoints" not in BACKENDS:
        BACKENDS.register("viewpoints")("vlnverse.eval.mllm.cache:ViewpointSimulator")
