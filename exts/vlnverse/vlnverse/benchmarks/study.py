"""``vlnverse bench study``: what a participant's browser gets from ``vlnverse study serve``.

A WebSocket client (the page's protocol) connects to the study app on localhost, consents,
starts an episode and holds forward + left (a circle, so walls rarely stop it) for
``DRIVE_S`` seconds. Figures, best of ``--repeat`` drives: ``frames_per_s`` — 224×224 JPEG
frames received by the client per second while a key is held; ``log_interval_ms`` — p50 / p99
of the time between consecutive 50 ms log rows (server clock); ``log_jitter_ms`` — p50 / p99 of
|interval − 50 ms|; ``log_within_10ms`` — the share of intervals within 50 ± 10 ms. The process (server, simulator and client) is pinned to one CPU core when
the OS allows it (``cores``). Episodes: one ``fine_grained`` episode on the first shipped
``test`` scene (``--seed`` seeds it).
"""
from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time

import numpy as np

DRIVE_S = 5.0


async def _drive(url: str, pid: str, seconds: float) -> int:
    import websockets

    async with websockets.connect(url.replace("http", "ws") + f"/ws?pid={pid}", max_size=None) as ws:
        json.loads(await ws.recv())  # welcome
        await ws.send(json.dumps({"type": "consent"}))
        while True:
            msg = await ws.recv()
            if isinstance(msg, str) and json.loads(msg)["type"] == "episode":
                break
        await ws.send(json.dumps({"type": "start"}))
        while True:
            msg = await ws.recv()
            if isinstance(msg, str) and json.loads(msg)["type"] == "ready":
                break
        await ws.send(json.dumps({"type": "keys", "keys": ["forward", "left"]}))
        frames, t_end = 0, time.perf_counter() + seconds
        while (left := t_end - time.perf_counter()) > 0:
            try:
                msg = await asyncio.wait_for(ws.recv(), timeout=left)
            except asyncio.TimeoutError:
                break
            frames += isinstance(msg, bytes)
        await ws.send(json.dumps({"type": "keys", "keys": []}))
        await ws.send(json.dumps({"type": "finish"}))
        return frames


def run(args) -> dict:
    """Measure the figures listed in the module docstring; returns a JSON-ready dict."""
    from tqdm import tqdm

    from vlnverse.scenes.splits import resolve_scenes
    from vlnverse.study.assign import StudyStore
    from vlnverse.study.config import StudyConfig
    from vlnverse.study.server import BackgroundServer, create_app
    from vlnverse.tasks.base import TASKS, load_scene_context, load_task_config, load_task_types
    from vlnverse.tasks.episode import save_episodes

    cores = None
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
        cores = len(os.sched_getaffinity(0))
    load_task_types()
    cfg = load_task_config("fine_grained")
    scene = resolve_scenes("test")[0]
    ctx = load_scene_context(scene, cfg.body, cfg.map_resolution)
    repeat = max(1, args.repeat)
    episodes = TASKS.get("fine_grained")(cfg).generate(ctx, np.random.default_rng(args.seed), 1, "bench")
    best = None
    with tempfile.TemporaryDirectory(prefix="vlnverse-bench-study-") as tmp:
        save_episodes(f"{tmp}/episodes.jsonl", episodes)
        study = StudyConfig(episodes_per_participant=1, seed=args.seed)
        store = StudyStore(f"{tmp}/study", study, f"{tmp}/episodes.jsonl")
        app = create_app(store)
        with BackgroundServer(app) as url:
            for i in tqdm(range(repeat), desc="bench study", unit="drive"):
                pid = f"bench{i}"
                frames = asyncio.run(_drive(url, pid, DRIVE_S))
                ticks = np.array(app.state.server.drivers[pid].ticks)
                steady = ticks[ticks >= ticks[0] + 0.2]  # skip the first rows (keys arriving)
                interval = np.diff(steady) * 1000.0
                fig = {"frames_per_s": round(frames / DRIVE_S, 1),
                       "log_interval_ms": {"p50": round(float(np.percentile(interval, 50)), 2),
                                           "p99": round(float(np.percentile(interval, 99)), 2)},
                       "log_jitter_ms": {"p50": round(float(np.percentile(abs(interval - 50.0), 50)), 2),
                                         "p99": round(float(np.percentile(abs(interval - 50.0), 99)), 2)},
                       "log_within_10ms": round(float(np.mean(abs(interval - 50.0) <= 10.0)), 3),
                       "rows": int(len(ticks))}
                if best is None or fig["frames_per_s"] > best["frames_per_s"]:
                    best = fig
    return {"scene": scene.name, "resolution": f"{study.image_size}x{study.image_size}", "drive_s": DRIVE_S,
            "cores": cores, "repeats": repeat, **best}
