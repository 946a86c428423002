"""Code provenance: the git commit (and a dirty mark) of the checkout that produced a result."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from vlnverse.core.provenance import code_revision, revisions_of

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")


def _git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def test_code_revision_is_the_commit_and_marks_changed_tracked_files(tmp_path):
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    _git(repo, "init", "-q")
    (repo / "pkg" / "a.py").write_text("x = 1\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "one")
    sha = _git(repo, "rev-parse", "HEAD")
    assert code_revision(repo / "pkg") == sha and len(sha) == 40
    (repo / "pkg" / "b.py").write_text("untracked\n")  # untracked files do not make it dirty
    assert code_revision(repo / "pkg") == sha
    (repo / "pkg" / "a.py").write_text("x = 2\n")
    assert code_revision(repo / "pkg") == sha + "+dirty"
    outside = tmp_path / "plain"
    outside.mkdir()
    assert code_revision(outside) is None


def test_revisions_of_groups_job_keys_by_revision():
    jobs = {"cma-s1": {"code": "abc"}, "cma-s0": {"code": "abc"}, "rdp-s0": {"code": "def"}, "old-s0": {}}
    assert revisions_of(jobs) == {"abc": ["cma-s0", "cma-s1"], "def": ["rdp-s0"], "unknown": ["old-s0"]}
