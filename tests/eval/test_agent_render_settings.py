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
from vlnverse.eval.config import EpisodeSource, EvalConfig, ModelSpec, NamedSpec, RenderConfig, ReportConfig, SensorConfig
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
