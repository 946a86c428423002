"""GAMA (the VLNVerse paper's unified agent, appendix A.1.2): the State-Adaptive Mixture of
Experts (SAME) and the ``gama`` policy in ``POLICIES``.

``SAME``: the routing feature is the current view's and the instruction's CLS (Eq. 8: here the
mean of the panorama view tokens and the mean of the text encoder's outputs); a router softmax
over N experts (Eq. 9), **once per time step** (not per token); the top-k experts, their
probabilities renormalised, score the actions (Eq. 10: each expert is an MLP over [state,
action token]); the load-balancing loss is the importance loss ``N Σ_e P_e²`` (Shazeer et al.
2017: 1 + CV² of P), P_e the mean router probability of expert e over the batch's valid steps:
1 (its minimum) for uniform usage, up to N when one expert takes everything. (The Switch
Transformer's ``N Σ f_e P_e`` with hard top-k shares f can dip below its uniform value for
mismatched f and P; the importance loss cannot.) The per-expert top-k shares are logged.

The ``gama`` policy is HNR's backbone (``learn.hnr``: feature cloud, lookahead rendering, GASA
graph) with two cross-modal encoders (Eqs. 6-7): the *local* one is HNR's (state, instruction,
current candidates + their lookaheads, STOP); the *global* one reads the instruction and every
node of the topological graph. Both score the current candidates and STOP through the same
SAME experts; the learnt fusion σ_t = sigmoid(w · [state, routing feature]) (Eq. 11) mixes them:
σ_t · local + (1 - σ_t) · global. Training adds ``balance_weight`` × the load-balancing loss.
Acting logs the chosen experts per step (``agent_outputs[step].experts``).
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from ..core.errors import ConfigError


def load_balancing_loss(probs: torch.Tensor) -> torch.Tensor:
    """``N Σ_e P_e²`` of router probabilities (B, N), P_e the mean over the batch: 1 + CV²(P)."""
    mean = probs.reshape(-1, probs.shape[-1]).mean(0)
    return probs.shape[-1] * (mean ** 2).sum()


def expert_share(topk: torch.Tensor, experts: int) -> torch.Tensor:
    """The share (N,) of top-k assignments that went to each expert (logged, not differentiated)."""
    return F.one_hot(topk.reshape(-1, topk.shape[-1]), experts).float().sum(-2).mean(0) / topk.shape[-1]


class SAME(nn.Module):
    """Router over ``experts`` MLP scorers, the top ``k`` per time step (see the module docstring)."""

    def __init__(self, route_dim: int, token_dim: int, experts: int = 4, k: int = 2, hidden: int | None = None):
        super().__init__()
        if not (isinstance(experts, int) and isinstance(k, int) and 1 <= k <= experts):
            raise ConfigError(f"experts={experts!r} k={k!r}", field="policy.params.experts",
                              expected="integers with 1 <= top_k <= experts")
        hidden = hidden or token_dim
        self.n, self.k = experts, k
        self.router = nn.Linear(route_dim, experts)
        self.experts = nn.ModuleList(nn.Sequential(nn.Linear(token_dim, hidden), nn.ReLU(inplace=True), nn.Linear(hidden, 1))
                                     for _ in range(experts))

    def route(self, feature: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Routing feature (B, D) → (probabilities (B, N), top-k experts (B, k), their renormalised gates (B, k))."""
        probs = F.softmax(self.router(feature), -1)
        gates, idx = probs.topk(self.k, -1)
        return probs, idx, gates / gates.sum(-1, keepdim=True)

    def score(self, tokens: torch.Tensor, idx: torch.Tensor, gates: torch.Tensor) -> torch.Tensor:
        """Action tokens (B, A, D) → scores (B, A): Σ over the chosen experts of gate · expert(token)."""
        all_scores = torch.stack([e(tokens)[..., 0] for e in self.experts], -1)  # (B, A, N)
        weight = torch.zeros(idx.shape[0], self.n, device=tokens.device, dtype=tokens.dtype).scatter(1, idx, gates)
        return (all_scores * weight[:, None]).sum(-1)
