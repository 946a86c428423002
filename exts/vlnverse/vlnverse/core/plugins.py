"""Plug-ins: user modules that register agents, task types, models (or metrics, modes ...) on import.

A plug-in is an ordinary module whose import runs ``@register_agent`` / ``@register_task`` /
``@register_model`` decorators. Two ways to load them:

- by name, from the command line or a config: ``vlnverse eval CONFIG agent.name=my_agent
  plugins=[my_pkg.agents]`` (a dotted module name on ``sys.path``, or a ``.py`` file path);
- installed packages declare an entry point in the group :data:`ENTRY_POINT_GROUP`
  (``vlnverse.plugins``), e.g. in ``pyproject.toml``::

      [project.entry-points."vlnverse.plugins"]
      my_agents = "my_pkg.agents"

  and are loaded by :func:`load_entry_point_plugins` (the evaluator and the task registry call it);
- for any command (``vlnverse data generate``, ``vlnverse bench`` ...), the environment variable
  :data:`PLUGINS_ENV` (``VLNVERSE_PLUGINS=my_pkg.agents,my_pkg.tasks``) is read at the same time.

Each module is imported once per process; a module that cannot be imported raises
``ConfigError`` naming it.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Iterable

from .errors import ConfigError

#: Entry-point group scanned for installed plug-ins.
ENTRY_POINT_GROUP = "vlnverse.plugins"
#: Environment variable listing plug-in modules (comma-separated), loaded with the entry points.
PLUGINS_ENV = "VLNVERSE_PLUGINS"

_loaded: dict[str, object] = {}
_entry_points_loaded = False


def load_plugin(spec: str, *, field: str = "plugins") -> object:
    """Import the plug-in ``spec`` (a dotted module name, or a path to a ``.py`` file) once and
    return the module; a failed import raises ``ConfigError`` naming ``field`` and the module."""
    spec = str(spec).strip()
    if not spec:
        raise ConfigError("empty plug-in name", field=field, expected="a module name such as my_pkg.agents")
    if spec in _loaded:
        return _loaded[spec]
    try:
        if spec.endswith(".py"):
            path = Path(spec).resolve()
            if not path.is_file():
                raise ConfigError(f"plug-in file '{spec}' not found", field=field, expected="an existing .py file")
            name = f"vlnverse_plugin_{path.stem}"
            module_spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[name] = module
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(spec)
    except ConfigError:
        raise
    except ImportError as exc:
        raise ConfigError(f"cannot import plug-in '{spec}': {exc}", field=field,
                          expected="an importable module (on PYTHONPATH) or a .py file") from None
    _loaded[spec] = module
    return module


def load_plugins(specs: Iterable[str] | str | None, *, field: str = "plugins", entry_points: bool = True) -> list[object]:
    """Load the installed entry-point plug-ins (``entry_points``) and the modules ``specs``
    (a list, or one name); returns the modules of ``specs``."""
    if entry_points:
        load_entry_point_plugins()
    if specs is None:
        return []
    if isinstance(specs, str):
        specs = [specs]
    return [load_plugin(s, field=f"{field}[{i}]") for i, s in enumerate(specs)]


def load_config_plugins(path: str | Path, overrides: dict | None = None) -> None:
    """Import the ``plugins`` list of the config file ``path`` (an ``overrides`` entry wins) and
    the entry-point plug-ins, before the config is validated: the names they register (agents,
    task types, policies ...) then validate like built-in ones. Errors name the file."""
    from .config import load_yaml

    plugins = (overrides or {}).get("plugins")
    if plugins is None:
        raw = load_yaml(path)
        plugins = raw.get("plugins") if isinstance(raw, dict) else None
    if plugins is not None and not (isinstance(plugins, list) and all(isinstance(p, str) for p in plugins)):
        raise ConfigError(f"got {plugins!r}", file=path, field="plugins", expected="a list of module names, e.g. [my_pkg.agents]")
    try:
        load_plugins(plugins)
    except ConfigError as exc:
        raise ConfigError(exc.problem, file=path, field=exc.field, expected=exc.expected) from None


def load_entry_point_plugins() -> list[str]:
    """Import every module registered in the :data:`ENTRY_POINT_GROUP` entry-point group and
    those listed in :data:`PLUGINS_ENV` (once per process); returns the names loaded now."""
    global _entry_points_loaded
    if _entry_points_loaded:
        return []
    _entry_points_loaded = True
    from importlib.metadata import entry_points

    names = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            _loaded.setdefault(ep.value, ep.load())
        except Exception as exc:  # noqa: BLE001 - name the broken package rather than a bare traceback
            raise ConfigError(f"plug-in entry point '{ep.name} = {ep.value}' failed to load: {exc}",
                              field=ENTRY_POINT_GROUP, expected="an importable module") from None
        names.append(ep.name)
    listed = [m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(",") if m.strip()]
    for module in listed:
        load_plugin(module, field=PLUGINS_ENV)
    return names + listed


__all__ = ["ENTRY_POINT_GROUP", "PLUGINS_ENV", "load_config_plugins", "load_entry_point_plugins", "load_plugin",
           "load_plugins"]
