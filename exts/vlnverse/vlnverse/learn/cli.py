"""``vlnverse train CONFIG [key=value ...]`` (torch is imported only when the command runs)."""
from __future__ import annotations

import argparse


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Register ``train``."""
    p = sub.add_parser("train", help="train a policy: offline imitation from cached teacher rollouts, or "
                                     "'mode=dagger init=CHECKPOINT' for online DAgger (resumable)")
    p.add_argument("config", help="train config YAML path, or the name of one in tasks/train/")
    p.add_argument("overrides", nargs=argparse.REMAINDER,
                   help="dotted key=value overrides, e.g. mode=dagger init=runs/train/x/best.pt il.epochs=2")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=_train)


def _train(args: argparse.Namespace) -> int:
    import json

    from ..core.errors import ConfigError
    from .agent import require_torch
    from .config import load_train_config, resolve_train_config_path

    overrides = [o for o in args.overrides if o != "--no-progress"]
    for item in overrides:
        if item.startswith("-"):
            raise ConfigError(f"unknown option '{item}'", expected="--no-progress or key=value overrides")
    cfg = load_train_config(resolve_train_config_path(args.config), overrides)
    require_torch()
    from .trainer import run_training

    summary = run_training(cfg, progress=not (args.no_progress or "--no-progress" in args.overrides))
    print(json.dumps({k: summary.get(k) for k in ("mode", "policy", "best", "checkpoint")}, default=str))
    return 0
