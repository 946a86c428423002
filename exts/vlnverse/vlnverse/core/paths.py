"""Where the toolkit's shipped resources live (``robots/``, ``scenes_usd/``, ``tasks/``).

Looked up, in order:

1. ``$VLNVERSE_HOME/<name>`` when ``VLNVERSE_HOME`` is set (an override, e.g. for Isaac Sim's
   own Python or a private copy of the scenes);
2. the package data of an installed wheel (``vlnverse/resources/<name>``, read with
   ``importlib.resources``; ``setup.py`` installs the repository's top-level folders there);
3. the repository root of a checkout (``exts/vlnverse/vlnverse`` → three levels up), for editable
   installs, ``PYTHONPATH`` and Kit's ``--ext-folder exts``.

A resource found nowhere raises ``ResourceNotFoundError`` naming it and the places searched.
"""
from __future__ import annotations

import importlib.resources
import os
from pathlib import Path

from .errors import VLNVerseError

#: The ``vlnverse`` package folder (this module lives in ``vlnverse/core/``).
PACKAGE_DIR = Path(__file__).resolve().parent.parent
#: The resource folders shipped with the toolkit (repository root in a checkout, package data in a wheel).
RESOURCE_NAMES = ("robots", "scenes_usd", "tasks")


class ResourceNotFoundError(VLNVerseError, FileNotFoundError):
    """A shipped resource folder or file is missing from the installation."""


def checkout_root() -> Path:
    """Repository root when the package runs from a checkout (``exts/vlnverse/vlnverse`` → 3 levels up)."""
    return PACKAGE_DIR.parent.parent.parent


def _candidates(name: str) -> list[Path]:
    """Places searched for resource ``name``, in order."""
    env = os.environ.get("VLNVERSE_HOME")
    if env:
        return [Path(env).expanduser().resolve() / name]
    packaged = Path(str(importlib.resources.files("vlnverse") / "resources" / name))
    return [packaged, checkout_root() / name]


def resource_dir(name: str) -> Path:
    """Folder of the shipped resource ``name`` (one of ``RESOURCE_NAMES``); see the module docstring."""
    if name not in RESOURCE_NAMES:
        raise ValueError(f"unknown resource {name!r}; expected one of {RESOURCE_NAMES}")
    places = _candidates(name)
    for place in places:
        if place.is_dir():
            return place
    how = "VLNVERSE_HOME is set" if os.environ.get("VLNVERSE_HOME") else "searched package data and checkout"
    raise ResourceNotFoundError(f"resource '{name}/' not found ({how}): "
                                f"{', '.join(str(p) for p in places)}; reinstall vlnverse or set VLNVERSE_HOME "
                                f"to a folder holding {', '.join(n + '/' for n in RESOURCE_NAMES)}")


def resource_file(name: str, relative: str | Path) -> Path:
    """A file inside a shipped resource folder; raises ``ResourceNotFoundError`` naming it when absent."""
    path = resource_dir(name) / relative
    if not path.is_file():
        raise ResourceNotFoundError(f"resource '{name}/{Path(relative).as_posix()}' not found in {resource_dir(name)}")
    return path


def repo_root() -> Path:
    """Folder holding ``robots/``, ``scenes_usd/`` and ``tasks/`` (``VLNVERSE_HOME``, package data or checkout)."""
    return resource_dir("scenes_usd").parent


def robots_dir() -> Path:
    """Folder of agent body presets (``*.yaml``)."""
    return resource_dir("robots")


def scenes_dir() -> Path:
    """Folder of shipped USD scenes and ``splits.json``."""
    return resource_dir("scenes_usd")


def tasks_dir() -> Path:
    """Folder of task and evaluation configs."""
    return resource_dir("tasks")


def cache_dir() -> Path:
    """Per-user cache (converted models, distance fields); ``VLNVERSE_CACHE`` overrides."""
    env = os.environ.get("VLNVERSE_CACHE")
    path = Path(env) if env else Path.home() / ".cache" / "vlnverse"
    path.mkdir(parents=True, exist_ok=True)
    return path
