"""The run's ``render`` settings reach every renderer an agent builds (through
``SceneContext.render_options``): the MLLM views, the pixel-goal panorama, FREE's depth views and
the MLLM view cache, whose key holds them (a ``meshes`` run never reads ``primitives`` views; a
cache written before the key existed is the default settings')."""
from __future__ import annotations

import base64
import io
import json

import numpy as np
import pytest
from PIL import Image

from mllm_server import openai_server  # noqa: E402
from vlnverse.core.errors import ConfigError
from vlnverse.run.setup import EpisodeSource, NamedSpec, RenderConfig, SensorConfig
from vlnverse.eval.config import EvalConfig, ModelSpec, ReportConfig
from vlnverse.eval.mllm.cache import ViewCache, ViewpointSimulator, build_scene_cache, render_folder
from vlnverse.sim import make_simulator
from vlnverse.sim.sensors import PanoramaSpec
from vlnverse.sim.types import AgentPose

SIZE = 48
QUALITY = "default"  # the eval default: its primitives views are the cache root's, as before the key existed


@pytest.fixture(scope="module")
def home():
    from vlnverse.scenes.procgen import generate_home
    from vlnverse.sim.body import load_body
    from vlnverse.tasks.base import context_from_description

    return context_from_description(generate_home(11), load_body("r2r_ce"), 0.1, scene_path="home11.usda")


@pytest.fixture(scope="module")
def direct_views(home):
    """``views(xy, **options)``: the four global views at ``xy`` from a simulator built here (no agent code)."""
    sims = {}

    def views(xy, **options):
        key = tuple(sorted(options.items()))
        if key not in sims:
            sims[key] = make_simulator(home.desc, home.body, sensors=[], quality=QUALITY, **options)
        spec = PanoramaSpec.of(name="v", views=4, width=SIZE, height=SIZE, hfov_deg=90.0, modalities=("rgb",))
        return np.asarray(sims[key].render_at(AgentPose(float(xy[0]), float(xy[1]), 0.0), spec)["v_rgb"])

    yield views
    for sim in sims.values():
        sim.close()


def _start_node(ctx, direct_views):
    """The navigation-graph viewpoint (of the first 12) where meshes change the most pixels."""
    g = ctx.navgraph.graph
    best = None
    for n in sorted(g.nodes)[:12]:
        xy = tuple(float(v) for v in g.nodes[n]["position"][:2])
        changed = int(np.any(direct_views(xy) != direct_views(xy, objects="meshes"), axis=-1).sum())
        if best is None or changed > best[0]:
            best = (changed, n, xy)
    assert best[0] > 200, best
    return best[1], best[2]


def _episode_file(ctx, xy, path):
    from vlnverse.tasks.episode import Episode, Goal, Instruction, save_episodes

    nav = ctx.maps.navigable
    free = np.argwhere(nav.free_mask())
    goal = np.ravel(nav.cell_to_world(free[len(free) // 2]))
    plan = ctx.planner.shortest_path(xy, tuple(goal))
    ep = Episode("h11-views", ctx.desc.scene_id, "home11.usda", "test", "fine_grained", [*xy, 0.0], 0.3,
                 [Goal([*map(float, goal), 0.0])], [[*p, 0.0] for p in plan.waypoints], plan.length,
                 [Instruction("find the sofa and stop next to it")])
    save_episodes(path, [ep])


def _received_image(request) -> np.ndarray:
    """The image of a chat request, decoded (PNG: exactly the agent's pixels)."""
    parts = request["body"]["messages"][-1]["content"]
    url = next(p["image_url"]["url"] for p in parts if p.get("type") == "image_url")
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).convert("RGB"))


def _run(ctx, url, episodes, out, objects, tmp_path):
    from vlnverse.eval.runner import run_eval

    agent = NamedSpec("navgpt", {"view_size": SIZE, "image_dir": str(tmp_path / "images"), "max_reprompts": 0})
    model = ModelSpec("openai", {"model": "nav-vlm", "base_url": url, "api_key_env": None, "cache": False,
                                 "max_retries": 0, "timeout": 10.0})
    cfg = EvalConfig(agent=agent, model=model, task="fine_grained", episodes=EpisodeSource(path=str(episodes)),
                     collision_mode="telhop", sensors=[SensorConfig("rgb", "rgb", 16, 16)], max_steps=2,
                     out=str(out), report=ReportConfig(enabled=False, frames=False, max_episodes=0),
                     render=RenderConfig(QUALITY, objects))
    cfg.validate()
    run_eval(cfg, progress=False, print_summary=False, scene_loader=lambda *a: ctx)
    record = json.loads((out / "episodes.jsonl").read_text().splitlines()[0])
    return record["agent_outputs"][0]


def test_mllm_agent_sees_the_runs_objects_and_never_reads_another_settings_cache(home, direct_views, tmp_path,
                                                                                  monkeypatch):
    node, xy = _start_node(home, direct_views)
    episodes = tmp_path / "episodes.jsonl"
    _episode_file(home, xy, episodes)
    cache_root = tmp_path / "views"
    build_scene_cache(home.with_render_options({"quality": QUALITY}), cache_root, size=SIZE)  # primitives only
    monkeypatch.setenv("VLNVERSE_VIEW_CACHE", str(cache_root))
    monkeypatch.setenv("VLNVERSE_CACHE", str(tmp_path / "user"))
    with openai_server(lambda body, n: "Action: STOP") as (url, reqs):
        prim = _run(home, url, episodes, tmp_path / "prim", "primitives", tmp_path)
        prim_image = _received_image(reqs[-1])
        meshed = _run(home, url, episodes, tmp_path / "meshes", "meshes", tmp_path)
        meshed_image = _received_image(reqs[-1])
        # the primitives run read the cache; the meshes run did not reuse those views: it rendered its own
        assert prim["node"] == node and prim["observation"]["source"] == "cache"
        assert meshed["node"] == node and meshed["observation"]["source"] == "render"
        assert prim_image.shape == meshed_image.shape == (prim_image.shape[0], 4 * SIZE, 3)
        assert int(np.any(prim_image != meshed_image, axis=-1).sum()) > 200
        # the image is the stitch of a direct render of the meshes home at the agent's pose
        from vlnverse.eval.mllm.views import make_candidates, stitch

        cands = make_candidates(xy, 0.3, [(c["target"], c["xy"]) for c in meshed["candidates"]], merge_distance=0.5)
        assert [c.to_dict() for c in cands] == meshed["candidates"]
        height = float(home.body.camera_height)
        want_meshes = stitch(direct_views(xy, objects="meshes"), 0.3, cands, camera_height=height)
        want_prim = stitch(direct_views(xy), 0.3, cands, camera_height=height)
        assert np.array_equal(meshed_image, want_meshes)
        assert np.array_equal(prim_image, want_prim)
        # with a meshes cache built, the meshes run reads it, and sees the same image
        summary = build_cache_meshes(home, cache_root, monkeypatch)
        assert summary["rendered"] == home.navgraph.num_nodes
        again = _run(home, url, episodes, tmp_path / "meshes2", "meshes", tmp_path)
        assert again["observation"]["source"] == "cache"
        assert np.array_equal(_received_image(reqs[-1]), want_meshes)
    # the primitives cache is the root's, as before the key existed (no settings in its manifest);
    # the meshes views are in their own folder, with theirs
    manifest = json.loads((cache_root / home.scene_id / "manifest.json").read_text())
    assert "objects" not in manifest and "quality" not in manifest
    assert np.array_equal(ViewCache(cache_root).views(home.scene_id, node), direct_views(xy))
    meshes_cache = ViewCache(cache_root, {"quality": QUALITY, "objects": "meshes"})
    assert meshes_cache.folder == cache_root / "render-default-meshes"
    assert meshes_cache.manifest(home.scene_id)["objects"] == "meshes"
    assert np.array_equal(meshes_cache.views(home.scene_id, node), direct_views(xy, objects="meshes"))


def build_cache_meshes(ctx, root, monkeypatch):
    """``build_cache`` (what ``vlnverse cache build --quality Q --objects meshes`` runs) on ``ctx``."""
    import vlnverse.tasks.base as base
    import vlnverse.tasks.dataset as dataset
    from vlnverse.eval.mllm.cache import build_cache

    monkeypatch.setattr(dataset, "resolve_scene_paths", lambda scenes: ["home11.usda"])
    monkeypatch.setattr(base, "load_scene_context", lambda path, body: ctx)
    return build_cache("home11", root, size=SIZE, quality=QUALITY, objects="meshes", progress=False)


def test_cache_key_differs_between_render_settings_and_old_manifests_are_the_default(home, tmp_path):
    assert render_folder(None) is None and render_folder({}) is None
    assert render_folder({"quality": "default"}) is None and render_folder({"objects": "primitives"}) is None
    keys = {render_folder({"quality": q, "objects": o}) for q in ("fast", "default", "high")
            for o in ("primitives", "meshes")}
    assert len(keys) == 6 and "render-default-meshes" in keys and "render-fast-primitives" in keys
    # a cache written before the settings were recorded: read as the default's, refused by a meshes run
    folder = tmp_path / "old" / home.scene_id
    folder.mkdir(parents=True)
    strip = np.arange(SIZE * 4 * SIZE * 3, dtype=np.uint32).reshape(SIZE, 4 * SIZE, 3).astype(np.uint8)
    Image.fromarray(strip).save(folder / "0.png")
    (folder / "manifest.json").write_text(json.dumps({"version": 1, "scene_id": home.scene_id, "size": SIZE,
                                                      "hfov_deg": 90.0, "nodes": {"0": [1.0, 2.0]}}))
    old = ViewCache(tmp_path / "old")
    assert old.render == ("default", "primitives") and old.views_at(home.scene_id, 0, (1.0, 2.0)).shape == (4, SIZE, SIZE, 3)
    assert ViewCache(tmp_path / "old", {"objects": "meshes"}).views_at(home.scene_id, 0, (1.0, 2.0)) is None
    # a manifest whose settings are not its folder's (copied by hand): one clear error
    moved = tmp_path / "old" / "render-default-meshes" / home.scene_id
    moved.mkdir(parents=True)
    (moved / "manifest.json").write_text((folder / "manifest.json").read_text())
    with pytest.raises(ConfigError) as err:
        ViewCache(tmp_path / "old", {"objects": "meshes"}).manifest(home.scene_id)
    line = str(err.value)
    assert "render-default-meshes" in line and "manifest.json" in line and "objects 'primitives'" in line
    assert "objects 'meshes'" in line


def test_viewpoints_backend_serves_the_views_of_the_runs_settings(home, direct_views, tmp_path):
    root = tmp_path / "views"
    with pytest.raises(ConfigError, match=r"cache build --quality default --objects meshes"):
        ViewpointSimulator(home.desc, home.body, cache=root, quality="default", objects="meshes")
    build_scene_cache(home.with_render_options({"objects": "meshes"}), root, size=SIZE)
    assert not (root / home.scene_id).exists()  # nothing in the default's folder
    with pytest.raises(ConfigError, match=r"no cached views.*expected run 'vlnverse cache build --quality default "
                                          r"--objects primitives' for"):
        ViewpointSimulator(home.desc, home.body, cache=root)
    sim = ViewpointSimulator(home.desc, home.body, cache=root, quality="default", objects="meshes")
    xy = tuple(float(v) for v in home.navgraph.graph.nodes[3]["position"][:2])
    obs = sim.reset(AgentPose(xy[0], xy[1], 0.0))
    assert np.array_equal(obs["views_rgb"], direct_views(xy, objects="meshes"))
    assert not np.array_equal(obs["views_rgb"], direct_views(xy))


def test_pixel_goal_and_free_space_views_use_the_contexts_render_options(home, tmp_path):
    from vlnverse.eval.free_space import DepthViews
    from vlnverse.eval.pixel_goal import Panorama

    meshed = home.with_render_options({"quality": QUALITY, "objects": "meshes"})
    assert meshed.navgraph is home.navgraph and meshed.maps is home.maps  # one navigation graph for the copies
    assert home.with_render_options({}) is home and meshed.with_render_options(meshed.render_options) is meshed
    xy = tuple(float(v) for v in home.navgraph.graph.nodes[6]["position"][:2])
    pano = Panorama(SIZE)
    rgb_p, depth_p = pano.render(home, xy)
    rgb_m, depth_m = pano.render(meshed, xy)
    pano.close()
    sim = make_simulator(home.desc, home.body, sensors=[], quality=QUALITY, objects="meshes")
    spec = PanoramaSpec.of(name="pix", views=4, width=SIZE, height=SIZE, hfov_deg=90.0, modalities=("rgb", "depth"),
                           max_depth=10.0)
    want = sim.render_at(AgentPose(xy[0], xy[1], 0.0), spec)
    sim.close()
    assert np.array_equal(rgb_m, want["pix_rgb"]) and np.array_equal(depth_m, want["pix_depth"])
    assert int(np.any(rgb_m != rgb_p, axis=-1).sum()) > 100
    depth = DepthViews(size=SIZE)
    free_p, free_m = depth.depth(home, xy), depth.depth(meshed, xy)
    again = depth.depth(home, xy)
    depth.close()
    assert np.array_equal(again, free_p)  # kept per render settings: the meshes views did not replace it
    assert float(np.mean(np.abs(free_m - free_p) > 0.01)) > 0.01  # the meshes' shapes, not the primitives'


def test_default_settings_render_what_the_backend_defaults_render(home):
    """An eval at the default ``render`` hands the agents ``{"quality": "default"}``: the same
    pixels as the simulator built without options (what agents rendered before)."""
    from vlnverse.eval.mllm.views import ViewRenderer

    xy = tuple(float(v) for v in home.navgraph.graph.nodes[2]["position"][:2])
    renderer = ViewRenderer(SIZE)
    bare = renderer.render(home.desc, home.body, xy)
    run_default = renderer.render(home.desc, home.body, xy, RenderConfig().sim_options())
    renderer.close()
    assert np.array_equal(bare, run_default)


def test_cache_build_cli_renders_the_asked_settings_into_their_folder(tmp_path, capsys):
    """``cache build`` without ``--objects`` draws meshes (what the MLLM agents it serves see)."""
    from vlnverse.cli import main

    assert main(["cache", "build", "--scenes", "home_0014", "--size", "16", "--out", str(tmp_path),
                 "--no-progress"]) == 0
    printed = json.loads(capsys.readouterr().out)
    folder = tmp_path / "render-default-meshes"
    assert printed["folder"] == str(folder) and printed["rendered"] == printed["viewpoints"] > 5
    manifest = json.loads((folder / "home_0014" / "manifest.json").read_text())
    assert (manifest["quality"], manifest["objects"]) == ("default", "meshes")
    assert json.loads((folder / "build_summary.json").read_text())["rendered"] == printed["rendered"]
    assert not (tmp_path / "home_0014").exists() and not (tmp_path / "build_summary.json").exists()
    node = int(next(iter(manifest["nodes"])))
    assert ViewCache(tmp_path, {"objects": "meshes"}).views("home_0014", node).shape == (4, 16, 16, 3)
    assert ViewCache(tmp_path).manifest("home_0014") is None  # a default run finds nothing to reuse
    with pytest.raises(SystemExit) as exit_:
        main(["cache", "build", "--scenes", "home_0014", "--objects", "clay", "--out", str(tmp_path)])
    assert exit_.value.code == 2 and "--objects: invalid choice: 'clay'" in capsys.readouterr().err
