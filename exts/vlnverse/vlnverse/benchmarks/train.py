"""``vlnverse bench train``: each policy of ``POLICY_ROWS`` (CMA, RDP, VLN-BERT) trained by
imitation, then one DAgger round (VLN-BERT: one online fine-tuning round), on a generated fine-grained split of the shipped train scenes, each within the
same fixed CPU budget (``--budget`` seconds per policy, default 1200 = 20 minutes for its training
phases; the phases get fixed shares of it) and evaluated on the same splits.

Steps:
1. Generate ``fine_grained`` episodes on the 6 ``train`` scenes (``--seed``) with a quarter of them
   held out as ``val_seen`` (the task layer's ``val_seen_fraction``: same scenes, disjoint
   episodes), and episodes on the ``val_unseen`` scenes (``--seed`` + 1). Reused across runs.
2. Per policy row: render its teacher observation cache (RGB-D 32x32, Tel-Hop; RDP's continuous
   teacher labels its own cache; VLN-BERT first gets a waypoint predictor trained on panoramas of
   the train scenes, outside the budget, and its oracle teacher labels candidates) -- low resolution keeps a CPU epoch short; torch runs on 1 thread
   (fastest on a loaded shared machine).
3. IL (the policy's imitation loss, Adam at the row's rate and batch size) for 50% of the
   budget, validating on a few val_seen episodes every few epochs for the learning curve only:
   the checkpoint evaluated is the last one, not one selected on val_seen.
4. One DAgger round: β = 0.5 (p = 0.5; a single round in the budget, so the learner drives half of
   the steps) on a quarter of the training episodes, then retraining on teacher data + aggregate
   (Adam 5e-4) for 10% of the budget.
5. Evaluate random, forward-only, and per row IL-only (``<row>_il``) and IL + DAgger
   (``<row>_il_dagger``) on all of val_seen and val_unseen through the eval runner (Tel-Hop, the
   task's success distance and step limit). ``vlnbert_il`` / ``vlnbert_il_dagger`` are VLN-BERT
   before / after online fine-tuning, as the paper's Table 7 on our scenes.

A row is one dict in ``POLICY_ROWS`` (name, policy, params, IL learning rate and batch size); ``--policies a,b``
runs a subset. Figures: per row ``cache_frames_per_s``, ``train_samples_per_s``,
``dagger_env_steps_per_s``, the IL training curve (loss, accuracy per epoch -- for RDP the accuracy
is its stop decision's; val_seen SR per validation), sizes and seconds spent; per agent and split
SR / SPL / nDTW; and the machine's load average (a shared machine: the figures vary with it). With
``--out FILE.json`` a PNG of the training curves and SR is written beside it (``FILE.png``); the
work folder is ``FILE`` without the suffix.
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
#: RDP with the same encoders; a small denoiser (horizon 4 actions of 0.5 m, 20 diffusion steps,
#: DDIM with 10 at inference, 4 noise draws per visited state)
RDP_PARAMS = {**POLICY_PARAMS, "denoiser_size": 64, "horizon": 4, "diffusion_steps": 20, "noise_samples": 4}
#: VLN-BERT sized for the CPU budget (its waypoint predictor sees 12 depth views of 16x16)
VLNBERT_PARAMS = {"hidden_size": 64, "layers": 2, "heads": 4}
#: The rows: every policy gets the same budget, splits, validation and DAgger round (for VLN-BERT
#: the DAgger round is the paper's online fine-tuning: schedule sampling between oracle and
#: prediction). A row with ``waypoint_predictor`` first trains the candidate waypoint predictor on
#: panoramas of the train scenes (outside the budget; its seconds and held-out metrics are reported).
POLICY_ROWS = [
    {"name": "cma", "policy": "cma", "params": POLICY_PARAMS, "lr": 0.002, "batch_size": 16},
    {"name": "rdp", "policy": "rdp", "params": RDP_PARAMS, "lr": 0.002, "batch_size": 16},
    {"name": "vlnbert", "policy": "vlnbert", "params": VLNBERT_PARAMS, "lr": 0.001, "batch_size": 8,
     "waypoint_predictor": True},
]


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


def plot_curve(curves: dict, results: dict, path: Path) -> None:
    """PNG: per row IL loss and accuracy per epoch and val_seen SR per validation; final SR per
    agent and split."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for name, curve in curves.items():
        ep = [e["epoch"] for e in curve["il_epochs"]]
        axes[0].plot(ep, [e["loss"] for e in curve["il_epochs"]], label=name)
        line, = axes[1].plot(ep, [e["accuracy"] for e in curve["il_epochs"]], label=f"{name} train accuracy")
        if curve["validation"]:
            axes[1].plot([v["after_epoch"] for v in curve["validation"]], [v["SR"] for v in curve["validation"]], "o--",
                         color=line.get_color(), label=f"{name} val_seen SR (subset)")
    axes[0].set(title="IL training loss (the policy's own objective)", xlabel="epoch")
    axes[0].legend()
    axes[1].set(title="IL accuracy (RDP: stop decision) and validation SR", xlabel="epoch", ylim=(0, 1))
    axes[1].legend(fontsize=7)
    agents = list(next(iter(results.values())))
    width = 0.8 / len(results)
    for i, (split, per_agent) in enumerate(results.items()):
        axes[2].bar([j + i * width for j in range(len(agents))], [per_agent[a]["SR"] for a in agents], width, label=split)
    axes[2].set_xticks([j + 0.4 - width / 2 for j in range(len(agents))], agents, rotation=30, fontsize=7)
    axes[2].set(title="SR per agent (Tel-Hop)", ylim=(0, 1))
    axes[2].legend()
    fig.tight_layout()
    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp, dpi=90)
    plt.close(fig)
    os.replace(tmp, path)


def _rows(args) -> list[dict]:
    """The ``POLICY_ROWS`` named by ``--policies`` (all when not given), in table order."""
    from vlnverse.core.errors import ConfigError

    wanted = getattr(args, "policies", None)
    if not wanted:
        return list(POLICY_ROWS)
    names = [n.strip() for n in str(wanted).split(",") if n.strip()]
    known = [r["name"] for r in POLICY_ROWS]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise ConfigError(f"unknown policy row(s) {unknown}", field="--policies", expected=f"a comma-separated subset of {known}")
    return [r for r in POLICY_ROWS if r["name"] in names]


def train_waypoint_predictor(work: Path, scale: float, seed: int) -> dict:
    """The candidate waypoint predictor trained afresh on panoramas of the train scenes (150 poses
    per scene at the default budget); returns its file, held-out metrics and seconds."""
    import shutil

    from vlnverse.learn.waypoints import WaypointTrainConfig, run_waypoint_training

    shutil.rmtree(work / "waypoints", ignore_errors=True)  # a fresh run (it would resume)
    t0 = time.perf_counter()
    wp = run_waypoint_training(WaypointTrainConfig(poses_per_scene=max(30, round(150 * scale)),
                                                   val_poses_per_scene=max(10, round(60 * scale)), seed=seed),
                               work / "waypoints")
    return {"path": str(work / "waypoints" / "predictor.pt"), "held_out": wp["held_out"]["predicted"],
            "train_poses": wp["train_poses"], "seconds": round(time.perf_counter() - t0, 1)}


def train_row(row: dict, work: Path, budget: float, seed: int, scale: float = 1.0) -> dict:
    """IL then one DAgger round of one ``POLICY_ROWS`` entry; returns its checkpoints and figures."""
    from vlnverse.core.config import from_dict
    from vlnverse.learn.config import TrainConfig
    from vlnverse.learn.trainer import run_training

    name = row["name"]
    params = dict(row["params"])
    predictor = None
    if row.get("waypoint_predictor"):
        predictor = train_waypoint_predictor(work, scale, seed)
        params["waypoint_predictor"] = predictor["path"]
    t0 = time.perf_counter()
    base = {"policy": {"name": row["policy"], "params": params}, "task": "fine_grained",
            "train": str(work / "train.jsonl"), "val": {"val_seen": str(work / "val_seen.jsonl")},
            "collision_mode": "telhop", "sensors": SENSORS, "threads": 1,
            "il": {"epochs": 1000, "batch_size": row["batch_size"], "lr": row["lr"], "inflection_weight": "auto",
                   "max_seconds": 0.50 * budget},
            # the curve's validation: a fixed val_seen subset; selection by training accuracy, and the
            # evaluated checkpoint is last.pt, so val_seen results are not selected on val_seen
            "validation": {"metric": "accuracy", "every": 4, "limit": 6, "split": "val_seen"},
            "device": "cpu", "seed": seed, "cache": {"dir": str(work / "cache")}, "out": str(work / "il" / name)}
    il = run_training(from_dict(TrainConfig, base), progress=True)
    ckpt = str(work / "il" / name / "last.pt")
    n_train = il["il"]["episodes"]
    dagger_cfg = {**base, "mode": "dagger", "init": ckpt, "out": str(work / "dagger" / name), "val": {},
                  "validation": {"metric": "accuracy"},
                  "il": {**base["il"], "lr": 0.0005, "max_seconds": 0.10 * budget},
                  "dagger": {"rounds": 1, "p": 0.5, "epochs": 1000, "episodes": max(2, n_train // 4)}}
    dagger = run_training(from_dict(TrainConfig, dagger_cfg), progress=True)
    (round_info,) = dagger["dagger"]
    curve = training_curve(work / "il" / name / "train_log.csv")
    cache = il["cache"]
    figures = {
        "policy": row["policy"], "params": row["params"], "lr": row["lr"], "seconds_train": round(time.perf_counter() - t0, 1),
        "cache_frames_per_s": cache.get("frames_per_s"), "cache_frames": cache["frames"], "cache_status": cache["status"],
        "cache_mb": round(cache["bytes"] / 1e6, 2),
        "train_samples_per_s": il["il"]["samples_per_s"], "il_train_samples": il["il"]["samples"],
        "il_epochs": len(curve["il_epochs"]), "il_inflection_weight": None if il["il"]["inflection_weight"] is None else round(il["il"]["inflection_weight"], 3),
        "il_train_accuracy": round(il["il"]["accuracy"], 4) if il["il"]["accuracy"] is not None else None,
        "dagger_episodes": round_info["collected_episodes"], "dagger_env_steps_per_s": round_info["env_steps_per_s"],
        "dagger_beta": round_info["beta"], "dagger_aggregated_steps": round_info["aggregated_steps"],
        "dagger_train_accuracy": round_info["train_accuracy"],
    }
    if predictor is not None:
        figures["waypoint_predictor"] = {k: predictor[k] for k in ("held_out", "train_poses", "seconds")}
        figures["cache_teacher_SR"] = cache.get("teacher_SR")
    return {"checkpoints": {f"{name}_il": ckpt, f"{name}_il_dagger": str(work / "dagger" / name / "last.pt")},
            "figures": figures, "curve": curve}


def run(args) -> dict:
    """Measure the figures listed in the module docstring; returns a JSON-ready dict."""
    import shutil
    import tempfile

    from vlnverse.core.config import from_dict
    from vlnverse.eval.config import EpisodeSource, EvalConfig, NamedSpec, ReportConfig, SensorConfig
    from vlnverse.eval.runner import run_eval
    from vlnverse.learn.agent import require_torch
    from vlnverse.tasks.episode import save_episodes

    require_torch("vlnverse bench train", field=None)
    selected = _rows(args)  # a bad --policies fails before any work
    budget = float(getattr(args, "budget", None) or DEFAULT_BUDGET)
    scale = min(1.0, budget / DEFAULT_BUDGET)
    work = Path(args.out).with_suffix("") if args.out else Path(tempfile.mkdtemp(prefix="vlnverse-bench-train-"))
    load_start = os.getloadavg()
    t_start = time.perf_counter()
    for stale in ("cache/obs", "il", "dagger", "eval", "waypoints"):  # measure a fresh cache and run (generated episodes are reused)
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

    rows = {row["name"]: train_row(row, work, budget, args.seed, scale) for row in selected}
    t_trained = time.perf_counter()

    agents = {"random": NamedSpec("random"), "forward": NamedSpec("forward")}
    for trained in rows.values():
        agents.update({agent: NamedSpec("policy", {"checkpoint": path}) for agent, path in trained["checkpoints"].items()})
    results: dict = {}
    for split in ("val_seen", "val_unseen"):
        for agent_name, spec in agents.items():
            cfg = EvalConfig(agent=spec, task="fine_grained", episodes=EpisodeSource(path=str(work / f"{split}.jsonl")),
                             collision_mode="telhop", sensors=[from_dict(SensorConfig, s) for s in SENSORS],
                             seed=args.seed, out=str(work / "eval" / agent_name / split), report=ReportConfig(enabled=False))
            cfg.validate()
            means = run_eval(cfg, progress=True, print_summary=False)["overall"]["means"]
            results.setdefault(split, {})[agent_name] = {k: round(float(means[k] or 0.0), 4) for k in ("SR", "SPL", "nDTW")}
    seen_sr = results["val_seen"]
    best_baseline = max(seen_sr["random"]["SR"], seen_sr["forward"]["SR"])
    figures = {
        "budget_s": budget, "budget_note": "per policy row: IL 50%, DAgger retraining 10%",
        "seconds_total": round(time.perf_counter() - t_start, 1),
        "seconds": {"generate": round(t_generated - t_start, 1), "train": round(t_trained - t_generated, 1),
                    "eval": round(time.perf_counter() - t_trained, 1)},
        "machine_note": "2 CPU cores shared with other sessions, torch 1 thread; figures vary with the machine's load",
        "load_average_1m": {"start": round(load_start[0], 2), "end": round(os.getloadavg()[0], 2)},
        "setup": {"sensors": f"RGB-D {RESOLUTION}x{RESOLUTION}", "mode": "telhop"},
        "episodes": {k: len(v) for k, v in split_eps.items()},
        "rows": {name: trained["figures"] for name, trained in rows.items()},
        "results": results,
        "learned_beats_baselines_val_seen": {a: seen_sr[a]["SR"] > best_baseline for a in agents
                                             if a not in ("random", "forward")},
        "curves": {name: trained["curve"] for name, trained in rows.items()}, "work_dir": str(work),
    }
    if args.out:
        figures["plot"] = str(Path(args.out).with_suffix(".png"))
        plot_curve(figures["curves"], results, Path(figures["plot"]))
    return figures
