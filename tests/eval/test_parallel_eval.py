"""Parallel evaluation (``vlnverse.core.jobs``): local worker processes and a local Ray
instance give exactly the serial records and summary; a killed worker's episodes are re-run
elsewhere, each exactly once; a scene that keeps crashing is reported by id and the rest completes."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from eval_scenes import corridor_episodes, corridor_loader
from vlnverse.core.errors import ConfigError
from vlnverse.run.setup import EpisodeSource, NamedSpec, SensorConfig
from vlnverse.eval.config import EvalConfig, ReportConfig
from vlnverse.eval.folder import EPISODES_FILE
from vlnverse.eval.runner import run_eval
from vlnverse.tasks.episode import save_episodes

STARTS = [((1.3, 1.5), 0.0, (9.0, 1.5)), ((9.0, 0.6), math.pi, (1.0, 0.6)), ((2.0, 2.5), 0.0, (8.0, 0.5))]


@pytest.fixture(scope="module")
def episodes_file(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("scenes")
    episodes = corridor_episodes(folder, STARTS)
    out = folder / "episodes.jsonl"
    save_episodes(out, episodes)
    return out


def _config(episodes_file: Path, out: Path) -> EvalConfig:
    cfg = EvalConfig(agent=NamedSpec("random"), task="fine_grained", episodes=EpisodeSource(path=str(episodes_file)),
                     collision_mode="strict", sensors=[SensorConfig("depth", "depth", 32, 32)], out=str(out),
                     seed=5, max_steps=60, report=ReportConfig(enabled=False))
    cfg.validate()
    return cfg


def _run(episodes_file: Path, out: Path, **kw) -> tuple[dict, list[dict]]:
    summary = run_eval(_config(episodes_file, out), progress=False, print_summary=False, scene_loader=corridor_loader,
                       **kw)
    records = [json.loads(line) for line in (out / EPISODES_FILE).read_text().splitlines()]
    return summary, records


def _comparable(summary: dict, records: list[dict]) -> tuple[dict, dict]:
    summary = {k: v for k, v in summary.items() if k != "timing"}
    by_id = {r["episode_id"]: {k: v for k, v in r.items() if k != "duration_s"} for r in records}
    return summary, by_id


@pytest.fixture(scope="module")
def serial(episodes_file, tmp_path_factory):
    summary, records = _run(episodes_file, tmp_path_factory.mktemp("serial") / "run")
    assert len(records) == 3 * len(STARTS)
    assert len({json.dumps(r["trajectory"]) for r in records}) > 3  # the scenes and starts really differ
    return _comparable(summary, records)


def test_two_local_workers_give_the_serial_records_and_summary(episodes_file, serial, tmp_path):
    summary, records = _run(episodes_file, tmp_path / "run", workers=2)
    assert summary["timing"]["workers"] == 2
    assert len(records) == len({r["episode_id"] for r in records}) == 3 * len(STARTS)
    assert _comparable(summary, records) == serial
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["overall"] == serial[0]["overall"]


def test_a_killed_worker_is_replaced_and_every_episode_runs_exactly_once(episodes_file, serial, tmp_path):
    scenes = Path(json.loads(episodes_file.read_text().splitlines()[0])["scene_path"]).parent
    flag = scenes / "corridor_b.kill-once"
    flag.touch()
    try:
        summary, records = _run(episodes_file, tmp_path / "run", workers=2)
        assert (scenes / "corridor_b.killed").exists()  # a worker really was killed (SIGKILL) on corridor_b
    finally:
        flag.unlink(missing_ok=True)
        (scenes / "corridor_b.killed").unlink(missing_ok=True)
    assert "failed_scenes" not in summary
    ids = [r["episode_id"] for r in records]
    assert sorted(ids) == sorted(serial[1]) and len(ids) == len(set(ids))
    assert _comparable(summary, records) == serial


@pytest.mark.slow  # >= 15 s of job timeout, ~45 s loaded; the hung-worker machinery is tests/core/test_parallel.py's
def test_a_hung_worker_is_killed_after_the_job_timeout_and_its_scene_rerun(episodes_file, serial, tmp_path):
    scenes = Path(json.loads(episodes_file.read_text().splitlines()[0])["scene_path"]).parent
    flag = scenes / "corridor_a.hang-once"
    flag.touch()
    try:
        summary, records = _run(episodes_file, tmp_path / "run", workers=2, job_timeout=15.0)
        assert (scenes / "corridor_a.hung").exists()  # a worker really hung (asleep, alive) on corridor_a
    finally:
        flag.unlink(missing_ok=True)
        (scenes / "corridor_a.hung").unlink(missing_ok=True)
    assert "failed_scenes" not in summary
    ids = [r["episode_id"] for r in records]
    assert sorted(ids) == sorted(serial[1]) and len(ids) == len(set(ids))
    assert _comparable(summary, records) == serial


def test_a_scene_that_keeps_crashing_is_reported_and_the_rest_completes(episodes_file, serial, tmp_path):
    scenes = Path(json.loads(episodes_file.read_text().splitlines()[0])["scene_path"]).parent
    crash = scenes / "corridor_c.crash"
    crash.touch()
    try:
        summary, records = _run(episodes_file, tmp_path / "run", workers=2)
    finally:
        crash.unlink()
    assert [f["scene"] for f in summary["failed_scenes"]] == ["corridor_c"]
    assert "test crash" in summary["failed_scenes"][0]["error"]
    assert sorted(summary["failed_scenes"][0]["missing_episodes"]) == [f"corridor_c-{i}" for i in range(len(STARTS))]
    assert sorted(r["episode_id"] for r in records) == sorted(k for k in serial[1] if not k.startswith("corridor_c"))
    assert summary["overall"]["episodes"] == 2 * len(STARTS)


@pytest.mark.parametrize("workers", [0, -1, True])
def test_bad_worker_count_is_a_config_error(episodes_file, tmp_path, workers):
    with pytest.raises(ConfigError, match="--workers"):
        _run(episodes_file, tmp_path / "run", workers=workers)


@pytest.mark.slow  # starting Ray takes ~10-30 s here
def test_ray_engine_gives_the_serial_records_and_summary(episodes_file, serial, tmp_path):
    ray = pytest.importorskip("ray", reason="Ray is the optional [ray] extra")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        summary, records = _run(episodes_file, tmp_path / "run", workers=2, engine="ray")
    finally:
        ray.shutdown()
    assert summary["timing"]["engine"] == "ray"
    assert _comparable(summary, records) == serial


def test_unreachable_ray_address_is_one_line_without_hanging(episodes_file, tmp_path):
    pytest.importorskip("ray", reason="Ray is the optional [ray] extra")
    with pytest.raises(ConfigError, match="--address") as err:  # within RAY_CONNECT_TIMEOUT_S, not Ray's own retries
        _run(episodes_file, tmp_path / "run", engine="ray", workers=2, address="127.0.0.1:1")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("argv", [["--workers", "0"], ["collision_mode=strict", "--workers=0"],
                                  ["collision_mode=strict", "--workers", "two"]])
def test_cli_bad_worker_count_is_one_line_exit_2(argv, capsys):
    from vlnverse.cli import main

    assert main(["eval", "oracle_fine_grained_strict", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("vlnverse: error: --workers: got") and "\n" not in err and "integer >= 1" in err


@pytest.mark.parametrize("argv", [["--job-timeout", "0"], ["--job-timeout=-3"], ["--job-timeout", "soon"]])
def test_cli_bad_job_timeout_is_one_line_exit_2(argv, capsys):
    from vlnverse.cli import main

    assert main(["eval", "oracle_fine_grained_strict", "--workers", "2", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("vlnverse: error: --job-timeout: got") and "\n" not in err


def test_cli_ray_without_a_reachable_cluster_is_one_line_exit_2(capsys):
    pytest.importorskip("ray", reason="Ray is the optional [ray] extra")
    from vlnverse.cli import main

    assert main(["eval", "oracle_fine_grained_strict", "--engine", "ray", "--address", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "cannot reach a Ray cluster at 127.0.0.1:1" in err and "\n" not in err
