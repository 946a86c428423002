"""``vlnverse train CONFIG [key=value ...]``, ``vlnverse waypoints train|show``, ``vlnverse
checkpoint info|convert|export|swap-predictor`` and ``vlnverse pretrain-encoder`` (torch is imported only when a command needs it)."""
from __future__ import annotations

import argparse

from ..scenes.object_meshes import OBJECT_STYLES
from ..sim.types import RENDER_QUALITIES


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Register ``train``, ``waypoints`` and ``checkpoint``."""
    p = sub.add_parser("train", help="train a policy: offline imitation from cached teacher rollouts, or "
                                     "'mode=dagger init=CHECKPOINT' for online DAgger (resumable)")
    p.add_argument("config", help="train config YAML path, or the name of one in tasks/train/")
    p.add_argument("overrides", nargs=argparse.REMAINDER,
                   help="dotted key=value overrides, e.g. mode=dagger init=runs/train/x/best.pt il.epochs=2")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    from ..core.cli_options import add_parallel_options

    add_parallel_options(p, "scenes rolled out in parallel for the observation cache and DAgger (workers=N)",
                         defaults=False)  # unset: the config's workers / engine / address / job_timeout stand
    p.add_argument("--nproc", type=int, default=None,
                   help="data-parallel training on N local ranks (DistributedDataParallel; launches "
                        "'torchrun --standalone --nproc_per_node N -m vlnverse train ...')")
    p.add_argument("--max-restarts", type=int, default=0,
                   help="with --nproc: restarts of the whole job after a rank fails (it resumes from last.pt)")
    from ..tasks.scene_roots import add_scene_root_option

    add_scene_root_option(p, "train/val episodes")
    p.set_defaults(func=_train)
    w = sub.add_parser("waypoints", help="candidate waypoint predictor (VLN-BERT): train on the toolkit's scenes, "
                                         "draw its predictions")
    wsub = w.add_subparsers(dest="waypoints_command", metavar="ACTION")
    wsub.required = True
    t = wsub.add_parser("train", help="render seeded panoramas, train, evaluate on held-out scenes")
    t.add_argument("--scenes", default="train", help="training scenes (split name, ids or paths)")
    t.add_argument("--val-scenes", default="val_unseen", help="held-out scenes")
    t.add_argument("--poses-per-scene", type=int, default=150)
    t.add_argument("--val-poses-per-scene", type=int, default=60)
    t.add_argument("--epochs", type=int, default=15)
    t.add_argument("--batch-size", type=int, default=32)
    t.add_argument("--lr", type=float, default=1e-3)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--image-size", type=int, default=16, help="pixels per panorama view (square)")
    t.add_argument("--rgb", action="store_true", help="read the RGB panorama too")
    _render_flags(t, "panoramas")
    t.add_argument("--out", default="runs/waypoints", help="output folder (predictor.pt, metrics.json, loss.png)")
    t.add_argument("--no-progress", action="store_true")
    t.set_defaults(func=_waypoints_train)
    s = wsub.add_parser("show", help="draw candidates on the panorama strip and the top-down map (PNG + JSON)")
    s.add_argument("predictor", help="predictor.pt of 'vlnverse waypoints train'")
    s.add_argument("--scenes", default="val_unseen")
    s.add_argument("-n", type=int, default=4, help="number of poses")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", default="runs/waypoints/show")
    s.set_defaults(func=_waypoints_show)
    e = sub.add_parser("pretrain-encoder", help="pretrain the policies' RGB and depth encoders on the toolkit's own "
                                                "renders (semantic classes, depth, room type), scored on held-out scenes")
    e.add_argument("--scenes", default="train", help="training scenes: split name, ids, paths or folders of scenes")
    e.add_argument("--val-scenes", default="val_unseen", help="held-out scenes (same forms)")
    e.add_argument("--poses-per-scene", type=int, default=200)
    e.add_argument("--val-poses-per-scene", type=int, default=60)
    e.add_argument("--image-size", type=int, default=64, help="square camera resolution (the policies' rig)")
    e.add_argument("--hfov", type=float, default=90.0, help="horizontal field of view (degrees)")
    e.add_argument("--max-depth", type=float, default=10.0, help="depth range and normalisation (metres)")
    e.add_argument("--channels", type=int, default=32, help="CNN width (as policies' cnn encoders)")
    e.add_argument("--out-dim", type=int, default=128, help="global feature size")
    e.add_argument("--objectives", default="semantic,depth,room", help="comma-separated subset of semantic,depth,room")
    e.add_argument("--epochs", type=int, default=15)
    e.add_argument("--batch-size", type=int, default=32)
    e.add_argument("--lr", type=float, default=1e-3)
    e.add_argument("--probe-epochs", type=int, default=8, help="epochs of the frozen-feature probe (0: none)")
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    _render_flags(e, "frames")
    e.add_argument("--out", default="runs/encoder", help="output folder (encoder.safetensors + encoder.json, "
                                                         "metrics.json, loss.png)")
    e.add_argument("--no-progress", action="store_true")
    e.set_defaults(func=_pretrain_encoder)
    c = sub.add_parser("checkpoint", help="inspect a checkpoint, or convert an old pickle checkpoint (safetensors files "
                                          "load without running code)")
    csub = c.add_subparsers(dest="checkpoint_command", metavar="ACTION")
    csub.required = True
    i = csub.add_parser("info", help="metadata, sensor rig, tensor sizes and whether the checksum holds "
                                     "(builds no model; exit 1 when the checksum fails)")
    i.add_argument("path", help="a policy checkpoint, waypoint predictor or weights file")
    i.add_argument("--json", action="store_true", help="one JSON object instead of text")
    i.set_defaults(func=_checkpoint_info)
    v = csub.add_parser("convert", help="convert a torch.save pickle of an earlier version to safetensors "
                                        "(unpickles OLD, which runs any code it holds: needs --trust)")
    v.add_argument("old", help="the old .pt file")
    v.add_argument("new", help="the file to write")
    v.add_argument("--trust", action="store_true", help="I trust OLD: unpickling it may run code")
    v.set_defaults(func=_checkpoint_convert)
    x = csub.add_parser("export", help="a checkpoint for evaluation and sharing: the policy's weights and metadata "
                                       "without the optimizer state and resume position")
    x.add_argument("src", help="a policy checkpoint (e.g. runs/train/X/best.pt)")
    x.add_argument("dst", help="the file to write")
    x.add_argument("--recipe", default=None, metavar="CONFIG",
                   help="the training config (path or tasks/train name) whose model SRC must be; the written "
                        "config then names files as the recipe does (e.g. waypoint_predictor: auto)")
    x.set_defaults(func=_checkpoint_export)
    w = csub.add_parser("swap-predictor", help="a waypoint policy's checkpoint (vlnbert, hnr, gama) with another "
                                               "waypoint predictor, e.g. one trained on another body's panoramas")
    w.add_argument("src", help="a vlnbert / hnr / gama checkpoint")
    w.add_argument("predictor", help="a predictor.pt of 'vlnverse waypoints train'")
    w.add_argument("dst", help="the file to write")
    w.set_defaults(func=_checkpoint_swap_predictor)


def _checkpoint_info(args: argparse.Namespace) -> int:
    import json
    import sys

    from .tensorfile import file_info, format_info

    info = file_info(args.path)
    print(json.dumps(info, sort_keys=True) if args.json else format_info(info))
    if info["checksum"] == "MISMATCH":
        print(f"vlnverse: error: {args.path}: the tensors fail their checksum (altered or damaged)", file=sys.stderr)
        return 1
    return 0


def _checkpoint_convert(args: argparse.Namespace) -> int:
    import json
    import sys

    from .agent import require_torch

    require_torch("vlnverse checkpoint convert", field=None)
    from .checkpoint import convert_legacy

    out = convert_legacy(args.old, args.new, trust=args.trust, warn=lambda s: print(s, file=sys.stderr))
    print(json.dumps(out))
    return 0


def _checkpoint_export(args: argparse.Namespace) -> int:
    import json

    from .agent import require_torch

    require_torch("vlnverse checkpoint export", field=None)
    from .checkpoint import export_checkpoint

    print(json.dumps(export_checkpoint(args.src, args.dst, recipe=args.recipe)))
    return 0


def _checkpoint_swap_predictor(args: argparse.Namespace) -> int:
    import json

    from .agent import require_torch

    require_torch("vlnverse checkpoint swap-predictor", field=None)
    from .checkpoint import swap_predictor

    print(json.dumps(swap_predictor(args.src, args.predictor, args.dst)))
    return 0


def _train(args: argparse.Namespace) -> int:
    import json

    from .agent import require_torch
    from .config import load_train_config, resolve_train_config_path

    from ..core.cli_options import split_trailing_options
    from ..core.jobs import CONFIG_FIELDS
    from ..tasks.scene_roots import with_scene_roots

    args.backend = None
    _launch_options(args)  # --nproc / --max-restarts after the overrides
    overrides = split_trailing_options(args)  # --workers / --engine / --address may follow the overrides
    if args.backend is not None:
        overrides.append(f"backend={args.backend}")
    for name in CONFIG_FIELDS:
        if getattr(args, name) is not None:
            overrides.append(f"{name}={getattr(args, name)}")
    cfg = load_train_config(resolve_train_config_path(args.config), overrides)
    cfg.scene_root = with_scene_roots(cfg.scene_root, args.scene_root)
    require_torch("vlnverse train", field=None)
    from .distributed import CollectiveError, launch, rank_from_env

    if args.nproc is not None:  # the same command on N ranks, through torch.distributed.run
        command = ["-m", "vlnverse", "train", str(resolve_train_config_path(args.config)), *overrides,
                   *[f"--scene-root={r}" for r in args.scene_root],
                   *(["--no-progress"] if args.no_progress else [])]
        launch(args.nproc, command, max_restarts=args.max_restarts)
        return 0
    from .trainer import run_training

    rank = rank_from_env()[0]
    try:
        summary = run_training(cfg, progress=not args.no_progress)
    except CollectiveError:
        if rank > 0:  # every rank raised it; rank 0 prints it
            return 2
        raise
    if rank == 0:
        out = {k: summary.get(k) for k in ("mode", "policy", "best", "checkpoint", "world_size", "effective_batch")}
        if summary.get("tasks"):  # a multi-task run: SR / SPL per task and split (all in tasks.json)
            out["tasks"] = {name: {split: {m: row[m] for m in ("SR", "SPL", "episodes")} for split, row in splits.items()}
                            for name, splits in summary["tasks"]["tasks"].items()}
        print(json.dumps(out, default=str))
    return 0


def _launch_options(args: argparse.Namespace) -> None:
    """Move ``--nproc N`` / ``--max-restarts N`` given after the overrides onto ``args`` (integers)."""
    from ..core.errors import ConfigError

    items, rest = list(args.overrides), []
    while items:
        item = items.pop(0)
        name, eq, value = item.partition("=")
        if name in ("--nproc", "--max-restarts"):
            if not eq:
                if not items:
                    raise ConfigError(f"'{name}' needs a value", field=name)
                value = items.pop(0)
            try:
                setattr(args, name[2:].replace("-", "_"), int(value))
            except ValueError:
                raise ConfigError(f"got {value!r}", field=name, expected="an integer") from None
        else:
            rest.append(item)
    args.overrides = rest
    if args.nproc is not None and args.nproc < 1:
        raise ConfigError(f"got {args.nproc}", field="--nproc", expected="an integer >= 1")
    if args.max_restarts < 0:
        raise ConfigError(f"got {args.max_restarts}", field="--max-restarts", expected="an integer >= 0")


def _render_flags(parser: argparse.ArgumentParser, what: str) -> None:
    """``--quality`` / ``--objects``: the ``render`` settings the ``what`` are drawn with (as ``vlnverse eval``'s)."""
    parser.add_argument("--quality", choices=RENDER_QUALITIES, default="default",
                        help=f"render preset of the {what} (default: default)")
    parser.add_argument("--objects", choices=OBJECT_STYLES, default="primitives",
                        help=f"how objects are drawn in the {what}: meshes = detailed render meshes (default: primitives)")


def _waypoints_train(args: argparse.Namespace) -> int:
    import json

    from ..core.errors import ConfigError
    from .agent import require_torch

    require_torch("vlnverse waypoints train", field=None)
    from .waypoints import WaypointTrainConfig, run_waypoint_training

    cfg = WaypointTrainConfig(scenes=args.scenes, val_scenes=args.val_scenes, poses_per_scene=args.poses_per_scene,
                              val_poses_per_scene=args.val_poses_per_scene, epochs=args.epochs,
                              batch_size=args.batch_size, lr=args.lr, seed=args.seed,
                              model={"image_size": args.image_size, "rgb": bool(args.rgb)},
                              render={"quality": args.quality, "objects": args.objects})
    try:
        cfg.validate()
    except ConfigError as exc:  # name the command-line option of the field
        flag = f"--{exc.field.rsplit('.', 1)[-1].replace('_', '-')}" if exc.field else None
        raise ConfigError(exc.problem, field=flag, expected=exc.expected) from None
    metrics = run_waypoint_training(cfg, args.out, progress=not args.no_progress)
    print(json.dumps(metrics["held_out"]))
    return 0


def _waypoints_show(args: argparse.Namespace) -> int:
    import json

    from .agent import require_torch

    require_torch("vlnverse waypoints show", field=None)
    from .waypoints import show_predictions

    result = show_predictions(args.predictor, args.scenes, args.out, n=args.n, seed=args.seed)
    print(json.dumps({"out": result["out"], "poses": [{k: p[k] for k in ("scene", "png", "nearest_to_next_waypoint")}
                                                      for p in result["poses"]]}))
    return 0


def _pretrain_encoder(args: argparse.Namespace) -> int:
    import json

    from .agent import require_torch

    require_torch("vlnverse pretrain-encoder", field=None)
    from .encoder.pretraining import EncoderTrainConfig, run_pretraining

    cfg = EncoderTrainConfig(scenes=args.scenes, val_scenes=args.val_scenes, poses_per_scene=args.poses_per_scene,
                             val_poses_per_scene=args.val_poses_per_scene, image_size=args.image_size,
                             hfov_deg=args.hfov, max_depth=args.max_depth, channels=args.channels,
                             out_dim=args.out_dim, objectives=tuple(o.strip() for o in args.objectives.split(",") if o.strip()),
                             epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, probe_epochs=args.probe_epochs,
                             seed=args.seed, threads=args.threads,
                             render={"quality": args.quality, "objects": args.objects})
    cfg.validate()
    metrics = run_pretraining(cfg, args.out, progress=not args.no_progress)
    print(json.dumps({"held_out_before": metrics["held_out_before"]["loss"], "held_out": metrics["held_out"],
                      "probe": metrics["probe"]}))
    return 0
