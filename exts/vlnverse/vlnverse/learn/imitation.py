"""The imitation-learning phase of ``Trainer``: the epoch loop (time budget, NaN guard, checkpoints on
schedule and on Ctrl-C, validation every ``validation.every`` epochs) and the IL run on the teacher
stores (optionally from cached features of frozen trunks, or warm-started from ``init``)."""
from __future__ import annotations

import math
import time
from typing import Any, Callable

import torch

from ..core.precision import timed_rate
from .batching import EpisodeBatches, batch_objective, il_batching, inflection_coefficient
from .errors import BudgetTooSmallError, TrainingError
from .vocab import Vocabulary


class ImitationPhase:
    """Mixed into ``learn.trainer.Trainer``: its ``cfg``, ``policy``, ``optimizer``, ``ranks``,
    ``scale``, ``logger`` and checkpoint methods."""

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
        seconds, samples_per_s = timed_rate(samples, seconds)
        return {"samples": samples, "seconds": seconds, "stopped_by_budget": out_of_time,
                "loss": None, "accuracy": None, "samples_per_s": samples_per_s, "unvalidated_batches": unvalidated,
                **last}

    def _il_position(self, epoch: int, batch: int) -> dict[str, Any]:
        return {"phase": "il", "epoch": epoch, "batch": batch}


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
        if self.trains_from_features:
            data_stores, layout, built = self.feature_stores(stores, [cfg.cache.dir] * len(stores))
            self.summary["feature_cache"] = built[0] if len(built) == 1 else built
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
    def trains_from_features(self) -> bool:
        """Whether IL trains from the frozen visual trunks' cached features (``cache.features``)."""
        from .features import frozen_trunks

        return bool(self.cfg.cache.features) and frozen_trunks(self.policy)

    def feature_stores(self, stores: list, base_dirs: list, fresh: bool = False) -> tuple[list, list, list[dict]]:
        """The feature store of each of ``stores`` (built by rank 0 in the matching ``base_dirs``
        entry, the others open it); ``fresh``: rank 0 deletes that folder first. Returns the stores,
        their sensor layout and each one's stats."""
        import shutil

        from .features import feature_store

        def build(store: Any, base_dir: Any) -> tuple:
            if fresh and self.ranks.is_main and base_dir is not None:
                shutil.rmtree(base_dir, ignore_errors=True)
            return feature_store(store, self.policy, base_dir=base_dir, device=self.device,
                                 chunk_frames=self.cfg.cache.chunk_frames, report=self.report, build=self.ranks.is_main)

        built = [self.ranks.main_first(lambda store=store, base=base: build(store, base))
                 for store, base in zip(stores, base_dirs)]
        return [b[0] for b in built], built[0][0].manifest["sensors"], [b[1] for b in built]

    @property
    def batching(self) -> str:
        """The IL batches' formation (``il_batching``)."""
        return il_batching(self.cfg.il.batching, self.policy)
