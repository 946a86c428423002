"""``vlnverse bench study``: what participants' browsers get from ``vlnverse study serve``, and how
steady the 50 ms log is under load.

Two WebSocket clients (the page's protocol) connect to the study app on localhost at once,
say hello, consent (the session secret then goes with every message), start an episode and
drive for ``DRIVE_S`` seconds, in two phases: ``circle`` (forward + left, so walls rarely stop them) and
``push`` (forward from a start turned to face the nearest
obstacle, so they push into furniture most of the time). Figures per phase, both participants
pooled: ``frames_per_s`` (mean and min over participants) — 224×224 JPEG frames received per
second while a key is held; ``log_interval_ms`` — p50 / p99 of the time between consecutive log
rows (server clock); ``log_jitter_ms`` — p50 / p99 of |interval − 50 ms|; ``log_within_10ms`` — the
share of intervals within 50 ± 10 ms; ``t_drift_ms`` — the largest gap between a row's ``t`` and
its wall time (both from the episode's first row: ``t`` is measured, so it stays near 0);
``contact_rows`` — the share of rows with contact. ``viewer_step_ms``: ``vlnverse view`` on the
circle phase's study folder, the time to make a step's view and map (p50 / max of 10 new steps,
and the episode's first picture). The process (server, simulators and clients)
is pinned to one CPU core when the OS allows it (``cores``: the cores it ran on). Episodes: ``fine_grained``
on the first shipped ``test`` scene (``--seed`` seeds them).
"""
from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time

import numpy as np

DRIVE_S = 5.0
PARTICIPANTS = 2
#: How long a client waits for the server's ``episode_end`` after ``finish`` (s); it only ends a hung run.
END_TIMEOUT_S = 60.0


def _is_end(msg) -> bool:
    return isinstance(msg, str) and json.loads(msg).get("type") == "episode_end"


async def _await_end(ws, where: str, timeout: float = END_TIMEOUT_S) -> None:
    """Wait for the server's ``episode_end`` (the page waits for it too): the study writes the
    episode's end record, and closes its CSV, before sending it, so the folder the bench reads
    next is complete. ``where`` (the end record's path) names it in the error when none comes."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while (left := deadline - loop.time()) > 0:
        try:
            if _is_end(await asyncio.wait_for(ws.recv(), timeout=left)):
                return
        except asyncio.TimeoutError:
            break
    from vlnverse.core.errors import VLNVerseError

    raise VLNVerseError(f"{where}: no episode_end from the study server within {timeout:g} s of 'finish' "
                        "(the episode's end record was not written)")


async def _drive(url: str, pid: str, seconds: float, keys: list[str], end_record: str) -> int:
    import websockets

    async with websockets.connect(url.replace("http", "ws") + "/ws", max_size=None) as ws:
        await ws.send(json.dumps({"type": "hello", "pid": pid}))
        json.loads(await ws.recv())  # welcome
        await ws.send(json.dumps({"type": "consent"}))
        secret = None
        while True:
            msg = await ws.recv()
            kind = json.loads(msg)["type"] if isinstance(msg, str) else None
            if kind == "session":  # every later message carries the session secret
                secret = json.loads(msg)["secret"]
            if kind == "episode":
                break
        send = lambda obj: ws.send(json.dumps({**obj, "secret": secret}))  # noqa: E731
        await send({"type": "start"})
        while True:
            msg = await ws.recv()
            if isinstance(msg, str) and json.loads(msg)["type"] == "ready":
                break
        await send({"type": "keys", "keys": keys})
        frames, ended, t_end = 0, False, time.perf_counter() + seconds
        while (left := t_end - time.perf_counter()) > 0:
            try:
                msg = await asyncio.wait_for(ws.recv(), timeout=left)
            except asyncio.TimeoutError:
                break
            frames += isinstance(msg, bytes)
            ended |= _is_end(msg)  # the episode ended while driving (e.g. a Strict failure)
        await send({"type": "keys", "keys": []})
        await send({"type": "finish"})
        if not ended:  # hanging up now would leave the end record to the driver thread, unwaited
            await _await_end(ws, end_record)
        return frames


def _facing_obstacle(ctx, body, episode):
    """``episode`` turned to face the obstacle its start is nearest to (the earliest contact when
    driving straight from the start, of 16 headings)."""
    import dataclasses
    import math

    from vlnverse.sim import make_simulator
    from vlnverse.sim.types import AgentPose, VelocityAction

    sim = make_simulator(ctx.desc, body, sensors=[])
    best = (99, episode.start_yaw)
    try:
        for k in range(16):
            yaw = k * math.tau / 16
            sim.reset(AgentPose(float(episode.start_position[0]), float(episode.start_position[1]), yaw))
            for i in range(40):
                out = sim.step(VelocityAction(0.5, 0.0, 0.05))
                if (out[1] if isinstance(out, tuple) else out).collided:
                    best = min(best, (i, yaw))
                    break
    finally:
        sim.close()
    return dataclasses.replace(episode, episode_id=f"{episode.episode_id}-push", start_yaw=float(best[1]))


def _phase(tmp: str, name: str, episode, seed: int, keys: list[str]) -> dict:
    from vlnverse.study.assign import StudyStore
    from vlnverse.study.config import StudyConfig
    from vlnverse.study.log import read_rows, safe_name
    from vlnverse.study.server import BackgroundServer, create_app
    from vlnverse.tasks.episode import save_episodes

    save_episodes(f"{tmp}/{name}.jsonl", [episode])
    store = StudyStore(f"{tmp}/{name}", StudyConfig(episodes_per_participant=1, seed=seed), f"{tmp}/{name}.jsonl")
    app = create_app(store)
    pids = [f"{name}{i}" for i in range(PARTICIPANTS)]

    async def both(url):
        return await asyncio.gather(*(_drive(url, pid, DRIVE_S, keys,
                                             str(store.folder(pid) / f"{safe_name(episode.episode_id)}.json"))
                                      for pid in pids))

    with BackgroundServer(app) as url:
        frames = asyncio.run(both(url))
        intervals, drift, rows_all = [], [], []
        for pid in pids:
            ticks = np.array(app.state.server.drivers[pid].ticks)
            steady = ticks[ticks >= ticks[0] + 0.2]  # skip the first rows (keys arriving)
            intervals.append(np.diff(steady) * 1000.0)
            rows = read_rows(store.folder(pid) / f"{safe_name(episode.episode_id)}.csv", strict=True)
            rows_all += rows
            drift.append(max(abs((r.t - rows[0].t) - (r.wall_time - rows[0].wall_time)) for r in rows))
    interval = np.concatenate(intervals)
    fps = [f / DRIVE_S for f in frames]
    return {"frames_per_s": {"mean": round(float(np.mean(fps)), 1), "min": round(float(min(fps)), 1)},
            "log_interval_ms": {"p50": round(float(np.percentile(interval, 50)), 2),
                                "p99": round(float(np.percentile(interval, 99)), 2)},
            "log_jitter_ms": {"p50": round(float(np.percentile(abs(interval - 50.0), 50)), 2),
                              "p99": round(float(np.percentile(abs(interval - 50.0), 99)), 2)},
            "log_within_10ms": round(float(np.mean(abs(interval - 50.0) <= 10.0)), 3),
            "t_drift_ms": round(1000 * float(max(drift)), 1),
            "contact_rows": round(float(np.mean([r.collided for r in rows_all])), 3),
            "rows": int(len(interval) + len(intervals))}


def _first_record(run) -> str:
    """The key of a run's first record; a run with none is one line naming the folder and what
    the scoring skipped (episodes not ended, malformed logs and why)."""
    if run.records:
        return next(iter(run.records))
    from vlnverse.core.errors import VLNVerseError

    skipped = run.skipped or {}
    bad = "; ".join(f"{m['file']}: {m['error']}" for m in skipped.get("malformed", []))
    raise VLNVerseError(f"{run.path}: the viewer found no scored episode ({skipped.get('unfinished', 0)} not ended, "
                        f"{len(skipped.get('malformed', []))} malformed{': ' + bad if bad else ''}, "
                        f"{skipped.get('practice', 0)} practice)")


def _viewer_step_ms(study_dir: str) -> dict:
    """``vlnverse view`` on a study folder: ms to make a new step's first-person view and map
    after the episode's first picture (scene, simulator and map base made then)."""
    from vlnverse.study.viewer import Viewer

    viewer = Viewer([study_dir])
    try:
        key = _first_record(viewer.runs[0])
        t0 = time.perf_counter()
        viewer.picture("view", 0, key, 0)
        viewer.picture("map", 0, key, 0)
        first = time.perf_counter() - t0
        steps = []
        for step in range(1, 11):
            t0 = time.perf_counter()
            viewer.picture("view", 0, key, 3 * step)
            viewer.picture("map", 0, key, 3 * step)
            steps.append(time.perf_counter() - t0)
    finally:
        viewer.close()
    return {"first_ms": round(1000 * first, 1), "p50": round(1000 * float(np.median(steps)), 1),
            "max": round(1000 * float(max(steps)), 1)}


def run(args) -> dict:
    """Measure the figures listed in the module docstring; returns a JSON-ready dict."""
    from vlnverse.scenes.splits import resolve_scenes
    from vlnverse.sim.body import load_body
    from vlnverse.tasks.base import TASKS, load_scene_context, load_task_config, load_task_types

    cores = None
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:1]))
        cores = len(os.sched_getaffinity(0))
    load_task_types()
    cfg = load_task_config("fine_grained")
    scene = resolve_scenes("test")[0]
    body = load_body(cfg.body)
    ctx = load_scene_context(scene, body, cfg.map_resolution)
    episode = TASKS.get("fine_grained")(cfg).generate(ctx, np.random.default_rng(args.seed), 1, "bench")[0]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    with tempfile.TemporaryDirectory(prefix="vlnverse-bench-study-") as tmp:
        phases = {"circle": _phase(tmp, "circle", episode, args.seed, ["forward", "left"]),
                  "push": _phase(tmp, "push", _facing_obstacle(ctx, body, episode), args.seed, ["forward"])}
        phases["viewer_step_ms"] = _viewer_step_ms(f"{tmp}/circle")
    return {"scene": scene.name, "resolution": "224x224", "drive_s": DRIVE_S, "participants": PARTICIPANTS,
            "cores": cores, "load_average_before": round(load, 2) if load is not None else None, **phases}
