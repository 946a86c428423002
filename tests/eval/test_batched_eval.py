"""Batched evaluation (``vlnverse eval --envs N``, ``vlnverse.run.batched``): on the shipped scenes,
N episodes stepped in lockstep in environment processes give the serial runner's records (apart
from ``duration_s``), for the shipped CMA checkpoint and a freshly initialised policy; episodes
end independently; a batch of one is the serial run; an agent that cannot batch runs serially;
bad ``envs`` values are refused in one line; an environment that fails or a Ctrl-C leaves no process."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vlnverse.eval.folder import EPISODES_FILE, INPUT_FILE
from vlnverse.eval.runner import run_eval

ROOT = Path(__file__).resolve().parents[2]
SENSORS = "[{name: rgb, kind: rgb, width: 64, height: 64}, {name: depth, kind: depth, width: 64, height: 64}]"
BASE = ROOT / "tasks" / "eval" / "oracle_fine_grained_telhop.yaml"


def _config(out: Path, episodes: Path | None, *overrides: str):
    from vlnverse.eval.config import load_eval_config

    source = [f"episodes={episodes}"] if episodes else ["episodes.generate.episodes_per_scene=3",
                                                             "episodes.generate.max_scenes=2"]
    return load_eval_config(BASE, ["agent.name=policy", "agent.params={checkpoint: cma_fine_grained}",
                                   f"sensors={SENSORS}", "report.enabled=false", "max_steps=40", f"out={out}",
                                   *source, *overrides])


def _records(out: Path) -> dict:
    lines = (out / EPISODES_FILE).read_text().splitlines()
    return {r["episode_id"]: {k: v for k, v in r.items() if k != "duration_s"} for r in map(json.loads, lines)}


@pytest.fixture(scope="module")
def serial(tmp_path_factory) -> tuple[Path, dict]:
    """The serial run of the CMA checkpoint on 2 shipped val_unseen scenes x 3 episodes (Tel-Hop)."""
    out = tmp_path_factory.mktemp("serial")
    summary = run_eval(_config(out, None), progress=False, print_summary=False)
    assert summary["timing"]["envs"] == 1
    return out / INPUT_FILE, _records(out), summary


def test_batched_records_equal_the_serial_ones_and_end_independently(serial, tmp_path):
    episodes, expected, serial_summary = serial
    assert len({r["scene_id"] for r in expected.values()}) == 2 and len(expected) == 6
    assert len({r["steps"] for r in expected.values()}) > 1  # episodes of different lengths
    summary = run_eval(_config(tmp_path, episodes, "envs=3"), progress=False, print_summary=False)
    got = _records(tmp_path)
    assert got == expected
    assert summary["timing"]["envs"] == 3
    # records are appended as episodes end: a shorter episode started later finishes first
    order = [json.loads(line)["episode_id"] for line in (tmp_path / EPISODES_FILE).read_text().splitlines()]
    assert order != list(expected)
    assert summary["overall"]["episodes"] == 6
    # the statistics do not depend on the order episodes ended in: the serial run's intervals
    for block in ("intervals", "per_home", "design"):
        assert summary["overall"][block] == serial_summary["overall"][block]


def test_batched_report_pictures_go_to_the_first_episodes_of_the_serial_order(serial, tmp_path):
    from vlnverse.tasks.episode import load_episodes

    episodes, expected, _ = serial
    run_eval(_config(tmp_path, episodes, "envs=3", "report.enabled=true", "report.max_episodes=2"), progress=False,
             print_summary=False)
    got = _records(tmp_path)
    by_scene: dict = {}
    for episode in load_episodes(episodes):
        by_scene.setdefault(episode.scene_id, []).append(episode.episode_id)
    pictured = sorted(key for key in expected if "map" in got[key])
    assert pictured == sorted([key for keys in by_scene.values() for key in keys][:2])
    for key in pictured:
        assert (tmp_path / got[key]["map"]).is_file() and got[key]["frames"]
        assert all((tmp_path / f["file"]).is_file() for f in got[key]["frames"])
    assert {k: {f: v for f, v in r.items() if f not in ("map", "frames")} for k, r in got.items()} == expected
    assert (tmp_path / "report.html").is_file()


def test_a_resumed_batched_run_completes_with_the_same_records(serial, tmp_path):
    episodes, expected, _ = serial
    run_eval(_config(tmp_path, episodes, "envs=2", "limit=3"), progress=False, print_summary=False)
    assert len(_records(tmp_path)) == 3
    run_eval(_config(tmp_path, episodes, "envs=2"), progress=False, print_summary=False)
    assert _records(tmp_path) == expected


def test_a_batch_of_one_is_the_serial_run(serial, tmp_path):
    from vlnverse.core.io import to_jsonable
    from vlnverse.run.agents import make_agent
    from vlnverse.run.batched import run_batched
    from vlnverse.run.agents import agent_rig
    from vlnverse.run.episodes import resolve_settings
    from vlnverse.tasks.episode import load_episodes
    from vlnverse.tasks.scene_roots import resolve_episode_scenes, scene_roots

    episodes, expected, _ = serial
    cfg = _config(tmp_path, episodes)
    eps = resolve_episode_scenes(load_episodes(episodes), scene_roots(None, episodes.parent))
    agent = make_agent("policy", {"checkpoint": "cma_fine_grained"})
    finished = []
    sensors = agent_rig(agent, [s.to_spec() for s in cfg.sensors])
    records = run_batched(eps, resolve_settings(cfg), agent, envs=1, asynchronous=False, collision_mode="telhop",
                          sensors=sensors,
                          extra={"agent": "policy", "collision_mode": "telhop"}, on_record=finished.append)
    assert [r["episode_id"] for r in records] == [e.episode_id for e in eps]  # one slot: the given order
    assert finished == records
    got = {r["episode_id"]: {k: v for k, v in json.loads(json.dumps(to_jsonable(r))).items() if k != "duration_s"}
           for r in records}
    for key in expected:
        assert {k: v for k, v in got[key].items() if v != expected[key].get(k)} == {}, key
    assert got == expected


def test_fresh_policy_batched_equals_serial(serial, tmp_path):
    """A freshly initialised policy's near-uniform logits are where a last-bit difference would flip the argmax."""
    import torch

    from vlnverse.learn.agent import PolicyAgent
    from vlnverse.learn.policies import build_policy
    from vlnverse.learn.vocab import Vocabulary
    from vlnverse.tasks.episode import load_episodes

    episodes, _, _ = serial
    vocab = Vocabulary.build([e.instruction_text for e in load_episodes(episodes)])
    rig = [{"name": "rgb", "kind": "rgb", "shape": [64, 64, 3]}, {"name": "depth", "kind": "depth", "shape": [64, 64]}]
    torch.manual_seed(0)
    policy = build_policy("cma", {"hidden_size": 16, "attention_size": 16}, vocab, rig)

    def agent():
        return PolicyAgent(policy=policy)

    runs = {}
    for envs in (1, 3):
        out = tmp_path / f"envs{envs}"
        run_eval(_config(out, episodes, f"envs={envs}"), progress=False, print_summary=False, agent_factory=agent)
        runs[envs] = _records(out)
    assert runs[1] == runs[3] and len(runs[1]) == 6


def test_an_agent_that_cannot_batch_runs_serially_with_envs(serial, tmp_path):
    episodes, _, _ = serial
    runs = {}
    for envs in (1, 3):
        out = tmp_path / f"envs{envs}"
        summary = run_eval(_config(out, episodes, "agent.name=random", "agent.params={}", f"envs={envs}"),
                           progress=False, print_summary=False)
        assert summary["timing"]["envs"] == 1  # random acts one episode at a time
        runs[envs] = _records(out)
    assert runs[1] == runs[3] and len(runs[1]) == 6


@pytest.mark.parametrize("args, message", [
    (["--envs", "0"], "--envs: got 0 (expected an integer in 1..256)"),
    (["--envs", "many"], "--envs: got 'many' (expected an integer"),
    (["envs=0"], "envs: got 0 (expected an integer in 1..256)"),
])
def test_bad_envs_values_are_refused_in_one_line(tmp_path, args, message):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "exts" / "vlnverse") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-m", "vlnverse", "eval", str(BASE), f"out={tmp_path / 'run'}", *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("failure", ["missing scene", "interrupt"])
def test_an_error_or_interrupt_ends_every_environment_process(serial, tmp_path, failure):
    """Environment processes each on their own pipe: the episodes that ended before an environment
    failed (a scene that cannot load) or the user pressed Ctrl-C (``KeyboardInterrupt`` in the
    driver) have their serial records, the error reaches the caller and no process is left."""
    import dataclasses
    import multiprocessing

    from vlnverse.core.io import to_jsonable
    from vlnverse.run.agents import agent_rig, make_agent
    from vlnverse.run.batched import run_batched
    from vlnverse.run.episodes import resolve_settings
    from vlnverse.tasks.episode import load_episodes
    from vlnverse.tasks.scene_roots import resolve_episode_scenes, scene_roots

    episodes, expected, _ = serial
    cfg = _config(tmp_path, episodes)
    eps = resolve_episode_scenes(load_episodes(episodes), scene_roots(None, episodes.parent))
    if failure == "missing scene":
        eps[-1] = dataclasses.replace(eps[-1], scene_path=str(tmp_path / "missing.usda"))
    agent = make_agent("policy", {"checkpoint": "cma_fine_grained"})
    finished = []

    def on_record(record):
        finished.append(record)
        if failure == "interrupt" and len(finished) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt if failure == "interrupt" else Exception) as raised:
        run_batched(eps, resolve_settings(cfg), agent, envs=3, collision_mode="telhop",
                    sensors=agent_rig(agent, [s.to_spec() for s in cfg.sensors]),
                    extra={"agent": "policy", "collision_mode": "telhop"}, on_record=on_record)
    if failure == "missing scene":
        assert "missing.usda" in str(raised.value)
        assert 1 <= len(finished) <= 5
    else:
        assert len(finished) == 2
    for record in finished:
        got = {k: v for k, v in json.loads(json.dumps(to_jsonable(record))).items() if k != "duration_s"}
        assert got == expected[record["episode_id"]]
    assert [p for p in multiprocessing.active_children() if p.name == "vlnverse-batched-env"] == []
