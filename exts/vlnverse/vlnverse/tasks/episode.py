"""The episode format: versioned JSONL, one episode per line, validated on load.

Every line is one JSON object with ``"version": 1``. Positions are world metres, Z up (the
scene's own frame); ``start_yaw`` is radians counter-clockwise from +X. ``info`` is free-form
for task-specific fields (decision FOUND/NOT_FOUND, sub-goal paths, reference image path,
prior video, target frame indices, dialogue oracle data, ...). Loading checks every record and a
bad one raises ``ConfigError`` naming the file, the line number and the field.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError
from ..core.io import to_jsonable, write_jsonl_atomic

#: Current episode record version; loading rejects any other.
EPISODE_VERSION = 1

#: the language-shift split (a task's ``language_split``): val_unseen's episodes again, in the
#: held-out wording, each as its twin's id with ``LANGUAGE_TWIN_SUFFIX``
LANGUAGE_SPLIT = "val_unseen_language"
LANGUAGE_TWIN_SUFFIX = "-language"



@dataclass
class Instruction:
    """One natural-language instruction; ``style`` e.g. ``natural``/``formal``/``casual``."""

    text: str
    style: str = "natural"
    language: str = "en"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready mapping."""
        return {"text": self.text, "style": self.style, "language": self.language}


@dataclass
class Goal:
    """A goal region: success within ``radius`` metres of ``position`` (x, y, z)."""

    position: list[float]
    radius: float = 3.0
    object_id: int | None = None
    room_id: int | None = None
    category: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready mapping."""
        return {"position": [float(v) for v in self.position], "radius": float(self.radius),
                "object_id": self.object_id, "room_id": self.room_id, "category": self.category}


@dataclass
class Episode:
    """One navigation episode (start, goals, reference path, instructions, task-specific info)."""

    episode_id: str
    scene_id: str
    scene_path: str
    split: str
    task_type: str
    start_position: list[float]
    start_yaw: float
    goals: list[Goal]
    reference_path: list[list[float]]
    geodesic_distance: float
    instructions: list[Instruction]
    info: dict[str, Any] = field(default_factory=dict)
    version: int = EPISODE_VERSION
    #: where the episode was read from, ``(file, line)`` (for error messages; not written)
    source: tuple[str, int] | None = field(default=None, compare=False, repr=False)

    @property
    def instruction_text(self) -> str:
        """The first instruction's text (or the first goal's category for category-only tasks)."""
        if self.instructions:
            return self.instructions[0].text
        return (self.goals[0].category or "") if self.goals else ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready mapping (numpy values converted to plain Python; floats rounded as on disk,
        ``core.precision``, so a saved and reloaded episode gives the same mapping)."""
        return to_jsonable({
            "version": int(self.version),
            "episode_id": self.episode_id,
            "scene_id": self.scene_id,
            "scene_path": str(self.scene_path),
            "split": self.split,
            "task_type": self.task_type,
            "start_position": [float(v) for v in self.start_position],
            "start_yaw": float(self.start_yaw),
            "goals": [g.to_dict() for g in self.goals],
            "reference_path": [[float(v) for v in p] for p in self.reference_path],
            "geodesic_distance": float(self.geodesic_distance),
            "instructions": [i.to_dict() for i in self.instructions],
            "info": self.info,
        })

    @classmethod
    def from_dict(cls, data: Any, *, file: str | Path | None = None, line: int | None = None) -> "Episode":
        """Validate ``data`` and build an ``Episode``; errors name ``file``, ``line`` and the field."""
        return _parse_episode(data, file=file, line=line)


# --------------------------------------------------------------------------------------------
# Validation


def _fail(problem: str, field_name: str | None, expected: Any, file: Any, line: int | None) -> ConfigError:
    return ConfigError(problem, file=file, field=field_name, expected=expected, line=line)


def _number(value: Any, name: str, file: Any, line: int | None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _fail(f"got {value!r}", name, "a finite number", file, line)
    return float(value)


def _string(value: Any, name: str, file: Any, line: int | None, *, nonempty: bool = True) -> str:
    if not isinstance(value, str) or (nonempty and not value.strip()):
        raise _fail(f"got {value!r}", name, "a non-empty string", file, line)
    return value


def _optional_int(value: Any, name: str, file: Any, line: int | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(f"got {value!r}", name, "an integer or null", file, line)
    return value


def _position(value: Any, name: str, file: Any, line: int | None) -> list[float]:
    if not isinstance(value, (list, tuple)) or len(value) != 3:
        raise _fail(f"got {value!r}", name, "a list of 3 finite numbers [x, y, z]", file, line)
    return [_number(v, f"{name}[{i}]", file, line) for i, v in enumerate(value)]


_REQUIRED = ("episode_id", "scene_id", "scene_path", "split", "task_type", "start_position", "start_yaw",
             "goals", "reference_path", "geodesic_distance", "instructions")
_KNOWN = set(_REQUIRED) | {"info", "version"}


def _instruction_optional(task_type: str) -> bool:
    """Whether ``task_type``'s generator declares its episodes may carry no instruction text."""
    from .registry import TASKS, load_task_types

    if task_type not in TASKS:
        load_task_types()
    return task_type in TASKS and bool(getattr(TASKS.get(task_type), "instruction_optional", False))


def _parse_episode(data: Any, *, file: Any, line: int | None) -> Episode:
    if not isinstance(data, dict):
        raise _fail(f"got {type(data).__name__}", None, "a JSON object (one episode)", file, line)
    version = data.get("version")
    if version != EPISODE_VERSION:
        raise _fail(f"got {version!r}", "version", EPISODE_VERSION, file, line)
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise _fail(f"missing required field(s) {missing}", None, None, file, line)
    unknown = sorted(set(data) - _KNOWN)
    if unknown:
        raise _fail(f"unknown field(s) {unknown}", None, f"one of {sorted(_KNOWN)}", file, line)

    goals_raw = data["goals"]
    if not isinstance(goals_raw, list) or not goals_raw:
        raise _fail(f"got {goals_raw!r}", "goals", "a non-empty list of goals", file, line)
    goals = []
    for i, g in enumerate(goals_raw):
        name = f"goals[{i}]"
        if not isinstance(g, dict) or "position" not in g:
            raise _fail(f"got {g!r}", name, "an object with 'position'", file, line)
        extra = sorted(set(g) - {"position", "radius", "object_id", "room_id", "category"})
        if extra:
            raise _fail(f"unknown field(s) {extra}", name, None, file, line)
        radius = _number(g.get("radius", 3.0), f"{name}.radius", file, line)
        if radius <= 0:
            raise _fail(f"got {radius}", f"{name}.radius", "a positive number", file, line)
        category = g.get("category")
        if category is not None:
            _string(category, f"{name}.category", file, line)
        goals.append(Goal(position=_position(g["position"], f"{name}.position", file, line), radius=radius,
                          object_id=_optional_int(g.get("object_id"), f"{name}.object_id", file, line),
                          room_id=_optional_int(g.get("room_id"), f"{name}.room_id", file, line),
                          category=category))

    path_raw = data["reference_path"]
    if not isinstance(path_raw, list) or not path_raw:
        raise _fail(f"got {path_raw!r}", "reference_path", "a non-empty list of [x, y, z] points", file, line)
    reference_path = [_position(p, f"reference_path[{i}]", file, line) for i, p in enumerate(path_raw)]

    task_type = _string(data["task_type"], "task_type", file, line)
    instr_raw = data["instructions"]
    if not isinstance(instr_raw, list):
        raise _fail(f"got {instr_raw!r}", "instructions", "a list of instructions", file, line)
    instructions = []
    for i, ins in enumerate(instr_raw):
        name = f"instructions[{i}]"
        if not isinstance(ins, dict) or "text" not in ins:
            raise _fail(f"got {ins!r}", name, "an object with 'text'", file, line)
        extra = sorted(set(ins) - {"text", "style", "language"})
        if extra:
            raise _fail(f"unknown field(s) {extra}", name, None, file, line)
        instructions.append(Instruction(text=_string(ins["text"], f"{name}.text", file, line),
                                        style=_string(ins.get("style", "natural"), f"{name}.style", file, line),
                                        language=_string(ins.get("language", "en"), f"{name}.language", file, line)))
    if not instructions:
        if not _instruction_optional(task_type):
            raise _fail("empty", "instructions", "at least one instruction", file, line)
        if not goals[0].category:
            raise _fail("no instruction and no goal category", "instructions",
                        f"an instruction or goals[0].category for task '{task_type}'", file, line)

    geodesic = _number(data["geodesic_distance"], "geodesic_distance", file, line)
    if geodesic < 0:
        raise _fail(f"got {geodesic}", "geodesic_distance", "a value >= 0", file, line)
    info = data.get("info", {})
    if not isinstance(info, dict):
        raise _fail(f"got {type(info).__name__}", "info", "a JSON object", file, line)

    return Episode(
        episode_id=_string(data["episode_id"], "episode_id", file, line),
        scene_id=_string(data["scene_id"], "scene_id", file, line),
        scene_path=_string(data["scene_path"], "scene_path", file, line, nonempty=False),
        split=_string(data["split"], "split", file, line),
        task_type=task_type,
        start_position=_position(data["start_position"], "start_position", file, line),
        start_yaw=_number(data["start_yaw"], "start_yaw", file, line),
        goals=goals,
        reference_path=reference_path,
        geodesic_distance=geodesic,
        instructions=instructions,
        info=info,
        version=EPISODE_VERSION,
    )


# --------------------------------------------------------------------------------------------
# Files


def instruction_languages(episodes) -> list | None:
    """The distinct instruction languages of ``episodes`` (each one's ``info.language``, e.g.
    ``{"version": 2, "families": [0]}``), sorted; None when none has one (the version-1 language).
    A run's protocol records them: runs on other wordings of the same paths are not paired."""
    import json

    found = {json.dumps(e.info["language"], sort_keys=True) for e in episodes if isinstance(e.info.get("language"), dict)}
    return [json.loads(t) for t in sorted(found)] or None


def save_episodes(path: str | Path, episodes: list[Episode]) -> Path:
    """Write ``episodes`` as JSONL (one sorted-key record per line) atomically; returns the path."""
    return write_jsonl_atomic(path, [e.to_dict() for e in episodes])


def _read_jsonl(path: Path, split: str | None) -> list[Episode]:
    episodes: list[Episode] = []
    seen: dict[str, int] = {}
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                data = json.loads(raw.decode("utf-8"))
            except json.JSONDecodeError as exc:
                raise ConfigError(f"malformed JSON: {exc.msg} (column {exc.colno})", file=path, line=lineno,
                                  expected="one JSON object per line") from None
            except UnicodeDecodeError as exc:
                raise ConfigError(f"not UTF-8 text (byte {exc.start} of the line)", file=path, line=lineno,
                                  expected="one UTF-8 JSON object per line") from None
            except (ValueError, RecursionError) as exc:  # 5000-digit numbers, nesting too deep
                raise ConfigError(f"unreadable JSON: {str(exc).splitlines()[0][:80]}", file=path, line=lineno,
                                  expected="one JSON object per line") from None
            episode = _parse_episode(data, file=path, line=lineno)
            episode.source = (str(path), lineno)
            if episode.episode_id in seen:
                raise ConfigError(f"duplicate episode id '{episode.episode_id}' (first on line "
                                  f"{seen[episode.episode_id]})", file=path, line=lineno, field="episode_id")
            seen[episode.episode_id] = lineno
            if split is None or episode.split == split:
                episodes.append(episode)
    return episodes


def load_episodes(path_or_dir: str | Path, split: str | None = None) -> list[Episode]:
    """Load and validate episodes from a ``.jsonl`` file or a dataset directory.

    For a directory, ``split`` picks ``DIR/<split>.jsonl`` (every ``*.jsonl`` when ``None``). For a
    file, ``split`` filters records by their ``split`` field.
    """
    path = Path(path_or_dir)
    if path.is_dir():
        if split is not None:
            target = path / f"{split}.jsonl"
            if not target.is_file():
                known = sorted(p.stem for p in path.glob("*.jsonl"))
                raise ConfigError(f"no split '{split}' in dataset", file=path,
                                  expected=f"one of {known}")
            return _read_jsonl(target, None)
        files = sorted(path.glob("*.jsonl"))
        if not files:
            raise ConfigError("no episode files (*.jsonl) in directory", file=path)
        return [e for f in files for e in _read_jsonl(f, None)]
    if not path.is_file():
        raise ConfigError("episode file not found", file=path, expected="a .jsonl file or a dataset directory")
    return _read_jsonl(path, split)
