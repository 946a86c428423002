"""``vlnverse bench il``: IL training speed of a ``bench train`` row by the earlier padded path and
the bucketed, packed one (``il.batching``: ``learn.batching.EpisodeBatches``), measured in one run
on the same data; and, with ``--validation-every``, both paths' val_seen curves.

Data: the rows' recipe at a small scale: ``--train-homes`` generated homes (default ``IL_HOMES``,
``--episodes-per-home`` each, ``--val-seen-episodes`` of their held-out episodes as val_seen),
every instruction of each path, RGB-D 64x64 under Tel-Hop; with ``--encoder pretrained`` (the
default) the rows' encoder pretrained on those homes (cached in the work folder by its key) and
frozen, so the rows train from cached features. Homes, caches and the encoder are built before
anything is timed (``_prepare_caches``).

Per row of ``--policies`` (default ``cma``): ``--repeat`` runs of each path, alternating, each the
row's IL config (``train.recipe.row_config``: its batch size, rate, weight averaging) for ``--epochs``
epochs (default ``IL_BENCH_EPOCHS``) on one torch thread. ``samples_per_s``: teacher steps over
the trainer's batch time (gathering, forward, backward, optimizer, averaging); ``seconds``: the
whole run (setup, checkpoints, validation); ``unroll_per_epoch``: the recurrent work of an epoch
(``unroll``: sequential steps, and episode-steps computed). The best of the
repeats per path, and the ratios bucketed / padded. The same seed gives both paths the same
initial weights; their batches differ (that is the change measured). With ``--validation-every K``
each path validates every K epochs on ``--validation-episodes`` val_seen episodes: the first
repeat's nDTW / SR curves (``train_log.csv``), to check that bucketing keeps the curve.
"""
from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .train.options import check_counts, check_int_flags, flag_reader
from .train.recipe import EPISODES_PER_HOME, VAL_SEEN_HOMES_EPISODES, VALIDATION_EPISODES, select_rows

IL_HOMES = 4            # generated training homes (--train-homes)
IL_BENCH_EPOCHS = 2     # IL epochs per run (--epochs)
PATHS = ("padded", "bucketed")


@dataclass(frozen=True)
class ILBenchOptions:
    """The checked settings of a ``bench il`` run: the ``rows`` of ``--policies`` (default cma);
    ``homes`` generated homes of ``per_home`` episodes, ``val_seen_cap`` of their held-out ones;
    ``epochs`` per run, ``repeats`` runs per path; ``every``: validate every N epochs on
    ``validation_episodes`` val_seen episodes (None: no validation); ``encoder`` (``pretrained``:
    the recipe's, frozen); ``workers``; ``seed``; ``out`` (its stem: the work folder)."""

    rows: tuple = ()
    homes: int = IL_HOMES
    per_home: int = EPISODES_PER_HOME
    val_seen_cap: int = VAL_SEEN_HOMES_EPISODES
    epochs: int = IL_BENCH_EPOCHS
    repeats: int = 1
    every: int | None = None
    validation_episodes: int = VALIDATION_EPISODES
    encoder: str | None = "pretrained"
    workers: int = 1
    seed: int = 0
    out: str | None = None

    @classmethod
    def from_args(cls, args: Any) -> "ILBenchOptions":
        """The options of ``args`` (an ``argparse.Namespace`` of ``vlnverse bench il``; a flag it
        lacks takes its default), checked in the order the command line's errors name them: a bad
        value is a one-line ``ConfigError`` naming the flag."""
        from vlnverse.core.errors import ConfigError

        given, flag = vars(args), flag_reader(args)
        rows = tuple(select_rows(given.get("policies") or "cma"))
        homes, per_home = flag("train_homes", IL_HOMES), flag("episodes_per_home", EPISODES_PER_HOME)
        epochs, repeats, every = flag("epochs", IL_BENCH_EPOCHS), flag("repeat", 1), given.get("validation_every")
        check_int_flags((("--train-homes", homes, 1), ("--epochs", epochs, 1), ("--repeat", repeats, 1),
                         ("--validation-every", every, 1), ("--validation-episodes", given.get("validation_episodes"), 1)))
        workers = int(given.get("workers") or 1)
        check_counts(homes, workers, None, per_home)
        if any(r.get("waypoint_predictor") or r.get("multitask") for r in rows):
            raise ConfigError(f"got {[r['name'] for r in rows]}", field="--policies",
                              expected="rows without a waypoint predictor: seq2seq, cma, rdp")
        return cls(rows=rows, homes=int(homes), per_home=int(per_home),
                   val_seen_cap=int(given.get("val_seen_episodes") or VAL_SEEN_HOMES_EPISODES), epochs=int(epochs),
                   repeats=repeats, every=every, validation_episodes=given.get("validation_episodes") or VALIDATION_EPISODES,
                   encoder=given.get("encoder", "pretrained"), workers=workers, seed=given.get("seed", 0),
                   out=given.get("out"))

    def work_dir(self) -> Path:
        """The work folder: ``--out`` without its suffix, else a new temporary folder."""
        return Path(self.out).with_suffix("") if self.out else Path(tempfile.mkdtemp(prefix="vlnverse-bench-il-"))


def unroll(lengths, batch_size: int, batching: str, seed: int) -> dict[str, int]:
    """One epoch's recurrent work in the epoch-0 order of ``EpisodeBatches``: ``steps``, the
    sequential steps (each batch runs to its longest episode), and ``rows``, the episode-steps
    computed (a padded batch: its size x its longest; a packed one: its valid steps)."""
    import numpy as np

    from vlnverse.learn.batching import bucketed_order

    lengths = np.asarray(lengths)
    rng = np.random.default_rng([seed, 0])
    order = bucketed_order(lengths, batch_size, rng) if batching == "bucketed" else rng.permutation(len(lengths))
    batches = [lengths[order[i:i + batch_size]] for i in range(0, len(order), batch_size)]
    return {"steps": int(sum(b.max() for b in batches)),
            "rows": int(lengths.sum()) if batching == "bucketed" else int(sum(b.max() * len(b) for b in batches))}


def run(args) -> dict:
    """Measure the figures listed in the module docstring; returns a JSON-ready dict."""
    import json
    import shutil

    from vlnverse.learn.agent import require_torch
    from vlnverse.learn.checkpoint import device_info, resolve_device
    from vlnverse.tasks.episode import save_episodes

    from vlnverse.benchmarks.train.data import homes_data
    from vlnverse.benchmarks.train.recipe import RESOLUTION, row_config
    from vlnverse.benchmarks.train.row import _train, training_curve

    require_torch("vlnverse bench il", field=None)
    options = ILBenchOptions.from_args(args)
    rows, epochs, repeats, every, workers = options.rows, options.epochs, options.repeats, options.every, options.workers
    work = options.work_dir()
    load_start = os.getloadavg()
    t0 = time.perf_counter()
    shutil.rmtree(work / "il", ignore_errors=True)
    train, val_seen, homes_figures = homes_data(work, options.homes, options.per_home, options.seed, workers,
                                                options.val_seen_cap)
    save_episodes(work / "train.jsonl", train)
    save_episodes(work / "val_seen.jsonl", val_seen)
    encoder = None
    if options.encoder == "pretrained":  # the recipe's, cached by its key and reused
        from vlnverse.learn.encoder.pretraining import pretrain_on_homes

        encoder = pretrain_on_homes([e.scene_path for e in train], image_size=RESOLUTION, seed=options.seed,
                                    cache_dir=work / "cache")
    t_data = time.perf_counter()
    validation_episodes = options.validation_episodes
    figures: dict = {"rows": {}}
    for row in rows:
        params = dict(row["params"])
        if encoder is not None:
            params["rgb_encoder"] = params["depth_encoder"] = {"type": "pretrained", "path": encoder["path"], "frozen": True}
        base = row_config(row, work, None, options.seed, "auto", workers, params, epochs, validation_episodes)
        _prepare_caches({**base, "out": str(work / "il" / row["name"] / "prepare")})
        runs: dict = {p: [] for p in PATHS}
        curves: dict = {}
        for r in range(repeats):
            for path in (PATHS if r % 2 == 0 else PATHS[::-1]):  # alternating: drifts in the machine's load hit both
                cfg = {**base, "il": {**base["il"], "batching": path}, "validation": dict(base["validation"])}
                cfg["out"] = str(work / "il" / row["name"] / f"{path}_{r}")
                cfg["validation"]["every"] = int(every) if every else 10 ** 6
                if not every:
                    cfg["val"], cfg["validation"]["split"] = {}, None
                start = time.perf_counter()
                summary = _train(cfg, 0.0, 1.0)
                seconds = time.perf_counter() - start
                runs[path].append({"samples_per_s": summary["il"]["samples_per_s"], "train_seconds": summary["il"]["seconds"],
                                   "seconds": round(seconds, 2), "samples": summary["il"]["samples"],
                                   "final_loss": round(summary["il"]["loss"], 4), "device": summary.get("device_info")})
                if every and r == 0:
                    curves[path] = training_curve(Path(cfg["out"]) / "train_log.csv")
        lengths = _item_lengths(summary["cache"]["path"], train)
        best = {p: max(runs[p], key=lambda x: x["samples_per_s"] or 0) for p in PATHS}
        got = {p: {**best[p], "repeats": [x["samples_per_s"] for x in runs[p]],
                   "unroll_per_epoch": unroll(lengths, row["batch_size"], p, options.seed)} for p in PATHS}
        figures["rows"][row["name"]] = {
            "paths": got, "items": len(lengths), "steps_per_epoch": int(sum(lengths)), "batch_size": row["batch_size"],
            "ratio_samples_per_s": round(got["bucketed"]["samples_per_s"] / got["padded"]["samples_per_s"], 2),
            "ratio_seconds": round(got["padded"]["seconds"] / got["bucketed"]["seconds"], 2),
            **({"validation_curves": curves} if curves else {})}
    figures.update({
        "epochs": epochs, "repeat": repeats, "validation_every": every, "train_homes": homes_figures,
        "encoder": encoder["path"] if encoder else "cnn from scratch", "torch_threads": 1,
        "device": device_info(resolve_device("auto")), "seconds_data": round(t_data - t0, 1),
        "seconds_total": round(time.perf_counter() - t0, 1), "cpu_count": os.cpu_count(),
        "load_average_1m": {"start": round(load_start[0], 2), "end": round(os.getloadavg()[0], 2)},
        "machine_note": "figures vary with the machine's load; the ratios are measured in one run, paths alternating",
        "work_dir": str(work)})
    (work / "bench_il.json").write_text(json.dumps(figures, indent=2, sort_keys=True), encoding="utf-8")
    return figures


def _prepare_caches(cfg: dict) -> None:
    """Build a run's observation and feature caches before anything is timed: one batch of
    training (stopped by a tiny ``il.max_seconds``; its folder is not used again)."""
    from vlnverse.core.config import from_dict
    from vlnverse.learn.config import TrainConfig
    from vlnverse.learn.errors import BudgetTooSmallError
    from vlnverse.learn.trainer import run_training

    try:
        run_training(from_dict(TrainConfig, {**cfg, "il": {**cfg["il"], "max_seconds": 1e-9}}), progress=False)
    except BudgetTooSmallError:
        pass


def _item_lengths(cache_path: str, train: list) -> list[int]:
    """Episode lengths of the training items in ``EpisodeBatches`` order: each stored episode once
    per instruction (``il.all_instructions``)."""
    from vlnverse.learn.store import StepStore

    counts = {e.episode_id: len(e.instructions) or 1 for e in train}
    return [e["length"] for e in StepStore(cache_path).episodes for _ in range(counts.get(e["episode_id"], 1))]
