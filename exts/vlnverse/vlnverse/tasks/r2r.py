"""Import/export of the VLN-CE R2R JSON layout (Habitat's ``VLN-CE-v1``).

Layout::

    {"episodes": [{"episode_id", "trajectory_id", "scene_id", "start_position", "start_rotation",
                   "info": {"geodesic_distance"}, "goals": [{"position", "radius"}],
                   "instruction": {"instruction_text", "instruction_tokens"}, "reference_path"}],
     "instruction_vocab": {"word_list", "word2idx_dict", "itos", "stoi", "num_vocab",
                           "UNK_INDEX", "PAD_INDEX"}}

Axes: vlnverse is Z-up (x, y, z) with yaw counter-clockwise from +X; Habitat/VLN-CE is Y-up
with the agent looking along -Z. A point maps as ``(x, y, z) → (x, z, -y)`` and back as
``(x_h, y_h, z_h) → (x_h, -z_h, y_h)``. A heading ``yaw`` becomes a rotation by
``θ = yaw − π/2`` about +Y, quaternion ``[0, sin θ/2, 0, cos θ/2]`` in ``[x, y, z, w]`` order
(facing +Y in vlnverse ⇔ facing -Z in Habitat). On import the heading is read from the
quaternion's rotated forward vector, so any valid quaternion works.

One R2R episode holds one instruction: an episode with several instructions is exported as
several R2R episodes sharing a ``trajectory_id``, with ids ``"<id>#<k>"``; import regroups them.
The layout has no place for goal object/room ids, instruction styles or ``info``: those are not
exported (imported instructions are ``natural``/``en``; ``info`` keeps the ``trajectory_id``).
"""
from __future__ import annotations

import json
import math
import re
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from ..core.config import short
from ..core.errors import ConfigError
from ..core.io import to_jsonable, write_bytes_atomic, write_text_atomic
from ..core.precision import LENGTH_DECIMALS, QUATERNION_DECIMALS, round_floats, unit_quaternion
from .episode import Episode, Goal, Instruction

PAD_INDEX, UNK_INDEX = 0, 1
_TOKEN_RE = re.compile(r"[a-z0-9]+(?:'[a-z]+)?|[^\sa-z0-9]")


def zup_to_habitat(p) -> list[float]:
    """vlnverse (x, y, z) Z-up → Habitat (x, y, z) Y-up."""
    x, y, z = (float(v) for v in p)
    return [x, z, -y]


def habitat_to_zup(p) -> list[float]:
    """Habitat (x, y, z) Y-up → vlnverse (x, y, z) Z-up."""
    x, y, z = (float(v) for v in p)
    return [x, -z, y]


def yaw_to_quaternion(yaw: float) -> list[float]:
    """vlnverse heading → Habitat rotation quaternion ``[x, y, z, w]`` about +Y."""
    theta = float(yaw) - math.pi / 2.0
    return [0.0, math.sin(theta / 2.0), 0.0, math.cos(theta / 2.0)]


def quaternion_to_yaw(q) -> float:
    """Habitat quaternion ``[x, y, z, w]`` → vlnverse heading (of the rotated -Z forward axis)."""
    x, y, z, w = (float(v) for v in q)
    norm = math.sqrt(x * x + y * y + z * z + w * w)
    if not norm > 0:
        raise ValueError("zero quaternion")
    x, y, z, w = x / norm, y / norm, z / norm, w / norm
    # Third column of the rotation matrix, negated: R @ (0, 0, -1).
    fx = -(2 * (x * z + w * y))
    fz = -(1 - 2 * (x * x + y * y))
    forward = habitat_to_zup([fx, 0.0, fz])
    return math.atan2(forward[1], forward[0])


def tokenize(text: str) -> list[str]:
    """Lower-case word and punctuation tokens."""
    return _TOKEN_RE.findall(text.lower())


def build_vocab(texts: list[str]) -> dict[str, Any]:
    """A VLN-CE style vocabulary (index 0 = ``<pad>``, 1 = ``<unk>``, then words sorted)."""
    words = sorted({t for text in texts for t in tokenize(text)})
    itos = ["<pad>", "<unk>"] + words
    stoi = {w: i for i, w in enumerate(itos)}
    return {"word_list": itos, "word2idx_dict": stoi, "itos": itos, "stoi": stoi, "num_vocab": len(itos),
            "UNK_INDEX": UNK_INDEX, "PAD_INDEX": PAD_INDEX}


def export_r2r(episodes: list[Episode], path: str | Path, *, pad_to: int = 200) -> Path:
    """Write episodes in the VLN-CE R2R layout (atomic; gzip-compressed when ``path`` ends in
    ``.gz``, as VLN-CE's ``{split}.json.gz``); returns the path.

    Token lists are padded with ``PAD_INDEX`` to ``pad_to`` (VLN-CE uses 200), or to the longest
    instruction if longer. Category-only episodes (``object_goal``) use the category as the text.
    """
    texts = [[i.text for i in e.instructions] or [e.instruction_text] for e in episodes]
    vocab = build_vocab([t for ts in texts for t in ts])
    stoi = vocab["stoi"]
    width = max([pad_to] + [len(tokenize(t)) for ts in texts for t in ts])
    records = []
    for trajectory_id, (ep, ep_texts) in enumerate(zip(episodes, texts)):
        for k, text in enumerate(ep_texts):
            tokens = [stoi.get(t, UNK_INDEX) for t in tokenize(text)]
            # positions rounded to LENGTH_DECIMALS here; the file keeps the quaternion's 9 decimals
            records.append(round_floats({
                "episode_id": ep.episode_id if len(ep_texts) == 1 else f"{ep.episode_id}#{k}",
                "trajectory_id": trajectory_id,
                "scene_id": ep.scene_id,  # portable: resolved against scene roots on import/eval
                "start_position": zup_to_habitat(ep.start_position),
                "info": {"geodesic_distance": ep.geodesic_distance},
                "goals": [{"position": zup_to_habitat(g.position), "radius": g.radius} for g in ep.goals],
                "instruction": {"instruction_text": text, "instruction_tokens": tokens + [PAD_INDEX] * (width - len(tokens))},
                "reference_path": [zup_to_habitat(p) for p in ep.reference_path],
            }, LENGTH_DECIMALS))
            x, y, z, w = yaw_to_quaternion(ep.start_yaw)
            w, x, y, z = unit_quaternion([w, x, y, z])  # normalised, sign fixed, 9 decimals (core.precision)
            records[-1]["start_rotation"] = [x, y, z, w]
    data = {"episodes": records, "instruction_vocab": vocab}
    if Path(path).suffix == ".gz":  # VLN-CE ships ``{split}.json.gz``
        import gzip

        text = json.dumps(to_jsonable(data, decimals=QUATERNION_DECIMALS), sort_keys=True) + "\n"
        return write_bytes_atomic(path, gzip.compress(text.encode("utf-8"), mtime=0))
    return write_text_atomic(path, json.dumps(to_jsonable(data, decimals=QUATERNION_DECIMALS), sort_keys=True) + "\n")


def _require(cond: bool, path: Path, field: str, problem: str, expected: str) -> None:
    if not cond:
        raise ConfigError(problem, file=path, field=field, expected=expected)


def _vec3(value: Any, path: Path, field: str) -> list[float]:
    ok = isinstance(value, (list, tuple)) and len(value) == 3 and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value)
    _require(ok, path, field, f"got {short(value)}", "[x, y, z] finite numbers")
    return habitat_to_zup(value)


#: The most an R2R file may hold, compressed or inflated (bytes).
MAX_R2R_BYTES = 256 * 2 ** 20


def _gunzip_capped(raw: bytes, path: Path) -> bytes:
    """Inflate gzip ``raw`` in chunks, refusing more than ``MAX_R2R_BYTES`` (a gzip bomb)."""
    parts: list[bytes] = []
    size = 0
    while raw:  # one gzip member after another
        inflater = zlib.decompressobj(wbits=47)  # gzip or zlib header
        out = inflater.decompress(raw, MAX_R2R_BYTES + 1 - size)
        size += len(out)
        if size > MAX_R2R_BYTES or inflater.unconsumed_tail:
            raise ConfigError(f"inflates to more than {MAX_R2R_BYTES} bytes", file=path,
                              expected="a smaller R2R file")
        if not inflater.eof:
            raise ConfigError("truncated gzip stream", file=path, expected="a complete .json.gz file")
        parts.append(out)
        raw = inflater.unused_data.lstrip(b"\0")
    return b"".join(parts)


def import_r2r(path: str | Path, *, split: str, task_type: str = "fine_grained") -> list[Episode]:
    """Read a VLN-CE R2R JSON file (optionally ``.json.gz``) into episodes of ``task_type``/``split``.

    ``scene_id`` becomes ``scene_path`` and its file stem the scene id; R2R episodes whose ids are
    ``"<id>#<k>"`` are merged into one episode with several instructions. Errors name the file and
    the ``episodes[i].field`` at fault.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError("R2R file not found", file=path)
    try:
        if path.stat().st_size > MAX_R2R_BYTES:
            raise ConfigError(f"{path.stat().st_size} bytes", file=path, expected=f"at most {MAX_R2R_BYTES} bytes")
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":  # gzip by content, whatever the file is called
            raw = _gunzip_capped(raw, path)
        data = json.loads(raw.decode("utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"malformed JSON: {exc.msg}", file=path, line=exc.lineno) from None
    except (OSError, EOFError, UnicodeDecodeError, zlib.error, ValueError, RecursionError) as exc:
        # corrupt gzip stream, bad bytes, 5000-digit numbers, deep nesting
        raise ConfigError(f"unreadable R2R file: {str(exc)[:120]}", file=path) from None
    _require(isinstance(data, dict) and isinstance(data.get("episodes"), list), path, "episodes",
             "missing", "a top-level object with an 'episodes' list")
    merged: dict[str, Episode] = {}
    for i, rec in enumerate(data["episodes"]):
        where = f"episodes[{i}]"
        _require(isinstance(rec, dict), path, where, f"got {type(rec).__name__}", "an object")
        for key in ("episode_id", "scene_id", "start_position", "start_rotation", "goals", "instruction"):
            _require(key in rec, path, f"{where}.{key}", "missing", "present")
        instr = rec["instruction"]
        _require(isinstance(instr, dict) and isinstance(instr.get("instruction_text"), str)
                 and instr["instruction_text"].strip() != "", path, f"{where}.instruction.instruction_text",
                 f"got {short(instr)}", "a non-empty string")
        rot = rec["start_rotation"]
        _require(isinstance(rot, (list, tuple)) and len(rot) == 4
                 and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in rot)
                 and any(v != 0 for v in rot), path, f"{where}.start_rotation", f"got {short(rot)}",
                 "a non-zero quaternion [x, y, z, w] of finite numbers")
        goals_raw = rec["goals"]
        _require(isinstance(goals_raw, list) and len(goals_raw) > 0, path, f"{where}.goals", f"got {short(goals_raw)}",
                 "a non-empty list")
        goals = []
        for j, g in enumerate(goals_raw):
            _require(isinstance(g, dict) and "position" in g, path, f"{where}.goals[{j}]", f"got {short(g)}",
                     "an object with 'position'")
            radius = g.get("radius", 3.0)
            _require(isinstance(radius, (int, float)) and not isinstance(radius, bool) and math.isfinite(radius)
                     and radius > 0, path, f"{where}.goals[{j}].radius",
                     f"got {short(radius)}", "a positive number")
            goals.append(Goal(position=_vec3(g["position"], path, f"{where}.goals[{j}].position"),
                              radius=float(radius)))
        start = _vec3(rec["start_position"], path, f"{where}.start_position")
        ref_raw = rec.get("reference_path") or [rec["start_position"], goals_raw[-1]["position"]]
        reference = [_vec3(p, path, f"{where}.reference_path[{k}]") for k, p in enumerate(ref_raw)]
        info = rec.get("info") or {}
        geodesic = info.get("geodesic_distance") if isinstance(info, dict) else None
        if geodesic is None:
            geodesic = float(np.linalg.norm(np.diff(np.asarray(reference), axis=0), axis=1).sum())
        _require(isinstance(geodesic, (int, float)) and not isinstance(geodesic, bool) and math.isfinite(geodesic)
                 and geodesic >= 0, path, f"{where}.info.geodesic_distance", f"got {short(geodesic)}",
                 "a finite distance >= 0 m")
        episode_id = str(rec["episode_id"])
        base_id = episode_id.split("#", 1)[0]
        instruction = Instruction(text=instr["instruction_text"])
        if base_id in merged:
            merged[base_id].instructions.append(instruction)
            continue
        scene_ref = str(rec["scene_id"])  # ours: a scene id; VLN-CE: a path like "mp3d/<id>/<id>.glb"
        scene_path = scene_ref if Path(scene_ref).suffix else ""
        merged[base_id] = Episode(
            episode_id=base_id, scene_id=Path(scene_ref).name.split(".")[0], scene_path=scene_path, split=split,
            task_type=task_type, start_position=start, start_yaw=quaternion_to_yaw(rot), goals=goals,
            reference_path=reference, geodesic_distance=float(geodesic), instructions=[instruction],
            info={"trajectory_id": rec.get("trajectory_id")})
    episodes = list(merged.values())
    for ep in episodes:  # run the episode format's own validation on every imported record
        Episode.from_dict(ep.to_dict(), file=path)
    return episodes
