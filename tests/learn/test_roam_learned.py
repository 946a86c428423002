"""VLN-NF's learned parts: ROAM's room classifier and the supervised graph policy with NOT_FOUND
(``graph_nf``), both trained through ``vlnverse train``'s ``run_training``, on home_0014."""
from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from vlnverse.core.errors import ConfigError


@pytest.fixture(scope="module")
def home14():
    from vlnverse.core.body import load_body
    from vlnverse.paths import scenes_dir
    from vlnverse.tasks.base import load_scene_context

    return load_scene_context(scenes_dir() / "home_0014.usd", load_body("r2r_ce"), 0.05)


@pytest.fixture(scope="module")
def fp_pairs(home14):
    from vlnverse.tasks.base import load_task_config
    from vlnverse.tasks.types.false_premise.generator import FalsePremiseTask

    eps = FalsePremiseTask(load_task_config("false_premise")).generate(home14, np.random.default_rng(3), 6, "val_unseen")
    assert [e.info["decision"] for e in eps] == ["FOUND", "NOT_FOUND"] * 3
    return eps


def _config(tmp, data: dict):
    from vlnverse.learn.config import load_train_config

    path = tmp / "train.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return load_train_config(path)


# ---------------------------------------------------------------------------------------------
# room classifier


@pytest.fixture(scope="module")
def room_classifier(home14, tmp_path_factory):
    """Trained on home_0014's in-room viewpoints (the shipped config's settings, fewer epochs)."""
    from vlnverse.learn.trainer import run_training

    tmp = tmp_path_factory.mktemp("rooms")
    cfg = _config(tmp, {"policy": {"name": "room_classifier", "params": {"hidden_size": 32}}, "task": "false_premise",
                        "train": {"generate": {"scenes": "home_0014"}},
                        "val": {"val_unseen": {"generate": {"scenes": "home_0014"}}},
                        "il": {"epochs": 120, "batch_size": 16, "lr": 0.01}, "threads": 1, "out": str(tmp / "run")})
    summary = run_training(cfg, scene_loader=lambda p: home14, progress=False, report=lambda s: None)
    return summary


def test_room_classifier_trains_through_vlnverse_train_and_roam_loads_it(room_classifier, home14):
    from vlnverse.run.rooms import load_room_classifier, multi_hot, node_room_types, scene_samples
    from vlnverse.learn.tensorfile import file_info

    s = room_classifier
    assert s["policy"] == "room_classifier" and s["checkpoint"].endswith("best.pt")
    seen, labels, nodes = scene_samples(home14)
    assert s["train"]["viewpoints"] == len(labels) >= 10
    assert set(s["classes"]) == set(labels) and len(s["classes"]) >= 4
    assert s["train"]["accuracy"] >= 0.9 and s["val"]["val_unseen"]["accuracy"] == s["train"]["accuracy"]
    info = file_info(s["checkpoint"])       # a safetensors policy checkpoint, checksum intact
    assert info["checksum"] == "ok" and info["policy"] == "room_classifier" and info["room_classes"] == s["classes"]
    clf = load_room_classifier(s["checkpoint"])
    pred = clf.predict(multi_hot(seen, clf.categories))
    truth = node_room_types(home14)
    assert np.mean([p == truth[n] for p, n in zip(pred, nodes)]) == pytest.approx(s["train"]["accuracy"], abs=1e-4)
    assert json.loads((__import__("pathlib").Path(s["checkpoint"]).parent / "summary.json").read_text())["classes"] \
        == s["classes"]


def test_roam_labels_viewpoints_with_the_learned_classifier(room_classifier, home14, fp_pairs):
    from vlnverse.run.agents import make_agent
    from vlnverse.run.models import make_model
    from vlnverse.run.rooms import node_room_types

    agent = make_agent("roam", {"room_classifier": room_classifier["checkpoint"]},
                       model=make_model("scripted", {"answers": ["Action: 1"]}))
    agent.reset(fp_pairs[0], home14)
    labels, truth = agent.labels(), node_room_types(home14)
    inside = [n for n in truth if truth[n] is not None]
    assert set(labels) == set(truth)
    assert np.mean([labels[n] == truth[n] for n in inside]) >= 0.9


def test_bad_room_classifier_files_are_one_line_config_errors(tmp_path, room_classifier, graph_run):
    from vlnverse.run.agents import make_agent
    from vlnverse.run.models import make_model

    model = make_model("scripted", {"answers": ["Action: 1"]})
    with pytest.raises(ConfigError, match="agent.params.room_classifier.*not found"):
        make_agent("roam", {"room_classifier": str(tmp_path / "missing.pt")}, model=model)
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ConfigError, match="junk.pt") as err:
        make_agent("roam", {"room_classifier": str(tmp_path / "junk.pt")}, model=model)
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="holds a 'graph_nf' policy"):  # another policy's checkpoint
        make_agent("roam", {"room_classifier": graph_run["checkpoint"]}, model=model)
    old = tmp_path / "rooms.npz"  # the classifier format of earlier versions
    np.savez(old, classes=np.array(["a", "b"]))
    with pytest.raises(ConfigError, match="rooms.npz"):
        make_agent("roam", {"room_classifier": str(old)}, model=model)


def test_train_config_bad_input(tmp_path):
    base = {"policy": {"name": "graph_nf"}, "task": "false_premise", "train": {"generate": {"scenes": "home_0014"}},
            "collision_mode": "graph"}
    assert _config(tmp_path, base).collision_mode == "graph"
    with pytest.raises(ConfigError, match="collision_mode.*graph"):
        _config(tmp_path, {**base, "collision_mode": "telhop"})      # a graph policy moves between viewpoints
    with pytest.raises(ConfigError, match="collision_mode.*strict"):
        _config(tmp_path, {**base, "policy": {"name": "cma"}})        # a discrete policy cannot train in graph mode
    from vlnverse.learn.trainer import run_training

    for name, params in (("graph_nf", {"hiden_size": 8}), ("room_classifier", {"depth": 2})):
        cfg = _config(tmp_path, {**base, "policy": {"name": name, "params": params},
                                 "collision_mode": "graph" if name == "graph_nf" else "telhop", "out": str(tmp_path / name)})
        with pytest.raises(ConfigError, match=r"policy.params.(hiden_size|depth): unknown field"):
            run_training(cfg, progress=False, report=lambda s: None)
    cfg = _config(tmp_path, {**base, "policy": {"name": "room_classifier"}, "collision_mode": "telhop",
                             "train": {"generate": {"scenes": "no_such_home"}}, "out": str(tmp_path / "x")})
    with pytest.raises(ConfigError, match="train.generate.scenes"):
        run_training(cfg, progress=False, report=lambda s: None)
    (tmp_path / "init.pt").write_bytes(b"x")
    for name, mode in (("graph_nf", "graph"), ("room_classifier", "telhop")):
        cfg = _config(tmp_path, {**base, "policy": {"name": name}, "collision_mode": mode, "mode": "dagger",
                                 "init": str(tmp_path / "init.pt"), "out": str(tmp_path / "d")})
        with pytest.raises(ConfigError, match="mode: got 'dagger'"):
            run_training(cfg, progress=False, report=lambda s: None)


# ---------------------------------------------------------------------------------------------
# supervised graph policy with NOT_FOUND


def test_graph_teacher_enters_the_room_and_decides(home14, fp_pairs):
    from vlnverse.learn.graph_policy import GraphObserver, room_nodes, teacher_steps

    obs = GraphObserver(home14)
    graph = home14.navgraph.graph
    for ep in fp_pairs:
        steps = teacher_steps(ep, home14, obs)
        room = room_nodes(home14, ep.info["target_room_id"])
        labels = [s["label"] for s in steps]
        k_last = len(steps[-1]["cands"])
        assert labels[-1] == k_last + (1 if ep.info["decision"] == "NOT_FOUND" else 0)
        assert all(lab < len(s["cands"]) for s, lab in zip(steps[:-1], labels[:-1]))  # moves along graph edges
        route = [s["cands"][lab]["node"] for s, lab in zip(steps[:-1], labels[:-1])]
        assert route and route[-1] in room and all(graph.has_edge(a, b) for a, b in zip(route, route[1:]))
        if ep.info["decision"] == "FOUND":
            assert ep.info["named_category"] in steps[-1]["seen"]     # decided with the object in sight
        else:
            assert all(ep.info["absent_category"] not in s["seen"] for s in steps)


@pytest.fixture(scope="module")
def graph_run(home14, fp_pairs, tmp_path_factory):
    """A tiny imitation run on home_0014's six false-premise episodes."""
    from vlnverse.learn.trainer import run_training
    from vlnverse.tasks.episode import save_episodes

    tmp = tmp_path_factory.mktemp("graph_nf")
    save_episodes(tmp / "eps.jsonl", fp_pairs)
    cfg = _config(tmp, {"policy": {"name": "graph_nf", "params": {"hidden_size": 32, "layers": 1}},
                        "task": "false_premise", "train": str(tmp / "eps.jsonl"), "collision_mode": "graph",
                        "il": {"epochs": 50, "batch_size": 6, "lr": 0.003}, "threads": 1, "out": str(tmp / "run")})
    return run_training(cfg, scene_loader=lambda p: home14, progress=False, report=lambda s: None)


def _graph_run_episodes(ctx, episodes, agent):
    from vlnverse.run.modes import make_mode
    from vlnverse.run.episodes import RunSettings
    from vlnverse.run.rollout import run_episode
    from vlnverse.sim import make_simulator

    sim = make_simulator(ctx.desc, ctx.body, sensors=[])
    settings = RunSettings(max_steps=20, success_distance=3.0, body=ctx.body, resolution=0.05, task_type="false_premise")
    try:
        return [run_episode(ep, ctx, sim, make_mode("graph", sim, navgraph=ctx.navgraph.graph, planner=ctx.planner),
                            agent, settings) for ep in episodes]
    finally:
        sim.close()


def test_graph_policy_learns_to_say_not_found_on_an_absent_object(graph_run, home14, fp_pairs):
    from vlnverse.run.agents import make_agent

    assert graph_run["policy"] == "graph_nf" and graph_run["accuracy"]["train"]["decision_accuracy"] == 1.0
    agent = make_agent("graph_policy", {"checkpoint": graph_run["checkpoint"]})
    records = _graph_run_episodes(home14, fp_pairs, agent)
    for ep, rec in zip(fp_pairs, records):
        assert rec["actions"][-1] == ep.info["decision"], (ep.episode_id, rec["actions"])
        assert rec["metrics"]["reach_SR"] == 1.0 and rec["metrics"]["RD_SR"] == 1.0
        out = rec["agent_outputs"][-1]
        assert out["action"] == ep.info["decision"] and max(out["scores"], key=out["scores"].get) == out["action"]
    absent = records[1]
    assert fp_pairs[1].info["decision"] == "NOT_FOUND" and absent["actions"][-1] == "NOT_FOUND"


def test_graph_policy_agent_bad_input_and_telhop(graph_run, room_classifier, home14, fp_pairs):
    from vlnverse.run.agents import make_agent
    from vlnverse.run.modes import make_mode
    from vlnverse.run.episodes import RunSettings
    from vlnverse.run.rollout import run_episode
    from vlnverse.sim import make_simulator

    with pytest.raises(ConfigError, match="exactly one of checkpoint"):
        make_agent("graph_policy", {})
    with pytest.raises(ConfigError, match="holds a 'room_classifier' policy"):
        make_agent("graph_policy", {"checkpoint": room_classifier["checkpoint"]})
    # under Tel-Hop it reads the nearest viewpoint and hops to the chosen one by waypoint
    agent = make_agent("graph_policy", {"checkpoint": graph_run["checkpoint"]})
    sim = make_simulator(home14.desc, home14.body, sensors=[])
    settings = RunSettings(max_steps=12, success_distance=3.0, body=home14.body, resolution=0.05, task_type="false_premise")
    try:
        rec = run_episode(fp_pairs[1], home14, sim, make_mode("telhop", sim, planner=home14.planner), agent, settings)
    finally:
        sim.close()
    assert rec["invalid_actions"] == 0, rec["invalid"]
    assert all(isinstance(a, dict) and a["type"] == "WaypointAction" for a in rec["actions"][:-1]) and rec["actions"][:-1]
    assert rec["actions"][-1] == "NOT_FOUND" and rec["metrics"]["reach_SR"] == 1.0


def test_table_two_has_the_supervised_row_and_the_room_accuracy(graph_run, room_classifier, home14, fp_pairs, tmp_path,
                                                                monkeypatch):
    from vlnverse.eval.mllm.cache import build_scene_cache
    from vlnverse.eval.roam_table import format_table, run_table
    from vlnverse.tasks.episode import save_episodes

    build_scene_cache(home14, tmp_path / "views", size=16)  # the supervised policy's training render
    build_scene_cache(home14.with_render_options({"objects": "meshes"}), tmp_path / "views", size=16)  # ROAM's
    monkeypatch.setenv("VLNVERSE_VIEW_CACHE", str(tmp_path / "views"))
    monkeypatch.setenv("VLNVERSE_CACHE", str(tmp_path / "cache"))
    save_episodes(tmp_path / "eps.jsonl", fp_pairs[:2])
    result = run_table(str(tmp_path / "eps.jsonl"), str(tmp_path / "runs"), room_classifier=room_classifier["checkpoint"],
                       graph_policy=graph_run["checkpoint"], methods=["Supervised (NOT_FOUND)", "ROAM"], max_steps=20,
                       scene_loader=lambda *a: home14)
    assert [r[0] for r in result["rows"]] == ["Supervised (NOT_FOUND)", "ROAM"]
    assert [json.loads((tmp_path / "runs" / name / "config.json").read_text())["config"]["render"]["objects"]
            for name in ("supervised_not_found", "roam")] == ["primitives", "meshes"]
    sup = result["summaries"]["Supervised (NOT_FOUND)"]["overall"]["means"]
    assert sup["reach_SR"] == 1.0 and sup["RD_SR"] == 1.0
    acc = result["room_accuracy"]
    assert acc["splits"] == ["val_unseen"] and acc["scenes"] == 1
    assert acc["accuracy"] == room_classifier["train"]["accuracy"]
    assert "Supervised (NOT_FOUND)" in format_table(result["rows"])
    # without the checkpoint the row is left out
    result = run_table(str(tmp_path / "eps.jsonl"), str(tmp_path / "runs2"), methods=["Supervised (NOT_FOUND)"],
                       scene_loader=lambda *a: home14)
    assert result["rows"] == [] and "room_accuracy" not in result


def test_roam_table_cli_bad_input_is_one_line_exit_2(tmp_path, capsys):
    from vlnverse.eval.roam_table import main

    assert main(["table", "--episodes", str(tmp_path / "e.jsonl"), "--out", str(tmp_path), "--model", "{bad"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--model" in err and "not JSON" in err
    assert main(["table", "--episodes", str(tmp_path / "e.jsonl"), "--out", str(tmp_path), "--model", "[1]"]) == 2
    assert "a JSON object with a 'name'" in capsys.readouterr().err


def test_shipped_configs_load_and_vlnverse_train_runs_the_room_classifier(tmp_path, capsys):
    from vlnverse.cli import main
    from vlnverse.learn.config import load_train_config, resolve_train_config_path

    rc = load_train_config(resolve_train_config_path("room_classifier"))
    gnf = load_train_config(resolve_train_config_path("graph_nf_false_premise"))
    assert rc.policy.name == "room_classifier" and "val_unseen" in rc.val
    assert gnf.policy.name == "graph_nf" and gnf.collision_mode == "graph" and gnf.task == "false_premise"
    out = tmp_path / "rooms"
    assert main(["train", "room_classifier", "train.generate.scenes=home_0014",
                 "val.val_unseen.generate.scenes=home_0014", "il.epochs=30", f"out={out}", "--no-progress"]) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed["policy"] == "room_classifier" and printed["checkpoint"] == str(out / "best.pt")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["val"]["val_unseen"]["viewpoints"] == summary["train"]["viewpoints"] >= 10
    assert main(["train", "room_classifier", "train.generate.scenes=nowhere", f"out={tmp_path / 'x'}"]) == 2
    assert "train.generate.scenes" in capsys.readouterr().err
