"""``TrainConfig``: what ``vlnverse train CONFIG [key=value ...]`` runs, loaded from YAML and validated.

Example (``tasks/train/cma_fine_grained.yaml``)::

    policy: {name: cma, params: {hidden_size: 256}}
    task: fine_grained
    train: {generate: {scenes: train, episodes_per_scene: 20, seed: 0}}   # or {homes: 30, seed: 1000}
    train_split: train
    val: {val_unseen: {generate: {scenes: val_unseen, episodes_per_scene: 5, seed: 1}}}
    collision_mode: telhop
    sensors:
      - {name: rgb, kind: rgb, width: 64, height: 64}
      - {name: depth, kind: depth, width: 64, height: 64}
    il: {epochs: 10, batch_size: 8, lr: 0.00025, inflection_weight: auto}
    out: runs/train/cma_fine_grained
    render: {quality: default, objects: meshes}   # optional; default: default / primitives

``mode=dagger init=CHECKPOINT`` switches to online DAgger fine-tuning from a checkpoint; ``init=`` in
IL mode warm-starts imitation from it (offline fine-tuning: its weights and vocabulary).

Multi-task (one model on a mix of tasks, e.g. ``tasks/train/gama_multitask.yaml``): ``tasks`` lists
each task with its own episodes and held-out splits, instead of the top-level ``task`` / ``train`` /
``val``::

    tasks:
      - {task: fine_grained, train: {generate: {...}}, val: {val_seen: {generate: {...}}}}
      - {task: object_goal, train: {generate: {...}}, val: {val_seen: {generate: {...}}}}

The teacher cache is built per task (each with its task's settings: success distance, step
limit), IL and DAgger batches mix them; validation runs each task's splits and selects by the mean
over tasks of ``validation.metric`` on ``validation.split``; after training the selected weights
are evaluated on every task's splits (``tasks.json``; for ``gama`` also the experts fired per task
and step: ``expert_usage.json`` / ``expert_usage.png``).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..core.config import from_dict, load_config, parse_overrides, require
from ..core.errors import ConfigError
from ..core.jobs import CONFIG_FIELDS, ParallelConfig
from ..run.setup import EpisodeSetup, EpisodeSource, NamedSpec, SensorConfig

#: Training modes.
TRAIN_MODES = ("il", "dagger")
#: Collision modes a discrete policy is trained in.
TRAIN_COLLISION_MODES = ("strict", "telhop")
#: ``distributed``: how ``il.batch_size`` counts, how ``il.lr`` follows the effective batch, process-group backends.
BATCH_MODES = ("global", "per_rank")
LR_SCALINGS = ("none", "linear", "sqrt")
BACKENDS = ("auto", "gloo", "nccl")
#: Metrics a checkpoint can be selected by (higher is better, except NE and TL).
SELECTION_METRICS = ("SR", "SPL", "nDTW", "sDTW", "OSR", "CLS", "NE", "accuracy")


def episode_source(value: Any, name: str) -> EpisodeSource:
    """An ``EpisodeSource`` from a path string or a mapping with ``path`` / ``generate``."""
    if isinstance(value, EpisodeSource):
        return value
    if isinstance(value, str):
        value = {"path": value}
    if not isinstance(value, dict):
        raise ConfigError(f"got {value!r}", field=name, expected="a JSONL path or a mapping with 'path' or 'generate'")
    try:
        return from_dict(EpisodeSource, value)
    except ConfigError as exc:
        raise ConfigError(exc.problem, field=f"{name}.{exc.field}" if exc.field else name, expected=exc.expected) from None


def train_source(value: Any, name: str = "train") -> Any:
    """``episode_source``, or a ``HomesSource`` for a mapping with ``homes`` (generated training
    homes, ``learn.homes``)."""
    from .homes import HomesSource

    if isinstance(value, HomesSource):
        return value
    if isinstance(value, dict) and "homes" in value:
        try:
            source = from_dict(HomesSource, value)
        except ConfigError as exc:
            raise ConfigError(exc.problem, field=f"{name}.{exc.field}" if exc.field else name,
                              expected=exc.expected) from None
        if source.val_seen_episodes is not None and name.rsplit(".", 1)[-1] != "val_seen":
            raise ConfigError(f"got {source.val_seen_episodes!r}", field=f"{name}.val_seen_episodes",
                              expected="only in a val.val_seen block (it caps the held-out episodes)")
        return source
    return episode_source(value, name)


@dataclass
class ILConfig:
    """Offline imitation learning: ``epochs`` over the cached teacher episodes, ``batch_size``
    episodes per batch, Adam with ``lr``; ``inflection_weight``: ``auto`` (VLN-CE: total steps /
    inflection steps of the training data), a number >= 1, or 1 (off); ``checkpoint_every``
    batches the last checkpoint (and data position) is saved for resuming."""

    epochs: int = 10
    batch_size: int = 4
    lr: float = 2.5e-4
    weight_decay: float = 0.0
    inflection_weight: Any = "auto"
    grad_clip: float = 1.0
    checkpoint_every: int = 50
    #: wall-clock budget of one training phase in seconds (null: none); training stops at the
    #: first batch past it, saving the checkpoint and data position
    max_seconds: float | None = None
    #: train on every instruction of a path (one item per instruction, as R2R), not the first only
    all_instructions: bool = False
    #: weight of the STOP steps in the loss of the waypoint policies (VLN-BERT, HNR, GAMA), whose
    #: other steps weigh 1; also used by DAgger's retraining
    stop_weight: float = 1.0
    #: exponential moving average of the weights (Polyak averaging), its decay per optimizer step
    #: (warmed up as min(ema, (1 + t) / (10 + t))); 0: off. Validation, ``best.pt`` and every saved
    #: checkpoint's weights are the average; ``last.pt`` also keeps the raw weights to resume from
    ema: float = 0.0
    #: how batches are formed (``batching.BATCHINGS``): ``bucketed`` (episodes of similar length
    #: together, unrolled packed; only for policies that unroll packed, ``batching.il_batching``) or
    #: ``padded`` (a plain permutation; runs from before resume with it)
    batching: str = "bucketed"

    def validate(self) -> None:
        """Positive counts and rates; ``inflection_weight`` 'auto' or a number >= 1; a known ``batching``."""
        require(self.batching in ("bucketed", "padded"), "batching", f"got {self.batching!r}", "bucketed or padded")
        require(self.epochs > 0, "epochs", f"got {self.epochs}", "a positive integer")
        require(self.batch_size > 0, "batch_size", f"got {self.batch_size}", "a positive integer")
        require(math.isfinite(self.lr) and self.lr > 0, "lr", f"got {self.lr}", "a positive number")
        require(self.inflection_weight == "auto" or (isinstance(self.inflection_weight, (int, float))
                                                     and not isinstance(self.inflection_weight, bool)
                                                     and self.inflection_weight >= 1),
                "inflection_weight", f"got {self.inflection_weight!r}", "'auto' or a number >= 1 (1 = off)")
        require(self.max_seconds is None or self.max_seconds > 0, "max_seconds", f"got {self.max_seconds}",
                "a positive number of seconds or null")
        require(self.checkpoint_every > 0, "checkpoint_every", f"got {self.checkpoint_every}", "a positive integer")
        require(isinstance(self.stop_weight, (int, float)) and not isinstance(self.stop_weight, bool)
                and math.isfinite(self.stop_weight) and self.stop_weight > 0, "stop_weight", f"got {self.stop_weight!r}",
                "a positive number (1 = every step weighs the same)")
        require(isinstance(self.ema, (int, float)) and not isinstance(self.ema, bool) and 0 <= self.ema < 1, "ema",
                f"got {self.ema!r}", "a decay in [0, 1) (0 = off; e.g. 0.95)")


@dataclass
class DaggerConfig:
    """Online DAgger: ``rounds`` rounds; in round r (1-based) the executed action is the teacher's
    with probability β = p^r, else the policy's; each round's steps (all labelled by the teacher)
    join the on-disk aggregate, then the policy trains ``epochs`` epochs on the aggregate (plus the
    offline teacher cache when ``include_teacher_data``). ``episodes``: per round (null: all).
    ``max_steps``: a collected episode ends after this many steps (null: the task's limit), so a
    learner that loops cannot fill the aggregate with near-copies of one state. ``features``: where
    IL trains from cached features (``cache.features``, frozen trunks), the round does too (the
    aggregate's are made after each collection); false: from pixels."""

    rounds: int = 1
    p: float = 0.75
    epochs: int = 2
    episodes: int | None = None
    include_teacher_data: bool = True
    max_steps: int | None = None
    features: bool = True

    def validate(self) -> None:
        """Positive counts, p in [0, 1]."""
        require(self.rounds > 0, "rounds", f"got {self.rounds}", "a positive integer")
        require(0.0 <= self.p <= 1.0, "p", f"got {self.p}", "a probability in [0, 1]")
        require(self.epochs > 0, "epochs", f"got {self.epochs}", "a positive integer")
        require(self.episodes is None or self.episodes > 0, "episodes", f"got {self.episodes}", "a positive integer or null")
        require(self.max_steps is None or self.max_steps > 0, "max_steps", f"got {self.max_steps}", "a positive integer or null")


@dataclass
class ValidationConfig:
    """Validation through the eval runner every ``every`` epochs (DAgger: every round) on the
    ``split`` named in ``val`` (default: the first), at most ``limit`` episodes; the best checkpoint
    is kept by ``metric``. ``envs`` > 1: batched evaluation (``vlnverse eval --envs``)."""

    every: int = 1
    metric: str = "SR"
    split: str | None = None
    limit: int | None = 20
    envs: int = 1

    def validate(self) -> None:
        """Known metric, positive counts."""
        require(self.every > 0, "every", f"got {self.every}", "a positive integer")
        require(self.metric in SELECTION_METRICS, "metric", f"got {self.metric!r}", f"one of {SELECTION_METRICS}")
        require(self.limit is None or self.limit > 0, "limit", f"got {self.limit}", "a positive integer or null")
        require(isinstance(self.envs, int) and not isinstance(self.envs, bool) and 1 <= self.envs <= 256, "envs",
                f"got {self.envs!r}", "an integer in 1..256")


@dataclass
class CacheConfig:
    """Observation cache: ``dir`` (default ``$VLNVERSE_CACHE/learn``), ``chunk_frames`` steps per chunk
    file, ``render``: how the teacher's frames are drawn -- ``auto`` (``teleport`` under Tel-Hop with
    the oracle teacher, else ``physics``), ``physics`` or ``teleport`` (``learn.collect``);
    ``features``: when every visual encoder's trunk is frozen, IL trains from the trunks' cached
    features (``learn.features``) instead of pixels."""

    dir: str | None = None
    chunk_frames: int = 512
    render: str = "auto"
    features: bool = True

    def validate(self) -> None:
        """Positive chunk size, a known render path."""
        require(self.chunk_frames > 0, "chunk_frames", f"got {self.chunk_frames}", "a positive integer")
        require(self.render in ("auto", "physics", "teleport"), "render", f"got {self.render!r}",
                "auto, physics or teleport")


@dataclass
class DistributedConfig:
    """Data-parallel training on N ranks (``torchrun --nproc_per_node N -m vlnverse train`` or
    ``vlnverse train CONFIG --nproc N``; ``learn.distributed``). ``batch``: how ``il.batch_size``
    counts -- ``global`` (episodes per optimizer step over all ranks, split among them: 1 or N
    ranks train the same steps) or ``per_rank`` (the effective batch is N x ``il.batch_size``);
    ``lr_scaling``: ``il.lr`` is the rate of ``il.batch_size`` episodes, scaled by ``none``,
    ``linear`` or ``sqrt`` of effective batch / ``il.batch_size``; ``backend``: ``auto`` (NCCL on
    CUDA, gloo on CPU), ``gloo`` or ``nccl``; ``timeout``: seconds a rank waits for the others
    (rank 0 builds the cache, validates, collects DAgger rollouts)."""

    batch: str = "global"
    lr_scaling: str = "none"
    backend: str = "auto"
    timeout: float = 3600.0

    def validate(self) -> None:
        """Known modes, a positive timeout."""
        require(self.batch in BATCH_MODES, "batch", f"got {self.batch!r}", f"one of {BATCH_MODES}")
        require(self.lr_scaling in LR_SCALINGS, "lr_scaling", f"got {self.lr_scaling!r}", f"one of {LR_SCALINGS}")
        require(self.backend in BACKENDS, "backend", f"got {self.backend!r}", f"one of {BACKENDS}")
        require(self.timeout > 0, "timeout", f"got {self.timeout}", "a positive number of seconds")


@dataclass
class TaskSpec:
    """One task of a multi-task run (``tasks``): the task (``tasks/types/<task>/config.yaml``), its training
    episodes and held-out splits (as ``train`` / ``val``), and ``name``, how the reports call it
    (default: the task), and ``observation``, what a waypoint policy (vlnbert, hnr, gama) sees in
    this task: ``{view: panoramic|monocular, hfov_deg}`` (``waypoints.grid.ObservationSetup``;
    default: the panorama) in its teacher's cache, DAgger, validation and the task report."""

    task: str
    train: Any
    val: dict[str, Any] = field(default_factory=dict)
    name: str | None = None
    observation: dict[str, Any] | None = None

    def validate(self) -> None:
        """A task name, sources as the top-level ``train`` / ``val``, a plain ``name``."""
        require(isinstance(self.task, str) and bool(self.task.strip()), "task", f"got {self.task!r}",
                "a task name (tasks/types/<task>/config.yaml)")
        self.name = self.name or self.task
        require(self.name.replace("_", "").replace("-", "").isalnum(), "name", f"got {self.name!r}",
                "letters, digits, '_' or '-' (it names output folders)")
        self.train = train_source(self.train, "train")
        require(isinstance(self.val, dict), "val", f"got {self.val!r}", "a mapping split name -> episode source")
        self.val = {str(k): train_source(v, f"val.{k}") for k, v in self.val.items()}
        from .waypoints.grid import ObservationSetup

        if self.observation is not None:
            self.observation = ObservationSetup.parse(self.observation).to_dict()


@dataclass(kw_only=True)
class TrainConfig(EpisodeSetup):
    """One training run (see the module docstring): the ``EpisodeSetup`` fields (task, collision
    mode, sensors, body, limits, backend, render; a discrete policy trains in Tel-Hop on a 64² RGB-D
    rig by default) and these."""

    policy: NamedSpec
    task: str = ""
    collision_mode: str = "telhop"
    sensors: list[SensorConfig] = field(default_factory=lambda: [
        SensorConfig(name="rgb", kind="rgb", width=64, height=64), SensorConfig(name="depth", kind="depth", width=64, height=64)])
    train: Any = None
    train_split: str | None = None
    val: dict[str, Any] = field(default_factory=dict)
    max_instruction_length: int = 80
    mode: str = "il"
    init: str | None = None
    il: ILConfig = field(default_factory=ILConfig)
    dagger: DaggerConfig = field(default_factory=DaggerConfig)
    validation: ValidationConfig = field(default_factory=ValidationConfig)
    cache: CacheConfig = field(default_factory=CacheConfig)
    distributed: DistributedConfig = field(default_factory=DistributedConfig)
    device: str = "auto"
    #: CPU threads for torch: a number, ``auto`` (the cores shared by the trainings running side by side,
    #: ``$VLNVERSE_JOBS``, default 1: ``learn.auto_threads``) or null (torch's default); 1 is fastest on a busy shared machine
    threads: Any = None
    seed: int = 0
    out: str = "runs/train"
    #: scenes rolled out in parallel when the observation cache is rendered and in DAgger
    #: collection (``vlnverse.core.jobs``: ``local`` processes or a ``ray`` cluster at
    #: ``address``); the cache and the aggregate are byte-identical to a serial run's
    workers: int = 1
    engine: str = "local"
    address: str | None = None
    #: seconds a worker may make no progress on a scene before it is killed and the scene retried (null: off)
    job_timeout: float | None = None
    #: folder(s) searched first for the episodes' scenes (then the dataset's folder, the shipped
    #: scenes; see ``vlnverse.tasks.scene_roots``); ``--scene-root`` adds to it
    scene_root: Any = None
    #: modules (dotted names or ``.py`` paths) imported before validation: plug-in policies, task
    #: types, agents (``vlnverse.core.plugins``)
    plugins: list[str] = field(default_factory=list)
    #: a multi-task run: one ``TaskSpec`` per task, replacing ``task`` / ``train`` / ``val`` (module docstring)
    tasks: list[TaskSpec] = field(default_factory=list)
    # ``render`` (``EpisodeSetup``) draws the teacher cache, DAgger, validation and the pretrained
    # encoders resolved with ``path: auto``; recorded in the checkpoints, not forced at evaluation

    def validate(self) -> None:
        """Check fields; normalise ``train`` / ``val`` into ``EpisodeSource`` objects."""
        from .policies_registry import GRAPH, POLICIES

        require(self.policy.name in POLICIES, "policy.name", f"got {self.policy.name!r}",
                f"one of {POLICIES.names()}, or a policy of a module in 'plugins'")
        self.language_overrides()
        require(not (self.tasks and self.language != "v1"), "language", f"got {self.language!r} with 'tasks'",
                "v1 (the task mix's other tasks have no other language)")
        if self.tasks:
            self._validate_tasks()
        else:
            require(bool(self.task.strip()), "task", "empty", "a task name (tasks/types/<task>/config.yaml)")
            require(self.train is not None, "train", "missing", "a JSONL path or a mapping with 'path', 'generate' or 'homes'")
            self.train = train_source(self.train, "train")
            require(isinstance(self.val, dict), "val", f"got {self.val!r}", "a mapping split name -> episode source")
            self.val = {str(k): train_source(v, f"val.{k}") for k, v in self.val.items()}
        modes = ("graph",) if POLICIES.has_tag(self.policy.name, GRAPH) else TRAIN_COLLISION_MODES
        require(self.collision_mode in modes, "collision_mode", f"got {self.collision_mode!r}",
                f"one of {modes} (a {'graph' if modes == ('graph',) else 'discrete'} policy)")
        require(self.mode in TRAIN_MODES, "mode", f"got {self.mode!r}", f"one of {TRAIN_MODES}")
        require(self.mode != "dagger" or bool(self.init), "init", "mode=dagger needs a checkpoint",
                "init=PATH of an IL checkpoint")
        require(self.max_instruction_length > 0, "max_instruction_length", f"got {self.max_instruction_length}",
                "a positive integer")
        require(self.max_steps is None or self.max_steps > 0, "max_steps", f"got {self.max_steps}", "a positive integer or null")
        require(self.success_distance is None or self.success_distance > 0, "success_distance",
                f"got {self.success_distance}", "a positive distance or null")
        kinds = [s.kind for s in self.sensors]
        require(all(k in ("rgb", "depth") for k in kinds) and 1 <= len(kinds) <= 2 and len(set(kinds)) == len(kinds),
                "sensors", f"got kinds {kinds}", "one rgb and/or one depth camera")
        require(self.device in ("auto", "cpu") or self.device.startswith("cuda"), "device", f"got {self.device!r}",
                "auto, cpu or cuda[:N]")
        splits = sorted({s for t in self.tasks for s in t.val} if self.tasks else self.val)
        require(self.validation.split is None or self.validation.split in splits, "validation.split",
                f"got {self.validation.split!r}", f"one of the 'val' names {splits}")
        require(self.threads is None or self.threads == "auto" or (isinstance(self.threads, int) and not isinstance(
            self.threads, bool) and self.threads > 0), "threads", f"got {self.threads!r}", "a positive integer, auto or null")
        require(bool(str(self.out).strip()), "out", "empty", "an output folder")
        require(self.scene_root is None or isinstance(self.scene_root, str) or (
            isinstance(self.scene_root, list) and all(isinstance(r, str) for r in self.scene_root)),
            "scene_root", f"got {self.scene_root!r}", "a folder, a list of folders, or null")
        self.parallel().validate(CONFIG_FIELDS)

    def _validate_tasks(self) -> None:
        """``tasks``: TaskSpecs with distinct names, no top-level ``train`` / ``val``; ``task`` is
        set to the first task's (the run's default settings)."""
        from .policies_registry import OWN_LOOP, POLICIES

        require(isinstance(self.tasks, list) and all(isinstance(t, TaskSpec) for t in self.tasks), "tasks",
                f"got {self.tasks!r}", "a list of {task, train, val, name} mappings")
        require(not POLICIES.has_tag(self.policy.name, OWN_LOOP), "tasks", f"a task mix for {self.policy.name!r}",
                f"a policy of the shared trainer (not {POLICIES.tagged(OWN_LOOP)}), or one task: task / train / val")
        require(self.train is None and not self.val, "train", "top-level 'train' / 'val' with 'tasks'",
                "the episodes of each task in its 'tasks' entry")
        require(not self.task or self.task == self.tasks[0].task, "task", f"got {self.task!r} with 'tasks'",
                "no top-level 'task' (each 'tasks' entry names its own)")
        names = [t.name or t.task for t in self.tasks]
        require(len(set(names)) == len(names), "tasks", f"repeated names {sorted({n for n in names if names.count(n) > 1})}",
                "distinct task names (give 'name' to tell apart two entries of one task)")
        self.task = self.tasks[0].task

    def task_names(self) -> list[str]:
        """The names of ``tasks`` (one task: ``[task]``)."""
        return [t.name or t.task for t in self.tasks] if self.tasks else [self.task]

    def preflight(self) -> None:
        """Check what ``validate`` (pure) cannot: the files and the engine the run needs exist."""
        require(self.init is None or Path(self.init).is_file(), "init", f"no such file: {self.init}", "a checkpoint file")
        self.parallel().preflight(CONFIG_FIELDS)

    def parallel(self) -> ParallelConfig:
        """``workers`` / ``engine`` / ``address`` / ``job_timeout`` as one ``ParallelConfig``
        (for the observation cache and DAgger collection)."""
        return ParallelConfig(self.workers, self.engine, self.address, self.job_timeout)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (stored in checkpoints and ``config.json``)."""
        from ..core.io import to_jsonable

        return to_jsonable(asdict(self))

    def model_key(self) -> dict[str, Any]:
        """What a checkpoint's model depends on: the policy and its inputs (sensor rig, instruction length)."""
        data = self.to_dict()
        return {k: data[k] for k in ("policy", "sensors", "max_instruction_length")}

    def run_key(self) -> dict[str, Any]:
        """Settings that must match to resume a run folder (everything but ``out``, ``device`` and ``validation``)."""
        data = self.to_dict()
        for key in ("out", "device", "threads", "validation", "cache", "workers", "engine", "address",
                    "job_timeout", "scene_root", "plugins"):
            data.pop(key, None)
        data["il"].pop("checkpoint_every", None)
        data["dagger"].pop("features", None)  # how the round reads its frames (as ``cache``), not what it trains
        if data["il"].get("batching") == "padded":  # runs from before il.batching resume with it
            data["il"].pop("batching")
        for task in data.get("tasks") or []:  # runs from before per-task observation setups resume
            if task.get("observation") is None:
                task.pop("observation", None)
        if self.render.is_default():  # runs from before render settings resume
            data.pop("render", None)
        if data.get("language") == "v1":  # runs from before the language field resume
            data.pop("language")
        dist = {k: v for k, v in data.pop("distributed", {}).items() if k in ("batch", "lr_scaling")}
        if dist != {"batch": "global", "lr_scaling": "none"}:  # the default trains what one process does
            data["distributed"] = dist
        return data

    def render_options(self) -> dict[str, str]:
        """The ``make_simulator`` render options of the run (``render``; empty for the defaults)."""
        return self.render.options()


def resolve_train_config_path(name: str) -> Path:
    """A config path as given, else ``tasks/train/<name>.yaml``; unknown names list the shipped ones."""
    from ..core.errors import UnknownNameError
    from ..paths import tasks_dir

    path = Path(name)
    if path.suffix in (".yaml", ".yml") or path.exists():
        return path
    candidate = tasks_dir() / "train" / f"{name}.yaml"
    if candidate.is_file():
        return candidate
    raise UnknownNameError("train config", name, sorted(p.stem for p in (tasks_dir() / "train").glob("*.yaml")))


def load_train_config(path: str | Path, overrides: list[str] | dict[str, Any] | None = None) -> TrainConfig:
    """Load and validate a train config, then ``preflight`` it; ``overrides`` are ``key.sub=value``
    strings or a dict. Its ``plugins`` are imported first (``vlnverse.core.plugins.load_config_plugins``)."""
    from ..core.plugins import load_config_plugins

    if isinstance(overrides, list):
        overrides = parse_overrides(overrides)
    load_config_plugins(path, overrides)
    cfg = load_config(TrainConfig, path, overrides)
    try:
        cfg.preflight()
    except ConfigError as exc:
        raise exc.in_file(path) from None
    return cfg
