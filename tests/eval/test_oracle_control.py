"""The teacher follows the simulator's action sizes: change ``turn_angle_deg`` in the control config
and the oracle still reaches the goal in every collision mode (corridor scene of ``eval_scenes``)."""
from __future__ import annotations

import math

import pytest

from eval_scenes import corridor_scene
from vlnverse.run.agents import AgentState, make_agent
from vlnverse.run.rollout import Rollout, run_episode, scene_mode
from vlnverse.run.episodes import RunSettings
from vlnverse.sim import ControlConfig, make_simulator
from vlnverse.sim.body import load_body
from vlnverse.tasks.base import context_from_description
from vlnverse.tasks.episode import Episode, Goal, Instruction


@pytest.fixture(scope="module")
def corridor():
    return context_from_description(corridor_scene(), load_body("r2r_ce"), 0.05, scene_path="corridor.usda")


def _episode(ctx) -> Episode:
    start, goal = (1.3, 1.5), (9.0, 1.5)  # through the 1 m opening of the dividing wall
    path = ctx.planner.shortest_path(start, goal)
    return Episode("corridor-turn", "corridor", "corridor.usda", "test", "fine_grained", [*start, 0.0], -math.pi / 2,
                   [Goal([*goal, 0.0])], [[*p, 0.0] for p in path.waypoints], path.length, [Instruction("go")])


@pytest.mark.parametrize("turn", [30.0, 10.0])
def test_oracle_reaches_the_goal_with_the_configured_turn_angle(corridor, turn):
    settings = RunSettings(max_steps=300, success_distance=3.0, body=corridor.body, resolution=0.05, task_type="fine_grained")
    sim = make_simulator(corridor.desc, corridor.body, sensors=[], control=ControlConfig(turn_angle_deg=turn))
    try:
        for mode_name in ("strict", "telhop", "graph"):
            rollout = Rollout(_episode(corridor), corridor, sim, scene_mode(mode_name, sim, corridor), settings)
            rollout.reset()
            state = rollout.state
            assert state.turn_angle_deg == pytest.approx(turn)
            oracle = make_agent("oracle")
            record = run_episode(_episode(corridor), corridor, sim, scene_mode(mode_name, sim, corridor), oracle, settings)
            assert record["termination"] == "stop" and record["metrics"]["SR"] == 1.0, (mode_name, record["failure"])
            if mode_name != "graph":
                assert oracle.turn_angle == pytest.approx(math.radians(turn))
                # every heading the agent took is a multiple of the configured turn from the start
                yaws = [p[2] for p in record["trajectory"]]
                steps = [math.remainder(b - a, 2 * math.pi) for a, b in zip(yaws, yaws[1:])]
                turns = [abs(s) for s in steps if abs(s) > 1e-3]
                assert turns and all(t == pytest.approx(math.radians(turn), abs=0.02) for t in turns)
    finally:
        sim.close()


def test_an_explicit_turn_angle_overrides_the_control_config():
    oracle = make_agent("oracle", {"turn_angle_deg": 20.0})
    oracle.use_control(AgentState(step=0, pose=None, max_steps=1, success_distance=3.0, turn_angle_deg=45.0))
    assert oracle.turn_angle == pytest.approx(math.radians(20.0))
    plain = make_agent("oracle")
    plain.use_control(ControlConfig(turn_angle_deg=45.0))
    assert plain.turn_angle == pytest.approx(math.radians(45.0))
