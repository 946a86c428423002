"""The visual encoder's files: ``encoder.safetensors`` (the trunks' tensors) and ``encoder.json``
(format, architecture, rig, figures); reading them into a policy's trunk, checked against its rig."""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ...core.cache_key import sha256_file
from ...core.errors import ConfigError
from ...core.io import atomic_path, to_jsonable, write_json_atomic

FORMAT = "vlnverse-visual-encoder"
FORMAT_VERSION = 1


def _paths(path: str | Path) -> tuple[Path, Path]:
    """(weights file, JSON sidecar) of an encoder given either of them."""
    p = Path(path).expanduser()
    if p.suffix == ".json":
        meta = json.loads(p.read_text(encoding="utf-8")) if p.is_file() else {}
        return p.parent / str(meta.get("weights", p.stem + ".safetensors")), p
    return p, p.with_suffix(".json")


def save_encoder(out: str | Path, trunks: dict[str, nn.Module], meta: dict[str, Any]) -> Path:
    """Write the trunks' tensors (``<key>.<param>``) and the JSON sidecar into folder ``out``;
    returns the weights file."""
    out = Path(out)
    state = {f"{k}.{n}": t.detach().cpu().contiguous() for k, m in trunks.items() for n, t in m.state_dict().items()}
    from safetensors.torch import save_file

    weights = out / "encoder.safetensors"
    with atomic_path(weights) as tmp:
        save_file(state, str(tmp))
    write_json_atomic(out / "encoder.json", to_jsonable({**meta, "weights": weights.name, "sha256": sha256_file(weights)}))
    return weights


def read_encoder(path: str | Path, field: str = "encoder.path") -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """(tensors, sidecar) of an encoder file (the weights or the JSON); one ``ConfigError`` when a
    file is missing, not an encoder, or its weights do not match the sidecar's hash."""
    weights, sidecar = _paths(path)
    for p in (weights, sidecar):
        if not p.is_file():
            raise ConfigError(f"no such file: {p}", field=field,
                              expected="an encoder.safetensors with its encoder.json (vlnverse pretrain-encoder)")
    try:
        meta = json.loads(sidecar.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ConfigError(f"not JSON ({exc})", file=sidecar, field=field) from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ConfigError("not a visual encoder sidecar", file=sidecar, field="format", expected=FORMAT)
    if meta.get("format_version") != FORMAT_VERSION:
        raise ConfigError(f"format version {meta.get('format_version')}", file=sidecar, field="format_version",
                          expected=str(FORMAT_VERSION))
    if meta.get("sha256") and sha256_file(weights) != meta["sha256"]:
        raise ConfigError("the weights file does not match its sidecar's sha256", file=weights, field="sha256",
                          expected=meta["sha256"])
    try:
        from safetensors.torch import load_file

        state = load_file(str(weights))
    except Exception as exc:  # noqa: BLE001 - any decoding failure: not readable weights
        raise ConfigError(f"unreadable weights ({type(exc).__name__})", file=weights, field=field) from None
    return state, meta


def check_rig(meta: dict[str, Any], key: str, sensor: dict[str, Any], *, file: Any, field: str,
              max_depth: float | None = None) -> None:
    """One ``ConfigError`` unless the encoder's ``key`` trunk (rgb / depth) was made for ``sensor``:
    same kind and size (``shape`` [H, W, ...] or ``width`` / ``height``), and the same FoV and depth
    range where ``sensor`` states them (``max_depth``: the policy's depth normalisation)."""
    rig = (meta.get("rig") or {}).get(key)
    if rig is None:
        raise ConfigError(f"the encoder has no {key} trunk (it has {sorted(meta.get('rig') or {})})", file=file,
                          field=field, expected=f"an encoder pretrained with a {key} camera")
    h, w = (sensor["shape"][:2] if "shape" in sensor else (sensor.get("height"), sensor.get("width")))
    mine = {"kind": sensor.get("kind"), "width": w, "height": h}
    if sensor.get("hfov_deg") is not None:
        mine["hfov_deg"] = float(sensor["hfov_deg"])
    if key == "depth":
        depth_range = max_depth if max_depth is not None else sensor.get("max_depth")
        if depth_range is not None:
            mine["max_depth"] = float(depth_range)
    theirs = {k: rig.get(k) for k in mine}
    if theirs != mine:
        def fmt(d: dict) -> str:
            return ", ".join(f"{k} {v}" for k, v in d.items())

        raise ConfigError(f"the encoder was made for another sensor rig than this {fmt(mine)}", file=file,
                          field=field, expected=f"{fmt(theirs)}, or an encoder pretrained for this rig "
                                                "(vlnverse pretrain-encoder)")


def pretrained_trunk(path: str | Path, key: str, in_channels: int, sensor: dict[str, Any] | None, *, field: str,
                     frozen: bool = True, max_depth: float | None = None, notes: list[str] | None = None) -> nn.Module:
    """The ``key`` trunk (a ``CNNEncoder``) of an encoder file, checked against ``sensor``."""
    from ..encoders import CNNEncoder

    state, meta = read_encoder(path, f"{field}.path")
    file = _paths(path)[0]
    if sensor is not None:
        check_rig(meta, key, sensor, file=file, field=field, max_depth=max_depth)
    arch = meta.get("arch") or {}
    enc = CNNEncoder(in_channels, out_dim=int(arch.get("out_dim", 128)), channels=int(arch.get("channels", 32)))
    prefix = f"{key}."
    try:
        enc.load_state_dict({k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)})
    except RuntimeError as exc:
        raise ConfigError(f"weights do not fit: {str(exc).splitlines()[0]}", file=file, field=field) from None
    if frozen:
        for p in enc.parameters():
            p.requires_grad_(False)
    if notes is not None:
        notes.append(f"{field}: pretrained {key} trunk from {file} (objectives {meta.get('objectives')}, "
                     f"{'frozen' if frozen else 'fine-tuned'})")
    return enc


def check_encoders(params: dict[str, Any] | None, sensors: list) -> None:
    """Check every ``type: pretrained`` encoder of policy ``params`` against the configured cameras
    (``SensorConfig`` or dicts: kind, width, height, hfov_deg, max_depth); reads the sidecars only."""
    params = dict(params or {})
    for field, kind in (("rgb_encoder", "rgb"), ("depth_encoder", "depth")):
        spec = params.get(field)
        if not (isinstance(spec, dict) and spec.get("type") == "pretrained" and spec.get("path")):
            continue
        cams = [s if isinstance(s, dict) else asdict(s) for s in sensors]
        cam = next((c for c in cams if c.get("kind") == kind), None)
        if cam is None:
            continue
        weights, sidecar = _paths(spec["path"])
        if not sidecar.is_file():
            raise ConfigError(f"no such file: {sidecar}", field=f"{field}.path",
                              expected="an encoder.safetensors with its encoder.json (vlnverse pretrain-encoder)")
        meta = json.loads(sidecar.read_text(encoding="utf-8"))
        check_rig(meta, kind, {k: cam.get(k) for k in ("kind", "width", "height", "hfov_deg", "max_depth")},
                  file=weights, field=field)


def arch_of(state_dict: dict[str, Any], prefix: str) -> dict[str, int]:
    """``{channels, out_dim}`` of a ``CNNEncoder`` from its tensors under ``prefix`` (rebuilding a
    checkpoint whose encoder came from a pretrained file, without the file)."""
    return {"channels": int(state_dict[f"{prefix}.net.0.weight"].shape[0]),
            "out_dim": int(state_dict[f"{prefix}.fc.1.weight"].shape[0])}
