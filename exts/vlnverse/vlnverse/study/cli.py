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
    s.add_argument("--port", type=int, default=8765, help="port to listen on (0: any free one, printed)")
    s.add_argument("--token", default=None, help="experimenter token for /experimenter (default: a new random one, "
                                                 "printed; or $VLNVERSE_STUDY_TOKEN)")
    s.add_argument("--certfile", default=None, help="serve HTTPS with this PEM certificate (with --keyfile)")
    s.add_argument("--keyfile", default=None, help="the certificate's PEM private key")
    s.add_argument("--allow-origin", action="append", default=[], metavar="URL",
                   help="another origin participants' pages may connect from, e.g. a reverse proxy's "
                        "https://study.lab.example (repeatable; the server's own is always allowed)")
    s.add_argument("--new-version", action="store_true",
                   help="the folder's study had other episodes: keep it under DIR/versions/vN and start a new version")
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
    """Check everything (config, TLS files, the address, the folder) before printing or writing,
    prepare every home, then serve while holding the folder."""
    import os

    require_web_stack()
    from .assign import open_study
    from .config import load_study_config
    from .server import bind_socket, check_tls, serve, shown_host
    from .session import prepare_homes

    config = load_study_config(args.config)
    check_tls(args.certfile, args.keyfile)
    sock = bind_socket(args.host, args.port)
    try:
        scheme = "https" if args.certfile else "http"
        holder = f"study server at {scheme}://{shown_host(args.host)}:{sock.getsockname()[1]}"
        with open_study(args.out, config, args.episodes, scene_root=args.scene_root, new_version=args.new_version,
                        holder=holder, prepare=lambda store: prepare_homes(store, progress=_progress)) as store:
            serve(store, args.host, token=args.token or os.environ.get("VLNVERSE_STUDY_TOKEN") or None, sock=sock,
                  certfile=args.certfile, keyfile=args.keyfile, allowed_origins=args.allow_origin)
    finally:
        sock.close()
    return 0


def _progress(line: str) -> None:
    print(line, flush=True)


def _score(args: argparse.Namespace) -> int:
    from .score import score_study

    score_study(args.dir, json_path=args.json, scene_root=args.scene_root)
    return 0


def _view(args: argparse.Namespace) -> int:
    require_web_stack()
    from .viewer import serve_viewer

    serve_viewer(args.runs, args.host, args.port, scene_root=args.scene_root)
    return 0
