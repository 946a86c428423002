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
    fit_state(module, load_state_dict_file(file, field=field), file, field)


def fit_state(module: nn.Module, state: dict[str, Any], file: Any, field: str) -> None:
    """``module.load_state_dict(state)`` (strict); tensors of another name or shape are one line
    naming ``file`` and ``field``."""
    try:
        module.load_state_dict(state)
    except RuntimeError as exc:  # torch's first line names the module, the second what does not fit
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        detail = " ".join(lines[:2])
        raise ConfigError(f"weights do not fit: {detail[:300]}", file=file, field=field,
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


class _QuickGELU(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(1.702 * x)


class _CLIPBlock(nn.Module):
    def __init__(self, width: int, heads: int):
        super().__init__()
        from collections import OrderedDict

        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.ln_1, self.ln_2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.mlp = nn.Sequential(OrderedDict(c_fc=nn.Linear(width, 4 * width), gelu=_QuickGELU(),
                                             c_proj=nn.Linear(4 * width, width)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.ln_1(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class _CLIPTransformer(nn.Module):
    def __init__(self, width: int, layers: int, heads: int):
        super().__init__()
        self.resblocks = nn.Sequential(*(_CLIPBlock(width, heads) for _ in range(layers)))


#: CLIP's input normalisation (RGB in [0, 1])
CLIP_MEAN, CLIP_STD = (0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)


class CLIPVisionEncoder(nn.Module):
    """The image tower of a CLIP ViT in OpenAI's layout (``conv1``, ``class_embedding``,
    ``positional_embedding``, ``ln_pre``, ``transformer.resblocks.i.{attn, ln_1, mlp.c_fc,
    mlp.c_proj, ln_2}``, ``ln_post``, ``proj``; QuickGELU), so a ``visual.*`` state dict loads as
    it is; ``clip_arch`` reads the sizes from the tensors. ``spatial_map`` gives the last layer's
    patch tokens (after ``ln_post`` and ``proj``: the image-text space) as a (N, D, g, g) map."""

    def __init__(self, width: int, layers: int, heads: int, patch: int, grid: int, output_dim: int | None = None):
        super().__init__()
        self.patch, self.grid = int(patch), int(grid)
        scale = width ** -0.5
        self.conv1 = nn.Conv2d(3, width, patch, stride=patch, bias=False)
        self.class_embedding = nn.Parameter(scale * torch.randn(width))
        self.positional_embedding = nn.Parameter(scale * torch.randn(grid * grid + 1, width))
        self.ln_pre, self.ln_post = nn.LayerNorm(width), nn.LayerNorm(width)
        self.transformer = _CLIPTransformer(width, layers, heads)
        self.proj = nn.Parameter(scale * torch.randn(width, output_dim)) if output_dim else None
        self.spatial_channels = int(output_dim or width)
        self.register_buffer("mean", torch.tensor(CLIP_MEAN).view(1, 3, 1, 1), persistent=False)  # not in CLIP files
        self.register_buffer("std", torch.tensor(CLIP_STD).view(1, 3, 1, 1), persistent=False)

    def spatial_map(self, x: torch.Tensor) -> torch.Tensor:
        """(N, 3, H, W) RGB in [0, 1], resized to the model's input size → (N, D, g, g)."""
        from torch.nn import functional as F

        size = self.patch * self.grid
        if x.shape[-2:] != (size, size):
            x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
        x = self.conv1((x - self.mean) / self.std).flatten(2).transpose(1, 2)  # (N, g², width)
        x = torch.cat([self.class_embedding.expand(x.shape[0], 1, -1).to(x.dtype), x], 1) + self.positional_embedding
        x = self.ln_post(self.transformer.resblocks(self.ln_pre(x))[:, 1:])
        if self.proj is not None:
            x = x @ self.proj
        return x.transpose(1, 2).reshape(x.shape[0], -1, self.grid, self.grid)


def clip_arch(state: dict[str, Any]) -> dict[str, int] | None:
    """``{width, layers, patch, grid, output_dim}`` of a CLIP ViT image tower's tensors (None: not one)."""
    try:
        conv, pos = state["conv1.weight"], state["positional_embedding"]
    except KeyError:
        return None
    layers = len({k.split(".")[2] for k in state if k.startswith("transformer.resblocks.")})
    grid = int(round((pos.shape[0] - 1) ** 0.5))
    if conv.ndim != 4 or conv.shape[1] != 3 or grid * grid + 1 != pos.shape[0] or not layers:
        return None
    return {"width": int(conv.shape[0]), "layers": layers, "patch": int(conv.shape[-1]), "grid": grid,
            "output_dim": int(state["proj"].shape[1]) if "proj" in state else 0}


def _note(notes: list[str] | None, text: str) -> None:
    if notes is not None:
        notes.append(text)
