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
    p.add_argument("--workers", type=int, default=None,
                   help="scenes rolled out in parallel for the observation cache and DAgger (same as workers=N)")
    p.add_argument("--engine", choices=("local", "ray"), default=None, help="local processes or a Ray cluster (engine=...)")
    p.add_argument("--address", default=None, help="Ray cluster HOST:PORT or auto (address=...)")
    p.set_defaults(func=_train)


def _train(args: argparse.Namespace) -> int:
    import json

    from .agent import require_torch
    from .config import load_train_config, resolve_train_config_path

    from ..eval.cli import _split_trailing_options

    args.backend = None
    overrides = _split_trailing_options(args)  # --workers / --engine / --address may follow the overrides
    if args.backend is not None:
        overrides.append(f"backend={args.backend}")
    args.job_timeout = getattr(args, "job_timeout", None)
    for name in ("workers", "engine", "address", "job_timeout"):
        if getattr(args, name) is not None:
            overrides.append(f"{name}={getattr(args, name)}")
    cfg = load_train_config(resolve_train_config_path(args.config), overrides)
    require_torch()
    from .trainer import run_training

    summary = run_training(cfg, progress=not args.no_progress)
    print(json.dumps({k: summary.get(k) for k in ("mode", "policy", "best", "checkpoint")}, default=str))
    return 0
