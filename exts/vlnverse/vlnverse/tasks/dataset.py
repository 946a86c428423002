"""Dataset generation: one task type over a set of scenes → ``DIR/<split>.jsonl`` + summary.

Rules (also in ``docs/tasks.md``):

* **Splits.** A scene's split comes from ``scenes_usd/splits.json`` (``train`` / ``val_unseen`` /
  ``test``); a scene listed nowhere gets ``default_split`` (``train``). As in VLNVerse,
  ``val_seen`` is a held-out share of the episodes of *train* scenes: each train episode moves to
  ``val_seen`` with probability ``val_seen_fraction`` (default 0.1, drawn from the scene's own
  RNG stream), so val_seen scenes are seen in training but its episodes are not.
* **Determinism.** Task ``t`` on scene ``s`` gets the RNG
  ``default_rng(SeedSequence([seed, h(s), h(t)]))`` where ``h`` is a stable hash (SHA-256, not
  Python's salted ``hash()``), so adding or removing scenes never changes the others' episodes,
  the same seed gives byte-identical files, and every task type samples independently: two
  tasks sharing a sampling routine (coarse-grained, visual-reference, dialogue) never reuse
  each other's start/goal pairs.
* **Atomicity.** Everything is written into a temporary folder beside ``DIR`` that replaces
  ``DIR`` only when the whole run succeeded (``core.io.replace_output_dir``): an interrupted or
  failed run leaves no (partial) dataset behind. ``DIR`` must be new, empty or a dataset folder
  written before (marker file); ``.``, an ancestor of the working folder or any other non-empty
  folder is refused, and files in ``DIR`` that the generator did not write are kept.
"""
from __future__ import annotations

import hashlib
import io
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from ..core.body import AgentBody, as_body
from ..core.config import check_seed, short
from ..core.errors import ConfigError, SceneError
from ..core.io import redact_secrets, replace_output_dir, write_bytes_atomic, write_json_atomic
from ..core.jobs import Job, ParallelConfig, run_jobs
from ..core.plugins import load_plugins
from .base import (TASKS, WORKER_PRELOAD, SceneContext, TaskConfig, TaskGenerator, load_scene_context, load_task_config,
                   load_task_types)
from .episode import Episode, save_episodes
from .instructions.llm import collect_llm_warnings
from .pathing import polyline_length

#: Order in which split files are listed in summaries.
SPLIT_ORDER = ("train", "val_seen", "val_unseen", "test")

DATASET_VERSION = 1

#: The most episodes one call generates per scene (``--episodes-per-scene``; docs/reliability.md).
MAX_EPISODES_PER_SCENE = 10_000


def stable_hash(text: str) -> int:
    """A 64-bit hash of ``text`` that is the same in every process and on every machine (SHA-256)."""
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")


def scene_seed(seed: int, scene_id: str, task: str | None = None) -> np.random.SeedSequence:
    """The per-scene (and per-task) seed sequence ``SeedSequence([seed, h(scene_id), h(task)])``.

    ``h`` is :func:`stable_hash`; ``task=None`` leaves the task out (one stream per scene).
    """
    entropy = [int(seed), stable_hash(scene_id)]
    if task is not None:
        entropy.append(stable_hash(task))
    return np.random.SeedSequence(entropy)


def resolve_scene_paths(scenes: str | Iterable[str | Path]) -> list[Path]:
    """Scene USD paths from a split name, ``all``, scene ids or paths (comma-separated or a list).

    ``vlnverse.scenes.splits.resolve_scenes`` (the one scene resolver) with errors naming ``--scenes``.
    """
    from ..scenes.splits import resolve_scenes

    items = [scenes] if isinstance(scenes, (str, Path)) else list(scenes)
    if not any(str(s).strip(" ,") for s in items):
        raise ConfigError("no scenes given", field="--scenes", expected="a split name, 'all', scene ids or paths")
    return resolve_scenes(items, field="--scenes")


def scene_splits() -> dict[str, str]:
    """Scene id → split from ``scenes_usd/splits.json`` (empty when there is none)."""
    try:
        from ..scenes.splits import load_splits
    except ModuleNotFoundError:
        return {}
    try:
        splits = load_splits()
    except (ConfigError, FileNotFoundError):
        return {}
    return {scene_id: split for split, ids in splits.items() for scene_id in ids}


def _stats(values: list[float]) -> dict[str, float]:
    if not values:
        return {"count": 0}
    arr = np.asarray(values, dtype=float)
    return {"count": int(arr.size), "mean": round(float(arr.mean()), 4), "std": round(float(arr.std()), 4),
            "min": round(float(arr.min()), 4), "median": round(float(np.median(arr)), 4),
            "max": round(float(arr.max()), 4)}


def _histogram(values: list[float], bins: np.ndarray) -> dict[str, list]:
    counts, edges = np.histogram(np.asarray(values, dtype=float), bins=bins)
    return {"edges": [round(float(e), 4) for e in edges], "counts": [int(c) for c in counts]}


def instruction_words(episode: Episode) -> list[int]:
    """Word count of each instruction (the goal category for category-only episodes)."""
    if episode.instructions:
        return [len(i.text.split()) for i in episode.instructions]
    return [len(episode.instruction_text.split())]


def summarize(episodes_by_split: dict[str, list[Episode]], meta: dict[str, Any]) -> dict[str, Any]:
    """The machine-readable summary: counts per split, path-length / geodesic / instruction stats and histograms."""
    all_eps = [e for eps in episodes_by_split.values() for e in eps]
    lengths = [polyline_length(np.asarray(e.reference_path)) for e in all_eps]
    geodesics = [e.geodesic_distance for e in all_eps]
    words = [w for e in all_eps for w in instruction_words(e)]
    length_bins = np.arange(0.0, max(lengths + [1.0]) + 1.0, 1.0)
    word_bins = np.arange(0, max(words + [1]) + 6, 5)
    per_split = {}
    for split, eps in episodes_by_split.items():
        per_split[split] = {
            "episodes": len(eps),
            "scenes": len({e.scene_id for e in eps}),
            "path_length_m": _stats([polyline_length(np.asarray(e.reference_path)) for e in eps]),
            "instruction_words": _stats([w for e in eps for w in instruction_words(e)]),
        }
    kinds = Counter(str(e.info["kind"]) for e in all_eps if "kind" in e.info)
    subclasses = Counter(f"{e.info['kind']}/{e.info.get('answer', {}).get('subclass', 'main')}"
                         for e in all_eps if "kind" in e.info)
    mix = {"kinds": dict(sorted(kinds.items())), "subclasses": dict(sorted(subclasses.items()))} if kinds else {}
    return {
        "version": DATASET_VERSION,
        **meta,
        **mix,
        "counts": {split: len(eps) for split, eps in episodes_by_split.items()},
        "total_episodes": len(all_eps),
        "splits": per_split,
        "path_length_m": _stats(lengths),
        "geodesic_distance_m": _stats(geodesics),
        "instruction_words": _stats(words),
        "histograms": {"path_length_m": _histogram(lengths, length_bins),
                       "instruction_words": _histogram(words, word_bins)},
    }


def summary_png(summary: dict[str, Any]) -> bytes:
    """Two histograms (reference path length, instruction length) as PNG bytes."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(9, 3.4), dpi=100)
    for ax, key, label in ((fig.add_subplot(1, 2, 1), "path_length_m", "reference path length (m)"),
                           (fig.add_subplot(1, 2, 2), "instruction_words", "instruction length (words)")):
        hist = summary["histograms"][key]
        edges = np.asarray(hist["edges"])
        ax.bar(edges[:-1], hist["counts"], width=np.diff(edges), align="edge", color="#4477aa", edgecolor="white")
        stats = summary[key]
        if stats.get("count"):
            ax.axvline(stats["mean"], color="#cc3311", lw=1.5, label=f"mean {stats['mean']:.1f}")
            ax.legend(frameon=False)
        ax.set_xlabel(label)
        ax.set_ylabel("count")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    counts = ", ".join(f"{k} {v}" for k, v in summary["counts"].items())
    fig.suptitle(f"{summary['task']}: {summary['total_episodes']} episodes ({counts})")
    # fixed margins (room for 5-digit counts): tight_layout took ~0.15 s, a third of the driver's
    # work after the last scene
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.15, top=0.87, wspace=0.25)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def _task_config_source(task: str, config: Any) -> str:
    """The file a task config came from (for error messages)."""
    if config is not None and not isinstance(config, TaskConfig):
        return str(config)
    default = TASKS.get(task).config_file if config is None and task in TASKS else None
    return str(default) if default is not None else f"<config of task '{task}'>"


def generate_dataset(task: str, scenes: str | Iterable[str | Path], episodes_per_scene: int, seed: int,
                     out_dir: str | Path, *, body: str | None = None, config: str | Path | TaskConfig | None = None,
                     overrides: dict | None = None, val_seen_fraction: float = 0.1, default_split: str = "train",
                     progress: bool = True,
                     renderer_factory: Callable[[SceneContext], Any] | None = None,
                     scene_root: str | Path | list | None = None,
                     workers: int = 1, engine: str = "local", address: str | None = None,
                     job_timeout: float | None = None, plugins: Iterable[str] | None = None) -> dict[str, Any]:
    """Generate ``episodes_per_scene`` episodes of ``task`` on every scene and write the dataset.

    Writes ``out_dir/<split>.jsonl``, ``summary.json`` and ``summary.png`` (plus any assets the
    task writes, e.g. reference images) atomically; returns the summary. ``renderer_factory(ctx)``
    returns ``(renderer, close)`` for tasks that render (those whose generator sets ``needs_renderer``). Episodes name
    their scene portably: ``scene_path`` relative to ``scene_root``, the dataset folder or the
    shipped scenes (``vlnverse.tasks.scene_roots``), so the folder can be moved or copied.
    ``workers``/``engine``/``address`` generate scenes in parallel (``vlnverse.core.jobs``;
    the factory must then be picklable); the files are the same as a serial run's.
    ``job_timeout`` (s, default off) kills and retries a worker stuck on one scene that long.
    ``plugins`` (module names or ``.py`` paths, ``vlnverse.core.plugins``) are imported first,
    here and in every worker, so plug-in task types can be generated.
    """
    from .scene_roots import portable_scene_path
    from tqdm import tqdm

    if isinstance(episodes_per_scene, bool) or not isinstance(episodes_per_scene, int) \
            or not 1 <= episodes_per_scene <= MAX_EPISODES_PER_SCENE:
        raise ConfigError(f"got {short(episodes_per_scene)}", field="--episodes-per-scene",
                          expected=f"an integer in 1..{MAX_EPISODES_PER_SCENE}")
    check_seed(seed, "--seed")
    parallel = ParallelConfig(workers, engine, address, job_timeout).checked()
    parallel.start_early(generate_scene_job, WORKER_PRELOAD)
    if not 0.0 <= val_seen_fraction < 1.0:
        raise ConfigError(f"got {val_seen_fraction}", field="--val-seen-fraction", expected="a fraction in [0, 1)")
    plugins = [str(p) for p in (plugins or [])]
    load_plugins(plugins, field="--plugins")
    load_task_types()
    generator_cls = TASKS.get(task)
    if isinstance(config, TaskConfig):
        task_config = config
    else:
        task_config = load_task_config(config if config is not None else task, overrides)
    if task_config.task_type != task:
        raise ConfigError(f"config is for task '{task_config.task_type}'", file=None if isinstance(config, TaskConfig)
                          else config, field="task_type", expected=f"'{task}'")
    body_obj = as_body(body or task_config.body)  # loaded once, passed on as an object
    body_name = body_obj.name
    scene_paths = resolve_scene_paths(scenes)
    split_of = scene_splits()

    out_dir = Path(out_dir)
    by_split: dict[str, list[Episode]] = {}
    scene_list: dict[str, list[str]] = {}
    shortfalls: list[dict[str, Any]] = []  # scenes that got fewer episodes than asked, and why
    with replace_output_dir(out_dir, command="data generate") as tmp, collect_llm_warnings() as llm_warnings:
        try:
            generator = generator_cls(task_config)  # checks params.*
        except ConfigError as exc:
            raise exc.in_file(_task_config_source(task, config)) from None
        # Tasks writing assets (reference images, prior videos) put them inside the dataset:
        # ``assets_dir`` = DIR/assets (when the generator has one), ``output_dir`` = DIR.
        generator.output_dir = tmp
        if hasattr(generator, "assets_dir") and generator.assets_dir is None:
            generator.assets_dir = tmp / "assets"
        inline = parallel.inline
        jobs = [Job(Path(path).stem, (str(path),), GenerateJob(
            path=path, task=task, task_config=task_config, body=body_obj, seed=seed,
            episodes_per_scene=episodes_per_scene, split_of=split_of, default_split=default_split,
            val_seen_fraction=val_seen_fraction, renderer_factory=renderer_factory, output_dir=tmp,
            generator=generator if inline else None, plugins=plugins)) for path in scene_paths]
        results: dict[str, tuple] = {}
        bar = tqdm(total=len(scene_paths), desc=f"{task}", unit="scene", disable=not progress, dynamic_ncols=True)

        def on_result(path: str, result: tuple) -> None:
            results[path] = result
            bar.set_postfix_str(result[0])
            bar.update(1)

        try:
            report = run_jobs(generate_scene_job, jobs, on_result=on_result, parallel=parallel, preload=WORKER_PRELOAD)
        finally:
            bar.close()
        if report.failures:
            raise SceneError(report.failure_summary())
        roots = [scene_root] if isinstance(scene_root, (str, Path)) else scene_root or []
        for path in scene_paths:  # the serial order, whatever order the workers finished in
            scene_id, episodes, shortfall = results[str(path)]
            if len(episodes) < episodes_per_scene:
                shortfalls.append({"scene_id": scene_id, "requested": episodes_per_scene, "written": len(episodes),
                                   "reason": shortfall or "the generator found no more distinct episodes"})
                tqdm.write(f"{task}: {scene_id}: wrote {len(episodes)} of {episodes_per_scene} episodes "
                           f"({shortfalls[-1]['reason']})")
            stored_path = portable_scene_path(path, out_dir, roots)
            for ep in episodes:
                ep.scene_path = stored_path
                by_split.setdefault(ep.split, []).append(ep)
                scene_list.setdefault(ep.split, [])
                if scene_id not in scene_list[ep.split]:
                    scene_list[ep.split].append(scene_id)
        ordered = {s: by_split[s] for s in sorted(by_split, key=lambda s: (SPLIT_ORDER.index(s)
                                                                            if s in SPLIT_ORDER else 99, s))}
        for split, eps in ordered.items():
            save_episodes(tmp / f"{split}.jsonl", eps)
        meta = {"task": task, "seed": int(seed), "episodes_per_scene": episodes_per_scene, "body": body_name,
                "val_seen_fraction": val_seen_fraction, "config": redact_secrets(asdict(task_config)),
                "scenes": {s: scene_list[s] for s in ordered},
                "requested_episodes": episodes_per_scene * len(scene_paths), "shortfall": shortfalls}
        render = getattr(renderer_factory, "options", None)  # ``SimulatorRendererFactory``'s render options
        if render and getattr(generator, "needs_renderer", False):
            meta["render"] = dict(render)  # what the assets were drawn with (absent: the simulator's defaults)
        if llm_warnings or (task_config.params or {}).get("llm_url"):
            # fallbacks of the optional LLM stage (endpoint errors, rejected rewrites): template kept
            meta["warnings"] = dict(sorted(llm_warnings.items()))
        summary = summarize(ordered, meta)
        write_json_atomic(tmp / "summary.json", summary)
        write_bytes_atomic(tmp / "summary.png", summary_png(summary))
    return summary


@dataclass(frozen=True)
class GenerateJob:
    """The payload of one scene's generation job (``generate_scene_job``; picklable, sent to worker
    processes or Ray actors). ``generator`` is the caller's own generator when the run is inline
    (``None``: each worker builds one per task config)."""

    path: str | Path
    task: str
    task_config: TaskConfig
    body: AgentBody
    seed: int
    episodes_per_scene: int
    split_of: dict[str, str]
    default_split: str
    val_seen_fraction: float
    renderer_factory: Callable[[SceneContext], tuple[Any, Callable[[], None] | None]] | None
    output_dir: Path
    generator: TaskGenerator | None
    plugins: list[str]


def generate_scene_job(payload: GenerateJob, items: tuple, state: dict, emit: Callable[[str, Any], None]) -> None:
    """Parallel job (``vlnverse.core.jobs``): generate one scene's episodes (seeded by the
    dataset seed and the scene id, so any worker gives the same episodes) and ``emit(path,
    (scene_id, episodes, shortfall))``; the task generator is built once per worker."""
    task, task_config, body_obj = payload.task, payload.task_config, payload.body
    load_plugins(payload.plugins, field="--plugins")  # a fresh worker process has not imported them
    load_task_types()  # ... nor registered the task types
    generator_cls = TASKS.get(task)
    generator = payload.generator
    if generator is None:
        key = ("generator", task, repr(task_config), str(payload.output_dir))
        if key not in state:
            generator = generator_cls(task_config)
            generator.output_dir = payload.output_dir
            if hasattr(generator, "assets_dir") and generator.assets_dir is None:
                generator.assets_dir = Path(payload.output_dir) / "assets"
            state[key] = generator
        generator = state[key]
    path = payload.path
    renderer, close = None, None
    ctx = load_scene_context(path, body_obj, resolution=task_config.map_resolution)
    if generator_cls.needs_renderer:
        factory = payload.renderer_factory
        if factory is None:
            raise ConfigError(f"task '{task}' renders images and needs a renderer", field="renderer",
                              expected="a renderer factory (the CLI uses the simulator's camera)")
        renderer, close = factory(ctx)
        ctx = load_scene_context(path, body_obj, resolution=task_config.map_resolution, renderer=renderer)
    split = payload.split_of.get(ctx.scene_id, payload.default_split)
    gen_seq, split_seq = scene_seed(payload.seed, ctx.scene_id, task).spawn(2)
    generator.shortfall = None
    try:
        episodes = generator.generate(ctx, np.random.default_rng(gen_seq), payload.episodes_per_scene, split)
    finally:
        if close is not None:
            close()
    if split == "train" and payload.val_seen_fraction > 0:
        # One draw per episode group (false-premise pairs share info["pair_id"]; any other
        # episode is its own group), so a pair never straddles train and val_seen.
        groups = list(dict.fromkeys(ep.info.get("pair_id", ep.episode_id) for ep in episodes))
        held = dict(zip(groups, np.random.default_rng(split_seq).random(len(groups)) < payload.val_seen_fraction))
        for ep in episodes:
            if held[ep.info.get("pair_id", ep.episode_id)]:
                ep.split = "val_seen"
    emit(str(path), (ctx.scene_id, episodes, generator.shortfall))


class SimulatorCamera:
    """The simulator's camera as a task renderer: ``camera(x, y, yaw, pitch)`` → RGB (H, W, 3)
    uint8 and ``camera.instances(x, y, yaw, pitch)`` → instance ids (H, W) of the same view
    (the simulator's instance camera; ray-cast where OpenGL is missing); ``hfov_deg``."""

    def __init__(self, sim, width: int, height: int, hfov_deg: float):
        from ..sim import CameraSpec

        self.sim = sim
        self.hfov_deg = float(hfov_deg)
        self._rgb = CameraSpec(name="reference_rgb", kind="rgb", width=width, height=height, hfov_deg=hfov_deg)
        self._ids = CameraSpec(name="reference_instance", kind="instance", width=width, height=height,
                               hfov_deg=hfov_deg)

    def _pose(self, x: float, y: float, yaw: float, pitch: float):
        from ..sim import AgentPose

        return AgentPose(float(x), float(y), float(yaw), float(pitch))

    def __call__(self, x: float, y: float, yaw: float, pitch: float = 0.0) -> np.ndarray:
        return self.sim.render_at(self._pose(x, y, yaw, pitch), self._rgb)[self._rgb.name]

    def instances(self, x: float, y: float, yaw: float, pitch: float = 0.0) -> np.ndarray:
        """Instance id of every pixel of the view (0 where nothing is hit)."""
        return self.sim.render_at(self._pose(x, y, yaw, pitch), self._ids)[self._ids.name]


class SimulatorRendererFactory:
    """A picklable ``renderer_factory`` (parallel workers can receive it): for a scene context it
    returns ``(SimulatorCamera, close)`` on a new simulator of the scene, drawn with the
    ``make_simulator`` render ``options`` (``quality``, ``objects``; empty: the simulator's defaults)."""

    def __init__(self, width: int = 256, height: int = 256, hfov_deg: float = 90.0, backend: str = "auto",
                 options: dict[str, str] | None = None):
        self.width, self.height, self.hfov_deg, self.backend = width, height, hfov_deg, backend
        self.options = dict(options or {})

    def __call__(self, ctx: SceneContext):
        from ..sim import make_simulator

        sim = make_simulator(ctx.desc, ctx.body, sensors=[], backend=self.backend, **self.options)
        return SimulatorCamera(sim, self.width, self.height, self.hfov_deg), sim.close


def simulator_renderer_factory(width: int = 256, height: int = 256, hfov_deg: float = 90.0,
                               backend: str = "auto", options: dict[str, str] | None = None
                               ) -> SimulatorRendererFactory:
    """A ``renderer_factory`` returning the camera (``SimulatorCamera``) of a simulator on backend
    ``backend`` with render ``options`` and its closer."""
    return SimulatorRendererFactory(width, height, hfov_deg, backend, options)
