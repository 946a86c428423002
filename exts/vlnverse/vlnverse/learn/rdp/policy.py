"""The ``rdp`` policy: its parameters and ``RDPPolicy`` (encoders, GRU, denoiser, progress head;
training loss, sampling and acting), registered in ``POLICIES``."""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ...core.errors import ConfigError
from ...core.params import param
from ...sim.types import DiscreteAction, WaypointAction
from ..policies import VLNPolicy, VLNPolicyParams, register_policy
from ..vocab import Vocabulary
from .diffusion import LATENT_DIM, PREDICTIONS, Denoiser, cosine_betas, medoid
from .teacher import ACTION_DIM, WaypointTeacher, motion_vector

#: moves shorter than this (m) are turns: ``look_before_hop`` leaves them alone
MIN_HOP = 0.05


def look_before_hop(action: WaypointAction, view_deg: float) -> WaypointAction:
    """``action``, or a turn in place onto its bearing when it moves the agent (more than
    ``MIN_HOP``) to a bearing more than ``view_deg`` degrees off the heading."""
    if math.hypot(action.dx, action.dy) <= MIN_HOP:
        return action
    bearing = math.atan2(action.dy, action.dx)
    if abs(bearing) <= math.radians(view_deg):
        return action
    return WaypointAction(0.0, 0.0, bearing, action.timeout)


@dataclass
class RDPParams(VLNPolicyParams):
    """``policy.params`` of ``rdp`` (metres; its ``progress_weight`` / ``stop_threshold`` are its
    own progress head's: the threshold in (0, 1), no base-class STOP rule)."""

    progress_weight: float = param(1.0, low=0.0)
    stop_threshold: float = param(0.95, low=0.0, high=1.0)
    horizon: int = param(4, low=1, high=64)
    waypoint_spacing: float = param(0.5, low=0.01, high=10.0)
    stop_radius: float | None = param(None, low=0.0, high=100.0)
    teacher_clearance: float = param(0.15, low=0.0, high=2.0)
    turn_in_place_deg: float | None = param(None, low=0.0, high=180.0)
    diffusion_steps: int = param(20, low=2, high=10_000)
    sampler: str = "ddim"
    ddim_steps: int = param(10, low=1, high=10_000)
    attention_heads: int = param(4, low=1, high=256)
    denoiser_size: int = param(128, low=1, high=8192)
    denoiser_layers: int = param(2, low=1, high=256)
    clip_sample: float = param(3.0, low=0.0)
    noise_samples: int = param(4, low=1, high=10_000)
    action_samples: int = param(1, low=1, high=10_000)
    prediction: str = "epsilon"
    hop_view_deg: float | None = param(None, low=0.0, high=180.0)

    def validate(self) -> None:
        """The sampler's name, DDIM steps within the diffusion's, the threshold in (0, 1), and
        attention heads that divide the widths they split."""
        checks = {"sampler": (self.sampler in ("ddpm", "ddim"), "ddpm or ddim"),
                  "prediction": (self.prediction in PREDICTIONS, " or ".join(PREDICTIONS)),
                  "ddim_steps": (self.ddim_steps <= self.diffusion_steps, "1..diffusion_steps"),
                  "stop_threshold": (0 < self.stop_threshold < 1, "in (0, 1)"),
                  "attention_heads": (self.hidden_size % self.attention_heads == 0
                                      and self.denoiser_size % self.attention_heads == 0,
                                      "a divisor of hidden_size and denoiser_size")}
        for field, (ok, expected) in checks.items():
            if not ok:
                raise ConfigError(f"bad value {getattr(self, field)!r}", field=field, expected=expected)


@register_policy("rdp")
class RDPPolicy(VLNPolicy):
    """Recurrent diffusion policy (see the module docstring); emits ``WaypointAction`` or STOP."""

    name = "rdp"
    uses_step_weights = False  # every valid step weighs 1 in imitation_loss
    unrolls_packed = False  # imitation_loss reads no lengths: plain-permutation batches
    Params = RDPParams

    def _instruction_defaults(self, spec: dict | None) -> dict:
        return {"bidirectional": True, **(spec or {})}

    def __init__(self, vocab: Vocabulary, sensors: list[dict[str, Any]], *, horizon: int = 4,
                 waypoint_spacing: float = 0.5, stop_radius: float | None = None, teacher_clearance: float = 0.15,
                 turn_in_place_deg: float | None = None, diffusion_steps: int = 20,
                 sampler: str = "ddim", ddim_steps: int = 10, attention_heads: int = 4, denoiser_size: int = 128,
                 denoiser_layers: int = 2, progress_weight: float = 1.0, stop_threshold: float = 0.95,
                 clip_sample: float = 3.0, noise_samples: int = 4, action_samples: int = 1, prediction: str = "epsilon",
                 hop_view_deg: float | None = None, **params: Any):
        super().__init__(vocab, sensors, **params)
        if self.rgb is None:
            raise ConfigError("RDP needs an RGB camera", field="sensors", expected="a sensor with kind: rgb")
        self.horizon, self.spacing, self.stop_radius = int(horizon), float(waypoint_spacing), stop_radius
        self.diffusion_steps, self.sampler, self.ddim_steps = int(diffusion_steps), sampler, int(ddim_steps)
        self.noise_samples, self.action_samples, self.prediction = int(noise_samples), int(action_samples), prediction
        self.hop_view_deg = None if hop_view_deg is None else float(hop_view_deg)
        self.progress_weight, self.stop_threshold, self.clip_sample = float(progress_weight), float(stop_threshold), float(clip_sample)
        h, text = self.hidden_size, self.instruction.out_dim
        self.text_proj = nn.Linear(text, h)
        self.rgb_proj = nn.Conv1d(self.rgb.spatial_channels, h, 1)
        self.text_to_rgb = nn.MultiheadAttention(h, attention_heads, batch_first=True)   # text queries RGB
        self.rgb_to_text = nn.MultiheadAttention(h, attention_heads, batch_first=True)   # RGB queries text
        self.motion = nn.Linear(LATENT_DIM, self.prev_action.embedding_dim)
        depth_dim = self.depth.out_dim if self.depth is not None else 0
        self.fuse = nn.Sequential(nn.Linear(2 * h + depth_dim + self.prev_action.embedding_dim, h), nn.ReLU(inplace=True))
        self.gru = nn.GRUCell(h, h)
        self.denoiser = Denoiser(2 * h, self.horizon, denoiser_size, attention_heads, denoiser_layers)
        self.progress_head = nn.Sequential(nn.Linear(2 * h, h), nn.ReLU(inplace=True), nn.Linear(h, 1))
        betas = cosine_betas(self.diffusion_steps)
        self.register_buffer("betas", betas, persistent=False)
        self.register_buffer("alphas_cumprod", torch.cumprod(1 - betas, 0), persistent=False)
        self.register_buffer("scale", torch.tensor([self.spacing, self.spacing]), persistent=False)

    def to_latent(self, actions: torch.Tensor) -> torch.Tensor:
        """(…, 3) actions in metres / radians → (…, 4) diffusion space (dx, dy by the spacing; dyaw as sin, cos)."""
        yaw = actions[..., 2:3]
        return torch.cat([actions[..., :2] / self.scale, torch.sin(yaw), torch.cos(yaw)], dim=-1)

    def from_latent(self, latent: torch.Tensor) -> torch.Tensor:
        """(…, 4) diffusion space → (…, 3) actions in metres / radians."""
        return torch.cat([latent[..., :2] * self.scale, torch.atan2(latent[..., 2:3], latent[..., 3:4])], dim=-1)

    @classmethod
    def teacher_spec(cls, params: dict[str, Any]) -> WaypointTeacher:
        """The continuous teacher for these ``policy.params``."""
        turn = params.get("turn_in_place_deg")
        return WaypointTeacher(int(params.get("horizon", 4)), float(params.get("waypoint_spacing", 0.5)),
                               params.get("stop_radius"), float(params.get("teacher_clearance", 0.15)),
                               None if turn is None else float(turn))

    # ---------------------------------------------------------------- recurrence

    def start_motion(self, batch: int, device: Any = None) -> torch.Tensor:
        """The previous motion at an episode's start (zeros, (B, 3))."""
        return torch.zeros(batch, ACTION_DIM, device=device)

    def step(self, instruction, visual, prev_motion, hidden):
        """One step: (condition (B, 2H) = [GRU state, fused feature], new hidden (B, 1, H))."""
        ctx, mask, _ = instruction
        text = self.text_proj(ctx)
        rgb = self.rgb_proj(visual["rgb"][0]).transpose(1, 2)  # (B, 16, H)
        t2v, _ = self.text_to_rgb(text, rgb, rgb)
        v2t, _ = self.rgb_to_text(rgb, text, text, key_padding_mask=~mask)
        m = mask.float().unsqueeze(-1)
        pooled_text = (t2v * m).sum(1) / m.sum(1).clamp(min=1.0)
        parts = [pooled_text, v2t.mean(1)]
        if "depth" in visual:
            parts.append(visual["depth"][1])
        parts.append(self.motion(self.to_latent(prev_motion)))
        fused = self.fuse(torch.cat(parts, dim=1))
        h = self.gru(fused, hidden[:, 0])
        return torch.cat([h, fused], dim=1), h.unsqueeze(1)

    def condition_sequence(self, tokens: torch.Tensor, frames: dict[str, torch.Tensor], prev_motion: torch.Tensor
                           ) -> torch.Tensor:
        """Conditions (B, T, 2H) of padded episodes: frames (B, T, ...), previous motions (B, T, 3)."""
        b, t = prev_motion.shape[:2]
        instruction = self.instruction(tokens)
        flat = {k: v.reshape(b * t, *v.shape[2:]) for k, v in frames.items()}
        visual = {k: (s.reshape(b, t, *s.shape[1:]), g.reshape(b, t, -1)) for k, (s, g) in self.encode_frames(flat).items()}
        hidden = self.initial_state(b, prev_motion.device)
        out = []
        for i in range(t):
            cond, hidden = self.step(instruction, {k: (s[:, i], g[:, i]) for k, (s, g) in visual.items()},
                                     prev_motion[:, i], hidden)
            out.append(cond)
        return torch.stack(out, dim=1)

    def progress(self, cond: torch.Tensor) -> torch.Tensor:
        """Predicted progress in [0, 1], shape cond.shape[:-1]."""
        return torch.sigmoid(self.progress_head(cond)).squeeze(-1)

    # ---------------------------------------------------------------- training

    def diffusion_loss(self, cond: torch.Tensor, actions: torch.Tensor, generator: torch.Generator | None = None
                       ) -> torch.Tensor:
        """Per-sample DDPM MSE (N,) of action chunks (N, T, 3) in metres / radians: of the noise
        (``prediction: epsilon``) or of the clean chunk (``sample``)."""
        x0 = self.to_latent(actions)
        n = x0.shape[0]
        k = torch.randint(0, self.diffusion_steps, (n,), device=x0.device, generator=generator)
        noise = torch.randn(x0.shape, device=x0.device, generator=generator)
        ab = self.alphas_cumprod[k].view(n, 1, 1)
        noisy = ab.sqrt() * x0 + (1 - ab).sqrt() * noise
        target = noise if self.prediction == "epsilon" else x0
        return F.mse_loss(self.denoiser(noisy, k, cond), target, reduction="none").mean(dim=(1, 2))

    def batch_conditions(self, batch: dict[str, Any]) -> torch.Tensor:
        """Conditions (B, T, 2H) of a trainer batch: each step's previous motion is the executed one before it."""
        executed = batch["extras"]["executed_action"]
        prev = torch.cat([self.start_motion(executed.shape[0], executed.device)[:, None], executed[:, :-1]], dim=1)
        return self.condition_sequence(batch["tokens"], batch["frames"], prev)

    def imitation_loss(self, batch: dict[str, Any]) -> tuple[torch.Tensor, float]:
        """DDPM loss + λ · progress MSE over the valid steps of a trainer batch; also the number of
        steps whose stop decision (progress > threshold) matches the teacher's (label 0 = STOP)."""
        extras = batch["extras"]
        cond = self.batch_conditions(batch)
        valid = batch["weights"] > 0
        c = cond[valid]
        n = self.noise_samples  # several (noise, step) draws per visited state: more denoising signal per frame
        diffusion = self.diffusion_loss(c.repeat(n, 1), extras["actions"][valid].repeat(n, 1, 1)).mean()
        progress = self.progress(c)
        target = extras["progress"][valid]
        loss = diffusion + self.progress_weight * F.mse_loss(progress, target)
        stop_pred = progress > self.stop_threshold
        correct = float((stop_pred == (batch["labels"][valid] == 0)).sum())
        return loss, correct

    # ---------------------------------------------------------------- sampling

    @torch.no_grad()
    def sample(self, cond: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """Action chunks (B, T, 3) in metres / radians for conditions (B, C), with the configured
        sampler (DDPM ancestral or DDIM η = 0); the same generator state gives the same sample."""
        b = cond.shape[0]
        x = torch.randn((b, self.horizon, LATENT_DIM), device=cond.device, generator=generator)
        ab = self.alphas_cumprod
        if self.sampler == "ddpm":
            steps = list(range(self.diffusion_steps - 1, -1, -1))
        else:
            steps = sorted({int(round(v)) for v in np.linspace(0, self.diffusion_steps - 1, self.ddim_steps)}, reverse=True)
        for i, k in enumerate(steps):
            kk = torch.full((b,), k, device=cond.device, dtype=torch.long)
            out = self.denoiser(x, kk, cond)
            x0 = (x - (1 - ab[k]).sqrt() * out) / ab[k].sqrt() if self.prediction == "epsilon" else out
            x0 = x0.clamp(-self.clip_sample, self.clip_sample)
            if self.sampler == "ddpm":
                prev_ab = ab[k - 1] if k > 0 else torch.tensor(1.0, device=cond.device)
                beta = self.betas[k]
                mean = (prev_ab.sqrt() * beta / (1 - ab[k])) * x0 + ((1 - beta).sqrt() * (1 - prev_ab) / (1 - ab[k])) * x
                if k > 0:
                    var = beta * (1 - prev_ab) / (1 - ab[k])
                    mean = mean + var.sqrt() * torch.randn(x.shape, device=x.device, generator=generator)
                x = mean
            else:
                nxt = steps[i + 1] if i + 1 < len(steps) else None
                prev_ab = ab[nxt] if nxt is not None else torch.tensor(1.0, device=cond.device)
                eps = (x - ab[k].sqrt() * x0) / (1 - ab[k]).sqrt()
                x = prev_ab.sqrt() * x0 + (1 - prev_ab).sqrt() * eps
        return self.from_latent(x)

    def act_step(self, instruction: tuple, visual: dict, prev_motion: torch.Tensor, hidden: torch.Tensor,
                 generator: torch.Generator | None = None, max_resamples: int = 3) -> tuple[Any, torch.Tensor, dict]:
        """One agent step: (STOP or ``WaypointAction``, new hidden, info {progress, nan_resamples})."""
        cond, hidden = self.step(instruction, visual, prev_motion, hidden)
        progress = float(self.progress(cond)[0])
        info = {"progress": round(progress, 4), "nan_resamples": 0}
        if progress > self.stop_threshold:
            return DiscreteAction.STOP, hidden, info
        for _ in range(max_resamples + 1):
            chunks = self.sample(cond.expand(self.action_samples, -1), generator)
            if torch.isfinite(chunks).all():
                chunk = medoid(chunks)[None]
                break
            info["nan_resamples"] += 1  # a diffusion sample with NaN is drawn again (counted)
        else:
            info["gave_up"] = "diffusion sample stayed non-finite: stopping"
            return DiscreteAction.STOP, hidden, info
        first = chunk[0, 0].cpu().double().numpy()
        info["chunk"] = np.round(chunk[0].cpu().numpy(), 3).tolist()
        action = WaypointAction(float(first[0]), float(first[1]), float(first[2]))
        if self.hop_view_deg is not None:
            looked = look_before_hop(action, self.hop_view_deg)
            if looked is not action:
                info["looked"] = True
            action = looked
        return action, hidden, info

    def generator_for(self, seed: int, episode_id: str, device: Any) -> torch.Generator:
        """A sampling generator seeded by (seed, episode id)."""
        g = torch.Generator(device=device)
        g.manual_seed(int(seed) * 1_000_003 + zlib.crc32(str(episode_id).encode()))
        return g

    # ---------------------------------------------------------------- acting

    def begin_episode(self, instruction: tuple, episode: Any, context: Any, agent: Any) -> dict[str, Any]:
        """Acting memory: the instruction, the GRU state, the previous motion (zeros) and the
        sampling generator of (agent seed, episode id)."""
        return {"instruction": instruction, "hidden": self.initial_state(1, agent.device),
                "prev": self.start_motion(1, agent.device),
                "generator": self.generator_for(agent.seed, episode.episode_id, agent.device)}

    def propose(self, memory: dict[str, Any], observations: dict[str, Any], state: Any, agent: Any) -> Any:
        """STOP or the first ``WaypointAction`` of a sampled chunk (``act_step``); the step's
        predicted progress and NaN re-samples go into the agent's outputs."""
        with torch.no_grad():
            visual = self.encode_frames(agent.frames(observations))
            action, memory["hidden"], info = self.act_step(memory["instruction"], visual, memory["prev"],
                                                           memory["hidden"], generator=memory["generator"])
        agent.outputs.append(info)
        return action

    def executed(self, memory: dict[str, Any], action: Any) -> None:
        """The executed motion (dx, dy, dyaw) is the next step's previous motion."""
        memory["prev"] = torch.from_numpy(motion_vector(action))[None].to(memory["prev"].device)
