"""``vlnverse bench train``: each policy of ``POLICY_ROWS`` (Seq2Seq, CMA, RDP, VLN-BERT, HNR, GAMA) trained
by imitation, then one DAgger round (VLN-BERT: one online fine-tuning round), each with the same
budget (``--epochs`` IL epochs per policy, default ``IL_EPOCHS``; the DAgger round retrains for
``DAGGER_EPOCH_SHARE`` of them; ``--budget SECONDS`` optionally caps each row's wall-clock time:
IL 50%, DAgger retraining 10%), evaluated on the same splits against random and forward-only.
An epoch budget gives the same weights on any machine load; the seconds each row took are reported.

Steps:
1. Data. Training homes: ``--train-homes N`` (default ``TRAIN_HOMES``) procedurally generated
   homes (``learn.homes``: seeds 1000 …, ``--episodes-per-home`` each, generated on demand into the
   work folder's cache; ``VAL_SEEN_HOMES_EPISODES`` of their held-out episodes as ``val_seen``:
   same homes, disjoint episodes), the recipe of ``tasks/train/cma_fine_grained.yaml``; or with
   ``--train-homes 0`` the 6 shipped ``train`` scenes (``fine_grained`` episodes, ``--seed``, a
   quarter held out as ``val_seen``). Held-out homes: ``--eval-episodes`` episodes on each shipped
   ``val_unseen`` scene (``--seed`` + 1) and ``--test-episodes`` (default the same) on each
   ``test`` scene (``--seed`` + 2). The split guard refuses training homes shared with them.
2. Render paths (``render``): the teacher cache of the first ``RENDER_COMPARE_EPISODES`` training
   episodes built in one run by physics (the rollout renders every sensor), teleport
   (``learn.collect``) with the reference full depth pass and as shipped, and teleport on
   ``--workers`` processes, twice each in alternation, best of each (``compare_render_paths``) --
   frames/s, their ratios, and whether labels, poses and frames agree. ``--render-only
   --episodes FILE [--limit N]`` measures only this, on any training episodes.
3. Encoder (``--encoder pretrained``, default): one visual encoder pretrained on renders of the
   training homes (``pretrain_encoder``: ``learn.encoder.RECIPE_PRETRAINING``), frozen and shared by every row
   that reads RGB-D frames, which then train from its cached features; ``--encoder cnn``: each row
   trains small CNNs from scratch.
4. Per policy row: the teacher cache (RGB-D 64x64, Tel-Hop, teleport-rendered for the discrete
   oracle teacher), IL on every instruction of each path (the policy's loss, Adam at the row's
   rate and batch size, weights averaged with decay ``IL_EMA``: ``il.ema``), validated on
   ``--validation-episodes`` (``VALIDATION_EPISODES``) val_seen episodes every ``VALIDATION_EVERY`` epochs and at the end: ``best.pt`` is the best val_seen nDTW (a continuous
   score; SR ties at 0 early on). Then one DAgger round from it (β = p = 0.5 on a quarter of the
   training episodes). The waypoint rows (VLN-BERT, HNR, GAMA) share one waypoint predictor
   trained first on panoramas of the train scenes (outside the budget). ``--no-dagger``: IL only.
   The ``gama`` row is single-task (fine-grained, the same data as every row). The
   ``gama_multitask`` row (only with ``--policies gama_multitask``: about twice the ``gama`` row's
   training and five times its held-out evaluation) is the same GAMA, config, budget, predictor and DAgger
   round trained as one model on the task mix of ``tasks/train/gama_multitask.yaml``
   (``multitask_tasks``: fine-grained, coarse-grained, visual-reference, long-horizon,
   object-goal, each with that config's observation setup: visual-reference sees a monocular 90°
   camera). Its fine-grained task is the rows' data; each other task is generated on the same
   training homes (``--task-episodes`` per home or shipped train scene, val_seen held out alike)
   and on the same val_unseen / test scenes (``--task-eval-episodes`` per scene); both default to
   ``TASK_SHARE`` of the rows' counts (``task_counts``, ``multitask_data``). Validation selects
   by the mean over tasks of val_seen nDTW.
5. Evaluate random, forward-only (they read no frames: evaluated without sensors, same metrics),
   and per row IL (``<row>_il``, the val_seen-selected checkpoint) and IL + DAgger
   (``<row>_il_dagger``) on all of val_seen, val_unseen and test under Tel-Hop; the row agent with
   the best val_seen SR (ties: nDTW) also under Strict on val_unseen and test. val_unseen and test
   are touched only here (``--no-strict``: Tel-Hop only, to save time). With the VLN-BERT row, its
   online fine-tuning is also measured as the paper's Table 7 does (``TABLE7_STAGE``: a model
   trained elsewhere, zero-shot in a new domain, then fine-tuned online there; ``--no-transfer``
   or ``--no-dagger`` skips it). The multi-task row's
   agents also on each other task's val_unseen and test (Tel-Hop, the task's settings and
   observation setup; ``evaluate_multitask``; val_seen per task: the trainer's ``tasks.json``),
   with the experts fired per task and decision step over the val_unseen and test runs
   (``gama.expert_usage``; heat maps ``<work>/eval/<agent>/expert_usage.png``).
6. The table (``"format": 2``): per agent, split and mode SR / SPL / nDTW with a 95% percentile-bootstrap CI
   (``bootstrap_ci``, seeded, ``BOOTSTRAP_SAMPLES`` resamples of the episodes) beside the
   clustered one (homes, then episodes within them: ``core.stats``, docs/statistics.md), the
   episode and home counts, the training seeds, per-home results, the MDE of SR and the eval
   protocol (``row_design``); per split its homes and episodes (``design``); between rows on the
   same split and mode, paired SR / SPL differences with clustered CIs and the probability of
   improvement, "A > B" only when the SR interval excludes 0, else "not separated"
   (``comparisons``, ``pairwise_comparisons``); the episode
   count (a task column with the multi-task row; its per-task results, episode counts and expert
   usage under ``multitask``); ``--out FILE.json`` also writes ``FILE.png`` (learning curves and
   the table).

With ``--budget``, a budget too small for one IL (or DAgger) epoch stops with one line giving the
smallest ``--budget`` that fits. Torch runs on CUDA when present (``device: auto``), else on 1 CPU
thread (fastest on a loaded shared machine); the figures state the device and threads, the
machine's load average and the seconds of every phase. The work folder is ``FILE`` without its suffix.
"""
from __future__ import annotations

import csv
import importlib
import os
import time
from pathlib import Path
from typing import Any

from vlnverse.core.stats import bootstrap_ci  # noqa: F401  (moved to core.stats; lookahead and transfer import it here)

DEFAULT_BUDGET = 1200.0        # seconds per row that the dataset sizes are scaled against (--budget)
IL_EPOCHS = 15                 # IL epochs per row (--epochs): the budget, the same for every row
IL_EMA = 0.98                  # every row's weight averaging (il.ema): validated, selected and evaluated weights
DAGGER_EPOCH_SHARE = 0.2       # the DAgger round retrains for this share of --epochs
DAGGER_ROUND = {"rounds": 1, "p": 0.5}  # every row's DAgger round (VLN-BERT's online fine-tuning): beta = p
DAGGER_LR = 0.0005             # its learning rate (il.lr of the round)
DAGGER_EPISODE_SHARE = 4       # it collects 1 / this of the IL episodes
RESOLUTION = 64
SENSORS = [{"name": "rgb", "kind": "rgb", "width": RESOLUTION, "height": RESOLUTION},
           {"name": "depth", "kind": "depth", "width": RESOLUTION, "height": RESOLUTION}]
VAL_SEEN_FRACTION = 0.25
TRAIN_SCENE_EPISODES = 20      # per train scene at the default budget (6 scenes: ~90 train, ~30 val_seen)
EVAL_EPISODES = 50             # per val_unseen and per test scene (2 + 2 scenes: 100 + 100 episodes)
TRAIN_HOMES = 30               # generated training homes (--train-homes; 0: the 6 shipped train scenes)
EPISODES_PER_HOME = 8          # per generated home (--episodes-per-home): the recipe of tasks/train/cma_fine_grained.yaml
VAL_SEEN_HOMES_EPISODES = 40   # val_seen episodes held out of the generated homes' episodes
VALIDATION_EPISODES = 6        # val_seen episodes of each IL validation (selection and curve)
VALIDATION_EVERY = 4           # IL epochs between validations
TABLE7_VALIDATION_EPISODES = 40  # val_seen episodes choosing the online round of the VLN-BERT row's Table 7 stage
#: the VLN-BERT row's Table 7 stage (``bench transfer`` on the run's work folder), resolved when a run
#: needs it: the transfer bench builds on this module, so naming it here keeps the imports one-way
TABLE7_STAGE = "vlnverse.benchmarks.transfer:table7_stage"
RENDER_COMPARE_EPISODES = 12   # training episodes rendered both ways for the render-path figure
BOOTSTRAP_SAMPLES = 2000
#: episodes stepped in lockstep in every evaluation (``vlnverse eval --envs``; same records as 1)
EVAL_ENVS = 4
METRICS = ("SR", "SPL", "nDTW")
#: the from-scratch encoders of ``--encoder cnn``
ENCODER = {"type": "cnn", "channels": 16, "out_dim": 64}
#: Seq2Seq and CMA sized for a CPU budget, batches of 16 episodes (the recurrent step loop costs
#: the same for 1 or 16 episodes, so big batches buy samples/s), with a progress monitor
#: (λ = 1) whose estimate decides STOP (``stop_threshold``)
POLICY_PARAMS = {"hidden_size": 128, "instruction_encoder": {"embedding_size": 32, "hidden_size": 64},
                 "rgb_encoder": ENCODER, "depth_encoder": ENCODER, "progress_weight": 1.0}
#: RDP with the same encoders; a small denoiser (horizon 4 actions of 0.5 m, 20 diffusion steps,
#: DDIM with 10 at inference, 4 noise draws per visited state) that predicts the clean chunk: with
#: ε-prediction it ignored its condition (docs/learning.md, "Why RDP trails CMA")
RDP_PARAMS = {**POLICY_PARAMS, "denoiser_size": 64, "horizon": 4, "diffusion_steps": 20, "noise_samples": 4,
              "prediction": "sample"}
#: VLN-BERT sized for the CPU budget (its waypoint predictor sees 12 depth views of 16x16)
VLNBERT_PARAMS = {"hidden_size": 64, "layers": 2, "heads": 4}
#: HNR on VLN-BERT's size: the encoder's 2 x 2 grid cells per view in a cloud of 1024 points, one
#: GASA layer, lookaheads of 2 x 3 rays with 8 samples (``tasks/train/hnr_fine_grained.yaml``'s)
HNR_PARAMS = {**VLNBERT_PARAMS, "cloud_grid": 2, "cloud_cap": 1024, "history": 8, "graph_layers": 1,
              "render": {"k": 4, "rays": 3, "rows": 2, "samples": 8, "radius": 1.5}, "render_weight": 0.1}
#: GAMA: HNR's and 4 experts, top 2 per step, load balancing 0.01
GAMA_PARAMS = {**HNR_PARAMS, "experts": 4, "top_k": 2, "balance_weight": 0.01}
#: The rows: every policy gets the same budget, splits, validation and DAgger round (for VLN-BERT
#: the DAgger round is the paper's online fine-tuning: schedule sampling between oracle and
#: prediction). A row with ``waypoint_predictor`` first trains the candidate waypoint predictor on
#: panoramas of the train scenes (outside the budget; its seconds and held-out metrics are reported).
POLICY_ROWS = [
    {"name": "seq2seq", "policy": "seq2seq", "params": POLICY_PARAMS, "lr": 0.002, "batch_size": 16},
    {"name": "cma", "policy": "cma", "params": POLICY_PARAMS, "lr": 0.002, "batch_size": 16},
    {"name": "rdp", "policy": "rdp", "params": RDP_PARAMS, "lr": 0.002, "batch_size": 16},
    {"name": "vlnbert", "policy": "vlnbert", "params": VLNBERT_PARAMS, "lr": 0.001, "batch_size": 8,
     "waypoint_predictor": True},
    {"name": "hnr", "policy": "hnr", "params": HNR_PARAMS, "lr": 0.001, "batch_size": 8, "waypoint_predictor": True},
    {"name": "gama", "policy": "gama", "params": GAMA_PARAMS, "lr": 0.001, "batch_size": 8, "waypoint_predictor": True},
    # GAMA as the paper's unified agent: one model on the task mix of ``MULTITASK_CONFIG`` (not in
    # the default set: about twice the ``gama`` row's data and five times its held-out evaluation)
    {"name": "gama_multitask", "policy": "gama", "params": GAMA_PARAMS, "lr": 0.001, "batch_size": 8,
     "waypoint_predictor": True, "multitask": True, "default": False},
]
#: the multi-task row's tasks and their observation setups: those of ``tasks/train/<name>.yaml``
MULTITASK_CONFIG = "gama_multitask"
#: default per-task episode counts of the multi-task row's other tasks, as a share of the rows'
#: fine-grained counts (``--task-episodes``, ``--task-eval-episodes``)
TASK_SHARE = 0.25
#: the held-out splits the multi-task row reports per task (val_seen: the trainer's ``tasks.json``)
MULTITASK_SPLITS = ("val_unseen", "test")
#: step budget of every row's rollouts and evaluations; None: each task's own (``tasks/types/<task>/config.yaml``)
MAX_STEPS: int | None = None


def _dataset(task: str, scenes: str | list, per_scene: int, seed: int, out: Path, val_seen_fraction: float) -> list:
    """Episodes generated once into ``out`` (reused when its ``done`` marker exists); ``scenes``: a
    split name or a list of scene files."""
    from vlnverse.core.io import write_json_atomic
    from vlnverse.tasks.dataset import generate_dataset, resolve_scene_paths, simulator_renderer_factory
    from vlnverse.tasks.episode import load_episodes

    if not isinstance(scenes, str):
        scenes = [str(p) for p in scenes]
    key = {"task": task, "scenes": scenes, "n": per_scene, "seed": seed, "val_seen_fraction": val_seen_fraction}
    marker = out / "done.json"
    if marker.is_file() and __import__("json").loads(marker.read_text()) == key:
        return load_episodes(out / "episodes")
    generate_dataset(task, resolve_scene_paths(scenes) if isinstance(scenes, str) else scenes, per_scene, seed,
                     out / "episodes", progress=True, val_seen_fraction=val_seen_fraction,
                     renderer_factory=simulator_renderer_factory())
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
                            "SR": round(float(row["val_SR"]), 4), "SPL": round(float(row["val_SPL"] or 0), 4),
                            "nDTW": round(float(row["val_nDTW"] or 0), 4)})
    return {"il_epochs": epochs, "validation": val}


def _rows(args) -> list[dict]:
    """The ``POLICY_ROWS`` named by ``--policies`` (when not given: all but ``gama_multitask``), in table order."""
    from vlnverse.core.errors import ConfigError

    wanted = getattr(args, "policies", None)
    if wanted is None:
        return [r for r in POLICY_ROWS if r.get("default", True)]
    names = [n.strip() for n in str(wanted).split(",") if n.strip()]
    known = [r["name"] for r in POLICY_ROWS]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise ConfigError(f"unknown policy row(s) {unknown}" if unknown else f"got {wanted!r}: names no row",
                          field="--policies", expected=f"a comma-separated subset of {known}")
    return [r for r in POLICY_ROWS if r["name"] in names]


def table7_stage():
    """The VLN-BERT row's Table 7 stage (``TABLE7_STAGE``), imported when a run needs it."""
    module, _, name = TABLE7_STAGE.partition(":")
    return getattr(importlib.import_module(module), name)


def settings(args, selected: list[dict]) -> dict:
    """The checked settings of a run (one-line ``ConfigError`` naming the flag before any work):
    budget, epochs, validation episodes, data counts, workers and ``--benchmark`` (a loaded
    ``tasks.benchmark.Benchmark``, or None: the shipped small splits)."""
    from vlnverse.core.errors import ConfigError

    budget = float(args.budget) if getattr(args, "budget", None) else None
    epochs = int(getattr(args, "epochs", None) or IL_EPOCHS)
    if epochs < 1:
        raise ConfigError(f"got {epochs}", field="--epochs", expected="an integer >= 1")
    validation_episodes = getattr(args, "validation_episodes", None)
    check_int_flags((("--validation-episodes", validation_episodes, 1),))
    homes = getattr(args, "train_homes", None)
    homes = TRAIN_HOMES if homes is None else homes
    workers = int(getattr(args, "workers", None) or 1)
    per_held_out = int(getattr(args, "eval_episodes", None) or EVAL_EPISODES)
    per_test = int(getattr(args, "test_episodes", None) or per_held_out)
    per_home = getattr(args, "episodes_per_home", None)
    _check_counts(homes, workers, per_held_out, per_home)
    _check_counts(None, workers, per_test, None)
    check_task_flags(args, selected)
    benchmark = None
    if getattr(args, "benchmark", None):
        from vlnverse.tasks.benchmark import load_benchmark

        benchmark = load_benchmark(args.benchmark)
        given = [f for f, v in (("--eval-episodes", getattr(args, "eval_episodes", None)),
                                ("--test-episodes", getattr(args, "test_episodes", None))) if v is not None]
        if given:
            raise ConfigError(f"given with --benchmark {benchmark.name}", field=given[0],
                              expected="no episode count: the benchmark fixes its val_unseen and test episodes")
        if homes < 1:
            raise ConfigError(f"got {homes} with --benchmark {benchmark.name}", field="--train-homes",
                              expected="an integer >= 1 (homes of the benchmark's train pool)")
        if benchmark.task != "fine_grained":
            raise ConfigError(f"benchmark {benchmark.name} is a {benchmark.task!r} benchmark", field="--benchmark",
                              expected="a fine_grained benchmark (the rows train fine-grained navigation)")
        multitask = [r["name"] for r in selected if r.get("multitask")]
        if multitask:
            raise ConfigError(f"{multitask[0]} with --benchmark", field="--policies",
                              expected="single-task rows (the multi-task row's other tasks use the shipped splits)")
        benchmark.train_seeds(homes)  # the pool holds them (ConfigError naming the file otherwise)
        if per_home is None:
            per_home = benchmark.episodes_per_home.get("train")
    return {"budget": budget, "epochs": epochs, "scale": 1.0 if budget is None else min(1.0, budget / DEFAULT_BUDGET),
            "validation_episodes": VALIDATION_EPISODES if validation_episodes is None else validation_episodes,
            "homes": homes, "per_home": int(per_home or EPISODES_PER_HOME), "workers": workers,
            "per_held_out": per_held_out, "per_test": per_test,
            "val_seen_cap": int(getattr(args, "val_seen_episodes", None) or VAL_SEEN_HOMES_EPISODES),
            "encoder": getattr(args, "encoder", "pretrained") or "pretrained", "dagger": not getattr(args, "no_dagger", False),
            "table7": not getattr(args, "no_dagger", False) and not getattr(args, "no_transfer", False),
            "benchmark": benchmark}


def split_data(work: Path, opts: dict, seed: int) -> tuple[dict[str, list], dict | None]:
    """``({train, val_seen, val_unseen, test: episodes}, homes figures)`` of a run with the
    ``settings`` ``opts`` and ``seed``: generated training homes (``homes_data``, the val_seen
    subset drawn with ``seed``) or the shipped train scenes; the held-out episodes of the
    benchmark (``Benchmark.episodes``, made once into its cache), else of the shipped val_unseen
    and test scenes (seeds ``seed + 1`` / ``seed + 2``). Generated once into ``work`` (the homes
    into ``opts["homes_cache"]`` when given) and reused."""
    homes, workers, benchmark = opts["homes"], opts["workers"], opts["benchmark"]
    homes_figures = None
    if homes:
        train, val_seen, homes_figures = homes_data(work, int(homes), opts["per_home"], seed, workers, opts["val_seen_cap"],
                                                    benchmark=benchmark, cache_dir=opts.get("homes_cache"))
    else:
        seen = _dataset("fine_grained", "train", max(8, round(TRAIN_SCENE_EPISODES * opts["scale"])), seed,
                        work / "data_train", VAL_SEEN_FRACTION)
        train, val_seen = [e for e in seen if e.split == "train"], [e for e in seen if e.split == "val_seen"]
    if benchmark is not None:
        unseen, test = (benchmark.episodes(s, workers=workers) for s in ("val_unseen", "test"))
    else:
        unseen = _dataset("fine_grained", "val_unseen", opts["per_held_out"], seed + 1, work / "data_val_unseen", 0.0)
        test = _dataset("fine_grained", "test", opts["per_test"], seed + 2, work / "data_test", 0.0)
    assert not {e.episode_id for e in train} & {e.episode_id for e in val_seen}, "val_seen must be disjoint from train"
    return ({"train": train, "val_seen": val_seen, "val_unseen": [e for e in unseen if e.split == "val_unseen"],
             "test": [e for e in test if e.split == "test"]}, homes_figures)


def train_waypoint_predictor(work: Path, scale: float, seed: int, body: str = "r2r_ce", folder: str = "waypoints",
                             render: Any = None) -> dict:
    """The candidate waypoint predictor trained afresh on ``body``'s RGB-D panoramas of the train
    scenes (``learn.waypoints.train.recipe_config``: 150 poses per scene at the default budget,
    drawn with ``render``: a ``RenderConfig``, None the defaults) into ``work/folder``; returns its
    file, held-out metrics and seconds. The waypoint rows' navigators read its view features, so
    they see RGB-D through it."""
    import shutil

    from vlnverse.learn.waypoints.train import recipe_config, run_waypoint_training

    shutil.rmtree(work / folder, ignore_errors=True)  # a fresh run (it would resume)
    t0 = time.perf_counter()
    wp = run_waypoint_training(recipe_config(seed, scale=scale, body=body, render=render), work / folder)
    return {"path": str(work / folder / "predictor.pt"), "held_out": wp["held_out"]["predicted"],
            "train_poses": wp["train_poses"], "seconds": round(time.perf_counter() - t0, 1)}


def pretrain_encoder(work: Path, train_episodes: list, seed: int) -> dict:
    """The rows' shared visual encoder: the recipe's (``learn.encoder.pretrain_on_homes``),
    pretrained on renders of the training homes at the rows' resolution into ``work/encoder``."""
    from vlnverse.learn.encoder import pretrain_on_homes

    return pretrain_on_homes([e.scene_path for e in train_episodes], image_size=RESOLUTION, seed=seed,
                             out=work / "encoder")


def episode_metrics(eval_dir: Path) -> dict[str, list[float]]:
    """Per-episode SR / SPL / nDTW (None counts 0) from an eval run folder's episode records."""
    import json

    from vlnverse.eval.runner import EPISODES_FILE

    out: dict[str, list[float]] = {m: [] for m in METRICS}
    with open(eval_dir / EPISODES_FILE, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                metrics = json.loads(line)["metrics"]
                for m in METRICS:
                    out[m].append(float(metrics.get(m) or 0.0))
    return out


def homes_data(work: Path, homes: int, per_home: int, seed: int, workers: int,
               val_seen_cap: int = VAL_SEEN_HOMES_EPISODES, benchmark: Any = None,
               cache_dir: str | Path | None = None) -> tuple[list, list, dict]:
    """(train, val_seen, figures) on ``homes`` generated homes (``learn.homes``, the recipe of
    ``tasks/train/*.yaml``; with ``benchmark``, the first ``homes`` of its train pool and its room
    range; generated into ``cache_dir``, default ``work/cache``): the dataset's train episodes, and
    at most ``VAL_SEEN_HOMES_EPISODES`` of its val_seen episodes (a seeded subset: same homes,
    disjoint episodes)."""
    from vlnverse.learn.homes import HomesSource, hold_out_seen, homes_dataset
    from vlnverse.tasks.scene_roots import resolve_episode_scenes, scene_roots

    pool = {} if benchmark is None else {"seed": benchmark.train_seeds(homes)[0], "min_rooms": benchmark.rooms[0],
                                         "max_rooms": benchmark.rooms[1]}
    spec = HomesSource(homes=homes, episodes_per_home=per_home, **pool)
    spec.validate()
    episodes, folder, info = homes_dataset(spec, task="fine_grained", body=None, cache_dir=cache_dir or work / "cache",
                                           workers=workers)
    if benchmark is not None:  # the training homes are the pool's: refused, naming the home, if made differently here
        from vlnverse.scenes.home_jobs import home_file_fingerprint

        made = info.get("fingerprints") or {p.stem: home_file_fingerprint(p) for p in sorted((folder / "scenes").glob("*.usd"))}
        benchmark.check_fingerprints("train", made)
    info = {k: v for k, v in info.items() if k != "fingerprints"}
    episodes = resolve_episode_scenes(episodes, scene_roots(None, folder / "episodes"))
    train, seen = hold_out_seen(episodes, seed, val_seen_cap)
    return train, seen, {"homes": homes, "episodes_per_home": per_home, "seed": spec.seed, **info}


def multitask_tasks(config: str = MULTITASK_CONFIG) -> list[dict]:
    """The task mix of the multi-task row: ``{task, name, observation}`` per ``tasks`` entry of the
    shipped train config ``config`` (its order; ``observation`` None: the panorama); the first
    must be ``fine_grained`` (it trains on the other rows' data)."""
    import yaml

    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.config import resolve_train_config_path
    from vlnverse.learn.waypoints.grid import ObservationSetup

    path = resolve_train_config_path(config)
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    out = []
    for i, t in enumerate(data.get("tasks") or []):
        if not isinstance(t, dict) or not isinstance(t.get("task"), str):
            raise ConfigError(f"{path}: got {t!r}", field=f"tasks[{i}].task", expected="a task name")
        obs = t.get("observation")
        out.append({"task": str(t["task"]), "name": str(t.get("name") or t["task"]),
                    "observation": None if obs is None else ObservationSetup.parse(obs, f"{path}: tasks[{i}].observation").to_dict()})
    if not out or out[0]["task"] != "fine_grained":
        raise ConfigError(f"{path}: tasks {[t['task'] for t in out]}", field="tasks",
                          expected="fine_grained first (the multi-task row trains it on the other rows' data)")
    return out


def task_counts(args, homes: int, per_home: int, per_held_out: int, per_test: int, scale: float = 1.0) -> dict:
    """Episodes of each task but fine-grained in the multi-task row: ``train`` per generated home
    (``--train-homes`` > 0) or per shipped train scene, ``val_unseen`` / ``test`` per held-out
    scene: ``--task-episodes`` and ``--task-eval-episodes`` (both held-out splits), by default
    ``TASK_SHARE`` of the rows' fine-grained counts (at least 1; 2 per shipped train scene)."""
    train = getattr(args, "task_episodes", None)
    held = getattr(args, "task_eval_episodes", None)
    if train is None:
        train = max(1, round(per_home * TASK_SHARE)) if homes else max(2, round(TRAIN_SCENE_EPISODES * scale * TASK_SHARE))
    return {"train": int(train),
            "val_unseen": int(held) if held is not None else max(1, round(per_held_out * TASK_SHARE)),
            "test": int(held) if held is not None else max(1, round(per_test * TASK_SHARE))}


def check_task_flags(args, selected: list[dict]) -> None:
    """``--task-episodes`` / ``--task-eval-episodes``: integers >= 1, and only with a multi-task row."""
    from vlnverse.core.errors import ConfigError

    flags = (("--task-episodes", getattr(args, "task_episodes", None), 1),
             ("--task-eval-episodes", getattr(args, "task_eval_episodes", None), 1))
    check_int_flags(flags)
    given = [f for f, v, _ in flags if v is not None]
    if given and not any(r.get("multitask") for r in selected):
        raise ConfigError("given without a multi-task row", field=given[0],
                          expected="--policies including " + ",".join(r["name"] for r in POLICY_ROWS if r.get("multitask")))


def multitask_data(work: Path, tasks: list[dict], split_eps: dict, counts: dict, seed: int, homes: bool,
                   val_seen_cap: int = VAL_SEEN_HOMES_EPISODES) -> dict:
    """Each task's episodes, split as the rows' -> ``{name: {split: [episodes]}}``, saved as
    ``work/tasks/<name>/<split>.jsonl``. fine_grained: the rows' own (``split_eps``); task ``i`` of
    the others: ``counts['train']`` episodes per training scene of the rows (the generated homes,
    ``homes``, or the shipped train scenes; seed ``seed + 10 i``, val_seen held out as the rows'
    are), ``counts['val_unseen']`` / ``counts['test']`` per shipped val_unseen / test scene
    (seeds ``seed + 10 i + 1`` / ``+ 2``), generated once into ``work/data_<split>_<name>``."""
    from vlnverse.learn.homes import hold_out_seen
    from vlnverse.tasks.episode import save_episodes
    from vlnverse.tasks.scene_roots import resolve_episode_scenes, scene_roots

    def made(task: str, scenes, n: int, task_seed: int, folder: str, fraction: float) -> list:
        eps = _dataset(task, scenes, n, task_seed, work / folder, fraction)
        return resolve_episode_scenes(eps, scene_roots(None, work / folder / "episodes"))

    out: dict = {}
    for i, t in enumerate(tasks):
        name, task = t["name"], t["task"]
        if task == "fine_grained" and i == 0:
            data = {s: list(split_eps[s]) for s in ("train", "val_seen", *MULTITASK_SPLITS)}
        else:
            s0 = seed + 10 * i
            scenes = sorted({str(e.scene_path) for e in split_eps["train"] + split_eps["val_seen"]}) if homes else "train"
            train, seen = hold_out_seen(made(task, scenes, counts["train"], s0, f"data_train_{name}", VAL_SEEN_FRACTION),
                                        s0, val_seen_cap)
            data = {"train": train, "val_seen": seen}
            for split, k in (("val_unseen", 1), ("test", 2)):
                data[split] = [e for e in made(task, split, counts[split], s0 + k, f"data_{split}_{name}", 0.0)
                               if e.split == split]
        for split, eps in data.items():
            if not eps:
                from vlnverse.core.errors import ConfigError

                raise ConfigError(f"task {name!r} has no {split} episodes", field="--task-episodes" if split in
                                  ("train", "val_seen") else "--task-eval-episodes", expected="a larger count")
            save_episodes(work / "tasks" / name / f"{split}.jsonl", eps)
        out[name] = data
    return out


def row_config(row: dict, work: Path, budget: float | None, seed: int, device: str, workers: int, params: dict,
               epochs: int = IL_EPOCHS, validation_episodes: int = VALIDATION_EPISODES) -> dict:
    """The IL ``TrainConfig`` (as a dict) of a row: the same data, rig, epochs, budget share and selection for every
    row (``validation_episodes`` val_seen episodes every ``VALIDATION_EVERY`` epochs)."""
    return {"policy": {"name": row["policy"], "params": params}, "task": "fine_grained",
            "train": str(work / "train.jsonl"), "val": {"val_seen": str(work / "val_seen.jsonl")},
            "collision_mode": "telhop", "sensors": SENSORS, "threads": 1, "workers": workers, "max_steps": MAX_STEPS,
            "il": {"epochs": epochs, "batch_size": row["batch_size"], "lr": row["lr"], "inflection_weight": "auto",
                   "max_seconds": None if budget is None else 0.50 * budget, "all_instructions": True, "ema": IL_EMA,
                   **row.get("il", {})},
            "validation": {"metric": "nDTW", "every": VALIDATION_EVERY, "limit": validation_episodes, "split": "val_seen",
                           "envs": EVAL_ENVS},
            "device": device, "seed": seed, "cache": {"dir": str(work / "cache")}, "out": str(work / "il" / row["name"])}


def _train(cfg: dict, budget: float, share: float) -> dict:
    """``run_training``; a budget too small for one epoch is a ``ConfigError`` naming ``--budget``."""
    import math

    from vlnverse.core.config import from_dict
    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.config import TrainConfig
    from vlnverse.learn.trainer import BudgetTooSmallError, run_training

    try:
        return run_training(from_dict(TrainConfig, cfg), progress=True)
    except BudgetTooSmallError as exc:
        need = math.ceil(exc.minimum_seconds / share)
        raise ConfigError(f"{budget:g} s per row leaves {share * budget:.0f} s for {exc.phase}, which does not finish one "
                          f"epoch (about {exc.minimum_seconds:.0f} s here)", field="--budget",
                          expected=f"at least {need} s") from None


def train_row(row: dict, work: Path, budget: float | None, seed: int, scale: float = 1.0, device: str = "auto",
              workers: int = 1, dagger: bool = True, encoder: str | None = None, epochs: int = IL_EPOCHS,
              predictor: dict | None = None, tasks: list[dict] | None = None,
              validation_episodes: int = VALIDATION_EPISODES) -> dict:
    """IL then (``dagger``) one DAgger round of one ``POLICY_ROWS`` entry, each selected on
    ``validation_episodes`` val_seen episodes; returns its checkpoints and figures. ``encoder``: a pretrained encoder file replacing the rows' RGB and depth encoders
    (frozen); ``predictor``: the waypoint rows' shared predictor (``train_waypoint_predictor``;
    trained here when not given); ``tasks``: a multi-task run's ``TrainConfig.tasks`` entries in
    place of the rows' fine-grained ``train`` / ``val`` (``multitask_entries``)."""
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
    base = row_config(row, work, budget, seed, device, workers, params, epochs, validation_episodes)
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
        dagger_cfg = {**base, "mode": "dagger", "init": ckpt, "out": str(work / "dagger" / name),
                      "validation": {"metric": "nDTW", "limit": validation_episodes, "split": "val_seen"},
                      "il": {**base["il"], "lr": DAGGER_LR, "max_seconds": None if budget is None else 0.10 * budget},
                      "dagger": {**DAGGER_ROUND, "epochs": max(1, round(epochs * DAGGER_EPOCH_SHARE)),
                                 "episodes": max(2, n_train // DAGGER_EPISODE_SHARE)}}
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
        figures["waypoint_predictor"] = {k: predictor[k] for k in ("held_out", "train_poses", "seconds")}
        figures["cache_teacher_SR"] = cache.get("teacher_SR")
    checkpoints = {f"{name}_il": ckpt}
    if dagger:
        checkpoints[f"{name}_il_dagger"] = str(work / "dagger" / name / "last.pt")
    return {"checkpoints": checkpoints, "figures": figures, "curve": curve}


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
                                  "collision_mode": "telhop", "sensors": SENSORS, "device": "cpu", "seed": seed,
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
           "note": f"best of 2 builds each, alternated; RGB-D {RESOLUTION}x{RESOLUTION} Tel-Hop, the oracle teacher; "
                   "the one-process builds run in this process (cpu_seconds: this process only)"}
    if workers > 1:
        out["workers_speedup"] = ratio(fps[paths[-1]], fps["teleport"])
    return out


def render_only(args) -> dict:
    """``bench train --render-only``: only the render-path figure (``compare_render_paths``), on
    the training episodes of ``--episodes FILE`` (e.g. a previous run's ``train.jsonl``; the
    first ``--limit`` of them), with ``--workers``; work files under ``--out``'s folder."""
    import tempfile

    from vlnverse.core.errors import ConfigError
    from vlnverse.tasks.episode import load_episodes

    source = getattr(args, "episodes", None)
    if not source or not Path(source).is_file():
        raise ConfigError(f"got {source!r}", field="--episodes", expected="a JSONL file of training episodes")
    episodes = load_episodes(source)
    limit = getattr(args, "limit", None)
    if limit is not None:
        if limit < 1:
            raise ConfigError(f"got {limit}", field="--limit", expected="an integer >= 1")
        episodes = episodes[:limit]
    workers = int(getattr(args, "workers", None) or 1)
    work = Path(args.out).with_suffix("") if args.out else Path(tempfile.mkdtemp(prefix="vlnverse-bench-render-"))
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    render = compare_render_paths(episodes, work, args.seed, workers=workers, train=Path(source))
    return {"render": render, "seconds_total": round(time.perf_counter() - t0, 1), "workers": workers,
            "cpu_count": os.cpu_count(), "episodes_file": str(source), "work_dir": str(work),
            "machine_note": "figures vary with the machine's load (a shared 2-core machine: other sessions run tests)"}


def evaluate(spec, split: str, mode: str, work: Path, seed: int, workers: int, sensors: list, out_name: str,
             body: str | None = None, task: str = "fine_grained", episodes: Path | None = None, render: Any = None,
             envs: int | None = None) -> dict:
    """One agent on one split and collision mode through the eval runner (``body``: a preset name
    or YAML path, default the task's; ``task`` and its ``episodes``, default the rows'
    ``work/<split>.jsonl``; ``render``: the ``RenderConfig`` the cameras draw with, None the
    defaults; ``envs``: batched evaluation, default ``EVAL_ENVS``), into
    ``work/eval/<out_name>/<mode>/<split>``; SR / SPL / nDTW with CIs."""
    from vlnverse.run.setup import EpisodeSource, RenderConfig, sensor_config
    from vlnverse.eval.config import EvalConfig, ReportConfig
    from vlnverse.eval.runner import run_eval

    out = work / "eval" / out_name / mode / split
    cfg = EvalConfig(agent=spec, task=task, episodes=EpisodeSource(path=str(episodes or work / f"{split}.jsonl")),
                     max_steps=MAX_STEPS, collision_mode=mode, sensors=[sensor_config(s) for s in sensors], seed=seed, body=body,
                     out=str(out), report=ReportConfig(enabled=False), render=RenderConfig.parse(render, "render"))
    cfg.validate()
    run_eval(cfg, progress=True, print_summary=False, workers=workers, envs=EVAL_ENVS if envs is None else envs)
    per = episode_metrics(out)
    return {"episodes": len(per["SR"]), **{m: bootstrap_ci(per[m], seed=seed) for m in METRICS}, "seeds": 1,
            **row_design(out)}


#: per-home metrics a table row keeps (the eval folder's ``summary.json`` has them all)
ROW_HOME_METRICS = ("episodes", "SR", "SPL", "nDTW", "NE", "TL", "OSR")


def row_design(eval_dir: Path) -> dict:
    """What a table row carries beyond its episode CIs, from the eval run in ``eval_dir``: the
    clustered (by home) intervals, per-home results, the design (homes, episodes, MDE of SR) and
    protocol of its ``summary.json``, and the per-episode ids, homes and metrics (None counts 0)
    that paired comparisons need (``pairwise_comparisons``, ``vlnverse results compare``)."""
    import json

    from vlnverse.eval.runner import EPISODES_FILE, SUMMARY_FILE
    from vlnverse.run.summary import home_of
    from vlnverse.run.records import is_evaluated

    summary = json.loads((eval_dir / SUMMARY_FILE).read_text(encoding="utf-8"))
    overall = summary["overall"]
    with open(eval_dir / EPISODES_FILE, encoding="utf-8") as fh:
        records = [r for r in (json.loads(line) for line in fh if line.strip()) if is_evaluated(r)]
    return {"clustered": {m: overall["intervals"][m]["clustered"] for m in METRICS},
            "per_home": {h: {k: v for k, v in cells.items() if k in ROW_HOME_METRICS}
                         for h, cells in overall["per_home"].items()},
            "design": overall["design"], "protocol": summary["protocol"],
            "per_episode": {"ids": [r["episode_id"] for r in records], "homes": [home_of(r) for r in records],
                            **{m: [float(r["metrics"].get(m) or 0.0) for r in records] for m in METRICS}}}


def pairwise_comparisons(table: list[dict], seed: int = 0) -> list[dict]:
    """Every pair of rows on the same task, split, collision mode, protocol and episodes (table
    order: A before B): the paired SR and SPL differences A - B with clustered intervals and the
    probability of improvement, and the verdict "A > B" (or "B > A") only when the SR interval
    excludes 0, else "not separated" (``results.compare.compare_pair``)."""
    from vlnverse.results.compare import compare_pair

    groups: dict[tuple, list[dict]] = {}
    for row in table:
        if row.get("per_episode"):
            groups.setdefault((row.get("task", "fine_grained"), row["split"], row["mode"]), []).append(row)
    return [{"task": task, "split": split, "mode": mode,
             **compare_pair(a["agent"], a["per_episode"], b["agent"], b["per_episode"], seed=seed)}
            for (task, split, mode), rows in groups.items()
            for i, a in enumerate(rows) for b in rows[i + 1:]
            if a["per_episode"]["ids"] == b["per_episode"]["ids"]  # paired only on the same episodes
            and a.get("protocol") == b.get("protocol")]  # and the same protocol (body, success radius ...)


def split_design(table: list[dict]) -> dict:
    """Per split (and task), the homes and episodes its rows were evaluated on (the first row's design)."""
    out: dict = {}
    for row in table:
        key = row["split"] if "task" not in row else f"{row['task']}/{row['split']}"
        if key not in out and row.get("design"):
            out[key] = {"homes": row["design"]["homes"], "episodes": row["design"]["episodes"]}
    return out


def table_lines(table: list[dict]) -> list[str]:
    """The table as aligned text lines: per row its episodes, homes and training seeds, and per
    metric the mean with the episode bootstrap 95% CI and, after it, the clustered (by home) one
    ("-" where a row has none, "undefined" with one home); with a multi-task row, a task column
    after the agent's (rows without ``task`` are fine-grained)."""
    def ci(c: dict | None) -> str:
        if not c or c.get("mean") is None:
            return "-"
        return "undefined" if c["lo"] is None else f"[{c['lo']:.3f}, {c['hi']:.3f}]"

    def cell(r: dict, m: str) -> str:
        c = r[m]
        return "-" if c["mean"] is None else f"{c['mean']:.3f} {ci(c)} {ci((r.get('clustered') or {}).get(m))}"

    width = max([18] + [len(r["agent"]) for r in table])
    tasks = any("task" in r for r in table)
    task_width = max([16] + [len(r.get("task", "")) for r in table])

    def head(agent: str, task: str) -> str:
        return f"{agent:<{width}} " + (f"{task:<{task_width}} " if tasks else "")

    lines = [head("agent", "task") + f"{'split':<10} {'mode':<7} {'n':>4} {'homes':>5} {'seeds':>5}  "
             + "  ".join(f"{m + ' [episode CI] [home CI]':<37}" for m in METRICS)]
    for r in table:
        homes = (r.get("design") or {}).get("homes", "-")
        lines.append(head(r["agent"], r.get("task", "fine_grained")) + f"{r['split']:<10} {r['mode']:<7} "
                     f"{r['episodes']:>4} {homes:>5} {r.get('seeds', '-'):>5}  "
                     + "  ".join(f"{cell(r, m):<37}" for m in METRICS))
    return lines


def multitask_entries(work: Path, tasks: list[dict]) -> list[dict]:
    """The ``TrainConfig.tasks`` entries of the multi-task row: each task's ``work/tasks/<name>``
    train and val_seen files (``multitask_data``) and its observation setup."""
    return [{"task": t["task"], "name": t["name"], "train": str(work / "tasks" / t["name"] / "train.jsonl"),
             "val": {"val_seen": str(work / "tasks" / t["name"] / "val_seen.jsonl")},
             **({"observation": t["observation"]} if t["observation"] else {})} for t in tasks]


def evaluate_multitask(trained: dict, tasks: list[dict], results: dict, table: list, work: Path, seed: int,
                       workers: int, device: str, experts: int) -> dict:
    """The multi-task row's checkpoints on every task's ``MULTITASK_SPLITS`` (Tel-Hop, each task
    with its settings and observation setup; fine-grained: the main table's runs in ``results``),
    per-task table lines appended to ``table``; the experts fired per task and decision step over
    those runs' episodes (``gama.expert_usage``) and their heat map
    ``work/eval/<agent>/expert_usage.png``."""
    import json

    from vlnverse.run.setup import NamedSpec
    from vlnverse.eval.runner import EPISODES_FILE
    from vlnverse.learn.gama import expert_usage, plot_expert_usage

    out: dict = {"tasks": [t["name"] for t in tasks],
                 "observation": {t["name"]: t["observation"] or {"view": "panoramic"} for t in tasks},
                 "results": {}, "expert_usage": {}, "expert_usage_png": {}}
    for agent, path in trained["checkpoints"].items():
        per_task, records = {}, {}
        for i, t in enumerate(tasks):
            name = t["name"]
            records[name] = []
            for split in MULTITASK_SPLITS:
                if i == 0:  # fine-grained: the rows' data, evaluated with every row
                    got, folder = results["telhop"][split][agent], work / "eval" / agent / "telhop" / split
                else:
                    spec = NamedSpec("policy", {"checkpoint": path, "device": device,
                                                **({"observation": t["observation"]} if t["observation"] else {})})
                    got = evaluate(spec, split, "telhop", work, seed, workers, SENSORS, f"{agent}/{name}", task=t["task"],
                                   episodes=work / "tasks" / name / f"{split}.jsonl")
                    folder = work / "eval" / agent / name / "telhop" / split
                    table.append({"agent": agent, "task": name, "split": split, "mode": "telhop", **got})
                per_task.setdefault(name, {})[split] = got
                with open(folder / EPISODES_FILE, encoding="utf-8") as fh:
                    records[name] += [json.loads(line) for line in fh if line.strip()]
        out["results"][agent] = per_task
        out["expert_usage"][agent] = usage = expert_usage(records, experts)
        png = work / "eval" / agent / "expert_usage.png"
        plot_expert_usage(usage, png)
        out["expert_usage_png"][agent] = str(png)
    return out


def plot_curve(curves: dict, table: list[dict], path: Path, title: str = "") -> None:
    """PNG: per row IL loss, accuracy and val_seen nDTW per validation; SR with its CI per agent
    and split (Tel-Hop); the table."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(16, 10))
    grid = fig.add_gridspec(2, 3, height_ratios=[1, 1.1])
    ax_loss, ax_acc, ax_sr = (fig.add_subplot(grid[0, i]) for i in range(3))
    ax_tab = fig.add_subplot(grid[1, :])
    for name, curve in curves.items():
        ep = [e["epoch"] for e in curve["il_epochs"]]
        ax_loss.plot(ep, [e["loss"] for e in curve["il_epochs"]], label=name)
        line, = ax_acc.plot(ep, [e["accuracy"] for e in curve["il_epochs"]], label=f"{name} train accuracy")
        if curve["validation"]:
            ax_acc.plot([v["after_epoch"] for v in curve["validation"]], [v.get("nDTW", 0) for v in curve["validation"]],
                        "o--", color=line.get_color(), label=f"{name} val_seen nDTW (selection)")
    ax_loss.set(title="IL training loss (the policy's own objective)", xlabel="epoch")
    ax_loss.legend()
    ax_acc.set(title="IL accuracy (RDP: stop decision); val_seen nDTW", xlabel="epoch", ylim=(0, 1))
    ax_acc.legend(fontsize=7)
    rows = [r for r in table if r["mode"] == "telhop" and "task" not in r]  # fine-grained
    agents = list(dict.fromkeys(r["agent"] for r in rows))
    splits = list(dict.fromkeys(r["split"] for r in rows))
    width = 0.8 / max(1, len(splits))
    for i, split in enumerate(splits):
        xs, ys, errs = [], [], [[], []]
        for j, agent in enumerate(agents):
            r = next((r for r in rows if r["agent"] == agent and r["split"] == split), None)
            if r is None or r["SR"]["mean"] is None:
                continue
            ci = (r.get("clustered") or {}).get("SR") or r["SR"]  # by home where the row has it
            lo, hi = (ci["lo"], ci["hi"]) if ci["lo"] is not None else (0.0, 1.0)  # one home: undefined
            xs.append(j + i * width)
            ys.append(r["SR"]["mean"])
            errs[0].append(max(0.0, r["SR"]["mean"] - lo))
            errs[1].append(max(0.0, hi - r["SR"]["mean"]))
        ax_sr.bar(xs, ys, width, yerr=errs, capsize=2, label=split)
    ax_sr.set_xticks([j + 0.4 - width / 2 for j in range(len(agents))], agents, rotation=30, fontsize=7)
    ax_sr.set(title="SR with 95% CI by home (homes, then episodes; Tel-Hop)", ylim=(0, 1))
    ax_sr.legend()
    ax_tab.axis("off")
    ax_tab.text(0, 1, "\n".join(table_lines(table)), family="monospace", fontsize=7, va="top")
    save_figure(fig, path, title)


def save_figure(fig: Any, path: Path, title: str = "") -> None:
    """``fig`` (with ``title`` above it) written to ``path`` as a PNG through a temporary file, then closed."""
    import matplotlib.pyplot as plt

    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp, dpi=90)
    plt.close(fig)
    os.replace(tmp, path)


def run(args) -> dict:
    """Measure the figures listed in the module docstring; returns a JSON-ready dict."""
    import shutil
    import tempfile

    from vlnverse.run.setup import NamedSpec
    from vlnverse.learn.agent import require_torch
    from vlnverse.learn.homes import check_disjoint_homes, held_out_scenes
    from vlnverse.tasks.episode import save_episodes

    require_torch("vlnverse bench train", field=None)
    if getattr(args, "render_only", False):
        return render_only(args)
    selected = _rows(args)  # a bad --policies fails before any work
    opts = settings(args, selected)
    budget, epochs, validation_episodes, scale = opts["budget"], opts["epochs"], opts["validation_episodes"], opts["scale"]
    homes, workers, per_held_out, per_test = opts["homes"], opts["workers"], opts["per_held_out"], opts["per_test"]
    benchmark = opts["benchmark"]
    work = Path(args.out).with_suffix("") if args.out else Path(tempfile.mkdtemp(prefix="vlnverse-bench-train-"))
    load_start = os.getloadavg()
    t_start = time.perf_counter()
    for stale in ("cache/obs", "cache/features", "encoder", "il", "dagger", "eval", "waypoints", "render_compare"):  # a fresh cache and run
        shutil.rmtree(work / stale, ignore_errors=True)  # (generated homes and episodes are reused)
    split_eps, homes_figures = split_data(work, opts, args.seed)
    for name, eps in split_eps.items():
        save_episodes(work / f"{name}.jsonl", eps)
    tasks, counts, task_eps = [], None, {}
    if any(r.get("multitask") for r in selected):  # the other tasks' episodes on the same scenes
        tasks = multitask_tasks()
        counts = task_counts(args, int(homes), opts["per_home"], per_held_out, per_test, scale)
        task_eps = multitask_data(work, tasks, split_eps, counts, args.seed, bool(homes), opts["val_seen_cap"])
    from vlnverse.learn.trainer import resolve_split
    from vlnverse.run.setup import EpisodeSource

    def resolved(name: str, task: dict | None = None) -> list:
        path = work / (f"{name}.jsonl" if task is None else f"tasks/{task['name']}/{name}.jsonl")
        kind = "fine_grained" if task is None else task["task"]
        return resolve_split(EpisodeSource(path=str(path)), split=name, task_type=kind, task=kind, body=None,
                             cache_dir=work / "cache", field=name, progress=False)

    extra = tasks[1:]  # the multi-task row's other tasks: trained on the same homes, held out on the same scenes
    check_disjoint_homes(resolved("train") + [e for t in extra for e in resolved("train", t)],
                         held_out_scenes({s: resolved(s) + [e for t in extra for e in resolved(s, t)]
                                          for s in ("val_unseen", "test")}), cache_dir=work / "cache")
    t_generated = time.perf_counter()
    render = compare_render_paths(resolved("train")[:RENDER_COMPARE_EPISODES], work, args.seed, workers=workers)
    t_render = time.perf_counter()

    encoder_figures = None
    if getattr(args, "encoder", "pretrained") == "pretrained" and any("rgb_encoder" in r["params"] for r in selected):
        encoder_figures = pretrain_encoder(work, resolved("train"), args.seed)
    t_encoder = time.perf_counter()
    device = "auto"
    dagger = not getattr(args, "no_dagger", False)
    encoder_path = encoder_figures["path"] if encoder_figures else None
    # one waypoint predictor shared by the waypoint rows (VLN-BERT, HNR, GAMA), outside their budgets
    predictor = train_waypoint_predictor(work, scale, args.seed) if any(r.get("waypoint_predictor") for r in selected) else None
    rows = {row["name"]: train_row(row, work, budget, args.seed, scale, device, workers, dagger, encoder_path, epochs,
                                   predictor, multitask_entries(work, tasks) if row.get("multitask") else None,
                                   validation_episodes)
            for row in selected}
    t_trained = time.perf_counter()

    blind = []  # random and forward-only read no frames: no sensors, the same metrics
    agents = {"random": (NamedSpec("random"), blind), "forward": (NamedSpec("forward"), blind)}
    for trained in rows.values():
        agents.update({agent: (NamedSpec("policy", {"checkpoint": path, "device": device}), SENSORS)
                       for agent, path in trained["checkpoints"].items()})
    results: dict = {}
    table: list[dict] = []

    def run_one(agent: str, split: str, mode: str) -> dict:
        spec, sensors = agents[agent]
        got = evaluate(spec, split, mode, work, args.seed, workers, sensors, agent)
        table.append({"agent": agent, "split": split, "mode": mode, **got})
        results.setdefault(mode, {}).setdefault(split, {})[agent] = got
        return got

    for split in ("val_seen", "val_unseen", "test"):
        for agent in agents:
            run_one(agent, split, "telhop")
    learned = [a for a in agents if a not in ("random", "forward")]
    seen = results["telhop"]["val_seen"]
    best = max(learned, key=lambda a: (seen[a]["SR"]["mean"], seen[a]["nDTW"]["mean"])) if learned else None
    if best is not None and not getattr(args, "no_strict", False):  # chosen on val_seen only
        for agent in ("random", "forward", best):
            for split in ("val_unseen", "test"):
                run_one(agent, split, "strict")
    multitask = {name: evaluate_multitask(rows[name], tasks, results, table, work, args.seed, workers, device,
                                          int(row["params"]["experts"]))
                 for name, row in ((r["name"], r) for r in selected) if row.get("multitask")}
    for name, got in multitask.items():
        got.update(counts=counts, episodes={t: {s: len(e) for s, e in eps.items()} for t, eps in task_eps.items()},
                   train_episodes=rows[name]["figures"].get("tasks_train_episodes"))
    t_evaluated = time.perf_counter()
    online = None
    if "vlnbert" in rows and dagger and not getattr(args, "no_transfer", False):
        online = table7_stage()(args, work, workers, results, table)
    unseen_sr = results["telhop"]["val_unseen"]
    baseline = max(unseen_sr["random"]["SR"]["mean"], unseen_sr["forward"]["SR"]["mean"])
    from vlnverse.learn.checkpoint import device_info, resolve_device

    from vlnverse.run.summary import RESULTS_FORMAT
    from vlnverse.results.compare import comparison_lines

    comparisons = pairwise_comparisons(table, args.seed)
    figures = {
        "format": RESULTS_FORMAT,
        "budget": {"il_epochs": epochs, "dagger_epochs": max(1, round(epochs * DAGGER_EPOCH_SHARE)) if dagger else None,
                   "seconds_cap": budget, "validation_episodes": validation_episodes},
        "budget_note": (f"per policy row: {epochs} IL epochs, then " + (f"one DAgger round of "
                        f"{max(1, round(epochs * DAGGER_EPOCH_SHARE))} epochs" if dagger else "no DAgger (--no-dagger)")
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
        "setup": {"sensors": f"RGB-D {RESOLUTION}x{RESOLUTION}", "mode": "telhop (strict: the best row on val_seen)",
                  "selection": "IL checkpoint: best val_seen nDTW; best row: val_seen SR"},
        "encoder": encoder_figures or {"type": "cnn from scratch", **ENCODER},
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
    if multitask:
        figures["multitask"] = multitask
    if online is not None:
        figures["online_fine_tuning"] = online
    if args.out:
        figures["plot"] = str(Path(args.out).with_suffix(".png"))
        plot_curve(figures["curves"], table, Path(figures["plot"]),
                   f"bench train: {figures['budget_note']}, {figures['episodes']}, device {figures['device']}, "
                   f"torch threads 1, load {figures['load_average_1m']}")
    return figures


def check_int_flags(flags) -> None:
    """One-line ``ConfigError`` naming the first ``(flag, value, lowest)`` whose value (when given)
    is not an integer >= lowest."""
    from vlnverse.core.errors import ConfigError

    for flag, value, low in flags:
        if value is not None and (not isinstance(value, int) or value < low):
            raise ConfigError(f"got {value!r}", field=flag, expected=f"an integer >= {low}")


def _check_counts(homes, workers, per_held_out, per_home) -> None:
    """``--train-homes``, ``--workers``, ``--eval-episodes`` and ``--episodes-per-home`` (``check_int_flags``)."""
    check_int_flags((("--train-homes", homes, 0), ("--workers", workers, 1), ("--eval-episodes", per_held_out, 1),
                     ("--episodes-per-home", per_home, 1)))
