"""The per-scene map bundle (occupancy, navigable map, room map, scene graph) and its disk cache.

``compute_scene_maps(desc, body)`` builds everything a task generator, planner or renderer
needs for one scene and one agent body. Results are cached on disk under
``vlnverse.paths.cache_dir() / "maps"``, keyed by a hash of the scene's content (geometry,
labels, rooms, doors), the body's radius and height, the resolution and ``MAPS_VERSION``
(bumped whenever the map rules change), so a changed scene or body never reads a stale map.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..core.body import DEFAULT_BODY, R2R_CE, as_body
from ..core.cache_key import content_key
from ..core.errors import ConfigError
from ..core.io import write_json_atomic
from ..paths import cache_dir
from .description import STRUCTURE_LABELS, SceneDescription, scene_content_hash
from .occupancy import FREE, OccupancyMap, build_navigable_map, build_occupancy_map, scene_name, write_npz
from .room_map import NO_ROOM, build_room_map
from .scene_graph import SceneGraph, build_scene_graph

#: Bump when occupancy/room-map/scene-graph rules change, to invalidate cached maps.
MAPS_VERSION = 7  # bump when map semantics change (cached maps are keyed by it)

#: The default body's step height (m): lower obstacles are stepped over (each body has its own).
DEFAULT_STEP_HEIGHT = R2R_CE.step_height


@dataclass
class SceneMaps:
    """Maps of one scene for one body, all on the same grid.

    ``occupancy``: the raw FREE/OCCUPIED/UNKNOWN map in the body's height band;
    ``navigable``: ``occupancy``'s FREE cells at least the body radius from every obstacle
    footprint (``build_navigable_map``: FREE = the body centre may stand there); ``room_map``: room id of every FREE cell of ``occupancy`` (hence of every
    navigable cell), -1 elsewhere; ``scene_graph``: rooms, objects and their relations.
    """

    occupancy: OccupancyMap
    navigable: OccupancyMap
    room_map: np.ndarray
    scene_graph: SceneGraph

    @property
    def resolution(self) -> float:
        """Cell size in metres."""
        return self.occupancy.resolution

    def save(self, out_dir: str | Path) -> dict[str, Path]:
        """Write ``occupancy.npz``, ``navigable.npz``, ``room_map.npz`` and ``scene_graph.json`` (atomic each)."""
        out = Path(out_dir)
        paths = {"occupancy": self.occupancy.save(out / "occupancy.npz"),
                 "navigable": self.navigable.save(out / "navigable.npz")}
        paths["room_map"] = write_npz(out / "room_map.npz", room_map=self.room_map, origin=self.occupancy.origin,
                                      resolution=np.float64(self.resolution))
        paths["scene_graph"] = self.scene_graph.save(out / "scene_graph.json")
        return paths


def _cache_path(desc: SceneDescription, radius: float, height: float, resolution: float, step_height: float) -> Path:
    key = content_key("maps", MAPS_VERSION, scene_content_hash(desc), float(radius), float(height),
                      float(resolution), float(step_height), length=20)
    return cache_dir() / "maps" / f"{desc.scene_id}-{key}.npz"


def _read_cache(path: Path, source: str) -> SceneMaps | None:
    """The cached bundle at ``path``, or None when absent or unreadable (it is then rebuilt)."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as d:
            res, origin = float(d["resolution"]), d["origin"]
            occ = OccupancyMap(d["occupancy"], res, origin, source=source)
            nav = OccupancyMap(d["navigable"], res, origin.copy(), source=source, radius=float(d["radius"]))
            return SceneMaps(occ, nav, d["room_map"].astype(np.int32), SceneGraph.from_json(str(d["scene_graph"])))
    except Exception:  # a corrupt or outdated cache entry is simply rebuilt
        return None


def _write_cache(path: Path, maps: SceneMaps) -> None:
    write_npz(path, occupancy=maps.occupancy.grid, navigable=maps.navigable.grid, room_map=maps.room_map,
              origin=maps.occupancy.origin, resolution=np.float64(maps.resolution),
              radius=np.float64(maps.navigable.radius), scene_graph=np.str_(maps.scene_graph.to_json()))


def compute_scene_maps(desc: SceneDescription, body, resolution: float = 0.05, *, cache: bool = True) -> SceneMaps:
    """Occupancy (in the body's height band), navigable map (``build_navigable_map``), room map and graph.

    ``body`` is an ``AgentBody`` or a preset name. With ``cache`` the bundle is read from /
    written to the disk cache (module docstring). Raises ``ConfigError`` (resolution),
    ``SceneError`` (no floor / no collision geometry) or ``NoNavigableSpaceError`` (the
    radius leaves no free cell), each naming the scene file.
    """
    body = as_body(body)
    source = scene_name(desc)
    path = None
    if cache:
        try:
            res_key = float(resolution)
        except (TypeError, ValueError):
            raise ConfigError(f"got {resolution!r}", file=source, field="resolution", expected="a cell size > 0 m") from None
        path = _cache_path(desc, float(body.radius), float(body.height), res_key, float(body.step_height))
        cached = _read_cache(path, source)
        if cached is not None:
            return cached
    occupancy = build_occupancy_map(desc, resolution=resolution, agent_height=body.height,
                                    step_height=body.step_height)
    navigable = build_navigable_map(desc, body.radius, occupancy=occupancy, resolution=resolution,
                                    agent_height=body.height, step_height=body.step_height)
    room_map = build_room_map(desc, occupancy)
    # the graph as the cache stores it (floats rounded by ``to_jsonable``): a computed bundle and a
    # cached one are equal, so generated episodes do not depend on whether the cache was warm
    graph = SceneGraph.from_json(build_scene_graph(desc, room_map=room_map, grid=occupancy).to_json())
    maps = SceneMaps(occupancy, navigable, room_map, graph)
    if path is not None:
        try:
            _write_cache(path, maps)
        except OSError:  # a read-only cache must not break map building
            pass
    return maps


def scene_maps_for(path: str | Path, body=DEFAULT_BODY, resolution: float = 0.05, *, cache: bool = True) -> SceneMaps:
    """Load the USD scene at ``path`` (``usd_io.load_scene``) and compute its maps for ``body``."""
    from .usd_io import load_scene

    return compute_scene_maps(load_scene(path), body, resolution, cache=cache)


def scene_summary(desc: SceneDescription, maps: SceneMaps) -> dict[str, Any]:
    """Human- and machine-readable facts about a scene: rooms, objects, areas, doors, relations."""
    cell_area = maps.resolution ** 2
    free = maps.occupancy.grid == FREE
    navigable = maps.navigable.grid == FREE
    room_ids = maps.room_map
    free_counts = np.bincount(room_ids[free & (room_ids >= 0)], minlength=1)
    nav_counts = np.bincount(room_ids[navigable & (room_ids >= 0)], minlength=1)

    def count(arr: np.ndarray, rid: int) -> float:
        return float(arr[rid]) * cell_area if 0 <= rid < len(arr) else 0.0

    rooms = [{"room_id": r.room_id, "room_type": r.room_type, "area_m2": round(r.area, 3),
              "free_area_m2": round(count(free_counts, r.room_id), 3),
              "navigable_area_m2": round(count(nav_counts, r.room_id), 3),
              "objects": len(maps.scene_graph.objects_in_room(r.room_id))}
             for r in sorted(desc.rooms, key=lambda r: r.room_id)]
    if not desc.rooms:
        inferred = sorted(set(np.unique(room_ids)) - {NO_ROOM})
        graph_rooms = {r["room_id"]: r["room_type"] for r in maps.scene_graph.rooms()}
        rooms = [{"room_id": int(i), "room_type": graph_rooms.get(int(i), "room"), "inferred": True, "area_m2": None,
                  "free_area_m2": round(count(free_counts, int(i)), 3),
                  "navigable_area_m2": round(count(nav_counts, int(i)), 3),
                  "objects": len(maps.scene_graph.objects_in_room(int(i)))} for i in inferred]
    categories = Counter(o.category for o in desc.objects if o.category not in STRUCTURE_LABELS)
    h, w = maps.occupancy.shape
    return {
        "scene_id": desc.scene_id,
        "source": desc.source_path,
        "rooms": rooms,
        "room_count": len(rooms),
        "object_count": int(sum(categories.values())),
        "objects_per_category": dict(sorted(categories.items())),
        "door_count": len(desc.doors),
        "free_area_m2": round(float(free.sum()) * cell_area, 3),
        "navigable_area_m2": round(maps.navigable.navigable_area_m2(), 3),
        "agent_radius_m": maps.navigable.radius,
        "resolution_m": maps.resolution,
        "grid_cells": [h, w],
        "graph_edges": maps.scene_graph.edge_counts(),
        # prim path → category guessed from prim names (stages without semantic labels)
        "inferred_labels": dict(desc.metadata.get("inferred_labels", {})),
    }


def write_summary(path: str | Path, desc: SceneDescription, maps: SceneMaps) -> Path:
    """Write ``scene_summary`` as JSON atomically."""
    return write_json_atomic(path, scene_summary(desc, maps))
