"""The rollout seam: an episode driven action by action gives the runner's record, byte for byte.

Corridor scene of ``eval_scenes`` (x 0..10, y 0..3, a wall at x = 5 with a 1 m opening at y 2..3).
"""
from __future__ import annotations

import json
import math

import pytest

from eval_scenes import corridor_scene
from vlnverse.run.agents import Agent, make_agent
from vlnverse.run.modes import make_mode
from vlnverse.run.rollout import Rollout, StepResult, run_episode, run_scene, scene_mode
from vlnverse.run.episodes import RunSettings
from vlnverse.sim import make_simulator
from vlnverse.sim.body import load_body
from vlnverse.sim.sensors import CameraSpec
from vlnverse.sim.types import DiscreteAction
from vlnverse.tasks.actions import Decision, SelectFrame
from vlnverse.tasks.base import context_from_description
from vlnverse.tasks.episode import Episode, Goal, Instruction
from vlnverse.tasks.scoring import TaskScoring


@pytest.fixture(scope="module")
def corridor():
    return context_from_description(corridor_scene(), load_body("r2r_ce"), 0.05, scene_path="corridor.usda")


@pytest.fixture(scope="module")
def sim(corridor):
    simulator = make_simulator(corridor.desc, corridor.body, sensors=[CameraSpec("rgb", "rgb", 16, 16)])
    yield simulator
    simulator.close()


def _episode(ctx, start=(1.3, 1.5), yaw=0.0, goal=(9.0, 1.5), eid="corridor-0", info=None) -> Episode:
    path = ctx.planner.shortest_path(start, goal)
    return Episode(eid, "corridor", "corridor.usda", "test", "fine_grained", [*start, 0.0], yaw, [Goal([*goal, 0.0])],
                   [[*p, 0.0] for p in path.waypoints], path.length, [Instruction("go through the opening")],
                   info=dict(info or {}))


def _settings(ctx, max_steps=200) -> RunSettings:
    return RunSettings(max_steps=max_steps, success_distance=3.0, body=ctx.body, resolution=0.05,
                       task_type="fine_grained")


def _bytes(record: dict) -> str:
    record = dict(record)
    record.pop("duration_s")  # wall-clock time: the one field that cannot repeat
    return json.dumps(record, sort_keys=True)


class Recorder:
    """A hook that logs every event it sees."""

    def __init__(self, tag: str, log: list):
        self.tag, self.log = tag, log

    def on_reset(self, rollout):
        self.log.append((self.tag, "reset", rollout.steps))

    def on_step(self, rollout, action, result):
        assert isinstance(result, StepResult)
        self.log.append((self.tag, "step", rollout.steps, result.done))

    def on_episode_end(self, rollout, record):
        self.log.append((self.tag, "end", record["steps"]))


@pytest.mark.parametrize("mode_name", ["strict", "telhop", "graph"])
def test_rollout_driven_by_hand_matches_run_episode_byte_for_byte(corridor, sim, mode_name):
    episode, settings = _episode(corridor), _settings(corridor)
    reference = run_episode(episode, corridor, sim, scene_mode(mode_name, sim, corridor), make_agent("oracle"), settings)
    assert reference["termination"] == "stop" and reference["metrics"]["SR"] == 1.0

    agent = make_agent("oracle")  # driven from "user code": the rollout does not know the agent
    log: list = []
    rollout = Rollout(episode, corridor, sim, scene_mode(mode_name, sim, corridor), settings,
                      hooks=[Recorder("a", log)])
    rollout.add_hook(Recorder("b", log))
    rollout.reset()
    agent.reset(episode, corridor)
    results = []
    while not rollout.done:
        results.append(rollout.step(agent.act(rollout.observations, rollout.state)))
    record = rollout.record()
    assert _bytes(record) == _bytes(reference)
    assert rollout.record() is record  # fixed once over: hooks do not fire twice
    # hooks: a then b for every event, in order: reset, one step per action, end
    n = reference["steps"]
    assert log[:2] == [("a", "reset", 0), ("b", "reset", 0)]
    steps = log[2:-2]
    assert [s[1:3] for s in steps[::2]] == [("step", i + 1) for i in range(n)] and steps[1::2] == [("b",) + s[1:] for s in steps[::2]]
    assert log[-2:] == [("a", "end", n), ("b", "end", n)]
    assert [r.done for r in results] == [False] * (n - 1) + [True] and results[-1].termination == "stop"
    with pytest.raises(RuntimeError):
        rollout.step(DiscreteAction.MOVE_FORWARD)


def test_step_results_budget_and_invalid_actions(corridor, sim):
    rollout = Rollout(_episode(corridor), corridor, sim, make_mode("strict", sim), _settings(corridor, max_steps=3))
    with pytest.raises(RuntimeError):
        rollout.step(DiscreteAction.MOVE_FORWARD)  # before reset
    first = rollout.reset()
    assert first["rgb"].shape == (16, 16, 3) and rollout.state.step == 0
    moved = rollout.step(DiscreteAction.MOVE_FORWARD)
    assert moved.pose.x == pytest.approx(1.55, abs=0.02) and not moved.done and moved.termination is None
    assert moved.info["displacement"] < 0.01 and not moved.collided
    bad = rollout.step("FLY")
    assert "FLY" in bad.info["error"] and bad.pose == moved.pose and not bad.done
    last = rollout.step(DiscreteAction.TURN_LEFT)
    assert last.done and last.termination == "max_steps"
    record = rollout.record()
    assert record["actions"] == ["MOVE_FORWARD", None, "TURN_LEFT"] and record["invalid_actions"] == 1
    assert record["termination"] == "max_steps" and record["metrics"]["SR"] == 0.0
    assert record["trajectory"][-1][2] == pytest.approx(math.radians(15), abs=0.02)


def test_typed_decision_and_frame_selection(corridor, sim):
    info = {"target_frames": [4, 5], "kind": "room_to_object", "target_room_id": 1}
    rollout = Rollout(_episode(corridor, info=info), corridor, sim, make_mode("telhop", sim, planner=corridor.planner),
                      _settings(corridor), task=TaskScoring(frame_selection=True))
    rollout.reset()
    picked = rollout.step(SelectFrame(5))
    assert not picked.done and picked.info == {"selected_frame": 5} and picked.pose == rollout.pose
    end = rollout.step(Decision.NOT_FOUND)
    assert end.done and end.termination == "stop" and end.info == {"decision": "NOT_FOUND"}
    record = rollout.record()
    assert record["decision"] == "NOT_FOUND" and record["actions"] == [{"type": "SelectFrame", "frame": 5}, "NOT_FOUND"]
    assert record["metrics"]["Rid_SR"] == 1.0 and record["moves"] == 0
    with pytest.raises(ValueError):
        SelectFrame(-1)


class Picky(Agent):
    name = "picky"

    def act(self, observations, state):
        if state.step == 0:
            return SelectFrame(2)
        if state.step == 1:
            raise RuntimeError("model timeout")
        return "found"  # a decision by name still counts


def test_run_scene_equals_episode_by_episode(corridor, sim):
    episodes = [_episode(corridor), _episode(corridor, (9.0, 0.6), math.pi, (1.0, 0.6), "corridor-1")]
    settings = _settings(corridor)
    seen = []
    records = run_scene("corridor.usda", episodes, settings, make_agent("oracle"), collision_mode="telhop",
                        sensors=[CameraSpec("rgb", "rgb", 16, 16)], scene_loader=lambda *a: corridor,
                        extra={"agent": "oracle"}, on_record=seen.append)
    assert seen == records and [r["agent"] for r in records] == ["oracle", "oracle"]
    for episode, record in zip(episodes, records):
        alone = run_episode(episode, corridor, sim, scene_mode("telhop", sim, corridor), make_agent("oracle"), settings)
        alone["agent"] = "oracle"
        assert _bytes(record) == _bytes(alone)
    picky = run_episode(episodes[0], corridor, sim, make_mode("strict", sim), Picky(), settings)
    assert picky["decision"] == "FOUND" and picky["steps"] == 3 and picky["invalid_actions"] == 1
    assert "model timeout" in picky["invalid"][0]["error"]
