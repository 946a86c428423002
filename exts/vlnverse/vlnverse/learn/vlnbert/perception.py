"""VLN-BERT's perception: the panorama through the waypoint predictor into view features and
candidates (``Perception``), with a monocular setup's turn candidates; candidate actions."""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from ...core.body import as_body
from ...core.errors import ConfigError
from ...sim.types import WaypointAction
from ..waypoints.data import PanoramaRenderer
from ..waypoints.grid import ObservationSetup
from ..waypoints.model import WaypointPredictor


def candidate_action(angle: float, distance: float) -> WaypointAction:
    """The waypoint action that goes ``distance`` m in direction ``angle`` (rad CCW, agent frame)
    and faces that direction."""
    return WaypointAction(float(distance * math.cos(angle)), float(distance * math.sin(angle)), float(angle))


def in_open_space(planner: Any, xy: Any, radius: float = 0.3, directions: int = 8) -> bool:
    """Whether ``xy`` and the points ``radius`` m away in ``directions`` directions are navigable."""
    ang = np.arange(directions) * 2 * math.pi / directions
    pts = np.concatenate([np.asarray(xy, dtype=float)[None, :2],
                          np.asarray(xy, dtype=float)[:2] + radius * np.stack([np.cos(ang), np.sin(ang)], 1)])
    return bool(planner.is_navigable(pts).all())


#: headings (degrees CCW, agent frame) of a monocular setup's turn candidates: with the 90° camera
#: the three turned views and the current one tile the circle (each turn lands just outside the
#: field of view), and each is a panorama view's centre (30° views)
TURN_ANGLES_DEG = (90.0, -90.0, 180.0)


def is_turn(cands: np.ndarray) -> np.ndarray:
    """(K,) bool: the valid rows of candidates (K, 3) at distance 0, a monocular setup's turns in place."""
    c = np.asarray(cands)
    return (c[:, 2] > 0.5) & (c[:, 1] == 0)


def relax_after(choice: int, cands: np.ndarray, empty: int) -> int:
    """The ``Perception`` relax count after a decision with candidates: 0, except that a turn in
    place keeps it (the empty predictions before it still count: turning back towards a path the
    predictor found nothing along must not restart from the strict threshold, or the no-candidate
    sweep and the turn repeat forever)."""
    return empty if choice < len(cands) and bool(is_turn(cands)[choice]) else 0


class Perception:
    """Panorama → (view features (V, F), candidates (K, 3) = angle, distance, valid) with a
    waypoint predictor and a renderer (one simulator per scene), as the ``observation`` setup
    (``ObservationSetup``) sees it (``rgb``: render RGB too, for a reader other than the predictor). ``relax`` (the number of consecutive empty predictions before
    this one) lowers the NMS threshold by ``RELAX`` per empty prediction, so turning in place and
    predicting again cannot repeat forever.

    A monocular setup also offers **turn candidates**: rows at ``TURN_ANGLES_DEG`` with distance 0
    (valid; ``is_turn``) after its n predicted ones, which it keeps to the best ``k - 3`` by the
    predictor's score (NMS picks in score order); executed, a turn is a rotation in place. The
    returned count is of the predicted candidates alone (0: none, turn by ``no_candidate_turn_deg``
    and relax, as before)."""

    RELAX = 0.7

    def __init__(self, predictor: WaypointPredictor, observation: ObservationSetup | None = None, rgb: bool = False):
        from ..waypoints.grid import PANORAMA_HFOV_DEG

        p = predictor.params
        self.predictor = predictor
        self.k = int(p["k"])
        self.observation = ObservationSetup.parse(observation)
        self.turns = np.radians(TURN_ANGLES_DEG) if self.observation.monocular else np.zeros(0)
        if self.observation.monocular and self.k <= len(self.turns):
            raise ConfigError(f"a waypoint predictor with k = {self.k} for a monocular setup", field="waypoint_predictor",
                              expected=f"k > {len(self.turns)} (the turn candidates take {len(self.turns)} slots)")
        self.visible = self.observation.visible(int(p["views"]), PANORAMA_HFOV_DEG)
        self.renderer = PanoramaRenderer(p["views"], p["image_size"], rgb=p["rgb"] or rgb, max_depth=p["max_depth"])
        if self.observation.monocular:  # the unseen views read as blank for everyone downstream
            render, hidden = self.renderer.render, ~self.visible

            def blank(*args: Any, **kwargs: Any) -> dict[str, np.ndarray]:
                img = dict(render(*args, **kwargs))
                for key in ("depth", "rgb"):
                    if key in img:
                        img[key] = np.array(img[key])
                        img[key][hidden] = 0
                return img

            self.renderer.render = blank

    @torch.no_grad()
    def __call__(self, desc: Any, body: Any, pose: tuple[float, float, float], relax: int = 0,
                 options: dict[str, str] | None = None) -> tuple[np.ndarray, np.ndarray, int]:
        """(view features, padded candidates (k, 3), number of candidates) at ``pose``, the panorama
        drawn with the render ``options`` (the scene context's ``render_options``; None: the defaults)."""
        img = self.renderer.render(desc, body, pose, options=options or {})
        dev = next(self.predictor.parameters()).device
        d = torch.from_numpy(img["depth"])[None].to(dev)
        r = torch.from_numpy(img["rgb"])[None].to(dev) if "rgb" in img else None
        self.predictor.eval()
        feats = self.predictor.view_features(d, r)
        heat = torch.sigmoid(self.predictor(d, r))[0].cpu().numpy()
        cands = self.predictor.candidates(heat, img["depth"], threshold=self.predictor.params["threshold"] * self.RELAX ** relax,
                                          body=None if body is None else as_body(body))
        if self.observation.monocular:
            feats[:, torch.from_numpy(~self.visible).to(dev)] = 0.0
            cands = cands[self.observation.in_view(cands[:, 0])] if len(cands) else cands
            cands = cands[: self.k - len(self.turns)]  # the turns' slots: the lowest-scored give way
        out = np.zeros((self.k, 3), dtype=np.float32)
        out[: len(cands), :2] = cands
        out[: len(cands), 2] = 1.0
        if len(self.turns):
            out[len(cands): len(cands) + len(self.turns), 0] = self.turns
            out[len(cands): len(cands) + len(self.turns), 2] = 1.0
        return feats[0].cpu().numpy().astype(np.float32), out, len(cands)
