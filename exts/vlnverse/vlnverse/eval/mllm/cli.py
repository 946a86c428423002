"""``vlnverse cache build``: pre-render the four views at every navigation-graph viewpoint of a split."""
from __future__ import annotations

import argparse
import json


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Register ``cache build``."""
    p = sub.add_parser("cache", help="simulator-free observation cache for graph-mode MLLM agents")
    csub = p.add_subparsers(dest="cache_command", metavar="ACTION")
    csub.required = True
    b = csub.add_parser("build", help="render the four 90-degree views at every navigation-graph viewpoint of "
                                      "the scenes once (then evaluate with backend=viewpoints, no simulator)")
    b.add_argument("--scenes", default="val_unseen", help="split name, 'all', or scene ids/paths (comma-separated)")
    b.add_argument("--out", default=None, help="cache folder (default: $VLNVERSE_VIEW_CACHE or <VLNVERSE_CACHE>/views)")
    b.add_argument("--size", type=int, default=224, help="view width = height in pixels (default 224)")
    b.add_argument("--hfov", type=float, default=90.0, help="horizontal field of view of a view (default 90)")
    b.add_argument("--body", default="r2r_ce", help="agent body preset (camera height; default r2r_ce)")
    b.add_argument("--episodes", default=None, metavar="FILE",
                   help="cache the scenes of this episode JSONL file or folder instead of --scenes")
    from ...scenes.object_meshes import OBJECT_STYLES
    from ...sim.types import RENDER_QUALITIES
    from ..config import VISION_LANGUAGE_OBJECTS  # the cache serves graph-mode MLLM agents: their default

    b.add_argument("--quality", choices=RENDER_QUALITIES, default=None,
                   help="render preset of the views (an eval run's render.quality; default 'default')")
    b.add_argument("--objects", choices=OBJECT_STYLES, default=VISION_LANGUAGE_OBJECTS,
                   help=f"how objects are drawn (an eval run's render.objects; default "
                        f"'{VISION_LANGUAGE_OBJECTS}', what MLLM agents see; 'primitives' for a learned graph "
                        "policy); other settings than the "
                        "simulator's defaults go to the cache's render-<quality>-<objects>/ folder")
    b.add_argument("--no-progress", action="store_true", help="no progress bar")
    from ...tasks.scene_roots import add_scene_root_option

    add_scene_root_option(b, "episodes (and scene ids of --scenes)")
    b.set_defaults(func=_build)


def _build(args: argparse.Namespace) -> int:
    from ...core.errors import ConfigError
    from .cache import build_cache

    if not 16 <= args.size <= 2048:
        raise ConfigError(f"got {args.size}", field="--size", expected="16..2048 pixels")
    summary = build_cache(cache_scenes(args.scenes, args.episodes, args.scene_root), args.out, size=args.size,
                          hfov_deg=args.hfov, body=args.body, progress=not args.no_progress, quality=args.quality,
                          objects=args.objects)
    print(json.dumps({k: summary[k] for k in ("root", "folder", "viewpoints", "rendered") if k in summary}, indent=2))
    return 0


def cache_scenes(scenes: str, episodes: str | None, scene_root: list | None) -> list[str] | str:
    """The scenes to cache: those of ``episodes`` (found by the one scene resolver,
    ``vlnverse.tasks.scene_roots``), else ``scenes`` with scene ids also looked up in ``scene_root``."""
    from pathlib import Path

    from ...core.errors import ConfigError
    from ...scenes.splits import looks_like_path, scene_file
    from ...tasks.episode import load_episodes
    from ...tasks.scene_roots import resolve_episode_scenes, root_args, scene_roots

    roots = root_args(scene_root)
    if episodes is not None:
        if not Path(episodes).exists():
            raise ConfigError("episode file or folder not found", file=episodes, field="--episodes")
        source = Path(episodes)
        eps = resolve_episode_scenes(load_episodes(source), scene_roots(roots, source if source.is_dir() else source.parent))
        return list(dict.fromkeys(e.scene_path for e in eps))
    if not roots:
        return scenes
    out = []
    for item in (part.strip() for part in scenes.split(",") if part.strip()):
        found = None if looks_like_path(item) else next((f for r in roots if (f := scene_file(item, r))), None)
        out.append(str(found) if found is not None else item)
    return out
