"""The MLLM observation: four 90° views around a viewpoint, stitched agent-centred
[Left, Front, Right, Back] with labels, navigable candidates drawn as numbered markers (VLN-MME
Sec. 3.3, App. B).

Views are rendered (or cached) at the four *global* headings 0°, 90°, 180°, 270° (east, north,
west, south), so one set per viewpoint serves every agent heading: the agent's heading is
snapped to the nearest of them ("corrected heading") and the views are reordered around it.
Candidates are numbered 1..K in the order they appear left to right across the stitched
image: the Left view, Front, Right, then Back (whose left edge is the agent's behind-right and
right edge its behind-left); each is drawn once, in the view that holds its bearing. Options
closer than ``merge_distance`` to one already kept (nearer to the agent) are shown once.
Markers and labels are drawn with DejaVu Sans Bold (shipped with matplotlib) at a size that
scales with the view, so the digits stay legible when a client downsizes the image to 512 px.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

#: global view headings (radians, CCW from +x) of the stored / rendered views
GLOBAL_HEADINGS = tuple(i * math.pi / 2 for i in range(4))
#: agent-centred order of the stitched image, as offsets (in quarter turns CCW) from the front view
VIEW_ORDER = (("Left", 1), ("Front", 0), ("Right", 3), ("Back", 2))


@dataclass
class Candidate:
    """A navigable option: marker id, target (node id or None), position, heading relative to the
    agent (rad, CCW+), distance (m), coarse direction and optional caption."""

    marker: int
    target: Any
    xy: tuple[float, float]
    relative_heading: float
    distance: float
    direction: str
    caption: str = ""
    #: position across the stitched image, degrees in [0, 360): 0 = the Left view's left edge
    image_deg: float = 0.0
    #: targets of options merged into this one (closer than ``merge_distance``)
    merged: tuple = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (angles in degrees, 0.1 precision)."""
        return {"marker": self.marker, "target": self.target, "xy": [round(float(v), 3) for v in self.xy],
                "heading_deg": round(math.degrees(self.relative_heading), 1), "distance": round(self.distance, 2),
                "direction": self.direction, **({"caption": self.caption} if self.caption else {}),
                **({"merged": list(self.merged)} if self.merged else {})}


def printed_degrees(relative_heading: float) -> int:
    """The relative angle as the prompt prints it: whole degrees in (-180, 180], CCW+ (left)."""
    deg = int(round(math.degrees(math.atan2(math.sin(relative_heading), math.cos(relative_heading)))))
    return 180 if deg == -180 else deg


def angle_text(relative_heading: float) -> str:
    """The printed angle: ``12 degrees left``, ``30 degrees right``, ``0 degrees`` (straight ahead)."""
    deg = printed_degrees(relative_heading)
    return f"{abs(deg)} degrees" + ("" if deg in (0, 180) else (" left" if deg > 0 else " right"))


def direction_of(relative_heading: float) -> str:
    """front / left / right / back for a heading relative to the agent (CCW+, radians), from the
    whole degrees the prompt prints (:func:`printed_degrees`): Front [-45, 45], Left (45, 135],
    Right [-135, -45), Back otherwise; so a label never contradicts its printed angle."""
    deg = printed_degrees(relative_heading)
    if -45 <= deg <= 45:
        return "front"
    if 45 < deg <= 135:
        return "left"
    if -135 <= deg < -45:
        return "right"
    return "back"


def image_degrees(relative_to_snapped: float) -> float:
    """Position across the stitched image (degrees, 0 = the Left view's left edge, 360 = the Back
    view's right edge) of a bearing relative to the snapped front heading (radians, CCW+)."""
    return (135.0 - math.degrees(relative_to_snapped)) % 360.0


def make_candidates(xy: Sequence[float], heading: float, options: Sequence[tuple[Any, Sequence[float]]], *,
                    merge_distance: float = 0.0) -> list[Candidate]:
    """Number ``options`` ((target, (x, y)) pairs) as markers 1..K seen from ``xy`` facing
    ``heading``: left to right across the stitched image (see the module docstring). An option
    within ``merge_distance`` (m) of one nearer to the agent is merged into it (shown once)."""
    snap = snapped_front(heading) * math.pi / 2
    rows = []
    for target, pos in options:
        dx, dy = float(pos[0]) - float(xy[0]), float(pos[1]) - float(xy[1])
        bearing = math.atan2(dy, dx)
        rel = math.remainder(bearing - heading, 2 * math.pi)
        rows.append([target, (float(pos[0]), float(pos[1])), rel, math.hypot(dx, dy),
                     image_degrees(math.remainder(bearing - snap, 2 * math.pi)), []])
    kept: list[list] = []
    for row in sorted(rows, key=lambda r: (r[3], str(r[0]))):
        near = next((k for k in kept if math.dist(k[1], row[1]) < merge_distance), None)
        if near is not None:
            near[5].append(row[0])
        else:
            kept.append(row)
    kept.sort(key=lambda r: (round(r[4], 6), r[3]))
    return [Candidate(i + 1, t, p, rel, d, direction_of(rel), image_deg=deg, merged=tuple(m))
            for i, (t, p, rel, d, deg, m) in enumerate(kept)]


def directions_map(candidates: Sequence[Candidate]) -> dict[str, list[int]]:
    """Direction → marker ids in it, the one closest to the direction's centre first."""
    centre = {"front": 0.0, "left": math.pi / 2, "right": -math.pi / 2, "back": math.pi}
    out: dict[str, list[Candidate]] = {}
    for c in candidates:
        out.setdefault(c.direction, []).append(c)
    return {d: [c.marker for c in sorted(cs, key=lambda c: abs(math.remainder(c.relative_heading - centre[d], 2 * math.pi)))]
            for d, cs in out.items()}


def snapped_front(heading: float) -> int:
    """Index (into ``GLOBAL_HEADINGS``) of the global view nearest to ``heading``."""
    return int(round(heading / (math.pi / 2))) % 4


@functools.lru_cache(maxsize=16)
def marker_font(size: int) -> Any:
    """DejaVu Sans Bold (the copy matplotlib ships) at ``size`` pixels; Pillow's own scalable
    default font when matplotlib's file is missing."""
    import importlib.util
    import os

    from PIL import ImageFont

    spec = importlib.util.find_spec("matplotlib")
    for loc in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(loc, "mpl-data", "fonts", "ttf", "DejaVuSans-Bold.ttf")
        if os.path.isfile(path):
            return ImageFont.truetype(path, size)
    return ImageFont.load_default(size=size)


def marker_size(view_width: int) -> tuple[int, int]:
    """(font pixels, marker radius) for views ``view_width`` wide: digits about 9 % of the view
    width (at least 14 px), so a 4 × 224 px strip downsized to 512 px keeps ~9 px tall digits."""
    font_px = max(14, round(0.09 * view_width))
    return font_px, round(0.75 * font_px) + 2


def marker_layout(candidates: Sequence[Candidate], w: int, h: int, *, hfov_deg: float = 90.0,
                  camera_height: float = 1.25, top: int = 0) -> dict[int, tuple[float, float]]:
    """Marker id -> (x, y) centre in the stitched image (views ``w`` × ``h`` below a ``top`` px
    label band): in the view its ``image_deg`` falls in, where its floor point projects (clamped
    into the view); a marker that would cover a nearer one is moved up (or down)."""
    _, radius = marker_size(w)
    focal = (w / 2) / math.tan(math.radians(hfov_deg) / 2)
    out: dict[int, tuple[float, float]] = {}
    for c in sorted(candidates, key=lambda c: (c.distance, c.marker)):
        slot = min(3, int(c.image_deg // 90))
        ang = math.radians(c.image_deg - (45.0 + 90.0 * slot))  # from the view's centre, + to the right
        u = w / 2 + focal * math.tan(ang)
        v = h / 2 + focal * camera_height / max(c.distance * math.cos(ang), 0.3)
        x = slot * w + float(np.clip(u, radius, w - radius))
        y = float(np.clip(v, radius, h - radius)) + top
        for _ in range(8):  # move a marker that would cover another one up, then down
            if all(math.dist((x, y), p) >= 2 * radius + 1 for p in out.values()):
                break
            y = y - 2 * radius - 1 if y - 2 * radius - 1 >= top + radius else min(y + 2 * radius + 1, top + h - radius)
        out[c.marker] = (x, y)
    return out


def stitch(views: np.ndarray, heading: float, candidates: Sequence[Candidate], *, hfov_deg: float = 90.0,
           camera_height: float = 1.25, label_height: int | None = None) -> np.ndarray:
    """One RGB image: the four global ``views`` (4, H, W, 3; east, north, west, south) reordered
    [Left, Front, Right, Back] around the snapped ``heading``, each labelled, with a green
    numbered marker where each candidate's floor point projects, drawn once, in the view its
    ``image_deg`` falls in (clamped into it; markers that would overlap are moved apart)."""
    from PIL import Image, ImageDraw

    views = np.asarray(views, dtype=np.uint8)
    n, h, w = views.shape[:3]
    if n != 4:
        raise ValueError(f"stitch needs 4 views, got {n}")
    font_px, radius = marker_size(w)
    font = marker_font(font_px)
    label_font = marker_font(max(12, round(0.07 * w)))
    if label_height is None:
        label_height = max(22, round(0.1 * w))
    front = snapped_front(heading)
    canvas = Image.new("RGB", (4 * w, h + label_height), (20, 20, 20))
    draw = ImageDraw.Draw(canvas)
    layout = marker_layout(candidates, w, h, hfov_deg=hfov_deg, camera_height=camera_height, top=label_height)
    for slot, (label, quarter) in enumerate(VIEW_ORDER):
        g = (front + quarter) % 4
        canvas.paste(Image.fromarray(views[g]), (slot * w, label_height))
        draw.text((slot * w + 6, label_height / 2), f"View: {label}", fill=(255, 255, 255), font=label_font, anchor="lm")
    for c in candidates:
        x, y = layout[c.marker]
        draw.ellipse([x - radius, y - radius, x + radius, y + radius], fill=(30, 200, 60), outline=(255, 255, 255),
                     width=max(1, radius // 6))
        draw.text((x, y), str(c.marker), fill=(0, 0, 0), font=font, anchor="mm")
    return np.asarray(canvas)


class ViewRenderer:
    """Renders the four global 90° views at a position with a simulator of the scene (built once
    per scene description and render options, no other sensors). Used when neither the
    observations nor the view cache provide them."""

    def __init__(self, size: int = 224, hfov_deg: float = 90.0):
        self.size, self.hfov_deg = int(size), float(hfov_deg)
        self._desc: Any = None
        self._options: dict = {}
        self._sim: Any = None

    def render(self, desc: Any, body: Any, xy: Sequence[float], options: dict | None = None) -> np.ndarray:
        """(4, H, W, 3) uint8 views at ``xy`` facing east, north, west, south, rendered with the
        ``make_simulator`` render ``options`` (``quality``, ``objects``: the run's, from
        ``SceneContext.render_options``; none: the backend's defaults)."""
        from ...sim import make_simulator
        from ...sim.sensors import PanoramaSpec
        from ...sim.types import AgentPose

        options = dict(options or {})
        if self._desc is not desc or self._options != options:
            self.close()
            self._sim = make_simulator(desc, body, sensors=[], **options)
            self._desc, self._options = desc, options
        spec = PanoramaSpec.of(name="views", views=4, width=self.size, height=self.size, hfov_deg=self.hfov_deg,
                            modalities=("rgb",))
        return np.asarray(self._sim.render_at(AgentPose(float(xy[0]), float(xy[1]), 0.0), spec)["views_rgb"])

    def close(self) -> None:
        """Close the simulator, if any."""
        if self._sim is not None:
            self._sim.close()
        self._sim = self._desc = None
        self._options = {}
