"""One row of ``bench train`` for one training seed: IL then one DAgger round (``train_row``), with
the shared artefacts rows may need (the waypoint predictor, the pretrained visual encoder) and
the learning curve of its training log."""
from __future__ import annotations

import csv
import time
from pathlib import Path
from typing import Any

import vlnverse.benchmarks.train.recipe as R

def train_waypoint_predictor(work: Path, scale: float, seed: int, body: str = "r2r_ce", folder: str = "waypoints",
                             render: Any = None, epochs: int | None = None) -> dict:
    """The candidate waypoint predictor trained afresh on ``body``'s RGB-D panoramas of the train
    scenes (``learn.waypoints.train.recipe_config``: 150 poses per scene at the default budget,
    drawn with ``render``: a ``RenderConfig``, None the defaults; ``epochs``: None for the recipe's)
    into ``work/folder``; returns its file, training epochs, held-out metrics and seconds. The
    waypoint rows' navigators read its view features, so they see RGB-D through it."""
    import shutil

    from vlnverse.learn.waypoints.train import recipe_config, run_waypoint_training

    shutil.rmtree(work / folder, ignore_errors=True)  # a fresh run (it would resume)
    t0 = time.perf_counter()
    cfg = recipe_config(seed, scale=scale, body=body, render=render, epochs=epochs)
    wp = run_waypoint_training(cfg, work / folder)
    return {"path": str(work / folder / "predictor.pt"), "epochs": cfg.epochs, "held_out": wp["held_out"]["predicted"],
            "train_poses": wp["train_poses"], "seconds": round(time.perf_counter() - t0, 1)}


def pretrain_encoder(work: Path, train_episodes: list, seed: int) -> dict:
    """The rows' shared visual encoder: the recipe's (``learn.encoder.pretrain_on_homes``),
    pretrained on renders of the training homes at the rows' resolution into ``work/encoder``."""
    from vlnverse.learn.encoder.pretraining import pretrain_on_homes

    return pretrain_on_homes([e.scene_path for e in train_episodes], image_size=R.RESOLUTION, seed=seed,
                             out=work / "encoder")


def _train(cfg: dict, budget: float, share: float) -> dict:
    """``run_training``; a budget too small for one epoch is a ``ConfigError`` naming ``--budget``."""
    import math

    from vlnverse.core.config import from_dict
    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.config import TrainConfig
    from vlnverse.learn.errors import BudgetTooSmallError
    from vlnverse.learn.trainer import run_training

    try:
        return run_training(from_dict(TrainConfig, cfg), progress=True)
    except BudgetTooSmallError as exc:
        need = math.ceil(exc.minimum_seconds / share)
        raise ConfigError(f"{budget:g} s per row leaves {share * budget:.0f} s for {exc.phase}, which does not finish one "
                          f"epoch (about {exc.minimum_seconds:.0f} s here)", field="--budget",
                          expected=f"at least {need} s") from None


def train_row(row: dict, work: Path, budget: float | None, seed: int, scale: float = 1.0, device: str = "auto",
              workers: int = 1, dagger: bool = True, encoder: str | None = None, epochs: int = R.IL_EPOCHS,
              predictor: dict | None = None, tasks: list[dict] | None = None,
              validation_episodes: int = R.VALIDATION_EPISODES, language: str = "v1", task: str = "fine_grained") -> dict:
    """IL then (``dagger``) one DAgger round of one row (``recipe.policy_rows``), each selected on
    ``validation_episodes`` val_seen episodes; returns its checkpoints and figures. ``encoder``: a
    pretrained encoder file replacing the rows' RGB and depth encoders (frozen); ``predictor``: the waypoint rows' shared predictor (``train_waypoint_predictor``;
    trained here when not given); ``tasks``: a multi-task run's ``TrainConfig.tasks`` entries in
    place of the rows' fine-grained ``train`` / ``val`` (``recipe.multitask_entries``); ``language``: the
    wording of the work folder's episodes (``--language``; the multi-task row keeps ``v1``); ``task``: their
    task (``--task``)."""
    name = row["name"]
    params = dict(row["params"])
    if encoder is not None and "rgb_encoder" in params:
        params["rgb_encoder"] = params["depth_encoder"] = {"type": "pretrained", "path": encoder, "frozen": True}
    if not row.get("waypoint_predictor"):
        predictor = None
    elif predictor is None:
        predictor = train_waypoint_predictor(work, scale, seed)
    if predictor is not None:
        params["waypoint_predictor"] = predictor["path"]
    t0 = time.perf_counter()
    base = R.row_config(row, work, budget, seed, device, workers, params, epochs, validation_episodes,
                        "v1" if tasks else language, task)
    if tasks:
        for key in ("task", "train", "val"):
            base.pop(key)
        base["tasks"] = tasks
    il = _train(base, budget, 0.50)
    il_dir = work / "il" / name
    ckpt = str(il_dir / "best.pt" if (il_dir / "best.pt").is_file() else il_dir / "last.pt")
    n_train = il["il"]["episodes"]
    round_info: dict = {}
    if dagger:
        dagger_cfg = R.dagger_config(base, name, work, ckpt, budget, epochs, validation_episodes, n_train)
        (round_info,) = _train(dagger_cfg, budget, 0.10)["dagger"]
    curve = training_curve(il_dir / "train_log.csv")
    cache = il["cache"]
    per_task = cache.get("tasks")
    if per_task:  # one teacher cache per task: their totals
        cache = {"frames": sum(c["frames"] for c in per_task.values()), "bytes": sum(c["bytes"] for c in per_task.values()),
                 "status": {n: c["status"] for n, c in per_task.items()},
                 "render": {n: c.get("render") for n, c in per_task.items()},
                 "teacher_SR": {n: c.get("teacher_SR") for n, c in per_task.items()}}
    figures = {
        "policy": row["policy"], "params": params, "lr": row["lr"], "seconds_train": round(time.perf_counter() - t0, 1),
        "device": il["device"], "threads": 1,
        "cache_frames_per_s": cache.get("frames_per_s"), "cache_frames": cache["frames"], "cache_status": cache["status"],
        "cache_render": cache.get("render"), "cache_mb": round(cache["bytes"] / 1e6, 2),
        "train_samples_per_s": il["il"]["samples_per_s"], "il_train_samples": il["il"]["samples"],
        "samples_per_s": {"il": il["il"]["samples_per_s"], "dagger": round_info.get("train_samples_per_s")},
        "il_batching": il["il"].get("batching"), "device_info": il.get("device_info"),
        "il_epochs": len(curve["il_epochs"]), "il_inflection_weight": None if il["il"]["inflection_weight"] is None else round(il["il"]["inflection_weight"], 3),
        "il_train_accuracy": round(il["il"]["accuracy"], 4) if il["il"]["accuracy"] is not None else None,
        "il_selected": il.get("best"), "il_checkpoint": Path(ckpt).name,
        "dagger_episodes": round_info.get("collected_episodes"), "dagger_env_steps_per_s": round_info.get("env_steps_per_s"),
        "dagger_beta": round_info.get("beta"), "dagger_aggregated_steps": round_info.get("aggregated_steps"),
        "dagger_train_accuracy": round_info.get("train_accuracy"),
    }
    if per_task:
        figures["tasks_train_episodes"] = il.get("tasks_train_episodes")
        figures["cache_frames_per_s"] = {n: c.get("frames_per_s") for n, c in per_task.items()}
    if predictor is not None:
        figures["waypoint_predictor"] = {k: predictor[k] for k in ("epochs", "held_out", "train_poses", "seconds")
                                         if k in predictor}
        figures["cache_teacher_SR"] = cache.get("teacher_SR")
    checkpoints = {f"{name}_il": ckpt}
    if dagger:
        checkpoints[f"{name}_il_dagger"] = str(work / "dagger" / name / "last.pt")
    return {"checkpoints": checkpoints, "figures": figures, "curve": curve}


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
                            "SR": round(float(row["val_SR"]), 4), "SPL": round(float(row["val_SPL"] or 0), 4),
                            "nDTW": round(float(row["val_nDTW"] or 0), 4)})
    return {"il_epochs": epochs, "validation": val}
