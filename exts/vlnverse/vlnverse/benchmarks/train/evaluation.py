"""``bench train``'s evaluations: one agent on one split and collision mode through the eval runner
(``evaluate``: episode CIs, the clustered ones and what paired comparisons need) and the multi-task
row's agents on every task."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from vlnverse.core.stats import bootstrap_ci

import vlnverse.benchmarks.train.recipe as R

def evaluate(spec, split: str, mode: str, work: Path, seed: int, workers: int, sensors: list, out_name: str,
             body: str | None = None, task: str = "fine_grained", episodes: Path | None = None, render: Any = None,
             envs: int | None = None) -> dict:
    """One agent on one split and collision mode through the eval runner (``body``: a preset name
    or YAML path, default the task's; ``task`` and its ``episodes``, default the rows'
    ``work/<split>.jsonl``; ``render``: the ``RenderConfig`` the cameras draw with, None the
    defaults; ``envs``: batched evaluation, default ``EVAL_ENVS``), into
    ``work/eval/<out_name>/<mode>/<split>``; SR / SPL / nDTW with CIs."""
    from vlnverse.eval.config import EvalConfig, ReportConfig
    from vlnverse.eval.runner import run_eval
    from vlnverse.run.setup import EpisodeSource, RenderConfig, sensor_config

    out = work / "eval" / out_name / mode / split
    cfg = EvalConfig(agent=spec, task=task, episodes=EpisodeSource(path=str(episodes or work / f"{split}.jsonl")),
                     max_steps=R.MAX_STEPS, collision_mode=mode, sensors=[sensor_config(s) for s in sensors], seed=seed, body=body,
                     out=str(out), report=ReportConfig(enabled=False), render=RenderConfig.parse(render, "render"))
    cfg.validate()
    run_eval(cfg, progress=True, print_summary=False, workers=workers, envs=R.EVAL_ENVS if envs is None else envs)
    per = episode_metrics(out)
    return {"episodes": len(per["SR"]), **{m: bootstrap_ci(per[m], seed=seed) for m in R.METRICS}, "seeds": 1,
            **row_design(out)}


def episode_metrics(eval_dir: Path) -> dict[str, list[float]]:
    """Per-episode SR / SPL / nDTW (None counts 0) from an eval run folder's episode records."""
    import json

    from vlnverse.eval.folder import EPISODES_FILE

    out: dict[str, list[float]] = {m: [] for m in R.METRICS}
    with open(eval_dir / EPISODES_FILE, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                metrics = json.loads(line)["metrics"]
                for m in R.METRICS:
                    out[m].append(float(metrics.get(m) or 0.0))
    return out


#: per-home metrics a table row keeps (the eval folder's ``summary.json`` has them all)
ROW_HOME_METRICS = ("episodes", "SR", "SPL", "nDTW", "NE", "TL", "OSR")


def row_design(eval_dir: Path) -> dict:
    """What a table row carries beyond its episode CIs, from the eval run in ``eval_dir``: the
    clustered (by home) intervals, per-home results, the design (homes, episodes, MDE of SR) and
    protocol of its ``summary.json`` (with ``instruction_language`` when its episodes are not in
    the version-1 language: rows on other wordings of the same paths are never paired), and the per-episode ids, homes and metrics (None counts 0)
    that paired comparisons need (``pairwise_comparisons``, ``vlnverse results compare``) with each
    episode's first error (``first_error``: its category, None for a success), ordered by episode
    id as ``results.compare`` orders runs."""
    import json

    from vlnverse.eval.folder import EPISODES_FILE, SUMMARY_FILE
    from vlnverse.results.compare import first_error_category
    from vlnverse.run.records import is_evaluated
    from vlnverse.run.summary import home_of

    summary = json.loads((eval_dir / SUMMARY_FILE).read_text(encoding="utf-8"))
    overall = summary["overall"]
    with open(eval_dir / EPISODES_FILE, encoding="utf-8") as fh:
        records = [r for r in (json.loads(line) for line in fh if line.strip()) if is_evaluated(r)]
    records.sort(key=lambda r: str(r["episode_id"]))  # the log is in finish order: batched runs differ per agent
    return {"clustered": {m: overall["intervals"][m]["clustered"] for m in R.METRICS},
            "per_home": {h: {k: v for k, v in cells.items() if k in ROW_HOME_METRICS}
                         for h, cells in overall["per_home"].items()},
            "design": overall["design"], "protocol": summary["protocol"],
            "per_episode": {"ids": [r["episode_id"] for r in records], "homes": [home_of(r) for r in records],
                            **{m: [float(r["metrics"].get(m) or 0.0) for r in records] for m in R.METRICS},
                            "first_error": [first_error_category(r) for r in records]}}


def evaluate_multitask(trained: dict, tasks: list[dict], results: dict, table: list, work: Path, seed: int,
                       workers: int, device: str) -> dict:
    """The multi-task row's checkpoints on every task's ``MULTITASK_SPLITS`` (Tel-Hop, each task
    with its settings and observation setup; fine-grained: the main table's runs in ``results``),
    per-task table lines appended to ``table``; per agent, what its policy reports on those runs'
    episode records per task (``VLNPolicy.multitask_report``, files in ``work/eval/<agent>``; GAMA:
    the experts fired per task and decision step, ``expert_usage.json`` and ``.png``)."""
    import json

    from vlnverse.eval.folder import EPISODES_FILE
    from vlnverse.learn.checkpoint import policy_from_checkpoint, read_checkpoint
    from vlnverse.run.setup import NamedSpec

    out: dict = {"tasks": [t["name"] for t in tasks],
                 "observation": {t["name"]: t["observation"] or {"view": "panoramic"} for t in tasks},
                 "results": {}, "policy_report": {}}
    for agent, path in trained["checkpoints"].items():
        per_task, records = {}, {}
        for i, t in enumerate(tasks):
            name = t["name"]
            records[name] = []
            for split in R.MULTITASK_SPLITS:
                if i == 0:  # fine-grained: the rows' data, evaluated with every row
                    got, folder = results["telhop"][split][agent], work / "eval" / agent / "telhop" / split
                else:
                    spec = NamedSpec("policy", {"checkpoint": path, "device": device,
                                                **({"observation": t["observation"]} if t["observation"] else {})})
                    got = evaluate(spec, split, "telhop", work, seed, workers, R.SENSORS, f"{agent}/{name}", task=t["task"],
                                   episodes=work / "tasks" / name / f"{split}.jsonl")
                    folder = work / "eval" / agent / name / "telhop" / split
                    table.append({"agent": agent, "task": name, "split": split, "mode": "telhop", **got})
                per_task.setdefault(name, {})[split] = got
                with open(folder / EPISODES_FILE, encoding="utf-8") as fh:
                    records[name] += [json.loads(line) for line in fh if line.strip()]
        out["results"][agent] = per_task
        policy = policy_from_checkpoint(read_checkpoint(path), path=path, device="cpu")
        out["policy_report"][agent] = policy.multitask_report({n: r for n, r in records.items() if r},
                                                              work / "eval" / agent)
    return out
