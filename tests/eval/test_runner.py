"""The runner and collision modes on a hand-built corridor scene with the real MuJoCo simulator.

Corridor: x 0..10, y 0..3, cut at x = 5 by a wall with a 1 m opening at y in [2, 3].
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from eval_scenes import corridor_scene
from vlnverse.run.agents import Agent, make_agent
from vlnverse.eval.config import EvalConfig, ReportConfig
from vlnverse.run.setup import EpisodeSource, NamedSpec, SensorConfig
from vlnverse.run.modes import make_mode
from vlnverse.eval.folder import EPISODES_FILE
from vlnverse.eval.runner import run_eval
from vlnverse.run.episodes import RunSettings
from vlnverse.run.rollout import run_episode
from vlnverse.sim import make_simulator
from vlnverse.sim.body import load_body
from vlnverse.sim.sensors import CameraSpec
from vlnverse.sim.types import AgentPose, DiscreteAction
from vlnverse.tasks.base import context_from_description
from vlnverse.tasks.episode import Episode, Goal, Instruction, save_episodes

# (start xy, start yaw, goal xy) pairs; the straight line of the first two crosses the wall
PAIRS = [((1.3, 1.5), 0.0, (9.0, 1.5)),
         ((9.0, 0.6), math.pi, (1.0, 0.6)),
         ((2.0, 2.5), 0.0, (8.0, 0.5)),
         ((1.0, 0.5), math.pi / 2, (7.5, 2.5)),
         ((8.5, 2.5), -math.pi / 2, (1.5, 1.0))]


@pytest.fixture(scope="module")
def corridor():
    body = load_body("r2r_ce")
    return context_from_description(corridor_scene(), body, 0.05, scene_path="corridor.usda")


def _episodes(ctx) -> list[Episode]:
    out = []
    for i, (start, yaw, goal) in enumerate(PAIRS):
        path = ctx.planner.shortest_path(start, goal)
        out.append(Episode(f"corridor-{i}", "corridor", "corridor.usda", "test", "fine_grained", [*start, 0.0], yaw,
                           [Goal([*goal, 0.0])], [[*p, 0.0] for p in path.waypoints], path.length,
                           [Instruction("walk through the opening to the other end of the corridor")]))
    return out


@pytest.fixture(scope="module")
def sim(corridor):
    simulator = make_simulator(corridor.desc, corridor.body, sensors=[CameraSpec("rgb", "rgb", 32, 32)])
    yield simulator
    simulator.close()


def _run(ctx, sim, agent_name, mode_name, episode, **mode_params):
    settings = RunSettings(max_steps=200, success_distance=3.0, body=ctx.body, resolution=0.05, task_type="fine_grained")
    if mode_name == "telhop":
        mode_params.setdefault("planner", ctx.planner)
    if mode_name == "graph":
        mode_params.setdefault("navgraph", ctx.navgraph.graph)
        mode_params.setdefault("planner", ctx.planner)
    return run_episode(episode, ctx, sim, make_mode(mode_name, sim, **mode_params), make_agent(agent_name), settings)


def test_wall_bumper_fails_strict_but_not_telhop(corridor, sim):
    episode = _episodes(corridor)[0]  # the straight line to the goal crosses the wall at x = 5
    strict = _run(corridor, sim, "wall_bumper", "strict", episode)
    assert strict["termination"] == "failure" and "displaced" in strict["failure"]
    assert strict["metrics"]["SR"] == 0.0 and strict["metrics"]["SPL"] == 0.0
    assert strict["collisions"] and strict["collisions"][-1]["labels"] == ["wall"]
    assert max(p[0] for p in strict["trajectory"]) < 5.0  # never got past the wall
    telhop = _run(corridor, sim, "wall_bumper", "telhop", episode)
    assert telhop["termination"] == "stop" and telhop["metrics"]["SR"] == 1.0
    assert telhop["trajectory"][-1][0] > 5.2  # hopped through the wall


def test_strict_threshold_is_configurable(corridor, sim):
    episode = _episodes(corridor)[0]
    lenient = _run(corridor, sim, "forward", "strict", episode, displacement_threshold=5.0)
    assert lenient["termination"] == "stop"  # pressed against the wall until the step budget ran out
    assert lenient["metrics"]["CR"] > 0.5


def test_telhop_resolves_a_destination_inside_a_wall_and_goes_on(corridor, sim):
    mode = make_mode("telhop", sim, planner=corridor.planner)
    mode.reset(AgentPose(4.7, 1.0, 0.0))  # 0.07 m short of touching the dividing wall
    out = mode.step(DiscreteAction.MOVE_FORWARD)  # 4.95 lies inside the wall
    assert out.collided and out.failure is None and not out.stop
    # resolved to the near side, clear of the wall face (x = 4.95) by the body radius (0.18 m)
    assert 4.6 < out.pose.x <= 4.95 - 0.18 + 0.01
    # hopping out of the building is refused: the agent stays on the navigable floor
    mode.reset(AgentPose(9.7, 1.5, 0.0))
    for _ in range(4):
        out = mode.step(DiscreteAction.MOVE_FORWARD)
        assert out.collided and corridor.planner.is_navigable(out.pose.xy)[0]


@pytest.mark.parametrize("mode_name", ["strict", "telhop", "graph"])
def test_oracle_succeeds_on_every_corridor_episode(corridor, sim, mode_name):
    for episode in _episodes(corridor):
        rec = _run(corridor, sim, "oracle", mode_name, episode)
        assert rec["termination"] == "stop", (episode.episode_id, rec["failure"])
        assert rec["metrics"]["SR"] == 1.0 and rec["metrics"]["CR"] == 0.0
        assert rec["metrics"]["SPL"] > 0.9 and rec["metrics"]["nDTW"] > 0.6
        if mode_name != "graph":  # the teacher stops AT the goal (stop_distance 0.5 m), not 2.5 m short
            assert rec["metrics"]["NE"] < 0.5 + 0.25 and rec["metrics"]["nDTW"] > 0.8


class GarbageAgent(Agent):
    """Returns a different kind of nonsense each step, and raises once."""

    name = "garbage"
    JUNK = ["FLY", None, float("nan"), {"x": 1}, "raise", 42, DiscreteAction.MOVE_FORWARD]

    def act(self, observations, state):
        item = self.JUNK[state.step % len(self.JUNK)]
        if item == "raise":
            raise RuntimeError("model server unreachable")
        if state.step >= 20:
            return DiscreteAction.STOP
        return item


def test_invalid_actions_are_counted_not_fatal(corridor, sim):
    settings = RunSettings(max_steps=200, success_distance=3.0, body=corridor.body, resolution=0.05,
                           task_type="fine_grained")
    rec = run_episode(_episodes(corridor)[0], corridor, sim, make_mode("strict", sim), GarbageAgent(), settings)
    # steps 0..20: 21 actions; per cycle of 7 one valid MOVE_FORWARD (steps 6, 13, 20 -> STOP at 20)
    assert rec["termination"] == "stop" and rec["steps"] == 21
    assert rec["moves"] == 2 and rec["invalid_actions"] == 18
    assert any("model server unreachable" in i["error"] for i in rec["invalid"])
    assert rec["trajectory"][-1][0] == pytest.approx(1.8, abs=0.02)


def _config(tmp_path: Path, episodes_file: Path, agent: str, mode: str, **kw) -> EvalConfig:
    cfg = EvalConfig(agent=NamedSpec(agent), task="fine_grained", episodes=EpisodeSource(path=str(episodes_file)),
                     collision_mode=mode, sensors=[SensorConfig("rgb", "rgb", 48, 48), SensorConfig("depth", "depth", 48, 48)],
                     out=str(tmp_path / f"{agent}_{mode}"), **{"report": ReportConfig(max_episodes=2, frame_width=48), **kw})
    cfg.validate()
    return cfg


def test_run_eval_writes_outputs_and_resume_gives_the_same_summary(corridor, tmp_path):
    episodes_file = tmp_path / "episodes.jsonl"
    save_episodes(episodes_file, _episodes(corridor))

    def loader(path, body, resolution):
        return corridor

    cfg = _config(tmp_path, episodes_file, "random", "strict", seed=3)
    full = run_eval(cfg, progress=False, print_summary=False, scene_loader=loader)
    out = Path(cfg.out)
    lines = (out / EPISODES_FILE).read_text().splitlines()
    assert len(lines) == len(PAIRS) and full["overall"]["episodes"] == len(PAIRS)
    rec = json.loads(lines[0])
    assert {"metrics", "trajectory", "actions", "collisions", "agent_outputs", "invalid_actions"} <= set(rec)
    assert rec.get("map") and (out / rec["map"]).is_file() and len(rec["frames"]) >= 2
    html = (out / "report.html").read_text()
    assert "corridor-0" in html and "data:image/png;base64," in html
    assert json.loads((out / "summary.json").read_text())["overall"]["means"] == full["overall"]["means"]

    # crash after two episodes, mid-way through writing the third
    (out / EPISODES_FILE).write_text("\n".join(lines[:2]) + "\n" + lines[2][: len(lines[2]) // 2])
    resumed = run_eval(cfg, progress=False, print_summary=False, scene_loader=loader)
    assert resumed["timing"]["episodes_run_now"] == len(PAIRS) - 2
    full.pop("timing"), resumed.pop("timing")
    assert resumed == full
    # a finished run resumes to the same summary without running anything
    again = run_eval(cfg, progress=False, print_summary=False, scene_loader=loader)
    assert again["timing"]["episodes_run_now"] == 0


def test_resume_refuses_a_different_config(corridor, tmp_path):
    from vlnverse.core.errors import ConfigError

    episodes_file = tmp_path / "episodes.jsonl"
    save_episodes(episodes_file, _episodes(corridor)[:1])
    cfg = _config(tmp_path, episodes_file, "oracle", "telhop")
    run_eval(cfg, progress=False, print_summary=False, scene_loader=lambda *a: corridor)
    changed = _config(tmp_path, episodes_file, "oracle", "telhop", max_steps=50)
    with pytest.raises(ConfigError) as err:
        run_eval(changed, progress=False, print_summary=False, scene_loader=lambda *a: corridor)
    assert "different config" in str(err.value)


def test_baselines_score_below_the_oracle(corridor, tmp_path):
    episodes_file = tmp_path / "episodes.jsonl"
    save_episodes(episodes_file, _episodes(corridor))
    sr = {}
    for agent in ("oracle", "random", "forward"):
        cfg = _config(tmp_path, episodes_file, agent, "strict", report=ReportConfig(enabled=False))
        sr[agent] = run_eval(cfg, progress=False, print_summary=False, scene_loader=lambda *a: corridor)["overall"]["means"]["SR"]
    assert sr["oracle"] == 1.0
    assert sr["random"] <= 0.4 and sr["forward"] <= 0.4


def test_ctrl_c_leaves_a_resumable_run(corridor, tmp_path):
    from vlnverse.run.agents import OracleAgent

    class Interrupted(OracleAgent):
        """The user presses Ctrl-C while the third episode starts."""

        def reset(self, episode, context):
            if episode.episode_id == "corridor-2":
                raise KeyboardInterrupt
            super().reset(episode, context)

    episodes_file = tmp_path / "episodes.jsonl"
    save_episodes(episodes_file, _episodes(corridor))
    cfg = _config(tmp_path, episodes_file, "oracle", "telhop", report=ReportConfig(enabled=False))
    with pytest.raises(KeyboardInterrupt):
        run_eval(cfg, progress=False, print_summary=False, scene_loader=lambda *a: corridor, agent_factory=Interrupted)
    assert len((Path(cfg.out) / EPISODES_FILE).read_text().splitlines()) == 2
    resumed = run_eval(cfg, progress=False, print_summary=False, scene_loader=lambda *a: corridor)
    assert resumed["timing"]["episodes_run_now"] == len(PAIRS) - 2
    assert resumed["overall"]["episodes"] == len(PAIRS) and resumed["overall"]["means"]["SR"] == 1.0


def test_design_block_does_not_depend_on_the_order_episodes_finished_in():
    """Records appended as episodes end (``--envs``, ``--workers``, a resumed run) come in another
    order than the serial run's: the per-home means, both intervals and the design must not move."""
    import random as _random

    from vlnverse.run.summary import design_block

    rng = _random.Random(3)
    records = [{"episode_id": f"e{h}-{i:02d}", "scene_id": f"home_{h}",
                "metrics": {"SR": float(rng.random() < 0.2 + 0.2 * h), "SPL": round(rng.random(), 3),
                            "nDTW": round(rng.random(), 3)}}
               for h in range(4) for i in range(6)]
    shuffled = records[:]
    _random.Random(7).shuffle(shuffled)
    expected = design_block(records, seed=0)
    assert design_block(shuffled, seed=0) == expected
    assert expected["design"] == {"homes": 4, "episodes": 24, "mde_SR": expected["design"]["mde_SR"]}
    sr = [r["metrics"]["SR"] for r in records]
    assert expected["intervals"]["SR"]["episode"]["mean"] == pytest.approx(sum(sr) / 24, abs=1e-4)
