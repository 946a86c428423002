"""``bench train``'s options: one frozen ``TrainBenchOptions`` built once from the command line
(``from_args``), checked before any work (a bad value is a one-line ``ConfigError`` naming the
flag and the value it expects), and passed to every step of the run instead of the namespace."""
from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Any

import vlnverse.benchmarks.train.recipe as R
from vlnverse.tasks.episode import LANGUAGE_SPLIT
from vlnverse.tasks.instructions.languages import language_overrides


def flag_reader(args: Any):
    """``flag(name, default=None)``: the value of ``args``' flag ``name`` (an argparse dest), or
    ``default`` where ``args`` lacks it or leaves it None."""
    given = vars(args)

    def flag(name: str, default: Any = None) -> Any:
        value = given.get(name)
        return default if value is None else value

    return flag


def options_from_args(cls: type, args: Any) -> Any:
    """``args`` when it already is a ``cls`` (a frozen options dataclass whose fields all have
    defaults); otherwise a ``cls`` of ``args``' flags by field name, a field's default where
    ``args`` lacks its flag or leaves it None."""
    if isinstance(args, cls):
        return args
    flag = flag_reader(args)
    return cls(**{f.name: flag(f.name, f.default) for f in fields(cls) if f.default is not MISSING})


def required_path(value: Any, field: str, expected: str) -> Path:
    """``value`` (a required path flag) as a ``Path``; a one-line ``ConfigError`` naming ``field``
    when it is missing."""
    from vlnverse.core.errors import ConfigError

    if not value:
        raise ConfigError("missing", field=field, expected=expected)
    return Path(value)


@dataclass(frozen=True)
class TimingOptions:
    """The settings of a timing bench (``bench paths``, ``sim``, ``scenes``): ``repeat``
    repetitions per figure (the best is kept) on the scene of ``seed``."""

    repeat: int = 3
    seed: int = 0


def check_int_flags(flags) -> None:
    """One-line ``ConfigError`` naming the first ``(flag, value, lowest)`` whose value (when given)
    is not an integer >= lowest."""
    from vlnverse.core.errors import ConfigError

    for flag, value, low in flags:
        if value is not None and (not isinstance(value, int) or value < low):
            raise ConfigError(f"got {value!r}", field=flag, expected=f"an integer >= {low}")


def default_workers() -> int:
    """``--workers`` of a single-seed run when not given: the cores this process may use, shared
    among ``$VLNVERSE_JOBS`` runs side by side (``learn.auto_threads``). The records do not depend
    on it, only the seconds; ``--seeds`` jobs take 1 each (the engine runs them side by side)."""
    from vlnverse.learn import auto_threads
    from vlnverse.learn.trainer import declared_jobs

    return auto_threads(declared_jobs())


def check_counts(homes, workers, per_held_out, per_home) -> None:
    """``--train-homes``, ``--workers``, ``--eval-episodes`` and ``--episodes-per-home`` (``check_int_flags``)."""
    check_int_flags((("--train-homes", homes, 0), ("--workers", workers, 1), ("--eval-episodes", per_held_out, 1),
                     ("--episodes-per-home", per_home, 1)))


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


def check_task_flags(task_episodes: Any, task_eval_episodes: Any, selected: list[dict]) -> None:
    """``--task-episodes`` / ``--task-eval-episodes``: integers >= 1, and only with a multi-task row."""
    from vlnverse.core.errors import ConfigError

    flags = (("--task-episodes", task_episodes, 1), ("--task-eval-episodes", task_eval_episodes, 1))
    check_int_flags(flags)
    given = [f for f, v, _ in flags if v is not None]
    if given and not any(r.get("multitask") for r in selected):
        raise ConfigError("given without a multi-task row", field=given[0],
                          expected="--policies including " + ",".join(r.name for r in R.ROWS if r.multitask))


def check_language(value: Any, given: dict, rows: list[dict]) -> str | None:
    """``--language``: one of ``tasks.instructions.languages.LANGUAGES`` (``v1`` or none: None; with ``--benchmark`` its held-out
    episodes' paths are re-instructed, ``Benchmark.episodes``), refused with the multi-task row (its other tasks keep
    theirs) and the VLN-BERT row's Table 7 stage (its source model is trained on the version-1
    language) in one-line ``ConfigError``s."""
    from vlnverse.core.errors import ConfigError

    if value is None or value == "v1":
        return None
    language_overrides(value, field="--language")
    refuse_multitask(rows, f"--language {value}", "the multi-task row's other tasks keep the version-1 language")
    if any(r["name"] == "vlnbert" for r in rows) and not (given.get("no_transfer") or given.get("no_dagger")):
        raise ConfigError(f"the vlnbert row's Table 7 stage with --language {value}", field="--language",
                          expected="--no-transfer (the stage's source model is trained on the version-1 language)")
    return value


def check_task(value: Any, given: dict, rows: list[dict]) -> str:
    """``--task``: one of ``recipe.TASKS`` (none: fine_grained); another task than fine_grained is
    refused with the multi-task row (it trains on its own task mix) and the VLN-BERT row's Table 7
    stage (its source model is trained on fine-grained episodes), in one-line ``ConfigError``s."""
    from vlnverse.core.errors import ConfigError

    task = "fine_grained" if value is None else str(value)
    if task not in R.TASKS:
        raise ConfigError(f"got {value!r}", field="--task", expected=" or ".join(R.TASKS))
    if task != "fine_grained":
        refuse_multitask(rows, f"--task {task}", "the multi-task row trains on its own task mix")
        if any(r["name"] == "vlnbert" for r in rows) and not (given.get("no_transfer") or given.get("no_dagger")):
            raise ConfigError(f"the vlnbert row's Table 7 stage with --task {task}", field="--task",
                              expected="--no-transfer (the stage's source model is trained on fine-grained episodes)")
    return task


def with_il_batching(rows: tuple, value: Any) -> tuple[tuple, str | None]:
    """``--il-batching``: ``(rows, value)``, the rows with their IL batches formed ``value``
    (``learn.batching.BATCHINGS``) and the value, or the rows as they are and None for no value or
    the recipe's own (``ILConfig.batching``, so it keeps the recipe's work identity); a policy whose
    loss reads no episode lengths keeps plain permutations (``learn.batching.il_batching``). A bad
    value is a one-line ``ConfigError``."""
    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.batching import BATCHINGS
    from vlnverse.learn.config import ILConfig

    if value is None or (value == ILConfig.batching and not any("batching" in r.get("il", {}) for r in rows)):
        return rows, None
    if value not in BATCHINGS:
        raise ConfigError(f"got {value!r}", field="--il-batching", expected=" or ".join(BATCHINGS))
    return tuple({**r, "il": {**r.get("il", {}), "batching": value}} for r in rows), value


def refuse_multitask(rows: list, flag: str, why: str) -> None:
    """A one-line ``ConfigError`` (field ``--policies``) when ``rows`` hold a multi-task row, which ``flag`` excludes."""
    from vlnverse.core.errors import ConfigError

    multitask = [r["name"] for r in rows if r.get("multitask")]
    if multitask:
        raise ConfigError(f"{multitask[0]} with {flag}", field="--policies", expected=f"single-task rows ({why})")


@dataclass(frozen=True)
class TrainBenchOptions:
    """The checked settings of a ``bench train`` run.

    ``rows``: the selected rows' recipes (``recipe.select_rows``), table order. Data: ``homes``
    generated training homes (0: the shipped train scenes) of ``per_home`` episodes,
    ``val_seen_cap`` of their held-out episodes, ``per_held_out`` / ``per_test`` episodes per
    val_unseen / test scene, or ``benchmark`` (a loaded ``tasks.benchmark.Benchmark``: its train
    pool and held-out episodes); ``homes_cache``: where the homes are made (None: the work folder's
    ``cache``). Budget: ``epochs`` IL epochs, ``budget`` seconds per row or None,
    ``validation_episodes``. Then ``encoder`` (``pretrained`` or ``cnn``), ``dagger``, ``table7``
    (the VLN-BERT row's Table 7 stage), ``strict``, the multi-task row's ``task_episodes`` /
    ``task_eval_episodes``, ``workers`` (processes of a single run), ``seeds`` with the parallel
    engine's ``engine`` / ``address`` / ``parallel_workers`` (``--workers`` as given: None is the
    engine's default), ``rebuild`` and ``jobs_from`` (results files whose finished jobs are carried); ``render_only`` with ``episodes`` and ``limit``;
    ``language``: a ``tasks.instructions.languages.LANGUAGES`` key (None: the version-1 language);
    ``task``: the rows' task (``recipe.TASKS``; on a benchmark, another task than its own is
    generated on the same held-out homes, ``Benchmark.task_folder``);
    ``work``: the work folder given by ``--work`` (None: ``work_dir``'s default); ``il_batching``:
    how the rows' IL batches are formed (``--il-batching``; None: the recipe's, already in ``rows``);
    ``waypoint_epochs``: the training epochs of the waypoint rows' predictor, and of Table 7's target
    body predictor (``--waypoint-epochs``; None: the recipe's 15)."""

    rows: tuple = ()
    seed: int = 0
    out: str | None = None
    budget: float | None = None
    epochs: int = R.IL_EPOCHS
    validation_episodes: int = R.VALIDATION_EPISODES
    homes: int = R.TRAIN_HOMES
    per_home: int = R.EPISODES_PER_HOME
    per_held_out: int = R.EVAL_EPISODES
    per_test: int = R.EVAL_EPISODES
    val_seen_cap: int = R.VAL_SEEN_HOMES_EPISODES
    workers: int = 1
    encoder: str = "pretrained"
    dagger: bool = True
    table7: bool = True
    strict: bool = True
    task_episodes: int | None = None
    task_eval_episodes: int | None = None
    benchmark: Any = None
    homes_cache: str | None = None
    seeds: tuple[int, ...] | None = None
    engine: str = "local"
    address: str | None = None
    parallel_workers: int | None = None
    rebuild: bool = False
    jobs_from: tuple[str, ...] = ()
    render_only: bool = False
    episodes: str | None = None
    limit: int | None = None
    language: str | None = None
    task: str = "fine_grained"
    work: str | None = None
    il_batching: str | None = None
    waypoint_epochs: int | None = None

    @property
    def scale(self) -> float:
        """Dataset sizes relative to the default budget (1 without ``--budget``)."""
        return 1.0 if self.budget is None else min(1.0, self.budget / R.DEFAULT_BUDGET)

    @property
    def task_overrides(self) -> dict:
        """The task's ``params`` every split is generated with (``--language``)."""
        return language_overrides(self.language) if self.language else {}

    @property
    def eval_splits(self) -> tuple[str, ...]:
        """The splits every agent is evaluated on: ``recipe.SPLITS`` and, with ``--language v2-split``,
        ``LANGUAGE_SPLIT`` after val_unseen."""
        if not self.task_overrides.get("params.language_split"):
            return R.SPLITS
        at = R.SPLITS.index("val_unseen") + 1
        return R.SPLITS[:at] + (LANGUAGE_SPLIT,) + R.SPLITS[at:]

    @property
    def multitask(self) -> list[dict]:
        """The selected multi-task rows."""
        return [r for r in self.rows if r.get("multitask")]

    def work_dir(self, prefix: str) -> Path:
        """The work folder: ``--work``, else ``--out`` without its suffix, else a new temporary
        folder named ``prefix``."""
        import tempfile

        if self.work:
            return Path(self.work)
        return Path(self.out).with_suffix("") if self.out else Path(tempfile.mkdtemp(prefix=prefix))

    def settings_key(self) -> dict:
        """The settings that shape a job's results (not how many run at once, nor which rows or
        seeds): a ``bench train --seeds`` work folder's identity hashes them (``language`` only when
        given, so a folder made before the flag keeps its identity)."""
        out = {"budget": self.budget, "epochs": self.epochs, "validation_episodes": self.validation_episodes,
               "homes": self.homes, "per_home": self.per_home, "val_seen_cap": self.val_seen_cap,
               "encoder": self.encoder, "dagger": self.dagger, "table7": self.table7}
        if self.benchmark is None:
            out.update(per_held_out=self.per_held_out, per_test=self.per_test, scale=self.scale)
        if self.language:
            out["language"] = self.language
        if self.task != "fine_grained":  # a folder made before the flag keeps its identity
            out["task"] = self.task
        if self.il_batching:
            out["il_batching"] = self.il_batching
        if self.waypoint_epochs is not None:
            out["waypoint_epochs"] = self.waypoint_epochs
        return out

    def parallel_config(self) -> Any:
        """The parallel engine's checked settings (``core.jobs.ParallelConfig``) of ``--seeds``'s jobs."""
        from vlnverse.core.jobs import ParallelConfig

        return ParallelConfig(workers=self.parallel_workers, engine=self.engine or "local",
                              address=self.address).checked()

    def __getstate__(self) -> dict:
        """A job's payload carries the benchmark by its file (the worker loads it again)."""
        state = dict(self.__dict__)
        if state["benchmark"] is not None:
            state["benchmark"] = str(state["benchmark"].path)
        return state

    def __setstate__(self, state: dict) -> None:
        if state["benchmark"] is not None:
            from vlnverse.tasks.benchmark import load_benchmark

            state = {**state, "benchmark": load_benchmark(state["benchmark"])}
        self.__dict__.update(state)

    @classmethod
    def from_args(cls, args: Any) -> "TrainBenchOptions":
        """The options of ``args`` (an ``argparse.Namespace`` of ``vlnverse bench train``; a flag
        it lacks takes its default), checked in the order the command line's errors name them."""
        from vlnverse.core.errors import ConfigError

        given, flag = vars(args), flag_reader(args)
        common = {"seed": flag("seed", 0), "out": flag("out"), "work": _work_folder(flag("work"), flag("out"))}
        if flag("render_only", False):
            source, limit = flag("episodes"), flag("limit")
            if not source or not Path(source).is_file():
                raise ConfigError(f"got {source!r}", field="--episodes", expected="a JSONL file of training episodes")
            if limit is not None and limit < 1:
                raise ConfigError(f"got {limit}", field="--limit", expected="an integer >= 1")
            return cls(**common, render_only=True, episodes=str(source), limit=limit, workers=int(flag("workers") or 1))
        rows = tuple(R.select_rows(given.get("policies")))  # a bad --policies fails before any work
        rows, il_batching = with_il_batching(rows, flag("il_batching"))
        seeds = None
        if given.get("seeds") is not None:
            seeds = tuple(parse_seeds(given["seeds"]))
            refuse_multitask(rows, "--seeds", "the multi-task row runs with --seed")
        budget = float(given["budget"]) if given.get("budget") else None
        epochs = int(flag("epochs") or R.IL_EPOCHS)
        if epochs < 1:
            raise ConfigError(f"got {epochs}", field="--epochs", expected="an integer >= 1")
        validation_episodes = flag("validation_episodes")
        waypoint_epochs = flag("waypoint_epochs")
        check_int_flags((("--validation-episodes", validation_episodes, 1), ("--waypoint-epochs", waypoint_epochs, 1)))
        homes = flag("train_homes", R.TRAIN_HOMES)
        workers = int(flag("workers") or (1 if seeds is not None else default_workers()))
        per_held_out = int(flag("eval_episodes") or R.EVAL_EPISODES)
        per_test = int(flag("test_episodes") or per_held_out)
        per_home = flag("episodes_per_home")
        check_counts(homes, workers, per_held_out, per_home)
        check_counts(None, workers, per_test, None)
        task_episodes, task_eval_episodes = flag("task_episodes"), flag("task_eval_episodes")
        check_task_flags(task_episodes, task_eval_episodes, list(rows))
        benchmark = None
        if given.get("benchmark"):
            benchmark = _checked_benchmark(given["benchmark"], given, homes, list(rows))
            if per_home is None:
                per_home = benchmark.episodes_per_home.get("train")
        language = check_language(given.get("language"), given, list(rows))
        task = check_task(given.get("task"), given, list(rows))
        no_dagger = bool(flag("no_dagger", False))
        return cls(**common, rows=rows, budget=budget, epochs=epochs,
                   validation_episodes=R.VALIDATION_EPISODES if validation_episodes is None else validation_episodes,
                   homes=homes, per_home=int(per_home or R.EPISODES_PER_HOME), workers=workers,
                   per_held_out=per_held_out, per_test=per_test,
                   val_seen_cap=int(flag("val_seen_episodes") or R.VAL_SEEN_HOMES_EPISODES),
                   encoder=flag("encoder", "pretrained") or "pretrained", dagger=not no_dagger,
                   table7=not no_dagger and not flag("no_transfer", False), strict=not flag("no_strict", False),
                   task_episodes=task_episodes, task_eval_episodes=task_eval_episodes, benchmark=benchmark,
                   seeds=seeds, engine=flag("engine", "local"), address=flag("address"),
                   parallel_workers=given.get("workers"), rebuild=bool(flag("rebuild", False)),
                   jobs_from=_jobs_from(given.get("jobs_from"), seeds), language=language, task=task,
                   il_batching=il_batching, waypoint_epochs=waypoint_epochs)


def _work_folder(work: str | None, out: str | None) -> str | None:
    """``--work DIR`` as given (None: ``work_dir``'s default); refused when it is the ``--out``
    file itself or an existing file (one-line ``ConfigError``)."""
    from vlnverse.core.errors import ConfigError

    if work is None:
        return None
    if not str(work).strip() or Path(work).is_file() or (out and Path(work).resolve() == Path(out).resolve()):
        raise ConfigError(f"got {work!r}", field="--work",
                          expected="a folder (new or a work folder), not a file and not the --out file")
    return str(work)


def _jobs_from(files: Any, seeds: tuple | None) -> tuple[str, ...]:
    """``--jobs-from FILE`` (repeatable) as given; it needs ``--seeds`` (one-line ``ConfigError``)."""
    from vlnverse.core.errors import ConfigError

    files = tuple(files or ())
    if files and seeds is None:
        raise ConfigError(f"got {files[0]!r} without --seeds", field="--jobs-from",
                          expected="--seeds S,S,... (finished jobs are carried into a --seeds work folder)")
    return files


def _checked_benchmark(name: str, given: dict, homes: int, rows: list[dict]) -> Any:
    """``--benchmark NAME`` loaded and checked against the other flags (one-line ``ConfigError``)."""
    from vlnverse.core.errors import ConfigError
    from vlnverse.tasks.benchmark import load_benchmark

    benchmark = load_benchmark(name)
    counts = [f for f, v in (("--eval-episodes", given.get("eval_episodes")),
                             ("--test-episodes", given.get("test_episodes"))) if v is not None]
    if counts:
        raise ConfigError(f"given with --benchmark {benchmark.name}", field=counts[0],
                          expected="no episode count: the benchmark fixes its val_unseen and test episodes")
    if homes < 1:
        raise ConfigError(f"got {homes} with --benchmark {benchmark.name}", field="--train-homes",
                          expected="an integer >= 1 (homes of the benchmark's train pool)")
    if benchmark.task != "fine_grained":
        raise ConfigError(f"benchmark {benchmark.name} is a {benchmark.task!r} benchmark", field="--benchmark",
                          expected="a fine_grained benchmark (the rows train fine-grained navigation)")
    refuse_multitask(rows, "--benchmark", "the multi-task row's other tasks use the shipped splits")
    benchmark.train_seeds(homes)  # the pool holds them (ConfigError naming the file otherwise)
    return benchmark
