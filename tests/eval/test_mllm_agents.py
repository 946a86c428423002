"""The eight VLN-MME agents end to end against a real local OpenAI-compatible server: graph mode on
cached views (no simulator) and Tel-Hop with rendered views; re-prompts, generation errors, the
response cache (a rerun sends no request) and the API key never written anywhere."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest


from eval_scenes import corridor_scene  # noqa: E402
from mllm_server import message_text, openai_server  # noqa: E402
from vlnverse.run.agents import make_agent  # noqa: E402
from vlnverse.eval.mllm.agents import VARIANTS  # noqa: E402
from vlnverse.eval.mllm.cache import ViewCache, ViewpointSimulator, build_scene_cache  # noqa: E402
from vlnverse.eval.mllm.views import make_candidates, stitch  # noqa: E402
from vlnverse.run.models import make_model  # noqa: E402
from vlnverse.run.modes import make_mode  # noqa: E402
from vlnverse.run.episodes import RunSettings
from vlnverse.run.rollout import run_episode
from vlnverse.run.summary import summarize  # noqa: E402
from vlnverse.sim import make_simulator  # noqa: E402
from vlnverse.sim.body import load_body  # noqa: E402
from vlnverse.tasks.base import context_from_description  # noqa: E402
from vlnverse.tasks.episode import Episode, Goal, Instruction  # noqa: E402

KEY = "sk-agent-test-5c1d9e2f7a3b"
SIZE = 32


@pytest.fixture(scope="module")
def corridor():
    return context_from_description(corridor_scene(), load_body("r2r_ce"), 0.05, scene_path="corridor.usda")


@pytest.fixture(scope="module")
def view_cache(corridor, tmp_path_factory):
    root = tmp_path_factory.mktemp("views")
    first = build_scene_cache(corridor, root, size=SIZE)
    assert first["rendered"] == first["viewpoints"] == corridor.navgraph.num_nodes
    assert build_scene_cache(corridor, root, size=SIZE)["rendered"] == 0  # already there
    build_scene_cache(corridor.with_render_options({"objects": "meshes"}), root, size=SIZE)  # eval's MLLM default
    return root


def _episode(ctx):
    path = ctx.planner.shortest_path((1.3, 1.5), (9.0, 1.5))
    return Episode("corridor-mllm", "corridor", "corridor.usda", "test", "fine_grained", [1.3, 1.5, 0.0], 0.0,
                   [Goal([9.0, 1.5, 0.0])], [[*p, 0.0] for p in path.waypoints], path.length,
                   [Instruction("walk through the opening to the far end of the corridor and stop")])


def navigator(body, n):
    """A deterministic model: malformed first, then markers in the variant's format, then STOP."""
    system = message_text(body["messages"][0])
    last = message_text(body["messages"][-1])
    cot = "<Reasoning>" in system
    refl = "Final Decision" in system
    if last.startswith("Your answer could not be used"):
        return {"text": "Sorry. **Action:** 1"}
    if last.startswith("You decided to revise"):
        return {"text": "Action: 2"}
    steps = last.count("\nStep ")
    if "none yet" in last:
        return {"text": "The corridor continues; I am not sure yet."}  # malformed: no action
    if steps >= 3:
        action = "STOP"
    else:
        action = "1"
    text = (f"<Reasoning>Step {steps}: follow the corridor.</Reasoning>\n" if cot else "") + f"Action: {action}"
    if refl:
        decision = "revise" if steps == 1 else "keep"
        text += f"\n<Reflection>Checked against the history.</Reflection>\nFinal Decision: {decision}"
    return {"text": text}


def _agent(name, url, tmp, cache_dir, **kw):
    model = make_model("openai", {"model": "nav-vlm", "base_url": url, "api_key_env": "VLNV_AGENT_KEY",
                                  "cache": str(cache_dir) if cache_dir else False, "backoff": 0.01, "max_retries": 1, "timeout": 5.0})
    return make_agent(name, {"image_dir": str(tmp / "images"), "view_size": SIZE, **kw}, model=model)


def _settings(ctx, max_steps=8):
    return RunSettings(max_steps=max_steps, success_distance=3.0, body=ctx.body, resolution=0.05, task_type="fine_grained")


def _check_record(rec, name, n_requests_max=None):
    assert rec["termination"] == "stop", (name, rec["invalid"])
    assert rec["actions"][-1] == "STOP" and rec["moves"] == 3
    steps = rec["agent_outputs"]
    assert len(steps) == 4
    first = steps[0]
    assert first["generation"]["reprompts"] == 1 and first["attempts"][0]["parsed"]["error_kind"] == "malformed"
    assert "system_prompt" in first and "Instruction: walk through the opening" in first["prompt"]
    assert Path(first["image"]).is_file() and len(first["image_sha256"]) == 64
    assert first["candidates"] and first["candidates"][0]["marker"] == 1
    if "reflection" in name:
        assert steps[1]["generation"].get("revised") and steps[1]["attempts"][-1]["raw"] == "Action: 2"
    if name.startswith("mapgpt"):
        assert "Map: Place 0 is connected with" in steps[1]["prompt"] and "Visited places: 0, 1" in steps[1]["prompt"]
    else:
        assert "Step 1: turned" in steps[1]["prompt"] and "Map:" not in steps[1]["prompt"]


def test_eight_variants_graph_mode_from_cached_views(corridor, view_cache, tmp_path, monkeypatch):
    monkeypatch.setenv("VLNV_AGENT_KEY", KEY)
    assert len(VARIANTS) == 8
    episode = _episode(corridor)
    sim = ViewpointSimulator(corridor.desc, corridor.body, cache=view_cache)
    mode = make_mode("graph", sim, navgraph=corridor.navgraph.graph, planner=corridor.planner)
    records = {}
    with openai_server(navigator) as (url, reqs):
        for name in VARIANTS:
            agent = _agent(name, url, tmp_path, tmp_path / "responses")
            rec = run_episode(episode, corridor, sim, mode, agent, _settings(corridor))
            _check_record(rec, name)
            assert rec["agent_outputs"][0]["observation"]["source"] == "observations"  # served from disk
            records[name] = rec
        sent = len(reqs)
        assert all(r["auth"] == f"Bearer {KEY}" for r in reqs)
        # a second identical run is answered from the response cache, except the unusable first
        # answer of each episode (malformed: never cached, so asked again)
        for name in VARIANTS:
            rec = run_episode(episode, corridor, sim, make_mode("graph", sim, navgraph=corridor.navgraph.graph,
                                                                planner=corridor.planner),
                              _agent(name, url, tmp_path, tmp_path / "responses"), _settings(corridor))
            assert rec["trajectory"] == records[name]["trajectory"] and rec["actions"] == records[name]["actions"]
            attempts = [a for s in rec["agent_outputs"] for a in s["attempts"]]
            assert [a["cached"] for a in attempts] == ["error_kind" not in a["parsed"] for a in attempts]
            assert attempts[0]["parsed"]["error_kind"] == "malformed" and not attempts[0]["cached"]
        assert len(reqs) == sent + 8
    summary = summarize(list(records.values()), run={"collision_mode": "graph"})
    gen = summary["overall"]["generation"]
    assert gen["steps"] == 32 and gen["reprompts"] == 8 + 4 and gen["requests"] == sent
    assert gen["generation_errors"] == {} and gen["cache_hits"] == 0 and gen["prompt_tokens"] > 0
    for folder in (tmp_path, view_cache):
        for f in folder.rglob("*"):
            if f.is_file():
                assert KEY.encode() not in f.read_bytes(), f
    assert KEY not in json.dumps(list(records.values()))


def test_eight_variants_in_telhop_with_rendered_views(corridor, tmp_path, monkeypatch):
    monkeypatch.setenv("VLNV_AGENT_KEY", KEY)
    episode = _episode(corridor)
    sim = make_simulator(corridor.desc, corridor.body, sensors=[])
    try:
        with openai_server(navigator) as (url, reqs):
            for name in VARIANTS:
                mode = make_mode("telhop", sim, planner=corridor.planner)
                agent = _agent(name, url, tmp_path, tmp_path / "responses", views="render")
                rec = run_episode(episode, corridor, sim, mode, agent, _settings(corridor))
                _check_record(rec, name)
                assert all(isinstance(a, dict) and a["type"] == "WaypointAction" for a in rec["actions"][:-1])
                assert rec["agent_outputs"][1]["observation"]["source"] == "render"
                # every hop lands on the chosen viewpoint
                target = rec["agent_outputs"][0]["candidates"][0]["xy"]
                assert rec["trajectory"][1][:2] == pytest.approx(target, abs=0.02)
                agent._renderer.close()
    finally:
        sim.close()


def test_parse_failures_are_invalid_steps_endpoint_failures_end_the_episode(corridor, view_cache, tmp_path,
                                                                             monkeypatch):
    monkeypatch.setenv("VLNV_AGENT_KEY", KEY)
    episode = _episode(corridor)
    sim = ViewpointSimulator(corridor.desc, corridor.body, cache=view_cache)
    mode = make_mode("graph", sim, navgraph=corridor.navgraph.graph, planner=corridor.planner)

    def reply(body, n):
        if n in (2, 3):  # step 1: the request and its one retry fail
            return {"status": 500}
        return {"text": "Action: 42" if n % 2 else "I would rather not say."}

    with openai_server(reply) as (url, reqs):
        agent = _agent("navgpt", url, tmp_path, False, max_reprompts=1)
        rec = run_episode(episode, corridor, sim, mode, agent, _settings(corridor, max_steps=3))
    assert len(reqs) == 4  # nothing is sent after the endpoint failure
    assert rec["termination"] == "not_evaluated" and rec["outcome"] == "not_evaluated"
    assert rec["not_evaluated"]["kind"] == "server_error" and rec["not_evaluated"]["step"] == 1
    assert rec["invalid_actions"] == 1 and "GenerationError" in rec["invalid"][0]["error"]  # step 0: the model's fault
    kinds = [s["generation"]["error_kind"] for s in rec["agent_outputs"]]
    assert kinds == ["invalid_marker", "server_error"]
    first = rec["agent_outputs"][0]["attempts"]
    assert first[1]["parsed"]["error"].startswith("marker 42 does not exist")
    summary = summarize([rec], run={"collision_mode": "graph"})["overall"]
    assert summary["episodes"] == 0 and summary["means"] == {}
    assert summary["not_evaluated"] == {"episodes": 1, "by_reason": {"server_error": 1},
                                        "by_component": {"navigator": {"server_error": 1}}}
    assert summary["partial"] == {"evaluated": 0, "total": 1, "bounds": {}}
    assert summary["generation"]["generation_errors"] == {"invalid_marker": 1, "server_error": 1}


def test_stitched_markers_follow_the_candidates():
    views = np.zeros((4, 64, 64, 3), np.uint8)
    for g in range(4):
        views[g, :, :, g % 3] = 60 + 40 * g  # east, north, west, south tinted differently
    cands = make_candidates((0.0, 0.0), math.pi / 2, [("a", (0.0, 2.0)), ("b", (-2.0, 0.0)), ("c", (2.0, 0.0))])
    assert [(c.marker, c.target, c.direction) for c in cands] == [(1, "b", "left"), (2, "a", "front"), (3, "c", "right")]
    image = stitch(views, math.pi / 2 + 0.1, cands, label_height=10)
    assert image.shape == (74, 256, 3)
    # facing north: Left = west (view 2), Front = north (1), Right = east (0), Back = south (3)
    for slot, g in enumerate((2, 1, 0, 3)):
        assert np.array_equal(image[12, slot * 64 + 2], views[g, 2, 2])
    green = (image[..., 1] > 150) & (image[..., 0] < 100)
    cols = np.flatnonzero(green.any(axis=0))
    assert {int(c) // 64 for c in cols} == {0, 1, 2}  # one marker in each of Left, Front, Right; none Back


def test_view_cache_reads_what_was_rendered(corridor, view_cache):
    cache = ViewCache(view_cache)
    node = sorted(corridor.navgraph.graph.nodes)[0]
    xy = corridor.navgraph.graph.nodes[node]["position"]
    views = cache.views_at("corridor", node, xy)
    assert views.shape == (4, SIZE, SIZE, 3) and views.dtype == np.uint8
    assert cache.views_at("corridor", node, (xy[0] + 0.5, xy[1])) is None
    from vlnverse.eval.mllm.views import ViewRenderer

    renderer = ViewRenderer(SIZE)
    try:
        assert np.array_equal(renderer.render(corridor.desc, corridor.body, xy), views)
    finally:
        renderer.close()


def test_agent_without_model_is_a_config_error():
    from vlnverse.core.errors import ConfigError

    with pytest.raises(ConfigError, match="needs a model"):
        make_agent("mapgpt_cot")


def test_run_eval_simulator_free_rerun_is_free_and_key_free(corridor, view_cache, tmp_path, monkeypatch):
    from vlnverse.eval.config import load_eval_config
    from vlnverse.eval.runner import run_eval
    from vlnverse.tasks.episode import save_episodes

    monkeypatch.setenv("VLNV_AGENT_KEY", KEY)
    monkeypatch.setenv("VLNVERSE_VIEW_CACHE", str(view_cache))
    monkeypatch.setenv("VLNVERSE_CACHE", str(tmp_path / "user_cache"))  # response cache and saved images
    episodes_file = tmp_path / "episodes.jsonl"
    save_episodes(episodes_file, [_episode(corridor)])
    with openai_server(navigator) as (url, reqs):
        summaries = []
        for run in ("first", "second"):
            (tmp_path / f"{run}.yaml").write_text(
                f"agent: {{name: mapgpt_cot_reflection, params: {{max_reprompts: 2}}}}\n"
                f"model: {{name: openai, params: {{model: nav-vlm, base_url: '{url}', api_key_env: VLNV_AGENT_KEY}}}}\n"
                f"task: fine_grained\nepisodes: {episodes_file}\ncollision_mode: graph\nbackend: viewpoints\n"
                f"max_steps: 8\nout: {tmp_path / run}\nreport: {{max_episodes: 1, frame_width: 32}}\n")
            cfg = load_eval_config(tmp_path / f"{run}.yaml")
            summaries.append(run_eval(cfg, progress=False, print_summary=False, scene_loader=lambda *a: corridor))
            if run == "first":
                sent = len(reqs)
        # the second run asked only the first step's malformed answer again (unusable answers are not cached)
        assert sent > 0 and len(reqs) == sent + 1
    first, second = (s["overall"]["generation"] for s in summaries)
    assert first["requests"] == sent and first["cache_hits"] == 0
    assert second["requests"] == 1 and second["cache_hits"] == sent - 1
    model = summaries[1]["model"]
    assert model == {"agent": "mapgpt_cot_reflection", "prompt_version": "vln-mme-3", "model": "openai",
                     "model_name": "nav-vlm", "served_models": {"nav-vlm": sent}, "endpoint_host": url.split("/")[2],
                     "requests": 1, "cache_hits": sent - 1}
    assert summaries[0]["overall"]["means"] == summaries[1]["overall"]["means"]
    assert summaries[0]["overall"]["terminations"] == {"stop": 1}
    assert (tmp_path / "first" / "report.html").is_file()
    written = [f for f in tmp_path.rglob("*") if f.is_file() and not f.name.endswith(".yaml")]
    assert len(written) > 10
    assert not [f for f in written if KEY.encode() in f.read_bytes()]


def test_cache_build_cli(tmp_path, capsys):
    from vlnverse.cli import main

    assert main(["cache", "build", "--scenes", "home_0014", "--size", "32", "--objects", "primitives", "--out",
                 str(tmp_path), "--no-progress"]) == 0
    printed = json.loads(capsys.readouterr().out)
    manifest = json.loads((tmp_path / "home_0014" / "manifest.json").read_text())
    assert printed["viewpoints"] == printed["rendered"] == len(manifest["nodes"]) > 5
    assert manifest["views"] == ["east", "north", "west", "south"] and manifest["size"] == 32
    node = next(iter(manifest["nodes"]))
    assert ViewCache(tmp_path).views("home_0014", int(node)).shape == (4, 32, 32, 3)
    assert main(["cache", "build", "--scenes", "home_0014", "--size", "8", "--out", str(tmp_path)]) == 2
    assert "--size: got 8 (expected 16..2048 pixels)" in capsys.readouterr().err


def test_goal_identification_and_oracle_questions(corridor, view_cache, tmp_path):
    """VCN-Bench: after STOP the agent names a prior-video frame; dialogue: bounded questions."""
    from vlnverse.run.scoring import score_frame_selection

    frames = np.zeros((30, 8, 8, 3), np.uint8)
    np.savez(tmp_path / "tour.npz", frames=frames)
    episode = _episode(corridor)
    episode.task_type = "video_contextualized"
    episode.info.update({"video": "tour.npz", "window": [10, 26], "target_frames": [12, 13], "kind": "room",
                         "target_room_id": 1})
    answers = ["Action: 1", "Action: STOP", "It is the kitchen.", "Frame: twelve"]
    model = make_model("scripted", {"answers": answers})
    agent = make_agent("navgpt", {"image_dir": str(tmp_path / "img"), "video_root": str(tmp_path),
                                  "view_cache": str(view_cache), "view_size": SIZE}, model=model)
    sim = ViewpointSimulator(corridor.desc, corridor.body, cache=view_cache)
    mode = make_mode("graph", sim, navgraph=corridor.navgraph.graph, planner=corridor.planner)
    rec = run_episode(episode, corridor, sim, mode, agent, _settings(corridor))
    assert rec["termination"] == "stop" and rec["actions"][-2:] == [{"type": "SelectFrame", "frame": 12}, "STOP"]
    ident = rec["agent_outputs"][-2]["goal_identification"]
    assert ident["frames"][0] == 0 and ident["frames"][-1] == 15 and len(ident["attempts"]) == 2
    assert model.calls == 4  # the STOP after the selection asks nothing
    assert rec["metrics"]["Rid_SR"] == score_frame_selection(episode, 12)["Rid_SR"] == 1.0

    class Oracle:
        def answer(self, question, xy, yaw):
            return "The kitchen is ahead of you."

    model = make_model("scripted", {"answers": ["Question: where is the kitchen?"] * 3 + ["Action: STOP"]})
    agent = make_agent("mapgpt", {"image_dir": str(tmp_path / "img"), "max_questions": 2}, model=model)
    agent.reset(_episode(corridor), corridor)
    agent._oracle = Oracle()
    node = sorted(corridor.navgraph.graph.nodes)[0]
    xy = corridor.navgraph.graph.nodes[node]["position"]
    from vlnverse.run.agents import AgentState
    from vlnverse.sim.types import AgentPose

    state = AgentState(step=0, pose=AgentPose(xy[0], xy[1], 0.0), max_steps=5, success_distance=3.0, context=corridor,
                       mode="graph", node=node,
                       neighbours=[(n, corridor.navgraph.graph.nodes[n]["position"]) for n in corridor.navgraph.graph.neighbors(node)])
    obs = {"views_rgb": ViewCache(view_cache).views("corridor", node)}
    # two questions answered, the third is refused (budget), re-prompted, then STOP
    from vlnverse.sim.types import DiscreteAction

    assert agent.act(obs, state) is DiscreteAction.STOP
    step = agent.outputs[-1]
    assert [a.get("oracle_answer") for a in step["attempts"][:2]] == ["The kitchen is ahead of you."] * 2
    assert step["attempts"][2]["parsed"]["error_kind"] == "malformed" and agent.questions == 2


def test_view_captions_enter_the_prompt(corridor, view_cache, tmp_path):
    model = make_model("scripted", {"answers": ["Action: 1", "Action: STOP"]})
    agent = make_agent("mapgpt", {"image_dir": str(tmp_path / "img"), "view_cache": str(view_cache),
                                  "caption_model": {"name": "scripted", "params": {"answers": ["A grey corridor."]}}},
                       model=model)
    sim = ViewpointSimulator(corridor.desc, corridor.body, cache=view_cache)
    mode = make_mode("graph", sim, navgraph=corridor.navgraph.graph, planner=corridor.planner)
    rec = run_episode(_episode(corridor), corridor, sim, mode, agent, _settings(corridor))
    first, second = rec["agent_outputs"]
    assert "Views: Front: A grey corridor.; Left: A grey corridor." in first["prompt"]
    assert "saw A grey corridor." in second["prompt"] and "Place 0: A grey corridor." in second["prompt"]
    assert agent.captioner.calls == 8  # four views at each of the two viewpoints, once each


def test_false_premise_episodes_end_with_a_decision(corridor, view_cache, tmp_path):
    from vlnverse.run.agents import AgentState
    from vlnverse.sim.types import AgentPose
    from vlnverse.tasks.actions import Decision

    episode = _episode(corridor)
    episode.task_type = "false_premise"
    episode.info["decision"] = "FOUND"  # the evaluator's key; the agent only learns the action space
    model = make_model("scripted", {"answers": ["Action: 42", "Action: not found"]})
    agent = make_agent("navgpt_cot", {"image_dir": str(tmp_path / "img")}, model=model)
    agent.reset(episode, corridor)
    assert "FOUND or NOT_FOUND" in agent.system_prompt()
    node = sorted(corridor.navgraph.graph.nodes)[0]
    g = corridor.navgraph.graph
    state = AgentState(step=0, pose=AgentPose(*g.nodes[node]["position"], 0.0), max_steps=5, success_distance=3.0,
                       context=corridor, mode="graph", node=node,
                       neighbours=[(n, g.nodes[n]["position"]) for n in g.neighbors(node)])
    action = agent.act({"views_rgb": ViewCache(view_cache).views("corridor", node)}, state)
    assert action is Decision.NOT_FOUND
    step = agent.outputs[-1]
    assert step["attempts"][0]["parsed"]["error_kind"] == "invalid_marker" and step["action"] == "NOT_FOUND"
    assert "'Action: NOT_FOUND'" in agent.system_prompt()  # the accepted forms, stated


def test_view_cache_serves_a_memory_mapped_array_equal_to_the_pngs(corridor, view_cache, tmp_path):
    import shutil

    from vlnverse.eval.mllm.cache import VIEWS_ARRAY, _read_strip

    arr = np.load(view_cache / "corridor" / VIEWS_ARRAY, mmap_mode="r")
    manifest = json.loads((view_cache / "corridor" / "manifest.json").read_text())
    assert arr.shape == (corridor.navgraph.num_nodes, 4, SIZE, SIZE, 3) and len(manifest["rows"]) == arr.shape[0]
    cache = ViewCache(view_cache)
    for node in manifest["rows"]:
        views = cache.views("corridor", node)
        assert views.flags.writeable and np.array_equal(views, _read_strip(view_cache / "corridor" / f"{node}.png"))
    assert isinstance(cache._array("corridor")[0], np.memmap)
    # a cache built before the array existed still reads (PNG), and a rebuild adds the array
    old = tmp_path / "old"
    shutil.copytree(view_cache, old)
    (old / "corridor" / VIEWS_ARRAY).unlink()
    m = json.loads((old / "corridor" / "manifest.json").read_text())
    m.pop("rows")
    (old / "corridor" / "manifest.json").write_text(json.dumps(m))
    node = manifest["rows"][0]
    assert np.array_equal(ViewCache(old).views("corridor", node), cache.views("corridor", node))
    assert build_scene_cache(corridor, old, size=SIZE)["rendered"] == 0 and (old / "corridor" / VIEWS_ARRAY).is_file()
    assert np.array_equal(np.load(old / "corridor" / VIEWS_ARRAY), np.asarray(arr))


def test_oracle_assistant_is_consulted_when_the_navigator_loops(corridor, view_cache, tmp_path, monkeypatch):
    """Two scripted servers: a navigator that goes back and forth until it gets guidance, then
    stops; an assistant whose answer names ids, which never reach the navigator."""
    monkeypatch.setenv("VLNV_AGENT_KEY", KEY)
    episode = _episode(corridor)
    sim = ViewpointSimulator(corridor.desc, corridor.body, cache=view_cache)
    mode = make_mode("graph", sim, navgraph=corridor.navgraph.graph, planner=corridor.planner)

    def navigator_loops(body, n):
        last = message_text(body["messages"][-1])
        if "Assistant's guidance:" in last:
            return {"text": "Action: STOP"}
        back = [ln for ln in last.splitlines() if ln.strip().startswith("Back: [")]
        marker = back[0].split("[")[1].split(":")[0] if back else "1"
        return {"text": f"Action: {marker}"}

    def assistant(body, n):
        return {"text": "Turn around and follow the corridor to its far end, past marker 2 and viewpoint 17."}

    with openai_server(navigator_loops) as (nav_url, nav_reqs), openai_server(assistant) as (help_url, help_reqs):
        helper = {"name": "openai", "params": {"model": "guide-llm", "base_url": help_url, "api_key_env": None,
                                               "cache": False, "max_retries": 0}}
        agent = _agent("navgpt", nav_url, tmp_path, False, assistant=helper, max_consultations=2)
        rec = run_episode(episode, corridor, sim, mode, agent, _settings(corridor, max_steps=8))
    assert len(help_reqs) == 1  # consulted once: the stop followed the guidance
    asked = message_text(help_reqs[0]["body"]["messages"][-1])
    assert "It seems stuck: it came back to a place it had already left" in asked
    assert "The correct route continues" in asked and "walk through the opening" in asked
    steps = rec["agent_outputs"]
    consulted = [s for s in steps if "assistant" in s]
    assert len(consulted) == 1 and consulted[0]["step"] == 2 and consulted[0]["assistant"]["trigger"] == "loop"
    guidance = consulted[0]["assistant"]["guidance"]
    assert consulted[0]["assistant"]["ids_removed"] and "17" not in guidance and "marker 2" not in guidance
    assert f"Assistant's guidance: {guidance}" in steps[2]["prompt"] and rec["actions"][-1] == "STOP"
    assert rec["first_error"]["category"] == "loop"
    gen = summarize([rec], run={"collision_mode": "graph"})["overall"]["generation"]
    assert gen["consultations"] == 1
    from vlnverse.run.generation import model_identity

    who = model_identity(agent, "navgpt", [rec])["assistant"]
    assert who == {"model": "openai", "model_name": "guide-llm", "endpoint_host": help_url.split("/")[2],
                   "consultations": 1}


def test_assistant_answer_is_filtered_to_guidance(corridor, view_cache, tmp_path, monkeypatch):
    """A scripted assistant answering with an action command, ids, the navigator's output format
    and prose: only the prose reaches the navigator, every removal is logged in the step."""
    monkeypatch.setenv("VLNV_AGENT_KEY", KEY)
    episode = _episode(corridor)
    sim = ViewpointSimulator(corridor.desc, corridor.body, cache=view_cache)
    mode = make_mode("graph", sim, navgraph=corridor.navgraph.graph, planner=corridor.planner)
    seen = []

    def navigator_loops(body, n):
        last = message_text(body["messages"][-1])
        seen.append(last)
        if "Assistant's guidance:" in last:
            return {"text": "Action: STOP"}
        back = [ln for ln in last.splitlines() if ln.strip().startswith("Back: [")]
        return {"text": f"Action: {back[0].split('[')[1].split(':')[0] if back else '1'}"}

    answer = ("Action: STOP\nTurn around and walk to the far end of the corridor, past viewpoint 17 and marker 2. "
              "STOP.\nFinal Decision: keep\n{\"action\": \"3\"}")
    with openai_server(navigator_loops) as (nav_url, _), openai_server(lambda b, n: {"text": answer}) as (help_url, _):
        helper = {"name": "openai", "params": {"model": "guide-llm", "base_url": help_url, "api_key_env": None,
                                               "cache": False, "max_retries": 0}}
        agent = _agent("navgpt", nav_url, tmp_path, False, assistant=helper, max_consultations=1)
        rec = run_episode(episode, corridor, sim, mode, agent, _settings(corridor, max_steps=8))
    entry = next(s["assistant"] for s in rec["agent_outputs"] if "assistant" in s)
    assert entry["guidance"] == ("Turn around and walk to the far end of the corridor, past [id removed] and "
                                 "[id removed].")
    kinds = sorted(r["kind"] for r in entry["removed"])
    assert kinds == ["action", "action", "format", "format", "id", "id"] and entry["ids_removed"]
    assert {r["text"] for r in entry["removed"]} >= {"Action: STOP", "STOP.", "Final Decision: keep", "viewpoint 17"}
    guided = [p for p in seen if "Assistant's guidance:" in p]
    assert guided and all("STOP" not in p.split("Assistant's guidance:")[1].split("\n")[0] for p in guided)
    assert rec["actions"][-1] == "STOP"


def test_assistant_route_description_says_each_turn_once():
    """One bend drawn as vertices 0.1 m apart is one turn in the assistant's route description."""
    from types import SimpleNamespace

    from vlnverse.run.agents import AgentState
    from vlnverse.sim.types import AgentPose

    model = make_model("scripted", {"answers": ["Action: STOP"]})
    agent = make_agent("navgpt", {}, model=model)
    # east 4 m, a right bend split at (4, 0) and (4.07, -0.07), south 4 m, a left bend likewise, east 4 m
    ref = [(0, 0, 0), (4, 0, 0), (4.07, -0.07, 0), (4.07, -4, 0), (4.14, -4.07, 0), (8, -4.07, 0)]
    agent.episode = SimpleNamespace(instruction_text="go", reference_path=ref, info={})
    agent.context, agent._landmarks = None, {1: ("stove", (4.3, 0.3)), 2: ("tv_stand", (4.3, -4.4))}
    state = AgentState(step=3, pose=AgentPose(0.5, 0.0, 0.0), max_steps=10, success_distance=1.0, context=None)
    prompt = agent.assistant_prompt(state, "loop", 9.0)
    assert "After that: turn right at the stove, then turn left at the tv_stand." in prompt
