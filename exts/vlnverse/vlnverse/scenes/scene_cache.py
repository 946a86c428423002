"""The parsed-scene disk cache: a ``SceneDescription`` read from USD (``usd_read.load_scene``) kept
as one ``.npz`` under ``<VLNVERSE_CACHE>/scenes_parsed/`` and reused by later processes.

Keyed by the scene file's content hash (the sha1 ``load_scene`` computes), the reader's code
(the source of ``usd_read`` and ``description``), the package and USD versions and
``SCENE_CACHE_VERSION``: a changed file or reader reads the USD again. Exact: every array keeps
its dtype, shape and bytes, every float its full value (the description is walked as data,
tagged, into a JSON document and one flat array per dtype); nothing is unpickled (``np.load``
with ``allow_pickle=False``, classes rebuilt from a fixed list). Only parses that emitted no
warning are stored (a cached load would not repeat them). Written atomically (temp file +
rename); a damaged or unreadable file is read from the USD again. ``VLNVERSE_SCENE_CACHE=0``
turns it off.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import io
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from .description import Door, Geom, Room, SceneDescription, SceneObject

#: format version of the stored files (bump when the encoding changes)
SCENE_CACHE_VERSION = 1
_CLASSES = {cls.__name__: cls for cls in (SceneDescription, Geom, SceneObject, Room, Door)}
_READER_MODULES = ("usd_read.py", "description.py", "usd_conventions.py", "labels.py")


class _Unsupported(Exception):
    """A value the encoding does not cover: that scene is not cached."""


def enabled() -> bool:
    """False when ``VLNVERSE_SCENE_CACHE`` is ``0`` / ``off`` / ``false``."""
    return os.environ.get("VLNVERSE_SCENE_CACHE", "1").strip().lower() not in ("0", "off", "false", "no")


def reader_version() -> str:
    """The reader's fingerprint in the key: package version, USD version, this format's version and
    the sha256 of the reader's source files."""
    return hashlib.sha256(f"{_reader_sources()}|{SCENE_CACHE_VERSION}".encode()).hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def _reader_sources() -> str:
    """Package and USD versions and the reader's source files, hashed once per process."""
    from .. import __version__

    h = hashlib.sha256(f"{__version__}|{_usd_version()}".encode())
    here = Path(__file__).parent
    for name in _READER_MODULES:
        h.update(name.encode())
        h.update((here / name).read_bytes())
    return h.hexdigest()


def _usd_version() -> str:
    try:
        from pxr import Usd

        return ".".join(str(v) for v in Usd.GetVersion())
    except Exception:  # noqa: BLE001 - no USD: nothing to parse or cache anyway
        return "none"


def cache_file(file_sha1: str) -> Path:
    """Where the parse of a file with content hash ``file_sha1`` is kept."""
    from ..paths import cache_dir

    return cache_dir() / "scenes_parsed" / f"{file_sha1}_{reader_version()}.npz"


def encode(desc: SceneDescription) -> dict[str, np.ndarray]:
    """``desc`` as ``.npz`` members: ``doc`` (the tagged JSON, uint8) and one flat array per dtype.
    Raises ``_Unsupported`` for a value outside the encoding."""
    pools: dict[str, list[np.ndarray]] = {}
    sizes: dict[str, int] = {}

    def walk(v: Any) -> Any:
        if v is None or isinstance(v, (bool, str)):
            return v
        if type(v) is int:
            return v
        if type(v) is float:
            return {"f": repr(v)}  # NaN / inf / -0.0 exactly
        if isinstance(v, (np.ndarray, np.generic)):
            arr = np.asarray(v)
            if arr.dtype.kind not in "biuf":
                raise _Unsupported(f"array of dtype {arr.dtype}")
            key = arr.dtype.str
            off = sizes.get(key, 0)
            flat = np.ascontiguousarray(arr).reshape(-1)
            pools.setdefault(key, []).append(flat)
            sizes[key] = off + flat.size
            return {"a": key, "o": off, "s": list(arr.shape), "g": isinstance(v, np.generic)}
        if isinstance(v, tuple):
            return {"t": [walk(x) for x in v]}
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, dict):
            return {"d": [[walk(k), walk(x)] for k, x in v.items()]}
        if dataclasses.is_dataclass(v) and type(v).__name__ in _CLASSES and _CLASSES[type(v).__name__] is type(v):
            return {"c": type(v).__name__, "v": {f.name: walk(getattr(v, f.name)) for f in dataclasses.fields(v)}}
        raise _Unsupported(type(v).__name__)

    doc = walk(desc)
    out = {"doc": np.frombuffer(json.dumps(doc, separators=(",", ":")).encode("utf-8"), np.uint8)}
    for i, (key, parts) in enumerate(sorted(pools.items())):
        out[f"pool{i}"] = np.concatenate(parts)
    return out


def decode(arrays: dict[str, np.ndarray]) -> SceneDescription:
    """The ``SceneDescription`` of ``encode``'s arrays (every array a fresh, writable copy)."""
    pools = {arrays[k].dtype.str: arrays[k] for k in arrays if k.startswith("pool")}
    doc = json.loads(bytes(arrays["doc"]).decode("utf-8"))

    def build(v: Any) -> Any:
        if isinstance(v, list):
            return [build(x) for x in v]
        if not isinstance(v, dict):
            return v
        if "f" in v:
            return float(v["f"])
        if "a" in v:
            n = int(np.prod(v["s"], dtype=np.int64))
            arr = pools[v["a"]][v["o"]:v["o"] + n].reshape(v["s"]).copy()
            return arr[()] if v["g"] else arr
        if "t" in v:
            return tuple(build(x) for x in v["t"])
        if "d" in v:
            return {_hashable(build(k)): build(x) for k, x in v["d"]}
        cls = _CLASSES[v["c"]]
        obj = object.__new__(cls)  # the stored state as it was, without re-running __post_init__
        names = {f.name for f in dataclasses.fields(cls)}
        if set(v["v"]) != names:
            raise KeyError(f"{cls.__name__} fields {sorted(v['v'])}")
        for name, value in v["v"].items():
            object.__setattr__(obj, name, build(value))
        return obj

    desc = build(doc)
    if not isinstance(desc, SceneDescription):
        raise ValueError("not a scene description")
    return desc


def _hashable(k: Any) -> Any:
    return tuple(_hashable(x) for x in k) if isinstance(k, list) else k


def load(file_sha1: str) -> SceneDescription | None:
    """The cached parse of the file with content hash ``file_sha1``, or None (off, missing, damaged)."""
    if not enabled():
        return None
    try:
        path = cache_file(file_sha1)
        if not path.is_file():
            return None
        with np.load(path, allow_pickle=False) as z:
            return decode({k: z[k] for k in z.files})
    except Exception:  # noqa: BLE001 - a damaged or foreign file: read the USD again (and rewrite it)
        return None


def store(file_sha1: str, desc: SceneDescription) -> Path | None:
    """Keep ``desc`` (just parsed from the file with content hash ``file_sha1``); best effort (a
    read-only cache or a value outside the encoding only costs a parse later). The path or None."""
    if not enabled():
        return None
    from ..core.io import write_bytes_atomic

    try:
        buf = io.BytesIO()
        np.savez(buf, allow_pickle=False, **encode(desc))
        return write_bytes_atomic(cache_file(file_sha1), buf.getvalue())
    except (_Unsupported, OSError):
        return None
