"""Where people and vision-language models look at the homes, objects are drawn as render meshes by
default; the learning recipe keeps the primitives it was trained on, explicitly (docs/scenes.md,
"Where meshes are the default")."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from vlnverse.run.agents import AGENTS, VISION_LANGUAGE_AGENTS, VLN_MME
from vlnverse.run.setup import RenderConfig
from vlnverse.eval.config import load_eval_config
from vlnverse.paths import tasks_dir

MESHES, PRIMITIVES = RenderConfig("default", "meshes"), RenderConfig("default", "primitives")


def test_shipped_mllm_eval_configs_draw_meshes_and_the_rest_primitives():
    mllm = sorted((tasks_dir() / "eval").glob("mllm_*.yaml"))
    assert [p.stem for p in mllm] == ["mllm_navgpt_graph"]
    for path in mllm:
        assert load_eval_config(path).render == MESHES
        assert load_eval_config(path).run_key()["render"] == {"quality": "default", "objects": "meshes"}
        for name in ("mapgpt_cot_reflection", "som"):  # the overrides the config's header suggests
            assert load_eval_config(path, [f"agent.name={name}"]).render == MESHES
    roam = tasks_dir() / "eval" / "roam_false_premise.yaml"
    assert load_eval_config(roam).render == MESHES  # ROAM: no render in the file, the agent's default
    # the learned graph-policy baseline of the same config keeps its training render
    assert load_eval_config(roam, ["agent.name=graph_policy"]).render == PRIMITIVES
    for stem in ("oracle_fine_grained_strict", "oracle_fine_grained_telhop", "random_coarse_grained_strict"):
        assert load_eval_config(tasks_dir() / "eval" / f"{stem}.yaml").render == PRIMITIVES


def test_vision_language_agents_default_to_meshes_unless_the_config_says_otherwise(tmp_path):
    assert len(VISION_LANGUAGE_AGENTS) == 12 and set(AGENTS.tagged(VLN_MME)) <= set(VISION_LANGUAGE_AGENTS)
    assert {"roam", "roam_detector", "som", "mv_dualvln"} <= set(VISION_LANGUAGE_AGENTS)
    assert not {"oracle", "random", "policy", "graph_policy"} & set(VISION_LANGUAGE_AGENTS)
    cfg = tmp_path / "e.yaml"
    cfg.write_text("agent: {name: navgpt}\ntask: fine_grained\nepisodes: x.jsonl\n")
    assert load_eval_config(cfg).render == MESHES
    assert load_eval_config(cfg, ["render.quality=high"]).render == RenderConfig("high", "meshes")
    assert load_eval_config(cfg, ["render.objects=primitives"]).render == PRIMITIVES  # an explicit choice stays
    assert load_eval_config(cfg, ["agent.name=oracle"]).render == PRIMITIVES
    cfg.write_text("agent: {name: mv_dualvln}\ntask: fine_grained\nepisodes: x.jsonl\nrender: {quality: fast}\n")
    assert load_eval_config(cfg).render == RenderConfig("fast", "meshes")
    cfg.write_text("agent: {name: som}\ntask: fine_grained\nepisodes: x.jsonl\nrender: {objects: primitives}\n")
    assert load_eval_config(cfg).render == PRIMITIVES


def test_the_learning_recipe_is_pinned_to_primitives():
    """Every train config names ``objects: primitives`` in the file (not only by default), which
    keys its caches as before render settings existed; the shipped checkpoint was trained on them
    and ``vlnverse quickstart`` evaluates it on them."""
    from vlnverse.core.config import load_config
    from vlnverse.eval.quickstart import QuickstartConfig
    from vlnverse.learn.checkpoint import read_checkpoint
    from vlnverse.learn.config import load_train_config

    train = sorted((tasks_dir() / "train").glob("*.yaml"))
    assert len(train) == 9
    for path in train:
        assert yaml.safe_load(path.read_text())["render"] == {"quality": "default", "objects": "primitives"}, path
        render = load_train_config(path).render
        assert render == PRIMITIVES and render.key() is None and render.options() == {}
    for name in ("cma_fine_grained", "gama_fine_grained"):
        ckpt = read_checkpoint(tasks_dir() / "train" / f"{name}.pt")
        assert ckpt["config"].get("render") in (None, {"quality": "default", "objects": "primitives"}), name
    qs = load_config(QuickstartConfig, tasks_dir() / "eval" / "quickstart.yaml")
    assert qs.render == PRIMITIVES
    assert {"name": "policy", "params": {"checkpoint": "gama_fine_grained"}} in [
        {"name": a.name, "params": a.params} for a in qs.agents]


def test_cli_defaults_of_the_commands_people_and_mllms_look_through():
    from vlnverse.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["cache", "build"]).objects == "meshes"
    assert parser.parse_args(["scenes", "gallery", "test", "--out", "g"]).objects == "meshes"
    assert parser.parse_args(["quickstart"]).objects is None  # the quickstart config's primitives
    assert parser.parse_args(["sim", "drive", "home_0012", "--out", "d"]).objects == "primitives"


def _mesh_geoms(options: dict) -> int:
    """Visible MuJoCo mesh geoms (``mjGEOM_MESH`` = 7) of procedural home 11 built with the
    objects of render ``options`` (at ``fast``: the same geometry as every preset, no bake)."""
    from vlnverse.scenes.procgen import generate_home
    from vlnverse.sim.body import as_body
    from vlnverse.sim.mujoco.builder import GROUP_COLLISION_ONLY, build_model

    built = build_model(generate_home(11), as_body("r2r_ce"), quality="fast",
                        objects=options.get("objects", "primitives"))
    m = built.model
    return int(np.sum((np.asarray(m.geom_type) == 7) & (np.asarray(m.geom_group) != GROUP_COLLISION_ONLY)))


def test_an_mllm_runs_default_render_builds_mesh_geometry():
    from vlnverse.eval.mllm.cache import ViewCache

    options = load_eval_config(tasks_dir() / "eval" / "mllm_navgpt_graph.yaml").render.sim_options()
    assert options == {"quality": "default", "objects": "meshes"}
    assert ViewCache(Path("views"), options).folder == Path("views") / "render-default-meshes"
    from vlnverse.scenes.object_meshes import render_meshes
    from vlnverse.scenes.procgen import generate_home

    parts = render_meshes(generate_home(11))
    assert (len(parts), sum(len(v) for v in parts.values())) == (19, 60)  # 19 of home 11's 32 objects, 60 parts
    assert _mesh_geoms(PRIMITIVES.sim_options()) == 18  # the agent's and fixtures' meshes
    assert _mesh_geoms(options) == 18 + 60


def test_an_eval_runs_generated_reference_images_are_drawn_with_its_render(tmp_path, monkeypatch):
    """Episodes an eval config generates (``episodes: generate``) render their assets (visual-reference
    images, prior videos) with the run's ``render``: an MLLM's reference image looks like its views."""
    import vlnverse.tasks.dataset as dataset
    from vlnverse.eval.folder import resolve_episodes
    from vlnverse.run.episodes import resolve_settings
    from vlnverse.sim.body import as_body
    from vlnverse.tasks.base import context_from_description
    from vlnverse.scenes.procgen import generate_home

    seen = []

    def fake_generate(task, paths, n, seed, out_dir, **kwargs):
        seen.append(kwargs["renderer_factory"].options)
        raise RuntimeError("stop here")

    monkeypatch.setattr(dataset, "generate_dataset", fake_generate)
    cfg = tmp_path / "e.yaml"
    cfg.write_text("agent: {name: navgpt}\ntask: fine_grained\nepisodes: {generate: {scenes: home_0014}}\n")
    for overrides, want in (([], {"quality": "default", "objects": "meshes"}), (["agent.name=oracle"], {})):
        run = load_eval_config(cfg, overrides)
        with pytest.raises(RuntimeError, match="stop here"):
            resolve_episodes(run, resolve_settings(run), tmp_path / "out", progress=False)
        assert seen[-1] == want
    # the factory's simulator is made with those options
    made = []
    monkeypatch.setattr("vlnverse.sim.make_simulator", lambda *a, **kw: made.append(kw) or type(
        "S", (), {"close": lambda self: None})())
    ctx = context_from_description(generate_home(11), as_body("r2r_ce"), 0.1)
    dataset.simulator_renderer_factory(options={"objects": "meshes"})(ctx)
    assert made == [{"sensors": [], "backend": "auto", "objects": "meshes"}]


def test_data_generate_keeps_primitives_and_records_meshes_when_asked(tmp_path):
    """``vlnverse data generate`` stays on the simulator's default (its datasets feed the learning
    recipe); ``--objects meshes`` draws the reference images with meshes and says so in summary.json."""
    import json

    from vlnverse.cli import main

    args = ["data", "generate", "--task", "visual_reference", "--scenes", "home_0014", "--episodes-per-scene", "1",
            "--seed", "0", "--no-progress"]
    assert main([*args, "--out", str(tmp_path / "plain")]) == 0
    assert main([*args, "--out", str(tmp_path / "meshes"), "--objects", "meshes"]) == 0
    assert "render" not in json.loads((tmp_path / "plain" / "summary.json").read_text())
    assert json.loads((tmp_path / "meshes" / "summary.json").read_text())["render"] == {"objects": "meshes"}
    plain, meshed = (sorted((tmp_path / d / "assets" / "reference").iterdir()) for d in ("plain", "meshes"))
    assert len(plain) == len(meshed) == 1 and plain[0].read_bytes() != meshed[0].read_bytes()


PLUGIN_AGENTS = '''
"""A user's agents: one a vision-language model drives, one not, one registered lazily."""
from vlnverse.run.agents import AGENTS, VISION_LANGUAGE, Agent, register_agent


@register_agent("h87_plugin_vlm", vision_language=True)
class PluginVLM(Agent):
    def act(self, observations, state):
        return "STOP"


@register_agent("h87_plugin_plain")
class PluginPlain(Agent):
    def act(self, observations, state):
        return "STOP"


# the heavy module is never imported to learn the tag (it does not even exist)
AGENTS.register_lazy("h87_plugin_lazy_vlm", "h87_no_such_heavy_module", tags=(VISION_LANGUAGE,))
'''


def test_plugin_agents_declare_a_vision_language_model_at_registration(tmp_path):
    import sys

    from vlnverse.run.agents import is_vision_language

    plugin = tmp_path / "h87_agents.py"
    plugin.write_text(PLUGIN_AGENTS)
    cfg = tmp_path / "e.yaml"
    cfg.write_text(f"agent: {{name: h87_plugin_vlm}}\ntask: fine_grained\nepisodes: x.jsonl\nplugins: [{plugin}]\n")
    assert load_eval_config(cfg).render == MESHES
    assert load_eval_config(cfg, ["agent.name=h87_plugin_plain"]).render == PRIMITIVES
    assert load_eval_config(cfg, ["agent.name=h87_plugin_lazy_vlm"]).render == MESHES
    assert "h87_no_such_heavy_module" not in sys.modules
    assert load_eval_config(cfg, ["render.objects=primitives"]).render == PRIMITIVES  # an explicit value wins
    assert load_eval_config(cfg, ["agent.name=h87_plugin_plain", "render.objects=meshes"]).render == MESHES
    assert [is_vision_language(n) for n in ("h87_plugin_vlm", "h87_plugin_plain", "h87_plugin_lazy_vlm")] == [
        True, False, True]
    # the built-in tuple is what the built-ins declared, not a second list; plug-ins do not join it
    assert "h87_plugin_vlm" not in VISION_LANGUAGE_AGENTS
    assert all(is_vision_language(n) for n in VISION_LANGUAGE_AGENTS)


def test_registry_tags_add_up_and_import_nothing():
    from vlnverse.core.registry import Registry

    reg = Registry("thing")
    reg.register_lazy("a", "h87_no_such_module", tags=("x",))
    reg.register("a", tags=("y",))(object)  # what the lazy module does on import
    reg.register("b")(int)
    assert reg.has_tag("a", "x") and reg.has_tag("a", "y") and not reg.has_tag("b", "x")
    assert reg.tagged("x") == ["a"] and reg.tagged("z") == [] and not reg.has_tag("missing", "x")
    with pytest.raises(TypeError, match="tags is a tuple of names"):
        reg.register("c", tags="x")(str)
    assert "c" not in reg  # refused before anything was registered
