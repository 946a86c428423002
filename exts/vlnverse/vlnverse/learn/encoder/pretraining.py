"""A visual encoder pretrained on the toolkit's own renders (``vlnverse pretrain-encoder``).

**Data.** Seeded poses on navigable cells of the given scenes (uniform heading), each rendered
by the simulator (``render_at``: no physics) as RGB, depth and semantic frames of one camera rig.
The labels come free with the render: per cell of the encoder's 4×4 spatial grid, the histogram
of semantic classes (``SEMANTIC_CLASSES``: the scene's label names mapped onto one vocabulary
shared by every scene, unknown names → ``other``) and the mean depth; per frame, the room type of
the agent's cell (``ROOM_CLASSES``, from the room map; ``none`` outside every room).

**Model.** Two ``encoders.CNNEncoder`` trunks (the architecture the policies use): RGB and depth.
Per objective a small head reads a trunk:

- ``semantic`` — each trunk's spatial cells → class logits; soft cross-entropy against the cell's
  class histogram (accuracy: argmax = the cell's dominant class);
- ``depth`` — the RGB trunk's spatial cells → mean depth / ``max_depth``; L1 (reported in metres);
- ``room`` — each trunk's global vector → room type; cross-entropy.

The loss is the sum over the chosen objectives and trunks. Adam, batch order seeded per epoch.

**Probe.** How much each objective leaves in the features is measured the same way for every
run: fresh heads of all three objectives are trained on the *frozen* trunks (``probe_epochs``)
and scored on the held-out frames, for the pretrained trunks and for randomly initialised ones
(``metrics.json``: ``probe``).

**Files.** ``encoder.safetensors`` holds only the trunks' tensors (``rgb.*``, ``depth.*``);
``encoder.json`` beside it: format, architecture, the sensor rig (kinds, sizes, FoV, depth range),
objectives, code version, held-out metrics and the weights' sha256. ``metrics.json`` and
``loss.png`` (train and held-out loss per epoch) complete the run folder.

Policies read the file through ``rgb_encoder`` / ``depth_encoder: {type: pretrained, path: FILE,
frozen: true}``; a file made for another rig is one ``ConfigError`` (``check_rig``).
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ...core.cache_key import sha256_file
from ...core.errors import ConfigError
from ...core.io import atomic_path, to_jsonable, write_json_atomic
from .. import seed_torch

FORMAT = "vlnverse-visual-encoder"
FORMAT_VERSION = 1
OBJECTIVES = ("semantic", "depth", "room")
#: cells per side of the spatial grid the semantic and depth targets are given on (the encoders' 4×4)
GRID = 4


def _semantic_classes() -> tuple[str, ...]:
    from ...scenes.catalog import CATEGORIES

    structure = ("wall", "floor", "ceiling", "door_frame", "window", "skirting", "rug", "painting", "ceiling_light")
    return ("background", *structure, *sorted(set(CATEGORIES) - set(structure)), "other")


def _room_classes() -> tuple[str, ...]:
    from ...scenes.catalog import ROOM_TYPES

    return (*ROOM_TYPES, "other", "none")


SEMANTIC_CLASSES = _semantic_classes()
ROOM_CLASSES = _room_classes()


# -------------------------------------------------------------------------------------------- files


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


# -------------------------------------------------------------------------------------------- data


@dataclass
class FrameData:
    """Rendered frames and their labels: rgb (N, H, W, 3) uint8, depth (N, H, W) float16 (metres),
    semantic (N, GRID², classes) float16 cell histograms, room (N,) int64, the pose records."""

    rgb: np.ndarray
    depth: np.ndarray
    semantic: np.ndarray
    room: np.ndarray
    poses: list[dict[str, Any]]

    def __len__(self) -> int:
        return len(self.room)


class FrameRenderer:
    """RGB, depth and semantic frames of one camera rig at any pose (``render_at``), one simulator
    per scene description, drawn with the ``make_simulator`` render ``options`` (``quality``,
    ``objects``; ``RenderConfig.options()``)."""

    def __init__(self, size: int = 64, hfov_deg: float = 90.0, max_depth: float = 10.0,
                 options: dict[str, str] | None = None):
        from ...sim.sensors import CameraSpec

        self.specs = [CameraSpec(name=k, kind=k, width=size, height=size, hfov_deg=hfov_deg, max_depth=max_depth)
                      for k in ("rgb", "depth", "semantic")]
        self.options = dict(options or {})
        self._desc: Any = None
        self._sim: Any = None
        self._lut: np.ndarray | None = None

    def render(self, desc: Any, body: Any, pose: tuple[float, float, float]) -> dict[str, np.ndarray]:
        """``rgb`` uint8, ``depth`` float32 metres, ``semantic`` (H, W) ids into ``SEMANTIC_CLASSES``."""
        from ...sim import make_simulator
        from ...sim.types import AgentPose

        if self._desc is not desc:
            self.close()
            self._sim = make_simulator(desc, body, sensors=[], **self.options)
            self._desc = desc
            index = {n: i for i, n in enumerate(SEMANTIC_CLASSES)}
            self._lut = np.array([index.get(n, index["other"]) for n in self._sim.semantic_labels], dtype=np.int64)
        at = AgentPose(float(pose[0]), float(pose[1]), float(pose[2]))
        out: dict[str, np.ndarray] = {}
        for spec in self.specs:
            out.update(self._sim.render_at(at, spec))
        sem = np.asarray(out["semantic"], dtype=np.int64)
        return {"rgb": np.asarray(out["rgb"]), "depth": np.asarray(out["depth"], dtype=np.float32),
                "semantic": self._lut[np.clip(sem, 0, len(self._lut) - 1)]}

    def close(self) -> None:
        """Close the simulator, if any."""
        if self._sim is not None:
            self._sim.close()
        self._sim = self._desc = None


def cell_histograms(semantic: np.ndarray, classes: int, grid: int = GRID) -> np.ndarray:
    """(grid², classes) float32 class frequencies of an (H, W) id image per cell (row-major, as
    the encoders' flattened spatial grid)."""
    h, w = semantic.shape
    rows = np.minimum(np.arange(h) * grid // h, grid - 1)
    cols = np.minimum(np.arange(w) * grid // w, grid - 1)
    cell = (rows[:, None] * grid + cols[None, :]).ravel()
    counts = np.zeros((grid * grid, classes), dtype=np.float32)
    np.add.at(counts, (cell, semantic.ravel()), 1.0)
    return counts / counts.sum(1, keepdims=True).clip(min=1.0)


def room_class(ctx: Any, xy: np.ndarray) -> int:
    """Index into ``ROOM_CLASSES`` of the room containing world point ``xy`` (``none`` outside)."""
    rc = ctx.maps.navigable.world_to_cell(np.asarray(xy, dtype=float)[None])[0]
    rmap = ctx.room_map
    rid = int(rmap[rc[0], rc[1]]) if 0 <= rc[0] < rmap.shape[0] and 0 <= rc[1] < rmap.shape[1] else -1
    if rid < 0:
        return ROOM_CLASSES.index("none")
    kind = {r.room_id: r.room_type for r in ctx.desc.rooms}.get(rid, "other")
    return ROOM_CLASSES.index(kind) if kind in ROOM_CLASSES else ROOM_CLASSES.index("other")


def build_frames(scenes: list, poses_per_scene: int, seed: int, *, renderer: FrameRenderer,
                 context_loader: Callable[[Any], Any], progress: bool = True) -> FrameData:
    """Render ``poses_per_scene`` seeded poses (navigable cell, uniform heading) of each scene."""
    from tqdm import tqdm

    rgb, depth, sem, room, poses = [], [], [], [], []
    bar = tqdm(total=len(scenes) * poses_per_scene, desc="render frames", unit="frame", disable=not progress)
    for i, scene in enumerate(scenes):
        ctx = context_loader(scene)
        rng = np.random.default_rng([seed, i])
        for xy in ctx.planner.sample_navigable_points(rng, poses_per_scene):
            yaw = float(rng.uniform(-math.pi, math.pi))
            img = renderer.render(ctx.desc, ctx.body, (float(xy[0]), float(xy[1]), yaw))
            rgb.append(img["rgb"])
            depth.append(img["depth"].astype(np.float16))
            sem.append(cell_histograms(img["semantic"], len(SEMANTIC_CLASSES)).astype(np.float16))
            room.append(room_class(ctx, xy))
            poses.append({"scene": ctx.scene_id, "x": round(float(xy[0]), 3), "y": round(float(xy[1]), 3),
                          "yaw": round(yaw, 4)})
            bar.update(1)
    bar.close()
    if not poses:
        raise ConfigError("no navigable poses rendered", field="scenes", expected="scenes with navigable space")
    return FrameData(np.stack(rgb), np.stack(depth), np.stack(sem), np.asarray(room, dtype=np.int64), poses)


# -------------------------------------------------------------------------------------------- model


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


# -------------------------------------------------------------------------------------------- run


@dataclass
class EncoderTrainConfig:
    """``vlnverse pretrain-encoder`` settings; ``render``: how the frames are drawn (the train / eval
    configs' ``render``: a mapping ``{quality, objects}``, a ``RenderConfig`` or ``QUALITY:OBJECTS``;
    None: the defaults)."""

    scenes: Any = "train"
    val_scenes: Any = "val_unseen"
    poses_per_scene: int = 200
    val_poses_per_scene: int = 60
    image_size: int = 64
    hfov_deg: float = 90.0
    max_depth: float = 10.0
    channels: int = 32
    out_dim: int = 128
    objectives: tuple[str, ...] = OBJECTIVES
    epochs: int = 15
    batch_size: int = 32
    lr: float = 1e-3
    probe_epochs: int = 8
    seed: int = 0
    body: str = "r2r_ce"
    threads: int | None = 1
    render: Any = None

    def validate(self) -> None:
        """Known objectives, positive sizes, render settings (normalised to a ``RenderConfig``)."""
        from ...run.setup import RenderConfig

        self.render = RenderConfig.parse(self.render, "render")
        bad = [o for o in self.objectives if o not in OBJECTIVES]
        if bad or not self.objectives:
            raise ConfigError(f"got {list(self.objectives)}", field="objectives",
                              expected=f"a non-empty subset of {list(OBJECTIVES)}")
        for name in ("poses_per_scene", "val_poses_per_scene", "image_size", "channels", "out_dim", "epochs",
                     "batch_size"):
            if int(getattr(self, name)) <= 0:
                raise ConfigError(f"got {getattr(self, name)}", field=name, expected="a positive integer")
        if self.probe_epochs < 0:
            raise ConfigError(f"got {self.probe_epochs}", field="probe_epochs", expected="0 (no probe) or more")
        if self.image_size < 16:
            raise ConfigError(f"got {self.image_size}", field="image_size", expected="at least 16 pixels")


def expand_scenes(spec: Any, field: str) -> list:
    """Scene paths of a split name, ids, paths or folders of ``.usd*`` files (generated homes)."""
    from ...scenes.splits import resolve_scenes

    items = [spec] if isinstance(spec, (str, Path)) else list(spec)
    items = [part.strip() for item in items for part in str(item).split(",") if part.strip()]
    out: list = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            found = sorted(q for q in p.iterdir() if q.suffix in (".usd", ".usda", ".usdc"))
            if not found:
                raise ConfigError("no .usd/.usda/.usdc scenes in the folder", file=p, field=field,
                                  expected="a folder of scenes (vlnverse scenes generate --out DIR)")
            out.extend(found)
        else:
            out.extend(resolve_scenes(item, field=field))
    return out


def _trunks(cfg: EncoderTrainConfig) -> dict[str, nn.Module]:
    from ..encoders import CNNEncoder

    return {"rgb": CNNEncoder(3, cfg.out_dim, cfg.channels), "depth": CNNEncoder(1, cfg.out_dim, cfg.channels)}


def probe(trunks: dict[str, nn.Module], train: FrameData, val: FrameData, cfg: EncoderTrainConfig,
          progress: bool = True) -> dict[str, float]:
    """Held-out metrics of fresh heads for every objective trained on the frozen ``trunks``."""
    heads = Heads(trunks, OBJECTIVES)
    for m in trunks.values():
        m.eval()
    fit(trunks, heads, train, epochs=cfg.probe_epochs, batch_size=cfg.batch_size, lr=cfg.lr, seed=cfg.seed + 7,
        max_depth=cfg.max_depth, train_trunks=False, progress=progress, desc="probe")
    heads.eval()
    return evaluate_heads(trunks, heads, val, cfg.max_depth)


def run_pretraining(cfg: EncoderTrainConfig, out: str | Path, *, progress: bool = True,
                    report: Callable[[str], None] = print,
                    context_loader: Callable[[Any], Any] | None = None) -> dict[str, Any]:
    """Render, pretrain, probe; writes ``out/encoder.safetensors`` + ``encoder.json``,
    ``metrics.json`` and ``loss.png``; returns the metrics."""
    from .. import code_version
    from ...tasks.base import load_scene_context

    cfg.validate()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    seed_torch(cfg.seed, cfg.threads)
    load = context_loader or (lambda s: load_scene_context(s, cfg.body))
    scenes = list(cfg.scenes) if context_loader else expand_scenes(cfg.scenes, "scenes")
    val_scenes = list(cfg.val_scenes) if context_loader else expand_scenes(cfg.val_scenes, "val_scenes")
    shared = sorted({Path(str(s)).resolve() for s in scenes} & {Path(str(s)).resolve() for s in val_scenes})
    if shared:
        raise ConfigError(f"the held-out scenes share {len(shared)} home(s) with the training scenes "
                          f"({', '.join(p.stem for p in shared)})", field="val_scenes",
                          expected="scenes none of which is a training scene (held-out metrics must be unseen)")
    renderer = FrameRenderer(cfg.image_size, cfg.hfov_deg, cfg.max_depth, options=cfg.render.options())
    t0 = time.perf_counter()
    train = build_frames(scenes, cfg.poses_per_scene, cfg.seed, renderer=renderer, context_loader=load, progress=progress)
    val = build_frames(val_scenes, cfg.val_poses_per_scene, cfg.seed + 1, renderer=renderer, context_loader=load,
                       progress=progress)
    renderer.close()
    render_s = time.perf_counter() - t0
    fps = (len(train) + len(val)) / max(render_s, 1e-9)
    report(f"pretrain-encoder: {len(train)} training frames, {len(val)} held-out frames ({fps:.1f} frames/s, "
           f"RGB + depth + semantic at {cfg.image_size}x{cfg.image_size})")
    trunks = _trunks(cfg)
    heads = Heads(trunks, tuple(cfg.objectives))
    for m in (*trunks.values(), heads):
        m.eval()
    before = evaluate_heads(trunks, heads, val, cfg.max_depth)
    t1 = time.perf_counter()
    curve = fit(trunks, heads, train, epochs=cfg.epochs, batch_size=cfg.batch_size, lr=cfg.lr, seed=cfg.seed,
                max_depth=cfg.max_depth, val=val, progress=progress)
    train_s = time.perf_counter() - t1
    for m in (*trunks.values(), heads):
        m.eval()
    held_out = evaluate_heads(trunks, heads, val, cfg.max_depth)
    report(f"pretrain-encoder: held-out loss {before['loss']:.4f} before training, {held_out['loss']:.4f} after "
           f"({cfg.epochs} epochs, {train_s:.0f} s)")
    probes: dict[str, Any] = {}
    if cfg.probe_epochs:
        probes["pretrained"] = probe(trunks, train, val, cfg, progress)
        torch.manual_seed(cfg.seed)
        probes["random_init"] = probe(_trunks(cfg), train, val, cfg, progress)
        for name, p in probes.items():
            report(f"probe ({name} trunks, frozen): held-out semantic cell accuracy rgb {p['semantic_rgb_accuracy']:.3f}"
                   f" depth {p['semantic_depth_accuracy']:.3f}, room accuracy rgb {p['room_rgb_accuracy']:.3f} "
                   f"depth {p['room_depth_accuracy']:.3f}, depth error {p['depth_rgb_error_m']:.3f} m")
    rig = {"rgb": {"kind": "rgb", "width": cfg.image_size, "height": cfg.image_size, "hfov_deg": float(cfg.hfov_deg)},
           "depth": {"kind": "depth", "width": cfg.image_size, "height": cfg.image_size, "hfov_deg": float(cfg.hfov_deg),
                     "max_depth": float(cfg.max_depth)}}
    meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "code_version": code_version(),
            "arch": {"type": "cnn", "channels": cfg.channels, "out_dim": cfg.out_dim}, "rig": rig,
            "objectives": list(cfg.objectives), "semantic_classes": list(SEMANTIC_CLASSES),
            "room_classes": list(ROOM_CLASSES), "held_out": held_out,
            "data": {"train_frames": len(train), "held_out_frames": len(val),
                     "scenes": [str(getattr(s, "scene_id", s)) for s in scenes],
                     "val_scenes": [str(getattr(s, "scene_id", s)) for s in val_scenes], "seed": cfg.seed,
                     **({} if cfg.render.is_default() else {"render": cfg.render.key()})}}
    weights = save_encoder(out, trunks, meta)
    metrics = {"held_out_before": before, "held_out": held_out, "train": evaluate_heads(trunks, heads, train, cfg.max_depth),
               "probe": probes, "curve": curve, "train_frames": len(train), "held_out_frames": len(val),
               "render_seconds": round(render_s, 2), "render_frames_per_s": round(fps, 2),
               "train_seconds": round(train_s, 2), "threads": torch.get_num_threads(),
               "config": _config_dict(cfg), "weights": weights.name}
    write_json_atomic(out / "metrics.json", to_jsonable(metrics))
    _loss_png(curve, out / "loss.png")
    report(f"pretrain-encoder: wrote {weights} and {out / 'encoder.json'}")
    return metrics


def _config_dict(cfg: EncoderTrainConfig) -> dict[str, Any]:
    """``asdict(cfg)``; ``render`` only when not the defaults (the files and cache keys of default
    renders are the ones from before render settings existed)."""
    from ...run.setup import RenderConfig

    data = asdict(cfg)
    render = RenderConfig.parse(cfg.render, "render")
    if render.is_default():
        data.pop("render", None)
    else:
        data["render"] = render.key()
    return data


#: the training recipes' encoder (``{type: pretrained, path: auto}``, ``bench train --encoder
#: pretrained``): trunk size, rendered frames over the training homes, held-out frames, epochs
RECIPE_PRETRAINING = {"channels": 32, "out_dim": 128, "frames": 1500, "held_out_frames": 120, "epochs": 15}


def pretrain_on_homes(scenes: list, *, image_size: int, hfov_deg: float = 90.0, max_depth: float = 10.0,
                      seed: int = 0, out: str | Path | None = None, cache_dir: Any = None, progress: bool = True,
                      report: Callable[[str], None] = print, render: Any = None) -> dict[str, Any]:
    """The recipe's encoder (``RECIPE_PRETRAINING``) pretrained on renders of the training homes
    ``scenes`` (USD paths); its held-out frames come from the last fifth of the sorted homes (at
    least one), which it does not train on, so val_unseen and test stay untouched. Written to
    ``out``, or cached under ``<cache>/encoders/<content key>`` (the homes' bytes, the rig, the
    recipe, the seed, the code version and the ``render`` settings when not the defaults) and
    reused. Returns the file and its figures."""
    from .. import code_version
    from ...core.cache_key import content_digest
    from ..cache import keyed_folder

    paths = sorted({str(s) for s in scenes})
    if len(paths) < 2:
        raise ConfigError(f"{len(paths)} training home", field="rgb_encoder.path",
                          expected="at least 2 training homes to pretrain an encoder on (one is held out)")
    held = max(1, len(paths) // 5)
    spec = RECIPE_PRETRAINING
    cfg = EncoderTrainConfig(scenes=paths[:-held], val_scenes=paths[-held:], image_size=int(image_size),
                             hfov_deg=float(hfov_deg), max_depth=float(max_depth),
                             poses_per_scene=max(10, spec["frames"] // (len(paths) - held)),
                             val_poses_per_scene=max(10, spec["held_out_frames"] // held), channels=spec["channels"],
                             out_dim=spec["out_dim"], epochs=spec["epochs"], probe_epochs=0, seed=int(seed), render=render)
    cfg.validate()
    if out is None:
        key = {"homes": [content_digest(Path(p).read_bytes()) for p in paths], "config": _config_dict(cfg) | {
            "scenes": None, "val_scenes": None}, "code": code_version()}
        out = keyed_folder(cache_dir, "encoders", key)
    out = Path(out)
    done = out / "done.json"
    t0 = time.perf_counter()
    if done.is_file():
        report(f"encoder: reusing {out / 'encoder.safetensors'}")
        figures = json.loads(done.read_text(encoding="utf-8"))
    else:
        metrics = run_pretraining(cfg, out, progress=progress, report=report)
        keep = ("loss", "semantic_rgb_accuracy", "semantic_depth_accuracy", "depth_rgb_error_m", "room_rgb_accuracy")
        figures = {"train_homes": len(paths) - held, "held_out_homes": held, "train_frames": metrics["train_frames"],
                   "render_frames_per_s": metrics["render_frames_per_s"],
                   "held_out_before": {k: round(metrics["held_out_before"][k], 4) for k in keep},
                   "held_out": {k: round(metrics["held_out"][k], 4) for k in keep},
                   "seconds": round(time.perf_counter() - t0, 1)}
        write_json_atomic(done, figures)
    return {"path": str(out / "encoder.safetensors"), **figures}


def resolve_auto_encoders(params: dict[str, Any], sensors: list, scenes: list, *, seed: int, cache_dir: Any,
                          progress: bool = True, report: Callable[[str], None] = print,
                          render: Any = None) -> dict[str, Any] | None:
    """Replace ``path: auto`` of ``type: pretrained`` encoders in policy ``params`` (in place) by
    the recipe's encoder pretrained on ``scenes`` for the configured cameras (``pretrain_on_homes``,
    drawn with the run's ``render`` settings); returns its figures (None when no encoder asks for it)."""
    auto = [f for f in ("rgb_encoder", "depth_encoder") if isinstance(params.get(f), dict)
            and params[f].get("type") == "pretrained" and params[f].get("path") == "auto"]
    if not auto:
        return None
    cams = {c["kind"]: c for c in (s if isinstance(s, dict) else asdict(s) for s in sensors)}
    rgb, depth = cams.get("rgb"), cams.get("depth")
    size = {(c.get("width"), c.get("height")) for c in (rgb, depth) if c is not None}
    fov = {float(c.get("hfov_deg") or 90.0) for c in (rgb, depth) if c is not None}
    if len(size) != 1 or len(fov) != 1 or next(iter(size))[0] != next(iter(size))[1]:
        raise ConfigError(f"cameras {sorted(size)} with fields of view {sorted(fov)}", field=f"policy.params.{auto[0]}.path",
                          expected="'auto' needs square RGB and depth cameras of one size and field of view "
                                   "(or a file of vlnverse pretrain-encoder)")
    figures = pretrain_on_homes(scenes, image_size=next(iter(size))[0], hfov_deg=next(iter(fov)),
                                max_depth=float((depth or {}).get("max_depth") or 10.0), seed=seed,
                                cache_dir=cache_dir, progress=progress, report=report, render=render)
    for f in auto:
        params[f] = {**params[f], "path": figures["path"]}
    return figures


def _loss_png(curve: list[dict], path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5, 3), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    epochs = [c["epoch"] for c in curve]
    ax.plot(epochs, [c["loss"] for c in curve], marker="o", label="train")
    if curve and "held_out_loss" in curve[0]:
        ax.plot(epochs, [c["held_out_loss"] for c in curve], marker="s", label="held-out scenes")
    ax.set_xlabel("epoch")
    ax.set_ylabel("summed loss")
    ax.set_title("visual encoder pretraining")
    ax.legend()
    fig.tight_layout()
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, format="png")
