"""Portable datasets: episodes name scenes by id + a path relative to a scene root; a moved dataset evaluates."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from vlnverse.cli import main
from vlnverse.core.errors import SceneError
from vlnverse.paths import scenes_dir
from vlnverse.tasks.episode import load_episodes, save_episodes
from vlnverse.tasks.scene_roots import portable_scene_path, resolve_episode_scene, scene_roots


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """``a/homes/home_777.usda`` (a custom scene) and ``a/ds`` generated on it and on a shipped scene."""
    from vlnverse.scenes.procgen import generate_home
    from vlnverse.scenes.usd_io import write_usd

    root = tmp_path_factory.mktemp("portable") / "a"
    custom = write_usd(generate_home(777, scene_id="home_777", min_rooms=4, max_rooms=4), root / "homes" / "home_777.usda")
    shipped = "home_0014"
    assert main(["data", "generate", "--task", "fine_grained", "--scenes", f"{custom},{shipped}",
                 "--episodes-per-scene", "1", "--seed", "3", "--out", str(root / "ds"), "--no-progress"]) == 0
    return root


def _eval(tmp_path, episodes, *extra) -> dict:
    out = tmp_path / "run"
    cfg = tmp_path / "eval.yaml"
    cfg.write_text("agent: {name: oracle}\ntask: fine_grained\nsensors: []\nreport: {enabled: false}\n")
    assert main(["eval", str(cfg), f"episodes={episodes}", f"out={out}", "--no-progress", *extra]) == 0
    return json.loads((out / "summary.json").read_text())["overall"]


def test_episodes_store_relative_scene_paths(world):
    text = "".join(p.read_text() for p in sorted((world / "ds").glob("*.jsonl")))
    assert str(world) not in text and str(scenes_dir()) not in text  # nothing machine-specific
    by_id = {e.scene_id: e.scene_path for e in load_episodes(world / "ds")}
    assert by_id == {"home_777": "../homes/home_777.usda", "home_0014": "home_0014.usd"}


def test_moved_dataset_evaluates_from_its_new_place(world, tmp_path, monkeypatch):
    moved = tmp_path / "b"
    shutil.copytree(world, moved)  # copy (the module fixture stays for the other tests) to a new place
    monkeypatch.chdir(tmp_path)  # and run from elsewhere
    summary = _eval(tmp_path, moved / "ds")
    assert summary["episodes"] == 2 and summary["means"]["SR"] == 1.0  # the oracle reaches both goals


def test_missing_scene_names_the_id_and_the_roots(world, tmp_path, capsys):
    moved = tmp_path / "c"
    shutil.copytree(world / "ds", moved / "ds")  # the custom scene is left behind
    cfg = tmp_path / "eval.yaml"
    cfg.write_text("agent: {name: oracle}\ntask: fine_grained\nsensors: []\nreport: {enabled: false}\n")
    assert main(["eval", str(cfg), f"episodes={moved / 'ds'}", f"out={tmp_path / 'run'}", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "scene 'home_777'" in err and str(moved / "ds") in err and str(scenes_dir()) in err
    # a scene_root pointing at the scene folder fixes it
    (tmp_path / "fixed").mkdir()
    assert _eval(tmp_path / "fixed", moved / "ds", f"scene_root={world / 'homes'}")["episodes"] == 2


def test_scene_root_and_legacy_absolute_paths(world, tmp_path, monkeypatch):
    homes = world / "homes"
    custom = homes / "home_777.usda"
    assert portable_scene_path(custom, tmp_path / "ds", [homes]) == "home_777.usda"
    assert portable_scene_path(scenes_dir() / "home_0012.usd", tmp_path / "ds") == "home_0012.usd"
    episodes = load_episodes(world / "ds")
    ep = next(e for e in episodes if e.scene_id == "home_777")
    ep.scene_path = "home_777.usda"  # relative to an explicit root
    assert resolve_episode_scene(ep, scene_roots([homes])) == homes / "home_777.usda"
    rel = Path(os.path.relpath(homes, tmp_path))  # a relative root: the resolved path holds from any directory
    monkeypatch.chdir(tmp_path)
    found = resolve_episode_scene(ep, scene_roots([rel]))
    assert found.is_absolute() and found == (tmp_path / rel / "home_777.usda").absolute()
    monkeypatch.chdir(homes)
    assert found.is_file()
    ep.scene_path = str(custom.resolve())  # an old file: absolute path that exists
    assert resolve_episode_scene(ep, scene_roots()) == custom.resolve()
    ep.scene_path = "/gone/elsewhere/home_777.usda"  # absolute path from another machine: found by name
    assert resolve_episode_scene(ep, scene_roots([homes])) == homes / "home_777.usda"
    with pytest.raises(SceneError, match=r"home_777.*searched scene roots: .*" + str(tmp_path)):
        resolve_episode_scene(ep, scene_roots(dataset_dir=tmp_path))
    legacy = tmp_path / "legacy" / "val.jsonl"  # a whole old-style file still evaluates
    save_episodes(legacy, [e for e in episodes if e.scene_id == "home_0014"])
    rec = json.loads(legacy.read_text())
    rec["scene_path"] = str((scenes_dir() / "home_0014.usd").resolve())
    legacy.write_text(json.dumps(rec) + "\n")
    assert _eval(tmp_path, legacy)["episodes"] == 1
