"""HNR (Wang et al. 2024, "Lookahead exploration with neural radiance representation", as in the
VLNVerse paper's appendix A.1.1): the building blocks and the ``hnr`` policy in ``POLICIES``.

- ``backproject`` (Eq. 2): grid features of a view, with planar depth (the simulator's
  convention) and pinhole intrinsics, become world points with an orientation (the camera's
  heading) and a scale (the footprint of a cell at its depth, ``depth / fx`` per pixel).
- ``FeatureCloud``: the points of an episode, grown step by step, capped at ``cap`` points;
  **eviction is first-in first-out** (when full, the oldest points go first: the cloud holds the
  most recent observations).
- ``VolumeRenderer`` (Eqs. 3-4): a lookahead view at (origin, heading) is ``rays`` horizontal
  rays across ``hfov``, ``samples`` points on each between ``near`` and ``far``; each sample
  gathers its K nearest cloud points (torch ``cdist`` + ``topk``, batched), embeds their relative
  position and orientation in the ray's frame, weighs them (softmax over K) into a latent
  feature and predicts a density; only neighbours within ``radius`` count (a sample with none is
  empty space, density 0). The ray integrates ``Σ T_i (1 - exp(-σ_i δ_i)) f_i`` (Eq. 4); the
  view's region feature is the mean over its rays.
- ``GraphAwareAttention`` (Eq. 5): multi-head self-attention over graph nodes whose logits add a
  learnt per-head map of the node distance matrix E (E = 0: plain attention).

The ``hnr`` policy extends VLN-BERT (``learn.vlnbert``: the panorama, the waypoint predictor's
candidates, the state token and the oracle teacher). Each step the 12 panorama view features go
into the cloud (one point per view, at the view's median centre-row depth: ``backproject`` of a
1 x 1 grid); for each candidate a lookahead view is rendered at the candidate's position facing
its direction; the topological graph holds the visited nodes (the last ``history`` positions),
the current node, the candidates and one lookahead node per candidate, encoded by
``graph_layers`` GASA layers over their Euclidean distances (metres; the paper's geodesic
distances on its graph: here the straight-line distance between node positions). A candidate's
token for the VLN-BERT scorer is its graph token plus its lookahead's.

Training: ``render_weight`` λ > 0 adds λ · (1 - cos) between the rendered feature of the oracle's
candidate at step t and the real panorama view the agent faces at step t + 1 (the simulator's
render at that pose, which the teacher recorded): the rendering model is supervised by the
encoder's feature of the real view, jointly with the policy (the paper pretrains it first).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ..core.errors import ConfigError
from ..sim.types import DiscreteAction
from .policies import register_policy
from .vlnbert import Perception, VLNBertPolicy, VLNBertTeacher, VLNBertTeacherAgent, candidate_action
from .vocab import PAD_ID

# -------------------------------------------------------------------------------------------- feature cloud


def backproject(features: torch.Tensor, depth: torch.Tensor, intrinsics: tuple[float, float, float, float],
                pose: torch.Tensor) -> dict[str, torch.Tensor]:
    """World points of grid features (Eq. 2).

    ``features`` (..., C, h, w) on a grid over a (H, W) image; ``depth`` (..., H, W) planar depth in
    metres (each cell reads the median depth of its pixels); ``intrinsics`` (fx, fy, cx, cy) in
    pixels of the (H, W) image; ``pose`` (..., 5): camera position (x, y, z), yaw (CCW from +x)
    and pitch (up positive) in the world (z up; the camera looks along its yaw). Returns
    ``positions`` (..., h*w, 3), ``features`` (..., h*w, C), ``headings`` (..., h*w) (the
    camera's yaw) and ``scales`` (..., h*w) (metres per pixel at the cell's depth, ``d / fx``)."""
    fx, fy, cx, cy = (float(v) for v in intrinsics)
    *lead, c, h, w = features.shape
    hh, ww = depth.shape[-2:]
    if hh % h or ww % w:
        raise ValueError(f"depth {hh}x{ww} is not a multiple of the feature grid {h}x{w}")
    cells = depth.reshape(*lead, h, hh // h, w, ww // w).transpose(-3, -2).reshape(*lead, h, w, -1)
    d = cells.median(-1).values  # (..., h, w)
    u = (torch.arange(w, dtype=depth.dtype, device=depth.device) + 0.5) * (ww / w)
    v = (torch.arange(h, dtype=depth.dtype, device=depth.device) + 0.5) * (hh / h)
    xc = (u[None, :] - cx) / fx * d  # right
    yc = (v[:, None] - cy) / fy * d  # down
    # camera frame → agent-aligned frame (forward, left, up), then pitch about the left axis, then yaw
    fwd, left, up = d, -xc, -yc
    pitch, yaw = pose[..., 4][..., None, None], pose[..., 3][..., None, None]
    fwd, up = fwd * torch.cos(pitch) - up * torch.sin(pitch), fwd * torch.sin(pitch) + up * torch.cos(pitch)
    x = pose[..., 0][..., None, None] + fwd * torch.cos(yaw) - left * torch.sin(yaw)
    y = pose[..., 1][..., None, None] + fwd * torch.sin(yaw) + left * torch.cos(yaw)
    z = pose[..., 2][..., None, None] + up
    positions = torch.stack([x, y, z], -1).reshape(*lead, h * w, 3)
    return {"positions": positions, "features": features.reshape(*lead, c, h * w).transpose(-1, -2),
            "headings": pose[..., 3][..., None].expand(*lead, h * w), "scales": (d / fx).reshape(*lead, h * w)}


class FeatureCloud:
    """The points of one or a batch of episodes (B, N, ·), at most ``cap`` per episode; when full
    the oldest points are evicted first (FIFO)."""

    def __init__(self, batch: int, feat_dim: int, cap: int = 256, device: Any = None):
        if cap < 1:
            raise ValueError("cap must be >= 1")
        self.cap = int(cap)
        z = lambda *s: torch.zeros(batch, 0, *s, device=device)  # noqa: E731
        self.positions, self.features, self.headings, self.scales = z(3), z(feat_dim), z(), z()

    def __len__(self) -> int:
        return self.positions.shape[1]

    def add(self, points: dict[str, torch.Tensor]) -> None:
        """Append ``backproject``'s output (B, n, ·); keep the newest ``cap`` points."""
        for key in ("positions", "features", "headings", "scales"):
            setattr(self, key, torch.cat([getattr(self, key), points[key]], dim=1)[:, -self.cap:])


# -------------------------------------------------------------------------------------------- rendering


def integrate(density: torch.Tensor, latent: torch.Tensor, deltas: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. 4 along the last sample axis: density (..., S), latent (..., S, C), deltas (S,) →
    (feature (..., C), opacity (...) = 1 - transmittance past the last sample)."""
    alpha = 1.0 - torch.exp(-density * deltas)
    trans = torch.cumprod(torch.cat([torch.ones_like(alpha[..., :1]), 1.0 - alpha[..., :-1] + 1e-10], -1), -1)
    weights = trans * alpha
    return (weights.unsqueeze(-1) * latent).sum(-2), weights.sum(-1)


class VolumeRenderer(nn.Module):
    """Renders region features of lookahead views from a ``FeatureCloud`` (see the module docstring)."""

    def __init__(self, feat_dim: int, hidden: int = 32, k: int = 4, rays: int = 3, samples: int = 8, near: float = 0.2,
                 far: float = 3.0, hfov_deg: float = 90.0, radius: float = 0.75):
        super().__init__()
        if not (k >= 1 and rays >= 1 and samples >= 2 and 0 <= near < far and radius > 0 and 0 < hfov_deg < 360):
            raise ConfigError(f"k={k} rays={rays} samples={samples} near={near} far={far} radius={radius} hfov_deg={hfov_deg}",
                              field="policy.params.render",
                              expected="k >= 1, rays >= 1, samples >= 2, 0 <= near < far, radius > 0, 0 < hfov_deg < 360")
        self.k, self.radius = int(k), float(radius)
        half = math.radians(hfov_deg) / 2
        self.register_buffer("ray_yaws", torch.linspace(-half, half, rays) if rays > 1 else torch.zeros(1), persistent=False)
        self.register_buffer("depths", torch.linspace(near, far, samples), persistent=False)
        # Eq. 3: relative position (ray frame: forward, left, up), distance, relative orientation, scale
        self.rel = nn.Sequential(nn.Linear(7, hidden), nn.ReLU(inplace=True), nn.Linear(hidden, hidden))
        self.score = nn.Linear(hidden, 1)
        self.density = nn.Sequential(nn.Linear(hidden + feat_dim, hidden), nn.ReLU(inplace=True), nn.Linear(hidden, 1))

    def forward(self, cloud: FeatureCloud, origins: torch.Tensor, yaws: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """Views at ``origins`` (B, M, 3) facing ``yaws`` (B, M) → (features (B, M, C), opacity (B, M))."""
        b, m = yaws.shape
        ray_yaw = yaws[..., None] + self.ray_yaws  # (B, M, R)
        r, s = ray_yaw.shape[-1], self.depths.shape[0]
        direction = torch.stack([torch.cos(ray_yaw), torch.sin(ray_yaw), torch.zeros_like(ray_yaw)], -1)
        pts = origins[:, :, None, None] + direction[:, :, :, None] * self.depths[:, None]  # (B, M, R, S, 3)
        q = pts.reshape(b, -1, 3)
        n = len(cloud)
        k = min(self.k, n)
        dist = torch.cdist(q, cloud.positions)  # (B, Q, N)
        near_d, idx = dist.topk(k, dim=-1, largest=False)
        gather = lambda t: torch.gather(t[:, None].expand(-1, q.shape[1], *t.shape[1:]), 2,  # noqa: E731
                                        idx.reshape(*idx.shape, *([1] * (t.dim() - 2))).expand(*idx.shape, *t.shape[2:]))
        p_k, f_k, h_k, s_k = (gather(cloud.positions), gather(cloud.features), gather(cloud.headings), gather(cloud.scales))
        yaw_q = ray_yaw[..., None].expand(b, m, r, s).reshape(b, -1)[..., None]  # (B, Q, 1)
        off = p_k - q[:, :, None]
        cos, sin = torch.cos(yaw_q), torch.sin(yaw_q)
        rel = torch.stack([off[..., 0] * cos + off[..., 1] * sin, -off[..., 0] * sin + off[..., 1] * cos, off[..., 2],
                           near_d, torch.sin(h_k - yaw_q), torch.cos(h_k - yaw_q), s_k], -1)
        emb = self.rel(rel)  # (B, Q, K, hidden)
        inside = near_d <= self.radius
        logits = self.score(emb)[..., 0].masked_fill(~inside, -1e4)
        w = F.softmax(logits, -1) * inside
        latent = (w[..., None] * f_k).sum(2)  # (B, Q, C)
        ctx = (w[..., None] * emb).sum(2)
        sigma = F.softplus(self.density(torch.cat([ctx, latent], -1))[..., 0]) * inside.any(-1)
        deltas = torch.cat([self.depths[1:] - self.depths[:-1], (self.depths[-1] - self.depths[-2])[None]])
        feat, opacity = integrate(sigma.reshape(b, m, r, s), latent.reshape(b, m, r, s, -1), deltas)
        return feat.mean(2), opacity.mean(2)


# -------------------------------------------------------------------------------------------- graph


class GraphAwareAttention(nn.Module):
    """Eq. 5: softmax(Q Kᵀ / √d + φ(E)) V per head, φ a learnt affine map of the distance matrix
    E (B, N, N) per head (initialised to -E: nearer nodes attend more); ``mask`` (B, N) keys."""

    def __init__(self, dim: int, heads: int = 4):
        super().__init__()
        if dim % heads:
            raise ConfigError(f"hidden_size {dim} with {heads} heads", field="policy.params.heads",
                              expected="a divisor of hidden_size")
        self.heads, self.dim = heads, dim
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.edge = nn.Linear(1, heads)
        with torch.no_grad():
            self.edge.weight.fill_(-1.0)
            self.edge.bias.zero_()

    def forward(self, x: torch.Tensor, distances: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        b, n, _ = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, self.dim // self.heads).permute(2, 0, 3, 1, 4)
        logits = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + self.edge(distances[..., None]).permute(0, 3, 1, 2)
        if mask is not None:
            logits = logits.masked_fill(~mask[:, None, None, :], float("-inf"))
        out = F.softmax(logits, -1) @ v
        return self.out(out.transpose(1, 2).reshape(b, n, self.dim))


class GraphLayer(nn.Module):
    """Pre-norm GASA + feed-forward block."""

    def __init__(self, dim: int, heads: int = 4):
        super().__init__()
        self.attn, self.norm1, self.norm2 = GraphAwareAttention(dim, heads), nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.ffn = nn.Sequential(nn.Linear(dim, 2 * dim), nn.ReLU(inplace=True), nn.Linear(2 * dim, dim))

    def forward(self, x: torch.Tensor, distances: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), distances, mask)
        return x + self.ffn(self.norm2(x))
