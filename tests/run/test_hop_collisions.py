"""First-collision causes (run.hop_collisions) on a hand-built wall."""
from __future__ import annotations

import math

import numpy as np
import pytest

from vlnverse.run.hop_collisions import action_target, first_collision, summarize
from vlnverse.scenes.occupancy import OCCUPIED, OccupancyMap
from vlnverse.tasks.pathing import PathPlanner


@pytest.fixture(scope="module")
def planner() -> PathPlanner:
    """4 m × 6 m at 0.1 m, all navigable but a wall filling column 30 (x in [3.0, 3.1))."""
    g = np.zeros((40, 60), np.uint8)
    g[:, 30] = OCCUPIED
    return PathPlanner(OccupancyMap(g, 0.1, np.zeros(2)))


def waypoint(dx: float, dy: float, dyaw: float = 0.0) -> dict:
    return {"type": "WaypointAction", "dx": dx, "dy": dy, "dyaw": dyaw}


def test_action_target_waypoint_and_discrete():
    x, y, yaw = action_target([1.0, 2.0, math.pi / 2], waypoint(0.5, -0.25, 0.1))
    assert (x, y, yaw) == pytest.approx((1.25, 2.5, math.pi / 2 + 0.1))  # forward is +y, right is +x
    assert action_target([1.0, 2.0, 0.0], "MOVE_FORWARD", forward_step=0.25) == pytest.approx((1.25, 2.0, 0.0))
    assert action_target([1.0, 2.0, 0.0], "TURN_RIGHT", turn_angle_deg=30)[2] == pytest.approx(-math.pi / 6)


def record(actions, trajectory, steps):
    return {"actions": actions, "trajectory": trajectory, "collisions": [{"step": s} for s in steps]}


def test_a_hop_into_a_wall_in_view_with_the_run_of_repeats(planner):
    # step 0 moves 0.3 m to (2.8, 1.05); step 1 hops 0.25 m straight on into the wall (3.05, 1.05),
    # resolved back to (2.95, 1.05); step 2 hits again; then STOP
    rec = record([waypoint(0.3, 0.0), waypoint(0.25, 0.0), waypoint(0.25, 0.0), "STOP"],
                 [[2.5, 1.05, 0.0], [2.8, 1.05, 0.0], [2.95, 1.05, 0.0], [2.95, 1.05, 0.0]], [1, 2])
    got = first_collision(rec, planner, success_distance=3.0, goal_distance=lambda xy: 5.0,
                          teacher_heading=lambda xy: math.pi / 2)
    # the nearest navigable cell centre to x = 3.05 is 2.95 (or 3.15): 0.1 m deep
    assert got == {"step": 1, "cause": "prediction_in_view", "bearing_deg": 0.0, "hop_m": 0.25,
                   "target_depth_m": 0.1, "run": 2, "heading_error_deg": 90.0, "goal_distance_m": 5.0}


def test_a_sideways_hop_out_of_view_and_a_forward_step(planner):
    # facing +y, a hop 0.25 m to the right lands in the wall: bearing -90, outside a 90 degree view
    rec = record([waypoint(0.0, -0.25)], [[2.8, 1.05, math.pi / 2], [2.95, 1.05, math.pi / 2]], [0])
    got = first_collision(rec, planner, success_distance=3.0)
    assert (got["cause"], got["bearing_deg"], got["run"]) == ("prediction_out_of_view", -90.0, 1)
    assert got["heading_error_deg"] is None and got["goal_distance_m"] is None
    assert first_collision(rec, planner, success_distance=3.0, hfov_deg=200.0)["cause"] == "prediction_in_view"
    step = record(["MOVE_FORWARD"], [[2.8, 1.05, 0.0], [2.95, 1.05, 0.0]], [0])
    assert first_collision(step, planner, success_distance=3.0)["target_depth_m"] == pytest.approx(0.1)


def test_execution_past_goal_and_no_collision(planner):
    free_target = record([waypoint(0.3, 0.0)], [[2.5, 1.05, 0.0], [2.7, 1.05, 0.0]], [0])
    assert first_collision(free_target, planner, success_distance=3.0)["cause"] == "execution"
    near_goal = record([waypoint(0.25, 0.0)], [[2.8, 1.05, 0.0], [2.95, 1.05, 0.0]], [0])
    assert first_collision(near_goal, planner, success_distance=3.0, goal_distance=lambda xy: 2.0)["cause"] == "past_goal"
    assert first_collision(record([waypoint(0.3, 0.0)], [[2.5, 1.05, 0.0], [2.8, 1.05, 0.0]], []), planner,
                           success_distance=3.0) is None


def test_summarize_counts_causes_and_medians():
    firsts = [None, {"step": 0, "cause": "prediction_in_view", "target_depth_m": 0.1, "heading_error_deg": 10.0, "run": 1},
              {"step": 4, "cause": "prediction_out_of_view", "target_depth_m": 0.3, "heading_error_deg": 120.0, "run": 3},
              {"step": 2, "cause": "prediction_in_view", "target_depth_m": 0.2, "heading_error_deg": None, "run": 2}]
    got = summarize(firsts)
    assert got == {"episodes": 4, "with_collision": 3,
                   "causes": {"past_goal": 0, "execution": 0, "prediction_out_of_view": 1, "prediction_in_view": 2},
                   "median_step": 2.0, "median_target_depth_m": 0.2, "median_heading_error_deg": 65.0,
                   "heading_error_within": 0.5, "median_run": 2.0}
