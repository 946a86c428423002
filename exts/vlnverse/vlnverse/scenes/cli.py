"""``vlnverse scenes …``: generate homes, inspect a scene, draw and export its maps.

Commands::

    vlnverse scenes generate --count N --seed S --out DIR [--format usda|usd] [--min-rooms 4 --max-rooms 12]
                             [--objects primitives|meshes]
    vlnverse scenes info SCENE [--body r2r_ce] [--resolution 0.05] [--json]
    vlnverse scenes render-map SCENE --out map.png [--body r2r_ce] [--resolution 0.05]
    vlnverse scenes export-maps SCENE --out DIR [--body r2r_ce] [--resolution 0.05]

SCENE is a USD file or the id of a shipped scene (``scenes_usd/``). Every output is
written only after all maps are computed, each file atomically, so an error never leaves
a partial file behind.
"""
from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

from ..core.body import DEFAULT_BODY
from .object_meshes import OBJECT_STYLES


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Register ``vlnverse scenes`` and its subcommands."""
    p = sub.add_parser("scenes", help="generate homes; inspect, draw and export scene maps")
    ssub = p.add_subparsers(dest="scenes_command", metavar="SUBCOMMAND")
    ssub.required = True

    g = ssub.add_parser("generate", help="write N procedural homes as USD (deterministic per seed)")
    g.add_argument("--count", type=int, required=True, help="number of homes")
    g.add_argument("--seed", type=int, default=0, help="seed of the first home; home i uses seed+i")
    g.add_argument("--out", required=True, help="output folder")
    g.add_argument("--format", choices=("usda", "usd"), default="usda", help="USD text (usda) or binary (usd)")
    g.add_argument("--min-rooms", type=int, default=4)
    g.add_argument("--max-rooms", type=int, default=12)
    g.add_argument("--objects", choices=OBJECT_STYLES, default="primitives",
                   help="also write each object's detailed render meshes (meshes; Isaac Sim shows them) or not")
    g.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    g.set_defaults(func=_generate)

    def scene_args(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("scene", metavar="SCENE", help="a USD file or a shipped scene id")
        parser.add_argument("--body", default=DEFAULT_BODY, help="agent body preset (robots/*.yaml) or YAML path")
        parser.add_argument("--resolution", type=float, default=0.05, help="map cell size in metres")

    i = ssub.add_parser("info", help="rooms, object counts, navigable area, doors and graph edges of a scene")
    scene_args(i)
    i.add_argument("--json", action="store_true", help="print machine-readable JSON")
    i.set_defaults(func=_info)

    r = ssub.add_parser("render-map", help="write a top-down map picture (PNG)")
    scene_args(r)
    r.add_argument("--out", required=True, help="PNG file to write")
    r.set_defaults(func=_render_map)

    e = ssub.add_parser("export-maps", help="write occupancy/navigable/room maps, scene graph, picture and summary")
    scene_args(e)
    e.add_argument("--out", required=True, help="output folder")
    e.set_defaults(func=_export_maps)


def resolve_scene(spec: str) -> Path:
    """The USD file named by ``spec``: a path or a shipped scene id (``splits.resolve_scenes``, the one resolver)."""
    from ..core.errors import ConfigError
    from .splits import resolve_scenes

    paths = resolve_scenes(spec, field="SCENE")
    if len(paths) != 1:
        raise ConfigError(f"'{spec}' names {len(paths)} scenes", field="SCENE", expected="one USD file or scene id")
    return Path(paths[0])


def _load(args: argparse.Namespace):
    """(scene description, maps) for the command's SCENE, body and resolution.

    Warnings (guessed labels, inferred rooms, ...) are printed as one ``vlnverse: warning:``
    line each on stderr.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            return _load_quietly(args)
        finally:
            for w in caught:
                print(f"vlnverse: warning: {w.message}", file=sys.stderr)


def _load_quietly(args: argparse.Namespace):
    from ..core.errors import ConfigError
    from ..core.body import load_body
    from .maps import compute_scene_maps
    from .usd_io import load_scene

    path = resolve_scene(args.scene)
    from .occupancy import MAX_RESOLUTION, MIN_RESOLUTION

    if not MIN_RESOLUTION <= args.resolution <= MAX_RESOLUTION:
        raise ConfigError(f"got {args.resolution}", file=path, field="--resolution",
                          expected=f"a cell size in [{MIN_RESOLUTION}, {MAX_RESOLUTION}] m")
    body = load_body(args.body)
    desc = load_scene(path)
    if not desc.source_path:
        desc.source_path = str(path)
    return desc, compute_scene_maps(desc, body, resolution=args.resolution)


def _generate(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from ..core.errors import ConfigError
    from ..core.io import claim_output_dir
    from .procgen import generate_home
    from .usd_io import write_usd

    if not 1 <= args.count <= 10_000:
        raise ConfigError(f"got {args.count}", field="--count", expected="an integer in 1..10000")
    if args.seed < 0:
        raise ConfigError(f"got {args.seed}", field="--seed", expected="an integer >= 0")
    out = claim_output_dir(args.out, command="scenes generate")
    for seed in tqdm(range(args.seed, args.seed + args.count), desc="homes", unit="home", disable=args.no_progress):
        desc = generate_home(seed, min_rooms=args.min_rooms, max_rooms=args.max_rooms)
        path = write_usd(desc, out / f"{desc.scene_id}.{args.format}", objects=args.objects)
        tqdm.write(str(path))
    return 0


def format_summary(summary: dict) -> str:
    """``scene_summary`` as readable text (the default output of ``scenes info``)."""
    lines = [f"scene      {summary['scene_id']}" + (f"  ({summary['source']})" if summary.get("source") else ""),
             f"rooms      {summary['room_count']}",
             f"  {'id':>3}  {'type':<14} {'area m2':>8} {'free m2':>8} {'nav m2':>8} {'objects':>7}"]
    for r in summary["rooms"]:
        area = "-" if r["area_m2"] is None else f"{r['area_m2']:.2f}"
        rtype = f"{r['room_type']}*" if r.get("inferred") else r["room_type"]
        lines.append(f"  {r['room_id']:>3}  {rtype:<14} {area:>8} {r['free_area_m2']:>8.2f} "
                     f"{r['navigable_area_m2']:>8.2f} {r['objects']:>7}")
    cats = summary["objects_per_category"]
    lines.append(f"objects    {summary['object_count']} in {len(cats)} categories")
    items = [f"{k} {v}" for k, v in cats.items()]
    for start in range(0, len(items), 6):
        lines.append("  " + ", ".join(items[start:start + 6]))
    lines.append(f"doors      {summary['door_count']}")
    h, w = summary["grid_cells"]
    lines.append(f"navigable  {summary['navigable_area_m2']:.2f} m2 of {summary['free_area_m2']:.2f} m2 free "
                 f"(agent radius {summary['agent_radius_m']:.2f} m, {summary['resolution_m']} m cells, {w}x{h})")
    lines.append("graph      " + ", ".join(f"{k} {v}" for k, v in summary["graph_edges"].items()))
    inferred = summary.get("inferred_labels") or {}
    if inferred:
        lines.append(f"labels     {len(inferred)} inferred from prim names (no semantic labels):")
        items = [f"{path} → {category}" for path, category in inferred.items()]
        for start in range(0, len(items), 4):
            lines.append("  " + ", ".join(items[start:start + 4]))
    if any(r.get("inferred") for r in summary["rooms"]):
        lines.append("           * room inferred from free space, typed by its objects")
    return "\n".join(lines)


def _info(args: argparse.Namespace) -> int:
    from ..core.io import to_jsonable
    from .maps import scene_summary

    desc, maps = _load(args)
    summary = scene_summary(desc, maps)
    print(json.dumps(to_jsonable(summary), indent=2, sort_keys=True) if args.json else format_summary(summary))
    return 0


def _render_map(args: argparse.Namespace) -> int:
    from ..core.errors import ConfigError
    from .render_map import render_map_png

    if Path(args.out).suffix.lower() != ".png":
        raise ConfigError(f"got '{args.out}'", field="--out", expected="a .png file name")
    desc, maps = _load(args)
    print(render_map_png(desc, maps, args.out))
    return 0


def _export_maps(args: argparse.Namespace) -> int:
    from ..core.io import check_output_dir, claim_output_dir
    from .maps import write_summary
    from .render_map import render_map_png

    check_output_dir(args.out, command="scenes export-maps")
    desc, maps = _load(args)
    out = claim_output_dir(args.out, command="scenes export-maps")
    written = list(maps.save(out).values())
    written.append(render_map_png(desc, maps, out / "map.png"))
    written.append(write_summary(out / "summary.json", desc, maps))
    for path in written:
        print(path)
    return 0
