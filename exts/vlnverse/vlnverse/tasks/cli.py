"""``vlnverse data ...``: generate, inspect and convert navigation datasets.

* ``data generate --task T --scenes SPLIT_OR_PATHS --episodes-per-scene K --seed S --out DIR``
* ``data show FILE_OR_DIR [--split S] [--n 3]``
* ``data export-r2r FILE_OR_DIR --out FILE.json [--split S]``
* ``data export-sft FILE_OR_DIR --task video_contextualized --out DIR`` (registered by ``vlnverse.eval.cli``)
* ``data import-r2r FILE.json --split S --out FILE.jsonl [--task fine_grained]``
* ``data navgraph SCENE --out FILE.json`` builds a scene's navigation graph.
* ``data stats FILE_OR_DIR [--split S] [--max-instructions N] [--baseline DIR] [--out FILE.json]``:
  language statistics of the instructions (``tasks.instructions.stats``).
* ``data review FILE_OR_DIR --n 50 --out DIR``: an HTML page to check instructions by eye
  (``tasks.instructions.review``).
* ``data tasks`` lists the registered task types.
* ``benchmark list | info NAME | build NAME [--split S] [--workers N] | verify NAME`` (``tasks.benchmark``).

Heavy imports stay inside the command functions so ``vlnverse --help`` stays fast.
"""
from __future__ import annotations

import argparse
import json
import math

from ..core.body import DEFAULT_BODY
from ..core.cli_options import add_parallel_options
from ..core.jobs import ParallelConfig


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Register ``data`` and its subcommands."""
    data = sub.add_parser("data", help="generate, inspect and convert navigation datasets")
    dsub = data.add_subparsers(dest="data_command", metavar="SUBCOMMAND")
    dsub.required = True

    gen = dsub.add_parser("generate", help="generate episodes of one task type over a set of scenes")
    gen.add_argument("--task", required=True, help="task type (see 'vlnverse data tasks')")
    gen.add_argument("--scenes", required=True,
                     help="split name (train, val_unseen, test), 'all', scene ids or USD paths (comma-separated)")
    gen.add_argument("--episodes-per-scene", type=int, required=True, help="episodes generated per scene (>= 1)")
    gen.add_argument("--seed", type=int, default=0, help="dataset seed (same seed, same files)")
    gen.add_argument("--out", required=True, help="output dataset folder (replaced atomically)")
    gen.add_argument("--body", default=None, help="agent body preset (default: the task config's)")
    gen.add_argument("--config", default=None, help="task config YAML (default: the task type's own config.yaml)")
    gen.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                     help="override a task config field, e.g. --set max_geodesic=12 --set params.styles=[formal]")
    gen.add_argument("--val-seen-fraction", type=float, default=0.1,
                     help="share of train-scene episodes held out as val_seen (default 0.1)")
    gen.add_argument("--default-split", default="train", help="split of scenes not listed in splits.json")
    gen.add_argument("--scene-root", action="append", default=[], metavar="DIR",
                     help="folder of custom scenes: episodes store scene paths relative to it (repeatable; "
                          "evaluate with scene_root=DIR)")
    gen.add_argument("--plugins", action="append", default=[], metavar="MODULE",
                     help="plug-in module (dotted name or .py file) registering task types; repeatable")
    gen.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    add_parallel_options(gen, "scenes generated in parallel")
    gen.add_argument("--backend", default="auto", help="simulator backend for tasks that render (auto | mujoco | isaac)")
    from ..scenes.object_meshes import OBJECT_STYLES
    from ..sim.types import RENDER_QUALITIES

    gen.add_argument("--quality", choices=RENDER_QUALITIES, default=None,
                     help="render preset of the assets of tasks that render (reference images, prior videos; "
                          "default: the simulator's, 'default')")
    gen.add_argument("--objects", choices=OBJECT_STYLES, default=None,
                     help="how those assets draw objects (default: the simulator's, primitives, what the learned "
                          "policies are trained on; meshes for vision-language agents, whose eval default it is); "
                          "the flags given are recorded in summary.json as 'render'")
    gen.set_defaults(func=_generate)

    show = dsub.add_parser("show", help="print episodes of a JSONL file or dataset folder")
    show.add_argument("path")
    show.add_argument("--split", default=None)
    show.add_argument("--n", type=int, default=3, help="number of episodes to print")
    show.add_argument("--json", action="store_true", help="print the raw JSON records")
    show.set_defaults(func=_show)

    exp = dsub.add_parser("export-r2r", help="write episodes in the VLN-CE R2R JSON layout (Y-up)")
    exp.add_argument("path", help="episode JSONL file or dataset folder")
    exp.add_argument("--split", default=None)
    exp.add_argument("--out", required=True)
    exp.set_defaults(func=_export_r2r)

    imp = dsub.add_parser("import-r2r", help="read a VLN-CE R2R JSON file into vlnverse JSONL")
    imp.add_argument("path")
    imp.add_argument("--split", required=True)
    imp.add_argument("--task", default="fine_grained")
    imp.add_argument("--out", required=True)
    imp.set_defaults(func=_import_r2r)

    nav = dsub.add_parser("navgraph", help="build a scene's navigation graph (viewpoints + line-of-sight edges)")
    nav.add_argument("scene", help="scene id or USD path")
    nav.add_argument("--out", required=True, help="output JSON file")
    nav.add_argument("--body", default=DEFAULT_BODY)
    nav.add_argument("--resolution", type=float, default=0.05)
    nav.add_argument("--spacing", type=float, default=1.5, help="minimum viewpoint spacing (m)")
    nav.add_argument("--max-edge", type=float, default=3.0, help="longest edge (m)")
    nav.add_argument("--seed", type=int, default=0)
    nav.set_defaults(func=_navgraph)

    stats = dsub.add_parser("stats", help="language statistics of a dataset's instructions (vocabulary, 3-grams, "
                                         "length, references, Verifier rejections)")
    stats.add_argument("path", help="episode JSONL file or dataset folder")
    stats.add_argument("--split", default=None)
    stats.add_argument("--max-instructions", type=int, default=None, metavar="N",
                       help="only the first N instructions (compare datasets on the same count)")
    stats.add_argument("--baseline", default=None, metavar="DATASET",
                       help="a second dataset measured the same way, reported beside it with the ratios")
    stats.add_argument("--out", default=None, help="also write the figures as JSON to this file")
    stats.set_defaults(func=_stats)

    review = dsub.add_parser("review", help="an HTML page to check instructions by eye: one card per instruction, "
                                           "references highlighted, the map with the path and the referenced objects")
    review.add_argument("path", help="episode JSONL file or dataset folder")
    review.add_argument("--split", default=None)
    review.add_argument("--n", type=int, default=50, help="number of instructions (the first N in file order)")
    review.add_argument("--out", required=True, help="output folder (index.html, maps/; replaced atomically)")
    review.add_argument("--body", default=None, help="agent body of the maps (default: r2r_ce)")
    review.add_argument("--scene-root", action="append", default=[], metavar="DIR",
                        help="folder searched for the episodes' scenes (repeatable)")
    review.set_defaults(func=_review)

    tasks = dsub.add_parser("tasks", help="list the registered task types")
    tasks.set_defaults(func=_tasks)
    add_benchmark_commands(sub)


def add_benchmark_commands(sub: argparse._SubParsersAction) -> None:
    """Register ``benchmark`` and its subcommands (``vlnverse.tasks.benchmark``)."""
    bench = sub.add_parser("benchmark", help="named, versioned benchmarks of generated homes: list, inspect, "
                                             "build and verify them")
    bsub = bench.add_subparsers(dest="benchmark_command", metavar="SUBCOMMAND")
    bsub.required = True
    bsub.add_parser("list", help="the shipped benchmarks").set_defaults(func=_benchmark_list)
    for name, text in (("info", "homes and episodes per split, seed ranges, where it is cached"),
                       ("build", "generate the held-out splits' homes and episodes into the cache, checked "
                                 "against the definition's fingerprints"),
                       ("verify", "build if needed, then re-check every cached home and episodes file (and, with "
                                  "--train-homes N, the first N training homes) against the definition")):
        p = bsub.add_parser(name, help=text)
        p.add_argument("name", help="benchmark name (see 'vlnverse benchmark list') or definition file (.json)")
        p.add_argument("--cache-dir", default=None, help="cache folder (default: <vlnverse cache>/benchmarks)")
        if name == "info":
            p.add_argument("--json", action="store_true", help="print the figures as JSON")
        else:
            p.add_argument("--split", choices=["val_unseen", "test"], default=None,
                           help="one held-out split (default: both)")
            p.add_argument("--workers", type=int, default=1, help="worker processes generating homes and episodes")
            p.add_argument("--no-progress", action="store_true", help="no progress bars")
        if name == "verify":
            p.add_argument("--train-homes", type=int, default=0, metavar="N",
                           help="also generate the first N training homes and check their fingerprints")
        p.set_defaults(func={"info": _benchmark_info, "build": _benchmark_build, "verify": _benchmark_verify}[name])


def _benchmark_list(args: argparse.Namespace) -> int:
    from .benchmark import load_benchmark, shipped_benchmarks

    for name in shipped_benchmarks():
        bench = load_benchmark(name)
        homes = ", ".join(f"{s} {b - a + 1}" for s, (a, b) in bench.seed_ranges.items())
        print(f"{bench.name:14s} v{bench.version}  {bench.task}, homes: {homes}")
    return 0


def _benchmark_info(args: argparse.Namespace) -> int:
    from .benchmark import load_benchmark

    info = load_benchmark(args.name).info(args.cache_dir)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"{info['name']} v{info['version']} ({info['file']}): task {info['task']}, body {info['body'] or 'the task default'}, "
          f"episode seed {info['episode_seed']}, scene generator v{info['generator_version']}, "
          f"{info['rooms'][0]}-{info['rooms'][1]} rooms")
    if info["description"]:
        print(f"  {info['description']}")
    for split, s in info["splits"].items():
        line = (f"  {split:10s} seeds {s['seeds'][0]}..{s['seeds'][1]}: {s['homes']} homes x {s['episodes_per_home']} "
                f"episodes = {s['episodes']}, {s['fingerprints']} fingerprints")
        if "folder" in s:
            line += f"; {'cached in' if s['cached'] else 'not built yet, will be made in'} {s['folder']}"
        print(line)
    return 0


def _held_out_splits(args: argparse.Namespace) -> list[str]:
    from .benchmark import HELD_OUT

    return [args.split] if args.split else list(HELD_OUT)


def _benchmark_build(args: argparse.Namespace) -> int:
    import time

    from .benchmark import load_benchmark

    ParallelConfig(args.workers).checked()
    bench = load_benchmark(args.name)
    for split in _held_out_splits(args):
        was = bench.cached(split, args.cache_dir)
        t0 = time.perf_counter()
        folder = bench.build(split, cache_dir=args.cache_dir, workers=args.workers, progress=not args.no_progress)
        what = "already built" if was else f"built and checked in {time.perf_counter() - t0:.1f} s"
        print(f"{bench.name} v{bench.version} {split}: {len(bench.seeds(split))} homes, {what}: {folder}")
    return 0


def _benchmark_verify(args: argparse.Namespace) -> int:
    from .benchmark import load_benchmark

    ParallelConfig(args.workers).checked()
    bench = load_benchmark(args.name)
    for split in _held_out_splits(args):
        done = bench.verify(split, cache_dir=args.cache_dir, workers=args.workers, progress=not args.no_progress)
        print(f"{bench.name} v{bench.version} {split}: {done['homes']} homes and their episodes match the "
              f"definition ({done['folder']})")
    if args.train_homes:
        done = bench.verify_train(args.train_homes, workers=args.workers, progress=not args.no_progress)
        print(f"{bench.name} v{bench.version} train: the first {done['homes']} homes match the definition")
    return 0


def _generate(args: argparse.Namespace) -> int:
    from ..core.config import parse_overrides
    from ..sim.api import check_backend
    from .dataset import generate_dataset, simulator_renderer_factory

    check_backend(args.backend)  # e.g. --backend isaac without Isaac Sim: one line, before any work
    render = {k: v for k, v in (("quality", args.quality), ("objects", args.objects)) if v is not None}
    summary = generate_dataset(args.task, args.scenes, args.episodes_per_scene, args.seed, args.out,
                               body=args.body, config=args.config, overrides=parse_overrides(args.overrides),
                               val_seen_fraction=args.val_seen_fraction, default_split=args.default_split,
                               progress=not args.no_progress,
                               renderer_factory=simulator_renderer_factory(backend=args.backend, options=render),
                               scene_root=args.scene_root, plugins=args.plugins, **ParallelConfig.from_args(args).kwargs())
    counts = ", ".join(f"{k}: {v}" for k, v in summary["counts"].items())
    stats = summary["path_length_m"]
    print(f"wrote {summary['total_episodes']} {args.task} episodes to {args.out} ({counts}); "
          f"path length {stats.get('mean', 0):.2f} ± {stats.get('std', 0):.2f} m")
    if summary.get("shortfall"):
        short = summary["shortfall"]
        print(f"short of the request: {summary['total_episodes']} of {summary['requested_episodes']} episodes; "
              f"{len(short)} scene(s) gave fewer (first: {short[0]['scene_id']}: {short[0]['written']} of "
              f"{short[0]['requested']}, {short[0]['reason']}); see 'shortfall' in summary.json")
    fallbacks = sum((summary.get("warnings") or {}).values())
    if fallbacks:
        print(f"warning: {fallbacks} LLM rewrite(s) fell back to the template instruction "
              f"({', '.join(f'{k} {v}' for k, v in summary['warnings'].items())}; see summary.json)")
    return 0


def format_episode(ep) -> str:
    """A few readable lines describing one episode."""
    goal = ep.goals[0]
    lines = [f"{ep.episode_id}  [{ep.task_type}, {ep.split}]  scene {ep.scene_id}",
             f"  start ({ep.start_position[0]:.2f}, {ep.start_position[1]:.2f}) facing "
             f"{math.degrees(ep.start_yaw):.0f}°  →  goal ({goal.position[0]:.2f}, {goal.position[1]:.2f}) "
             f"r={goal.radius:g}" + (f" [{goal.category}]" if goal.category else "")
             + (f" (+{len(ep.goals) - 1} more goals)" if len(ep.goals) > 1 else ""),
             f"  geodesic {ep.geodesic_distance:.2f} m, reference path {len(ep.reference_path)} waypoints"]
    for ins in ep.instructions:
        lines.append(f"  [{ins.style}] {ins.text}")
    if ep.info:
        lines.append(f"  info: {', '.join(sorted(ep.info))}")
    return "\n".join(lines)


def _show(args: argparse.Namespace) -> int:
    from .episode import load_episodes

    episodes = load_episodes(args.path, split=args.split)
    print(f"{len(episodes)} episodes in {args.path}")
    for ep in episodes[:max(args.n, 0)]:
        print(json.dumps(ep.to_dict(), sort_keys=True) if args.json else format_episode(ep))
    return 0


def _export_r2r(args: argparse.Namespace) -> int:
    from .episode import load_episodes
    from .r2r import export_r2r

    episodes = load_episodes(args.path, split=args.split)
    export_r2r(episodes, args.out)
    print(f"exported {len(episodes)} episodes to {args.out} (VLN-CE R2R layout, Y-up)")
    return 0


def _import_r2r(args: argparse.Namespace) -> int:
    from .episode import save_episodes
    from .r2r import import_r2r

    episodes = import_r2r(args.path, split=args.split, task_type=args.task)
    save_episodes(args.out, episodes)
    print(f"imported {len(episodes)} episodes into {args.out}")
    return 0


def _navgraph(args: argparse.Namespace) -> int:
    from ..core.errors import ConfigError
    from .base import load_scene_context
    from .dataset import resolve_scene_paths
    from .navgraph import build_navgraph

    from ..core.config import check_seed

    check_seed(args.seed, "--seed")
    if not (0 < args.spacing <= args.max_edge):
        raise ConfigError(f"got spacing {args.spacing}, max edge {args.max_edge}", field="--spacing/--max-edge",
                          expected="0 < spacing <= max edge")
    paths = resolve_scene_paths(args.scene)
    if len(paths) != 1:
        raise ConfigError(f"selects {len(paths)} scenes", field="scene", expected="exactly one scene")
    ctx = load_scene_context(paths[0], args.body, resolution=args.resolution)
    nav = build_navgraph(ctx.planner, rooms=ctx.desc.rooms, doors=ctx.desc.doors, room_map=ctx.room_map,
                         spacing=args.spacing, max_edge=args.max_edge, seed=args.seed, scene_id=ctx.scene_id)
    nav.save(args.out)
    state = "connected" if nav.is_connected() else "NOT connected"
    print(f"wrote {args.out}: {nav.num_nodes} viewpoints, {nav.graph.number_of_edges()} edges ({state})")
    return 0


def _stats(args: argparse.Namespace) -> int:
    import sys

    from ..core.errors import ConfigError
    from ..core.io import write_json_atomic
    from .episode import load_episodes
    from .instructions.stats import format_stats, instruction_stats

    if args.max_instructions is not None and args.max_instructions < 1:
        raise ConfigError(f"got {args.max_instructions}", field="--max-instructions", expected="an integer >= 1")
    result = {"dataset": str(args.path), "split": args.split, "max_instructions": args.max_instructions,
              "stats": instruction_stats(load_episodes(args.path, split=args.split), args.max_instructions)}
    print(format_stats(result["stats"]))
    if args.baseline:
        base = instruction_stats(load_episodes(args.baseline, split=args.split), args.max_instructions)
        result["baseline"] = {"dataset": str(args.baseline), "stats": base}
        result["ratios"] = {k: round(result["stats"][k] / base[k], 3) if base[k] else None
                            for k in ("vocabulary", "trigrams_per_100", "mean_words")}
        print(f"baseline {args.baseline}:\n{format_stats(base)}")
        print("ratios: " + ", ".join(f"{k} {v}x" for k, v in result["ratios"].items()))
    if args.out:
        result["command"] = "vlnverse data " + " ".join(sys.argv[sys.argv.index("stats"):]) \
            if "stats" in sys.argv else None
        write_json_atomic(args.out, result)
        print(f"wrote {args.out}")
    return 0


def _review(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..core.errors import ConfigError
    from .episode import load_episodes
    from .instructions.review import write_review
    from .scene_roots import root_args, scene_roots

    if args.n < 1:
        raise ConfigError(f"got {args.n}", field="--n", expected="an integer >= 1")
    episodes = load_episodes(args.path, split=args.split)
    if not episodes:
        raise ConfigError(f"'{args.path}' holds no episodes" + (f" of split '{args.split}'" if args.split else ""),
                          field="path", expected="a dataset folder or JSONL file with episodes")
    dataset_dir = Path(args.path) if Path(args.path).is_dir() else Path(args.path).parent
    roots = scene_roots(root_args(args.scene_root), dataset_dir=dataset_dir)
    done = write_review(episodes, args.out, n=args.n, scene_roots=roots, body=args.body)
    print(f"wrote {done['path']}: {done['cards']} instructions of {done['episodes']} episodes")
    return 0


def _tasks(args: argparse.Namespace) -> int:
    from .base import TASKS, load_task_types

    for name in load_task_types():
        doc = (TASKS.get(name).__doc__ or "").strip().splitlines()
        print(f"{name:22s} {doc[0] if doc else ''}")
    return 0
