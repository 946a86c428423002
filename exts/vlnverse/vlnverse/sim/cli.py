"""``vlnverse sim …``: inspect the simulator layer and drive an agent through a scene.

Commands::

    vlnverse sim info [--json]
    vlnverse sim drive SCENE [--body r2r_ce] [--pose X,Y,YAW] [--actions F*4,L,F | --random N]
                       [--seed S] [--renderer auto|gl|raycast] [--quality fast|default|high]
                       [--objects primitives|meshes] [--width 224 --height 224] --out DIR
    vlnverse scenes gallery [SCENE[,SCENE...|SPLIT]] --out DIR [--rooms 3] [--quality Q ...]
                       [--objects meshes|primitives] [--object-sheet [--categories C,...]]
                       [--room-sheet]

SCENE is a USD file or the id of a shipped scene. ``drive`` writes ``steps.jsonl`` (one
``ActionResult`` per action), ``summary.json`` and ``frames/step_NNNN.png`` (RGB | depth |
semantics) into DIR, all at once (atomically) when the drive is done.
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from ..core.body import DEFAULT_BODY
from ..scenes.object_meshes import OBJECT_STYLES, RECOGNISABLE_OBJECTS
from .types import RENDER_QUALITIES

#: ``scenes gallery``'s default ``--objects``: the gallery is the picture of the homes people look at
GALLERY_OBJECTS = RECOGNISABLE_OBJECTS
#: Short names accepted by ``--actions``.
ACTION_ABBREVIATIONS = {"S": "STOP", "F": "MOVE_FORWARD", "L": "TURN_LEFT", "R": "TURN_RIGHT", "U": "LOOK_UP",
                        "D": "LOOK_DOWN"}


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Register ``vlnverse sim`` and its subcommands."""
    p = sub.add_parser("sim", help="simulator: list bodies/sensors/backends, drive an agent through a scene")
    ssub = p.add_subparsers(dest="sim_command", metavar="SUBCOMMAND")
    ssub.required = True
    i = ssub.add_parser("info", help="body presets, sensor presets, backends and the renderer this machine gets")
    i.add_argument("--json", action="store_true", help="print JSON")
    i.set_defaults(func=_info)
    d = ssub.add_parser("drive", help="run discrete actions through physics; write results and frames")
    d.add_argument("scene", help="USD file or shipped scene id")
    d.add_argument("--body", default=DEFAULT_BODY, help="body preset name or YAML path")
    d.add_argument("--pose", default=None, help="start pose X,Y[,YAW_DEG] (default: random navigable start)")
    group = d.add_mutually_exclusive_group()
    group.add_argument("--actions", default=None,
                       help="comma-separated actions: names or F/L/R/U/D/S, with *N repeats (e.g. F*4,L,F)")
    group.add_argument("--random", type=int, default=None, metavar="N", help="N random moves/turns (seeded)")
    d.add_argument("--seed", type=int, default=0, help="seed of the start pose and random actions")
    d.add_argument("--renderer", choices=("auto", "gl", "raycast"), default="auto")
    d.add_argument("--quality", choices=RENDER_QUALITIES, default="default",
                   help="render preset (render.quality): fast = flat colours, default = textures, lights and "
                        "anti-aliasing, high = plus shadows and reflections")
    d.add_argument("--objects", choices=OBJECT_STYLES, default="primitives",
                   help="how objects are drawn: their collision primitives (default; what the shipped policies "
                        "were trained on) or detailed render meshes (opt-in)")
    d.add_argument("--width", type=int, default=224)
    d.add_argument("--height", type=int, default=224)
    d.add_argument("--out", required=True, help="output folder (replaced atomically)")
    d.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    d.set_defaults(func=_drive)
    _add_gallery_command(sub)


def _add_gallery_command(sub: argparse._SubParsersAction) -> None:
    """``vlnverse scenes gallery`` renders through the simulator, so this layer contributes it to the
    ``scenes`` command (the scenes layer knows no simulator)."""
    scenes = sub.choices.get("scenes")
    if scenes is None:
        return
    ssub = next(a for a in scenes._actions if isinstance(a, argparse._SubParsersAction))
    g = ssub.add_parser("gallery", help="contact sheet (PNG + JSON) of first-person views of homes at each "
                                        "render preset, with the frame rate each achieved")
    g.add_argument("scene", metavar="SCENE", nargs="?", default=None,
                   help="USD file(s), scene id(s) or a split name (comma-separated); optional with --object-sheet")
    g.add_argument("--out", required=True, help="output folder (gallery.png, gallery.json)")
    g.add_argument("--objects", choices=OBJECT_STYLES, default=GALLERY_OBJECTS,
                   help=f"draw the homes' objects as render meshes with baked light (default '{GALLERY_OBJECTS}': "
                        "the homes as people and MLLM agents see them) or as primitives (what the learned "
                        "policies were trained on)")
    g.add_argument("--object-sheet", action="store_true",
                   help="also write objects.png / objects_thumb.png / objects.json: per category, close-ups of "
                        "two render-mesh variants from the agent's height")
    g.add_argument("--room-sheet", action="store_true",
                   help="write rooms.png / rooms.json instead of the gallery: per home, a whole-room view (a "
                        "corner of its living room, wide field of view; --rooms per home) at each preset, "
                        "objects drawn as render meshes")
    g.add_argument("--categories", default=None, help="object sheet categories (comma-separated; default: all "
                                                     "with a render-mesh generator)")
    g.add_argument("--rooms", type=int, default=None, help="views per home, one per room, largest rooms first "
                                                          "(default 3; 1 with --room-sheet)")
    g.add_argument("--width", type=int, default=224)
    g.add_argument("--height", type=int, default=224)
    g.add_argument("--quality", action="append", choices=RENDER_QUALITIES, default=None,
                   help="preset(s) to show (repeatable; default: all three)")
    g.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    g.set_defaults(func=_gallery)


def _gallery(args: argparse.Namespace) -> int:
    from ..core.errors import ConfigError
    from ..scenes.splits import resolve_scenes
    from .gallery import render_gallery

    rooms = args.rooms if args.rooms is not None else (1 if args.room_sheet else 3)
    if rooms < 1:
        raise ConfigError(f"got {rooms}", field="--rooms", expected="an integer >= 1")
    if args.scene is None and args.room_sheet:
        raise ConfigError("missing", field="SCENE", expected="scene(s) or a split for --room-sheet")
    if args.scene is None and not args.object_sheet:
        raise ConfigError("missing", field="SCENE", expected="scene(s) or a split, or --object-sheet")
    if args.object_sheet:
        from ..scenes.object_meshes import GENERATORS
        from .gallery import render_object_sheet

        cats = [c.strip() for c in args.categories.split(",") if c.strip()] if args.categories else None
        for c in cats or ():
            if c not in GENERATORS:
                raise ConfigError(f"got {c!r}", field="--categories", expected="categories of " + ", ".join(GENERATORS))
        sheet = render_object_sheet(args.out, categories=cats, width=args.width, height=args.height,
                                    progress=not args.no_progress)
        print(f"wrote {Path(args.out) / 'objects.png'} ({len(sheet['views'])} close-ups)")
    if args.scene is None:
        return 0
    paths = resolve_scenes(args.scene)
    if args.room_sheet:
        from .gallery import render_room_sheet

        sheet = render_room_sheet(paths, args.out, rooms=rooms, width=args.width, height=args.height,
                                  qualities=args.quality or RENDER_QUALITIES, progress=not args.no_progress)
        print(f"wrote {Path(args.out) / 'rooms.png'} ({len(sheet['views'])} views x {len(sheet['presets'])} presets)")
        return 0
    summary = render_gallery(paths, args.out, rooms=rooms, width=args.width, height=args.height,
                             qualities=args.quality or RENDER_QUALITIES, progress=not args.no_progress,
                             objects=args.objects)
    fps = ", ".join(f"{q} {v['fps']}" for q, v in summary["presets"].items())
    print(f"wrote {Path(args.out) / 'gallery.png'} ({len(summary['views'])} views; frames/s: {fps})")
    return 0


#: The most actions one ``sim drive`` runs (each writes a PNG frame).
MAX_DRIVE_ACTIONS = 10_000


def parse_actions(text: str) -> list[str]:
    """``"F*2,TURN_LEFT,r"`` → ``["MOVE_FORWARD", "MOVE_FORWARD", "TURN_LEFT", "TURN_RIGHT"]``;
    raises ``ConfigError`` naming the bad item."""
    from ..core.errors import ConfigError
    from .types import DiscreteAction

    out: list[str] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, _, count = item.partition("*")
        name = ACTION_ABBREVIATIONS.get(name.strip().upper(), name.strip().upper())
        if name not in DiscreteAction.__members__:
            raise ConfigError(f"unknown action '{item}'", field="--actions",
                              expected=f"one of {list(DiscreteAction.__members__)} or {sorted(ACTION_ABBREVIATIONS)}")
        try:
            repeat = int(count) if count else 1
        except ValueError:
            repeat = 0
        if repeat < 1:
            raise ConfigError(f"bad repeat in '{item[:40]}'", field="--actions", expected="NAME*N with N >= 1")
        if len(out) + repeat > MAX_DRIVE_ACTIONS:
            raise ConfigError(f"more than {MAX_DRIVE_ACTIONS} actions", field="--actions",
                              expected=f"at most {MAX_DRIVE_ACTIONS} actions (each writes a frame)")
        out += [name] * repeat
    if not out:
        raise ConfigError("no actions given", field="--actions", expected="at least one action")
    return out


def _parse_pose(text: str):
    from ..core.errors import ConfigError
    from .types import AgentPose

    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        values = []
    if not 2 <= len(values) <= 3 or not all(math.isfinite(v) for v in values):
        raise ConfigError(f"got {text!r}", field="--pose", expected="X,Y[,YAW_DEG] finite numbers")
    return AgentPose(values[0], values[1], math.radians(values[2]) if len(values) == 3 else 0.0)


def _info(args: argparse.Namespace) -> int:
    from .api import BACKENDS, check_backend, make_simulator
    from .body import list_bodies, load_body
    from .demo import room_scene
    from .sensors import SENSORS

    bodies = {name: vars(load_body(name)) for name in list_bodies()}
    backends = sorted(BACKENDS.names(), key=lambda n: n != "mujoco")  # the default first
    available = {}
    for name in backends:
        try:
            check_backend(name)
            available[name] = True
        except Exception:  # noqa: BLE001 - any failure means "not usable here"
            available[name] = False
    info = {"bodies": bodies, "sensor_presets": SENSORS.names(), "backends": backends, "backends_available": available}
    with make_simulator(room_scene(2.0, 2.0), DEFAULT_BODY, sensors=[]) as sim:
        info["renderer"] = sim.renderer_name
    if args.json:
        print(json.dumps(info, indent=2, sort_keys=True))
        return 0
    shown = [n if available[n] else f"{n} (not installed)" for n in backends]
    print(f"backends: {', '.join(shown)}   renderer here: {info['renderer']}")
    print(f"sensor presets: {', '.join(info['sensor_presets'])}")
    for name, b in bodies.items():
        drive = "holonomic" if b["holonomic"] else "differential drive"
        print(f"body {name}: height {b['height']} m, radius {b['radius']} m, mass {b['mass']} kg, "
              f"camera {b['camera_height']} m, max {b['max_linear_speed']} m/s, {drive}")
    return 0


def _frame_png(obs: dict) -> bytes:
    """RGB | depth (viridis, 0–10 m) | semantics (tab20 by label id) side by side, as PNG bytes."""
    import io

    import numpy as np
    from matplotlib import colormaps
    from PIL import Image

    depth = colormaps["viridis"](np.clip(obs["depth"] / 10.0, 0, 1))[..., :3]
    sem = colormaps["tab20"]((obs["semantic"] % 20) / 19.0)[..., :3]
    sem[obs["semantic"] == 0] = 0.0
    image = np.concatenate([obs["rgb"], (depth * 255).astype(np.uint8), (sem * 255).astype(np.uint8)], axis=1)
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="PNG")
    return buf.getvalue()


def _drive(args: argparse.Namespace) -> int:
    import numpy as np
    from tqdm import tqdm

    from ..core.io import check_output_dir, replace_output_dir, to_jsonable
    from ..scenes.splits import resolve_scenes
    from ..scenes.usd_io import load_scene
    from ..core.config import check_seed
    from ..core.errors import ConfigError
    from .gym_env import VLNVerseNavEnv
    from .sensors import make_sensor
    from .types import InvalidActionError

    check_output_dir(args.out, command="sim drive")  # refuse before any work
    check_seed(args.seed, "--seed")
    actions = parse_actions(args.actions) if args.actions else None
    if actions is None:
        rng = np.random.default_rng(args.seed)
        n = 20 if args.random is None else args.random
        if not 1 <= n <= MAX_DRIVE_ACTIONS:
            raise ConfigError(f"got {n}", field="--random", expected=f"an integer in 1..{MAX_DRIVE_ACTIONS}")
        actions = list(rng.choice(["MOVE_FORWARD", "TURN_LEFT", "TURN_RIGHT"], size=n, p=[0.6, 0.2, 0.2]))
    pose = _parse_pose(args.pose) if args.pose else None
    scene_path = resolve_scenes(args.scene, field="SCENE")[0]
    desc = load_scene(scene_path)
    size = dict(width=args.width, height=args.height)
    env = VLNVerseNavEnv(desc, args.body, [make_sensor("rgb", **size), make_sensor("depth", **size),
                                           make_sensor("semantic", **size)], renderer=args.renderer,
                         quality=args.quality, objects=args.objects)
    try:
        try:
            obs, _ = env.reset(seed=args.seed, options={"pose": pose})
        except InvalidActionError as exc:  # a start pose outside the scene
            raise ConfigError(str(exc), file=scene_path, field="--pose") from None
        frames = [_frame_png(obs)]
        records = []
        start = env.sim.pose
        for name in tqdm(actions, desc="drive", unit="action", disable=args.no_progress):
            obs, result = env.sim.step(name)
            records.append(result.to_dict())
            frames.append(_frame_png(obs))
        path_length = float(sum(np.linalg.norm(np.diff(np.asarray(r["trajectory"])[:, :2], axis=0), axis=1).sum()
                                for r in records))
        summary = {
            "scene": str(scene_path), "body": env.body.name, "renderer": env.sim.renderer_name, "quality": args.quality,
            "seed": args.seed,
            "start_pose": start.to_dict(), "final_pose": env.sim.pose.to_dict(), "actions": len(records),
            "collisions": sum(r["collided"] for r in records),
            "max_obstacle_displacement": max((r["obstacle_displacement"] for r in records), default=0.0),
            "path_length": path_length, "sim_time": env.sim.time,
        }
    finally:
        env.close()
    with replace_output_dir(args.out, command="sim drive") as tmp:
        (tmp / "frames").mkdir()
        for i, png in enumerate(frames):
            (tmp / "frames" / f"step_{i:04d}.png").write_bytes(png)
        lines = [json.dumps(to_jsonable(r), sort_keys=True, separators=(",", ":")) for r in records]
        (tmp / "steps.jsonl").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        (tmp / "summary.json").write_text(json.dumps(to_jsonable(summary), indent=2, sort_keys=True) + "\n",
                                          encoding="utf-8")
    print(f"{summary['actions']} actions, {summary['collisions']} with contact, path {path_length:.2f} m, "
          f"final pose ({summary['final_pose']['x']:.2f}, {summary['final_pose']['y']:.2f}); wrote {args.out}")
    return 0
