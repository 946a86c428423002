"""Content-addressed cache keys: one scheme for every cache that stores a result under the hash
of what it was computed from."""
from __future__ import annotations

import hashlib
import json
from typing import Any


def content_key(namespace: str, version: int, *parts: Any, length: int = 64) -> str:
    """Hex SHA-256 (first ``length`` digits) naming one cached result: the cache's ``namespace``,
    its format ``version`` (bump it when what is stored changes) and the key ``parts`` (JSON
    values: str, numbers, lists, tuples, dicts; floats keep their full ``repr`` precision)."""
    if not namespace or isinstance(version, bool) or not isinstance(version, int):
        raise ValueError(f"a cache key needs a namespace and an integer version, got {namespace!r}, {version!r}")
    payload = json.dumps([namespace, version, *parts], sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:length]


def content_digest(data: bytes) -> str:
    """Hex SHA-1 of raw bytes (a scene file's content): the fingerprint a cache keyed by a file's
    content puts among its key parts (in-process scene, context and bounds caches)."""
    return hashlib.sha1(data).hexdigest()


def sha256_file(path: Any) -> str:
    """Hex SHA-256 of a file's bytes (read in 1 MB blocks)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
