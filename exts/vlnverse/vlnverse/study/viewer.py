"""``vlnverse view RUN_DIR [RUN_DIR ...]``: an episode visualizer for evaluation runs and study sessions.

A run folder is either an evaluation output (``episodes.jsonl`` records, ``summary.json``,
``input_episodes.jsonl``, report ``frames/``) or a study folder (``study.json``; its CSVs are
scored with :func:`vlnverse.study.score.score_records`). The page lets one choose run, task,
split and episode, then step through it: the first-person view at that step (the run's report
frame when one was saved there, else rendered by the simulator at the recorded pose), the
top-down map with the reference and agent paths (``vlnverse.scenes.render_map``), the action,
collisions, the agent's outputs (an MLLM's prompt, images and raw reply, from
``agent_outputs``), the first step where the agent left the reference path (farther than
``--off-path`` metres from it) and the episode's metrics; a second run can be shown beside it
on the same episode. Simulator and map work run on one worker thread (GL contexts are
per thread); pictures are cached.
"""
from __future__ import annotations

import io
import json
import math
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from fastapi import Request  # module level: FastAPI resolves endpoint annotations from here

from ..core.errors import ConfigError
from .config import recorded_render  # noqa: F401  (the render settings a run or study folder recorded)

#: Default distance (m) from the reference path beyond which the agent has left it.
OFF_PATH_M = 1.0
DECISIONS = ("STOP", "FOUND", "NOT_FOUND")


def distance_to_polyline(points: np.ndarray, polyline: np.ndarray) -> np.ndarray:
    """Distance (m) of each point (N, 2) to the nearest point of the polyline (M, 2)."""
    p = np.asarray(points, dtype=float)[:, None, :2]
    line = np.asarray(polyline, dtype=float)[:, :2]
    if len(line) == 1:
        return np.linalg.norm(p[:, 0] - line[0], axis=1)
    a, b = line[:-1][None], line[1:][None]
    ab = b - a
    t = np.clip(np.sum((p - a) * ab, axis=2) / np.maximum(np.sum(ab * ab, axis=2), 1e-12), 0.0, 1.0)
    return np.min(np.linalg.norm(p - (a + t[..., None] * ab), axis=2), axis=1)


def timeline(record: dict) -> list[dict]:
    """One entry per step of a record: the pose after it, the action, whether it collided and
    the agent's output for it. Eval records start with the start pose (action ``None``); study
    records have one entry per logged 50 ms row."""
    traj = record["trajectory"]
    outputs = record.get("agent_outputs") or []
    actions = record.get("actions") or []
    per_step = isinstance(outputs, list) and len(outputs) == len(actions) and len(actions) > 0
    if record.get("agent") == "human":
        pitch = record.get("pitch") or [0.0] * len(traj)
        hit = {c["step"] for c in record.get("collisions", [])}
        return [{"pose": [*traj[i][:3], pitch[i]], "action": actions[i], "collided": i in hit,
                 "t": (record.get("times") or [None] * len(traj))[i]} for i in range(len(traj))]
    hit = {c["step"] for c in record.get("collisions", [])}
    frames = {f["index"]: f["file"] for f in record.get("frames") or []}
    steps = [{"pose": [*traj[0][:3], 0.0], "action": None, "collided": False, "frame": frames.get(0)}]
    moves = 0
    for j, action in enumerate(actions):
        moved = action is not None and action not in DECISIONS and not (isinstance(action, dict) and action.get("type") == "SelectFrame")
        if moved and moves + 1 < len(traj):
            moves += 1
        entry = {"pose": [*traj[moves][:3], 0.0], "action": action, "collided": j in hit,
                 "frame": frames.get(moves) if moved else None}
        if per_step:
            entry["output"] = outputs[j]
        steps.append(entry)
    return steps


def metric_columns(metrics: dict) -> list[str]:
    """The metric columns of a record in one order for every run kind (agent or human): the
    evaluation table's columns, then its hidden ones, then any task-specific metric by name."""
    from ..run.summary import TABLE_COLUMNS, TABLE_HIDDEN

    base = [*TABLE_COLUMNS, *TABLE_HIDDEN]
    extra = sorted(k for k, v in metrics.items() if k not in base and (v is None or isinstance(v, (int, float)))
                   and not isinstance(v, bool))
    return base + extra


def path_progress(steps: list[dict], reference: Any) -> tuple[list[float], list[float]]:
    """Per step: the distance travelled so far (m) and the progress along the reference path (m of
    the reference up to the point nearest the pose). Steps of runs of any kind (an agent's
    discrete steps, a human's 50 ms ticks) are aligned on these, not on their index."""
    xy = np.array([s["pose"][:2] for s in steps], dtype=float).reshape(-1, 2)
    travelled = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(xy, axis=0), axis=1))] if len(xy) else np.zeros(0)
    if reference is None or len(reference) == 0 or not len(xy):
        return travelled.round(4).tolist(), [None] * len(xy)
    line = np.asarray(reference, dtype=float)[:, :2]
    if len(line) == 1:
        return travelled.round(4).tolist(), [0.0] * len(xy)
    a, b = line[:-1][None], line[1:][None]
    ab = b - a
    seg = np.linalg.norm(ab[0], axis=1)
    t = np.clip(np.sum((xy[:, None] - a) * ab, axis=2) / np.maximum(np.sum(ab * ab, axis=2), 1e-12), 0.0, 1.0)
    d = np.linalg.norm(xy[:, None] - (a + t[..., None] * ab), axis=2)
    nearest = np.argmin(d, axis=1)
    start = np.r_[0.0, np.cumsum(seg)][:-1]
    progress = start[nearest] + t[np.arange(len(xy)), nearest] * seg[nearest]
    return travelled.round(4).tolist(), progress.round(4).tolist()


def left_reference_step(steps: list[dict], reference: Any, threshold: float) -> int | None:
    """Index of the first step whose pose is farther than ``threshold`` from the reference path."""
    if not steps or reference is None or len(reference) == 0:
        return None
    d = distance_to_polyline(np.array([s["pose"][:2] for s in steps]), np.asarray(reference))
    off = np.flatnonzero(d > threshold)
    return int(off[0]) if len(off) else None


class Run:
    """One run folder: its records (by key), the episodes they came from, its summary, and the
    render settings its views are drawn with (``recorded_render``)."""

    def __init__(self, index: int, path: str | Path, scene_root: Any = None):
        from ..tasks.episode import load_episodes
        from ..tasks.scene_roots import SceneResolver, recorded_scene_roots

        self.index, self.path = index, Path(path)
        if not self.path.is_dir():
            raise ConfigError("run folder not found", file=self.path, expected="an eval output or study folder")
        self.name = self.path.name
        # the one scene resolver: --scene-root, the roots the run recorded, the run folder, the shipped scenes
        self.resolve = SceneResolver(recorded_scene_roots(self.path, scene_root))
        self.contexts: dict[str, Any] = {}  # scene file -> (SceneContext, body): loaded once per run
        if (self.path / "study.json").is_file():
            from .score import score_records

            self.kind = "study"
            records, self.skipped = score_records(self.path, scene_root)
            self.records = {f"{r['participant']}/{r['episode_id']}": r for r in records}
            episodes_file = self.path / "episodes.jsonl"
            self.summary = None
        elif (self.path / "episodes.jsonl").is_file():
            from ..run.records import read_finished

            self.kind, self.skipped = "eval", None
            self.records = {r["episode_id"]: r for r in read_finished(self.path / "episodes.jsonl")}
            episodes_file = self.path / "input_episodes.jsonl"
            summary = self.path / "summary.json"
            self.summary = json.loads(summary.read_text(encoding="utf-8")) if summary.is_file() else None
        else:
            raise ConfigError("not a run folder", file=self.path,
                              expected="episodes.jsonl (vlnverse eval) or study.json (vlnverse study serve)")
        self.episodes = {e.episode_id: e for e in load_episodes(episodes_file)} if episodes_file.is_file() else {}
        self.render = recorded_render(self.path)

    def listing(self) -> dict:
        """What the page's pickers need."""
        eps = []
        for key, r in self.records.items():
            eps.append({"key": key, "episode_id": r["episode_id"], "task_type": r["task_type"], "split": r["split"],
                        "participant": r.get("participant"), "termination": r["termination"],
                        "SR": r["metrics"].get("SR")})
        agent = (self.summary or {}).get("run", {}).get("agent") if self.kind == "eval" else "human"
        return {"index": self.index, "name": self.name, "path": str(self.path), "kind": self.kind, "agent": agent,
                "episodes": eps, "skipped": self.skipped}


class Viewer:
    """The runs and the rendering worker behind the viewer app."""

    def __init__(self, run_dirs: list[str | Path], *, off_path: float = OFF_PATH_M, scene_root: Any = None):
        self.runs = [Run(i, p, scene_root) for i, p in enumerate(run_dirs)]
        self.off_path = off_path
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="viewer-render")
        self._sims: dict[int, tuple[str, Any]] = {}  # run index -> (scene file, simulator)
        self._pictures: dict[tuple, bytes] = {}

    def run(self, index: int) -> Run:
        """Run ``index`` (``KeyError`` when there is none)."""
        if not 0 <= index < len(self.runs):
            raise KeyError(f"no run {index}: the viewer has runs 0..{len(self.runs) - 1}")
        return self.runs[index]

    def record(self, index: int, key: str) -> tuple[Run, dict]:
        """Run and record of an episode (``KeyError`` naming what is unknown)."""
        run = self.run(index)
        if key not in run.records:
            raise KeyError(f"run {run.name} has no episode '{key}'")
        return run, run.records[key]

    def episode_view(self, index: int, key: str, off_path: float | None = None) -> dict:
        """The record with its step timeline, the first off-reference step and file URLs."""
        run, record = self.record(index, key)
        steps = timeline(record)
        threshold = self.off_path if off_path is None else off_path
        for s in steps:
            if s.get("frame"):
                s["frame"] = f"/runs/{index}/files/{s['frame']}"
        outputs = record.get("agent_outputs")
        travelled, progress = path_progress(steps, record.get("reference_path"))
        for s, d, p in zip(steps, travelled, progress):
            s["travelled"], s["progress"] = d, p
        return {"run": run.name, "metric_columns": metric_columns(record["metrics"]), "kind": run.kind, "key": key, "episode_id": record["episode_id"],
                "task_type": record["task_type"], "split": record["split"], "instruction": record.get("instruction"),
                "metrics": record["metrics"], "termination": record["termination"], "failure": record.get("failure"),
                "participant": record.get("participant"), "steps": steps, "off_path_m": threshold,
                "left_reference_step": left_reference_step(steps, record.get("reference_path"), threshold),
                "agent_outputs": None if steps and "output" in steps[-1] else outputs,
                "collisions": len(record.get("collisions", [])), "has_scene": record["episode_id"] in run.episodes}

    # ------------------------------------------------------------------ pictures (worker thread)

    def _context(self, run: Run, episode_id: str):
        from ..sim.body import load_body
        from ..tasks.base import load_scene_context, load_task_config

        episode = run.episodes.get(episode_id)
        if episode is None:
            raise KeyError(f"run {run.name} does not hold episode '{episode_id}' in its input episodes")
        scene = str(run.resolve(episode))
        if scene not in run.contexts:
            cfg = load_task_config(episode.task_type)
            body = load_body(cfg.body)
            run.contexts[scene] = (load_scene_context(scene, body, cfg.map_resolution), body)
        ctx, body = run.contexts[scene]
        return run.resolve.resolved(episode), ctx, body

    def _map_base(self, index: int, key: str) -> dict:
        """The episode's map with what does not change between steps (reference, whole path, start,
        goals; legend entries for the rest), rendered once per episode, and its pixel transform."""
        from ..scenes.render_map import render_map_layers

        cache_key = ("map-base", index, key)
        if cache_key not in self._pictures:
            run, record = self.record(index, key)
            _, ctx, _ = self._context(run, record["episode_id"])
            steps = timeline(record)
            xy = np.array([s["pose"][:2] for s in steps], dtype=float)
            nowhere = np.array([[np.nan, np.nan]])
            markers = [{"xy": xy[0], "color": "tab:green", "label": "start", "size": 50},
                       {"xy": np.asarray(record["goals"])[:, :2], "color": "tab:red", "marker": "*", "label": "goal",
                        "size": 90},
                       {"xy": nowhere, "color": "black", "marker": "x", "label": "collision", "size": 40},
                       {"xy": nowhere, "color": "magenta", "marker": "D", "label": "left the reference", "size": 45},
                       {"xy": nowhere, "color": "tab:orange", "marker": "o", "label": "agent now", "size": 110}]
            paths = [{"xy": np.asarray(record["reference_path"])[:, :2], "color": "tab:blue", "label": "reference"},
                     {"xy": xy, "color": "#f5c08a", "label": "agent (whole)", "linewidth": 1.2},
                     {"xy": nowhere, "color": "tab:orange", "label": "agent", "linewidth": 2.5}]
            image, to_pixels = render_map_layers(ctx.desc, ctx.maps, paths=paths, markers=markers, dpi=90)
            self._pictures[cache_key] = {
                "image": image, "px": to_pixels(xy), "collided": [s["collided"] for s in steps],
                "off": left_reference_step(steps, record.get("reference_path"), self.off_path), "scale": 90 / 72}
        return self._pictures[cache_key]

    def _map_png(self, index: int, key: str, step: int) -> bytes:
        """The map at ``step``: the cached base with the path so far, collisions so far, the point
        where the agent left the reference and its position drawn on it (milliseconds a step)."""
        from PIL import Image, ImageDraw

        base = self._map_base(index, key)
        px, scale = base["px"], base["scale"]
        step = max(0, min(step, len(px) - 1))
        image = Image.fromarray(base["image"])
        draw = ImageDraw.Draw(image)
        if step > 0:
            draw.line([tuple(p) for p in px[: step + 1]], fill=(255, 127, 14), width=max(1, round(2.5 * scale)),
                      joint="curve")
        r = 3.2 * scale
        for i in range(step + 1):
            if base["collided"][i]:
                x, y = px[i]
                draw.line([(x - r, y - r), (x + r, y + r)], fill=(0, 0, 0), width=2)
                draw.line([(x - r, y + r), (x + r, y - r)], fill=(0, 0, 0), width=2)
        if base["off"] is not None and base["off"] <= step:
            x, y = px[base["off"]]
            d = 3.8 * scale
            draw.polygon([(x, y - d), (x + d, y), (x, y + d), (x - d, y)], fill=(255, 0, 255))
        x, y = px[step]
        r = 0.5 * math.sqrt(110) * scale
        draw.ellipse([x - r, y - r, x + r, y + r], fill=(255, 127, 14), outline=(120, 60, 0))
        buf = io.BytesIO()
        image.save(buf, "PNG", compress_level=1)
        return buf.getvalue()

    def _view_jpeg(self, index: int, key: str, step: int) -> bytes:
        from ..sim import make_simulator
        from ..sim.sensors import CameraSpec
        from ..sim.types import AgentPose
        from .session import encode_jpeg

        run, record = self.record(index, key)
        episode, ctx, body = self._context(run, record["episode_id"])
        steps = timeline(record)
        x, y, yaw, pitch = steps[max(0, min(step, len(steps) - 1))]["pose"]
        spec = CameraSpec("view", "rgb", 224, 224, 90.0)
        scene = str(episode.scene_path)
        held = self._sims.get(run.index)  # one simulator (renderer) per run, kept while its scene is shown
        if held is None or held[0] != scene:
            if held is not None:
                held[1].close()
            self._sims[run.index] = held = (scene, make_simulator(ctx.desc, body, sensors=[],
                                                                          **run.render.sim_options()))
        image = held[1].render_at(AgentPose(x, y, yaw, pitch), spec)
        return encode_jpeg(image.get("view", next(iter(image.values()))), 85)

    def picture(self, kind: str, index: int, key: str, step: int) -> bytes:
        """A map PNG or a first-person JPEG of one step (cached; made on the worker thread)."""
        cache_key = (kind, index, key, step)
        if cache_key not in self._pictures:
            fn = self._map_png if kind == "map" else self._view_jpeg
            self._pictures[cache_key] = self._pool.submit(fn, index, key, step).result()
            if len(self._pictures) > 512:
                self._pictures.pop(next(iter(self._pictures)))
        return self._pictures[cache_key]

    def close(self) -> None:
        """Close the simulators and the worker."""
        def close_all():
            for _, sim in self._sims.values():
                sim.close()
            self._sims.clear()

        self._pool.submit(close_all).result()
        self._pool.shutdown()


def create_viewer_app(viewer: Viewer) -> Any:
    """The FastAPI app of the visualizer."""
    import contextlib

    from fastapi import FastAPI, HTTPException
    from fastapi.responses import FileResponse, JSONResponse, Response
    from fastapi.staticfiles import StaticFiles

    from .server import STATIC, add_error_pages

    @contextlib.asynccontextmanager
    async def lifespan(app):  # noqa: ANN001
        yield
        viewer.close()

    app = FastAPI(title="vlnverse view", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    add_error_pages(app)

    def _lookup(fn, *args):
        from ..core.errors import VLNVerseError

        try:
            return fn(*args)
        except KeyError as exc:
            raise HTTPException(404, exc.args[0] if exc.args else str(exc)) from None
        except VLNVerseError as exc:  # e.g. a scene in no root: one line naming it and the roots searched
            raise HTTPException(404, str(exc)) from None

    @app.get("/")
    async def index():
        return FileResponse(STATIC / "viewer.html")

    @app.get("/run/{index}/{key:path}")
    def episode_page(index: int, key: str):
        _lookup(viewer.record, index, key)
        return FileResponse(STATIC / "viewer.html")

    @app.get("/api/runs")
    def runs():
        return JSONResponse([r.listing() for r in viewer.runs])

    @app.get("/api/runs/{index}/episode")
    def episode(index: int, key: str, off_path: float | None = None):
        return JSONResponse(json.loads(json.dumps(_lookup(viewer.episode_view, index, key, off_path), default=str)))

    @app.get("/api/runs/{index}/map.png")
    def map_png(index: int, key: str, step: int = 0):
        return Response(_lookup(viewer.picture, "map", index, key, step), media_type="image/png")

    @app.get("/api/runs/{index}/view.jpg")
    def view_jpg(index: int, key: str, step: int = 0):
        return Response(_lookup(viewer.picture, "view", index, key, step), media_type="image/jpeg")

    @app.get("/runs/{index}/files/{path:path}")
    def run_file(index: int, path: str, request: Request):
        run = _lookup(viewer.run, index)
        target = (run.path / path).resolve()
        if run.path.resolve() not in target.parents or not target.is_file():
            raise HTTPException(404, f"run {run.name} has no file '{path}'")
        return FileResponse(target)

    return app


def serve_viewer(run_dirs: list[str], host: str = "127.0.0.1", port: int = 8766, scene_root: Any = None) -> None:
    """Load the runs and serve the visualizer until interrupted (prints its URL)."""
    import uvicorn

    viewer = Viewer(run_dirs, scene_root=scene_root)
    total = sum(len(r.records) for r in viewer.runs)
    shown = "localhost" if host in ("127.0.0.1", "0.0.0.0") else host
    print(f"vlnverse view: {len(viewer.runs)} run(s), {total} episodes\n"
          f"open http://{shown}:{port}/ in a browser (Ctrl+C stops)", flush=True)
    uvicorn.run(create_viewer_app(viewer), host=host, port=port, log_level="warning")
