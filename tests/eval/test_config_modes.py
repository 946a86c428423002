"""Eval config validation, registries, collision-mode target poses and the resumable episode log."""
from __future__ import annotations

import json
import math

import pytest

from vlnverse.core.errors import ConfigError, UnknownNameError
from vlnverse.run.agents import AGENTS, Agent, make_agent, register_agent
from vlnverse.run.setup import EpisodeSource
from vlnverse.eval.config import load_eval_config
from vlnverse.run.models import make_model
from vlnverse.run.modes import MODES, CollisionMode, CollisionModeProtocol, make_mode
from vlnverse.run.records import append_record, read_finished
from vlnverse.sim.types import AgentPose, DiscreteAction, InvalidActionError, VelocityAction, WaypointAction

GOOD = """\
agent: {name: oracle}
task: fine_grained
episodes: {generate: {scenes: val_unseen, episodes_per_scene: 2}}
collision_mode: telhop
"""


def test_config_loads_and_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(GOOD)
    cfg = load_eval_config(path, ["collision_mode=strict", "agent.params.stop_margin=0.3", "episodes.generate.seed=7"])
    assert cfg.collision_mode == "strict"
    assert cfg.agent.params == {"stop_margin": 0.3}
    assert isinstance(cfg.episodes, EpisodeSource) and cfg.episodes.generate.seed == 7
    assert [s.kind for s in cfg.sensors] == ["rgb", "depth"]
    # a plain string is an episode file path
    cfg = load_eval_config(path, {"episodes": "some/episodes.jsonl"})
    assert cfg.episodes.path == "some/episodes.jsonl" and cfg.episodes.generate is None


def test_malformed_yaml_names_the_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("agent: {name: oracle}\ntask: fine_grained\nepisodes: [unclosed\ncollision_mode: strict\n")
    with pytest.raises(ConfigError) as err:
        load_eval_config(path)
    assert f"{path}:" in str(err.value) and "malformed YAML" in str(err.value)
    assert err.value.line is not None and err.value.line >= 3


@pytest.mark.parametrize("text, field", [
    (GOOD.replace("telhop", "sideways"), "collision_mode"),
    (GOOD + "max_steps: 0\n", "max_steps"),
    (GOOD + "sensors: [{name: cam, kind: thermal}]\n", "sensors[0].kind"),
    (GOOD.replace("{generate: {scenes: val_unseen, episodes_per_scene: 2}}", "{}"), "episodes"),
    (GOOD + "colision_mode: strict\n", None),
])
def test_bad_fields_name_file_and_field(tmp_path, text, field):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_eval_config(path)
    assert str(path) in str(err.value)
    if field:
        assert field in str(err.value)


def test_unknown_names_list_registered_ones():
    with pytest.raises(UnknownNameError) as err:
        make_agent("rnadom")
    for name in ("forward", "oracle", "random", "wall_bumper"):
        assert name in str(err.value)
    with pytest.raises(UnknownNameError) as err:
        make_mode("teleport", sim=None)
    assert "strict" in str(err.value) and "telhop" in str(err.value) and "graph" in str(err.value)
    with pytest.raises(UnknownNameError):
        make_model("gpt-17")
    with pytest.raises(ConfigError) as err:
        make_agent("random", {"stop_probability": 0.1})
    assert "agent.params" in str(err.value)


def test_register_agent_returns_the_class():
    @register_agent("_test_idle")
    class Idle(Agent):
        def act(self, observations, state):
            return DiscreteAction.STOP

    assert AGENTS.get("_test_idle") is Idle and Idle.__name__ == "Idle"
    assert sorted(MODES.names()) == ["graph", "strict", "telhop"]


def test_target_poses_of_actions():
    mode = CollisionMode(sim=None)
    pose = AgentPose(1.0, 2.0, math.pi / 2)
    fwd = mode.target_pose(pose, DiscreteAction.MOVE_FORWARD)
    assert (fwd.x, fwd.y, fwd.yaw) == pytest.approx((1.0, 2.25, math.pi / 2))
    left = mode.target_pose(pose, DiscreteAction.TURN_LEFT)
    assert (left.x, left.y, left.yaw) == pytest.approx((1.0, 2.0, math.pi / 2 + math.radians(15)))
    assert mode.target_pose(pose, DiscreteAction.TURN_RIGHT).yaw == pytest.approx(math.radians(75))
    assert mode.target_pose(pose, DiscreteAction.LOOK_DOWN).pitch == pytest.approx(-math.radians(15))
    assert mode.target_pose(pose, DiscreteAction.STOP) == pose
    # waypoint in the agent frame: 1 m forward (+y in the world), 0.5 m left (-x)
    wp = mode.target_pose(pose, WaypointAction(1.0, 0.5, 0.3))
    assert (wp.x, wp.y, wp.yaw) == pytest.approx((0.5, 3.0, math.pi / 2 + 0.3))
    # straight velocity: 0.5 m/s for 2 s
    v = mode.target_pose(AgentPose(0, 0, 0), VelocityAction(0.5, 0.0, 2.0))
    assert (v.x, v.y, v.yaw) == pytest.approx((1.0, 0.0, 0.0))
    # a quarter circle of radius 1: v = 1, omega = pi/2 for 1 s ends at (1, 1) facing +y
    arc = mode.target_pose(AgentPose(0, 0, 0), VelocityAction(1.0, math.pi / 2, 1.0))
    assert (arc.x, arc.y, arc.yaw) == pytest.approx((2 / math.pi, 2 / math.pi, math.pi / 2))
    # custom step sizes
    big = CollisionMode(sim=None, forward_step=0.5, turn_angle_deg=30)
    assert big.target_pose(AgentPose(0, 0, 0), DiscreteAction.MOVE_FORWARD).x == pytest.approx(0.5)


def test_the_point_modes_satisfy_the_collision_mode_protocol():
    """``CollisionModeProtocol`` states what the episode loop uses of a mode; Strict and TelHop (and
    the base class) have it with their step sizes, an object without ``step`` does not."""
    for name in ("strict", "telhop"):
        mode = make_mode(name, None, forward_step=0.5, turn_angle_deg=30.0)
        assert isinstance(mode, CollisionModeProtocol) and mode.name == name
        assert (mode.forward_step, mode.turn_angle) == (0.5, pytest.approx(math.radians(30.0)))
    assert isinstance(CollisionMode(sim=None), CollisionModeProtocol)

    class ResetOnly:
        name, forward_step, turn_angle = "x", 0.25, 0.26

        def reset(self, pose):
            return {}

    assert not isinstance(ResetOnly(), CollisionModeProtocol)


@pytest.mark.parametrize("bad", ["JUMP", 17, None, 2.5, WaypointAction(float("nan"), 0.0), VelocityAction(1.0, 0.0, -1.0),
                                 {"action": "forward"}])
def test_invalid_actions_raise_invalid_action_error(bad):
    with pytest.raises(InvalidActionError):
        CollisionMode.coerce_action(bad)


def test_episode_log_appends_and_drops_a_truncated_last_line(tmp_path):
    log = tmp_path / "episodes.jsonl"
    assert read_finished(log) == []
    for i in range(3):
        append_record(log, {"episode_id": f"e{i}", "value": i, "metrics": {}})
    with open(log, "a") as fh:
        fh.write('{"episode_id": "e3", "val')  # crash mid-write
    records = read_finished(log)
    assert [r["episode_id"] for r in records] == ["e0", "e1", "e2"]
    assert log.read_text().endswith("}\n")  # the partial line was cut off
    append_record(log, {"episode_id": "e3", "value": 3, "metrics": {}})
    assert [json.loads(l)["value"] for l in log.read_text().splitlines()] == [0, 1, 2, 3]


def test_mode_params_are_keyed_per_mode(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(GOOD + "mode_params: {strict: {displacement_threshold: 0.2}}\n")
    cfg = load_eval_config(path, ["collision_mode=telhop"])  # switching modes keeps the file valid
    assert cfg.mode_params == {"strict": {"displacement_threshold": 0.2}}
    path.write_text(GOOD + "mode_params: {displacement_threshold: 0.2}\n")  # flat: not keyed by a mode
    with pytest.raises(ConfigError) as err:
        load_eval_config(path)
    assert "mode_params.displacement_threshold" in str(err.value) and str(path) in str(err.value)


def test_every_shipped_eval_config_validates_in_a_fresh_interpreter():
    """The graph-mode configs name the ``viewpoints`` backend, which the evaluation layer registers
    itself: validating a shipped config must not depend on which modules happened to be imported."""
    import subprocess
    import sys

    from vlnverse.paths import resource_dir

    code = ("import sys\nfrom pathlib import Path\nfrom vlnverse.eval.config import load_eval_config\n"
            "for p in sorted(Path(sys.argv[1]).glob('*.yaml')):\n    if p.name == 'quickstart.yaml':\n        continue  # the quickstart's own format\n    load_eval_config(p).validate()\n    print(p.name)\n")
    out = subprocess.run([sys.executable, "-c", code, str(resource_dir("tasks") / "eval")], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "mllm_navgpt_graph.yaml" in out.stdout.split()
