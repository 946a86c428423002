"""A chunked on-disk store of teacher-labelled steps (observation cache, DAgger aggregate).

Layout of a store folder::

    manifest.json      key, code version, sensors (name, shape, dtype), complete flag, totals
    index.jsonl        one line per episode: episode_id, instruction, chunk, start, length
    chunks/00000.<field>.npy   fields: each sensor, ``label`` (teacher action, int8),
                               ``executed`` (action taken, int8), ``pose`` (x, y, yaw, float32),
                               and any ``extra_fields`` of the manifest (float32, fixed shape per
                               step: e.g. RDP's continuous action chunk and progress label)

Steps are buffered for one chunk (``chunk_frames`` steps) at a time and written with a temporary
file + rename; an episode never spans two chunks; readers memory-map the chunk files, so neither
writing nor reading holds the whole dataset in memory. Depth is stored as float16, RGB as uint8.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ..core.errors import ConfigError
from ..core.io import atomic_path, write_json_atomic

MANIFEST, INDEX = "manifest.json", "index.jsonl"
STEP_FIELDS = {"label": np.int8, "executed": np.int8, "pose": np.float32}


def _sensor_dtype(kind: str):
    return np.uint8 if kind == "rgb" else np.float16


class StepStore:
    """Read/append access to a store folder (see the module docstring)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.manifest: dict[str, Any] = json.loads((self.root / MANIFEST).read_text()) if (self.root / MANIFEST).is_file() else {}
        self.episodes: list[dict[str, Any]] = []
        if (self.root / INDEX).is_file():
            for line in (self.root / INDEX).read_text().splitlines():
                if line.strip():
                    self.episodes.append(json.loads(line))
        self._maps: dict[tuple[int, str], np.ndarray] = {}
        self._buffer: list[dict[str, Any]] = []
        self._buffered = 0

    # ---------------------------------------------------------------- creation / status

    @classmethod
    def create(cls, root: str | Path, *, key: dict[str, Any], sensors: list[dict[str, Any]],
               chunk_frames: int = 512, extra_fields: dict[str, list[int]] | None = None) -> "StepStore":
        """A new, empty store at ``root`` (anything there is removed); ``extra_fields`` maps a
        per-step float32 field name to its shape (continuous-action teachers)."""
        root = Path(root)
        if root.exists():
            shutil.rmtree(root)
        (root / "chunks").mkdir(parents=True)
        write_json_atomic(root / MANIFEST, {"key": key, "sensors": sensors, "chunk_frames": int(chunk_frames),
                                            "complete": False, "chunks": 0, "steps": 0, "episodes": 0,
                                            **({"extra_fields": dict(extra_fields)} if extra_fields else {})})
        (root / INDEX).write_text("")
        return cls(root)

    @property
    def complete(self) -> bool:
        """Whether the store was closed after its last write (an interrupted build is not)."""
        return bool(self.manifest.get("complete"))

    @property
    def num_steps(self) -> int:
        """Total steps stored (flushed)."""
        return int(sum(e["length"] for e in self.episodes))

    def size_bytes(self) -> int:
        """Bytes on disk."""
        return int(sum(p.stat().st_size for p in self.root.rglob("*") if p.is_file()))

    def check(self) -> str | None:
        """Why the store cannot be used (missing chunk files, index beyond them), or None."""
        if not self.manifest:
            return "no manifest"
        if not self.complete:
            return "an earlier build was interrupted"
        for e in self.episodes:
            for name in self.field_names():
                if not self._chunk_path(e["chunk"], name).is_file():
                    return f"chunk file {self._chunk_path(e['chunk'], name).name} is missing"
        if len(self.episodes) != self.manifest.get("episodes"):
            return "the index does not match the manifest"
        return None

    def field_names(self) -> list[str]:
        """Sensor names plus the step fields."""
        return [s["name"] for s in self.manifest["sensors"]] + list(STEP_FIELDS) + list(self.extra_fields)

    @property
    def extra_fields(self) -> dict[str, list[int]]:
        """Extra per-step float32 fields (name → shape), empty for discrete-action stores."""
        return dict(self.manifest.get("extra_fields") or {})

    def _chunk_path(self, chunk: int, name: str) -> Path:
        return self.root / "chunks" / f"{chunk:05d}.{name}.npy"

    # ---------------------------------------------------------------- writing

    def add_episode(self, episode_id: str, instruction: str, steps: list[dict[str, Any]]) -> None:
        """Buffer one episode's steps (dicts with each sensor's frame, ``label``, ``executed``,
        ``pose``); a full chunk is written out."""
        if not steps:
            return
        self.manifest["complete"] = False
        if self._buffered and self._buffered + len(steps) > self.manifest["chunk_frames"]:
            self.flush()
        self._buffer.append({"episode_id": episode_id, "instruction": instruction, "steps": steps})
        self._buffered += len(steps)

    def flush(self) -> None:
        """Write the buffered episodes as one chunk, then their index lines."""
        if not self._buffer:
            return
        chunk = int(self.manifest["chunks"])
        arrays: dict[str, np.ndarray] = {}
        for spec in self.manifest["sensors"]:
            arrays[spec["name"]] = np.stack([np.asarray(s[spec["name"]]) for ep in self._buffer for s in ep["steps"]]
                                            ).astype(_sensor_dtype(spec["kind"]))
        for name, dtype in STEP_FIELDS.items():
            arrays[name] = np.asarray([s[name] for ep in self._buffer for s in ep["steps"]], dtype=dtype)
        for name, shape in self.extra_fields.items():
            arrays[name] = np.asarray([s[name] for ep in self._buffer for s in ep["steps"]],
                                      dtype=np.float32).reshape(-1, *shape)
        for name, arr in arrays.items():
            with atomic_path(self._chunk_path(chunk, name)) as tmp:
                np.save(tmp, arr)
        lines, start = [], 0
        for ep in self._buffer:
            n = len(ep["steps"])
            entry = {"episode_id": ep["episode_id"], "instruction": ep["instruction"], "chunk": chunk,
                     "start": start, "length": n}
            lines.append(json.dumps(entry) + "\n")
            self.episodes.append(entry)
            start += n
        with open(self.root / INDEX, "a", encoding="utf-8") as fh:
            fh.writelines(lines)
        self.manifest.update(chunks=chunk + 1, steps=self.num_steps, episodes=len(self.episodes), complete=False)
        write_json_atomic(self.root / MANIFEST, self.manifest)
        self._buffer, self._buffered = [], 0

    def close(self, **summary: Any) -> None:
        """Flush and mark the store complete; ``summary`` (JSON values, e.g. the teacher's SR) is
        kept in the manifest for whoever reuses the store."""
        self.flush()
        self.manifest.update(complete=True, steps=self.num_steps, episodes=len(self.episodes))
        if summary:
            self.manifest["summary"] = summary
        write_json_atomic(self.root / MANIFEST, self.manifest)

    # ---------------------------------------------------------------- reading

    def _array(self, chunk: int, name: str) -> np.ndarray:
        key = (chunk, name)
        if key not in self._maps:
            if len(self._maps) > 64:  # keep a bounded number of open memory maps
                self._maps.clear()
            self._maps[key] = np.load(self._chunk_path(chunk, name), mmap_mode="r", allow_pickle=False)
        return self._maps[key]

    def episode(self, i: int) -> dict[str, Any]:
        """Episode ``i``: its index entry plus a (T, ...) array per field, copied out of the memory map."""
        e = self.episodes[i]
        out: dict[str, Any] = dict(e)
        for name in self.field_names():
            out[name] = np.array(self._array(e["chunk"], name)[e["start"]:e["start"] + e["length"]])
        return out

    def __len__(self) -> int:
        return len(self.episodes)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for i in range(len(self)):
            yield self.episode(i)


def sensor_layout(sensor_specs: list) -> list[dict[str, Any]]:
    """The manifest's sensor entries (name, kind, shape) of a camera rig."""
    out = []
    for s in sensor_specs:
        shape = [s.height, s.width, 3] if s.kind == "rgb" else [s.height, s.width]
        out.append({"name": s.name, "kind": s.kind, "shape": shape})
    return out


def require_layout(store: StepStore, sensor_specs: list, what: str) -> None:
    """Raise ``ConfigError`` when ``store`` holds another sensor rig than ``sensor_specs``."""
    if store.manifest.get("sensors") != sensor_layout(sensor_specs):
        raise ConfigError(f"{what} holds sensors {store.manifest.get('sensors')}", field="sensors",
                          expected=f"{sensor_layout(sensor_specs)}", file=store.root)


def truncate_store(store: StepStore, episodes: int) -> None:
    """Keep only the first ``episodes`` episodes of ``store`` (resuming DAgger after an interrupted
    round); chunk files of dropped episodes stay unreferenced."""
    store.flush()
    store.episodes = store.episodes[:episodes]
    from ..core.io import write_text_atomic

    write_text_atomic(store.root / INDEX, "".join(json.dumps(e) + "\n" for e in store.episodes))
    store.manifest.update(steps=store.num_steps, episodes=len(store.episodes), complete=True)
    write_json_atomic(store.root / MANIFEST, store.manifest)
