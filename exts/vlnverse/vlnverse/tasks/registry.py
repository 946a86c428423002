"""The task-type registry, the lowest module of the task layer (it imports no task module).

``TASKS`` maps a CLI name to its ``TaskGenerator`` subclass. The built-in task types are named
here (name → module, :data:`BUILTIN_TASKS`) and imported on the first ``TASKS.get``; plug-in task
types register with ``@register_task`` when their module is imported (``--plugins MODULE`` or a
``vlnverse.plugins`` entry point).
"""
from __future__ import annotations

from typing import Callable

from ..core.registry import Registry

#: Task generator classes by CLI name (``fine_grained``, ``coarse_grained`` ...).
TASKS: Registry = Registry("task")

#: The built-in task types: name → the module whose import registers it.
BUILTIN_TASKS = {name: f"vlnverse.tasks.types.{name}" for name in (
    "coarse_grained", "dialogue", "false_premise", "fine_grained", "long_horizon", "object_goal",
    "video_contextualized", "visual_reference")}
for _name, _module in BUILTIN_TASKS.items():
    TASKS.register_lazy(_name, _module)


def register_task(name: str) -> Callable[[type], type]:
    """Class decorator registering a ``TaskGenerator`` subclass under ``name``; returns the class.
    A built-in task type's name is taken, loaded or not (``ValueError``)."""

    def decorator(cls: type) -> type:
        if BUILTIN_TASKS.get(name, cls.__module__) != cls.__module__:
            raise ValueError(f"task '{name}' is already registered (built-in {BUILTIN_TASKS[name]})")
        cls.name = name
        return TASKS.register(name)(cls)

    return decorator


def load_task_types() -> list[str]:
    """Load the installed ``vlnverse.plugins`` entry points (their task types register) and
    return the registered names (the built-in ones included)."""
    from ..core.plugins import load_entry_point_plugins

    load_entry_point_plugins()
    return TASKS.names()
