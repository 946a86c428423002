"""CLI commands of the evaluation layer: ``vlnverse eval CONFIG [key=value ...]`` and ``vlnverse quickstart``."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..core.cli_options import add_parallel_options
from ..core.jobs import ParallelConfig
from ..scenes.object_meshes import OBJECT_STYLES
from ..sim.types import RENDER_QUALITIES

#: exit status of ``vlnverse eval`` when some episodes were not evaluated (model endpoint failures)
NOT_EVALUATED_STATUS = 3


def _add_export_sft(sub: argparse._SubParsersAction) -> None:
    """``data export-sft`` (the task layer owns ``data`` but may not import the evaluation layer)."""
    data = sub.choices.get("data")
    dsub = next((a for a in (data._actions if data else []) if isinstance(a, argparse._SubParsersAction)), None)
    if dsub is None:
        return
    sft = dsub.add_parser("export-sft", help="chat-format fine-tuning samples (images + prompt + target answer) "
                                            "for the MV-DualVLN pixel-goal agent, frontier-based pixel goals")
    sft.add_argument("path", help="episode JSONL file or dataset folder")
    sft.add_argument("--task", default="video_contextualized", choices=["video_contextualized"])
    sft.add_argument("--out", required=True, help="output folder (sft.jsonl + images/)")
    sft.add_argument("--view-size", type=int, default=224)
    sft.add_argument("--video-frames", type=int, default=50)
    sft.add_argument("--max-samples", type=int, default=8, help="samples per episode at most")
    sft.add_argument("--scene-root", action="append", default=None, metavar="DIR")
    sft.set_defaults(func=_export_sft)


def _export_sft(args: argparse.Namespace) -> int:
    """``data export-sft``: see ``vlnverse.eval.sft``."""
    from .sft import export_sft

    counts = export_sft(args.path, args.out, view_size=args.view_size, video_frames=args.video_frames,
                        max_samples=args.max_samples, scene_root=args.scene_root)
    print(f"wrote {counts['samples']} samples ({counts['stop_samples']} STOP) of {counts['episodes']} episodes to "
          f"{counts['out']}" + (f"; {counts['skipped_episodes']} episode(s) without a reachable goal skipped"
                                if counts["skipped_episodes"] else ""))
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Register ``eval`` and ``quickstart``."""
    _add_export_sft(sub)
    p = sub.add_parser("eval", help="evaluate an agent on a task split (resumable; writes episodes.jsonl, "
                                    "summary.json, report.html)")
    p.add_argument("config", help="eval config YAML path, or the name of one in tasks/eval/")
    # REMAINDER so that options may also follow the overrides (argparse cannot mix them otherwise)
    p.add_argument("overrides", nargs=argparse.REMAINDER,
                   help="dotted key=value overrides, e.g. collision_mode=telhop agent.name=random "
                        "render.quality=fast render.objects=meshes")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_parallel_options(p, "scenes evaluated in parallel")
    p.add_argument("--envs", type=int, default=None, metavar="N",
                   help="episodes run at once, one batched agent call for those whose observations arrived, their environments in "
                        "N processes (agents that act in batches: the learned policies; default: the config's "
                        "envs, 1); records are the same as with 1")
    p.add_argument("--backend", default=None, help="simulator backend (auto | mujoco | isaac); same as backend=NAME")
    p.add_argument("--benchmark", default=None, metavar="NAME",
                   help="evaluate on a benchmark's held-out split (see 'vlnverse benchmark list'), made on first "
                        "use; same as benchmark=NAME")
    p.add_argument("--split", default=None, help="the split to evaluate (with --benchmark: val_unseen or test); "
                                                 "same as split=NAME")
    from ..tasks.scene_roots import add_scene_root_option

    add_scene_root_option(p)  # prepended to the config's scene_root
    p.set_defaults(func=_eval)

    q = sub.add_parser("quickstart", help="generate a few episodes on the shipped scenes and evaluate the oracle "
                                          "and random agents under Strict and Tel-Hop physics")
    q.add_argument("--out", default="runs/quickstart", help="output folder (default: runs/quickstart)")
    q.add_argument("--episodes", type=int, default=None, help="episodes per scene and task (default from "
                                                              "tasks/eval/quickstart.yaml)")
    q.add_argument("--config", default=None, help="quickstart YAML (default: tasks/eval/quickstart.yaml)")
    q.add_argument("--no-progress", action="store_true", help="no progress bars")
    q.add_argument("--quality", choices=RENDER_QUALITIES, default=None,
                   help="render preset (default: the config's render.quality, else 'default')")
    q.add_argument("--objects", choices=OBJECT_STYLES, default=None,
                   help="how objects are drawn: meshes = detailed render meshes and baked light (default: the "
                        "config's render.objects, else 'primitives')")
    q.set_defaults(func=_quickstart)

    from .mllm.cli import add_commands as add_cache_commands

    add_cache_commands(sub)  # vlnverse cache build


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
    from .config import MAX_ENVS, load_eval_config
    from .runner import assistant_line, not_evaluated_line, run_eval

    from ..core.cli_options import split_trailing_options
    from ..core.errors import ConfigError, VLNVerseError
    from ..tasks.scene_roots import with_scene_roots

    overrides = split_trailing_options(args, extra=("--benchmark", "--split"))
    for name in ("backend", "benchmark", "split"):
        if getattr(args, name) is not None:
            overrides.append(f"{name}={getattr(args, name)}")
    parallel = ParallelConfig.from_args(args).checked()
    envs = args.envs
    if envs is not None and (isinstance(envs, bool) or not isinstance(envs, int) or not 1 <= envs <= MAX_ENVS):
        raise ConfigError(f"got {envs!r}", field="--envs", expected=f"an integer in 1..{MAX_ENVS}")
    path = resolve_config_path(args.config)
    cfg = load_eval_config(path, overrides + ([f"envs={envs}"] if envs is not None else []))
    cfg.scene_root = with_scene_roots(cfg.scene_root, args.scene_root)
    try:
        summary = run_eval(cfg, progress=not args.no_progress, **parallel.kwargs())
    except ConfigError as exc:  # found at run time (mode_params, agent.params, ...): name the config file
        raise exc.in_file(path) from None
    if summary.get("failed_scenes"):
        raise VLNVerseError(f"{len(summary['failed_scenes'])} scene(s) failed (the other scenes' episodes are in "
                            f"{cfg.out}): " + "; ".join(f"{f['scene']}: {f['error']}" for f in summary["failed_scenes"]))
    degraded = assistant_line(summary)
    if degraded is not None:  # evaluated, but some steps had no guidance: say so last
        print(f"vlnverse: {degraded}", file=sys.stderr)
    line = not_evaluated_line(summary, cfg.out)
    if line is not None:  # endpoint failures: the table is incomplete, so not a success
        print(f"vlnverse: {line}", file=sys.stderr)
        return NOT_EVALUATED_STATUS
    return 0


def _quickstart(args: argparse.Namespace) -> int:
    from .quickstart import run_quickstart

    run_quickstart(out=args.out, episodes_per_scene=args.episodes, config=args.config, progress=not args.no_progress,
                   quality=args.quality, objects=args.objects)
    return 0
