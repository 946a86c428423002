"""IL and DAgger trainers, checkpoints and the ``policy`` eval agent on the corridor scene (CPU, 16-32 px)."""
from __future__ import annotations

import csv
import json
import math
import os
import time
from pathlib import Path

import pytest

from learn_helpers import make_episodes, small_config

TINY = dict(il__epochs=2, il__batch_size=2, il__lr=0.003, validation__every=2, validation__limit=2, max_steps=40,
            sensors=[{"name": "rgb", "kind": "rgb", "width": 16, "height": 16},
                     {"name": "depth", "kind": "depth", "width": 16, "height": 16}])


def _train(cfg, corridor, **kw):
    from vlnverse.learn.trainer import run_training

    return run_training(cfg, scene_loader=lambda *a: corridor, progress=False, report=lambda s: None, **kw)


def interrupt_batch(monkeypatch, call: int):
    """Make the ``call``-th training batch raise ``KeyboardInterrupt`` (Ctrl-C); returns the undo."""
    from vlnverse.learn.batching import EpisodeBatches

    calls = {"n": 0}
    original = EpisodeBatches.batch

    def interrupting(self, *a, **k):
        calls["n"] += 1
        if calls["n"] == call:
            raise KeyboardInterrupt
        return original(self, *a, **k)

    monkeypatch.setattr(EpisodeBatches, "batch", interrupting)
    return lambda: monkeypatch.setattr(EpisodeBatches, "batch", original)


@pytest.fixture(scope="module")
def il_run(corridor, episodes_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("il") / "run"
    cfg = small_config(out, episodes_file, policy="seq2seq", **TINY)
    return cfg, _train(cfg, corridor)


def _actions(agent, corridor, episodes):
    from vlnverse.run.modes import make_mode
    from vlnverse.run.episodes import RunSettings
    from vlnverse.run.rollout import run_episode
    from vlnverse.sim import make_simulator
    from vlnverse.sim.sensors import CameraSpec

    sim = make_simulator(corridor.desc, corridor.body, sensors=[CameraSpec("rgb", "rgb", 16, 16),
                                                                 CameraSpec("depth", "depth", 16, 16)])
    try:
        settings = RunSettings(max_steps=30, success_distance=1.5, body=corridor.body, resolution=0.05,
                               task_type="fine_grained")
        mode = make_mode("telhop", sim, planner=corridor.planner)
        return [run_episode(ep, corridor, sim, mode, agent, settings)["actions"] for ep in episodes]
    finally:
        sim.close()


def test_il_run_writes_checkpoints_logs_and_validation(il_run):
    cfg, summary = il_run
    out = Path(cfg.out)
    assert (out / "last.pt").is_file() and (out / "best.pt").is_file() and summary["best"]["tag"] == "epoch_002"
    rows = list(csv.DictReader(open(out / "train_log.csv")))
    assert [r["epoch"] for r in rows if r["phase"] == "il"] == ["1", "2"]
    assert any(r["phase"] == "val" and r["val_SR"] != "" for r in rows)
    # every epoch (2) trains on every cached step once; the inflection weight is VLN-CE's total
    # steps / inflection steps (the first step and each change of the teacher's action) of the cache
    from vlnverse.learn.store import StepStore

    store = StepStore(summary["cache"]["path"])
    labels = [store.episode(i)["label"] for i in range(len(store))]
    steps, inflections = sum(len(x) for x in labels), sum(1 + int((x[1:] != x[:-1]).sum()) for x in labels)
    assert summary["il"]["steps"] == steps and summary["il"]["samples"] == 2 * steps
    assert summary["il"]["inflection_weight"] == pytest.approx(steps / inflections) and inflections < steps
    assert summary["cache"]["status"] in ("built", "reused")
    assert (out / "val" / "epoch_002" / "train" / "summary.json").is_file()  # the validation's records and summary


def test_validation_in_memory_gives_what_vlnverse_eval_gives(il_run, corridor, episodes_file, tmp_path):
    """``run.evaluation.evaluate`` (training validation) and ``run_eval`` (``vlnverse eval``) of the
    same checkpoint on the same episodes: the same records and the same summary figures; the
    trainer's validation of epoch 2 (the last weights) is that run's means."""
    from vlnverse.eval.config import EvalConfig, ReportConfig
    from vlnverse.eval.runner import run_eval
    from vlnverse.run.agents import make_agent
    from vlnverse.run.evaluation import evaluate
    from vlnverse.run.setup import EpisodeSetup, EpisodeSource, NamedSpec
    from vlnverse.tasks.episode import load_episodes

    cfg, summary = il_run
    path = str(Path(cfg.out) / "last.pt")
    loader = lambda *a: corridor  # noqa: E731
    setup = EpisodeSetup(task="fine_grained", collision_mode="telhop", sensors=list(cfg.sensors), max_steps=40,
                         success_distance=1.5)
    episodes = load_episodes(episodes_file)[:2]  # validation.limit: 2
    got = evaluate(setup, episodes, make_agent("policy", {"checkpoint": path}), scene_loader=loader)
    ecfg = EvalConfig(agent=NamedSpec("policy", {"checkpoint": path}), task="fine_grained",
                      episodes=EpisodeSource(path=str(episodes_file)), collision_mode="telhop", sensors=list(cfg.sensors),
                      max_steps=40, success_distance=1.5, limit=2, out=str(tmp_path / "eval"),
                      report=ReportConfig(enabled=False))
    ecfg.validate()
    written = run_eval(ecfg, progress=False, print_summary=False, scene_loader=loader)
    lines = [json.loads(line) for line in (tmp_path / "eval" / "episodes.jsonl").read_text().splitlines()]

    def timeless(records):
        return [{k: v for k, v in r.items() if k not in ("duration_s", "source")} for r in records]

    assert len(got.records) == 2 and timeless(got.records) == timeless(lines)
    assert got.summary["overall"]["means"] == written["overall"]["means"]
    assert got.summary["by_task"].keys() == written["by_task"].keys()
    assert got.summary["overall"]["intervals"] == written["overall"]["intervals"]
    validated = next(v for v in summary["validation"] if v["tag"] == "epoch_002")["train"]
    assert validated == written["overall"]["means"] and validated["SR"] is not None


def test_inflection_weights_and_coefficient_of_hand_labelled_episodes():
    """VLN-CE's inflection weighting on labels [F, F, L, L, L, STOP] and [F, F, F, STOP]: the first
    step and each change weigh ``coef``; the coefficient is 10 steps / 5 inflections = 2."""
    import numpy as np

    from vlnverse.learn.batching import inflection_coefficient, inflection_weights

    a, b = np.array([1, 1, 2, 2, 2, 0]), np.array([1, 1, 1, 0])
    assert inflection_weights(a, 3.0).tolist() == [3.0, 1.0, 3.0, 1.0, 1.0, 3.0]
    assert inflection_weights(b, 2.0).tolist() == [2.0, 1.0, 1.0, 2.0]
    assert inflection_weights(np.array([], dtype=int), 2.0).tolist() == []

    class Store:  # what inflection_coefficient reads of a StepStore: episodes and their label chunk
        episodes = [{"chunk": 0, "start": 0, "length": 6}, {"chunk": 0, "start": 6, "length": 4}]

        def __len__(self):
            return 2

        def _array(self, chunk, name):
            return np.concatenate([a, b])

    assert inflection_coefficient([Store()]) == 2.0


def test_checkpoint_reload_gives_identical_actions_and_checks_type(il_run, corridor, tmp_path):
    from vlnverse.core.errors import ConfigError
    from vlnverse.run.agents import make_agent
    from vlnverse.learn.checkpoint import policy_from_checkpoint, read_checkpoint

    cfg, _ = il_run
    path = Path(cfg.out) / "best.pt"
    data = read_checkpoint(path)
    assert data["policy"] == "seq2seq" and data["vocab"]["words"] and data["config"]["policy"]["name"] == "seq2seq"
    assert data["code_version"].endswith("+learn1")
    from vlnverse.learn.agent import PolicyAgent

    in_memory = PolicyAgent(policy=policy_from_checkpoint(data))
    reloaded = make_agent("policy", {"checkpoint": str(path)})  # the eval registry, loaded lazily
    episodes = make_episodes(corridor)[:2]
    assert _actions(in_memory, corridor, episodes) == _actions(reloaded, corridor, episodes)
    with pytest.raises(ConfigError, match="'seq2seq' policy"):
        read_checkpoint(path, expected_policy="cma")
    with pytest.raises(ConfigError, match="checkpoint not found"):
        make_agent("policy", {"checkpoint": str(tmp_path / "nope.pt")})
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ConfigError, match="not a readable policy checkpoint"):
        read_checkpoint(tmp_path / "junk.pt")


def test_one_dagger_round_changes_weights_logs_beta_and_teacher_labels(il_run, corridor, episodes_file, tmp_path):
    import torch

    from vlnverse.run.agents import OracleAgent
    from vlnverse.learn.checkpoint import read_checkpoint
    from vlnverse.learn.store import StepStore
    from vlnverse.sim.types import AgentPose

    cfg_il, _ = il_run
    init = Path(cfg_il.out) / "best.pt"
    cfg = small_config(tmp_path / "dagger", episodes_file, policy="seq2seq", mode="dagger", init=str(init),
                       dagger={"rounds": 1, "p": 0.5, "epochs": 1}, **TINY)
    summary = _train(cfg, corridor)
    (info,) = summary["dagger"]
    assert info["beta"] == 0.5 and info["aggregated_steps"] == info["collected_steps"] > 0
    log = [json.loads(line) for line in open(tmp_path / "dagger" / "dagger.jsonl")]
    assert log[0]["beta"] == 0.5 and log[0]["aggregated_steps"] == info["aggregated_steps"]
    rows = [r for r in csv.DictReader(open(tmp_path / "dagger" / "train_log.csv")) if r["phase"] == "dagger" and r["beta"]]
    assert float(rows[0]["beta"]) == 0.5 and int(rows[0]["aggregated_steps"]) == info["aggregated_steps"]
    before, after = read_checkpoint(init)["state_dict"], read_checkpoint(tmp_path / "dagger" / "last.pt")["state_dict"]
    assert any(not torch.equal(before[k], after[k]) for k in before)
    store = StepStore(tmp_path / "dagger" / "dagger_aggregate")
    assert store.num_steps == info["aggregated_steps"]
    episodes = {e.episode_id: e for e in make_episodes(corridor)}
    mixed = 0
    for i in range(len(store)):
        rec = store.episode(i)
        teacher = OracleAgent()
        teacher.reset(episodes[rec["episode_id"]], corridor)
        teacher.success_distance = 1.5
        assert [int(teacher.best_action(AgentPose(*p))) for p in rec["pose"].astype(float)] == rec["label"].tolist()
        mixed += int((rec["executed"] != rec["label"]).sum())
    assert mixed > 0  # the policy drove some steps (beta 0.5 on a barely trained policy)


def test_dagger_max_steps_ends_each_collected_episode_at_the_cap(il_run, corridor, episodes_file, tmp_path):
    from vlnverse.core.config import from_dict
    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.config import TrainConfig
    from vlnverse.learn.store import StepStore

    cfg_il, _ = il_run
    cfg = small_config(tmp_path / "capped", episodes_file, policy="seq2seq", mode="dagger", init=str(Path(cfg_il.out) / "best.pt"),
                       dagger={"rounds": 1, "p": 0.5, "epochs": 1, "max_steps": 3}, **TINY)
    (info,) = _train(cfg, corridor)["dagger"]
    store = StepStore(tmp_path / "capped" / "dagger_aggregate")
    lengths = [len(store.episode(i)["label"]) for i in range(len(store))]
    assert len(lengths) == info["collected_episodes"] == 4  # every training episode of the corridor (PAIRS)
    assert max(lengths) == 3 and info["collected_steps"] == sum(lengths) <= 3 * len(lengths)  # the corridor needs more
    with pytest.raises(ConfigError, match="max_steps"):
        from_dict(TrainConfig, {**cfg.to_dict(), "dagger": {"max_steps": 0}})


def test_dagger_refuses_an_init_checkpoint_of_another_policy_or_rig(il_run, corridor, episodes_file, tmp_path):
    from vlnverse.core.errors import ConfigError

    init = str(Path(il_run[0].out) / "best.pt")
    cfg = small_config(tmp_path / "a", episodes_file, policy="cma", mode="dagger", init=init, **TINY)
    with pytest.raises(ConfigError, match="'seq2seq' policy"):
        _train(cfg, corridor)
    other = {**TINY, "sensors": TINY["sensors"][:1]}
    cfg = small_config(tmp_path / "b", episodes_file, policy="seq2seq", mode="dagger", init=init, **other)
    with pytest.raises(ConfigError, match="different"):
        _train(cfg, corridor)


def test_il_with_init_warm_starts_from_the_checkpoint_and_refuses_another_policy(il_run, corridor, episodes_file,
                                                                                   tmp_path):
    """``init=`` in IL mode is offline fine-tuning: training starts from the checkpoint's weights and
    vocabulary (a near-zero learning rate leaves them there; a cold start does not), and an init of
    another policy is refused as in DAgger."""
    import torch

    from vlnverse.core.cache_key import sha256_file
    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.checkpoint import read_checkpoint

    init = Path(il_run[0].out) / "best.pt"
    start = read_checkpoint(init)
    tiny = {**TINY, "il__epochs": 1, "il__lr": 1e-12, "validation__every": 1}
    summary = _train(small_config(tmp_path / "warm", episodes_file, policy="seq2seq", init=str(init), **tiny), corridor)
    warm = read_checkpoint(tmp_path / "warm" / "last.pt")
    assert warm["vocab"] == start["vocab"] and summary["init_unknown_words"] == 0
    assert all(torch.allclose(warm["state_dict"][k].float(), v.float(), atol=1e-6) for k, v in start["state_dict"].items())
    relative = os.path.relpath(init, tmp_path / "warm")  # paths relative to the run folder, with the file's hash
    assert warm["config"]["init"] == warm["provenance"]["init"] == relative and relative.startswith("../")
    assert warm["provenance"]["files"][relative] == sha256_file(init)
    _train(small_config(tmp_path / "cold", episodes_file, policy="seq2seq", **tiny), corridor)
    cold = read_checkpoint(tmp_path / "cold" / "last.pt")["state_dict"]
    assert any(not torch.allclose(cold[k].float(), v.float(), atol=1e-3) for k, v in start["state_dict"].items()
               if v.dtype.is_floating_point)
    with pytest.raises(ConfigError, match="'seq2seq' policy"):
        _train(small_config(tmp_path / "other", episodes_file, policy="cma", init=str(init), **TINY), corridor)


def test_interrupted_run_resumes_to_the_same_weights(corridor, episodes_file, tmp_path, monkeypatch):
    import torch

    from vlnverse.learn.checkpoint import read_checkpoint

    kw = {**TINY, "il__epochs": 2, "il__batch_size": 1, "validation__every": 5, "val": {}}
    _train(small_config(tmp_path / "full", episodes_file, policy="seq2seq", **kw), corridor)
    cfg = small_config(tmp_path / "cut", episodes_file, policy="seq2seq", **kw)
    undo = interrupt_batch(monkeypatch, 6)  # epoch 2, batch 2
    with pytest.raises(KeyboardInterrupt):
        _train(cfg, corridor)
    assert read_checkpoint(tmp_path / "cut" / "last.pt")["position"] == {"phase": "il", "epoch": 1, "batch": 1}
    undo()
    _train(cfg, corridor)
    a = read_checkpoint(tmp_path / "full" / "last.pt")["state_dict"]
    b = read_checkpoint(tmp_path / "cut" / "last.pt")["state_dict"]
    assert all(torch.equal(a[k], b[k]) for k in a)  # deterministic on CPU, resumed at the data position
    # no validation ran (every 5 epochs, 2 trained): best.pt is there all the same, the last weights
    assert (tmp_path / "full" / "best.pt").read_bytes() == (tmp_path / "full" / "last.pt").read_bytes()
    changed = small_config(tmp_path / "cut", episodes_file, policy="seq2seq", **{**kw, "il__lr": 0.01})
    from vlnverse.core.errors import ConfigError

    with pytest.raises(ConfigError, match="different config"):
        _train(changed, corridor)


def test_nan_loss_stops_with_a_clear_message_and_keeps_the_last_checkpoint(corridor, episodes_file, tmp_path, monkeypatch):
    import torch

    from vlnverse.learn import policies as P
    from vlnverse.learn.errors import TrainingError

    original, calls = P.sequence_loss, {"n": 0}

    def poisoned(*a):
        calls["n"] += 1
        return original(*a) * (float("nan") if calls["n"] == 3 else 1.0)

    monkeypatch.setattr(P, "sequence_loss", poisoned)
    cfg = small_config(tmp_path / "nan", episodes_file, policy="seq2seq", **{**TINY, "val": {}})
    with pytest.raises(TrainingError, match=r"loss is nan at epoch 2 batch 1.*last good checkpoint is kept"):
        _train(cfg, corridor)
    assert (tmp_path / "nan" / "last.pt").is_file()
    from vlnverse.learn.checkpoint import read_checkpoint

    assert read_checkpoint(tmp_path / "nan" / "last.pt")["position"]["epoch"] == 1


def test_bad_configs_are_one_line_errors(episodes_file, tmp_path, corridor):
    from vlnverse.core.errors import ConfigError

    with pytest.raises(ConfigError, match="policy.name"):
        small_config(tmp_path / "x", episodes_file, policy="transformer")
    with pytest.raises(ConfigError, match="init.*mode=dagger needs a checkpoint"):
        small_config(tmp_path / "x", episodes_file, mode="dagger")
    with pytest.raises(ConfigError, match="inflection_weight"):
        small_config(tmp_path / "x", episodes_file, il__inflection_weight=0.5)
    with pytest.raises(ConfigError, match="collision_mode"):
        small_config(tmp_path / "x", episodes_file, collision_mode="graph")
    cfg = small_config(tmp_path / "x", episodes_file, train_split="val_unseen")
    with pytest.raises(ConfigError, match="train_split"):
        _train(cfg, corridor)


def test_cli_reports_config_errors_in_one_line(tmp_path, capsys):
    from vlnverse.cli import main

    bad = tmp_path / "bad.yaml"
    bad.write_text("policy: {name: cma}\ntask: fine_grained\ntrain: x.jsonl\nil: {epochs: 0}\n")
    assert main(["train", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "il.epochs" in err


def test_interrupted_dagger_run_resumes_to_the_same_weights(il_run, corridor, episodes_file, tmp_path, monkeypatch):
    """Ctrl-C while retraining in round 2: the rerun restarts round 2 from round 1's weights and
    optimizer, truncates the aggregate to round 1's episodes, and ends where an uninterrupted run ends."""
    import torch

    from vlnverse.learn.checkpoint import read_checkpoint
    from vlnverse.learn.store import StepStore

    init = str(Path(il_run[0].out) / "best.pt")
    kw = {**TINY, "mode": "dagger", "init": init, "val": {}, "dagger": {"rounds": 2, "p": 0.5, "epochs": 1}}
    full = _train(small_config(tmp_path / "full", episodes_file, policy="seq2seq", **kw), corridor)
    cfg = small_config(tmp_path / "cut", episodes_file, policy="seq2seq", **kw)
    # round 1 trains 4 batches (4 teacher + 4 collected episodes); the 6th is round 2, batch 2
    undo = interrupt_batch(monkeypatch, 6)
    with pytest.raises(KeyboardInterrupt):
        _train(cfg, corridor)
    assert read_checkpoint(tmp_path / "cut" / "last.pt")["position"] == {"phase": "dagger", "round": 1,
                                                                          "aggregate_episodes": 4}
    assert len(StepStore(tmp_path / "cut" / "dagger_aggregate")) == 8  # round 2's episodes were collected
    undo()
    resumed = _train(cfg, corridor)
    assert [r["round"] for r in resumed["dagger"]] == [2]
    assert resumed["dagger"][0]["aggregated_steps"] == full["dagger"][1]["aggregated_steps"]
    assert len(StepStore(tmp_path / "cut" / "dagger_aggregate")) == 8
    a = read_checkpoint(tmp_path / "full" / "last.pt")["state_dict"]
    b = read_checkpoint(tmp_path / "cut" / "last.pt")["state_dict"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_policy_agent_brings_its_cameras_to_any_eval_rig(il_run, corridor, episodes_file, tmp_path):
    """The runner adds the checkpoint's cameras that the eval config's rig lacks (a taken name at
    another size as ``policy_<name>``); the run acts as with the checkpoint's own rig."""
    from vlnverse.core.errors import ConfigError
    from vlnverse.run.agents import Agent, make_agent
    from vlnverse.run.setup import EpisodeSource, NamedSpec, SensorConfig
    from vlnverse.eval.config import EvalConfig, ReportConfig
    from vlnverse.run.agents import agent_rig
    from vlnverse.eval.runner import run_eval
    from vlnverse.sim.sensors import CameraSpec

    path = str(Path(il_run[0].out) / "best.pt")
    agent = make_agent("policy", {"checkpoint": path})
    own = [CameraSpec("rgb", "rgb", 16, 16), CameraSpec("depth", "depth", 16, 16)]
    assert agent.required_sensors(own + [CameraSpec("extra", "rgb", 64, 64)]) == []
    assert agent.required_sensors([CameraSpec("rgb", "rgb", 32, 32)]) == [CameraSpec("policy_rgb", "rgb", 16, 16),
                                                                          CameraSpec("depth", "depth", 16, 16)]
    with pytest.raises(ConfigError) as err:  # without the runner's additions the rig is still checked
        agent.check_sensors([CameraSpec("rgb", "rgb", 32, 32), CameraSpec("depth", "depth", 16, 16)])
    message = str(err.value)
    assert "\n" not in message and message.startswith(path) and "sensors" in message
    assert "lacks the policy's [rgb rgb 16x16]" in message and "rgb rgb 16x16, depth depth 16x16" in message
    agent.check_sensors(agent_rig(agent, [CameraSpec("rgb", "rgb", 32, 32)]))

    class Greedy(Agent):  # an agent asking for a name the rig uses for another camera
        def required_sensors(self, sensors):
            return [CameraSpec("rgb", "depth", 8, 8)]

    with pytest.raises(ConfigError, match="sensors: the agent needs camera 'rgb' as depth 8x8, the rig has it as rgb 16x16"):
        agent_rig(Greedy(), own)

    def run(rig, name):
        cfg = EvalConfig(agent=NamedSpec("policy", {"checkpoint": path}), task="fine_grained",
                         episodes=EpisodeSource(path=str(episodes_file)), collision_mode="telhop",
                         sensors=rig, max_steps=30, success_distance=1.5, out=str(tmp_path / name),
                         report=ReportConfig(enabled=False))
        cfg.validate()
        run_eval(cfg, progress=False, print_summary=False, scene_loader=lambda *a: corridor)
        return [json.loads(line)["actions"] for line in (tmp_path / name / "episodes.jsonl").read_text().splitlines()]

    own_actions = run([SensorConfig("rgb", "rgb", 16, 16), SensorConfig("depth", "depth", 16, 16)], "own")
    assert run([SensorConfig("rgb", "rgb", 64, 48)], "other") == own_actions and own_actions[0]


@pytest.mark.slow
def test_kill_9_during_training_resumes_to_the_same_weights(corridor, episodes_file, tmp_path):
    """SIGKILL a training process once it has saved a checkpoint (saved after every batch); the
    rerun resumes from the last complete ``last.pt`` (safetensors, written atomically) and ends
    with the weights of an uninterrupted run."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import torch

    from vlnverse.learn.checkpoint import read_checkpoint

    kw = {**TINY, "il__epochs": 10, "il__batch_size": 1, "il__checkpoint_every": 1, "validation__every": 20, "val": {}}
    _train(small_config(tmp_path / "full", episodes_file, policy="seq2seq", **kw), corridor)
    tests = Path(__file__).resolve().parents[1]
    script = (f"import sys, json; sys.path[:0] = [{str(tests / 'eval')!r}, {str(tests / 'learn')!r}]\n"
              "from eval_scenes import corridor_scene\nfrom learn_helpers import small_config\n"
              "from vlnverse.learn.trainer import run_training\nfrom vlnverse.sim.body import load_body\n"
              "from vlnverse.tasks.base import context_from_description\n"
              "ctx = context_from_description(corridor_scene(), load_body('r2r_ce'), 0.05, scene_path='corridor.usda')\n"
              f"cfg = small_config({str(tmp_path / 'cut')!r}, {str(episodes_file)!r}, policy='seq2seq', **json.loads({json.dumps(json.dumps(kw))}))\n"
              "run_training(cfg, scene_loader=lambda *a: ctx, progress=False, report=lambda s: None)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tests.parent / "exts" / "vlnverse"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", script], env=env)
    last = tmp_path / "cut" / "last.pt"
    try:
        deadline = time.time() + 300
        while not last.is_file() and proc.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, f"the training process ended (status {proc.returncode}) before it could be killed"
        assert last.is_file(), "the training process wrote no checkpoint within 300 s"
        time.sleep(0.1)  # a few more batches: the kill may land in the middle of a write
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:  # a failed check above: the run must not outlive the test
            proc.kill()
        proc.wait(60)
    assert proc.returncode == -signal.SIGKILL
    position = read_checkpoint(last)["position"]  # readable: an interrupted write never replaces it
    assert position["phase"] == "il" and (position["epoch"], position["batch"]) < (10, 0)
    _train(small_config(tmp_path / "cut", episodes_file, policy="seq2seq", **kw), corridor)
    a = read_checkpoint(tmp_path / "full" / "last.pt")["state_dict"]
    b = read_checkpoint(last)["state_dict"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_budget_that_ends_before_the_first_epoch_is_refused_with_the_minimum(corridor, episodes_file, tmp_path):
    from vlnverse.learn.errors import BudgetTooSmallError
    from vlnverse.learn.trainer import Trainer

    cfg = small_config(tmp_path / "short", episodes_file, il__batch_size=1, il__max_seconds=1e-6, il__epochs=2)
    trainer = Trainer(cfg, scene_loader=lambda *a: corridor, progress=False, report=lambda s: None)
    t0 = time.perf_counter()
    with pytest.raises(BudgetTooSmallError, match=r"after 1 of 4 batches of the first epoch.*il\.max_seconds >= \d+") as err:
        trainer.run()
    elapsed = time.perf_counter() - t0
    # one batch's time x 4 batches x 1.1 (its margin), said rounded up: at most 4.4 x the whole run's time
    assert f"il.max_seconds >= {math.ceil(err.value.minimum_seconds)}" in str(err.value) and err.value.phase == "il"
    assert 0 < err.value.minimum_seconds <= 4.4 * elapsed and "\n" not in str(err.value)
