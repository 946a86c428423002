"""Step-level error analysis (VLN-MME's diagnostics), for every agent: the *first* error of each
failed episode, from its trajectory, the reference path split into clauses, the instruction's
grounded landmarks resolved in the scene graph, and the recorded collisions.

The reference path is split into **clauses** the way the instruction generator grounds its turns
(``vlnverse.tasks.instructions.describer``): heading changes at vertices less than
``MERGE_DISTANCE`` (1.0 m, the describer's ``turn_merge``) apart along the path are one turn (so a
bend drawn as two vertices 0.1 m apart is one clause), and a summed change of 35° or more is a
turn (150°: turn around). Clause 0 is "go straight", each later one "turn left / right / around"
then go straight; the instruction's sentences are aligned with them (:func:`clause_texts`: its
k-th turn phrase is clause k). A landmark of the episode (``info["landmarks"]``: scene-graph
instance ids) within ``landmark_radius`` of a turn anchors that turn. The agent's poses are
projected onto the reference (arc length = progress, distance = deviation). Steps are scanned in
order; the first rule that fires names the error, at the step where it happened:

=================  ===================================================================================
``collision``      the step touched an obstacle (a recorded collision)
``loop``           the agent came back within ``revisit_radius`` of a place it had left (it went more
                   than twice that radius away first)
``overshoot``      the agent left the goal region (within the success distance of the goal) that an
                   earlier pose was in
``missed_landmark`` the agent left the reference corridor (deviation over ``off_path``) within
                   ``turn_window`` of a turn anchored by a landmark: it turned before or after the
                   landmark, or not at all; reported at the step that left the route (the move from
                   its last pose within ``depart`` of the reference)
``wrong_direction`` it left the corridor anywhere else: it moved against the current clause (same step)
``walked_away``    inside the corridor, it walked back along the route: its progress (signed, negative
                   behind the start) fell more than ``walk_back`` below the best it had reached;
                   reported at the first step back (the corridor alone misses an agent that walks
                   back past its start within ``off_path`` of it)
``premature_stop`` (no step error) it stopped short of the goal: progress below the path length
                   minus the success distance; reported at the STOP
``overshoot``      (no step error) it stopped beyond the end of the path, outside the goal region
                   (at the STOP)
``out_of_steps``   (no step error) it never stopped and never reached the goal region (its last step)
``collision``      (no step error) a Strict episode ended in failure (the body was displaced)
=================  ===================================================================================

A successful episode, or one not evaluated, has no first error (``None``).
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

#: error categories in the order they are reported
CATEGORIES = ("wrong_direction", "missed_landmark", "walked_away", "premature_stop", "overshoot", "loop", "collision",
              "out_of_steps")
#: reference vertices closer than this along the path (m) are one bend: their heading changes add
#: up to one turn (the instruction describer's ``turn_merge``, so clauses match the instruction's turns)
MERGE_DISTANCE = 1.0


def _polyline(points: Any) -> tuple[np.ndarray, np.ndarray]:
    """(vertices (N, 2) without repeated points, cumulative arc length (N,))."""
    pts = np.atleast_2d(np.asarray(points, dtype=float))[:, :2]
    keep = [0] + [i for i in range(1, len(pts)) if np.linalg.norm(pts[i] - pts[i - 1]) > 1e-6]
    pts = pts[keep]
    arc = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(pts, axis=0), axis=1))])
    return pts, arc


def project(points: Any, path: np.ndarray, arc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(arc length of the nearest point on the polyline ``path``, distance to it) for each point."""
    pts = np.atleast_2d(np.asarray(points, dtype=float))[:, :2]
    if len(path) == 1:
        return np.zeros(len(pts)), np.linalg.norm(pts - path[0], axis=1)
    a, b = path[:-1], path[1:]
    ab = b - a
    length2 = np.maximum((ab ** 2).sum(axis=1), 1e-12)
    t = np.clip(((pts[:, None, :] - a[None]) * ab[None]).sum(axis=2) / length2[None], 0.0, 1.0)  # (P, S)
    nearest = a[None] + t[..., None] * ab[None]
    dist = np.linalg.norm(pts[:, None, :] - nearest, axis=2)
    k = dist.argmin(axis=1)
    rows = np.arange(len(pts))
    return arc[k] + t[rows, k] * np.sqrt(length2[k]), dist[rows, k]


def clauses(reference: Any, landmarks: dict[Any, tuple[str, Sequence[float]]] | None = None, *,
            landmark_radius: float = 1.5, merge_distance: float = MERGE_DISTANCE) -> list[dict[str, Any]]:
    """The reference path's clauses: ``[{"index", "start_s", "end_s", "action", "landmark"}]``;
    ``action`` is ``straight`` (the first) or ``turn_left`` / ``turn_right`` / ``turn_around``.
    Heading changes at vertices less than ``merge_distance`` apart along the path are summed
    into one turn, classified as the instruction describer does (35° a turn, 150° around);
    ``landmark`` (category and id) anchors the turn when one lies within ``landmark_radius`` of
    any of its vertices. ``landmarks``: id -> (category, (x, y))."""
    from ..tasks.instructions.describer import turn_direction

    path, arc = _polyline(reference)
    bends: list[list] = []  # [start s, summed heading change, vertices]
    for i in range(1, len(path) - 1):
        d0, d1 = path[i] - path[i - 1], path[i + 1] - path[i]
        delta = math.atan2(d0[0] * d1[1] - d0[1] * d1[0], float(d0 @ d1))
        if bends and arc[i] - bends[-1][0] < merge_distance:
            bends[-1][1] += delta
            bends[-1][2].append(path[i])
        else:
            bends.append([float(arc[i]), delta, [path[i]]])
    out = [{"index": 0, "start_s": 0.0, "action": "straight", "landmark": None}]
    for s, delta, vertices in bends:
        direction = turn_direction(delta)
        if direction is None:
            continue
        near = None
        for lid, (category, pos) in (landmarks or {}).items():
            d = min(float(np.linalg.norm(np.asarray(pos, dtype=float)[:2] - v)) for v in vertices)
            if d <= landmark_radius and (near is None or d < near[0]):
                near = (d, {"id": lid, "category": category})
        out.append({"index": len(out), "start_s": round(s, 3), "action": f"turn_{direction}",
                    "landmark": near[1] if near else None})
    for c, nxt in zip(out, out[1:] + [None]):
        c["end_s"] = round(float(arc[-1]) if nxt is None else nxt["start_s"], 3)
    return out


_TURN_PHRASE = r"\b(?:turn|make\s+a|bear|veer|go|head|hang)\s+(?:a\s+|sharp\s+|slight\s+)?(?:left|right|around)\b|\bturn\s+around\b"


def clause_texts(instruction: str, n: int) -> list[str]:
    """The instruction split into ``n`` parts aligned with the ``n`` reference clauses: split
    at sentences, commas and ``then`` / ``and``; when it names ``n - 1`` turns, clause k > 0 is
    the phrase of its k-th turn and clause 0 what comes before the first; otherwise the phrases
    are spread in proportion (an approximation: the text is not aligned word by word)."""
    import re

    parts = [p.strip(" ,.;") for p in re.split(r"[.;,]|\s+(?:and\s+)?then\s+", instruction or "") if p.strip(" ,.;")]
    if not parts or n <= 0:
        return [""] * max(n, 0)
    turns = [k for k, p in enumerate(parts) if re.search(_TURN_PHRASE, p, re.I)]
    if len(turns) == n - 1 and (not turns or turns[0] > 0):
        return [", ".join(parts[:turns[0]]) if turns else ", ".join(parts)] + [parts[k] for k in turns]
    return [parts[min(len(parts) - 1, (k * len(parts)) // n)] for k in range(n)]


def first_error(trajectory: Any, reference: Any, goal: Sequence[float], success_distance: float, *,
                success: bool, stopped: bool, collision_poses: Sequence[int] = (),
                landmarks: dict[Any, tuple[str, Sequence[float]]] | None = None, goal_distance: Any = None,
                off_path: float = 1.5, revisit_radius: float = 0.5, turn_window: float = 1.5,
                landmark_radius: float = 1.5, failure: str | None = None, depart: float = 0.5,
                walk_back: float = 1.0) -> dict[str, Any] | None:
    """The first error of one episode (see the module docstring), or None for a success.

    ``trajectory``: the agent's poses (x, y[, yaw]), the start first; ``collision_poses``: pose
    indices reached by a step that collided; ``goal_distance``: distance to the goal per pose
    (default: straight-line to ``goal``); ``failure``: why a Strict episode failed (physics
    displacement: a ``collision`` at the last pose unless an earlier error came first). Returns
    ``{"category", "pose", "position", "clause", "detail", "at_stop"}``: ``pose`` indexes
    ``trajectory`` (the pose the erring step reached), ``at_stop`` is true for the errors of
    the final STOP (premature stop, stopping beyond the goal)."""
    if success:
        return None
    poses = np.asarray(trajectory, dtype=float)[:, :2]
    path, arc = _polyline(reference)
    length = float(arc[-1])
    cls = clauses(reference, landmarks, landmark_radius=landmark_radius)
    progress, deviation = project(poses, path, arc)
    along = progress.copy()  # signed progress: negative behind the start
    if len(path) >= 2:
        u = (path[1] - path[0]) / max(float(np.linalg.norm(path[1] - path[0])), 1e-9)
        behind = progress <= 1e-9
        along[behind] = np.minimum(0.0, (poses[behind] - path[0]) @ u)
    dist = np.asarray(goal_distance if goal_distance is not None else
                      np.linalg.norm(poses - np.asarray(goal, dtype=float)[:2], axis=1), dtype=float)
    inside = dist <= success_distance
    collided = set(int(i) for i in collision_poses)

    def clause_at(s: float) -> dict:
        return next((c for c in cls if c["start_s"] <= s < c["end_s"]), cls[-1])

    def hit(category: str, i: int, detail: str, clause: int | None = None, at_stop: bool = False) -> dict[str, Any]:
        if clause is None:
            clause = clause_at(float(progress[max(i - 1, 0)]))["index"]
        return {"category": category, "pose": int(i), "position": [round(float(v), 3) for v in poses[i]],
                "clause": clause, "detail": detail, "at_stop": at_stop}

    for i in range(1, len(poses)):
        if i in collided:
            return hit("collision", i, "the step touched an obstacle")
        j = revisited(poses[:i + 1], revisit_radius)
        if j is not None:
            return hit("loop", i, f"back within {revisit_radius:g} m of pose {j} after leaving it")
        if inside[i - 1] and not inside[i]:
            return hit("overshoot", i, f"left the goal region ({success_distance:g} m) it had reached")
        if deviation[i] > off_path:
            # the step that left the route: the move from the last pose still on it
            k = max((m for m in range(i) if deviation[m] <= depart), default=i - 1) + 1
            s = float(progress[k - 1])
            anchored = [c for c in cls[1:] if c["landmark"] is not None and abs(s - c["start_s"]) <= turn_window]
            if anchored:
                c = min(anchored, key=lambda c: abs(s - c["start_s"]))
                turn = f"{c['action'].replace('_', ' ')} at the {c['landmark']['category']}"
                side = _side(path, arc, s, poses[k - 1], poses[min(k + 1, i)])
                if c["start_s"] - s > 0.25:
                    what = f"turned {side} {c['start_s'] - s:.1f} m before the {c['landmark']['category']}"
                elif s - c["start_s"] > 0.25:
                    what = f"went {s - c['start_s']:.1f} m past the {c['landmark']['category']}, then {side}"
                else:
                    what = f"went {side} at the {c['landmark']['category']}"
                return hit("missed_landmark", k, f"{what}; the instruction says {turn} (clause {c['index']}); "
                                                 f"{deviation[i]:.1f} m off the reference at pose {i}", c["index"])
            c = clause_at(s)
            return hit("wrong_direction", k, f"{deviation[i]:.1f} m off the reference during clause {c['index']} "
                                             f"({c['action'].replace('_', ' ')})" + (f", at pose {i}" if k != i else ""),
                       c["index"])
        best = int(np.argmax(along[:i]))
        if along[best] - along[i] > walk_back:
            return hit("walked_away", best + 1, f"walked {along[best] - along[i]:.1f} m back along the route"
                                                + (" past its start" if along[i] < 0 else "") + f" by pose {i}")
    last = len(poses) - 1
    if failure:
        return hit("collision", last, f"the episode failed: {failure}")
    if not stopped:
        if inside.any():
            return hit("overshoot", last, "reached the goal region but did not stop there")
        return hit("out_of_steps", last, "never stopped and never reached the goal region")
    if progress[last] >= length - 1e-6 or inside.any():
        return hit("overshoot", last, f"stopped beyond the goal, {dist[last]:.1f} m from it", at_stop=True)
    return hit("premature_stop", last, f"stopped {length - progress[last]:.1f} m short along the reference "
                                       f"({dist[last]:.1f} m from the goal)", at_stop=True)


def _side(path: np.ndarray, arc: np.ndarray, s: float, a: np.ndarray, b: np.ndarray) -> str:
    """``left`` / ``right`` / ``straight on``: how the move a -> b leaves the reference's direction at arc length ``s``."""
    k = min(int(np.searchsorted(arc, s, side="left")) - 1, len(path) - 2)  # at a vertex: the segment arriving
    k = max(k, 0)
    tangent, move = path[k + 1] - path[k], np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    ang = math.degrees(math.atan2(tangent[0] * move[1] - tangent[1] * move[0], float(tangent @ move)))
    return "straight on" if abs(ang) < 20 else ("left" if ang > 0 else "right")


def revisited(points: Any, radius: float = 0.5) -> int | None:
    """Index of an earlier point the last of ``points`` is back within ``radius`` of, after the
    path went more than ``2 * radius`` away from it (turning on the spot is no revisit); None."""
    pts = np.asarray(points, dtype=float)[:, :2]
    i = len(pts) - 1
    if i < 2:
        return None
    for j in np.flatnonzero(np.linalg.norm(pts[:i - 1] - pts[i], axis=1) < radius):
        away = np.linalg.norm(pts[j + 1:i] - pts[j], axis=1)
        if len(away) and away.max() > 2 * radius:
            return int(j)
    return None


def stuck_reason(points: Any, goal_distances: Sequence[float], reference: Any, *, away_steps: int = 3,
                 off_reference: float = 2.0, revisit_radius: float = 0.5) -> str | None:
    """Why an agent at the last of ``points`` (its positions so far, one per step) looks stuck:
    ``loop`` (back at a place it had left, :func:`revisited`), ``moving_away`` (the distance to
    the goal grew over each of the last ``away_steps`` steps; 0: off), ``off_reference`` (more
    than ``off_reference`` m from the reference path; 0: off); None when it is not."""
    pts = np.asarray(points, dtype=float)[:, :2]
    if not len(pts):
        return None
    if revisited(pts, revisit_radius) is not None:
        return "loop"
    d = np.asarray(goal_distances, dtype=float)
    if away_steps > 0 and len(d) > away_steps and np.all(np.diff(d[-away_steps - 1:]) > 1e-6):
        return "moving_away"
    if off_reference > 0 and reference is not None and len(reference):
        path, arc = _polyline(reference)
        if float(project(pts[-1:], path, arc)[1][0]) > off_reference:
            return "off_reference"
    return None


def move_pose_steps(actions: Sequence[Any]) -> list[int]:
    """Step index of each pose after the start (the steps whose action moved the agent)."""
    skip = (None, "STOP", "FOUND", "NOT_FOUND")
    return [k for k, a in enumerate(actions) if not (a in skip or (isinstance(a, dict) and a.get("type") == "SelectFrame"))]


def episode_first_error(record: dict, *, landmarks: dict[Any, tuple[str, Sequence[float]]] | None = None,
                        goal_distance: Any = None, success_distance: float = 3.0,
                        success_metric: str = "SR") -> dict[str, Any] | None:
    """:func:`first_error` of an episode record (the runner's), with the step index of the error
    and the instruction clause; None for a success or an episode not evaluated."""
    if record.get("outcome") == "not_evaluated" or not record.get("reference_path") or not record.get("goals"):
        return None
    success = float(record["metrics"].get(success_metric) or 0.0) >= 1.0
    steps = move_pose_steps(record["actions"])
    pose_of_step = {k: i + 1 for i, k in enumerate(steps)}
    collision_poses = [pose_of_step[c["step"]] for c in record.get("collisions", []) if c.get("step") in pose_of_step]
    found = first_error(record["trajectory"], record["reference_path"], record["goals"][-1], success_distance,
                        success=success, stopped=record.get("termination") == "stop", collision_poses=collision_poses,
                        landmarks=landmarks, goal_distance=goal_distance,
                        failure=record.get("failure") if record.get("termination") == "failure" else None)
    if found is None:
        return None
    pose = found["pose"]
    final = max(len(record["actions"]) - 1, 0)
    if found.pop("at_stop", False):  # a premature stop / a stop beyond the goal: the STOP's step
        found["step"] = max((k for k, a in enumerate(record["actions"]) if a in ("STOP", "FOUND", "NOT_FOUND")),
                            default=final)
    else:
        found["step"] = steps[pose - 1] if 1 <= pose <= len(steps) else final
    cls = clauses(record["reference_path"], landmarks)
    found["clause_text"] = clause_texts(record.get("instruction", ""), len(cls))[found["clause"]]
    return found


def scene_landmarks(episode: Any, ctx: Any) -> dict[int, tuple[str, list[float]]]:
    """The episode's grounded landmarks (``info["landmarks"]`` instance ids) resolved in the scene
    graph: id -> (category, (x, y)); ids the scene lacks are skipped."""
    out: dict[int, tuple[str, list[float]]] = {}
    desc = getattr(ctx, "desc", None)
    for iid in (getattr(episode, "info", None) or {}).get("landmarks", []) or []:
        try:
            obj = desc.object_by_id(int(iid))
        except (KeyError, AttributeError, TypeError, ValueError):
            continue
        out[int(iid)] = (str(obj.category), [float(obj.position[0]), float(obj.position[1])])
    return out


def error_counts(records: Sequence[dict]) -> dict[str, Any]:
    """Per-category counts of the first errors of ``records`` (evaluated, failed episodes), with
    the first few episodes of each category (id, step)."""
    counts = {c: 0 for c in CATEGORIES}
    examples: dict[str, list[dict]] = {}
    for r in records:
        err = r.get("first_error")
        if not isinstance(err, dict):
            continue
        cat = err.get("category")
        counts[cat] = counts.get(cat, 0) + 1
        if len(examples.setdefault(cat, [])) < 3:
            examples[cat].append({"episode_id": r["episode_id"], "step": err.get("step")})
    return {"failed_episodes": sum(counts.values()), "counts": counts, "examples": examples}
