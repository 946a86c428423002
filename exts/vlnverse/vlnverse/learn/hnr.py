"""HNR (Wang et al. 2024, "Lookahead exploration with neural radiance representation", as in the
VLNVerse paper's appendix A.1.1): the building blocks and the ``hnr`` policy in ``POLICIES``.

- ``backproject`` (Eq. 2): grid features of a view, with planar depth (the simulator's
  convention) and pinhole intrinsics, become world points with an orientation (the camera's
  heading) and a scale (the footprint of a cell at its depth, ``depth / fx`` per pixel).
- ``FeatureCloud``: the points of an episode, grown step by step, capped at ``cap`` points;
  **eviction is first-in first-out** (when full, the oldest points go first: the cloud holds the
  most recent observations).
- ``VolumeRenderer`` (Eqs. 3-4): a lookahead view at (origin, heading) is ``rows`` x ``rays``
  rays (``rays`` across ``hfov``; ``rows`` through the centres of horizontal bands of the square
  view, 1: level), ``samples`` points on each between ``near`` and ``far``; each sample
  gathers its K nearest cloud points (torch ``cdist`` + ``topk``, batched), embeds their relative
  position and orientation in the ray's frame, weighs them (softmax over K) into a latent
  feature and predicts a density; only neighbours within ``radius`` count (a sample with none is
  empty space, density 0). The ray integrates ``Σ T_i (1 - exp(-σ_i δ_i)) f_i`` (Eq. 4), plus
  with a ``background`` the transmittance left past its last sample times it, ``T_N f_bg``
  (NeRF's background colour); the view's region feature is the mean over its rays.
- ``GraphAwareAttention`` (Eq. 5): multi-head self-attention over graph nodes whose logits add a
  learnt per-head map of the node distance matrix E (E = 0: plain attention).

The ``hnr`` policy extends VLN-BERT (``learn.vlnbert``: the panorama, the waypoint predictor's
candidates, the state token and the oracle teacher). Each step the panorama goes into the cloud as
**grid features**: each view's depth image through the encoder's CNN trunk
(``WaypointPredictor.grid_features``: the 4 x 4 spatial map pooled to ``cloud_grid`` x
``cloud_grid`` cells, default 2: 12 · 4 = 48 points per step), each cell back-projected at the
median depth of its pixels (``cell_depths``, ``panorama_points``) with the camera's heading and
the cell's scale; ``cloud_grid: 0`` puts one point per view (its panorama token at its median
centre-row depth), as checkpoints from before grid features do. ``cloud_encoder`` takes the grid
features from another frozen encoder instead: a ``vlnverse pretrain-encoder`` trunk
(``PretrainedGridEncoder``) or a user's weights file, e.g. a CLIP ViT image tower
(``WeightsGridEncoder``; ``cloud_encoder_spec``). For each candidate a lookahead view is rendered
at the candidate's position facing its direction; the topological graph holds the visited nodes
(the last ``history`` positions), the current node, the candidates and one lookahead node per candidate (at the candidate's
position), encoded by ``graph_layers`` GASA layers over their geodesic distances on the graph
(``graph_distances``: shortest paths along the trajectory chain, current - candidate and
candidate - lookahead edges, each as long as the straight line between its nodes). A candidate's
token for the VLN-BERT scorer is its graph token plus its lookahead's. ``render.background``
(default true; false for checkpoints from before it, which render as they did) gives each ray the
current view's feature in the candidate's direction as its background: where the cloud holds
nothing yet (early in an episode) the lookahead falls back to that view, where it holds points
the rendered features cover it by their opacity.

Training: ``render_weight`` λ > 0 adds λ · (1 - cos) between the rendered feature of the oracle's
candidate at step t and the real panorama view the agent faces at step t + 1 (the simulator's
render at that pose, which the teacher recorded; with grid features, the mean of that view's cells): the rendering model is supervised by the
encoder's feature of the real view, jointly with the policy; or first alone, as the paper does:
``stage: render`` trains only the rendering model on that loss (one ``vlnverse train`` run), then
``stage: joint`` (the default) trains the policy with ``render.weights: <that run's checkpoint>``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ..core.errors import ConfigError
from ..core.params import param
from ..sim.types import DiscreteAction, WaypointAction
from ..tasks.base import render_options
from .policies import register_policy
from .topomap import TopoMap, candidate_xy, hop_action
from .vlnbert import (Perception, VLNBertParams, VLNBertPolicy, VLNBertTeacher, VLNBertTeacherAgent, candidate_action,
                      candidate_loss, relax_after)
from .vocab import PAD_ID

# -------------------------------------------------------------------------------------------- feature cloud


def backproject(features: torch.Tensor, depth: torch.Tensor, intrinsics: tuple[float, float, float, float],
                pose: torch.Tensor) -> dict[str, torch.Tensor]:
    """World points of grid features (Eq. 2).

    ``features`` (..., C, h, w) on a grid over a (H, W) image; ``depth`` (..., H, W) planar depth in
    metres (each cell reads the median depth of its pixels); ``intrinsics`` (fx, fy, cx, cy) in
    pixels of the (H, W) image; ``pose`` (..., 5): camera position (x, y, z), yaw (CCW from +x)
    and pitch (up positive) in the world (z up; the camera looks along its yaw). Returns
    ``positions`` (..., h*w, 3), ``features`` (..., h*w, C), ``headings`` (..., h*w) (the
    camera's yaw) and ``scales`` (..., h*w) (metres per pixel at the cell's depth, ``d / fx``)."""
    fx, fy, cx, cy = (float(v) for v in intrinsics)
    *lead, c, h, w = features.shape
    hh, ww = depth.shape[-2:]
    if hh % h or ww % w:
        raise ValueError(f"depth {hh}x{ww} is not a multiple of the feature grid {h}x{w}")
    cells = depth.reshape(*lead, h, hh // h, w, ww // w).transpose(-3, -2).reshape(*lead, h, w, -1)
    d = cells.median(-1).values  # (..., h, w)
    u = (torch.arange(w, dtype=depth.dtype, device=depth.device) + 0.5) * (ww / w)
    v = (torch.arange(h, dtype=depth.dtype, device=depth.device) + 0.5) * (hh / h)
    xc = (u[None, :] - cx) / fx * d  # right
    yc = (v[:, None] - cy) / fy * d  # down
    # camera frame → agent-aligned frame (forward, left, up), then pitch about the left axis, then yaw
    fwd, left, up = d, -xc, -yc
    pitch, yaw = pose[..., 4][..., None, None], pose[..., 3][..., None, None]
    fwd, up = fwd * torch.cos(pitch) - up * torch.sin(pitch), fwd * torch.sin(pitch) + up * torch.cos(pitch)
    x = pose[..., 0][..., None, None] + fwd * torch.cos(yaw) - left * torch.sin(yaw)
    y = pose[..., 1][..., None, None] + fwd * torch.sin(yaw) + left * torch.cos(yaw)
    z = pose[..., 2][..., None, None] + up
    positions = torch.stack([x, y, z], -1).reshape(*lead, h * w, 3)
    return {"positions": positions, "features": features.reshape(*lead, c, h * w).transpose(-1, -2),
            "headings": pose[..., 3][..., None].expand(*lead, h * w), "scales": (d / fx).reshape(*lead, h * w)}


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
        gather = lambda t: torch.gather(t[:, None].expand(-1, q.shape[1], *t.shape[1:]), 2,  # noqa: E731
                                        idx.reshape(*idx.shape, *([1] * (t.dim() - 2))).expand(*idx.shape, *t.shape[2:]))
        p_k, f_k, h_k, s_k = (gather(cloud.positions), gather(cloud.features), gather(cloud.headings), gather(cloud.scales))
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


# -------------------------------------------------------------------------------------------- graph


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


# -------------------------------------------------------------------------------------------- policy


def view_depths(depth: np.ndarray, max_depth: float) -> np.ndarray:
    """(V,) depth of each panorama view (V, H, W): the median of its two centre rows (no hit:
    ``max_depth``)."""
    h = depth.shape[1]
    rows = np.nan_to_num(depth[:, max(0, h // 2 - 1):h // 2 + 1], nan=max_depth, posinf=max_depth)
    return np.median(rows.reshape(depth.shape[0], -1), axis=1).clip(0.0, max_depth).astype(np.float32)


def cell_depths(depth: np.ndarray, grid: int, max_depth: float) -> np.ndarray:
    """(V, grid, grid) depth of each cell of each panorama view (V, H, W): the median of its
    pixels (no hit: ``max_depth``), what ``backproject`` reads per cell."""
    v, h, w = depth.shape
    d = np.nan_to_num(np.asarray(depth, dtype=np.float32), nan=max_depth, posinf=max_depth)
    cells = d.reshape(v, grid, h // grid, grid, w // grid).transpose(0, 1, 3, 2, 4).reshape(v, grid, grid, -1)
    return np.median(cells, axis=-1).clip(0.0, max_depth).astype(np.float32)


def panorama_points(grid_feats: torch.Tensor, cell_depth: torch.Tensor, pose: torch.Tensor,
                    hfov_deg: float) -> dict[str, torch.Tensor]:
    """The cloud points (B, V·g·g, ·) of a panorama's grid features (B, V, C, g, g) at their cell
    depths (B, V, g, g): view v faces ``yaw + 2πv/V`` (CCW), a pinhole camera of ``hfov_deg``
    (square pixels) at the agent's (x, y), pose (B, 3) = (x, y, yaw); heights are relative to the
    camera (z = 0: the rendered rays' height). Cells of depth ``UNSEEN`` (< 0: outside a monocular
    setup's field of view) come back marked in ``seen`` (B, V·g·g) for ``FeatureCloud.add``."""
    b, v, c, g = grid_feats.shape[:4]
    angles = torch.arange(v, device=pose.device, dtype=pose.dtype) * (2 * math.pi / v)
    zeros = torch.zeros(b, v, device=pose.device, dtype=pose.dtype)
    cam = torch.stack([pose[:, None, 0].expand(b, v), pose[:, None, 1].expand(b, v), zeros,
                       pose[:, None, 2] + angles, zeros], -1)
    f = (g / 2) / math.tan(math.radians(hfov_deg) / 2)
    pts = backproject(grid_feats, cell_depth.clamp(min=0.0), (f, f, g / 2, g / 2), cam)
    out = {key: t.reshape(b, v * t.shape[2], *t.shape[3:]) for key, t in pts.items()}
    seen = (cell_depth >= 0).reshape(b, -1)
    return out if bool(seen.all()) else {**out, "seen": seen}


#: where the cloud's grid features come from (``cloud_encoder.type``)
CLOUD_ENCODERS = ("predictor", "pretrained", "cnn", "resnet18", "resnet50", "clip_vit")
#: a user's own encoder from a local weights file (``WeightsGridEncoder``): its keys besides type and weights
WEIGHTS_ENCODERS = {"cnn": {"trunk"}, "resnet18": set(), "resnet50": set(), "clip_vit": {"heads"}}
_EXPECTED = ("predictor, {type: pretrained, path: FILE, trunk: depth|rgb}, or a weights file: "
             "{type: cnn, weights: FILE, trunk: depth|rgb} / {type: resnet18|resnet50|clip_vit, weights: FILE}")


def cloud_encoder_spec(spec: Any) -> dict[str, Any]:
    """``cloud_encoder`` as a mapping: ``predictor`` (the waypoint predictor's CNN trunks, the
    default), ``{type: pretrained, path: FILE, trunk: depth|rgb}`` (a trunk of an encoder of
    ``vlnverse pretrain-encoder``), or a user's own encoder from a safetensors state dict (the
    shape of the policies' ``rgb_encoder`` option): ``{type: cnn, weights: FILE, trunk:
    depth|rgb}``, ``{type: resnet18|resnet50, weights: FILE}`` or ``{type: clip_vit, weights:
    FILE, heads: N}``. A checkpoint rebuilds either without the file, from ``arch``."""
    field = "policy.params.cloud_encoder"
    if spec is None or spec == "predictor":
        return {"type": "predictor"}
    if spec == "pretrained":
        raise ConfigError("'pretrained' without a file", field=field,
                          expected="{type: pretrained, path: <encoder.safetensors of vlnverse pretrain-encoder>, trunk: depth|rgb}")
    kind = spec.get("type", "predictor") if isinstance(spec, dict) else None
    if kind not in CLOUD_ENCODERS:
        raise ConfigError(f"got {spec!r}", field=field, expected=_EXPECTED)
    if kind == "predictor":
        return {"type": "predictor"}
    allowed = {"type", "path", "trunk", "arch"} if kind == "pretrained" else {"type", "weights", "arch"} | WEIGHTS_ENCODERS[kind]
    if set(spec) - allowed:
        raise ConfigError(f"unknown key(s) {sorted(set(spec) - allowed)}", field=field,
                          expected=f"keys among {sorted(allowed)}")
    trunk = spec.get("trunk", "depth" if kind in ("pretrained", "cnn") else "rgb")
    if trunk not in ("depth", "rgb"):
        raise ConfigError(f"got {trunk!r}", field=f"{field}.trunk", expected="depth or rgb")
    file_key = "path" if kind == "pretrained" else "weights"
    if not spec.get(file_key) and not isinstance(spec.get("arch"), dict):
        raise ConfigError("no encoder file", field=f"{field}.{file_key}",
                          expected="the encoder.safetensors of vlnverse pretrain-encoder" if kind == "pretrained"
                          else "a local safetensors state dict of the encoder (nothing is downloaded)")
    out = {"type": kind, **({"trunk": trunk} if kind in ("pretrained", "cnn") else {})}
    if "heads" in spec:
        heads = spec["heads"]
        if not isinstance(heads, int) or isinstance(heads, bool) or heads < 1:
            raise ConfigError(f"got {heads!r}", field=f"{field}.heads", expected="a positive integer (default width / 64)")
        out["heads"] = heads
    return {**out, **({file_key: str(spec[file_key])} if spec.get(file_key) else {"arch": dict(spec["arch"])})}


def make_grid_encoder(spec: dict[str, Any], image_size: int, max_depth: float, *,
                      notes: list[str] | None = None) -> nn.Module | None:
    """The cloud's grid encoder of a ``cloud_encoder_spec``: None for the predictor's own trunk."""
    if spec["type"] == "predictor":
        return None
    if spec["type"] == "pretrained":
        return PretrainedGridEncoder(spec["trunk"], image_size, max_depth, path=spec.get("path"), arch=spec.get("arch"),
                                     notes=notes)
    return WeightsGridEncoder(spec, max_depth, notes=notes)


def encoder_file(spec: dict[str, Any]) -> str | None:
    """The file a ``cloud_encoder_spec`` reads (``path`` or ``weights``), if any."""
    return spec.get("path") or spec.get("weights")


class GridEncoder(nn.Module):
    """A frozen encoder of the cloud's grid features: each view's ``feature_map`` (of depth /
    max_depth, or RGB / 255, per ``key``) average-pooled to ``grid`` cells per side."""

    key = "depth"
    max_depth = 10.0

    @property
    def needs_rgb(self) -> bool:
        return self.key == "rgb"

    @property
    def grid_channels(self) -> int:
        return int(self.trunk.spatial_channels)

    def feature_map(self, x: torch.Tensor) -> torch.Tensor:
        """(N, C, h, w) of inputs x (N, 1 or 3, H, W) in [0, 1]."""
        raise NotImplementedError

    @torch.no_grad()
    def grid_features(self, depth: torch.Tensor, rgb: torch.Tensor | None = None, grid: int = 4) -> torch.Tensor:
        """(B, V, C, grid, grid) of depth (B, V, H, W) metres / rgb (B, V, H, W, 3) uint8."""
        b, v = depth.shape[:2]
        if self.needs_rgb:
            if rgb is None:
                raise ConfigError("the cloud encoder reads RGB but got no RGB panorama",
                                  field="policy.params.cloud_encoder", expected="depth, or an RGB panorama")
            x = rgb.reshape(b * v, *rgb.shape[2:]).float().permute(0, 3, 1, 2) / 255.0
        else:
            x = depth.float().nan_to_num(self.max_depth).clamp(0, self.max_depth) / self.max_depth
            x = x.reshape(b * v, 1, *depth.shape[2:])
        x = F.adaptive_avg_pool2d(self.feature_map(x), grid)
        return x.reshape(b, v, *x.shape[1:])


class PretrainedGridEncoder(GridEncoder):
    """Grid features of the panorama views from one trunk (depth or RGB) of a visual encoder
    pretrained on the toolkit's renders (``learn.encoder``, ``vlnverse pretrain-encoder``),
    frozen: the trunk's 4 x 4 spatial map of each view, average-pooled to ``grid`` cells per side
    (as ``WaypointPredictor.grid_features``, with the encoder's input scaling: depth / max_depth,
    RGB / 255). The file must be made for the panorama's views (``encoder.check_rig``: square
    ``image_size`` images, 90° FoV, the predictor's depth range)."""

    def __init__(self, trunk: str, image_size: int, max_depth: float, *, path: str | None = None,
                 arch: dict[str, int] | None = None, notes: list[str] | None = None):
        super().__init__()
        from .encoder import pretrained_trunk
        from .encoders import CNNEncoder
        from .waypoints.grid import PANORAMA_HFOV_DEG

        self.key, self.max_depth, self.path = trunk, float(max_depth), path
        channels = 3 if trunk == "rgb" else 1
        if path:
            sensor = {"kind": trunk, "width": int(image_size), "height": int(image_size), "hfov_deg": PANORAMA_HFOV_DEG}
            self.trunk = pretrained_trunk(path, trunk, channels, sensor, field="policy.params.cloud_encoder", frozen=True,
                                          max_depth=self.max_depth if trunk == "depth" else None, notes=notes)
        else:  # rebuilt from a checkpoint: the weights come with its state dict
            self.trunk = CNNEncoder(channels, out_dim=int(arch["out_dim"]), channels=int(arch["channels"]), frozen=True)

    def feature_map(self, x: torch.Tensor) -> torch.Tensor:
        """The trunk's 4 x 4 spatial map (as in pretraining)."""
        return self.trunk.net(x)


def weights_arch(kind: str, state: dict[str, Any]) -> dict[str, int] | None:
    """What rebuilds a ``WeightsGridEncoder``'s trunk of ``kind`` from its tensors (a user's file,
    or a checkpoint's ``cloud_encoder.trunk.*``); None: the tensors are not of that architecture."""
    from .encoders import clip_arch

    if kind == "cnn":
        w = state.get("net.0.weight")
        return {"channels": int(w.shape[0]), "in_channels": int(w.shape[1])} if w is not None and w.ndim == 4 else None
    if kind == "clip_vit":
        return clip_arch(state)
    # ResNets (only ever read from a checkpoint here: ``ResNetEncoder`` reads the file): the type fixes the sizes
    return {} if "trunk.0.weight" in state else None


class WeightsGridEncoder(GridEncoder):
    """Grid features of the panorama views from a user's own pretrained encoder, read from a local
    safetensors state dict (``tensorfile.load_state_dict_file``: a pickle is refused, nothing in the
    file runs), frozen (eval mode always: a ResNet's batch norms keep their statistics): each
    view's **last feature map**, average-pooled to ``grid`` cells per side.

    - ``cnn`` (``encoders.CNNEncoder``'s state dict, sizes read from it; ``trunk: depth | rgb``: what
      it reads, depth / max_depth or RGB / 255): the map of its last convolution;
    - ``resnet18`` / ``resnet50`` (a torchvision state dict; ``encoders.ResNetEncoder``, needs
      torchvision): ``layer4``'s map, ImageNet normalisation;
    - ``clip_vit`` (a CLIP ViT image tower in OpenAI's layout, ``visual.`` prefix optional,
      ``encoders.CLIPVisionEncoder``): the last layer's patch tokens in the image-text space, views
      resized to its input size, CLIP normalisation; ``heads`` defaults to width / 64.

    The global heads (``fc``) are dropped: only the spatial map is used."""

    def __init__(self, spec: dict[str, Any], max_depth: float, *, notes: list[str] | None = None):
        super().__init__()
        from .encoders import CLIPVisionEncoder, CNNEncoder, ResNetEncoder, _local_file, fit_state
        from .tensorfile import load_state_dict_file

        self.kind, self.key, self.max_depth = spec["type"], spec.get("trunk", "rgb"), float(max_depth)
        field = "policy.params.cloud_encoder"
        path = spec.get("weights")
        if self.kind in ("resnet18", "resnet50"):  # ResNetEncoder reads the file (load_weights)
            self.trunk = ResNetEncoder(self.kind, out_dim=1, weights=path, field=field, notes=notes if path else None)
            self.arch: dict[str, int] = {}
        else:
            state, file = None, None
            if path:
                file = _local_file(path, f"{field}.weights")
                state = load_state_dict_file(file, field=f"{field}.weights")
                if self.kind == "clip_vit" and any(k.startswith("visual.") for k in state):  # a whole CLIP: its image tower
                    state = {k[len("visual."):]: v for k, v in state.items() if k.startswith("visual.")}
                arch = weights_arch(self.kind, state)
                if arch is None:
                    what = "an encoders.CNNEncoder (net.0.weight)" if self.kind == "cnn" else \
                        "a CLIP ViT image tower (conv1.weight, positional_embedding, transformer.resblocks.*)"
                    raise ConfigError(f"not a {self.kind} state dict", file=file, field=f"{field}.type",
                                      expected=f"{what}, or the type of this file's encoder")
            else:  # rebuilt from a checkpoint: the weights come with its state dict
                arch = dict(spec["arch"])
            self.arch = arch
            if self.kind == "cnn":
                self.trunk = CNNEncoder(3 if self.key == "rgb" else 1, out_dim=1, channels=arch["channels"])
                del self.trunk.fc
            else:
                width = arch["width"]
                heads = int(spec.get("heads") or max(1, width // 64))
                if width % heads:
                    raise ConfigError(f"{heads} heads do not divide the width {width}", file=file, field=f"{field}.heads",
                                      expected="a divisor of the encoder's width")
                self.trunk = CLIPVisionEncoder(width, arch["layers"], heads, arch["patch"], arch["grid"],
                                               arch["output_dim"] or None)
            if state is not None:
                fit_state(self.trunk, {k: v for k, v in state.items() if not k.startswith("fc.")}, file, f"{field}.weights")
                if notes is not None:
                    notes.append(f"{field}: {self.kind} weights from {file} (frozen)")
        if hasattr(self.trunk, "fc"):
            del self.trunk.fc
        for p in self.parameters():
            p.requires_grad_(False)
        self.train(False)

    def train(self, mode: bool = True) -> "WeightsGridEncoder":
        """Always eval mode (frozen statistics), whatever the policy's mode."""
        return super().train(False)

    def feature_map(self, x: torch.Tensor) -> torch.Tensor:
        """The encoder's last feature map (N, C, h, w)."""
        if self.kind == "cnn":
            return self.trunk.net[:-1](x)  # before its 4 x 4 pooling
        if self.kind == "clip_vit":
            return self.trunk.spatial_map(x)
        return self.trunk.trunk[:-1]((x - self.trunk.mean) / self.trunk.std)


class HNRPerception(Perception):
    """VLN-BERT's perception that also keeps the cloud's inputs of the last panorama: with
    ``grid`` > 0 the per-cell depths (``last_depth``, (V, g, g)) and the grid features of
    ``encoder`` (``last_grid``, (V, C, g, g): ``WaypointPredictor.grid_features`` by default, or a
    ``PretrainedGridEncoder``); with ``grid`` 0 the per-view depths (V,)."""

    def __init__(self, predictor: Any, grid: int = 0, observation: Any = None, encoder: Any = None):
        encoder = predictor if encoder is None else encoder
        super().__init__(predictor, observation, rgb=bool(getattr(encoder, "needs_rgb", False)))
        render = self.renderer.render
        self.grid = int(grid)
        self.last_depth: np.ndarray | None = None
        self.last_grid: np.ndarray | None = None
        hidden = ~self.visible

        @torch.no_grad()
        def capture(*args: Any, **kwargs: Any) -> dict[str, np.ndarray]:
            img = render(*args, **kwargs)
            max_depth = predictor.params["max_depth"]
            if not self.grid:
                self.last_depth = view_depths(img["depth"], max_depth)
                self.last_depth[hidden] = UNSEEN
                return img
            self.last_depth = cell_depths(img["depth"], self.grid, max_depth)
            dev = next(predictor.parameters()).device
            d = torch.from_numpy(img["depth"])[None].to(dev)
            r = torch.from_numpy(img["rgb"])[None].to(dev) if "rgb" in img else None
            self.last_grid = encoder.grid_features(d, r, self.grid)[0].cpu().numpy().astype(np.float32)
            self.last_depth[hidden], self.last_grid[hidden] = UNSEEN, 0.0
            return img

        self.renderer.render = capture


@dataclass(frozen=True)
class HNRTeacher(VLNBertTeacher):
    """VLN-BERT's waypoint oracle, recording also the cloud's inputs (``HNRPerception``: per-cell
    depths and grid features, or per-view depths with ``grid`` 0) and the pose."""

    grid: int = 0
    #: the cloud's grid encoder's file (``cloud_encoder``'s path or weights), trunk and type; None: the predictor's
    encoder_path: str | None = None
    encoder_trunk: str = "depth"
    encoder_type: str = "pretrained"
    #: a ``clip_vit`` encoder's ``heads`` (0: its default)
    encoder_heads: int = 0

    #: GAMA's global actions: label over the current candidates, STOP and the earlier frontier
    #: nodes of a ``topomap.TopoMap`` (``merge_radius``, ``frontier_cap``); False: the candidates and STOP
    global_actions: bool = False
    merge_radius: float = 0.5
    frontier_cap: int = 16

    @property
    def encoder_spec(self) -> dict[str, Any]:
        """The ``cloud_encoder_spec`` of the recorded grid encoder."""
        if not self.encoder_path:
            return {"type": "predictor"}
        spec = {"type": self.encoder_type, ("path" if self.encoder_type == "pretrained" else "weights"): self.encoder_path}
        if self.encoder_type in ("pretrained", "cnn"):
            spec["trunk"] = self.encoder_trunk
        return {**spec, "heads": self.encoder_heads} if self.encoder_heads else spec

    @property
    def key(self) -> dict[str, Any]:
        """VLN-BERT's, the grid, and the cloud encoder by its file's content (a changed file: a new cache)."""
        key = {**super().key, "kind": "hnr", "grid": self.grid}
        if self.global_actions:
            key["global_actions"] = {"merge_radius": self.merge_radius, "frontier": self.frontier_cap}
        if self.encoder_path:
            from pathlib import Path

            from .encoder import _paths, sha256_file

            if self.encoder_type == "pretrained":  # the key of caches written before the other types
                enc, file = {"trunk": self.encoder_trunk}, _paths(self.encoder_path)[0]
            else:
                enc = {k: v for k, v in self.encoder_spec.items() if k != "weights"}
                file = Path(self.encoder_path).expanduser()
            key["cloud_encoder"] = {**enc, "sha256": sha256_file(file)[:16]}
        return key

    def grid_encoder(self, predictor: Any) -> Any:
        """What computes the grid features: the predictor, or the ``cloud_encoder``."""
        p = predictor.params
        enc = make_grid_encoder(self.encoder_spec, p["image_size"], p["max_depth"])
        return predictor if enc is None else enc

    @property
    def extra_fields(self) -> dict[str, list[int]]:
        fields = super().extra_fields
        v, g = fields["view_feats"][0], self.grid
        if not g:
            return {**fields, "view_depth": [v], "world_pose": [3]}
        c = self.grid_encoder(self._predictor()).grid_channels
        return {**fields, "view_depth": [v, g, g], "view_grid": [v, c, g, g], "world_pose": [3]}

    def make_agent(self, *, learner: Any = None, beta: float = 1.0, sensors: tuple[str, ...] = (),
                   seed: int = 0) -> "HNRTeacherAgent":
        return HNRTeacherAgent(self, learner=learner, beta=beta, sensors=sensors, seed=seed)


class HNRTeacherAgent(VLNBertTeacherAgent):
    """``VLNBertTeacherAgent`` with the per-view depths and the pose in every recorded step."""

    name = "hnr_teacher"

    def __init__(self, spec: HNRTeacher, **kwargs: Any):
        super().__init__(spec, **kwargs)
        predictor = self.perception.predictor
        self.perception = HNRPerception(predictor, spec.grid, spec.observation, spec.grid_encoder(predictor))
        self.topo: TopoMap | None = None
        self.hops: list[np.ndarray] = []

    def reset(self, episode: Any, context: Any) -> None:
        """A new episode: with global actions a fresh topological map and no pending hops."""
        super().reset(episode, context)
        self.topo = TopoMap(self.spec.merge_radius, self.spec.frontier_cap) if self.spec.global_actions else None
        self.hops = []

    def oracle(self, state: Any, cands: np.ndarray, n: int) -> int:
        """VLN-BERT's oracle over the current candidates and STOP; with global actions the map is
        updated first and an earlier frontier node f wins when DUET's teacher cost, the trip's
        length plus f's geodesic distance to the goal, is below the chosen candidate's (its
        straight hop plus its geodesic distance): index ``K + 1 + i`` of ``topo.earlier()[i]``."""
        if self.topo is None:
            return super().oracle(state, cands, n)
        pose = state.pose
        world = np.array([pose.x, pose.y, pose.yaw], dtype=np.float32)  # as recorded (world_pose)
        self.topo.arrive(world)
        self.topo.observe(world, cands, len(self.steps))
        return self.global_oracle(state, cands, super().oracle(state, cands, n))

    def global_oracle(self, state: Any, cands: np.ndarray, local: int) -> int:
        """The global label given the local one (see ``oracle``; STOP stays STOP)."""
        k = len(cands)
        earlier = self.topo.earlier()
        if local == k or not earlier:
            return local
        xy = self.topo.visited[self.topo.current]
        planner = self.context.planner
        distance, _ = self.target(state)  # the next sub-goal of a long-horizon episode, else the goal

        def geo(pts: np.ndarray) -> np.ndarray:
            return np.where(planner.is_navigable(pts), np.asarray(distance(pts), dtype=float), np.inf)

        c = candidate_xy(np.asarray([state.pose.x, state.pose.y, state.pose.yaw], dtype=np.float32), cands[local:local + 1])
        best = float(np.linalg.norm(c[0] - xy) + geo(c)[0])
        pts = np.stack([f.xy for f in earlier])
        cost = np.array([self.topo.travel(f) for f in earlier]) + geo(pts)
        i = int(np.argmin(cost))
        return k + 1 + i if cost[i] < best - 1e-6 else local

    def execute(self, choice: int, cands: np.ndarray, state: Any) -> Any:
        """A candidate or STOP as VLN-BERT; an earlier frontier node (``choice`` > K): the first
        hop of the trip through visited nodes, the others queued for the next steps."""
        k = len(cands)
        if choice <= k:
            return super().execute(choice, cands, state)
        path = self.topo.path(self.topo.earlier()[choice - k - 1])
        self.hops = path[1:]
        return candidate_action(*hop_action((state.pose.x, state.pose.y, state.pose.yaw), path[0]))

    def act(self, observations: dict[str, Any], state: Any) -> Any:
        pose = state.pose
        if self.hops:  # the rest of a trip to a frontier node: a waypoint hop, no decision, nothing recorded
            return candidate_action(*hop_action((pose.x, pose.y, pose.yaw), self.hops.pop(0)))
        if self.learner is not None:  # the learner's ``choose`` reads the same panorama's depths
            self.learner.memory["sense"] = (self.perception, (pose.x, pose.y, pose.yaw))
        n = len(self.steps)
        action = super().act(observations, state)
        if len(self.steps) > n:
            self.steps[-1]["view_depth"] = self.perception.last_depth.copy()
            if self.spec.grid:
                self.steps[-1]["view_grid"] = self.perception.last_grid.copy()
            self.steps[-1]["world_pose"] = np.array([pose.x, pose.y, pose.yaw], dtype=np.float32)
        return action


#: cells per side of each view's grid features in the cloud (``cloud_grid``)
DEFAULT_GRID = 2


class GraphMemory:
    """Per-episode (batched) memory of the HNR policy: the feature cloud and the visited nodes."""

    def __init__(self, batch: int, feat_dim: int, hidden: int, cap: int, device: Any):
        self.cloud = FeatureCloud(batch, feat_dim, cap, device)
        self.positions = torch.zeros(batch, 0, 2, device=device)
        self.tokens = torch.zeros(batch, 0, hidden, device=device)


@dataclass
class HNRParams(VLNBertParams):
    """``policy.params`` of ``hnr``: VLN-BERT's and the cloud, graph and rendering ones (module docstring)."""

    cloud_cap: int = param(256, low=1, high=10_000_000)
    cloud_grid: int = DEFAULT_GRID
    history: int = param(8, low=0, high=100_000)
    graph_layers: int = param(1, low=0, high=256)
    render: dict[str, Any] | None = None
    render_weight: float = param(0.1, low=0.0)
    stage: str = "joint"
    cloud_encoder: Any = "predictor"

    def validate(self) -> None:
        """VLN-BERT's rules, a known ``stage``, a ``cloud_encoder`` (other than the predictor: needs grid cells)."""
        super().validate()
        try:
            kind = cloud_encoder_spec(self.cloud_encoder)["type"]
        except ConfigError as exc:  # its field is relative to policy.params here
            raise ConfigError(exc.problem, file=exc.file, field=exc.field.removeprefix("policy.params."),
                              expected=exc.expected) from None
        if kind != "predictor" and not self.cloud_grid:
            raise ConfigError(f"a {kind} cloud encoder with cloud_grid 0", field="cloud_encoder",
                              expected="cloud_grid 1, 2 or 4 (grid cells of the encoder), or cloud_encoder: predictor")
        if self.cloud_grid not in (0, 1, 2, 4):
            raise ConfigError(f"got {self.cloud_grid!r}", field="cloud_grid",
                              expected="1, 2 or 4 grid cells per side of each view (0: one point per view)")
        if self.stage not in ("joint", "render"):
            raise ConfigError(f"got {self.stage!r}", field="stage",
                              expected="joint (policy + rendering loss) or render (the rendering model alone)")


@register_policy("hnr")
class HNRPolicy(VLNBertPolicy):
    """VLN-BERT with HNR's feature cloud, rendered lookahead views and GASA graph (module docstring)."""

    name = "hnr"
    Params = HNRParams

    def __init__(self, vocab: Any, sensors: list[dict[str, Any]], *, cloud_cap: int = 256, history: int = 8,
                 graph_layers: int = 1, render: dict | None = None, render_weight: float = 0.1, stage: str = "joint",
                 cloud_grid: int = DEFAULT_GRID, cloud_encoder: Any = "predictor", **params: Any):
        super().__init__(vocab, sensors, **params)
        self.stage = stage
        self.cloud_cap, self.history, self.render_weight = cloud_cap, history, float(render_weight)
        self.cloud_grid = int(cloud_grid)
        h = self.hidden_size
        spec = cloud_encoder_spec(cloud_encoder)
        self.cloud_encoder_path = encoder_file(spec)
        p = self.predictor.params  # a cloud encoder is frozen; its weights travel in the checkpoint
        self.cloud_encoder = make_grid_encoder(spec, p["image_size"], p["max_depth"], notes=self.notes)
        # the cloud's features: the encoder's grid cells (its spatial channels), or one panorama token per view
        feat = self.grid_encoder.grid_channels if self.cloud_grid else self.predictor.params["hidden_size"]
        self.feat_dim = feat
        from .waypoints.grid import PANORAMA_HFOV_DEG

        self.view_hfov = PANORAMA_HFOV_DEG
        render = dict(render or {})
        weights = render.pop("weights", None)
        self.render_background = render.pop("background", True)
        if not isinstance(self.render_background, bool):
            raise ConfigError(f"got {self.render_background!r}", field="policy.params.render.background",
                              expected="true (composite the current view's feature behind each ray) or false")
        try:
            # a grid's cells are sparser than its pixels: a wider neighbourhood (1.5 m) unless given
            defaults = {"hidden": h, "rows": max(1, self.cloud_grid), **({"radius": 1.5} if self.cloud_grid else {})}
            self.renderer = VolumeRenderer(feat, **{**defaults, **render})
        except TypeError as exc:
            raise ConfigError(str(exc), field="policy.params.render") from None
        if weights:
            self.load_renderer(weights)
        self.render_proj = nn.Linear(feat, h)
        self.node_types = nn.Embedding(4, h)  # visited, current, candidate, lookahead
        heads = int(params.get("heads", 4))
        self.graph = nn.ModuleList(GraphLayer(h, heads) for _ in range(graph_layers))
        self.freeze_for_stage()

    @property
    def grid_encoder(self) -> Any:
        """What computes the cloud's grid features: the ``cloud_encoder`` or the predictor."""
        return self.cloud_encoder if self.cloud_encoder is not None else self.predictor

    def load_renderer(self, path: Any) -> None:
        """The ``renderer.*`` weights of a ``vlnverse train`` checkpoint (``render.weights``: e.g. a
        ``stage: render`` run's), read without pickle; a checkpoint without them, or of another
        size, is a one-line ``ConfigError``."""
        from .checkpoint import read_checkpoint

        data = read_checkpoint(path)
        state = {k[len("renderer."):]: v for k, v in data["state_dict"].items() if k.startswith("renderer.")}
        if not state:
            raise ConfigError("no renderer weights in the checkpoint", file=path, field="policy.params.render.weights",
                              expected="a checkpoint of an hnr or gama policy")
        try:
            self.renderer.load_state_dict(state)
        except RuntimeError as exc:
            raise ConfigError(f"renderer weights do not fit: {str(exc).splitlines()[0]}", file=path,
                              field="policy.params.render.weights", expected="the same render.hidden and hidden_size") from None
        self.notes.append(f"renderer: loaded weights from {path}")

    @classmethod
    def params_from_checkpoint(cls, params: dict[str, Any], data: dict[str, Any], path: Any) -> dict[str, Any]:
        """VLN-BERT's, ``render.weights`` dropped (the renderer's weights are in the state dict), and
        ``render.background`` as saved (a checkpoint from before it rendered without: off)."""
        out = super().params_from_checkpoint(params, data, path)
        saved = data.get("render")
        out["render"] = {**{k: v for k, v in (out.get("render") or {}).items() if k != "weights"},
                         "background": bool(saved.get("background")) if isinstance(saved, dict) else False}
        enc = cloud_encoder_spec(out.get("cloud_encoder"))
        if enc["type"] == "pretrained":  # rebuilt without the file: weights in the state dict
            from .encoder import arch_of

            out["cloud_encoder"] = {"type": "pretrained", "trunk": enc["trunk"],
                                    "arch": arch_of(data["state_dict"], "cloud_encoder.trunk")}
        elif enc["type"] != "predictor":
            prefix = "cloud_encoder.trunk."
            state = {k[len(prefix):]: v for k, v in data["state_dict"].items() if k.startswith(prefix)}
            arch = weights_arch(enc["type"], state)
            if arch is None:
                raise ConfigError(f"no {enc['type']} cloud encoder weights in the checkpoint", file=path,
                                  field="policy.params.cloud_encoder", expected="a checkpoint of the policy as trained")
            out["cloud_encoder"] = {**{k: v for k, v in enc.items() if k != "weights"}, "arch": arch}
        cloud = data.get("cloud")  # a checkpoint from before grid features held one point per view
        out["cloud_grid"] = int(cloud["grid"]) if isinstance(cloud, dict) and "grid" in cloud else 0
        return out

    def teacher_overrides(self) -> dict[str, Any]:
        """The teacher records this policy's cloud inputs (its grid, whatever the config says)."""
        return {"cloud_grid": self.cloud_grid}

    def checkpoint_extras(self) -> dict[str, Any]:
        """VLN-BERT's, the cloud's grid (``cloud_grid`` as built, default included) and whether the
        renderer composites a background (``render.background``)."""
        return {**super().checkpoint_extras(), "cloud": {"grid": self.cloud_grid},
                "render": {"background": self.render_background}}

    def freeze_for_stage(self) -> None:
        """``stage: render``: only the rendering model trains (called last by each constructor)."""
        if self.stage == "render":
            for name, p in self.named_parameters():
                if not name.startswith("renderer."):
                    p.requires_grad_(False)

    @classmethod
    def teacher_spec(cls, params: dict[str, Any]) -> HNRTeacher:
        """VLN-BERT's oracle, recording the cloud's inputs too."""
        t = super().teacher_spec(params)
        enc = cloud_encoder_spec(params.get("cloud_encoder"))
        if enc["type"] != "predictor" and not encoder_file(enc):
            file_key = "path" if enc["type"] == "pretrained" else "weights"
            raise ConfigError("the teacher needs the cloud encoder's file", field=f"policy.params.cloud_encoder.{file_key}",
                              expected="the encoder file the policy was built from")
        return HNRTeacher(t.predictor_path, t.stop_distance, t.open_space_radius, t.turn_deg,
                          grid=int(params.get("cloud_grid", DEFAULT_GRID)), encoder_path=encoder_file(enc),
                          encoder_trunk=enc.get("trunk", "depth"), encoder_type=enc["type"],
                          encoder_heads=int(enc.get("heads", 0)))

    def new_memory(self, batch: int, device: Any) -> GraphMemory:
        return GraphMemory(batch, self.feat_dim, self.hidden_size, self.cloud_cap, device)

    # ---------------------------------------------------------------- graph

    def cloud_points(self, view_feats: torch.Tensor, view_depth: torch.Tensor, pose: torch.Tensor,
                     view_grid: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """A panorama's cloud points: its grid features (B, V, C, g, g) at their cell depths (B, V,
        g, g), or (``cloud_grid`` 0) each view token (B, V, F) at its view depth (B, V)."""
        if self.cloud_grid:
            if view_grid is None:
                raise ConfigError("no grid features for the feature cloud", field="view_grid",
                                  expected=f"steps recorded with cloud_grid {self.cloud_grid} (a fresh teacher cache)")
            return panorama_points(view_grid, view_depth, pose, self.view_hfov)
        return panorama_points(view_feats[..., None, None], view_depth[..., None, None], pose, self.view_hfov)

    def cloud_target(self, view_feats: torch.Tensor, view_grid: torch.Tensor | None) -> torch.Tensor:
        """The encoder's feature of a real view (..., F): the mean of its grid cells (view_grid
        (..., C, g, g)), or its panorama token (``cloud_grid`` 0)."""
        return view_grid.mean((-2, -1)) if self.cloud_grid else view_feats

    def render_lookaheads(self, view_feats: torch.Tensor, cands: torch.Tensor, view_depth: torch.Tensor,
                          pose: torch.Tensor, mem: GraphMemory, view_grid: torch.Tensor | None = None
                          ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Add the panorama's points to the cloud, then render a view at each candidate facing its
        direction: (features (B, K, F), opacity (B, K), candidate positions (B, K, 2)). With
        ``render.background`` each ray's remaining transmittance composites the current view's
        feature in the candidate's direction (``view_at_angle`` of ``cloud_target``: what the copy
        baseline of ``lookahead_cosines`` predicts), so where the cloud is empty the render falls
        back to it."""
        b, k = cands.shape[:2]
        mem.cloud.add(self.cloud_points(view_feats, view_depth, pose, view_grid))
        heading = pose[:, None, 2] + cands[..., 0]
        cand_xy = pose[:, None, :2] + cands[..., 1:2] * torch.stack([torch.cos(heading), torch.sin(heading)], -1)
        origins = torch.cat([cand_xy, torch.zeros(b, k, 1, device=pose.device)], -1)
        background = view_at_angle(self.cloud_target(view_feats, view_grid), cands[..., 0]) if self.render_background else None
        rendered, opacity = self.renderer(mem.cloud, origins, heading, background)
        return rendered, opacity, cand_xy

    def build_graph(self, instruction: tuple, view_feats: torch.Tensor, cands: torch.Tensor, view_depth: torch.Tensor,
                    pose: torch.Tensor, mem: GraphMemory, view_grid: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """Grow the cloud, render a lookahead per candidate, encode the graph with GASA; update
        the visited nodes. Returns the node outputs and what the scorers read."""
        b, k = cands.shape[:2]
        rendered, opacity, cand_xy = self.render_lookaheads(view_feats, cands, view_depth, pose, mem, view_grid)
        valid = cands[..., 2] > 0.5
        current = self.view_proj(view_feats.mean(1))  # the current view's CLS
        t = self.node_types.weight
        cand_tok = self.candidate_tokens(view_feats, cands)
        nodes = torch.cat([mem.tokens + t[0], current[:, None] + t[1], cand_tok + t[2],
                           self.render_proj(rendered) + t[3]], 1)
        positions = torch.cat([mem.positions, pose[:, None, :2], cand_xy, cand_xy], 1)
        ones = torch.ones(b, mem.tokens.shape[1] + 1, dtype=torch.bool, device=pose.device)
        mask = torch.cat([ones, valid, valid], 1)
        dist = graph_distances(positions, topological_edges(mem.tokens.shape[1], k, b, pose.device))
        for layer in self.graph:
            nodes = layer(nodes, dist, mask)
        first = mem.tokens.shape[1] + 1
        mem.tokens = torch.cat([mem.tokens, current[:, None]], 1)[:, -self.history:] if self.history else mem.tokens
        mem.positions = torch.cat([mem.positions, pose[:, None, :2]], 1)[:, -self.history:] if self.history else mem.positions
        return {"nodes": nodes, "mask": mask, "distances": dist, "candidates": nodes[:, first:first + k] + nodes[:, first + k:],
                "first": torch.tensor(first), "valid": valid, "current": current, "rendered": rendered, "opacity": opacity}

    def score_actions(self, instruction: tuple, new_state: torch.Tensor, actions: torch.Tensor, graph: dict
                      ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Scores (B, K + 1) of the encoded actions (VLN-BERT's scorer) and auxiliary outputs."""
        return self.scorer(torch.cat([new_state[:, None].expand(-1, actions.shape[1], -1), actions], -1))[..., 0], {}

    def graph_step(self, instruction: tuple, view_feats: torch.Tensor, cands: torch.Tensor, view_depth: torch.Tensor,
                   pose: torch.Tensor, hidden: torch.Tensor, mem: GraphMemory, view_grid: torch.Tensor | None = None
                   ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """One step: (logits (B, K + 1), STOP last, invalid -inf; new state (B, 1, H); auxiliary outputs)."""
        graph = self.build_graph(instruction, view_feats, cands, view_depth, pose, mem, view_grid)
        new_state, actions, keep = self.encode_actions(instruction, graph["candidates"], graph["valid"], hidden)
        scores, aux = self.score_actions(instruction, new_state, actions, graph)
        aux["rendered"] = graph["rendered"]
        return scores.masked_fill(~keep, float("-inf")), new_state.unsqueeze(1), aux

    # ---------------------------------------------------------------- training

    def auxiliary_loss(self, aux: list[dict], batch: dict[str, Any], valid: torch.Tensor) -> torch.Tensor:
        """λ_render · ``render_loss``."""
        if self.render_weight <= 0:
            return torch.zeros((), device=valid.device)
        return self.render_weight * self.render_loss([a["rendered"] for a in aux], batch, valid)

    def render_loss(self, rendered: list[torch.Tensor], batch: dict[str, Any], valid: torch.Tensor) -> torch.Tensor:
        """Mean (1 - cos) between the rendered view (per step (B, K, F)) of the oracle's candidate at
        step t and the real view the agent faces at step t + 1 (view 0 of the next panorama)."""
        if valid.shape[1] < 2:
            return torch.zeros((), device=valid.device)
        extras = batch["extras"]
        target = extras["target"].long()
        k = extras["candidates"].shape[2]
        rendered = torch.stack(rendered, 1)  # (B, T, K, F)
        moves = valid[:, :-1] & valid[:, 1:] & (target[:, :-1] < k)
        if not moves.any():
            return torch.zeros((), device=valid.device)
        idx = target[:, :-1].clamp(max=k - 1)
        picked = torch.gather(rendered[:, :-1], 2, idx[..., None, None].expand(-1, -1, 1, rendered.shape[-1]))[:, :, 0]
        grid = extras.get("view_grid")
        real = self.cloud_target(extras["view_feats"][:, 1:, 0], grid[:, 1:, 0] if grid is not None else None)
        cos = F.cosine_similarity(picked, real, dim=-1)
        return (1 - cos)[moves].mean()

    def imitation_loss(self, batch: dict[str, Any]) -> tuple[torch.Tensor, float]:
        """VLN-BERT's cross-entropy (``candidate_loss``) + ``auxiliary_loss``; with
        ``stage: render`` the ``render_loss`` alone (no step is scored: 0 correct)."""
        extras = batch["extras"]
        feats, cands, target = extras["view_feats"], extras["candidates"], extras["target"].long()
        depth, pose, grid = extras["view_depth"], extras["world_pose"], extras.get("view_grid")
        at = lambda i: grid[:, i] if grid is not None else None  # noqa: E731
        b, t = target.shape
        if self.stage == "render":
            mem = self.new_memory(b, target.device)
            rendered = [self.render_lookaheads(feats[:, i], cands[:, i], depth[:, i], pose[:, i], mem, at(i))[0]
                        for i in range(t)]
            return self.render_loss(rendered, batch, batch["weights"] > 0), 0.0
        tokens = batch["tokens"]
        instruction = self.instruction(tokens[:, :max(1, int((tokens != PAD_ID).sum(1).max()))])
        hidden = self.initial_state(b, target.device)
        mem = self.new_memory(b, target.device)
        logits, aux = [], []
        for i in range(t):
            out, hidden, a = self.graph_step(instruction, feats[:, i], cands[:, i], depth[:, i], pose[:, i], hidden, mem,
                                             at(i))
            logits.append(out)
            aux.append(a)
        width = max(x.shape[-1] for x in logits)  # GAMA's global actions: K + 1 + the step's earlier frontier nodes
        logits = torch.stack([F.pad(x, (0, width - x.shape[-1]), value=float("-inf")) for x in logits], 1)
        valid = batch["weights"] > 0
        picked = torch.gather(logits, 2, torch.where(valid, target, 0).clamp(max=width - 1)[..., None])[..., 0]
        if bool((valid & ((target >= width) | torch.isinf(picked))).any()):
            raise ConfigError("a teacher label names an action the policy does not offer at that step",
                              field="extras.target",
                              expected="a teacher cache recorded with this policy's global_actions, merge_radius and "
                                       "frontier (rebuild the cache)")
        loss, correct = candidate_loss(logits, target, batch, stop=cands.shape[2])
        return loss + self.auxiliary_loss(aux, batch, valid), correct

    # ---------------------------------------------------------------- acting

    def begin_episode(self, instruction: tuple, episode: Any, context: Any, agent: Any) -> dict[str, Any]:
        """VLN-BERT's acting memory plus the graph memory (feature cloud, visited nodes)."""
        if "hnr_perception" not in agent.cache:
            agent.cache["hnr_perception"] = HNRPerception(self.predictor, self.cloud_grid, getattr(agent, "observation", None),
                                                          self.grid_encoder)
        memory = super().begin_episode(instruction, episode, context, agent)
        memory["graph"] = self.new_memory(1, agent.device)
        return memory

    def step_info(self, aux: dict[str, torch.Tensor]) -> dict[str, Any]:
        """What the agent logs of a step's auxiliary outputs (``agent_outputs``)."""
        return {}

    def choose(self, memory: dict[str, Any], view_feats: np.ndarray, cands: np.ndarray, agent: Any,
               view_depth: np.ndarray | None = None, pose: Any = None, view_grid: np.ndarray | None = None) -> int:
        """Advance one step and return the chosen index (len(cands): STOP); without ``view_depth``
        (the teacher asking during DAgger) the cloud's inputs and pose come from ``memory["sense"]``."""
        if view_depth is None:
            perception, pose = memory.pop("sense")
            view_depth, view_grid = perception.last_depth, perception.last_grid
        dev = agent.device
        as_t = lambda a: torch.from_numpy(np.asarray(a, dtype=np.float32))[None].to(dev)  # noqa: E731
        with torch.no_grad():
            logits, memory["hidden"], aux = self.graph_step(memory["instruction"], as_t(view_feats), as_t(cands),
                                                            as_t(view_depth), as_t(pose), memory["hidden"], memory["graph"],
                                                            as_t(view_grid) if self.cloud_grid else None)
        memory["info"] = self.step_info(aux)
        return agent.pick(logits[0])

    def propose(self, memory: dict[str, Any], observations: dict[str, Any], state: Any, agent: Any) -> Any:
        """VLN-BERT's ``propose`` through the graph step (turn in place when no candidate)."""
        ctx, pose = memory["context"], state.pose
        perception = agent.cache["hnr_perception"]
        feats, cands, n = perception(ctx.desc, ctx.body, (pose.x, pose.y, pose.yaw), relax=memory["empty"],
                                     options=render_options(ctx))
        if n == 0:
            memory["no_candidate_turns"] += 1
            memory["empty"] += 1
            agent.outputs.append({"no_candidates": True, "no_candidate_turns": memory["no_candidate_turns"]})
            return WaypointAction(0.0, 0.0, math.radians(self.turn_deg))
        choice = self.choose(memory, feats, cands, agent, perception.last_depth, (pose.x, pose.y, pose.yaw),
                             perception.last_grid)
        memory["empty"] = relax_after(choice, cands, memory["empty"])
        info = {"candidates": n, "choice": "STOP" if choice == len(cands) else choice, **memory.pop("info", {})}
        agent.outputs.append(info)
        if choice == len(cands):
            return DiscreteAction.STOP
        if choice > len(cands):  # GAMA's global action: an earlier frontier node
            info["choice"] = "frontier"
            return self.frontier_action(memory, choice - len(cands) - 1, state, info)
        info["waypoint"] = [round(float(cands[choice, 0]), 4), round(float(cands[choice, 1]), 3)]
        return candidate_action(float(cands[choice, 0]), float(cands[choice, 1]))

    def frontier_action(self, memory: dict[str, Any], index: int, state: Any, info: dict[str, Any]) -> Any:
        """The first hop towards earlier frontier node ``index`` (GAMA overrides; HNR offers none)."""
        raise ValueError(f"{self.name} has no global actions (choice {index} beyond STOP)")


def view_at_angle(view_feats: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """The panorama feature (B, M, F) at ``angles`` (B, M) (rad CCW, agent frame): linear between
    the two nearest of the V views (view v faces 2πv / V)."""
    b, v, f = view_feats.shape
    pos = (angles / (2 * math.pi / v)) % v
    lo = pos.floor().long() % v
    w = (pos - pos.floor()).unsqueeze(-1)
    gather = lambda idx: torch.gather(view_feats, 1, idx.unsqueeze(-1).expand(-1, -1, f))  # noqa: E731
    return (1 - w) * gather(lo) + w * gather((lo + 1) % v)


@torch.no_grad()
def lookahead_cosines(policy: HNRPolicy, store: Any) -> dict[str, list]:
    """Per teacher step of a ``StepStore`` (collected by ``HNRTeacher``) where the oracle moves to a
    candidate and a next step exists: ``rendered`` (the cosine between ``policy``'s rendered view of
    that candidate at step t and the encoder's feature of the real front view at t + 1), ``copy``
    (the cosine of the current panorama's feature in that direction to the same real view),
    ``opacity`` (the rendered view's), ``episode`` (the store's episode index), ``depth_ahead`` (the
    mean depth of the real view's seen cells, metres; ``UNSEEN`` when none is seen), and diagnostics
    with the mean μ of all these real views: ``mean_view`` (the cosine of μ to each real view) and
    ``rendered_centred`` / ``copy_centred`` (the cosines after subtracting μ from both sides)."""
    policy.eval()
    out: dict[str, list] = {"rendered": [], "copy": [], "opacity": [], "episode": [], "depth_ahead": [], "mean_view": [],
                            "rendered_centred": [], "copy_centred": []}
    vectors: dict[str, list] = {"real": [], "rendered": [], "copy": []}
    for i in range(len(store)):
        ep = store.episode(i)
        t = int(ep["length"])
        as_t = lambda name: torch.from_numpy(np.asarray(ep[name], dtype=np.float32))[None]  # noqa: E731
        feats, cands, depth, pose = as_t("view_feats"), as_t("candidates"), as_t("view_depth"), as_t("world_pose")
        grid = as_t("view_grid") if policy.cloud_grid else None
        views = policy.cloud_target(feats, grid)  # (1, T, V, F): the encoder's feature of each real view
        target = ep["target"].astype(int)
        k = cands.shape[2]
        mem = policy.new_memory(1, "cpu")
        for s in range(t):
            rendered, opacity, _ = policy.render_lookaheads(feats[:, s], cands[:, s], depth[:, s], pose[:, s], mem,
                                                            grid[:, s] if grid is not None else None)
            if s + 1 < t and target[s] < k:
                real = views[0, s + 1, 0]
                copy = view_at_angle(views[:, s], cands[:, s, target[s]:target[s] + 1, 0])[0, 0]
                for name, v in (("real", real), ("rendered", rendered[0, target[s]]), ("copy", copy)):
                    vectors[name].append(v)
                out["rendered"].append(float(F.cosine_similarity(rendered[0, target[s]], real, dim=0)))
                out["copy"].append(float(F.cosine_similarity(copy, real, dim=0)))
                out["opacity"].append(float(opacity[0, target[s]]))
                out["episode"].append(i)
                ahead = depth[0, s + 1, 0]
                seen = ahead[ahead > 0]
                out["depth_ahead"].append(float(seen.mean()) if len(seen) else UNSEEN)
    if vectors["real"]:
        real, rendered, copy = (torch.stack(vectors[k]) for k in ("real", "rendered", "copy"))
        mu = real.mean(0, keepdim=True)
        out["mean_view"] = F.cosine_similarity(mu, real, dim=-1).tolist()
        out["rendered_centred"] = F.cosine_similarity(rendered - mu, real - mu, dim=-1).tolist()
        out["copy_centred"] = F.cosine_similarity(copy - mu, real - mu, dim=-1).tolist()
    return out


def lookahead_similarity(policy: HNRPolicy, store: Any) -> dict[str, Any]:
    """How well ``policy`` (``hnr`` or ``gama``) predicts the view ahead over the teacher steps of a
    store (held-out homes for a fair figure): the means of ``lookahead_cosines``' rendered and
    copy-baseline cosines."""
    got = lookahead_cosines(policy, store)
    n = len(got["rendered"])
    return {"steps": n, "rendered_cos": round(float(np.mean(got["rendered"])), 4) if n else None,
            "copy_baseline_cos": round(float(np.mean(got["copy"])), 4) if n else None}


def checkpoint_teacher(policy: HNRPolicy, data: dict[str, Any], folder: Any, *, file: Any = None) -> HNRTeacher:
    """The ``HNRTeacher`` that records what ``policy`` (rebuilt from the checkpoint dict ``data``)
    reads: its own waypoint predictor (written from the checkpoint to ``folder/predictor.pt``), its
    cloud grid, and for a pretrained cloud encoder the file its config names, whose trunk must
    equal the checkpoint's (else a one-line ``ConfigError`` naming ``file``)."""
    from pathlib import Path

    from .checkpoint import named_path
    from .waypoints.model import save_predictor

    path = Path(folder) / "predictor.pt"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        save_predictor(path, policy.predictor)
    params = {**dict(data.get("policy_params") or {}), "waypoint_predictor": str(path), "cloud_grid": policy.cloud_grid}
    if policy.cloud_encoder is not None:
        given = params.get("cloud_encoder")
        key = "path" if isinstance(given, dict) and given.get("type") == "pretrained" else "weights"
        if isinstance(given, dict) and isinstance(given.get(key), str):  # relative to the run: beside the checkpoint
            params["cloud_encoder"] = {**given, key: named_path(given[key], file)}
        enc = cloud_encoder_spec(params.get("cloud_encoder"))
        field = f"policy.params.cloud_encoder.{key}"
        if not encoder_file(enc) or not Path(encoder_file(enc)).is_file():
            raise ConfigError(f"its cloud encoder's file {encoder_file(enc)!r} is not here", file=file, field=field,
                              expected="the encoder file the checkpoint was trained with, at that path")
        trunk = make_grid_encoder(enc, policy.predictor.params["image_size"],
                                  policy.predictor.params["max_depth"]).trunk.state_dict()
        mine = policy.cloud_encoder.trunk.state_dict()
        if trunk.keys() != mine.keys() or any(not torch.equal(trunk[k], mine[k]) for k in mine):
            raise ConfigError(f"the cloud encoder file {encoder_file(enc)} holds other weights than the checkpoint's trunk",
                              file=file, field=field, expected="the encoder file the checkpoint was trained with")
    else:
        params["cloud_encoder"] = "predictor"
    return type(policy).teacher_spec(params)
