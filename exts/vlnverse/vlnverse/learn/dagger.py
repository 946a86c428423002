"""The DAgger phase of ``Trainer`` (``mode: dagger``): rounds of rollouts by the learner mixed with
the teacher (β = ``dagger.p`` ** round), aggregated into ``dagger_aggregate/`` and trained on, each
round resumable; from the frozen trunks' cached features, as IL, when ``dagger.features``."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ..core.errors import ConfigError
from ..core.precision import timed_rate
from ..core.io import to_jsonable
from .batching import EpisodeBatches, inflection_coefficient
from .checkpoint import content_key, read_checkpoint
from .store import StepStore, truncate_store


#: the run folder's feature store of the aggregate (rebuilt each round)
AGGREGATE_FEATURES = "dagger_features"


class DaggerPhase:
    """Mixed into ``learn.trainer.Trainer``: its ``cfg``, ``policy``, ``ranks``, episode groups,
    teacher, agent and checkpoint methods, and the IL epoch loop (``train_epochs``)."""

    def _collection_settings(self, settings: Any) -> Any:
        """A DAgger round's run settings: the task's, with ``dagger.max_steps`` as the step limit when lower."""
        from dataclasses import replace

        cap = self.cfg.dagger.max_steps
        return settings if cap is None or cap >= settings.max_steps else replace(settings, max_steps=int(cap))
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
        from_features = cfg.dagger.features and self.trains_from_features
        train_stores, layout = stores, self.layout
        if from_features and stores:  # the teacher stores' features: IL's, in the same cache
            train_stores, layout, _ = self.feature_stores(stores, [cfg.cache.dir] * len(stores))
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
            data_stores = train_stores + [aggregate]
            if from_features:  # this round's aggregate through the frozen trunks, in the run's own folder
                got, layout, built = self.feature_stores([aggregate], [self.out / AGGREGATE_FEATURES], fresh=True)
                data_stores = train_stores + got
                info["feature_cache"] = {k: built[0][k] for k in ("status", "steps", "seconds", "steps_per_s")
                                         if k in built[0]}
            batches = EpisodeBatches(data_stores, self.policy.vocab, cfg.max_instruction_length, layout,
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
    steps = sum(p["steps"] for p in parts)
    seconds, steps_per_s = timed_rate(steps, sum(p["seconds"] for p in parts))
    return {"episodes": sum(p["episodes"] for p in parts), "steps": steps, "seconds": seconds,
            "steps_per_s": steps_per_s, "records": [r for p in parts for r in p["records"]]}
