"""``vlnverse study score DIR``: the human row per task, with the evaluation's metrics and table.

Each ended episode's CSV is scored by the evaluation's own scoring (``vlnverse.run.scoring.score_rollout``
on the replayed log: geodesic NE/SR/OSR/SPL on the scene's navigable map, nDTW/sDTW/CLS against the
reference, CR, and whatever the task type declares)
under the episode's collision mode: success needs the participant's Enter (a STOP) and, under
Strict, no failure. TL, NE, SR, OSR and SPL use the logged path (one pose per 50 ms); nDTW, sDTW
and CLS use it resampled every ``forward_step`` metres along the way it went — the density of
the reference path and of an agent's discrete steps — so sequences are compared like with like.
A collision is a tick with contact; CR divides them by the ticks a key was held.

The human row per task (VLNVerse App. D) averages each participant's mean; the spread is the
standard deviation over participants. Malformed CSVs are named on stderr, skipped and counted;
episodes not ended yet are counted as unfinished.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..core.errors import ConfigError
from ..core.io import to_jsonable, write_json_atomic, write_jsonl_atomic
from .assign import EPISODES_FILE, PARTICIPANTS, STUDY_FILE
from .log import IDLE, read_episode_end, read_rows, safe_name

SUMMARY_FILE = "summary.json"
RECORDS_FILE = "human_episodes.jsonl"
AGENT = "human"
#: metrics that compare point sequences (scored on the path resampled every ``forward_step``)
DENSITY_METRICS = ("nDTW", "sDTW", "CLS")


def resample_by_arc_length(xy: np.ndarray, spacing: float) -> np.ndarray:
    """Points every ``spacing`` metres along the polyline ``xy`` (N, 2), first and last kept; a
    path that never moved is its first point."""
    xy = np.asarray(xy, dtype=float)
    s = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(xy, axis=0), axis=1))]
    if s[-1] <= 1e-9:
        return xy[:1]
    at = np.r_[np.arange(0.0, s[-1], spacing), s[-1]]
    return np.stack([np.interp(at, s, xy[:, 0]), np.interp(at, s, xy[:, 1])], axis=1)


@dataclass
class RecordedRollout:
    """A finished episode replayed from its log, with the attributes the evaluation's scoring
    reads from a live ``Rollout`` (``vlnverse.run.scoring.score_rollout``)."""

    episode: Any
    ctx: Any
    settings: Any
    mode: Any
    poses: list
    stopped: bool
    failure: str | None
    collisions: list
    moves: int
    decision: str | None = None
    selected_frame: int | None = None
    scene_cache: dict = field(default_factory=dict)

    @property
    def scoring(self) -> Any:
        """The episode's task scoring declaration."""
        from ..tasks.scoring import scoring_for

        return scoring_for(self.episode.task_type)


def score_csv(path: Path, episode: Any, end: dict, *, forward_step: float = 0.25) -> dict:
    """The runner-style record of one participant's episode (metrics, trajectory, collisions)."""
    from types import SimpleNamespace

    from ..run.scoring import score_rollout
    from ..sim.body import load_body
    from ..tasks.base import load_scene_context, load_task_config

    rows = read_rows(path, strict=True)
    if not rows:
        raise ConfigError("no logged rows", file=path, expected="at least one row after the header")
    task_cfg = load_task_config(episode.task_type)
    ctx = load_scene_context(episode.scene_path, load_body(task_cfg.body), task_cfg.map_resolution)
    poses = np.array([[r.x, r.y, r.yaw] for r in rows], dtype=float)
    keep = np.r_[True, np.linalg.norm(np.diff(poses[:, :2], axis=0), axis=1) > 1e-6]
    moving = [r for r in rows if r.action != IDLE]
    hits = [(i, r) for i, r in enumerate(rows) if r.collided]
    replay = RecordedRollout(episode, ctx, SimpleNamespace(success_distance=task_cfg.success_distance),
                             SimpleNamespace(forward_step=forward_step), poses[keep].tolist(),
                             stopped=end["termination"] == "stop",
                             failure=(end.get("failure") or "failure") if end["termination"] == "failure" else None,
                             collisions=[{"step": i} for i, _ in hits], moves=max(1, len(moving)))
    metrics = score_rollout(replay)
    sparse_xy = resample_by_arc_length(poses[keep, :2], forward_step)
    replay.poses = np.c_[sparse_xy, np.zeros(len(sparse_xy))].tolist()
    sparse = score_rollout(replay)
    metrics.update({k: sparse[k] for k in DENSITY_METRICS if k in sparse})
    return {
        "episode_id": episode.episode_id, "scene_id": episode.scene_id, "task_type": episode.task_type,
        "split": episode.split, "instruction": episode.instruction_text, "metrics": metrics, "decision": None,
        "termination": end["termination"], "failure": end.get("failure"), "steps": len(rows), "moves": len(moving),
        "invalid_actions": 0, "invalid": [], "trajectory": [[r.x, r.y, r.yaw] for r in rows],
        "pitch": [r.pitch for r in rows], "times": [r.t for r in rows], "actions": [r.action for r in rows],
        "collisions": [{"step": i, "position": [r.x, r.y]} for i, r in hits], "agent_outputs": [],
        "reference_path": np.round(np.asarray(episode.reference_path, dtype=float), 4).tolist(),
        "goals": [g.position[:2] for g in episode.goals], "agent": AGENT,
        "collision_mode": end.get("collision_mode", "strict"), "participant": path.parent.name,
    }


def score_records(study_dir: str | Path, scene_root: Any = None) -> tuple[list[dict], dict]:
    """Records of every ended episode in a study folder, and what was skipped
    (``{"malformed": [{"file", "error"}], "unfinished": n, "practice": n}``). Scenes are found in ``scene_root``
    (``--scene-root``), the roots the study recorded, the study folder and the shipped scenes; a
    scene in none is a ``SceneError`` naming the episode and the roots."""
    from ..tasks.episode import load_episodes
    from ..tasks.scene_roots import SceneResolver, recorded_scene_roots

    root = Path(study_dir)
    if not (root / STUDY_FILE).is_file() or not (root / EPISODES_FILE).is_file():
        raise ConfigError("not a study folder", file=root, expected=f"a folder with {STUDY_FILE} and {EPISODES_FILE} "
                                                                    "written by 'vlnverse study serve'")
    episodes = {safe_name(e.episode_id): e for e in load_episodes(root / EPISODES_FILE)}
    records: list[dict] = []
    skipped: dict[str, Any] = {"malformed": [], "unfinished": 0, "practice": 0}
    resolve = SceneResolver(recorded_scene_roots(root, scene_root))
    for path in sorted((root / PARTICIPANTS).glob("*/*.csv")):
        episode = episodes.get(path.stem)
        if episode is None:
            skipped["malformed"].append({"file": str(path), "error": "not an episode of this study"})
            continue
        end = read_episode_end(path.parent, episode.episode_id)
        if end is None:
            skipped["unfinished"] += 1
            continue
        if end.get("practice"):  # practice episodes are never scored
            skipped["practice"] += 1
            continue
        try:
            records.append(score_csv(path, resolve.resolved(episode), end))
        except (ConfigError, ValueError, KeyError, UnicodeDecodeError) as exc:
            skipped["malformed"].append({"file": str(path), "error": str(exc)})
    return records, skipped


def human_rows(records: list[dict]) -> dict[str, dict]:
    """Per ``task/mode``: the mean over participants of each participant's mean, the standard
    deviation over participants, and each participant's means."""
    from ..run import metrics as M

    out: dict[str, dict] = {}
    groups: dict[str, dict[str, list]] = {}
    for r in records:
        groups.setdefault(f"{r['task_type']}/{r['collision_mode']}", {}).setdefault(r["participant"], []).append(r)
    for key, by_pid in sorted(groups.items()):
        per = {pid: M.aggregate([{k: v for k, v in r["metrics"].items() if k != "goals_reached"} for r in recs])["means"]
               for pid, recs in sorted(by_pid.items())}
        names = sorted({n for m in per.values() for n in m})
        values = {n: [m[n] for m in per.values() if n in m] for n in names}
        out[key] = {"participants": len(per), "episodes": sum(len(v) for v in by_pid.values()),
                    "mean": {n: float(np.mean(v)) for n, v in values.items()},
                    "std": {n: float(np.std(v)) for n, v in values.items()},
                    "per_participant": per}
    return out


def score_study(study_dir: str | Path, *, json_path: str | Path | None = None, print_summary: bool = True,
                scene_root: Any = None) -> dict:
    """Score a study folder; print the table (human row and its spread per task) and write
    ``DIR/summary.json`` (``vlnverse eval``'s layout plus ``human``) and ``DIR/human_episodes.jsonl``."""
    from ..run.summary import print_table, summarize

    root = Path(study_dir)
    records, skipped = score_records(root, scene_root)
    for bad in skipped["malformed"]:
        print(f"vlnverse study score: skipped malformed {bad['file']}: {bad['error']}", file=sys.stderr)
    config = json.loads((root / STUDY_FILE).read_text(encoding="utf-8")).get("config", {})
    run = {"agent": AGENT, "model": None, "task": sorted({r["task_type"] for r in records}),
           "collision_mode": config.get("collision_mode", "strict"), "split": sorted({r["split"] for r in records}),
           "participants": sorted({r["participant"] for r in records})}
    summary = summarize(records, run=run) if records else {"run": run, "overall": None, "by_task": {}}
    if records:  # summarize groups by the run's mode; regroup by each episode's own mode
        summary["by_task"] = {k: summarize(v, run=run)["overall"] for k, v in _by_task(records).items()}
    summary["human"] = human_rows(records)
    summary["skipped"] = {"malformed": len(skipped["malformed"]), "malformed_files": skipped["malformed"],
                          "unfinished": skipped["unfinished"], "practice": skipped["practice"]}
    write_json_atomic(Path(json_path) if json_path else root / SUMMARY_FILE, to_jsonable(summary))
    write_jsonl_atomic(root / RECORDS_FILE, to_jsonable(records))
    if print_summary:
        rows = []
        for key, row in summary["human"].items():
            task, mode = key.split("/")
            rows.append(((task, AGENT, mode), {"means": row["mean"], "episodes": row["episodes"], "invalid_actions": 0}))
            rows.append(((task, f"{AGENT} sd ({row['participants']} p.)", mode),
                         {"means": row["std"], "episodes": row["episodes"], "invalid_actions": 0}))
        print_table(rows, title="vlnverse study score")
        print(f"{len(records)} episodes scored; skipped {len(skipped['malformed'])} malformed, "
              f"{skipped['unfinished']} unfinished, {skipped['practice']} practice; wrote {Path(json_path) if json_path else root / SUMMARY_FILE}")
    return summary


def _by_task(records: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in records:
        out.setdefault(f"{r['task_type']}/{r['collision_mode']}", []).append(r)
    return dict(sorted(out.items()))
