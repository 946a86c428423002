"""Per-episode trajectory logs of a study: one CSV per participant and episode, one row per tick.

``DIR/participants/<pid>/<episode_id>.csv`` holds ``t`` (s of driving since the episode began),
``wall_time`` (Unix s), ``x``, ``y`` (m), ``yaw``, ``pitch`` (rad) sampled at that instant,
``action`` (the keys held then, applied over the next tick: ``forward``, ``back``, ``left``,
``right``, ``look_up``, ``look_down`` joined by ``+``, or ``idle``) and ``collided`` (0/1: contact
during the tick that ended at this row). Every row is written and flushed as it is made,
so a closed tab or a killed server loses nothing logged. When the episode ends,
``<episode_id>.json`` records how (``termination``: stop | failure | max_steps | ended) and the
collision mode.
"""
from __future__ import annotations

import csv
import json
import math
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import ConfigError
from ..core.io import write_json_atomic

COLUMNS = ("t", "wall_time", "x", "y", "yaw", "pitch", "action", "collided")
PARTICIPANT_ID = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
IDLE = "idle"


def check_participant_id(pid: str) -> str:
    """``pid`` if it is a valid participant id (1–40 letters, digits, ``_`` or ``-``), else ``ConfigError``."""
    if not isinstance(pid, str) or not PARTICIPANT_ID.match(pid):
        raise ConfigError(f"participant id {pid!r} is not valid", field="participant",
                          expected="1-40 letters, digits, '_' or '-' (an id, no personal data)")
    return pid


def safe_name(text: str) -> str:
    """``text`` as a file-name stem."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:120]


@dataclass
class LogRow:
    """One logged tick."""

    t: float
    wall_time: float
    x: float
    y: float
    yaw: float
    pitch: float
    action: str
    collided: bool

    def cells(self) -> list[str]:
        """CSV cells (floats rounded: t 3 decimals, position/angles 4, wall time 3)."""
        return [f"{self.t:.3f}", f"{self.wall_time:.3f}", f"{self.x:.4f}", f"{self.y:.4f}", f"{self.yaw:.4f}",
                f"{self.pitch:.4f}", self.action, "1" if self.collided else "0"]


class EpisodeLog:
    """Appends rows to one episode's CSV, flushing each; reopening continues the same file."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.rows = read_rows(self.path) if self.path.is_file() else []
        new = not self.rows
        if new and self.path.is_file():
            self.path.unlink()  # only a header or a torn first row: start the file over
        self._fh = open(self.path, "a", encoding="utf-8", newline="")
        self._writer = csv.writer(self._fh)
        if new:
            self._writer.writerow(COLUMNS)
            self._fh.flush()

    @property
    def last(self) -> LogRow | None:
        """The last row written (None before the first)."""
        return self.rows[-1] if self.rows else None

    def write(self, row: LogRow) -> None:
        """Append ``row`` and flush it to the operating system."""
        self._writer.writerow(row.cells())
        self._fh.flush()
        self.rows.append(row)

    def close(self) -> None:
        """Flush to disk and close."""
        if not self._fh.closed:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()


def read_rows(path: str | Path, *, strict: bool = False) -> list[LogRow]:
    """The rows of an episode CSV. A torn last line (the server killed mid-write) is dropped and
    cut off the file; with ``strict`` any other bad line raises ``ConfigError`` naming the file,
    line and column."""
    path = Path(path)
    raw = path.read_text(encoding="utf-8")
    lines = raw.splitlines(keepends=True)
    if not lines:
        if strict:
            raise ConfigError("empty file", file=path, expected=f"a header {','.join(COLUMNS)}")
        return []
    header = lines[0].strip().split(",")
    if header != list(COLUMNS):
        raise ConfigError(f"header {header}", file=path, line=1, expected=f"{','.join(COLUMNS)}")
    rows: list[LogRow] = []
    good_end = len(lines[0])
    for number, line in enumerate(lines[1:], start=2):
        cells = next(csv.reader([line]))
        torn = not line.endswith("\n") or len(cells) != len(COLUMNS)
        try:
            if torn:
                raise ValueError("wrong number of cells")
            values = [float(c) for c in cells[:6]]
            if not all(math.isfinite(v) for v in values) or cells[7] not in ("0", "1"):
                raise ValueError("non-finite number or collided not 0/1")
        except ValueError as exc:
            if number == len(lines) and torn:
                break  # a torn last row: ignored and cut off below
            raise ConfigError(str(exc), file=path, line=number,
                              expected=f"{len(COLUMNS)} cells {','.join(COLUMNS)} with finite numbers") from None
        rows.append(LogRow(*values, action=cells[6], collided=cells[7] == "1"))
        good_end += len(line)
    if good_end != len(raw) and not strict:
        with open(path, "r+b") as fh:
            fh.truncate(len(raw[:good_end].encode("utf-8")))
    return rows


def write_episode_end(folder: Path, episode_id: str, *, termination: str, collision_mode: str,
                      failure: str | None = None, driving_s: float = 0.0, practice: bool = False) -> Path:
    """Record how an episode ended (``<episode_id>.json`` beside its CSV); ``practice``
    episodes are never scored."""
    return write_json_atomic(folder / f"{safe_name(episode_id)}.json",
                             {"episode_id": episode_id, "termination": termination, "failure": failure,
                              "collision_mode": collision_mode, "driving_s": round(driving_s, 3),
                              "practice": bool(practice), "ended_at": round(time.time(), 3)})


def read_episode_end(folder: Path, episode_id: str) -> dict | None:
    """The end record of an episode, or None while it is unfinished."""
    path = folder / f"{safe_name(episode_id)}.json"
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))
