"""Graph blocks of HNR and GAMA: graph-aware self-attention (GASA, Eq. 5), geodesic distances
on the topological graph, and a GASA layer."""
from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from ...core.errors import ConfigError



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


def graph_distances(positions: torch.Tensor, adjacency: torch.Tensor, unreachable: float = 100.0) -> torch.Tensor:
    """Shortest-path lengths (B, N, N) over the edges ``adjacency`` (B, N, N, symmetric) whose
    lengths are the Euclidean distances between ``positions`` (B, N, D) (Floyd-Warshall);
    unreachable pairs read ``unreachable`` metres."""
    d = torch.cdist(positions, positions)
    eye = torch.eye(d.shape[-1], dtype=torch.bool, device=d.device)
    d = torch.where(adjacency | eye, d, torch.full_like(d, float("inf")))
    for m in range(d.shape[-1]):
        d = torch.minimum(d, d[:, :, m:m + 1] + d[:, m:m + 1, :])
    return d.nan_to_num(posinf=unreachable).clamp(max=unreachable)


def topological_edges(visited: int, candidates: int, batch: int, device: Any = None) -> torch.Tensor:
    """Adjacency (B, N, N) of HNR's graph ``[visited (chronological), current, candidates,
    lookaheads]``: the trajectory chain, current — each candidate, each candidate — its lookahead."""
    n = visited + 1 + 2 * candidates
    a = torch.zeros(n, n, dtype=torch.bool, device=device)
    chain = torch.arange(visited, device=device)
    a[chain, chain + 1] = True
    cur, cand = visited, visited + 1 + torch.arange(candidates, device=device)
    a[cur, cand] = True
    a[cand, cand + candidates] = True
    a = a | a.T
    return a.expand(batch, n, n)


class GraphLayer(nn.Module):
    """Pre-norm GASA + feed-forward block."""

    def __init__(self, dim: int, heads: int = 4):
        super().__init__()
        self.attn, self.norm1, self.norm2 = GraphAwareAttention(dim, heads), nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.ffn = nn.Sequential(nn.Linear(dim, 2 * dim), nn.ReLU(inplace=True), nn.Linear(2 * dim, dim))

    def forward(self, x: torch.Tensor, distances: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), distances, mask)
        return x + self.ffn(self.norm2(x))
