"""``render.objects`` (primitives | meshes) in eval and quickstart configs: validated on load,
round-tripped by ``to_dict``, absent from old configs and run folders (they still load and
resume), and handed to the simulator the run builds."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from vlnverse.core.config import from_dict
from vlnverse.core.errors import ConfigError
from vlnverse.eval.config import EvalConfig, ReportConfig, load_eval_config
from vlnverse.run.setup import EpisodeSource, NamedSpec, RenderConfig, SensorConfig

CONFIG = "agent: {name: random}\ntask: fine_grained\nepisodes: x.jsonl\n"


def test_bad_objects_value_is_one_error_naming_file_field_and_choices(tmp_path):
    cfg = tmp_path / "e.yaml"
    cfg.write_text(CONFIG + "render: {quality: fast, objects: nurbs}\n")
    with pytest.raises(ConfigError) as err:
        load_eval_config(cfg)
    line = str(err.value)
    assert "e.yaml" in line and "render.objects" in line and "'nurbs'" in line and "primitives, meshes" in line
    with pytest.raises(ConfigError, match=r"render\.objects.*primitives, meshes"):
        load_eval_config(tmp_path / "e.yaml", ["render.objects=meshes", "render.objects=wire"])


def test_objects_default_override_and_to_dict_round_trip(tmp_path):
    cfg_file = tmp_path / "e.yaml"
    cfg_file.write_text(CONFIG)
    plain = load_eval_config(cfg_file)
    assert plain.render == RenderConfig("default", "primitives")
    meshed = load_eval_config(cfg_file, ["render.objects=meshes", "render.quality=high"])
    assert meshed.render == RenderConfig("high", "meshes")
    data = json.loads(json.dumps(meshed.to_dict()))
    assert data["render"] == {"quality": "high", "objects": "meshes"}
    again = from_dict(EvalConfig, data)
    assert again.to_dict() == meshed.to_dict()
    # a config written before the field existed loads with the default
    old = {k: v for k, v in plain.to_dict().items()}
    old["render"] = {"quality": "fast"}
    assert from_dict(EvalConfig, old).render == RenderConfig("fast", "primitives")


def test_run_key_of_the_default_is_the_key_before_the_field_so_old_folders_resume(tmp_path):
    cfg_file = tmp_path / "e.yaml"
    cfg_file.write_text(CONFIG)
    plain = load_eval_config(cfg_file).run_key()
    assert plain["render"] == {"quality": "default"}  # what run folders written before render.objects hold
    meshed = load_eval_config(cfg_file, ["render.objects=meshes"]).run_key()
    assert meshed["render"] == {"quality": "default", "objects": "meshes"} and meshed != plain


def test_sim_options_pass_objects_only_when_not_the_default():
    assert RenderConfig("fast").sim_options() == {"quality": "fast"}
    assert RenderConfig("high", "meshes").sim_options() == {"quality": "high", "objects": "meshes"}


@pytest.fixture(scope="module")
def small_home():
    from vlnverse.scenes.procgen import generate_home
    from vlnverse.sim.body import load_body
    from vlnverse.tasks.base import context_from_description

    return context_from_description(generate_home(11), load_body("r2r_ce"), 0.1, scene_path="home11.usda")


def _one_episode(ctx, path: Path):
    from vlnverse.tasks.episode import Episode, Goal, Instruction, save_episodes

    nav = ctx.maps.navigable
    free = np.argwhere(nav.free_mask())
    start, goal = (np.ravel(nav.cell_to_world(free[len(free) * k // 5])) for k in (1, 4))
    plan = ctx.planner.shortest_path(tuple(start), tuple(goal))
    ep = Episode("h11-0", ctx.desc.scene_id, "home11.usda", "test", "fine_grained", [*map(float, start), 0.0], 0.0,
                 [Goal([*map(float, goal), 0.0])], [[*p, 0.0] for p in plan.waypoints], plan.length,
                 [Instruction("walk to the other room")])
    save_episodes(path, [ep])


@pytest.mark.parametrize("objects", ["meshes", "primitives"])
def test_eval_run_builds_its_simulator_with_the_configured_objects(small_home, tmp_path, monkeypatch, objects):
    """A one-episode eval with ``render.objects``: the simulator the run made was compiled with the
    render meshes (hidden collision group, one visual mesh geom per part) or without them."""
    import vlnverse.sim as sim_pkg
    from vlnverse.eval.runner import run_eval
    from vlnverse.scenes.object_meshes import render_meshes
    from vlnverse.sim.mujoco.builder import GROUP_COLLISION_ONLY, build_model

    episodes = tmp_path / "episodes.jsonl"
    _one_episode(small_home, episodes)
    made = []
    real = sim_pkg.make_simulator

    def spy(*args, **kwargs):
        sim = real(*args, **kwargs)
        made.append((kwargs, sim._built))
        return sim

    monkeypatch.setattr(sim_pkg, "make_simulator", spy)
    cfg = EvalConfig(agent=NamedSpec("random"), task="fine_grained", episodes=EpisodeSource(path=str(episodes)),
                     sensors=[SensorConfig("rgb", "rgb", 16, 16)], max_steps=3, out=str(tmp_path / "run"),
                     report=ReportConfig(enabled=False, frames=False, max_episodes=0),
                     render=RenderConfig("fast", objects))
    cfg.validate()
    summary = run_eval(cfg, progress=False, print_summary=False, scene_loader=lambda *a: small_home)
    assert summary["overall"]["episodes"] == 1
    assert len(made) == 1
    kwargs, built = made[0]
    assert kwargs.get("quality") == "fast" and kwargs.get("objects", "primitives") == objects
    assert built is build_model(small_home.desc, small_home.body, quality="fast", objects=objects)
    hidden = int(np.sum(np.asarray(built.model.geom_group) == GROUP_COLLISION_ONLY))
    parts = sum(len(p) for p in render_meshes(small_home.desc).values())
    if objects == "meshes":
        assert parts > 10 and hidden > 0
        assert built.model.ngeom >= build_model(small_home.desc, small_home.body, quality="fast").model.ngeom + parts
    else:
        assert hidden == 0
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["config"]["render"] == {"quality": "fast", "objects": objects}


def test_viewer_reads_the_recorded_render_settings_and_old_folders_default(tmp_path):
    from vlnverse.study.viewer import recorded_render

    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "config.json").write_text(json.dumps({"config": {"render": {"quality": "fast"}}}))
    assert recorded_render(tmp_path / "old") == RenderConfig("fast", "primitives")
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "config.json").write_text(json.dumps({"config": {"render": {"quality": "high", "objects": "meshes"}}}))
    assert recorded_render(tmp_path / "new").sim_options() == {"quality": "high", "objects": "meshes"}
    (tmp_path / "older").mkdir()
    (tmp_path / "older" / "config.json").write_text(json.dumps({"config": {}}))
    assert recorded_render(tmp_path / "older") == RenderConfig()
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "config.json").write_text(json.dumps({"config": {"render": {"objects": "voxels"}}}))
    with pytest.raises(ConfigError, match=r"config\.json.*config\.render\.objects"):
        recorded_render(tmp_path / "bad")


def test_study_config_takes_render_objects(tmp_path):
    from vlnverse.study.config import load_study_config

    cfg = tmp_path / "study.yaml"
    cfg.write_text("render: {objects: meshes}\n")
    assert load_study_config(cfg).render.sim_options() == {"quality": "default", "objects": "meshes"}
    # what ``study.json`` records (``asdict`` of the config) is what the viewer reads back
    from dataclasses import asdict

    from vlnverse.core.io import to_jsonable
    from vlnverse.study.viewer import recorded_render

    (tmp_path / "study").mkdir()
    (tmp_path / "study" / "study.json").write_text(json.dumps({"config": to_jsonable(asdict(load_study_config(cfg)))}))
    assert recorded_render(tmp_path / "study") == RenderConfig("default", "meshes")
    cfg.write_text("render: {objects: clay}\n")
    with pytest.raises(ConfigError, match=r"study\.yaml.*render\.objects"):
        load_study_config(cfg)


def test_quickstart_objects_flag_overrides_the_configs_render(tmp_path, monkeypatch, capsys):
    import vlnverse.eval.quickstart as quickstart
    from vlnverse.cli import main

    seen = {}

    def fake_locked(out, **kwargs):  # everything the CLI hands the quickstart body
        seen.update(kwargs)
        return {}

    monkeypatch.setattr(quickstart, "run_quickstart_locked", fake_locked)
    assert main(["quickstart", "--out", str(tmp_path / "qs"), "--objects", "meshes", "--no-progress"]) == 0
    assert seen["objects"] == "meshes" and seen["quality"] is None
    with pytest.raises(SystemExit) as exit_:
        main(["quickstart", "--out", str(tmp_path / "qs2"), "--objects", "voxels"])
    assert exit_.value.code == 2 and "voxels" in capsys.readouterr().err


def test_quickstart_config_render_objects_reaches_every_run(tmp_path, monkeypatch):
    """``render.objects`` of the quickstart YAML and ``--objects`` both land in each eval run's config."""
    import vlnverse.eval.quickstart as quickstart
    import vlnverse.eval.folder as folder
    import vlnverse.eval.runner as runner

    cfgs = []

    def fake_run_eval(cfg, **kwargs):
        cfgs.append(cfg)
        raise StopIteration  # enough: the run's config is what is checked

    monkeypatch.setattr(runner, "run_eval", fake_run_eval)
    monkeypatch.setattr(folder, "generate_episodes", lambda *a, **k: None)
    qs = tmp_path / "qs.yaml"
    qs.write_text("agents: [{name: random}]\ntasks: [fine_grained]\ncollision_modes: [strict]\n"
                  "render: {quality: fast, objects: meshes}\n")
    for objects, want in ((None, "meshes"), ("primitives", "primitives")):
        with pytest.raises(StopIteration):
            quickstart.run_quickstart_locked(tmp_path / f"out_{want}", config=qs, progress=False, objects=objects)
        assert cfgs[-1].render == RenderConfig("fast", want)
    qs.write_text("render: {objects: clay}\n")
    with pytest.raises(ConfigError, match=r"qs\.yaml.*render\.objects"):
        quickstart.run_quickstart_locked(tmp_path / "out_bad", config=qs, progress=False)
