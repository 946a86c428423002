"""``vlnverse bench train --seeds 0,1,2``: the table as (row, seed) jobs on the parallel engine
(``run``; ``vlnverse bench train`` without ``--seeds`` is ``single.run``'s serial run).

Each (policy row, training seed) pair is one job of ``core.jobs`` (``--workers N`` jobs at
once on local processes, or on a Ray cluster with ``--engine ray --address HOST:PORT``), and so
is each seed's baselines (random and forward-only). A job trains its row as ``bench train``
does (``row.train_row``: IL, then the DAgger round) and evaluates its agents on val_seen,
val_unseen (with ``--language v2-split`` also val_unseen_language) and test under Tel-Hop (the VLN-BERT row also runs its Table 7 stage), inside its
own folder, with one process (one torch thread; its teacher and feature caches its own, so no
two jobs write one file). Then, unless ``--no-strict``, the learned agent with the best val_seen
SR over seeds (``report.best_agent``) is evaluated under Strict on val_unseen and test beside random and
forward-only, one job per seed (``strict_job``), as the single run does for its best row. The
single run's render-path figure and multi-task row stay with ``--seed``.

Work folder (``--out FILE.json`` -> ``FILE/``):

- ``work.json``: what made it (``work_identity``: benchmark name and version, package version
  and a hash of the settings and rows' recipe that shape the results). A folder made otherwise
  is refused with one line naming the field that differs; ``--rebuild`` deletes it first and
  says why.
- ``cache/``: the generated training homes (made once, by the driver, before any job).
- ``seeds/s<seed>/``: what a seed's jobs share, made by one job per seed before the row jobs:
  its splits (``train.jsonl`` ... ``test.jsonl``; ``data.split_data``), the pretrained encoder
  and the waypoint predictor when a selected row needs them.
- ``jobs/<row>-s<seed>/``: the row's ``il/``, ``dagger/``, ``eval/`` and ``done.json`` (its
  results; checkpoints named relative to the work folder). A rerun skips jobs with ``done.json``
  and resumes the others (the trainer continues from ``last.pt``, the eval runner from its
  episode records). ``--jobs-from FILE`` carries the finished jobs of an earlier run's results
  file (``import_jobs``: same identity only) into ``jobs/``, so a table grows across machines and
  sessions from the results file kept beside its page; such a job's checkpoints stay where it ran.

A job that raises, or whose process dies (``kill -9``, a lost Ray node), is retried once
(``MAX_ATTEMPTS``; it resumes from its folder); one that still fails is listed under
``failed_jobs`` with its error, on stderr, and in the exit status (1), while the others finish.
The table (``report.aggregate``; results format 2, so ``vlnverse results compare`` / ``page``
read it) gives per agent, split and mode the per-seed SR / SPL / nDTW, their mean ± sd over seeds and a
95% interval resampling seeds, homes and episodes (``seeds_ci``: ``core.stats.seeds_ci``), beside
the intervals of the seeds' episodes pooled; rows are compared pairwise on those pooled episodes
(``report.pairwise_comparisons``: only rows with the same seeds pair).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

from vlnverse.core.provenance import code_revision, revisions_of
from vlnverse.results.machines import draw_lines, shared_draws
from vlnverse.tasks.episode import LANGUAGE_SPLIT

import vlnverse.benchmarks.train.evaluation as evaluation
import vlnverse.benchmarks.train.recipe as R
import vlnverse.benchmarks.train.row as seed_run
from .data import homes_data, split_data
from .options import TrainBenchOptions
from .report import (aggregate, aggregate_lines, best_agent, language_drop_lines, language_drops, pairwise_comparisons,
                     plot_aggregate, split_design)

log = logging.getLogger(__name__)

WORK_FILE = "work.json"


DONE_FILE = "done.json"


#: tries per job (the first and one retry, resuming from its folder)
MAX_ATTEMPTS = 2


#: the baselines' job name (random and forward-only, per seed)
BASELINES = "baselines"


#: the per-seed Strict evaluations' job name (random, forward-only and the best learned agent)
STRICT = "strict"


def work_identity(options: TrainBenchOptions) -> dict:
    """What a work folder's results depend on: the benchmark (name, version), the code version
    (the package's) and ``config``: a hash of the run settings (``TrainBenchOptions.settings_key``)
    and of the rows' recipe (``recipe.recipe_identity``: every row as its train config gives it,
    rig, EMA, DAgger round, step budget, the shared encoder's and predictor's recipes), with the
    settings themselves for messages."""
    import vlnverse
    from vlnverse.core.io import to_jsonable

    bench = options.benchmark
    settings = to_jsonable(options.settings_key())
    text = json.dumps({"settings": settings, "recipe": to_jsonable(R.recipe_identity())}, sort_keys=True)
    return {"benchmark": None if bench is None else bench.name, "benchmark_version": None if bench is None else bench.version,
            "code_version": vlnverse.__version__, "config": hashlib.sha256(text.encode()).hexdigest()[:16],
            "settings": settings}


def identity_difference(made: dict, identity: dict) -> tuple[str, str] | None:
    """The first field in which the work identity ``made`` differs from ``identity`` and a line
    saying how (``(field, line)``), or None when they are the same."""
    for field in ("benchmark", "benchmark_version", "code_version", "config"):
        if made.get(field) != identity[field]:
            detail = ""
            if field == "config":
                theirs, mine = made.get("settings") or {}, identity["settings"]
                diff = sorted(k for k in set(theirs) | set(mine) if theirs.get(k) != mine.get(k))
                detail = (f" ({diff[0]}: {theirs.get(diff[0])!r} there, {mine.get(diff[0])!r} here)" if diff
                          else " (the recipe changed: a row's, or the shared encoder's or waypoint predictor's)")
            return field, f"made with {field} {made.get(field)!r}, this run has {identity[field]!r}{detail}"
    return None


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
        differs = identity_difference(made, identity)
        if differs is not None:
            problem = (f"{path}: {differs[1]}", f"work.json {differs[0]}")
    elif work.is_dir() and any(work.iterdir()):
        problem = (f"{work} holds files but no {WORK_FILE} (not a 'bench train --seeds' work folder)", WORK_FILE)
    if problem is not None:
        if not rebuild:
            raise ConfigError(problem[0], field=problem[1], expected="the same benchmark, code and settings, "
                              "another --out, or --rebuild to start it afresh")
        report(f"bench train: --rebuild: {problem[0]}; deleting it and starting afresh")
        import shutil

        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, identity)


def import_jobs(work: Path, identity: dict, sources: tuple[str, ...], report: Callable[[str], None]) -> list[str]:
    """Finished jobs of earlier runs carried into ``work`` (``--jobs-from FILE``): each ``FILE`` is a
    ``bench train --seeds`` results file (its ``work`` identity and ``jobs``, e.g. one kept beside
    its results page), so that a fresh machine continues a table instead of rerunning it. A file
    made with another identity (benchmark, code version, settings, recipe) is refused in one line;
    a job the folder already finished is kept. Each carried job is written as its
    ``jobs/<key>/done.json`` with ``imported: true``; returns the carried keys."""
    from vlnverse.core.errors import ConfigError
    from vlnverse.core.io import write_json_atomic

    carried: list[str] = []
    for source in sources:
        from_here: list[str] = []
        try:
            got = json.loads(Path(source).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot be read as JSON ({type(exc).__name__})", file=source, field="--jobs-from",
                              expected="a 'bench train --seeds' results file") from None
        if not isinstance(got, dict) or not isinstance(got.get("work"), dict) or not isinstance(got.get("jobs"), dict):
            raise ConfigError("holds no 'work' identity and 'jobs'", file=source, field="--jobs-from",
                              expected="a 'bench train --seeds' results file")
        differs = identity_difference(got["work"], identity)
        if differs is not None:
            raise ConfigError(differs[1], file=source, field=f"work.{differs[0]}",
                              expected="results of the same benchmark, code version, settings and recipe")
        for key, job in sorted(got["jobs"].items()):
            done = work / "jobs" / key / DONE_FILE
            if not isinstance(job, dict) or job.get("key") != key or "table" not in job:
                raise ConfigError(f"job {key!r} is not a finished job's results", file=source, field=f"jobs.{key}",
                                  expected="the 'done.json' of a finished (row, seed) job")
            if done.is_file():
                continue
            done.parent.mkdir(parents=True, exist_ok=True)
            write_json_atomic(done, {**job, "imported": True})
            from_here.append(key)
        report(f"bench train: {len(from_here)} finished job(s) carried from {source}"
               + (f": {', '.join(from_here)}" if from_here else ""))
        carried += from_here
    return carried


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


def prepare_seed(work: Path, options: TrainBenchOptions, seed: int, *, encoder: bool, predictor: bool) -> dict:
    """A seed's shared artefacts in ``seeds/s<seed>/`` (each made once, kept with a marker file):
    its splits, and when asked the pretrained encoder and the waypoint predictor."""
    from vlnverse.learn.homes import check_disjoint_homes, held_out_scenes
    from vlnverse.tasks.episode import load_episodes, save_episodes

    folder = seed_dir(work, seed)
    folder.mkdir(parents=True, exist_ok=True)

    def data() -> dict:
        split_eps, homes = split_data(folder, options, seed)
        check_disjoint_homes(split_eps["train"], held_out_scenes({s: split_eps[s] for s in ("val_unseen", "test")}),
                             cache_dir=folder / "cache")
        for name, eps in split_eps.items():
            save_episodes(folder / f"{name}.jsonl", eps)
        return {"episodes": {k: len(v) for k, v in split_eps.items()}, "train_homes": homes}

    out = {"seed": seed, **_marked(folder / "data.json", data)}
    if encoder:
        out["encoder"] = _marked(folder / "encoder.json", lambda: seed_run.pretrain_encoder(
            folder, load_episodes(folder / "train.jsonl"), seed))
    if predictor:
        out["predictor"] = _marked(folder / "predictor.json",
                                   lambda: seed_run.train_waypoint_predictor(folder, options.scale, seed,
                                                                             epochs=options.waypoint_epochs))
    return out


def _copy_splits(source: Path, folder: Path, splits: tuple[str, ...] = R.SPLITS) -> None:
    """The seed's split files (train and ``splits``) into a job's folder (``train_row`` / ``evaluate`` read them there)."""
    from vlnverse.core.io import write_bytes_atomic

    folder.mkdir(parents=True, exist_ok=True)
    for name in ("train", *splits):
        target = folder / f"{name}.jsonl"
        if not target.is_file():
            write_bytes_atomic(target, (source / f"{name}.jsonl").read_bytes())


def shared_digests(shared: dict) -> dict[str, str]:
    """sha256 (16 hex) of each file of a seed's shared artefacts (``prepare_seed``: ``encoder``,
    ``predictor``) a row job acts on: which draw of them it used (``results.machines.shared_draws``)."""
    from vlnverse.core.cache_key import sha256_file

    return {name: sha256_file(got["path"])[:16] for name, got in sorted(shared.items())
            if isinstance(got, dict) and got.get("path") and Path(got["path"]).is_file()}


def draws_before_training(carried: dict, shared: dict) -> list[dict]:
    """``results.machines.shared_draws`` of the finished jobs ``carried`` (``{key: result}``) and the
    seeds' artefacts this run prepared (``shared``: ``{"seed-S": prepare_seed's result}``), each
    prepared seed as a job ``seed-S``: the seeds whose jobs still to run will act on another draw of
    the predictor or encoder than their carried jobs did (jobs carried from another machine)."""
    prepared = {}
    for key, got in shared.items():
        predictor = got.get("predictor")
        prepared[key] = {"seed": got.get("seed"), "figures": {"waypoint_predictor": predictor} if predictor else {},
                         "shared": shared_digests({k: got[k] for k in ("encoder", "predictor") if got.get(k)})}
    return shared_draws([("", {"jobs": {**carried, **prepared}})])


def row_job(work: Path, options: TrainBenchOptions, row_name: str, seed: int, shared: dict) -> dict:
    """One (row, seed) job in ``jobs/<row>-s<seed>/`` (resumes what a killed try left): the row
    trained (``row.train_row``) and its agents evaluated under Tel-Hop on every split; the
    baselines' job evaluates random and forward-only. Returns (and keeps in ``done.json``) its
    table rows, figures and learning curve."""
    from vlnverse.core.io import to_jsonable, write_json_atomic
    from vlnverse.run.setup import NamedSpec

    folder = work / "jobs" / job_key(row_name, seed)
    _copy_splits(seed_dir(work, seed), folder, options.eval_splits)
    t0 = time.perf_counter()
    out: dict = {"key": job_key(row_name, seed), "row": row_name, "seed": seed, "code": code_revision()}
    if row_name == BASELINES:
        agents = {"random": (NamedSpec("random"), []), "forward": (NamedSpec("forward"), [])}
    else:
        row = next(r for r in options.rows if r["name"] == row_name)
        trained = seed_run.train_row(row, folder, options.budget, seed, options.scale, "auto", 1, options.dagger,
                                     (shared.get("encoder") or {}).get("path"), options.epochs, shared.get("predictor"),
                                     None, options.validation_episodes, options.language or "v1", options.task)
        out.update(figures=trained["figures"], curve=trained["curve"], shared=shared_digests(shared),
                   checkpoints={a: os.path.relpath(p, work) for a, p in trained["checkpoints"].items()})
        agents = {a: (NamedSpec("policy", {"checkpoint": p, "device": "auto"}), R.SENSORS)
                  for a, p in trained["checkpoints"].items()}
    out["seconds_train"] = round(time.perf_counter() - t0, 1)
    table = []
    for split in options.eval_splits:
        for agent, (spec, sensors) in agents.items():
            got = evaluation.evaluate(spec, split, "telhop", folder, seed, 1, sensors, agent, task=options.task)
            table.append({"agent": agent, "split": split, "mode": "telhop", **got})
    if row_name == "vlnbert" and options.table7:  # its Table 7 stage on this job's folder, as the single run's
        _copy_predictor(Path(shared["predictor"]["path"]), folder / "waypoints" / "predictor.pt")
        results = {"telhop": {}}
        for line in table:
            results["telhop"].setdefault(line["split"], {})[line["agent"]] = line
        stage_options = dataclasses.replace(options, seed=seed, out=None)
        out["online_fine_tuning"] = R.table7_stage()(stage_options, folder, 1, results, table)
    out.update(table=table, seconds=round(time.perf_counter() - t0, 1))
    out = to_jsonable(out)
    write_json_atomic(folder / DONE_FILE, out)
    return out


def strict_job(work: Path, seed: int, agents: dict, task: str = "fine_grained") -> dict:
    """A seed's Strict evaluations in ``jobs/strict-s<seed>/``: ``agents`` (``{name: checkpoint}``,
    None for random and forward-only) on val_unseen and test of ``task``. Returns (and keeps in ``done.json``)
    its table rows and the learned agent it was run for (``best``)."""
    from vlnverse.core.io import to_jsonable, write_json_atomic
    from vlnverse.run.setup import NamedSpec

    folder = work / "jobs" / job_key(STRICT, seed)
    _copy_splits(seed_dir(work, seed), folder)
    table = []
    for split in ("val_unseen", "test"):
        for agent, checkpoint in agents.items():
            spec, sensors = ((NamedSpec(agent), []) if checkpoint is None
                             else (NamedSpec("policy", {"checkpoint": checkpoint, "device": "auto"}), R.SENSORS))
            got = evaluation.evaluate(spec, split, "strict", folder, seed, 1, sensors, agent, task=task)
            table.append({"agent": agent, "split": split, "mode": "strict", **got})
    out = to_jsonable({"key": job_key(STRICT, seed), "row": STRICT, "seed": seed,
                       "best": next(a for a, c in agents.items() if c is not None), "table": table})
    write_json_atomic(folder / DONE_FILE, out)
    return out


def _copy_predictor(source: Path, target: Path) -> None:
    """The seed's waypoint predictor where the Table 7 stage reads it (``<work>/waypoints/predictor.pt``)."""
    from vlnverse.core.io import write_bytes_atomic

    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(target, source.read_bytes())


def run_job(payload: dict, items: tuple, state: dict, emit: Callable[[str, Any], None]) -> None:
    """The engine's job function (``core.jobs.JobFn``): a seed's preparation or a (row, seed)
    job, with the driver's ``recipe.CARRIED`` settings; emits the job's result under its key."""
    for name, value in payload["carried"].items():
        setattr(R, name, value)
    work, options = Path(payload["work"]), payload["options"]
    if payload["kind"] == "seed":
        got = prepare_seed(work, options, payload["seed"], encoder=payload["encoder"], predictor=payload["predictor"])
    elif payload["kind"] == "strict":
        got = strict_job(work, payload["seed"], payload["agents"], options.task)
    else:
        got = row_job(work, options, payload["row"], payload["seed"], payload["shared"])
    emit(items[0], got)


def _run(jobs: list, parallel: Any, report: Callable[[str], None],
         on_done: Callable[[str, dict], None] | None = None) -> tuple[dict, list, int]:
    """Run ``jobs`` (``core.jobs.Job``) with ``parallel``; returns ``({key: result}, failures, retries)``;
    ``on_done(key, result)`` after each job, before its line. Workers=1 on the local engine runs them here, one
    after the other, with the same retry."""
    from vlnverse.core.errors import ConfigError, UnknownNameError
    from vlnverse.core.jobs import JobFailure, run_jobs

    results: dict = {}

    def done(key: str, result: Any) -> None:
        results[key] = result
        if on_done is not None:  # the results file first: the line below says it holds the job
            on_done(key, result)
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


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def figures_of(results: dict, skipped: list, failures: list, retries: int, best: str | None, *, seeds: list,
               selected: list, parallel: Any, identity: dict, options: TrainBenchOptions, shared: dict,
               work: Path) -> dict:
    """The results file of the finished jobs ``results`` (``{key: done.json}``): the jobs, the
    table over seeds (``aggregate``), its paired comparisons and what ran them."""
    from vlnverse.results.compare import comparison_lines
    from vlnverse.run.summary import RESULTS_FORMAT

    rows = aggregate(results)
    comparisons = pairwise_comparisons(rows)
    language = {}
    if options.language:
        language["language"] = options.language
    if options.task != "fine_grained":
        language["task"] = options.task
    if LANGUAGE_SPLIT in options.eval_splits:  # --language v2-split
        drops = language_drops(rows)
        language.update(language_drop=drops, language_drop_text=language_drop_lines(drops))
    return {**language,
        "format": RESULTS_FORMAT,
        "seeds": seeds, "policies": [r["name"] for r in selected], "engine": parallel.engine, "workers": parallel.workers,
        **({"address": parallel.address} if parallel.address else {}),
        "work": identity, **({"benchmark": options.benchmark.identity()} if options.benchmark is not None else {}),
        "budget": {"il_epochs": options.epochs, "seconds_cap": options.budget, "dagger": options.dagger,
                   "validation_episodes": options.validation_episodes},
        "seeds_prepared": {k: shared[k] for k in sorted(shared)},
        "jobs": {k: results[k] for k in sorted(results)}, "jobs_skipped": skipped,
        "failed_jobs": [{"job": f.key, "error": f.error, "attempts": f.attempts} for f in failures],
        "code_revisions": revisions_of(results),
        "retries": retries, "best_row_agent": best,
        "device": sorted({str(j["figures"]["device"]) for j in results.values() if j.get("figures")}),
        "table": rows, "table_text": aggregate_lines(rows), "design": split_design(rows),
        "comparisons": comparisons, "comparisons_text": comparison_lines(comparisons),
        "cpu_count": os.cpu_count(), "work_dir": str(work),
        "machine_note": "figures vary with the machine's load (a shared 2-core machine: other sessions run tests)",
    }


def run(options: TrainBenchOptions, report: Callable[[str], None] = _say) -> dict:
    """``bench train --seeds``: the driver (see the module docstring); returns the JSON-ready figures."""
    from vlnverse.core.jobs import Job

    selected, seeds = list(options.rows), list(options.seeds)
    parallel = options.parallel_config()
    work = options.work_dir("vlnverse-bench-train-")
    identity = work_identity(options)
    check_work(work, identity, options.rebuild, report)
    import_jobs(work, identity, options.jobs_from, report)
    t_start, load_start = time.perf_counter(), os.getloadavg()
    options = dataclasses.replace(options, homes_cache=str(work / "cache"))
    names = [BASELINES] + [r["name"] for r in selected]
    finished_already = all((work / "jobs" / job_key(name, s) / DONE_FILE).is_file() for s in seeds for name in names)
    if finished_already:  # finished or carried: the table needs no homes, splits or seed preparation
        report(f"bench train: every (row, seed) job is finished in {work}; nothing is prepared")
    # shared by every seed, made once here: the training homes and the benchmark's held-out splits
    if options.homes and not finished_already:
        homes_data(work, int(options.homes), options.per_home, seeds[0], options.workers, options.val_seen_cap,
                   benchmark=options.benchmark, overrides=options.task_overrides, task=options.task)
    if options.benchmark is not None and not finished_already:
        for split in ("val_unseen", "test"):
            options.benchmark.episodes(split, workers=options.workers, language=options.task_overrides or None,
                                       task=options.task)
    t_data = time.perf_counter()
    carried = {name: getattr(R, name) for name in R.CARRIED}
    base = {"work": str(work), "options": options, "carried": carried}
    encoder = options.encoder == "pretrained" and any("rgb_encoder" in r["params"] for r in selected)
    predictor = any(r.get("waypoint_predictor") for r in selected)
    prep = [Job(f"seed-{s}", (f"seed-{s}",), {**base, "kind": "seed", "seed": s, "encoder": encoder,
                                              "predictor": predictor}) for s in seeds]
    shared, failures, retries = ({}, [], 0) if finished_already else _run(prep, parallel, report)
    t_prep = time.perf_counter()
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
    if todo:
        for line in draw_lines(draws_before_training(results, shared)):
            report(f"bench train: {line}: the jobs still to run act on this run's (seed-S), so pairs between them and "
                   "the finished ones mix that draw (jobs from another machine)")
    report(f"bench train: {len(todo)} job(s) on {parallel.workers} {parallel.engine} worker(s)")
    context = {"seeds": seeds, "selected": selected, "parallel": parallel, "identity": identity, "options": options,
               "shared": shared, "work": work}

    finished = dict(results)

    def partial(key: str, result: dict) -> None:  # the table so far, in --out, after every finished job
        finished[key] = result
        if options.out:
            from vlnverse.core.io import write_json_atomic

            write_json_atomic(options.out, {**figures_of(finished, skipped, [], 0, None, **context),
                                            "partial": {"pending": sorted({j.key for j in todo} - set(finished))}})

    got, row_failures, row_retries = _run(todo, parallel, report, partial)
    results.update(got)
    failures += row_failures
    retries += row_retries
    best = None
    if options.strict:  # the best agent on val_seen, under Strict too (per seed)
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
            checkpoint = next((work / r["checkpoints"][best] for r in results.values()
                               if r["seed"] == s and best in (r.get("checkpoints") or {})), None)
            if checkpoint is not None and not checkpoint.is_file():  # a job carried from another machine
                report(f"bench train: {key} not run: the checkpoint of {best} seed {s} is not in this folder "
                       f"({checkpoint}); rerun its job here to evaluate it under Strict")
            elif checkpoint is not None:
                strict.append(Job(key, (key,), {**base, "kind": "strict", "seed": s,
                                                "agents": {"random": None, "forward": None, best: str(checkpoint)}}))
        got, strict_failures, strict_retries = _run(strict, parallel, report)
        results.update(got)
        failures += strict_failures
        retries += strict_retries
    for f in failures:
        report(f"bench train: job {f.key} failed after {f.attempts} attempt(s): {f.error}")
    figures = {**figures_of(results, skipped, failures, retries, best, **context),
               "seconds_total": round(time.perf_counter() - t_start, 1),
               "seconds": {"data": round(t_data - t_start, 1), "seeds": round(t_prep - t_data, 1),
                           "jobs": round(time.perf_counter() - t_prep, 1)},
               "load_average_1m": {"start": round(load_start[0], 2), "end": round(os.getloadavg()[0], 2)}}
    draws = shared_draws([("", {"jobs": results})])
    if draws:
        figures["shared_draws"] = draws
        for line in draw_lines(draws):
            report(f"bench train: {line}; pairs across them mix that draw (jobs from another machine or recipe)")
    if len(figures["code_revisions"]) > 1:
        report("bench train: the jobs ran with different code: " + "; ".join(
            f"{rev[:12]}: {', '.join(keys)}" for rev, keys in figures["code_revisions"].items()))
    if options.out:
        figures["plot"] = str(Path(options.out).with_suffix(".png"))
        plot_aggregate(figures["table"], Path(figures["plot"]), f"bench train --seeds {','.join(map(str, seeds))}: "
                       f"{options.epochs} IL epochs per row" + ("" if options.benchmark is None
                                                                 else f", benchmark {options.benchmark.name}"))
    return figures
