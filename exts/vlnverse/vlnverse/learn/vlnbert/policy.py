"""The ``vlnbert`` policy: ``candidate_loss``, ``VLNBertParams`` and ``VLNBertPolicy`` (the recurrent
state-token transformer over waypoint candidates), registered in ``POLICIES``."""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ...core.errors import ConfigError
from ...core.params import param
from ...sim.types import DiscreteAction, WaypointAction
from ...tasks.base import render_options
from ..policies import VLNPolicy, VLNPolicyParams, register_policy
from ..vocab import PAD_ID, Vocabulary
from ..waypoints.model import WaypointPredictor, load_predictor
from .perception import Perception, candidate_action, relax_after
from .teacher import VLNBertTeacher
from .text import TextEncoder

def candidate_loss(logits: torch.Tensor, target: torch.Tensor, batch: dict[str, Any], stop: int | None = None
                   ) -> tuple[torch.Tensor, float]:
    """Cross-entropy of the step scores (B, T, A) against the oracle's choice (B, T) over the
    batch's valid steps, and the number of correct argmaxes; ``stop`` is STOP's index (default the
    last, A - 1 = K; GAMA's global actions put earlier frontier nodes after it). Every step weighs 1
    (the trainer's inflection weights follow move / STOP labels only) except STOP steps, which weigh
    ``batch["stop_weight"]`` (``il.stop_weight``, default 1)."""
    valid = batch["weights"] > 0
    k = logits.shape[-1] - 1 if stop is None else int(stop)
    target = torch.where(valid, target, torch.full_like(target, k))  # padding: STOP (weight 0)
    w = valid.float()
    stop_weight = float(batch.get("stop_weight", 1.0))
    if stop_weight != 1.0:
        w = w * torch.where(target == k, torch.full_like(w, stop_weight), torch.ones_like(w))
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1), reduction="none")
    loss = (ce * w.reshape(-1)).sum() / w.sum().clamp(min=1e-8)
    return loss, float(((logits.argmax(-1) == target) & valid).sum())


@dataclass
class VLNBertParams(VLNPolicyParams):
    """``policy.params`` of ``vlnbert`` (metres, degrees); ``waypoint_predictor`` is required: the
    file of ``vlnverse waypoints train`` (a checkpoint rebuilds it from its saved parameters)."""

    waypoint_predictor: str | dict[str, Any] | None = None
    text_encoder: dict[str, Any] | None = None
    layers: int = param(2, low=1, high=256)
    heads: int = param(4, low=1, high=256)
    stop_distance: float = param(1.5, low=0.01, high=100.0)
    open_space_radius: float = param(0.3, low=0.0, high=10.0)
    no_candidate_turn_deg: float = param(30.0, low=0.1, high=180.0)

    def validate(self) -> None:
        """The base rules, a waypoint predictor, and heads that divide ``hidden_size``."""
        super().validate()
        if self.waypoint_predictor is None:
            raise ConfigError("VLN-BERT needs a waypoint predictor", field="waypoint_predictor",
                              expected="the predictor.pt of 'vlnverse waypoints train'")
        if self.hidden_size % self.heads:
            raise ConfigError(f"hidden_size {self.hidden_size} with heads {self.heads}", field="heads",
                              expected="a divisor of hidden_size")


@register_policy("vlnbert")
class VLNBertPolicy(VLNPolicy):
    """Recurrent VLN-BERT over waypoint candidates (see the module docstring)."""

    name = "vlnbert"
    uses_step_weights = False  # every valid step weighs 1 in imitation_loss
    unrolls_packed = False  # imitation_loss reads no lengths: plain-permutation batches
    Params = VLNBertParams

    def __init__(self, vocab: Vocabulary, sensors: list[dict[str, Any]], *, waypoint_predictor: Any = None,
                 text_encoder: dict | None = None, layers: int = 2, heads: int = 4, stop_distance: float = 1.5,
                 open_space_radius: float = 0.3, no_candidate_turn_deg: float = 30.0, **params: Any):
        super().__init__(vocab, sensors, **params)
        if isinstance(waypoint_predictor, dict):  # rebuilt from a checkpoint (weights come with the state dict)
            self.predictor_path = None
            predictor = WaypointPredictor(**waypoint_predictor)
        else:
            self.predictor_path = str(waypoint_predictor)
            predictor = load_predictor(waypoint_predictor)
        self.stop_distance, self.open_space_radius = float(stop_distance), float(open_space_radius)
        self.turn_deg = float(no_candidate_turn_deg)
        self.predictor = predictor
        for p in self.predictor.parameters():
            p.requires_grad_(False)
        h = self.hidden_size
        text_spec = dict(text_encoder or {})
        self.instruction = TextEncoder(vocab, notes=self.notes, **{"size": h, **text_spec})
        # the base class's LSTM encoder notes are replaced by the text encoder's; its camera
        # encoders' notes go too: the navigator reads the predictor's view features
        self.notes[:] = [n for n in self.notes if not n.startswith(("instruction_encoder", "rgb_encoder", "depth_encoder"))]
        feat = predictor.params["hidden_size"]
        self.views = predictor.views
        self.max_distance = predictor.grid.max_distance
        self.text_proj = nn.Linear(self.instruction.out_dim, h)
        self.view_proj = nn.Linear(feat, h)
        self.polar = nn.Sequential(nn.Linear(3, h), nn.ReLU(inplace=True), nn.Linear(h, h))
        self.stop_token = nn.Parameter(torch.randn(1, 1, h) * 0.02)
        self.start_state = nn.Parameter(torch.zeros(1, h))
        self.types = nn.Embedding(4, h)  # state, text, candidate, stop
        layer = nn.TransformerEncoderLayer(h, heads, dim_feedforward=2 * h, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.state_update = nn.Sequential(nn.Linear(2 * h, h), nn.Tanh())
        self.scorer = nn.Sequential(nn.Linear(2 * h, h), nn.ReLU(inplace=True), nn.Linear(h, 1))

    # ---------------------------------------------------------------- checkpoints

    def checkpoint_extras(self) -> dict[str, Any]:
        """Saved into every checkpoint: the predictor's parameters (its weights are in the state dict)."""
        return {"waypoint_predictor": {"params": dict(self.predictor.params), "source": self.predictor_path}}

    @classmethod
    def params_from_checkpoint(cls, params: dict[str, Any], data: dict[str, Any], path: Any) -> dict[str, Any]:
        """Rebuild parameters: the embedded predictor replaces the training-time predictor path;
        a checkpoint without it is a one-line ``ConfigError`` naming the file."""
        params = super().params_from_checkpoint(params, data, path)
        wp = data.get("waypoint_predictor")
        has_weights = any(k.startswith("predictor.") for k in data.get("state_dict", {}))
        if not isinstance(wp, dict) or "params" not in wp or not has_weights:
            missing = "its parameters" if has_weights else "its weights" if isinstance(wp, dict) else "its parameters and weights"
            raise ConfigError(f"VLN-BERT checkpoint holds no waypoint predictor ({missing} missing)", file=path,
                              field="waypoint_predictor", expected="a checkpoint written by 'vlnverse train' with a vlnbert policy")
        out = dict(params)
        out["waypoint_predictor"] = dict(wp["params"])
        if isinstance(out.get("text_encoder"), dict):
            out["text_encoder"] = {k: v for k, v in out["text_encoder"].items() if k != "weights"}
        return out

    @classmethod
    def teacher_spec(cls, params: dict[str, Any]) -> VLNBertTeacher:
        """The waypoint oracle for these ``policy.params``."""
        path = params.get("waypoint_predictor")
        if not isinstance(path, (str, Path)):
            raise ConfigError("VLN-BERT training needs a waypoint predictor file", field="policy.params.waypoint_predictor",
                              expected="the predictor.pt of 'vlnverse waypoints train'")
        load_predictor(path)  # a clear error now rather than inside the rollout
        return VLNBertTeacher(str(path), float(params.get("stop_distance", 1.5)),
                              float(params.get("open_space_radius", 0.3)), float(params.get("no_candidate_turn_deg", 30.0)))

    def train(self, mode: bool = True) -> "VLNBertPolicy":
        """Train mode for the navigator; the frozen predictor stays in eval mode."""
        super().train(mode)
        self.predictor.eval()
        return self

    # ---------------------------------------------------------------- recurrence

    def initial_state(self, batch: int, device: Any = None) -> torch.Tensor:
        """The learnt start state (B, 1, H)."""
        return self.start_state.expand(batch, -1).unsqueeze(1).to(device) if device is not None else \
            self.start_state.expand(batch, -1).unsqueeze(1)

    def candidate_tokens(self, view_feats: torch.Tensor, cands: torch.Tensor) -> torch.Tensor:
        """(B, K, H) tokens: the view feature at each candidate's angle (linear between the two
        nearest views) plus the encoding of (sin θ, cos θ, distance / max distance)."""
        b, v, f = view_feats.shape
        pos = (cands[..., 0] / (2 * math.pi / v)) % v  # fractional view index
        lo = pos.floor().long() % v
        hi = (lo + 1) % v
        w = (pos - pos.floor()).unsqueeze(-1)
        gather = lambda idx: torch.gather(view_feats, 1, idx.unsqueeze(-1).expand(-1, -1, f))  # noqa: E731
        feat = (1 - w) * gather(lo) + w * gather(hi)
        polar = torch.stack([torch.sin(cands[..., 0]), torch.cos(cands[..., 0]), cands[..., 1] / self.max_distance], -1)
        return self.view_proj(feat) + self.polar(polar)

    def encode_actions(self, instruction: tuple, cand_tokens: torch.Tensor, valid: torch.Tensor, hidden: torch.Tensor
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The transformer over [state, instruction, candidate tokens (B, K, H), STOP]: (new state
        (B, H), action outputs (B, K + 1, H) with STOP last, action mask (B, K + 1))."""
        ctx, mask, _ = instruction
        b = cand_tokens.shape[0]
        state = hidden[:, 0]
        text = self.text_proj(ctx)
        tokens = torch.cat([state[:, None] + self.types.weight[0], text + self.types.weight[1],
                            cand_tokens + self.types.weight[2],
                            self.stop_token.expand(b, -1, -1) + self.types.weight[3]], dim=1)
        ones = torch.ones(b, 1, dtype=torch.bool, device=valid.device)
        keep = torch.cat([ones, mask, valid, ones], dim=1)
        out = self.encoder(tokens, src_key_padding_mask=~keep)
        new_state = self.state_update(torch.cat([out[:, 0], state], dim=1))
        return new_state, out[:, 1 + ctx.shape[1]:], torch.cat([valid, ones], dim=1)

    def step(self, instruction: tuple, view_feats: torch.Tensor, cands: torch.Tensor, hidden: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor]:
        """One step: (logits (B, K + 1), index K = STOP; invalid candidates -inf) and the new state (B, 1, H)."""
        new_state, actions, keep = self.encode_actions(instruction, self.candidate_tokens(view_feats, cands),
                                                       cands[..., 2] > 0.5, hidden)
        scores = self.scorer(torch.cat([new_state[:, None].expand(-1, actions.shape[1], -1), actions], dim=-1)).squeeze(-1)
        return scores.masked_fill(~keep, float("-inf")), new_state.unsqueeze(1)

    # ---------------------------------------------------------------- training

    def imitation_loss(self, batch: dict[str, Any]) -> tuple[torch.Tensor, float]:
        """Cross-entropy between the step scores and the oracle action (every valid step weighs 1),
        unrolling the state token over each episode; also the number of correct argmaxes."""
        extras = batch["extras"]
        feats, cands, target = extras["view_feats"], extras["candidates"], extras["target"].long()
        b, t = target.shape
        tokens = batch["tokens"]
        tokens = tokens[:, :max(1, int((tokens != PAD_ID).sum(1).max()))]  # drop all-padding columns
        instruction = self.instruction(tokens)
        hidden = self.initial_state(b, target.device)
        logits = []
        for i in range(t):
            out, hidden = self.step(instruction, feats[:, i], cands[:, i], hidden)
            logits.append(out)
        return candidate_loss(torch.stack(logits, dim=1), target, batch)

    # ---------------------------------------------------------------- acting

    def begin_episode(self, instruction: tuple, episode: Any, context: Any, agent: Any) -> dict[str, Any]:
        """Acting memory: the instruction, the state token, the scene (rendered for each panorama)
        and the count of candidate-free predictions."""
        if "perception" not in agent.cache:  # one renderer per agent, kept across episodes
            agent.cache["perception"] = Perception(self.predictor, getattr(agent, "observation", None))
        return {"instruction": instruction, "hidden": self.initial_state(1, agent.device), "context": context,
                "no_candidate_turns": 0, "empty": 0}

    def choose(self, memory: dict[str, Any], view_feats: np.ndarray, cands: np.ndarray, agent: Any) -> int:
        """Advance the state token one step on (view features, candidates) and return the chosen
        index (a candidate, or len(cands) for STOP); the VLN-BERT teacher asks the learner this."""
        with torch.no_grad():
            f = torch.from_numpy(np.asarray(view_feats, dtype=np.float32))[None].to(agent.device)
            c = torch.from_numpy(np.asarray(cands, dtype=np.float32))[None].to(agent.device)
            logits, memory["hidden"] = self.step(memory["instruction"], f, c, memory["hidden"])
        return agent.pick(logits[0])

    def propose(self, memory: dict[str, Any], observations: dict[str, Any], state: Any, agent: Any) -> Any:
        """Render the depth panorama at the agent's pose, take the predictor's candidates and
        return the chosen ``WaypointAction`` or STOP; with no candidate, turn in place (counted)."""
        ctx, pose = memory["context"], state.pose
        feats, cands, n = agent.cache["perception"](ctx.desc, ctx.body, (pose.x, pose.y, pose.yaw), relax=memory["empty"],
                                                    options=render_options(ctx))
        if n == 0:  # the predictor found no candidate: turn in place, predict again next step (lower threshold)
            memory["no_candidate_turns"] += 1
            memory["empty"] += 1
            agent.outputs.append({"no_candidates": True, "no_candidate_turns": memory["no_candidate_turns"]})
            return WaypointAction(0.0, 0.0, math.radians(self.turn_deg))
        choice = self.choose(memory, feats, cands, agent)
        memory["empty"] = relax_after(choice, cands, memory["empty"])
        info = {"candidates": n, "choice": "STOP" if choice == len(cands) else choice}
        if choice == len(cands):
            agent.outputs.append(info)
            return DiscreteAction.STOP
        info["waypoint"] = [round(float(cands[choice, 0]), 4), round(float(cands[choice, 1]), 3)]
        agent.outputs.append(info)
        return candidate_action(float(cands[choice, 0]), float(cands[choice, 1]))

    def executed(self, memory: dict[str, Any], action: Any) -> None:
        """Nothing: VLN-BERT's history is its state token."""
