"""Where the cloud's grid features come from (``cloud_encoder``): the waypoint predictor's trunk,
a ``vlnverse pretrain-encoder`` trunk or a user's weights file."""
from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from ...core.errors import ConfigError

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
        from ..encoder.files import pretrained_trunk
        from ..encoders import CNNEncoder
        from ..waypoints.grid import PANORAMA_HFOV_DEG

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
    from ..encoders import clip_arch

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
        from ..encoders import CLIPVisionEncoder, CNNEncoder, ResNetEncoder, _local_file, fit_state
        from ..tensorfile import load_state_dict_file

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
