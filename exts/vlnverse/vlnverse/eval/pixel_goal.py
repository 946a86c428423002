"""Pixel goals (VCN-Bench Sec. 4, MV-DualVLN): an MLLM picks a prior-video frame, a view and a pixel;
an oracle executor back-projects the pixel through that view's depth to a floor waypoint.

* :func:`pixel_to_floor` — pixel (u, v) of a level 90° view → world floor point, or
  :class:`PixelGoalError` (outside the image, no depth, on a wall / object: not floor).
* :func:`floor_to_pixel` — the inverse, for the training-data export: a floor point → (view,
  u, v) in the view with the smallest rotation to it.
* :class:`MVDualVLNAgent` (``mv_dualvln``) — inputs: the instruction, the prior video
  (``video_frames`` evenly spaced frames of the window, default 50; a shorter video gives all
  its frames and ``video_short`` in the first output), the in-episode history (text), the four
  views at the start and the four current views (Front, Left, Back, Right around the snapped
  heading). Output, parsed::

      Frame: <index>            the prior-video frame that shows the goal
      View: <Front|Left|Back|Right>
      Pixel: <u>, <v>           a floor pixel of that view to walk to
  or ``Frame: <index>`` and ``Action: STOP``. A pixel outside the image, on a wall or an object,
  or a waypoint off the navigable map (> ``snap`` m from a navigable cell) is re-prompted with
  the reason (``max_reprompts``), then the step is recorded invalid. The executor moves with a
  ``WaypointAction`` to the floor point snapped to the nearest navigable cell (Tel-Hop: one hop;
  Strict: the waypoint controller through physics). On STOP the agent returns
  ``SelectFrame(frame)`` first (Rid-SR / Oid-SR score it), then STOP.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..core.errors import VLNVerseError
from ..core.params import param
from ..sim.sensors import camera_extrinsics, camera_intrinsics
from ..sim.types import AgentPose, DiscreteAction, WaypointAction
from ..tasks.actions import SelectFrame
from ..run.agents import Agent, AgentState, register_agent

#: agent-centred order of the views in the prompt, as quarter turns CCW from the snapped front
VIEW_NAMES = ("Front", "Left", "Back", "Right")


class PixelGoalError(VLNVerseError):
    """A pixel goal that does not give a floor waypoint (the reason is the message)."""


def pixel_to_floor(u: float, v: float, depth: np.ndarray, heading: float, xy: Sequence[float], camera_height: float, *,
                   hfov_deg: float = 90.0, floor_z: float = 0.0, floor_tolerance: float = 0.15,
                   max_depth: float = 10.0) -> np.ndarray:
    """World (x, y) of the floor point seen at pixel (u, v) of a level view facing ``heading``."""
    depth = np.asarray(depth, dtype=float)
    h, w = depth.shape
    if not (0 <= u < w and 0 <= v < h):
        raise PixelGoalError(f"pixel ({u:g}, {v:g}) is outside the {w}x{h} image")
    d = float(depth[int(v), int(u)])
    if not (0 < d < max_depth - 1e-3):
        raise PixelGoalError(f"pixel ({u:g}, {v:g}) has no depth (nothing within {max_depth:g} m)")
    k = camera_intrinsics(w, h, hfov_deg)
    cam = np.array([(int(u) + 0.5 - k[0, 2]) / k[0, 0] * d, (int(v) + 0.5 - k[1, 2]) / k[1, 1] * d, d, 1.0])
    mat = camera_extrinsics(AgentPose(float(xy[0]), float(xy[1]), float(heading)), (0.0, 0.0, None, 0.0),
                            camera_height, floor_z=floor_z)
    p = mat @ cam
    if abs(p[2] - floor_z) > floor_tolerance:
        raise PixelGoalError(f"pixel ({u:g}, {v:g}) is on a wall or an object ({p[2] - floor_z:.2f} m above the floor), "
                             "not on the floor")
    return p[:2]


def floor_to_pixel(point: Sequence[float], xy: Sequence[float], yaw: float, camera_height: float, size: int, *,
                   hfov_deg: float = 90.0, floor_z: float = 0.0) -> tuple[int, int, int] | None:
    """(view index in :data:`VIEW_NAMES` order, u, v) of a floor point in the agent-centred view
    with the smallest rotation to it; ``None`` when it is not in that view's image (too close:
    below the image)."""
    from .mllm.views import snapped_front

    d = np.asarray(point, dtype=float)[:2] - np.asarray(xy, dtype=float)[:2]
    bearing = math.atan2(d[1], d[0])
    front = snapped_front(yaw)
    k_best = min(range(4), key=lambda k: abs(math.remainder(bearing - (front + k) * math.pi / 2, 2 * math.pi)))
    heading = (front + k_best) * math.pi / 2
    mat = camera_extrinsics(AgentPose(float(xy[0]), float(xy[1]), heading), (0.0, 0.0, None, 0.0), camera_height,
                            floor_z=floor_z)
    cam = np.linalg.inv(mat) @ np.array([d[0] + xy[0], d[1] + xy[1], floor_z, 1.0])
    if cam[2] <= 1e-6:
        return None
    kmat = camera_intrinsics(size, size, hfov_deg)
    u = kmat[0, 0] * cam[0] / cam[2] + kmat[0, 2]
    v = kmat[1, 1] * cam[1] / cam[2] + kmat[1, 2]
    if not (0 <= u < size and 0 <= v < size):
        return None
    return k_best, int(u), int(v)


def fit_frames(sizes: Sequence[int], budget: int) -> np.ndarray:
    """Indices into ``sizes`` (the frames' PNG bytes) of the most evenly spaced frames, first and
    last included, whose bytes fit in ``budget`` (empty when none fits)."""
    n = len(sizes)
    if sum(sizes) <= budget:
        return np.arange(n)
    mean = max(sum(sizes) / max(n, 1), 1.0)
    for k in range(min(n, int(budget / mean) + 2), 0, -1):
        idx = np.unique(np.linspace(0, n - 1, k).round().astype(int))
        if sum(sizes[i] for i in idx) <= budget:
            return idx
    return np.zeros(0, int)


class Panorama:
    """Renders the four level global views (east, north, west, south), RGB and depth, at a position."""

    def __init__(self, size: int = 224, hfov_deg: float = 90.0, max_depth: float = 10.0):
        self.size, self.hfov_deg, self.max_depth = int(size), float(hfov_deg), float(max_depth)
        self._desc: Any = None
        self._options: dict = {}
        self._sim: Any = None

    def render(self, ctx: Any, xy: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
        """((4, H, W, 3) uint8, (4, H, W) float32) at ``xy``, with the run's render options
        (``ctx.render_options``)."""
        from ..sim import make_simulator
        from ..sim.sensors import PanoramaSpec
        from ..tasks.base import render_options

        options = render_options(ctx)
        if self._desc is not ctx.desc or self._options != options:
            self.close()
            self._sim = make_simulator(ctx.desc, ctx.body, sensors=[], **options)
            self._desc, self._options = ctx.desc, options
        spec = PanoramaSpec.of(name="pix", views=4, width=self.size, height=self.size, hfov_deg=self.hfov_deg,
                            modalities=("rgb", "depth"), max_depth=self.max_depth)
        out = self._sim.render_at(AgentPose(float(xy[0]), float(xy[1]), 0.0), spec)
        return np.asarray(out["pix_rgb"]), np.asarray(out["pix_depth"])

    def close(self) -> None:
        """Close the simulator."""
        if self._sim is not None:
            self._sim.close()
        self._sim = self._desc = None
        self._options = {}


def snap_to_navigable(navigable: Any, point: Sequence[float], max_distance: float) -> np.ndarray | None:
    """The centre of the navigable cell nearest ``point`` within ``max_distance`` (None: none)."""
    free = np.argwhere(navigable.free_mask())
    if len(free) == 0:
        return None
    centres = navigable.cell_to_world(free)
    d = np.linalg.norm(centres - np.asarray(point, dtype=float)[:2], axis=1)
    i = int(np.argmin(d))
    return centres[i] if d[i] <= max_distance else None


_FRAME = re.compile(r"frame\s*[:=]?\s*(\d+)", re.I)
_VIEW = re.compile(r"view\s*[:=]?\s*(front|left|back|right)", re.I)
_PIXEL = re.compile(r"pixel\s*[:=]?\s*\(?\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*\)?", re.I)
_STOP = re.compile(r"action\s*[:=]?\s*\**\s*stop\b|^\W*stop\W*$", re.I | re.M)


def parse_pixel_goal(text: str) -> dict[str, Any]:
    """``{"frame", "stop"}`` plus ``{"view", "u", "v"}`` for a move; ``{"error": ...}`` when
    malformed. ``Action: STOP`` or a line that is only ``STOP`` stops (a ``View:`` / ``Pixel:``
    beside it is ignored); ``frame`` is None when no ``Frame:`` is given (see
    :class:`MVDualVLNAgent` for a stop without one)."""
    text = text or ""
    frame = _FRAME.search(text)
    out: dict[str, Any] = {"frame": int(frame.group(1)) if frame else None}
    if _STOP.search(text):
        return {**out, "stop": True}
    view, pixel = _VIEW.search(text), _PIXEL.search(text)
    if not view or not pixel:
        return {**out, "error": "expected 'View: <Front|Left|Back|Right>' and 'Pixel: <u>, <v>' (or 'Action: STOP')"}
    return {**out, "stop": False, "view": view.group(1).capitalize(), "u": float(pixel.group(1)),
            "v": float(pixel.group(2))}


SYSTEM = """You are a navigation agent. Before navigating you watched a video of the home (the first images, numbered frames).
Then come the four views at your start and the four views where you stand now (Front, Left, Back, Right).
Find the goal of the instruction: name the video frame that shows it, and walk there by choosing a floor pixel in one of the current views.
Answer exactly:
Frame: <frame index>
View: <Front|Left|Back|Right>
Pixel: <u>, <v>   (column, row of a floor point in that view, 0 at the top-left; the image is {size}x{size})
When you have arrived, answer 'Frame: <frame index>' and 'Action: STOP' (name the frame: a stop without one is asked again)."""


@dataclass
class MVDualVLNParams:
    """``agent.params`` of ``mv_dualvln`` (see :class:`MVDualVLNAgent`)."""

    video_frames: int = param(50, low=1, high=10_000)
    video_root: str | None = None
    view_size: int = param(224, low=8, high=4096)
    max_reprompts: int = param(2, low=0, high=100)
    snap: float = param(0.3, low=0.0, high=100.0)
    max_image_bytes: int = param(2_000_000, low=1, high=10**10)


class MVDualVLNAgent(Agent):
    """MV-DualVLN pixel-goal agent (see the module docstring). Parameters: ``video_frames`` (50),
    ``video_root`` (default: the run's dataset folder, where ``episodes: generate`` wrote the
    prior videos, then the working folder), ``view_size`` (224), ``max_reprompts`` (2), ``snap``
    (0.3 m), ``max_image_bytes`` (2,000,000: the PNG bytes of one request's images).

    Image budget of a request: at most ``video_frames`` prior-video frames plus the 8 views; when
    their PNGs exceed ``max_image_bytes``, fewer frames (evenly spaced over the same window) are
    shown until they fit (``image_budget`` in the step's output); the 8 views are always sent.
    A stop (``Action: STOP`` or a bare ``STOP``) with a ``Frame:`` selects that frame; without one
    the frame named last in an earlier step is kept, and with none ever named the agent asks once
    more for the frame (a re-prompt), then stops without a selection."""

    Params = MVDualVLNParams

    def __init__(self, *, video_frames: int = 50, video_root: str | None = None, view_size: int = 224,
                 max_reprompts: int = 2, snap: float = 0.3, max_image_bytes: int = 2_000_000, **kwargs: Any):
        super().__init__(**kwargs)
        from ..core.errors import ConfigError

        from ..run.chat_models import ChatModel

        if not isinstance(self.model, ChatModel):
            raise ConfigError("missing" if self.model is None else f"a {type(self.model).__name__}",
                              field=f"model ({self.name})", expected="a chat model (openai, scripted, ...)")
        self.video_frames, self.max_reprompts, self.snap = int(video_frames), int(max_reprompts), float(snap)
        self.max_image_bytes = int(max_image_bytes)
        self.video_root = Path(video_root) if video_root else None
        self.panorama = Panorama(int(view_size))

    def chat_models(self) -> dict[str, Any]:
        """Its one chat model, the navigator."""
        return {"navigator": self.model}

    def reset(self, episode: Any, context: Any) -> None:
        from ..tasks.tours import load_prior_video

        super().reset(episode, context)
        self.episode, self.context = episode, context
        self.history: list[str] = []
        self._start_views: np.ndarray | None = None
        self._pending_stop = False
        self.selected_frame: int | None = None
        self._frames, self._frame_ids = np.zeros((0, 1, 1, 3), np.uint8), np.zeros(0, int)
        self._frame_pngs: list[bytes] = []
        note: dict[str, Any] = {}
        info = getattr(episode, "info", {})
        if "video" in info:
            path = Path(info["video"])
            frames, _ = load_prior_video(self.find_asset(path, self.video_root))
            start, end = (int(v) for v in info.get("window", (0, len(frames))))
            window = frames[start:end]
            n = min(self.video_frames, len(window))
            if len(window) < self.video_frames:
                note["video_short"] = {"requested": self.video_frames, "available": int(len(window))}
            ids = np.unique(np.linspace(0, len(window) - 1, n).round().astype(int)) if n else np.zeros(0, int)
            self._frames, self._frame_ids = window[ids], ids
        from ..run.chat_models import png_bytes

        self._frame_pngs = [png_bytes(f) for f in self._frames]
        self._shown = self._frame_ids
        self._note = note

    def _views(self, state: AgentState) -> tuple[np.ndarray, np.ndarray, int]:
        from .mllm.views import snapped_front

        rgb, depth = self.panorama.render(self.context, state.pose.xy)
        front = snapped_front(state.pose.yaw)
        order = [(front + k) % 4 for k in range(4)]
        return rgb[order], depth[order], front

    def prompt(self, state: AgentState) -> str:
        """The step's text: instruction, frame numbering, history."""
        listing = ", ".join(f"image {k + 1} = frame {int(i)}" for k, i in enumerate(self._shown))
        history = "\n".join(self.history) or "none yet"
        n = len(self._shown)
        return (f"Instruction: {getattr(self.episode, 'instruction_text', '')}\n"
                f"Video frames: {listing or 'none'}.\n"
                f"Images {n + 1}-{n + 4}: start views (Front, Left, Back, Right); images {n + 5}-{n + 8}: current views "
                f"(Front, Left, Back, Right).\nHistory:\n{history}")

    def act(self, observations: dict[str, Any], state: AgentState) -> Any:
        from .mllm.agents import GenerationError
        from ..run.chat_models import png_bytes
        from ..run.rollout import NotEvaluated

        if self._pending_stop:
            self._pending_stop = False
            self.outputs.append({"step": state.step, "action": "STOP", "after_frame_selection": True})
            return DiscreteAction.STOP
        rgb, depth, front = self._views(state)
        if self._start_views is None:
            self._start_views = rgb
        record: dict[str, Any] = {"step": state.step, **(self._note if state.step == 0 else {}), "attempts": []}
        self.outputs.append(record)
        size = rgb.shape[2]
        views = [png_bytes(v) for v in self._start_views] + [png_bytes(v) for v in rgb]
        keep = fit_frames([len(b) for b in self._frame_pngs], self.max_image_bytes - sum(map(len, views)))
        self._shown = self._frame_ids[keep]
        messages = [{"role": "system", "content": SYSTEM.format(size=size)}, {"role": "user", "content": self.prompt(state)}]
        images = [self._frame_pngs[k] for k in keep] + views
        record["prompt"], record["images"] = messages[1]["content"], len(images)
        record["image_budget"] = {"frames": int(len(keep)), "frames_available": int(len(self._frame_pngs)),
                                  "bytes": int(sum(map(len, images))), "max_image_bytes": self.max_image_bytes}
        asked_frame = False
        for attempt in range(self.max_reprompts + 1):
            gen = self.model.generate(messages, images, store=False)
            if gen.endpoint_failure:
                raise NotEvaluated(gen.error_kind, gen.error or "")
            parsed = parse_pixel_goal(gen.text if gen.ok else "")
            entry: dict[str, Any] = {"raw": gen.text, "parsed": parsed}
            record["attempts"].append(entry)
            error = parsed.get("error")
            if error is None and parsed["frame"] is not None and parsed["frame"] not in set(self._shown.tolist()) \
                    and len(self._shown):
                error = f"frame {parsed['frame']} was not shown; choose one of {self._shown.tolist()}"
            if error is None and parsed["stop"] and parsed["frame"] is None and self.selected_frame is None \
                    and len(self._shown) and attempt < self.max_reprompts and not asked_frame:
                error = "you stopped without naming the goal frame; answer 'Frame: <frame index>' and 'Action: STOP'"
                asked_frame = True
            waypoint = None
            if error is None and not parsed["stop"]:
                k = VIEW_NAMES.index(parsed["view"])
                try:
                    floor = pixel_to_floor(parsed["u"], parsed["v"], depth[k], ((front + k) % 4) * math.pi / 2,
                                           state.pose.xy, float(self.context.body.camera_height),
                                           hfov_deg=self.panorama.hfov_deg, floor_z=float(self.context.floor_z),
                                           floor_tolerance=float(self.context.body.step_height))
                except PixelGoalError as exc:
                    error = str(exc)
                else:
                    waypoint = snap_to_navigable(self.context.maps.navigable, floor, self.snap)
                    entry["floor_point"] = [round(float(c), 3) for c in floor]
                    if waypoint is None:
                        error = f"the floor point {entry['floor_point']} is not within {self.snap} m of walkable floor"
            if error is None:
                self.model.remember(gen)
                break
            entry["error"] = error
            if attempt == self.max_reprompts:
                record["invalid"] = error
                raise GenerationError(f"invalid pixel goal: {error}")
            messages += [{"role": "assistant", "content": gen.text or "(no answer)"},
                         {"role": "user", "content": f"Your answer could not be used: {error}. Answer again."}]
        if parsed["frame"] is not None:
            self.selected_frame = int(parsed["frame"])
        if parsed["stop"]:
            record["action"] = "STOP"
            if self.selected_frame is not None:
                self._pending_stop = True
                return SelectFrame(self.selected_frame)
            return DiscreteAction.STOP
        d = np.asarray(waypoint) - np.asarray(state.pose.xy, dtype=float)
        rel = math.atan2(d[1], d[0]) - state.pose.yaw
        dist = float(np.linalg.norm(d))
        record["action"] = {"view": parsed["view"], "pixel": [parsed["u"], parsed["v"]],
                            "waypoint": [round(float(c), 3) for c in waypoint]}
        self.history.append(f"Step {len(self.history) + 1}: walked {dist:.1f} m toward a floor point in the "
                            f"{parsed['view']} view (frame {parsed['frame']}).")
        return WaypointAction(dx=dist * math.cos(rel), dy=dist * math.sin(rel), dyaw=rel, timeout=15.0)


register_agent("mv_dualvln")(MVDualVLNAgent)
