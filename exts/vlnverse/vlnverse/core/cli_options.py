"""Command-line helpers shared by the run commands (``vlnverse eval``, ``vlnverse train``):
options that may also follow the ``key=value`` overrides."""
from __future__ import annotations

import argparse

from .errors import ConfigError
from .parallel import ENGINES

#: option → (attribute of the parsed arguments, how its value is read and what it must be)
TRAILING_OPTIONS = {"--workers": ("workers", int, "an integer >= 1"), "--envs": ("envs", int, "an integer >= 1"),
                    "--engine": ("engine", str, None),
                    "--address": ("address", str, None), "--backend": ("backend", str, None),
                    "--job-timeout": ("job_timeout", float, "a number of seconds > 0")}


def split_trailing_options(args: argparse.Namespace, extra: tuple[str, ...] = ()) -> list[str]:
    """The ``key=value`` overrides of ``args.overrides`` (an ``argparse.REMAINDER``, which also
    catches options given after the overrides); those options (``TRAILING_OPTIONS``,
    ``--no-progress``, ``--scene-root DIR`` and the command's own string options ``extra``, e.g.
    ``("--benchmark", "--split")``) are moved onto ``args``. A bad value or an unknown option is a
    ``ConfigError`` naming the option."""
    known = {**TRAILING_OPTIONS, **{name: (name[2:].replace("-", "_"), str, None) for name in extra}}
    overrides, items = [], list(args.overrides)
    while items:
        item = items.pop(0)
        name, eq, value = item.partition("=")
        if item == "--no-progress":
            args.no_progress = True
        elif name == "--scene-root" or name in known:
            if not eq:
                if not items:
                    raise ConfigError(f"'{name}' needs a value", field=name)
                value = items.pop(0)
            if name == "--scene-root":
                args.scene_root = [*(getattr(args, "scene_root", None) or []), value]
                continue
            attr, kind, expected = known[name]
            try:
                value = kind(value)
            except ValueError:
                raise ConfigError(f"got {value!r}", field=name, expected=expected) from None
            if name == "--engine" and value not in ENGINES:
                raise ConfigError(f"got {value!r}", field="--engine", expected=" or ".join(ENGINES))
            setattr(args, attr, value)
        elif item.startswith("-"):
            own = "".join(f"{name} {name[2:].upper()}, " for name in extra)
            raise ConfigError(f"unknown option '{item}'",
                              expected=f"--no-progress, --backend NAME, --workers N, --envs N, --engine {'|'.join(ENGINES)}, "
                                       f"--address HOST:PORT, --job-timeout SECONDS, {own}--scene-root DIR or key=value "
                                       "overrides")
        else:
            overrides.append(item)
    return overrides
