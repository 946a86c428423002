"""``vlnverse sim`` subcommands (registered through ``vlnverse.sim.cli.add_commands``)."""
from __future__ import annotations

import argparse
import json

import pytest

from vlnverse.core.errors import ConfigError
from vlnverse.sim import cli
from vlnverse.sim.demo import BoxObject, room_scene


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    cli.add_commands(parser.add_subparsers())
    args = parser.parse_args(argv)
    return args.func(args)


def test_parse_actions_expands_repeats_and_abbreviations():
    assert cli.parse_actions("F*2, turn_left ,r") == ["MOVE_FORWARD", "MOVE_FORWARD", "TURN_LEFT", "TURN_RIGHT"]
    with pytest.raises(ConfigError, match="--actions: unknown action 'JUMP'"):
        cli.parse_actions("F,JUMP")
    with pytest.raises(ConfigError, match="bad repeat"):
        cli.parse_actions("F*0")


def test_drive_writes_results_frames_and_summary(tmp_path, capsys):
    usd_io = pytest.importorskip("vlnverse.scenes.usd_io")
    scene = room_scene(4.0, 3.0, objects=[BoxObject("table", (3.0, 1.5, 0.4), (0.3, 0.3, 0.4), color=(0.6, 0.4, 0.2))])
    usd = usd_io.write_usd(scene, tmp_path / "room.usda")
    out = tmp_path / "drive"
    # From (1, 1.5) facing +x: the table's west face is at x = 2.7, so the agent stops at 2.52.
    assert _run(["sim", "drive", str(usd), "--pose", "1.0,1.5,0", "--actions", "F*8", "--renderer", "raycast",
                 "--width", "32", "--height", "24", "--out", str(out), "--no-progress"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    steps = [json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines()]
    assert summary["actions"] == len(steps) == 8
    assert summary["final_pose"]["x"] == pytest.approx(2.7 - 0.18, abs=0.01)
    assert summary["collisions"] >= 1 and steps[-1]["contacts"][0]["label"] == "table"
    assert summary["path_length"] == pytest.approx(1.52, abs=0.03)
    assert len(list((out / "frames").glob("step_*.png"))) == 9
    assert "wrote" in capsys.readouterr().out
    with pytest.raises(ConfigError, match="--pose"):
        _run(["sim", "drive", str(usd), "--pose", "1,nan", "--out", str(tmp_path / "x")])
    assert not (tmp_path / "x").exists()


def test_info_lists_presets(capsys):
    assert _run(["sim", "info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert {"r2r_ce", "stretch", "turtlebot4"} <= set(info["bodies"])
    assert "panorama" in info["sensor_presets"] and info["backends"][0] == "mujoco"
    assert info["renderer"] in ("gl", "raycast")
