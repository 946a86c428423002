"""Atomic file output: nothing half-written is ever left behind."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: str | Path, *, suffix: str | None = None) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only if the block succeeds.

    The temporary keeps the target's suffix (tools like USD pick the format from it).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=suffix or path.suffix or ".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        if tmp_path.exists():  # mkstemp creates 0600; give the file the usual umask-based mode
            os.chmod(tmp_path, 0o666 & ~_umask())
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


@contextlib.contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """Yield a temporary directory beside ``path``; it replaces ``path`` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        yield tmp
        os.chmod(tmp, 0o777 & ~_umask())
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (temp file + rename)."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_bytes_atomic(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (temp file + rename)."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def to_jsonable(obj: Any) -> Any:
    """Convert numpy scalars/arrays, tuples, Paths and dataclass-like objects to JSON types."""
    import numpy as np

    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, float) and obj != obj:  # NaN is not valid JSON
        return None
    if hasattr(obj, "to_dict"):
        return to_jsonable(obj.to_dict())
    return obj


def write_json_atomic(path: str | Path, obj: Any, *, indent: int | None = 2) -> Path:
    """Serialise ``obj`` (numpy-aware) as JSON with sorted keys and write it atomically."""
    return write_text_atomic(path, json.dumps(to_jsonable(obj), indent=indent, sort_keys=True) + "\n")


def write_jsonl_atomic(path: str | Path, records: list[Any]) -> Path:
    """Write one JSON object per line (sorted keys, compact) atomically."""
    lines = [json.dumps(to_jsonable(r), sort_keys=True, separators=(",", ":")) for r in records]
    return write_text_atomic(path, "".join(line + "\n" for line in lines))
