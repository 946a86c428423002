"""Data-parallel training (``learn.distributed``): 2 gloo ranks on CPU launched through
``torch.distributed.run`` against single-process runs of the same configs on the corridor.

The 2-rank launches are slow (~30-50 s on a loaded 2-core machine, ``pytest -m slow``); the
non-slow suite keeps the single-process checks (scaling, launch options, the torchrun command)."""
from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest

from learn_helpers import small_config

TINY = dict(il__epochs=1, il__batch_size=4, il__lr=0.001, validation__every=5, validation__limit=2, max_steps=40, val={},
            sensors=[{"name": "rgb", "kind": "rgb", "width": 16, "height": 16},
                     {"name": "depth", "kind": "depth", "width": 16, "height": 16}])
RANK_SCRIPT = str(Path(__file__).with_name("ddp_rank.py"))


def _single(cfg, corridor):
    from vlnverse.learn.trainer import run_training

    return run_training(cfg, scene_loader=lambda *a: corridor, progress=False, report=lambda s: None)


def _weights(out):
    from vlnverse.learn.checkpoint import read_checkpoint

    return read_checkpoint(Path(out) / "last.pt")["state_dict"]


def _max_diff(a, b):
    assert a.keys() == b.keys()
    return max(float((a[k].float() - b[k].float()).abs().max()) for k in a)


def _launch(tmp, episodes_file, jobs, nproc=2, max_restarts=0):
    from vlnverse.learn.distributed import launch

    spec = {"episodes": str(episodes_file), "results": str(tmp / "results"), "jobs": jobs}
    (tmp / "spec.json").write_text(json.dumps(spec))
    launch(nproc, [RANK_SCRIPT, str(tmp / "spec.json")], max_restarts=max_restarts)
    return [json.loads((tmp / f"results.rank{r}.json").read_text()) for r in range(nproc)]


JOBS = {
    "config": dict(kw=TINY, rank1={"il__lr": 0.01}),            # ranks disagree: one line, nothing written
    "code": dict(kw=TINY, rank1_code=True),
    "one_step": dict(kw=TINY),                                  # 4 episodes, global batch 4: one step
    "epochs": dict(kw={**TINY, "il__epochs": 2, "il__batch_size": 3, "val": None, "validation__every": 1}),
    "per_rank": dict(kw={**TINY, "il__batch_size": 2, "il__lr": 0.0005, "distributed": {"batch": "per_rank", "lr_scaling": "linear"}}),
    # DAgger from the one-step checkpoint: rank 0 collects the round, every rank trains on the aggregate
    "dagger": dict(kw={**TINY, "mode": "dagger", "dagger__rounds": 1, "dagger__epochs": 1, "dagger__episodes": 2}),
}


@pytest.fixture(scope="module")
def ddp(corridor, episodes_file, tmp_path_factory):
    """One 2-rank launch running every job of ``JOBS`` (rank 0 builds the observation cache)."""
    tmp = tmp_path_factory.mktemp("ddp")
    jobs = []
    for name, job in JOBS.items():
        kw = dict(job["kw"])
        if kw.get("val", {}) is None:  # validate on the training episodes
            kw.pop("val")
        if kw.get("mode") == "dagger":
            kw["init"] = str(tmp / "one_step" / "last.pt")
        jobs.append({**job, "kw": kw, "out": str(tmp / name)})
    results = _launch(tmp, episodes_file, jobs)
    return tmp, {name: (results[0][i], results[1][i]) for i, name in enumerate(JOBS)}, jobs


@pytest.mark.slow  # the shared 2-rank gloo launch (ddp fixture)
def test_ranks_that_disagree_on_config_or_code_stop_with_one_line_and_write_nothing(ddp):
    tmp, got, _ = ddp
    for name, field in (("config", "il.lr"), ("code", "code_version")):
        r0, r1 = got[name]
        assert not r0["ok"] and not r1["ok"] and r0["error"] == r1["error"], got[name]
        assert "\n" not in r0["error"] and r0["error"].startswith(f"{field}: ranks disagree") and "rank 1" in r0["error"]
        assert not (tmp / name).exists()  # checked before anything is written
    assert "0.01 (rank 0: 0.001)" in got["config"][0]["error"]


@pytest.mark.slow  # the shared 2-rank gloo launch (ddp fixture)
def test_one_step_on_two_ranks_equals_one_process_on_the_concatenated_batch(ddp, corridor, episodes_file):
    tmp, got, jobs = ddp
    r0, r1 = got["one_step"]
    assert r0["ok"] and r1["ok"], got["one_step"]
    assert (r0["world_size"], r0["effective_batch"]) == (2, 4) and r0["distributed"]["batch_per_rank"] == 2
    assert r0["cache"]["status"] == "built" and r1["cache"]["status"] == "reused"  # rank 0 built it, once
    assert r0["il"]["samples"] == r1["il"]["samples"] > 0  # the whole batch's steps, on every rank
    summary = json.loads((tmp / "one_step" / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["effective_batch"] == 4
    single = _single(small_config(tmp / "single_one_step", episodes_file, policy="seq2seq", **TINY), corridor)
    assert single["world_size"] == 1 and single["effective_batch"] == 4
    assert single["il"]["samples"] == r0["il"]["samples"]
    a, b = _weights(tmp / "one_step"), _weights(tmp / "single_one_step")
    assert _max_diff(a, b) < 1e-5
    assert r0["il"]["loss"] == pytest.approx(single["il"]["loss"], abs=1e-5)  # the whole batch's loss, logged once


@pytest.mark.slow  # the shared 2-rank gloo launch (ddp fixture)
def test_a_run_on_two_ranks_writes_one_checkpoint_one_log_and_validates_once(ddp, corridor, episodes_file):
    """Global batch 3 of 4 episodes: the last batch of an epoch leaves rank 1 without an episode."""
    tmp, got, jobs = ddp
    r0, r1 = got["epochs"]
    assert r0["ok"] and r1["ok"], got["epochs"]
    out = tmp / "epochs"
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert [f for f in files if f.endswith(".pt")] == ["best.pt", "last.pt"]
    assert len([f for f in files if f.startswith("tb/")]) == 1  # one TensorBoard events file
    assert not [f for f in files if ".tmp" in f or "rank" in f]
    rows = list(csv.DictReader(open(out / "train_log.csv")))
    assert [r["epoch"] for r in rows if r["phase"] == "il"] == ["1", "2"]  # one writer
    assert [r["world_size"] for r in rows if r["phase"] == "il"] == ["2", "2"]
    assert {r["effective_batch"] for r in rows if r["phase"] == "il"} == {"3"}
    assert len([r for r in rows if r["phase"] == "val"]) == 2  # once per validation, not once per rank
    assert sorted(p.name for p in (out / "val").iterdir()) == ["epoch_001", "epoch_002"]
    kw = dict(jobs[list(JOBS).index("epochs")]["kw"])
    single = _single(small_config(tmp / "single_epochs", episodes_file, policy="seq2seq", **kw), corridor)
    assert _max_diff(_weights(out), _weights(tmp / "single_epochs")) < 1e-5
    assert single["il"]["samples"] == r0["il"]["samples"]


@pytest.mark.slow  # the shared 2-rank gloo launch (ddp fixture)
def test_per_rank_batches_with_linear_lr_scaling(ddp, corridor, episodes_file):
    tmp, got, _ = ddp
    r0, _ = got["per_rank"]
    assert r0["ok"], got["per_rank"]
    assert r0["effective_batch"] == 4 and r0["distributed"]["lr"] == pytest.approx(0.001)
    # one process with the effective batch and the scaled rate trains the same step
    _single(small_config(tmp / "single_per_rank", episodes_file, policy="seq2seq",
                         **{**TINY, "il__batch_size": 4, "il__lr": 0.001}), corridor)
    assert _max_diff(_weights(tmp / "per_rank"), _weights(tmp / "single_per_rank")) < 1e-5
    assert _max_diff(_weights(tmp / "per_rank"), _weights(tmp / "one_step")) < 1e-5  # the same step as global batch 4


@pytest.mark.slow  # the shared 2-rank gloo launch (ddp fixture)
def test_dagger_round_on_two_ranks_collects_once_and_trains_like_one_process(ddp, corridor, episodes_file):
    tmp, got, jobs = ddp
    r0, r1 = got["dagger"]
    assert r0["ok"] and r1["ok"], got["dagger"]
    out = tmp / "dagger"
    rounds = [json.loads(line) for line in (out / "dagger.jsonl").read_text().splitlines()]
    assert [r["round"] for r in rounds] == [1] and rounds[0]["collected_episodes"] == 2
    assert sorted(p.name for p in out.glob("*.pt")) == ["best.pt", "last.pt", "round_01.pt"]
    kw = dict(jobs[list(JOBS).index("dagger")]["kw"])
    _single(small_config(tmp / "single_dagger", episodes_file, policy="seq2seq", **kw), corridor)
    single_rounds = [json.loads(line) for line in (tmp / "single_dagger" / "dagger.jsonl").read_text().splitlines()]
    assert rounds[0]["aggregated_steps"] == single_rounds[0]["aggregated_steps"] > 0  # the same rollouts, once
    for name in ("index.jsonl", "manifest.json"):
        assert (out / "dagger_aggregate" / name).read_bytes() == (tmp / "single_dagger" / "dagger_aggregate" / name).read_bytes()
    assert _max_diff(_weights(out), _weights(tmp / "single_dagger")) < 1e-5


def test_scaling_and_config_errors():
    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.distributed import scaling

    cfg = small_config("/tmp/x", "/dev/null", il__batch_size=4, il__lr=0.001)
    assert scaling(cfg, 4)["effective_batch"] == 4 and scaling(cfg, 4)["lr"] == 0.001
    cfg.distributed.batch, cfg.distributed.lr_scaling = "per_rank", "sqrt"
    s = scaling(cfg, 4)
    assert (s["effective_batch"], s["batch_per_rank"]) == (16, 4) and s["lr"] == pytest.approx(0.002)
    for field, value in (("distributed__batch", "all"), ("distributed__lr_scaling", "cubic"), ("distributed__timeout", 0)):
        with pytest.raises(ConfigError, match=field.replace("__", ".")):
            small_config("/tmp/x", "/dev/null", **{field: value})
    # the default block leaves the run key as before (old run folders resume); another one is part of it
    assert "distributed" not in small_config("/tmp/x", "/dev/null").run_key()
    assert small_config("/tmp/x", "/dev/null", distributed__batch="per_rank").run_key()["distributed"]["batch"] == "per_rank"


def test_launch_options_are_one_line_errors(capsys):
    from vlnverse.cli import main

    assert main(["train", "cma_fine_grained", "--nproc", "0"]) == 2
    assert main(["train", "cma_fine_grained", "il.lr=0.1", "--max-restarts=-1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["vlnverse: error: --nproc: got 0 (expected an integer >= 1)",
                   "vlnverse: error: --max-restarts: got -1 (expected an integer >= 0)"]


@pytest.mark.slow
def test_killing_one_rank_mid_epoch_restarts_the_job_and_resumes_to_the_same_weights(corridor, episodes_file, tmp_path):
    """SIGKILL rank 1 once rank 0 saved a checkpoint; torchrun (``max_restarts=1``) restarts both
    ranks, which resume from ``last.pt`` and its data position and end with the weights of an
    uninterrupted 2-rank run (deterministic for a fixed seed and N on CPU)."""
    import signal
    import threading
    import time

    import torch

    from vlnverse.learn.checkpoint import read_checkpoint

    kw = {**TINY, "il__epochs": 8, "il__batch_size": 2, "il__checkpoint_every": 1}
    full, cut = tmp_path / "full", tmp_path / "cut"
    full.mkdir(), cut.mkdir()
    _launch(full, episodes_file, [{"kw": kw, "out": str(full / "run")}])
    last = cut / "run" / "last.pt"
    killed = {}

    def killer():
        deadline = time.time() + 600
        pid_file = cut / "results.pids" / "rank1.try0"
        while time.time() < deadline and not (last.is_file() and pid_file.is_file()):
            time.sleep(0.05)
        position = read_checkpoint(last)["position"]
        killed["position"] = position
        os.kill(int(pid_file.read_text()), signal.SIGKILL)

    thread = threading.Thread(target=killer)
    thread.start()
    results = _launch(cut, episodes_file, [{"kw": kw, "out": str(cut / "run")}], max_restarts=1)
    thread.join()
    assert killed["position"]["phase"] == "il" and (killed["position"]["epoch"], killed["position"]["batch"]) < (8, 0)
    assert (cut / "results.pids" / "rank1.try1").is_file()  # the group was restarted
    assert results[0][0]["ok"]
    a, b = _weights(full / "run"), _weights(cut / "run")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_nproc_launches_the_same_train_command_through_torchrun(monkeypatch, capsys):
    import vlnverse.learn.distributed as D
    from vlnverse.cli import main
    from vlnverse.learn.config import resolve_train_config_path

    calls = []
    monkeypatch.setattr(D, "launch", lambda n, command, **kw: calls.append((n, command, kw)))
    assert main(["train", "cma_fine_grained", "il.lr=0.1", "--nproc", "2", "--max-restarts", "3", "--workers", "2",
                 "--no-progress"]) == 0
    path = str(resolve_train_config_path("cma_fine_grained"))
    assert calls == [(2, ["-m", "vlnverse", "train", path, "il.lr=0.1", "workers=2", "--no-progress"], {"max_restarts": 3})]


def test_run_log_of_an_earlier_version_keeps_its_columns_on_resume(tmp_path):
    from vlnverse.learn.run_log import LOG_COLUMNS, RunLogger

    old = [c for c in LOG_COLUMNS if c not in ("world_size", "effective_batch", "lr")]
    (tmp_path / "train_log.csv").write_text(",".join(old) + "\n")
    logger = RunLogger(tmp_path)
    logger.log(3, phase="il", epoch=1, loss=0.5, world_size=2, effective_batch=8, lr=0.001)
    logger.close()
    rows = list(csv.DictReader(open(tmp_path / "train_log.csv")))
    assert list(rows[0]) == old and rows[0]["loss"] == "0.5" and rows[0]["global_step"] == "3"
    new = tmp_path / "new"
    new.mkdir()
    logger = RunLogger(new)
    logger.log(1, phase="il", world_size=2, effective_batch=8, lr=0.001)
    logger.close()
    row = next(csv.DictReader(open(new / "train_log.csv")))
    assert (row["world_size"], row["effective_batch"], row["lr"]) == ("2", "8", "0.001")
    # a run stopped before its first row left an empty log: the resumed run writes the header
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "train_log.csv").write_text("")
    logger = RunLogger(empty)
    logger.log(5, phase="il", epoch=2, loss=0.25)
    logger.close()
    rows = list(csv.DictReader(open(empty / "train_log.csv")))
    assert list(rows[0]) == list(LOG_COLUMNS) and rows[0]["phase"] == "il" and rows[0]["loss"] == "0.25"
