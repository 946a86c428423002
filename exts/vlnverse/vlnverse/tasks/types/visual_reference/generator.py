"""Visual-reference navigation: coarse-grained plus an image of the goal rendered at the goal.

The image is rendered by ``ctx.renderer(x, y, yaw, pitch)`` (injected by the caller; the task
layer never imports a simulator) facing the target object from a navigable point near it in
the goal point's open space, and is written as ``<assets_dir>/reference/<episode_id>.png``
(``assets_dir``: the dataset's ``assets/`` folder; default the package cache's).

**The target is visible, rendered, not assumed.** The renderer must also draw instance masks
(``ctx.renderer.instances(x, y, yaw, pitch)`` → (H, W) instance ids, same camera, and
``ctx.renderer.hfov_deg``; ``dataset.simulator_renderer_factory`` provides both from the
simulator's instance camera, ray-cast where OpenGL is missing). Candidate viewpoints are tried
in order (``reference_viewpoints``: 2.0, 1.6, 1.2, 0.9, 0.6 m from the target centre, on the
target→goal-point ray and rotated ±30°, ±60°) and the first one is kept whose rendered view

* shows the target's instance on at least ``min_mask_fraction`` of the pixels (default 0.02), and
* is not occluded at its centre: at least 5 of the 9 pixels around the projection of the
  target's centre belong to the target.

A target with no such view is rejected (the generator samples another target).
``info["reference_image"]`` holds the image path relative to the dataset root,
``info["reference_view"]`` the camera pose and ``info["reference_visibility"]`` the measured
``mask_fraction``, ``centre_pixels`` (of 9) and the ``min_mask_fraction`` threshold. Config
``params`` as for coarse-grained plus ``pitch_limit_deg`` (camera pitch clamp, default 30) and
``min_mask_fraction``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ....core.config import require
from ....core.params import param
from ....core.errors import ConfigError
from ....core.io import atomic_path
from ....core.precision import ANGLE_DECIMALS, LENGTH_DECIMALS, round_float
from ...base import SceneContext, register_task
from ...episode import Episode
from ..coarse_grained.generator import CoarseGrained, CoarseGrainedParams
from ..goals import GoalObject

def reference_view(goal_xy, target_position, camera_height: float, floor_z: float = 0.0,
                   pitch_limit_deg: float = 30.0) -> dict:
    """Camera pose at ``goal_xy`` looking at the target centre: ``{x, y, yaw, pitch}`` (radians),
    rounded to the precision episodes are written with, so the stored view is the one rendered."""
    dx = float(target_position[0]) - float(goal_xy[0])
    dy = float(target_position[1]) - float(goal_xy[1])
    horizontal = max(math.hypot(dx, dy), 1e-6)
    dz = float(target_position[2]) - (floor_z + camera_height)
    limit = math.radians(pitch_limit_deg)
    pitch = float(np.clip(math.atan2(dz, horizontal), -limit, limit))
    return {"x": round_float(goal_xy[0], LENGTH_DECIMALS), "y": round_float(goal_xy[1], LENGTH_DECIMALS),
            "yaw": round_float(math.atan2(dy, dx), ANGLE_DECIMALS), "pitch": round_float(pitch, ANGLE_DECIMALS)}


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


#: Default share of the reference image the target's instance mask must cover.
MIN_MASK_FRACTION = 0.02
#: Pixels (of the 3×3 window around the target centre's projection) that must show the target.
CENTRE_PIXELS = 5


def reference_viewpoints(planner, goal_xy, target_position, distances=(2.0, 1.6, 1.2, 0.9, 0.6),
                         angles_deg=(0.0, 30.0, -30.0, 60.0, -60.0)) -> np.ndarray:
    """Candidate places (K, 2) to stand for the reference image, best first: navigable points
    ``distances`` metres from the target centre on the target→goal-point ray (then rotated by
    ``angles_deg``) with a free straight line to the goal point, then the goal point itself.

    Standing back keeps tall targets framed; the closer ones make small targets big enough; the
    free line to the goal point keeps the viewpoint in the goal's open space.
    """
    goal = np.asarray(goal_xy, dtype=float)[:2]
    centre = np.asarray(target_position, dtype=float)[:2]
    base = math.atan2(goal[1] - centre[1], goal[0] - centre[0]) if np.hypot(*(goal - centre)) > 1e-6 else 0.0
    cand = np.array([centre + d * np.array([math.cos(base + math.radians(a)), math.sin(base + math.radians(a))])
                     for d in distances for a in angles_deg])
    ok = planner.is_navigable(cand)
    if ok.any():
        ok[ok] = planner.segments_free(cand[ok], np.repeat(goal[None], int(ok.sum()), axis=0))
    return np.concatenate([cand[ok], goal[None]])


def reference_viewpoint(planner, goal_xy, target_position, distances=(2.0, 1.6, 1.2),
                        angles_deg=(0.0, 30.0, -30.0, 60.0, -60.0)) -> np.ndarray:
    """The first of ``reference_viewpoints`` (the goal point when none qualifies)."""
    return reference_viewpoints(planner, goal_xy, target_position, distances, angles_deg)[0]


def target_visibility(mask: np.ndarray, instance_id: int, view: dict, target_position, camera_height: float,
                      floor_z: float, hfov_deg: float) -> dict:
    """How well a rendered instance ``mask`` (H, W) shows ``instance_id`` from ``view``:
    ``mask_fraction`` (share of pixels) and ``centre_pixels`` (of the 3×3 window around the
    projection of the target centre, how many show the target; 0 when it projects outside)."""
    mask = np.asarray(mask)
    if mask.ndim != 2:
        raise ConfigError(f"renderer.instances returned an array of shape {mask.shape}", field="renderer",
                          expected="instance ids of shape (H, W)")
    h, w = mask.shape
    hit = mask == int(instance_id)
    fraction = float(hit.mean())
    # camera frame: the yaw points at the target, so it projects on the centre column; its row
    # follows from the elevation relative to the (clamped) pitch, square pixels, focal from hfov.
    dx, dy = float(target_position[0]) - view["x"], float(target_position[1]) - view["y"]
    elevation = math.atan2(float(target_position[2]) - (floor_z + camera_height), max(math.hypot(dx, dy), 1e-6))
    offset = elevation - view["pitch"]
    centre = 0
    if abs(offset) < math.pi / 2:
        focal = (w / 2) / math.tan(math.radians(hfov_deg) / 2)
        row = int(math.floor(h / 2 - focal * math.tan(offset)))
        col = w // 2
        if 0 <= row < h:
            centre = int(hit[max(row - 1, 0):row + 2, max(col - 1, 0):col + 2].sum())
    return {"mask_fraction": round(fraction, 6), "centre_pixels": centre}


@dataclass
class VisualReferenceParams(CoarseGrainedParams):
    """``params`` of ``config.yaml`` (beside this module): the coarse-grained ones plus the largest
    camera pitch (degrees) of the reference image."""

    pitch_limit_deg: float = param(30.0, low=0.0, high=90.0)
    min_mask_fraction: float = MIN_MASK_FRACTION

    def validate(self) -> None:
        """The coarse-grained checks, a pitch limit in (0, 90] degrees and a mask share in (0, 1)."""
        super().validate()
        require(0.0 < self.pitch_limit_deg <= 90.0, "pitch_limit_deg", f"got {self.pitch_limit_deg}",
                "an angle in (0, 90] degrees")
        require(0.0 < self.min_mask_fraction < 1.0, "min_mask_fraction", f"got {self.min_mask_fraction}",
                "a fraction in (0, 1)")


@register_task("visual_reference", config="config.yaml")
class VisualReference(CoarseGrained):
    """Coarse-grained targets with a reference image of the goal view."""

    needs_renderer = True

    template_task = "visual_reference"
    Params = VisualReferenceParams

    def __init__(self, config=None, assets_dir: str | Path | None = None):
        super().__init__(config)
        #: The dataset's ``assets/`` folder; reference images go to ``<assets_dir>/reference/``.
        self.assets_dir = Path(assets_dir) if assets_dir is not None else None
        #: Reference view per (scene, target): (view, visibility) or None when none shows it.
        self._views: dict[tuple[str, int], tuple[dict, dict] | None] = {}

    @property
    def min_mask_fraction(self) -> float:
        """Share of the reference image the target must cover (``params.min_mask_fraction``)."""
        return float(self.params.min_mask_fraction)

    def _assets(self) -> Path:
        if self.assets_dir is not None:
            return self.assets_dir
        from ....paths import cache_dir

        return cache_dir() / "assets"

    def generate(self, ctx: SceneContext, rng: np.random.Generator, n: int, split: str) -> list[Episode]:
        """As coarse-grained; fails clearly when the context has no renderer."""
        if ctx.renderer is None:
            raise ConfigError(f"task 'visual_reference' renders a reference image at each goal and needs a "
                              f"renderer for scene '{ctx.scene_id}' (run it through 'vlnverse data generate', "
                              f"which injects the simulator's camera, or pass renderer= to load_scene_context)",
                              field="renderer", expected="a callable (x, y, yaw, pitch) -> RGB image")
        if not callable(getattr(ctx.renderer, "instances", None)):
            raise ConfigError(f"task 'visual_reference' checks that the target is visible in each reference image "
                              f"and needs instance masks for scene '{ctx.scene_id}'", field="renderer.instances",
                              expected="a method (x, y, yaw, pitch) -> (H, W) instance ids, as "
                                       "dataset.simulator_renderer_factory provides")
        return super().generate(ctx, rng, n, split)

    def goal_view(self, ctx: SceneContext, goal: GoalObject) -> tuple[dict, dict] | None:
        """The reference view of ``goal`` and its measured visibility: the first candidate of
        ``reference_viewpoints`` whose rendered instance mask passes both checks (module
        docstring); None when none does. Cached per scene and target."""
        key = (ctx.scene_id, int(goal.instance_id))
        if key not in self._views:
            target = goal.facts.target
            height = float(ctx.body.camera_height)
            hfov = float(getattr(ctx.renderer, "hfov_deg", 90.0))
            limit = self.params.pitch_limit_deg
            found = None
            for stand in reference_viewpoints(ctx.planner, goal.goal_xy, target.position):
                view = reference_view(stand, target.position, height, ctx.floor_z, limit)
                mask = ctx.renderer.instances(view["x"], view["y"], view["yaw"], view["pitch"])
                seen = target_visibility(mask, target.instance_id, view, target.position, height, ctx.floor_z, hfov)
                if seen["mask_fraction"] >= self.min_mask_fraction and seen["centre_pixels"] >= CENTRE_PIXELS:
                    found = (view, {**seen, "min_mask_fraction": self.min_mask_fraction})
                    break
            self._views[key] = found
        return self._views[key]

    def finish_episode(self, ctx: SceneContext, rng: np.random.Generator, goal: GoalObject,
                       episode: Episode) -> Episode | None:
        """Render the goal view, save it under ``assets/`` and record it in ``info``; None
        (the target is rejected) when no viewpoint shows the target clearly."""
        chosen = self.goal_view(ctx, goal)
        if chosen is None:
            self.rejected_targets.add(int(goal.instance_id))
            return None
        view, seen = chosen
        image = ctx.renderer(view["x"], view["y"], view["yaw"], view["pitch"])
        assets = self._assets()
        save_png(assets / "reference" / f"{episode.episode_id}.png", image)
        relative = f"{assets.name}/reference/{episode.episode_id}.png"
        episode.info["reference_image"] = relative
        episode.info["reference_view"] = view
        episode.info["reference_visibility"] = seen
        return episode
