"""Top-down map pictures of a scene (matplotlib, Agg; no display needed).

Colours: UNKNOWN (outside the home) dark, OCCUPIED grey, FREE white tinted by room (legend
lists room types), FREE cells the body cannot reach because they lie within its radius of an
obstacle in light grey, doors as brown bars across their opening, furniture labelled at
its position, and a scale bar in metres. Overlays are general so that evaluation can draw
episodes on top::

    paths=[{"xy": (N, 2) array, "color": "g", "label": "reference", "linewidth": 2, "linestyle": "-"}]
    markers=[{"xy": (x, y) or (N, 2), "marker": "x", "color": "r", "label": "collision", "size": 60}]
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np
from matplotlib import patheffects
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ..core.io import atomic_path
from .description import STRUCTURE_LABELS, SceneDescription
from .maps import SceneMaps
from .occupancy import FREE, OCCUPIED, UNKNOWN

UNKNOWN_RGB = (0.16, 0.17, 0.20)
OCCUPIED_RGB = (0.55, 0.55, 0.57)
FREE_RGB = (1.0, 1.0, 1.0)
UNREACHABLE_RGB = (0.86, 0.86, 0.86)
DOOR_COLOR = "#8B4513"

#: Objects whose footprint's longer side is at least this (m) and that rest on the floor get a label.
FURNITURE_MIN_SIZE = 0.3
#: A label is skipped when an already placed label is closer than this (m).
LABEL_SPACING = 0.45


def _room_colours(room_ids: Sequence[int]) -> dict[int, np.ndarray]:
    """A distinct colour per room id (tab20, in room-id order)."""
    from matplotlib import colormaps

    cmap = colormaps["tab20"]
    # strong hues first, then their light twins; tab20's greys (14, 15) would read as obstacles
    order = [i for i in range(0, 20, 2) if i != 14] + [i for i in range(1, 20, 2) if i != 15]
    return {rid: np.array(cmap(order[i % len(order)])[:3]) for i, rid in enumerate(sorted(room_ids))}


def _tinted(rgb: np.ndarray, tint: float = 0.45) -> np.ndarray:
    """``rgb`` blended with white: the colour of a room's free cells."""
    return (1 - tint) * np.asarray(FREE_RGB) + tint * np.asarray(rgb)


def _base_image(maps: SceneMaps, colours: dict[int, np.ndarray], tint: float = 0.45) -> np.ndarray:
    """RGB float image (H, W, 3) of the occupancy, navigable and room maps (row 0 = lowest y)."""
    occ, nav, rooms = maps.occupancy.grid, maps.navigable.grid, maps.room_map
    img = np.empty(occ.shape + (3,), dtype=float)
    img[occ == UNKNOWN] = UNKNOWN_RGB
    img[occ == OCCUPIED] = OCCUPIED_RGB
    free = occ == FREE
    img[free] = FREE_RGB
    if colours:
        lut = np.zeros((max(max(colours), int(rooms.max())) + 1, 3))
        has_colour = np.zeros(len(lut), dtype=bool)
        for rid, rgb in colours.items():
            lut[rid], has_colour[rid] = _tinted(rgb, tint), True
        labelled = free & (rooms >= 0)
        labelled[labelled] = has_colour[rooms[labelled]]
        img[labelled] = lut[rooms[labelled]]
    unreachable = free & (nav != FREE)
    img[unreachable] = 0.5 * img[unreachable] + 0.5 * np.array(UNREACHABLE_RGB)
    return img


def _furniture_labels(desc: SceneDescription) -> list[tuple[float, float, str]]:
    """(x, y, text) of furniture labels, largest objects first, skipping crowded positions."""
    candidates = []
    for obj in desc.objects:
        if obj.category in STRUCTURE_LABELS:
            continue
        size = obj.size
        if max(size[0], size[1]) < FURNITURE_MIN_SIZE or obj.bounds_min[2] > desc.floor_z + 0.05:
            continue
        candidates.append((size[0] * size[1], obj.position[0], obj.position[1], obj.category))
    placed: list[tuple[float, float, str]] = []
    for _, x, y, text in sorted(candidates, key=lambda c: (-c[0], c[3], c[1], c[2])):
        if all((x - px) ** 2 + (y - py) ** 2 >= LABEL_SPACING ** 2 for px, py, _ in placed):
            placed.append((float(x), float(y), text.replace("_", " ")))
    return placed


def _scale_length(width_m: float) -> float:
    """A round scale-bar length of at least an eighth of the map width."""
    for length in (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0):
        if length >= width_m / 8:
            return length
    return 100.0


def _draw(fig: Figure, desc: SceneDescription, maps: SceneMaps, paths: Sequence[dict] | None,
          markers: Sequence[dict] | None, title: str | None) -> None:
    from mpl_toolkits.axes_grid1.anchored_artists import AnchoredSizeBar

    ax = fig.add_subplot(1, 1, 1)
    extent = maps.occupancy.extent()
    room_types = {r.room_id: r.room_type for r in desc.rooms}
    if not room_types:
        room_types = {int(i): "room" for i in np.unique(maps.room_map) if i >= 0}
    colours = _room_colours(list(room_types))
    ax.imshow(_base_image(maps, colours), origin="lower", extent=extent, interpolation="nearest")

    for door in desc.doors:
        cx, cy = door.center
        half = door.width / 2
        xs, ys = ([cx - half, cx + half], [cy, cy]) if door.axis == "x" else ([cx, cx], [cy - half, cy + half])
        ax.plot(xs, ys, color=DOOR_COLOR, linewidth=3.0, solid_capstyle="butt", zorder=3)
    for x, y, text in _furniture_labels(desc):
        ax.plot([x], [y], marker=".", color="0.25", markersize=3, zorder=4)
        ax.annotate(text, (x, y), xytext=(2, 2), textcoords="offset points", fontsize=6, color="0.1", zorder=5,
                    path_effects=[patheffects.withStroke(linewidth=1.5, foreground="white")])

    handles = [Patch(facecolor=_tinted(colours[rid]), edgecolor="0.4", label=f"{room_types[rid].replace('_', ' ')} ({rid})") for rid in sorted(room_types)]
    handles += [Patch(facecolor=OCCUPIED_RGB, label="obstacle"), Patch(facecolor=UNKNOWN_RGB, label="outside"),
                Patch(facecolor=UNREACHABLE_RGB, edgecolor="0.6", label="within agent radius")]
    if desc.doors:
        handles.append(Patch(facecolor=DOOR_COLOR, label="door"))

    for spec in paths or []:
        xy = np.atleast_2d(np.asarray(spec["xy"], dtype=float))
        line, = ax.plot(xy[:, 0], xy[:, 1], color=spec.get("color", "g"), linewidth=spec.get("linewidth", 2.0),
                        linestyle=spec.get("linestyle", "-"), label=spec.get("label"), zorder=6)
        if spec.get("label"):
            handles.append(line)
    for spec in markers or []:
        xy = np.atleast_2d(np.asarray(spec["xy"], dtype=float))
        pts = ax.scatter(xy[:, 0], xy[:, 1], marker=spec.get("marker", "o"), c=spec.get("color", "r"),
                         s=spec.get("size", 40), label=spec.get("label"), zorder=7, edgecolors=spec.get("edgecolor"))
        if spec.get("label"):
            handles.append(pts)

    width = extent[1] - extent[0]
    length = _scale_length(width)
    # the scale bar sits outside the map, under the legend, so it never hides anything
    ax.add_artist(AnchoredSizeBar(ax.transData, length, f"{length:g} m", loc="lower left", pad=0.3, borderpad=0.0,
                                  sep=3, frameon=False, size_vertical=width / 200, fontproperties={"size": 7},
                                  bbox_to_anchor=(1.02, 0.0), bbox_transform=ax.transAxes))
    ax.set_xlim(extent[0], extent[1])
    ax.set_ylim(extent[2], extent[3])
    ax.set_aspect("equal")
    ax.set_xlabel("x (m)", fontsize=8)
    ax.set_ylabel("y (m)", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.set_title(title if title is not None else desc.scene_id, fontsize=10)
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)


def _figure(desc: SceneDescription, maps: SceneMaps, paths, markers, title, dpi: int) -> Figure:
    xmin, xmax, ymin, ymax = maps.occupancy.extent()
    aspect = (ymax - ymin) / max(xmax - xmin, 1e-6)
    width_in = 9.0
    fig = Figure(figsize=(width_in, float(np.clip(width_in * 0.72 * aspect, 3.0, 14.0)) + 0.6), dpi=dpi)
    FigureCanvasAgg(fig)
    _draw(fig, desc, maps, paths, markers, title)
    fig.tight_layout()
    return fig


def render_map_array(desc: SceneDescription, maps: SceneMaps, *, paths: Sequence[dict[str, Any]] | None = None,
                     markers: Sequence[dict[str, Any]] | None = None, title: str | None = None,
                     dpi: int = 100) -> np.ndarray:
    """The map picture as an RGB ``uint8`` array (H, W, 3), for embedding in reports or videos."""
    fig = _figure(desc, maps, paths, markers, title, dpi)
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba())[:, :, :3].copy()


def render_map_layers(desc: SceneDescription, maps: SceneMaps, *, paths: Sequence[dict[str, Any]] | None = None,
                      markers: Sequence[dict[str, Any]] | None = None, title: str | None = None,
                      dpi: int = 100) -> tuple[np.ndarray, Any]:
    """:func:`render_map_array` plus ``to_pixels(xy) -> (N, 2)`` (column, row) of world points in
    that picture, so a caller can draw changing overlays on a picture rendered once."""
    fig = _figure(desc, maps, paths, markers, title, dpi)
    fig.canvas.draw()
    image = np.asarray(fig.canvas.buffer_rgba())[:, :, :3].copy()
    transform = fig.axes[0].transData.frozen()
    height = image.shape[0]

    def to_pixels(xy: Any) -> np.ndarray:
        d = transform.transform(np.atleast_2d(np.asarray(xy, dtype=float))[:, :2])
        return np.c_[d[:, 0], height - d[:, 1]]

    return image, to_pixels


def render_map_png(desc: SceneDescription, maps: SceneMaps, out_path: str | Path, *,
                   paths: Sequence[dict[str, Any]] | None = None, markers: Sequence[dict[str, Any]] | None = None,
                   title: str | None = None, dpi: int = 150) -> Path:
    """Write the map picture to ``out_path`` (PNG, atomically); returns the path."""
    out_path = Path(out_path)
    fig = _figure(desc, maps, paths, markers, title, dpi)
    with atomic_path(out_path, suffix=".png") as tmp:
        fig.savefig(tmp, format="png", dpi=dpi, bbox_inches="tight")
    return out_path
