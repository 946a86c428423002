"""The job model of parallel, per-scene work, whatever engine runs it (local worker processes,
``vlnverse.engines.local``, or a Ray cluster, ``vlnverse.engines.ray``).

A *job* is the unit a worker takes (one scene: loading it and compiling its model is the
expensive part, so a worker keeps the scene for all the job's items); an *item* is one result
the job produces (an episode record, a scene's dataset shard ...). The job function runs in
the worker and calls ``emit(item_id, result)`` as each item finishes, so results stream back
to the driver, which alone calls ``on_result`` (e.g. the only writer of ``episodes.jsonl``).

Failures: a job whose worker dies (killed, segfault, out of memory) or raises is retried on
another worker with only the items not yet received (at most ``max_attempts`` tries), and
the driver drops any item it has already received, so every item arrives exactly once. A job
that still fails is reported in ``RunReport.failures`` with its key (the scene id) while the
other jobs complete.

Hung workers: with ``job_timeout`` (seconds), a worker that makes no progress on its job (no
item emitted since it took the job, or since its last item) for longer than that is killed,
replaced, and its job's remaining items retried on a worker like a dead worker's (the same
``max_attempts`` bound); the failure text names the job's key. Off by default (``None``): a
single episode of a slow agent may legitimately take minutes. A worker that has not yet taken
its job (still starting up) gets ``STARTUP_GRACE_S`` more. It applies to worker processes and
Ray actors, not to the serial in-process path (``workers=1``, local engine).

Engines (``ENGINES``, registered by name; each module is imported when a run names it): ``local``
(``workers`` processes started with ``forkserver``/``spawn``; ``workers=1`` runs in this process,
where a job's exception simply propagates as in a plain loop) and ``ray`` (one actor per worker;
``address`` = ``HOST:PORT`` of a cluster started with ``ray start --head``, ``auto``, or ``None``
for a local instance already initialised or started here). This module holds what every engine
shares: jobs and their report, the settings (``ParallelConfig``), run-wide limits
(``SharedLimit``), the :class:`Engine` and :class:`Driver` contracts and the driver loop
(``drive``) that retries and times jobs out. Callers: ``vlnverse eval``, ``vlnverse data
generate`` and ``vlnverse.learn.collect`` (observation caches, DAgger); the job function and its
payload must be picklable (a module-level function).
"""
from __future__ import annotations

import dataclasses
import logging
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Protocol

from .errors import ConfigError, VLNVerseError
from .registry import Registry

log = logging.getLogger(__name__)

#: Name → engine class (:class:`Engine`: settings check and the driver that runs a run's jobs);
#: the built-in engines live above core and register themselves when a run first names them
ENGINES: Registry[type["Engine"]] = Registry("engine")
ENGINES.register_lazy("local", "vlnverse.engines.local")
ENGINES.register_lazy("ray", "vlnverse.engines.ray")
#: with a job timeout, extra seconds a worker may take to start its job (process or actor start-up)
STARTUP_GRACE_S = 60.0

#: ``fn(payload, items, state, emit)``: run ``items`` (ids) of one job; ``state`` is a dict that
#: lives as long as the worker (cache an agent or model there); ``emit(item_id, result)``.
JobFn = Callable[[Any, tuple, dict, Callable[[str, Any], None]], None]


@dataclass(frozen=True)
class Job:
    """One unit of work: ``key`` names it in errors (a scene id), ``items`` are the ids of the
    results it emits, ``payload`` is what the job function needs (picklable). ``cost`` is an
    estimate of its run time in any unit (default 1): workers take the costliest jobs first, so a
    large scene does not start last and leave the other workers idle at the end of the run."""

    key: str
    items: tuple
    payload: Any
    cost: float = 1.0


@dataclass
class JobFailure:
    """A job that failed ``attempts`` times: its key, the last error and the items it never produced."""

    key: str
    error: str
    missing: list
    attempts: int


@dataclass
class RunReport:
    """What a parallel run did: received item count, failed jobs and retries."""

    received: int = 0
    failures: list[JobFailure] = field(default_factory=list)
    retries: int = 0
    workers: int = 1
    engine: str = "local"
    timeouts: int = 0

    def failure_summary(self) -> str:
        """One line on the failed jobs: the first one's key, attempts and error, and how many more."""
        first = self.failures[0]
        more = len(self.failures) - 1
        return (f"scene {first.key} failed after {first.attempts} attempt(s): {first.error}"
                + (f" (and {more} more scene(s))" if more else ""))


#: where each setting is named in errors: on the command line (the default) and in a config file
CLI_FIELDS = {"workers": "--workers", "engine": "--engine", "address": "--address", "job_timeout": "--job-timeout"}
CONFIG_FIELDS = {name: name for name in CLI_FIELDS}


def needs(fields: dict, name: str, value: str) -> str:
    """``--engine ray`` on the command line, ``engine: ray`` in a config file."""
    return f"{fields[name]} {value}" if fields[name].startswith("--") else f"{fields[name]}: {value}"


@dataclass(frozen=True)
class ParallelConfig:
    """How a run spreads its jobs, one object for ``vlnverse eval``, ``train`` and ``data
    generate``: ``workers`` (``None``: the engine's ``default_workers``), ``engine`` (a name in
    ``ENGINES``), ``address`` (a Ray cluster's ``HOST:PORT`` or ``auto``; ``None``: a local
    instance), ``job_timeout`` (seconds without progress before a worker is killed; ``None``: off).

    ``validate()`` checks the values without I/O; ``preflight()`` checks the environment (the
    engine is installed, the cluster answers); ``checked()`` does both and fills ``workers``."""

    workers: int | None = None
    engine: str = "local"
    address: str | None = None
    job_timeout: float | None = None

    @classmethod
    def from_args(cls, args: Any) -> "ParallelConfig":
        """The settings of options added by ``add_parallel_options`` (unset ones keep their defaults)."""
        given = {name: getattr(args, name) for name in CLI_FIELDS}
        return cls(**{k: v for k, v in given.items() if v is not None})

    def validate(self, fields: dict = CLI_FIELDS) -> "ParallelConfig":
        """Check the values (no I/O; ``ConfigError`` naming ``fields[name]``); returns a copy with
        ``workers`` filled in from the engine and ``job_timeout`` as a float."""
        if self.engine not in ENGINES:
            raise ConfigError(f"got {self.engine!r}", field=fields["engine"], expected="one of " + ", ".join(ENGINES))
        engine = ENGINES.get(self.engine)
        workers = engine.default_workers if self.workers is None else self.workers
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ConfigError(f"got {workers!r}", field=fields["workers"], expected="an integer >= 1")
        timeout = self.job_timeout
        if timeout is not None:
            if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0 \
                    or timeout == float("inf"):
                raise ConfigError(f"got {timeout!r}", field=fields["job_timeout"],
                                  expected="a number of seconds > 0 (or unset: off)")
            timeout = float(timeout)
        engine.validate(self.address, fields)
        return dataclasses.replace(self, workers=workers, job_timeout=timeout)

    def preflight(self, fields: dict = CLI_FIELDS) -> None:
        """Check the environment the engine needs (``ConfigError`` in one line): e.g. Ray is
        installed and the cluster at ``address`` accepts a connection within a few seconds."""
        ENGINES.get(self.engine).preflight(self.address, fields)

    def checked(self, fields: dict = CLI_FIELDS) -> "ParallelConfig":
        """``validate()`` then ``preflight()``: the settings a run starts with."""
        settled = self.validate(fields)
        settled.preflight(fields)
        return settled

    @property
    def inline(self) -> bool:
        """Whether the jobs run in this process (their payloads are then not pickled)."""
        return ENGINES.get(self.engine).inline(self.workers or 1)

    def start_early(self, fn: JobFn, preload: Iterable[str] = ()) -> None:
        """Call at the start of a run that will ``run_jobs(fn, ..., preload=preload)``: with local
        worker processes the fork server starts now and imports while this process prepares the
        run (reads episodes, checks configs) instead of after it; otherwise nothing."""
        ENGINES.get(self.engine).start_early(fn, self.workers or 1, preload)

    def kwargs(self) -> dict:
        """``workers``/``engine``/``address``/``job_timeout`` as keyword arguments (``run_eval`` ...)."""
        return dataclasses.asdict(self)



def run_jobs(fn: JobFn, jobs: Iterable[Job], *, on_result: Callable[[str, Any], None], workers: int = 1,
             engine: str = "local", address: str | None = None, max_attempts: int = 2,
             on_failure: Callable[[JobFailure], None] | None = None, job_timeout: float | None = None,
             shared: dict | None = None, preload: Iterable[str] = (),
             parallel: ParallelConfig | None = None) -> RunReport:
    """Run ``jobs`` with ``fn`` on ``workers`` workers of ``engine``; ``on_result(item_id,
    result)`` runs in this process, once per item, as results arrive (in completion order:
    callers that need the serial order sort afterwards). ``job_timeout`` (s, default off) kills
    and retries a worker that makes no progress on a job for that long; ``parallel`` (a
    ``ParallelConfig`` already ``checked()``) stands for these four settings. ``shared`` names
    run-wide limits, ``{name: n}``: each becomes one semaphore of ``n`` slots shared by every
    worker of the run (``state["shared"][name]``, see ``SharedLimit``). ``preload`` names modules
    that local workers import once, in the fork server they are forked from (with the job
    function's module), instead of each worker importing them at start-up (effective when this
    process starts its first fork server). Returns a ``RunReport``."""
    if parallel is None:
        parallel = ParallelConfig(workers, engine, address, job_timeout).checked()
    jobs = [j for j in jobs if j.items]
    driver = ENGINES.get(parallel.engine).driver(fn, workers=parallel.workers, n_jobs=len(jobs),
                                                 address=parallel.address, shared=shared, preload=preload)
    return drive(driver, jobs, on_result, max_attempts, on_failure, parallel.workers, parallel.engine,
                 parallel.job_timeout)


# --------------------------------------------------------------------------------------------
# run-wide limits (e.g. requests in flight to one model endpoint, across every worker)


class SharedLimit:
    """A semaphore of ``n`` slots shared by every worker (and thread) of one run: ``with
    limit:`` (or ``acquire()``/``release()``) around the guarded call.

    Kinds: the serial path uses a thread semaphore (``thread``); local workers one OS semaphore
    inherited by every worker process (``process``: ``multiprocessing.BoundedSemaphore`` of the
    context ``ctx``); Ray workers an actor that counts slots per worker (``engines.ray.RayLimit``,
    a subclass). A worker that is killed (crash, ``--job-timeout``) gives its held slots back:
    the driver knows how many each worker slot held (``reclaim``). A process killed in the
    instant between taking a slot and counting it can still lose that one slot.
    """

    def __init__(self, n: int, *, kind: str = "thread", ctx: Any = None, workers: int = 1):
        import threading

        self.n, self.kind, self.slot = int(n), kind, 0
        self._local = threading.Lock()  # guards this process's held count (threads of one worker)
        if kind == "thread":
            self._sem = threading.BoundedSemaphore(self.n)
            self._held = [0]
        elif kind == "process":
            self._sem = ctx.BoundedSemaphore(self.n)
            self._held = ctx.Array("i", max(1, workers), lock=False)  # one cell per worker slot, one writer each

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_local", None)
        return state

    def __setstate__(self, state: dict) -> None:
        import threading

        self.__dict__.update(state)
        self._local = threading.Lock()

    def for_slot(self, slot: int) -> "SharedLimit":
        """This limit as used by the worker in ``slot`` (its held slots are counted there)."""
        self.slot = slot
        return self

    def acquire(self) -> None:
        """Wait for a free slot."""
        self._sem.acquire()
        with self._local:
            self._held[self.slot if self.kind == "process" else 0] += 1

    def release(self) -> None:
        """Give a slot back."""
        with self._local:
            self._held[self.slot if self.kind == "process" else 0] -= 1
        self._sem.release()

    def reclaim(self, slot: int) -> None:
        """Driver side: give back every slot the (now dead) worker in ``slot`` held."""
        if self.kind != "process":
            return
        held, self._held[slot] = self._held[slot], 0
        for _ in range(max(0, held)):
            try:
                self._sem.release()
            except ValueError:  # already full
                break

    def __enter__(self) -> "SharedLimit":
        self.acquire()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def make_limits(shared: dict | None, make: Callable[[int], SharedLimit]) -> dict:
    """``{name: make(n)}`` for a run's ``shared`` limits ``{name: n}`` (``ConfigError`` naming a
    limit whose ``n`` is not an integer >= 1)."""
    limits = {}
    for name, n in (shared or {}).items():
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ConfigError(f"got {n!r}", field=name, expected="an integer >= 1")
        limits[name] = make(n)
    return limits


# --------------------------------------------------------------------------------------------
# the driver loop, shared by every engine


class Driver(Protocol):
    """What an engine's driver does for the driver loop (``drive``): worker slots that take one
    job at a time and report ``(kind, slot, item, value)`` messages (``start``, ``item``,
    ``done``, ``error``, ``fatal``)."""

    def connect(self, handle: Callable[[tuple], None]) -> None:
        """Receive the loop's message handler (a driver that runs jobs in this process calls it
        directly; one with workers returns their messages from ``poll``)."""

    def idle_slots(self, busy: set) -> list[int]:
        """Slots whose worker can take a job now (``busy``: slots running one)."""

    def submit(self, slot: int, job: Job) -> None:
        """Give ``job`` to the worker in ``slot``."""

    def poll(self, timeout: float) -> list[tuple]:
        """Messages that arrived within ``timeout`` seconds."""

    def kill(self, slot: int) -> None:
        """Kill the worker in ``slot`` (hung or dead) and start a fresh one there."""

    def close(self) -> None:
        """Stop every worker (or keep them for the next run)."""


def drive(driver: Driver, jobs: list[Job], on_result: Callable, max_attempts: int,
          on_failure: Callable | None, workers: int, engine: str, job_timeout: float | None = None) -> RunReport:
    """The driver loop of every engine: hands ``jobs`` (costliest first) to ``driver``'s idle
    slots, passes each new item to ``on_result``, retries a failed or timed-out job's missing
    items (``max_attempts``) and reports the rest as failures."""
    report = RunReport(workers=workers, engine=engine)
    received: set = set()
    # costliest first (longest-processing-time scheduling; stable, so equal costs keep their order)
    pending = [(job, 1) for job in sorted(jobs, key=lambda j: -j.cost)]  # (job, attempt)
    running: dict[int, tuple[Job, int]] = {}  # slot -> (job, attempt)
    progress: dict[int, float] = {}  # slot -> when its job started or last emitted an item
    started: set = set()  # slots whose worker has taken its current job

    def fail(slot: int, error: str) -> None:
        job, attempt = running.pop(slot)
        missing = tuple(i for i in job.items if i not in received)
        if not missing:
            return
        if attempt < max_attempts:
            log.warning("%s: %s; retrying its %d remaining item(s) (attempt %d of %d)", job.key, error, len(missing),
                        attempt + 1, max_attempts)
            report.retries += 1
            pending.append((Job(job.key, missing, job.payload), attempt + 1))
        else:
            failure = JobFailure(job.key, error, list(missing), attempt)
            report.failures.append(failure)
            if on_failure is not None:
                on_failure(failure)

    def handle(message: tuple) -> None:
        kind, slot, item, value = message
        if kind in ("item", "start"):
            progress[slot] = time.monotonic()
        if kind == "start":
            started.add(slot)
            return
        if kind == "item":
            if item not in received:  # a retried job may repeat what a dead worker already sent
                received.add(item)
                report.received += 1
                on_result(item, value)
        elif slot in running:
            if kind == "done":
                job, _ = running[slot]
                if all(i in received for i in job.items):
                    running.pop(slot)
                else:  # finished without emitting everything: retry the rest
                    fail(slot, "the job ended without producing all its items")
            elif kind == "error":
                fail(slot, value)
        if kind == "fatal":
            raise VLNVerseError(f"job {running[slot][0].key if slot in running else '?'}: {value}")

    driver.connect(handle)
    try:
        while pending or running:
            for slot in driver.idle_slots(set(running)):
                if not pending:
                    break
                job, attempt = pending.pop(0)
                running[slot] = (job, attempt)
                progress[slot] = time.monotonic()
                started.discard(slot)
                driver.submit(slot, job)
            for message in driver.poll(0.2):
                handle(message)
            if job_timeout is not None:
                now = time.monotonic()
                # until a worker says it took the job, its start-up (a new Ray actor ...) gets a grace period
                for slot in [s for s in running
                             if now - progress.get(s, now) > job_timeout + (0.0 if s in started else STARTUP_GRACE_S)]:
                    key = running[slot][0].key
                    driver.kill(slot)  # a fresh worker takes the slot; anything the hung one still sends is lost
                    report.timeouts += 1
                    fail(slot, f"worker {slot} made no progress on {key} for {job_timeout:g} s (--job-timeout): "
                               "killed")
    finally:
        driver.close()
    return report


class _Emitter:
    """Collects one job's results in the worker and forwards them."""

    def __init__(self, send: Callable[[tuple], None], slot: int):
        self.send, self.slot = send, slot

    def __call__(self, item: str, result: Any) -> None:
        self.send(("item", self.slot, item, result))


def run_one(fn: JobFn, job: Job, state: dict, send: Callable[[tuple], None], slot: int, *,
            inline: bool = False) -> None:
    """Run one job in a worker (or, ``inline``, in the driver's process) and ``send`` its
    messages: ``start``, one ``item`` per result, then ``done``, ``error`` or ``fatal`` (bad input:
    the run stops). Inline, an exception propagates as in a plain loop."""
    from .errors import ConfigError, UnknownNameError

    if not inline:
        send(("start", slot, None, None))  # the job-timeout clock starts now, not at the worker's start-up
    try:
        fn(job.payload, job.items, state, _Emitter(send, slot))
    except (ConfigError, UnknownNameError) as exc:  # bad input fails every scene alike: stop the run
        if inline:
            raise
        send(("fatal", slot, None, str(exc)))
        return
    except Exception as exc:  # noqa: BLE001 - reported with the job's key, the run goes on
        if inline:  # the serial path behaves as a plain loop: the error stops the run
            raise
        tb = traceback.format_exc(limit=-3).strip().splitlines()
        where = tb[-3].strip() if len(tb) >= 3 else ""
        send(("error", slot, None, f"{type(exc).__name__}: {exc}" + (f" ({where})" if where else "")))
        return
    send(("done", slot, None, None))


# --------------------------------------------------------------------------------------------
# engines: a new one is a registered Engine subclass


class Engine:
    """A parallel engine, registered in ``ENGINES`` under its name: checks its settings
    (``validate`` without I/O, ``preflight`` for the environment) and builds the :class:`Driver`
    that runs a run's jobs."""

    #: workers when the command line names none
    default_workers = 1

    @classmethod
    def validate(cls, address: str | None, fields: dict = CLI_FIELDS) -> None:
        """Raise ``ConfigError`` when the engine cannot take ``address`` (no I/O)."""

    @classmethod
    def preflight(cls, address: str | None, fields: dict = CLI_FIELDS) -> None:
        """Raise ``ConfigError`` when the engine cannot run here (not installed, cluster unreachable)."""

    @classmethod
    def inline(cls, workers: int) -> bool:
        """Whether jobs run in this process (their payloads are then not pickled)."""
        return False

    @classmethod
    def start_early(cls, fn: JobFn, workers: int, preload: Iterable[str]) -> None:
        """Start what the run's workers need while the caller prepares the run (default: nothing)."""

    @classmethod
    def driver(cls, fn: JobFn, *, workers: int, n_jobs: int, address: str | None, shared: dict | None,
               preload: Iterable[str]) -> Driver:
        raise NotImplementedError
