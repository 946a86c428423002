"""HNR's perception (the cloud's inputs of the last panorama) and teacher: VLN-BERT's waypoint
oracle recording them."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..topomap import TopoMap, candidate_xy, hop_action
from ..vlnbert.perception import Perception, candidate_action
from ..vlnbert.teacher import VLNBertTeacher, VLNBertTeacherAgent
from .cloud import UNSEEN
from .geometry import cell_depths, view_depths
from .grid_encoders import make_grid_encoder

class HNRPerception(Perception):
    """VLN-BERT's perception that also keeps the cloud's inputs of the last panorama: with
    ``grid`` > 0 the per-cell depths (``last_depth``, (V, g, g)) and the grid features of
    ``encoder`` (``last_grid``, (V, C, g, g): ``WaypointPredictor.grid_features`` by default, or a
    ``PretrainedGridEncoder``); with ``grid`` 0 the per-view depths (V,)."""

    def __init__(self, predictor: Any, grid: int = 0, observation: Any = None, encoder: Any = None):
        encoder = predictor if encoder is None else encoder
        super().__init__(predictor, observation, rgb=bool(getattr(encoder, "needs_rgb", False)))
        render = self.renderer.render
        self.grid = int(grid)
        self.last_depth: np.ndarray | None = None
        self.last_grid: np.ndarray | None = None
        hidden = ~self.visible

        @torch.no_grad()
        def capture(*args: Any, **kwargs: Any) -> dict[str, np.ndarray]:
            img = render(*args, **kwargs)
            max_depth = predictor.params["max_depth"]
            if not self.grid:
                self.last_depth = view_depths(img["depth"], max_depth)
                self.last_depth[hidden] = UNSEEN
                return img
            self.last_depth = cell_depths(img["depth"], self.grid, max_depth)
            dev = next(predictor.parameters()).device
            d = torch.from_numpy(img["depth"])[None].to(dev)
            r = torch.from_numpy(img["rgb"])[None].to(dev) if "rgb" in img else None
            self.last_grid = encoder.grid_features(d, r, self.grid)[0].cpu().numpy().astype(np.float32)
            self.last_depth[hidden], self.last_grid[hidden] = UNSEEN, 0.0
            return img

        self.renderer.render = capture


@dataclass(frozen=True)
class HNRTeacher(VLNBertTeacher):
    """VLN-BERT's waypoint oracle, recording also the cloud's inputs (``HNRPerception``: per-cell
    depths and grid features, or per-view depths with ``grid`` 0) and the pose."""

    grid: int = 0
    #: the cloud's grid encoder's file (``cloud_encoder``'s path or weights), trunk and type; None: the predictor's
    encoder_path: str | None = None
    encoder_trunk: str = "depth"
    encoder_type: str = "pretrained"
    #: a ``clip_vit`` encoder's ``heads`` (0: its default)
    encoder_heads: int = 0

    #: GAMA's global actions: label over the current candidates, STOP and the earlier frontier
    #: nodes of a ``topomap.TopoMap`` (``merge_radius``, ``frontier_cap``); False: the candidates and STOP
    global_actions: bool = False
    merge_radius: float = 0.5
    frontier_cap: int = 16

    @property
    def encoder_spec(self) -> dict[str, Any]:
        """The ``cloud_encoder_spec`` of the recorded grid encoder."""
        if not self.encoder_path:
            return {"type": "predictor"}
        spec = {"type": self.encoder_type, ("path" if self.encoder_type == "pretrained" else "weights"): self.encoder_path}
        if self.encoder_type in ("pretrained", "cnn"):
            spec["trunk"] = self.encoder_trunk
        return {**spec, "heads": self.encoder_heads} if self.encoder_heads else spec

    @property
    def key(self) -> dict[str, Any]:
        """VLN-BERT's, the grid, and the cloud encoder by its file's content (a changed file: a new cache)."""
        key = {**super().key, "kind": "hnr", "grid": self.grid}
        if self.global_actions:
            key["global_actions"] = {"merge_radius": self.merge_radius, "frontier": self.frontier_cap}
        if self.encoder_path:
            from pathlib import Path

            from ...core.cache_key import sha256_file
            from ..encoder.files import _paths

            if self.encoder_type == "pretrained":  # the key of caches written before the other types
                enc, file = {"trunk": self.encoder_trunk}, _paths(self.encoder_path)[0]
            else:
                enc = {k: v for k, v in self.encoder_spec.items() if k != "weights"}
                file = Path(self.encoder_path).expanduser()
            key["cloud_encoder"] = {**enc, "sha256": sha256_file(file)[:16]}
        return key

    def grid_encoder(self, predictor: Any) -> Any:
        """What computes the grid features: the predictor, or the ``cloud_encoder``."""
        p = predictor.params
        enc = make_grid_encoder(self.encoder_spec, p["image_size"], p["max_depth"])
        return predictor if enc is None else enc

    @property
    def extra_fields(self) -> dict[str, list[int]]:
        fields = super().extra_fields
        v, g = fields["view_feats"][0], self.grid
        if not g:
            return {**fields, "view_depth": [v], "world_pose": [3]}
        c = self.grid_encoder(self._predictor()).grid_channels
        return {**fields, "view_depth": [v, g, g], "view_grid": [v, c, g, g], "world_pose": [3]}

    def make_agent(self, *, learner: Any = None, beta: float = 1.0, sensors: tuple[str, ...] = (),
                   seed: int = 0) -> "HNRTeacherAgent":
        return HNRTeacherAgent(self, learner=learner, beta=beta, sensors=sensors, seed=seed)


class HNRTeacherAgent(VLNBertTeacherAgent):
    """``VLNBertTeacherAgent`` with the per-view depths and the pose in every recorded step."""

    name = "hnr_teacher"

    def __init__(self, spec: HNRTeacher, **kwargs: Any):
        super().__init__(spec, **kwargs)
        predictor = self.perception.predictor
        self.perception = HNRPerception(predictor, spec.grid, spec.observation, spec.grid_encoder(predictor))
        self.topo: TopoMap | None = None
        self.hops: list[np.ndarray] = []

    def reset(self, episode: Any, context: Any) -> None:
        """A new episode: with global actions a fresh topological map and no pending hops."""
        super().reset(episode, context)
        self.topo = TopoMap(self.spec.merge_radius, self.spec.frontier_cap) if self.spec.global_actions else None
        self.hops = []

    def oracle(self, state: Any, cands: np.ndarray, n: int) -> int:
        """VLN-BERT's oracle over the current candidates and STOP; with global actions the map is
        updated first and an earlier frontier node f wins when DUET's teacher cost, the trip's
        length plus f's geodesic distance to the goal, is below the chosen candidate's (its
        straight hop plus its geodesic distance): index ``K + 1 + i`` of ``topo.earlier()[i]``."""
        if self.topo is None:
            return super().oracle(state, cands, n)
        pose = state.pose
        world = np.array([pose.x, pose.y, pose.yaw], dtype=np.float32)  # as recorded (world_pose)
        self.topo.arrive(world)
        self.topo.observe(world, cands, len(self.steps))
        return self.global_oracle(state, cands, super().oracle(state, cands, n))

    def global_oracle(self, state: Any, cands: np.ndarray, local: int) -> int:
        """The global label given the local one (see ``oracle``; STOP stays STOP)."""
        k = len(cands)
        earlier = self.topo.earlier()
        if local == k or not earlier:
            return local
        xy = self.topo.visited[self.topo.current]
        planner = self.context.planner
        distance, _ = self.target(state)  # the next sub-goal of a long-horizon episode, else the goal

        def geo(pts: np.ndarray) -> np.ndarray:
            return np.where(planner.is_navigable(pts), np.asarray(distance(pts), dtype=float), np.inf)

        c = candidate_xy(np.asarray([state.pose.x, state.pose.y, state.pose.yaw], dtype=np.float32), cands[local:local + 1])
        best = float(np.linalg.norm(c[0] - xy) + geo(c)[0])
        pts = np.stack([f.xy for f in earlier])
        cost = np.array([self.topo.travel(f) for f in earlier]) + geo(pts)
        i = int(np.argmin(cost))
        return k + 1 + i if cost[i] < best - 1e-6 else local

    def execute(self, choice: int, cands: np.ndarray, state: Any) -> Any:
        """A candidate or STOP as VLN-BERT; an earlier frontier node (``choice`` > K): the first
        hop of the trip through visited nodes, the others queued for the next steps."""
        k = len(cands)
        if choice <= k:
            return super().execute(choice, cands, state)
        path = self.topo.path(self.topo.earlier()[choice - k - 1])
        self.hops = path[1:]
        return candidate_action(*hop_action((state.pose.x, state.pose.y, state.pose.yaw), path[0]))

    def act(self, observations: dict[str, Any], state: Any) -> Any:
        pose = state.pose
        if self.hops:  # the rest of a trip to a frontier node: a waypoint hop, no decision, nothing recorded
            return candidate_action(*hop_action((pose.x, pose.y, pose.yaw), self.hops.pop(0)))
        if self.learner is not None:  # the learner's ``choose`` reads the same panorama's depths
            self.learner.memory["sense"] = (self.perception, (pose.x, pose.y, pose.yaw))
        n = len(self.steps)
        action = super().act(observations, state)
        if len(self.steps) > n:
            self.steps[-1]["view_depth"] = self.perception.last_depth.copy()
            if self.spec.grid:
                self.steps[-1]["view_grid"] = self.perception.last_grid.copy()
            self.steps[-1]["world_pose"] = np.array([pose.x, pose.y, pose.yaw], dtype=np.float32)
        return action
