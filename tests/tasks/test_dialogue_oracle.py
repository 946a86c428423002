"""Dialogue oracle on a hand-built three-room corridor: right room, rooms ahead, left/right/ahead/behind."""
from __future__ import annotations

import math
from mllm_server import openai_server
from types import SimpleNamespace

import networkx as nx
import numpy as np
import pytest

from vlnverse.core.errors import ConfigError
from vlnverse.scenes.occupancy import OCCUPIED, OccupancyMap
from vlnverse.scenes.scene_graph import SceneGraph
from vlnverse.tasks.dialogue_oracle import (LLMOracle, OracleTarget, SceneGraphOracle, oracle_for_episode,
                                            relative_direction)
from vlnverse.tasks.episode import Episode, Goal
from vlnverse.tasks.instructions.llm import ChatClient
from vlnverse.tasks.pathing import PathPlanner

RES = 0.1
ROOM_TYPES = {0: "bedroom", 1: "hallway", 2: "kitchen"}


@pytest.fixture(scope="module")
def corridor():
    """12 m x 3 m strip split by walls at x = 4 m (door at y in [2.0, 2.9)) and x = 8 m (door at
    y in [0.5, 1.5)); rooms: bedroom x < 4, hallway 4..8, kitchen x > 8."""
    grid = np.zeros((30, 120), np.uint8)
    grid[:, 39:41] = OCCUPIED
    grid[20:29, 39:41] = 0
    grid[:, 79:81] = OCCUPIED
    grid[5:15, 79:81] = 0
    nav = OccupancyMap(grid, RES, np.zeros(2), source="corridor")
    cols = np.arange(120)[None, :].repeat(30, axis=0)
    room_map = np.select([cols < 40, cols < 80], [0, 1], 2).astype(np.int32)
    room_map[grid == OCCUPIED] = -1
    planner = PathPlanner(nav, scene_id="corridor")
    target = OracleTarget(instance_id=9, category="mug", room_id=2, room_type="kitchen",
                          goal_xy=np.array([10.0, 1.0]), attributes={"color": "red"}, relation="on",
                          anchor_category="counter")
    return SceneGraphOracle(target, planner, room_map, ROOM_TYPES), planner, room_map


@pytest.mark.parametrize("yaw, expected", [(0.0, "ahead"), (math.pi / 2, "right"), (-math.pi / 2, "left"),
                                           (math.pi, "behind"), (math.radians(100), "right"),
                                           (math.radians(-140), "behind")])
def test_relative_direction(yaw, expected):
    assert relative_direction((0.0, 0.0), yaw, (1.0, 0.0)) == expected


def test_rooms_ahead_and_direction_towards_the_first_door(corridor):
    oracle, _, _ = corridor
    # From (2.5, 0.3) the path first heads for the door at (4, 2.0): bearing ~50 deg.
    f = oracle.facts([2.5, 0.3, 0.0], 0.0)
    assert f["current_room"] == 0 and f["rooms_on_path"] == [0, 1, 2] and f["rooms_ahead"] == 2
    assert f["direction"] == "left"
    assert oracle.facts([2.5, 0.3], math.pi / 2)["direction"] == "right"     # facing +y: door is to the right
    assert oracle.facts([2.5, 0.3], math.radians(50))["direction"] == "ahead"
    assert oracle.facts([2.5, 0.3], math.radians(-130))["direction"] == "behind"
    # Geodesic length: via the doors, longer than the 7.7 m straight line.
    assert 8.0 < f["distance"] < 10.5


def test_room_answers_name_the_target_room(corridor):
    oracle, _, _ = corridor
    assert oracle.answer("Where is the mug?", [2.5, 0.3], 0.0) == \
        "The red mug is in the kitchen, two rooms ahead on your left."
    assert oracle.answer("where is it", [2.5, 0.3], math.radians(50)) == \
        "The red mug is in the kitchen, two rooms ahead; keep going straight."
    # From the hallway's upper corner, the kitchen door (y < 1.5) is down to the right.
    assert oracle.answer("Which room is it in?", [7.0, 2.8], 0.0) == \
        "The red mug is in the kitchen, in the next room on your right."
    assert oracle.answer("Where is it?", [9.0, 2.0], 0.0).startswith("The red mug is here in the kitchen")


def test_direction_description_and_distance_answers(corridor):
    oracle, _, _ = corridor
    assert oracle.answer("Which way should I go?", [2.5, 0.3], 0.0).startswith("Turn left;")
    assert oracle.answer("Which way?", [2.5, 0.3], math.radians(-130)).startswith("Turn around")
    assert oracle.answer("What is it on?", [2.5, 0.3], 0.0) == "The red mug is on the counter in the kitchen."
    assert oracle.answer("How far is it?", [10.2, 1.0], 0.0) == "You are right next to the red mug."


def test_oracle_for_episode_rebuilds_the_oracle_from_info(corridor):
    _, planner, room_map = corridor
    graph = nx.MultiDiGraph()
    for rid, rtype in ROOM_TYPES.items():
        graph.add_node(f"room:{rid}", kind="room", room_id=rid, room_type=rtype)
    ctx = SimpleNamespace(maps=SimpleNamespace(scene_graph=SceneGraph(graph)), planner=planner, room_map=room_map)
    target = {"instance_id": 9, "category": "mug", "attributes": {"color": "red"}, "room_id": 2,
              "room_type": "kitchen", "goal_point": [10.0, 1.0], "position": [10.3, 1.0, 0.9],
              "relation": {"relation": "on", "anchor_id": 8, "anchor_category": "counter"}}
    episode = Episode("dialogue-x-00000", "x", "x.usda", "val_unseen", "dialogue", [2.5, 0.3, 0.0], 0.0,
                      [Goal([10.0, 1.0, 0.0], 3.0, 9, 2, "mug")], [[2.5, 0.3, 0.0], [10.0, 1.0, 0.0]], 8.5, [],
                      info={"oracle": {"type": "scene_graph", "target": target}})
    oracle = oracle_for_episode(episode, ctx)
    assert oracle.answer("Where is the mug?", [2.5, 0.3], math.pi / 2) == \
        "The red mug is in the kitchen, two rooms ahead on your right."
    episode.info = {}
    with pytest.raises(ConfigError, match="info.oracle"):
        oracle_for_episode(episode, ctx)
    episode.info = {"oracle": {"type": "psychic", "target": target}}
    with pytest.raises(ConfigError, match="unknown oracle type 'psychic'"):
        oracle_for_episode(episode, ctx)


def test_llm_oracle_uses_the_endpoint_and_falls_back(corridor):
    oracle, _, _ = corridor
    answer = "Head left through the door; the mug is two rooms away in the kitchen."
    with openai_server(lambda body, n: answer) as (url, requests):
        llm = LLMOracle(ChatClient(url), oracle)
        assert llm.answer("Where is the mug?", [2.5, 0.3], 0.0).startswith("Head left through the door")
        prompt = requests[-1]["body"]["messages"][1]["content"]
        assert "two rooms ahead on your left" in prompt and "Where is the mug?" in prompt
    offline = LLMOracle(ChatClient("http://127.0.0.1:9/v1", timeout=0.5), oracle)
    assert offline.answer("Where is the mug?", [2.5, 0.3], 0.0) == \
        "The red mug is in the kitchen, two rooms ahead on your left."


def test_unreachable_goal_gets_an_honest_answer():
    grid = np.zeros((30, 60), np.uint8)
    grid[:, 29:31] = OCCUPIED                      # a wall with no door
    planner = PathPlanner(OccupancyMap(grid, RES, np.zeros(2), source="sealed"), scene_id="sealed")
    room_map = np.where(np.arange(60)[None, :] < 30, 0, 1).repeat(30, axis=0).astype(np.int32)
    target = OracleTarget(9, "mug", 1, "kitchen", np.array([5.0, 1.5]), {"color": "red"})
    oracle = SceneGraphOracle(target, planner, room_map, {0: "bedroom", 1: "kitchen"})
    f = oracle.facts([1.0, 1.5], math.pi)
    assert not f["reachable"] and f["direction"] == "behind" and f["distance"] == math.inf
    assert oracle.answer("Where is it?", [1.0, 1.5], math.pi) == \
        "The red mug is in the kitchen, but there is no way there from where you are; it lies behind you."
