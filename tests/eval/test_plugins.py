"""Plug-ins from the command line: a toy task type and a toy agent in a user module, evaluated by
``vlnverse eval`` in a subprocess, given as ``plugins=[...]`` or as an installed entry point.

The toy task ("reach the kitchen") owns its scoring: success is stopping inside room 1 of the
hand-built corridor (x > 5), whatever the goal point; it reports ``final_x``. The toy agent walks
forward ``steps`` times from the start and STOPs.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from eval_scenes import corridor_scene

PACKAGE_ROOT = Path(__file__).resolve().parents[2] / "exts" / "vlnverse"

PLUGIN = '''
"""A user's agents and task type, registered on import."""
import numpy as np

from vlnverse.run.agents import Agent, register_agent
from vlnverse.sim.types import DiscreteAction
from vlnverse.tasks.base import TaskGenerator, register_task
from vlnverse.tasks.episode import Instruction
from vlnverse.tasks.scoring import TaskScoring


def in_kitchen(outcome, ctx):
    return bool(ctx.desc.room_by_id(1).contains(outcome.path_xy[-1:])[0])


def final_x(outcome, ctx):
    return {"final_x": round(float(outcome.path_xy[-1, 0]), 3)}


@register_task("toy_reach_kitchen")
class ToyReachKitchen(TaskGenerator):
    scoring = TaskScoring(success=in_kitchen, metrics=final_x, headline="SR")

    def generate(self, ctx, rng, n, split):
        episodes = []
        for i in range(n):
            y = 0.5 + 0.5 * i  # start in the hallway facing the kitchen, goal point beside the start
            path = ctx.planner.shortest_path((1.0, y), (2.0, y))
            episodes.append(self.make_episode(ctx, i, split, path, [Instruction("walk into the kitchen")], start_yaw=0.0))
        return episodes


@register_agent("toy_walker")
class ToyWalker(Agent):
    def __init__(self, *, steps: int = 3, **kwargs):
        super().__init__(**kwargs)
        self.steps = int(steps)

    def act(self, observations, state):
        self.outputs.append({"step": state.step, "x": round(float(state.pose.x), 2)})
        return DiscreteAction.MOVE_FORWARD if state.step < self.steps else DiscreteAction.STOP
'''


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    from vlnverse.scenes.usd_io import write_usd

    root = tmp_path_factory.mktemp("plugin_ws")
    scene = write_usd(corridor_scene(gap_width=2.9), root / "open_corridor.usda")  # a 0.1 m wall stub
    pkg = root / "my_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "agents.py").write_text(textwrap.dedent(PLUGIN))
    config = root / "toy.yaml"
    config.write_text(textwrap.dedent(f"""
        agent: {{name: random}}
        task: toy_reach_kitchen
        episodes: {{generate: {{scenes: [{scene}], episodes_per_scene: 2, seed: 3}}}}
        collision_mode: telhop
        sensors: []
        report: {{enabled: false}}
        """))
    return root, config


def _vlnverse(args: list[str], cwd: Path, extra_path: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(extra_path), str(PACKAGE_ROOT), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "vlnverse", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def _check_run(out: Path, steps: int) -> dict:
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"]["agent"] == "toy_walker" and summary["run"]["task"] == "toy_reach_kitchen"
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert len(records) == 2
    for rec in records:
        assert rec["task_type"] == "toy_reach_kitchen" and rec["moves"] == steps
        assert rec["metrics"]["final_x"] == pytest.approx(1.0 + 0.25 * steps, abs=0.02)
        assert len(rec["agent_outputs"]) == steps + 1
    return summary


def test_vlnverse_eval_runs_a_plugin_agent_on_a_plugin_task(workspace):
    root, config = workspace
    # 20 steps: 5 m forward, into the kitchen (x > 5): the task's own rule says success although the
    # episode's goal point lies 1 m from the start
    run = _vlnverse(["eval", str(config), "--no-progress", "agent.name=toy_walker", "agent.params={steps: 20}",
                     "plugins=[my_pkg.agents]", f"out={root / 'far'}"], root, root)
    assert run.returncode == 0, run.stderr
    assert "toy_reach_kitchen" in run.stdout
    summary = _check_run(root / "far", 20)
    assert summary["overall"]["means"]["SR"] == 1.0 and summary["overall"]["means"]["final_x"] > 5.0
    # 2 steps: 0.5 m, within 3 m of the goal point but still in the hallway: failure
    run = _vlnverse(["eval", str(config), "--no-progress", "agent.name=toy_walker", "agent.params={steps: 2}",
                     "plugins=[my_pkg.agents]", f"out={root / 'near'}"], root, root)
    assert run.returncode == 0, run.stderr
    summary = _check_run(root / "near", 2)
    assert summary["overall"]["means"]["SR"] == 0.0 and summary["overall"]["means"]["NE"] < 3.0


def test_installed_entry_point_plugins_and_a_bad_plugin(workspace, tmp_path):
    root, config = workspace
    site = tmp_path / "site"
    dist = site / "my_pkg-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-pkg\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[vlnverse.plugins]\ntoys = my_pkg.agents\n")
    for item in ("my_pkg",):
        (site / item).symlink_to(root / item, target_is_directory=True)
    run = _vlnverse(["eval", str(config), "--no-progress", "agent.name=toy_walker", "agent.params={steps: 20}",
                     f"out={tmp_path / 'ep'}"], tmp_path, site)
    assert run.returncode == 0, run.stderr
    _check_run(tmp_path / "ep", 20)
    bad = _vlnverse(["eval", str(config), "agent.name=toy_walker", "plugins=[no_such_pkg.agents]",
                     f"out={tmp_path / 'bad'}"], tmp_path, tmp_path)
    assert bad.returncode == 2
    assert bad.stderr.strip().count("\n") == 0 and "plugins[0]" in bad.stderr and "no_such_pkg" in bad.stderr


def test_registry_decorators_return_the_class():
    from vlnverse.run.agents import AGENTS, Agent, register_agent
    from vlnverse.run.models import MODELS, register_model
    from vlnverse.tasks.base import TASKS, TaskGenerator, register_task

    class A(Agent):
        pass

    class T(TaskGenerator):
        pass

    class M:
        pass

    try:
        assert register_agent("toy_returned_agent")(A) is A and AGENTS.get("toy_returned_agent") is A
        assert register_task("toy_returned_task")(T) is T and TASKS.get("toy_returned_task") is T
        assert register_model("toy_returned_model")(M) is M and MODELS.get("toy_returned_model") is M
    finally:
        for registry, name in ((AGENTS, "toy_returned_agent"), (TASKS, "toy_returned_task"),
                               (MODELS, "toy_returned_model")):
            registry._items.pop(name, None)


def test_plugins_from_the_environment_for_any_command(workspace, tmp_path):
    """``VLNVERSE_PLUGINS`` makes a plug-in task type visible to ``vlnverse data generate`` too."""
    root, _ = workspace
    scene = root / "open_corridor.usda"
    env_run = _vlnverse_env(["data", "generate", "--task", "toy_reach_kitchen", "--scenes", str(scene),
                             "--episodes-per-scene", "2", "--out", str(tmp_path / "data"), "--no-progress"],
                            tmp_path, root, {"VLNVERSE_PLUGINS": "my_pkg.agents"})
    assert env_run.returncode == 0, env_run.stderr
    lines = [json.loads(line) for f in (tmp_path / "data").glob("*.jsonl") for line in f.read_text().splitlines()]
    assert len(lines) == 2 and {e["task_type"] for e in lines} == {"toy_reach_kitchen"}


def _vlnverse_env(args, cwd, extra_path, env_extra):
    env = dict(os.environ, **env_extra)
    env["PYTHONPATH"] = os.pathsep.join([str(extra_path), str(PACKAGE_ROOT), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "vlnverse", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_data_generate_plugins_option_reaches_parallel_workers(workspace, tmp_path):
    """``data generate --plugins MODULE`` registers a plug-in task type in the driver and in every
    worker process (``--workers 2``); an unknown module is one line naming ``--plugins``."""
    root, _ = workspace
    scene = root / "open_corridor.usda"
    run = _vlnverse_env(["data", "generate", "--task", "toy_reach_kitchen", "--scenes", f"{scene},{scene}",
                         "--episodes-per-scene", "2", "--out", str(tmp_path / "data"), "--no-progress",
                         "--plugins", "my_pkg.agents", "--workers", "2"], tmp_path, root, {})
    assert run.returncode == 0, run.stderr
    lines = [json.loads(line) for f in (tmp_path / "data").glob("*.jsonl") for line in f.read_text().splitlines()]
    assert len(lines) >= 2 and {e["task_type"] for e in lines} == {"toy_reach_kitchen"}
    bad = _vlnverse_env(["data", "generate", "--task", "toy_reach_kitchen", "--scenes", str(scene),
                         "--episodes-per-scene", "1", "--out", str(tmp_path / "bad"), "--no-progress",
                         "--plugins", "no_such_pkg"], tmp_path, root, {})
    assert bad.returncode == 2
    assert bad.stderr.strip().count("\n") == 0 and "--plugins" in bad.stderr and "no_such_pkg" in bad.stderr
    assert not (tmp_path / "bad").exists()
