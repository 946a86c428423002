"""Module-level job functions for tests/core/test_parallel.py (worker processes import them)."""
import os
import time
from pathlib import Path


def squares(payload, items, state, emit):
    """Emit (item, n², worker pid); ``die_once`` (a flag path) kills the worker at ``die_at`` once;
    ``raise_at`` raises every time; ``hang_once`` (a flag path) makes the worker stop making
    progress (sleep for an hour, alive) at ``hang_at`` once (every time with ``hang_always``)."""
    for item in items:
        n = int(item.split("-")[1])
        flag = payload.get("die_once")
        if flag and item == payload.get("die_at") and not Path(flag).exists():
            Path(flag).touch()
            os._exit(9)
        hang = payload.get("hang_once")
        if hang and item == payload.get("hang_at") and not Path(hang).exists():
            if not payload.get("hang_always"):
                Path(hang).touch()
            time.sleep(3600)
        if item == payload.get("raise_at"):
            raise RuntimeError(f"bad item {item}")
        emit(item, (n * n, os.getpid()))


def limited(payload, items, state, emit):
    """Hold the run-wide limit ``slots`` for ``hold`` s per item, counting holders in files
    under ``payload["dir"]`` (one file per holder, so the count is visible across processes);
    emit (item, the most holders seen at once). ``meet`` (a number): until that many holders have
    been seen at once (a ``met`` flag file then), a holder first waits for them (at most 60 s), so
    the peak does not hang on threads starting within ``hold`` on a busy machine. ``die_once`` (a
    flag path): the first holder kills its worker while holding a slot."""
    import threading

    folder = Path(payload["dir"])
    limit = state["shared"]["slots"]
    peak = 0

    def one(item):
        nonlocal peak
        with limit:
            flag = payload.get("die_once")
            if flag and not Path(flag).exists():  # die holding a slot (the driver must give it back)
                Path(flag).touch()
                os._exit(9)
            mark = folder / f"{item}.{os.getpid()}"
            mark.touch()
            met = folder.parent / f"{folder.name}.met"
            deadline = time.monotonic() + 60
            while payload.get("meet") and not met.exists() and time.monotonic() < deadline:
                if len(list(folder.iterdir())) >= payload["meet"]:
                    met.touch()
                time.sleep(0.01)
            time.sleep(payload["hold"])
            peak = max(peak, len(list(folder.iterdir())))
            mark.unlink()

    threads = [threading.Thread(target=one, args=(item,)) for item in items]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for item in items:
        emit(item, peak)


def loaded_modules(payload, items, state, emit):
    """Emit, for each item (a module name), whether this worker had it imported before the job ran
    (a worker imports nothing itself: a module present came from the fork server's preload)."""
    import sys

    for item in items:
        emit(item, item in sys.modules)


def environment(payload, items, state, emit):
    """Emit, for each item (an environment variable name), its value in this worker."""
    for item in items:
        emit(item, os.environ.get(item))


def state_probe(payload, items, state, emit):
    """Emit (worker pid, items this worker's run ``state`` had seen before) for each item."""
    for item in items:
        emit(item, (os.getpid(), state.get("seen", 0)))
        state["seen"] = state.get("seen", 0) + 1


def _square(n):
    return n * n


def with_children(payload, items, state, emit):
    """Each item computed in a process pool of the job's own (as a batched evaluation starts its
    environment processes): a local worker must be allowed to have children."""
    import multiprocessing as mp

    with mp.get_context("spawn").Pool(2) as pool:
        for item in items:
            emit(item, pool.apply(_square, (int(item.split("-")[1]),)))


def sleeper_with_child(payload, items, state, emit):
    """Writes this worker's pid and a child process's pid to ``payload['pids']``, then sleeps: a
    job still running when its driver dies."""
    import multiprocessing as mp
    import os
    import time

    child = mp.get_context("spawn").Process(target=time.sleep, args=(600,), daemon=True)
    child.start()
    with open(payload["pids"], "w") as fh:
        fh.write(f"{os.getpid()} {child.pid}")
    time.sleep(600)
