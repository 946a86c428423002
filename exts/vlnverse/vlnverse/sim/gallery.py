"""``vlnverse scenes gallery``: a contact sheet of first-person views of homes at every render preset.

For each home, up to ``rooms`` rooms (largest first) get one view: the navigable cell nearest the
room's centre (the agent's footprint fits there), at camera height, facing the direction with the
deepest view (the median depth of eight candidate headings, so the camera looks into the room,
not at a wall). Every view is rendered at each preset (``fast``, ``default``, ``high``); the sheet
has one row per preset, labelled with the frame rate it achieved over those views (median of
``repeat`` passes per home, the presets taking turns so that machine load hits them alike). Written:
``gallery.png`` (the sheet) and ``gallery.json`` (poses, per preset the frames/s with the frames and
seconds it is of, mean luminance and distinct colours per view), each atomically.

``--room-sheet`` adds ``rooms.png``: per home, the same whole-room view (from a corner of its
living room, else its largest room, at the agent's camera height, wide field of view) drawn with
``objects="meshes"`` at every preset, one row per view (``render_room_sheet``).
"""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..core.precision import timed_rate
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
                   repeat: int = 5, progress: bool = True, objects: str = "primitives") -> dict[str, Any]:
    """Render the gallery of ``scenes`` (USD paths) into folder ``out``; returns the JSON summary.
    ``objects`` = primitives | meshes (``scenes.object_meshes``) for every preset's row."""
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
    summary: dict[str, Any] = {"width": width, "height": height, **({"objects": objects} if objects != "primitives"
                                                                      else {}), "views": [
        {"scene": sid, "room": name, "pose": pose.to_dict()} for sid, name, pose in columns], "presets": {}}
    bar = tqdm(total=len(homes), desc="gallery", unit="home", disable=not progress)
    seconds = {q: 0.0 for q in qualities}
    count = {q: 0 for q in qualities}
    for q in qualities:
        rows[q] = []
    for desc, views in homes:
        sims = {q: make_simulator(desc, body, sensors=[], quality=q, objects=objects) for q in qualities}
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
        kept, fps = timed_rate(count[q], seconds[q], digits=1, seconds_digits=6)
        summary["presets"][q] = {"fps": fps, "frames": count[q], "seconds": kept,
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


#: Height (m) of the plain stand small objects are shown on in the object sheet.
STAND_HEIGHT = 0.72


def showroom(category: str, seed: int, variant: int) -> "SceneDescription":
    """A one-room scene holding one ``category`` object (catalog sizes and palette drawn from
    ``seed``, render-mesh variant pinned by its ``render_variant`` attribute), on a stand if it is a
    small object, with a floor, a ceiling and two walls."""
    from ..scenes.catalog import CATEGORIES, COLORS, MATERIALS, make_model
    from ..scenes.description import Geom, Room, SceneDescription, SceneObject
    from ..scenes.procgen.furnish import _part_geom, _pose_matrix

    def box(centre, half, label, colour, material, iid):
        m = np.eye(4)
        m[:3, 3] = centre
        return Geom("box", m, np.asarray(half, float), label=label, instance_id=iid, color=COLORS[colour],
                    material=material, friction=MATERIALS["wood"])

    desc = SceneDescription(scene_id=f"showroom_{category}_{variant}")
    desc.rooms.append(Room(0, "living_room", [[-3, -3], [3, -3], [3, 3], [-3, 3]], name="showroom"))
    desc.geoms += [box((0, 0, -0.05), (3, 3, 0.05), "floor", "oak", "wood_oak", 1),
                   box((0, 0, 2.75), (3, 3, 0.05), "ceiling", "white", "paint_white", 2),
                   box((0, -1.2, 1.35), (3, 0.06, 1.35), "wall", "cream", "plaster_cream", 3),
                   box((-2.2, 0, 1.35), (0.06, 3, 1.35), "wall", "cream", "plaster_cream", 4)]
    model = make_model(category, np.random.default_rng(seed))
    z = 0.0
    if CATEGORIES[category].placement == "on":
        z = STAND_HEIGHT
        desc.geoms.append(box((0, -0.6, z / 2), (0.45, 0.45, z / 2), "table", "white", "marble_white", 5))
    lo_y = min(float(_part_geom(p, np.eye(4), "white").world_aabb()[0][1]) for p in model.parts)
    pose = _pose_matrix(np.array([0.0, -1.14 - lo_y if z == 0 else -0.6, z]), 0.0)
    first = len(desc.geoms)
    for k, part in enumerate(model.parts):
        desc.geoms.append(_part_geom(part, pose, model.color, model.material, label=category, instance_id=10,
                                     name=f"/World/Objects/{category}/part_{k:02d}"))
    boxes = [g.world_aabb() for g in desc.geoms[first:]]
    attrs = dict(model.attributes, render_variant=int(variant))
    desc.objects.append(SceneObject(10, category, f"/World/Objects/{category}", np.min([b[0] for b in boxes], axis=0),
                                    np.max([b[1] for b in boxes], axis=0), list(range(first, len(desc.geoms))),
                                    attributes=attrs))
    return desc


def object_view(desc, body: str = "r2r_ce") -> tuple[AgentPose, float]:
    """A close-up of the showroom's object from the agent's camera height: pose (30° off its front,
    pitched at its centre) and the horizontal field of view (degrees) that frames it."""
    from ..core.body import as_body

    obj = desc.objects[0]
    centre, size = obj.position, obj.size
    radius = 0.5 * float(np.linalg.norm(size))
    cam_z = as_body(body).camera_height
    dist = max(1.6 * radius + 0.35, 0.8)
    heading = math.radians(60.0)  # from the object towards the camera: front (+y), 30° to the right
    x, y = centre[0] + dist * math.cos(heading), centre[1] + dist * math.sin(heading)
    yaw = math.atan2(centre[1] - y, centre[0] - x)
    pitch = math.atan2(centre[2] - cam_z, dist)
    reach = math.hypot(dist, centre[2] - cam_z)
    hfov = math.degrees(2 * math.atan(1.25 * radius / reach))
    return AgentPose(round(x, 4), round(y, 4), round(yaw, 4), round(pitch, 4)), float(np.clip(round(hfov, 1), 20, 90))


#: Category order of ``--object-sheet`` (its tiles' seeds follow it, so a sheet stays the same picture).
SHEET_ORDER = ("sofa", "armchair", "chair", "office_chair", "dining_table", "coffee_table", "desk", "bed", "wardrobe",
               "kitchen_cabinet", "sideboard", "dresser", "nightstand", "fridge", "stove", "sink", "toilet", "bathtub",
               "tv", "lamp", "floor_lamp", "plant", "potted_plant", "book", "cup", "bottle")


def render_object_sheet(out: str | Path, *, categories: Sequence[str] | None = None, variants: int = 2,
                        width: int = 224, height: int = 224, quality: str = "default", body: str = "r2r_ce",
                        columns: int = 6, thumb_scale: float = 0.5, progress: bool = True) -> dict[str, Any]:
    """The object sheet: per category, close-ups of ``variants`` render-mesh variants (``objects``
    = ``meshes``) at ``width`` × ``height`` from the agent's camera height. Writes ``objects.png``
    (full size), ``objects_thumb.png`` (``thumb_scale``, 256 colours: the README's) and
    ``objects.json`` (per view: pose, field of view, image statistics); returns the JSON summary."""
    from tqdm import tqdm

    from ..scenes.object_meshes import GENERATORS
    from . import make_sensor, make_simulator

    # The sheet's layout (and each tile's seed, c * 7 + v) keeps the order it was first drawn in;
    # categories given a mesh later follow in catalog order.
    cats = list(categories) if categories else sorted(
        GENERATORS, key=lambda c: SHEET_ORDER.index(c) if c in SHEET_ORDER else len(SHEET_ORDER))
    tiles, views = [], []
    for c, cat in enumerate(tqdm(cats, desc="objects", unit="category", disable=not progress)):
        n = GENERATORS[cat][1]
        for v in range(variants):
            desc = showroom(cat, seed=c * 7 + v, variant=v % n)
            pose, hfov = object_view(desc, body)
            spec = make_sensor("rgb", width=width, height=height, hfov_deg=hfov)
            with make_simulator(desc, body, sensors=[], quality=quality, objects="meshes") as sim:
                rgb = sim.render_at(pose, spec)["rgb"]
            tiles.append((f"{cat} {v % n + 1}/{n}", rgb))
            views.append({"category": cat, "variant": v % n, "pose": pose.to_dict(), "hfov_deg": hfov,
                          **image_stats(rgb)})
    sheet = _tile_sheet(tiles, width, height, columns)
    out = Path(out)
    with atomic_path(out / "objects.png") as tmp:
        sheet.save(tmp, format="PNG", optimize=True)
    small = sheet.resize((max(1, int(sheet.width * thumb_scale)), max(1, int(sheet.height * thumb_scale))))
    small = small.quantize(256, dither=0)
    with atomic_path(out / "objects_thumb.png") as tmp:
        small.save(tmp, format="PNG", optimize=True)
    summary = {"width": width, "height": height, "quality": quality, "views": views}
    write_json_atomic(out / "objects.json", summary)
    return summary


#: Whole-room views: horizontal field of view (degrees) and camera pitch (radians, down).
ROOM_HFOV_DEG, ROOM_PITCH = 100.0, -0.2
#: How far (m) the corner view stands in from the room's corner at most (the nearest navigable cell).
CORNER_REACH = 1.5
#: Depth (m) under which a pixel counts as blocked by something next to the camera.
NEAR_M = 1.2


def corner_views(desc, body: str = "r2r_ce", rooms: int = 1, objects: str = "meshes") -> list[tuple[str, AgentPose]]:
    """(room name, pose) of one whole-room view for each of the ``rooms`` first rooms of ``desc``
    (living rooms first, then by area): the navigable cell nearest each corner of the room's
    polygon (within ``CORNER_REACH``), facing the room's centroid, pitched down by
    ``ROOM_PITCH``; of the corners, the one whose ``ROOM_HFOV_DEG`` view (with ``objects`` drawn)
    scores best is kept: median depth × the share of pixels farther than ``NEAR_M`` (a deep view
    not blocked by furniture next to the camera). Deterministic."""
    from ..scenes.maps import compute_scene_maps
    from . import make_sensor, make_simulator

    nav = compute_scene_maps(desc, body).navigable
    free = np.argwhere(nav.free_mask())
    if len(free) == 0:
        return []
    centres = nav.cell_to_world(free)
    order = sorted(desc.rooms, key=lambda r: (r.room_type != "living_room", -float(np.prod(np.ptp(r.polygon, axis=0))),
                                              r.room_id))[:rooms]
    depth = make_sensor("depth", width=64, height=48, hfov_deg=ROOM_HFOV_DEG)
    views = []
    with make_simulator(desc, body, sensors=[], quality="fast", objects=objects) as sim:
        for room in order:
            inside = centres[room.contains(centres)]
            if not len(inside):
                continue
            best, best_pose = -1.0, None
            for corner in room.polygon:
                d = np.linalg.norm(inside - corner, axis=1)
                k = int(np.argmin(d))
                if d[k] > CORNER_REACH:
                    continue
                x, y = (round(float(v), 3) for v in inside[k])
                cx, cy = room.centroid
                pose = AgentPose(x, y, round(math.atan2(cy - y, cx - x), 4), ROOM_PITCH)
                d = sim.render_at(pose, depth)["depth"]
                score = float(np.median(d)) * (1.0 - float(np.mean(d < NEAR_M)))
                if score > best + 1e-6:
                    best, best_pose = score, pose
            if best_pose is not None:
                views.append((room.name or f"room_{room.room_id}", best_pose))
    return views


def render_room_sheet(scenes: Sequence[str | Path], out: str | Path, *, rooms: int = 1, width: int = 320,
                      height: int = 240, qualities: Sequence[str] = RENDER_QUALITIES, body: str = "r2r_ce",
                      progress: bool = True) -> dict[str, Any]:
    """Whole-room views per preset: for each home of ``scenes`` (USD paths), ``corner_views`` of
    its ``rooms`` first rooms, each drawn with ``objects="meshes"`` at every preset of
    ``qualities`` (one row per view, one column per preset). Writes ``rooms.png`` (256-colour
    PNG: the README's) and ``rooms.json`` (per view: scene, room, pose, and per preset the image
    statistics), atomically; returns the JSON summary."""
    from tqdm import tqdm

    from ..scenes.usd_io import load_scene
    from . import make_sensor, make_simulator

    spec = make_sensor("rgb", width=width, height=height, hfov_deg=ROOM_HFOV_DEG)
    tiles, views = [], []
    for path in tqdm(list(scenes), desc="rooms", unit="home", disable=not progress):
        desc = load_scene(path)
        poses = corner_views(desc, body, rooms)
        sims = {q: make_simulator(desc, body, sensors=[], quality=q, objects="meshes") for q in qualities}
        try:
            for name, pose in poses:
                stats = {}
                for q, sim in sims.items():
                    rgb = sim.render_at(pose, spec)["rgb"]
                    tiles.append((f"{desc.scene_id} {name}: {q}", rgb))
                    stats[q] = image_stats(rgb)
                views.append({"scene": desc.scene_id, "room": name, "pose": pose.to_dict(), "presets": stats})
        finally:
            for sim in sims.values():
                sim.close()
    summary = {"width": width, "height": height, "hfov_deg": ROOM_HFOV_DEG, "objects": "meshes",
               "presets": list(qualities), "views": views}
    sheet = _tile_sheet(tiles, width, height, len(qualities)).quantize(256, dither=0)
    out = Path(out)
    with atomic_path(out / "rooms.png") as tmp:
        sheet.save(tmp, format="PNG", optimize=True)
    write_json_atomic(out / "rooms.json", summary)
    return summary


def _tile_sheet(tiles, w: int, h: int, columns: int) -> "Image.Image":
    from PIL import Image, ImageDraw

    pad, label = 4, 16
    cols = max(1, min(columns, len(tiles)))
    rows = (len(tiles) + cols - 1) // cols
    sheet = Image.new("RGB", (cols * (w + pad) + pad, rows * (h + label + pad) + pad), (24, 24, 28))
    draw = ImageDraw.Draw(sheet)
    for i, (caption, img) in enumerate(tiles):
        x, y = pad + (i % cols) * (w + pad), pad + (i // cols) * (h + label + pad)
        draw.text((x + 2, y + 2), caption, fill=(255, 220, 120))
        sheet.paste(Image.fromarray(img), (x, y + label))
    return sheet
