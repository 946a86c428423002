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

The phases are mixed in from their modules: ``imitation`` (the epoch loop and IL), ``dagger`` and
``validation`` (validation and checkpoint selection); batches come from ``batching``, episodes from
``splits``, the log from ``run_log``.
"""
from __future__ import annotations

import json
import logging
import copy
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable

import torch

from ..core.errors import ConfigError
from ..core.io import to_jsonable, write_json_atomic
from . import seed_torch
from .checkpoint import device_info, policy_from_checkpoint, read_checkpoint, resolve_device, save_checkpoint
from .config import TrainConfig
from .dagger import DaggerPhase
from .distributed import NullLogger, current as current_ranks, describe, scaling
from .imitation import ImitationPhase
from .policies import build_policy
from .run_log import RunLogger
from .splits import resolve_split
from .store import StepStore, sensor_layout
from .validation import Validation
from .vocab import Vocabulary

log = logging.getLogger(__name__)


def declared_jobs() -> int:
    """Trainings declared to run side by side on this machine (``$VLNVERSE_JOBS``, default 1): what
    ``threads: auto`` shares the cores among. A value that is not a positive integer is a ``ConfigError``."""
    import os

    value = os.environ.get("VLNVERSE_JOBS", "1").strip() or "1"
    if not value.isdigit() or int(value) < 1:
        raise ConfigError(f"got {value!r}", field="VLNVERSE_JOBS", expected="a positive integer (trainings run side by side)")
    return int(value)


class Trainer(ImitationPhase, DaggerPhase, Validation):
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
        """(train episodes, {split: episodes}) of one task with that task's settings; the train
        episodes must be worded in the config's ``language``."""
        from ..tasks.instructions.languages import check_training_language

        cfg = self.cfg
        common = dict(task_type=self.task_settings[name].task_type, task=task, body=cfg.body, cache_dir=cfg.cache.dir,
                      progress=self.progress, resolve_scenes=self.scene_loader is None, scene_root=cfg.scene_root,
                      seed=cfg.seed, overrides=cfg.language_overrides())
        homes: dict = {}
        train = resolve_split(source, split=cfg.train_split, field=f"{field}train", workers=cfg.workers, report=self.report,
                              info=homes, **common)
        check_training_language(train, cfg.language, field="language", file=getattr(source, "path", None))
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
            from .encoder.files import check_encoders
            from .encoder.pretraining import resolve_auto_encoders

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


def run_training(cfg: TrainConfig, *, scene_loader: Callable | None = None, progress: bool = True,
                 report: Callable[[str], None] = print) -> dict[str, Any]:
    """Run ``cfg`` (IL or DAgger; a policy tagged ``OWN_LOOP``, e.g. ``graph_nf``, runs its class's
    ``run_training``); returns the summary (also ``<out>/summary.json``)."""
    from .policies import POLICIES
    from .policies_registry import OWN_LOOP

    if POLICIES.has_tag(cfg.policy.name, OWN_LOOP):
        return POLICIES.get(cfg.policy.name).run_training(cfg, scene_loader=scene_loader, progress=progress, report=report)
    return Trainer(cfg, scene_loader=scene_loader, progress=progress, report=report).run()
