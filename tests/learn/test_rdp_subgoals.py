"""RDP's continuous teacher on long-horizon episodes: it heads for the next sub-goal in order,
drops it within the stop radius r, stops only at the last goal, and labels progress over the whole
route; single-goal labels and cache keys are as before (corridor scene, CPU)."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from learn_helpers import make_episodes, small_config

START, SUBGOAL, GOAL = (3.0, 1.5), (1.0, 0.6), (9.0, 1.5)
R = 0.75  # the teacher's stop radius: half the 1.5 m success distance


def _long_horizon(ctx):
    """Start facing +x (towards the goal, through the gap at x = 5); the sub-goal lies 2.19 m
    behind, off the route to the goal (> the 1.5 m success distance from it and from the start)."""
    from vlnverse.tasks.episode import Episode, Goal, Instruction

    a, b = ctx.planner.shortest_path(START, SUBGOAL), ctx.planner.shortest_path(SUBGOAL, GOAL)
    ref = [[*p, 0.0] for p in a.waypoints] + [[*p, 0.0] for p in b.waypoints[1:]]
    return Episode("lh-0", "corridor", "corridor.usda", "train", "long_horizon", [*START, 0.0], 0.0,
                   [Goal([*SUBGOAL, 0.0]), Goal([*GOAL, 0.0])], ref, a.length + b.length,
                   [Instruction("go back to the corner of the hallway, then through the gap to the kitchen's end")])


def _state(ctx, x, y, yaw, goals):
    from vlnverse.run.scoring import goal_distance_fn

    return SimpleNamespace(pose=SimpleNamespace(x=x, y=y, yaw=yaw), success_distance=1.5,
                           goal_distance=goal_distance_fn(ctx, np.array(goals, dtype=float)))


def test_single_goal_labels_are_unchanged(corridor):
    """Corridor-0's labels (horizon 3) at three poses, exactly as the teacher gave them before
    sub-goals were routed (the values were recorded from that code)."""
    from vlnverse.learn.rdp import WaypointTeacher

    ep = make_episodes(corridor)[0]
    agent = WaypointTeacher(horizon=3).make_agent()
    agent.reset(ep, corridor)
    assert agent.subgoals == []
    expected = [((1.3, 1.5, 0.0), [[0.48486536741256714, 0.12208840250968933, 0.2466707080602646],
                                   [0.5, -1.3877787807814457e-16, -3.0531133177191805e-16],
                                   [0.5, 1.3877787807814457e-16, 3.0531133177191805e-16]], 0.0, False),
                ((4.0, 2.2, 0.5), [[0.4808143377304077, -0.13717710971832275, -0.27791810035705566],
                                   [0.4949534237384796, -0.045260872691869736, -0.09119109064340591],
                                   [0.48165154457092285, -0.12159355729818344, -0.2472844123840332]],
                 0.39707697257229824, False),
                ((8.5, 1.6, 0.0), [[0.0] * 3] * 3, 1.0, True)]
    for pose, chunk, progress, stop in expected:
        got = agent.labels(_state(corridor, *pose, [ep.goals[0].position[:2]]))
        assert got[0].tolist() == chunk and got[1] == progress and got[2] is stop


def test_cache_key_marks_ordered_routes_only(corridor):
    """The teacher's cache key gains ``route: subgoals`` for a set with a long-horizon episode;
    a single-goal set's key is the spec's plain key (existing caches are reused)."""
    from vlnverse.learn.cache import teacher_key
    from vlnverse.learn.rdp import WaypointTeacher

    spec = WaypointTeacher()
    single = make_episodes(corridor)
    assert teacher_key(spec, single) == spec.key and "route" not in spec.key
    assert teacher_key(spec, [*single, _long_horizon(corridor)]) == {**spec.key, "route": "subgoals"}


def test_first_chunk_heads_for_the_subgoal_behind(corridor):
    """At the start (facing +x) the first action is a 0.5 m step towards the sub-goal, 155.8 deg
    to the right (atan2(-0.9, -2.0)), not towards the goal ahead; progress starts at 0."""
    from vlnverse.learn.rdp import WaypointTeacher

    agent = WaypointTeacher(horizon=3).make_agent()
    agent.reset(_long_horizon(corridor), corridor)
    chunk, progress, stop = agent.labels(_state(corridor, *START, 0.0, [GOAL]))
    theta = math.atan2(-0.9, -2.0)
    assert abs(math.degrees(theta) + 155.77) < 0.01
    assert np.allclose(chunk[0], [0.5 * math.cos(theta), 0.5 * math.sin(theta), theta], atol=1e-4)
    assert np.allclose(chunk[1:], [[0.5, 0.0, 0.0]] * 2, atol=1e-6)  # straight on towards it
    assert progress == 0.0 and not stop and len(agent.subgoals) == 1


@pytest.mark.parametrize("mode", ["telhop", "strict"])
def test_teacher_rollout_visits_the_subgoal_then_stops_at_the_goal(corridor, tmp_path, mode):
    """Rolled out with its own actions, the teacher passes within r of the sub-goal (moving on,
    no STOP there: its chunk runs on past it rather than padding with zero motion), turns back,
    and stops once, within r of the goal; both goals count (SR 1). Progress rises from 0 to 1 over
    the whole route: when the sub-goal is dropped it reads ~0.31 (straight-line estimate: route
    2.19 + 8.39 m from the start, ~7.5 m left; the grid's geodesic reads a little long)."""
    from vlnverse.learn.collect import collect
    from vlnverse.learn.rdp import WaypointTeacher
    from vlnverse.learn.store import StepStore
    from vlnverse.learn.trainer import Trainer
    from vlnverse.tasks.episode import save_episodes

    ep = _long_horizon(corridor)
    save_episodes(tmp_path / "lh.jsonl", [ep])
    cfg = small_config(tmp_path / "run", tmp_path / "lh.jsonl", policy="rdp", collision_mode=mode, max_steps=40,
                       sensors=[{"name": "rgb", "kind": "rgb", "width": 16, "height": 16}])
    trainer = Trainer(cfg, scene_loader=lambda *a: corridor, progress=False)
    spec = WaypointTeacher(horizon=3)
    store = StepStore.create(tmp_path / "store", key={}, sensors=trainer.layout, extra_fields=spec.extra_fields)
    got = collect([ep], settings=trainer.settings, sensors=trainer.sensor_specs, collision_mode=mode, store=store,
                  scene_loader=lambda *a: corridor, teacher=spec, progress=False)
    store.close()
    rec = got["records"][0]
    assert rec["termination"] == "stop" and rec["metrics"]["goals_reached"] == [True, True]
    assert rec["metrics"]["SR"] == 1.0 and rec["metrics"]["CR"] == 0.0
    steps = StepStore(tmp_path / "store").episode(0)
    xy, labels, progress = steps["pose"][:, :2], steps["label"], steps["progress"]
    to_sub = np.linalg.norm(xy - SUBGOAL, axis=1)
    passed = int(np.argmax(to_sub <= R))  # the first step within r of the sub-goal
    assert to_sub[passed] <= R and 0 < passed < len(labels) - 1
    assert labels[-1] == 0 and (labels[:-1] == 1).all()  # STOP once, at the end: not at the sub-goal
    assert np.linalg.norm(xy[-1] - GOAL) <= R
    moves = np.linalg.norm(steps["actions"][:passed, :, :2], axis=2)
    assert (moves > 0.05).all()  # no zero-motion padding before the sub-goal
    assert steps["actions"][passed, 0, 0] < 0  # there it turns back, towards the goal
    assert progress[0] == 0.0 and progress[-1] == 1.0 and (np.diff(progress) >= 0).all()
    assert abs(progress[passed] - 0.31) < 0.05 and progress[passed - 1] < progress[passed]
