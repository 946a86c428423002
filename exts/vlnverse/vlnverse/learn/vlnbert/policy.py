"""VLN-BERT: a recurrent, waypoint-based navigator (Hong et al. 2021/2022, as fine-tuned online in
the VLNVerse paper), in ``POLICIES`` as ``vlnbert``.

Each step the agent's 12-view depth panorama (rendered at the agent's pose: a panorama sensor on
the agent) goes through the **candidate waypoint predictor** (``learn.waypoints``, frozen), which
gives per-view features and K candidate waypoints (angle, distance). A transformer reads
``[state token, instruction tokens, candidate tokens, STOP token]``: the instruction through a
small transformer text encoder trained from scratch (``text_encoder.weights: PATH`` loads a local
state dict of that encoder, nothing is downloaded); each candidate token is the panorama feature
at its angle (interpolated between the two nearest views) plus an encoding of (sin θ, cos θ,
distance). The output state token, mixed with the previous state, is the new state carried to the
next step (recurrence); a scorer over [state, token] scores each candidate and STOP.

The chosen candidate becomes ``WaypointAction(r cos θ, r sin θ, θ)`` (agent frame): the
simulator's waypoint controller under Strict physics, a teleport under Tel-Hop. When the
predictor finds no candidate the agent turns in place by ``no_candidate_turn_deg`` and predicts
again next step (counted: ``agent_outputs[step].no_candidates``).

**Teacher / oracle** (``VLNBertTeacher``): the candidate with the shortest geodesic distance to
the goal (on long-horizon episodes, whose sub-goals count in order, to the next sub-goal not yet
reached, as the discrete oracle routes; STOP only at the last); STOP when the geodesic distance is below ``stop_distance`` (1.5 m, at most the success
distance) and the agent is in open space (navigable cells all around it within
``open_space_radius``), or when no candidate leads closer to the goal and the agent is within
the success distance. Only candidates on navigable cells joined to the agent by a collision-free
segment count; when there is none, the candidate nearest (in a straight line) to the goal.

**Monocular turns**: a monocular setup (``ObservationSetup``) sees candidates in its field of view
only, so ``Perception`` adds three turn candidates (distance 0, at ±90° and 180°: ``TURN_ANGLES_DEG``)
after the predicted ones; the chosen turn is ``WaypointAction(0, 0, θ)``, a rotation in place.
Where no candidate leads closer and the agent may not STOP, the oracle picks the turn nearest the
direction of the planner's shortest path when that direction is out of view, once per place; a
turn keeps the predictor's relaxed threshold (``relax_after``). The policies read a
turn like any candidate (the blank view feature at its angle, distance 0); GAMA's map never makes
one a node (``topomap.TopoMap.observe``).
Training: cross-entropy between the scores and the oracle action, over
teacher-forced episodes (IL) and then online (``mode: dagger``) with schedule sampling: at each
step the executed action is the oracle's with probability β = p^round, else the policy's; β is
logged per round (``dagger.jsonl``, ``train_log.csv``, TensorBoard).
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ...core.body import as_body
from ...core.errors import ConfigError
from ...core.geometry import wrap_angle
from ...core.params import param
from ...sim.types import DiscreteAction, WaypointAction
from ...tasks.base import render_options
from ..collect import TeacherForcingAgent, TeacherSpec
from ..encoders import _note, load_weights
from ..policies import VLNPolicy, VLNPolicyParams, register_policy
from ..vocab import PAD_ID, Vocabulary
from ..waypoints.data import PanoramaRenderer
from ..waypoints.grid import ObservationSetup, to_world  # noqa: F401  (ObservationSetup: re-exported)
from ..waypoints.model import WaypointPredictor, load_predictor


# -------------------------------------------------------------------------------------------- text


class TextEncoder(nn.Module):
    """Word + position embeddings and a transformer encoder (BERT-style, small, from scratch);
    ``weights``: a local torch state dict of this module."""

    def __init__(self, vocab: Vocabulary, size: int = 64, layers: int = 2, heads: int = 4, max_length: int = 512,
                 weights: str | None = None, notes: list[str] | None = None):
        super().__init__()
        self.embedding = nn.Embedding(len(vocab), size, padding_idx=PAD_ID)
        self.position = nn.Embedding(max_length, size)
        layer = nn.TransformerEncoderLayer(size, heads, dim_feedforward=2 * size, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(size)
        self.out_dim = size
        if weights:
            load_weights(self, weights, "text_encoder.weights")
            _note(notes, f"text_encoder: loaded weights from {weights}")
        else:
            _note(notes, "text_encoder: no pretrained weights given (text_encoder.weights): small transformer "
                         "trained from scratch")

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(B, L) ids → outputs (B, L, D), mask (B, L) (a fully padded row keeps its first token), mean (B, D)."""
        mask = tokens != PAD_ID
        mask[:, 0] |= ~mask.any(1)
        pos = torch.arange(tokens.shape[1], device=tokens.device).clamp(max=self.position.num_embeddings - 1)
        out = self.norm(self.encoder(self.embedding(tokens) + self.position(pos)[None], src_key_padding_mask=~mask))
        m = mask.float().unsqueeze(-1)
        return out, mask, (out * m).sum(1) / m.sum(1).clamp(min=1.0)


# -------------------------------------------------------------------------------------------- perception


def candidate_action(angle: float, distance: float) -> WaypointAction:
    """The waypoint action that goes ``distance`` m in direction ``angle`` (rad CCW, agent frame)
    and faces that direction."""
    return WaypointAction(float(distance * math.cos(angle)), float(distance * math.sin(angle)), float(angle))


def in_open_space(planner: Any, xy: Any, radius: float = 0.3, directions: int = 8) -> bool:
    """Whether ``xy`` and the points ``radius`` m away in ``directions`` directions are navigable."""
    ang = np.arange(directions) * 2 * math.pi / directions
    pts = np.concatenate([np.asarray(xy, dtype=float)[None, :2],
                          np.asarray(xy, dtype=float)[:2] + radius * np.stack([np.cos(ang), np.sin(ang)], 1)])
    return bool(planner.is_navigable(pts).all())


#: headings (degrees CCW, agent frame) of a monocular setup's turn candidates: with the 90° camera
#: the three turned views and the current one tile the circle (each turn lands just outside the
#: field of view), and each is a panorama view's centre (30° views)
TURN_ANGLES_DEG = (90.0, -90.0, 180.0)


def is_turn(cands: np.ndarray) -> np.ndarray:
    """(K,) bool: the valid rows of candidates (K, 3) at distance 0, a monocular setup's turns in place."""
    c = np.asarray(cands)
    return (c[:, 2] > 0.5) & (c[:, 1] == 0)


def relax_after(choice: int, cands: np.ndarray, empty: int) -> int:
    """The ``Perception`` relax count after a decision with candidates: 0, except that a turn in
    place keeps it (the empty predictions before it still count: turning back towards a path the
    predictor found nothing along must not restart from the strict threshold, or the no-candidate
    sweep and the turn repeat forever)."""
    return empty if choice < len(cands) and bool(is_turn(cands)[choice]) else 0


class Perception:
    """Panorama → (view features (V, F), candidates (K, 3) = angle, distance, valid) with a
    waypoint predictor and a renderer (one simulator per scene), as the ``observation`` setup
    (``ObservationSetup``) sees it (``rgb``: render RGB too, for a reader other than the predictor). ``relax`` (the number of consecutive empty predictions before
    this one) lowers the NMS threshold by ``RELAX`` per empty prediction, so turning in place and
    predicting again cannot repeat forever.

    A monocular setup also offers **turn candidates**: rows at ``TURN_ANGLES_DEG`` with distance 0
    (valid; ``is_turn``) after its n predicted ones, which it keeps to the best ``k - 3`` by the
    predictor's score (NMS picks in score order); executed, a turn is a rotation in place. The
    returned count is of the predicted candidates alone (0: none, turn by ``no_candidate_turn_deg``
    and relax, as before)."""

    RELAX = 0.7

    def __init__(self, predictor: WaypointPredictor, observation: ObservationSetup | None = None, rgb: bool = False):
        from ..waypoints.grid import PANORAMA_HFOV_DEG

        p = predictor.params
        self.predictor = predictor
        self.k = int(p["k"])
        self.observation = ObservationSetup.parse(observation)
        self.turns = np.radians(TURN_ANGLES_DEG) if self.observation.monocular else np.zeros(0)
        if self.observation.monocular and self.k <= len(self.turns):
            raise ConfigError(f"a waypoint predictor with k = {self.k} for a monocular setup", field="waypoint_predictor",
                              expected=f"k > {len(self.turns)} (the turn candidates take {len(self.turns)} slots)")
        self.visible = self.observation.visible(int(p["views"]), PANORAMA_HFOV_DEG)
        self.renderer = PanoramaRenderer(p["views"], p["image_size"], rgb=p["rgb"] or rgb, max_depth=p["max_depth"])
        if self.observation.monocular:  # the unseen views read as blank for everyone downstream
            render, hidden = self.renderer.render, ~self.visible

            def blank(*args: Any, **kwargs: Any) -> dict[str, np.ndarray]:
                img = dict(render(*args, **kwargs))
                for key in ("depth", "rgb"):
                    if key in img:
                        img[key] = np.array(img[key])
                        img[key][hidden] = 0
                return img

            self.renderer.render = blank

    @torch.no_grad()
    def __call__(self, desc: Any, body: Any, pose: tuple[float, float, float], relax: int = 0,
                 options: dict[str, str] | None = None) -> tuple[np.ndarray, np.ndarray, int]:
        """(view features, padded candidates (k, 3), number of candidates) at ``pose``, the panorama
        drawn with the render ``options`` (the scene context's ``render_options``; None: the defaults)."""
        img = self.renderer.render(desc, body, pose, options=options or {})
        dev = next(self.predictor.parameters()).device
        d = torch.from_numpy(img["depth"])[None].to(dev)
        r = torch.from_numpy(img["rgb"])[None].to(dev) if "rgb" in img else None
        self.predictor.eval()
        feats = self.predictor.view_features(d, r)
        heat = torch.sigmoid(self.predictor(d, r))[0].cpu().numpy()
        cands = self.predictor.candidates(heat, img["depth"], threshold=self.predictor.params["threshold"] * self.RELAX ** relax,
                                          body=None if body is None else as_body(body))
        if self.observation.monocular:
            feats[:, torch.from_numpy(~self.visible).to(dev)] = 0.0
            cands = cands[self.observation.in_view(cands[:, 0])] if len(cands) else cands
            cands = cands[: self.k - len(self.turns)]  # the turns' slots: the lowest-scored give way
        out = np.zeros((self.k, 3), dtype=np.float32)
        out[: len(cands), :2] = cands
        out[: len(cands), 2] = 1.0
        if len(self.turns):
            out[len(cands): len(cands) + len(self.turns), 0] = self.turns
            out[len(cands): len(cands) + len(self.turns), 2] = 1.0
        return feats[0].cpu().numpy().astype(np.float32), out, len(cands)


# -------------------------------------------------------------------------------------------- teacher


@dataclass(frozen=True)
class VLNBertTeacher(TeacherSpec):
    """The waypoint oracle of VLN-BERT (see the module docstring), used by the observation cache
    and DAgger instead of the discrete oracle."""

    predictor_path: str
    stop_distance: float = 1.5
    open_space_radius: float = 0.3
    turn_deg: float = 30.0
    #: what the agent sees (a multi-task run's ``tasks[i].observation``)
    observation: ObservationSetup = ObservationSetup()

    @property
    def key(self) -> dict[str, Any]:
        """Part of the observation-cache key (the predictor by content; a monocular setup and its
        turn candidates)."""
        digest = hashlib.sha256(Path(self.predictor_path).read_bytes()).hexdigest()[:16]
        key = {"kind": "vlnbert", "predictor": digest, "stop_distance": self.stop_distance,
               "open_space_radius": self.open_space_radius, "turn_deg": self.turn_deg,
               "route": "subgoals"}  # ordered sub-goals visited in turn (caches labelled before: rebuilt)
        if not self.observation.monocular:
            return key
        return {**key, "observation": self.observation.to_dict(), "turns": list(TURN_ANGLES_DEG)}

    def _predictor(self) -> WaypointPredictor:
        return load_predictor(self.predictor_path)

    @property
    def extra_fields(self) -> dict[str, list[int]]:
        """Per-step labels stored beside the frames."""
        p = self._predictor()
        return {"view_feats": [p.views, p.params["hidden_size"]], "candidates": [p.params["k"], 3], "target": []}

    def make_agent(self, *, learner: Any = None, beta: float = 1.0, sensors: tuple[str, ...] = (),
                   seed: int = 0) -> "VLNBertTeacherAgent":
        """The recording agent of ``collect``."""
        return VLNBertTeacherAgent(self, learner=learner, beta=beta, sensors=sensors, seed=seed)


#: how far ahead (m) along the shortest path the oracle's turn candidates aim (``path_heading``)
PATH_AHEAD = 0.5
#: the oracle labels at most one turn within this distance (m) of where it last labelled one
TURN_PLACE = 0.1


def ordered_subgoals(episode: Any, planner: Any) -> list[tuple[np.ndarray, Any]]:
    """(point, geodesic distance field) of each sub-goal before the last of an episode whose goals
    count in order (``tasks.scoring.has_ordered_goals``: long-horizon), else none."""
    from ...tasks.scoring import has_ordered_goals

    goals = [np.asarray(g.position[:2], dtype=float) for g in episode.goals]
    if not (has_ordered_goals(episode) and len(goals) > 1):
        return []
    return [(g, planner.distance_field(g)) for g in goals[:-1]]


class VLNBertTeacherAgent(TeacherForcingAgent):
    """Records frames, panorama features, candidates and the oracle's choice; executes the
    oracle's action with probability ``beta``, else the learner's (schedule sampling)."""

    name = "vlnbert_teacher"
    #: sub-goals still to reach, in order (``ordered_subgoals``; set by ``reset``)
    subgoals: list = []
    #: where the oracle last labelled a turn (``turn_towards_path``; None: not yet this episode)
    turned_at: np.ndarray | None = None

    def __init__(self, spec: VLNBertTeacher, **kwargs: Any):
        super().__init__(**kwargs)
        self.spec = spec
        self.perception = Perception(spec._predictor(), spec.observation)
        self.no_candidates = 0

    def reset(self, episode: Any, context: Any) -> None:
        """New episode: the scene context gives the panorama renderer its scene; an episode whose
        goals count in order (long-horizon) gives the route of its sub-goals before the last."""
        super().reset(episode, context)
        self.context = context
        self.no_candidates = self._empty = 0
        self.subgoals = ordered_subgoals(episode, context.planner)
        self.turned_at = None

    def target(self, state: Any) -> tuple[Any, np.ndarray | None]:
        """(geodesic distance function, point) of where the oracle heads: the next sub-goal not
        yet reached, or the episode's goal (``state.goal_distance``; point None)."""
        if self.subgoals:
            xy, field = self.subgoals[0]
            return (lambda pts: field.distance(np.atleast_2d(pts))), xy
        return state.goal_distance, None

    def _candidate_distances(self, state: Any, cands: np.ndarray, n: int, distance: Any) -> tuple[np.ndarray, np.ndarray]:
        """World points of the first ``n`` candidates and their geodesic distances under
        ``distance`` (infinite for a candidate off the navigable map or behind an obstacle)."""
        pose = state.pose
        xy = np.array([pose.x, pose.y])
        planner = self.context.planner
        pts = to_world((pose.x, pose.y, pose.yaw), cands[:n, :2])
        ok = planner.is_navigable(pts) & planner.segments_free(np.repeat(xy[None], n, 0), pts)
        return pts, np.where(ok, np.asarray(distance(pts), dtype=float), np.inf)

    def oracle(self, state: Any, cands: np.ndarray, n: int) -> int:
        """Index of the oracle action: a candidate (0..k-1) or STOP (k). Only candidates on
        navigable cells joined to the agent by a collision-free segment count (others are at an
        infinite distance). A sub-goal counts as reached where the goal would allow STOP (within
        ``stop_distance``, or within the success distance with no candidate leading closer); the
        oracle then heads for the next. Where no candidate leads closer and STOP is not allowed, a
        monocular setup's turn towards the path (``turn_towards_path``; a turn, at distance 0, is
        never closer)."""
        pose = state.pose
        xy = np.array([pose.x, pose.y])
        k = len(cands)
        stop = min(self.spec.stop_distance, state.success_distance)
        while True:
            distance, point = self.target(state)
            d = float(distance(xy[None])[0])
            pts, dist = self._candidate_distances(state, cands, n, distance)
            if point is None or not (d < stop or (not dist.min() < d and d <= state.success_distance)):
                break
            self.subgoals.pop(0)  # this sub-goal is reached here: on to the next
        best = int(np.argmin(dist))
        closer = bool(dist[best] < d)
        if point is None:  # the last goal: STOP there
            if d < stop and (not closer or in_open_space(self.context.planner, xy, self.spec.open_space_radius)):
                return k
            if not closer and d <= state.success_distance:
                return k  # no reachable candidate leads closer and the agent is within the success radius
        turn = self.turn_towards_path(state, cands, xy, point) if not closer else None
        if turn is not None:
            return turn
        aim = self_goal(state, xy) if point is None else point
        return best if np.isfinite(dist[best]) else int(np.argmin(np.linalg.norm(pts - aim, axis=1)))

    def turn_towards_path(self, state: Any, cands: np.ndarray, xy: np.ndarray, point: np.ndarray | None) -> int | None:
        """The turn candidate (``is_turn``) whose heading is nearest the geodesic path's direction
        (``path_heading``) when that direction lies outside the field of view; None with no turn
        candidate, no path, the path in view (a turn would not reveal a candidate there, and the
        next step would turn back), or a turn already labelled within ``TURN_PLACE`` of here
        (``turned_at``: one turn per place; where the predictor finds nothing along the path,
        its no-candidate sweep and a turn back would otherwise repeat forever)."""
        turns = np.flatnonzero(is_turn(cands))
        last = self.turned_at
        if not len(turns) or (last is not None and np.linalg.norm(xy - last) < TURN_PLACE):
            return None
        heading = self.path_heading(state, xy, point)
        if heading is None or self.spec.observation.in_view(heading):
            return None
        off = np.abs(wrap_angle(cands[turns, 0].astype(float) - heading))
        self.turned_at = np.array(xy, dtype=float)
        return int(turns[int(np.argmin(off))])

    def path_heading(self, state: Any, xy: np.ndarray, point: np.ndarray | None) -> float | None:
        """Direction (rad CCW, agent frame) of the planner's shortest path from ``xy`` to the
        target (``point``, else the episode's goal nearest by geodesic distance, the last of
        ordered goals): towards its dense point ``PATH_AHEAD`` m ahead (or its end); None when
        there is no path or no goal."""
        from ...core.errors import NoNavigableSpaceError
        from ...tasks.scoring import has_ordered_goals

        planner = self.context.planner
        if point is None:
            ep = getattr(state, "episode", None)
            goals = [np.asarray(g.position[:2], dtype=float) for g in (ep.goals if ep is not None else [])]
            if not goals:
                return None
            goals = goals[-1:] if has_ordered_goals(ep) else goals
            point = min(goals, key=lambda g: planner.geodesic_distance(xy, g))
        try:
            dense = planner.shortest_path(xy, point).dense
        except NoNavigableSpaceError:
            return None
        ahead = np.linalg.norm(dense - xy, axis=1) >= PATH_AHEAD
        aim = dense[int(np.argmax(ahead))] if ahead.any() else dense[-1]
        if np.allclose(aim, xy):
            return None
        return wrap_angle(math.atan2(aim[1] - xy[1], aim[0] - xy[0]) - state.pose.yaw)

    def act(self, observations: dict[str, Any], state: Any) -> Any:
        """Perceive, label, pick the executed action (oracle with probability β), record."""
        pose = state.pose
        feats, cands, n = self.perception(self.context.desc, self.context.body, (pose.x, pose.y, pose.yaw),
                                          relax=self._empty, options=render_options(self.context))
        if n == 0:  # no candidate: turn in place and predict again (not a training step)
            self.no_candidates += 1
            self._empty += 1
            return WaypointAction(0.0, 0.0, math.radians(self.spec.turn_deg))
        target = self.oracle(state, cands, n)
        choice = target
        if self.learner is not None:
            proposal = self.learner.policy.choose(self.learner.memory, feats, cands, self.learner)
            if self.rng.random() >= self.beta:
                choice = proposal
        k = len(cands)
        executed = self.execute(choice, cands, state)
        self._empty = relax_after(choice, cands, self._empty)
        step = {name: np.array(observations[name]) for name in self.sensors}
        step.update(label=0 if target == k else 1, executed=0 if choice == k else 1,
                    pose=np.array([pose.x, pose.y, pose.yaw], dtype=np.float32), view_feats=feats, candidates=cands,
                    target=np.float32(target))
        self.steps.append(step)
        return executed

    def execute(self, choice: int, cands: np.ndarray, state: Any) -> Any:
        """The simulator action of a chosen index: STOP (``len(cands)``) or the candidate's waypoint."""
        if choice == len(cands):
            return DiscreteAction.STOP
        return candidate_action(float(cands[choice, 0]), float(cands[choice, 1]))


def candidate_loss(logits: torch.Tensor, target: torch.Tensor, batch: dict[str, Any], stop: int | None = None
                   ) -> tuple[torch.Tensor, float]:
    """Cross-entropy of the step scores (B, T, A) against the oracle's choice (B, T) over the
    batch's valid steps, and the number of correct argmaxes; ``stop`` is STOP's index (default the
    last, A - 1 = K; GAMA's global actions put earlier frontier nodes after it). Every step weighs 1
    (the trainer's inflection weights follow move / STOP labels only) except STOP steps, which weigh
    ``batch["stop_weight"]`` (``il.stop_weight``, default 1)."""
    valid = batch["weights"] > 0
    k = logits.shape[-1] - 1 if stop is None else int(stop)
    target = torch.where(valid, target, torch.full_like(target, k))  # padding: STOP (weight 0)
    w = valid.float()
    stop_weight = float(batch.get("stop_weight", 1.0))
    if stop_weight != 1.0:
        w = w * torch.where(target == k, torch.full_like(w, stop_weight), torch.ones_like(w))
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1), reduction="none")
    loss = (ce * w.reshape(-1)).sum() / w.sum().clamp(min=1e-8)
    return loss, float(((logits.argmax(-1) == target) & valid).sum())


def self_goal(state: Any, xy: np.ndarray) -> np.ndarray:
    """The episode's (last) goal position (x, y), or ``xy`` when the state carries no episode."""
    ep = getattr(state, "episode", None)
    return np.asarray(ep.goals[-1].position[:2], dtype=float) if ep is not None and ep.goals else np.asarray(xy, dtype=float)


# -------------------------------------------------------------------------------------------- policy


@dataclass
class VLNBertParams(VLNPolicyParams):
    """``policy.params`` of ``vlnbert`` (metres, degrees); ``waypoint_predictor`` is required: the
    file of ``vlnverse waypoints train`` (a checkpoint rebuilds it from its saved parameters)."""

    waypoint_predictor: str | dict[str, Any] | None = None
    text_encoder: dict[str, Any] | None = None
    layers: int = param(2, low=1, high=256)
    heads: int = param(4, low=1, high=256)
    stop_distance: float = param(1.5, low=0.01, high=100.0)
    open_space_radius: float = param(0.3, low=0.0, high=10.0)
    no_candidate_turn_deg: float = param(30.0, low=0.1, high=180.0)

    def validate(self) -> None:
        """The base rules, a waypoint predictor, and heads that divide ``hidden_size``."""
        super().validate()
        if self.waypoint_predictor is None:
            raise ConfigError("VLN-BERT needs a waypoint predictor", field="waypoint_predictor",
                              expected="the predictor.pt of 'vlnverse waypoints train'")
        if self.hidden_size % self.heads:
            raise ConfigError(f"hidden_size {self.hidden_size} with heads {self.heads}", field="heads",
                              expected="a divisor of hidden_size")


@register_policy("vlnbert")
class VLNBertPolicy(VLNPolicy):
    """Recurrent VLN-BERT over waypoint candidates (see the module docstring)."""

    name = "vlnbert"
    uses_step_weights = False  # every valid step weighs 1 in imitation_loss
    unrolls_packed = False  # imitation_loss reads no lengths: plain-permutation batches
    Params = VLNBertParams

    def __init__(self, vocab: Vocabulary, sensors: list[dict[str, Any]], *, waypoint_predictor: Any = None,
                 text_encoder: dict | None = None, layers: int = 2, heads: int = 4, stop_distance: float = 1.5,
                 open_space_radius: float = 0.3, no_candidate_turn_deg: float = 30.0, **params: Any):
        super().__init__(vocab, sensors, **params)
        if isinstance(waypoint_predictor, dict):  # rebuilt from a checkpoint (weights come with the state dict)
            self.predictor_path = None
            predictor = WaypointPredictor(**waypoint_predictor)
        else:
            self.predictor_path = str(waypoint_predictor)
            predictor = load_predictor(waypoint_predictor)
        self.stop_distance, self.open_space_radius = float(stop_distance), float(open_space_radius)
        self.turn_deg = float(no_candidate_turn_deg)
        self.predictor = predictor
        for p in self.predictor.parameters():
            p.requires_grad_(False)
        h = self.hidden_size
        text_spec = dict(text_encoder or {})
        self.instruction = TextEncoder(vocab, notes=self.notes, **{"size": h, **text_spec})
        # the base class's LSTM encoder notes are replaced by the text encoder's; its camera
        # encoders' notes go too: the navigator reads the predictor's view features
        self.notes[:] = [n for n in self.notes if not n.startswith(("instruction_encoder", "rgb_encoder", "depth_encoder"))]
        feat = predictor.params["hidden_size"]
        self.views = predictor.views
        self.max_distance = predictor.grid.max_distance
        self.text_proj = nn.Linear(self.instruction.out_dim, h)
        self.view_proj = nn.Linear(feat, h)
        self.polar = nn.Sequential(nn.Linear(3, h), nn.ReLU(inplace=True), nn.Linear(h, h))
        self.stop_token = nn.Parameter(torch.randn(1, 1, h) * 0.02)
        self.start_state = nn.Parameter(torch.zeros(1, h))
        self.types = nn.Embedding(4, h)  # state, text, candidate, stop
        layer = nn.TransformerEncoderLayer(h, heads, dim_feedforward=2 * h, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.state_update = nn.Sequential(nn.Linear(2 * h, h), nn.Tanh())
        self.scorer = nn.Sequential(nn.Linear(2 * h, h), nn.ReLU(inplace=True), nn.Linear(h, 1))

    # ---------------------------------------------------------------- checkpoints

    def checkpoint_extras(self) -> dict[str, Any]:
        """Saved into every checkpoint: the predictor's parameters (its weights are in the state dict)."""
        return {"waypoint_predictor": {"params": dict(self.predictor.params), "source": self.predictor_path}}

    @classmethod
    def params_from_checkpoint(cls, params: dict[str, Any], data: dict[str, Any], path: Any) -> dict[str, Any]:
        """Rebuild parameters: the embedded predictor replaces the training-time predictor path;
        a checkpoint without it is a one-line ``ConfigError`` naming the file."""
        params = super().params_from_checkpoint(params, data, path)
        wp = data.get("waypoint_predictor")
        has_weights = any(k.startswith("predictor.") for k in data.get("state_dict", {}))
        if not isinstance(wp, dict) or "params" not in wp or not has_weights:
            missing = "its parameters" if has_weights else "its weights" if isinstance(wp, dict) else "its parameters and weights"
            raise ConfigError(f"VLN-BERT checkpoint holds no waypoint predictor ({missing} missing)", file=path,
                              field="waypoint_predictor", expected="a checkpoint written by 'vlnverse train' with a vlnbert policy")
        out = dict(params)
        out["waypoint_predictor"] = dict(wp["params"])
        if isinstance(out.get("text_encoder"), dict):
            out["text_encoder"] = {k: v for k, v in out["text_encoder"].items() if k != "weights"}
        return out

    @classmethod
    def teacher_spec(cls, params: dict[str, Any]) -> VLNBertTeacher:
        """The waypoint oracle for these ``policy.params``."""
        path = params.get("waypoint_predictor")
        if not isinstance(path, (str, Path)):
            raise ConfigError("VLN-BERT training needs a waypoint predictor file", field="policy.params.waypoint_predictor",
                              expected="the predictor.pt of 'vlnverse waypoints train'")
        load_predictor(path)  # a clear error now rather than inside the rollout
        return VLNBertTeacher(str(path), float(params.get("stop_distance", 1.5)),
                              float(params.get("open_space_radius", 0.3)), float(params.get("no_candidate_turn_deg", 30.0)))

    def train(self, mode: bool = True) -> "VLNBertPolicy":
        """Train mode for the navigator; the frozen predictor stays in eval mode."""
        super().train(mode)
        self.predictor.eval()
        return self

    # ---------------------------------------------------------------- recurrence

    def initial_state(self, batch: int, device: Any = None) -> torch.Tensor:
        """The learnt start state (B, 1, H)."""
        return self.start_state.expand(batch, -1).unsqueeze(1).to(device) if device is not None else \
            self.start_state.expand(batch, -1).unsqueeze(1)

    def candidate_tokens(self, view_feats: torch.Tensor, cands: torch.Tensor) -> torch.Tensor:
        """(B, K, H) tokens: the view feature at each candidate's angle (linear between the two
        nearest views) plus the encoding of (sin θ, cos θ, distance / max distance)."""
        b, v, f = view_feats.shape
        pos = (cands[..., 0] / (2 * math.pi / v)) % v  # fractional view index
        lo = pos.floor().long() % v
        hi = (lo + 1) % v
        w = (pos - pos.floor()).unsqueeze(-1)
        gather = lambda idx: torch.gather(view_feats, 1, idx.unsqueeze(-1).expand(-1, -1, f))  # noqa: E731
        feat = (1 - w) * gather(lo) + w * gather(hi)
        polar = torch.stack([torch.sin(cands[..., 0]), torch.cos(cands[..., 0]), cands[..., 1] / self.max_distance], -1)
        return self.view_proj(feat) + self.polar(polar)

    def encode_actions(self, instruction: tuple, cand_tokens: torch.Tensor, valid: torch.Tensor, hidden: torch.Tensor
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The transformer over [state, instruction, candidate tokens (B, K, H), STOP]: (new state
        (B, H), action outputs (B, K + 1, H) with STOP last, action mask (B, K + 1))."""
        ctx, mask, _ = instruction
        b = cand_tokens.shape[0]
        state = hidden[:, 0]
        text = self.text_proj(ctx)
        tokens = torch.cat([state[:, None] + self.types.weight[0], text + self.types.weight[1],
                            cand_tokens + self.types.weight[2],
                            self.stop_token.expand(b, -1, -1) + self.types.weight[3]], dim=1)
        ones = torch.ones(b, 1, dtype=torch.bool, device=valid.device)
        keep = torch.cat([ones, mask, valid, ones], dim=1)
        out = self.encoder(tokens, src_key_padding_mask=~keep)
        new_state = self.state_update(torch.cat([out[:, 0], state], dim=1))
        return new_state, out[:, 1 + ctx.shape[1]:], torch.cat([valid, ones], dim=1)

    def step(self, instruction: tuple, view_feats: torch.Tensor, cands: torch.Tensor, hidden: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor]:
        """One step: (logits (B, K + 1), index K = STOP; invalid candidates -inf) and the new state (B, 1, H)."""
        new_state, actions, keep = self.encode_actions(instruction, self.candidate_tokens(view_feats, cands),
                                                       cands[..., 2] > 0.5, hidden)
        scores = self.scorer(torch.cat([new_state[:, None].expand(-1, actions.shape[1], -1), actions], dim=-1)).squeeze(-1)
        return scores.masked_fill(~keep, float("-inf")), new_state.unsqueeze(1)

    # ---------------------------------------------------------------- training

    def imitation_loss(self, batch: dict[str, Any]) -> tuple[torch.Tensor, float]:
        """Cross-entropy between the step scores and the oracle action (every valid step weighs 1),
        unrolling the state token over each episode; also the number of correct argmaxes."""
        extras = batch["extras"]
        feats, cands, target = extras["view_feats"], extras["candidates"], extras["target"].long()
        b, t = target.shape
        tokens = batch["tokens"]
        tokens = tokens[:, :max(1, int((tokens != PAD_ID).sum(1).max()))]  # drop all-padding columns
        instruction = self.instruction(tokens)
        hidden = self.initial_state(b, target.device)
        logits = []
        for i in range(t):
            out, hidden = self.step(instruction, feats[:, i], cands[:, i], hidden)
            logits.append(out)
        return candidate_loss(torch.stack(logits, dim=1), target, batch)

    # ---------------------------------------------------------------- acting

    def begin_episode(self, instruction: tuple, episode: Any, context: Any, agent: Any) -> dict[str, Any]:
        """Acting memory: the instruction, the state token, the scene (rendered for each panorama)
        and the count of candidate-free predictions."""
        if "perception" not in agent.cache:  # one renderer per agent, kept across episodes
            agent.cache["perception"] = Perception(self.predictor, getattr(agent, "observation", None))
        return {"instruction": instruction, "hidden": self.initial_state(1, agent.device), "context": context,
                "no_candidate_turns": 0, "empty": 0}

    def choose(self, memory: dict[str, Any], view_feats: np.ndarray, cands: np.ndarray, agent: Any) -> int:
        """Advance the state token one step on (view features, candidates) and return the chosen
        index (a candidate, or len(cands) for STOP); the VLN-BERT teacher asks the learner this."""
        with torch.no_grad():
            f = torch.from_numpy(np.asarray(view_feats, dtype=np.float32))[None].to(agent.device)
            c = torch.from_numpy(np.asarray(cands, dtype=np.float32))[None].to(agent.device)
            logits, memory["hidden"] = self.step(memory["instruction"], f, c, memory["hidden"])
        return agent.pick(logits[0])

    def propose(self, memory: dict[str, Any], observations: dict[str, Any], state: Any, agent: Any) -> Any:
        """Render the depth panorama at the agent's pose, take the predictor's candidates and
        return the chosen ``WaypointAction`` or STOP; with no candidate, turn in place (counted)."""
        ctx, pose = memory["context"], state.pose
        feats, cands, n = agent.cache["perception"](ctx.desc, ctx.body, (pose.x, pose.y, pose.yaw), relax=memory["empty"],
                                                    options=render_options(ctx))
        if n == 0:  # the predictor found no candidate: turn in place, predict again next step (lower threshold)
            memory["no_candidate_turns"] += 1
            memory["empty"] += 1
            agent.outputs.append({"no_candidates": True, "no_candidate_turns": memory["no_candidate_turns"]})
            return WaypointAction(0.0, 0.0, math.radians(self.turn_deg))
        choice = self.choose(memory, feats, cands, agent)
        memory["empty"] = relax_after(choice, cands, memory["empty"])
        info = {"candidates": n, "choice": "STOP" if choice == len(cands) else choice}
        if choice == len(cands):
            agent.outputs.append(info)
            return DiscreteAction.STOP
        info["waypoint"] = [round(float(cands[choice, 0]), 4), round(float(cands[choice, 1]), 3)]
        agent.outputs.append(info)
        return candidate_action(float(cands[choice, 0]), float(cands[choice, 1]))

    def executed(self, memory: dict[str, Any], action: Any) -> None:
        """Nothing: VLN-BERT's history is its state token."""

