"""``vlnverse bench lookahead``: how well an ``hnr`` / ``gama`` checkpoint's rendered lookahead
views predict the real views on held-out episodes (issue 28's check), against copying the current
view's feature.

    vlnverse bench lookahead --checkpoint runs/train/hnr/best.pt --episodes val_unseen.jsonl \
        [--limit N] [--body NAME] [--workers N] [--out FILE.json]

- The teacher store of ``--episodes`` (of the checkpoint's task type, ``--limit`` of them taken
  round-robin over their scenes, each scene's in file order) is built as the HNR teacher cache is
  (``learn.cache.teacher_cache``: the waypoint oracle's path, the checkpoint's sensors, collision
  mode and step limits, ``--body`` or the checkpoint's), recording the grid features of the
  checkpoint's **own** waypoint predictor / cloud encoder (``hnr.checkpoint_teacher``); it is
  cached under ``$VLNVERSE_CACHE/learn`` and reused.
- Per oracle move (``hnr.lookahead_cosines``): the cosine between the rendered view of the
  oracle's candidate at step t and the encoder's feature of the real front view at t + 1, and the
  copy baseline's (the current panorama's feature in that direction). Reported: the means with
  95% bootstrap CIs over steps (``core.stats.bootstrap_ci``), the paired difference rendered − copy
  and its verdict, the same over per-episode means, and diagnostics: the rendered views' opacity
  (the cosines of nearly empty and of the other views, and the mean depth of the real view
  ahead, from its recorded cell depths), the same by the step's move number in its episode
  (``by_move``: the cloud grows along the episode), ``mean_view_cos`` (the cosine of the
  mean real view μ to each: how much of any cosine the features' shared direction explains) and
  ``centred`` (both cosines with μ subtracted from every feature).
- ``--out FILE.json`` also writes ``FILE.png``: histograms of the per-step cosines.
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vlnverse.core.stats import bootstrap_ci

from .train.options import check_int_flags, required_path

CHECKPOINT_HELP = "an hnr or gama checkpoint written by vlnverse train"
#: a rendered view with less opacity than this counts as (nearly) empty in the figures
EMPTY_OPACITY = 0.1
#: the figures by the step's move number in its episode (first move: 0): name, first, last
MOVE_BUCKETS = (("move_0", 0, 0), ("move_1", 1, 1), ("moves_2_3", 2, 3), ("moves_4_on", 4, 1 << 30))


@dataclass(frozen=True)
class LookaheadOptions:
    """The checked settings of a ``bench lookahead`` run: the ``checkpoint`` (hnr or gama), the
    ``episodes`` file, at most ``limit`` episodes (None: all), the ``body`` (None: the
    checkpoint's), ``workers`` rendering the teacher store, ``seed`` (the bootstrap's) and
    ``out`` (also its PNG)."""

    checkpoint: Path
    episodes: Path
    limit: int | None = None
    body: str | None = None
    workers: int = 1
    seed: int = 0
    out: str | None = None

    @classmethod
    def from_args(cls, args: Any) -> "LookaheadOptions":
        """The options of ``args`` (an ``argparse.Namespace`` of ``vlnverse bench lookahead``; a flag
        it lacks takes its default); a bad value is a one-line ``ConfigError`` naming the flag."""
        from vlnverse.core.body import load_body
        from vlnverse.core.errors import ConfigError, VLNVerseError

        given = vars(args)
        checkpoint = required_path(given.get("checkpoint"), "--checkpoint", CHECKPOINT_HELP)
        if not checkpoint.is_file():
            raise ConfigError("no such file", file=checkpoint, field="--checkpoint", expected=CHECKPOINT_HELP)
        episodes = required_path(given.get("episodes"), "--episodes", "an episodes JSONL file (held-out homes)")
        if not episodes.is_file():
            raise ConfigError("no such file", file=episodes, field="--episodes", expected="an episodes JSONL file")
        limit, workers = given.get("limit"), given.get("workers")
        check_int_flags((("--limit", limit, 1), ("--workers", workers, 1)))
        body = given.get("body")
        if body is not None:
            try:
                load_body(body)
            except VLNVerseError as exc:
                raise ConfigError(str(exc), field="--body", expected="a body preset name or a body YAML path") from None
        return cls(checkpoint=checkpoint, episodes=episodes, limit=limit, body=body, workers=workers or 1,
                   seed=int(given.get("seed", 0) or 0), out=given.get("out"))


def round_robin(episodes: list, limit: int | None) -> list:
    """The first ``limit`` episodes taken in turn from each scene (scenes in order of first
    appearance, each scene's episodes in file order); all of them without ``limit``."""
    by_scene: dict[str, list] = {}
    for e in episodes:
        by_scene.setdefault(e.scene_id, []).append(e)
    out, rank = [], 0
    while len(out) < len(episodes):
        out += [eps[rank] for eps in by_scene.values() if rank < len(eps)]
        rank += 1
    return out if limit is None else out[:limit]


def teacher_store(checkpoint: Path, episodes_path: Path, *, limit: int | None = None, body: str | None = None,
                  workers: int = 1, cache_dir: str | Path | None = None, scene_loader=None, progress: bool = True,
                  report=print) -> tuple:
    """(policy, store, cache stats, episodes): the checkpoint's ``hnr`` / ``gama`` policy and the
    HNR teacher store of the episodes (module docstring); a non-HNR checkpoint or an episodes file
    without the checkpoint's task is a one-line ``ConfigError``."""
    from vlnverse.core.cache_key import sha256_file
    from vlnverse.core.config import from_dict
    from vlnverse.core.errors import ConfigError
    from vlnverse.run.setup import EpisodeSource
    from vlnverse.learn import seed_torch
    from vlnverse.learn.cache import keyed_folder, teacher_cache
    from vlnverse.learn.checkpoint import policy_from_checkpoint, read_checkpoint
    from vlnverse.learn.config import TrainConfig
    from vlnverse.learn.hnr import HNRPolicy, checkpoint_teacher
    from vlnverse.learn.splits import resolve_split
    from vlnverse.learn.trainer import Trainer
    from vlnverse.tasks.episode import load_episodes

    data = read_checkpoint(checkpoint)
    policy = policy_from_checkpoint(data, path=checkpoint)
    if not isinstance(policy, HNRPolicy):
        raise ConfigError(f"holds a '{data['policy']}' policy", file=checkpoint, field="--checkpoint", expected=CHECKPOINT_HELP)
    cfg = dict(data.get("config") or {})
    seed_torch(0, 1)  # one thread: the machine is shared; rendering draws no random numbers
    given = load_episodes(episodes_path)
    if not given:
        raise ConfigError("no episodes", file=episodes_path, field="--episodes", expected="an episodes JSONL file")
    task = cfg.get("task") or "fine_grained"
    if cfg.get("tasks"):  # a multi-task checkpoint: the episodes' task if it was one of them, else its first
        names = [t.get("task") for t in cfg["tasks"]]
        task = given[0].task_type if given[0].task_type in names else names[0]
    key = data.get("tensors_sha256") or sha256_file(checkpoint)
    folder = keyed_folder(cache_dir, "lookahead", {"checkpoint": key})
    teacher = checkpoint_teacher(policy, data, folder, file=checkpoint)
    cfg.update(task=task, tasks=[], train={"path": str(episodes_path)}, val={}, mode="il", init=None,
               validation={**(cfg.get("validation") or {}), "split": None},
               out=str(folder / "run"), body=body if body is not None else cfg.get("body"), device="cpu",
               cache={**(cfg.get("cache") or {}), "dir": None if cache_dir is None else str(cache_dir)},
               policy={"name": data["policy"], "params": {**data.get("policy_params", {}),
                                                          "waypoint_predictor": teacher.predictor_path}})
    config = from_dict(TrainConfig, cfg)
    trainer = Trainer(config, progress=False, report=report)  # its settings and sensors; it writes nothing
    episodes = resolve_split(EpisodeSource(path=str(episodes_path)), split=None, task_type=trainer.settings.task_type,
                             task=task, body=config.body, cache_dir=cache_dir, field="--episodes", progress=False,
                             resolve_scenes=scene_loader is None, scene_root=config.scene_root)
    episodes = round_robin(episodes, limit)
    store, stats = teacher_cache(episodes, sensors=trainer.sensor_specs, settings=trainer.settings,
                                 collision_mode=config.collision_mode, mode_params=config.mode_params, base_dir=cache_dir,
                                 chunk_frames=config.cache.chunk_frames, scene_loader=scene_loader, backend=config.backend,
                                 progress=progress, report=report, teacher=teacher, workers=workers,
                                 render=config.cache.render)
    stats["body"], stats["collision_mode"] = trainer.settings.body.name, config.collision_mode
    return policy, store, stats, episodes


def figures_of(cos: dict, seed: int = 0) -> dict:
    """The figures of ``hnr.lookahead_cosines``' output: per step and per episode means with 95%
    bootstrap CIs, the paired difference, the opacity, and the verdict."""
    import numpy as np

    rendered, copy = np.asarray(cos["rendered"], dtype=float), np.asarray(cos["copy"], dtype=float)
    opacity, episode = np.asarray(cos["opacity"], dtype=float), np.asarray(cos["episode"], dtype=int)
    diff = rendered - copy
    ids = sorted(set(episode.tolist()))
    per_ep = {name: [float(v[episode == i].mean()) for i in ids] for name, v in (("rendered", rendered), ("copy", copy))}
    d = bootstrap_ci(diff, seed=seed)
    verdict = ("no steps" if not len(diff) else "rendering beats copying" if d["lo"] > 0 else
               "copying beats rendering" if d["hi"] < 0 else "no significant difference")
    empty = opacity < EMPTY_OPACITY
    depth = np.asarray(cos.get("depth_ahead") or [np.nan] * len(diff), dtype=float)

    def part(mask: np.ndarray) -> dict:
        if not mask.any():
            return {"steps": 0}
        ahead = depth[mask][depth[mask] > 0]
        return {"steps": int(mask.sum()), "rendered_cos": round(float(rendered[mask].mean()), 4),
                "copy_baseline_cos": round(float(copy[mask].mean()), 4), "difference": bootstrap_ci(diff[mask], seed=seed),
                "depth_ahead_m": round(float(ahead.mean()), 3) if len(ahead) else None}
    # each step's move number in its episode (the steps of an episode come in order): the cloud grows with it
    move = np.array([int((episode[:i] == episode[i]).sum()) for i in range(len(episode))], dtype=int)
    by_move = {}
    for name, lo, hi in MOVE_BUCKETS:
        mask = (move >= lo) & (move <= hi)
        by_move[name] = {**part(mask), "empty_share": round(float(empty[mask].mean()), 4) if mask.any() else None}
    return {
        "steps": int(len(diff)), "episodes_with_steps": len(ids), "by_move": by_move,
        "rendered_cos": bootstrap_ci(rendered, seed=seed), "copy_baseline_cos": bootstrap_ci(copy, seed=seed),
        "difference": d, "verdict": verdict,
        "per_episode": {"episodes": len(ids), "rendered_cos": bootstrap_ci(per_ep["rendered"], seed=seed),
                        "copy_baseline_cos": bootstrap_ci(per_ep["copy"], seed=seed),
                        "difference": bootstrap_ci(np.subtract(per_ep["rendered"], per_ep["copy"]), seed=seed)},
        "mean_view_cos": bootstrap_ci(cos.get("mean_view", []), seed=seed),
        "centred": {"rendered_cos": bootstrap_ci(cos.get("rendered_centred", []), seed=seed),
                    "copy_baseline_cos": bootstrap_ci(cos.get("copy_centred", []), seed=seed),
                    "difference": bootstrap_ci(np.subtract(cos.get("rendered_centred", []), cos.get("copy_centred", [])),
                                               seed=seed)},
        "opacity": {"mean": round(float(opacity.mean()), 4) if len(opacity) else None,
                    f"empty_below_{EMPTY_OPACITY}": part(empty), "not_empty": part(~empty)},
    }


def run(args, *, scene_loader=None, cache_dir: str | Path | None = None) -> dict:
    """Build the store, measure, and return the figures (module docstring); ``scene_loader`` and
    ``cache_dir`` as ``teacher_cache``'s (default: the episodes' scene files, ``$VLNVERSE_CACHE/learn``)."""
    from vlnverse.learn.agent import require_torch
    from vlnverse.learn.hnr import lookahead_cosines

    require_torch("vlnverse bench lookahead", field=None)
    options = LookaheadOptions.from_args(args)
    checkpoint, episodes_path, limit, body, workers = (options.checkpoint, options.episodes, options.limit, options.body,
                                                       options.workers)
    load_start, t0 = os.getloadavg(), time.perf_counter()
    policy, store, stats, episodes = teacher_store(checkpoint, episodes_path, limit=limit, body=body, workers=workers,
                                                   cache_dir=cache_dir, scene_loader=scene_loader,
                                                   report=lambda line: print(line, file=sys.stderr))
    t_store = time.perf_counter()
    cos = lookahead_cosines(policy, store)
    figures = {
        "checkpoint": str(checkpoint), "policy": policy.name, "episodes_file": str(episodes_path), "limit": limit,
        "episodes": len(store), "scenes": sorted({e.scene_id for e in episodes}),
        "body": stats["body"], "collision_mode": stats["collision_mode"],
        **figures_of(cos, options.seed),
        "cache": {k: stats.get(k) for k in ("status", "path", "frames", "frames_per_s", "teacher_SR")},
        "seconds": {"store": round(t_store - t0, 1), "render": round(time.perf_counter() - t_store, 1)},
        "load_average_1m": {"start": round(load_start[0], 2), "end": round(os.getloadavg()[0], 2)},
        "torch_threads": 1, "cpu_count": os.cpu_count(), "workers": workers,
    }
    if options.out:
        figures["plot"] = str(Path(options.out).with_suffix(".png"))
        plot_cosines(figures, cos, Path(figures["plot"]))
    return figures


def plot_cosines(figures: dict, cos: dict, path: Path) -> None:
    """PNG: histograms of the per-step cosines, rendered vs copy, and of their paired difference."""
    import matplotlib
    import numpy as np

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rendered, copy = np.asarray(cos["rendered"]), np.asarray(cos["copy"])
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    bins = np.linspace(min(-0.05, float(min(rendered.min(initial=0), copy.min(initial=0)))), 1.0, 31)
    for values, label, colour in ((rendered, "rendered", "#3b7dd8"), (copy, "copy current view", "#999999")):
        ci = bootstrap_ci(values)
        axes[0].hist(values, bins=bins, alpha=0.6, color=colour,
                     label=f"{label}: {ci['mean']} [{ci['lo']}, {ci['hi']}]" if len(values) else label)
    axes[0].set_xlabel("cosine to the real next view")
    axes[0].set_ylabel("steps")
    axes[0].legend()
    axes[0].set_title(f"{figures['steps']} steps of {figures['episodes']} episodes")
    d = figures["difference"]
    axes[1].hist(rendered - copy, bins=31, color="#d87b3b")
    axes[1].axvline(0.0, color="k", lw=1)
    axes[1].set_xlabel("rendered - copy (per step)")
    axes[1].set_title(f"paired difference {d['mean']} [{d['lo']}, {d['hi']}]\n{figures['verdict']}")
    fig.suptitle(f"bench lookahead: {figures['policy']} {figures['checkpoint']} on {figures['episodes_file']}, "
                 f"body {figures['body']}; load {figures['load_average_1m']}", fontsize=9)
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=90)
    plt.close(fig)
    tmp.replace(path)
