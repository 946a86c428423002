"""``bench train``'s render-path figure: the teacher cache of the same training episodes built by
physics and by teleport (with the reference depth pass, as shipped, and on worker processes),
compared for speed and for equal labels, poses and frames (``--render-only``: only this)."""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import vlnverse.benchmarks.train.recipe as R

#: The teacher cache's frame rate when the issue asking for 10x was filed (RGB-D 64x64, physics path)
ISSUE_START_FRAMES_PER_S = 26.0


def compare_render_paths(episodes: list, work: Path, seed: int, workers: int = 1, train: Path | None = None) -> dict:
    """The teacher cache of ``episodes`` (the rows' rig, Tel-Hop) built in this run by the physics
    path, by the teleport path with the reference depth pass (``GLRenderer.glass_depth = "full"``:
    the whole view redrawn for depth when window glass is in view), by the teleport path as
    shipped (the glass-only depth pass) and, with ``workers`` > 1, by that path on ``workers``
    processes; each twice, alternated (the load drifts), in fresh cache folders, with no scene
    kept in memory between builds. Frames/s of each (best of 2), the in-process CPU seconds of
    the one-process builds (less sensitive to other processes' load), the ratios, and whether
    labels, poses and frames agree with the physics path's byte for byte. ``train``: the
    episodes file the trainer config names (default ``work/train.jsonl``)."""
    import shutil

    import numpy as np

    from vlnverse.core.config import from_dict
    from vlnverse.learn.cache import teacher_cache
    from vlnverse.learn.config import TrainConfig
    from vlnverse.learn.trainer import Trainer
    from vlnverse.sim.mujoco.render import GLRenderer
    from vlnverse.tasks import base

    root = work / "render_compare"
    shutil.rmtree(root, ignore_errors=True)
    cfg = from_dict(TrainConfig, {"policy": {"name": "cma"}, "task": "fine_grained",
                                  "train": str(train or work / "train.jsonl"),
                                  "collision_mode": "telhop", "sensors": R.SENSORS, "device": "cpu", "seed": seed,
                                  "cache": {"dir": str(root)}, "out": str(root / "run")})
    trainer = Trainer(cfg, progress=False)
    paths = ["physics", "teleport_reference", "teleport"] + ([f"teleport_{workers}_workers"] if workers > 1 else [])
    stores, stats, runs, cpu = {}, {}, {p: [] for p in paths}, {p: [] for p in paths if "workers" not in p}
    loads = [round(os.getloadavg()[0], 2)]
    for i, path in enumerate(paths + paths[::-1]):  # alternated: the load drifts
        base._CONTEXT_CACHE.clear()  # every build loads its scenes, as a fresh ``vlnverse train`` does
        GLRenderer.glass_depth = "full" if path == "teleport_reference" else "glass"
        t_cpu = time.process_time()
        try:
            store, got = teacher_cache(episodes, sensors=trainer.sensor_specs, settings=trainer.settings,
                                       collision_mode="telhop", base_dir=root / str(i), progress=False,
                                       render="physics" if path == "physics" else "teleport",
                                       workers=workers if "workers" in path else 1)
        finally:
            GLRenderer.glass_depth = "glass"
        if path in cpu:
            cpu[path].append(round(time.process_time() - t_cpu, 2))
        stores.setdefault(path, store)
        runs[path].append(got["frames_per_s"])
        loads.append(round(os.getloadavg()[0], 2))
        if path not in stats or got["frames_per_s"] > stats[path]["frames_per_s"]:
            stats[path] = got
    same = {p: {f: True for f in ("label", "executed", "pose", "rgb", "depth")} for p in paths[1:]}
    for path in paths[1:]:
        for i in range(len(stores["physics"])):
            a, b = stores["physics"].episode(i), stores[path].episode(i)
            for f in same[path]:
                same[path][f] = same[path][f] and a[f].shape == b[f].shape and bool(np.array_equal(a[f], b[f]))
    fps = {p: stats[p]["frames_per_s"] for p in paths}
    frames = stats["physics"]["frames"]
    best_cpu = {p: min(v) for p, v in cpu.items()}

    def ratio(a, b):
        return round(a / b, 2) if a and b else None

    out = {"episodes": len(episodes), "frames": frames, "scenes": len({str(e.scene_path) for e in episodes}),
           "frames_per_s": fps, "runs_frames_per_s": runs, "cpu_seconds": cpu,
           "cpu_frames_per_s": {p: round(frames / c, 1) for p, c in best_cpu.items() if c > 0},
           "physics_frames_per_s": fps["physics"], "teleport_frames_per_s": fps["teleport"],
           "teleport_speedup": ratio(fps["teleport"], fps["physics"]),
           "glass_pass_speedup": ratio(fps["teleport"], fps["teleport_reference"]),
           "glass_pass_cpu_speedup": ratio(best_cpu["teleport_reference"], best_cpu["teleport"]),
           "best_vs_issue_start": ratio(max(fps.values()), ISSUE_START_FRAMES_PER_S),
           "issue_start_frames_per_s": ISSUE_START_FRAMES_PER_S, "equal": same, "load_average_1m": loads,
           "note": f"best of 2 builds each, alternated; RGB-D {R.RESOLUTION}x{R.RESOLUTION} Tel-Hop, the oracle teacher; "
                   "the one-process builds run in this process (cpu_seconds: this process only)"}
    if workers > 1:
        out["workers_speedup"] = ratio(fps[paths[-1]], fps["teleport"])
    return out


def render_only(options: Any) -> dict:
    """``bench train --render-only``: only the render-path figure (``compare_render_paths``), on
    the training episodes of ``--episodes FILE`` (e.g. a previous run's ``train.jsonl``; the
    first ``--limit`` of them), with ``--workers``; work files under ``--out``'s folder
    (``options``: a ``TrainBenchOptions``, its files checked)."""
    from vlnverse.tasks.episode import load_episodes

    episodes = load_episodes(options.episodes)
    if options.limit is not None:
        episodes = episodes[:options.limit]
    work = options.work_dir("vlnverse-bench-render-")
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    render = compare_render_paths(episodes, work, options.seed, workers=options.workers, train=Path(options.episodes))
    return {"render": render, "seconds_total": round(time.perf_counter() - t0, 1), "workers": options.workers,
            "cpu_count": os.cpu_count(), "episodes_file": str(options.episodes), "work_dir": str(work),
            "machine_note": "figures vary with the machine's load (a shared 2-core machine: other sessions run tests)"}
