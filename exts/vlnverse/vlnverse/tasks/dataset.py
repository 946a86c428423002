"""Dataset generation: one task type over a set of scenes → ``DIR/<split>.jsonl`` + summary.

Rules (also in ``docs/tasks.md``):

* **Splits.** A scene's split comes from ``scenes_usd/splits.json`` (``train`` / ``val_unseen`` /
  ``test``); a scene listed nowhere gets ``default_split`` (``train``). As in VLNVerse,
  ``val_seen`` is a held-out share of the episodes of *train* scenes: each train episode moves to
  ``val_seen`` with probability ``val_seen_fraction`` (default 0.1, drawn from the scene's own
  RNG stream), so val_seen scenes are seen in training but its episodes are not.
* **Determinism.** Scene ``s`` gets the RNG ``default_rng(SeedSequence([seed, h(s)]))`` where
  ``h`` is a stable hash of the scene id, so adding or removing scenes never changes the others'
  episodes, and the same seed gives byte-identical files.
* **Atomicity.** Everything is written into a temporary folder beside ``DIR`` that replaces
  ``DIR`` only when the whole run succeeded (``core.io.atomic_dir``): an interrupted or failed
  run leaves no (partial) dataset behind.
"""
from __future__ import annotations

import hashlib
import io
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from ..core.body import as_body
from ..core.errors import ConfigError
from ..core.io import atomic_dir, write_bytes_atomic, write_json_atomic
from .base import TASKS, SceneContext, TaskConfig, load_scene_context, load_task_config, load_task_types
from .episode import Episode, save_episodes
from .pathing import polyline_length

#: Order in which split files are listed in summaries.
SPLIT_ORDER = ("train", "val_seen", "val_unseen", "test")

DATASET_VERSION = 1


def scene_seed(seed: int, scene_id: str) -> np.random.SeedSequence:
    """The per-scene seed sequence: ``SeedSequence([seed, stable 64-bit hash of scene_id])``."""
    digest = int.from_bytes(hashlib.sha256(scene_id.encode("utf-8")).digest()[:8], "little")
    return np.random.SeedSequence([int(seed), digest])


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
    return {
        "version": DATASET_VERSION,
        **meta,
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
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def generate_dataset(task: str, scenes: str | Iterable[str | Path], episodes_per_scene: int, seed: int,
                     out_dir: str | Path, *, body: str | None = None, config: str | Path | TaskConfig | None = None,
                     overrides: dict | None = None, val_seen_fraction: float = 0.1, default_split: str = "train",
                     progress: bool = True,
                     renderer_factory: Callable[[SceneContext], Any] | None = None,
                     scene_root: str | Path | list | None = None) -> dict[str, Any]:
    """Generate ``episodes_per_scene`` episodes of ``task`` on every scene and write the dataset.

    Writes ``out_dir/<split>.jsonl``, ``summary.json`` and ``summary.png`` (plus any assets the
    task writes, e.g. reference images) atomically; returns the summary. ``renderer_factory(ctx)``
    returns ``(renderer, close)`` for tasks that render (those whose generator sets ``needs_renderer``).
    Episodes name their scene portably: ``scene_path`` relative to ``scene_root``, the dataset folder
    or the shipped scenes (``vlnverse.tasks.scene_roots``), so the folder can be moved or copied.
    """
    from .scene_roots import portable_scene_path
    from tqdm import tqdm

    if isinstance(episodes_per_scene, bool) or not isinstance(episodes_per_scene, int) or episodes_per_scene < 1:
        raise ConfigError(f"got {episodes_per_scene!r}", field="--episodes-per-scene", expected="an integer >= 1")
    if not 0.0 <= val_seen_fraction < 1.0:
        raise ConfigError(f"got {val_seen_fraction}", field="--val-seen-fraction", expected="a fraction in [0, 1)")
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
    with atomic_dir(out_dir) as tmp:
        generator = generator_cls(task_config)
        # Tasks writing assets (reference images, prior videos) put them inside the dataset:
        # ``assets_dir`` = DIR/assets (when the generator has one), ``output_dir`` = DIR.
        generator.output_dir = tmp
        if hasattr(generator, "assets_dir") and generator.assets_dir is None:
            generator.assets_dir = tmp / "assets"
        bar = tqdm(scene_paths, desc=f"{task}", unit="scene", disable=not progress, dynamic_ncols=True)
        for path in bar:
            renderer, close = None, None
            ctx = load_scene_context(path, body_obj, resolution=task_config.map_resolution)
            if generator_cls.needs_renderer:
                if renderer_factory is None:
                    raise ConfigError(f"task '{task}' renders images and needs a renderer", field="renderer",
                                      expected="a renderer factory (the CLI uses the simulator's camera)")
                renderer, close = renderer_factory(ctx)
                ctx = load_scene_context(path, body_obj, resolution=task_config.map_resolution, renderer=renderer)
            bar.set_postfix_str(ctx.scene_id)
            split = split_of.get(ctx.scene_id, default_split)
            gen_seq, split_seq = scene_seed(seed, ctx.scene_id).spawn(2)
            try:
                episodes = generator.generate(ctx, np.random.default_rng(gen_seq), episodes_per_scene, split)
            finally:
                if close is not None:
                    close()
            if split == "train" and val_seen_fraction > 0:
                # One draw per episode group (false-premise pairs share info["pair_id"]; any other
                # episode is its own group), so a pair never straddles train and val_seen.
                groups = list(dict.fromkeys(ep.info.get("pair_id", ep.episode_id) for ep in episodes))
                held = dict(zip(groups, np.random.default_rng(split_seq).random(len(groups)) < val_seen_fraction))
                for ep in episodes:
                    if held[ep.info.get("pair_id", ep.episode_id)]:
                        ep.split = "val_seen"
            stored_path = portable_scene_path(path, out_dir, [scene_root] if isinstance(scene_root, (str, Path))
                                              else scene_root or [])
            for ep in episodes:
                ep.scene_path = stored_path
                by_split.setdefault(ep.split, []).append(ep)
                scene_list.setdefault(ep.split, [])
                if ctx.scene_id not in scene_list[ep.split]:
                    scene_list[ep.split].append(ctx.scene_id)
        ordered = {s: by_split[s] for s in sorted(by_split, key=lambda s: (SPLIT_ORDER.index(s)
                                                                            if s in SPLIT_ORDER else 99, s))}
        for split, eps in ordered.items():
            save_episodes(tmp / f"{split}.jsonl", eps)
        meta = {"task": task, "seed": int(seed), "episodes_per_scene": episodes_per_scene, "body": body_name,
                "val_seen_fraction": val_seen_fraction, "config": asdict(task_config),
                "scenes": {s: scene_list[s] for s in ordered}}
        summary = summarize(ordered, meta)
        write_json_atomic(tmp / "summary.json", summary)
        write_bytes_atomic(tmp / "summary.png", summary_png(summary))
    return summary


def simulator_renderer_factory(width: int = 256, height: int = 256, hfov_deg: float = 90.0, backend: str = "auto"):
    """A ``renderer_factory`` drawing RGB frames with the simulator's camera (``render_at``) on
    simulator backend ``backend`` (a name passed through to ``make_simulator``)."""

    def factory(ctx: SceneContext):
        from ..sim import AgentPose, CameraSpec, make_simulator

        spec = CameraSpec(name="reference_rgb", kind="rgb", width=width, height=height, hfov_deg=hfov_deg)
        sim = make_simulator(ctx.desc, ctx.body, sensors=[], backend=backend)

        def render(x: float, y: float, yaw: float, pitch: float = 0.0) -> np.ndarray:
            return sim.render_at(AgentPose(float(x), float(y), float(yaw), float(pitch)), spec)[spec.name]

        return render, sim.close

    return factory
