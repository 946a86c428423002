"""The pretraining data: frames rendered at seeded poses with labels that come free with the
render (per-cell semantic histograms and depth, the room type)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ...core.errors import ConfigError


#: cells per side of the spatial grid the semantic and depth targets are given on (the encoders' 4×4)
GRID = 4


def _semantic_classes() -> tuple[str, ...]:
    from ...scenes.catalog import CATEGORIES

    structure = ("wall", "floor", "ceiling", "door_frame", "window", "skirting", "rug", "painting", "ceiling_light")
    return ("background", *structure, *sorted(set(CATEGORIES) - set(structure)), "other")


def _room_classes() -> tuple[str, ...]:
    from ...scenes.catalog import ROOM_TYPES

    return (*ROOM_TYPES, "other", "none")


SEMANTIC_CLASSES = _semantic_classes()
ROOM_CLASSES = _room_classes()


@dataclass
class FrameData:
    """Rendered frames and their labels: rgb (N, H, W, 3) uint8, depth (N, H, W) float16 (metres),
    semantic (N, GRID², classes) float16 cell histograms, room (N,) int64, the pose records."""

    rgb: np.ndarray
    depth: np.ndarray
    semantic: np.ndarray
    room: np.ndarray
    poses: list[dict[str, Any]]

    def __len__(self) -> int:
        return len(self.room)


class FrameRenderer:
    """RGB, depth and semantic frames of one camera rig at any pose (``render_at``), one simulator
    per scene description, drawn with the ``make_simulator`` render ``options`` (``quality``,
    ``objects``; ``RenderConfig.options()``)."""

    def __init__(self, size: int = 64, hfov_deg: float = 90.0, max_depth: float = 10.0,
                 options: dict[str, str] | None = None):
        from ...sim.sensors import CameraSpec

        self.specs = [CameraSpec(name=k, kind=k, width=size, height=size, hfov_deg=hfov_deg, max_depth=max_depth)
                      for k in ("rgb", "depth", "semantic")]
        self.options = dict(options or {})
        self._desc: Any = None
        self._sim: Any = None
        self._lut: np.ndarray | None = None

    def render(self, desc: Any, body: Any, pose: tuple[float, float, float]) -> dict[str, np.ndarray]:
        """``rgb`` uint8, ``depth`` float32 metres, ``semantic`` (H, W) ids into ``SEMANTIC_CLASSES``."""
        from ...sim import make_simulator
        from ...sim.types import AgentPose

        if self._desc is not desc:
            self.close()
            self._sim = make_simulator(desc, body, sensors=[], **self.options)
            self._desc = desc
            index = {n: i for i, n in enumerate(SEMANTIC_CLASSES)}
            self._lut = np.array([index.get(n, index["other"]) for n in self._sim.semantic_labels], dtype=np.int64)
        at = AgentPose(float(pose[0]), float(pose[1]), float(pose[2]))
        out: dict[str, np.ndarray] = {}
        for spec in self.specs:
            out.update(self._sim.render_at(at, spec))
        sem = np.asarray(out["semantic"], dtype=np.int64)
        return {"rgb": np.asarray(out["rgb"]), "depth": np.asarray(out["depth"], dtype=np.float32),
                "semantic": self._lut[np.clip(sem, 0, len(self._lut) - 1)]}

    def close(self) -> None:
        """Close the simulator, if any."""
        if self._sim is not None:
            self._sim.close()
        self._sim = self._desc = None


def cell_histograms(semantic: np.ndarray, classes: int, grid: int = GRID) -> np.ndarray:
    """(grid², classes) float32 class frequencies of an (H, W) id image per cell (row-major, as
    the encoders' flattened spatial grid)."""
    h, w = semantic.shape
    rows = np.minimum(np.arange(h) * grid // h, grid - 1)
    cols = np.minimum(np.arange(w) * grid // w, grid - 1)
    cell = (rows[:, None] * grid + cols[None, :]).ravel()
    counts = np.zeros((grid * grid, classes), dtype=np.float32)
    np.add.at(counts, (cell, semantic.ravel()), 1.0)
    return counts / counts.sum(1, keepdims=True).clip(min=1.0)


def room_class(ctx: Any, xy: np.ndarray) -> int:
    """Index into ``ROOM_CLASSES`` of the room containing world point ``xy`` (``none`` outside)."""
    rc = ctx.maps.navigable.world_to_cell(np.asarray(xy, dtype=float)[None])[0]
    rmap = ctx.room_map
    rid = int(rmap[rc[0], rc[1]]) if 0 <= rc[0] < rmap.shape[0] and 0 <= rc[1] < rmap.shape[1] else -1
    if rid < 0:
        return ROOM_CLASSES.index("none")
    kind = {r.room_id: r.room_type for r in ctx.desc.rooms}.get(rid, "other")
    return ROOM_CLASSES.index(kind) if kind in ROOM_CLASSES else ROOM_CLASSES.index("other")


def build_frames(scenes: list, poses_per_scene: int, seed: int, *, renderer: FrameRenderer,
                 context_loader: Callable[[Any], Any], progress: bool = True) -> FrameData:
    """Render ``poses_per_scene`` seeded poses (navigable cell, uniform heading) of each scene."""
    from tqdm import tqdm

    rgb, depth, sem, room, poses = [], [], [], [], []
    bar = tqdm(total=len(scenes) * poses_per_scene, desc="render frames", unit="frame", disable=not progress)
    for i, scene in enumerate(scenes):
        ctx = context_loader(scene)
        rng = np.random.default_rng([seed, i])
        for xy in ctx.planner.sample_navigable_points(rng, poses_per_scene):
            yaw = float(rng.uniform(-math.pi, math.pi))
            img = renderer.render(ctx.desc, ctx.body, (float(xy[0]), float(xy[1]), yaw))
            rgb.append(img["rgb"])
            depth.append(img["depth"].astype(np.float16))
            sem.append(cell_histograms(img["semantic"], len(SEMANTIC_CLASSES)).astype(np.float16))
            room.append(room_class(ctx, xy))
            poses.append({"scene": ctx.scene_id, "x": round(float(xy[0]), 3), "y": round(float(xy[1]), 3),
                          "yaw": round(yaw, 4)})
            bar.update(1)
    bar.close()
    if not poses:
        raise ConfigError("no navigable poses rendered", field="scenes", expected="scenes with navigable space")
    return FrameData(np.stack(rgb), np.stack(depth), np.stack(sem), np.asarray(room, dtype=np.int64), poses)
