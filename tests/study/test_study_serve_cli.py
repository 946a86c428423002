"""``vlnverse study serve`` start-up on a lab server: one server per study folder (the refusal names
the running one's host, port and pid), ``--out .`` refused, bad ports and hosts one line and exit 2
with nothing printed or written, changed episodes on restart refused naming the difference
(``--new-version`` keeps the old version under ``versions/``)."""
from __future__ import annotations

import dataclasses
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the study extra is not installed (pip install -e '.[study]')")

from vlnverse.core.errors import ConfigError
from vlnverse.study.assign import StudyStore
from vlnverse.study.config import StudyConfig
from vlnverse.tasks.episode import load_episodes, save_episodes

PACKAGE = str(Path(__import__("vlnverse").__file__).parents[1])


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([PACKAGE, os.environ.get("PYTHONPATH", "")])}


def _serve(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vlnverse", "study", "serve", *map(str, args)], cwd=cwd, env=_env(),
                          capture_output=True, text=True, timeout=300)


def _one_line_exit_2(result) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stdout == "", result.stdout  # nothing printed before the error
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def test_bad_port_bad_host_and_port_in_use_are_one_line_and_write_nothing(tmp_path, study_episodes):
    out = tmp_path / "study"
    line = _one_line_exit_2(_serve("--episodes", study_episodes, "--out", out, "--port", 70000))
    assert "--port" in line and "70000" in line and "0..65535" in line
    assert not out.exists()
    line = _one_line_exit_2(_serve("--episodes", study_episodes, "--out", out, "--host", "no-such-host.invalid"))
    assert "--host" in line and "no-such-host.invalid" in line
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        line = _one_line_exit_2(_serve("--episodes", study_episodes, "--out", out, "--port", port))
    assert f"port {port} on 127.0.0.1 is in use" in line
    assert not out.exists()
    # a failed start in an existing folder leaves it as it was
    out.mkdir()
    line = _one_line_exit_2(_serve("--episodes", tmp_path / "missing.jsonl", "--out", out, "--port", 0))
    assert "missing.jsonl" in line and list(out.iterdir()) == []


def test_out_dot_and_a_parent_folder_are_refused(tmp_path, study_episodes):
    work = tmp_path / "work"
    work.mkdir()
    for out in (".", ".."):
        line = _one_line_exit_2(_serve("--episodes", study_episodes, "--out", out, "--port", 0, cwd=work))
        assert "--out" in line and "working folder or one of its ancestors" in line
    assert list(work.iterdir()) == []


def test_a_second_server_on_the_folder_is_refused_naming_the_first(tmp_path, study_episodes):
    out = tmp_path / "study"
    first = subprocess.Popen([sys.executable, "-m", "vlnverse", "study", "serve", "--episodes", str(study_episodes),
                              "--out", str(out), "--port", "0", "--token", "t0k"], env=_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        deadline = time.monotonic() + 240
        while not any(line.startswith("participants:") for line in lines):
            assert first.poll() is None and time.monotonic() < deadline, (lines, first.stderr.read() if first.poll() else "")
            lines.append(first.stdout.readline())
        assert any(line.startswith("preparing homes: 1/1") for line in lines), lines  # progress in the terminal
        port = int(re.search(r":(\d+)/ in a browser", "".join(lines)).group(1))
        line = _one_line_exit_2(_serve("--out", out, "--port", 0))
        assert f"in use by pid {first.pid} on {socket.gethostname()}" in line, line
        assert f"study server at http://localhost:{port}" in line and "one server per study folder" in line, line
        assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == ["episodes.jsonl", "study.json"]
    finally:
        first.terminate()
        first.wait(60)
    # the lock went with the first server: the folder serves again (and refuses what follows)
    line = _one_line_exit_2(_serve("--out", out, "--port", 70000))
    assert "70000" in line


def test_changed_episodes_on_restart_are_refused_naming_the_difference(tmp_path, study_episodes):
    out = tmp_path / "study"
    store = StudyStore(out, StudyConfig(), study_episodes)
    store.consent("P1")
    episodes = load_episodes(study_episodes)
    changed = tmp_path / "changed.jsonl"
    save_episodes(changed, [episodes[0], dataclasses.replace(episodes[1], start_yaw=episodes[1].start_yaw + 1.0),
                            episodes[2]])
    saved = (out / "episodes.jsonl").read_bytes()
    line = _one_line_exit_2(_serve("--episodes", changed, "--out", out, "--port", 0))
    assert f"episode '{episodes[1].episode_id}' field 'start_yaw' differs" in line and "--new-version" in line, line
    assert (out / "episodes.jsonl").read_bytes() == saved
    with pytest.raises(ConfigError, match="3 episodes before, 2 now"):
        save_episodes(changed, episodes[:2])
        StudyStore(out, StudyConfig(), changed)
    # the same episodes continue; --new-version keeps the old version, participants and all
    StudyStore(out, StudyConfig(), study_episodes)
    save_episodes(changed, [episodes[0], dataclasses.replace(episodes[1], start_yaw=episodes[1].start_yaw + 1.0)])
    new = StudyStore(out, StudyConfig(), changed, new_version=True)
    assert new.version == 2 and len(new.episodes) == 2
    old = out / "versions" / "v1"
    assert (old / "episodes.jsonl").read_bytes() == saved and (old / "participants" / "P1" / "assignment.json").is_file()
    assert not (out / "participants").exists()
    assert StudyStore(old, StudyConfig()).participants() == ["P1"]  # the old version is a study folder of its own
