"""The learning layer's ``render`` settings (quality, objects): validated as the eval config's,
passed to every simulator a training run makes (teacher cache, DAgger, validation), part of the
cache keys only when not the defaults, recorded in the checkpoints; the gym env, the encoder
pretraining and the waypoint predictor's panoramas take them too."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from learn_helpers import make_episodes, small_config

TINY = dict(il__epochs=1, il__batch_size=2, validation__every=1, validation__limit=1, max_steps=30,
            sensors=[{"name": "rgb", "kind": "rgb", "width": 16, "height": 16},
                     {"name": "depth", "kind": "depth", "width": 16, "height": 16}])


def _settings(ctx):
    from vlnverse.run.episodes import RunSettings

    return RunSettings(max_steps=60, success_distance=1.5, body=ctx.body, resolution=0.05, task_type="fine_grained")


def _rig(size=16):
    from vlnverse.sim.sensors import CameraSpec

    return [CameraSpec("rgb", "rgb", size, size), CameraSpec("depth", "depth", size, size)]


@pytest.mark.parametrize("render, field", [({"quality": "ultra"}, "render.quality"),
                                           ({"objects": "mesh"}, "render.objects"),
                                           ({"colour": "red"}, "render")])
def test_a_bad_render_section_is_a_one_line_error_naming_the_field(episodes_file, tmp_path, render, field):
    from vlnverse.core.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        small_config(tmp_path / "x", episodes_file, render=render)
    assert str(err.value).startswith(field) and "\n" not in str(err.value)


def test_the_default_render_leaves_the_run_key_as_before_and_another_enters_it(episodes_file, tmp_path):
    default = small_config(tmp_path / "a", episodes_file)
    meshes = small_config(tmp_path / "a", episodes_file, render={"objects": "meshes"})
    assert "render" not in default.run_key() and default.render_options() == {}
    assert meshes.run_key()["render"] == {"quality": "default", "objects": "meshes"}
    assert meshes.render_options() == {"quality": "default", "objects": "meshes"}
    assert {k: v for k, v in meshes.run_key().items() if k != "render"} == default.run_key()
    assert meshes.to_dict()["render"] == {"quality": "default", "objects": "meshes"}  # what checkpoints record


def test_render_config_parse_reads_flags_and_names_them():
    from vlnverse.core.errors import ConfigError
    from vlnverse.run.setup import RenderConfig

    assert RenderConfig.parse("high:meshes") == RenderConfig("high", "meshes")
    assert RenderConfig.parse("fast") == RenderConfig("fast", "primitives") and RenderConfig.parse(None).is_default()
    assert RenderConfig.parse(None).key() is None and RenderConfig.parse("fast").key() == {"quality": "fast",
                                                                                           "objects": "primitives"}
    for bad, field in (("ultra", "--x.quality"), ("fast:boxes", "--x.objects"), ("a:b:c", "--x"), (":meshes", "--x")):
        with pytest.raises(ConfigError, match=f"^{field}"):
            RenderConfig.parse(bad, "--x")


def test_cache_keys_carry_the_render_only_when_it_is_not_the_default(corridor):
    from vlnverse.run.setup import RenderConfig
    from vlnverse.learn.cache import cache_key

    episodes = make_episodes(corridor)[:1]
    kw = dict(sensors=_rig(), settings=_settings(corridor), collision_mode="telhop", mode_params=None)
    before = cache_key(episodes, **kw)  # the key of a default run, as before render settings existed
    assert "render_settings" not in before
    assert cache_key(episodes, render_settings=RenderConfig(), **kw) == before
    meshes = cache_key(episodes, render_settings=RenderConfig(objects="meshes"), **kw)
    fast = cache_key(episodes, render_settings=RenderConfig(quality="fast"), **kw)
    assert meshes["render_settings"] == {"quality": "default", "objects": "meshes"}
    assert {k: v for k, v in meshes.items() if k != "render_settings"} == before
    assert len({str(before), str(meshes), str(fast)}) == 3


def test_teacher_caches_of_two_renders_land_in_two_folders_with_their_own_frames(corridor, tmp_path):
    from vlnverse.run.setup import RenderConfig
    from vlnverse.learn.cache import teacher_cache

    episodes = make_episodes(corridor)[:2]
    kw = dict(sensors=_rig(), settings=_settings(corridor), collision_mode="telhop", base_dir=tmp_path,
              scene_loader=lambda *a: corridor, progress=False, report=lambda s: None)
    default, d_stats = teacher_cache(episodes, **kw)
    fast, f_stats = teacher_cache(episodes, render_settings=RenderConfig(quality="fast"), **kw)
    meshes, m_stats = teacher_cache(episodes, render_settings=RenderConfig(objects="meshes"), **kw)
    assert len({d_stats["path"], f_stats["path"], m_stats["path"]}) == 3
    assert f_stats["status"] == m_stats["status"] == "built"
    _, again = teacher_cache(episodes, render_settings=RenderConfig(), **kw)  # the defaults, spelled out: reused
    assert again["status"] == "reused" and again["path"] == d_stats["path"]
    a, b = default.episode(0), fast.episode(0)
    assert np.array_equal(a["label"], b["label"]) and np.array_equal(a["depth"], b["depth"])  # same rollout, same depth
    assert not np.array_equal(a["rgb"], b["rgb"])  # flat colours, not textures


def test_a_training_run_renders_everything_with_its_settings_and_records_them(corridor, episodes_file, tmp_path,
                                                                              monkeypatch):
    """IL (teacher cache, validation) then a DAgger round: every simulator gets the run's render
    options; the checkpoints and the cache key record them."""
    import vlnverse.sim as sim_module
    from vlnverse.learn.checkpoint import read_checkpoint
    from vlnverse.learn.trainer import run_training

    made = []
    real = sim_module.make_simulator

    def spy(*args, **kwargs):
        made.append({"quality": kwargs.get("quality", "default"), "objects": kwargs.get("objects", "primitives")})
        return real(*args, **kwargs)

    monkeypatch.setattr(sim_module, "make_simulator", spy)
    render = {"quality": "fast", "objects": "meshes"}
    cfg = small_config(tmp_path / "il", episodes_file, policy="seq2seq", render=render, **TINY)
    summary = run_training(cfg, scene_loader=lambda *a: corridor, progress=False, report=lambda s: None)
    il_sims = len(made)
    assert il_sims >= 2 and all(m == render for m in made)  # the teacher cache's and validation's
    assert summary["render"] == "fast:meshes"
    manifest = json.loads((Path(summary["cache"]["path"]) / "manifest.json").read_text())
    assert manifest["key"]["render_settings"] == render
    ckpt = read_checkpoint(tmp_path / "il" / "best.pt")
    assert ckpt["config"]["render"] == render
    dagger = small_config(tmp_path / "dagger", episodes_file, policy="seq2seq", render={"quality": "fast"}, mode="dagger",
                          init=str(tmp_path / "il" / "best.pt"), dagger={"rounds": 1, "p": 0.5, "epochs": 1}, **TINY)
    run_training(dagger, scene_loader=lambda *a: corridor, progress=False, report=lambda s: None)
    assert len(made) > il_sims and all(m == {"quality": "fast", "objects": "primitives"} for m in made[il_sims:])
    assert read_checkpoint(tmp_path / "dagger" / "last.pt")["config"]["render"] == {"quality": "fast",
                                                                                   "objects": "primitives"}


def test_a_default_run_calls_the_simulator_without_render_options(corridor, tmp_path, monkeypatch):
    """Default settings: the teacher cache's simulators are made exactly as before (no options)."""
    import vlnverse.sim as sim_module
    from vlnverse.run.setup import RenderConfig
    from vlnverse.learn.cache import teacher_cache

    made = []
    real = sim_module.make_simulator
    monkeypatch.setattr(sim_module, "make_simulator", lambda *a, **k: made.append(
        {o for o in ("quality", "objects") if o in k}) or real(*a, **k))
    teacher_cache(make_episodes(corridor)[:1], sensors=_rig(), settings=_settings(corridor), collision_mode="telhop",
                  base_dir=tmp_path, scene_loader=lambda *a: corridor, progress=False, report=lambda s: None,
                  render_settings=RenderConfig())
    assert made == [set()]


def test_the_gym_env_draws_with_its_render_settings(corridor):
    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.gym_env import VLNEnv

    kw = dict(episodes=make_episodes(corridor), sensors=[{"name": "rgb", "kind": "rgb", "width": 16, "height": 16}],
              scene_loader=lambda *a: corridor)
    frames = {}
    for render in (None, "fast"):
        env = VLNEnv(**kw, render=render)
        obs, _ = env.reset(seed=0, options={"episode": 0})
        frames[render] = obs["rgb"]
        assert env.context.render_options == ({} if render is None else {"quality": "fast"})
        env.close()
    assert not np.array_equal(frames[None], frames["fast"])
    with pytest.raises(ConfigError, match="^render.objects"):
        VLNEnv(**kw, render={"objects": "boxes"})


def test_panorama_and_frame_renderers_use_their_options_and_rebuild_when_they_change(corridor):
    from vlnverse.learn.encoder import FrameRenderer
    from vlnverse.learn.waypoints.data import PanoramaRenderer

    pose = (2.0, 1.5, 0.0)
    pano = PanoramaRenderer(4, 8, rgb=True)
    default = pano.render(corridor.desc, corridor.body, pose)
    fast = pano.render(corridor.desc, corridor.body, pose, options={"quality": "fast"})
    again = pano.render(corridor.desc, corridor.body, pose)
    pano.close()
    assert not np.array_equal(default["rgb"], fast["rgb"]) and np.array_equal(default["rgb"], again["rgb"])
    assert np.array_equal(default["depth"], fast["depth"])
    own = PanoramaRenderer(4, 8, rgb=True, options={"quality": "fast"})
    assert np.array_equal(own.render(corridor.desc, corridor.body, pose)["rgb"], fast["rgb"])
    own.close()
    frames = [FrameRenderer(16, options=o) for o in ({}, {"quality": "fast"})]
    a, b = (f.render(corridor.desc, corridor.body, pose) for f in frames)
    for f in frames:
        f.close()
    assert not np.array_equal(a["rgb"], b["rgb"]) and np.array_equal(a["semantic"], b["semantic"])


def test_waypoint_perception_renders_with_the_scene_contexts_options(corridor):
    """VLN-BERT / HNR / GAMA draw their own panoramas: with the options of the context the runner
    (or the teacher cache) gives them."""
    import torch

    from vlnverse.learn.vlnbert import Perception
    from vlnverse.learn.waypoints.model import WaypointPredictor

    torch.manual_seed(0)
    perception = Perception(WaypointPredictor(image_size=8, views=4))
    seen = []
    render = perception.renderer.render
    perception.renderer.render = lambda *a, **k: seen.append(k.get("options")) or render(*a, **k)
    ctx = corridor.with_render_options({"quality": "fast"})
    from vlnverse.tasks.base import render_options

    perception(ctx.desc, ctx.body, (2.0, 1.5, 0.0), options=render_options(ctx))
    perception(corridor.desc, corridor.body, (2.0, 1.5, 0.0), options=render_options(corridor))
    perception.renderer.close()
    assert seen == [{"quality": "fast"}, {}]


def test_encoder_and_waypoint_configs_validate_render_and_keep_default_keys():
    from vlnverse.core.errors import ConfigError
    from vlnverse.run.setup import RenderConfig
    from vlnverse.learn.encoder.pretraining import EncoderTrainConfig, _config_dict
    from vlnverse.learn.waypoints import WaypointTrainConfig

    enc = EncoderTrainConfig()
    enc.validate()
    assert enc.render == RenderConfig() and "render" not in _config_dict(enc)  # default keys as before
    meshes = EncoderTrainConfig(render="default:meshes")
    meshes.validate()
    assert _config_dict(meshes)["render"] == {"quality": "default", "objects": "meshes"}
    wp = WaypointTrainConfig(render={"quality": "high"})
    wp.validate()
    assert wp.render == RenderConfig("high", "primitives")
    for cfg in (EncoderTrainConfig(render={"quality": "best"}), WaypointTrainConfig(render={"quality": "best"})):
        with pytest.raises(ConfigError, match="^render.quality"):
            cfg.validate()


def test_waypoints_train_names_the_render_flag(tmp_path, capsys):
    from vlnverse.cli import main

    with pytest.raises(SystemExit):
        main(["waypoints", "train", "--objects", "boxes", "--out", str(tmp_path)])
    assert "--objects" in capsys.readouterr().err


def test_the_feature_cache_key_follows_the_observation_caches_render(corridor):
    """Frozen-trunk features are keyed by the observation cache's key: another render, another store."""
    from types import SimpleNamespace

    from vlnverse.run.setup import RenderConfig
    from vlnverse.learn.cache import cache_key
    from vlnverse.learn.features import feature_key

    episodes = make_episodes(corridor)[:1]
    kw = dict(sensors=_rig(), settings=_settings(corridor), collision_mode="telhop", mode_params=None)
    keys = [feature_key(SimpleNamespace(manifest={"key": cache_key(episodes, render_settings=r, **kw)}, num_steps=9), None)
            for r in (None, RenderConfig(), RenderConfig(objects="meshes"))]
    assert keys[0] == keys[1] and keys[0]["obs_key_sha256"] != keys[2]["obs_key_sha256"]


def test_checkpoint_info_shows_the_render_a_policy_was_trained_with():
    from vlnverse.learn.tensorfile import format_info

    text = format_info({"config": {"task": "fine_grained", "render": {"quality": "fast", "objects": "meshes"}, "x": 1}})
    assert '"render": {"objects": "meshes", "quality": "fast"}' in text and "(and 1 more keys)" in text


def test_the_auto_encoders_identity_carries_a_non_default_render(tmp_path, monkeypatch):
    """``path: auto`` pretrains on the run's render: another render, another cached encoder; the
    defaults keep the folder of before."""
    import vlnverse.learn.encoder.pretraining as E

    homes = []
    for i in range(3):
        homes.append(tmp_path / f"h{i}.usda")
        homes[-1].write_text(f"#usda 1.0\n# home {i}\n")
    folders, renders = [], []

    class Stop(Exception):
        pass

    def fake(cfg, out, **kw):  # the folder it would pretrain into, then stop
        folders.append(out)
        renders.append(cfg.render.label())
        raise Stop

    monkeypatch.setattr(E, "run_pretraining", fake)
    for render in (None, {"quality": "default", "objects": "primitives"}, "default:meshes", "fast"):
        with pytest.raises(Stop):
            E.pretrain_on_homes(homes, image_size=16, cache_dir=tmp_path / "cache", progress=False, render=render)
    assert folders[0] == folders[1] and len(set(folders)) == 3
    assert renders == ["default:primitives", "default:primitives", "default:meshes", "fast:primitives"]
