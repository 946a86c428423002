"""MV-DualVLN pixel goals (VCN-Bench): back-projection by hand, the oracle executor under Tel-Hop
reaching the back-projected pixel, re-prompts on bad pixels, frame selection and short videos."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from vlnverse.core.errors import ConfigError
from vlnverse.eval.pixel_goal import PixelGoalError, floor_to_pixel, parse_pixel_goal, pixel_to_floor

SIZE = 64


def test_pixel_to_floor_by_hand_and_back():
    # a flat floor seen by a level 90° camera 0.88 m high facing east: the pixel row v looks
    # atan((v + 0.5 − 32) / 32) below the horizon, so the floor is 0.88 · 32 / (v + 0.5 − 32) ahead
    depth = np.full((SIZE, SIZE), 10.0)                  # no hit reads max_depth
    v, u = 52, 32
    ahead = 0.88 * 32 / (v + 0.5 - 32)
    depth[v, u] = ahead                                   # planar depth of a floor point straight ahead
    p = pixel_to_floor(u, v, depth, 0.0, (1.0, 2.0), 0.88)
    assert p[0] == pytest.approx(1.0 + ahead, abs=1e-6)
    assert p[1] == pytest.approx(2.0 - (u + 0.5 - 32) / 32 * ahead, abs=1e-6)  # x right in the image = −y (south)
    view, u2, v2 = floor_to_pixel(p, (1.0, 2.0), 0.0, 0.88, SIZE)
    assert (view, u2, v2) == (0, u, v)
    # facing north (yaw 90°), the same world point is in the Right view (index 3)
    assert floor_to_pixel(p, (1.0, 2.0), math.pi / 2, 0.88, SIZE)[0] == 3
    with pytest.raises(PixelGoalError, match="outside"):
        pixel_to_floor(70, 5, depth, 0.0, (0, 0), 0.88)
    with pytest.raises(PixelGoalError, match="no depth"):
        pixel_to_floor(10, 10, depth, 0.0, (0, 0), 0.88)
    depth[10, 10] = 2.0                                   # above the horizon at 2 m: a wall
    with pytest.raises(PixelGoalError, match="wall or an object"):
        pixel_to_floor(10, 10, depth, 0.0, (0, 0), 0.88)


def test_parse_pixel_goal():
    assert parse_pixel_goal("Frame: 12\nView: left\nPixel: (30, 50)") == {"frame": 12, "stop": False, "view": "Left",
                                                                         "u": 30.0, "v": 50.0}
    assert parse_pixel_goal("Frame: 3\nAction: STOP") == {"frame": 3, "stop": True}
    assert "error" in parse_pixel_goal("I would go left.")


@pytest.fixture(scope="module")
def home14():
    from vlnverse.core.body import load_body
    from vlnverse.paths import scenes_dir
    from vlnverse.tasks.base import load_scene_context

    return load_scene_context(scenes_dir() / "home_0014.usd", load_body("r2r_ce"), 0.05)


def _open_east_start(ctx):
    """A navigation-graph viewpoint with at least 2.5 m of navigable floor to its east."""
    from vlnverse.eval.free_space import map_clearance

    g = ctx.navgraph.graph
    for n in sorted(g.nodes):
        xy = np.asarray(g.nodes[n]["position"][:2], dtype=float)
        if map_clearance(ctx.maps.navigable, xy, [0.0])[0] >= 2.5:
            return xy
    raise AssertionError("no open start")


def _episode(ctx, xy, tmp_path, video_len=None):
    from vlnverse.tasks.episode import Episode, Goal, Instruction

    ep = Episode("pix-0", ctx.scene_id, str(ctx.scene_path), "test", "video_contextualized", [*xy, 0.0], 0.0,
                 [Goal([xy[0] + 2.0, xy[1], 0.0], radius=1.0)], [[*xy, 0.0], [xy[0] + 2.0, xy[1], 0.0]], 2.0,
                 [Instruction("go to the room you saw in the video")])
    if video_len is not None:
        np.savez(tmp_path / "tour.npz", frames=np.zeros((video_len, 8, 8, 3), np.uint8))
        ep.info.update({"video": "tour.npz", "window": [0, video_len], "target_frames": [4], "kind": "room",
                        "target_room_id": 0})
    return ep


def test_executor_reaches_the_back_projected_pixel_under_telhop(home14, tmp_path):
    from mllm_server import openai_server
    from vlnverse.run.agents import make_agent
    from vlnverse.run.modes import make_mode
    from vlnverse.run.models import make_model
    from vlnverse.eval.pixel_goal import Panorama
    from vlnverse.run.episodes import RunSettings
    from vlnverse.run.rollout import run_episode
    from vlnverse.sim import make_simulator

    xy = _open_east_start(home14)
    u, v = SIZE // 2, 50
    answers = iter(["Frame: 4\nView: Front\nPixel: 32, 2000",      # outside the image: re-prompted
                    f"Frame: 4\nView: Front\nPixel: {u}, {v}",        # a floor pixel straight ahead
                    "Frame: 4\nAction: STOP"])
    with openai_server(lambda body, n: {"text": next(answers)}) as (url, reqs):
        model = make_model("openai", {"model": "vlm", "base_url": url, "api_key_env": None, "cache": False,
                                      "backoff": 0.01, "max_retries": 1, "timeout": 5.0})
        agent = make_agent("mv_dualvln", {"view_size": SIZE, "video_root": str(tmp_path), "video_frames": 50},
                           model=model)
        sim = make_simulator(home14.desc, home14.body, sensors=[])
        try:
            mode = make_mode("telhop", sim, planner=home14.planner)
            settings = RunSettings(max_steps=6, success_distance=1.0, body=home14.body, resolution=0.05,
                                   task_type="video_contextualized")
            rec = run_episode(_episode(home14, xy, tmp_path, video_len=30), home14, sim, mode, agent, settings)
        finally:
            sim.close()
            agent.panorama.close()
    # independent back-projection of the same pixel from freshly rendered views
    pano = Panorama(SIZE)
    _, depth = pano.render(home14, xy)
    pano.close()
    floor = pixel_to_floor(u, v, depth[0], 0.0, xy, home14.body.camera_height)
    assert floor[0] - xy[0] == pytest.approx(0.88 * 32 / (v + 0.5 - 32), abs=0.05)  # flat floor ahead
    first = rec["agent_outputs"][0]
    assert first["video_short"] == {"requested": 50, "available": 30} and first["images"] == 30 + 8
    assert "outside" in first["attempts"][0]["error"] and len(first["attempts"]) == 2
    end = np.asarray(rec["trajectory"][1][:2])
    assert np.linalg.norm(end - floor) <= 0.3
    assert rec["actions"][-2] == {"type": "SelectFrame", "frame": 4}
    assert rec["actions"][-1] == "STOP" and rec["metrics"]["Rid_SR"] == 1.0
    assert len(reqs) == 3


def test_a_wall_pixel_is_reprompted_then_recorded_invalid(home14, tmp_path):
    from vlnverse.run.agents import AgentState, make_agent
    from vlnverse.eval.mllm.agents import GenerationError
    from vlnverse.run.models import make_model
    from vlnverse.sim.types import AgentPose

    xy = _open_east_start(home14)
    model = make_model("scripted", {"answers": ["Frame: 0\nView: Front\nPixel: 32, 2"], "cycle": True})
    agent = make_agent("mv_dualvln", {"view_size": SIZE, "max_reprompts": 1}, model=model)
    agent.reset(_episode(home14, xy, tmp_path), home14)
    state = AgentState(step=0, pose=AgentPose(float(xy[0]), float(xy[1]), 0.0), max_steps=5, success_distance=1.0,
                       context=home14, mode="telhop")
    with pytest.raises(GenerationError, match="invalid pixel goal"):
        agent.act({}, state)
    agent.panorama.close()
    step = agent.outputs[-1]
    assert len(step["attempts"]) == 2 and all("error" in a for a in step["attempts"])
    assert "wall or an object" in step["invalid"] or "no depth" in step["invalid"]


# ---------------------------------------------------------------------------------------------
# export-sft (frontier-based pixel goals)


def test_seen_cells_and_frontier_by_hand():
    from vlnverse.eval.sft import frontier_cells, seen_cells

    blocked = np.zeros((20, 20), bool)
    blocked[:, 10] = True                                  # a wall at column 10 (x = 1.0 .. 1.1 m)
    seen = seen_cells(blocked, np.zeros(2), 0.1, [(0.55, 1.05)], sight=3.0)
    assert seen[10, 5] and seen[10, 9] and seen[10, 10]    # up to and including the wall
    assert not seen[10, 11:].any()                          # nothing behind it
    navigable = np.ones((20, 20), bool)
    navigable[:, 10] = False
    front = frontier_cells(navigable, seen)
    assert len(front) == 0                                  # the wall closes the seen side
    navigable[10, 10] = True                                # a door in the wall: its seen cell borders unseen floor
    assert [tuple(c) for c in frontier_cells(navigable, seen)] == [(10, 10)]


def _vc_episode(ctx, tmp_path):
    """A video-contextualized episode on home_0014 with a synthetic prior video: the goal is an
    object in another room than the start's."""
    from vlnverse.tasks.episode import Episode, Goal, Instruction

    g = ctx.navgraph.graph
    start = np.asarray(g.nodes[4]["position"][:2], dtype=float)
    start_room = g.nodes[4]["room_id"]
    obj = next(o for o in ctx.desc.objects if getattr(o, "room_id", None) not in (None, start_room)
               and ctx.planner.geodesic_distance(start, np.asarray(o.position[:2])) < 12)
    np.savez(tmp_path / "tour.npz", frames=np.zeros((20, 8, 8, 3), np.uint8))
    return Episode("vc-sft-0", ctx.scene_id, str(ctx.scene_path), "val_unseen", "video_contextualized",
                   [*start, 0.0], 0.0, [Goal(list(obj.position[:3]), radius=1.0, object_id=int(obj.instance_id))],
                   [[*start, 0.0], list(obj.position[:3])], 5.0, [Instruction(f"find the {obj.category}")],
                   info={"video": "tour.npz", "window": [0, 20], "target_frames": [7, 8], "kind": "instance",
                         "target_object_id": int(obj.instance_id)})


def test_export_sft_pixel_goals_back_project_onto_navigable_cells(home14, tmp_path):
    from vlnverse.eval.mllm.views import snapped_front
    from vlnverse.eval.pixel_goal import VIEW_NAMES, Panorama
    from vlnverse.eval.sft import export_sft
    from vlnverse.tasks.episode import save_episodes

    save_episodes(tmp_path / "eps.jsonl", [_vc_episode(home14, tmp_path)])
    counts = export_sft(tmp_path / "eps.jsonl", tmp_path / "sft", view_size=SIZE, video_frames=50, max_samples=6)
    lines = [json.loads(x) for x in (tmp_path / "sft" / "sft.jsonl").read_text().splitlines()]
    assert counts["samples"] == len(lines) >= 2 and counts["episodes"] == 1
    moves = [x for x in lines if not x["target"]["stop"]]
    assert moves
    pano = Panorama(SIZE)
    try:
        for x in moves:
            t = x["target"]
            assert x["messages"][-1]["content"].startswith(f"Frame: {t['frame']}\nView: {t['view']}\nPixel: ")
            assert t["frame"] in (7, 8)                     # a shown frame of the target
            assert len(x["images"]) == 20 + 8 and all((tmp_path / "sft" / p).is_file() for p in x["images"])
            xy, yaw = t["pose"][:2], t["pose"][2]
            _, depth = pano.render(home14, xy)
            k = VIEW_NAMES.index(t["view"])
            g = (snapped_front(yaw) + k) % 4
            floor = pixel_to_floor(t["u"], t["v"], depth[g], g * math.pi / 2, xy, home14.body.camera_height,
                                   floor_tolerance=home14.body.step_height)
            assert home14.maps.navigable.is_free(floor[None])[0], t
            assert floor == pytest.approx(t["waypoint"], abs=0.02)
    finally:
        pano.close()
    if lines[-1]["target"]["stop"]:
        assert lines[-1]["messages"][-1]["content"].endswith("Action: STOP")


def test_export_sft_refuses_other_task_types(tmp_path, home14):
    from vlnverse.eval.sft import export_sft
    from vlnverse.tasks.episode import save_episodes

    ep = _vc_episode(home14, tmp_path)
    ep.task_type = "fine_grained"
    save_episodes(tmp_path / "eps.jsonl", [ep])
    with pytest.raises(ConfigError, match="task_type"):
        export_sft(tmp_path / "eps.jsonl", tmp_path / "sft")


def test_executor_reaches_the_back_projected_pixel_under_strict(home14, tmp_path):
    """Strict: the waypoint controller drives the body through physics to the floor point."""
    from vlnverse.run.agents import make_agent
    from vlnverse.run.modes import make_mode
    from vlnverse.run.models import make_model
    from vlnverse.eval.pixel_goal import Panorama
    from vlnverse.run.episodes import RunSettings
    from vlnverse.run.rollout import run_episode
    from vlnverse.sim import make_simulator

    xy = _open_east_start(home14)
    u, v = SIZE // 2, 50
    model = make_model("scripted", {"answers": [f"Frame: 0\nView: Front\nPixel: {u}, {v}", "Frame: 0\nAction: STOP"]})
    agent = make_agent("mv_dualvln", {"view_size": SIZE}, model=model)
    sim = make_simulator(home14.desc, home14.body, sensors=[])
    try:
        mode = make_mode("strict", sim)
        settings = RunSettings(max_steps=4, success_distance=1.0, body=home14.body, resolution=0.05,
                               task_type="video_contextualized")
        rec = run_episode(_episode(home14, xy, tmp_path), home14, sim, mode, agent, settings)
    finally:
        sim.close()
        agent.panorama.close()
    pano = Panorama(SIZE)
    _, depth = pano.render(home14, xy)
    pano.close()
    floor = pixel_to_floor(u, v, depth[0], 0.0, xy, home14.body.camera_height)
    assert rec["termination"] == "stop", rec["termination"]
    assert np.linalg.norm(np.asarray(rec["trajectory"][-1][:2]) - floor) <= 0.3


def test_export_sft_cli(home14, tmp_path, capsys):
    from vlnverse.cli import main
    from vlnverse.tasks.episode import save_episodes

    save_episodes(tmp_path / "eps.jsonl", [_vc_episode(home14, tmp_path)])
    assert main(["data", "export-sft", str(tmp_path / "eps.jsonl"), "--task", "video_contextualized",
                 "--out", str(tmp_path / "sft"), "--view-size", "32", "--max-samples", "2"]) == 0
    assert "samples" in capsys.readouterr().out and (tmp_path / "sft" / "sft.jsonl").is_file()
    assert main(["data", "export-sft", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "x")]) == 2
    assert "missing.jsonl: no episode file" in capsys.readouterr().err


def test_bad_agent_parameters_and_a_missing_prior_video_are_config_errors(home14, tmp_path):
    """Issue 27's bad input: parameters out of range and no chat model are one-line errors naming
    the field; an episode whose prior video is gone names the file when the episode starts."""
    from vlnverse.run.agents import make_agent
    from vlnverse.run.models import make_model

    model = make_model("scripted", {"answers": ["Frame: 0\nAction: STOP"]})
    with pytest.raises(ConfigError, match=r"agent.params.video_frames: got 0 \(expected a number in \[1, "):
        make_agent("mv_dualvln", {"video_frames": 0, "view_size": SIZE}, model=model)
    with pytest.raises(ConfigError, match=r"agent.params.snap: got -1"):
        make_agent("mv_dualvln", {"snap": -1, "view_size": SIZE}, model=model)
    with pytest.raises(ConfigError, match="a chat model"):
        make_agent("mv_dualvln", {"view_size": SIZE})
    agent = make_agent("mv_dualvln", {"view_size": SIZE, "video_root": str(tmp_path)}, model=model)
    try:
        ep = _episode(home14, _open_east_start(home14), tmp_path, video_len=10)
        (tmp_path / "tour.npz").unlink()
        with pytest.raises(ConfigError, match="prior video not found") as err:
            agent.reset(ep, home14)
        assert "tour.npz" in str(err.value) and "\n" not in str(err.value)
    finally:
        agent.panorama.close()


# ---------------------------------------------------------------------------------------------
# issue 55: prior videos wherever the dataset is, the image budget, a stop without a frame


def _noise_video(path, n, seed=0):
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, frames=np.random.default_rng(seed).integers(0, 255, (n, 16, 16, 3), dtype=np.uint8))


def test_prior_video_is_found_in_the_run_dataset_folder(home14, tmp_path, monkeypatch):
    """``episodes: generate`` writes ``assets/tours/*.npz`` under ``<out>/dataset``; the runner
    gives the agent that folder, so no ``video_root`` is needed, from any working folder."""
    import yaml

    from vlnverse.run.agents import make_agent
    from vlnverse.eval.config import load_eval_config
    from vlnverse.run.models import make_model
    from vlnverse.eval.scene_job import make_run_agent

    cfg_path = tmp_path / "pix.yaml"
    cfg_path.write_text(yaml.safe_dump({
        "agent": {"name": "mv_dualvln", "params": {"view_size": SIZE}}, "model": {"name": "scripted", "params": {
            "answers": ["Frame: 0\nAction: STOP"]}}, "task": "video_contextualized",
        "episodes": {"generate": {"scenes": "val_unseen", "episodes_per_scene": 1}}, "collision_mode": "telhop",
        "out": str(tmp_path / "run")}))
    agent = make_run_agent(load_eval_config(cfg_path), out=tmp_path / "run")
    assert agent.asset_roots == [tmp_path / "run" / "dataset"]
    _noise_video(tmp_path / "run" / "dataset" / "assets" / "tours" / "t.npz", 12)
    ep = _episode(home14, _open_east_start(home14), tmp_path)
    ep.info.update({"video": "assets/tours/t.npz", "window": [0, 12], "target_frames": [3], "kind": "room",
                    "target_room_id": 0})
    monkeypatch.chdir(tmp_path / "run")  # not the dataset folder
    agent.reset(ep, home14)
    assert len(agent._frame_ids) == 12
    # an explicit video_root still wins, and a missing file names where it was looked for
    other = make_agent("mv_dualvln", {"view_size": SIZE, "video_root": str(tmp_path / "elsewhere")},
                       model=make_model("scripted", {"answers": ["STOP"]}))
    other.asset_roots = [tmp_path / "run" / "dataset"]
    with pytest.raises(ConfigError, match="elsewhere"):
        other.reset(ep, home14)


def test_image_budget_caps_frames_and_bytes(home14, tmp_path):
    """At most ``video_frames`` frames; over ``max_image_bytes`` fewer, evenly spaced, first and
    last kept; the prompt lists exactly the frames sent; the 8 views always go."""
    from vlnverse.run.agents import AgentState, make_agent
    from vlnverse.run.models import make_model
    from vlnverse.sim.types import AgentPose

    _noise_video(tmp_path / "tour.npz", 40)
    xy = _open_east_start(home14)
    sent = []

    def respond(messages, images):
        sent.append((messages[-1]["content"], [len(b) for b in images]))
        return "Frame: 0\nAction: STOP"

    def step(**params):
        agent = make_agent("mv_dualvln", {"view_size": SIZE, "video_root": str(tmp_path), **params},
                           model=make_model("scripted", {"respond": respond}))
        ep = _episode(home14, xy, tmp_path)
        ep.info.update({"video": "tour.npz", "window": [0, 40], "target_frames": [0], "kind": "room",
                        "target_room_id": 0})
        agent.reset(ep, home14)
        try:
            agent.act({}, AgentState(step=0, pose=AgentPose(float(xy[0]), float(xy[1]), 0.0), max_steps=5,
                                     success_distance=1.0, context=home14, mode="telhop"))
        finally:
            agent.panorama.close()
        return agent.outputs[0]["image_budget"], sent[-1]

    full, (prompt, sizes) = step(video_frames=30)
    assert full["frames"] == 30 == full["frames_available"] and len(sizes) == 38 and full["bytes"] == sum(sizes)
    views, frame = sum(sizes[-8:]), max(sizes[:-8])
    budget = views + 7 * frame
    capped, (prompt, sizes) = step(video_frames=30, max_image_bytes=budget)
    assert 1 < capped["frames"] <= 7 and len(sizes) == capped["frames"] + 8 and sum(sizes) <= budget
    listed = [int(f) for f in __import__("re").findall(r"= frame (\d+)", prompt)]
    assert len(listed) == capped["frames"] and listed[0] == 0 and listed[-1] == 39  # the window's ends
    tiny, (_, sizes) = step(video_frames=30, max_image_bytes=1)
    assert tiny["frames"] == 0 and len(sizes) == 8  # the views are always sent


def test_a_stop_without_a_frame_is_asked_for_the_frame_once(home14, tmp_path):
    from vlnverse.run.agents import AgentState, make_agent
    from vlnverse.run.models import make_model
    from vlnverse.sim.types import AgentPose
    from vlnverse.tasks.actions import SelectFrame
    from vlnverse.sim.types import DiscreteAction

    assert parse_pixel_goal("STOP") == {"frame": None, "stop": True}
    assert parse_pixel_goal("Action: STOP\nView: Front\nPixel: 3, 4") == {"frame": None, "stop": True}
    xy = _open_east_start(home14)
    state = AgentState(step=0, pose=AgentPose(float(xy[0]), float(xy[1]), 0.0), max_steps=5, success_distance=1.0,
                       context=home14, mode="telhop")
    for answers, reprompts, first, second in ((["STOP", "Frame: 4\nSTOP"], 2, SelectFrame(4), DiscreteAction.STOP),
                                              (["Action: STOP"], 0, DiscreteAction.STOP, None)):
        agent = make_agent("mv_dualvln", {"view_size": SIZE, "video_root": str(tmp_path), "max_reprompts": reprompts},
                           model=make_model("scripted", {"answers": answers}))
        agent.reset(_episode(home14, xy, tmp_path, video_len=10), home14)
        try:
            assert agent.act({}, state) == first
            if second is not None:
                assert "without naming the goal frame" in agent.outputs[0]["attempts"][0]["error"]
                assert agent.act({}, state) == second
        finally:
            agent.panorama.close()
