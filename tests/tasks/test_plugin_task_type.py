"""A task type defined in one file outside the package (its templates, generator and scoring), loaded
as a plug-in: ``vlnverse data generate --plugins FILE`` writes its episodes (same seed, same bytes)
and ``vlnverse eval ... plugins=[FILE]`` scores them with its own rule, in subprocesses.

The toy task: "go into the kitchen" on the hand-built corridor (room 0 hallway x < 5, room 1
kitchen x > 5, a 1.3 m opening at the top of the wall between them). Success is stopping inside
the goal room, whatever the distance to the goal point; it reports ``in_goal_room``.
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
"""A user's task type in one file: its instruction templates, its generator and its scoring."""
from vlnverse.tasks.base import TaskGenerator, register_task
from vlnverse.tasks.episode import Goal, Instruction
from vlnverse.tasks.instructions import Synthesizer, Template, register_templates
from vlnverse.tasks.scoring import TaskScoring

TASK = "toy_room_goal"

register_templates(TASK, [Template("room_natural_00", "go into {the_category} and stop there", style="natural"),
                          Template("room_natural_01", "walk into {the_category}", style="natural"),
                          Template("room_formal_00", "proceed to {the_category} and halt", style="formal")])


def in_goal_room(outcome, ctx):
    room = ctx.desc.room_by_id(outcome.episode.info["goal_room"])
    return bool(room.contains(outcome.path_xy[-1:])[0])


def room_metrics(outcome, ctx):
    return {"in_goal_room": float(in_goal_room(outcome, ctx))}


@register_task(TASK)
class ToyRoomGoal(TaskGenerator):
    scoring = TaskScoring(success=in_goal_room, metrics=room_metrics)

    def generate(self, ctx, rng, n, split):
        synth = Synthesizer(TASK)
        goal_room = ctx.desc.room_by_id(1)
        episodes = []
        for i in range(n):
            start = (1.0 + rng.uniform(0.0, 1.0), 0.5 + rng.uniform(0.0, 1.0))
            path = ctx.planner.shortest_path(start, (7.5, 1.5))
            style = ("natural", "formal")[int(rng.integers(2))]
            text = synth.category(goal_room.room_type, rng, style=style, count=1).text
            goals = [Goal(position=ctx.to_3d(path.waypoints[-1]), radius=self.config.success_distance, room_id=1)]
            episodes.append(self.make_episode(ctx, i, split, path, [Instruction(text, style=style)], goals=goals,
                                              start_yaw=0.0, info={"goal_room": goal_room.room_id}))
        return episodes
'''

#: what the plug-in's templates say, filled with the goal room
TEXTS = {"Go into the kitchen and stop there.", "Walk into the kitchen.", "Proceed to the kitchen and halt."}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    from vlnverse.scenes.usd_io import write_usd

    root = tmp_path_factory.mktemp("plugin_task")
    write_usd(corridor_scene(gap_width=1.3), root / "corridor.usda")
    (root / "toy_room_task.py").write_text(PLUGIN, encoding="utf-8")
    return root


def _vlnverse(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(PACKAGE_ROOT), env.get("PYTHONPATH", "")])
    env.pop("VLNVERSE_PLUGINS", None)
    return subprocess.run([sys.executable, "-m", "vlnverse", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def _generate(root: Path, out: str) -> list[dict]:
    run = _vlnverse(["data", "generate", "--task", "toy_room_goal", "--plugins", "toy_room_task.py", "--scenes",
                     "corridor.usda", "--episodes-per-scene", "4", "--seed", "7", "--default-split", "val_unseen",
                     "--out", out, "--no-progress"], root)
    assert run.returncode == 0, run.stderr
    return [json.loads(line) for line in (root / out / "val_unseen.jsonl").read_text().splitlines()]


def test_a_one_file_plugin_task_type_generates_and_is_evaluated_from_the_command_line(workspace):
    root = workspace
    episodes = _generate(root, "data")
    assert len(episodes) == 4 and {e["task_type"] for e in episodes} == {"toy_room_goal"}
    texts = [e["instructions"][0]["text"] for e in episodes]
    assert set(texts) <= TEXTS, texts   # its own templates, filled with the goal room
    assert all(e["info"]["goal_room"] == 1 and e["goals"][0]["room_id"] == 1 for e in episodes)
    _generate(root, "again")
    assert (root / "again" / "val_unseen.jsonl").read_bytes() == (root / "data" / "val_unseen.jsonl").read_bytes()

    config = root / "eval.yaml"
    config.write_text(textwrap.dedent(f"""
        agent: {{name: oracle}}
        task: toy_room_goal
        plugins: [{root / 'toy_room_task.py'}]
        episodes: {root / 'data' / 'val_unseen.jsonl'}
        collision_mode: telhop
        sensors: []
        report: {{enabled: false}}
        """))
    for agent, success in (("oracle", 1.0), ("forward", 0.0)):  # forward walks into the wall: still in the hallway
        run = _vlnverse(["eval", str(config), "--no-progress", f"agent.name={agent}", f"out={root / agent}"], root)
        assert run.returncode == 0, run.stderr
        summary = json.loads((root / agent / "summary.json").read_text())
        assert summary["run"]["task"] == "toy_room_goal" and summary["overall"]["episodes"] == 4
        assert summary["overall"]["means"]["SR"] == success == summary["overall"]["means"]["in_goal_room"], agent
        records = [json.loads(line) for line in (root / agent / "episodes.jsonl").read_text().splitlines()]
        assert [r["metrics"]["in_goal_room"] for r in records] == [success] * 4


def test_a_plugin_task_types_default_config_is_the_yaml_it_names(tmp_path):
    """``register_task(name, config="x.yaml")`` makes ``x.yaml`` beside the module the task type's
    default config (as each built-in folder's ``config.yaml``); without it, the ``TaskConfig``
    defaults."""
    from vlnverse.core.plugins import load_plugin
    from vlnverse.tasks.base import TASKS, load_task_config

    (tmp_path / "toy_cfg_task.py").write_text(textwrap.dedent('''
        from vlnverse.tasks.base import TaskGenerator, register_task

        @register_task("toy_configured", config="toy_configured.yaml")
        class Configured(TaskGenerator):
            pass

        @register_task("toy_unconfigured")
        class Unconfigured(TaskGenerator):
            pass
        '''), encoding="utf-8")
    (tmp_path / "toy_configured.yaml").write_text("task_type: toy_configured\nmax_steps: 77\nsuccess_distance: 1.5\n")
    try:
        load_plugin(str(tmp_path / "toy_cfg_task.py"))
        assert TASKS.get("toy_configured").config_file == (tmp_path / "toy_configured.yaml").resolve()
        cfg = load_task_config("toy_configured", {"max_geodesic": 9.0})
        assert (cfg.task_type, cfg.max_steps, cfg.success_distance, cfg.max_geodesic) == ("toy_configured", 77, 1.5, 9.0)
        plain = load_task_config("toy_unconfigured")
        assert (plain.task_type, plain.max_steps, plain.success_distance) == ("toy_unconfigured", 200, 3.0)
    finally:
        for name in ("toy_configured", "toy_unconfigured"):
            TASKS._items.pop(name, None)
