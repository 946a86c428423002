"""Trainers behind ``vlnverse train``: offline imitation learning (IL) from the observation cache,
and online DAgger in the physics simulator.

Run folder (``cfg.out``): ``config.json`` (a resumed run must match it), ``last.pt`` (weights,
optimizer, data position; saved every ``il.checkpoint_every`` batches, at each epoch end and on
Ctrl-C), ``best.pt`` (best validation ``validation.metric``; a copy of the last weights when no
validation ran), ``train_log.csv`` and TensorBoard
events in ``tb/`` (CSV only, with a warning, when tensorboard is missing), ``val/<tag>/<split>/`` (each
validation's episode records and summary, ``run.evaluate``), ``dagger_aggregate/`` (the on-disk aggregate of DAgger steps),
``dagger.jsonl`` (β, collected and aggregated steps per round) and ``summary.json``.

Under ``torchrun`` / ``--nproc N`` the trainer runs on every rank; ``learn.distributed`` (the
``self.ranks`` seam) shards the batches, syncs the gradients and leaves every file to rank 0.
"""
from __future__ import annotations

import csv
import json
import logging
import copy
import math
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from ..core.errors import ConfigError, VLNVerseError
from ..core.io import to_jsonable, write_json_atomic
from . import seed_torch
from .checkpoint import content_key, device_info, policy_from_checkpoint, read_checkpoint, resolve_device, save_checkpoint
from .config import TrainConfig
from .distributed import NullLogger, current as current_ranks, describe, scaling
from .policies import build_policy, sequence_loss  # noqa: F401 (sequence_loss re-exported)
from .store import StepStore, sensor_layout, truncate_store
from .vocab import Vocabulary

log = logging.getLogger(__name__)

LOWER_IS_BETTER = ("NE", "TL")
LOG_COLUMNS = ("time", "phase", "round", "epoch", "batch", "global_step", "loss", "accuracy", "samples_per_s",
               "beta", "collected_steps", "aggregated_steps", "env_steps_per_s", "val_split", "val_SR", "val_SPL",
               "val_nDTW", "val_NE", "val_OSR", "world_size", "effective_batch", "lr")


class TrainingError(VLNVerseError):
    """Training cannot go on (NaN loss, no data); the message says what was kept."""


class BudgetTooSmallError(TrainingError):
    """The time budget (``il.max_seconds``) ends before the phase's first epoch: ``minimum_seconds``
    is what one epoch took to extrapolate here."""

    def __init__(self, message: str, *, phase: str, minimum_seconds: float):
        super().__init__(message)
        self.phase, self.minimum_seconds = phase, float(minimum_seconds)


# -------------------------------------------------------------------------------------------- logging


class RunLogger:
    """Appends rows to ``train_log.csv`` and scalars to TensorBoard (when installed)."""

    def __init__(self, out: Path, report: Callable[[str], None] = print):
        self.path = out / "train_log.csv"
        # a run stopped between opening the log and its first row leaves an empty file: a new log
        new = not self.path.is_file() or self.path.stat().st_size == 0
        columns = LOG_COLUMNS if new else (self.path.read_text(encoding="utf-8").splitlines()[:1] or [""])[0].split(",")
        self._fh = open(self.path, "a", newline="", encoding="utf-8")
        self._csv = csv.DictWriter(self._fh, fieldnames=[c for c in columns if c] or LOG_COLUMNS, extrasaction="ignore")
        if new:
            self._csv.writeheader()
        try:
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(str(out / "tb"))
        except (ImportError, ModuleNotFoundError):
            self.tb = None
            warnings.warn("tensorboard is not installed: logging to train_log.csv only (pip install tensorboard)",
                          RuntimeWarning, stacklevel=2)

    def log(self, global_step: int, **values: Any) -> None:
        """One CSV row; numeric values also go to TensorBoard under ``<phase>/<name>``."""
        row = {"time": round(time.time(), 3), "global_step": global_step, **values}
        self._csv.writerow({k: (round(v, 6) if isinstance(v, float) else v) for k, v in row.items()})
        self._fh.flush()
        if self.tb is not None:
            phase = values.get("phase", "train")
            for k, v in values.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool) and k not in ("round", "epoch", "batch"):
                    self.tb.add_scalar(f"{phase}/{k}", v, global_step)
            self.tb.flush()

    def close(self) -> None:
        """Close the files."""
        self._fh.close()
        if self.tb is not None:
            self.tb.close()


# -------------------------------------------------------------------------------------------- data


def inflection_weights(labels: np.ndarray, coef: float) -> np.ndarray:
    """VLN-CE inflection weighting: ``coef`` at the first step and wherever the teacher action
    changes from the previous step, 1 elsewhere."""
    w = np.ones(len(labels), dtype=np.float32)
    if len(labels):
        change = np.concatenate([[True], labels[1:] != labels[:-1]])
        w[change] = coef
    return w


def inflection_coefficient(stores: list[StepStore]) -> float:
    """Total steps / inflection steps of the data (VLN-CE's ``inflection_weight_coef``)."""
    steps = inflections = 0
    for store in stores:
        for i in range(len(store)):
            e = store.episodes[i]
            labels = np.asarray(store._array(e["chunk"], "label")[e["start"]:e["start"] + e["length"]])
            steps += len(labels)
            inflections += int(inflection_weights(labels, 2.0).sum() - len(labels))
    return float(steps / inflections) if inflections else 1.0


#: IL batch formation (``il.batching``): ``bucketed`` draws each epoch's batches from pools of
#: ``BUCKET_POOL`` batches sorted by episode length (less padding) and unrolls them packed;
#: ``padded`` is the earlier path (a plain permutation, every batch unrolled to its longest episode)
BATCHINGS = ("bucketed", "padded")
#: batches per pool of the bucketed order: the pool is sorted by length, then cut into batches
BUCKET_POOL = 8


def bucketed_order(lengths: np.ndarray, batch_size: int, rng: np.random.Generator, pool: int = BUCKET_POOL) -> np.ndarray:
    """A permutation of ``range(len(lengths))`` whose consecutive ``batch_size`` slices hold
    episodes of similar length: a random permutation cut into pools of ``pool`` batches, each pool
    sorted by length (ties in permuted order), cut into batches; the full batches are shuffled and
    a partial one stays last. Every index appears once; the same ``rng`` state gives the same order."""
    perm = rng.permutation(len(lengths))
    size = batch_size * pool
    ordered = np.concatenate([p[np.argsort(lengths[p], kind="stable")] for p in np.split(perm, range(size, len(perm), size))]
                             ) if len(perm) else perm
    full = len(ordered) // batch_size
    batches = [ordered[i * batch_size:(i + 1) * batch_size] for i in range(full)]
    rest = ordered[full * batch_size:]
    shuffled = [batches[i] for i in rng.permutation(full)]
    return np.concatenate(shuffled + [rest]).astype(np.int64) if full or len(rest) else ordered


def il_batching(configured: str, policy: Any) -> str:
    """How a policy's IL batches are formed: ``il.batching``, except that a policy which does not
    unroll packed (``VLNPolicy.unrolls_packed`` False: RDP, VLN-BERT, HNR, GAMA) always gets
    ``padded``, a plain permutation."""
    return configured if policy.unrolls_packed else "padded"


class EpisodeBatches:
    """Batches of whole episodes from one or more stores, in a seeded order per epoch.

    ``instructions`` (episode id → its instruction texts) makes every (episode, instruction) pair
    one item, as R2R trains on each of a path's instructions: the frames and teacher labels depend
    on the path only, so the other instructions cost no rendering. ``batching`` (``BATCHINGS``):
    ``bucketed`` orders items into batches of similar length and gives each batch its
    ``lengths`` (policies unroll it packed); ``padded`` keeps a plain permutation. Either way a batch
    is padded to its longest episode. Fields are copied from the stores' memory maps straight into
    the batch arrays; token ids are encoded once per item."""

    def __init__(self, stores: list[StepStore], vocab: Vocabulary, max_length: int, sensors: list[dict[str, Any]],
                 instructions: dict[str, list[str]] | None = None, batching: str = "padded"):
        if batching not in BATCHINGS:
            raise ConfigError(f"got {batching!r}", field="il.batching", expected=f"one of {list(BATCHINGS)}")
        self.stores, self.vocab, self.max_length, self.sensors = stores, vocab, max_length, sensors
        self.batching = batching
        self.items = [(s, i, text) for s in stores for i in range(len(s))
                      for text in ((instructions or {}).get(s.episodes[i]["episode_id"]) or [None])]
        if not self.items:
            raise TrainingError("no training steps: the episode stores are empty")
        self.lengths = np.array([s.episodes[i]["length"] for s, i, _ in self.items], dtype=np.int64)
        self._tokens: dict[int, np.ndarray] = {}
        self._weights: dict[tuple[int, float], np.ndarray] = {}

    def __len__(self) -> int:
        return len(self.items)

    def order(self, seed: int, epoch: int, batch_size: int | None = None) -> np.ndarray:
        """The epoch's item order (depends only on seed, epoch and batch size: resumable); bucketed
        (``bucketed_order``) when the batching is and ``batch_size`` is given."""
        rng = np.random.default_rng([seed, epoch])
        if self.batching == "bucketed" and batch_size:
            return bucketed_order(self.lengths, batch_size, rng)
        return rng.permutation(len(self.items))

    def _item_tokens(self, i: int) -> np.ndarray:
        if i not in self._tokens:
            store, k, text = self.items[i]
            self._tokens[i] = self.vocab.encode(text if text is not None else store.episodes[k]["instruction"], self.max_length)
        return self._tokens[i]

    def _item_weights(self, i: int, labels: np.ndarray, coef: float) -> np.ndarray:
        key = (i, coef)
        if key not in self._weights:
            self._weights[key] = inflection_weights(labels, coef)
        return self._weights[key]

    def batch(self, indices: np.ndarray, coef: float, device: Any) -> dict[str, Any]:
        """Tensors of a batch: tokens (B, L), frames (B, T, ...), prev (B, T), labels, weights, extras
        and the episode lengths (B,) (``lengths``: bucketed batching only)."""
        indices = [int(i) for i in indices]
        b = len(indices)
        lengths = self.lengths[indices]
        t = int(lengths.max())
        where = [(self.items[i][0], self.items[i][0].episodes[self.items[i][1]]) for i in indices]

        def gather(name: str, shape: Any, dtype: Any) -> np.ndarray:
            arr = np.zeros((b, t, *shape), dtype=dtype)
            for j, (store, e) in enumerate(where):
                arr[j, :e["length"]] = store._array(e["chunk"], name)[e["start"]:e["start"] + e["length"]]
            return arr

        frames = {}
        for spec in self.sensors:
            first = where[0][0]._array(where[0][1]["chunk"], spec["name"])
            frames[spec["name"]] = torch.from_numpy(gather(spec["name"], spec["shape"], first.dtype)).to(device)
        labels = gather("label", (), np.int64)
        executed = gather("executed", (), np.int64)
        prev = np.zeros((b, t), dtype=np.int64)
        prev[:, 1:] = 1 + executed[:, :-1]
        weights = np.zeros((b, t), dtype=np.float32)
        for j, (i, n) in enumerate(zip(indices, lengths)):
            prev[j, n:] = 0
            weights[j, :n] = self._item_weights(i, labels[j, :n], coef)
        tokens = np.stack([self._item_tokens(i) for i in indices])
        extras = {name: torch.from_numpy(gather(name, shape, np.float32)).to(device)
                  for name, shape in self.stores[0].extra_fields.items()}  # continuous-action labels (e.g. RDP)
        out = {"extras": extras, "tokens": torch.from_numpy(tokens).to(device), "frames": frames,
               "prev": torch.from_numpy(prev).to(device), "labels": torch.from_numpy(labels).to(device),
               "weights": torch.from_numpy(weights).to(device), "steps": int(lengths.sum())}
        if self.batching == "bucketed":
            out["lengths"] = torch.from_numpy(lengths.copy())
        return out


def declared_jobs() -> int:
    """Trainings declared to run side by side on this machine (``$VLNVERSE_JOBS``, default 1): what
    ``threads: auto`` shares the cores among. A value that is not a positive integer is a ``ConfigError``."""
    import os

    value = os.environ.get("VLNVERSE_JOBS", "1").strip() or "1"
    if not value.isdigit() or int(value) < 1:
        raise ConfigError(f"got {value!r}", field="VLNVERSE_JOBS", expected="a positive integer (trainings run side by side)")
    return int(value)


def batch_objective(policy: Any, batch: dict[str, Any]) -> tuple[torch.Tensor, float]:
    """The policy's imitation loss on a batch and the number of steps it gets right (the
    callable that data-parallel training wraps)."""
    return policy.imitation_loss(batch)


# -------------------------------------------------------------------------------------------- episodes


def resolve_split(source: Any, *, split: str | None, task_type: str, task: str, body: str | None, cache_dir: Any,
                  field: str, progress: bool, resolve_scenes: bool = True, scene_root: Any = None,
                  workers: int = 1, report: Callable[[str], None] = print, info: dict | None = None,
                  seed: int = 0) -> list:
    """Episodes of ``source`` (path, generate block or ``HomesSource``) of the task type, filtered
    to ``split`` when any episode carries that split; none left is a ``ConfigError`` naming
    ``field``. With ``resolve_scenes`` each episode's portable ``scene_path`` becomes its USD file
    (looked up in ``scene_root``, the dataset's folder, then the shipped scenes), as the eval runner
    does. Generated homes (made with ``workers``) put their figures into ``info``; their
    ``val_seen_episodes`` keeps a subset of the val_seen episodes drawn with ``seed``."""
    from ..tasks.episode import load_episodes
    from ..tasks.scene_roots import resolve_episode_scenes, scene_roots
    from .homes import HomesSource, homes_dataset, seeded_subset

    if isinstance(source, HomesSource):
        episodes, folder, figures = homes_dataset(source, task=task, body=body, cache_dir=cache_dir, progress=progress,
                                                  workers=workers, report=report)
        if info is not None:
            info.update(figures, folder=str(folder))
        dataset_dir = folder / "episodes"
    elif source.path is not None:
        if not Path(source.path).exists():
            raise ConfigError("episode file or folder not found", field=f"{field}.path", file=source.path,
                              expected="an existing JSONL file/folder")
        episodes = load_episodes(source.path)
        dataset_dir = Path(source.path) if Path(source.path).is_dir() else Path(source.path).parent
    else:
        from .cache import generated_episodes

        episodes = generated_episodes(source.generate, task=task, body=body, cache_dir=cache_dir, progress=progress)
        dataset_dir = None
    episodes = [e for e in episodes if e.task_type == task_type]
    if split is not None and any(e.split == split for e in episodes):
        episodes = [e for e in episodes if e.split == split]
        if isinstance(source, HomesSource) and source.val_seen_episodes is not None and split == "val_seen":
            episodes = seeded_subset(episodes, seed, source.val_seen_episodes)
    elif split is not None and episodes and (field == "train" or field.endswith("].train")):  # a 'tasks' entry's too
        raise ConfigError(f"no '{split}' episodes (splits: {sorted({e.split for e in episodes})})", field="train_split")
    if not episodes:
        raise ConfigError(f"empty split: no '{task_type}' episodes", field=field, expected="at least one episode")
    return resolve_episode_scenes(episodes, scene_roots(scene_root, dataset_dir)) if resolve_scenes else episodes


# -------------------------------------------------------------------------------------------- trainer


class Trainer:
    """Runs one ``TrainConfig`` (``mode: il`` or ``mode: dagger``); see the module docstring."""

    def __init__(self, cfg: TrainConfig, *, scene_loader: Callable | None = None, progress: bool = True,
                 report: Callable[[str], None] = print):
        from ..run.episodes import resolve_settings
        from ..run.setup import EpisodeSetup

        self.cfg, self.scene_loader, self.progress, self.report = cfg, scene_loader, progress, report
        self.out = Path(cfg.out)
        # what the episodes of each task are played under (a multi-task run's ``tasks``; else the one ``task``)
        self.setups = {name: EpisodeSetup.of(cfg, task=spec.task if spec else cfg.task)
                       for name, spec in zip(cfg.task_names(), cfg.tasks or [None])}
        self.task_settings = {name: resolve_settings(s) for name, s in self.setups.items()}
        self.settings = next(iter(self.task_settings.values()))
        self._task_of: dict[int, str] = {}  # id(episode) -> task name (multi-task runs)
        self.val_task: dict[str, str] = {}  # val split key -> task name
        self.sensor_specs = cfg.sensor_specs()
        self.layout = sensor_layout(self.sensor_specs)
        self.device = resolve_device(cfg.device)
        self.ranks = current_ranks(cfg, self.device)  # LocalRank, or this process's rank under torchrun
        self.device = self.ranks.device(self.device)
        self.scale = scaling(cfg, self.ranks.world_size)
        if not self.ranks.is_main:
            self.report, self.progress = (lambda s: None), False
        self.last_path, self.best_path = self.out / "last.pt", self.out / "best.pt"
        self.policy: Any = None
        self.optimizer: Any = None
        self.best: dict[str, Any] = {"metric": cfg.validation.metric, "value": None, "tag": None}
        self.global_step = 0
        self.predictor_file: str | None = None  # policy.params.waypoint_predictor: auto, resolved (``run``)
        self.ema: dict[str, torch.Tensor] | None = None  # il.ema: the averaged weights (``_update_ema``)
        self.summary: dict[str, Any] = {"mode": cfg.mode, "policy": cfg.policy.name, "device": str(self.device),
                                        "world_size": self.ranks.world_size,
                                        "effective_batch": self.scale["effective_batch"], "distributed": self.scale,
                                        "render": cfg.render.label()}
        self.provenance: dict[str, Any] = {"mode": cfg.mode}

    # ---------------------------------------------------------------- setup

    def _check_run_folder(self) -> bool:
        """Whether this is a resume; a folder holding another config is a ``ConfigError``."""
        path = self.out / "config.json"
        key = to_jsonable(self.cfg.run_key())
        if path.is_file():
            previous = json.loads(path.read_text(encoding="utf-8"))
            if previous.get("run_key") != key:
                raise ConfigError("the output folder holds a run with a different config", field="out", file=path,
                                  expected="a new 'out' folder, or the same config to resume")
        self.out.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, {"run_key": key, "config": self.cfg.to_dict()})
        return self.last_path.is_file()

    def _episodes(self) -> tuple[list, dict[str, list]]:
        cfg = self.cfg
        if cfg.tasks:  # one model on a mix of tasks: each task's episodes with its settings
            train, val = [], {}
            for i, spec in enumerate(cfg.tasks):
                eps, held_out = self._task_episodes(spec.name, spec.task, spec.train, spec.val, f"tasks[{i}].")
                train += eps
                self._task_of.update({id(e): spec.name for e in eps})
                for split, v in held_out.items():
                    val[f"{spec.name}/{split}"] = v
                    self.val_task[f"{spec.name}/{split}"] = spec.name
            self.summary["tasks_train_episodes"] = {n: sum(1 for e in train if self._task_of[id(e)] == n)
                                                    for n in cfg.task_names()}
        else:
            train, val = self._task_episodes(cfg.task, cfg.task, cfg.train, cfg.val, "")
            self.val_task = {split: cfg.task for split in val}
        from .homes import check_disjoint_homes, held_out_scenes

        check_disjoint_homes(train, held_out_scenes(val), cache_dir=cfg.cache.dir)
        return train, val

    def _task_episodes(self, name: str, task: str, source: Any, val: dict[str, Any], field: str) -> tuple[list, dict[str, list]]:
        """(train episodes, {split: episodes}) of one task with that task's settings."""
        cfg = self.cfg
        common = dict(task_type=self.task_settings[name].task_type, task=task, body=cfg.body, cache_dir=cfg.cache.dir,
                      progress=self.progress, resolve_scenes=self.scene_loader is None, scene_root=cfg.scene_root,
                      seed=cfg.seed)
        homes: dict = {}
        train = resolve_split(source, split=cfg.train_split, field=f"{field}train", workers=cfg.workers, report=self.report,
                              info=homes, **common)
        if homes:  # a multi-task run: per task
            self.summary.setdefault("homes", {}).update({name: homes} if cfg.tasks else homes)
        held_out = {split: resolve_split(src, split=split, field=f"{field}val.{split}", **common) for split, src in val.items()}
        return train, held_out

    def _groups(self, episodes: list) -> list[tuple[str, Any, list]]:
        """``episodes`` grouped by task, in the config's order: (name, settings, episodes)."""
        if not self.cfg.tasks:
            return [(self.cfg.task, self.settings, list(episodes))]
        groups = [(n, self.task_settings[n], [e for e in episodes if self._task_of[id(e)] == n]) for n in self.cfg.task_names()]
        return [g for g in groups if g[2]]

    def _collection_settings(self, settings: Any) -> Any:
        """A DAgger round's run settings: the task's, with ``dagger.max_steps`` as the step limit when lower."""
        from dataclasses import replace

        cap = self.cfg.dagger.max_steps
        return settings if cap is None or cap >= settings.max_steps else replace(settings, max_steps=int(cap))

    def _new_optimizer(self) -> None:
        self.optimizer = torch.optim.Adam([p for p in self.policy.parameters() if p.requires_grad], lr=self.scale["lr"],
                                          weight_decay=self.cfg.il.weight_decay)

    def _save(self, path: Path, **extra: Any) -> None:
        """Write a checkpoint; with ``il.ema`` its weights are the average and ``raw_state`` the trained ones."""
        if not self.ranks.is_main:  # one writer
            return
        extra["distributed"] = self.scale
        extra = {"optimizer": self.optimizer.state_dict() if self.optimizer is not None else None,
                 "best": self.best, "global_step": self.global_step, "provenance": self.provenance, **extra}
        if self.ema is None:
            save_checkpoint(path, self.policy, config=self.cfg.to_dict(), extra=extra, run=self.out)
            return
        with self._averaged() as raw:
            save_checkpoint(path, self.policy, config=self.cfg.to_dict(), extra={**extra, "raw_state": raw},
                            run=self.out)

    def _update_ema(self) -> None:
        """Fold the weights after an optimizer step into the average (``il.ema``; started on the first step)."""
        decay = self.cfg.il.ema
        if not decay:
            return
        state = self.policy.state_dict()
        if self.ema is None:
            self.ema = {k: v.detach().clone() for k, v in state.items()}
            return
        d = min(decay, (1 + self.global_step) / (10 + self.global_step))
        with torch.no_grad():
            for k, v in state.items():
                if v.is_floating_point():
                    self.ema[k].mul_(d).add_(v.detach(), alpha=1 - d)
                else:
                    self.ema[k].copy_(v)

    @contextmanager
    def _averaged(self):
        """Context: the policy holds the averaged weights (``il.ema``), the trained ones restored after;
        yields a copy of the trained weights (None without an average)."""
        if self.ema is None:
            yield None
            return
        raw = {k: v.detach().clone() for k, v in self.policy.state_dict().items()}
        self.policy.load_state_dict(self.ema)
        try:
            yield raw
        finally:
            self.policy.load_state_dict(raw)

    def _restore_average(self, data: dict[str, Any]) -> None:
        """After loading a checkpoint's weights into the policy: with ``raw_state`` (``il.ema``) those
        weights are the average, so keep them as it and continue from the trained ones."""
        self.ema = None
        if isinstance(data.get("raw_state"), dict):
            self.ema = {k: v.detach().clone() for k, v in self.policy.state_dict().items()}
            self.policy.load_state_dict(data["raw_state"])

    def observation(self, task: str | None) -> dict[str, Any] | None:
        """The observation setup of a task of a multi-task run (``tasks[i].observation``; None: the policy's own)."""
        return next((t.observation for t in self.cfg.tasks if t.name == task), None)

    def _recipe_predictor(self) -> str | None:
        """``policy.params.waypoint_predictor: auto``: the recipe's predictor (trained once into the
        cache, ``learn.waypoints.train.recipe_predictor``) and its figures in the summary; else None."""
        if (self.cfg.policy.params or {}).get("waypoint_predictor") != "auto":
            return None
        from .waypoints.train import recipe_predictor

        figures = recipe_predictor(seed=self.cfg.seed, cache_dir=self.cfg.cache.dir, body=self.cfg.body,
                                   render=self.cfg.render, progress=self.progress, report=self.report,
                                   context_loader=self.scene_loader)
        self.summary["waypoint_predictor"] = figures
        self.provenance["waypoint_predictor"] = figures["path"]
        return figures["path"]

    def policy_params(self) -> dict[str, Any]:
        """A copy of ``policy.params`` with ``waypoint_predictor: auto`` resolved to its file (the
        config, and so every checkpoint's, keeps ``auto``; checkpoints embed the predictor's weights)."""
        params = copy.deepcopy(dict(self.cfg.policy.params or {}))
        if self.predictor_file is not None:
            params["waypoint_predictor"] = self.predictor_file
        return params

    def teacher_spec(self, task: str | None = None) -> Any:
        """The configured policy's teacher (``VLNPolicy.teacher_spec(params)``), or None for the
        discrete oracle teacher of Seq2Seq / CMA; with ``task``, seeing that task's observation setup."""
        from dataclasses import replace

        from .policies import POLICIES
        from .waypoints.grid import ObservationSetup

        params = self.policy_params()
        # a built policy may say what its teacher must record beyond its config (e.g. an HNR
        # checkpoint from before grid features: one point per view)
        params.update(self.policy.teacher_overrides() if self.policy is not None else {})  # None: not built yet
        spec = POLICIES.get(self.cfg.policy.name).teacher_spec(params)
        obs = self.observation(task)
        if obs is None:
            return spec
        if spec is None or spec.observation is None:  # a teacher without observation setups
            i = self.cfg.task_names().index(task)
            raise ConfigError(f"an observation setup for {self.cfg.policy.name!r}", field=f"tasks[{i}].observation",
                              expected="a waypoint policy (vlnbert, hnr, gama), or no 'observation'")
        return replace(spec, observation=ObservationSetup.parse(obs))

    def _agent(self, task: str | None, **kwargs: Any) -> Any:
        """The ``policy`` agent of the current weights, seeing ``task``'s observation setup."""
        from .agent import PolicyAgent

        return PolicyAgent(policy=self.policy, seed=self.cfg.seed, device=str(self.device),
                           observation=self.observation(task), **kwargs)

    def parallel(self) -> dict[str, Any]:
        """``workers`` / ``engine`` / ``address`` / ``job_timeout`` of the config, for ``collect`` and the cache."""
        return self.cfg.parallel().kwargs()

    def _teacher_stores(self, train: list) -> list[StepStore]:
        """The teacher cache of ``train``: one store per task (each with its task's settings)."""
        from .cache import teacher_cache

        stores, stats = [], {}
        for name, settings, eps in self._groups(train):
            store, stats[name] = self.ranks.main_first(lambda eps=eps, settings=settings: teacher_cache(
                eps, sensors=self.sensor_specs, settings=settings, collision_mode=self.cfg.collision_mode,
                mode_params=self.cfg.mode_params, base_dir=self.cfg.cache.dir, chunk_frames=self.cfg.cache.chunk_frames,
                scene_loader=self.scene_loader, backend=self.cfg.backend, progress=self.progress, report=self.report,
                teacher=self.teacher_spec(name if self.cfg.tasks else None), render=self.cfg.cache.render,
                build=self.ranks.is_main, render_settings=self.cfg.render, **self.parallel()))
            stores.append(store)
        self.summary["cache"] = {"tasks": stats} if self.cfg.tasks else stats[self.cfg.task]
        return stores

    # ---------------------------------------------------------------- training epochs

    def train_epochs(self, data: EpisodeBatches, *, epochs: int, coef: float, phase: str, start: tuple[int, int] = (0, 0),
                     round_: int = 0, position: Callable[[int, int], dict] | None = None) -> dict[str, Any]:
        """Train ``epochs`` epochs over ``data`` from ``start`` = (epoch, batch); validates every
        ``validation.every`` epochs (IL phase). Returns throughput and the last epoch's loss/accuracy."""
        from tqdm import tqdm

        cfg = self.cfg
        bs = self.scale["effective_batch"]  # episodes per step over all ranks
        n_batches = math.ceil(len(data) / bs)
        samples, seconds, last = 0, 0.0, {}
        batches_done = epochs_done = 0  # in this call: the budget is checked from the second batch on
        unvalidated = 0  # batches since the last validation
        t_phase = time.perf_counter()
        out_of_time = False
        for epoch in range(start[0], epochs):
            if out_of_time:
                break
            order = data.order(cfg.seed + 1000 * round_, epoch, bs)
            first = start[1] if epoch == start[0] else 0
            bar = tqdm(range(first, n_batches), desc=f"{phase} epoch {epoch + 1}/{epochs}", unit="batch",
                       disable=not self.progress)
            tot_loss = tot_correct = tot_steps = 0.0
            self.policy.train()
            for b in bar:
                if cfg.il.max_seconds is not None and self.ranks.any(
                        batches_done and time.perf_counter() - t_phase > cfg.il.max_seconds):
                    if epochs_done == 0 and start == (0, 0):
                        bar.close()
                        need = (time.perf_counter() - t_phase) / batches_done * n_batches * 1.1
                        raise BudgetTooSmallError(
                            f"{phase}: the time budget il.max_seconds={cfg.il.max_seconds:g} s ran out after {batches_done} "
                            f"of {n_batches} batches of the first epoch: one epoch needs about {need:.0f} s here; "
                            f"give il.max_seconds >= {math.ceil(need)}", phase=phase, minimum_seconds=need)
                    self.report(f"{phase}: time budget il.max_seconds={cfg.il.max_seconds} used up at epoch "
                                f"{epoch + 1} batch {b + 1}")
                    self._save(self.last_path, position=(position or self._il_position)(epoch, b))
                    out_of_time = True
                    break
                try:
                    t0 = time.perf_counter()
                    batch = data.batch(self.ranks.shard(order[b * bs:(b + 1) * bs]), coef, self.device)
                    batch["stop_weight"] = cfg.il.stop_weight
                    loss, correct = self.ranks.model(self.policy, batch_objective)(batch)
                    # N ranks: the loss of this rank's share of the whole batch; value, correct, steps: the whole batch's
                    loss, value, correct, steps = self.ranks.whole_batch(self.policy, loss, batch, correct,
                                                                         float((batch["weights"] > 0).sum()))
                    if not math.isfinite(value):
                        raise TrainingError(
                            f"{phase}: loss is {value} at epoch {epoch + 1} batch {b + 1}: training stopped; "
                            f"the last good checkpoint is kept at {self.last_path} (lower il.lr or check the data)")
                    self.optimizer.zero_grad()
                    loss.backward()
                    if cfg.il.grad_clip > 0:
                        torch.nn.utils.clip_grad_norm_(self.policy.parameters(), cfg.il.grad_clip)
                    self.optimizer.step()
                    self._update_ema()
                    self.global_step += 1
                    batches_done += 1
                    unvalidated += 1
                    dt = time.perf_counter() - t0
                    samples += int(steps)
                    seconds += dt
                    tot_loss += value * steps
                    tot_correct += correct
                    tot_steps += steps
                    bar.set_postfix(loss=f"{value:.3f}", acc=f"{correct / max(steps, 1):.2f}")
                    if self.global_step % cfg.il.checkpoint_every == 0:
                        self._save(self.last_path, position=(position or self._il_position)(epoch, b + 1))
                except KeyboardInterrupt:
                    self._save(self.last_path, position=(position or self._il_position)(epoch, b))
                    self.report(f"interrupted: saved {self.last_path} at epoch {epoch + 1} batch {b + 1}; run the same "
                                "command again to resume")
                    raise
            bar.close()
            if tot_steps:
                last = {"loss": tot_loss / tot_steps, "accuracy": tot_correct / tot_steps}
                self.logger.log(self.global_step, phase=phase, round=round_, epoch=epoch + 1, loss=last["loss"],
                                accuracy=last["accuracy"], samples_per_s=samples / seconds if seconds else None,
                                world_size=self.ranks.world_size, effective_batch=bs, lr=self.scale["lr"])
            if out_of_time:
                break
            epochs_done += 1
            self._save(self.last_path, position=(position or self._il_position)(epoch + 1, 0))
            if phase == "il" and (epoch + 1) % cfg.validation.every == 0:
                self._validate_and_keep(f"epoch_{epoch + 1:03d}", last.get("accuracy") or 0.0,
                                        position=(position or self._il_position)(epoch + 1, 0))
                unvalidated = 0
        return {"samples": samples, "seconds": round(seconds, 3), "stopped_by_budget": out_of_time,
                "loss": None, "accuracy": None,
                "samples_per_s": round(samples / seconds, 2) if seconds else None, "unvalidated_batches": unvalidated,
                **last}

    def _il_position(self, epoch: int, batch: int) -> dict[str, Any]:
        return {"phase": "il", "epoch": epoch, "batch": batch}

    # ---------------------------------------------------------------- validation

    def validate(self, tag: str) -> dict[str, dict[str, Any]]:
        """Evaluate the current weights on each ``val`` split (its first ``validation.limit``
        episodes, ``run.evaluate``); metrics per split. The records and summary of each split are
        kept in ``val/<tag>/<split>/`` (``episodes.jsonl``, ``summary.json``)."""
        results = {}
        for name, episodes in self.val_episodes.items():
            task = self.val_task[name]
            limit = self.cfg.validation.limit
            got = self._evaluate(task, episodes[:limit] if limit is not None else episodes, self.out / "val" / tag / name,
                                 self._agent(task, threads=None), envs=self.cfg.validation.envs)
            results[name] = got.summary["overall"]["means"]
        return results

    def _evaluate(self, task: str, episodes: list, folder: Path, agent: Any, *, envs: int = 1) -> Any:
        """``run.evaluate`` of ``episodes`` under ``task``'s setup with ``agent``; its records and
        summary are written to ``folder`` (``episodes.jsonl``, ``summary.json``)."""
        from ..core.io import write_jsonl_atomic
        from ..run.evaluation import evaluate

        got = evaluate(self.setups[task], episodes, agent, envs=envs, seed=self.cfg.seed, scene_loader=self.scene_loader)
        write_jsonl_atomic(folder / "episodes.jsonl", got.records)
        write_json_atomic(folder / "summary.json", got.summary)
        return got

    def task_report(self) -> dict[str, Any]:
        """Multi-task runs: the selected weights (``best.pt``) evaluated on every split of every task
        (all its episodes) -> ``tasks.json`` {task: {split: {episodes, SR, SPL, nDTW, NE, OSR}}} and,
        for a policy with a mixture of experts (``gama``), the experts fired per task and decision
        step (``gama.expert_usage`` over the splits' episode records) -> ``expert_usage.json`` and
        ``expert_usage.png``."""
        ckpt = self.best_path if self.best_path.is_file() else self.last_path
        self.policy.load_state_dict(read_checkpoint(ckpt)["state_dict"])
        report: dict[str, Any] = {"checkpoint": str(ckpt), "tasks": {}}
        records: dict[str, list] = {name: [] for name in self.cfg.task_names()}
        for key, episodes in self.val_episodes.items():
            name, split = key.split("/", 1)
            got = self._evaluate(name, episodes, self.out / "tasks" / name / split, self._agent(name))
            means = got.summary["overall"]["means"]
            report.setdefault("observation", {})[name] = self.observation(name) or {"view": "panoramic"}
            report["tasks"].setdefault(name, {})[split] = {
                "episodes": got.summary["overall"]["episodes"],
                **{m: (round(float(means[m]), 4) if means.get(m) is not None else None) for m in ("SR", "SPL", "nDTW", "NE", "OSR")}}
            records[name] += got.records
            m = report["tasks"][name][split]
            self.report(f"[tasks] {name} {split}: SR {m['SR'] or 0:.3f} SPL {m['SPL'] or 0:.3f} ({m['episodes']} episodes)")
        report.update(self.policy.multitask_report({n: r for n, r in records.items() if r}, self.out))
        write_json_atomic(self.out / "tasks.json", to_jsonable(report))
        return report

    def _validate_and_keep(self, tag: str, accuracy: float, *, position: dict, **log_extra: Any) -> dict | None:
        """Validate and keep the best checkpoint: rank 0 alone (validation runs once), the others wait."""
        return self.ranks.main_only(lambda: self._validate_and_keep_main(tag, accuracy, position=position, **log_extra))

    def _validate_and_keep_main(self, tag: str, accuracy: float, *, position: dict, **log_extra: Any) -> dict | None:
        cfg = self.cfg
        with self._averaged():
            results = self.validate(tag) if self.val_episodes else {}
        split = cfg.validation.split or next(iter(results), None)
        for name, m in results.items():
            self.logger.log(self.global_step, phase="val", val_split=name, **{f"val_{k}": m.get(k) for k in
                                                                              ("SR", "SPL", "nDTW", "NE", "OSR")}, **log_extra)
            self.report(f"[{tag}] {name}: SR {m.get('SR', 0):.3f} SPL {m.get('SPL', 0):.3f} nDTW {m.get('nDTW', 0):.3f}")
        if cfg.tasks and split is not None:  # multi-task: the mean over the tasks that hold the split
            split = cfg.validation.split or split.split("/", 1)[1]
            got = [m.get(cfg.validation.metric) for key, m in results.items() if key.split("/", 1)[1] == split]
            value = None if cfg.validation.metric == "accuracy" or not got or None in got else float(np.mean(got))
            value = accuracy if cfg.validation.metric == "accuracy" else value
        else:
            value = accuracy if cfg.validation.metric == "accuracy" or split is None else results[split].get(cfg.validation.metric)
        self.summary.setdefault("validation", []).append({"tag": tag, "train_accuracy": accuracy, **results})
        if value is None:
            return results
        better = (self.best["value"] is None or
                  (value < self.best["value"] if cfg.validation.metric in LOWER_IS_BETTER else value > self.best["value"]))
        if better:
            self.best = {"metric": cfg.validation.metric, "value": float(value), "tag": tag, "split": split}
            self._save(self.best_path, position=position)
            self._save(self.last_path, position=position)
        return results

    # ---------------------------------------------------------------- runs

    def run(self) -> dict[str, Any]:
        """Run the configured mode; returns (and writes) ``summary.json``."""
        import random

        threads = seed_torch(self.cfg.seed, self.cfg.threads, jobs=declared_jobs())
        self.summary["device_info"] = device_info(self.device)
        self.summary["torch_threads"] = {"requested": self.cfg.threads, "threads": threads}
        random.seed(self.cfg.seed)
        self.ranks.check_agreement(self.cfg)  # ranks with another config or code: one line on every rank
        init = self._read_init() if self.cfg.init else None  # a bad init fails before anything is written
        resume = self.ranks.main_first(self._check_run_folder, others=self.last_path.is_file)
        train, self.val_episodes = self.ranks.main_first(self._episodes)  # rank 0 generates, the others read
        self.report(describe(self.scale, self.ranks.backend))
        self.train_episodes = train
        self.provenance = {"mode": self.cfg.mode, "train_episodes": len(train), "seed": self.cfg.seed,
                           **({"init": str(self.cfg.init), "init_tensors_sha256": init["tensors_sha256"]} if init else {})}
        self.predictor_file = self.ranks.main_first(self._recipe_predictor)  # rank 0 trains it, the others read
        self.logger = RunLogger(self.out, self.report) if self.ranks.is_main else NullLogger()
        try:
            result = self._run_dagger(train, resume, init) if self.cfg.mode == "dagger" else self._run_il(train, resume, init)
        finally:
            self.logger.close()
        if not self.ranks.is_main:
            self.summary.update(result)
            return self.summary
        if not self.best_path.is_file() and self.last_path.is_file():  # the README's best.pt exists after every run
            from ..core.io import write_bytes_atomic

            write_bytes_atomic(self.best_path, self.last_path.read_bytes())
            self.best = {**self.best, "tag": "last", "value": None}
            self.report(f"no validation ran ({self.cfg.validation.metric} every {self.cfg.validation.every} epochs): "
                        f"{self.best_path} holds the last weights")
        self.summary.update(result, best=self.best, checkpoint=str(self.best_path if self.best_path.is_file() else self.last_path))
        if self.cfg.tasks:
            self.summary["tasks"] = self.task_report()
        write_json_atomic(self.out / "summary.json", to_jsonable(self.summary))
        return self.summary

    def _build_or_resume(self, vocab: Vocabulary, init: dict | None) -> dict[str, Any] | None:
        """Policy + optimizer, from ``last.pt`` when resuming (returns its dict), else new / from ``init``."""
        cfg = self.cfg
        if self.last_path.is_file():
            data = read_checkpoint(self.last_path, expected_policy=cfg.policy.name)
            saved = (data.get("distributed") or {}).get("effective_batch", cfg.il.batch_size)
            if saved != self.scale["effective_batch"]:  # the data position counts batches of that size
                raise ConfigError(f"last.pt was saved with an effective batch of {saved} episodes, this launch has "
                                  f"{self.scale['effective_batch']} ({self.ranks.world_size} ranks)", file=self.last_path,
                                  field="distributed.batch", expected=f"the rank count that gives {saved}")
            self.policy = policy_from_checkpoint(data, path=self.last_path, device=self.device)
            self._restore_average(data)
            self._new_optimizer()
            if data.get("optimizer"):
                self.optimizer.load_state_dict(data["optimizer"])
            self.best, self.global_step = data.get("best", self.best), int(data.get("global_step", 0))
            self.report(f"resuming from {self.last_path} at {data.get('position')}")
            return data
        if init is not None:
            self.policy = policy_from_checkpoint(init, path=cfg.init, device=self.device)
        else:
            from .encoder import check_encoders, resolve_auto_encoders

            # {type: pretrained, path: auto}: the config (and so every checkpoint's) keeps 'auto'; the
            # policy is built from the resolved file, whose trunks its weights then hold
            params = self.policy_params()
            encoder = self.ranks.main_first(lambda: resolve_auto_encoders(
                params, cfg.sensors, self.train_scenes, seed=cfg.seed, cache_dir=cfg.cache.dir,
                progress=self.progress, report=self.report, render=cfg.render))
            if encoder is not None:
                self.summary["encoder"] = encoder
                self.provenance["encoder"] = {k: encoder.get(k) for k in ("path", "train_homes", "held_out_homes")}
            check_encoders(params, cfg.sensors)  # FoV and depth range of pretrained encoders' rigs
            self.policy = build_policy(cfg.policy.name, params, vocab, self.layout).to(self.device)
            self.policy.max_instruction_length = cfg.max_instruction_length
            for note in self.policy.notes:
                self.report(note)
        self._new_optimizer()
        return None

    def _run_il(self, train: list, resume: bool, init: dict[str, Any] | None = None) -> dict[str, Any]:
        """Imitation on the teacher stores; with ``init``, a warm start from that checkpoint's weights
        and vocabulary (words it never saw read as unknown), as offline fine-tuning."""
        cfg = self.cfg
        stores = self._teacher_stores(train)
        self.train_scenes = sorted({str(e.scene_path) for e in train})
        texts = {e.episode_id: [i.text for i in e.instructions] or [e.instruction_text] for e in train}
        vocab = Vocabulary.build(t for ts in texts.values() for t in ts)
        data = self._build_or_resume(vocab, init)
        if init is not None and data is None:
            known = Vocabulary.from_dict(init["vocab"])
            unknown = sorted(set(vocab.words) - set(known.words))
            self.summary["init_unknown_words"] = len(unknown)
            self.report(f"IL: warm start from {cfg.init} (its vocabulary of {len(known)} words; {len(unknown)} "
                        f"training words unknown to it" + (f", e.g. {unknown[:5]})" if unknown else ")"))
        start = (0, 0)
        if data is not None:
            pos = data.get("position") or {}
            start = (int(pos.get("epoch", 0)), int(pos.get("batch", 0)))
        coef = inflection_coefficient(stores) if cfg.il.inflection_weight == "auto" else float(cfg.il.inflection_weight)
        data_stores, layout = stores, self.layout
        from .features import feature_store, frozen_trunks

        if cfg.cache.features and frozen_trunks(self.policy):  # frozen trunks: train from their cached features
            built = [self.ranks.main_first(lambda store=store: feature_store(
                store, self.policy, base_dir=cfg.cache.dir, device=self.device, chunk_frames=cfg.cache.chunk_frames,
                report=self.report, build=self.ranks.is_main)) for store in stores]
            data_stores = [b[0] for b in built]
            self.summary["feature_cache"] = built[0][1] if len(built) == 1 else [b[1] for b in built]
            layout = data_stores[0].manifest["sensors"]
        batches = EpisodeBatches(data_stores, self.policy.vocab, cfg.max_instruction_length, layout,
                                 texts if cfg.il.all_instructions else None, batching=self.batching)
        weighted = self.policy.uses_step_weights
        paths, steps = sum(len(s) for s in stores), sum(s.num_steps for s in stores)
        self.report(f"IL: {len(batches)} episodes" + (f" (every instruction of {paths} paths)" if cfg.il.all_instructions
                                                       else "") + f", {steps} steps, vocabulary {len(self.policy.vocab)} words, "
                    + (f"inflection weight {coef:.2f}, " if weighted else "uniform step weights, ") + f"device {self.device}"
                    + (", from cached features" if data_stores is not stores else "")
                    + (f", tasks {cfg.task_names()}" if cfg.tasks else ""))
        stats = self.train_epochs(batches, epochs=cfg.il.epochs, coef=coef, phase="il", start=start)
        if stats["unvalidated_batches"] and self.val_episodes and cfg.validation.metric != "accuracy":
            # the weights IL ended with (its budget, or a last epoch between validations) are a
            # candidate too (selected on the validation split)
            self._validate_and_keep("final", stats.get("accuracy") or 0.0, position=self._il_position(cfg.il.epochs, 0))
        return {"il": {**stats, "inflection_weight": coef if weighted else None, "episodes": len(batches),
                       "steps": steps, "batching": self.batching}}

    @property
    def batching(self) -> str:
        """The IL batches' formation (``il_batching``)."""
        return il_batching(self.cfg.il.batching, self.policy)

    def _read_init(self) -> dict[str, Any]:
        """The DAgger init checkpoint; another policy type, sensor rig or instruction length is a ``ConfigError``."""
        cfg = self.cfg
        init = read_checkpoint(cfg.init, expected_policy=cfg.policy.name)
        mine = content_key(to_jsonable(cfg.model_key()), self.out, relative_too=True)  # the files, not where they lie
        theirs = content_key({k: (init.get("config") or {}).get(k) for k in mine}, Path(cfg.init).parent,
                             (init.get("provenance") or {}).get("files"))
        if theirs != mine:
            diff = sorted(k for k in mine if mine[k] != theirs[k])
            raise ConfigError(f"the init checkpoint was trained with different {diff}: {[theirs[k] for k in diff]}",
                              field=diff[0], file=cfg.init, expected=f"{[mine[k] for k in diff]} as in this config")
        return init

    def _run_dagger(self, train: list, resume: bool, init: dict[str, Any]) -> dict[str, Any]:
        from .collect import collect

        cfg = self.cfg
        data = self._build_or_resume(None, init)
        stores = self._teacher_stores(train) if cfg.dagger.include_teacher_data else []
        agg_root = self.out / "dagger_aggregate"
        start_round = 1
        if data is not None and (data.get("position") or {}).get("phase") == "dagger":
            pos = data["position"]
            start_round = int(pos["round"]) + 1

            def truncated() -> StepStore:
                store = StepStore(agg_root)
                truncate_store(store, int(pos["aggregate_episodes"]))
                return store

            aggregate = self.ranks.main_first(truncated, others=lambda: StepStore(agg_root))  # rank 0 truncates
            # an unfinished round restarts from the weights its collection used
            restart = self.out / f"round_{start_round - 1:02d}.pt" if start_round > 1 else Path(cfg.init)
            saved = read_checkpoint(restart)
            self.policy.load_state_dict(saved["state_dict"])
            self._restore_average(saved)
            self._new_optimizer()  # and the optimizer as it was then (fresh before round 1), as in an uninterrupted run
            if start_round > 1 and saved.get("optimizer"):
                self.optimizer.load_state_dict(saved["optimizer"])
            self.report(f"DAgger: resuming at round {start_round} from {restart}")
        else:
            teacher = self.teacher_spec()
            aggregate = self.ranks.main_first(lambda: StepStore.create(
                agg_root, key={"init": str(cfg.init)}, sensors=self.layout, chunk_frames=cfg.cache.chunk_frames,
                extra_fields=teacher.extra_fields if teacher is not None else None), others=lambda: StepStore(agg_root))
        rounds = []
        log_path = self.out / "dagger.jsonl"
        for r in range(start_round, cfg.dagger.rounds + 1):
            beta = cfg.dagger.p ** r
            rng = np.random.default_rng([cfg.seed, r])
            episodes = train if cfg.dagger.episodes is None or cfg.dagger.episodes >= len(train) else \
                [train[i] for i in sorted(rng.choice(len(train), cfg.dagger.episodes, replace=False))]

            def collect_round(r: int = r, beta: float = beta, episodes: list = episodes) -> dict:  # rank 0 alone
                self.policy.eval()
                parts = [collect(eps, settings=self._collection_settings(settings), sensors=self.sensor_specs, collision_mode=cfg.collision_mode,
                                 store=aggregate, scene_loader=self.scene_loader, mode_params=cfg.mode_params,
                                 learner=self._agent(name if cfg.tasks else None, threads=None),
                                 beta=beta, seed=cfg.seed + r, backend=cfg.backend, progress=self.progress,
                                 desc=f"dagger round {r} (beta {beta:.3f})" + (f" {name}" if cfg.tasks else ""),
                                 teacher=self.teacher_spec(name if cfg.tasks else None),
                                 render_settings=cfg.render, **self.parallel())
                         for name, settings, eps in self._groups(episodes)]
                got = parts[0] if len(parts) == 1 else merge_collected(parts)
                aggregate.close()
                info = {"round": r, "beta": round(beta, 6), "collected_steps": got["steps"], "collected_episodes": got["episodes"],
                        "aggregated_steps": aggregate.num_steps, "aggregated_episodes": len(aggregate),
                        "env_steps_per_s": got["steps_per_s"],
                        "collection_SR": round(float(np.mean([rec["metrics"]["SR"] or 0.0 for rec in got["records"]])), 4)}
                self.report(f"DAgger round {r}: beta {beta:.3f}, collected {got['steps']} steps "
                            f"({got['steps_per_s']} env steps/s), aggregate {aggregate.num_steps} steps")
                self.logger.log(self.global_step, phase="dagger", round=r, beta=beta, collected_steps=got["steps"],
                                aggregated_steps=aggregate.num_steps, env_steps_per_s=got["steps_per_s"])
                return info

            # rollouts on rank 0 (its parallel engine), aggregated once; every rank then trains on the aggregate
            info = self.ranks.share(self.ranks.main_first(collect_round, others=lambda: None))
            aggregate = aggregate if self.ranks.is_main else StepStore(agg_root)
            all_stores = stores + [aggregate]
            coef = inflection_coefficient(all_stores) if cfg.il.inflection_weight == "auto" else float(cfg.il.inflection_weight)
            batches = EpisodeBatches(all_stores, self.policy.vocab, cfg.max_instruction_length, self.layout,
                                     batching=self.batching)

            def position(epoch: int, batch: int, r: int = r) -> dict:  # mid-round: the round restarts on resume
                return {"phase": "dagger", "round": r - 1, "aggregate_episodes": len(aggregate) - info["collected_episodes"]}

            stats = self.train_epochs(batches, epochs=cfg.dagger.epochs, coef=coef, phase="dagger", round_=r,
                                      position=position)
            done_pos = {"phase": "dagger", "round": r, "aggregate_episodes": len(aggregate)}
            info.update(train_samples_per_s=stats["samples_per_s"], train_accuracy=stats["accuracy"],
                        train_loss=stats["loss"])
            self._save(self.last_path, position=done_pos)
            self._save(self.out / f"round_{r:02d}.pt", position=done_pos)
            info["validation"] = self._validate_and_keep(f"round_{r:02d}", stats["accuracy"] or 0.0, position=done_pos)
            if self.ranks.is_main:
                with open(log_path, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(to_jsonable(info)) + "\n")
            rounds.append(info)
        return {"dagger": rounds}


def merge_collected(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One ``collect`` result of several (a DAgger round over several tasks): summed steps and
    episodes, records in order, steps/s over the summed seconds."""
    steps, seconds = sum(p["steps"] for p in parts), sum(p["seconds"] for p in parts)
    return {"episodes": sum(p["episodes"] for p in parts), "steps": steps, "seconds": round(seconds, 3),
            "steps_per_s": round(steps / seconds, 2) if seconds > 0 else None, "records": [r for p in parts for r in p["records"]]}


def run_training(cfg: TrainConfig, *, scene_loader: Callable | None = None, progress: bool = True,
                 report: Callable[[str], None] = print) -> dict[str, Any]:
    """Run ``cfg`` (IL or DAgger; a policy tagged ``OWN_LOOP``, e.g. ``graph_nf``, runs its class's
    ``run_training``); returns the summary (also ``<out>/summary.json``)."""
    from .policies import POLICIES
    from .policies_registry import OWN_LOOP

    if POLICIES.has_tag(cfg.policy.name, OWN_LOOP):
        return POLICIES.get(cfg.policy.name).run_training(cfg, scene_loader=scene_loader, progress=progress, report=report)
    return Trainer(cfg, scene_loader=scene_loader, progress=progress, report=report).run()
