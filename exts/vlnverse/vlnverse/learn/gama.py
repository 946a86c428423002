"""GAMA (the VLNVerse paper's unified agent, appendix A.1.2): the State-Adaptive Mixture of
Experts (SAME) and the ``gama`` policy in ``POLICIES``.

``SAME``: the routing feature is the current view's and the instruction's CLS (Eq. 8: here the
mean of the panorama view tokens and the mean of the text encoder's outputs); a router softmax
over N experts (Eq. 9), **once per time step** (not per token); the top-k experts, their
probabilities renormalised (k = 1: the raw probability, as the Switch Transformer), score the actions (Eq. 10: each expert is an MLP over [state,
action token]); the load-balancing loss is the importance loss ``N Σ_e P_e²`` (Shazeer et al.
2017: 1 + CV² of P), P_e the mean router probability of expert e over the batch's valid steps:
1 (its minimum) for uniform usage, up to N when one expert takes everything. (The Switch
Transformer's ``N Σ f_e P_e`` with hard top-k shares f can dip below its uniform value for
mismatched f and P; the importance loss cannot.) The per-expert top-k shares are logged.

The ``gama`` policy is HNR's backbone (``learn.hnr``: feature cloud, lookahead rendering, GASA
graph) with two cross-modal encoders (Eqs. 6-7): the *local* one is HNR's (state, instruction,
current candidates + their lookaheads, STOP); the *global* one reads the instruction and every
node of the topological graph. Both score actions through the same SAME experts; the learnt
fusion σ_t = sigmoid(w · [state, routing feature]) (Eq. 11) mixes them: σ_t · local + (1 - σ_t)
· global. Training adds ``balance_weight`` × the load-balancing loss. Acting logs the chosen
experts per step (``agent_outputs[step].experts``) and the router's probabilities (``.router``).

**Global actions** (``global_actions: true``, the default; DUET's dual-scale action space): the
global set is every unvisited node of the episode's ``topomap.TopoMap``: the current candidates,
STOP, and the *earlier frontier* (candidates seen at earlier steps, never reached; each keeps
the graph token of its candidate + lookahead from the step it was seen, plus its polar position
relative to the agent now), scored by the global encoder. ``fuse``: a current candidate's and
STOP's fused score add the local branch's score of that action; an earlier frontier node's adds
the local branch's *backtrack* score (a learnt token scored by the local experts with the local
state: DUET adds the local scores of the directions back to visited nodes). Choosing an earlier
node is one decision executed as waypoint hops along the shortest path through visited nodes
(``TopoMap.path``); the teacher labels the global set (``HNRTeacherAgent.global_oracle``).
Scores are ``[candidates (K), STOP, earlier frontier (F)]``. ``global_actions: false`` (and a
checkpoint from before global actions) scores the candidates and STOP only.
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


def fuse(local: torch.Tensor, back: torch.Tensor, glob: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    """Eq. 11 on the global action set: ``local`` (B, K + 1) scores of the candidates and STOP,
    ``back`` (B, 1) the local backtrack score, ``glob`` (B, K + 1 + F) the global scores of
    [candidates, STOP, earlier frontier], ``sigma`` (B, 1) → σ · local' + (1 - σ) · glob, local'
    the local scores with ``back`` for every earlier frontier node."""
    f = glob.shape[1] - local.shape[1]
    return sigma * torch.cat([local, back.expand(-1, f)], 1) + (1 - sigma) * glob


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
        """Routing feature (B, D) → (probabilities (B, N), top-k experts (B, k), their gates (B, k)): the
        probabilities renormalised over the k experts, or with k = 1 the raw probability (the Switch
        Transformer's gate: a renormalised single gate is 1 and would pass the router no gradient)."""
        probs = F.softmax(self.router(feature), -1)
        gates, idx = probs.topk(self.k, -1)
        return probs, idx, gates if self.k == 1 else gates / gates.sum(-1, keepdim=True)

    def score(self, tokens: torch.Tensor, idx: torch.Tensor, gates: torch.Tensor) -> torch.Tensor:
        """Action tokens (B, A, D) → scores (B, A): Σ over the chosen experts of gate · expert(token)."""
        all_scores = torch.stack([e(tokens)[..., 0] for e in self.experts], -1)  # (B, A, N)
        weight = torch.zeros(idx.shape[0], self.n, device=tokens.device, dtype=tokens.dtype).scatter(1, idx, gates)
        return (all_scores * weight[:, None]).sum(-1)


# -------------------------------------------------------------------------------------------- policy

from dataclasses import dataclass  # noqa: E402

import math  # noqa: E402

from ..core.params import param  # noqa: E402
from .hnr import HNRParams, HNRPolicy  # noqa: E402
from .policies import register_policy  # noqa: E402
from .topomap import TopoMap, hop_action  # noqa: E402
from .vlnbert.perception import candidate_action  # noqa: E402


@dataclass
class GAMAParams(HNRParams):
    """``policy.params`` of ``gama``: HNR's and the mixture of experts'."""

    experts: int = param(4, low=1, high=1024)
    top_k: int = param(2, low=1, high=1024)
    balance_weight: float = param(0.01, low=0.0)
    global_layers: int = param(1, low=1, high=256)
    global_actions: bool = True
    merge_radius: float = param(0.5, low=0.01, high=100.0)
    frontier: int = param(16, low=1, high=100_000)

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
                 balance_weight: float = 0.01, global_layers: int = 1, global_actions: bool = True,
                 merge_radius: float = 0.5, frontier: int = 16, **params: Any):
        super().__init__(vocab, sensors, **params)
        h = self.hidden_size
        self.global_actions, self.merge_radius, self.frontier_cap = bool(global_actions), float(merge_radius), int(frontier)
        if self.global_actions:  # earlier frontier nodes' type and the local backtrack token
            self.frontier_type = nn.Parameter(torch.randn(1, 1, h) * 0.02)
            self.back_token = nn.Parameter(torch.randn(1, 1, h) * 0.02)
        self.balance_weight = float(balance_weight)
        self.same = SAME(2 * h, 2 * h, experts=experts, k=top_k, hidden=h)
        self.fusion = nn.Linear(3 * h, 1)
        self.global_stop = nn.Parameter(torch.randn(1, 1, h) * 0.02)
        self.global_types = nn.Embedding(3, h)  # text, node, stop
        layer = nn.TransformerEncoderLayer(h, int(params.get("heads", 4)), dim_feedforward=2 * h, dropout=0.0, batch_first=True)
        self.global_encoder = nn.TransformerEncoder(layer, global_layers, enable_nested_tensor=False)
        self.freeze_for_stage()

    # ---------------------------------------------------------------- checkpoints, teacher

    def checkpoint_extras(self) -> dict[str, Any]:
        """HNR's and the global action space as built (defaults included)."""
        return {**super().checkpoint_extras(), "gama": {"global_actions": self.global_actions,
                                                        "merge_radius": self.merge_radius, "frontier": self.frontier_cap}}

    @classmethod
    def params_from_checkpoint(cls, params: dict[str, Any], data: dict[str, Any], path: Any) -> dict[str, Any]:
        """HNR's; the global action space as saved (a checkpoint without it: candidates and STOP only)."""
        out = super().params_from_checkpoint(params, data, path)
        saved = data.get("gama")
        out.update(dict(saved) if isinstance(saved, dict) else {"global_actions": False})
        return out

    def teacher_overrides(self) -> dict[str, Any]:
        """HNR's, and the teacher labels this policy's action space."""
        return {**super().teacher_overrides(), "global_actions": self.global_actions, "merge_radius": self.merge_radius,
                "frontier": self.frontier_cap}

    def multitask_report(self, records_by_task: dict[str, list], out: Any) -> dict[str, Any]:
        """The experts fired per task and decision step (``expert_usage`` over the records) ->
        ``out/expert_usage.json`` and ``out/expert_usage.png``."""
        from pathlib import Path

        from ..core.io import write_json_atomic

        usage = expert_usage(records_by_task, self.same.n)
        json_path, png = Path(out) / "expert_usage.json", Path(out) / "expert_usage.png"
        write_json_atomic(json_path, usage)
        plot_expert_usage(usage, png)
        return {"expert_usage": {"json": str(json_path), "png": str(png),
                                 "overall": {n: u["overall"] for n, u in usage.items()}}}

    @classmethod
    def teacher_spec(cls, params: dict[str, Any]) -> Any:
        """HNR's teacher, labelling the global action space unless ``global_actions`` is false."""
        from dataclasses import replace

        return replace(super().teacher_spec(params), global_actions=bool(params.get("global_actions", True)),
                       merge_radius=float(params.get("merge_radius", 0.5)), frontier_cap=int(params.get("frontier", 16)))

    # ---------------------------------------------------------------- global actions

    def update_frontier(self, mem: Any, pose: torch.Tensor, cands: torch.Tensor, cand_tokens: torch.Tensor
                        ) -> tuple[list[list[Any]], torch.Tensor, torch.Tensor]:
        """One decision step of each episode's ``TopoMap`` (arrive, observe) and the earlier
        frontier: (nodes per episode, tokens (B, F, H): the node's candidate + lookahead graph token
        from the step it was seen + its type + its polar position now, mask (B, F))."""
        b, k = cands.shape[:2]
        if not hasattr(mem, "topo"):
            mem.topo = [TopoMap(self.merge_radius, self.frontier_cap) for _ in range(b)]
            mem.node_tokens, mem.step = [{} for _ in range(b)], 0
        p, c = pose.detach().cpu().numpy(), cands.detach().cpu().numpy()
        earlier, rows = [], []
        for i, topo in enumerate(mem.topo):
            topo.arrive(p[i])
            topo.observe(p[i], c[i], mem.step)
            for slot in range(k):
                mem.node_tokens[i][mem.step * k + slot] = cand_tokens[i, slot]
            ids = {f.id for f in topo.frontier}
            mem.node_tokens[i] = {n: t for n, t in mem.node_tokens[i].items() if n in ids}
            nodes = topo.earlier()
            earlier.append(nodes)
            rel = [hop_action(p[i], f.xy) for f in nodes]
            rows.append([(math.sin(a), math.cos(a), d / self.max_distance) for a, d in rel])
        mem.step += 1
        n = max(len(e) for e in earlier)
        h = cand_tokens.shape[-1]
        tokens = cand_tokens.new_zeros(b, n, h)
        mask = torch.zeros(b, n, dtype=torch.bool, device=cand_tokens.device)
        if n:
            polar = torch.zeros(b, n, 3, device=cand_tokens.device)
            for i, nodes in enumerate(earlier):
                if nodes:
                    polar[i, :len(nodes)] = torch.tensor(rows[i], dtype=polar.dtype)
                    mask[i, :len(nodes)] = True
            stored = [torch.stack([mem.node_tokens[i][f.id] for f in nodes] +
                                  [cand_tokens.new_zeros(h)] * (n - len(nodes))) for i, nodes in enumerate(earlier)]
            tokens = torch.stack(stored) + (self.polar(polar) + self.frontier_type) * mask[..., None]
        return earlier, tokens, mask

    def graph_step(self, instruction: tuple, view_feats: torch.Tensor, cands: torch.Tensor, view_depth: torch.Tensor,
                   pose: torch.Tensor, hidden: torch.Tensor, mem: Any, view_grid: torch.Tensor | None = None
                   ) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:
        """HNR's step; with global actions the logits are (B, K + 1 + F): candidates, STOP, earlier frontier."""
        if not self.global_actions:
            return super().graph_step(instruction, view_feats, cands, view_depth, pose, hidden, mem, view_grid)
        graph = self.build_graph(instruction, view_feats, cands, view_depth, pose, mem, view_grid)
        new_state, actions, keep = self.encode_actions(instruction, graph["candidates"], graph["valid"], hidden)
        earlier, graph["frontier"], graph["frontier_mask"] = self.update_frontier(mem, pose, cands, graph["candidates"])
        scores, aux = self.score_actions(instruction, new_state, actions, graph)
        aux["rendered"], aux["earlier"] = graph["rendered"], earlier
        keep = torch.cat([keep, graph["frontier_mask"]], 1)
        return scores.masked_fill(~keep, float("-inf")), new_state.unsqueeze(1), aux

    def score_actions(self, instruction: tuple, new_state: torch.Tensor, actions: torch.Tensor, graph: dict
                      ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """σ_t · local + (1 - σ_t) · global scores, both through the routed experts (``fuse``;
        with ``graph["frontier"]`` the earlier frontier nodes too)."""
        ctx, tmask, summary = instruction
        b = new_state.shape[0]
        nodes, nmask = graph["nodes"], graph["mask"]
        frontier = graph.get("frontier", nodes[:, :0])
        fmask = graph.get("frontier_mask", nmask[:, :0])
        g = self.global_types.weight
        tokens = torch.cat([self.text_proj(ctx) + g[0], nodes + g[1], frontier, self.global_stop.expand(b, -1, -1) + g[2]], 1)
        keep = torch.cat([tmask, nmask, fmask, torch.ones(b, 1, dtype=torch.bool, device=nodes.device)], 1)
        out = self.global_encoder(tokens, src_key_padding_mask=~keep)
        first, k = ctx.shape[1] + int(graph["first"]), graph["valid"].shape[1]
        start = ctx.shape[1] + nodes.shape[1]
        global_actions = torch.cat([out[:, first:first + k] + out[:, first + k:first + 2 * k], out[:, -1:],
                                    out[:, start:start + frontier.shape[1]]], 1)
        route = torch.cat([graph["current"], self.text_proj(summary)], -1)  # view CLS, instruction CLS (Eq. 8)
        probs, idx, gates = self.same.route(route)
        expand = lambda a: torch.cat([new_state[:, None].expand(-1, a.shape[1], -1), a], -1)  # noqa: E731
        local = self.same.score(expand(actions), idx, gates)
        glob = self.same.score(expand(global_actions), idx, gates)
        sigma = torch.sigmoid(self.fusion(torch.cat([new_state, route], -1)))  # (B, 1)
        aux = {"probs": probs, "experts": idx, "sigma": sigma[:, 0], "local": local, "global": glob}
        if not self.global_actions:
            return sigma * local + (1 - sigma) * glob, aux
        back = self.same.score(expand(self.back_token.expand(b, -1, -1)), idx, gates)  # (B, 1)
        aux["back"] = back
        return fuse(local, back, glob, sigma), aux

    def frontier_action(self, memory: dict[str, Any], index: int, state: Any, info: dict[str, Any]) -> Any:
        """The first hop of the trip to earlier frontier node ``index`` (``TopoMap.path``); the
        rest wait in ``memory["hops"]`` for the next steps."""
        topo = memory["graph"].topo[0]
        node = topo.earlier()[index]
        path = topo.path(node)
        memory["hops"] = path[1:]
        info["frontier"] = {"node": [round(float(v), 3) for v in node.xy], "hops": len(path)}
        pose = state.pose
        return candidate_action(*hop_action((pose.x, pose.y, pose.yaw), path[0]))

    def propose(self, memory: dict[str, Any], observations: dict[str, Any], state: Any, agent: Any) -> Any:
        """HNR's, except while a trip to a frontier node has hops left: the next waypoint hop
        (a simulator waypoint action, logged as ``hop``; no decision)."""
        if memory.get("hops"):
            pose = state.pose
            ang, dist = hop_action((pose.x, pose.y, pose.yaw), memory["hops"].pop(0))
            agent.outputs.append({"hop": [round(ang, 4), round(dist, 3)], "hops_left": len(memory["hops"])})
            return candidate_action(ang, dist)
        return super().propose(memory, observations, state, agent)

    def auxiliary_loss(self, aux: list[dict], batch: dict[str, Any], valid: torch.Tensor) -> torch.Tensor:
        """HNR's rendering loss + ``balance_weight`` × the load-balancing loss over the valid steps."""
        loss = super().auxiliary_loss(aux, batch, valid)
        if self.balance_weight > 0:
            probs = torch.stack([a["probs"] for a in aux], 1)[valid]
            loss = loss + self.balance_weight * load_balancing_loss(probs)
        return loss

    def step_info(self, aux: dict[str, torch.Tensor]) -> dict[str, Any]:
        """The step's experts (top-k, by router probability), the router's probabilities over all
        experts (``router``, 6 decimals) and fusion weight σ_t."""
        return {"experts": [int(e) for e in aux["experts"][0]], "router": [round(float(p), 6) for p in aux["probs"][0]],
                "sigma": round(float(aux["sigma"][0]), 4)}


# -------------------------------------------------------------------------------------------- expert usage


def expert_usage(records_by_task: dict[str, Any], experts: int) -> dict[str, dict[str, Any]]:
    """Which experts fire for which task and step: ``records_by_task`` maps a task name to the
    episode records of a ``gama`` eval run (``episodes.jsonl``: a path, or the parsed records).
    Per task: ``share`` (steps × N, the share of top-k picks of each expert at decision step t,
    counted over episodes), ``overall`` (N,) and ``steps`` (top-k expert picks counted per step: decisions × k)."""
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
