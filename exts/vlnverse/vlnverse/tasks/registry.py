"""The task-type registry, the lowest module of the task layer (it imports no task module).

``TASKS`` maps a CLI name to its ``TaskGenerator`` subclass. The built-in task types are the
folders of ``tasks/types/`` (:func:`builtin_task_types`, found on disk, no list): each is named
here lazily and imported on the first ``TASKS.get``, its package registering it. Plug-in task types
register with ``@register_task`` when their module is imported (``--plugins MODULE`` or a
``vlnverse.plugins`` entry point).
"""
from __future__ import annotations

import pkgutil
import sys
from pathlib import Path
from typing import Callable

from ..core.registry import Registry

#: Task generator classes by CLI name (``fine_grained``, ``coarse_grained`` ...).
TASKS: Registry = Registry("task")

#: The package whose subpackages are the built-in task types (one folder each).
BUILTIN_PACKAGE = "vlnverse.tasks.types"
_BUILTIN_DIR = Path(__file__).resolve().with_name("types")


def builtin_task_types(having: str | None = None) -> dict[str, str]:
    """The built-in task types, name → package: the subpackages of :data:`BUILTIN_PACKAGE`, found on
    disk without importing them (``having``: only those whose folder holds that module, e.g.
    ``"templates"``)."""
    return {m.name: f"{BUILTIN_PACKAGE}.{m.name}" for m in pkgutil.iter_modules([str(_BUILTIN_DIR)])
            if m.ispkg and (having is None or (_BUILTIN_DIR / m.name / f"{having}.py").is_file())}


for _name, _package in builtin_task_types().items():
    TASKS.register_lazy(_name, _package)


def register_task(name: str, *, config: str | None = None) -> Callable[[type], type]:
    """Class decorator registering a ``TaskGenerator`` subclass under ``name``; returns the class.

    ``config``: the task type's default config, a YAML file beside the class's module (set as the
    class's ``config_file``; ``load_task_config(name)`` reads it); None: the ``TaskConfig`` defaults.
    A built-in task type's name is taken, loaded or not (``ValueError``)."""

    def decorator(cls: type) -> type:
        package = builtin_task_types().get(name)
        if package is not None and not cls.__module__.startswith(f"{package}."):
            raise ValueError(f"task '{name}' is already registered (built-in {package})")
        cls.name = name
        module_file = Path(sys.modules[cls.__module__].__file__).resolve() if config is not None else None
        cls.config_file = module_file.with_name(config) if module_file is not None else None
        return TASKS.register(name)(cls)

    return decorator


def load_task_types() -> list[str]:
    """Load the installed ``vlnverse.plugins`` entry points (their task types register) and
    return the registered names (the built-in ones included)."""
    from ..core.plugins import load_entry_point_plugins

    load_entry_point_plugins()
    return TASKS.names()
