"""An evaluation folder is owned, locked and keeps its records (issue 10, defects 2, 3 and 9)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from test_runner import _config, _episodes, corridor  # noqa: F401 - the corridor fixture
from vlnverse.core.errors import ConfigError, VLNVerseError
from vlnverse.core.io import folder_lock
from vlnverse.eval.config import ReportConfig
from vlnverse.eval.folder import CONFIG_FILE, EPISODES_FILE
from vlnverse.eval.runner import run_eval
from vlnverse.tasks.episode import save_episodes

PKG = str(Path(__file__).resolve().parents[2] / "exts" / "vlnverse")


def _cfg(tmp_path, corridor, agent="oracle", mode="telhop", n=2, **kw):
    episodes_file = tmp_path / "episodes.jsonl"
    save_episodes(episodes_file, _episodes(corridor)[:n])
    return _config(tmp_path, episodes_file, agent, mode, report=ReportConfig(enabled=False), **kw)


def test_a_second_run_on_a_locked_folder_is_refused_naming_the_holder(corridor, tmp_path):
    cfg = _cfg(tmp_path, corridor)
    out = Path(cfg.out)
    out.mkdir()
    with folder_lock(out):
        with pytest.raises(VLNVerseError) as err:
            run_eval(cfg, progress=False, print_summary=False, scene_loader=lambda *a: corridor)
        assert f"pid {os.getpid()}" in str(err.value) and "\n" not in str(err.value)
        assert not (out / EPISODES_FILE).exists() and not (out / CONFIG_FILE).exists()
    # released: the run goes ahead
    run_eval(cfg, progress=False, print_summary=False, scene_loader=lambda *a: corridor)
    assert len((out / EPISODES_FILE).read_text().splitlines()) == 2


def test_the_lock_is_released_when_its_holder_is_killed(tmp_path):
    code = ("import os, signal, sys\nfrom vlnverse.core.io import folder_lock\n"
            "with folder_lock(sys.argv[1]):\n    os.kill(os.getpid(), signal.SIGKILL)\n")
    run = subprocess.run([sys.executable, "-c", code, str(tmp_path)], env={**os.environ, "PYTHONPATH": PKG},
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == -signal.SIGKILL, f"exit status {run.returncode}: {run.stderr}"
    with folder_lock(tmp_path):
        pass


def test_a_config_failing_at_run_time_writes_no_config_record(corridor, tmp_path):
    with pytest.raises(ConfigError, match="^mode_params.strict.no_such_parameter: "):  # found by validate(), before a run
        _cfg(tmp_path, corridor, mode="strict", mode_params={"strict": {"no_such_parameter": 1}})
    bad = _cfg(tmp_path, corridor, mode="strict")
    bad.agent.params = {"no_such_parameter": 1}  # agent parameters are checked when the agent is built
    with pytest.raises(ConfigError, match="agent.params"):
        run_eval(bad, progress=False, print_summary=False, scene_loader=lambda *a: corridor)
    out = Path(bad.out)
    assert not (out / CONFIG_FILE).exists() and not (out / EPISODES_FILE).exists()
    fixed = _cfg(tmp_path, corridor, mode="strict", mode_params={"strict": {"displacement_threshold": 0.2}})
    summary = run_eval(fixed, progress=False, print_summary=False, scene_loader=lambda *a: corridor)
    assert summary["overall"]["episodes"] == 2
    assert json.loads((out / CONFIG_FILE).read_text())["config"]["mode_params"] == {"strict": {"displacement_threshold": 0.2}}


def test_resume_keeps_every_valid_record_and_sets_bad_lines_aside(corridor, tmp_path, caplog):
    cfg = _cfg(tmp_path, corridor, n=5)
    full = run_eval(cfg, progress=False, print_summary=False, scene_loader=lambda *a: corridor)
    log_path = Path(cfg.out) / EPISODES_FILE
    lines = log_path.read_bytes().splitlines(keepends=True)
    assert len(lines) == 5
    bad = [b'{"episode_id": "corridor-1", "metr\n', b"\xff\xfe not utf-8\n", b'{"x": ' + b"9" * 5000 + b"}\n"]
    # corrupt lines in the middle, a repeated record, and a truncated last line
    log_path.write_bytes(lines[0] + bad[0] + lines[1] + bad[1] + lines[2] + bad[2] + lines[0] + lines[3]
                         + lines[4][:40])
    with caplog.at_level("WARNING"):
        resumed = run_eval(cfg, progress=False, print_summary=False, scene_loader=lambda *a: corridor)
    assert resumed["timing"]["episodes_run_now"] == 1  # only the truncated fifth is run again
    new_lines = log_path.read_bytes().splitlines(keepends=True)
    assert new_lines[:4] == [lines[0], lines[1], lines[2], lines[3]]  # verbatim
    assert json.loads(new_lines[4])["episode_id"] == "corridor-4"
    side = (Path(cfg.out) / "episodes.rejected.jsonl").read_bytes()
    assert side == bad[0] + bad[1] + bad[2] + lines[0] + lines[4][:40] + b"\n"
    assert "line(s) 2, 4, 6, 7, 9" in caplog.text
    full.pop("timing"), resumed.pop("timing")
    assert resumed == full


@pytest.mark.parametrize("field, where", [("goals[0].position", (640.0, 1.5)), ("start_position", (5.0, -30.0))])
def test_an_episode_outside_the_scene_is_rejected_naming_file_and_line(corridor, tmp_path, field, where):
    from vlnverse.tasks.episode import Goal

    episodes = _episodes(corridor)[:3]
    if field == "start_position":
        episodes[2].start_position = [*where, 0.0]
    else:
        episodes[2].goals = [Goal([*where, 0.0])]
    episodes_file = tmp_path / "far.jsonl"
    save_episodes(episodes_file, episodes)
    cfg = _config(tmp_path, episodes_file, "oracle", "telhop", report=ReportConfig(enabled=False))
    with pytest.raises(ConfigError) as err:
        run_eval(cfg, progress=False, print_summary=False, scene_loader=lambda *a: corridor)
    message = str(err.value)
    assert message.startswith(f"{episodes_file}:3: {field}: episode 'corridor-2'") and "outside scene" in message
    assert not (Path(cfg.out) / EPISODES_FILE).exists()  # nothing was scored
    # the corrected file is what the next run (and its resumes) evaluates
    save_episodes(episodes_file, _episodes(corridor)[:3])
    assert run_eval(cfg, progress=False, print_summary=False, scene_loader=lambda *a: corridor)["overall"]["episodes"] == 3
    assert run_eval(cfg, progress=False, print_summary=False, scene_loader=lambda *a: corridor)["overall"]["episodes"] == 3


def test_an_episode_outside_a_later_scene_stops_the_run_before_anything_is_written(corridor, tmp_path):
    """Every scene's episodes are checked before the first one runs: a bad episode in the second
    scene leaves no record and no config of the first scene behind."""
    from vlnverse.tasks.episode import Goal

    episodes = _episodes(corridor)[:4]
    for ep in episodes[:2]:
        ep.scene_path = "first.usd"
    for ep in episodes[2:]:
        ep.scene_path = "second.usd"
    episodes[3].goals = [Goal([640.0, 1.5, 0.0])]
    episodes_file = tmp_path / "two_scenes.jsonl"
    save_episodes(episodes_file, episodes)
    cfg = _config(tmp_path, episodes_file, "oracle", "telhop", report=ReportConfig(enabled=False))
    loaded = []

    def loader(path, *rest):
        loaded.append(Path(path).name)
        return corridor

    with pytest.raises(ConfigError, match=r"two_scenes.jsonl:4: goals\[0\].position: episode 'corridor-3'"):
        run_eval(cfg, progress=False, print_summary=False, scene_loader=loader)
    assert loaded == ["first.usd", "second.usd"]
    assert not (Path(cfg.out) / EPISODES_FILE).exists() and not (Path(cfg.out) / CONFIG_FILE).exists()


def test_the_cli_refuses_a_second_run_in_one_line(corridor, tmp_path):
    from vlnverse.core.io import claim_output_dir

    episodes_file = tmp_path / "episodes.jsonl"
    save_episodes(episodes_file, _episodes(corridor)[:1])
    out = claim_output_dir(tmp_path / "run", command="eval")
    config = tmp_path / "c.yaml"
    config.write_text(f"agent: {{name: oracle}}\ntask: fine_grained\nepisodes: {episodes_file}\nout: {out}\n")
    with folder_lock(out):  # the first run, still going
        run = subprocess.run([sys.executable, "-m", "vlnverse", "eval", str(config), "--no-progress"],
                             env={**os.environ, "PYTHONPATH": PKG}, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    (line,) = run.stderr.strip().splitlines()
    assert f"in use by pid {os.getpid()} on " in line and str(out) in line
    assert sorted(p.name for p in out.iterdir()) == [".vlnverse-output.json", ".vlnverse.lock"]


def test_a_second_quickstart_on_one_folder_is_refused(tmp_path):
    from vlnverse.core.io import claim_output_dir
    from vlnverse.eval.quickstart import run_quickstart

    out = claim_output_dir(tmp_path / "qs", command="quickstart")
    with folder_lock(out):
        with pytest.raises(VLNVerseError, match=f"in use by pid {os.getpid()}"):
            run_quickstart(out, progress=False)
    assert sorted(p.name for p in out.iterdir()) == [".vlnverse-output.json", ".vlnverse.lock"]
