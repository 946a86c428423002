"""Run records: one JSON line per finished episode (``episodes.jsonl``), written as each finishes
and read back keeping every valid record.

A record is the dict :meth:`vlnverse.run.rollout.Rollout.record` returns (``episode_id``,
``metrics``, trajectory, actions, termination ...); :func:`append_record` writes one as a single
flushed line and :func:`read_finished` reads a log back, moving a line that is not a valid
record aside (``episodes.rejected.jsonl``) instead of failing.
"""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from ..core.io import to_jsonable, write_bytes_atomic

log = logging.getLogger(__name__)


#: Lines of ``episodes.jsonl`` that are not valid records are moved here, verbatim (see ``read_finished``).
REJECTED_FILE = "episodes.rejected.jsonl"


def _parse_record(line: bytes) -> dict | None:
    """One episode record from a log line, or None when it is not one."""
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):  # bad JSON, non-UTF-8 bytes, 5000-digit numbers, deep nesting
        return None
    if not isinstance(record, dict) or not isinstance(record.get("episode_id"), str) \
            or not isinstance(record.get("metrics"), dict):
        return None
    return record


def read_finished(path: Path) -> list[dict]:
    """Finished episode records from ``episodes.jsonl``, keeping every valid one.

    A line that is not a valid record (a crash mid-write, a corrupt or hand-edited line) or that
    repeats an episode already recorded is moved, verbatim, to ``episodes.rejected.jsonl`` beside
    it; the log is rewritten atomically without it and a warning names the line numbers."""
    if not path.is_file():
        return []
    raw = path.read_bytes()
    records: list[dict] = []
    kept: list[bytes] = []
    rejected: list[tuple[int, bytes]] = []
    seen: set[str] = set()
    for number, line in enumerate(raw.splitlines(keepends=True), start=1):
        if not line.strip():
            continue
        record = _parse_record(line)
        if record is None or record["episode_id"] in seen:
            rejected.append((number, line))
            continue
        seen.add(record["episode_id"])
        records.append(record)
        kept.append(line if line.endswith(b"\n") else line + b"\n")
    if rejected or b"".join(kept) != raw:
        if rejected:
            side = path.with_name(REJECTED_FILE)
            with open(side, "ab") as fh:
                fh.write(b"".join(line if line.endswith(b"\n") else line + b"\n" for _, line in rejected))
                fh.flush()
                os.fsync(fh.fileno())
            numbers = ", ".join(str(n) for n, _ in rejected[:20]) + (" ..." if len(rejected) > 20 else "")
            log.warning("%s: %d invalid or repeated record(s) at line(s) %s moved to %s; %d valid record(s) kept",
                        path, len(rejected), numbers, side, len(records))
        write_bytes_atomic(path, b"".join(kept))
    return records


def is_evaluated(record: dict) -> bool:
    """False for an episode whose agent's model endpoint gave no answer (``outcome: not_evaluated``)."""
    return record.get("outcome") != "not_evaluated"


def append_record(path: Path, record: dict) -> None:
    """Append one episode record as a single flushed and fsync'ed JSON line."""
    line = json.dumps(to_jsonable(record), sort_keys=True, separators=(",", ":")) + "\n"
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line)
        fh.flush()
        os.fsync(fh.fileno())
