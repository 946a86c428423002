"""Navigation metrics as plain functions on numpy position arrays.

Every function takes positions as arrays of shape (N, 2) or (N, 3) (metres; only the columns
both arguments share are compared, so a 3-D trajectory can be scored against a 2-D goal) and
returns a Python ``float``. Success-type metrics return 0.0 or 1.0 so that their mean is a rate.

``distance_fn`` (where accepted) maps points (N, D) to their distance to the goal, shape (N,).
It defaults to the Euclidean distance to ``goal``; the evaluation runner passes the scene's
geodesic distance field (``DistanceField.distance``), as VLN-CE does for NE/SR/OSR/SPL.

Formulas and sources:

- TL, NE, SR, OSR, SPL: Anderson et al. 2018, "On Evaluation of Embodied Navigation Agents";
  VLN-CE (Krantz et al. 2020); VLNVerse Tab. 8.
- DTW, nDTW, sDTW: Ilharco et al. 2019, "General Evaluation for Instruction Conditioned
  Navigation using Dynamic Time Warping".
- CLS: Jain et al. 2019, "Stay on the Path: Instruction Fidelity in Vision-and-Language
  Navigation".
- CR, SR_n / SR_all: VLNVerse Tab. 8.
- Reach SR, Reach&Decision SR, Reach SPL, Len (reach), Len (explore), object coverage, REV-SPL: VLN-NF (Su et al.), Sec. 3.3.
- RSR, Rid-SR, Oid-SR: VCN-Bench, Sec. 5.1 and 5.3.

:func:`aggregate` averages per-episode metric dicts, skipping values that do not apply to an
episode (``None`` or NaN), so NaN never reaches a summary.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
from scipy.spatial.distance import cdist

from ..core.registry import Registry

DistanceFn = Callable[[np.ndarray], np.ndarray]

#: Name → metric function. Keys are the short names used in tables and ``summary.json``.
METRICS: Registry[Callable[..., float]] = Registry("metric")


# --------------------------------------------------------------------------------------------
# helpers


def _points(arr: Any, name: str) -> np.ndarray:
    """``arr`` as a float array (N, D) with N >= 1 and D in {2, 3}; a single point is promoted."""
    pts = np.asarray(arr, dtype=float)
    if pts.ndim == 1:
        pts = pts[None, :]
    if pts.ndim != 2 or pts.shape[0] == 0 or pts.shape[1] not in (2, 3):
        raise ValueError(f"{name}: expected positions of shape (N, 2) or (N, 3) with N >= 1, got {np.shape(arr)}")
    if not np.all(np.isfinite(pts)):
        raise ValueError(f"{name}: positions must be finite")
    return pts


def _common(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Trim two point arrays to the coordinate columns they share (x, y[, z])."""
    d = min(a.shape[1], b.shape[1])
    return a[:, :d], b[:, :d]


def _goal_distances(path: np.ndarray, goal: Any, distance_fn: DistanceFn | None) -> np.ndarray:
    """Distance of every path point to the goal, shape (N,)."""
    if distance_fn is not None:
        dist = np.asarray(distance_fn(path), dtype=float).reshape(-1)
        if dist.shape[0] != path.shape[0]:
            raise ValueError(f"distance_fn returned {dist.shape[0]} distances for {path.shape[0]} points")
        return dist
    goal_pts = _points(goal, "goal")
    p, g = _common(path, goal_pts)
    # Several goal points (e.g. any instance of a category): distance to the nearest one.
    return cdist(p, g).min(axis=1)


# --------------------------------------------------------------------------------------------
# path-level metrics


@METRICS.register("TL")
def trajectory_length(path: Any) -> float:
    """TL: total length of the polyline, ``sum_i ||p_{i+1} - p_i||`` (Anderson et al. 2018).

    A single point (the agent never moved) has length 0; repeated points add nothing.
    """
    pts = _points(path, "path")
    if len(pts) < 2:
        return 0.0
    return float(np.linalg.norm(np.diff(pts, axis=0), axis=1).sum())


@METRICS.register("NE")
def navigation_error(path: Any, goal: Any, distance_fn: DistanceFn | None = None) -> float:
    """NE: distance from the final position to the goal, ``d(p_N, g)`` (VLN-CE; VLNVerse Tab. 8).

    ``goal`` may hold several points (N_g, D); the distance is to the nearest. With the
    geodesic ``distance_fn`` an unreachable goal gives ``inf``.
    """
    pts = _points(path, "path")
    return float(_goal_distances(pts[-1:], goal, distance_fn)[0])


@METRICS.register("SR")
def success(path: Any, goal: Any, threshold: float = 3.0, distance_fn: DistanceFn | None = None) -> float:
    """SR: 1 if the agent stopped strictly closer than ``threshold`` to the goal, ``NE < d_th``.

    Stopping exactly at the threshold is a failure (VLN-CE convention; VLNVerse uses 3 m).
    """
    return float(navigation_error(path, goal, distance_fn) < threshold)


@METRICS.register("OSR")
def oracle_success(path: Any, goal: Any, threshold: float = 3.0, distance_fn: DistanceFn | None = None) -> float:
    """OSR: 1 if any visited position (start included) was strictly within ``threshold`` of the goal,
    ``min_i d(p_i, g) < d_th`` (Anderson et al. 2018: success under an oracle stopping rule)."""
    pts = _points(path, "path")
    return float(_goal_distances(pts, goal, distance_fn).min() < threshold)


#: Trajectory length (m) below which an agent counts as not having moved (float noise only):
#: SPL with ``L == 0`` is ``S`` for such an agent and 0 for any other.
STILL_TOLERANCE = 1e-6


@METRICS.register("SPL")
def spl(path: Any, goal: Any, shortest_length: float, threshold: float = 3.0,
        distance_fn: DistanceFn | None = None) -> float:
    """SPL: success weighted by path length, ``S · L / max(P, L)`` (Anderson et al. 2018).

    ``L`` is the shortest (geodesic) start→goal length and ``P`` the agent's trajectory length.
    ``L == 0`` (start already at the goal) follows the reference formula, as R2R's evaluation,
    habitat-lab's ``SPL`` measure and R2R-EnvDrop compute it: ``L / max(P, L)`` is ``0 / P = 0``
    as soon as the agent moved (``P > 0``), however it ends; only the ``0 / 0`` case (the agent
    did not move, ``P <= STILL_TOLERANCE``) is defined here as the limit ``S``, so no NaN arises.
    """
    if not (shortest_length >= 0 and math.isfinite(shortest_length)):
        raise ValueError(f"shortest_length must be finite and >= 0, got {shortest_length}")
    s = success(path, goal, threshold, distance_fn)
    p = trajectory_length(path)
    if shortest_length == 0.0:
        return s if p <= STILL_TOLERANCE else 0.0
    return float(s * shortest_length / max(p, shortest_length))


def dtw(path: Any, reference: Any) -> float:
    """DTW: exact dynamic-time-warping cost between two point sequences (Ilharco et al. 2019).

    ``DTW(P, R) = min over monotone alignments W of sum_{(i,j) in W} ||p_i - r_j||`` with the
    recurrence ``D[i, j] = c[i, j] + min(D[i-1, j], D[i, j-1], D[i-1, j-1])``, ``D[0, 0] = c[0, 0]``.
    Repeated points are kept (they can only add cost). Cost: O(N·M) time, O(N·M) memory for the
    distance matrix.

    Implementation: one numpy pass per row of the shorter sequence. Within a row, with
    ``t[j] = c[i, j] + min(D[i-1, j], D[i-1, j-1])`` and the row prefix sums ``S[j] = sum_{k<=j} c[i, k]``,
    unrolling ``D[i, j] = min(t[j], c[i, j] + D[i, j-1])`` gives the exact closed form
    ``D[i, j] = S[j] + min_{l<=j} (t[l] - S[l])`` — a running minimum (``np.minimum.accumulate``).
    """
    p, r = _common(_points(path, "path"), _points(reference, "reference"))
    cost = cdist(p, r)
    if cost.shape[0] > cost.shape[1]:  # DTW is symmetric: iterate over the shorter sequence
        cost = cost.T
    prev = np.cumsum(cost[0])  # first row: only horizontal moves
    for row in cost[1:]:
        diag = np.concatenate(([np.inf], prev[:-1]))
        t = row + np.minimum(prev, diag)
        s = np.cumsum(row)
        prev = s + np.minimum.accumulate(t - s)
    return float(prev[-1])


@METRICS.register("nDTW")
def ndtw(path: Any, reference: Any, threshold: float = 3.0) -> float:
    """nDTW: ``exp(-DTW(P, R) / (|R| · d_th))`` with ``|R|`` the number of reference points
    (Ilharco et al. 2019). 1 for a path identical to the reference, → 0 as it strays."""
    ref = _points(reference, "reference")
    return float(math.exp(-dtw(path, ref) / (len(ref) * threshold)))


@METRICS.register("sDTW")
def sdtw(path: Any, reference: Any, goal: Any, threshold: float = 3.0,
         distance_fn: DistanceFn | None = None) -> float:
    """sDTW: success-weighted nDTW, ``SR · nDTW`` (Ilharco et al. 2019)."""
    return success(path, goal, threshold, distance_fn) * ndtw(path, reference, threshold)


@METRICS.register("CLS")
def cls(path: Any, reference: Any, threshold: float = 3.0) -> float:
    """CLS: Coverage weighted by Length Score, ``PC · LS`` (Jain et al. 2019).

    ``PC = mean_{r in R} exp(-d(r, P) / d_th)`` with ``d(r, P)`` the distance from reference
    point ``r`` to the nearest path point; ``LS = PC·PL / (PC·PL + |PC·PL − TL|)`` with ``PL``
    the reference length and ``TL`` the path length. When ``PC·PL`` and ``TL`` are both 0 (a
    single-point reference and an agent that never moved) ``LS`` is 1, so CLS = PC.
    """
    p, r = _common(_points(path, "path"), _points(reference, "reference"))
    pc = float(np.exp(-cdist(r, p).min(axis=1) / threshold).mean())
    expected = pc * trajectory_length(r)
    tl = trajectory_length(p)
    denom = expected + abs(expected - tl)
    ls = 1.0 if denom == 0.0 else expected / denom
    return float(pc * ls)


@METRICS.register("CR")
def collision_rate(collisions: int, actions: int) -> float:
    """CR: collision events per navigation action, ``collisions / actions`` (VLNVerse Tab. 8).

    An episode without actions has CR 0.
    """
    if collisions < 0 or actions < 0:
        raise ValueError(f"collisions and actions must be >= 0, got {collisions}, {actions}")
    return 0.0 if actions == 0 else float(collisions) / float(actions)


# --------------------------------------------------------------------------------------------
# long-horizon


def goals_reached(path: Any, goals: Any, threshold: float = 3.0,
                  distance_fns: Sequence[DistanceFn | None] | None = None) -> np.ndarray:
    """Which of the ordered goals were reached in order, boolean (K,).

    Goal ``k`` counts as reached when some position visited at or after the moment goal
    ``k-1`` was reached lies strictly within ``threshold`` of it (goal 1 may be reached from
    the start). Feeds :func:`sr_n` for long-horizon episodes (VLNVerse).
    """
    pts = _points(path, "path")
    goal_pts = _points(goals, "goals")
    fns = list(distance_fns) if distance_fns is not None else [None] * len(goal_pts)
    if len(fns) != len(goal_pts):
        raise ValueError(f"got {len(fns)} distance functions for {len(goal_pts)} goals")
    reached = np.zeros(len(goal_pts), dtype=bool)
    start = 0
    for k, (goal, fn) in enumerate(zip(goal_pts, fns)):
        inside = np.flatnonzero(_goal_distances(pts[start:], goal, fn) < threshold)
        if inside.size == 0:
            break
        reached[k] = True
        start += int(inside[0])
    return reached


def sr_n(reached_flags: Any, final_success: Any = None) -> dict[str, float]:
    """Per-goal success for long-horizon episodes from per-episode reached flags (VLNVerse Tab. 8).

    ``reached_flags`` is an (E, K) boolean table or a list of E flag lists of different lengths
    (episodes with 2 or 3 sub-goals). ``SR_1 = mean_e reached[e, 1]``; for ``k > 1``,
    ``SR_k = #{e : reached[e, 1..k]} / #{e with >= k goals : reached[e, 1..k-1]}`` (success on
    goal ``k`` given all earlier goals were reached; an episode without a ``k``-th goal is not
    counted for ``SR_k``). ``SR_all`` is overall task completion, "stopping within the
    threshold distance of the final goal" (VLNVerse Sec. 4): with ``final_success`` (E,) —
    each episode's SR, which needs all goals in order *and* a STOP near the last one —
    ``SR_all = mean_e final_success[e]``; without it, the share of episodes that reached all
    their goals (passing through each). A conditional with no eligible episode (nobody reached
    goal ``k-1``) is reported as 0, never NaN; no episodes give all zeros.
    """
    if isinstance(reached_flags, np.ndarray):
        if reached_flags.ndim != 2:
            raise ValueError(f"reached_flags must be a 2-D (episodes, goals) array, got shape {reached_flags.shape}")
        rows = [list(r) for r in reached_flags.astype(bool)]
        n_goals = reached_flags.shape[1]
    else:
        rows = [list(np.asarray(r, dtype=bool).reshape(-1)) for r in reached_flags]
        n_goals = max((len(r) for r in rows), default=0)
    n_ep = len(rows)
    # prefix[e][k]: episode e reached goals 1..k+1 in order
    prefix = [list(np.logical_and.accumulate(r)) if r else [] for r in rows]
    out: dict[str, float] = {}
    for k in range(n_goals):
        has_k = [p for p in prefix if len(p) > k]
        eligible = sum(1 for p in has_k if k == 0 or p[k - 1])
        hits = sum(1 for p in has_k if p[k])
        out[f"SR_{k + 1}"] = hits / eligible if eligible > 0 else 0.0
    if final_success is not None:
        done = np.asarray(final_success, dtype=float).reshape(-1)
        if done.shape[0] != n_ep:
            raise ValueError(f"final_success has {done.shape[0]} entries for {n_ep} episodes")
        out["SR_all"] = float(done.mean()) if n_ep else 0.0
    else:
        out["SR_all"] = sum(1 for p in prefix if p and p[-1]) / n_ep if n_ep and n_goals else 0.0
    return out


# --------------------------------------------------------------------------------------------
# VLN-NF (false-premise instructions)


def reach_success(path: Any, room_polygon: Any) -> float:
    """Reach SR: 1 if any visited position lies inside the target room polygon (VLN-NF Sec. 3.3)."""
    from matplotlib.path import Path as MplPath

    pts = _points(path, "path")[:, :2]
    poly = np.asarray(room_polygon, dtype=float).reshape(-1, 2)
    inside = MplPath(poly).contains_points(pts, radius=1e-9) | MplPath(poly[::-1]).contains_points(pts, radius=1e-9)
    return float(inside.any())


def reach_decision_success(reached_room: bool, decision: str, expected_decision: str) -> float:
    """Reach&Decision SR: the agent reached the target room AND its final FOUND / NOT-FOUND
    decision matches the ground truth (VLN-NF Sec. 3.3)."""
    return float(bool(reached_room) and str(decision).upper() == str(expected_decision).upper())


def reach_length(path: Any, inside: Any) -> float | None:
    """Len (reach): trajectory length up to the first position inside the target room, ``Σ_{i<k}
    ||p_{i+1} − p_i||`` with ``k`` the first in-room index (VLN-NF Tab. 2); ``None`` when the room
    was never reached (not applicable)."""
    pts = _points(path, "path")
    flags = np.asarray(inside, dtype=bool).reshape(-1)
    if flags.shape[0] != pts.shape[0]:
        raise ValueError(f"inside has {flags.shape[0]} flags for {pts.shape[0]} positions")
    hit = np.flatnonzero(flags)
    if hit.size == 0:
        return None
    return trajectory_length(pts[: int(hit[0]) + 1])


def exploration_length(path: Any, inside: Any) -> float:
    """Len (explore): length of the steps that start and end inside the target room, ``p`` of
    REV-SPL (VLN-NF Sec. 3.3)."""
    pts = _points(path, "path")
    flags = np.asarray(inside, dtype=bool).reshape(-1)
    if flags.shape[0] != pts.shape[0]:
        raise ValueError(f"inside has {flags.shape[0]} flags for {pts.shape[0]} positions")
    if len(pts) < 2:
        return 0.0
    steps = np.linalg.norm(np.diff(pts, axis=0), axis=1)
    return float(steps[flags[:-1] & flags[1:]].sum())


def reach_spl(reached_room: bool, reach_path_length: float | None, shortest_reach_length: float) -> float:
    """Reach SPL for one episode: ``S_reach · l_reach / max(p_reach, l_reach)`` (VLN-NF Sec. 3.3),
    ``p_reach`` = Len (reach), ``l_reach`` the geodesic from the start to the room. ``l_reach = 0``
    (the start is in the room) gives ``S_reach``."""
    if not (shortest_reach_length >= 0 and math.isfinite(shortest_reach_length)):
        raise ValueError(f"shortest_reach_length must be finite and >= 0, got {shortest_reach_length}")
    if not reached_room or reach_path_length is None:
        return 0.0
    ell = float(shortest_reach_length)
    if ell == 0.0:
        return 1.0
    return float(ell / max(float(reach_path_length), ell))


def object_coverage(seen_instance_ids: Iterable[int], room_instance_ids: Iterable[int]) -> float:
    """Object coverage ``C = |∪_v OBJECTSVISIBLE(v) ∩ O| / |O|`` over the agent's in-room viewpoints
    (VLN-NF Sec. 3.3), ``O`` the annotated objects of the target room. A room without annotated
    objects has nothing left to find: C = 1."""
    room = set(int(i) for i in room_instance_ids)
    if not room:
        return 1.0
    seen = set(int(i) for i in seen_instance_ids)
    return len(seen & room) / len(room)


def rev_spl(reached_room: bool, decision_correct: bool, coverage: float, exploration_length: float,
            reference_length: float) -> float:
    """REV-SPL for one episode: ``S_r · S_d · C · ℓ / max(p, ℓ) · min(1, p / ℓ)`` (VLN-NF Sec. 3.3).

    ``S_r`` reached the target room, ``S_d`` correct final decision, ``C`` object coverage,
    ``p`` the agent's in-room exploration length and ``ℓ`` the reference exploration length:
    exploring less than the reference is penalised by ``p/ℓ``, more by ``ℓ/p``. With ``ℓ = 0``
    (no exploration required) the length factor is 1 (VLN-NF: nothing left to explore).
    """
    if not 0.0 <= coverage <= 1.0:
        raise ValueError(f"coverage must lie in [0, 1], got {coverage}")
    if exploration_length < 0 or reference_length < 0:
        raise ValueError(f"path lengths must be >= 0, got p={exploration_length}, l={reference_length}")
    base = float(bool(reached_room) and bool(decision_correct)) * coverage
    if reference_length == 0.0:
        return base
    p, ell = exploration_length, reference_length
    return float(base * ell / max(p, ell) * min(1.0, p / ell))


# --------------------------------------------------------------------------------------------
# VCN-Bench (video-contextualized navigation)


def rsr(path: Any, room_polygon: Any) -> float:
    """RSR (room success rate): 1 if the agent's final position lies inside the target room
    polygon (VCN-Bench Sec. 5.1, a relaxed SR)."""
    return reach_success(_points(path, "path")[-1:], room_polygon)


def rid_sr(selected_frame_room_id: int | None, target_room_id: int) -> float:
    """Rid-SR: 1 if the frame the model selected belongs to the target room (VCN-Bench Sec. 5.3,
    room-to-object goals). ``None`` (no valid frame) is a failure."""
    return float(selected_frame_room_id is not None and int(selected_frame_room_id) == int(target_room_id))


def oid_sr(selected_frame_visible_ids: Iterable[int] | None, target_instance_id: int) -> float:
    """Oid-SR: 1 if the target object is visible in the frame the model selected (VCN-Bench
    Sec. 5.3, object goals). ``None`` (no valid frame) is a failure."""
    if selected_frame_visible_ids is None:
        return 0.0
    return float(int(target_instance_id) in {int(i) for i in selected_frame_visible_ids})


# --------------------------------------------------------------------------------------------
# aggregation


def applicable(value: Any) -> bool:
    """Whether ``value`` counts in a mean: a finite number or a bool (None, NaN, ±inf: not applicable)."""
    if isinstance(value, (bool, np.bool_)):
        return True
    if isinstance(value, (int, float, np.integer, np.floating)):
        return math.isfinite(float(value))
    return False


def aggregate(per_episode: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Mean of every metric over the episodes where it applies.

    Returns ``{"episodes": E, "means": {name: mean}, "counts": {name: n}}``. A value of
    ``None``, NaN or ±inf (e.g. NE to an unreachable goal, or a metric a task does not define)
    means "not applicable" and is left out of both the mean and its count, so no NaN appears.
    Non-numeric values are ignored.
    """
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for record in per_episode:
        for name, value in record.items():
            if applicable(value):
                sums[name] = sums.get(name, 0.0) + float(value)
                counts[name] = counts.get(name, 0) + 1
    names = sorted(sums)
    return {"episodes": len(per_episode),
            "means": {n: sums[n] / counts[n] for n in names},
            "counts": {n: counts[n] for n in names}}


def compute(names: Iterable[str], **inputs: Any) -> dict[str, float]:
    """Evaluate the registered metrics ``names`` on the named ``inputs``.

    Each metric receives the inputs matching its parameter names (``path``, ``goal``,
    ``reference``, ``shortest_length``, ``threshold``, ``distance_fn``, ``collisions``,
    ``actions``); an unknown name raises ``UnknownNameError`` listing the registered ones.
    """
    import inspect

    out: dict[str, float] = {}
    for name in names:
        fn = METRICS.get(name)
        params = inspect.signature(fn).parameters
        missing = [p for p, spec in params.items() if p not in inputs and spec.default is inspect.Parameter.empty]
        if missing:
            raise ValueError(f"metric {name} needs input(s) {missing}")
        out[name] = fn(**{p: inputs[p] for p in params if p in inputs})
    return out
