"""Tasks own their scoring: the evaluator reads each task type's declaration and holds no task names."""
from __future__ import annotations

import math

import pytest

from eval_scenes import corridor_scene
from vlnverse.run.modes import make_mode
from vlnverse.run.rollout import Rollout
from vlnverse.run.episodes import RunSettings
from vlnverse.sim import make_simulator
from vlnverse.sim.body import load_body
from vlnverse.sim.types import DiscreteAction
from vlnverse.tasks.base import TASKS, TaskGenerator, context_from_description, load_task_types
from vlnverse.tasks.episode import Episode, Goal, Instruction
from vlnverse.tasks.scoring import DEFAULT_SCORING, TaskScoring, has_ordered_goals, scoring_for


def test_built_in_task_types_declare_their_scoring():
    load_task_types()
    assert scoring_for("long_horizon").ordered_goals and not scoring_for("fine_grained").ordered_goals
    nf = scoring_for("false_premise")
    assert nf.decision and nf.headline == "RD_SR"
    vcn = scoring_for("video_contextualized")
    assert vcn.goal_region == "object_viewpoints" and vcn.room_success and vcn.frame_selection
    assert scoring_for("no_such_task") is DEFAULT_SCORING
    assert TASKS.get("visual_reference").needs_renderer and TASKS.get("object_goal").instruction_optional
    with pytest.raises(ValueError, match="goal_region"):
        TaskScoring(goal_region="nearby")


def _corridor_episode(ctx, task_type="fine_grained", **info) -> Episode:
    start, goal = (1.3, 1.5), (3.3, 1.5)  # 2 m straight ahead, this side of the dividing wall
    path = ctx.planner.shortest_path(start, goal)
    return Episode("corridor-scoring", "corridor", "corridor.usda", "test", task_type, [*start, 0.0], 0.0,
                   [Goal([*goal, 0.0])], [[*p, 0.0] for p in path.waypoints], path.length, [Instruction("go")], info=info)


def test_a_task_declared_success_rule_and_metrics_replace_the_point_goal_rule():
    ctx = context_from_description(corridor_scene(), load_body("r2r_ce"), 0.05, scene_path="corridor.usda")
    sim = make_simulator(ctx.desc, ctx.body, sensors=[])
    settings = RunSettings(max_steps=50, success_distance=3.0, body=ctx.body, resolution=0.05, task_type="x")

    def far_enough(outcome, _ctx):  # success: stopped at least 1 m from the start
        return bool(outcome.path_xy[-1, 0] - outcome.path_xy[0, 0] >= 1.0)

    def turns(outcome, _ctx):
        yaws = outcome.poses[:, 2]
        return {"turns": int(sum(abs(math.remainder(b - a, 2 * math.pi)) > 1e-3 for a, b in zip(yaws, yaws[1:])))}

    scoring = TaskScoring(success=far_enough, metrics=turns)
    try:
        results = {}
        for forwards in (2, 6):  # 0.5 m: inside the 3 m success radius but not far enough; 1.5 m: success
            rollout = Rollout(_corridor_episode(ctx), ctx, sim, make_mode("telhop", sim, planner=ctx.planner), settings,
                              task=scoring)
            rollout.reset()
            for action in [DiscreteAction.TURN_LEFT, DiscreteAction.TURN_RIGHT] + [DiscreteAction.MOVE_FORWARD] * forwards:
                rollout.step(action)
            rollout.step(DiscreteAction.STOP)
            results[forwards] = rollout.record()["metrics"]
        assert results[2]["SR"] == 0.0 and results[2]["SPL"] == 0.0 and results[2]["sDTW"] == 0.0
        assert results[2]["NE"] < 3.0  # the point-goal rule alone would have called it a success
        m = results[6]
        assert m["SR"] == 1.0 and m["turns"] == 2
        assert m["SPL"] == pytest.approx(min(1.0, 2.0 / max(m["TL"], 2.0)), abs=0.02) and m["sDTW"] == pytest.approx(m["nDTW"])
    finally:
        sim.close()


def test_ordered_goals_come_from_the_declaration_or_the_episode():
    class Chain(TaskGenerator):
        scoring = TaskScoring(ordered_goals=True)

    TASKS.register("toy_chain", overwrite=True)(Chain)
    try:
        ctx = context_from_description(corridor_scene(), load_body("r2r_ce"), 0.05, scene_path="corridor.usda")
        assert has_ordered_goals(_corridor_episode(ctx, "toy_chain"))
        assert not has_ordered_goals(_corridor_episode(ctx))
        assert has_ordered_goals(_corridor_episode(ctx, ordered_goals=True))
    finally:
        TASKS._items.pop("toy_chain", None)


def _scored(ctx, sim, task_type: str) -> dict:
    """Metrics of one fixed drive (2 m forward, then STOP) on a two-goal episode of ``task_type``,
    its scoring looked up by the evaluator from the name."""
    settings = RunSettings(max_steps=50, success_distance=3.0, body=ctx.body, resolution=0.05, task_type=task_type)
    episode = _corridor_episode(ctx, task_type, decision="FOUND", target_room_id=0)
    episode.goals.insert(0, Goal([1.8, 1.5, 0.0]))
    rollout = Rollout(episode, ctx, sim, make_mode("telhop", sim, planner=ctx.planner), settings)
    rollout.reset()
    for action in [DiscreteAction.MOVE_FORWARD] * 8 + [DiscreteAction.STOP]:
        rollout.step(action)
    return rollout.record()["metrics"]


def test_the_evaluator_scores_by_declaration_never_by_task_name():
    """Every task name, registered with the default declaration, is scored exactly as an unknown
    name is: the evaluator (runner, rollout, scoring) holds no task names. With their own
    declarations restored, the names score differently (so the comparison can tell)."""
    names = sorted(load_task_types()) + ["vcn", "video_context"]
    originals = {n: TASKS.get(n) for n in names if n in TASKS}

    class Plain(TaskGenerator):
        scoring = DEFAULT_SCORING

    ctx = context_from_description(corridor_scene(), load_body("r2r_ce"), 0.05, scene_path="corridor.usda")
    sim = make_simulator(ctx.desc, ctx.body, sensors=[])
    try:
        plain = _scored(ctx, sim, "toy_unregistered")
        for name in names:
            TASKS.register(name, overwrite=True)(Plain)
        assert {n: _scored(ctx, sim, n) for n in names} == {n: plain for n in names}
        for name, cls in originals.items():
            TASKS.register(name, overwrite=True)(cls)
        assert _scored(ctx, sim, "long_horizon") != plain and _scored(ctx, sim, "false_premise") != plain
    finally:
        for name in names:
            if name in originals:
                TASKS.register(name, overwrite=True)(originals[name])
            else:
                TASKS._items.pop(name, None)
        sim.close()
