"""The ``local`` engine: jobs on worker processes of this machine, started from a fork server
(``forkserver``; ``spawn`` where there is none), or, with one worker, in this process (the
serial path: a job's exception propagates as in a plain loop). The job model, the settings and
the driver loop are ``vlnverse.core.jobs``'s."""
from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import time
from typing import Any, Callable, Iterable

from ..core.errors import ConfigError
from ..core.jobs import CLI_FIELDS, ENGINES, Driver, Engine, Job, JobFn, SharedLimit, make_limits, needs, run_one


# --------------------------------------------------------------------------------------------
# inline (workers=1, local): the serial path, no processes


class _InlineDriver:
    """Runs each job here; its messages go straight to the driver loop's ``handle``."""

    def __init__(self, fn: JobFn, shared: dict | None = None):
        self.fn, self.state = fn, {"shared": make_limits(shared, SharedLimit)}
        self.handle: Callable[[tuple], None] | None = None

    def connect(self, handle: Callable[[tuple], None]) -> None:
        self.handle = handle

    def idle_slots(self, busy: set) -> list[int]:
        return [] if busy else [0]

    def submit(self, slot: int, job: Job) -> None:
        run_one(self.fn, job, self.state, self.handle, slot, inline=True)

    def poll(self, timeout: float) -> list[tuple]:
        return []

    def kill(self, slot: int) -> None:
        """Nothing to kill: jobs run (and finish) inside ``submit``."""

    def close(self) -> None:
        pass


# --------------------------------------------------------------------------------------------
# local processes


def process_context() -> Any:
    """The multiprocessing context local processes start with: the fork server where the platform
    has one, else ``spawn``."""
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
    ctx = process_context()
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
    environments); once ``driver_pid`` is gone a worker exits, mid-job too (``_exit_with_driver``)."""
    import queue
    import threading

    from ..core.io import pid_alive

    if env is not None:
        os.environ.clear()
        os.environ.update(env)
    if driver_pid is not None:
        threading.Thread(target=_exit_with_driver, args=(driver_pid,), daemon=True, name="driver-watch").start()
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
        run_one(fn, job, state, conn.send, slot)


def _exit_with_driver(driver_pid: int) -> None:
    """A worker's watch thread: once the driver is gone (killed, or interrupted before it could
    stop its workers), kill the job's own processes and end this worker at once, so that no
    orphan goes on writing into a work folder that a rerun resumes."""
    from ..core.io import pid_alive

    while pid_alive(driver_pid):
        time.sleep(DRIVER_CHECK_S)
    for child in mp.active_children():
        child.kill()
    os._exit(1)


class _LocalDriver:
    def __init__(self, fn: JobFn, workers: int, shared: dict | None = None, preload: Iterable[str] = ()):
        self.fn, self.ctx = fn, process_context()
        start_fork_server([fn.__module__, *preload])  # once per process; then the server is reused
        self.limits = make_limits(shared, lambda n: SharedLimit(n, kind="process", ctx=self.ctx, workers=workers))
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


@ENGINES.register("local")
class LocalEngine(Engine):
    """Worker processes on this machine (``forkserver``/``spawn``); one worker runs in this process."""

    @classmethod
    def validate(cls, address: str | None, fields: dict = CLI_FIELDS) -> None:
        if address:
            raise ConfigError(f"got {address!r} with the local engine", field=fields["address"],
                              expected=needs(fields, "engine", "ray"))

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


