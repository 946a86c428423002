"""Metrics against hand-computed values and their edge cases."""
from __future__ import annotations

import math

import numpy as np
import pytest

from vlnverse.core.errors import UnknownNameError
from vlnverse.run import metrics as M


def _dtw_reference(a, b):
    """Textbook O(N·M) DTW with Python loops, to check the vectorised one."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    n, m = len(a), len(b)
    d = np.full((n + 1, m + 1), np.inf)
    d[0, 0] = 0.0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            c = float(np.linalg.norm(a[i - 1] - b[j - 1]))
            d[i, j] = c + min(d[i - 1, j], d[i, j - 1], d[i - 1, j - 1])
    return d[n, m]


STRAIGHT = np.array([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0], [3.0, 0.0], [4.0, 0.0]])


def test_trajectory_length_and_never_moving():
    assert M.trajectory_length([[0, 0], [3, 4], [3, 4], [3, 0]]) == pytest.approx(9.0)
    assert M.trajectory_length([[1.0, 2.0, 0.0]]) == 0.0
    assert M.trajectory_length([[1, 1], [1, 1], [1, 1]]) == 0.0


def test_navigation_error_uses_final_position_and_nearest_goal():
    path = [[0, 0], [5, 0], [3, 0]]
    assert M.navigation_error(path, [0, 4]) == pytest.approx(5.0)
    # several goal points: the nearest counts
    assert M.navigation_error(path, [[0, 4], [3, 1]]) == pytest.approx(1.0)
    # 3-D path against a 2-D goal compares x, y only
    assert M.navigation_error([[3, 0, 0.9]], [3, 2]) == pytest.approx(2.0)


def test_success_is_strict_at_threshold():
    assert M.success([[0, 0], [3, 0]], [6, 0], threshold=3.0) == 0.0  # exactly 3 m: failure
    assert M.success([[0, 0], [3.001, 0]], [6, 0], threshold=3.0) == 1.0
    assert M.success([[0, 0]], [0.5, 0], threshold=1.0) == 1.0  # never moved, started at goal


def test_oracle_success_counts_any_visited_point_including_start():
    assert M.oracle_success([[0, 0], [10, 0]], [1, 0], threshold=3.0) == 1.0  # start was close
    assert M.oracle_success([[10, 0], [5, 5], [10, 0]], [5, 7], threshold=3.0) == 1.0
    assert M.success([[10, 0], [5, 5], [10, 0]], [5, 7], threshold=3.0) == 0.0
    assert M.oracle_success([[10, 0], [8, 0]], [0, 0], threshold=3.0) == 0.0


def test_distance_fn_replaces_euclidean():
    # a wall makes the goal 10 m away along the floor although it is 1 m away in a line
    geodesic = lambda pts: np.full(len(pts), 10.0)  # noqa: E731
    assert M.navigation_error([[0, 0]], [1, 0], distance_fn=geodesic) == 10.0
    assert M.success([[0, 0]], [1, 0], distance_fn=geodesic) == 0.0
    assert M.success([[0, 0]], [1, 0]) == 1.0


def test_spl_hand_computed_and_zero_shortest_length():
    path = [[0, 0], [4, 0], [4, 3]]  # P = 7, ends 1 m from goal
    assert M.spl(path, [5, 3], shortest_length=5.0) == pytest.approx(5.0 / 7.0)
    assert M.spl(path, [5, 3], shortest_length=9.0) == pytest.approx(1.0)  # P < L is capped
    assert M.spl(path, [20, 3], shortest_length=5.0) == 0.0  # failure
    # L = 0 (R2R / habitat-lab: S * 0 / max(P, 0)): 1 only if the agent stayed put and succeeded
    assert M.spl([[0, 0]], [0, 0], shortest_length=0.0) == 1.0
    assert M.spl([[0, 0], [0, 0], [0, 0]], [0, 0], shortest_length=0.0) == 1.0
    assert M.spl([[0, 0], [1, 0]], [0, 0], shortest_length=0.0) == 0.0  # moved 1 m, still succeeds
    assert M.spl([[0, 0], [4, 0], [0, 0]], [0, 0], shortest_length=0.0) == 0.0  # 4 m away and back
    assert M.spl([[0, 0], [9, 0]], [0, 0], shortest_length=0.0) == 0.0
    assert M.spl([[9, 0]], [0, 0], shortest_length=0.0) == 0.0  # did not move but failed
    with pytest.raises(ValueError):
        M.spl(path, [5, 3], shortest_length=-1.0)


def test_dtw_hand_computed():
    # reference (0,0),(1,0),(2,0); path (0,0),(1,1),(2,0): cost 0 + 1 + 0 along the diagonal
    assert M.dtw([[0, 0], [1, 1], [2, 0]], [[0, 0], [1, 0], [2, 0]]) == pytest.approx(1.0)
    # one-point path against a 3-point line: every reference point aligns with it: 0+1+2
    assert M.dtw([[0, 0]], [[0, 0], [1, 0], [2, 0]]) == pytest.approx(3.0)
    # repeated points are kept and aligned at zero cost with their twin
    assert M.dtw([[0, 0], [0, 0], [1, 0]], [[0, 0], [1, 0]]) == pytest.approx(0.0)
    assert M.dtw([[5, 0], [5, 0]], [[0, 0]]) == pytest.approx(10.0)


def test_dtw_matches_textbook_dp_on_random_paths():
    rng = np.random.default_rng(7)
    for n, m in [(1, 1), (1, 6), (7, 1), (12, 5), (5, 13), (30, 30)]:
        a, b = rng.normal(size=(n, 2)) * 3, rng.normal(size=(m, 2)) * 3
        assert M.dtw(a, b) == pytest.approx(_dtw_reference(a, b), rel=1e-9, abs=1e-9)
        assert M.dtw(a, b) == pytest.approx(M.dtw(b, a), rel=1e-9)


def test_ndtw_and_sdtw():
    assert M.ndtw(STRAIGHT, STRAIGHT) == pytest.approx(1.0)
    path = STRAIGHT + [0.0, 1.0]  # 1 m parallel offset: DTW = 5, |R| = 5
    assert M.ndtw(path, STRAIGHT, threshold=3.0) == pytest.approx(math.exp(-5.0 / (5 * 3.0)))
    assert M.sdtw(path, STRAIGHT, goal=[4, 0], threshold=3.0) == pytest.approx(math.exp(-1.0 / 3.0))
    assert M.sdtw(path, STRAIGHT, goal=[40, 0], threshold=3.0) == 0.0
    # single-point reference: |R| = 1
    assert M.ndtw([[0, 0], [3, 0]], [[0, 0]], threshold=3.0) == pytest.approx(math.exp(-1.0))


def test_cls_identical_offset_and_single_point():
    assert M.cls(STRAIGHT, STRAIGHT) == pytest.approx(1.0)
    path = STRAIGHT + [0.0, 1.0]
    pc = math.exp(-1.0 / 3.0)
    ls = pc * 4.0 / (pc * 4.0 + abs(pc * 4.0 - 4.0))
    assert M.cls(path, STRAIGHT, threshold=3.0) == pytest.approx(pc * ls)
    # agent never moved and reference is one point on top of it: PC = 1, LS = 1
    assert M.cls([[2, 2]], [[2, 2]]) == pytest.approx(1.0)
    # single-point reference, agent wandered 6 m away and back: PC = 1, LS = 0/(0+6) = 0
    assert M.cls([[0, 0], [3, 0], [0, 0]], [[0, 0]]) == pytest.approx(0.0)


def test_collision_rate():
    assert M.collision_rate(3, 12) == pytest.approx(0.25)
    assert M.collision_rate(0, 0) == 0.0
    with pytest.raises(ValueError):
        M.collision_rate(-1, 3)


def test_goals_reached_in_order():
    goals = [[5, 0], [5, 5], [0, 5]]
    path = [[0, 0], [5, 0], [5, 5], [0.5, 5]]
    assert M.goals_reached(path, goals, threshold=1.0).tolist() == [True, True, True]
    # goal 2 visited only before goal 1: does not count
    path = [[5, 5], [5, 0], [9, 0]]
    assert M.goals_reached(path, goals, threshold=1.0).tolist() == [True, False, False]


def test_sr_n_on_hand_made_table():
    table = np.array([[1, 1, 1],
                      [1, 1, 0],
                      [1, 0, 1],   # reached 3 but not 2: does not count for SR_3
                      [0, 1, 1]], dtype=bool)
    out = M.sr_n(table)
    assert out["SR_1"] == pytest.approx(3 / 4)
    assert out["SR_2"] == pytest.approx(2 / 3)
    assert out["SR_3"] == pytest.approx(1 / 2)
    assert out["SR_all"] == pytest.approx(1 / 4)
    # nobody reaches goal 1: conditionals are 0, not NaN
    out = M.sr_n(np.zeros((3, 2), dtype=bool))
    assert out == {"SR_1": 0.0, "SR_2": 0.0, "SR_all": 0.0}
    assert M.sr_n(np.zeros((0, 2), dtype=bool)) == {"SR_1": 0.0, "SR_2": 0.0, "SR_all": 0.0}


def test_vln_nf_metrics():
    room = [[0, 0], [4, 0], [4, 4], [0, 4]]
    assert M.reach_success([[10, 10], [2, 2], [10, 10]], room) == 1.0
    assert M.reach_success([[10, 10], [5, 2]], room) == 0.0
    assert M.reach_decision_success(True, "not-found", "NOT-FOUND") == 1.0
    assert M.reach_decision_success(False, "NOT-FOUND", "NOT-FOUND") == 0.0
    assert M.reach_decision_success(True, "FOUND", "NOT-FOUND") == 0.0
    assert M.object_coverage([1, 2, 9], [1, 2, 3, 4]) == pytest.approx(0.5)
    assert M.object_coverage([], []) == 1.0
    # explored 5 m against a 10 m reference: 0.5 coverage · 10/10 · 5/10
    assert M.rev_spl(True, True, 0.5, 5.0, 10.0) == pytest.approx(0.25)
    # explored 20 m: 0.8 · 10/20 · 1
    assert M.rev_spl(True, True, 0.8, 20.0, 10.0) == pytest.approx(0.4)
    assert M.rev_spl(True, False, 1.0, 10.0, 10.0) == 0.0
    assert M.rev_spl(True, True, 1.0, 3.0, 0.0) == 1.0


def test_vcn_metrics():
    room = [[0, 0], [4, 0], [4, 4], [0, 4]]
    assert M.rsr([[10, 10], [1, 1]], room) == 1.0
    assert M.rsr([[1, 1], [10, 10]], room) == 0.0  # passed through, did not end there
    assert M.rid_sr(3, 3) == 1.0 and M.rid_sr(2, 3) == 0.0 and M.rid_sr(None, 3) == 0.0
    assert M.oid_sr([4, 7], 7) == 1.0 and M.oid_sr([4], 7) == 0.0 and M.oid_sr(None, 7) == 0.0


def test_aggregate_skips_not_applicable_and_never_returns_nan():
    eps = [{"SR": 1.0, "NE": 1.0, "SR_2": None, "scene": "a"},
           {"SR": 0.0, "NE": float("inf"), "SR_2": float("nan")},
           {"SR": True, "NE": 3.0}]
    agg = M.aggregate(eps)
    assert agg["episodes"] == 3
    assert agg["means"] == {"SR": pytest.approx(2 / 3), "NE": pytest.approx(2.0)}
    assert agg["counts"] == {"SR": 3, "NE": 2}
    assert all(math.isfinite(v) for v in agg["means"].values())
    assert M.aggregate([]) == {"episodes": 0, "means": {}, "counts": {}}


def test_registry_and_compute():
    out = M.compute(["TL", "SR", "SPL", "nDTW", "CR"], path=STRAIGHT, goal=[4, 0], reference=STRAIGHT,
                    shortest_length=4.0, threshold=3.0, collisions=1, actions=4)
    assert out == {"TL": 4.0, "SR": 1.0, "SPL": 1.0, "nDTW": 1.0, "CR": 0.25}
    with pytest.raises(UnknownNameError) as err:
        M.compute(["XYZ"], path=STRAIGHT)
    assert "SPL" in str(err.value) and "nDTW" in str(err.value)


def test_bad_positions_raise():
    with pytest.raises(ValueError):
        M.trajectory_length(np.zeros((0, 2)))
    with pytest.raises(ValueError):
        M.trajectory_length([[0, 0, 0, 0]])
    with pytest.raises(ValueError):
        M.navigation_error([[np.nan, 0]], [0, 0])


def test_sr_n_with_episodes_of_different_lengths():
    """Long-horizon episodes have 2 or 3 sub-goals: SR_3 is conditional over the episodes that
    have a third goal, so a 2-goal episode never counts as failing a goal it does not have."""
    flags = [[True, True], [True, True, True], [True, True, False], [True, False]]
    out = M.sr_n(flags)
    assert out["SR_1"] == 1.0
    assert out["SR_2"] == pytest.approx(3 / 4)
    assert out["SR_3"] == pytest.approx(1 / 2)  # of the two 3-goal episodes that reached goal 2
    assert out["SR_all"] == pytest.approx(2 / 4)  # every goal of its own episode
    # an oracle that reaches every goal of every episode scores 1 everywhere
    assert M.sr_n([[True, True], [True, True, True]]) == {"SR_1": 1.0, "SR_2": 1.0, "SR_3": 1.0, "SR_all": 1.0}
    assert M.sr_n([[True, True], [True, True, True]], final_success=[1.0, 0.0])["SR_all"] == 0.5
