"""``vlnverse pretrain-encoder``: the config, the run (render, pretrain, probe, write), and the
training recipes' encoder pretrained on the training homes (``path: auto``)."""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from ...core.errors import ConfigError
from ...core.io import atomic_path, to_jsonable, write_json_atomic
from .. import seed_torch
from .data import ROOM_CLASSES, SEMANTIC_CLASSES, FrameData, FrameRenderer, build_frames
from .files import FORMAT, FORMAT_VERSION, save_encoder
from .model import OBJECTIVES, Heads, evaluate_heads, fit


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


def recipe_identity() -> dict[str, Any]:
    """What the recipe's encoder depends on besides its homes, rig and seed: ``RECIPE_PRETRAINING``
    and the training settings it leaves at their defaults (``bench train --seeds`` hashes it into
    its work identity). The probe is left out: it does not change the encoder."""
    per_run = ("scenes", "val_scenes", "image_size", "hfov_deg", "max_depth", "poses_per_scene",
               "val_poses_per_scene", "seed", "render", "probe_epochs")
    base = {k: v for k, v in asdict(EncoderTrainConfig()).items() if k not in per_run}
    return to_jsonable({**base, **RECIPE_PRETRAINING})


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
