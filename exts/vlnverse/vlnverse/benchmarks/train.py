"""``vlnverse bench train``: CMA trained by imitation, then one DAgger round, on a generated
fine-grained split of the shipped train scenes, within a fixed CPU budget (``--budget`` seconds,
default 1200 = 20 minutes; the phases get fixed shares of it).

Steps: generate ``fine_grained`` episodes on the ``train`` scenes (train + val_seen) and the
``val_unseen`` scenes (``--seed``); render the teacher observation cache (RGB-D 64x64, Tel-Hop);
IL for ~45% of the budget; one DAgger round (β = 0.75) on a subset of the training episodes with
~15% of the budget for retraining; evaluate random, forward-only, IL-only and IL + DAgger on
val_seen and val_unseen through the eval runner (Tel-Hop).

Figures: ``cache_frames_per_s``, ``train_samples_per_s``, ``dagger_env_steps_per_s`` and, per agent
and split, SR / SPL / nDTW. Sizes (episodes, frames, seconds actually spent) are reported too.
Measurements on a shared machine vary with its load.
"""
from __future__ import annotations

import time
from pathlib import Path

DEFAULT_BUDGET = 1200.0
SENSORS = [{"name": "rgb", "kind": "rgb", "width": 64, "height": 64},
           {"name": "depth", "kind": "depth", "width": 64, "height": 64}]


def run(args) -> dict:
    """Measure the figures listed in the module docstring; returns a JSON-ready dict."""
    import tempfile

    from vlnverse.core.config import from_dict
    from vlnverse.eval.config import EpisodeSource, EvalConfig, NamedSpec, ReportConfig, SensorConfig
    from vlnverse.eval.runner import run_eval
    from vlnverse.learn.agent import require_torch
    from vlnverse.learn.config import TrainConfig

    require_torch()
    from vlnverse.learn.trainer import run_training

    budget = float(getattr(args, "budget", None) or DEFAULT_BUDGET)
    per_scene = max(3, int(budget / 100))
    work = Path(args.out).with_suffix("") if args.out else Path(tempfile.mkdtemp(prefix="vlnverse-bench-train-"))
    t_start = time.perf_counter()
    import shutil

    for stale in ("cache/obs", "il", "dagger", "eval"):  # measure a fresh cache and run (generated episodes are reused)
        shutil.rmtree(work / stale, ignore_errors=True)
    base = {"policy": {"name": "cma", "params": {"hidden_size": 128}}, "task": "fine_grained",
            "train": {"generate": {"scenes": "train", "episodes_per_scene": per_scene, "seed": args.seed}},
            "train_split": "train", "collision_mode": "telhop", "sensors": SENSORS, "threads": 1,
            "il": {"epochs": 1000, "batch_size": 4, "lr": 0.001, "max_seconds": 0.45 * budget},
            "validation": {"metric": "accuracy"}, "device": "cpu", "seed": args.seed,
            "cache": {"dir": str(work / "cache")}, "out": str(work / "il")}
    il = run_training(from_dict(TrainConfig, base), progress=True)
    ckpt = str(work / "il" / "last.pt")
    n_train = il["il"]["episodes"]
    dagger_cfg = {**base, "mode": "dagger", "init": ckpt, "out": str(work / "dagger"),
                  "il": {**base["il"], "max_seconds": 0.15 * budget},
                  "dagger": {"rounds": 1, "p": 0.75, "epochs": 1000, "episodes": max(2, n_train // 8)}}
    dagger = run_training(from_dict(TrainConfig, dagger_cfg), progress=True)
    (round_info,) = dagger["dagger"]

    val_unseen = {"generate": {"scenes": "val_unseen", "episodes_per_scene": max(2, per_scene // 2), "seed": args.seed + 1}}
    from vlnverse.learn.trainer import resolve_split

    splits = {}
    for name, source, split in (("val_seen", base["train"], "val_seen"), ("val_unseen", val_unseen, "val_unseen")):
        from vlnverse.learn.config import episode_source
        from vlnverse.tasks.episode import save_episodes

        eps = resolve_split(episode_source(source, name), split=split, task_type="fine_grained", task="fine_grained",
                            body=None, cache_dir=work / "cache", field=name, progress=False)
        eps = eps[:max(4, min(20, int(budget / 120)))]  # the eval share of the budget
        save_episodes(work / f"{name}.jsonl", eps)
        splits[name] = len(eps)
    agents = {"random": NamedSpec("random"), "forward": NamedSpec("forward"),
              "il": NamedSpec("policy", {"checkpoint": ckpt}),
              "il_dagger": NamedSpec("policy", {"checkpoint": str(work / "dagger" / "last.pt")})}
    results: dict = {}
    for agent_name, spec in agents.items():
        for split in splits:
            cfg = EvalConfig(agent=spec, task="fine_grained", episodes=EpisodeSource(path=str(work / f"{split}.jsonl")),
                             collision_mode="telhop", sensors=[from_dict(SensorConfig, s) for s in SENSORS],
                             seed=args.seed, out=str(work / "eval" / agent_name / split), report=ReportConfig(enabled=False))
            cfg.validate()
            means = run_eval(cfg, progress=True, print_summary=False)["overall"]["means"]
            results.setdefault(split, {})[agent_name] = {k: round(float(means[k] or 0.0), 4) for k in ("SR", "SPL", "nDTW")}
    cache = il["cache"]
    return {
        "budget_s": budget, "seconds_total": round(time.perf_counter() - t_start, 1),
        "machine_note": "2 shared CPU cores, torch 1 thread; figures vary with the machine's load",
        "policy": "cma (hidden 128, small CNN encoders from scratch), RGB-D 64x64, Tel-Hop",
        "episodes": {"train": n_train, **splits, "dagger_round": round_info["collected_episodes"]},
        "cache_frames_per_s": cache.get("frames_per_s"), "cache_frames": cache["frames"], "cache_status": cache["status"],
        "cache_mb": round(cache["bytes"] / 1e6, 2),
        "train_samples_per_s": il["il"]["samples_per_s"], "il_train_samples": il["il"]["samples"],
        "il_train_accuracy": il["il"]["accuracy"],
        "dagger_env_steps_per_s": round_info["env_steps_per_s"], "dagger_beta": round_info["beta"],
        "dagger_aggregated_steps": round_info["aggregated_steps"],
        "results": results, "work_dir": str(work),
    }
