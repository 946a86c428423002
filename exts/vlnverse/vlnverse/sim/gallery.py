"""``vlnverse scenes gallery``: a contact sheet of first-person views of homes at every render preset.

For each home, up to ``rooms`` rooms (largest first) get one view: the navigable cell nearest the
room's centre (the agent's footprint fits there), at camera height, facing the direction with the
deepest view (the median depth of eight candidate headings, so the camera looks into the room,
not at a wall). Every view is rendered at each preset (``fast``, ``default``, ``high``); the sheet
has one row per preset, labelled with the frame rate it achieved over those views (median of
``repeat`` passes per home, the presets taking turns so that machine load hits them alike). Written:
``gallery.png`` (the sheet) and ``gallery.json`` (poses, per-preset frames/s, mean luminance and
distinct colours per view), each atomically.
"""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..core.io import atomic_path, write_json_atomic
from .types import RENDER_QUALITIES, AgentPose

#: Candidate headings per view.
HEADINGS = 8


def room_views(desc, body: str = "r2r_ce", rooms: int = 3) -> list[tuple[str, AgentPose]]:
    """(room name, pose) of one view per room for the ``rooms`` largest rooms of ``desc``."""
    from ..scenes.maps import compute_scene_maps
    from . import make_sensor, make_simulator

    maps = compute_scene_maps(desc, body)
    nav = maps.navigable
    free = np.argwhere(nav.free_mask())
    if len(free) == 0:
        return []
    centres = nav.cell_to_world(free)
    by_area = sorted(desc.rooms, key=lambda r: -float(np.prod(np.ptp(r.polygon, axis=0))))[:rooms]
    depth = make_sensor("depth", width=64, height=48)
    views = []
    with make_simulator(desc, body, sensors=[], quality="fast") as sim:
        for room in by_area:
            inside = room.contains(centres)
            if not inside.any():
                continue
            cand = centres[inside]
            x, y = cand[int(np.argmin(np.linalg.norm(cand - room.centroid, axis=1)))]
            best, best_yaw = -1.0, 0.0
            for k in range(HEADINGS):
                yaw = 2 * math.pi * k / HEADINGS
                d = sim.render_at(AgentPose(float(x), float(y), yaw), depth)["depth"]
                score = float(np.median(d))
                if score > best:
                    best, best_yaw = score, yaw
            views.append((room.name or f"room_{room.room_id}", AgentPose(round(float(x), 3), round(float(y), 3),
                                                                           round(best_yaw, 4))))
    return views


def image_stats(rgb: np.ndarray) -> dict[str, float]:
    """Mean luminance (0–255), distinct colours (after 5-bit quantisation) and local contrast (mean
    absolute difference between neighbouring pixels' luminance, relative to the mean luminance) of
    an RGB frame."""
    img = rgb.astype(np.float32)
    luma = img @ np.array([0.299, 0.587, 0.114], np.float32)
    q = (rgb >> 3).astype(np.int32)
    codes = (q[..., 0] << 10) | (q[..., 1] << 5) | q[..., 2]
    contrast = (np.abs(np.diff(luma, axis=0)).mean() + np.abs(np.diff(luma, axis=1)).mean()) / 2
    contrast /= max(float(luma.mean()), 1.0)
    return {"mean_luminance": round(float(luma.mean()), 2), "distinct_colours": int(len(np.unique(codes))),
            "local_contrast": round(float(contrast), 5)}


def render_gallery(scenes: Sequence[str | Path], out: str | Path, *, rooms: int = 3, width: int = 224,
                   height: int = 224, qualities: Sequence[str] = RENDER_QUALITIES, body: str = "r2r_ce",
                   repeat: int = 5, progress: bool = True) -> dict[str, Any]:
    """Render the gallery of ``scenes`` (USD paths) into folder ``out``; returns the JSON summary."""
    from tqdm import tqdm

    from ..scenes.usd_io import load_scene
    from . import make_sensor, make_simulator

    spec = make_sensor("rgb", width=width, height=height)
    homes = []
    for path in scenes:
        desc = load_scene(path)
        homes.append((desc, room_views(desc, body, rooms)))
    columns = [(desc.scene_id, name, pose) for desc, views in homes for name, pose in views]
    rows: dict[str, list[np.ndarray]] = {}
    summary: dict[str, Any] = {"width": width, "height": height, "views": [
        {"scene": sid, "room": name, "pose": pose.to_dict()} for sid, name, pose in columns], "presets": {}}
    bar = tqdm(total=len(homes), desc="gallery", unit="home", disable=not progress)
    seconds = {q: 0.0 for q in qualities}
    count = {q: 0 for q in qualities}
    for q in qualities:
        rows[q] = []
    for desc, views in homes:
        sims = {q: make_simulator(desc, body, sensors=[], quality=q) for q in qualities}
        try:
            for q, sim in sims.items():
                for _, pose in views:
                    rows[q].append(sim.render_at(pose, spec)["rgb"])  # also warms up context and textures
            # presets take turns, so that load from other processes hits them alike; the median of
            # ``repeat`` passes over the home's views counts
            passes: dict[str, list[float]] = {q: [] for q in sims}
            for _ in range(repeat):
                for q, sim in sims.items():
                    t0 = time.perf_counter()
                    for _, pose in views:
                        sim.render_at(pose, spec)
                    passes[q].append(time.perf_counter() - t0)
            for q in sims:
                seconds[q] += float(np.median(passes[q]))
                count[q] += len(views)
        finally:
            for sim in sims.values():
                sim.close()
        bar.update(1)
    bar.close()
    for q in qualities:
        summary["presets"][q] = {"fps": round(count[q] / max(seconds[q], 1e-9), 1),
                                 "views": [image_stats(f) for f in rows[q]]}
    out = Path(out)
    sheet = _contact_sheet(rows, summary, columns)
    with atomic_path(out / "gallery.png") as tmp:
        sheet.save(tmp, format="PNG", optimize=True)
    write_json_atomic(out / "gallery.json", summary)
    return summary


def _contact_sheet(rows: dict[str, list[np.ndarray]], summary: dict, columns) -> "Image.Image":
    """One row per preset with a label strip (preset, frames/s) above it and view captions on top."""
    from PIL import Image, ImageDraw

    h, w = summary["height"], summary["width"]
    pad, label = 4, 18
    n = max(len(columns), 1)
    sheet = Image.new("RGB", (n * (w + pad) + pad, label + len(rows) * (h + label + pad) + pad), (24, 24, 28))
    draw = ImageDraw.Draw(sheet)
    for c, (sid, room, _) in enumerate(columns):
        draw.text((pad + c * (w + pad) + 2, 3), f"{sid} {room}"[: w // 6], fill=(230, 230, 230))
    for r, (q, frames) in enumerate(rows.items()):
        top = label + r * (h + label + pad)
        draw.text((pad + 2, top + 3), f"{q}: {summary['presets'][q]['fps']} frames/s ({w}x{h})", fill=(255, 220, 120))
        for c, frame in enumerate(frames):
            sheet.paste(Image.fromarray(frame), (pad + c * (w + pad), top + label))
    return sheet
