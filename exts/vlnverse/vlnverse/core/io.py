"""Atomic file output: nothing half-written is ever left behind."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

from .precision import DEFAULT_DECIMALS, round_array, round_float


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


def to_jsonable(obj: Any, *, decimals: int | None = DEFAULT_DECIMALS) -> Any:
    """Convert numpy scalars/arrays, tuples, Paths and dataclass-like objects to JSON types.

    Every float is rounded with ``precision.round_float`` (``decimals`` places, at least 6
    significant digits) so that files are byte-identical across machines; ``decimals=None``
    keeps full precision. NaN becomes ``None``.
    """
    import numpy as np

    if isinstance(obj, dict):
        return {str(k): to_jsonable(v, decimals=decimals) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v, decimals=decimals) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist(), decimals=decimals)
    if isinstance(obj, np.generic):
        return to_jsonable(obj.item(), decimals=decimals)
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, float):
        if obj != obj:  # NaN is not valid JSON
            return None
        return float(obj) if decimals is None else round_float(obj, decimals)
    if hasattr(obj, "to_dict"):
        return to_jsonable(obj.to_dict(), decimals=decimals)
    return obj


def write_json_atomic(path: str | Path, obj: Any, *, indent: int | None = 2) -> Path:
    """Serialise ``obj`` (numpy-aware, floats rounded: ``to_jsonable``) as JSON with sorted keys, atomically."""
    return write_text_atomic(path, json.dumps(to_jsonable(obj), indent=indent, sort_keys=True) + "\n")


def write_jsonl_atomic(path: str | Path, records: list[Any]) -> Path:
    """Write one JSON object per line (sorted keys, compact, floats rounded: ``to_jsonable``) atomically."""
    lines = [json.dumps(to_jsonable(r), sort_keys=True, separators=(",", ":")) for r in records]
    return write_text_atomic(path, "".join(line + "\n" for line in lines))


def write_npz(path: str | Path, **arrays: Any) -> Path:
    """Write arrays as a compressed ``.npz`` atomically, byte-identical for equal inputs on any machine.

    Float arrays are rounded with ``precision.round_array`` (6 decimals: lengths in metres,
    angles in radians). ``numpy.savez_compressed`` stamps every member with the current time;
    here members carry a fixed timestamp and are written in keyword order.
    """
    import io
    import zipfile

    import numpy as np

    path = Path(path)
    with atomic_path(path, suffix=".npz") as tmp:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for name, value in arrays.items():
                buf = io.BytesIO()
                np.lib.format.write_array(buf, round_array(np.asanyarray(value)), allow_pickle=False)
                info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, buf.getvalue())
    return path
