"""``vlnverse bench train --nproc N``: data-parallel IL throughput (``learn.distributed``) with 1
and with N gloo/NCCL ranks, measured in one run on the same data.

Episodes: ``DDP_EPISODES`` fine_grained episodes on the train home ``DDP_SCENE`` (``--seed``),
rendered once into the observation cache (RGB-D 32x32, Tel-Hop, teleport) *before* the launches.
Each row runs ``vlnverse train`` through ``torch.distributed.run`` with 1, then N local ranks
(torch on 1 thread per rank, CPU unless CUDA is present), the CMA policy of the bench's rows, a
global batch of ``DDP_BATCH`` episodes (the same steps for every rank count), no validation, and
``--budget`` seconds of training per row (default 60; the first epoch must fit). A row's
``samples_per_s`` is the trained teacher steps of the whole batch over rank 0's training time
(``summary.json``); ``wall_s`` adds process start, cache opening and checkpoints. The figures
state the machine's cores and its load average before and after; the ranks' output goes to
``<work>/logs``.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

DDP_SCENE = "home_0001"
DDP_EPISODES = 16
DDP_BATCH = 8
DEFAULT_BUDGET = 60.0


@dataclass(frozen=True)
class TrainDdpOptions:
    """The settings of a ``bench train --nproc`` run: ``nproc`` ranks (besides 1), ``budget``
    seconds per row, ``seed`` (episodes) and ``out`` (its stem: the work folder; None: a temp one)."""

    nproc: int = 2
    budget: float = DEFAULT_BUDGET
    seed: int = 0
    out: str | None = None


def run(args) -> dict:
    """Measure the figures listed in the module docstring (``args``: ``TrainDdpOptions`` or its
    flags); returns a JSON-ready dict."""
    import yaml

    from vlnverse.core.errors import ConfigError
    from vlnverse.benchmarks.train.options import options_from_args
    from vlnverse.learn.agent import require_torch

    require_torch("vlnverse bench train --nproc", field=None)
    options = options_from_args(TrainDdpOptions, args)
    nproc = options.nproc
    if nproc < 2:
        raise ConfigError(f"got {nproc}", field="--nproc", expected="an integer >= 2 (1 rank is always measured)")
    budget = float(options.budget)
    if budget <= 0:
        raise ConfigError(f"got {budget:g}", field="--budget", expected="a positive number of seconds")
    from vlnverse.benchmarks.train.data import _dataset
    from vlnverse.benchmarks.train.recipe import SENSORS, policy_row
    from vlnverse.learn.distributed import launch
    from vlnverse.tasks.episode import save_episodes

    work = Path(options.out).with_suffix("") if options.out else Path(tempfile.mkdtemp(prefix="vlnverse-bench-ddp-"))
    load_start = os.getloadavg()
    t0 = time.perf_counter()
    episodes = [e for e in _dataset("fine_grained", DDP_SCENE, DDP_EPISODES, options.seed, work / "data_ddp", 0.0)]
    save_episodes(work / "train.jsonl", episodes)
    cfg = {"policy": {"name": "cma", "params": policy_row("cma")["params"]}, "task": "fine_grained", "train": str(work / "train.jsonl"),
           "collision_mode": "telhop", "sensors": SENSORS, "threads": 1, "device": "auto", "seed": options.seed,
           "il": {"epochs": 100000, "batch_size": DDP_BATCH, "lr": 0.002, "max_seconds": budget, "checkpoint_every": 10 ** 6},
           "validation": {"every": 10 ** 6}, "cache": {"dir": str(work / "cache")}, "out": str(work / "runs" / "prepare")}
    cache = _prepare_cache(cfg)  # built once, before the launches (its log line on stderr: stdout is the JSON)
    t_prepared = time.perf_counter()
    rows = []
    for ranks in (1, nproc):
        out = work / "runs" / f"ranks{ranks}"
        shutil.rmtree(out, ignore_errors=True)
        path = work / f"train_ranks{ranks}.yaml"
        path.write_text(yaml.safe_dump({**cfg, "out": str(out)}))
        start = time.perf_counter()
        launch(ranks, ["-m", "vlnverse", "train", str(path), "--no-progress"], log_dir=work / "logs" / f"ranks{ranks}")
        wall = time.perf_counter() - start
        summary = json.loads((out / "summary.json").read_text())
        il = summary["il"]
        rows.append({"ranks": ranks, "samples_per_s": il["samples_per_s"], "samples": il["samples"],
                     "train_seconds": il["seconds"], "wall_s": round(wall, 1), "world_size": summary["world_size"],
                     "effective_batch": summary["effective_batch"], "device": summary["device"]})
    one, many = rows[0]["samples_per_s"], rows[1]["samples_per_s"]
    return {"nproc": nproc, "rows": rows, "speedup": round(many / one, 2) if one and many else None,
            "cpu_count": os.cpu_count(), "torch_threads_per_rank": 1, "budget_s_per_row": budget,
            "episodes": len(episodes), "scene": DDP_SCENE, "cache": cache,
            "load_average_1m": {"start": round(load_start[0], 2), "end": round(os.getloadavg()[0], 2)},
            "seconds": {"prepare": round(t_prepared - t0, 1), "total": round(time.perf_counter() - t0, 1)},
            "machine_note": "samples/s: teacher steps of the whole batch per second of rank 0's training; "
                            "N ranks share this machine's cores with each other and with any other load",
            "work_dir": str(work)}


def _prepare_cache(cfg: dict) -> dict:
    """The observation cache of the config's episodes, built in this process."""
    from vlnverse.core.config import from_dict
    from vlnverse.run.setup import EpisodeSource
    from vlnverse.learn.cache import teacher_cache
    from vlnverse.learn.config import TrainConfig
    from vlnverse.learn.splits import resolve_split
    from vlnverse.learn.trainer import Trainer

    config = from_dict(TrainConfig, cfg)
    trainer = Trainer(config, progress=False)
    train = resolve_split(EpisodeSource(path=cfg["train"]), split=None, task_type=trainer.settings.task_type,
                          task=config.task, body=None, cache_dir=config.cache.dir, field="train", progress=False)
    _, stats = teacher_cache(train, sensors=trainer.sensor_specs, settings=trainer.settings, collision_mode="telhop",
                             base_dir=config.cache.dir, render=config.cache.render, progress=False,
                             report=lambda line: print(line, file=sys.stderr))
    return {k: stats.get(k) for k in ("status", "frames", "episodes", "frames_per_s")}
