"""Module-level job functions for tests/core/test_parallel.py (worker processes import them)."""
import os
from pathlib import Path


def squares(payload, items, state, emit):
    """Emit (item, n², worker pid); ``die_once`` (a flag path) kills the worker at ``die_at`` once;
    ``raise_at`` raises every time."""
    for item in items:
        n = int(item.split("-")[1])
        flag = payload.get("die_once")
        if flag and item == payload.get("die_at") and not Path(flag).exists():
            Path(flag).touch()
            os._exit(9)
        if item == payload.get("raise_at"):
            raise RuntimeError(f"bad item {item}")
        emit(item, (n * n, os.getpid()))
