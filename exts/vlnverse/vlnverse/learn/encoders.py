"""Visual encoder modules shared by the policies and ``vlnverse pretrain-encoder``: the small
``CNNEncoder`` and a torchvision ``ResNetEncoder``, with weights from local safetensors files only
(``load_weights``; nothing is downloaded, nothing in a file runs)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..core.errors import ConfigError


def _local_file(path: Any, field: str) -> Path:
    p = Path(str(path)).expanduser()
    if not p.is_file():
        raise ConfigError(f"no such file: {p}", field=field, expected="a local weights file (nothing is downloaded)")
    return p


def load_weights(module: nn.Module, path: Any, field: str) -> None:
    """Load a local safetensors state dict into ``module`` (``tensorfile.load_state_dict_file``:
    a pickle is refused, nothing in the file runs); a missing file or weights of another shape
    are one-line ``ConfigError``s naming ``field``."""
    from .tensorfile import load_state_dict_file

    file = _local_file(path, field)
    state = load_state_dict_file(file, field=field)
    try:
        module.load_state_dict(state)
    except RuntimeError as exc:
        raise ConfigError(f"weights do not fit: {str(exc).splitlines()[0]}", file=file, field=field,
                          expected="a state dict of this module") from None


class CNNEncoder(nn.Module):
    """A small CNN (3 strided convolutions) → spatial features (C, 4, 4) and a global vector."""

    def __init__(self, in_channels: int, out_dim: int = 128, channels: int = 32, weights: str | None = None,
                 field: str = "encoder", notes: list[str] | None = None, frozen: bool = False):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(in_channels, channels, 5, stride=2, padding=2), nn.ReLU(inplace=True),
            nn.Conv2d(channels, 2 * channels, 3, stride=2, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(2 * channels, 2 * channels, 3, stride=2, padding=1), nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d((4, 4)))
        self.spatial_channels = 2 * channels
        self.fc = nn.Sequential(nn.Flatten(), nn.Linear(2 * channels * 16, out_dim), nn.ReLU(inplace=True))
        self.out_dim = out_dim
        if weights:
            load_weights(self, weights, f"{field}.weights")
            _note(notes, f"{field}: loaded pretrained weights from {weights}")
        elif notes is not None:
            _note(notes, f"{field}: no pretrained weights given ({field}.weights): small CNN trained from scratch")
        if frozen:  # a frozen encoder keeps the weights it was built with (a file's, or a checkpoint's)
            for p in self.parameters():
                p.requires_grad_(False)

    def spatial_features(self, x: torch.Tensor) -> torch.Tensor:
        """(N, C, H, W) → the trunk's spatial features (N, C', 16) (``fc`` makes the global vector)."""
        return self.net(x).flatten(2)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(N, C, H, W) → spatial (N, C', 16), global (N, out_dim)."""
        s = self.spatial_features(x)
        return s, self.fc(s)


class ResNetEncoder(nn.Module):
    """A torchvision ResNet trunk (``resnet18`` / ``resnet50``), weights from a local file only."""

    def __init__(self, arch: str, out_dim: int = 128, weights: str | None = None, frozen: bool = True,
                 field: str = "rgb_encoder", notes: list[str] | None = None):
        super().__init__()
        try:
            import torchvision
        except ModuleNotFoundError:
            raise ConfigError("needs torchvision (pip install torchvision matching torch)", field=f"{field}.type",
                              expected="cnn, or install torchvision") from None
        if not hasattr(torchvision.models, arch):
            raise ConfigError(f"unknown architecture {arch!r}", field=f"{field}.type", expected="cnn, resnet18 or resnet50")
        net = getattr(torchvision.models, arch)(weights=None)
        if weights:
            load_weights(net, weights, f"{field}.weights")
            _note(notes, f"{field}: loaded {arch} weights from {weights}")
        else:
            _note(notes, f"{field}: no pretrained weights given ({field}.weights): {arch} randomly initialised")
        self.trunk = nn.Sequential(*list(net.children())[:-2], nn.AdaptiveAvgPool2d((4, 4)))
        if frozen and weights:
            for p in self.trunk.parameters():
                p.requires_grad_(False)
        self.spatial_channels = net.fc.in_features
        self.fc = nn.Sequential(nn.Flatten(), nn.Linear(self.spatial_channels * 16, out_dim), nn.ReLU(inplace=True))
        self.out_dim = out_dim
        self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1))

    def spatial_features(self, x: torch.Tensor) -> torch.Tensor:
        """(N, 3, H, W) in [0, 1] → the trunk's spatial features (N, C, 16)."""
        return self.trunk((x - self.mean) / self.std).flatten(2)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(N, 3, H, W) in [0, 1] → spatial (N, C, 16), global (N, out_dim)."""
        s = self.spatial_features(x)
        return s, self.fc(s)


def _note(notes: list[str] | None, text: str) -> None:
    if notes is not None:
        notes.append(text)
