"""Geometry of the feature cloud: back-projection of grid features (Eq. 2), per-view and
per-cell depths of a panorama, its points in the world, and a panorama feature at an angle."""
from __future__ import annotations

import math

import numpy as np
import torch

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


def view_at_angle(view_feats: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """The panorama feature (B, M, F) at ``angles`` (B, M) (rad CCW, agent frame): linear between
    the two nearest of the V views (view v faces 2πv / V)."""
    b, v, f = view_feats.shape
    pos = (angles / (2 * math.pi / v)) % v
    lo = pos.floor().long() % v
    w = (pos - pos.floor()).unsqueeze(-1)
    gather = lambda idx: torch.gather(view_feats, 1, idx.unsqueeze(-1).expand(-1, -1, f))  # noqa: E731
    return (1 - w) * gather(lo) + w * gather((lo + 1) % v)
