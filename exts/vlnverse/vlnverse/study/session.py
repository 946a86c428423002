"""One participant's driving session: a simulator owned by one thread, stepped every tick.

The tick (``log_interval_s``, 50 ms) reads the keys the browser says are held, turns them into
one ``VelocityAction`` lasting the time that passed since the previous step (plus a camera tilt
at most every ``look_repeat_s``), steps the episode's rollout — the same object and collision
rules the evaluation runner uses — publishes the pose and hands a JPEG of the first-person RGB
view to the socket. A logger thread writes one CSV row at every 50 ms deadline from the
published pose (``t`` measured, not counted), so rendering never delays a row. Keys are state,
not events: holding a key drives at the configured speed and never queues actions. The thread
exits (closing the simulator) after ``idle_timeout_s`` without a command.

``threaded=False`` runs the same session without threads (rows logged in the tick): the owner calls :meth:`ParticipantDriver.pump`
from its own loop (the Isaac Sim study panel, from Kit's update events on the main thread, where
PhysX must be stepped); ``backend`` picks the simulator backend (``auto`` | ``mujoco`` | ``isaac``).
"""
from __future__ import annotations

import io
import logging
import math
import queue
import threading
import time
import warnings
from typing import Callable

import numpy as np

from .assign import StudyStore
from .log import IDLE, EpisodeLog, LogRow, safe_name, write_episode_end

log = logging.getLogger(__name__)

#: Key names the page sends (the page maps W/↑, S/↓, A/←, D/→, Q, E onto them).
KEYS = ("forward", "back", "left", "right", "look_up", "look_down")
#: How long before each log row the driver thread steps the physics (threaded drivers).
LEAD_S = 0.01


def encode_jpeg(rgb: np.ndarray, quality: int) -> bytes:
    """JPEG bytes of an RGB uint8 image."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.asarray(rgb, dtype=np.uint8)).save(buf, "JPEG", quality=int(quality))
    return buf.getvalue()


def episode_message(store: StudyStore, pid: str) -> dict:
    """A participant's next message (the browser page's and the Isaac Sim panel's): their current
    episode with its instruction (resumed or new), or ``complete``."""
    from .log import read_rows

    done, total = store.progress(pid)
    eid = store.current(pid)
    if eid is None:
        return {"type": "complete", "done": done, "total": total}
    episode = store.episodes[eid]
    csv_path = store.folder(pid) / f"{safe_name(eid)}.csv"
    rows = read_rows(csv_path) if csv_path.is_file() else []
    practice = store.is_practice(pid, eid)
    return {"type": "episode", "episode_id": eid, "instruction": episode.instruction_text,
            "task_type": episode.task_type, "index": 0 if practice else done + 1, "total": total,
            "practice": practice, "resumed": bool(rows), "driven_s": round(rows[-1].t, 1) if rows else 0.0}


def episode_setup(cfg, episode) -> tuple:
    """(task config, body, scene context) of ``episode`` under the study config ``cfg`` (the
    context cached in-process: maps, planner)."""
    from ..sim.body import load_body
    from ..tasks.base import load_scene_context, load_task_config

    task_cfg = load_task_config(episode.task_type)
    body = load_body(cfg.body or task_cfg.body)
    return task_cfg, body, load_scene_context(episode.scene_path, body, task_cfg.map_resolution)


def prepare_homes(store: StudyStore, *, backend: str = "auto", progress: Callable[[str], None] | None = None) -> int:
    """Open every home the study's episodes use once, so that no participant waits for it: its
    maps, its compiled model and its baked light (computed on a home's first open and cached, the
    6-20 s a first frame used to take) and one rendered frame. ``progress(line)`` hears one line per
    home. Returns the number of homes."""
    from ..sim import make_simulator
    from ..sim.sensors import CameraSpec
    from ..tasks.base import load_task_types

    load_task_types()
    homes: dict[tuple, tuple] = {}
    for episode in store.episodes.values():
        _, body, ctx = episode_setup(store.config, episode)
        homes.setdefault((str(episode.scene_path), body.name), (ctx, body))
    if backend in ("auto", "mujoco"):  # keep every home's compiled model in memory, not only the last 8
        from ..sim.mujoco.builder import keep_models

        keep_models(len(homes))
    camera = CameraSpec("rgb", "rgb", store.config.image_size, store.config.image_size, store.config.hfov_deg)
    for i, (ctx, body) in enumerate(homes.values(), start=1):
        t0 = time.perf_counter()
        sim = make_simulator(ctx.desc, body, sensors=[], backend=backend, **store.config.render.sim_options())
        try:
            sim.render_at(sim.pose, camera)
        finally:
            sim.close()
        if progress is not None:
            progress(f"preparing homes: {i}/{len(homes)} {ctx.desc.scene_id} ({time.perf_counter() - t0:.1f} s)")
    return len(homes)


class ParticipantDriver:
    """The simulator thread of one participant.

    ``on_frame(jpeg_bytes)`` and ``on_event(dict)`` are called from the driver's thread (the
    server forwards them to the socket). Commands: :meth:`start`, :meth:`pause`,
    :meth:`finish`, :meth:`close`; :attr:`keys` is replaced by the socket handler.
    """

    def __init__(self, store: StudyStore, pid: str, *, on_frame: Callable[[bytes], None],
                 on_event: Callable[[dict], None], threaded: bool = True, backend: str = "auto"):
        self.store, self.pid, self.cfg = store, pid, store.config
        self.on_frame, self.on_event = on_frame, on_event
        self.keys: frozenset[str] = frozenset()
        self.ticks: list[float] = []  # monotonic time of every logged row (for the bench)
        self.contact = False  # contact since the previous frame, read by ``on_frame`` (the collision cue)
        self._commands: queue.Queue = queue.Queue()
        self._sim = self._scene = None
        self._episode = self._rollout = self._log = None
        self._driving = False
        self._backend = backend
        self._closed = False
        # the log rows: written by a logger thread at the 50 ms deadlines (threaded drivers), from the
        # pose the driver thread publishes after each physics step, so rendering never delays a row
        self._state = threading.Lock()
        self._logging = False
        self._pose_now = None
        self._contact_row = False  # contact since the previous row
        self._t_origin = self._row_next = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"study-{pid}", daemon=True) if threaded else None
        self._logger = threading.Thread(target=self._log_loop, name=f"study-log-{pid}", daemon=True) if threaded else None
        if self._thread is not None:
            self._thread.start()
            self._logger.start()

    # ------------------------------------------------------------------ commands (any thread)

    def start(self, episode_id: str) -> None:
        """Load (or resume) ``episode_id`` and start driving."""
        self._commands.put(("start", episode_id))

    def pause(self) -> None:
        """Stop stepping (socket gone); the log keeps the last pose."""
        self.keys = frozenset()
        self._commands.put(("pause",))

    def finish(self, episode_id: str, termination: str = "stop") -> None:
        """End ``episode_id`` (``stop``: the participant pressed Enter; ``ended``: an interrupted
        episode the participant chose not to resume)."""
        self._commands.put(("finish", termination, episode_id))

    def close(self) -> None:
        """End the thread and close the simulator."""
        self._commands.put(("close",))

    @property
    def alive(self) -> bool:
        """Whether the driver thread still runs (unthreaded: whether it is not closed)."""
        return self._thread.is_alive() if self._thread is not None else not self._closed

    def join(self, timeout: float | None = None) -> None:
        """Wait for the thread to end."""
        if self._thread is not None:
            self._thread.join(timeout)

    def pump(self) -> bool:
        """Unthreaded drivers: handle the queued commands, then run the tick if it is due (never
        sleeps). Call it from the owner's loop, e.g. every Kit update; False once closed."""
        if self._closed:
            return False
        while True:
            try:
                cmd = self._commands.get_nowait()
            except queue.Empty:
                break
            if cmd[0] == "close":
                self._shutdown()
                return False
            self._dispatch(cmd)
        if self._driving and time.perf_counter() >= self._next:
            self._tick()
        return True

    # ------------------------------------------------------------------ the thread

    def _run(self) -> None:
        try:
            while True:
                if self._driving:
                    self._tick()
                    try:
                        cmd = self._commands.get_nowait()
                    except queue.Empty:
                        continue
                else:
                    try:
                        cmd = self._commands.get(timeout=self.cfg.idle_timeout_s)
                    except queue.Empty:
                        log.info("participant %s idle for %.0f s: simulator closed", self.pid, self.cfg.idle_timeout_s)
                        return
                if cmd[0] == "close":
                    return
                self._dispatch(cmd)
        finally:
            self._shutdown()

    def _dispatch(self, cmd: tuple) -> None:
        try:
            self._handle(cmd)
        except Exception as exc:  # noqa: BLE001 - report to the page, keep the thread
            log.exception("participant %s: %s failed", self.pid, cmd[0])
            self._driving = False
            self.on_event({"type": "error", "message": f"{cmd[0]} failed: {exc}"})

    def _shutdown(self) -> None:
        self._closed = True
        self._stop.set()
        self._end_log()
        if self._sim is not None:
            self._sim.close()
            self._sim = None

    def _handle(self, cmd: tuple) -> None:
        if cmd[0] == "start":
            self._load(cmd[1])
            self._driving = True
            self._next = time.perf_counter()
        elif cmd[0] == "pause":
            self._driving = False
            self._end_log()
        elif cmd[0] == "finish":
            self._finish(cmd[1], episode_id=cmd[2])

    def _load(self, episode_id: str) -> None:
        from ..run.rollout import Rollout, scene_mode
        from ..run.episodes import RunSettings
        from ..sim import make_simulator
        from ..sim.sensors import CameraSpec
        from ..sim.types import AgentPose

        episode = self.store.episodes[episode_id]
        task_cfg, body, ctx = episode_setup(self.cfg, episode)
        if self._scene != (str(episode.scene_path), body.name) and self._sim is not None:
            self._sim.close()
            self._sim = None
        if self._sim is None:
            size = self.cfg.image_size
            # no sensor on the rig: physics steps stay cheap, and the view is rendered after the
            # tick's row is logged, only when there is time (logging has priority over frames)
            self._sim = make_simulator(ctx.desc, body, sensors=[], backend=self._backend,
                                       **self.cfg.render.sim_options())
            self._camera = CameraSpec("rgb", "rgb", size, size, self.cfg.hfov_deg)
            self._scene = (str(episode.scene_path), body.name)
        mode = scene_mode(self.cfg.collision_mode, self._sim, ctx)
        settings = RunSettings(max_steps=int(math.ceil(self.cfg.max_episode_s / self.cfg.log_interval_s)),
                               success_distance=task_cfg.success_distance, body=body,
                               resolution=task_cfg.map_resolution, task_type=episode.task_type)
        self._end_log()
        self._episode = episode
        self._rollout = Rollout(episode, ctx, self._sim, mode, settings)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            self._rollout.reset()
        episode_log = EpisodeLog(self.store.folder(self.pid) / f"{safe_name(episode_id)}.csv")
        last = episode_log.last
        if last is not None:  # resume at the last logged pose; the driving clock continues
            self._sim.teleport(AgentPose(last.x, last.y, last.yaw, last.pitch))
        t0 = last.t + self.cfg.log_interval_s if last is not None else 0.0
        now = time.perf_counter()
        with self._state:  # the first row: just after the first physics step
            self._log, self._t_origin, self._row_next = episode_log, now - t0, now + LEAD_S
            self._pose_now, self._contact_row, self._logging = self._sim.pose, False, True
        self._last_step = now
        self._last_look = -math.inf
        self._coasting = self._collided = self._contact_since_frame = False
        self._skipped = 0
        self._sim_debt = 0.0  # driving time not yet simulated (the physics runs whole control ticks)
        control = getattr(self._sim, "control", None)
        self._control_dt = 1.0 / control.control_hz if control is not None else None
        self._send_frame()
        self.on_event({"type": "ready", "episode_id": episode_id, "t": round(t0, 3)})

    # ------------------------------------------------------------------ logging

    def _write_row(self, now: float) -> None:
        """Log the pose published last, sampled at ``now``: ``t`` is the measured driving time
        (``now`` minus the episode's clock origin), never a count of ticks. Call with ``_state`` held."""
        cfg, keys, pose = self.cfg, self.keys, self._pose_now
        action = "+".join(k for k in KEYS if k in keys and (k != "back" or cfg.allow_backward)) or IDLE
        self.ticks.append(now)
        self._log.write(LogRow(now - self._t_origin, time.time(), pose.x, pose.y, pose.yaw, pose.pitch, action,
                               self._contact_row))
        self._contact_row = False

    def _log_loop(self) -> None:
        """The logger thread: one row at every ``log_interval_s`` deadline while an episode runs
        (a row that comes more than a tick late moves the next deadline on: no bursts)."""
        dt = self.cfg.log_interval_s
        while not self._stop.is_set():
            with self._state:
                active, due = self._logging and self._log is not None, self._row_next
            if not active:
                self._stop.wait(0.01)
                continue
            delay = due - time.perf_counter()
            if delay > 0:
                self._stop.wait(min(delay, 0.1))
                continue
            with self._state:
                if not (self._logging and self._log is not None) or self._row_next != due:
                    continue
                now = time.perf_counter()
                self._write_row(now)
                # on time: keep the 50 ms grid; late by more than 10 ms: the next row 50 ms after this one
                self._row_next = due + dt if now - due <= 0.01 else now + dt

    def _tick(self) -> None:
        """Wait for the tick's deadline, then apply the held keys over the time that really passed
        since the previous physics step (whole control ticks, the remainder carried), publish the
        pose and render a frame when there is time. Unthreaded drivers log the row here first."""
        from ..sim.types import DiscreteAction, VelocityAction

        cfg, dt = self.cfg, self.cfg.log_interval_s
        delay = self._next - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        now = time.perf_counter()
        if self._thread is None:  # unthreaded (the Isaac Sim panel): the row is logged here, before the step
            with self._state:
                if self._log is not None:
                    self._write_row(now)
        keys = self.keys
        v = cfg.linear_speed * (("forward" in keys) - (cfg.allow_backward and "back" in keys))
        omega = math.radians(cfg.angular_speed_deg) * (("left" in keys) - ("right" in keys))
        look = ("look_up" in keys) - ("look_down" in keys)
        pose = self._sim.pose
        elapsed, self._last_step = min(now - self._last_step, 0.25), now  # the time that really passed
        results = []
        if v or omega or self._coasting:
            step_s = self._sim_step_s(elapsed)
        else:
            step_s, self._sim_debt = 0.0, 0.0  # standing still: idle time is not owed to the physics
        if (v or omega) and step_s:
            results.append(self._rollout.step(VelocityAction(float(v), float(omega), step_s)))
            self._coasting = True
        elif self._coasting and not self._rollout.done and step_s:
            # keys released: brake to rest (the base keeps its momentum otherwise) and stop
            # stepping once a tick moves it less than 1 mm and 0.1 degree
            results.append(self._rollout.step(VelocityAction(0.0, 0.0, step_s)))
            after = results[-1].pose
            self._coasting = (after.distance_to(pose) > 1e-3
                              or abs(math.remainder(after.yaw - pose.yaw, math.tau)) > math.radians(0.1))
        if look and now - self._last_look >= cfg.look_repeat_s and not self._rollout.done:
            self._last_look = now
            results.append(self._rollout.step(DiscreteAction.LOOK_UP if look > 0 else DiscreteAction.LOOK_DOWN))
        self._collided = any(r.collided for r in results)
        self._contact_since_frame |= self._collided
        if results:
            with self._state:  # what the next row logs
                self._pose_now = self._sim.pose
                self._contact_row |= self._collided
        self._next += dt
        if results:
            # render only with time to spare before the next row; at least every 5th tick
            if self._next - time.perf_counter() > 0.4 * dt or self._skipped >= 4:
                self._send_frame()
            else:
                self._skipped += 1
        elif self._skipped:  # standing still: catch up on the frame that was skipped
            self._send_frame()
        if self._thread is not None:
            # threaded: step LEAD before each of the logger's deadlines, so every row logs a pose
            # simulated up to the same short time before it (a steady lag, not 0-50 ms)
            with self._state:
                row_next = self._row_next
            self._next = row_next - LEAD_S
            while self._next <= time.perf_counter() + 1e-3:
                self._next += dt
        elif time.perf_counter() > self._next + dt:  # fell behind by more than a tick: do not burst
            self._next = time.perf_counter()
        done = next((r for r in results if r.done), None)
        if done is not None:
            self._finish(done.termination or "stop", failure=done.info.get("failure"))

    def _sim_step_s(self, dt: float) -> float:
        """Simulated seconds for a tick of ``dt``: whole control ticks, carrying the remainder to the
        next tick, so the simulated time keeps up with the driving time. (A 50 ms tick is 2.5
        control ticks at 50 Hz; the simulator rounds a duration to whole ticks, so commanding
        50 ms every tick ran 40 ms: the body reached 80 % of the configured speeds.)"""
        if self._control_dt is None:
            return dt
        self._sim_debt += dt
        ticks = int(self._sim_debt / self._control_dt + 1e-6)
        self._sim_debt -= ticks * self._control_dt
        return ticks * self._control_dt

    def _send_frame(self) -> None:
        """Render the first-person RGB view at the current pose and hand it on as a JPEG;
        :attr:`contact` says whether the body touched something since the previous frame."""
        self._skipped = 0
        self.contact, self._contact_since_frame = self._contact_since_frame, False
        image = self._sim.render_at(self._sim.pose, self._camera)
        self.on_frame(encode_jpeg(image.get(self._camera.name, next(iter(image.values()))), self.cfg.jpeg_quality))

    def _finish(self, termination: str, failure: str | None = None, episode_id: str | None = None) -> None:
        from .log import read_episode_end, read_rows

        episode_id = episode_id or (self._episode.episode_id if self._episode is not None else None)
        folder = self.store.folder(self.pid)
        if episode_id is None or read_episode_end(folder, episode_id) is not None:
            return  # nothing running, or already ended
        if self._episode is not None and self._episode.episode_id == episode_id:
            driving_s = time.perf_counter() - self._t_origin
            if termination == "stop" and not self._rollout.done:
                from ..sim.types import DiscreteAction

                self._rollout.step(DiscreteAction.STOP)  # the participant's Enter is the episode's STOP
        else:  # ending an episode whose simulator is gone (interrupted, then abandoned)
            csv_path = folder / f"{safe_name(episode_id)}.csv"
            rows = read_rows(csv_path) if csv_path.is_file() else []
            driving_s = rows[-1].t if rows else 0.0
        self._driving = False
        self._end_log()
        write_episode_end(folder, episode_id, termination=termination, collision_mode=self.cfg.collision_mode,
                          failure=failure, driving_s=driving_s, practice=self.store.is_practice(self.pid, episode_id))
        self._episode = self._rollout = None
        self.on_event({"type": "episode_end", "episode_id": episode_id, "termination": termination,
                       "failure": failure})

    def _end_log(self) -> None:
        with self._state:
            self._logging = False
            if self._log is not None:
                self._log.close()
                self._log = None
