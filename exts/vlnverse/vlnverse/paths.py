"""Where the toolkit's shipped resources live: the public name of :mod:`vlnverse.core.paths`
(which holds the lookup, so the core layer needs nothing above it)."""
from __future__ import annotations

from .core.paths import (PACKAGE_DIR, RESOURCE_NAMES, ResourceNotFoundError, cache_dir,  # noqa: F401
                         checkout_root, repo_root, resource_dir, resource_file, robots_dir, scenes_dir, tasks_dir)
