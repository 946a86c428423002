"""CLI commands of the evaluation layer: ``vlnverse eval CONFIG [key=value ...]`` and ``vlnverse quickstart``."""
from __future__ import annotations

import argparse
from pathlib import Path


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Register ``eval`` and ``quickstart``."""
    p = sub.add_parser("eval", help="evaluate an agent on a task split (resumable; writes episodes.jsonl, "
                                    "summary.json, report.html)")
    p.add_argument("config", help="eval config YAML path, or the name of one in tasks/eval/")
    # REMAINDER so that options may also follow the overrides (argparse cannot mix them otherwise)
    p.add_argument("overrides", nargs=argparse.REMAINDER,
                   help="dotted key=value overrides, e.g. collision_mode=telhop agent.name=random")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--backend", default=None, help="simulator backend (auto | mujoco | isaac); same as backend=NAME")
    p.set_defaults(func=_eval)

    q = sub.add_parser("quickstart", help="generate a few episodes on the shipped scenes and evaluate the oracle "
                                          "and random agents under Strict and Tel-Hop physics")
    q.add_argument("--out", default="runs/quickstart", help="output folder (default: runs/quickstart)")
    q.add_argument("--episodes", type=int, default=None, help="episodes per scene and task (default from "
                                                              "tasks/eval/quickstart.yaml)")
    q.add_argument("--config", default=None, help="quickstart YAML (default: tasks/eval/quickstart.yaml)")
    q.add_argument("--no-progress", action="store_true", help="no progress bars")
    q.set_defaults(func=_quickstart)


def resolve_config_path(name: str) -> Path:
    """A config path as given, else ``tasks/eval/<name>.yaml``; unknown names list the shipped configs."""
    from ..core.errors import UnknownNameError
    from ..paths import tasks_dir

    path = Path(name)
    if path.suffix in (".yaml", ".yml") or path.exists():
        return path
    candidate = tasks_dir() / "eval" / f"{name}.yaml"
    if candidate.is_file() and name != "quickstart":
        return candidate
    shipped = sorted(p.stem for p in (tasks_dir() / "eval").glob("*.yaml") if p.stem != "quickstart")
    raise UnknownNameError("eval config", name, shipped)


def _eval(args: argparse.Namespace) -> int:
    from .config import load_eval_config
    from .runner import run_eval

    from ..core.errors import ConfigError

    overrides, rest = [], list(args.overrides)
    backend = args.backend
    while rest:  # options may follow the overrides (REMAINDER keeps them here)
        item = rest.pop(0)
        if item == "--no-progress":
            continue
        if item == "--backend" or item.startswith("--backend="):
            backend = item.split("=", 1)[1] if "=" in item else (rest.pop(0) if rest else "")
            continue
        if item.startswith("-"):
            raise ConfigError(f"unknown option '{item}'", expected="--no-progress, --backend NAME or key=value overrides")
        overrides.append(item)
    if backend is not None:
        overrides.append(f"backend={backend}")
    cfg = load_eval_config(resolve_config_path(args.config), overrides)
    run_eval(cfg, progress=not (args.no_progress or "--no-progress" in args.overrides))
    return 0


def _quickstart(args: argparse.Namespace) -> int:
    from .quickstart import run_quickstart

    run_quickstart(out=args.out, episodes_per_scene=args.episodes, config=args.config, progress=not args.no_progress)
    return 0
