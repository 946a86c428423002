"""Validation and checkpoint selection of ``Trainer``: the current weights evaluated in memory
(``run.evaluate``) on each ``val`` split, the best by ``validation.metric`` kept as ``best.pt``, and a
multi-task run's per-task report."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..core.io import to_jsonable, write_json_atomic
from .checkpoint import read_checkpoint

LOWER_IS_BETTER = ("NE", "TL")


class Validation:
    """Mixed into ``learn.trainer.Trainer``: its ``cfg``, ``val_episodes``, ``val_task``, ``setups``,
    ``best`` and checkpoint methods."""

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

