"""CLI: ``vlnverse study serve|score`` and ``vlnverse view``."""
from __future__ import annotations

import argparse


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Register ``study`` (serve, score) and ``view``."""
    from ..tasks.scene_roots import add_scene_root_option

    p = sub.add_parser("study", help="human study in the browser: serve the driving app, score the recorded sessions")
    study = p.add_subparsers(dest="study_command", metavar="ACTION")
    study.required = True
    s = study.add_parser("serve", help="start the study web app (participants drive with the keyboard)")
    s.add_argument("--episodes", default=None, help="episode JSONL file or folder (needed for a new study folder)")
    s.add_argument("--out", required=True, help="study folder (assignments, per-episode CSV logs)")
    s.add_argument("--config", default=None, help="study YAML (consent text, episodes per participant, ...)")
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0 for a lab server)")
    s.add_argument("--port", type=int, default=8765)
    s.add_argument("--token", default=None, help="experimenter token for /experimenter (default: a new random one, "
                                                 "printed; or $VLNVERSE_STUDY_TOKEN)")
    add_scene_root_option(s, "study's episodes")
    s.set_defaults(func=_serve)
    c = study.add_parser("score", help="score the recorded trajectories: the human row per task")
    c.add_argument("dir", help="study folder written by 'study serve'")
    c.add_argument("--json", default=None, help="also write the summary here (default DIR/summary.json)")
    add_scene_root_option(c, "study's episodes")
    c.set_defaults(func=_score)

    v = sub.add_parser("view", help="episode visualizer for evaluation runs and study sessions (web app)")
    v.add_argument("runs", nargs="+", metavar="RUN_DIR", help="eval output folders and/or study folders")
    v.add_argument("--host", default="127.0.0.1")
    v.add_argument("--port", type=int, default=8766)
    add_scene_root_option(v, "runs' episodes")
    v.set_defaults(func=_view)


def require_web_stack() -> None:
    """Raise a one-line error when the web packages of the ``study`` extra are missing."""
    import importlib.util

    from ..core.errors import VLNVerseError

    missing = [m for m in ("fastapi", "uvicorn", "websockets") if importlib.util.find_spec(m) is None]
    if missing:
        raise VLNVerseError(f"{', '.join(missing)} not installed: pip install 'vlnverse[study]'")


def _serve(args: argparse.Namespace) -> int:
    require_web_stack()
    from .assign import StudyStore
    from .config import load_study_config
    from .server import serve

    store = StudyStore(args.out, load_study_config(args.config), args.episodes, scene_root=args.scene_root)
    import os

    serve(store, args.host, args.port, token=args.token or os.environ.get("VLNVERSE_STUDY_TOKEN") or None)
    return 0


def _score(args: argparse.Namespace) -> int:
    from .score import score_study

    score_study(args.dir, json_path=args.json, scene_root=args.scene_root)
    return 0


def _view(args: argparse.Namespace) -> int:
    require_web_stack()
    from .viewer import serve_viewer

    serve_viewer(args.runs, args.host, args.port, scene_root=args.scene_root)
    return 0
