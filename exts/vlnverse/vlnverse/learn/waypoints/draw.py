"""``vlnverse waypoints show``: draw a predictor's candidates on the panorama strip and on the top-down map."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from ...core.io import atomic_path, to_jsonable, write_json_atomic
from .data import PanoramaRenderer, sample_poses
from .grid import graph_nodes, target_points, to_world
from .model import load_predictor


def panorama_strip(depth: np.ndarray, candidates: np.ndarray, *, hfov_deg: float = 90.0, scale: int = 4,
                   max_depth: float = 10.0, rgb: np.ndarray | None = None) -> np.ndarray:
    """An RGB strip (uint8) of the panorama, 180° (left) → −180° (right), each view cropped to its
    central 360/V degrees, candidates drawn as numbered dots at their angle, lower the nearer."""
    from PIL import Image, ImageDraw

    v, h, w = depth.shape
    f = (w / 2) / math.tan(math.radians(hfov_deg) / 2)
    half = f * math.tan(math.pi / v)
    c0, c1 = int(math.floor(w / 2 - half)), int(math.ceil(w / 2 + half))
    if rgb is not None:
        imgs = [np.asarray(rgb[i]) for i in range(v)]
    else:
        norm = np.clip(np.nan_to_num(depth, nan=max_depth) / max_depth, 0, 1)
        imgs = [np.repeat((255 * (1 - norm[i]))[..., None], 3, axis=2).astype(np.uint8) for i in range(v)]
    order = [(v // 2 - s) % v for s in range(v)]  # view at +180° first, then decreasing angle
    strip = np.concatenate([imgs[i][:, c0:c1] for i in order], axis=1)
    img = Image.fromarray(strip).resize((strip.shape[1] * scale, h * scale), Image.NEAREST)
    draw = ImageDraw.Draw(img)
    width = c1 - c0
    total = width * v
    for n, (ang, dist) in enumerate(np.asarray(candidates).reshape(-1, 2), 1):
        deg = math.degrees(ang)
        x = ((180.0 - deg) % 360.0) / 360.0 * total * scale  # linear in angle across the cropped views
        x = (x + width * scale / 2) % (total * scale)
        y = h * scale * (0.55 + 0.4 * (1 - min(dist, 3.0) / 3.0))
        r = 3 * scale / 2 + 2
        draw.ellipse([x - r, y - r, x + r, y + r], fill=(30, 200, 60), outline=(255, 255, 255))
        draw.text((x - 3, y - 5), str(n), fill=(0, 0, 0))
    return np.asarray(img)


def show_predictions(predictor_path: str | Path, scenes: Any, out: str | Path, *, n: int = 4, seed: int = 0,
                     body: str = "r2r_ce", progress: bool = True) -> dict[str, Any]:
    """Draw ``n`` seeded poses of ``scenes`` (split name, ids or paths): per pose a PNG with the
    panorama strip (predicted candidates) above the top-down map (agent, predicted candidates,
    ground-truth targets, next reference waypoint); writes ``out/predictions.json``."""
    from PIL import Image

    from ...scenes.render_map import render_map_array
    from ...scenes.splits import resolve_scenes
    from ...tasks.base import load_scene_context

    model = load_predictor(predictor_path)
    p = model.params
    renderer = PanoramaRenderer(p["views"], p["image_size"], rgb=p["rgb"], max_depth=p["max_depth"])
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    records = []
    paths = resolve_scenes(scenes)
    rng = np.random.default_rng(seed)
    for i in range(n):
        scene = paths[i % len(paths)]
        ctx = load_scene_context(scene, body)
        rec = sample_poses(ctx, 1, rng)[0]
        pose = (rec["x"], rec["y"], rec["yaw"])
        img = renderer.render(ctx.desc, ctx.body, pose)
        cand, _ = model.predict(img["depth"], img.get("rgb"))
        gt = target_points(ctx.planner, graph_nodes(ctx, p["node_spacing"], seed), pose, model.grid)
        cxy = to_world(pose, cand)
        strip = panorama_strip(img["depth"], cand, max_depth=p["max_depth"])
        heading = np.array([[rec["x"], rec["y"]], [rec["x"] + 0.6 * math.cos(rec["yaw"]), rec["y"] + 0.6 * math.sin(rec["yaw"])]])
        markers = [{"xy": [[rec["x"], rec["y"]]], "color": "k", "size": 60, "label": "agent"},
                   {"xy": rec["next"], "color": "m", "marker": "*", "size": 120, "label": "next reference waypoint"}]
        if len(gt):
            markers.append({"xy": to_world(pose, gt), "color": "none", "edgecolor": "b", "size": 50,
                            "label": "ground-truth targets"})
        if len(cxy):
            markers.append({"xy": cxy, "color": "limegreen", "size": 40, "label": "predicted candidates"})
        top = render_map_array(ctx.desc, ctx.maps, paths=[{"xy": heading, "color": "k", "label": "heading"}],
                               markers=markers, title=f"{ctx.scene_id}: {len(cand)} candidates")
        sw = top.shape[1]
        strip_img = np.asarray(Image.fromarray(strip).resize((sw, max(1, int(strip.shape[0] * sw / strip.shape[1])))))
        canvas = np.concatenate([strip_img, top], axis=0)
        png = out / f"pose_{i:02d}.png"
        with atomic_path(png, suffix=".png") as tmp:
            Image.fromarray(canvas).save(tmp, format="png")
        on = ctx.planner.is_navigable(cxy) if len(cxy) else np.zeros(0, bool)
        dist = float(np.min(np.linalg.norm(cxy - np.asarray(rec["next"]), axis=1))) if len(cxy) else None
        records.append({"scene": ctx.scene_id, **rec, "png": png.name,
                        "candidates": [{"angle_deg": round(math.degrees(a), 1), "distance": round(float(d), 2),
                                        "xy": [round(float(x), 3) for x in xy], "navigable": bool(o)}
                                       for (a, d), xy, o in zip(cand, cxy, on)],
                        "ground_truth": len(gt), "nearest_to_next_waypoint": dist})
    renderer.close()
    write_json_atomic(out / "predictions.json", to_jsonable(records))
    return {"poses": records, "out": str(out)}
