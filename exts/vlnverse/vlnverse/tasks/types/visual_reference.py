"""Visual-reference navigation: coarse-grained plus an image of the goal rendered at the goal.

The image is rendered by ``ctx.renderer(x, y, yaw, pitch)`` (injected by the caller; the task
layer never imports a simulator) facing the target object from a navigable point 1.2–2 m from
it in the goal point's open space (``reference_viewpoint``; well inside the success radius), and is
written as ``<assets_dir>/reference/<episode_id>.png`` (``assets_dir``: the dataset's ``assets/``
folder; default the package cache's). ``info["reference_image"]`` holds that path relative to
the dataset root (the folder holding ``assets/`` and the episode files) and
``info["reference_view"]`` the camera pose. Config ``params`` as for coarse-grained plus
``pitch_limit_deg`` (camera pitch clamp, default 30).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...core.errors import ConfigError
from ...core.io import atomic_path
from ..base import SceneContext, register_task
from ..episode import Episode
from .coarse_grained import CoarseGrained, CoarseGrainedParams
from .goals import GoalObject

def reference_view(goal_xy, target_position, camera_height: float, floor_z: float = 0.0,
                   pitch_limit_deg: float = 30.0) -> dict:
    """Camera pose at ``goal_xy`` looking at the target centre: ``{x, y, yaw, pitch}`` (radians)."""
    dx = float(target_position[0]) - float(goal_xy[0])
    dy = float(target_position[1]) - float(goal_xy[1])
    horizontal = max(math.hypot(dx, dy), 1e-6)
    dz = float(target_position[2]) - (floor_z + camera_height)
    limit = math.radians(pitch_limit_deg)
    pitch = float(np.clip(math.atan2(dz, horizontal), -limit, limit))
    return {"x": float(goal_xy[0]), "y": float(goal_xy[1]), "yaw": math.atan2(dy, dx), "pitch": pitch}


def save_png(path: Path, image: np.ndarray) -> Path:
    """Write an RGB uint8 (H, W, 3) image as PNG atomically."""
    from PIL import Image

    arr = np.asarray(image)
    if arr.ndim != 3 or arr.shape[2] not in (3, 4):
        raise ConfigError(f"renderer returned an array of shape {arr.shape}", field="renderer",
                          expected="an RGB image of shape (H, W, 3)")
    if arr.dtype != np.uint8:
        arr = np.clip(arr * (255.0 if arr.max() <= 1.0 else 1.0), 0, 255).astype(np.uint8)
    with atomic_path(path) as tmp:
        Image.fromarray(arr[..., :3]).save(tmp, format="PNG")
    return path


def reference_viewpoint(planner, goal_xy, target_position, distances=(2.0, 1.6, 1.2),
                        angles_deg=(0.0, 30.0, -30.0, 60.0, -60.0)) -> np.ndarray:
    """Where to stand for the reference image: a navigable point ``distances`` metres from the
    target centre, on the target→goal-point ray (then rotated by ``angles_deg``), with a free
    straight line to the goal point; the goal point itself when none qualifies.

    Standing back keeps tall or thin targets (floor lamps, wardrobes) framed instead of filling
    the view; the free line to the goal point keeps the viewpoint in the goal's open space.
    """
    goal = np.asarray(goal_xy, dtype=float)[:2]
    centre = np.asarray(target_position, dtype=float)[:2]
    base = math.atan2(goal[1] - centre[1], goal[0] - centre[0]) if np.hypot(*(goal - centre)) > 1e-6 else 0.0
    cand = np.array([centre + d * np.array([math.cos(base + math.radians(a)), math.sin(base + math.radians(a))])
                     for a in angles_deg for d in distances])
    ok = planner.is_navigable(cand)
    if ok.any():
        ok[ok] = planner.segments_free(cand[ok], np.repeat(goal[None], int(ok.sum()), axis=0))
    return cand[int(np.argmax(ok))] if ok.any() else goal


@dataclass
class VisualReferenceParams(CoarseGrainedParams):
    """``params`` of ``tasks/visual_reference.yaml``: the coarse-grained ones plus the largest
    camera pitch (degrees) of the reference image."""

    pitch_limit_deg: float = 30.0


@register_task("visual_reference")
class VisualReference(CoarseGrained):
    """Coarse-grained targets with a reference image of the goal view."""

    needs_renderer = True

    template_task = "visual_reference"
    Params = VisualReferenceParams
    def __init__(self, config=None, assets_dir: str | Path | None = None):
        super().__init__(config)
        #: The dataset's ``assets/`` folder; reference images go to ``<assets_dir>/reference/``.
        self.assets_dir = Path(assets_dir) if assets_dir is not None else None

    def _assets(self) -> Path:
        if self.assets_dir is not None:
            return self.assets_dir
        from ...paths import cache_dir

        return cache_dir() / "assets"

    def generate(self, ctx: SceneContext, rng: np.random.Generator, n: int, split: str) -> list[Episode]:
        """As coarse-grained; fails clearly when the context has no renderer."""
        if ctx.renderer is None:
            raise ConfigError(f"task 'visual_reference' renders a reference image at each goal and needs a "
                              f"renderer for scene '{ctx.scene_id}' (run it through 'vlnverse data generate', "
                              f"which injects the simulator's camera, or pass renderer= to load_scene_context)",
                              field="renderer", expected="a callable (x, y, yaw, pitch) -> RGB image")
        return super().generate(ctx, rng, n, split)

    def finish_episode(self, ctx: SceneContext, rng: np.random.Generator, goal: GoalObject, episode: Episode) -> Episode:
        """Render the goal view, save it under ``assets/`` and record it in ``info``."""
        stand = reference_viewpoint(ctx.planner, goal.goal_xy, goal.facts.target.position)
        view = reference_view(stand, goal.facts.target.position, float(ctx.body.camera_height),
                              ctx.floor_z, self.params.pitch_limit_deg)
        image = ctx.renderer(view["x"], view["y"], view["yaw"], view["pitch"])
        assets = self._assets()
        save_png(assets / "reference" / f"{episode.episode_id}.png", image)
        relative = f"{assets.name}/reference/{episode.episode_id}.png"
        episode.info["reference_image"] = relative
        episode.info["reference_view"] = view
        return episode
