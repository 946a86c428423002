"""Which code produced a result: the git commit of the package's checkout."""
from __future__ import annotations

import subprocess
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]


def code_revision(folder: Path = PACKAGE_DIR) -> str | None:
    """The commit of the git checkout holding ``folder`` (``<sha>``, or ``<sha>+dirty`` when tracked
    files differ from it), or None outside a git checkout (an installed wheel) or without git."""
    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=30)

    try:
        head = git("rev-parse", "HEAD")
        if head.returncode != 0:
            return None
        dirty = git("diff", "--quiet", "HEAD", "--", ".").returncode == 1
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty else "")


def revisions_of(results: dict) -> dict[str, list[str]]:
    """``{code revision: [job keys]}`` of job results that record ``code`` (None: "unknown")."""
    out: dict[str, list[str]] = {}
    for key in sorted(results):
        out.setdefault(str((results[key] or {}).get("code") or "unknown"), []).append(key)
    return out
