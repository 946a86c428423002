"""False-premise (VLN-NF) decisions and REV-SPL, and VCN goal identification, through the runner."""
from __future__ import annotations

import math

import numpy as np
import pytest

from eval_scenes import corridor_scene
from vlnverse.run.agents import Agent, make_agent
from vlnverse.run.modes import make_mode
from vlnverse.run.episodes import RunSettings
from vlnverse.run.rollout import run_episode
from vlnverse.run.scoring import score_frame_selection
from vlnverse.sim import make_simulator
from vlnverse.sim.body import load_body
from vlnverse.tasks.base import context_from_description
from vlnverse.tasks.episode import Episode, Goal, Instruction


@pytest.fixture(scope="module")
def kitchen():
    ctx = context_from_description(corridor_scene(with_objects=True), load_body("r2r_ce"), 0.05, scene_path="corridor.usda")
    sim = make_simulator(ctx.desc, ctx.body, sensors=[])
    yield ctx, sim
    sim.close()


def _episode(ctx, decision: str) -> Episode:
    """Start in the hallway; the kitchen (room 1) holds a table and a cabinet. The reference
    exploration enters through the opening and visits one viewpoint that sees both."""
    start, entry, view = (1.5, 1.5), (5.6, 2.5), (7.0, 1.2)
    path = ctx.planner.shortest_path(start, entry)
    explore = [[*entry, 0.0], [*view, 0.0]]
    goal = Goal([8.0, 2.4, 0.0], object_id=10, category="table") if decision == "FOUND" else Goal([*entry, 0.0], room_id=1)
    info = {"decision": decision, "target_room_id": 1, "room_object_ids": [10, 11], "visibility_range": 4.0,
            "reference_exploration_path": explore,
            "reference_exploration_length": math.dist(entry, view)}
    return Episode(f"nf-{decision}", "corridor", "corridor.usda", "val", "false_premise", [*start, 0.0], 0.0, [goal],
                   [[*p, 0.0] for p in path.waypoints], path.length, [Instruction("find the toaster in the kitchen")], info)


SETTINGS = dict(max_steps=300, success_distance=3.0, resolution=0.05, task_type="false_premise")


class Quitter(Agent):
    """Declares NOT_FOUND at once, without exploring."""

    def act(self, observations, state):
        return "not-found"


@pytest.mark.parametrize("decision", ["FOUND", "NOT_FOUND"])
def test_oracle_explores_the_room_and_states_the_right_decision(kitchen, decision):
    ctx, sim = kitchen
    rec = run_episode(_episode(ctx, decision), ctx, sim, make_mode("telhop", sim, planner=ctx.planner),
                      make_agent("oracle"), RunSettings(body=ctx.body, **SETTINGS))
    m = rec["metrics"]
    assert rec["termination"] == "stop" and rec["decision"] == decision and rec["actions"][-1] == decision
    assert m["reach_SR"] == 1.0 and m["decision_SR"] == 1.0 and m["RD_SR"] == 1.0
    assert m["coverage"] == 1.0  # both kitchen objects in line of sight from the viewpoint
    # the oracle's in-room path (entering past the entry, then to the viewpoint) is about the reference length
    assert m["REV_SPL"] > 0.6
    assert m["SR"] is None and m["SPL"] is None and m["sDTW"] is None  # VLN-NF: RD_SR is the success


def test_premature_not_found_scores_zero(kitchen):
    ctx, sim = kitchen
    rec = run_episode(_episode(ctx, "NOT_FOUND"), ctx, sim, make_mode("strict", sim), Quitter(),
                      RunSettings(body=ctx.body, **SETTINGS))
    m = rec["metrics"]
    assert rec["steps"] == 1 and rec["decision"] == "NOT_FOUND"
    assert m["decision_SR"] == 1.0 and m["reach_SR"] == 0.0 and m["RD_SR"] == 0.0
    assert m["coverage"] == 0.0 and m["REV_SPL"] == 0.0


def test_frame_selection_scores_rid_and_oid():
    room_ep = Episode("v0", "s", "s.usda", "val", "video_contextualized", [0, 0, 0], 0.0, [Goal([1, 1, 0], radius=1.0)],
                      [[0, 0, 0], [1, 1, 0]], 1.4, [Instruction("go to the second bedroom you saw")],
                      {"kind": "count", "target_frames": [12, 13, 14], "target_room_id": 4})
    assert score_frame_selection(room_ep, 13) == {"Rid_SR": 1.0}
    assert score_frame_selection(room_ep, 2) == {"Rid_SR": 0.0}
    obj_ep = Episode("v1", "s", "s.usda", "val", "video_contextualized", [0, 0, 0], 0.0, [Goal([1, 1, 0], radius=1.0)],
                     [[0, 0, 0], [1, 1, 0]], 1.4, [Instruction("go to the red mug")],
                     {"kind": "instance", "target_frames": [40], "target_object_id": 9})
    assert score_frame_selection(obj_ep, 40) == {"Oid_SR": 1.0}
    assert score_frame_selection(obj_ep, None) == {"Oid_SR": 0.0}


def test_long_horizon_oracle_visits_sub_goals_in_order(kitchen):
    from vlnverse.run.summary import summarize

    ctx, sim = kitchen
    start, first, last = (1.0, 1.5), (9.0, 0.6), (1.5, 0.5)  # out to the kitchen's far end and back
    legs = [ctx.planner.shortest_path(start, first), ctx.planner.shortest_path(first, last)]
    ref = [[*p, 0.0] for p in legs[0].waypoints] + [[*p, 0.0] for p in legs[1].waypoints[1:]]
    ep = Episode("lh-0", "corridor", "corridor.usda", "val", "long_horizon", [*start, 0.0], 0.0,
                 [Goal([*first, 0.0]), Goal([*last, 0.0])], ref, legs[0].length + legs[1].length,
                 [Instruction("first go to the cabinet in the kitchen, then come back to the hallway")])
    settings = RunSettings(max_steps=400, success_distance=3.0, body=ctx.body, resolution=0.05, task_type="long_horizon")
    rec = run_episode(ep, ctx, sim, make_mode("telhop", sim, planner=ctx.planner), make_agent("oracle"), settings)
    assert rec["metrics"]["goals_reached"] == [True, True] and rec["metrics"]["SR"] == 1.0
    assert max(p[0] for p in rec["trajectory"]) > 6.0  # it really went to the kitchen first
    # the wall bumper heads for the first goal only and stops there: sub-goal 2 never reached, SR 0
    wall = run_episode(ep, ctx, sim, make_mode("telhop", sim, planner=ctx.planner), make_agent("wall_bumper"), settings)
    assert wall["metrics"]["goals_reached"] == [True, False] and wall["metrics"]["SR"] == 0.0
    summary = summarize([dict(rec, collision_mode="telhop"), dict(wall, collision_mode="telhop")],
                        run={"collision_mode": "telhop"})
    assert summary["overall"]["sr_n"] == {"SR_1": 1.0, "SR_2": 0.5, "SR_all": 0.5}


def test_skipping_a_sub_goal_zeroes_every_success_metric(kitchen):
    """Straight from the start to the last goal, the kitchen sub-goal skipped: SR 0, and SPL and sDTW
    0 with it (SPL = S * l / max(p, l) needs S); NE is 0.6 m from the last goal's hand-placed point."""
    from vlnverse.run.scoring import score_episode

    ctx, _ = kitchen
    start, first, last = (1.0, 1.5), (9.0, 0.6), (1.5, 0.5)
    ep = Episode("lh-1", "corridor", "corridor.usda", "val", "long_horizon", [*start, 0.0], 0.0,
                 [Goal([*first, 0.0]), Goal([*last, 0.0])], [[*start, 0.0], [*first, 0.0], [*last, 0.0]], 17.0,
                 [Instruction("first go to the kitchen, then come back")])
    path = np.array([start, (1.5, 1.1)])
    got = score_episode(ep, ctx, path, stopped=True, failed=False, collisions=0, actions=2, success_distance=3.0)
    assert got["goals_reached"] == [False, False] and got["SR"] == 0.0 and got["SPL"] == 0.0 and got["sDTW"] == 0.0
    assert got["NE"] == pytest.approx(0.6, abs=0.06)


def test_sr_all_needs_a_stop_near_the_last_goal():
    """SR_all is overall task completion: stopping within the threshold of the final goal after
    all sub-goals (VLNVerse Sec. 4; docs: SR = SR_all). An agent that passes every sub-goal but
    runs out of steps (no STOP, so SR = 0) reached all goals for SR_n, but did not complete."""
    from vlnverse.run.summary import summarize

    def record(reached, sr, termination):
        return {"task_type": "long_horizon", "termination": termination, "invalid_actions": 0,
                "metrics": {"SR": sr, "goals_reached": reached}}

    records = [record([True, True], 1.0, "stop"), record([True, True], 0.0, "max_steps"),
               record([True, False], 0.0, "stop")]
    block = summarize(records, run={"collision_mode": "telhop"})["overall"]
    assert block["sr_n"]["SR_1"] == 1.0 and block["sr_n"]["SR_2"] == pytest.approx(2 / 3)
    assert block["sr_n"]["SR_all"] == pytest.approx(1 / 3)
    assert block["sr_n"]["SR_all"] == pytest.approx(block["means"]["SR"])


def test_video_contextualized_success_is_within_1m_of_the_targets_viewpoints(kitchen):
    """VCN-Bench App. C.1: the target's viewpoints are the points within 0.6 m around its
    bounding box, in its room; success is stopping within 1 m (Euclidean) of any of them — on
    any side of the object, not only near the one navigable cell closest to its centre."""
    from vlnverse.run.scoring import score_episode

    ctx, _ = kitchen
    # the table (instance 10) spans x 7.6..8.4, y 2.1..2.7 in the kitchen (room 1)
    goal = Goal([8.0, 2.4, 0.0], radius=1.5, object_id=10, room_id=1, category="table")
    start = (2.0, 1.5)

    def sr(end):
        ep = Episode("vcn-0", "corridor", "corridor.usda", "val", "video_contextualized", [*start, 0.0], 0.0, [goal],
                     [[*start, 0.0], [5.5, 2.5, 0.0], [7.2, 2.5, 0.0]], 5.3, [Instruction("Find the table.")],
                     {"kind": "instance", "target_room_id": 1, "target_object_id": 10})
        path = np.array([start, end], dtype=float)
        return score_episode(ep, ctx, path, stopped=True, failed=False, collisions=0, actions=1,
                             success_distance=1.0)["SR"]

    assert sr((7.2, 2.5)) == 1.0   # beside the table's short side, 0.4 m from it
    assert sr((8.0, 0.6)) == 1.0   # 1.5 m below it: 0.9 m from the nearest viewpoint
    assert sr((8.0, 0.45)) == 0.0  # 1.65 m below it: 1.05 m from the nearest viewpoint
    assert sr((6.0, 1.0)) == 0.0   # 1.94 m from the table
    assert sr((4.5, 2.5)) == 0.0   # in the hallway, behind the wall: 3.1 m from the table


def test_false_premise_run_with_progress_and_table(kitchen, tmp_path, capsys):
    """A whole run (progress bar and stdout table on) on decision episodes: SR is not applicable,
    the table shows RD_SR / REV_SPL columns instead of crashing on the missing SR."""
    from vlnverse.run.setup import EpisodeSource, NamedSpec
    from vlnverse.eval.config import EvalConfig, ReportConfig
    from vlnverse.eval.runner import run_eval
    from vlnverse.tasks.episode import save_episodes

    ctx, _ = kitchen
    episodes_file = tmp_path / "nf.jsonl"
    save_episodes(episodes_file, [_episode(ctx, "FOUND"), _episode(ctx, "NOT_FOUND")])
    cfg = EvalConfig(agent=NamedSpec("oracle"), task="false_premise", episodes=EpisodeSource(path=str(episodes_file)),
                     collision_mode="telhop", sensors=[], out=str(tmp_path / "run"),
                     report=ReportConfig(enabled=False))
    cfg.validate()
    summary = run_eval(cfg, progress=True, print_summary=True, scene_loader=lambda *a: ctx)
    means = summary["overall"]["means"]
    assert "SR" not in means and means["RD_SR"] == 1.0 and means["reach_SR"] == 1.0
    out = capsys.readouterr().out
    assert "RD_SR %" in out and "REV_SPL %" in out
