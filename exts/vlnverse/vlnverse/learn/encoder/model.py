"""The pretraining model: per-objective heads over the trunks, their losses, held-out metrics and
the training loop (``fit``)."""
from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from .data import GRID, ROOM_CLASSES, SEMANTIC_CLASSES, FrameData

OBJECTIVES = ("semantic", "depth", "room")


class Heads(nn.Module):
    """The objectives' heads on the RGB and depth trunks (see the module docstring)."""

    def __init__(self, trunks: dict[str, nn.Module], objectives: tuple[str, ...], hidden: int = 64):
        super().__init__()
        self.objectives = tuple(objectives)
        self.semantic = nn.ModuleDict()
        self.room = nn.ModuleDict()
        self.depth = None
        for key, enc in trunks.items():
            if "semantic" in objectives:
                self.semantic[key] = nn.Sequential(nn.Conv1d(enc.spatial_channels, hidden, 1), nn.ReLU(),
                                                   nn.Conv1d(hidden, len(SEMANTIC_CLASSES), 1))
            if "room" in objectives:
                self.room[key] = nn.Linear(enc.out_dim, len(ROOM_CLASSES))
        if "depth" in objectives and "rgb" in trunks:
            self.depth = nn.Sequential(nn.Conv1d(trunks["rgb"].spatial_channels, hidden, 1), nn.ReLU(),
                                       nn.Conv1d(hidden, 1, 1))

    def losses(self, feats: dict[str, tuple[torch.Tensor, torch.Tensor]], batch: dict[str, torch.Tensor],
               max_depth: float) -> tuple[torch.Tensor, dict[str, float]]:
        """Summed loss and per-objective statistics (sums over the batch, for averaging)."""
        total = torch.zeros(())
        stats: dict[str, float] = {}
        n = batch["room"].shape[0]
        for key, (spatial, glob) in feats.items():
            if key in self.semantic:
                logits = self.semantic[key](spatial)  # (N, K, cells)
                target = batch["semantic"].transpose(1, 2)  # (N, K, cells)
                loss = -(target * F.log_softmax(logits, dim=1)).sum(1).mean()
                total = total + loss
                hit = (logits.argmax(1) == target.argmax(1)).float().mean(1)
                stats[f"semantic_{key}_loss"] = loss.item() * n
                stats[f"semantic_{key}_accuracy"] = float(hit.sum())
            if key in self.room:
                logits = self.room[key](glob)
                loss = F.cross_entropy(logits, batch["room"])
                total = total + loss
                stats[f"room_{key}_loss"] = loss.item() * n
                stats[f"room_{key}_accuracy"] = float((logits.argmax(1) == batch["room"]).sum())
        if self.depth is not None and "rgb" in feats:
            pred = self.depth(feats["rgb"][0])[:, 0]
            loss = F.l1_loss(pred, batch["depth_cells"])
            total = total + loss
            stats["depth_rgb_loss"] = loss.item() * n
            stats["depth_rgb_error_m"] = loss.item() * max_depth * n
        stats["loss"] = total.item() * n
        return total, stats


def _inputs(data: FrameData, idx: np.ndarray, max_depth: float) -> dict[str, torch.Tensor]:
    rgb = torch.from_numpy(data.rgb[idx]).float().permute(0, 3, 1, 2) / 255.0
    d = torch.from_numpy(data.depth[idx].astype(np.float32)).nan_to_num(max_depth).clamp(0, max_depth) / max_depth
    cells = F.adaptive_avg_pool2d(d[:, None], (GRID, GRID)).flatten(1)
    return {"rgb": rgb, "depth": d[:, None], "semantic": torch.from_numpy(data.semantic[idx].astype(np.float32)),
            "room": torch.from_numpy(data.room[idx]), "depth_cells": cells}


def _features(trunks: dict[str, nn.Module], batch: dict[str, torch.Tensor]) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    return {k: m(batch[k]) for k, m in trunks.items()}


def evaluate_heads(trunks: dict[str, nn.Module], heads: Heads, data: FrameData, max_depth: float,
                   batch_size: int = 128) -> dict[str, float]:
    """Mean loss and per-objective metrics of ``heads`` on ``data`` (no gradients)."""
    tot: dict[str, float] = {}
    with torch.no_grad():
        for s in range(0, len(data), batch_size):
            batch = _inputs(data, np.arange(s, min(s + batch_size, len(data))), max_depth)
            _, stats = heads.losses(_features(trunks, batch), batch, max_depth)
            for k, v in stats.items():
                tot[k] = tot.get(k, 0.0) + v
    return {k: round(v / len(data), 5) for k, v in sorted(tot.items())}


def fit(trunks: dict[str, nn.Module], heads: Heads, train: FrameData, *, epochs: int, batch_size: int, lr: float,
        seed: int, max_depth: float, val: FrameData | None = None, train_trunks: bool = True, progress: bool = True,
        desc: str = "pretrain") -> list[dict[str, Any]]:
    """Adam over the heads (and the trunks when ``train_trunks``); per-epoch training loss, held-out
    loss (when ``val``) and seconds. The batch order depends only on (seed, epoch)."""
    from tqdm import tqdm

    params = list(heads.parameters()) + ([p for m in trunks.values() for p in m.parameters()] if train_trunks else [])
    opt = torch.optim.Adam(params, lr=lr)
    curve = []
    for epoch in range(epochs):
        for m in (*trunks.values(), heads):
            m.train()
        order = np.random.default_rng([seed, epoch]).permutation(len(train))
        tot, t0 = 0.0, time.perf_counter()
        bar = tqdm(range(0, len(train), batch_size), desc=f"{desc} epoch {epoch + 1}/{epochs}", unit="batch",
                   disable=not progress)
        for s in bar:
            batch = _inputs(train, np.sort(order[s:s + batch_size]), max_depth)
            if train_trunks:
                feats = _features(trunks, batch)
            else:
                with torch.no_grad():
                    feats = _features(trunks, batch)
            loss, stats = heads.losses(feats, batch, max_depth)
            opt.zero_grad()
            loss.backward()
            opt.step()
            tot += stats["loss"]
            bar.set_postfix(loss=f"{loss.item():.3f}")
        row = {"epoch": epoch + 1, "loss": round(tot / len(train), 5), "seconds": round(time.perf_counter() - t0, 3)}
        if val is not None:
            for m in (*trunks.values(), heads):
                m.eval()
            row["held_out_loss"] = evaluate_heads(trunks, heads, val, max_depth)["loss"]
        curve.append(row)
    return curve
