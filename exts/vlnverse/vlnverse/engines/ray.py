"""The ``ray`` engine: one Ray actor per worker, on a cluster (``address``: ``HOST:PORT`` of
``ray start --head``, or ``auto``) or on a local Ray instance started here; run-wide limits as
a Ray actor (``RayLimit``). The job model, the settings and the driver loop are
``vlnverse.core.jobs``'s; Ray is the optional ``[ray]`` extra, imported only when a run uses it."""
from __future__ import annotations

import functools
import os
import queue
import time
from typing import Any, Callable

from ..core.errors import ConfigError
from ..core.jobs import CLI_FIELDS, ENGINES, Driver, Engine, Job, JobFn, SharedLimit, make_limits, run_one

#: seconds to wait for a Ray cluster before giving up (an unreachable address must not hang)
RAY_CONNECT_TIMEOUT_S = 10.0
#: (node id, worker environment) of the local Ray instance ``connect_ray`` started, if any
_RAY_STARTED_WITH: tuple | None = None


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


class _RaySlots:
    """Ray actor behind ``RayLimit``: ``n`` slots, counted per worker slot."""

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


class RayLimit(SharedLimit):
    """``SharedLimit`` of a Ray run: its slots are counted by a ``_RaySlots`` actor, per worker slot."""

    def __init__(self, n: int, ray: Any):
        super().__init__(n, kind="ray")
        self._actor = ray.remote(num_cpus=0)(_RaySlots).remote(n)

    def acquire(self) -> None:
        import ray

        delay = 0.002
        while not ray.get(self._actor.acquire.remote(self.slot)):
            time.sleep(delay)
            delay = min(0.05, delay * 2)

    def release(self) -> None:
        import ray

        ray.get(self._actor.release.remote(self.slot))

    def reclaim(self, slot: int) -> None:
        try:
            import ray

            ray.get(self._actor.reclaim.remote(slot), timeout=10)
        except Exception:  # noqa: BLE001 - the limit is advisory once its actor is gone
            pass


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
        self.limits = make_limits(shared, lambda n: RayLimit(n, ray))
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
        thread = threading.Thread(target=run_one, args=(self.fn, self.job, self.state, q.put, self.slot),
                                  daemon=True)
        thread.start()
        while True:
            message = q.get()
            yield message
            if message[0] in ("done", "error"):
                thread.join()
                return


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
