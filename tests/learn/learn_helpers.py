"""Helpers shared by the learning-layer tests (imported by name: a module called ``conftest`` is
ambiguous once several test folders' conftests are loaded): four corridor episodes and a small
training config (32x32 RGB-D, Tel-Hop), and the ``corridor`` / ``episodes_file`` session fixtures
(the learn and benchmark tests' conftests import them)."""
import math
from pathlib import Path

import pytest

# (start xy, yaw, goal xy, instruction): different instructions, so the policy must read them
PAIRS = [((1.3, 1.5), 0.0, (9.0, 1.5), "walk through the opening and stop at the far end of the kitchen"),
         ((9.0, 0.6), math.pi, (1.0, 0.6), "go back through the gap and wait at the end of the hallway"),
         ((2.0, 2.5), 0.0, (6.0, 2.5), "pass the opening and stop just inside the kitchen"),
         ((8.5, 2.5), -math.pi / 2, (3.5, 1.0), "turn around, cross into the hallway and stop in the middle")]



def make_episodes(ctx, pairs=PAIRS, split="train"):
    """Corridor episodes along the planner's shortest paths."""
    from vlnverse.tasks.episode import Episode, Goal, Instruction

    out = []
    for i, (start, yaw, goal, text) in enumerate(pairs):
        path = ctx.planner.shortest_path(start, goal)
        out.append(Episode(f"corridor-{i}", "corridor", "corridor.usda", split, "fine_grained", [*start, 0.0], yaw,
                           [Goal([*goal, 0.0])], [[*p, 0.0] for p in path.waypoints], path.length, [Instruction(text)]))
    return out



def small_config(out, episodes_file, policy="cma", **overrides):
    """A validated ``TrainConfig`` for the corridor (32x32 RGB-D, Tel-Hop, success within 1.5 m)."""
    from vlnverse.core.config import from_dict
    from vlnverse.learn.config import TrainConfig

    data = {"policy": {"name": policy, "params": {"hidden_size": 64}}, "task": "fine_grained",
            "train": {"path": str(episodes_file)}, "val": {"train": {"path": str(episodes_file)}},
            "collision_mode": "telhop", "max_steps": 80, "success_distance": 1.5,
            "sensors": [{"name": "rgb", "kind": "rgb", "width": 32, "height": 32},
                        {"name": "depth", "kind": "depth", "width": 32, "height": 32}],
            "il": {"epochs": 60, "batch_size": 4, "lr": 0.003, "inflection_weight": "auto"},
            "validation": {"every": 20, "metric": "SR"},
            "cache": {"dir": str(Path(out).parent / "cache")}, "device": "cpu", "threads": 1, "seed": 0, "out": str(out)}
    for key, value in overrides.items():
        node = data
        parts = key.split("__")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    return from_dict(TrainConfig, data)


@pytest.fixture(scope="session")
def corridor():
    from eval_scenes import corridor_scene
    from vlnverse.sim.body import load_body
    from vlnverse.tasks.base import context_from_description

    return context_from_description(corridor_scene(), load_body("r2r_ce"), 0.05, scene_path="corridor.usda")


@pytest.fixture(scope="session")
def episodes_file(corridor, tmp_path_factory):
    from vlnverse.tasks.episode import save_episodes

    path = tmp_path_factory.mktemp("episodes") / "train.jsonl"
    save_episodes(path, make_episodes(corridor))
    return path
