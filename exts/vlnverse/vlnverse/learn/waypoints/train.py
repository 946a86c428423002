"""``vlnverse waypoints train``: fit the predictor, score it on held-out poses, write the checkpoint,
``metrics.json`` and the loss curve."""
from __future__ import annotations

import inspect
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from torch.nn import functional as F

from ...core.errors import ConfigError
from ...core.io import atomic_path, to_jsonable, write_json_atomic
from ...core.params import check_ranges, param
from .. import seed_torch
from .data import PanoramaRenderer, WaypointData, build_dataset
from .grid import to_world
from .model import WaypointPredictor, save_predictor


@dataclass
class WaypointTrainConfig:
    """``vlnverse waypoints train`` settings (model parameters in ``model``: ``WaypointPredictor``'s
    keywords); numeric ranges are field metadata (``core.params``), checked by ``validate``."""

    scenes: Any = "train"
    val_scenes: Any = "val_unseen"
    poses_per_scene: int = param(150, low=1, high=1_000_000)
    val_poses_per_scene: int = param(60, low=1, high=1_000_000)
    epochs: int = param(15, low=1, high=1_000_000)
    batch_size: int = param(32, low=1, high=1_000_000)
    lr: float = param(1e-3, low=1e-9, high=10.0)
    seed: int = 0
    body: str = "r2r_ce"
    model: dict[str, Any] = field(default_factory=dict)
    hit_radius: float = param(1.0, low=0.01, high=100.0)
    threads: int | None = param(1, low=1, high=4096)
    #: how the panoramas are drawn (the train / eval configs' ``render``: ``{quality, objects}``, a
    #: ``RenderConfig`` or ``QUALITY:OBJECTS``; None: the defaults)
    render: Any = None

    def validate(self) -> None:
        """Ranges of the numeric fields; ``model`` keys among the predictor's, a positive
        ``model.image_size``. Reads nothing but the fields."""
        from ...run.setup import RenderConfig

        check_ranges(self, prefix="")
        self.render = RenderConfig.parse(self.render, "render")
        known = {k for k, p in inspect.signature(WaypointPredictor.__init__).parameters.items() if p.kind is p.KEYWORD_ONLY}
        for key in self.model:
            if key not in known:
                raise ConfigError(f"unknown key {key!r}", field=f"model.{key}", expected=f"one of {sorted(known)}")
        size = self.model.get("image_size", 16)
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ConfigError(f"got {size!r}", field="model.image_size", expected="a positive integer")


def evaluate(model: WaypointPredictor, data: WaypointData, contexts: dict[str, Any], *, hit_radius: float = 1.0,
             batch_size: int = 64) -> dict[str, Any]:
    """Held-out metrics of ``model`` (and of the NMS of the ground-truth heatmaps) on ``data``;
    ``contexts`` maps each pose's scene to its context (for the navigable map)."""
    model.eval()
    heats = []
    with torch.no_grad():
        for s in range(0, len(data.depth), batch_size):
            d = torch.from_numpy(data.depth[s:s + batch_size].astype(np.float32))
            r = torch.from_numpy(data.rgb[s:s + batch_size]) if data.rgb is not None else None
            heats.append(torch.sigmoid(model(d, r)).numpy())
    heat = np.concatenate(heats)
    return {"predicted": candidate_metrics([model.candidates(h, d) for h, d in zip(heat, data.depth)], data, contexts,
                                           hit_radius),
            "ground_truth_nms": candidate_metrics([model.candidates(t.astype(np.float32), d)
                                                   for t, d in zip(data.targets, data.depth)], data,
                                                  contexts, hit_radius)}


def candidate_metrics(cands: list[np.ndarray], data: WaypointData, contexts: dict[str, Any],
                      hit_radius: float = 1.0) -> dict[str, Any]:
    """navigable_fraction (of all candidates), next_waypoint_hit (poses with a candidate within
    ``hit_radius`` of the next reference waypoint), mean_candidates, no_candidate_fraction."""
    on = total = hits = empty = 0
    for c, rec in zip(cands, data.poses):
        planner = contexts[rec["scene"]].planner
        pose = (rec["x"], rec["y"], rec["yaw"])
        if len(c) == 0:
            empty += 1
            continue
        xy = to_world(pose, c)
        on += int(planner.is_navigable(xy).sum())
        total += len(xy)
        hits += int(np.min(np.linalg.norm(xy - np.asarray(rec["next"]), axis=1)) <= hit_radius)
    n = max(len(cands), 1)
    return {"poses": len(cands), "navigable_fraction": round(on / max(total, 1), 4), "next_waypoint_hit": round(hits / n, 4),
            "mean_candidates": round(total / n, 3), "no_candidate_fraction": round(empty / n, 4)}


def train_predictor(model: WaypointPredictor, train: WaypointData, *, epochs: int, batch_size: int, lr: float,
                    seed: int, progress: bool = True, report: Callable[[str], None] = print) -> list[dict[str, float]]:
    """Adam on the BCE between the heatmap logits and the Gaussian targets; returns the per-epoch
    losses. The batch order depends only on (seed, epoch)."""
    from tqdm import tqdm

    torch.manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    n = len(train.depth)
    curve = []
    for epoch in range(epochs):
        model.train()
        order = np.random.default_rng([seed, epoch]).permutation(n)
        tot, t0 = 0.0, time.perf_counter()
        bar = tqdm(range(0, n, batch_size), desc=f"waypoints epoch {epoch + 1}/{epochs}", unit="batch", disable=not progress)
        for s in bar:
            idx = np.sort(order[s:s + batch_size])
            d = torch.from_numpy(train.depth[idx].astype(np.float32))
            r = torch.from_numpy(train.rgb[idx]) if train.rgb is not None else None
            y = torch.from_numpy(train.targets[idx].astype(np.float32))
            loss = F.binary_cross_entropy_with_logits(model(d, r), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            tot += loss.item() * len(idx)
            bar.set_postfix(loss=f"{loss.item():.4f}")
        curve.append({"epoch": epoch + 1, "loss": tot / n, "seconds": round(time.perf_counter() - t0, 3)})
    return curve


def run_waypoint_training(cfg: WaypointTrainConfig, out: str | Path, *, progress: bool = True,
                          report: Callable[[str], None] = print,
                          context_loader: Callable[[Any], Any] | None = None) -> dict[str, Any]:
    """Render the training and held-out panoramas, train, evaluate; writes ``out/predictor.pt``,
    ``out/metrics.json`` and ``out/loss.png``; returns the metrics."""
    from ...scenes.splits import resolve_scenes
    from ...tasks.base import load_scene_context

    cfg.validate()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    seed_torch(cfg.seed, cfg.threads)
    from ...core.body import as_body

    body = as_body(cfg.body)  # the free-space check sees obstacles as this body would
    model = WaypointPredictor(**{"camera_height": body.camera_height, "body_height": body.height,
                                 "body_radius": body.radius, **cfg.model})
    p = model.params
    grid = model.grid
    renderer = PanoramaRenderer(p["views"], p["image_size"], rgb=p["rgb"], max_depth=p["max_depth"],
                                options=cfg.render.options())
    load = context_loader or (lambda s: load_scene_context(s, cfg.body))
    scenes = cfg.scenes if context_loader else resolve_scenes(cfg.scenes)
    val_scenes = cfg.val_scenes if context_loader else resolve_scenes(cfg.val_scenes, field="val_scenes")
    common = dict(grid=grid, renderer=renderer, body=cfg.body, node_spacing=p["node_spacing"],
                  sigma=(p["sigma_angle"], p["sigma_distance"]), context_loader=load, progress=progress)
    t0 = time.perf_counter()
    train = build_dataset(list(scenes), cfg.poses_per_scene, cfg.seed, **common)
    val = build_dataset(list(val_scenes), cfg.val_poses_per_scene, cfg.seed + 1, **common)
    render_s = time.perf_counter() - t0
    renderer.close()
    report(f"waypoints: {len(train.depth)} training poses, {len(val.depth)} held-out poses "
           f"({(len(train.depth) + len(val.depth)) / max(render_s, 1e-9):.1f} panoramas/s)")
    curve = train_predictor(model, train, epochs=cfg.epochs, batch_size=cfg.batch_size, lr=cfg.lr, seed=cfg.seed,
                            progress=progress, report=report)
    contexts = {}
    for s in list(scenes) + list(val_scenes):
        ctx = load(s)
        contexts[str(s if not hasattr(s, "scene_id") else s.scene_id)] = ctx
    metrics = {"held_out": evaluate(model, val, contexts, hit_radius=cfg.hit_radius),
               "train": evaluate(model, train, contexts, hit_radius=cfg.hit_radius),
               "curve": curve, "train_poses": len(train.depth), "held_out_poses": len(val.depth),
               "render_seconds": round(render_s, 2), "config": to_jsonable(_config_dict(cfg)), "params": p}
    extra = {} if cfg.render.is_default() else {"render": cfg.render.key()}  # what it was trained on (metadata)
    save_predictor(out / "predictor.pt", model, {"metrics": to_jsonable({k: metrics[k] for k in ("held_out", "train")}),
                                                 **extra})
    write_json_atomic(out / "metrics.json", to_jsonable(metrics))
    _loss_png(curve, out / "loss.png")
    h = metrics["held_out"]["predicted"]
    report(f"waypoints held-out: navigable {h['navigable_fraction']:.3f}, next-waypoint hit {h['next_waypoint_hit']:.3f}, "
           f"{h['mean_candidates']:.1f} candidates/pose; wrote {out / 'predictor.pt'}")
    return metrics


#: the recipes' predictor model (``policy.params.waypoint_predictor: auto``, ``bench train``'s waypoint
#: rows): RGB-D panoramas, so the navigators that read its view features see RGB-D
RECIPE_MODEL = {"rgb": True}


def recipe_config(seed: int, *, scale: float = 1.0, body: str | None = None, render: Any = None,
                  epochs: int | None = None) -> WaypointTrainConfig:
    """The recipe predictor's settings: ``vlnverse waypoints train --rgb`` at its defaults (150
    training and 60 held-out poses per scene at ``scale`` 1, at least 30 and 10) for ``body``;
    ``epochs``: None for the default's 15 (``bench train --waypoint-epochs``)."""
    return WaypointTrainConfig(poses_per_scene=max(30, round(150 * scale)), val_poses_per_scene=max(10, round(60 * scale)),
                               seed=seed, body=body or WaypointTrainConfig.body, render=render, model=dict(RECIPE_MODEL),
                               **({} if epochs is None else {"epochs": int(epochs)}))


def recipe_identity() -> dict[str, Any]:
    """What the recipe predictor depends on besides its seed: ``recipe_config``'s settings at the
    default body and scale (``bench train --seeds`` hashes it into its work identity)."""
    cfg = recipe_config(0)
    cfg.validate()
    return to_jsonable({k: v for k, v in _config_dict(cfg).items() if k != "seed"})


def recipe_predictor(*, seed: int, cache_dir: Any = None, body: str | None = None, render: Any = None,
                     progress: bool = True, report: Callable[[str], None] = print,
                     context_loader: Callable[[Any], Any] | None = None) -> dict[str, Any]:
    """The recipe predictor (``recipe_config``) trained once and cached under
    ``<cache>/waypoints/<content key>`` (its scenes' bytes, the settings, the code version);
    returns its file and held-out figures. ``metrics.json``, written last, marks it complete.
    ``context_loader`` (tests): loads the configured scene names, keyed by name."""
    import json

    from .. import code_version
    from ...core.cache_key import content_digest
    from ...scenes.splits import resolve_scenes
    from ..cache import keyed_folder

    cfg = recipe_config(seed, body=body, render=render)
    cfg.validate()
    if context_loader is None:
        paths = resolve_scenes(cfg.scenes) + resolve_scenes(cfg.val_scenes, field="val_scenes")
        scenes = [content_digest(Path(p).read_bytes()) for p in paths]
    else:
        scenes = [str(s) for s in list(cfg.scenes) + list(cfg.val_scenes)]
    key = {"scenes": scenes, "config": to_jsonable(_config_dict(cfg)), "code": code_version()}
    out = keyed_folder(cache_dir, "waypoints", key)
    done = out / "metrics.json"
    if done.is_file() and (out / "predictor.pt").is_file():
        report(f"waypoint predictor: reusing {out / 'predictor.pt'}")
        metrics = json.loads(done.read_text(encoding="utf-8"))
    else:
        report(f"waypoint predictor: training the recipe's ({cfg.poses_per_scene} RGB-D panoramas per train scene) "
               f"into {out}")
        metrics = run_waypoint_training(cfg, out, progress=progress, report=report, context_loader=context_loader)
    return {"path": str(out / "predictor.pt"), "held_out": metrics["held_out"]["predicted"],
            "train_poses": metrics["train_poses"]}


def _config_dict(cfg: WaypointTrainConfig) -> dict[str, Any]:
    """``asdict(cfg)`` with ``render`` only when not the defaults (default runs write what they did before)."""
    data = asdict(cfg)
    data.pop("render", None)
    return data if cfg.render.is_default() else {**data, "render": cfg.render.key()}


def _loss_png(curve: list[dict], path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5, 3), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.plot([c["epoch"] for c in curve], [c["loss"] for c in curve], marker="o")
    ax.set_xlabel("epoch")
    ax.set_ylabel("BCE loss")
    ax.set_title("waypoint predictor training")
    fig.tight_layout()
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, format="png")
