"""``vlnverse bench train --seeds 0,1,2``: the table as (row, seed) jobs on the parallel engine
(``run``; ``vlnverse bench train`` without ``--seeds`` is ``train.run``'s single serial run).

Each (policy row, training seed) pair is one job of ``core.jobs`` (``--workers N`` jobs at
once on local processes, or on a Ray cluster with ``--engine ray --address HOST:PORT``), and so
is each seed's baselines (random and forward-only). A job trains its row as ``bench train``
does (``train.train_row``: IL, then the DAgger round) and evaluates its agents on val_seen,
val_unseen and test under Tel-Hop (the VLN-BERT row also runs its Table 7 stage), inside its
own folder, with one process (one torch thread; its teacher and feature caches its own, so no
two jobs write one file). Then, unless ``--no-strict``, the learned agent with the best val_seen
SR over seeds (``best_agent``) is evaluated under Strict on val_unseen and test beside random and
forward-only, one job per seed (``strict_job``), as the single run does for its best row. The
single run's render-path figure and multi-task row stay with ``--seed``.

Work folder (``--out FILE.json`` -> ``FILE/``):

- ``work.json``: what made it (``work_identity``: benchmark name and version, package version
  and a hash of the settings that shape the results). A folder made otherwise is refused with one
  line naming the field that differs; ``--rebuild`` deletes it first and says why.
- ``cache/``: the generated training homes (made once, by the driver, before any job).
- ``seeds/s<seed>/``: what a seed's jobs share, made by one job per seed before the row jobs:
  its splits (``train.jsonl`` ... ``test.jsonl``; ``train.split_data``), the pretrained encoder
  and the waypoint predictor when a selected row needs them.
- ``jobs/<row>-s<seed>/``: the row's ``il/``, ``dagger/``, ``eval/`` and ``done.json`` (its
  results). A rerun skips jobs with ``done.json`` and resumes the others (the trainer continues
  from ``last.pt``, the eval runner from its episode records).

A job that raises, or whose process dies (``kill -9``, a lost Ray node), is retried once
(``MAX_ATTEMPTS``; it resumes from its folder); one that still fails is listed under
``failed_jobs`` with its error, on stderr, and in the exit status (1), while the others finish.
The table (``aggregate``; results format 2, so ``vlnverse results compare`` / ``page`` read it)
gives per agent, split and mode the per-seed SR / SPL / nDTW, their mean ± sd over seeds and a
95% interval resampling seeds, homes and episodes (``seeds_ci``: ``core.stats.seeds_ci``), beside
the intervals of the seeds' episodes pooled; rows are compared pairwise on those pooled episodes
(``train.pairwise_comparisons``: only rows with the same seeds pair).
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

from vlnverse.core.provenance import code_revision, revisions_of

from . import train as T

log = logging.getLogger(__name__)

WORK_FILE = "work.json"
DONE_FILE = "done.json"
#: tries per job (the first and one retry, resuming from its folder)
MAX_ATTEMPTS = 2
#: ``benchmarks.train`` constants a job's process takes from the driver's (they shape the results)
CARRIED = ("MAX_STEPS", "BOOTSTRAP_SAMPLES", "RESOLUTION", "SENSORS", "VALIDATION_EVERY")
#: the baselines' job name (random and forward-only, per seed)
BASELINES = "baselines"
#: the per-seed Strict evaluations' job name (random, forward-only and the best learned agent)
STRICT = "strict"
SPLITS = ("val_seen", "val_unseen", "test")


def parse_seeds(text: Any) -> list[int]:
    """``--seeds 0,1,2`` as a list of distinct integers >= 0 (one-line ``ConfigError`` otherwise)."""
    from vlnverse.core.errors import ConfigError

    parts = [p.strip() for p in str(text).split(",")]
    names = [p for p in parts if p]
    if not names:
        raise ConfigError(f"got {text!r}: names no seed", field="--seeds", expected="comma-separated integers, e.g. 0,1,2")
    seeds = []
    for p in names:
        if not p.isdigit():
            raise ConfigError(f"got {p!r} in {text!r}", field="--seeds", expected="integers >= 0, e.g. 0,1,2")
        seeds.append(int(p))
    dupes = sorted({s for s in seeds if seeds.count(s) > 1})
    if dupes:
        raise ConfigError(f"seed {dupes[0]} given twice in {text!r}", field="--seeds", expected="distinct seeds")
    return seeds


def _settings_key(opts: dict) -> dict:
    """The settings that shape a job's results (not how many run at once, nor which rows or seeds)."""
    keep = ("budget", "epochs", "validation_episodes", "homes", "per_home", "val_seen_cap", "encoder", "dagger", "table7")
    out = {k: opts[k] for k in keep}
    if opts["benchmark"] is None:
        out.update(per_held_out=opts["per_held_out"], per_test=opts["per_test"], scale=opts["scale"])
    return out


def work_identity(opts: dict) -> dict:
    """What a work folder's results depend on: the benchmark (name, version), the code version
    (the package's) and ``config``: a hash of the run settings and of the rows' recipe (``POLICY_ROWS``,
    rig, EMA, DAgger round, step budget), with the settings themselves for messages."""
    import vlnverse
    from vlnverse.core.io import to_jsonable

    bench = opts["benchmark"]
    recipe = {"rows": T.POLICY_ROWS, "sensors": T.SENSORS, "il_ema": T.IL_EMA, "dagger": T.DAGGER_ROUND,
              "dagger_lr": T.DAGGER_LR, "dagger_epoch_share": T.DAGGER_EPOCH_SHARE,
              "dagger_episode_share": T.DAGGER_EPISODE_SHARE, "validation_every": T.VALIDATION_EVERY,
              "max_steps": T.MAX_STEPS}
    settings = to_jsonable(_settings_key(opts))
    text = json.dumps({"settings": settings, "recipe": to_jsonable(recipe)}, sort_keys=True)
    return {"benchmark": None if bench is None else bench.name, "benchmark_version": None if bench is None else bench.version,
            "code_version": vlnverse.__version__, "config": hashlib.sha256(text.encode()).hexdigest()[:16],
            "settings": settings}


def check_work(work: Path, identity: dict, rebuild: bool, report: Callable[[str], None]) -> None:
    """Claim ``work`` for ``identity``: a new or empty folder gets ``work.json``; one made with the
    same identity is continued; another is refused in one line naming the differing field, or
    with ``rebuild`` deleted (a line says why) and started afresh."""
    from vlnverse.core.errors import ConfigError
    from vlnverse.core.io import write_json_atomic

    path = work / WORK_FILE
    problem = None
    if path.is_file():
        try:
            made = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            made = {}
        for field in ("benchmark", "benchmark_version", "code_version", "config"):
            if made.get(field) != identity[field]:
                detail = ""
                if field == "config":
                    theirs, mine = made.get("settings") or {}, identity["settings"]
                    diff = sorted(k for k in set(theirs) | set(mine) if theirs.get(k) != mine.get(k))
                    detail = (f" ({diff[0]}: {theirs.get(diff[0])!r} there, {mine.get(diff[0])!r} here)" if diff
                              else " (the rows' recipe changed)")
                problem = (f"{path}: made with {field} {made.get(field)!r}, this run has {identity[field]!r}{detail}",
                           f"work.json {field}")
                break
    elif work.is_dir() and any(work.iterdir()):
        problem = (f"{work} holds files but no {WORK_FILE} (not a 'bench train --seeds' work folder)", WORK_FILE)
    if problem is not None:
        if not rebuild:
            raise ConfigError(problem[0], field=problem[1], expected="the same benchmark, code and settings, "
                              "another --out, or --rebuild to start it afresh")
        report(f"bench train: --rebuild: {problem[0]}; deleting it and starting afresh")
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, identity)


def _portable(opts: dict) -> dict:
    """``opts`` as a job payload carries them (the benchmark by name; reloaded in the worker)."""
    bench = opts["benchmark"]
    return {**opts, "benchmark": None if bench is None else str(bench.path)}


def _restore(opts: dict) -> dict:
    if opts["benchmark"] is None:
        return opts
    from vlnverse.tasks.benchmark import load_benchmark

    return {**opts, "benchmark": load_benchmark(opts["benchmark"])}


def seed_dir(work: Path, seed: int) -> Path:
    return work / "seeds" / f"s{seed}"


def job_key(row: str, seed: int) -> str:
    return f"{row}-s{seed}"


def _marked(path: Path, make: Callable[[], dict]) -> dict:
    """``make()``'s figures, made once: kept in ``path`` and read back on later calls."""
    from vlnverse.core.io import write_json_atomic

    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    got = make()
    write_json_atomic(path, got)
    return got


def prepare_seed(work: Path, opts: dict, seed: int, *, encoder: bool, predictor: bool) -> dict:
    """A seed's shared artefacts in ``seeds/s<seed>/`` (each made once, kept with a marker file):
    its splits, and when asked the pretrained encoder and the waypoint predictor."""
    from vlnverse.learn.homes import check_disjoint_homes, held_out_scenes
    from vlnverse.tasks.episode import load_episodes, save_episodes

    folder = seed_dir(work, seed)
    folder.mkdir(parents=True, exist_ok=True)

    def data() -> dict:
        split_eps, homes = T.split_data(folder, opts, seed)
        check_disjoint_homes(split_eps["train"], held_out_scenes({s: split_eps[s] for s in ("val_unseen", "test")}),
                             cache_dir=folder / "cache")
        for name, eps in split_eps.items():
            save_episodes(folder / f"{name}.jsonl", eps)
        return {"episodes": {k: len(v) for k, v in split_eps.items()}, "train_homes": homes}

    out = {"seed": seed, **_marked(folder / "data.json", data)}
    if encoder:
        out["encoder"] = _marked(folder / "encoder.json", lambda: T.pretrain_encoder(
            folder, load_episodes(folder / "train.jsonl"), seed))
    if predictor:
        out["predictor"] = _marked(folder / "predictor.json",
                                   lambda: T.train_waypoint_predictor(folder, opts["scale"], seed))
    return out


def _copy_splits(source: Path, folder: Path) -> None:
    """The seed's split files into a job's folder (``train_row`` / ``evaluate`` read them there)."""
    from vlnverse.core.io import write_bytes_atomic

    folder.mkdir(parents=True, exist_ok=True)
    for name in ("train", *SPLITS):
        target = folder / f"{name}.jsonl"
        if not target.is_file():
            write_bytes_atomic(target, (source / f"{name}.jsonl").read_bytes())


def row_job(work: Path, opts: dict, row_name: str, seed: int, shared: dict) -> dict:
    """One (row, seed) job in ``jobs/<row>-s<seed>/`` (resumes what a killed try left): the row
    trained (``train.train_row``) and its agents evaluated under Tel-Hop on every split; the
    baselines' job evaluates random and forward-only. Returns (and keeps in ``done.json``) its
    table rows, figures and learning curve."""
    from vlnverse.core.io import to_jsonable, write_json_atomic
    from vlnverse.run.setup import NamedSpec

    folder = work / "jobs" / job_key(row_name, seed)
    _copy_splits(seed_dir(work, seed), folder)
    t0 = time.perf_counter()
    out: dict = {"key": job_key(row_name, seed), "row": row_name, "seed": seed, "code": code_revision()}
    if row_name == BASELINES:
        agents = {"random": (NamedSpec("random"), []), "forward": (NamedSpec("forward"), [])}
    else:
        row = next(r for r in T.POLICY_ROWS if r["name"] == row_name)
        trained = T.train_row(row, folder, opts["budget"], seed, opts["scale"], "auto", 1, opts["dagger"],
                              (shared.get("encoder") or {}).get("path"), opts["epochs"], shared.get("predictor"), None,
                              opts["validation_episodes"])
        out.update(figures=trained["figures"], curve=trained["curve"], checkpoints=trained["checkpoints"])
        agents = {a: (NamedSpec("policy", {"checkpoint": p, "device": "auto"}), T.SENSORS)
                  for a, p in trained["checkpoints"].items()}
    out["seconds_train"] = round(time.perf_counter() - t0, 1)
    table = []
    for split in SPLITS:
        for agent, (spec, sensors) in agents.items():
            got = T.evaluate(spec, split, "telhop", folder, seed, 1, sensors, agent)
            table.append({"agent": agent, "split": split, "mode": "telhop", **got})
    if row_name == "vlnbert" and opts["table7"]:  # its Table 7 stage on this job's folder, as the single run's
        _copy_predictor(Path(shared["predictor"]["path"]), folder / "waypoints" / "predictor.pt")
        results = {"telhop": {}}
        for line in table:
            results["telhop"].setdefault(line["split"], {})[line["agent"]] = line
        out["online_fine_tuning"] = T.table7_stage()(SimpleNamespace(seed=seed, out=None), folder, 1, results, table)
    out.update(table=table, seconds=round(time.perf_counter() - t0, 1))
    out = to_jsonable(out)
    write_json_atomic(folder / DONE_FILE, out)
    return out


def strict_job(work: Path, seed: int, agents: dict) -> dict:
    """A seed's Strict evaluations in ``jobs/strict-s<seed>/``: ``agents`` (``{name: checkpoint}``,
    None for random and forward-only) on val_unseen and test. Returns (and keeps in ``done.json``)
    its table rows and the learned agent it was run for (``best``)."""
    from vlnverse.core.io import to_jsonable, write_json_atomic
    from vlnverse.run.setup import NamedSpec

    folder = work / "jobs" / job_key(STRICT, seed)
    _copy_splits(seed_dir(work, seed), folder)
    table = []
    for split in ("val_unseen", "test"):
        for agent, checkpoint in agents.items():
            spec, sensors = ((NamedSpec(agent), []) if checkpoint is None
                             else (NamedSpec("policy", {"checkpoint": checkpoint, "device": "auto"}), T.SENSORS))
            got = T.evaluate(spec, split, "strict", folder, seed, 1, sensors, agent)
            table.append({"agent": agent, "split": split, "mode": "strict", **got})
    out = to_jsonable({"key": job_key(STRICT, seed), "row": STRICT, "seed": seed,
                       "best": next(a for a, c in agents.items() if c is not None), "table": table})
    write_json_atomic(folder / DONE_FILE, out)
    return out


def best_agent(rows: list[dict]) -> str | None:
    """The learned agent with the best val_seen Tel-Hop SR over seeds (ties: nDTW) of the table
    over seeds (``aggregate``): the one the single run also evaluates under Strict."""
    learned = [r for r in rows if r["split"] == "val_seen" and r["mode"] == "telhop"
               and r["agent"] not in ("random", "forward") and r["seeds_ci"]["SR"]["mean"] is not None]
    if not learned:
        return None
    return max(learned, key=lambda r: (r["seeds_ci"]["SR"]["mean"], r["seeds_ci"]["nDTW"]["mean"] or 0.0))["agent"]


def _copy_predictor(source: Path, target: Path) -> None:
    """The seed's waypoint predictor where the Table 7 stage reads it (``<work>/waypoints/predictor.pt``)."""
    from vlnverse.core.io import write_bytes_atomic

    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(target, source.read_bytes())


def run_job(payload: dict, items: tuple, state: dict, emit: Callable[[str, Any], None]) -> None:
    """The engine's job function (``core.jobs.JobFn``): a seed's preparation or a (row, seed)
    job, with the driver's ``CARRIED`` settings; emits the job's result under its key."""
    for name, value in payload["carried"].items():
        setattr(T, name, value)
    work, opts = Path(payload["work"]), _restore(payload["opts"])
    if payload["kind"] == "seed":
        got = prepare_seed(work, opts, payload["seed"], encoder=payload["encoder"], predictor=payload["predictor"])
    elif payload["kind"] == "strict":
        got = strict_job(work, payload["seed"], payload["agents"])
    else:
        got = row_job(work, opts, payload["row"], payload["seed"], payload["shared"])
    emit(items[0], got)


def _run(jobs: list, parallel: Any, report: Callable[[str], None]) -> tuple[dict, list, int]:
    """Run ``jobs`` (``core.jobs.Job``) with ``parallel``; returns ``({key: result}, failures, retries)``.
    Workers=1 on the local engine runs them here, one after the other, with the same retry."""
    from vlnverse.core.errors import ConfigError, UnknownNameError
    from vlnverse.core.jobs import JobFailure, run_jobs

    results: dict = {}

    def done(key: str, result: Any) -> None:
        results[key] = result
        report(f"bench train: {key} done ({len(results)} of {len(jobs)})")

    if not parallel.inline:
        got = run_jobs(run_job, jobs, on_result=done, parallel=parallel, max_attempts=MAX_ATTEMPTS)
        return results, got.failures, got.retries
    failures, retries = [], 0
    for job in jobs:
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                run_job(job.payload, job.items, {}, done)
                break
            except (ConfigError, UnknownNameError):
                raise
            except Exception as exc:  # noqa: BLE001 - reported with the job's key, the others go on
                error = f"{type(exc).__name__}: {exc}"
                if attempt < MAX_ATTEMPTS:
                    retries += 1
                    report(f"bench train: job {job.key} failed ({error}); retrying (attempt {attempt + 1} of "
                           f"{MAX_ATTEMPTS})")
                else:
                    failures.append(JobFailure(job.key, error, list(job.items), attempt))
    return results, failures, retries


def aggregate(jobs: dict, *, seed: int = 0) -> list[dict]:
    """The table over seeds: per agent, split and mode of the done jobs' table rows (``jobs``:
    ``{key: result}``) a results-format-2 row of the seeds' episodes pooled (episode ids
    ``s<seed>/<id>``; episode and clustered intervals, per-home results and design:
    ``run.summary.design_block``; ``per_episode`` for paired comparisons), with the seeds, their
    per-seed means and ``seeds_ci``: per metric ``core.stats.seeds_ci`` (mean and sd over the
    seeds' means, an interval resampling seeds, then homes, then episodes)."""
    from vlnverse.core.stats import seeds_ci
    from vlnverse.run.summary import design_block

    groups: dict[tuple, list] = {}
    for result in jobs.values():
        for row in result.get("table", []):
            groups.setdefault((row["agent"], row["split"], row["mode"]), []).append((result["seed"], row))
    out = []
    for (agent, split, mode), runs in groups.items():
        runs.sort(key=lambda r: r[0])
        records = [{"episode_id": f"s{s}/{i}", "scene_id": h, "metrics": {m: r["per_episode"][m][k] for m in T.METRICS}}
                   for s, r in runs for k, (i, h) in enumerate(zip(r["per_episode"]["ids"], r["per_episode"]["homes"]))]
        block = design_block(records, seed=seed)
        out.append({"agent": agent, "split": split, "mode": mode, "episodes": len(records), "seeds": len(runs),
                    "seed_list": [s for s, _ in runs], "per_seed": {str(s): {m: r[m]["mean"] for m in T.METRICS}
                                                                   for s, r in runs},
                    "seeds_ci": {m: seeds_ci([(r["per_episode"][m], r["per_episode"]["homes"]) for _, r in runs],
                                             seed=seed, samples=T.BOOTSTRAP_SAMPLES) for m in T.METRICS},
                    **{m: block["intervals"][m]["episode"] for m in T.METRICS},
                    "clustered": {m: block["intervals"][m]["clustered"] for m in T.METRICS},
                    "per_home": block["per_home"], "design": block["design"], "protocol": runs[0][1].get("protocol"),
                    "per_episode": {"ids": [r["episode_id"] for r in records], "homes": [r["scene_id"] for r in records],
                                    **{m: [r["metrics"][m] for r in records] for m in T.METRICS}}})
    return sorted(out, key=lambda r: (SPLITS.index(r["split"]) if r["split"] in SPLITS else len(SPLITS), r["mode"],
                                      _agent_rank(r["agent"]), r["agent"]))


def _agent_rank(agent: str) -> int:
    """Table order: random, forward, then each row's IL and IL + DAgger agents in ``POLICY_ROWS`` order."""
    names = ["random", "forward"] + [f"{r['name']}_{s}" for r in T.POLICY_ROWS for s in ("il", "il_dagger")]
    return names.index(agent) if agent in names else len(names)


def aggregate_lines(rows: list[dict]) -> list[str]:
    """The table over seeds as aligned text: per agent, split and mode the seeds, the episodes (all
    seeds') and homes, and per metric mean ± sd over seeds [95% interval over seeds, homes, episodes]."""
    def cell(c: dict) -> str:
        if c["mean"] is None:
            return "-"
        sd = "-" if c["sd"] is None else f"{c['sd']:.3f}"
        ci = "[-]" if c["lo"] is None else f"[{c['lo']:.3f}, {c['hi']:.3f}]"
        return f"{c['mean']:.3f} ± {sd} {ci}"

    width = max([18] + [len(r["agent"]) for r in rows])
    lines = [f"{'agent':<{width}} {'split':<10} {'mode':<7} {'seeds':>5} {'n':>5} {'homes':>5}  "
             + "  ".join(f"{m + ' mean ± sd [seeds x homes x episodes]':<40}" for m in T.METRICS)]
    for r in rows:
        lines.append(f"{r['agent']:<{width}} {r['split']:<10} {r['mode']:<7} {r['seeds']:>5} {r['episodes']:>5} "
                     f"{r['design']['homes']:>5}  " + "  ".join(f"{cell(r['seeds_ci'][m]):<40}" for m in T.METRICS))
    return lines


def plot_aggregate(rows: list[dict], path: Path, title: str = "") -> None:
    """PNG: SR per agent on val_unseen and test (Tel-Hop): the mean over seeds with its interval, each seed a dot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    splits = [s for s in ("val_unseen", "test") if any(r["split"] == s for r in rows)]
    fig, axes = plt.subplots(1, max(1, len(splits)), figsize=(7 * max(1, len(splits)), 4.5), squeeze=False)
    for ax, split in zip(axes[0], splits):
        these = [r for r in rows if r["split"] == split and r["mode"] == "telhop"]
        for i, r in enumerate(these):
            c = r["seeds_ci"]["SR"]
            if c["mean"] is None:
                continue
            err = [[c["mean"] - c["lo"]], [c["hi"] - c["mean"]]] if c["lo"] is not None else None
            ax.bar(i, c["mean"], 0.6, yerr=err, capsize=3, color="#9ecae1")
            ax.plot([i] * len(r["per_seed"]), [v["SR"] for v in r["per_seed"].values()], "o", color="#08519c", ms=4)
        ax.set_xticks(range(len(these)), [r["agent"] for r in these], rotation=30, fontsize=7)
        ax.set_title(f"{split}: SR over seeds (bar: mean, 95% interval over seeds, homes, episodes; dots: seeds)",
                     fontsize=8)
        ax.set_ylim(0, 1)
    T.save_figure(fig, path, title)


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run(args: Any, report: Callable[[str], None] = _say) -> dict:
    """``bench train --seeds``: the driver (see the module docstring); returns the JSON-ready figures."""
    from vlnverse.core.errors import ConfigError
    from vlnverse.core.jobs import Job, ParallelConfig
    from vlnverse.learn.agent import require_torch

    require_torch("vlnverse bench train", field=None)
    selected = T._rows(args)  # a bad --policies fails before any work
    seeds = parse_seeds(args.seeds)
    multitask = [r["name"] for r in selected if r.get("multitask")]
    if multitask:
        raise ConfigError(f"{multitask[0]} with --seeds", field="--policies",
                          expected="single-task rows (the multi-task row runs with --seed)")
    opts = T.settings(args, selected)
    parallel = ParallelConfig(workers=getattr(args, "workers", None), engine=getattr(args, "engine", None) or "local",
                              address=getattr(args, "address", None)).checked()
    work = Path(args.out).with_suffix("") if args.out else Path(tempfile.mkdtemp(prefix="vlnverse-bench-train-"))
    identity = work_identity(opts)
    check_work(work, identity, bool(getattr(args, "rebuild", False)), report)
    t_start, load_start = time.perf_counter(), os.getloadavg()
    opts = {**opts, "homes_cache": str(work / "cache")}
    # shared by every seed, made once here: the training homes and the benchmark's held-out splits
    if opts["homes"]:
        T.homes_data(work, int(opts["homes"]), opts["per_home"], seeds[0], opts["workers"], opts["val_seen_cap"],
                     benchmark=opts["benchmark"])
    if opts["benchmark"] is not None:
        for split in ("val_unseen", "test"):
            opts["benchmark"].episodes(split, workers=opts["workers"])
    t_data = time.perf_counter()
    carried = {name: getattr(T, name) for name in CARRIED}
    base = {"work": str(work), "opts": _portable(opts), "carried": carried}
    encoder = opts["encoder"] == "pretrained" and any("rgb_encoder" in r["params"] for r in selected)
    predictor = any(r.get("waypoint_predictor") for r in selected)
    prep = [Job(f"seed-{s}", (f"seed-{s}",), {**base, "kind": "seed", "seed": s, "encoder": encoder,
                                              "predictor": predictor}) for s in seeds]
    shared, failures, retries = _run(prep, parallel, report)
    t_prep = time.perf_counter()
    names = [BASELINES] + [r["name"] for r in selected]
    results, skipped, todo = {}, [], []
    for s in seeds:
        for name in names:
            key = job_key(name, s)
            done = work / "jobs" / key / DONE_FILE
            if done.is_file():  # finished by an earlier run
                results[key] = json.loads(done.read_text(encoding="utf-8"))
                skipped.append(key)
            elif f"seed-{s}" in shared:
                got = shared[f"seed-{s}"]
                todo.append(Job(key, (key,), {**base, "kind": "row", "row": name, "seed": s,
                                              "shared": {k: got.get(k) for k in ("encoder", "predictor")}},
                                cost=0.1 if name == BASELINES else 1.0))
    if skipped:
        report(f"bench train: {len(skipped)} job(s) already done in {work}: {', '.join(skipped)}")
    report(f"bench train: {len(todo)} job(s) on {parallel.workers} {parallel.engine} worker(s)")
    got, row_failures, row_retries = _run(todo, parallel, report)
    results.update(got)
    failures += row_failures
    retries += row_retries
    best = None
    if not getattr(args, "no_strict", False):  # the best agent on val_seen, under Strict too (per seed)
        best = best_agent(aggregate(results))
        strict = []
        for s in seeds:
            key = job_key(STRICT, s)
            done = work / "jobs" / key / DONE_FILE
            made = json.loads(done.read_text(encoding="utf-8")) if done.is_file() else None
            if made is not None and made.get("best") == best:
                results[key] = made
                skipped.append(key)
                continue
            checkpoint = next((r["checkpoints"][best] for r in results.values()
                               if r["seed"] == s and best in (r.get("checkpoints") or {})), None)
            if checkpoint is not None:
                strict.append(Job(key, (key,), {**base, "kind": "strict", "seed": s,
                                                "agents": {"random": None, "forward": None, best: checkpoint}}))
        got, strict_failures, strict_retries = _run(strict, parallel, report)
        results.update(got)
        failures += strict_failures
        retries += strict_retries
    failed = [{"job": f.key, "error": f.error, "attempts": f.attempts} for f in failures]
    for f in failed:
        report(f"bench train: job {f['job']} failed after {f['attempts']} attempt(s): {f['error']}")
    rows = aggregate(results)
    from vlnverse.run.summary import RESULTS_FORMAT
    from vlnverse.results.compare import comparison_lines

    comparisons = T.pairwise_comparisons(rows)
    figures = {
        "format": RESULTS_FORMAT,
        "seeds": seeds, "policies": [r["name"] for r in selected], "engine": parallel.engine, "workers": parallel.workers,
        **({"address": parallel.address} if parallel.address else {}),
        "work": identity, **({"benchmark": opts["benchmark"].identity()} if opts["benchmark"] is not None else {}),
        "budget": {"il_epochs": opts["epochs"], "seconds_cap": opts["budget"], "dagger": opts["dagger"],
                   "validation_episodes": opts["validation_episodes"]},
        "seeds_prepared": {k: shared[k] for k in sorted(shared)},
        "jobs": {k: results[k] for k in sorted(results)}, "jobs_skipped": skipped, "failed_jobs": failed,
        "code_revisions": revisions_of(results),
        "retries": retries, "best_row_agent": best,
        "device": sorted({str(j["figures"]["device"]) for j in results.values() if j.get("figures")}),
        "table": rows, "table_text": aggregate_lines(rows), "design": T.split_design(rows),
        "comparisons": comparisons, "comparisons_text": comparison_lines(comparisons),
        "seconds_total": round(time.perf_counter() - t_start, 1),
        "seconds": {"data": round(t_data - t_start, 1), "seeds": round(t_prep - t_data, 1),
                    "jobs": round(time.perf_counter() - t_prep, 1)},
        "load_average_1m": {"start": round(load_start[0], 2), "end": round(os.getloadavg()[0], 2)},
        "cpu_count": os.cpu_count(), "work_dir": str(work),
        "machine_note": "figures vary with the machine's load (a shared 2-core machine: other sessions run tests)",
    }
    if len(figures["code_revisions"]) > 1:
        report("bench train: the jobs ran with different code: " + "; ".join(
            f"{rev[:12]}: {', '.join(keys)}" for rev, keys in figures["code_revisions"].items()))
    if args.out:
        figures["plot"] = str(Path(args.out).with_suffix(".png"))
        plot_aggregate(rows, Path(figures["plot"]), f"bench train --seeds {','.join(map(str, seeds))}: "
                       f"{opts['epochs']} IL epochs per row" + ("" if opts["benchmark"] is None
                                                                else f", benchmark {opts['benchmark'].name}"))
    return figures
