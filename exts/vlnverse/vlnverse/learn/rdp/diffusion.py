"""RDP's diffusion: the noise schedule, the transformer denoiser and the medoid of samples."""
from __future__ import annotations

import math

import torch
from torch import nn

LATENT_DIM = 4  # diffusion space: (dx / spacing, dy / spacing, sin dyaw, cos dyaw) - no wrap at +-pi
#: what the denoiser predicts: the noise (DDPM's ε) or the clean action chunk (x0)
PREDICTIONS = ("epsilon", "sample")


def cosine_betas(steps: int, s: float = 0.008, max_beta: float = 0.999) -> torch.Tensor:
    """The squared-cosine noise schedule (Nichol & Dhariwal 2021) of ``steps`` steps."""
    t = torch.linspace(0, steps, steps + 1, dtype=torch.float64) / steps
    f = torch.cos((t + s) / (1 + s) * math.pi / 2) ** 2
    return (1 - f[1:] / f[:-1]).clamp(max=max_beta).float()


def timestep_embedding(k: torch.Tensor, dim: int) -> torch.Tensor:
    """Sinusoidal embedding (B, dim) of integer diffusion steps ``k`` (B,)."""
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, device=k.device, dtype=torch.float32) / half)
    args = k.float()[:, None] * freqs[None]
    return torch.cat([torch.sin(args), torch.cos(args)], dim=1)


class Denoiser(nn.Module):
    """Transformer over [condition token, step token, T action tokens] → the noise (or clean value) of each action."""

    def __init__(self, cond_dim: int, horizon: int, size: int = 128, heads: int = 4, layers: int = 2):
        super().__init__()
        self.size = size
        self.action_in = nn.Linear(LATENT_DIM, size)
        self.cond_in = nn.Linear(cond_dim, size)
        self.step_in = nn.Sequential(nn.Linear(size, size), nn.SiLU(), nn.Linear(size, size))
        self.position = nn.Parameter(torch.randn(1, horizon + 2, size) * 0.02)
        layer = nn.TransformerEncoderLayer(size, heads, dim_feedforward=2 * size, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.out = nn.Linear(size, LATENT_DIM)

    def forward(self, noisy: torch.Tensor, k: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        """ε prediction (B, T, 4) for noisy latent actions (B, T, 4) at steps ``k`` (B,) given ``cond`` (B, C)."""
        tokens = torch.cat([self.cond_in(cond)[:, None], self.step_in(timestep_embedding(k, self.size))[:, None],
                            self.action_in(noisy)], dim=1) + self.position
        return self.out(self.encoder(tokens)[:, 2:])


def medoid(chunks: torch.Tensor) -> torch.Tensor:
    """The sample (T, 3) of ``chunks`` (N, T, 3) with the least total distance to the others (a
    robust consensus that, unlike the mean, never blends two distinct modes)."""
    if chunks.shape[0] == 1:
        return chunks[0]
    flat = chunks.flatten(1)
    return chunks[int(torch.cdist(flat, flat).sum(1).argmin())]
