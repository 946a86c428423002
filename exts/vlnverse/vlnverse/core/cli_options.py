"""Command-line helpers shared by the run commands (``vlnverse eval``, ``vlnverse train``, ``data
generate``, ``bench``): the parallel engine's options, and options that may also follow the
``key=value`` overrides."""
from __future__ import annotations

import argparse
from typing import Any

from .errors import ConfigError
from .jobs import ENGINES


def add_parallel_options(parser: Any, what: str, *, defaults: bool = True) -> None:
    """``--workers N``, ``--engine NAME``, ``--address HOST:PORT`` and ``--job-timeout SECONDS``
    (read back with ``core.jobs.ParallelConfig.from_args``). Without ``defaults`` an option not
    given is ``None``, so that a config file's value stands (``vlnverse train``)."""
    parser.add_argument("--workers", type=int, default=None,
                        help=f"{what}: worker processes (default 1, or 2 with --engine ray)")
    parser.add_argument("--engine", choices=ENGINES.names(), default="local" if defaults else None,
                        help="local processes (default) or a Ray cluster (pip install 'vlnverse[ray]')")
    parser.add_argument("--address", default=None,
                        help="Ray cluster HOST:PORT (from `ray start --head`) or auto; default: a local Ray instance")
    parser.add_argument("--job-timeout", type=float, default=None, metavar="SECONDS",
                        help="kill a worker that makes no progress on a scene for SECONDS and retry the scene "
                             "elsewhere (default: off; worker processes / Ray only)")


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
                args.scene_root = [*args.scene_root, value]
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
