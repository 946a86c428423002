"""Where the toolkit's shipped resources live (robots/, scenes_usd/, tasks/).

The package is installed from a checkout (``pip install -e .``); resources sit at the
repository root. ``VLNVERSE_HOME`` overrides the root (e.g. for Isaac Sim's own Python).
"""
from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def repo_root() -> Path:
    """Root folder holding ``robots/``, ``scenes_usd/`` and ``tasks/``."""
    env = os.environ.get("VLNVERSE_HOME")
    if env:
        return Path(env).resolve()
    return PACKAGE_DIR.parent.parent.parent


def robots_dir() -> Path:
    """Folder of agent body presets (``*.yaml``)."""
    return repo_root() / "robots"


def scenes_dir() -> Path:
    """Folder of shipped USD scenes and ``splits.json``."""
    return repo_root() / "scenes_usd"


def tasks_dir() -> Path:
    """Folder of task and evaluation configs."""
    return repo_root() / "tasks"


def cache_dir() -> Path:
    """Per-user cache (converted models, distance fields); ``VLNVERSE_CACHE`` overrides."""
    env = os.environ.get("VLNVERSE_CACHE")
    path = Path(env) if env else Path.home() / ".cache" / "vlnverse"
    path.mkdir(parents=True, exist_ok=True)
    return path
