"""``bench train``'s single run (without ``--seeds``): data, the render-path figure, the shared
encoder and waypoint predictor, every selected row trained and evaluated in this process, the
table and its figure (the package docstring lists the steps)."""
from __future__ import annotations

import os
import time
from pathlib import Path

import vlnverse.benchmarks.train.recipe as R
from vlnverse.tasks.episode import LANGUAGE_SPLIT

from .data import multitask_data, split_data, task_counts
from .evaluation import evaluate, evaluate_multitask
from .options import TrainBenchOptions
from .render import compare_render_paths
from .report import language_drop_lines, language_drops, pairwise_comparisons, plot_curve, split_design, table_lines
from .row import pretrain_encoder, train_row, train_waypoint_predictor


def run(options: TrainBenchOptions) -> dict:
    """The single run (``bench train`` without ``--seeds``): every step of the package docstring
    in this process; returns the JSON-ready figures."""
    import shutil

    from vlnverse.learn.agent import require_torch
    from vlnverse.learn.homes import check_disjoint_homes, held_out_scenes
    from vlnverse.run.setup import NamedSpec
    from vlnverse.tasks.episode import save_episodes

    require_torch("vlnverse bench train", field=None)
    selected, seed = list(options.rows), options.seed
    budget, epochs, validation_episodes, scale = options.budget, options.epochs, options.validation_episodes, options.scale
    homes, workers, benchmark = options.homes, options.workers, options.benchmark
    work = options.work_dir("vlnverse-bench-train-")
    load_start = os.getloadavg()
    t_start = time.perf_counter()
    for stale in ("cache/obs", "cache/features", "encoder", "il", "dagger", "eval", "waypoints", "render_compare"):  # a fresh cache and run
        shutil.rmtree(work / stale, ignore_errors=True)  # (generated homes and episodes are reused)
    split_eps, homes_figures = split_data(work, options, seed)
    for name, eps in split_eps.items():
        save_episodes(work / f"{name}.jsonl", eps)
    tasks, counts, task_eps = [], None, {}
    if any(r.get("multitask") for r in selected):  # the other tasks' episodes on the same scenes
        tasks = R.multitask_tasks()
        counts = task_counts(options.task_episodes, options.task_eval_episodes, int(homes), options.per_home,
                             options.per_held_out, options.per_test, scale)
        task_eps = multitask_data(work, tasks, split_eps, counts, seed, bool(homes), options.val_seen_cap)
    from vlnverse.learn.splits import resolve_split
    from vlnverse.run.setup import EpisodeSource

    def resolved(name: str, task: dict | None = None) -> list:
        path = work / (f"{name}.jsonl" if task is None else f"tasks/{task['name']}/{name}.jsonl")
        kind = options.task if task is None else task["task"]
        return resolve_split(EpisodeSource(path=str(path)), split=name, task_type=kind, task=kind, body=None,
                             cache_dir=work / "cache", field=name, progress=False)

    extra = tasks[1:]  # the multi-task row's other tasks: trained on the same homes, held out on the same scenes
    check_disjoint_homes(resolved("train") + [e for t in extra for e in resolved("train", t)],
                         held_out_scenes({s: resolved(s) + [e for t in extra for e in resolved(s, t)]
                                          for s in ("val_unseen", "test")}), cache_dir=work / "cache")
    t_generated = time.perf_counter()
    render = compare_render_paths(resolved("train")[:R.RENDER_COMPARE_EPISODES], work, seed, workers=workers)
    t_render = time.perf_counter()

    encoder_figures = None
    if options.encoder == "pretrained" and any("rgb_encoder" in r["params"] for r in selected):
        encoder_figures = pretrain_encoder(work, resolved("train"), seed)
    t_encoder = time.perf_counter()
    device = "auto"
    dagger = options.dagger
    encoder_path = encoder_figures["path"] if encoder_figures else None
    # one waypoint predictor shared by the waypoint rows (VLN-BERT, HNR, GAMA), outside their budgets
    predictor = (train_waypoint_predictor(work, scale, seed, epochs=options.waypoint_epochs)
                 if any(r.get("waypoint_predictor") for r in selected) else None)
    rows = {row["name"]: train_row(row, work, budget, seed, scale, device, workers, dagger, encoder_path, epochs,
                                   predictor, R.multitask_entries(work, tasks) if row.get("multitask") else None,
                                   validation_episodes, options.language or "v1", options.task)
            for row in selected}
    t_trained = time.perf_counter()

    blind = []  # random and forward-only read no frames: no sensors, the same metrics
    agents = {"random": (NamedSpec("random"), blind), "forward": (NamedSpec("forward"), blind)}
    for trained in rows.values():
        agents.update({agent: (NamedSpec("policy", {"checkpoint": path, "device": device}), R.SENSORS)
                       for agent, path in trained["checkpoints"].items()})
    results: dict = {}
    table: list[dict] = []

    def run_one(agent: str, split: str, mode: str) -> dict:
        spec, sensors = agents[agent]
        got = evaluate(spec, split, mode, work, seed, workers, sensors, agent, task=options.task)
        table.append({"agent": agent, "split": split, "mode": mode, **got})
        results.setdefault(mode, {}).setdefault(split, {})[agent] = got
        return got

    for split in options.eval_splits:
        for agent in agents:
            run_one(agent, split, "telhop")
    learned = [a for a in agents if a not in ("random", "forward")]
    seen = results["telhop"]["val_seen"]
    best = max(learned, key=lambda a: (seen[a]["SR"]["mean"], seen[a]["nDTW"]["mean"])) if learned else None
    if best is not None and options.strict:  # chosen on val_seen only
        for agent in ("random", "forward", best):
            for split in ("val_unseen", "test"):
                run_one(agent, split, "strict")
    multitask = {row["name"]: evaluate_multitask(rows[row["name"]], tasks, results, table, work, seed, workers, device)
                 for row in options.multitask}
    for name, got in multitask.items():
        got.update(counts=counts, episodes={t: {s: len(e) for s, e in eps.items()} for t, eps in task_eps.items()},
                   train_episodes=rows[name]["figures"].get("tasks_train_episodes"))
    t_evaluated = time.perf_counter()
    online = None
    if "vlnbert" in rows and options.table7:
        online = R.table7_stage()(options, work, workers, results, table)
    unseen_sr = results["telhop"]["val_unseen"]
    baseline = max(unseen_sr["random"]["SR"]["mean"], unseen_sr["forward"]["SR"]["mean"])
    from vlnverse.learn.checkpoint import device_info, resolve_device

    from vlnverse.run.summary import RESULTS_FORMAT
    from vlnverse.results.compare import comparison_lines

    comparisons = pairwise_comparisons(table, seed)
    figures = {
        "format": RESULTS_FORMAT,
        "budget": {"il_epochs": epochs, "dagger_epochs": max(1, round(epochs * R.DAGGER_EPOCH_SHARE)) if dagger else None,
                   "seconds_cap": budget, "validation_episodes": validation_episodes},
        "budget_note": (f"per policy row: {epochs} IL epochs, then " + (f"one DAgger round of "
                        f"{max(1, round(epochs * R.DAGGER_EPOCH_SHARE))} epochs" if dagger else "no DAgger (--no-dagger)")
                        + ("" if budget is None else f"; capped at {budget:g} s (IL 50%, DAgger retraining 10%, "
                                                     "validation included)")),
        "seconds_total": round(time.perf_counter() - t_start, 1),
        "seconds": {"data": round(t_generated - t_start, 1), "render_compare": round(t_render - t_generated, 1),
                    "encoder": round(t_encoder - t_render, 1), "train": round(t_trained - t_encoder, 1),
                    "eval": round(t_evaluated - t_trained, 1), "table7": round(time.perf_counter() - t_evaluated, 1)},
        "machine_note": "figures vary with the machine's load (a shared 2-core machine: other sessions run tests)",
        "load_average_1m": {"start": round(load_start[0], 2), "end": round(os.getloadavg()[0], 2)},
        "device": {name: r["figures"]["device"] for name, r in rows.items()},
        "torch_threads": 1, "cpu_count": os.cpu_count(), "cuda_available": str(resolve_device("auto")).startswith("cuda"),
        "device_info": device_info(resolve_device("auto")),
        "workers": workers,
        "setup": {"sensors": f"RGB-D {R.RESOLUTION}x{R.RESOLUTION}", "mode": "telhop (strict: the best row on val_seen)",
                  "selection": "IL checkpoint: best val_seen nDTW; best row: val_seen SR"},
        "encoder": encoder_figures or {"type": "cnn from scratch", **R.ENCODER},
        "train_homes": homes_figures or {"homes": "shipped train scenes (6)"},
        "episodes": {k: len(v) for k, v in split_eps.items()},
        **({"benchmark": benchmark.identity()} if benchmark is not None else {}),
        "render": render,
        "rows": {name: trained["figures"] for name, trained in rows.items()},
        "best_row_agent": best,
        "table": table, "table_text": table_lines(table), "design": split_design(table),
        "comparisons": comparisons, "comparisons_text": comparison_lines(comparisons),
        "val_unseen_vs_baselines": {a: {"SR": unseen_sr[a]["SR"], "best_baseline_SR": baseline,
                                        "ratio": round(unseen_sr[a]["SR"]["mean"] / baseline, 2) if baseline else None}
                                    for a in learned},
        "curves": {name: trained["curve"] for name, trained in rows.items()}, "work_dir": str(work),
    }
    if options.language:
        figures["language"] = options.language
    if options.task != "fine_grained":
        figures["task"] = options.task
    if LANGUAGE_SPLIT in options.eval_splits:  # --language v2-split
        drops = language_drops(table, seed)
        figures.update(language_drop=drops, language_drop_text=language_drop_lines(drops))
    if multitask:
        figures["multitask"] = multitask
    if online is not None:
        figures["online_fine_tuning"] = online
    if options.out:
        figures["plot"] = str(Path(options.out).with_suffix(".png"))
        plot_curve(figures["curves"], table, Path(figures["plot"]),
                   f"bench train: {figures['budget_note']}, {figures['episodes']}, device {figures['device']}, "
                   f"torch threads 1, load {figures['load_average_1m']}")
    return figures
