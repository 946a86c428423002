"""Step-level error analysis: each first-error category on a constructed trajectory, the record
mapping (pose -> step, clause text), and every agent's records carrying it (a learned agent here)."""
from __future__ import annotations

import pytest

from vlnverse.run.diagnostics import CATEGORIES, clause_texts, clauses, episode_first_error, error_counts, first_error

# an L-shaped reference: 6 m east, turn left at (6, 0), 6 m north; the sofa marks the turn
REFERENCE = [(0.0, 0.0), (3.0, 0.0), (6.0, 0.0), (6.0, 3.0), (6.0, 6.0)]
GOAL = (6.0, 6.0)
SOFA = {7: ("sofa", (6.6, -0.6))}


def _first(traj, *, success=False, stopped=True, landmarks=SOFA, **kw):
    return first_error(traj, REFERENCE, GOAL, 1.0, success=success, stopped=stopped, landmarks=landmarks, **kw)


def test_clauses_split_the_reference_at_turns_with_their_landmarks():
    cls = clauses(REFERENCE, SOFA)
    assert [(c["action"], c["start_s"], c["end_s"]) for c in cls] == [("straight", 0.0, 6.0), ("turn_left", 6.0, 12.0)]
    assert cls[1]["landmark"] == {"id": 7, "category": "sofa"} and cls[0]["landmark"] is None
    assert clauses(REFERENCE, {8: ("lamp", (0.0, 5.0))})[1]["landmark"] is None  # too far from the turn
    assert clause_texts("Walk past the table, then turn left at the sofa. Stop by the door.", 2) == \
        ["Walk past the table", "turn left at the sofa"]


def test_success_has_no_error():
    assert _first([(0, 0), (3, 0), (6, 0), (6, 3), (6, 5.5)], success=True) is None


def test_wrong_direction():
    err = _first([(0, 0), (1, 0), (1, -2)])
    assert err["category"] == "wrong_direction" and err["pose"] == 2 and err["clause"] == 0
    assert err["position"] == [1.0, -2.0]


def test_missed_landmark_and_without_the_landmark_wrong_direction():
    straight_on = [(0, 0), (2, 0), (4, 0), (6, 0), (8, 0)]
    err = _first(straight_on)
    assert err["category"] == "missed_landmark" and err["pose"] == 4 and "turn left at the sofa" in err["detail"]
    assert _first(straight_on, landmarks={})["category"] == "wrong_direction"


def test_premature_stop():
    err = _first([(0, 0), (3, 0), (6, 0), (6, 2)])
    assert err["category"] == "premature_stop" and err["pose"] == 3 and "4.0 m short" in err["detail"]


def test_overshoot_leaving_the_goal_region_and_stopping_beyond():
    err = _first([(0, 0), (3, 0), (6, 0), (6, 3), (6, 5.5), (6, 7.2)])
    assert err["category"] == "overshoot" and err["pose"] == 5
    # stopped beyond the end of the path without ever being in the goal region (a 0.5 m radius here)
    err = first_error([(0, 0), (3, 0), (6, 0), (6, 3), (6.0, 6.6)], REFERENCE, GOAL, 0.5, success=False, stopped=True)
    assert err["category"] == "overshoot" and err["pose"] == 4


def test_loop_revisit():
    err = _first([(0, 0), (2, 0), (4, 0), (2.2, 0.1), (4, 0)])
    assert err["category"] == "loop" and err["pose"] == 3 and "pose 1" in err["detail"]
    # turning on the spot (same position, new headings) is not a revisit
    assert _first([(0, 0, 0), (0, 0, 1.5), (0, 0, 3.0), (2, 0, 0)], stopped=True)["category"] == "premature_stop"


def test_collision():
    err = _first([(0, 0), (2, 0), (4, 0), (4, -2)], collision_poses=[2])
    assert err["category"] == "collision" and err["pose"] == 2  # before it went off the path at pose 3


def test_out_of_steps_and_strict_failure():
    assert _first([(0, 0), (1, 0), (2, 0)], stopped=False)["category"] == "out_of_steps"
    err = _first([(0, 0), (1, 0), (2, 0)], stopped=False, failure="displaced 0.4 m")
    assert err["category"] == "collision" and err["pose"] == 2 and "displaced" in err["detail"]


def test_record_steps_clause_text_and_counts():
    record = {"episode_id": "e", "metrics": {"SR": 0.0}, "termination": "stop", "collisions": [],
              "instruction": "Go straight, then turn left at the sofa.", "reference_path": [[*p, 0.0] for p in REFERENCE],
              "goals": [list(GOAL)], "trajectory": [[0, 0, 0], [2, 0, 0], [4, 0, 0], [6, 0, 0], [8, 0, 0]],
              "actions": ["MOVE", None, "MOVE", "MOVE", "MOVE", "STOP"]}  # step 1: an invalid action
    err = episode_first_error(record, landmarks=SOFA, success_distance=1.0)
    assert err["category"] == "missed_landmark" and err["pose"] == 4 and err["step"] == 4
    assert err["clause"] == 1 and err["clause_text"] == "turn left at the sofa"  # the clause it missed
    assert episode_first_error({**record, "outcome": "not_evaluated"}) is None
    assert episode_first_error({**record, "metrics": {"SR": 1.0}}) is None
    counts = error_counts([{**record, "first_error": err}, {**record, "episode_id": "f", "first_error": None}])
    assert counts["failed_episodes"] == 1 and counts["counts"]["missed_landmark"] == 1
    assert counts["examples"]["missed_landmark"] == [{"episode_id": "e", "step": 4}] and set(counts["counts"]) == set(CATEGORIES)


@pytest.mark.parametrize("agent_name", ["forward", "random"])
def test_every_agent_gets_the_analysis(agent_name, tmp_path):
    from eval_scenes import corridor_scene
    from vlnverse.run.agents import make_agent
    from vlnverse.run.modes import make_mode
    from vlnverse.run.rollout import run_episode
    from vlnverse.run.episodes import RunSettings
    from vlnverse.run.summary import summarize
    from vlnverse.sim import make_simulator
    from vlnverse.sim.body import load_body
    from vlnverse.tasks.base import context_from_description
    from vlnverse.tasks.episode import Episode, Goal, Instruction

    ctx = context_from_description(corridor_scene(), load_body("r2r_ce"), 0.05, scene_path="corridor.usda")
    path = ctx.planner.shortest_path((1.3, 1.5), (9.0, 1.5))
    episode = Episode("c", "corridor", "corridor.usda", "test", "fine_grained", [1.3, 1.5, 0.0], 0.0,
                      [Goal([9.0, 1.5, 0.0])], [[*p, 0.0] for p in path.waypoints], path.length,
                      [Instruction("go through the opening")])
    sim = make_simulator(ctx.desc, ctx.body, sensors=[])
    try:
        rec = run_episode(episode, ctx, sim, make_mode("telhop", sim, planner=ctx.planner), make_agent(agent_name, seed=0),
                          RunSettings(max_steps=6, success_distance=3.0, body=ctx.body, resolution=0.05,
                                      task_type="fine_grained"))
    finally:
        sim.close()
    assert rec["metrics"]["SR"] == 0.0  # six steps cannot reach the far end
    err = rec["first_error"]
    assert err["category"] in CATEGORIES and 0 <= err["step"] < rec["steps"]
    full = summarize([rec], run={"collision_mode": "telhop", "agent": agent_name})
    summary = full["overall"]["first_errors"]
    assert summary["failed_episodes"] == 1 and summary["counts"][err["category"]] == 1
    from vlnverse.eval.report import write_report

    page = write_report(tmp_path / "report.html", [("run", full, [{**rec, "map": "maps/c.png"}])]).read_text()
    assert f"<td>{err['category']}</td><td>1</td><td>c (step {err['step']})</td>" in page
    assert f"first error: {err['category']}</b> at step {err['step']}" in page


def test_stuck_triggers_of_the_oracle_assistant():
    from vlnverse.run.diagnostics import stuck_reason

    assert stuck_reason([(0, 0), (2, 0), (0.2, 0)], [5, 6, 5], REFERENCE) == "loop"
    assert stuck_reason([(0, 0), (1, 0), (2, 0), (3, 0)], [5, 6, 7, 8], REFERENCE, away_steps=3) == "moving_away"
    assert stuck_reason([(0, 0), (1, 0), (2, 0), (3, 0)], [5, 6, 7, 8], REFERENCE, away_steps=4) is None
    assert stuck_reason([(0, 0), (1, 0), (1, -2.5)], [5, 4, 4], REFERENCE, off_reference=2.0) == "off_reference"
    assert stuck_reason([(0, 0), (1, 0), (1, -2.5)], [5, 4, 4], REFERENCE, off_reference=0) is None
    assert stuck_reason([(0, 0), (1, 0), (2, 0)], [5, 4, 3], REFERENCE) is None


# ---------------------------------------------------------------------------------------------
# issue 55: the instruction's clauses, the step of each error, walking away


# east 6 m, a right bend at the stove drawn as two vertices 0.1 m apart, south 6 m, a left bend at
# the tv stand drawn likewise, east 4 m: two instructed turns
BENDS = [(0.0, 0.0), (6.0, 0.0), (6.07, -0.07), (6.07, -6.0), (6.14, -6.07), (10.0, -6.07)]
BEND_MARKS = {1: ("stove", (6.6, 0.6)), 2: ("tv_stand", (6.6, -6.7))}
BEND_TEXT = "Walk down the hall, turn right at the stove, then turn left at the tv_stand and stop by the window."


def test_a_bend_split_into_close_vertices_is_one_clause():
    cls = clauses(BENDS, BEND_MARKS)
    assert [(c["action"], c["landmark"] and c["landmark"]["category"]) for c in cls] == \
        [("straight", None), ("turn_right", "stove"), ("turn_left", "tv_stand")]
    assert cls[1]["start_s"] == 6.0 and cls[2]["start_s"] == pytest.approx(12.0 + 0.07 * 2 ** 0.5 + 0.07 * 2 ** 0.5 - 0.07, abs=0.1)
    # unmerged, each 45° half of a bend is a turn: the 4 turn clauses for 2 instructed turns
    assert len(clauses(BENDS, BEND_MARKS, merge_distance=0.05)) == 5
    assert clause_texts(BEND_TEXT, 3) == ["Walk down the hall", "turn right at the stove",
                                          "turn left at the tv_stand and stop by the window"]


def _record(trajectory, actions, *, termination="stop", reference=BENDS, goal=(10.0, -6.07), text=BEND_TEXT):
    return {"episode_id": "e", "metrics": {"SR": 0.0}, "termination": termination, "collisions": [],
            "instruction": text, "reference_path": [[*p, 0.0] for p in reference], "goals": [[*goal, 0.0]],
            "trajectory": [[*p, 0.0] for p in trajectory], "actions": actions}


def test_a_wrong_turn_early_is_the_landmark_clause_with_matching_text():
    """Turning right 1.2 m before the stove: the error is at that turn's step, clause 1, whose
    text is the instruction's 'turn right at the stove', and the detail says what happened."""
    traj = [(0, 0), (2.4, 0), (4.8, 0), (4.3, -1.6), (3.6, -3.0)]
    rec = _record(traj, ["MOVE", "MOVE", "MOVE", "MOVE", "STOP"])
    err = episode_first_error(rec, landmarks=BEND_MARKS, success_distance=1.0)
    assert err["category"] == "missed_landmark" and err["clause"] == 1
    assert err["clause_text"] == "turn right at the stove"
    assert err["detail"].startswith("turned right 1.2 m before the stove; the instruction says turn right at the stove")
    assert err["pose"] == 3 and err["step"] == 2  # the move from (4.8, 0): where it left the route


def test_a_missed_turn_is_reported_at_the_step_past_the_landmark():
    traj = [(0, 0), (3, 0), (6, 0), (8, 0), (10, 0)]
    err = episode_first_error(_record(traj, ["MOVE"] * 4 + ["STOP"]), landmarks=BEND_MARKS, success_distance=1.0)
    assert err["category"] == "missed_landmark" and err["clause"] == 1 and err["step"] == 2
    assert "straight on at the stove" in err["detail"]


def test_premature_stop_reports_the_stop_step():
    traj = [(0, 0), (2, 0), (4, 0)]
    err = episode_first_error(_record(traj, ["MOVE", "MOVE", None, "STOP"]), landmarks=BEND_MARKS, success_distance=1.0)
    assert err["category"] == "premature_stop" and err["step"] == 3 and err["pose"] == 2  # the STOP, not the last move
    err = episode_first_error(_record(traj, ["MOVE", "MOVE", "NOT_FOUND"]), success_distance=1.0)
    assert err["step"] == 2


def test_walking_back_past_the_start_inside_the_corridor():
    """Within 1.5 m of the reference all the way (no corridor rule fires), but 1.4 m behind the start."""
    traj = [(0, 0), (0.8, 0.3), (0.1, 0.6), (-0.6, 0.6), (-1.4, 0.6)]
    err = first_error(traj, BENDS, (10.0, -6.07), 1.0, success=False, stopped=True)
    assert err["category"] == "walked_away" and err["pose"] == 2 and "past its start" in err["detail"]
    rec = _record(traj, ["MOVE"] * 4 + ["STOP"])
    assert episode_first_error(rec, success_distance=1.0)["step"] == 1  # the first step back
    # a small step back (under walk_back) is no error
    assert first_error([(0, 0), (2, 0), (1.3, 0)], BENDS, (10.0, -6.07), 1.0, success=False,
                       stopped=True)["category"] == "premature_stop"


@pytest.mark.parametrize("traj, kw, category, pose, step", [
    ([(0, 0), (1, 0), (1, -2)], {}, "wrong_direction", 2, 1),
    ([(0, 0), (2, 0), (4, 0), (6, 0), (8, 0)], {}, "missed_landmark", 4, 3),
    ([(0, 0), (3, 0), (2.0, 0.2), (1.0, 0.2)], {}, "walked_away", 2, 1),
    ([(0, 0), (3, 0), (6, 0), (6, 2)], {}, "premature_stop", 3, 3),
    ([(0, 0), (3, 0), (6, 0), (6, 3), (6, 5.5), (6, 7.2)], {}, "overshoot", 5, 4),
    ([(0, 0), (2, 0), (4, 0), (2.2, 0.1), (4, 0)], {}, "loop", 3, 2),
    ([(0, 0), (2, 0), (4, 0), (4, -2)], {"collision_poses": [2]}, "collision", 2, 1),
    ([(0, 0), (1, 0), (2, 0)], {"stopped": False}, "out_of_steps", 2, 1),
])
def test_every_category_with_its_step(traj, kw, category, pose, step):
    """Each category on the L-shaped reference, with the pose and the record's step (moves only,
    then the STOP when the episode stopped)."""
    stopped = kw.pop("stopped", True)
    err = _first(traj, stopped=stopped, **kw)
    assert (err["category"], err["pose"]) == (category, pose)
    record = {"episode_id": "e", "metrics": {"SR": 0.0}, "termination": "stop" if stopped else "max_steps",
              "collisions": [{"step": p - 1} for p in kw.get("collision_poses", [])],
              "instruction": "Go straight, then turn left at the sofa.", "reference_path": [[*p, 0.0] for p in REFERENCE],
              "goals": [list(GOAL)], "trajectory": [[*p, 0.0] for p in traj],
              "actions": ["MOVE"] * (len(traj) - 1) + (["STOP"] if stopped else [])}
    assert episode_first_error(record, landmarks=SOFA, success_distance=1.0)["step"] == step
    assert category in CATEGORIES
