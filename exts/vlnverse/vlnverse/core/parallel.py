"""One engine for parallel, per-scene work: local worker processes or a Ray cluster.

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

Engines: ``local`` (``workers`` processes started with ``forkserver``/``spawn``; ``workers=1``
runs in this process, where a job's exception simply propagates as in a plain loop) and ``ray`` (one actor per worker; ``address`` = ``HOST:PORT`` of a
cluster started with ``ray start --head``, ``auto``, or ``None`` for a local instance already
initialised or started here). Callers: ``vlnverse eval``, ``vlnverse data generate`` and
``vlnverse.learn.collect`` (observation caches, DAgger); the job
function and its payload must be picklable (a module-level function).
"""
from __future__ import annotations

import dataclasses
import functools
import logging
import multiprocessing as mp
import os
import pickle
import queue
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Protocol

from .errors import ConfigError, VLNVerseError
from .registry import Registry

log = logging.getLogger(__name__)

#: Name → engine class (:class:`Engine`: settings check and the driver that runs a run's jobs);
#: ``local`` and ``ray`` are registered at the end of this module.
ENGINES: Registry[type["Engine"]] = Registry("engine")
#: with a job timeout, extra seconds a worker may take to start its job (process or actor start-up)
STARTUP_GRACE_S = 60.0
#: seconds to wait for a Ray cluster before giving up (an unreachable address must not hang)
RAY_CONNECT_TIMEOUT_S = 10.0
#: (node id, worker environment) of the local Ray instance ``connect_ray`` started, if any
_RAY_STARTED_WITH: tuple | None = None

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


def _needs(fields: dict, name: str, value: str) -> str:
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
        given = {name: getattr(args, name, None) for name in CLI_FIELDS}
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


def add_parallel_options(parser: Any, what: str, *, defaults: bool = True) -> None:
    """``--workers N``, ``--engine NAME``, ``--address HOST:PORT`` and ``--job-timeout SECONDS``
    (read back with ``ParallelConfig.from_args``). Without ``defaults`` an option not given is
    ``None``, so that a config file's value stands (``vlnverse train``)."""
    parser.add_argument("--workers", type=int, default=None,
                        help=f"{what}: worker processes (default 1, or 2 with --engine ray)")
    parser.add_argument("--engine", choices=ENGINES.names(), default="local" if defaults else None,
                        help="local processes (default) or a Ray cluster (pip install 'vlnverse[ray]')")
    parser.add_argument("--address", default=None,
                        help="Ray cluster HOST:PORT (from `ray start --head`) or auto; default: a local Ray instance")
    parser.add_argument("--job-timeout", type=float, default=None, metavar="SECONDS",
                        help="kill a worker that makes no progress on a scene for SECONDS and retry the scene "
                             "elsewhere (default: off; worker processes / Ray only)")


def check_address(address: str | None, fields: dict = CLI_FIELDS, *, connect: bool = True) -> None:
    """A ``HOST:PORT`` Ray address must be well formed and (with ``connect``) accept a connection
    within a few seconds (``ConfigError`` in one line otherwise); ``None``/``auto``/``local`` pass."""
    if address in (None, "", "local", "auto"):
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"got {address!r}", field=fields["address"],
                          expected="HOST:PORT of `ray start --head`, or auto")
    if not connect:
        return
    import socket

    try:
        socket.create_connection((host, int(port)), timeout=min(3.0, RAY_CONNECT_TIMEOUT_S)).close()
    except OSError as exc:
        raise ConfigError(f"cannot reach a Ray cluster at {address} ({exc.strerror or exc})", field=fields["address"],
                          expected="HOST:PORT of a running `ray start --head`") from None


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
    return _drive(driver, jobs, on_result, max_attempts, on_failure, parallel.workers, parallel.engine,
                  parallel.job_timeout)


# --------------------------------------------------------------------------------------------
# run-wide limits (e.g. requests in flight to one model endpoint, across every worker)


class SharedLimit:
    """A semaphore of ``n`` slots shared by every worker (and thread) of one run: ``with
    limit:`` (or ``acquire()``/``release()``) around the guarded call.

    Engines: the serial path uses a thread semaphore; local workers one OS semaphore inherited
    by every worker process (``multiprocessing.BoundedSemaphore``); Ray workers an actor that
    counts slots per worker. A worker that is killed (crash, ``--job-timeout``) gives its held
    slots back: the driver knows how many each worker slot held (``reclaim``). A process killed
    in the instant between taking a slot and counting it can still lose that one slot.
    """

    def __init__(self, n: int, *, kind: str = "thread", ctx: Any = None, workers: int = 1, ray_actor: Any = None):
        import threading

        self.n, self.kind, self.slot = int(n), kind, 0
        self._local = threading.Lock()  # guards this process's held count (threads of one worker)
        if kind == "thread":
            self._sem = threading.BoundedSemaphore(self.n)
            self._held = [0]
        elif kind == "process":
            self._sem = ctx.BoundedSemaphore(self.n)
            self._held = ctx.Array("i", max(1, workers), lock=False)  # one cell per worker slot, one writer each
        else:
            self._actor = ray_actor

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
        if self.kind == "ray":
            import ray

            delay = 0.002
            while not ray.get(self._actor.acquire.remote(self.slot)):
                time.sleep(delay)
                delay = min(0.05, delay * 2)
            return
        self._sem.acquire()
        with self._local:
            self._held[self.slot if self.kind == "process" else 0] += 1

    def release(self) -> None:
        """Give a slot back."""
        if self.kind == "ray":
            import ray

            ray.get(self._actor.release.remote(self.slot))
            return
        with self._local:
            self._held[self.slot if self.kind == "process" else 0] -= 1
        self._sem.release()

    def reclaim(self, slot: int) -> None:
        """Driver side: give back every slot the (now dead) worker in ``slot`` held."""
        if self.kind == "ray":
            try:
                import ray

                ray.get(self._actor.reclaim.remote(slot), timeout=10)
            except Exception:  # noqa: BLE001 - the limit is advisory once its actor is gone
                pass
            return
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


class _RaySlots:
    """Ray actor behind ``SharedLimit(kind="ray")``: ``n`` slots, counted per worker slot."""

    def __init__(self, n: int):
        self.n, self.held = n, {}

    def acquire(self, slot: int) -> bool:
        if sum(self.held.values()) >= self.n:
            return False
        self.held[slot] = self.held.get(slot, 0) + 1
        return True

    def release(self, slot: int) -> None:
        if self.held.get(slot, 0) > 0:
            self.held[slot] -= 1

    def reclaim(self, slot: int) -> None:
        self.held.pop(slot, None)


def _make_limits(shared: dict | None, kind: str, *, ctx: Any = None, workers: int = 1, ray: Any = None) -> dict:
    limits = {}
    for name, n in (shared or {}).items():
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ConfigError(f"got {n!r}", field=name, expected="an integer >= 1")
        actor = ray.remote(num_cpus=0)(_RaySlots).remote(n) if kind == "ray" else None
        limits[name] = SharedLimit(n, kind=kind, ctx=ctx, workers=workers, ray_actor=actor)
    return limits


# --------------------------------------------------------------------------------------------
# the driver loop, shared by every engine


class Driver(Protocol):
    """What an engine's driver does for the driver loop (``_drive``): worker slots that take one
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


def _drive(driver: Driver, jobs: list[Job], on_result: Callable, max_attempts: int,
           on_failure: Callable | None, workers: int, engine: str, job_timeout: float | None = None) -> RunReport:
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


def _run_one(fn: JobFn, job: Job, state: dict, send: Callable[[tuple], None], slot: int, *,
             inline: bool = False) -> None:
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
# inline (workers=1, local): the serial path, no processes


class _InlineDriver:
    """Runs each job here; its messages go straight to the driver loop's ``handle``."""

    def __init__(self, fn: JobFn, shared: dict | None = None):
        self.fn, self.state = fn, {"shared": _make_limits(shared, "thread")}
        self.handle: Callable[[tuple], None] | None = None

    def connect(self, handle: Callable[[tuple], None]) -> None:
        self.handle = handle

    def idle_slots(self, busy: set) -> list[int]:
        return [] if busy else [0]

    def submit(self, slot: int, job: Job) -> None:
        _run_one(self.fn, job, self.state, self.handle, slot, inline=True)

    def poll(self, timeout: float) -> list[tuple]:
        return []

    def kill(self, slot: int) -> None:
        """Nothing to kill: jobs run (and finish) inside ``submit``."""

    def close(self) -> None:
        pass


# --------------------------------------------------------------------------------------------
# local processes


def _mp_context() -> Any:
    methods = mp.get_all_start_methods()
    return mp.get_context("forkserver" if "forkserver" in methods else "spawn")


def _fork_server_running() -> bool:
    from multiprocessing import forkserver

    pid = getattr(getattr(forkserver, "_forkserver", None), "_forkserver_pid", None)
    if pid is None:
        return False
    try:  # signal 0 only checks the process exists; reaping it here would break ensure_running's own check
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def _ready() -> None:
    """Target of the process ``start_fork_server(wait=True)`` forks to know the server is up."""


def start_fork_server(modules: Iterable[str] = (), *, wait: bool = False) -> bool:
    """Start this process's fork server (local worker processes are forked from it) with
    ``modules`` imported, unless it is running; returns whether this call started it.

    The server lives as long as this process, like a local Ray instance, so only the first
    parallel run pays its start-up (a Python interpreter importing ``modules``: about a second
    for the simulator stack). Without ``wait`` it returns at once and the server imports while
    this process goes on preparing the run (the first worker start waits for it); with ``wait``
    it returns once the server has forked a process. A module that fails to import there is
    skipped (the worker imports it itself). Where the platform has no fork server (``spawn``) it
    does nothing and returns False."""
    ctx = _mp_context()
    if ctx.get_start_method() != "forkserver" or _fork_server_running():
        return False
    ctx.set_forkserver_preload(list(dict.fromkeys(m for m in modules if m)))
    if wait:
        proc = ctx.Process(target=_ready, daemon=True, name="vlnverse-fork-server-check")
        proc.start()
        proc.join()
    else:
        from multiprocessing import forkserver

        forkserver.ensure_running()
    return True


#: seconds between a waiting worker's checks that its driver is still alive
DRIVER_CHECK_S = 2.0


def _local_worker(fn: JobFn, slot: int, inbox: Any, conn: Any, limits: dict | None = None,
                  env: dict | None = None, driver_pid: int | None = None) -> None:
    """Worker process: take jobs from ``inbox`` until ``None``; messages go to ``conn`` (a pipe
    of its own, so a worker killed mid-write cannot block the others). ``env`` is the driver's
    environment when the worker started (a forkserver child would otherwise get the forkserver's,
    from whenever it was first started: a cache folder or API key set since would be missing).
    Workers are not daemonic, so a job may start processes of its own (a batched evaluation's
    environments); a worker waiting for a job exits once ``driver_pid`` is gone."""
    import queue

    from .io import pid_alive

    if env is not None:
        os.environ.clear()
        os.environ.update(env)
    state: dict = {"shared": {k: v.for_slot(slot) for k, v in (limits or {}).items()}}
    while True:
        try:
            job = inbox.get(timeout=DRIVER_CHECK_S)
        except queue.Empty:
            if driver_pid is not None and not pid_alive(driver_pid):
                return
            continue
        if job is None:
            return
        _run_one(fn, job, state, conn.send, slot)


class _LocalDriver:
    def __init__(self, fn: JobFn, workers: int, shared: dict | None = None, preload: Iterable[str] = ()):
        self.fn, self.ctx = fn, _mp_context()
        start_fork_server([fn.__module__, *preload])  # once per process; then the server is reused
        self.limits = _make_limits(shared, "process", ctx=self.ctx, workers=workers)
        self.procs: dict[int, Any] = {}
        self.inboxes: dict[int, Any] = {}
        self.conns: dict[int, Any] = {}
        for slot in range(workers):
            self._start(slot)

    def _start(self, slot: int) -> None:
        inbox = self.ctx.Queue()
        receiver, sender = self.ctx.Pipe(duplex=False)
        proc = self.ctx.Process(target=_local_worker,
                                args=(self.fn, slot, inbox, sender, self.limits, dict(os.environ), os.getpid()),
                                daemon=False,  # a job may start processes (batched evaluation)
                                name=f"vlnverse-worker-{slot}")
        proc.start()
        sender.close()  # the worker holds the only write end: EOF here when it dies
        self.procs[slot], self.inboxes[slot], self.conns[slot] = proc, inbox, receiver

    def pids(self) -> list[int]:
        """Process ids of the live workers."""
        return [p.pid for p in self.procs.values() if p.is_alive()]

    def connect(self, handle: Callable[[tuple], None]) -> None:
        """Messages come back through ``poll``."""

    def idle_slots(self, busy: set) -> list[int]:
        return [s for s in self.procs if s not in busy]

    def submit(self, slot: int, job: Job) -> None:
        self.inboxes[slot].put(job)

    def poll(self, timeout: float) -> list[tuple]:
        from multiprocessing.connection import wait

        messages: list[tuple] = []
        slot_of = {id(c): s for s, c in self.conns.items()}
        for conn in wait(list(self.conns.values()), timeout):
            slot = slot_of[id(conn)]
            try:
                while True:
                    messages.append(conn.recv())
                    if not conn.poll():
                        break
            except (EOFError, OSError, ValueError, pickle.UnpicklingError):
                proc = self.procs[slot]
                proc.join(5.0)
                code = proc.exitcode
                reason = "no exit status" if code is None else (f"signal {-code}" if code < 0 else f"exit status {code}")
                messages.append(("error", slot, None, f"worker {slot} (pid {proc.pid}) died: {reason}"))
                self.kill(slot)
        return messages

    def kill(self, slot: int) -> None:
        """Kill the worker in ``slot`` (if alive) and start a fresh one there."""
        proc = self.procs[slot]
        if proc.is_alive():
            proc.kill()
            proc.join(5.0)
        for limit in self.limits.values():
            limit.reclaim(slot)
        self.conns[slot].close()
        self.inboxes[slot].close()
        self._start(slot)

    def close(self) -> None:
        for slot, proc in self.procs.items():
            if proc.is_alive():
                try:
                    self.inboxes[slot].put(None)
                except (OSError, ValueError):
                    pass
        deadline = time.monotonic() + 5.0
        for proc in self.procs.values():
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join(1.0)
        for slot in self.procs:
            self.conns[slot].close()
            self.inboxes[slot].close()


# --------------------------------------------------------------------------------------------
# Ray


def connect_ray(address: str | None, *, num_cpus: int | None = None) -> Any:
    """Initialise Ray (once): ``address`` ``HOST:PORT`` / ``auto`` joins a cluster (``ConfigError``
    in one line if it is unreachable within ``RAY_CONNECT_TIMEOUT_S``), ``None`` starts a local
    instance unless one is running in this process."""
    import ray

    global _RAY_STARTED_WITH
    if ray.is_initialized():
        return ray
    if address in (None, "", "local"):
        # The instance's processes inherit this environment, so its (prestarted) workers already
        # have what a worker needs; a per-actor runtime_env would start a new process per actor.
        env = ray_worker_env()
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        _RAY_STARTED_WITH = (ray.get_runtime_context().get_node_id(), env)
        return ray
    check_address(address)
    import threading

    result: dict = {}

    def init() -> None:
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
            result["ok"] = True
        except Exception as exc:  # noqa: BLE001 - turned into one line below
            result["error"] = exc

    thread = threading.Thread(target=init, daemon=True)
    thread.start()
    thread.join(RAY_CONNECT_TIMEOUT_S)
    if "ok" not in result:
        reason = f"{type(result['error']).__name__}: {str(result['error']).splitlines()[0]}" if "error" in result \
            else f"no answer within {RAY_CONNECT_TIMEOUT_S:.0f} s"
        raise ConfigError(f"cannot join the Ray cluster at {address} ({reason})", field="--address",
                          expected="HOST:PORT of a running `ray start --head`")
    return ray


def ray_worker_env() -> dict:
    """Environment a Ray worker needs from this process: ``PYTHONPATH`` (``source_path``: workers
    import the job function's module) and this process's ``VLNVERSE_*`` settings (cache and
    view-cache folders: on a multi-node cluster they must name a shared file system)."""
    return {"PYTHONPATH": source_path(), **{k: v for k, v in os.environ.items() if k.startswith("VLNVERSE_")}}


def _ray_runtime_env(ray: Any) -> dict | None:
    """``runtime_env`` for this run's actors: none when a local instance started here already
    gave its workers the same environment (``connect_ray``), else the worker environment."""
    env = ray_worker_env()
    if _RAY_STARTED_WITH is not None and _RAY_STARTED_WITH == (ray.get_runtime_context().get_node_id(), env):
        return None
    return {"env_vars": env}


def source_path() -> str:
    """``PYTHONPATH`` for Ray workers: this process's ``sys.path`` folders outside the Python
    installation (the vlnverse checkout, the caller's own modules)."""
    import sys
    import sysconfig

    installed = {os.path.realpath(sysconfig.get_paths()[k]) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    folders = []
    for entry in sys.path:
        folder = os.path.realpath(entry or os.getcwd())
        if os.path.isdir(folder) and folder not in installed and not folder.startswith(tuple(installed)) \
                and folder not in folders:
            folders.append(folder)
    return os.pathsep.join(folders)


#: Ray actors kept for the next run of this process: {"node": node id, "actors": {slot: actor}}
#: (only on a local instance that ``connect_ray`` started, see ``_RayDriver``)
_RAY_POOL: dict = {}


@functools.lru_cache(maxsize=None)
def _ray_worker_class(ray: Any) -> Any:
    """The Ray actor class of a worker (defined once per process)."""
    @ray.remote(num_cpus=1, max_restarts=0)
    class RayJobWorker:
        """One Ray worker: keeps ``state`` for one run's jobs, yields a job's items as they
        finish. A new run (another ``run_id``) starts from a fresh ``state``."""

        def __init__(self) -> None:
            self.run_id, self.state = None, {}

        def pid(self) -> int:
            return os.getpid()

        def run(self, fn: JobFn, job: Job, slot: int, run_id: str, limits: dict):
            if run_id != self.run_id:
                self.run_id, self.state = run_id, {"shared": {k: v.for_slot(slot) for k, v in limits.items()}}
            yield from _GeneratorBridge(fn, job, self.state, slot)

    return RayJobWorker


class _RayDriver:
    """One actor per worker; each job is a streaming generator call, so items arrive one by one.

    On a local Ray instance that ``connect_ray`` started (its workers already have this
    process's environment), the actors outlive the run and the next run of this process takes
    them over (``_RAY_POOL``), like the local engine's fork server: a DAgger loop or a second
    evaluation does not start Ray worker processes and import the toolkit again. Each run starts
    from a fresh worker ``state``; the processes' own caches (scenes loaded, keyed by file) stay
    warm. Joining a cluster (``address``), actors are made per run and killed after it, so idle
    actors never hold a shared cluster's CPUs."""

    def __init__(self, fn: JobFn, workers: int, address: str | None, shared: dict | None = None):
        import uuid

        self.ray = connect_ray(address, num_cpus=None)
        ray = self.ray
        self.limits = _make_limits(shared, "ray", ray=ray)
        self.fn, self.run_id = fn, uuid.uuid4().hex
        # Workers import the job function's module and read VLNVERSE_* settings (ray_worker_env)
        runtime_env = _ray_runtime_env(ray)
        cls = _ray_worker_class(ray)
        self.cls = cls.options(runtime_env=runtime_env) if runtime_env else cls
        self.keep = runtime_env is None
        pooled = self._take_pool(workers) if self.keep else {}
        self.actors: dict[int, Any] = {}
        self.gens: dict[int, Any] = {}
        for slot in range(workers):
            self.actors[slot] = pooled.get(slot) or self.cls.remote()

    def _take_pool(self, workers: int) -> dict:
        """The live pooled actors for slots ``0..workers-1`` (a dead one is dropped: a fresh one
        takes its slot)."""
        node = self.ray.get_runtime_context().get_node_id()
        if _RAY_POOL.get("node") != node:
            _RAY_POOL.clear()
            _RAY_POOL.update(node=node, actors={})
        actors = _RAY_POOL["actors"]
        taken = {slot: actors.pop(slot) for slot in range(workers) if slot in actors}
        if taken:
            try:
                self.ray.get([a.pid.remote() for a in taken.values()], timeout=10)
            except Exception:  # noqa: BLE001 - one of them died since the last run: check each
                alive = {}
                for slot, actor in taken.items():
                    try:
                        self.ray.get(actor.pid.remote(), timeout=2)
                        alive[slot] = actor
                    except Exception:  # noqa: BLE001
                        pass
                taken = alive
        return taken

    def pids(self) -> list[int]:
        """Process ids of the live worker actors."""
        return self.ray.get([a.pid.remote() for a in self.actors.values()], timeout=30)

    def connect(self, handle: Callable[[tuple], None]) -> None:
        """Messages come back through ``poll``."""

    def idle_slots(self, busy: set) -> list[int]:
        return [s for s in self.actors if s not in busy]

    def submit(self, slot: int, job: Job) -> None:
        self.gens[slot] = self.actors[slot].run.options(num_returns="streaming").remote(self.fn, job, slot, self.run_id,
                                                                                        self.limits)

    def poll(self, timeout: float) -> list[tuple]:
        if not self.gens:
            time.sleep(min(timeout, 0.05))
            return []
        ray = self.ray
        ready, _ = ray.wait(list(self.gens.values()), num_returns=1, timeout=timeout)
        messages = []
        for slot, gen in list(self.gens.items()):
            if gen not in ready:
                continue
            while True:
                try:
                    ref = next(gen)
                except StopIteration:
                    del self.gens[slot]
                    break
                try:
                    messages.append(ray.get(ref))
                except Exception as exc:  # noqa: BLE001 - the actor died: restart it, retry the job
                    messages.append(("error", slot, None, f"Ray worker {slot} died: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"))
                    self.kill(slot)
                    break
                if messages[-1][0] in ("done", "error"):
                    continue
                ready_more, _ = ray.wait([gen], num_returns=1, timeout=0)
                if not ready_more:
                    break
        return messages

    def kill(self, slot: int) -> None:
        """Kill the actor in ``slot`` and start a fresh one there."""
        self.gens.pop(slot, None)
        try:
            self.ray.kill(self.actors[slot])
        except Exception:  # noqa: BLE001
            pass
        for limit in self.limits.values():
            limit.reclaim(slot)
        self.actors[slot] = self.cls.remote()

    def close(self) -> None:
        """Kill the run's limit actors; kill its workers, or keep them for the next run (see the class)."""
        busy = set(self.gens)  # a worker still running a job (the run stopped early) is not reused
        keep = {s: a for s, a in self.actors.items() if s not in busy} if self.keep else {}
        for actor in [*(a for s, a in self.actors.items() if s not in keep),
                      *(limit._actor for limit in self.limits.values())]:
            try:
                self.ray.kill(actor)
            except Exception:  # noqa: BLE001
                pass
        if keep and _RAY_POOL.get("node") == self.ray.get_runtime_context().get_node_id():
            _RAY_POOL["actors"].update(keep)


class _GeneratorBridge:
    """Runs a job function in a thread and yields its messages as they are emitted (Ray's
    streaming generators need a generator; job functions use a callback)."""

    def __init__(self, fn: JobFn, job: Job, state: dict, slot: int):
        self.fn, self.job, self.state, self.slot = fn, job, state, slot

    def __iter__(self):
        import threading

        q: queue.Queue = queue.Queue()
        thread = threading.Thread(target=_run_one, args=(self.fn, self.job, self.state, q.put, self.slot),
                                  daemon=True)
        thread.start()
        while True:
            message = q.get()
            yield message
            if message[0] in ("done", "error"):
                thread.join()
                return


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


@ENGINES.register("local")
class LocalEngine(Engine):
    """Worker processes on this machine (``forkserver``/``spawn``); one worker runs in this process."""

    @classmethod
    def validate(cls, address: str | None, fields: dict = CLI_FIELDS) -> None:
        if address:
            raise ConfigError(f"got {address!r} with the local engine", field=fields["address"],
                              expected=_needs(fields, "engine", "ray"))

    @classmethod
    def inline(cls, workers: int) -> bool:
        return workers == 1

    @classmethod
    def start_early(cls, fn: JobFn, workers: int, preload: Iterable[str]) -> None:
        if workers > 1:
            start_fork_server([fn.__module__, *preload])

    @classmethod
    def driver(cls, fn, *, workers, n_jobs, address, shared, preload) -> Driver:
        if workers == 1:
            return _InlineDriver(fn, shared)
        return _LocalDriver(fn, min(workers, max(1, n_jobs)), shared, preload)


@ENGINES.register("ray")
class RayEngine(Engine):
    """One Ray actor per worker on a cluster (``address``) or a local Ray instance."""

    default_workers = 2

    @classmethod
    def validate(cls, address: str | None, fields: dict = CLI_FIELDS) -> None:
        check_address(address, fields, connect=False)

    @classmethod
    def preflight(cls, address: str | None, fields: dict = CLI_FIELDS) -> None:
        try:
            import ray  # noqa: F401
        except ImportError:
            raise ConfigError("ray is not installed", field=fields["engine"],
                              expected="pip install 'vlnverse[ray]' (or --engine local)") from None
        check_address(address, fields)

    @classmethod
    def driver(cls, fn, *, workers, n_jobs, address, shared, preload) -> Driver:
        return _RayDriver(fn, workers, address, shared)
