"""``vlnverse bench train``: CMA trained by imitation, then one DAgger round, on a generated
fine-grained split of the shipped train scenes, within a fixed CPU budget (``--budget`` seconds,
default 1200 = 20 minutes for the training phases; the phases get fixed shares of it).

Steps:
1. Generate ``fine_grained`` episodes on the 6 ``train`` scenes (``--seed``) with a quarter of them
   held out as ``val_seen`` (the task layer's ``val_seen_fraction``: same scenes, disjoint
   episodes), and episodes on the ``val_unseen`` scenes (``--seed`` + 1). Reused across runs.
2. Render the teacher observation cache (RGB-D 32x32, Tel-Hop) -- low resolution keeps a CPU
   epoch short; torch runs on 1 thread (fastest on a loaded shared machine).
3. IL (inflection-weighted cross-entropy, Adam 2e-3, batches of 16 episodes) for 50% of the budget, validating on a few
   val_seen episodes every few epochs for the learning curve only: the checkpoint evaluated is
   the last one, not one selected on val_seen.
4. One DAgger round: β = 0.5 (p = 0.5; a single round in the budget, so the learner drives half of
   the steps) on a quarter of the training episodes, then retraining on teacher data + aggregate
   (Adam 5e-4) for 10% of the budget.
5. Evaluate random, forward-only, IL-only and IL + DAgger on all of val_seen and val_unseen
   through the eval runner (Tel-Hop, the task's success distance and step limit).

6. VLN-BERT (``vlnbert_rows``): a candidate waypoint predictor trained on panoramas of the train
   scenes, then VLN-BERT with the same IL share of the budget, splits and Tel-Hop, then one
   online fine-tuning round (schedule sampling, β = 0.5, same share and episodes as CMA's DAgger);
   rows ``vlnbert`` (before online fine-tuning) and ``vlnbert_online`` (after), as the paper's
   Table 7 on our scenes.

Figures: ``cache_frames_per_s``, ``train_samples_per_s``, ``dagger_env_steps_per_s``, per agent
and split SR / SPL / nDTW, the IL training curve (loss, accuracy per epoch; val_seen SR per
validation), sizes and seconds spent, and the machine's load average (a shared machine: the
figures vary with it). With ``--out FILE.json`` a PNG of the training curve is written beside it
(``FILE.png``); the work folder is ``FILE`` without the suffix.
"""
from __future__ import annotations

import csv
import os
import time
from pathlib import Path

DEFAULT_BUDGET = 1200.0
RESOLUTION = 32
SENSORS = [{"name": "rgb", "kind": "rgb", "width": RESOLUTION, "height": RESOLUTION},
           {"name": "depth", "kind": "depth", "width": RESOLUTION, "height": RESOLUTION}]
VAL_SEEN_FRACTION = 0.25
TRAIN_SCENE_EPISODES = 20      # per train scene at the default budget (6 scenes: ~90 train, ~30 val_seen)
VAL_UNSEEN_EPISODES = 6        # per val_unseen scene
#: CMA sized for a CPU budget: small from-scratch encoders, batches of 16 episodes (the recurrent
#: step loop costs the same for 1 or 16 episodes, so big batches buy samples/s)
ENCODER = {"type": "cnn", "channels": 16, "out_dim": 64}
POLICY_PARAMS = {"hidden_size": 128, "instruction_encoder": {"embedding_size": 32, "hidden_size": 64},
                 "rgb_encoder": ENCODER, "depth_encoder": ENCODER}


def _dataset(task: str, scenes: str, per_scene: int, seed: int, out: Path, val_seen_fraction: float) -> list:
    """Episodes generated once into ``out`` (reused when its ``done`` marker exists)."""
    from vlnverse.core.io import write_json_atomic
    from vlnverse.tasks.dataset import generate_dataset, resolve_scene_paths, simulator_renderer_factory
    from vlnverse.tasks.episode import load_episodes

    key = {"task": task, "scenes": scenes, "n": per_scene, "seed": seed, "val_seen_fraction": val_seen_fraction}
    marker = out / "done.json"
    if marker.is_file() and __import__("json").loads(marker.read_text()) == key:
        return load_episodes(out / "episodes")
    generate_dataset(task, resolve_scene_paths(scenes), per_scene, seed, out / "episodes", progress=True,
                     val_seen_fraction=val_seen_fraction, renderer_factory=simulator_renderer_factory())
    write_json_atomic(marker, key)
    return load_episodes(out / "episodes")


def training_curve(log_path: Path) -> dict:
    """Per-epoch IL loss / accuracy and per-validation val_seen SR from a run's ``train_log.csv``."""
    epochs, val = [], []
    with open(log_path, newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            if row["phase"] == "il" and row["loss"]:
                epochs.append({"epoch": int(row["epoch"]), "loss": round(float(row["loss"]), 4),
                               "accuracy": round(float(row["accuracy"]), 4)})
            elif row["phase"] == "val" and row["val_SR"] != "":
                val.append({"after_epoch": epochs[-1]["epoch"] if epochs else 0, "split": row["val_split"],
                            "SR": round(float(row["val_SR"]), 4), "SPL": round(float(row["val_SPL"] or 0), 4)})
    return {"il_epochs": epochs, "validation": val}


def plot_curve(curve: dict, results: dict, path: Path) -> None:
    """PNG: IL loss and accuracy per epoch, val_seen SR per validation, final SR per agent and split."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    ep = [e["epoch"] for e in curve["il_epochs"]]
    axes[0].plot(ep, [e["loss"] for e in curve["il_epochs"]], label="loss")
    axes[0].set(title="IL training loss (inflection-weighted CE)", xlabel="epoch")
    axes[1].plot(ep, [e["accuracy"] for e in curve["il_epochs"]], label="train teacher-action accuracy")
    if curve["validation"]:
        axes[1].plot([v["after_epoch"] for v in curve["validation"]], [v["SR"] for v in curve["validation"]], "o-",
                     label="val_seen SR (subset)")
    axes[1].set(title="IL accuracy and validation SR", xlabel="epoch", ylim=(0, 1))
    axes[1].legend()
    agents = list(next(iter(results.values())))
    width = 0.8 / len(results)
    for i, (split, per_agent) in enumerate(results.items()):
        axes[2].bar([j + i * width for j in range(len(agents))], [per_agent[a]["SR"] for a in agents], width, label=split)
    axes[2].set_xticks([j + 0.4 - width / 2 for j in range(len(agents))], agents)
    axes[2].set(title="SR per agent (Tel-Hop)", ylim=(0, 1))
    axes[2].legend()
    fig.tight_layout()
    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp, dpi=90)
    plt.close(fig)
    os.replace(tmp, path)


def run(args) -> dict:
    """Measure the figures listed in the module docstring; returns a JSON-ready dict."""
    import shutil
    import tempfile

    from vlnverse.core.config import from_dict
    from vlnverse.eval.config import EpisodeSource, EvalConfig, NamedSpec, ReportConfig, SensorConfig
    from vlnverse.eval.runner import run_eval
    from vlnverse.learn.agent import require_torch
    from vlnverse.learn.config import TrainConfig
    from vlnverse.tasks.episode import save_episodes

    require_torch()
    from vlnverse.learn.trainer import run_training

    budget = float(getattr(args, "budget", None) or DEFAULT_BUDGET)
    scale = min(1.0, budget / DEFAULT_BUDGET)
    work = Path(args.out).with_suffix("") if args.out else Path(tempfile.mkdtemp(prefix="vlnverse-bench-train-"))
    load_start = os.getloadavg()
    t_start = time.perf_counter()
    for stale in ("cache/obs", "il", "dagger", "eval"):  # measure a fresh cache and run (generated episodes are reused)
        shutil.rmtree(work / stale, ignore_errors=True)
    seen = _dataset("fine_grained", "train", max(8, round(TRAIN_SCENE_EPISODES * scale)), args.seed, work / "data_train",
                    VAL_SEEN_FRACTION)
    unseen = _dataset("fine_grained", "val_unseen", max(3, round(VAL_UNSEEN_EPISODES * scale)), args.seed + 1,
                      work / "data_val_unseen", 0.0)
    split_eps = {"train": [e for e in seen if e.split == "train"], "val_seen": [e for e in seen if e.split == "val_seen"],
                 "val_unseen": [e for e in unseen if e.split == "val_unseen"]}
    train_ids = {e.episode_id for e in split_eps["train"]}
    assert not train_ids & {e.episode_id for e in split_eps["val_seen"]}, "val_seen must be disjoint from train"
    for name, eps in split_eps.items():
        save_episodes(work / f"{name}.jsonl", eps)
    t_generated = time.perf_counter()

    il_seconds = 0.50 * budget
    base = {"policy": {"name": "cma", "params": POLICY_PARAMS}, "task": "fine_grained",
            "train": str(work / "train.jsonl"), "val": {"val_seen": str(work / "val_seen.jsonl")},
            "collision_mode": "telhop", "sensors": SENSORS, "threads": 1,
            "il": {"epochs": 1000, "batch_size": 16, "lr": 0.002, "inflection_weight": "auto", "max_seconds": il_seconds},
            # the curve's validation: a fixed val_seen subset; selection by training accuracy, and the
            # evaluated checkpoint is last.pt, so val_seen results are not selected on val_seen
            "validation": {"metric": "accuracy", "every": 4, "limit": 6, "split": "val_seen"},
            "device": "cpu", "seed": args.seed, "cache": {"dir": str(work / "cache")}, "out": str(work / "il")}
    il = run_training(from_dict(TrainConfig, base), progress=True)
    ckpt = str(work / "il" / "last.pt")
    n_train = il["il"]["episodes"]
    dagger_cfg = {**base, "mode": "dagger", "init": ckpt, "out": str(work / "dagger"), "val": {},
                  "validation": {"metric": "accuracy"},
                  "il": {**base["il"], "lr": 0.0005, "max_seconds": 0.10 * budget},
                  "dagger": {"rounds": 1, "p": 0.5, "epochs": 1000, "episodes": max(2, n_train // 4)}}
    dagger = run_training(from_dict(TrainConfig, dagger_cfg), progress=True)
    (round_info,) = dagger["dagger"]
    t_trained = time.perf_counter()

    agents = {"random": NamedSpec("random"), "forward": NamedSpec("forward"),
              "il": NamedSpec("policy", {"checkpoint": ckpt}),
              "il_dagger": NamedSpec("policy", {"checkpoint": str(work / "dagger" / "last.pt")})}
    results: dict = {}
    for split in ("val_seen", "val_unseen"):
        for agent_name, spec in agents.items():
            cfg = EvalConfig(agent=spec, task="fine_grained", episodes=EpisodeSource(path=str(work / f"{split}.jsonl")),
                             collision_mode="telhop", sensors=[from_dict(SensorConfig, s) for s in SENSORS],
                             seed=args.seed, out=str(work / "eval" / agent_name / split), report=ReportConfig(enabled=False))
            cfg.validate()
            means = run_eval(cfg, progress=True, print_summary=False)["overall"]["means"]
            results.setdefault(split, {})[agent_name] = {k: round(float(means[k] or 0.0), 4) for k in ("SR", "SPL", "nDTW")}
    vlnbert = vlnbert_rows(work, base, budget, scale, args.seed, max(2, n_train // 4))
    for split, rows in vlnbert.pop("results").items():
        results[split].update(rows)
    curve = training_curve(work / "il" / "train_log.csv")
    seen_sr = results["val_seen"]
    best_baseline = max(seen_sr["random"]["SR"], seen_sr["forward"]["SR"])
    cache = il["cache"]
    figures = {
        "budget_s": budget, "seconds_total": round(time.perf_counter() - t_start, 1),
        "seconds": {"generate": round(t_generated - t_start, 1), "train": round(t_trained - t_generated, 1),
                    "eval": round(time.perf_counter() - t_trained, 1)},
        "machine_note": "2 CPU cores shared with other sessions, torch 1 thread; figures vary with the machine's load",
        "load_average_1m": {"start": round(load_start[0], 2), "end": round(os.getloadavg()[0], 2)},
        "policy": {"name": "cma", "params": POLICY_PARAMS, "sensors": f"RGB-D {RESOLUTION}x{RESOLUTION}", "mode": "telhop"},
        "episodes": {**{k: len(v) for k, v in split_eps.items()}, "dagger_round": round_info["collected_episodes"]},
        "cache_frames_per_s": cache.get("frames_per_s"), "cache_frames": cache["frames"], "cache_status": cache["status"],
        "cache_mb": round(cache["bytes"] / 1e6, 2),
        "train_samples_per_s": il["il"]["samples_per_s"], "il_train_samples": il["il"]["samples"],
        "il_epochs": len(curve["il_epochs"]), "il_inflection_weight": round(il["il"]["inflection_weight"], 3),
        "il_train_accuracy": round(il["il"]["accuracy"], 4) if il["il"]["accuracy"] is not None else None,
        "dagger_env_steps_per_s": round_info["env_steps_per_s"], "dagger_beta": round_info["beta"],
        "dagger_aggregated_steps": round_info["aggregated_steps"], "dagger_train_accuracy": round_info["train_accuracy"],
        "results": results,
        "learned_beats_baselines_val_seen": {a: seen_sr[a]["SR"] > best_baseline for a in ("il", "il_dagger")},
        "curve": curve, "work_dir": str(work), "vlnbert": vlnbert,
    }
    if args.out:
        figures["plot"] = str(Path(args.out).with_suffix(".png"))
        plot_curve(curve, results, Path(figures["plot"]))
    return figures


#: VLN-BERT sized for the CPU budget (the predictor's panorama: 12 depth views of 16x16)
VLNBERT_PARAMS = {"hidden_size": 64, "layers": 2, "heads": 4}


def vlnbert_rows(work: Path, base: dict, budget: float, scale: float, seed: int, dagger_episodes: int) -> dict:
    """Train the waypoint predictor, VLN-BERT by IL (the CMA run's IL share of the budget, same
    splits, sensors and Tel-Hop) and one online fine-tuning round (β = 0.5, as CMA's DAgger);
    evaluate both on val_seen / val_unseen. Returns ``{"results": {split: {"vlnbert", "vlnbert_online"}}, ...}``."""
    from vlnverse.core.config import from_dict
    from vlnverse.eval.config import EpisodeSource, EvalConfig, NamedSpec, ReportConfig, SensorConfig
    from vlnverse.eval.runner import run_eval
    from vlnverse.learn.config import TrainConfig
    from vlnverse.learn.trainer import run_training
    from vlnverse.learn.waypoints import WaypointTrainConfig, run_waypoint_training

    import shutil

    for stale in ("waypoints", "vlnbert_il", "vlnbert_online"):  # a fresh run each time (the runs would resume)
        shutil.rmtree(work / stale, ignore_errors=True)
    t0 = time.perf_counter()
    wp = run_waypoint_training(WaypointTrainConfig(poses_per_scene=max(30, round(150 * scale)),
                                                   val_poses_per_scene=max(10, round(60 * scale)), seed=seed),
                               work / "waypoints")
    t_wp = time.perf_counter()
    params = {**VLNBERT_PARAMS, "waypoint_predictor": str(work / "waypoints" / "predictor.pt")}
    il_cfg = {**base, "policy": {"name": "vlnbert", "params": params}, "out": str(work / "vlnbert_il"),
              "il": {**base["il"], "lr": 0.001, "batch_size": 8}}
    il = run_training(from_dict(TrainConfig, il_cfg), progress=True)
    online_cfg = {**il_cfg, "mode": "dagger", "init": str(work / "vlnbert_il" / "last.pt"), "out": str(work / "vlnbert_online"),
                  "val": {}, "validation": {"metric": "accuracy"},
                  "il": {**il_cfg["il"], "lr": 0.0005, "max_seconds": 0.10 * budget},
                  "dagger": {"rounds": 1, "p": 0.5, "epochs": 1000, "episodes": dagger_episodes}}
    online = run_training(from_dict(TrainConfig, online_cfg), progress=True)
    (round_info,) = online["dagger"]
    t_trained = time.perf_counter()
    results: dict = {}
    for split in ("val_seen", "val_unseen"):
        for name, ckpt in (("vlnbert", work / "vlnbert_il" / "last.pt"), ("vlnbert_online", work / "vlnbert_online" / "last.pt")):
            cfg = EvalConfig(agent=NamedSpec("policy", {"checkpoint": str(ckpt)}), task="fine_grained",
                             episodes=EpisodeSource(path=str(work / f"{split}.jsonl")), collision_mode="telhop",
                             sensors=[from_dict(SensorConfig, s) for s in base["sensors"]], seed=seed,
                             out=str(work / "eval" / name / split), report=ReportConfig(enabled=False))
            cfg.validate()
            means = run_eval(cfg, progress=True, print_summary=False)["overall"]["means"]
            results.setdefault(split, {})[name] = {k: round(float(means[k] or 0.0), 4) for k in ("SR", "SPL", "nDTW")}
    held = wp["held_out"]["predicted"]
    return {"results": results, "params": VLNBERT_PARAMS,
            "waypoint_predictor": {"held_out": held, "train_poses": wp["train_poses"], "seconds": round(t_wp - t0, 1)},
            "il_epochs": len([c for c in training_curve(work / "vlnbert_il" / "train_log.csv")["il_epochs"]]),
            "il_train_accuracy": il["il"]["accuracy"], "il_train_samples_per_s": il["il"]["samples_per_s"],
            "cache_frames_per_s": il["cache"].get("frames_per_s"), "cache_teacher_SR": il["cache"].get("teacher_SR"),
            "online_round": {"beta": round_info["beta"], "collected_steps": round_info["collected_steps"],
                             "env_steps_per_s": round_info["env_steps_per_s"], "train_accuracy": round_info["train_accuracy"]},
            "seconds": {"waypoints": round(t_wp - t0, 1), "train": round(t_trained - t_wp, 1),
                        "eval": round(time.perf_counter() - t_trained, 1)}}
