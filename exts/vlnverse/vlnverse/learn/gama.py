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


# -------------------------------------------------------------------------------------------- policy

from dataclasses import dataclass  # noqa: E402

from ..core.params import param  # noqa: E402
from .hnr import HNRParams, HNRPolicy  # noqa: E402
from .policies import register_policy  # noqa: E402


@dataclass
class GAMAParams(HNRParams):
    """``policy.params`` of ``gama``: HNR's and the mixture of experts'."""

    experts: int = param(4, low=1, high=1024)
    top_k: int = param(2, low=1, high=1024)
    balance_weight: float = param(0.01, low=0.0)
    global_layers: int = param(1, low=1, high=256)

    def validate(self) -> None:
        """HNR's rules and ``top_k`` <= ``experts``."""
        super().validate()
        if self.top_k > self.experts:
            raise ConfigError(f"top_k {self.top_k} with {self.experts} experts", field="top_k",
                              expected=f"at most experts ({self.experts})")


@register_policy("gama")
class GAMAPolicy(HNRPolicy):
    """HNR's backbone with local and global cross-modal encoders scored by SAME (module docstring)."""

    name = "gama"
    Params = GAMAParams

    def __init__(self, vocab: Any, sensors: list[dict[str, Any]], *, experts: int = 4, top_k: int = 2,
                 balance_weight: float = 0.01, global_layers: int = 1, **params: Any):
        super().__init__(vocab, sensors, **params)
        h = self.hidden_size
        self.balance_weight = float(balance_weight)
        self.same = SAME(2 * h, 2 * h, experts=experts, k=top_k, hidden=h)
        self.fusion = nn.Linear(3 * h, 1)
        self.global_stop = nn.Parameter(torch.randn(1, 1, h) * 0.02)
        self.global_types = nn.Embedding(3, h)  # text, node, stop
        layer = nn.TransformerEncoderLayer(h, int(params.get("heads", 4)), dim_feedforward=2 * h, dropout=0.0, batch_first=True)
        self.global_encoder = nn.TransformerEncoder(layer, global_layers, enable_nested_tensor=False)
        self.freeze_for_stage()

    def score_actions(self, instruction: tuple, new_state: torch.Tensor, actions: torch.Tensor, graph: dict
                      ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """σ_t · local + (1 - σ_t) · global scores, both through the routed experts."""
        ctx, tmask, summary = instruction
        b = new_state.shape[0]
        nodes, nmask = graph["nodes"], graph["mask"]
        g = self.global_types.weight
        tokens = torch.cat([self.text_proj(ctx) + g[0], nodes + g[1], self.global_stop.expand(b, -1, -1) + g[2]], 1)
        keep = torch.cat([tmask, nmask, torch.ones(b, 1, dtype=torch.bool, device=nodes.device)], 1)
        out = self.global_encoder(tokens, src_key_padding_mask=~keep)
        first, k = ctx.shape[1] + int(graph["first"]), graph["valid"].shape[1]
        global_actions = torch.cat([out[:, first:first + k] + out[:, first + k:first + 2 * k], out[:, -1:]], 1)
        route = torch.cat([graph["current"], self.text_proj(summary)], -1)  # view CLS, instruction CLS (Eq. 8)
        probs, idx, gates = self.same.route(route)
        expand = lambda a: torch.cat([new_state[:, None].expand(-1, a.shape[1], -1), a], -1)  # noqa: E731
        local = self.same.score(expand(actions), idx, gates)
        glob = self.same.score(expand(global_actions), idx, gates)
        sigma = torch.sigmoid(self.fusion(torch.cat([new_state, route], -1)))  # (B, 1)
        return sigma * local + (1 - sigma) * glob, {"probs": probs, "experts": idx, "sigma": sigma[:, 0]}

    def auxiliary_loss(self, aux: list[dict], batch: dict[str, Any], valid: torch.Tensor) -> torch.Tensor:
        """HNR's rendering loss + ``balance_weight`` × the load-balancing loss over the valid steps."""
        loss = super().auxiliary_loss(aux, batch, valid)
        if self.balance_weight > 0:
            probs = torch.stack([a["probs"] for a in aux], 1)[valid]
            loss = loss + self.balance_weight * load_balancing_loss(probs)
        return loss

    def step_info(self, aux: dict[str, torch.Tensor]) -> dict[str, Any]:
        """The step's experts (top-k, by router probability) and fusion weight σ_t."""
        return {"experts": [int(e) for e in aux["experts"][0]], "sigma": round(float(aux["sigma"][0]), 4)}


# -------------------------------------------------------------------------------------------- expert usage


def expert_usage(records_by_task: dict[str, Any], experts: int) -> dict[str, dict[str, Any]]:
    """Which experts fire for which task and step: ``records_by_task`` maps a task name to the
    episode records of a ``gama`` eval run (``episodes.jsonl``: a path, or the parsed records).
    Per task: ``share`` (steps × N, the share of top-k picks of each expert at decision step t,
    counted over episodes), ``overall`` (N,) and ``steps`` (decisions counted per step)."""
    import json
    from pathlib import Path

    out: dict[str, dict[str, Any]] = {}
    for task, records in records_by_task.items():
        if isinstance(records, (str, Path)):
            records = [json.loads(line) for line in Path(records).read_text().splitlines() if line.strip()]
        counts: list[list[float]] = []
        for rec in records:
            decisions = [o["experts"] for o in rec.get("agent_outputs") or [] if isinstance(o, dict) and "experts" in o]
            for t, chosen in enumerate(decisions):
                while len(counts) <= t:
                    counts.append([0.0] * experts)
                for e in chosen:
                    if not 0 <= int(e) < experts:
                        raise ConfigError(f"expert {e} in a record of task {task!r}", field="agent_outputs.experts",
                                          expected=f"ids in 0..{experts - 1} (the policy's policy.params.experts)")
                    counts[t][int(e)] += 1.0
        steps = [sum(row) for row in counts]
        total = [sum(row[e] for row in counts) for e in range(experts)]
        out[task] = {"share": [[round(c / s, 4) for c in row] for row, s in zip(counts, steps)],
                     "overall": [round(c / max(sum(total), 1.0), 4) for c in total],
                     "steps": [int(s) for s in steps]}
    return out


def plot_expert_usage(usage: dict[str, dict[str, Any]], path: Any) -> Any:
    """A PNG of ``expert_usage``: one heat map (expert × step) per task; written atomically."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from ..core.io import atomic_path

    tasks = list(usage)
    fig = Figure(figsize=(4 + 0.2 * max((len(u["share"]) for u in usage.values()), default=1), 1.8 * max(len(tasks), 1)))
    FigureCanvasAgg(fig)
    axes = []
    for i, task in enumerate(tasks):
        ax = fig.add_subplot(len(tasks), 1, i + 1)
        axes.append(ax)
        share = usage[task]["share"]
        n = len(usage[task]["overall"])
        grid = [[row[e] for row in share] for e in range(n)] if share else [[0.0] for _ in range(n)]
        im = ax.imshow(grid, aspect="auto", vmin=0.0, vmax=1.0, cmap="viridis", interpolation="nearest")
        ax.set_ylabel(f"{task}\nexpert")
        ax.set_yticks(range(n))
        fig.colorbar(im, ax=ax, fraction=0.03)
    if tasks:  # (fig.axes also holds the colour bars: the task panels are ``axes``)
        axes[0].set_title("GAMA expert usage (share of top-k picks per decision step)")
        axes[-1].set_xlabel("decision step")
    fig.tight_layout()
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, format="png", dpi=80)
    return path
