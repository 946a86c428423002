"""The ``vlnverse`` command: one entry point, subcommands contributed by each layer.

Each layer module exposes ``add_commands(subparsers)`` and keeps its heavy imports inside the
command functions, so ``vlnverse --help`` stays fast. Any ``VLNVerseError`` (or ``OSError``, e.g. an
unwritable output path, or a missing third-party package) is printed as one line and exits with status 2.
"""
from __future__ import annotations

import argparse
import importlib
import sys

#: Modules contributing subcommands, in help order.
COMMAND_MODULES = (
    "vlnverse.scenes.cli",
    "vlnverse.sim.cli",
    "vlnverse.tasks.cli",
    "vlnverse.eval.cli",
    "vlnverse.study.cli",
    "vlnverse.learn.cli",
    "vlnverse.results.cli",
    "vlnverse.benchmarks.cli",
)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser with every layer's subcommands."""
    from . import __version__

    parser = argparse.ArgumentParser(prog="vlnverse", description="Physics-aware Vision-and-Language Navigation toolkit.")
    parser.add_argument("--version", action="version", version=f"vlnverse {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module_name in COMMAND_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue
            raise
        module.add_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the process exit status. A missing third-party package is one line
    naming it and the extra that installs it (``vlnverse.deps``), exit status 2."""
    from .deps import missing_dependency_message

    try:
        return _main(argv)
    except ModuleNotFoundError as exc:
        message = missing_dependency_message(exc.name)
        if message is None:
            raise
        print(f"vlnverse: error: {message}", file=sys.stderr)
        return 2


def _main(argv: list[str] | None) -> int:
    from .core.errors import VLNVerseError

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        from .sim.isaac.adapter import start_standalone_app, wants_isaac

        if wants_isaac(list(sys.argv[1:] if argv is None else argv)):
            start_standalone_app(headless=True)  # Kit, and with it Kit's pxr, before anything loads a scene
        result = args.func(args)
    except VLNVerseError as exc:
        print(f"vlnverse: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # unwritable output folder, a file where a folder should be, disk full ...
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"vlnverse: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("vlnverse: interrupted", file=sys.stderr)
        return 130
    return int(result or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
