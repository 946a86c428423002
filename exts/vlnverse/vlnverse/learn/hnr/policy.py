"""The ``hnr`` policy (VLN-BERT with a feature cloud, lookahead rendering and a GASA graph)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ...core.errors import ConfigError
from ...core.params import param
from ...sim.types import DiscreteAction, WaypointAction
from ...tasks.base import render_options
from ..policies import register_policy
from ..vlnbert.perception import candidate_action, relax_after
from ..vlnbert.policy import VLNBertParams, VLNBertPolicy, candidate_loss
from ..vocab import PAD_ID
from .blocks import GraphLayer, graph_distances, topological_edges
from .cloud import FeatureCloud, VolumeRenderer
from .geometry import panorama_points, view_at_angle
from .grid_encoders import cloud_encoder_spec, encoder_file, make_grid_encoder, weights_arch
from .teacher import HNRPerception, HNRTeacher

#: cells per side of each view's grid features in the cloud (``cloud_grid``)
DEFAULT_GRID = 2


class GraphMemory:
    """Per-episode (batched) memory of the HNR policy: the feature cloud and the visited nodes."""

    def __init__(self, batch: int, feat_dim: int, hidden: int, cap: int, device: Any):
        self.cloud = FeatureCloud(batch, feat_dim, cap, device)
        self.positions = torch.zeros(batch, 0, 2, device=device)
        self.tokens = torch.zeros(batch, 0, hidden, device=device)


@dataclass
class HNRParams(VLNBertParams):
    """``policy.params`` of ``hnr``: VLN-BERT's and the cloud, graph and rendering ones (module docstring)."""

    cloud_cap: int = param(256, low=1, high=10_000_000)
    cloud_grid: int = DEFAULT_GRID
    history: int = param(8, low=0, high=100_000)
    graph_layers: int = param(1, low=0, high=256)
    render: dict[str, Any] | None = None
    render_weight: float = param(0.1, low=0.0)
    stage: str = "joint"
    cloud_encoder: Any = "predictor"

    def validate(self) -> None:
        """VLN-BERT's rules, a known ``stage``, a ``cloud_encoder`` (other than the predictor: needs grid cells)."""
        super().validate()
        try:
            kind = cloud_encoder_spec(self.cloud_encoder)["type"]
        except ConfigError as exc:  # its field is relative to policy.params here
            raise ConfigError(exc.problem, file=exc.file, field=exc.field.removeprefix("policy.params."),
                              expected=exc.expected) from None
        if kind != "predictor" and not self.cloud_grid:
            raise ConfigError(f"a {kind} cloud encoder with cloud_grid 0", field="cloud_encoder",
                              expected="cloud_grid 1, 2 or 4 (grid cells of the encoder), or cloud_encoder: predictor")
        if self.cloud_grid not in (0, 1, 2, 4):
            raise ConfigError(f"got {self.cloud_grid!r}", field="cloud_grid",
                              expected="1, 2 or 4 grid cells per side of each view (0: one point per view)")
        if self.stage not in ("joint", "render"):
            raise ConfigError(f"got {self.stage!r}", field="stage",
                              expected="joint (policy + rendering loss) or render (the rendering model alone)")


@register_policy("hnr")
class HNRPolicy(VLNBertPolicy):
    """VLN-BERT with HNR's feature cloud, rendered lookahead views and GASA graph (module docstring)."""

    name = "hnr"
    Params = HNRParams

    def __init__(self, vocab: Any, sensors: list[dict[str, Any]], *, cloud_cap: int = 256, history: int = 8,
                 graph_layers: int = 1, render: dict | None = None, render_weight: float = 0.1, stage: str = "joint",
                 cloud_grid: int = DEFAULT_GRID, cloud_encoder: Any = "predictor", **params: Any):
        super().__init__(vocab, sensors, **params)
        self.stage = stage
        self.cloud_cap, self.history, self.render_weight = cloud_cap, history, float(render_weight)
        self.cloud_grid = int(cloud_grid)
        h = self.hidden_size
        spec = cloud_encoder_spec(cloud_encoder)
        self.cloud_encoder_path = encoder_file(spec)
        p = self.predictor.params  # a cloud encoder is frozen; its weights travel in the checkpoint
        self.cloud_encoder = make_grid_encoder(spec, p["image_size"], p["max_depth"], notes=self.notes)
        # the cloud's features: the encoder's grid cells (its spatial channels), or one panorama token per view
        feat = self.grid_encoder.grid_channels if self.cloud_grid else self.predictor.params["hidden_size"]
        self.feat_dim = feat
        from ..waypoints.grid import PANORAMA_HFOV_DEG

        self.view_hfov = PANORAMA_HFOV_DEG
        render = dict(render or {})
        weights = render.pop("weights", None)
        self.render_background = render.pop("background", True)
        if not isinstance(self.render_background, bool):
            raise ConfigError(f"got {self.render_background!r}", field="policy.params.render.background",
                              expected="true (composite the current view's feature behind each ray) or false")
        try:
            # a grid's cells are sparser than its pixels: a wider neighbourhood (1.5 m) unless given
            defaults = {"hidden": h, "rows": max(1, self.cloud_grid), **({"radius": 1.5} if self.cloud_grid else {})}
            self.renderer = VolumeRenderer(feat, **{**defaults, **render})
        except TypeError as exc:
            raise ConfigError(str(exc), field="policy.params.render") from None
        if weights:
            self.load_renderer(weights)
        self.render_proj = nn.Linear(feat, h)
        self.node_types = nn.Embedding(4, h)  # visited, current, candidate, lookahead
        heads = int(params.get("heads", 4))
        self.graph = nn.ModuleList(GraphLayer(h, heads) for _ in range(graph_layers))
        self.freeze_for_stage()

    @property
    def grid_encoder(self) -> Any:
        """What computes the cloud's grid features: the ``cloud_encoder`` or the predictor."""
        return self.cloud_encoder if self.cloud_encoder is not None else self.predictor

    def load_renderer(self, path: Any) -> None:
        """The ``renderer.*`` weights of a ``vlnverse train`` checkpoint (``render.weights``: e.g. a
        ``stage: render`` run's), read without pickle; a checkpoint without them, or of another
        size, is a one-line ``ConfigError``."""
        from ..checkpoint import read_checkpoint

        data = read_checkpoint(path)
        state = {k[len("renderer."):]: v for k, v in data["state_dict"].items() if k.startswith("renderer.")}
        if not state:
            raise ConfigError("no renderer weights in the checkpoint", file=path, field="policy.params.render.weights",
                              expected="a checkpoint of an hnr or gama policy")
        try:
            self.renderer.load_state_dict(state)
        except RuntimeError as exc:
            raise ConfigError(f"renderer weights do not fit: {str(exc).splitlines()[0]}", file=path,
                              field="policy.params.render.weights", expected="the same render.hidden and hidden_size") from None
        self.notes.append(f"renderer: loaded weights from {path}")

    @classmethod
    def params_from_checkpoint(cls, params: dict[str, Any], data: dict[str, Any], path: Any) -> dict[str, Any]:
        """VLN-BERT's, ``render.weights`` dropped (the renderer's weights are in the state dict), and
        ``render.background`` as saved (a checkpoint from before it rendered without: off)."""
        out = super().params_from_checkpoint(params, data, path)
        saved = data.get("render")
        out["render"] = {**{k: v for k, v in (out.get("render") or {}).items() if k != "weights"},
                         "background": bool(saved.get("background")) if isinstance(saved, dict) else False}
        enc = cloud_encoder_spec(out.get("cloud_encoder"))
        if enc["type"] == "pretrained":  # rebuilt without the file: weights in the state dict
            from ..encoder.files import arch_of

            out["cloud_encoder"] = {"type": "pretrained", "trunk": enc["trunk"],
                                    "arch": arch_of(data["state_dict"], "cloud_encoder.trunk")}
        elif enc["type"] != "predictor":
            prefix = "cloud_encoder.trunk."
            state = {k[len(prefix):]: v for k, v in data["state_dict"].items() if k.startswith(prefix)}
            arch = weights_arch(enc["type"], state)
            if arch is None:
                raise ConfigError(f"no {enc['type']} cloud encoder weights in the checkpoint", file=path,
                                  field="policy.params.cloud_encoder", expected="a checkpoint of the policy as trained")
            out["cloud_encoder"] = {**{k: v for k, v in enc.items() if k != "weights"}, "arch": arch}
        cloud = data.get("cloud")  # a checkpoint from before grid features held one point per view
        out["cloud_grid"] = int(cloud["grid"]) if isinstance(cloud, dict) and "grid" in cloud else 0
        return out

    def teacher_overrides(self) -> dict[str, Any]:
        """The teacher records this policy's cloud inputs (its grid, whatever the config says)."""
        return {"cloud_grid": self.cloud_grid}

    def checkpoint_extras(self) -> dict[str, Any]:
        """VLN-BERT's, the cloud's grid (``cloud_grid`` as built, default included) and whether the
        renderer composites a background (``render.background``)."""
        return {**super().checkpoint_extras(), "cloud": {"grid": self.cloud_grid},
                "render": {"background": self.render_background}}

    def freeze_for_stage(self) -> None:
        """``stage: render``: only the rendering model trains (called last by each constructor)."""
        if self.stage == "render":
            for name, p in self.named_parameters():
                if not name.startswith("renderer."):
                    p.requires_grad_(False)

    @classmethod
    def teacher_spec(cls, params: dict[str, Any]) -> HNRTeacher:
        """VLN-BERT's oracle, recording the cloud's inputs too."""
        t = super().teacher_spec(params)
        enc = cloud_encoder_spec(params.get("cloud_encoder"))
        if enc["type"] != "predictor" and not encoder_file(enc):
            file_key = "path" if enc["type"] == "pretrained" else "weights"
            raise ConfigError("the teacher needs the cloud encoder's file", field=f"policy.params.cloud_encoder.{file_key}",
                              expected="the encoder file the policy was built from")
        return HNRTeacher(t.predictor_path, t.stop_distance, t.open_space_radius, t.turn_deg,
                          grid=int(params.get("cloud_grid", DEFAULT_GRID)), encoder_path=encoder_file(enc),
                          encoder_trunk=enc.get("trunk", "depth"), encoder_type=enc["type"],
                          encoder_heads=int(enc.get("heads", 0)))

    def new_memory(self, batch: int, device: Any) -> GraphMemory:
        return GraphMemory(batch, self.feat_dim, self.hidden_size, self.cloud_cap, device)

    # ---------------------------------------------------------------- graph

    def cloud_points(self, view_feats: torch.Tensor, view_depth: torch.Tensor, pose: torch.Tensor,
                     view_grid: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """A panorama's cloud points: its grid features (B, V, C, g, g) at their cell depths (B, V,
        g, g), or (``cloud_grid`` 0) each view token (B, V, F) at its view depth (B, V)."""
        if self.cloud_grid:
            if view_grid is None:
                raise ConfigError("no grid features for the feature cloud", field="view_grid",
                                  expected=f"steps recorded with cloud_grid {self.cloud_grid} (a fresh teacher cache)")
            return panorama_points(view_grid, view_depth, pose, self.view_hfov)
        return panorama_points(view_feats[..., None, None], view_depth[..., None, None], pose, self.view_hfov)

    def cloud_target(self, view_feats: torch.Tensor, view_grid: torch.Tensor | None) -> torch.Tensor:
        """The encoder's feature of a real view (..., F): the mean of its grid cells (view_grid
        (..., C, g, g)), or its panorama token (``cloud_grid`` 0)."""
        return view_grid.mean((-2, -1)) if self.cloud_grid else view_feats

    def render_lookaheads(self, view_feats: torch.Tensor, cands: torch.Tensor, view_depth: torch.Tensor,
                          pose: torch.Tensor, mem: GraphMemory, view_grid: torch.Tensor | None = None
                          ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Add the panorama's points to the cloud, then render a view at each candidate facing its
        direction: (features (B, K, F), opacity (B, K), candidate positions (B, K, 2)). With
        ``render.background`` each ray's remaining transmittance composites the current view's
        feature in the candidate's direction (``view_at_angle`` of ``cloud_target``: what the copy
        baseline of ``lookahead_cosines`` predicts), so where the cloud is empty the render falls
        back to it."""
        b, k = cands.shape[:2]
        mem.cloud.add(self.cloud_points(view_feats, view_depth, pose, view_grid))
        heading = pose[:, None, 2] + cands[..., 0]
        cand_xy = pose[:, None, :2] + cands[..., 1:2] * torch.stack([torch.cos(heading), torch.sin(heading)], -1)
        origins = torch.cat([cand_xy, torch.zeros(b, k, 1, device=pose.device)], -1)
        background = view_at_angle(self.cloud_target(view_feats, view_grid), cands[..., 0]) if self.render_background else None
        rendered, opacity = self.renderer(mem.cloud, origins, heading, background)
        return rendered, opacity, cand_xy

    def build_graph(self, instruction: tuple, view_feats: torch.Tensor, cands: torch.Tensor, view_depth: torch.Tensor,
                    pose: torch.Tensor, mem: GraphMemory, view_grid: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """Grow the cloud, render a lookahead per candidate, encode the graph with GASA; update
        the visited nodes. Returns the node outputs and what the scorers read."""
        b, k = cands.shape[:2]
        rendered, opacity, cand_xy = self.render_lookaheads(view_feats, cands, view_depth, pose, mem, view_grid)
        valid = cands[..., 2] > 0.5
        current = self.view_proj(view_feats.mean(1))  # the current view's CLS
        t = self.node_types.weight
        cand_tok = self.candidate_tokens(view_feats, cands)
        nodes = torch.cat([mem.tokens + t[0], current[:, None] + t[1], cand_tok + t[2],
                           self.render_proj(rendered) + t[3]], 1)
        positions = torch.cat([mem.positions, pose[:, None, :2], cand_xy, cand_xy], 1)
        ones = torch.ones(b, mem.tokens.shape[1] + 1, dtype=torch.bool, device=pose.device)
        mask = torch.cat([ones, valid, valid], 1)
        dist = graph_distances(positions, topological_edges(mem.tokens.shape[1], k, b, pose.device))
        for layer in self.graph:
            nodes = layer(nodes, dist, mask)
        first = mem.tokens.shape[1] + 1
        mem.tokens = torch.cat([mem.tokens, current[:, None]], 1)[:, -self.history:] if self.history else mem.tokens
        mem.positions = torch.cat([mem.positions, pose[:, None, :2]], 1)[:, -self.history:] if self.history else mem.positions
        return {"nodes": nodes, "mask": mask, "distances": dist, "candidates": nodes[:, first:first + k] + nodes[:, first + k:],
                "first": torch.tensor(first), "valid": valid, "current": current, "rendered": rendered, "opacity": opacity}

    def score_actions(self, instruction: tuple, new_state: torch.Tensor, actions: torch.Tensor, graph: dict
                      ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Scores (B, K + 1) of the encoded actions (VLN-BERT's scorer) and auxiliary outputs."""
        return self.scorer(torch.cat([new_state[:, None].expand(-1, actions.shape[1], -1), actions], -1))[..., 0], {}

    def graph_step(self, instruction: tuple, view_feats: torch.Tensor, cands: torch.Tensor, view_depth: torch.Tensor,
                   pose: torch.Tensor, hidden: torch.Tensor, mem: GraphMemory, view_grid: torch.Tensor | None = None
                   ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """One step: (logits (B, K + 1), STOP last, invalid -inf; new state (B, 1, H); auxiliary outputs)."""
        graph = self.build_graph(instruction, view_feats, cands, view_depth, pose, mem, view_grid)
        new_state, actions, keep = self.encode_actions(instruction, graph["candidates"], graph["valid"], hidden)
        scores, aux = self.score_actions(instruction, new_state, actions, graph)
        aux["rendered"] = graph["rendered"]
        return scores.masked_fill(~keep, float("-inf")), new_state.unsqueeze(1), aux

    # ---------------------------------------------------------------- training

    def auxiliary_loss(self, aux: list[dict], batch: dict[str, Any], valid: torch.Tensor) -> torch.Tensor:
        """λ_render · ``render_loss``."""
        if self.render_weight <= 0:
            return torch.zeros((), device=valid.device)
        return self.render_weight * self.render_loss([a["rendered"] for a in aux], batch, valid)

    def render_loss(self, rendered: list[torch.Tensor], batch: dict[str, Any], valid: torch.Tensor) -> torch.Tensor:
        """Mean (1 - cos) between the rendered view (per step (B, K, F)) of the oracle's candidate at
        step t and the real view the agent faces at step t + 1 (view 0 of the next panorama)."""
        if valid.shape[1] < 2:
            return torch.zeros((), device=valid.device)
        extras = batch["extras"]
        target = extras["target"].long()
        k = extras["candidates"].shape[2]
        rendered = torch.stack(rendered, 1)  # (B, T, K, F)
        moves = valid[:, :-1] & valid[:, 1:] & (target[:, :-1] < k)
        if not moves.any():
            return torch.zeros((), device=valid.device)
        idx = target[:, :-1].clamp(max=k - 1)
        picked = torch.gather(rendered[:, :-1], 2, idx[..., None, None].expand(-1, -1, 1, rendered.shape[-1]))[:, :, 0]
        grid = extras.get("view_grid")
        real = self.cloud_target(extras["view_feats"][:, 1:, 0], grid[:, 1:, 0] if grid is not None else None)
        cos = F.cosine_similarity(picked, real, dim=-1)
        return (1 - cos)[moves].mean()

    def imitation_loss(self, batch: dict[str, Any]) -> tuple[torch.Tensor, float]:
        """VLN-BERT's cross-entropy (``candidate_loss``) + ``auxiliary_loss``; with
        ``stage: render`` the ``render_loss`` alone (no step is scored: 0 correct)."""
        extras = batch["extras"]
        feats, cands, target = extras["view_feats"], extras["candidates"], extras["target"].long()
        depth, pose, grid = extras["view_depth"], extras["world_pose"], extras.get("view_grid")
        at = lambda i: grid[:, i] if grid is not None else None  # noqa: E731
        b, t = target.shape
        if self.stage == "render":
            mem = self.new_memory(b, target.device)
            rendered = [self.render_lookaheads(feats[:, i], cands[:, i], depth[:, i], pose[:, i], mem, at(i))[0]
                        for i in range(t)]
            return self.render_loss(rendered, batch, batch["weights"] > 0), 0.0
        tokens = batch["tokens"]
        instruction = self.instruction(tokens[:, :max(1, int((tokens != PAD_ID).sum(1).max()))])
        hidden = self.initial_state(b, target.device)
        mem = self.new_memory(b, target.device)
        logits, aux = [], []
        for i in range(t):
            out, hidden, a = self.graph_step(instruction, feats[:, i], cands[:, i], depth[:, i], pose[:, i], hidden, mem,
                                             at(i))
            logits.append(out)
            aux.append(a)
        width = max(x.shape[-1] for x in logits)  # GAMA's global actions: K + 1 + the step's earlier frontier nodes
        logits = torch.stack([F.pad(x, (0, width - x.shape[-1]), value=float("-inf")) for x in logits], 1)
        valid = batch["weights"] > 0
        picked = torch.gather(logits, 2, torch.where(valid, target, 0).clamp(max=width - 1)[..., None])[..., 0]
        if bool((valid & ((target >= width) | torch.isinf(picked))).any()):
            raise ConfigError("a teacher label names an action the policy does not offer at that step",
                              field="extras.target",
                              expected="a teacher cache recorded with this policy's global_actions, merge_radius and "
                                       "frontier (rebuild the cache)")
        loss, correct = candidate_loss(logits, target, batch, stop=cands.shape[2])
        return loss + self.auxiliary_loss(aux, batch, valid), correct

    # ---------------------------------------------------------------- acting

    def begin_episode(self, instruction: tuple, episode: Any, context: Any, agent: Any) -> dict[str, Any]:
        """VLN-BERT's acting memory plus the graph memory (feature cloud, visited nodes)."""
        if "hnr_perception" not in agent.cache:
            agent.cache["hnr_perception"] = HNRPerception(self.predictor, self.cloud_grid, getattr(agent, "observation", None),
                                                          self.grid_encoder)
        memory = super().begin_episode(instruction, episode, context, agent)
        memory["graph"] = self.new_memory(1, agent.device)
        return memory

    def step_info(self, aux: dict[str, torch.Tensor]) -> dict[str, Any]:
        """What the agent logs of a step's auxiliary outputs (``agent_outputs``)."""
        return {}

    def choose(self, memory: dict[str, Any], view_feats: np.ndarray, cands: np.ndarray, agent: Any,
               view_depth: np.ndarray | None = None, pose: Any = None, view_grid: np.ndarray | None = None) -> int:
        """Advance one step and return the chosen index (len(cands): STOP); without ``view_depth``
        (the teacher asking during DAgger) the cloud's inputs and pose come from ``memory["sense"]``."""
        if view_depth is None:
            perception, pose = memory.pop("sense")
            view_depth, view_grid = perception.last_depth, perception.last_grid
        dev = agent.device
        as_t = lambda a: torch.from_numpy(np.asarray(a, dtype=np.float32))[None].to(dev)  # noqa: E731
        with torch.no_grad():
            logits, memory["hidden"], aux = self.graph_step(memory["instruction"], as_t(view_feats), as_t(cands),
                                                            as_t(view_depth), as_t(pose), memory["hidden"], memory["graph"],
                                                            as_t(view_grid) if self.cloud_grid else None)
        memory["info"] = self.step_info(aux)
        return agent.pick(logits[0])

    def propose(self, memory: dict[str, Any], observations: dict[str, Any], state: Any, agent: Any) -> Any:
        """VLN-BERT's ``propose`` through the graph step (turn in place when no candidate)."""
        ctx, pose = memory["context"], state.pose
        perception = agent.cache["hnr_perception"]
        feats, cands, n = perception(ctx.desc, ctx.body, (pose.x, pose.y, pose.yaw), relax=memory["empty"],
                                     options=render_options(ctx))
        if n == 0:
            memory["no_candidate_turns"] += 1
            memory["empty"] += 1
            agent.outputs.append({"no_candidates": True, "no_candidate_turns": memory["no_candidate_turns"]})
            return WaypointAction(0.0, 0.0, math.radians(self.turn_deg))
        choice = self.choose(memory, feats, cands, agent, perception.last_depth, (pose.x, pose.y, pose.yaw),
                             perception.last_grid)
        memory["empty"] = relax_after(choice, cands, memory["empty"])
        info = {"candidates": n, "choice": "STOP" if choice == len(cands) else choice, **memory.pop("info", {})}
        agent.outputs.append(info)
        if choice == len(cands):
            return DiscreteAction.STOP
        if choice > len(cands):  # GAMA's global action: an earlier frontier node
            info["choice"] = "frontier"
            return self.frontier_action(memory, choice - len(cands) - 1, state, info)
        info["waypoint"] = [round(float(cands[choice, 0]), 4), round(float(cands[choice, 1]), 3)]
        return candidate_action(float(cands[choice, 0]), float(cands[choice, 1]))

    def frontier_action(self, memory: dict[str, Any], index: int, state: Any, info: dict[str, Any]) -> Any:
        """The first hop towards earlier frontier node ``index`` (GAMA overrides; HNR offers none)."""
        raise ValueError(f"{self.name} has no global actions (choice {index} beyond STOP)")
