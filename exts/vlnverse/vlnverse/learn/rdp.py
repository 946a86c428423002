"""RDP: a recurrent diffusion policy for continuous VLN (VLNVerse appendix A.2.3), in ``POLICIES``.

Per step the policy encodes the instruction (word embeddings + bidirectional LSTM), the RGB frame
(CNN → 4×4 spatial tokens) and the depth frame (CNN global feature). Two multi-head cross-modal
attention modules fuse language and vision (instruction tokens attend over the RGB tokens, RGB
tokens attend over the instruction tokens); their pooled outputs, the depth feature and the
previous executed motion feed a GRU that keeps the history. Conditioned on the GRU state, a small
transformer denoiser predicts the noise of the next ``horizon`` continuous actions
(Δx, Δy, Δyaw — each relative to the pose the previous one reaches, agent frame), trained with the
DDPM objective (squared-cosine schedule of ``diffusion_steps`` steps; the MSE of the noise,
``prediction: epsilon``, the paper's eq. 29, or of the clean chunk, ``sample``) and sampled
with DDPM ancestral sampling (``sampler: ddpm``) or deterministic DDIM (``sampler: ddim``, η = 0,
``ddim_steps`` evenly spaced steps; the default — deterministic given the initial noise, and
faster). Each visited state is trained with ``noise_samples`` (noise, step) draws. A stop-progress head (sigmoid; 0 at the start → 1 at the
goal) is trained with MSE weighted by ``progress_weight`` (λ); the agent stops when predicted
progress exceeds ``stop_threshold`` (0.95: it stops where d - r <= 0.05 (d0 - r), within the
success distance when r is half of it on paths up to ~15 m; 0.9 stopped short of the success
circle on the tests' 8 m corridor paths). Otherwise it executes the first action of the sampled chunk
(the medoid of ``action_samples`` samples when more than one)
as a ``WaypointAction`` — through the waypoint controller under physics (Strict) or by teleport
(Tel-Hop) — and re-plans at the next step (receding horizon). With ``hop_view_deg: A`` (inference
only) a first action that moves the agent to a bearing more than A degrees off its heading — out of
the camera's view when A is half its field of view — is executed as a turn in place onto that
bearing (``look_before_hop``): the agent looks where it would go and re-plans from that view.

Teacher (``WaypointTeacher``): at every visited pose, the geodesic shortest path to the goal
(the scene planner's A* path from the current pose) that keeps ``teacher_clearance`` metres (default
0.15) from the edge of the navigable map where the map allows it — planned on the navigable map
shrunk by that margin, else by half of it, else on the map itself; a taut shortest path grazes
every corner at zero margin, so a 0.1 m tracking error puts the commanded waypoint into a wall,
which ends a Strict episode — is resampled by arc length every ``waypoint_spacing`` metres; the first ``horizon`` points, each
headed along its segment, give the action chunk (padded with zero motion at the goal). With
``turn_in_place_deg: A`` a first segment more than A degrees off the agent's heading starts the
chunk with a turn in place onto it (Δx = Δy = 0), as the discrete agents turn before they walk: the
agent sees where it is going before it hops there. Progress is
``1 - max(d - r, 0) / max(d0 - r, ε)`` with d the geodesic distance to the goal, d0 that at the
start and r the teacher's stop radius (``stop_radius``, default half the success distance); the
teacher stops within r. Long-horizon episodes (goals that count in order,
``tasks.scoring.has_ordered_goals``): the teacher heads for the next unreached sub-goal
(``vlnbert.ordered_subgoals``, as the VLN-BERT oracle and the discrete oracle do), drops it once
within r of it and stops only within r of the last goal; d is then the remaining route length —
the geodesic distance to the next sub-goal plus the geodesic legs between the remaining sub-goals
and the goal — so progress runs over the whole route (non-decreasing as the agent advances: by the
triangle inequality, dropping a sub-goal never lengthens the route, up to the map's resolution)
and is 1 at the final stop. A chunk that would end at a sub-goal goes on along the path from it towards the next target
instead of padding with zero motion, which would teach a halt there. Single-goal episodes are
labelled as before. Actions are diffused in a 4-d space: Δx, Δy divided by the spacing and Δyaw as (sin, cos), so a
turn of +π and one of −π are the same point.
"""
from __future__ import annotations

import math
import weakref
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ..core.errors import ConfigError
from ..core.params import param
from ..sim.types import DiscreteAction, WaypointAction, wrap_angle
from .collect import TeacherForcingAgent, TeacherSpec
from .policies import VLNPolicy, VLNPolicyParams, register_policy
from .vocab import Vocabulary

ACTION_DIM = 3  # (dx, dy, dyaw)
LATENT_DIM = 4  # diffusion space: (dx / spacing, dy / spacing, sin dyaw, cos dyaw) - no wrap at +-pi
#: what the denoiser predicts: the noise (DDPM's ε) or the clean action chunk (x0)
PREDICTIONS = ("epsilon", "sample")


# -------------------------------------------------------------------------------------------- teacher


def resample_by_length(points: np.ndarray, spacing: float) -> np.ndarray:
    """Points every ``spacing`` metres of arc length along an (N, 2) polyline (first point kept, last
    point appended when the remainder is shorter)."""
    pts = np.asarray(points, dtype=float)[:, :2]
    if len(pts) < 2:
        return pts.copy()
    seg = np.linalg.norm(np.diff(pts, axis=0), axis=1)
    s = np.concatenate([[0.0], np.cumsum(seg)])
    if s[-1] <= 1e-9:
        return pts[:1].copy()
    stations = np.arange(0.0, s[-1], spacing)
    if s[-1] - stations[-1] > 1e-6:
        stations = np.append(stations, s[-1])
    return np.stack([np.interp(stations, s, pts[:, 0]), np.interp(stations, s, pts[:, 1])], axis=1)


def relative_chunk(pose_xy: np.ndarray, yaw: float, points: np.ndarray, horizon: int) -> np.ndarray:
    """The (horizon, 3) action chunk that walks from (``pose_xy``, ``yaw``) through ``points`` (the
    resampled path after the current position): each action is the next point and the heading of
    its segment, relative to the pose the previous action reaches; padded with zero motion."""
    out = np.zeros((horizon, ACTION_DIM), dtype=np.float32)
    px, py, pyaw = float(pose_xy[0]), float(pose_xy[1]), float(yaw)
    for i, q in enumerate(points[:horizon]):
        dxw, dyw = float(q[0]) - px, float(q[1]) - py
        nyaw = math.atan2(dyw, dxw) if math.hypot(dxw, dyw) > 1e-4 else pyaw
        c, s = math.cos(pyaw), math.sin(pyaw)
        out[i] = (c * dxw + s * dyw, -s * dxw + c * dyw, wrap_angle(nyaw - pyaw))
        px, py, pyaw = float(q[0]), float(q[1]), nyaw
    return out


def path_length(points: np.ndarray) -> float:
    """Arc length of an (N, 2) polyline."""
    return float(np.linalg.norm(np.diff(np.asarray(points, dtype=float)[:, :2], axis=0), axis=1).sum())


def geodesic(distance: Any, xy: np.ndarray, target: np.ndarray) -> float:
    """``distance(xy)`` (a geodesic distance function to ``target``), or the straight-line
    distance where the map gives none (off the map or disconnected)."""
    d = float(distance(np.atleast_2d(np.asarray(xy, dtype=float)))[0])
    return d if np.isfinite(d) else float(np.linalg.norm(np.asarray(target, dtype=float) - xy))


#: moves shorter than this (m) are turns: ``look_before_hop`` leaves them alone
MIN_HOP = 0.05


def look_before_hop(action: WaypointAction, view_deg: float) -> WaypointAction:
    """``action``, or a turn in place onto its bearing when it moves the agent (more than
    ``MIN_HOP``) to a bearing more than ``view_deg`` degrees off the heading."""
    if math.hypot(action.dx, action.dy) <= MIN_HOP:
        return action
    bearing = math.atan2(action.dy, action.dx)
    if abs(bearing) <= math.radians(view_deg):
        return action
    return WaypointAction(0.0, 0.0, bearing, action.timeout)


def motion_vector(action: Any) -> np.ndarray:
    """(dx, dy, dyaw) of an executed action (zeros for STOP / discrete actions)."""
    if isinstance(action, WaypointAction):
        return np.array([action.dx, action.dy, action.dyaw], dtype=np.float32)
    return np.zeros(ACTION_DIM, dtype=np.float32)


_MARGIN_PLANNERS: "weakref.WeakKeyDictionary[Any, dict[float, Any]]" = weakref.WeakKeyDictionary()


def margin_planners(planner: Any, clearance: float) -> list[Any]:
    """Planners on ``planner``'s navigable map shrunk by ``clearance`` and by half of it (those
    that keep a free cell), then ``planner`` itself: the teacher's fallback chain. Shrunk maps are
    built once per planner (weakly cached)."""
    from ..tasks.pathing import NoNavigableSpaceError, PathPlanner

    out = []
    cache = _MARGIN_PLANNERS.setdefault(planner, {})
    for margin in (clearance, 0.5 * clearance):
        if margin < 0.5 * planner.resolution:
            continue
        if margin not in cache:
            try:  # a free cell of the shrunk map lies >= margin further from the obstacles than the edge cells
                cache[margin] = PathPlanner(planner.map.dilate(margin), scene_id=planner.scene_id)
            except NoNavigableSpaceError:
                cache[margin] = None
        if cache[margin] is not None:
            out.append(cache[margin])
    return out + [planner]


def teacher_path(planners: list[Any], xy: np.ndarray, goal_xy: np.ndarray) -> np.ndarray:
    """The (N, 2) path from ``xy`` to ``goal_xy`` on the first of ``planners`` (most margin first,
    the plain navigable map last) that connects them with the agent's and goal's snaps to that map
    in straight, free reach on the last (plain) map; starts at ``xy``, ends at ``goal_xy``. Raises
    ``NoNavigableSpaceError`` when even the plain map does not connect them."""
    from ..tasks.pathing import NoNavigableSpaceError

    base = planners[-1]
    for i, planner in enumerate(planners):
        last = i == len(planners) - 1
        if not last:
            start, goal = planner.snap_point(xy), planner.snap_point(goal_xy)
            if not (base.segment_free(xy, start) and base.segment_free(goal, goal_xy)):
                continue
        try:
            way = np.asarray(planner.shortest_path(xy, goal_xy).waypoints, dtype=float)[:, :2]
        except NoNavigableSpaceError:
            if last:
                raise
            continue
        pts = [xy[None], way[1:] if len(way) > 1 else goal_xy[None]]
        if np.linalg.norm(pts[-1][-1] - goal_xy) > 1e-6:
            pts.append(goal_xy[None])
        if len(way) > 1 and np.linalg.norm(way[0] - xy) > 1e-6:
            pts.insert(1, way[:1])  # the snap onto the margin map is part of the path
        return np.concatenate(pts)
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class WaypointTeacher(TeacherSpec):
    """Continuous-action teacher spec of RDP (see the module docstring): what ``collect`` and the
    observation cache use instead of the discrete oracle."""

    horizon: int = 4
    spacing: float = 0.5
    stop_radius: float | None = None
    clearance: float = 0.15
    turn_in_place_deg: float | None = None

    @property
    def key(self) -> dict[str, Any]:
        """Part of the observation-cache key (``turn_in_place_deg`` only when set: earlier caches keep their key)."""
        key = {"kind": "waypoint", "horizon": self.horizon, "spacing": self.spacing, "stop_radius": self.stop_radius,
               "clearance": self.clearance}
        return key if self.turn_in_place_deg is None else {**key, "turn_in_place_deg": self.turn_in_place_deg}

    def key_for(self, episodes: list) -> dict[str, Any]:
        """``key``, plus ``route: subgoals`` where an episode's goals count in order (labels that
        visit the sub-goals; caches labelled before are rebuilt, single-goal keys are unchanged)."""
        from ..tasks.scoring import has_ordered_goals

        ordered = any(has_ordered_goals(ep) and len(ep.goals) > 1 for ep in episodes)
        return {**self.key, "route": "subgoals"} if ordered else self.key

    @property
    def extra_fields(self) -> dict[str, list[int]]:
        """Per-step labels stored beside the frames."""
        return {"actions": [self.horizon, ACTION_DIM], "progress": [], "executed_action": [ACTION_DIM]}

    def make_agent(self, *, learner: Any = None, beta: float = 1.0, sensors: tuple[str, ...] = (),
                   seed: int = 0) -> "WaypointTeacherAgent":
        """The recording agent of ``collect``."""
        return WaypointTeacherAgent(self, learner=learner, beta=beta, sensors=sensors, seed=seed)


class WaypointTeacherAgent(TeacherForcingAgent):
    """Records frames, the teacher's action chunk and progress, and the executed motion; executes
    the teacher's first action (or STOP) with probability ``beta``, else the learner's."""

    name = "waypoint_teacher"

    def __init__(self, spec: WaypointTeacher, **kwargs: Any):
        super().__init__(**kwargs)
        self.spec = spec
        self._d0: float | None = None

    def reset(self, episode: Any, context: Any) -> None:
        """New episode: the planner and goal come from the scene context and the episode; an
        episode whose goals count in order (long-horizon) gives the route of its sub-goals before
        the last (``vlnbert.ordered_subgoals``)."""
        from .vlnbert import ordered_subgoals

        super().reset(episode, context)
        self.planner = context.planner
        self.planners = margin_planners(context.planner, self.spec.clearance)
        self.goal_xy = np.asarray(episode.goals[-1].position[:2], dtype=float)
        self.subgoals = ordered_subgoals(episode, context.planner)
        self._tails: list[float] | None = None  # route length from each sub-goal on (set by the first labels)
        self._d0 = None

    def _route_tails(self, state: Any) -> list[float]:
        """Geodesic route length from each remaining sub-goal through the later ones to the goal."""
        points = [g for g, _ in self.subgoals] + [self.goal_xy]
        legs = [geodesic(field.distance, points[i], points[i + 1]) for i, (_, field) in enumerate(self.subgoals[1:])]
        legs.append(geodesic(state.goal_distance, points[-2], points[-1]))
        return [float(t) for t in np.cumsum(legs[::-1])[::-1]]

    def labels(self, state: Any) -> tuple[np.ndarray, float, bool]:
        """(action chunk, progress, stop) at ``state.pose``. With sub-goals left, the teacher
        heads for the next (popped once within r of it) and never stops; progress and the chunk
        run over the whole remaining route (module docstring)."""
        from ..tasks.pathing import NoNavigableSpaceError

        pose = state.pose
        xy = np.array([pose.x, pose.y])
        r = self.spec.stop_radius if self.spec.stop_radius is not None else 0.5 * state.success_distance
        if self.subgoals and self._tails is None:
            self._tails = self._route_tails(state)
        while self.subgoals and geodesic(self.subgoals[0][1].distance, xy, self.subgoals[0][0]) <= r:
            self.subgoals.pop(0)  # this sub-goal is reached here: on to the next
            self._tails.pop(0)
        if self.subgoals:  # the remaining route: to the next sub-goal, then on through the others to the goal
            point, field = self.subgoals[0]
            d = geodesic(field.distance, xy, point) + self._tails[0]
        else:
            d = geodesic(state.goal_distance, xy, self.goal_xy)
        if self._d0 is None:
            self._d0 = d
        progress = float(np.clip(1.0 - max(d - r, 0.0) / max(self._d0 - r, 1e-6), 0.0, 1.0))
        if d <= r and not self.subgoals:
            return np.zeros((self.spec.horizon, ACTION_DIM), np.float32), 1.0, True
        route = [g for g, _ in self.subgoals] + [self.goal_xy]
        try:
            path = teacher_path(self.planners, xy, route[0])
            for a, b in zip(route, route[1:]):  # a chunk past a sub-goal goes on towards the next target
                if path_length(path) >= self.spec.horizon * self.spec.spacing:
                    break
                path = np.concatenate([path, teacher_path(self.planners, a, b)[1:]])
        except NoNavigableSpaceError:
            return np.zeros((self.spec.horizon, ACTION_DIM), np.float32), progress, True
        points = resample_by_length(path, self.spec.spacing)[1:]
        chunk = relative_chunk(xy, pose.yaw, points, self.spec.horizon)
        turn = float(chunk[0, 2])
        if self.spec.turn_in_place_deg is not None and abs(turn) > math.radians(self.spec.turn_in_place_deg):
            chunk = np.concatenate([np.array([[0.0, 0.0, turn]], np.float32),
                                    relative_chunk(xy, pose.yaw + turn, points, self.spec.horizon - 1)])
        return chunk, progress, False

    def act(self, observations: dict[str, Any], state: Any) -> Any:
        """Label the state, pick the executed action, record the step."""
        chunk, progress, stop = self.labels(state)
        teacher_action = DiscreteAction.STOP if stop else WaypointAction(*map(float, chunk[0]))
        proposal = self.learner.propose(observations) if self.learner is not None else None
        executed = teacher_action if proposal is None or self.rng.random() < self.beta else proposal
        if self.learner is not None:
            self.learner.set_previous(executed)
        step = {name: np.array(observations[name]) for name in self.sensors}
        moved = isinstance(executed, WaypointAction)
        step.update(label=0 if stop else 1, executed=1 if moved else 0,
                    pose=np.array([state.pose.x, state.pose.y, state.pose.yaw], dtype=np.float32),
                    actions=chunk, progress=np.float32(progress), executed_action=motion_vector(executed))
        self.steps.append(step)
        return executed


# -------------------------------------------------------------------------------------------- diffusion


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


# -------------------------------------------------------------------------------------------- diagnostics


def heading_error_deg(pred: torch.Tensor, label: torch.Tensor) -> np.ndarray:
    """Absolute angle (degrees, 0..180) between the (dx, dy) directions of two (N, 3) action rows."""
    diff = (torch.atan2(pred[:, 1], pred[:, 0]) - torch.atan2(label[:, 1], label[:, 0])).double().numpy()
    return np.abs(np.degrees(wrap_angle(diff)))


def condition_check(policy: "RDPPolicy", store: Any, *, episodes: int = 96, batch: int = 16, seed: int = 0,
                    turn_deg: float = 30.0) -> dict[str, Any]:
    """Does the denoiser follow its condition? Teacher-forced on the first ``episodes`` episodes of a
    store of RDP teacher labels (the observation or feature cache of a run): for every state the
    teacher moves from, the heading error (degrees) of the sampled first action against the
    label, with the true conditions and with the conditions shuffled across the batch's states
    (from the same initial noise): a denoiser that ignores its condition scores the same on both. Reported over all such states,
    the turning ones (label bearing beyond ``turn_deg``) and the episodes' first steps: medians
    and the share within ``turn_deg``."""
    from .batching import EpisodeBatches

    data = EpisodeBatches([store], policy.vocab, policy.max_instruction_length, store.manifest["sensors"])
    gen = torch.Generator().manual_seed(seed)
    err: dict[str, list] = {"true": [], "shuffled": []}
    turning, first = [], []
    was_training = policy.training
    policy.eval()
    with torch.no_grad():
        for start in range(0, min(len(data), episodes), batch):
            b = data.batch(np.arange(start, min(start + batch, len(data), episodes)), 1.0, "cpu")
            cond = policy.batch_conditions(b)
            moving = (b["weights"] > 0) & (b["labels"] == 1)
            c, label = cond[moving], b["extras"]["actions"][moving][:, 0]
            turning.append(np.abs(np.degrees(torch.atan2(label[:, 1], label[:, 0]).double().numpy())) > turn_deg)
            first.append(torch.nonzero(moving)[:, 1].numpy() == 0)
            shuffled = c[torch.randperm(len(c), generator=gen)]
            noise = gen.get_state()  # both samples start from the same noise: only the condition differs
            err["true"].append(heading_error_deg(policy.sample(c, gen)[:, 0], label))
            gen.set_state(noise)
            err["shuffled"].append(heading_error_deg(policy.sample(shuffled, gen)[:, 0], label))
    policy.train(was_training)
    masks = {"all": None, "turning": np.concatenate(turning), "first_step": np.concatenate(first)}
    out: dict[str, Any] = {"episodes": min(len(data), episodes), "turn_deg": turn_deg}
    for group, mask in masks.items():
        row = {}
        for cond_kind, parts in err.items():
            e = np.concatenate(parts) if mask is None else np.concatenate(parts)[mask]
            row["states"] = int(len(e))
            row[f"median_{cond_kind}"] = round(float(np.median(e)), 1) if len(e) else None
            row[f"within_{cond_kind}"] = round(float((e < turn_deg).mean()), 3) if len(e) else None
        out[group] = row
    return out


# -------------------------------------------------------------------------------------------- policy


@dataclass
class RDPParams(VLNPolicyParams):
    """``policy.params`` of ``rdp`` (metres; its ``progress_weight`` / ``stop_threshold`` are its
    own progress head's: the threshold in (0, 1), no base-class STOP rule)."""

    progress_weight: float = param(1.0, low=0.0)
    stop_threshold: float = param(0.95, low=0.0, high=1.0)
    horizon: int = param(4, low=1, high=64)
    waypoint_spacing: float = param(0.5, low=0.01, high=10.0)
    stop_radius: float | None = param(None, low=0.0, high=100.0)
    teacher_clearance: float = param(0.15, low=0.0, high=2.0)
    turn_in_place_deg: float | None = param(None, low=0.0, high=180.0)
    diffusion_steps: int = param(20, low=2, high=10_000)
    sampler: str = "ddim"
    ddim_steps: int = param(10, low=1, high=10_000)
    attention_heads: int = param(4, low=1, high=256)
    denoiser_size: int = param(128, low=1, high=8192)
    denoiser_layers: int = param(2, low=1, high=256)
    clip_sample: float = param(3.0, low=0.0)
    noise_samples: int = param(4, low=1, high=10_000)
    action_samples: int = param(1, low=1, high=10_000)
    prediction: str = "epsilon"
    hop_view_deg: float | None = param(None, low=0.0, high=180.0)

    def validate(self) -> None:
        """The sampler's name, DDIM steps within the diffusion's, the threshold in (0, 1), and
        attention heads that divide the widths they split."""
        checks = {"sampler": (self.sampler in ("ddpm", "ddim"), "ddpm or ddim"),
                  "prediction": (self.prediction in PREDICTIONS, " or ".join(PREDICTIONS)),
                  "ddim_steps": (self.ddim_steps <= self.diffusion_steps, "1..diffusion_steps"),
                  "stop_threshold": (0 < self.stop_threshold < 1, "in (0, 1)"),
                  "attention_heads": (self.hidden_size % self.attention_heads == 0
                                      and self.denoiser_size % self.attention_heads == 0,
                                      "a divisor of hidden_size and denoiser_size")}
        for field, (ok, expected) in checks.items():
            if not ok:
                raise ConfigError(f"bad value {getattr(self, field)!r}", field=field, expected=expected)


@register_policy("rdp")
class RDPPolicy(VLNPolicy):
    """Recurrent diffusion policy (see the module docstring); emits ``WaypointAction`` or STOP."""

    name = "rdp"
    uses_step_weights = False  # every valid step weighs 1 in imitation_loss
    unrolls_packed = False  # imitation_loss reads no lengths: plain-permutation batches
    Params = RDPParams

    def _instruction_defaults(self, spec: dict | None) -> dict:
        return {"bidirectional": True, **(spec or {})}

    def __init__(self, vocab: Vocabulary, sensors: list[dict[str, Any]], *, horizon: int = 4,
                 waypoint_spacing: float = 0.5, stop_radius: float | None = None, teacher_clearance: float = 0.15,
                 turn_in_place_deg: float | None = None, diffusion_steps: int = 20,
                 sampler: str = "ddim", ddim_steps: int = 10, attention_heads: int = 4, denoiser_size: int = 128,
                 denoiser_layers: int = 2, progress_weight: float = 1.0, stop_threshold: float = 0.95,
                 clip_sample: float = 3.0, noise_samples: int = 4, action_samples: int = 1, prediction: str = "epsilon",
                 hop_view_deg: float | None = None, **params: Any):
        super().__init__(vocab, sensors, **params)
        if self.rgb is None:
            raise ConfigError("RDP needs an RGB camera", field="sensors", expected="a sensor with kind: rgb")
        self.horizon, self.spacing, self.stop_radius = int(horizon), float(waypoint_spacing), stop_radius
        self.diffusion_steps, self.sampler, self.ddim_steps = int(diffusion_steps), sampler, int(ddim_steps)
        self.noise_samples, self.action_samples, self.prediction = int(noise_samples), int(action_samples), prediction
        self.hop_view_deg = None if hop_view_deg is None else float(hop_view_deg)
        self.progress_weight, self.stop_threshold, self.clip_sample = float(progress_weight), float(stop_threshold), float(clip_sample)
        h, text = self.hidden_size, self.instruction.out_dim
        self.text_proj = nn.Linear(text, h)
        self.rgb_proj = nn.Conv1d(self.rgb.spatial_channels, h, 1)
        self.text_to_rgb = nn.MultiheadAttention(h, attention_heads, batch_first=True)   # text queries RGB
        self.rgb_to_text = nn.MultiheadAttention(h, attention_heads, batch_first=True)   # RGB queries text
        self.motion = nn.Linear(LATENT_DIM, self.prev_action.embedding_dim)
        depth_dim = self.depth.out_dim if self.depth is not None else 0
        self.fuse = nn.Sequential(nn.Linear(2 * h + depth_dim + self.prev_action.embedding_dim, h), nn.ReLU(inplace=True))
        self.gru = nn.GRUCell(h, h)
        self.denoiser = Denoiser(2 * h, self.horizon, denoiser_size, attention_heads, denoiser_layers)
        self.progress_head = nn.Sequential(nn.Linear(2 * h, h), nn.ReLU(inplace=True), nn.Linear(h, 1))
        betas = cosine_betas(self.diffusion_steps)
        self.register_buffer("betas", betas, persistent=False)
        self.register_buffer("alphas_cumprod", torch.cumprod(1 - betas, 0), persistent=False)
        self.register_buffer("scale", torch.tensor([self.spacing, self.spacing]), persistent=False)

    def to_latent(self, actions: torch.Tensor) -> torch.Tensor:
        """(…, 3) actions in metres / radians → (…, 4) diffusion space (dx, dy by the spacing; dyaw as sin, cos)."""
        yaw = actions[..., 2:3]
        return torch.cat([actions[..., :2] / self.scale, torch.sin(yaw), torch.cos(yaw)], dim=-1)

    def from_latent(self, latent: torch.Tensor) -> torch.Tensor:
        """(…, 4) diffusion space → (…, 3) actions in metres / radians."""
        return torch.cat([latent[..., :2] * self.scale, torch.atan2(latent[..., 2:3], latent[..., 3:4])], dim=-1)

    @classmethod
    def teacher_spec(cls, params: dict[str, Any]) -> WaypointTeacher:
        """The continuous teacher for these ``policy.params``."""
        turn = params.get("turn_in_place_deg")
        return WaypointTeacher(int(params.get("horizon", 4)), float(params.get("waypoint_spacing", 0.5)),
                               params.get("stop_radius"), float(params.get("teacher_clearance", 0.15)),
                               None if turn is None else float(turn))

    # ---------------------------------------------------------------- recurrence

    def start_motion(self, batch: int, device: Any = None) -> torch.Tensor:
        """The previous motion at an episode's start (zeros, (B, 3))."""
        return torch.zeros(batch, ACTION_DIM, device=device)

    def step(self, instruction, visual, prev_motion, hidden):
        """One step: (condition (B, 2H) = [GRU state, fused feature], new hidden (B, 1, H))."""
        ctx, mask, _ = instruction
        text = self.text_proj(ctx)
        rgb = self.rgb_proj(visual["rgb"][0]).transpose(1, 2)  # (B, 16, H)
        t2v, _ = self.text_to_rgb(text, rgb, rgb)
        v2t, _ = self.rgb_to_text(rgb, text, text, key_padding_mask=~mask)
        m = mask.float().unsqueeze(-1)
        pooled_text = (t2v * m).sum(1) / m.sum(1).clamp(min=1.0)
        parts = [pooled_text, v2t.mean(1)]
        if "depth" in visual:
            parts.append(visual["depth"][1])
        parts.append(self.motion(self.to_latent(prev_motion)))
        fused = self.fuse(torch.cat(parts, dim=1))
        h = self.gru(fused, hidden[:, 0])
        return torch.cat([h, fused], dim=1), h.unsqueeze(1)

    def condition_sequence(self, tokens: torch.Tensor, frames: dict[str, torch.Tensor], prev_motion: torch.Tensor
                           ) -> torch.Tensor:
        """Conditions (B, T, 2H) of padded episodes: frames (B, T, ...), previous motions (B, T, 3)."""
        b, t = prev_motion.shape[:2]
        instruction = self.instruction(tokens)
        flat = {k: v.reshape(b * t, *v.shape[2:]) for k, v in frames.items()}
        visual = {k: (s.reshape(b, t, *s.shape[1:]), g.reshape(b, t, -1)) for k, (s, g) in self.encode_frames(flat).items()}
        hidden = self.initial_state(b, prev_motion.device)
        out = []
        for i in range(t):
            cond, hidden = self.step(instruction, {k: (s[:, i], g[:, i]) for k, (s, g) in visual.items()},
                                     prev_motion[:, i], hidden)
            out.append(cond)
        return torch.stack(out, dim=1)

    def progress(self, cond: torch.Tensor) -> torch.Tensor:
        """Predicted progress in [0, 1], shape cond.shape[:-1]."""
        return torch.sigmoid(self.progress_head(cond)).squeeze(-1)

    # ---------------------------------------------------------------- training

    def diffusion_loss(self, cond: torch.Tensor, actions: torch.Tensor, generator: torch.Generator | None = None
                       ) -> torch.Tensor:
        """Per-sample DDPM MSE (N,) of action chunks (N, T, 3) in metres / radians: of the noise
        (``prediction: epsilon``) or of the clean chunk (``sample``)."""
        x0 = self.to_latent(actions)
        n = x0.shape[0]
        k = torch.randint(0, self.diffusion_steps, (n,), device=x0.device, generator=generator)
        noise = torch.randn(x0.shape, device=x0.device, generator=generator)
        ab = self.alphas_cumprod[k].view(n, 1, 1)
        noisy = ab.sqrt() * x0 + (1 - ab).sqrt() * noise
        target = noise if self.prediction == "epsilon" else x0
        return F.mse_loss(self.denoiser(noisy, k, cond), target, reduction="none").mean(dim=(1, 2))

    def batch_conditions(self, batch: dict[str, Any]) -> torch.Tensor:
        """Conditions (B, T, 2H) of a trainer batch: each step's previous motion is the executed one before it."""
        executed = batch["extras"]["executed_action"]
        prev = torch.cat([self.start_motion(executed.shape[0], executed.device)[:, None], executed[:, :-1]], dim=1)
        return self.condition_sequence(batch["tokens"], batch["frames"], prev)

    def imitation_loss(self, batch: dict[str, Any]) -> tuple[torch.Tensor, float]:
        """DDPM loss + λ · progress MSE over the valid steps of a trainer batch; also the number of
        steps whose stop decision (progress > threshold) matches the teacher's (label 0 = STOP)."""
        extras = batch["extras"]
        cond = self.batch_conditions(batch)
        valid = batch["weights"] > 0
        c = cond[valid]
        n = self.noise_samples  # several (noise, step) draws per visited state: more denoising signal per frame
        diffusion = self.diffusion_loss(c.repeat(n, 1), extras["actions"][valid].repeat(n, 1, 1)).mean()
        progress = self.progress(c)
        target = extras["progress"][valid]
        loss = diffusion + self.progress_weight * F.mse_loss(progress, target)
        stop_pred = progress > self.stop_threshold
        correct = float((stop_pred == (batch["labels"][valid] == 0)).sum())
        return loss, correct

    # ---------------------------------------------------------------- sampling

    @torch.no_grad()
    def sample(self, cond: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """Action chunks (B, T, 3) in metres / radians for conditions (B, C), with the configured
        sampler (DDPM ancestral or DDIM η = 0); the same generator state gives the same sample."""
        b = cond.shape[0]
        x = torch.randn((b, self.horizon, LATENT_DIM), device=cond.device, generator=generator)
        ab = self.alphas_cumprod
        if self.sampler == "ddpm":
            steps = list(range(self.diffusion_steps - 1, -1, -1))
        else:
            steps = sorted({int(round(v)) for v in np.linspace(0, self.diffusion_steps - 1, self.ddim_steps)}, reverse=True)
        for i, k in enumerate(steps):
            kk = torch.full((b,), k, device=cond.device, dtype=torch.long)
            out = self.denoiser(x, kk, cond)
            x0 = (x - (1 - ab[k]).sqrt() * out) / ab[k].sqrt() if self.prediction == "epsilon" else out
            x0 = x0.clamp(-self.clip_sample, self.clip_sample)
            if self.sampler == "ddpm":
                prev_ab = ab[k - 1] if k > 0 else torch.tensor(1.0, device=cond.device)
                beta = self.betas[k]
                mean = (prev_ab.sqrt() * beta / (1 - ab[k])) * x0 + ((1 - beta).sqrt() * (1 - prev_ab) / (1 - ab[k])) * x
                if k > 0:
                    var = beta * (1 - prev_ab) / (1 - ab[k])
                    mean = mean + var.sqrt() * torch.randn(x.shape, device=x.device, generator=generator)
                x = mean
            else:
                nxt = steps[i + 1] if i + 1 < len(steps) else None
                prev_ab = ab[nxt] if nxt is not None else torch.tensor(1.0, device=cond.device)
                eps = (x - ab[k].sqrt() * x0) / (1 - ab[k]).sqrt()
                x = prev_ab.sqrt() * x0 + (1 - prev_ab).sqrt() * eps
        return self.from_latent(x)

    def act_step(self, instruction: tuple, visual: dict, prev_motion: torch.Tensor, hidden: torch.Tensor,
                 generator: torch.Generator | None = None, max_resamples: int = 3) -> tuple[Any, torch.Tensor, dict]:
        """One agent step: (STOP or ``WaypointAction``, new hidden, info {progress, nan_resamples})."""
        cond, hidden = self.step(instruction, visual, prev_motion, hidden)
        progress = float(self.progress(cond)[0])
        info = {"progress": round(progress, 4), "nan_resamples": 0}
        if progress > self.stop_threshold:
            return DiscreteAction.STOP, hidden, info
        for _ in range(max_resamples + 1):
            chunks = self.sample(cond.expand(self.action_samples, -1), generator)
            if torch.isfinite(chunks).all():
                chunk = medoid(chunks)[None]
                break
            info["nan_resamples"] += 1  # a diffusion sample with NaN is drawn again (counted)
        else:
            info["gave_up"] = "diffusion sample stayed non-finite: stopping"
            return DiscreteAction.STOP, hidden, info
        first = chunk[0, 0].cpu().double().numpy()
        info["chunk"] = np.round(chunk[0].cpu().numpy(), 3).tolist()
        action = WaypointAction(float(first[0]), float(first[1]), float(first[2]))
        if self.hop_view_deg is not None:
            looked = look_before_hop(action, self.hop_view_deg)
            if looked is not action:
                info["looked"] = True
            action = looked
        return action, hidden, info

    def generator_for(self, seed: int, episode_id: str, device: Any) -> torch.Generator:
        """A sampling generator seeded by (seed, episode id)."""
        g = torch.Generator(device=device)
        g.manual_seed(int(seed) * 1_000_003 + zlib.crc32(str(episode_id).encode()))
        return g

    # ---------------------------------------------------------------- acting

    def begin_episode(self, instruction: tuple, episode: Any, context: Any, agent: Any) -> dict[str, Any]:
        """Acting memory: the instruction, the GRU state, the previous motion (zeros) and the
        sampling generator of (agent seed, episode id)."""
        return {"instruction": instruction, "hidden": self.initial_state(1, agent.device),
                "prev": self.start_motion(1, agent.device),
                "generator": self.generator_for(agent.seed, episode.episode_id, agent.device)}

    def propose(self, memory: dict[str, Any], observations: dict[str, Any], state: Any, agent: Any) -> Any:
        """STOP or the first ``WaypointAction`` of a sampled chunk (``act_step``); the step's
        predicted progress and NaN re-samples go into the agent's outputs."""
        with torch.no_grad():
            visual = self.encode_frames(agent.frames(observations))
            action, memory["hidden"], info = self.act_step(memory["instruction"], visual, memory["prev"],
                                                           memory["hidden"], generator=memory["generator"])
        agent.outputs.append(info)
        return action

    def executed(self, memory: dict[str, Any], action: Any) -> None:
        """The executed motion (dx, dy, dyaw) is the next step's previous motion."""
        memory["prev"] = torch.from_numpy(motion_vector(action))[None].to(memory["prev"].device)
