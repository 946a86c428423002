"""The ``VLNPolicy`` base, and the Seq2Seq and CMA policies of VLN-CE (Krantz et al. 2020).

A policy is one ``VLNPolicy`` subclass registered with ``register_policy`` (``POLICIES``, in
``policies_registry``: built-ins load lazily, plug-ins on import). The base declares everything the
trainer, the checkpoints and the ``policy`` eval agent ask of a policy: ``imitation_loss`` (the
training objective), ``teacher_spec`` (the teacher that labels its data; None: the discrete
oracle), ``checkpoint_extras`` / ``params_from_checkpoint`` (what a checkpoint saves beside the
weights, and how its parameters rebuild the policy), and ``begin_episode`` / ``propose`` /
``executed`` / ``act`` (acting one step at a time in the runner).

Both read the instruction (word embeddings + LSTM), an RGB and a depth encoder, and the previous
action (embedding of 7 ids: 0 = episode start, 1 + action), and score the six VLN-CE actions
(STOP, MOVE_FORWARD, TURN_LEFT, TURN_RIGHT, LOOK_UP, LOOK_DOWN = ``DiscreteAction`` values).

- ``seq2seq``: one GRU over [instruction summary, RGB feature, depth feature, previous action];
- ``cma``: a state GRU over [RGB, depth, previous action]; its state attends over the instruction
  (bidirectional LSTM outputs); that text context attends over the RGB and depth spatial
  features; a second GRU over all of them gives the action logits (cross-modal attention).

Progress monitor (Ma et al. 2019, VLN-CE's CMA auxiliary loss): with ``progress_weight`` λ > 0 a
head on the same features predicts the episode's progress p̂ = sigmoid(·) ∈ [0, 1]; its target at
step t of an n-step teacher episode is (t + 1) / n (1 at the teacher's STOP); the loss adds
λ · mean (p̂ − p)² over valid steps. ``stop_threshold`` τ (needs the head) makes the agent's STOP
the head's decision: STOP when p̂ ≥ τ, else the best non-STOP action (the STOP logit is not used).

Visual encoders are small CNNs trained from scratch by default. ``rgb_encoder: {type: resnet18,
weights: PATH}`` uses a torchvision ResNet (weights loaded from a local file only); ``weights`` on
the CNN encoders and ``instruction_encoder.embeddings`` (a GloVe-format text file) load local
pretrained parameters. Nothing downloads; without a path the policy says it trains from scratch.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ..core.errors import ConfigError
from ..core.params import param, parse_params
from ..sim.types import DiscreteAction
from .encoders import CNNEncoder, ResNetEncoder, _local_file, _note, load_weights  # noqa: F401 (re-exported)
from .policies_registry import POLICIES, register_policy  # noqa: F401 (re-exported)
from .vocab import PAD_ID, Vocabulary

log = logging.getLogger(__name__)

NUM_ACTIONS = 6
#: previous-action ids: 0 = no previous action (episode start), 1 + DiscreteAction value
START_ACTION = 0

def make_visual_encoder(spec: dict[str, Any] | None, in_channels: int, field: str, notes: list[str],
                        sensor: dict[str, Any] | None = None, max_depth: float | None = None) -> nn.Module:
    """An encoder from ``{type: cnn|resnet18|resnet50, out_dim, channels, weights, frozen}`` or
    ``{type: pretrained, path: FILE, frozen}`` (a ``vlnverse pretrain-encoder`` file, checked
    against ``sensor``: the camera it reads)."""
    spec = dict(spec or {})
    kind = spec.pop("type", "cnn")
    allowed = {"cnn": {"out_dim", "channels", "weights", "frozen"}, "resnet18": {"out_dim", "weights", "frozen"},
               "resnet50": {"out_dim", "weights", "frozen"}, "pretrained": {"path", "frozen"}}
    if kind not in allowed:
        raise ConfigError(f"got {kind!r}", field=f"{field}.type", expected=f"one of {sorted(allowed)}")
    unknown = set(spec) - allowed[kind]
    if unknown:
        raise ConfigError(f"unknown key(s) {sorted(unknown)}", field=field, expected=f"keys among {sorted(allowed[kind])}")
    if kind == "pretrained":
        from .encoder.files import pretrained_trunk

        if not spec.get("path"):
            raise ConfigError("missing", field=f"{field}.path", expected="the encoder file of vlnverse pretrain-encoder")
        return pretrained_trunk(spec["path"], "rgb" if in_channels == 3 else "depth", in_channels, sensor, field=field,
                                frozen=bool(spec.get("frozen", True)), max_depth=max_depth, notes=notes)
    if kind == "cnn":
        return CNNEncoder(in_channels, field=field, notes=notes, **spec)
    if in_channels != 3:
        raise ConfigError(f"{kind} reads RGB only", field=f"{field}.type", expected="cnn for depth")
    return ResNetEncoder(kind, field=field, notes=notes, **spec)


class InstructionEncoder(nn.Module):
    """Word embeddings + LSTM over the token ids (padding id 0 masked)."""

    def __init__(self, vocab: Vocabulary, embedding_size: int = 50, hidden_size: int = 128, bidirectional: bool = False,
                 embeddings: str | None = None, notes: list[str] | None = None):
        super().__init__()
        self.embedding = nn.Embedding(len(vocab), embedding_size, padding_idx=PAD_ID)
        if embeddings:
            found = _load_glove(self.embedding, vocab, _local_file(embeddings, "instruction_encoder.embeddings"))
            _note(notes, f"instruction_encoder: {found} of {len(vocab)} words from pretrained embeddings {embeddings}")
        else:
            _note(notes, "instruction_encoder: no pretrained embeddings given (instruction_encoder.embeddings): "
                         "trained from scratch")
        self.lstm = nn.LSTM(embedding_size, hidden_size, batch_first=True, bidirectional=bidirectional)
        self.out_dim = hidden_size * (2 if bidirectional else 1)

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(B, L) ids → outputs (B, L', D), mask (B, L'), final summary (B, D)."""
        lengths = (tokens != PAD_ID).sum(1).clamp(min=1)
        packed = nn.utils.rnn.pack_padded_sequence(self.embedding(tokens), lengths.cpu(), batch_first=True,
                                                   enforce_sorted=False)
        out, (h, _) = self.lstm(packed)
        out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
        mask = torch.arange(out.shape[1], device=tokens.device)[None] < lengths[:, None]
        summary = torch.cat([h[-2], h[-1]], dim=1) if self.lstm.bidirectional else h[-1]
        return out, mask, summary


def _load_glove(embedding: nn.Embedding, vocab: Vocabulary, path: Path) -> int:
    """Copy vectors of a GloVe-format text file (``word v1 v2 ...``) into ``embedding``; returns words found."""
    found = 0
    dim = embedding.embedding_dim
    with open(path, encoding="utf-8") as fh, torch.no_grad():
        for lineno, line in enumerate(fh, 1):
            parts = line.rstrip().split(" ")
            if parts[0] in vocab.index:
                if len(parts) - 1 != dim:
                    raise ConfigError(f"vector of size {len(parts) - 1}", file=path, line=lineno,
                                      field="instruction_encoder.embedding_size", expected=str(dim))
                embedding.weight[vocab.index[parts[0]]] = torch.tensor([float(v) for v in parts[1:]])
                found += 1
    return found


@dataclass
class VLNPolicyParams:
    """``policy.params`` of ``seq2seq``: the ``VLNPolicy`` constructor's (a subclass's ``Params``
    extends it with its own keywords). ``stop_threshold`` (in (0, 1]) needs ``progress_weight`` > 0."""

    hidden_size: int = param(128, low=1, high=8192)
    action_embedding_size: int = param(32, low=1, high=4096)
    instruction_encoder: dict[str, Any] | None = None
    rgb_encoder: dict[str, Any] | None = None
    depth_encoder: dict[str, Any] | None = None
    max_depth: float = param(10.0, low=0.1, high=1000.0)
    progress_weight: float = param(0.0, low=0.0)
    stop_threshold: float | None = param(None, low=0.0, high=1.0)

    def validate(self) -> None:
        """``stop_threshold``: null, or in (0, 1] with a progress head to decide STOP."""
        if self.stop_threshold is not None and not (0 < self.stop_threshold <= 1 and self.progress_weight > 0):
            raise ConfigError(f"stop_threshold {self.stop_threshold!r} with progress_weight {self.progress_weight!r}",
                              field="stop_threshold",
                              expected="null, or a number in (0, 1] with progress_weight > 0 (the progress head decides STOP)")


@dataclass
class CMAParams(VLNPolicyParams):
    """``policy.params`` of ``cma``."""

    attention_size: int = param(128, low=1, high=8192)


class VLNPolicy(nn.Module):
    """Base class: instruction + RGB-D + previous action → action logits, one step at a time.

    A policy defines its recurrence once, either as ``step`` (→ logits; what a plug-in usually
    overrides) or as ``features`` with the heads of ``_make_heads`` (Seq2Seq, CMA: the progress
    head reads the same features). Training unrolls it over padded episode batches
    (``sequence_outputs``) and the eval agent calls ``step`` once per step, so both see the same
    computation. Subclasses override what differs (see the module docstring); the defaults are
    those of a discrete policy over the six VLN-CE actions.
    """

    name = "policy"
    #: whether ``imitation_loss`` weighs steps by the batch's inflection weights (False: every
    #: valid step weighs 1, and the trainer reports no inflection weight)
    uses_step_weights = True
    #: whether ``imitation_loss`` unrolls a batch packed by its ``lengths`` (``sequence_outputs``):
    #: only then does ``il.batching: bucketed`` group episodes of similar length; a policy whose loss
    #: ignores ``lengths`` gets a plain permutation (length-sorted batches gave it no speed and biased
    #: its updates: an RDP trained on them never stopped)
    unrolls_packed = True
    #: instruction tokens the policy reads (the training config's; saved in checkpoints)
    max_instruction_length = 80
    #: ``policy.params`` with their ranges (a dataclass extending ``VLNPolicyParams``), checked by
    #: ``build_policy``; None: the constructor alone decides (the base fields are still checked)
    Params: ClassVar[type | None] = None

    def __init__(self, vocab: Vocabulary, sensors: list[dict[str, Any]], *, hidden_size: int = 128,
                 action_embedding_size: int = 32, instruction_encoder: dict | None = None,
                 rgb_encoder: dict | None = None, depth_encoder: dict | None = None, max_depth: float = 10.0,
                 progress_weight: float = 0.0, stop_threshold: float | None = None):
        super().__init__()
        self.progress_weight = float(progress_weight)
        self.stop_threshold = None if stop_threshold is None else float(stop_threshold)
        self.notes: list[str] = []
        self.vocab = vocab
        self.sensors = sensors
        self.rgb_name = next((s["name"] for s in sensors if s["kind"] == "rgb"), None)
        self.depth_name = next((s["name"] for s in sensors if s["kind"] == "depth"), None)
        self.hidden_size, self.max_depth = int(hidden_size), float(max_depth)
        self.instruction = InstructionEncoder(vocab, notes=self.notes, **self._instruction_defaults(instruction_encoder))
        by_name = {s["name"]: s for s in sensors}
        self.rgb = make_visual_encoder(rgb_encoder, 3, "rgb_encoder", self.notes, by_name.get(self.rgb_name)
                                       ) if self.rgb_name else None
        self.depth = make_visual_encoder(depth_encoder, 1, "depth_encoder", self.notes, by_name.get(self.depth_name),
                                         self.max_depth) if self.depth_name else None
        self.prev_action = nn.Embedding(NUM_ACTIONS + 1, action_embedding_size)
        self.visual_dim = (self.rgb.out_dim if self.rgb else 0) + (self.depth.out_dim if self.depth else 0)

    def _instruction_defaults(self, spec: dict | None) -> dict:
        return dict(spec or {})

    # -------------------------------------------------------------- inputs

    def encoder_input(self, key: str, frames: dict[str, torch.Tensor]) -> torch.Tensor:
        """The ``key`` (rgb / depth) encoder's input (N, C, H, W) from raw frames: RGB uint8 / 255,
        depth in metres clamped to [0, max_depth] / max_depth."""
        if key == "rgb":
            return frames[self.rgb_name].float().permute(0, 3, 1, 2) / 255.0
        d = frames[self.depth_name].float().nan_to_num(self.max_depth).clamp(0, self.max_depth) / self.max_depth
        return d.unsqueeze(1)

    def encode_frames(self, frames: dict[str, torch.Tensor]) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """Raw frames (N, H, W, 3) uint8 RGB / (N, H, W) depth in metres → per-encoder (spatial,
        global). A frozen trunk's cached spatial features (``features.feature_name(key)``, from
        the feature cache) stand in for its frames: only ``fc`` runs on them."""
        from .features import feature_name

        out = {}
        for key, enc in (("rgb", self.rgb), ("depth", self.depth)):
            if enc is None:
                continue
            cached = frames.get(feature_name(key))
            if cached is not None:
                s = cached.float()
                out[key] = (s, enc.fc(s))
            else:
                out[key] = enc(self.encoder_input(key, frames))
        return out

    def initial_state(self, batch: int, device: Any = None) -> torch.Tensor:
        """Zero recurrent state (B, layers, hidden)."""
        return torch.zeros(batch, self.num_layers, self.hidden_size, device=device)

    num_layers = 1

    def features(self, instruction: tuple, visual: dict, prev_action: torch.Tensor, hidden: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        """One step of the recurrence: (features (B, feature_size) read by the heads, new hidden)."""
        raise NotImplementedError

    def _make_heads(self, feature_size: int) -> None:
        self.head = nn.Linear(feature_size, NUM_ACTIONS)
        self.progress_head = nn.Linear(feature_size, 1) if self.progress_weight > 0 else None

    def step(self, instruction: tuple, visual: dict, prev_action: torch.Tensor, hidden: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor]:
        """One step: (logits (B, 6), new hidden). In eval mode with ``stop_threshold`` the progress
        head decides STOP (logits: +inf for STOP when p̂ >= τ, else -inf)."""
        feats, hidden = self.features(instruction, visual, prev_action, hidden)
        logits = self.head(feats)
        if self.stop_threshold is not None and not self.training:
            stop = torch.sigmoid(self.progress_head(feats))[:, 0] >= self.stop_threshold
            logits = logits.clone()
            logits[:, 0] = torch.where(stop, float("inf"), float("-inf"))  # on the logits' device
        return logits, hidden

    def sequence_outputs(self, tokens: torch.Tensor, frames: dict[str, torch.Tensor], prev_actions: torch.Tensor,
                         lengths: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(logits (B, T, 6), progress p̂ (B, T) or None) for padded episodes: frames (B, T, ...),
        previous-action ids (B, T). With the episodes' ``lengths`` (B,) the encoders see the valid
        frames only and the recurrence is unrolled packed (``packed_unroll``, after
        ``sequence_visual``): the same outputs at the valid steps, zero features beyond. Without,
        the earlier padded unroll (``il.batching: padded``), kept as it was."""
        b, t = prev_actions.shape
        instruction = self.instruction(tokens)
        flat = {k: v.reshape(b * t, *v.shape[2:]) for k, v in frames.items()}
        if lengths is None:
            encoded = self.encode_frames(flat)
        else:  # the encoders see the valid frames only; padding reads zero features
            rows = (torch.arange(t)[None] < lengths.to("cpu")[:, None]).reshape(-1).nonzero()[:, 0].to(prev_actions.device)
            encoded = {k: tuple(x.new_zeros((b * t, *x.shape[1:])).index_put((rows,), x) for x in pair)
                       for k, pair in self.encode_frames({k: v[rows] for k, v in flat.items()}).items()}
        visual = {k: (s.reshape(b, t, *s.shape[1:]), g.reshape(b, t, -1)) for k, (s, g) in encoded.items()}
        by_step = type(self).features is VLNPolicy.features  # the recurrence is ``step`` itself (see the class)
        if by_step and self.progress_weight > 0:
            raise ConfigError(f"progress_weight {self.progress_weight} on policy '{self.name}', which defines step "
                              "but no features for a progress head", field="progress_weight", expected="0")
        recurrence = self.step if by_step else self.features
        if lengths is not None:
            f = packed_unroll(recurrence, instruction, self.sequence_visual(visual), prev_actions,
                              self.initial_state(b, prev_actions.device), lengths)
        else:
            hidden = self.initial_state(b, prev_actions.device)
            outs = []
            for i in range(t):
                step_visual = {k: tuple(x[:, i] for x in v) for k, v in visual.items()}
                out, hidden = recurrence(instruction, step_visual, prev_actions[:, i], hidden)
                outs.append(out)
            f = torch.stack(outs, dim=1)
        if by_step:
            return f, None
        progress = torch.sigmoid(self.progress_head(f))[..., 0] if self.progress_head is not None else None
        return self.head(f), progress

    def sequence_visual(self, visual: dict[str, tuple]) -> dict[str, tuple]:
        """Per encoder (spatial (B, T, ...), global (B, T, D)) of a whole batch, plus whatever the
        recurrence can compute for every step at once (appended to each tuple; ``features`` /
        ``step`` read it when there, as the step-by-step agent, which passes the pair, does not)."""
        return visual

    def forward_sequence(self, tokens: torch.Tensor, frames: dict[str, torch.Tensor], prev_actions: torch.Tensor,
                         ) -> torch.Tensor:
        """Logits (B, T, 6) for padded episodes (see ``sequence_outputs``)."""
        return self.sequence_outputs(tokens, frames, prev_actions)[0]

    def imitation_loss(self, batch: dict[str, Any]) -> tuple[torch.Tensor, float]:
        """(loss, correct valid steps) of a trainer batch (``batching.EpisodeBatches``): here the
        step-weighted cross-entropy against the teacher's labels + λ · progress MSE."""
        logits, progress = self.sequence_outputs(batch["tokens"], batch["frames"], batch["prev"], batch.get("lengths"))
        loss = sequence_loss(logits, batch["labels"], batch["weights"])
        valid = batch["weights"] > 0
        if progress is not None:
            lengths = valid.sum(1, keepdim=True).clamp(min=1).float()
            target = torch.arange(1, valid.shape[1] + 1, device=valid.device).float()[None] / lengths
            loss = loss + self.progress_weight * ((progress - target) ** 2)[valid].mean()
        with torch.no_grad():
            correct = float(((logits.argmax(-1) == batch["labels"]) & valid).sum())
        return loss, correct

    def _visual_globals(self, visual: dict) -> list[torch.Tensor]:
        return [visual[k][1] for k in ("rgb", "depth") if k in visual]

    # -------------------------------------------------------------- training

    @classmethod
    def teacher_spec(cls, params: dict[str, Any]) -> Any:
        """The teacher that labels this policy's training data for ``policy.params`` (a
        ``learn.collect.TeacherSpec``), or None for the discrete oracle teacher."""
        return None

    def teacher_overrides(self) -> dict[str, Any]:
        """``policy.params`` the teacher must use for this built policy whatever the config says
        (e.g. the cloud grid an HNR checkpoint was trained with); none by default."""
        return {}

    def multitask_report(self, records_by_task: dict[str, list], out: Any) -> dict[str, Any]:
        """Entries a multi-task run's ``tasks.json`` adds for this policy from its evaluation
        records per task (files it writes go to the folder ``out``); none by default."""
        return {}

    # -------------------------------------------------------------- checkpoints

    def checkpoint_extras(self) -> dict[str, Any]:
        """JSON-able entries a checkpoint saves beside the weights (read back by ``params_from_checkpoint``)."""
        return {}

    @classmethod
    def params_from_checkpoint(cls, params: dict[str, Any], data: dict[str, Any], path: Any) -> dict[str, Any]:
        """The constructor parameters that rebuild the policy of checkpoint ``data`` (its
        ``policy_params``): files read at training time only are dropped, since the weights hold
        what they gave (a pretrained encoder file becomes the CNN of its architecture)."""
        params = dict(params)
        for enc, prefix in (("rgb_encoder", "rgb"), ("depth_encoder", "depth")):
            if isinstance(params.get(enc), dict) and params[enc].get("type") == "pretrained":
                from .encoder.files import arch_of

                params[enc] = {"type": "cnn", "frozen": bool(params[enc].get("frozen", True)),
                               **arch_of(data["state_dict"], prefix)}
            elif isinstance(params.get(enc), dict):
                params[enc] = {k: v for k, v in params[enc].items() if k != "weights"}
        if isinstance(params.get("instruction_encoder"), dict):
            params["instruction_encoder"] = {k: v for k, v in params["instruction_encoder"].items() if k != "embeddings"}
        return params

    # -------------------------------------------------------------- acting (the ``policy`` eval agent)

    def begin_episode(self, instruction: tuple, episode: Any, context: Any, agent: Any) -> dict[str, Any]:
        """The per-episode acting memory that ``agent`` (a ``PolicyAgent``) keeps: the encoded
        instruction, the recurrent state and the previous action id."""
        return {"instruction": instruction, "hidden": self.initial_state(1, agent.device), "prev": START_ACTION}

    def propose(self, memory: dict[str, Any], observations: dict[str, Any], state: Any, agent: Any) -> Any:
        """Advance ``memory`` one step on ``observations`` and return the action: the argmax, or
        a draw from the softmax when the agent samples (``agent.pick``)."""
        visual = self.encode_frames(agent.frames(observations))
        prev = torch.tensor([memory["prev"]], device=agent.device)
        logits, memory["hidden"] = self.step(memory["instruction"], visual, prev, memory["hidden"])
        return DiscreteAction(agent.pick(logits[0]))

    @property
    def batch_acting(self) -> bool:
        """Whether the eval agent may act for several episodes in one forward (``propose_batch``):
        true for a policy that acts with this base class's ``begin_episode`` / ``propose`` /
        ``executed`` (its memory is the recurrent state; the scene context is not read); a policy
        that overrides them (RDP, the waypoint policies) acts one episode at a time."""
        cls = type(self)
        return (cls.begin_episode is VLNPolicy.begin_episode and cls.propose is VLNPolicy.propose
                and cls.executed is VLNPolicy.executed)

    def propose_batch(self, memories: list[dict[str, Any]], frames: list[dict[str, torch.Tensor]], agent: Any,
                      slots: list[Any]) -> list[Any]:
        """``propose`` for several episodes in one forward: ``memories`` and ``frames`` (the
        agent's ``frames(observations)``, (1, ...) tensors) one per episode, ``slots`` what
        ``agent.pick`` is told (whose random draws). Each episode's action and new state are bit
        for bit those of ``propose`` on it alone: the forward runs under ``row_exact``, the
        episodes whose instructions have the same length share the recurrence (nothing is
        padded), and the batch is ordered by those groups so that each group's visual features
        are a slice of the batch, laid out in memory as a single episode's are. A batch of one
        runs without ``row_exact`` (its operations already have a batch of one's shapes), which
        spares the mode's per-operation cost."""
        import contextlib

        from .row_exact import row_exact

        groups: dict[tuple, list[int]] = {}
        for i, memory in enumerate(memories):
            groups.setdefault(tuple(tuple(t.shape) for t in memory["instruction"]), []).append(i)
        order = [i for rows in groups.values() for i in rows]
        actions: list[Any] = [None] * len(memories)
        with row_exact() if len(memories) > 1 else contextlib.nullcontext():
            visual = self.encode_frames({k: torch.cat([frames[i][k] for i in order]) for k in frames[0]})
            start = 0
            for rows in groups.values():
                part = slice(start, start + len(rows))
                start += len(rows)
                instruction = tuple(torch.cat([memories[i]["instruction"][k] for i in rows])
                                    for k in range(len(memories[rows[0]]["instruction"])))
                prev = torch.tensor([memories[i]["prev"] for i in rows], device=agent.device)
                hidden = torch.cat([memories[i]["hidden"] for i in rows])
                logits, hidden = self.step(instruction, {k: (s[part], g[part]) for k, (s, g) in visual.items()},
                                           prev, hidden)
                for j, i in enumerate(rows):
                    memories[i]["hidden"] = hidden[j:j + 1]
                    actions[i] = DiscreteAction(agent.pick(logits[j], slot=slots[i]))
        return actions

    def executed(self, memory: dict[str, Any], action: Any) -> None:
        """Record the action actually executed (fed back as the previous action next step)."""
        memory["prev"] = 1 + int(DiscreteAction.coerce(action))

    def act(self, memory: dict[str, Any], observations: dict[str, Any], state: Any, agent: Any) -> Any:
        """One step of the eval agent: ``propose``, then ``executed`` with that action."""
        action = self.propose(memory, observations, state, agent)
        self.executed(memory, action)
        return action


def packed_unroll(recurrence: Any, instruction: tuple, visual: dict, prev_actions: torch.Tensor, hidden: torch.Tensor,
                  lengths: torch.Tensor) -> torch.Tensor:
    """Outputs (B, T, F) of ``recurrence(instruction, step_visual, prev, hidden) -> (out, hidden)``
    unrolled over padded episodes as ``pack_padded_sequence`` does: episodes sorted by length
    (longest first), step i runs on the episodes still going only, so no row computes on padding
    and the unroll stops at the longest episode. Rows are independent, so the valid steps' outputs
    are those of the padded unroll; steps past an episode's length are zero. The per-step inputs
    are views of one ``unbind`` (one gradient node, not one full-size zero tensor per step), and
    the instruction is cut once per change of the running count."""
    b, t = prev_actions.shape
    lengths = lengths.to("cpu", torch.int64).clamp(max=t)
    order = torch.argsort(lengths, descending=True, stable=True)
    running = (lengths[order][None] > torch.arange(t)[:, None]).sum(1).tolist()  # episodes going at each step
    idx = order.to(prev_actions.device)
    instruction = tuple(x[idx] for x in instruction)
    steps = {k: [x[idx].unbind(1) for x in v] for k, v in visual.items()}
    prev = prev_actions[idx].unbind(1)
    hidden = hidden[idx]
    outs, cut = [], {b: instruction}
    for i, n in enumerate(running):
        if n == 0:
            break
        if n not in cut:
            cut[n] = tuple(x[:n] for x in instruction)
        step_visual = {k: tuple(x[i] if n == b else x[i][:n] for x in v) for k, v in steps.items()}
        out, hidden = recurrence(cut[n], step_visual, prev[i][:n], hidden if hidden.shape[0] == n else hidden[:n])
        outs.append(out if n == b else F.pad(out, (0, 0, 0, b - n)))
    f = torch.stack(outs, dim=1)
    if f.shape[1] < t:
        f = F.pad(f, (0, 0, 0, t - f.shape[1]))
    return f[torch.argsort(idx)]


def sequence_loss(logits: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Inflection-weighted cross-entropy over the valid steps (weight 0 = padding)."""
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction="none")
    w = weights.reshape(-1)
    return (ce * w).sum() / w.sum().clamp(min=1e-8)


@register_policy("seq2seq")
class Seq2SeqPolicy(VLNPolicy):
    """VLN-CE Seq2Seq: a single GRU over [instruction LSTM state, RGB, depth, previous action]."""

    name = "seq2seq"
    Params = VLNPolicyParams

    def __init__(self, vocab: Vocabulary, sensors: list[dict[str, Any]], **params: Any):
        super().__init__(vocab, sensors, **params)
        in_dim = self.instruction.out_dim + self.visual_dim + self.prev_action.embedding_dim
        self.gru = nn.GRUCell(in_dim, self.hidden_size)
        self._make_heads(self.hidden_size)

    def features(self, instruction, visual, prev_action, hidden):
        """See ``VLNPolicy.features``: the GRU state."""
        x = torch.cat([instruction[2], *self._visual_globals(visual), self.prev_action(prev_action)], dim=1)
        h = self.gru(x, hidden[:, 0])
        return h, h.unsqueeze(1)


def _attend(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Scaled dot-product attention of (B, D) queries over (B, N, D) keys → (B, Dv)."""
    scores = torch.einsum("bd,bnd->bn", query, keys) / math.sqrt(keys.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.einsum("bn,bnd->bd", F.softmax(scores, dim=1), values)


@register_policy("cma")
class CMAPolicy(VLNPolicy):
    """VLN-CE cross-modal attention policy (see the module docstring)."""

    name = "cma"
    num_layers = 2
    Params = CMAParams

    def _instruction_defaults(self, spec: dict | None) -> dict:
        return {"bidirectional": True, **(spec or {})}

    def __init__(self, vocab: Vocabulary, sensors: list[dict[str, Any]], *, attention_size: int = 128, **params: Any):
        super().__init__(vocab, sensors, **params)
        h, a, text = self.hidden_size, int(attention_size), self.instruction.out_dim
        act = self.prev_action.embedding_dim
        self.state_gru = nn.GRUCell(self.visual_dim + act, h)
        self.text_query = nn.Linear(h, text)
        self.visual_keys = nn.ModuleDict()
        self.visual_query = nn.ModuleDict()
        attended = 0
        for key, enc in (("rgb", self.rgb), ("depth", self.depth)):
            if enc is not None:
                self.visual_keys[key] = nn.Conv1d(enc.spatial_channels, a, 1)
                self.visual_query[key] = nn.Linear(text, a)
                attended += enc.spatial_channels
        self.second_gru = nn.GRUCell(h + text + attended + act, h)
        self._make_heads(h + text)

    def sequence_visual(self, visual):
        """See ``VLNPolicy.sequence_visual``: the spatial attention keys of every step, in one call per encoder."""
        out = {}
        for key, (s, g) in visual.items():
            b, t = s.shape[:2]
            keys = self.visual_keys[key](s.reshape(b * t, *s.shape[2:])).transpose(1, 2)
            out[key] = (s, g, keys.reshape(b, t, *keys.shape[1:]))
        return out

    def features(self, instruction, visual, prev_action, hidden):
        """See ``VLNPolicy.features``: [second GRU state, attended instruction]."""
        ctx, mask, _ = instruction
        prev = self.prev_action(prev_action)
        h1 = self.state_gru(torch.cat([*self._visual_globals(visual), prev], dim=1), hidden[:, 0])
        text = _attend(self.text_query(h1), ctx, ctx, mask)
        attended = []
        for key in ("rgb", "depth"):
            if key in visual:
                spatial = visual[key][0]  # (B, C, 16)
                keys = visual[key][2] if len(visual[key]) > 2 else self.visual_keys[key](spatial).transpose(1, 2)
                attended.append(_attend(self.visual_query[key](text), keys, spatial.transpose(1, 2)))
        h2 = self.second_gru(torch.cat([h1, text, *attended, prev], dim=1), hidden[:, 1])
        return torch.cat([h2, text], dim=1), torch.stack([h1, h2], dim=1)


def build_policy(name: str, params: dict[str, Any], vocab: Vocabulary, sensors: list[dict[str, Any]]) -> VLNPolicy:
    """Instantiate the registered policy ``name``; bad parameters are a ``ConfigError``."""
    cls = POLICIES.get(name)
    check_policy_params(cls, params)
    try:
        return cls(vocab, sensors, **dict(params or {}))
    except TypeError as exc:
        raise ConfigError(str(exc), field="policy.params") from None


def check_policy_params(cls: type, params: dict[str, Any] | None) -> Any:
    """``params`` parsed into ``cls.Params`` (unknown keys, types and ranges: a one-line
    ``ConfigError`` naming ``policy.params.<field>``). A ``VLNPolicy`` without ``Params`` has the
    base fields it is given checked (None is returned); its constructor decides the rest."""
    declared = getattr(cls, "Params", None)
    owner = f"policy '{getattr(cls, 'name', cls.__name__)}'"
    if declared is not None:
        return parse_params(declared, params, owner=owner, prefix="policy.params")
    if issubclass(cls, VLNPolicy):
        base = {f for f in VLNPolicyParams.__dataclass_fields__}
        parse_params(VLNPolicyParams, {k: v for k, v in (params or {}).items() if k in base}, owner=owner,
                     prefix="policy.params")
    return None


def frames_to_tensors(frames: dict[str, np.ndarray], device: Any) -> dict[str, torch.Tensor]:
    """numpy frames → tensors on ``device`` (depth float16 → float32)."""
    return {k: torch.from_numpy(np.ascontiguousarray(v)).to(device) for k, v in frames.items()}
