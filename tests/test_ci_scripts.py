"""CI and the stress script run the README's test command itself, the way a newcomer does."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="the scripts are bash")


def _readme_test_command() -> str:
    block = re.search(r"\nTests \(.*?```bash\n(.*?)\n```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)
    assert block, "README.md has a 'Tests (' paragraph followed by a bash block"
    return block.group(1).strip()


def test_the_scripts_read_the_readmes_test_command():
    printed = subprocess.run([str(ROOT / "tools" / "readme_test_command.sh")], capture_output=True, text=True,
                             check=True, timeout=60).stdout.strip()
    assert printed == _readme_test_command()
    assert "python3 -m pytest" in printed and '-m "not slow" tests' in printed
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    # a fresh venv, activated, then the README's command: not the interpreter CI happens to have
    assert ci.index("python3 -m venv") < ci.index("source \"$VENV/bin/activate\"") < ci.index('eval "$TEST_COMMAND"')
    assert "tools/readme_test_command.sh" in ci and "install -q torch==2.13.0" in ci
    assert "tools/readme_test_command.sh" in (ROOT / "tools" / "stress_tests.sh").read_text(encoding="utf-8")


def test_a_readme_without_its_test_command_is_one_line(tmp_path):
    (tmp_path / "tools").mkdir()
    shutil.copy2(ROOT / "tools" / "readme_test_command.sh", tmp_path / "tools")
    (tmp_path / "README.md").write_text("# nothing to run\n", encoding="utf-8")
    run = subprocess.run([str(tmp_path / "tools" / "readme_test_command.sh")], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 2 and run.stdout == "" and run.stderr.count("\n") == 1
    assert "README.md: expected exactly one line" in run.stderr


def test_stress_script_stops_its_busy_processes_by_pid():
    """--runs 0 --current: start the busy processes, run nothing, stop them (they are gone after)."""
    run = subprocess.run([str(ROOT / "tools" / "stress_tests.sh"), "--runs", "0", "--busy", "2", "--current"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    pids = [int(p) for p in re.search(r"2 busy processes \(PIDs ([\d ]+)\)", run.stderr).group(1).split()]
    assert len(pids) == 2
    for pid in pids:  # reaped by the script: no such process any more (a reused PID would not be 'yes')
        assert not Path(f"/proc/{pid}").exists() or "yes" not in Path(f"/proc/{pid}/cmdline").read_text(errors="replace")
    bad = subprocess.run([str(ROOT / "tools" / "stress_tests.sh"), "--runs", "many"], capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2 and "--runs and --busy take a whole number" in bad.stderr


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="checks processes through /proc")
def test_stress_script_stops_them_when_interrupted(tmp_path):
    """Ctrl-C while the tests run: the busy processes go with the script."""
    import signal
    import time

    fake = tmp_path / "repo"
    (fake / "tools").mkdir(parents=True)
    for name in ("readme_test_command.sh", "stress_tests.sh"):
        shutil.copy2(ROOT / "tools" / name, fake / "tools")
    # a README whose test command runs long and, like pytest, catches Ctrl-C and exits with its own
    # status; `pip install --help` (not `--version`, which fails where pip.conf sets find-links)
    (fake / "README.md").write_text("python3 -m pip install --help >/dev/null && python3 -m pytest --version "
                                    "&& python3 -c 'import signal, sys, time; "
                                    "signal.signal(signal.SIGINT, lambda *a: sys.exit(2)); open(\"ready\", \"w\").close(); time.sleep(600)'\n",
                                    encoding="utf-8")
    # Ctrl-C as in a terminal: a suite started from a background job (nohup, `&`, some CI runners)
    # inherits SIGINT ignored, and a shell started with it ignored cannot trap it
    proc = subprocess.Popen([str(fake / "tools" / "stress_tests.sh"), "--current"], stderr=subprocess.PIPE,
                            text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        lines = []
        while not any("run 1/1" in line for line in lines):
            line = proc.stderr.readline()
            assert line, "".join(lines)
            lines.append(line)
        pids = [int(p) for p in re.search(r"busy processes \(PIDs ([\d ]+)\)", "".join(lines)).group(1).split()]
        assert all(Path(f"/proc/{pid}").exists() for pid in pids)
        ready = time.monotonic() + 120
        while not (fake / "ready").exists():  # the long run has started and handles Ctrl-C itself
            assert time.monotonic() < ready and proc.poll() is None, "the README command never started"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C sends to the terminal's foreground group
        assert proc.wait(timeout=60) == 130
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    deadline = time.monotonic() + 30
    while any(Path(f"/proc/{pid}").exists() for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(Path(f"/proc/{pid}").exists() for pid in pids)
