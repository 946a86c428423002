"""The feature cloud of an episode (FIFO-capped points) and the volume renderer of lookahead
views over it (Eqs. 3-4)."""
from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from ...core.errors import ConfigError

#: the depth recorded for a panorama cell or view the agent's observation setup does not see (monocular)
UNSEEN = -1.0
#: where an unseen point waits in a batch's cloud (metres on every axis): beyond any rendering radius
PARKED = 1.0e4


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
        """Append ``backproject``'s output (B, n, ·); keep the newest ``cap`` points. With ``seen``
        (B, n) (``panorama_points`` of a monocular setup) the unseen points are dropped where no
        episode of the batch saw them, else parked out of every ray's reach (``PARKED``)."""
        seen = points.get("seen")
        if seen is not None:
            keep = seen.any(0)
            points = {k: v[:, keep] for k, v in points.items()}
            park = ~points["seen"]
            points["positions"] = points["positions"].masked_fill(park[..., None], PARKED)
            points["features"] = points["features"].masked_fill(park[..., None], 0.0)
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


def _neighbours(points: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """The rows of ``points`` (B, N, ...) that ``idx`` (B, Q, K) names → (B, Q, K, ...). One gather
    along N: its gradient is a scatter into (B, N, ...), not a dense (B, Q, N, ...) one."""
    b, q, k = idx.shape
    flat = idx.reshape(b, q * k)
    index = flat.reshape(b, q * k, *([1] * (points.dim() - 2))).expand(b, q * k, *points.shape[2:])
    return torch.gather(points, 1, index).reshape(b, q, k, *points.shape[2:])


class VolumeRenderer(nn.Module):
    """Renders region features of lookahead views from a ``FeatureCloud`` (see the module docstring)."""

    def __init__(self, feat_dim: int, hidden: int = 32, k: int = 4, rays: int = 3, samples: int = 8, near: float = 0.2,
                 far: float = 3.0, hfov_deg: float = 90.0, radius: float = 0.75, rows: int = 1):
        super().__init__()
        if not (k >= 1 and rays >= 1 and rows >= 1 and samples >= 2 and 0 <= near < far and radius > 0 and 0 < hfov_deg < 180):
            raise ConfigError(f"k={k} rays={rays} rows={rows} samples={samples} near={near} far={far} radius={radius} "
                              f"hfov_deg={hfov_deg}", field="policy.params.render",
                              expected="k >= 1, rays >= 1, rows >= 1, samples >= 2, 0 <= near < far, radius > 0, "
                                       "0 < hfov_deg < 180")
        self.k, self.radius = int(k), float(radius)
        half = math.radians(hfov_deg) / 2
        yaws = torch.linspace(-half, half, rays) if rays > 1 else torch.zeros(1)
        # rows of rays through the centres of ``rows`` horizontal bands of a square view (1 row: level)
        pitches = torch.atan(((torch.arange(rows) + 0.5) / rows * 2 - 1) * math.tan(half))
        self.register_buffer("ray_yaws", yaws.repeat(rows), persistent=False)
        self.register_buffer("ray_pitches", pitches.repeat_interleave(len(yaws)), persistent=False)
        self.register_buffer("depths", torch.linspace(near, far, samples), persistent=False)
        # Eq. 3: relative position (ray frame: forward, left, up), distance, relative orientation, scale
        self.rel = nn.Sequential(nn.Linear(7, hidden), nn.ReLU(inplace=True), nn.Linear(hidden, hidden))
        self.score = nn.Linear(hidden, 1)
        self.density = nn.Sequential(nn.Linear(hidden + feat_dim, hidden), nn.ReLU(inplace=True), nn.Linear(hidden, 1))

    def forward(self, cloud: FeatureCloud, origins: torch.Tensor, yaws: torch.Tensor,
                background: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Views at ``origins`` (B, M, 3) facing ``yaws`` (B, M) → (features (B, M, C), opacity (B, M)).
        With ``background`` (B, M, C) each ray composites it behind its last sample, weighted by
        the transmittance left, ``Σ w_i f_i + T_N f_bg`` (NeRF's background colour): a ray through
        empty space renders the background."""
        b, m = yaws.shape
        if len(cloud) == 0:  # nothing to gather: every ray is empty space
            empty = torch.zeros(b, m, cloud.features.shape[-1], device=yaws.device, dtype=yaws.dtype)
            return (empty if background is None else background), torch.zeros(b, m, device=yaws.device, dtype=yaws.dtype)
        ray_yaw = yaws[..., None] + self.ray_yaws  # (B, M, R)
        r, s = ray_yaw.shape[-1], self.depths.shape[0]
        cp, sp = torch.cos(self.ray_pitches), torch.sin(self.ray_pitches)
        direction = torch.stack([cp * torch.cos(ray_yaw), cp * torch.sin(ray_yaw), sp.expand_as(ray_yaw)], -1)
        pts = origins[:, :, None, None] + direction[:, :, :, None] * self.depths[:, None]  # (B, M, R, S, 3)
        q = pts.reshape(b, -1, 3)
        n = len(cloud)
        k = min(self.k, n)
        dist = torch.cdist(q, cloud.positions)  # (B, Q, N)
        near_d, idx = dist.topk(k, dim=-1, largest=False)
        p_k, f_k, h_k, s_k = (_neighbours(t, idx) for t in (cloud.positions, cloud.features, cloud.headings,
                                                             cloud.scales))
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
        if background is not None:  # T_N = 1 - the ray's opacity
            feat = feat + (1.0 - opacity)[..., None] * background[:, :, None]
        return feat.mean(2), opacity.mean(2)
