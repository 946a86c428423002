"""Output folders: a command never deletes what it does not own (issue 10, defect 1).

Every ``--out`` folder goes through ``core.io.check_output_dir`` / ``claim_output_dir`` /
``replace_output_dir``; these tests try the careless invocations of the issue on the real CLI.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from vlnverse.core.errors import ConfigError
from vlnverse.core.io import OWNER_MARKER, claim_output_dir, clean_stale_temps, replace_output_dir

PKG = str(Path(__file__).resolve().parents[2] / "exts" / "vlnverse")


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": PKG + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "vlnverse", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


GENERATE = ["data", "generate", "--task", "fine_grained", "--scenes", "home_0014", "--episodes-per-scene", "1",
            "--no-progress", "--out"]


@pytest.mark.parametrize("argv, every_form", [
    (GENERATE, True), (["sim", "drive", "home_0014", "--random", "2", "--no-progress", "--out"], False),
    (["scenes", "generate", "--count", "1", "--no-progress", "--out"], False)])
def test_out_dot_and_ancestors_are_refused_and_nothing_is_touched(tmp_path, argv, every_form):
    parent = tmp_path / "parent"
    child = parent / "child"
    child.mkdir(parents=True)
    (parent / "keep").write_text("mine")
    (child / "keep").write_text("mine too")
    before = _tree(tmp_path)
    forms = ((".", child), ("..", child), (str(parent), child), (str(tmp_path / "parent" / "."), parent))
    for out, cwd in forms if every_form else forms[1:2]:
        run = _cli(argv + [out], cwd)
        assert run.returncode == 2, run.stderr
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in run.stderr
        assert "working folder or one of its ancestors" in lines[0] and "--out" in lines[0]
    assert _tree(tmp_path) == before


def test_generate_refuses_a_foreign_non_empty_folder(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "thesis.tex").write_text("years of work")
    run = _cli(GENERATE + [str(other)], tmp_path)
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1
    assert "not empty and was not written by vlnverse" in run.stderr
    assert _tree(other) == {"thesis.tex": b"years of work"}


def test_replace_output_dir_keeps_foreign_entries_of_its_own_folder(tmp_path):
    out = tmp_path / "ds"
    with replace_output_dir(out, command="data generate") as tmp:
        (tmp / "train.jsonl").write_text("v1")
    assert (out / OWNER_MARKER).is_file()
    (out / "notes.txt").write_text("the user's notes")  # added later by a person
    with replace_output_dir(out, command="data generate") as tmp:
        (tmp / "val.jsonl").write_text("v2")
    assert sorted(p.name for p in out.iterdir() if p.name != OWNER_MARKER) == ["notes.txt", "val.jsonl"]
    assert (out / "notes.txt").read_text() == "the user's notes"
    assert [p.name for p in tmp_path.iterdir()] == ["ds"]  # no temporaries left
    # a failing block leaves the previous output untouched
    with pytest.raises(RuntimeError):
        with replace_output_dir(out, command="data generate") as tmp:
            (tmp / "val.jsonl").write_text("half")
            raise RuntimeError("boom")
    assert (out / "val.jsonl").read_text() == "v2" and [p.name for p in tmp_path.iterdir()] == ["ds"]
    # another command's output is refused
    with pytest.raises(ConfigError, match="holds the output of 'vlnverse data generate'"):
        with replace_output_dir(out, command="sim drive"):
            pass
    with pytest.raises(ConfigError, match="holds the output"):
        claim_output_dir(out, command="eval")


def test_an_empty_folder_and_a_file_and_a_symlink(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert claim_output_dir(empty, command="eval") == empty and (empty / OWNER_MARKER).is_file()
    (tmp_path / "f").write_text("x")
    with pytest.raises(ConfigError, match="not a folder"):
        claim_output_dir(tmp_path / "f", command="eval")
    (tmp_path / "link").symlink_to(empty)
    with pytest.raises(ConfigError, match="symbolic link"):
        claim_output_dir(tmp_path / "link", command="eval")


def test_temporaries_of_a_killed_run_are_cleaned(tmp_path):
    code = ("import os, signal, sys\n"
            "from vlnverse.core.io import replace_output_dir\n"
            "with replace_output_dir(sys.argv[1], command='data generate') as tmp:\n"
            "    (tmp / 'a.jsonl').write_text('x')\n"
            "    os.kill(os.getpid(), signal.SIGKILL)\n")
    env = {**os.environ, "PYTHONPATH": PKG}
    run = subprocess.run([sys.executable, "-c", code, str(tmp_path / "ds")], env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == -signal.SIGKILL, f"exit status {run.returncode}: {run.stderr}"
    stale = [p for p in tmp_path.iterdir() if p.name.startswith(".ds.vlnverse-tmp")]
    assert len(stale) == 1
    (tmp_path / ".ds.vlnverse-tmp.otherhost.1.x").mkdir()  # not ours to judge: another host
    with replace_output_dir(tmp_path / "ds", command="data generate") as tmp:
        (tmp / "b.jsonl").write_text("y")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".ds.vlnverse-tmp.otherhost.1.x", "ds"]


def test_an_old_folder_swapped_out_by_a_killed_run_is_restored(tmp_path):
    out = tmp_path / "ds"
    with replace_output_dir(out, command="data generate") as tmp:
        (tmp / "train.jsonl").write_text("v1")
    # a run killed between the two renames of the swap: the old folder sits in a hidden temporary
    import socket
    old = tmp_path / f".ds.vlnverse-old.{socket.gethostname()}.999999999.abc"
    old.mkdir()
    (old / OWNER_MARKER).write_text('{"command": "data generate"}')
    os.replace(out, old / "previous")
    assert clean_stale_temps(out) == [old]
    assert (out / "train.jsonl").read_text() == "v1" and not old.exists()


def test_a_run_folder_from_before_the_marker_is_still_ours(tmp_path):
    old_run = tmp_path / "run"
    old_run.mkdir()
    (old_run / "config.json").write_text('{"run_key": {}, "config": {}}')
    (old_run / "episodes.jsonl").write_text("")
    assert claim_output_dir(old_run, command="eval") == old_run and (old_run / OWNER_MARKER).is_file()
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.json").write_text('{"something": "else"}')
    with pytest.raises(ConfigError, match="not written by vlnverse"):
        claim_output_dir(other, command="eval")


def test_a_dataset_from_before_the_marker_is_replaced_without_stale_splits(tmp_path):
    out = tmp_path / "ds"
    out.mkdir()
    (out / "summary.json").write_text('{"version": 1, "task": "t", "counts": {}, "total_episodes": 0}')
    (out / "val_seen.jsonl").write_text("old\n")
    (out / "notes.md").write_text("mine")
    with replace_output_dir(out, command="data generate") as tmp:
        (tmp / "train.jsonl").write_text("new\n")
        (tmp / "summary.json").write_text("{}")
    names = sorted(p.name for p in out.iterdir() if p.name != OWNER_MARKER)
    assert names == ["notes.md", "summary.json", "train.jsonl"]
    assert [p.name for p in tmp_path.iterdir()] == ["ds"]


def test_a_temporary_file_of_a_killed_writer_is_cleaned(tmp_path):
    code = ("import os, signal, sys\nfrom vlnverse.core.io import atomic_path\n"
            "with atomic_path(sys.argv[1]) as tmp:\n    tmp.write_text('half')\n    os.kill(os.getpid(), signal.SIGKILL)\n")
    run = subprocess.run([sys.executable, "-c", code, str(tmp_path / "summary.json")], env={**os.environ, "PYTHONPATH": PKG},
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == -signal.SIGKILL, f"exit status {run.returncode}: {run.stderr}"
    assert len(list(tmp_path.iterdir())) == 1
    from vlnverse.core.io import write_text_atomic

    write_text_atomic(tmp_path / "summary.json", "{}")
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]
