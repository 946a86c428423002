"""ROAM (VLN-NF): the Table-2 metrics by hand, FREE against the navigable map on shipped homes,
the room classifier, and ROAM / the baselines end to end against the scripted chat server."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from vlnverse.core.errors import ConfigError
from vlnverse.run import metrics as M

# ---------------------------------------------------------------------------------------------
# metrics (hand-computed)


def test_reach_and_explore_lengths_by_hand():
    path = [[0, 0], [3, 0], [3, 4], [6, 4], [6, 8]]          # steps 3, 4, 3, 4
    inside = [False, False, True, True, False]
    assert M.reach_length(path, inside) == pytest.approx(7.0)   # 3 + 4 up to the first in-room point
    assert M.exploration_length(path, inside) == pytest.approx(3.0)  # only the step in -> in
    assert M.reach_length(path, [False] * 5) is None
    assert M.exploration_length([[1, 1]], [True]) == 0.0
    assert M.reach_length(path, [True] + [False] * 4) == 0.0
    with pytest.raises(ValueError):
        M.reach_length(path, [True, False])


def test_reach_spl_by_hand():
    assert M.reach_spl(True, 10.0, 5.0) == pytest.approx(0.5)     # 5 / max(10, 5)
    assert M.reach_spl(True, 4.0, 5.0) == pytest.approx(1.0)      # shorter than the geodesic: capped
    assert M.reach_spl(False, 4.0, 5.0) == 0.0
    assert M.reach_spl(True, None, 5.0) == 0.0
    assert M.reach_spl(True, 0.0, 0.0) == 1.0                     # started in the room
    with pytest.raises(ValueError):
        M.reach_spl(True, 1.0, float("nan"))


def test_rev_spl_and_table_rows_by_hand():
    from vlnverse.eval.roam_table import format_table, table_rows

    # S_r S_d C l/max(p,l) min(1,p/l): 1 * 1 * 0.75 * 4/8 * 1 = 0.375 ; p < l: 0.75 * 1 * 2/4 = 0.375
    assert M.rev_spl(True, True, 0.75, 8.0, 4.0) == pytest.approx(0.375)
    assert M.rev_spl(True, True, 0.75, 2.0, 4.0) == pytest.approx(0.375)
    summary = {"overall": {"means": {"coverage": 0.5, "len_reach": 7.04, "len_explore": 3.0, "reach_SR": 1.0,
                                     "RD_SR": 0.5, "reach_SPL": 0.25, "REV_SPL": 0.125}}}
    rows = table_rows({"ROAM": summary})
    assert rows == [["ROAM", "50.0%", "7.0", "3.0", "100.0%", "50.0%", "25.0%", "12.5%"]]
    text = format_table(rows)
    assert text.splitlines()[0].startswith("Method") and "REV-SPL" in text and "12.5%" in text


# ---------------------------------------------------------------------------------------------
# FREE


@pytest.fixture(scope="module")
def home14():
    from vlnverse.core.body import load_body
    from vlnverse.paths import scenes_dir
    from vlnverse.tasks.base import load_scene_context

    return load_scene_context(scenes_dir() / "home_0014.usd", load_body("r2r_ce"), 0.05)


def _free_errors(ctx):
    from vlnverse.eval.free_space import DepthViews, map_clearance

    depth = DepthViews(size=96)
    g = ctx.navgraph.graph
    errors = []
    for n in sorted(g.nodes):
        xy = np.asarray(g.nodes[n]["position"][:2], dtype=float)
        heads = [math.atan2(*(np.asarray(g.nodes[m]["position"][:2]) - xy)[::-1]) for m in g.neighbors(n)]
        heads += [k * math.pi / 6 for k in range(12)]
        errors += list(depth.clearance(ctx, xy, heads) - map_clearance(ctx.maps.navigable, xy, heads))
    depth.close()
    return np.abs(np.array(errors))


def test_free_clearance_matches_a_raycast_on_the_navigable_map(home14):
    err = _free_errors(home14)
    assert len(err) > 200
    assert np.median(err) <= 0.05
    assert (err <= 0.2).mean() >= 0.95, f"{(err <= 0.2).mean():.3f} of {len(err)} rays within 0.2 m"


@pytest.mark.slow
def test_free_clearance_on_a_second_home():
    from vlnverse.core.body import load_body
    from vlnverse.paths import scenes_dir
    from vlnverse.tasks.base import load_scene_context

    err = _free_errors(load_scene_context(scenes_dir() / "home_0016.usd", load_body("r2r_ce"), 0.05))
    assert (err <= 0.2).mean() >= 0.95 and np.median(err) <= 0.05


def test_free_clearance_on_a_synthetic_wall():
    """A wall 2 m east (points from x = 2 at every height): clearance east = 2 − margin; west open."""
    from vlnverse.eval.free_space import clearance

    ys, zs = np.meshgrid(np.linspace(-3, 3, 121), np.linspace(0.0, 1.5, 31))
    wall = np.stack([np.full(ys.size, 2.0), ys.ravel(), zs.ravel()], axis=1)
    floor = np.stack([np.random.default_rng(0).uniform(-4, 2, 500), np.random.default_rng(1).uniform(-3, 3, 500),
                      np.zeros(500)], axis=1)
    east, west, north_east = clearance(np.concatenate([wall, floor]), (0.0, 0.0), [0.0, math.pi, math.pi / 4],
                                       margin=0.18, max_range=5.0, body_height=0.88)
    assert east == pytest.approx(2.0 - 0.18, abs=0.06)
    assert west == 5.0
    assert north_east == pytest.approx(2.0 * math.sqrt(2) - 0.18 * math.sqrt(2), abs=0.1)


# ---------------------------------------------------------------------------------------------
# parsing, room classifier, bad input


def test_parse_target_room_and_object():
    from vlnverse.eval.roam import parse_target

    assert parse_target("Go to the living room and find the large book on the coffee table.") == ("living_room", "book")
    assert parse_target("Hunt down the photo frame in the bedroom, k?") == ("bedroom", "picture_frame")
    assert parse_target("Find the toaster somewhere.") == (None, "toaster")
    assert parse_target("") == (None, None)


def test_room_samples_are_the_room_maps_labels_and_what_is_in_sight(home14):
    """The room classifier's data (room-level supervision only): each in-room viewpoint's label is
    the room maps' room type, its observation the categories in line of sight; accuracy by hand."""
    from vlnverse.run.rooms import multi_hot, node_room_types, room_accuracy, scene_samples, semantic_features

    seen14, labels14, nodes = scene_samples(home14)
    truth = node_room_types(home14)
    assert labels14 == [truth[n] for n in nodes] and len(nodes) >= 10
    vocab14 = sorted({c for s in seen14 for c in s})
    x = np.array([semantic_features(home14, home14.navgraph.graph.nodes[n]["position"][:2], vocab14) for n in nodes])
    assert np.array_equal(x, multi_hot(seen14, vocab14))
    assert x.sum() > len(nodes)  # the viewpoints see objects

    class ByBed:  # "bedroom" when a bed is in sight, else "kitchen": right on 3 of these 4
        categories = ["bed", "oven"]

        def predict(self, feats):
            return ["bedroom" if row[0] else "kitchen" for row in feats]

    acc = room_accuracy(ByBed(), [([{"bed"}, {"oven"}, set()], ["bedroom", "kitchen", "bedroom"]), ([{"bed"}], ["bedroom"])])
    assert acc == {"viewpoints": 4, "accuracy": 0.75, "per_room": {"bedroom": 0.6667, "kitchen": 1.0}}


def test_bad_roam_parameters_are_config_errors(tmp_path):
    from vlnverse.run.agents import make_agent
    from vlnverse.run.models import make_model

    model = make_model("scripted", {"answers": ["Action: 1"]})
    with pytest.raises(ConfigError, match="room_classifier"):
        make_agent("roam", {}, model=model)           # the classifier is the default: a checkpoint is needed
    # a missing / unreadable checkpoint: tests/learn/test_roam_learned.py (the loader needs torch)
    with pytest.raises(ConfigError, match="stop_criterion"):
        make_agent("roam", {"room_labels": "ground_truth", "stop_criterion": "never"}, model=model)
    with pytest.raises(ConfigError, match="tau"):
        make_agent("roam", {"room_labels": "ground_truth", "tau": 2}, model=model)


# ---------------------------------------------------------------------------------------------
# end to end with the scripted chat server


@pytest.fixture(scope="module")
def fp_pairs(home14):
    from vlnverse.tasks.base import load_task_config
    from vlnverse.tasks.types.false_premise.generator import FalsePremiseTask

    eps = FalsePremiseTask(load_task_config("false_premise")).generate(home14, np.random.default_rng(3), 6, "val_unseen")
    assert [e.info["decision"] for e in eps] == ["FOUND", "NOT_FOUND"] * 3
    return eps


@pytest.fixture(scope="module")
def home14_views(home14, tmp_path_factory):
    from vlnverse.eval.mllm.cache import build_scene_cache

    root = tmp_path_factory.mktemp("views")
    build_scene_cache(home14, root, size=32)
    return root


def _run(ctx, episodes, agent_name, params, url, tmp, max_steps=40):
    from vlnverse.run.agents import make_agent
    from vlnverse.eval.mllm.cache import ViewpointSimulator
    from vlnverse.run.models import make_model
    from vlnverse.run.modes import make_mode
    from vlnverse.run.episodes import RunSettings
    from vlnverse.run.rollout import run_episode

    model = make_model("openai", {"model": "nav-vlm", "base_url": url, "api_key_env": None, "cache": False,
                                  "backoff": 0.01, "max_retries": 1, "timeout": 5.0})
    agent = make_agent(agent_name, {"image_dir": str(tmp / "img"), "view_size": 32, "max_reprompts": 1, **params},
                       model=model)
    sim = ViewpointSimulator(ctx.desc, ctx.body, cache=params["view_cache"])
    settings = RunSettings(max_steps=max_steps, success_distance=3.0, body=ctx.body, resolution=0.05,
                           task_type="false_premise")
    out = []
    for ep in episodes:
        mode = make_mode("graph", sim, navgraph=ctx.navgraph.graph, planner=ctx.planner)
        out.append(run_episode(ep, ctx, sim, mode, agent, settings))
    return out


def _nav_reply(body, n):
    """The explorer's model: FOUND when its prompt says the detector sees the object here, else
    NOT_FOUND at once (ROAM must overrule it until the room is searched)."""
    from mllm_server import message_text

    if "is in view here" in message_text(body["messages"][-1]):
        return {"text": "I can see it.\nAction: FOUND"}
    return {"text": "The object is not here.\nAction: NOT_FOUND"}


def test_roam_reaches_the_room_and_decides_right_on_present_and_absent_targets(home14, fp_pairs, home14_views,
                                                                             tmp_path, monkeypatch):
    from mllm_server import openai_server

    monkeypatch.setenv("VLNVERSE_VIEW_CACHE", str(home14_views))
    with openai_server(_nav_reply) as (url, reqs):
        records = _run(home14, fp_pairs[:4], "roam", {"room_labels": "ground_truth", "view_cache": str(home14_views)},
                       url, tmp_path)
        roam_requests = len(reqs)
        baseline = _run(home14, fp_pairs[:2], "navgpt", {"view_cache": str(home14_views)}, url, tmp_path)
    for ep, rec in zip(fp_pairs[:4], records):
        m = rec["metrics"]
        assert m["reach_SR"] == 1.0, (ep.episode_id, rec["actions"])
        assert rec["actions"][-1] == ep.info["decision"], (ep.episode_id, rec["actions"][-1])
        assert m["RD_SR"] == 1.0 and m["len_reach"] > 0 and 0 < m["reach_SPL"] <= 1.0
        plan = rec["agent_outputs"][0]
        assert plan["target_room"] == ep.info["target_room_type"] and "fallback" not in plan
        explore = [o for o in rec["agent_outputs"] if o.get("roam") == "explore"]
        assert explore
        if ep.info["decision"] == "NOT_FOUND":
            # the model's early NOT_FOUND was overruled; the final one carries its evidence
            assert any(o.get("overruled") == "NOT_FOUND" for o in explore)
            assert explore[-1]["evidence"].startswith(("coverage", "frontier"))
            assert m["len_explore"] > 0 and m["coverage"] > 0
            assert any("free" in o for o in explore)      # FREE clearance went into the prompt
            assert any("Free space ahead of each option" in (o.get("prompt") or "") for o in explore)
        else:
            assert explore[-1]["detector_score"] >= 0.5
    assert roam_requests > 0
    # NavGPT with an explicit NOT_FOUND takes the model's word at once: never reaches the room
    for rec in baseline:
        assert rec["actions"] == ["NOT_FOUND"] and rec["metrics"]["reach_SR"] == 0.0


def test_unparsable_room_falls_back_to_exploring_from_the_start(home14, fp_pairs, home14_views, tmp_path, monkeypatch):
    from mllm_server import openai_server

    ep = json.loads(json.dumps(fp_pairs[1].to_dict()))
    from vlnverse.tasks.episode import Episode

    episode = Episode.from_dict(ep)
    episode.instructions[0].text = "Find the clock, please."
    monkeypatch.setenv("VLNVERSE_VIEW_CACHE", str(home14_views))
    with openai_server(_nav_reply) as (url, _):
        rec = _run(home14, [episode], "roam", {"room_labels": "ground_truth", "stop_criterion": "budget",
                                               "explore_budget": 3, "view_cache": str(home14_views)}, url, tmp_path)[0]
    plan = rec["agent_outputs"][0]
    assert plan["target_room"] is None and plan["fallback"] == "no room named in the instruction"
    assert rec["actions"][-1] == "NOT_FOUND" and rec["agent_outputs"][-1]["evidence"].startswith("budget 3")


def test_table_two_prints_for_roam_and_the_baselines(home14, fp_pairs, home14_views, tmp_path, monkeypatch):
    """The MLLM rows and ROAM's ground-truth-rooms ablation; without checkpoints the learned rows
    (the supervised graph policy, ROAM with its learned classifier) are left out (with them:
    tests/learn/test_roam_learned.py)."""
    from mllm_server import openai_server
    from vlnverse.eval.roam_table import METHODS, run_table
    from vlnverse.tasks.episode import save_episodes

    from vlnverse.eval.mllm.cache import build_scene_cache

    # the MLLM rows draw meshes (their eval default): their views, next to the primitives ones
    build_scene_cache(home14.with_render_options({"objects": "meshes"}), home14_views, size=32)
    monkeypatch.setenv("VLNVERSE_VIEW_CACHE", str(home14_views))
    monkeypatch.setenv("VLNVERSE_CACHE", str(tmp_path / "cache"))
    save_episodes(tmp_path / "eps.jsonl", fp_pairs[:2])
    with openai_server(_nav_reply) as (url, _):
        model = {"name": "openai", "params": {"model": "nav-vlm", "base_url": url, "api_key_env": None, "cache": False,
                                              "max_retries": 0}}
        result = run_table(str(tmp_path / "eps.jsonl"), str(tmp_path / "runs"), model=model, max_steps=25,
                           scene_loader=lambda *a: home14)
    assert [r[0] for r in result["rows"]] == [m for m in METHODS if m not in ("ROAM", "Supervised (NOT_FOUND)")]
    assert "ROAM (GT rooms, detector decides)" in METHODS  # the detector-only ablation is a row of its own
    for label, summary in result["summaries"].items():
        assert summary["overall"]["episodes"] == 2, label
        assert "REV_SPL" in summary["overall"]["means"] and "reach_SPL" in summary["overall"]["means"]
    assert {json.loads((tmp_path / "runs" / name / "config.json").read_text())["config"]["render"]["objects"]
            for name in ("navgpt", "mapgpt", "som", "roam_gt_rooms")} == {"meshes"}
    gt = result["summaries"]["ROAM (GT rooms)"]["overall"]["means"]
    assert gt["reach_SR"] == 1.0 and gt["RD_SR"] == 1.0


def test_shipped_roam_config_loads():
    import vlnverse.run.agents  # noqa: F401 - registers the viewpoints backend and the agents
    from vlnverse.eval.config import load_eval_config
    from vlnverse.paths import repo_root

    cfg = load_eval_config(repo_root() / "tasks" / "eval" / "roam_false_premise.yaml")
    assert cfg.agent.name == "roam" and cfg.agent.params["room_labels"] == "classifier"
    assert cfg.task == "false_premise" and cfg.collision_mode == "graph"


def test_roam_under_telhop_with_a_looping_model_still_decides(home14, fp_pairs, tmp_path):
    """Tel-Hop (waypoint hops between viewpoints, rendered views); a model that always answers
    marker 1 loops between viewpoints: the hard budget / frontier constraint still ends the search."""
    from vlnverse.run.agents import make_agent
    from vlnverse.run.modes import make_mode
    from vlnverse.run.models import make_model
    from vlnverse.run.episodes import RunSettings
    from vlnverse.run.rollout import run_episode
    from vlnverse.sim import make_simulator

    def loops(messages, images):  # marker 1 for ever; FOUND only where the detector sees the object
        return "Action: FOUND" if "is in view here" in messages[-1]["content"] else "Action: 1"

    model = make_model("scripted", {"respond": loops})
    agent = make_agent("roam", {"room_labels": "ground_truth", "views": "render", "view_size": 32,
                                "image_dir": str(tmp_path / "img"), "explore_budget": 6}, model=model)
    sim = make_simulator(home14.desc, home14.body, sensors=[])
    settings = RunSettings(max_steps=30, success_distance=3.0, body=home14.body, resolution=0.05,
                           task_type="false_premise")
    try:
        records = [run_episode(ep, home14, sim, make_mode("telhop", sim, planner=home14.planner), agent, settings)
                   for ep in fp_pairs[:2]]
    finally:
        sim.close()
    for ep, rec in zip(fp_pairs[:2], records):
        assert rec["termination"] == "stop" and rec["actions"][-1] == ep.info["decision"], rec["actions"]
        assert all(isinstance(a, dict) and a["type"] == "WaypointAction" for a in rec["actions"][:-1])
        assert rec["metrics"]["reach_SR"] == 1.0 and rec["metrics"]["RD_SR"] == 1.0
    last = records[1]["agent_outputs"][-1]
    assert last["action"] == "NOT_FOUND" and last["evidence"].startswith(("budget", "frontier", "coverage"))


def test_model_detector_decides_found_from_its_score(home14, fp_pairs, home14_views, tmp_path, monkeypatch):
    """``detector: model``: the MLLM's 'Score:' on the four views is the detector; a score over
    tau ends with FOUND, below it the search goes on (an unparsable score is asked again)."""
    from mllm_server import message_text, openai_server

    def reply(body, n):
        text = message_text(body["messages"][-1])
        if text.startswith("Is there a"):
            return {"text": "Score: 0.9"} if "clock" not in text else {"text": "maybe?"}
        return {"text": "Action: FOUND" if "is in view here" in text else "Action: NOT_FOUND"}

    monkeypatch.setenv("VLNVERSE_VIEW_CACHE", str(home14_views))
    with openai_server(reply) as (url, reqs):
        found, absent = _run(home14, fp_pairs[:2], "roam", {"room_labels": "ground_truth", "detector": "model",
                                                            "view_cache": str(home14_views)}, url, tmp_path)
    assert found["actions"][-1] == "FOUND" and found["agent_outputs"][-1]["detector_score"] == 0.9
    assert fp_pairs[1].info["absent_category"] == "clock"
    assert absent["actions"][-1] == "NOT_FOUND"
    steps = [o for o in absent["agent_outputs"] if o.get("roam") == "explore"]
    assert all(o["detector_score"] == 0.0 and o["detector_attempts"][0] == "maybe?" for o in steps)
    assert any(len(r["body"]["messages"][-1]["content"]) == 5 for r in reqs
               if "Is there a" in message_text(r["body"]["messages"][-1]))  # the four views are sent with the question


def test_roam_with_a_dead_endpoint_evaluates_nothing(home14, fp_pairs, home14_views, tmp_path, monkeypatch):
    """The model endpoint answers 500 to everything: no episode is evaluated, not even the one
    whose object the visibility detector sees (its FOUND would be the detector's, not ROAM's)."""
    from mllm_server import openai_server

    monkeypatch.setenv("VLNVERSE_VIEW_CACHE", str(home14_views))
    with openai_server(lambda body, n: {"status": 500}) as (url, reqs):
        records = _run(home14, fp_pairs[:2], "roam", {"room_labels": "ground_truth", "view_cache": str(home14_views)},
                       url, tmp_path)
    assert [r["outcome"] for r in records] == ["not_evaluated"] * 2 and len(reqs) > 0
    assert all(r["not_evaluated"]["component"] == "navigator" and r["not_evaluated"]["kind"] in
               ("server_error", "circuit_open") for r in records)
    assert all("FOUND" not in r["actions"] and "NOT_FOUND" not in r["actions"] for r in records)


def test_roam_decides_with_its_model_grounded_by_the_detector(home14, fp_pairs, home14_views, tmp_path, monkeypatch):
    """The model's FOUND where the detector sees nothing is overruled; its FOUND where the detector
    sees the object ends the episode; a model that never says FOUND never gets one (the detector
    alone decides only in the ``roam_detector`` ablation)."""
    from mllm_server import message_text, openai_server

    monkeypatch.setenv("VLNVERSE_VIEW_CACHE", str(home14_views))
    prompts = []

    def always_found(body, n):
        prompts.append(message_text(body["messages"][-1]))
        return {"text": "Action: FOUND"}

    def never_found(body, n):
        text = message_text(body["messages"][-1])
        return {"text": "Action: NOT_FOUND" if "Evidence for NOT_FOUND" in text or "is over" in text else "Action: 1"}

    params = {"room_labels": "ground_truth", "view_cache": str(home14_views)}
    with openai_server(always_found) as (url, _):
        found, absent = _run(home14, fp_pairs[:2], "roam", params, url, tmp_path)
    assert found["actions"][-1] == "FOUND" and found["agent_outputs"][-1]["evidence"].startswith("detector 1.00")
    assert absent["actions"][-1] == "NOT_FOUND"  # its FOUND never had the detector's evidence
    assert any(o.get("overruled") == "FOUND" for o in absent["agent_outputs"])
    assert any("FOUND is accepted only where the score is at least 0.5" in p for p in prompts)
    with openai_server(never_found) as (url, _):
        model_row = _run(home14, fp_pairs[:1], "roam", params, url, tmp_path)[0]
        ablation = _run(home14, fp_pairs[:1], "roam_detector", params, url, tmp_path)[0]
    assert model_row["actions"][-1] == "NOT_FOUND" and model_row["metrics"]["RD_SR"] == 0.0  # the model's word
    assert ablation["actions"][-1] == "FOUND" and ablation["agent_outputs"][-1]["evidence"].startswith("detector")
