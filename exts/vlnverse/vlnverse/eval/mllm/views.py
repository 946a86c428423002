"""The MLLM observation: four 90° views around a viewpoint, stitched agent-centred
[Left, Front, Right, Back] with labels, navigable candidates drawn as numbered markers (VLN-MME
Sec. 3.3, App. B).

Views are rendered (or cached) at the four *global* headings 0°, 90°, 180°, 270° (east, north,
west, south), so one set per viewpoint serves every agent heading: the agent's heading is
snapped to the nearest of them ("corrected heading") and the views are reordered around it.
Candidates are numbered 1..K by increasing heading relative to the agent, clockwise from
straight behind on the left (so left-to-right in the stitched image follows marker order).
"""
from __future__ import annotations

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

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (angles in degrees, 0.1 precision)."""
        return {"marker": self.marker, "target": self.target, "xy": [round(float(v), 3) for v in self.xy],
                "heading_deg": round(math.degrees(self.relative_heading), 1), "distance": round(self.distance, 2),
                "direction": self.direction, **({"caption": self.caption} if self.caption else {})}


def direction_of(relative_heading: float) -> str:
    """front / left / right / back for a heading relative to the agent (CCW+, radians)."""
    deg = math.degrees(math.atan2(math.sin(relative_heading), math.cos(relative_heading)))
    if -45.0 <= deg <= 45.0:
        return "front"
    if 45.0 < deg <= 135.0:
        return "left"
    if -135.0 <= deg < -45.0:
        return "right"
    return "back"


def make_candidates(xy: Sequence[float], heading: float, options: Sequence[tuple[Any, Sequence[float]]]) -> list[Candidate]:
    """Number ``options`` ((target, (x, y)) pairs) as markers 1..K seen from ``xy`` facing ``heading``."""
    rows = []
    for target, pos in options:
        dx, dy = float(pos[0]) - float(xy[0]), float(pos[1]) - float(xy[1])
        rel = math.atan2(math.sin(math.atan2(dy, dx) - heading), math.cos(math.atan2(dy, dx) - heading))
        rows.append((target, (float(pos[0]), float(pos[1])), rel, math.hypot(dx, dy)))
    # left to right as in the stitched image: from behind-left (+180°) down to behind-right (-180°)
    rows.sort(key=lambda r: (-r[2], r[3]))
    return [Candidate(i + 1, t, p, rel, d, direction_of(rel)) for i, (t, p, rel, d) in enumerate(rows)]


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


def stitch(views: np.ndarray, heading: float, candidates: Sequence[Candidate], *, hfov_deg: float = 90.0,
           camera_height: float = 1.25, label_height: int = 22) -> np.ndarray:
    """One RGB image: the four global ``views`` (4, H, W, 3; east, north, west, south) reordered
    [Left, Front, Right, Back] around the snapped ``heading``, each labelled, with a green
    numbered marker where each candidate's floor point projects (clamped into its view)."""
    from PIL import Image, ImageDraw

    views = np.asarray(views, dtype=np.uint8)
    n, h, w = views.shape[:3]
    if n != 4:
        raise ValueError(f"stitch needs 4 views, got {n}")
    front = snapped_front(heading)
    canvas = Image.new("RGB", (4 * w, h + label_height), (20, 20, 20))
    draw = ImageDraw.Draw(canvas)
    focal = (w / 2) / math.tan(math.radians(hfov_deg) / 2)
    radius = max(6, w // 22)
    for slot, (label, quarter) in enumerate(VIEW_ORDER):
        g = (front + quarter) % 4
        canvas.paste(Image.fromarray(views[g]), (slot * w, label_height))
        draw.text((slot * w + 6, 5), f"View: {label}", fill=(255, 255, 255))
        centre = GLOBAL_HEADINGS[g]
        agent_rel = heading - centre  # candidate headings are relative to the true heading
        for c in candidates:
            ang = math.remainder(c.relative_heading + agent_rel, 2 * math.pi)  # relative to this view's centre
            if abs(ang) > math.radians(hfov_deg) / 2 + 1e-9:
                continue
            u = w / 2 - focal * math.tan(ang)
            v = h / 2 + focal * camera_height / max(c.distance * math.cos(ang), 0.3)
            u = float(np.clip(u, radius, w - radius))
            v = float(np.clip(v, radius, h - radius)) + label_height
            x = slot * w + u
            draw.ellipse([x - radius, v - radius, x + radius, v + radius], fill=(30, 200, 60), outline=(255, 255, 255))
            text = str(c.marker)
            tw = draw.textlength(text)
            draw.text((x - tw / 2, v - 5), text, fill=(0, 0, 0))
    return np.asarray(canvas)


class ViewRenderer:
    """Renders the four global 90° views at a position with a simulator of the scene (built once
    per scene description, no other sensors). Used when neither the observations nor the view
    cache provide them."""

    def __init__(self, size: int = 224, hfov_deg: float = 90.0):
        self.size, self.hfov_deg = int(size), float(hfov_deg)
        self._desc: Any = None
        self._sim: Any = None

    def render(self, desc: Any, body: Any, xy: Sequence[float]) -> np.ndarray:
        """(4, H, W, 3) uint8 views at ``xy`` facing east, north, west, south."""
        from ...sim import make_simulator
        from ...sim.sensors import PanoramaSpec
        from ...sim.types import AgentPose

        if self._desc is not desc:
            self.close()
            self._sim = make_simulator(desc, body, sensors=[])
            self._desc = desc
        spec = PanoramaSpec(name="views", views=4, width=self.size, height=self.size, hfov_deg=self.hfov_deg,
                            modalities=("rgb",))
        return np.asarray(self._sim.render_at(AgentPose(float(xy[0]), float(xy[1]), 0.0), spec)["views_rgb"])

    def close(self) -> None:
        """Close the simulator, if any."""
        if self._sim is not None:
            self._sim.close()
        self._sim = self._desc = None
