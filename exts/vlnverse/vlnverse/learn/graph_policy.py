"""The supervised graph baseline of VLN-NF Table 2: VLN-BERT on the navigation graph with an added
NOT_FOUND class (``policy.name: graph_nf``, ``collision_mode: graph``), and its eval agent
``graph_policy``.

**Policy.** VLN-BERT's recurrent state-token transformer (``learn.vlnbert``: its text encoder, a
state token carried from step to step, one token per action, a scorer over [state, token]) with
the graph's actions: each neighbouring viewpoint is a candidate token, then a FOUND token (STOP
on episodes without a decision) and the added NOT_FOUND token. The transformer reads
``[state, instruction, seen objects, candidates, FOUND, NOT_FOUND]``:

* seen objects — the categories the semantic panorama shows at the viewpoint (objects in line of
  sight within ``sight`` m, 4 m: the scene's semantic labels, as ROAM's detector and room
  classifier read them), one token each, embedded with the instruction's word embeddings (the
  mean over the words of the category's name), so an instruction word and a seen object match;
* candidates — the objects seen in the candidate's direction (±45°), embedded the same way, plus
  (sin, cos) of its heading, its distance / 5 m and whether it was visited;
* the state token adds the step / 20 and the share of visited neighbours.

NOT_FOUND is scored only on decision episodes (false premise); elsewhere FOUND is STOP.

**Teacher** (imitation, :func:`teacher_steps`): the shortest graph route to the nearest
viewpoint inside the target room (door viewpoints excluded), then FOUND as soon as the named
object is in sight when it is present; otherwise on to the nearest unvisited room viewpoint that
shows a room object not seen yet, and NOT_FOUND when none is left (the room explored). (The
``oracle`` agent's graph route ends at the viewpoint nearest its reference viewpoint, which can
be a door viewpoint outside the room.)
Training (``vlnverse train graph_nf``): teacher-forced episodes of ``train`` (cross-entropy over
every step, Adam, ``il`` settings, seeded); each ``val`` split reports teacher-forced step and
decision accuracy; ``best.pt`` (a policy checkpoint, safetensors) holds the last weights.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ..core.errors import ConfigError
from ..core.io import to_jsonable, write_json_atomic
from ..core.params import param
from ..run.agents import Agent, AgentState, register_agent
from ..sim.types import DiscreteAction
from ..tasks.actions import Decision
from . import seed_torch
from .policies import POLICIES, check_policy_params
from .vlnbert.text import TextEncoder
from .vocab import PAD_ID, Vocabulary, tokenize

#: words per category name, object tokens per viewpoint, categories per candidate direction
MAX_WORDS, MAX_SEEN, MAX_DIRECTION = 3, 24, 8


# -------------------------------------------------------------------------------------------- observation


class GraphObserver:
    """Per scene: the objects each viewpoint sees (category, bearing), from line of sight on the
    view-blocking grid at camera height within ``sight`` m."""

    def __init__(self, ctx: Any, sight: float = 4.0):
        from ..run.scoring import view_blocking
        from ..tasks.tours import object_visibility

        graph = ctx.navgraph.graph
        self.graph = graph
        nodes = sorted(graph.nodes)
        xy = np.array([graph.nodes[n]["position"][:2] for n in nodes], dtype=float).reshape(-1, 2)
        objects = [o for o in ctx.desc.objects if getattr(o, "category", None)]
        self.seen: dict[int, list[tuple[str, float]]] = {int(n): [] for n in nodes}
        self.instances: dict[int, set[int]] = {int(n): set() for n in nodes}
        if objects and nodes:
            grid, origin = view_blocking(ctx)
            bmin = np.array([o.bounds_min for o in objects])
            bmax = np.array([o.bounds_max for o in objects])
            vis = object_visibility(grid, origin, ctx.planner.resolution, xy, bmin, bmax, max_range=sight)
            centre = (bmin[:, :2] + bmax[:, :2]) / 2
            for i, n in enumerate(nodes):
                d = centre - xy[i]
                self.seen[int(n)] = [(objects[j].category, math.atan2(d[j, 1], d[j, 0])) for j in np.flatnonzero(vis[i])]
                self.instances[int(n)] = {int(objects[j].instance_id) for j in np.flatnonzero(vis[i])}

    def position(self, node: int) -> np.ndarray:
        return np.asarray(self.graph.nodes[node]["position"][:2], dtype=float)

    def step(self, node: int, visited: set[int], step: int) -> dict[str, Any]:
        """What the policy reads at ``node``: seen categories, candidates (sorted neighbour ids)
        with their direction's categories and geometry, and the state features."""
        here = self.position(node)
        seen = self.seen.get(int(node), [])
        cands = []
        for n in sorted(self.graph.neighbors(node)):
            d = self.position(n) - here
            head = math.atan2(d[1], d[0])
            cats = sorted({c for c, b in seen if abs((b - head + math.pi) % (2 * math.pi) - math.pi) <= math.pi / 4})
            cands.append({"node": int(n), "geo": [math.sin(head), math.cos(head), float(np.hypot(*d)) / 5.0,
                                                  float(n in visited)], "cats": cats})
        share = float(np.mean([c["geo"][3] for c in cands])) if cands else 0.0
        return {"seen": sorted({c for c, _ in seen}), "cands": cands, "state": [min(step / 20.0, 2.0), share]}


def room_nodes(ctx: Any, room_id: int) -> set[int]:
    """Viewpoints inside room ``room_id``'s polygon (door viewpoints, in the wall's gap, excluded)."""
    graph = ctx.navgraph.graph
    try:
        room = ctx.desc.room_by_id(int(room_id))
    except KeyError:
        return set()
    return {int(n) for n, d in graph.nodes(data=True) if d.get("kind") != "door"
            and bool(room.contains(np.asarray(d["position"][:2], dtype=float)[None])[0])}


def teacher_steps(episode: Any, ctx: Any, observer: GraphObserver, max_steps: int = 40) -> list[dict[str, Any]]:
    """The teacher's graph route of a false-premise ``episode`` as labelled steps (label: candidate
    index, K = FOUND, K + 1 = NOT_FOUND), from the viewpoint graph mode starts on: the shortest
    route to the target room's nearest viewpoint, then, in the room, FOUND as soon as the named
    object is in sight (present), else on to the nearest unvisited room viewpoint that shows a
    room object not yet seen; NOT_FOUND when none is left (the room explored). Episodes of other
    tasks, or whose room has no viewpoint, give no steps."""
    import networkx as nx

    from ..run.modes import make_mode

    info = getattr(episode, "info", {}) or {}
    if not is_decision(episode) or "target_room_id" not in info:
        return []
    graph = ctx.navgraph.graph
    room = room_nodes(ctx, info["target_room_id"])
    node = int(make_mode("graph", None, navgraph=graph, planner=ctx.planner).nearest_node(episode.start_position[:2]))
    if not room:
        return []
    target = info.get("named_category") if Decision.parse(info.get("decision")) is Decision.FOUND else None
    room_objects = {int(i) for i in info.get("room_object_ids", [])}
    visited, seen, out = {node}, set(), []
    for t in range(max_steps):
        obs = observer.step(node, visited, t)
        ids = [c["node"] for c in obs["cands"]]
        inside = node in room
        if inside:
            seen |= observer.instances.get(node, set()) & room_objects
            if target is not None and target in obs["seen"]:
                obs["label"] = len(ids)
                return out + [obs]
        dist, paths = nx.single_source_dijkstra(graph, node, weight="weight")
        if inside:
            todo = [n for n in room if n not in visited and n in dist
                    and (observer.instances.get(n, set()) & room_objects) - seen]
        else:
            todo = [n for n in room if n in dist]
        if not todo:
            obs["label"] = len(ids) + (0 if target is not None else 1)
            return out + [obs]
        goal = min(todo, key=lambda n: (dist[n], n))
        nxt = int(paths[goal][1])
        obs["label"] = ids.index(nxt)
        out.append(obs)
        node = nxt
        visited.add(node)
    return out


# -------------------------------------------------------------------------------------------- policy


@dataclass
class GraphNFParams:
    """``policy.params`` of ``graph_nf`` (``sight`` in metres)."""

    hidden_size: int = param(64, low=8, high=8192)
    layers: int = param(2, low=1, high=256)
    heads: int = param(4, low=1, high=256)
    sight: float = param(4.0, low=0.1, high=100.0)

    def validate(self) -> None:
        """Attention heads that divide ``hidden_size``."""
        if self.hidden_size % self.heads:
            raise ConfigError(f"hidden_size {self.hidden_size} with heads {self.heads}", field="heads",
                              expected="a divisor of hidden_size")


@POLICIES.register("graph_nf")
class GraphNFPolicy(nn.Module):
    """See the module docstring. ``sensors`` is empty: the policy reads the navigation graph and
    the semantic panorama of its viewpoints."""

    name = "graph_nf"
    action_space = "graph"
    Params = GraphNFParams

    def checkpoint_extras(self) -> dict[str, Any]:
        """Nothing beside the weights, vocabulary and params (the checkpoint seam of ``VLNPolicy``)."""
        return {}

    @classmethod
    def params_from_checkpoint(cls, params: dict[str, Any], data: dict[str, Any], path: Any) -> dict[str, Any]:
        """The saved params rebuild the policy as they are."""
        return dict(params)

    def __init__(self, vocab: Vocabulary, sensors: list | None = None, *, hidden_size: int = 64, layers: int = 2,
                 heads: int = 4, sight: float = 4.0):
        super().__init__()
        self.notes: list[str] = []
        self.vocab, self.sensors = vocab, list(sensors or [])
        self.sight = float(sight)
        h = self.hidden_size = int(hidden_size)
        self.instruction = TextEncoder(vocab, size=h, layers=int(layers), heads=int(heads), notes=self.notes)
        self.geo = nn.Sequential(nn.Linear(4, h), nn.ReLU(), nn.Linear(h, h))
        self.state_in = nn.Linear(2, h)
        self.start_state = nn.Parameter(torch.zeros(1, h))
        self.decision_tokens = nn.Parameter(torch.randn(2, h) * 0.02)  # FOUND / STOP, NOT_FOUND
        self.types = nn.Embedding(6, h)  # state, text, seen, candidate, FOUND, NOT_FOUND
        layer = nn.TransformerEncoderLayer(h, int(heads), dim_feedforward=2 * h, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, int(layers), enable_nested_tensor=False)
        self.state_update = nn.Sequential(nn.Linear(2 * h, h), nn.Tanh())
        self.scorer = nn.Sequential(nn.Linear(2 * h, h), nn.ReLU(), nn.Linear(h, 1))
        self.max_instruction_length = 80

    # ---------------------------------------------------------------- inputs

    def words(self, category: str) -> list[int]:
        """Word ids of a category's spoken name (``coffee_table`` → coffee, table)."""
        ids = [self.vocab.index.get(w, 1) for w in tokenize(category.replace("_", " "))][:MAX_WORDS]
        return ids + [PAD_ID] * (MAX_WORDS - len(ids))

    def tensors(self, steps: list[list[dict]], decision: list[bool]) -> dict[str, torch.Tensor]:
        """Padded (B, T, ...) tensors of B episodes' step observations."""
        b, t = len(steps), max(1, max(len(s) for s in steps))
        k = max(1, max((len(o["cands"]) for s in steps for o in s), default=1))
        seen = np.zeros((b, t, MAX_SEEN, MAX_WORDS), np.int64)
        cats = np.zeros((b, t, k, MAX_DIRECTION, MAX_WORDS), np.int64)
        geo = np.zeros((b, t, k, 4), np.float32)
        valid = np.zeros((b, t, k), bool)
        state = np.zeros((b, t, 2), np.float32)
        labels = np.zeros((b, t), np.int64)
        mask = np.zeros((b, t), bool)
        for i, episode in enumerate(steps):
            for j, o in enumerate(episode):
                for m, c in enumerate(o["seen"][:MAX_SEEN]):
                    seen[i, j, m] = self.words(c)
                for m, c in enumerate(o["cands"]):
                    geo[i, j, m], valid[i, j, m] = c["geo"], True
                    for q, cat in enumerate(c["cats"][:MAX_DIRECTION]):
                        cats[i, j, m, q] = self.words(cat)
                state[i, j], mask[i, j] = o["state"], True
                lab = o.get("label", 0)
                labels[i, j] = lab if lab < len(o["cands"]) else k + (lab - len(o["cands"]))
        as_t = torch.from_numpy
        return {"seen": as_t(seen), "cats": as_t(cats), "geo": as_t(geo), "valid": as_t(valid), "state": as_t(state),
                "labels": as_t(labels), "mask": as_t(mask), "decision": torch.tensor(decision, dtype=torch.bool)}

    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        """Mean word embedding over the last axis (padding ignored; all padding → zeros)."""
        m = (ids != PAD_ID).float().unsqueeze(-1)
        return (self.instruction.embedding(ids) * m).sum(-2) / m.sum(-2).clamp(min=1.0)

    def encode(self, tokens: torch.Tensor) -> tuple:
        """The instruction's (outputs, mask, mean)."""
        return self.instruction(tokens)

    def initial_state(self, batch: int) -> torch.Tensor:
        return self.start_state.expand(batch, -1)

    def step(self, instruction: tuple, x: dict[str, torch.Tensor], t: int, hidden: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor]:
        """Scores (B, K + 2): candidates, FOUND, NOT_FOUND (invalid ones -inf), and the new state."""
        ctx, tmask, _ = instruction
        b = hidden.shape[0]
        seen_ids, cat_ids = x["seen"][:, t], x["cats"][:, t]
        seen = self._embed(seen_ids)                                   # (B, M, H)
        seen_ok = (seen_ids != PAD_ID).any(-1)
        per_cat = self._embed(cat_ids)                                 # (B, K, C, H)
        cat_ok = (cat_ids != PAD_ID).any(-1).float().unsqueeze(-1)
        cand = (per_cat * cat_ok).sum(2) / cat_ok.sum(2).clamp(min=1.0) + self.geo(x["geo"][:, t])
        valid = x["valid"][:, t]
        k = valid.shape[1]
        state = hidden + self.state_in(x["state"][:, t])
        w = self.types.weight
        tokens = torch.cat([(state + w[0])[:, None], ctx + w[1], seen + w[2], cand + w[3],
                            (self.decision_tokens + w[4:6])[None].expand(b, -1, -1)], dim=1)
        ones = torch.ones(b, 1, dtype=torch.bool, device=hidden.device)
        keep = torch.cat([ones, tmask, seen_ok, valid, ones, ones], dim=1)
        out = self.encoder(tokens, src_key_padding_mask=~keep)
        new = self.state_update(torch.cat([out[:, 0], hidden], dim=1))
        acts = out[:, -(k + 2):]
        scores = self.scorer(torch.cat([new[:, None].expand(-1, k + 2, -1), acts], dim=-1)).squeeze(-1)
        allowed = torch.cat([valid, ones, x["decision"][:, None]], dim=1)
        return scores.masked_fill(~allowed, float("-inf")), new

    def sequence_logits(self, tokens: torch.Tensor, x: dict[str, torch.Tensor]) -> torch.Tensor:
        """(B, T, K + 2) scores of teacher-forced episodes."""
        instruction = self.encode(tokens)
        hidden = self.initial_state(tokens.shape[0])
        out = []
        for t in range(x["mask"].shape[1]):
            s, hidden = self.step(instruction, x, t, hidden)
            out.append(s)
        return torch.stack(out, 1)

    # ---------------------------------------------------------------- training

    @classmethod
    def run_training(cls, cfg: Any, *, scene_loader: Callable | None = None, progress: bool = True,
                     report: Callable[[str], None] = print) -> dict[str, Any]:
        """Imitation of the graph oracle on ``cfg.train`` (see the module docstring); writes
        ``best.pt`` and ``summary.json`` into ``cfg.out``; returns the summary."""
        from .checkpoint import save_checkpoint

        if cfg.mode != "il":
            raise ConfigError(f"got {cfg.mode!r}", field="mode", expected="il (graph_nf trains by imitation only)")
        if cfg.init:
            raise ConfigError(f"got {cfg.init!r}", field="init", expected="no init: graph_nf trains from scratch")
        params = dict(cfg.policy.params or {})
        parsed = check_policy_params(cls, params)
        seed_torch(cfg.seed, cfg.threads)
        sight = parsed.sight
        max_steps = int(cfg.max_steps or 40)
        train = labelled_episodes(cfg, cfg.train, "train", cfg.train_split, sight, max_steps, scene_loader)
        val = {name: labelled_episodes(cfg, src, f"val.{name}", name, sight, max_steps, scene_loader)
               for name, src in cfg.val.items()}
        texts = [e.instruction_text for e, _ in train]
        cats = sorted({c for _, s in train for o in s for c in o["seen"]})
        vocab = Vocabulary.build(texts + [c.replace("_", " ") for c in cats])
        policy = cls(vocab, [], **params)
        policy.max_instruction_length = cfg.max_instruction_length
        opt = torch.optim.Adam(policy.parameters(), lr=cfg.il.lr, weight_decay=cfg.il.weight_decay)
        report(f"graph_nf: {len(train)} episodes, {sum(len(s) for _, s in train)} teacher steps, vocabulary "
               f"{len(vocab)} words")
        from tqdm import tqdm

        bs, losses = cfg.il.batch_size, []
        bar = tqdm(range(cfg.il.epochs), desc="graph_nf", unit="epoch", disable=not progress)
        for epoch in bar:
            policy.train()
            order = np.random.default_rng([cfg.seed, epoch]).permutation(len(train))
            total = n = 0.0
            for b0 in range(0, len(order), bs):
                batch = [train[i] for i in order[b0:b0 + bs]]
                tokens, x = policy.batch(batch)
                logits = policy.sequence_logits(tokens, x)
                mask = x["mask"]
                loss = F.cross_entropy(logits[mask], x["labels"][mask])
                if not torch.isfinite(loss):
                    raise ConfigError(f"loss is {float(loss)} at epoch {epoch + 1}", field="il.lr",
                                      expected="a smaller learning rate")
                opt.zero_grad()
                loss.backward()
                if cfg.il.grad_clip > 0:
                    torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.il.grad_clip)
                opt.step()
                total += float(loss.detach()) * int(mask.sum())
                n += int(mask.sum())
            losses.append(round(total / max(n, 1), 6))
            bar.set_postfix(loss=f"{losses[-1]:.3f}")
        accuracy = {"train": policy.accuracy(train), **{name: policy.accuracy(eps) for name, eps in val.items()}}
        out = Path(cfg.out)
        out.mkdir(parents=True, exist_ok=True)
        best = out / "best.pt"
        save_checkpoint(best, policy, config=cfg.to_dict(), run=out, extra={
            "provenance": {"train_episodes": len(train), "seed": cfg.seed, "accuracy": accuracy}})
        for name, acc in accuracy.items():
            report(f"graph_nf: {name} step accuracy {acc['step_accuracy']}, decision accuracy {acc['decision_accuracy']}")
        summary = {"mode": "il", "policy": cls.name, "episodes": len(train), "epochs": cfg.il.epochs,
                   "final_loss": losses[-1] if losses else None, "accuracy": accuracy,
                   "best": {"metric": "accuracy", "tag": "last", "value": accuracy["train"]["step_accuracy"]},
                   "checkpoint": str(best)}
        write_json_atomic(out / "summary.json", to_jsonable(summary))
        return summary

    def batch(self, episodes: list[tuple[Any, list[dict]]]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """(instruction tokens, step tensors) of (episode, steps) pairs."""
        tokens = torch.from_numpy(np.stack([self.vocab.encode(e.instruction_text, self.max_instruction_length)
                                            for e, _ in episodes]))
        return tokens, self.tensors([s for _, s in episodes], [is_decision(e) for e, _ in episodes])

    @torch.no_grad()
    def accuracy(self, episodes: list[tuple[Any, list[dict]]]) -> dict[str, Any]:
        """Teacher-forced step accuracy and accuracy of the final (decision) step."""
        if not episodes:
            return {"episodes": 0, "step_accuracy": None, "decision_accuracy": None}
        self.eval()
        tokens, x = self.batch(episodes)
        pred = self.sequence_logits(tokens, x).argmax(-1)
        mask = x["mask"]
        last = mask.sum(1) - 1
        rows = torch.arange(len(episodes))
        return {"episodes": len(episodes), "step_accuracy": round(float((pred == x["labels"])[mask].float().mean()), 4),
                "decision_accuracy": round(float((pred[rows, last] == x["labels"][rows, last]).float().mean()), 4)}


def is_decision(episode: Any) -> bool:
    """Whether the episode is scored on a FOUND / NOT_FOUND decision (its task's scoring)."""
    from ..tasks.scoring import scoring_for

    return bool(scoring_for(getattr(episode, "task_type", "")).applies_decision(episode))


def labelled_episodes(cfg: Any, source: Any, field: str, split: str | None, sight: float, max_steps: int,
                      scene_loader: Callable | None) -> list[tuple[Any, list[dict]]]:
    """(episode, teacher steps) of a train/val source (episodes resolved as the trainer does)."""
    from ..run.episodes import run_settings
    from ..tasks.base import load_scene_context
    from .splits import resolve_split

    settings = run_settings(cfg.task, body=cfg.body)
    episodes = resolve_split(source, split=split, task_type=settings.task_type,
                             task=cfg.task, body=cfg.body, cache_dir=cfg.cache.dir, field=field, progress=False,
                             resolve_scenes=scene_loader is None, scene_root=cfg.scene_root,
                             overrides=cfg.language_overrides())
    contexts: dict[str, Any] = {}
    observers: dict[str, GraphObserver] = {}
    out = []
    for ep in episodes:
        key = str(ep.scene_path)
        if key not in contexts:
            contexts[key] = scene_loader(ep.scene_path) if scene_loader is not None else \
                load_scene_context(ep.scene_path, settings.body, settings.resolution)
            observers[key] = GraphObserver(contexts[key], sight)
        steps = teacher_steps(ep, contexts[key], observers[key], max_steps)
        if steps:
            out.append((ep, steps))
    return out


# -------------------------------------------------------------------------------------------- agent


@dataclass
class GraphPolicyAgentParams:
    """``agent.params`` of ``graph_policy`` (``policy``: an in-memory ``GraphNFPolicy``)."""

    checkpoint: str | None = None
    policy: Any = None


@register_agent("graph_policy")
class GraphPolicyAgent(Agent):
    """A ``graph_nf`` checkpoint (``checkpoint``: the ``best.pt`` of ``vlnverse train graph_nf``,
    or an in-memory ``policy``): the argmax over neighbours, FOUND (STOP) and NOT_FOUND; each
    step's scores go into ``agent_outputs``. Trained for graph mode; under Tel-Hop / Strict it
    reads the viewpoint nearest to the agent and moves to the chosen one by waypoint."""

    Params = GraphPolicyAgentParams

    def __init__(self, *, checkpoint: str | None = None, policy: Any = None, **kwargs: Any):
        super().__init__(**kwargs)
        if (checkpoint is None) == (policy is None):
            raise ConfigError("give exactly one of checkpoint / policy", field="agent.params.checkpoint",
                              expected="the best.pt of 'vlnverse train graph_nf'")
        if checkpoint is not None:
            from .checkpoint import policy_from_checkpoint, read_checkpoint

            try:
                data = read_checkpoint(checkpoint, expected_policy="graph_nf")
            except ConfigError as exc:
                raise ConfigError(exc.problem, file=checkpoint, field="agent.params.checkpoint",
                                  expected=exc.expected or "the best.pt of 'vlnverse train graph_nf'") from None
            policy = policy_from_checkpoint(data, path=checkpoint)
        self.policy = policy.eval()
        self._observers: dict[int, GraphObserver] = {}

    def reset(self, episode: Any, context: Any) -> None:
        """Encode the instruction; the scene's observer is kept per scene."""
        super().reset(episode, context)
        key = id(context.desc)
        if key not in self._observers:
            self._observers[key] = GraphObserver(context, self.policy.sight)
        self._observer = self._observers[key]
        self._decision = is_decision(episode)
        tokens = torch.from_numpy(self.policy.vocab.encode(getattr(episode, "instruction_text", ""),
                                                           self.policy.max_instruction_length))[None]
        with torch.no_grad():
            self._instruction = self.policy.encode(tokens)
        self._hidden = self.policy.initial_state(1)
        self._visited: set[int] = set()

    @torch.no_grad()
    def act(self, observations: dict[str, Any], state: AgentState) -> Any:
        """The policy's argmax at the current viewpoint (outside graph mode: the viewpoint
        nearest to the agent, and a waypoint to the chosen one)."""
        from ..run.agents import go_to_node

        graph = self._observer.graph
        node = int(state.node) if state.mode == "graph" and state.node is not None else \
            int(state.context.navgraph.nearest_node(state.pose.xy))
        self._visited.add(node)
        obs = self._observer.step(node, self._visited, state.step)
        x = self.policy.tensors([[obs]], [self._decision])
        scores, self._hidden = self.policy.step(self._instruction, x, 0, self._hidden)
        kp = x["valid"].shape[2]  # padded: a viewpoint without neighbours still has one (invalid) slot
        ids = [str(c["node"]) for c in obs["cands"]]
        names = ids + [""] * (kp - len(ids)) + ["FOUND" if self._decision else "STOP", "NOT_FOUND"]
        choice = int(scores[0].argmax())
        finite = {n: round(float(v), 3) for n, v in zip(names, scores[0].tolist()) if n and math.isfinite(v)}
        self.outputs.append({"step": state.step, "node": node, "scores": finite, "action": names[choice]})
        if choice < len(ids):
            return go_to_node(graph, obs["cands"][choice]["node"], state)
        if not self._decision:
            return DiscreteAction.STOP
        return Decision.FOUND if choice == kp else Decision.NOT_FOUND
