"""One model on a mix of tasks (``TrainConfig.tasks``): per-task teacher caches with each task's
settings, mixed batches, validation per task, and after training the per-task report
(``tasks.json``) and, for GAMA, the experts fired per task (``expert_usage.json`` / ``.png``)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from learn_helpers import PAIRS, make_episodes  # noqa: E402
from test_vlnbert import RIG16, _train, predictor_file  # noqa: E402,F401 (the session fixture)

GAMA = {"hidden_size": 32, "cloud_cap": 192, "history": 4, "render": {"k": 3, "rays": 2, "samples": 6},
        "experts": 3, "top_k": 1}
#: the same corridor paths as coarse-grained goals: shorter, goal-only instructions
COARSE = ["find the kitchen", "go to the hallway", "go into the kitchen", "find the hallway"]


@pytest.fixture(scope="module")
def task_files(corridor, tmp_path_factory):
    from dataclasses import replace

    from vlnverse.tasks.episode import Instruction, save_episodes

    root = tmp_path_factory.mktemp("tasks")
    fine = make_episodes(corridor)
    coarse = [replace(e, episode_id=f"corridor-coarse-{i}", task_type="coarse_grained", instructions=[Instruction(text)])
              for i, (e, text) in enumerate(zip(make_episodes(corridor, PAIRS), COARSE))]
    return save_episodes(root / "fine.jsonl", fine), save_episodes(root / "coarse.jsonl", coarse)


def _config(out, task_files, predictor_file, **overrides):
    from vlnverse.core.config import from_dict
    from vlnverse.learn.config import TrainConfig

    fine, coarse = task_files
    data = {"policy": {"name": "gama", "params": {**GAMA, "waypoint_predictor": str(predictor_file)}},
            "tasks": [{"task": "fine_grained", "train": str(fine), "val": {"val_seen": str(fine)}},
                      {"task": "coarse_grained", "name": "coarse", "train": str(coarse), "val": {"val_seen": str(coarse)}}],
            "collision_mode": "telhop", "max_steps": 25, "success_distance": 1.5, "sensors": RIG16,
            "il": {"epochs": 15, "batch_size": 4, "lr": 0.003}, "validation": {"every": 1000, "metric": "SR"},
            "cache": {"dir": str(Path(out).parent / "cache")}, "device": "cpu", "threads": 1, "seed": 0, "out": str(out),
            **overrides}
    return from_dict(TrainConfig, data)


@pytest.mark.slow
def test_gama_trains_on_two_tasks_and_reports_each_task_and_its_experts(corridor, task_files, predictor_file, tmp_path):
    from vlnverse.learn.gama import expert_usage
    from vlnverse.learn.store import StepStore

    cfg = _config(tmp_path / "run", task_files, predictor_file)
    summary = _train(cfg, corridor)
    out = Path(cfg.out)
    # one teacher cache per task, both in the batches: 8 paths
    caches = summary["cache"]["tasks"]
    assert set(caches) == {"fine_grained", "coarse"} and summary["il"]["episodes"] == 8
    assert {StepStore(c["path"]).episode(0)["episode_id"].split("-")[1] for c in caches.values()} == {"0", "coarse"}
    assert summary["tasks_train_episodes"] == {"fine_grained": 4, "coarse": 4}
    # the per-task report: every task's split, its own numbers
    report = json.loads((out / "tasks.json").read_text())
    assert report == json.loads(json.dumps(summary["tasks"]))
    for name in ("fine_grained", "coarse"):
        row = report["tasks"][name]["val_seen"]
        assert row["episodes"] == 4 and 0.0 <= row["SR"] <= 1.0 and 0.0 <= row["SPL"] <= row["SR"]
        records = [json.loads(x) for x in (out / "tasks" / name / "val_seen" / "episodes.jsonl").read_text().splitlines()]
        assert {r["episode_id"] for r in records} == ({f"corridor-{i}" for i in range(4)} if name == "fine_grained"
                                                      else {f"corridor-coarse-{i}" for i in range(4)})
        assert row["SR"] == pytest.approx(sum(r["metrics"]["SR"] or 0 for r in records) / 4, abs=1e-4)
    # the experts fired per task and step: the logged picks of the task's episodes, recounted here
    usage = json.loads((out / "expert_usage.json").read_text())
    assert set(usage) == {"fine_grained", "coarse"}
    for name, u in usage.items():
        records = [json.loads(x) for x in (out / "tasks" / name / "val_seen" / "episodes.jsonl").read_text().splitlines()]
        assert u == expert_usage({name: records}, 3)[name]
        assert sum(u["steps"]) == sum(1 for r in records for o in r["agent_outputs"] if "experts" in o) > 0
        assert all(abs(sum(row) - 1.0) < 1e-3 for row in u["share"])
    png = (out / "expert_usage.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 2000
    assert report["expert_usage"]["overall"] == {n: u["overall"] for n, u in usage.items()}
    # The router reads the state and the instruction (Eq. 8), shown on its logged probabilities, not on
    # the top-1 shares: over 16 decisions those are a coarse readout that legitimate model changes
    # reshuffle (measured: fine [0.25, 0.31, 0.44], coarse [0.44, 0.31, 0.25]; other seeds give
    # identical shares for both tasks). With top_k 1 the gate is the raw router probability, so the
    # navigation loss trains the router too and this tiny run's router is nearly one-hot (0.999):
    # the pairs are compared on log-probabilities (the router's logits up to a constant).
    val = {n: {r["episode_id"].rsplit("-", 1)[1]: r for r in map(json.loads, (out / "tasks" / n / "val_seen" / "episodes.jsonl")
                                                                   .read_text().splitlines())} for n in usage}
    routed = {n: {i: [o for o in r["agent_outputs"] if "experts" in o] for i, r in records.items()} for n, records in val.items()}
    for episodes in routed.values():
        for o in (o for steps in episodes.values() for o in steps):  # the logged pick is the router's most probable expert
            assert len(o["router"]) == 3 and abs(sum(o["router"]) - 1) < 1e-5
            assert o["experts"] == [max(range(3), key=lambda e: o["router"][e])]
        # the routing follows the state: within an episode (one instruction) its probabilities change
        assert max(float((torch.tensor([o["router"] for o in steps]) - torch.tensor(steps[0]["router"])).abs().sum(1).max())
                   for steps in episodes.values()) > 1e-3
    # the routing follows the instruction: episode i of both tasks starts at the same pose (same first
    # view), and the two instructions route it differently (measured: L1 0.2-0.6 between the pairs'
    # first router log-probabilities; a router blind to the instruction gives equal ones, up to rounding)
    for i, fine_steps in routed["fine_grained"].items():
        assert val["fine_grained"][i]["trajectory"][0] == val["coarse"][i]["trajectory"][0]
        a, b = torch.tensor(fine_steps[0]["router"]), torch.tensor(routed["coarse"][i][0]["router"])
        assert (a.clamp_min(1e-6).log() - b.clamp_min(1e-6).log()).abs().sum() > 0.05, (i, a, b)
    # the checkpoint is selected by the mean over tasks of the metric on validation.split (the final validation here)
    final = summary["validation"][-1]
    assert set(final) >= {"fine_grained/val_seen", "coarse/val_seen"}
    assert summary["best"]["value"] == pytest.approx((final["fine_grained/val_seen"]["SR"] + final["coarse/val_seen"]["SR"]) / 2)
    # DAgger on the mix: each task's episodes are rolled out with its own settings into one aggregate
    dagger = _config(tmp_path / "online", task_files, predictor_file, mode="dagger", init=str(out / "best.pt"),
                     dagger={"rounds": 1, "p": 0.5, "epochs": 1, "episodes": 4})
    online = _train(dagger, corridor)
    (round_1,) = online["dagger"]
    assert round_1["collected_episodes"] == 4 and round_1["aggregated_episodes"] == 4
    assert set(json.loads((Path(dagger.out) / "tasks.json").read_text())["tasks"]) == {"fine_grained", "coarse"}


def test_tasks_config_errors_are_one_line():
    from vlnverse.core.config import from_dict
    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.config import TrainConfig

    base = {"policy": {"name": "gama", "params": {}}, "out": "x"}
    good = [{"task": "fine_grained", "train": "a.jsonl", "val": {"val_seen": "b.jsonl"}},
            {"task": "object_goal", "train": "c.jsonl", "val": {"val_seen": "d.jsonl"}}]
    cfg = from_dict(TrainConfig, {**base, "tasks": good, "validation": {"split": "val_seen"}})
    assert cfg.task == "fine_grained" and cfg.task_names() == ["fine_grained", "object_goal"] and cfg.train is None
    for bad, field in (({"tasks": good, "train": "a.jsonl"}, "train"),
                       ({"tasks": [good[0], dict(good[0])]}, "tasks"),
                       ({"tasks": [{"task": "fine_grained"}]}, "tasks"),
                       ({"tasks": [{**good[0], "name": "a/b"}]}, "tasks[0].name"),
                       ({"tasks": [good[0], {**good[1], "observation": {"view": "fisheye"}}]}, "tasks[1].observation.view"),
                       ({"tasks": good, "validation": {"split": "val_unseen"}}, "validation.split"),
                       ({"tasks": good, "policy": {"name": "graph_nf"}}, "tasks"),
                       ({}, "task")):
        with pytest.raises(ConfigError) as err:
            from_dict(TrainConfig, {**base, **bad})
        assert "\n" not in str(err.value) and field in str(err.value), (bad, str(err.value))


def test_shipped_multitask_config_lists_the_five_tasks(predictor_file):
    from vlnverse.learn.config import load_train_config, resolve_train_config_path

    cfg = load_train_config(resolve_train_config_path("gama_multitask"),
                            {"policy.params.waypoint_predictor": str(predictor_file)})
    assert cfg.policy.name == "gama"
    assert [t.task for t in cfg.tasks] == ["fine_grained", "coarse_grained", "visual_reference", "long_horizon", "object_goal"]
    assert all(set(t.val) == {"val_seen", "val_unseen"} for t in cfg.tasks)
    # one task sees a monocular forward camera, the others the panorama
    assert {t.task: t.observation for t in cfg.tasks if t.observation} == {
        "visual_reference": {"view": "monocular", "hfov_deg": 90.0}}
