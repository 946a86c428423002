"""Navigation graphs: viewpoints on navigable space joined by collision-free straight edges.

Used by graph-based agents and the simulator-free (cached) mode. Viewpoints are, in order of
priority: door centres, room centres (snapped into their room's navigable cells), then a seeded
Poisson-disk fill (minimum spacing ``spacing``) of the navigable map. Two viewpoints are joined
when they are at most ``max_edge`` apart and the segment between them stays on navigable cells;
the edge weight is the Euclidean length. Whenever two viewpoints lie in the same connected
navigable region but the graph leaves them apart, the gap is bridged by viewpoints along the
planner's shortest path — so the graph is connected exactly where the navigable space is.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
from scipy.spatial import cKDTree

from ..core.errors import ConfigError
from ..core.io import to_jsonable, write_json_atomic
from .pathing import PathPlanner, resample_polyline

NAVGRAPH_VERSION = 1


@dataclass
class NavGraph:
    """A ``networkx.Graph`` of viewpoints (node attrs ``position`` [x, y], ``kind``, ``room_id``)."""

    graph: nx.Graph
    scene_id: str = ""
    spacing: float = 1.5
    max_edge: float = 3.0

    def __post_init__(self) -> None:
        self._tree: cKDTree | None = None
        self._ids: np.ndarray | None = None

    @property
    def num_nodes(self) -> int:
        """Number of viewpoints."""
        return self.graph.number_of_nodes()

    def positions(self) -> np.ndarray:
        """(N, 2) viewpoint positions in node-id order."""
        ids = sorted(self.graph.nodes)
        return np.array([self.graph.nodes[i]["position"] for i in ids], dtype=float).reshape(-1, 2)

    def nearest_node(self, xy) -> int:
        """Id of the viewpoint closest (Euclidean) to ``xy``."""
        if self._tree is None:
            self._ids = np.array(sorted(self.graph.nodes))
            self._tree = cKDTree(self.positions())
        _, idx = self._tree.query(np.asarray(xy, dtype=float)[:2])
        return int(self._ids[idx])

    def shortest_path(self, a: int, b: int) -> list[int]:
        """Viewpoint ids of the shortest (weighted) route from node ``a`` to node ``b``.

        Raises ``networkx.NetworkXNoPath`` when they are not connected.
        """
        return nx.dijkstra_path(self.graph, a, b, weight="weight")

    def path_length(self, nodes: list[int]) -> float:
        """Summed edge length along a list of viewpoint ids."""
        return float(sum(self.graph.edges[u, v]["weight"] for u, v in zip(nodes[:-1], nodes[1:])))

    def path_positions(self, nodes: list[int]) -> np.ndarray:
        """(K, 2) positions of a list of viewpoint ids."""
        return np.array([self.graph.nodes[n]["position"] for n in nodes], dtype=float).reshape(-1, 2)

    def is_connected(self) -> bool:
        """Is the graph a single connected component?"""
        return self.num_nodes > 0 and nx.is_connected(self.graph)

    # ------------------------------------------------------------------ JSON

    def to_json(self) -> dict[str, Any]:
        """JSON-ready mapping (nodes sorted by id, edges as [u, v, weight]; floats rounded as on disk)."""
        nodes = [{"id": int(n), "position": [float(v) for v in d["position"]], "kind": d["kind"],
                  "room_id": d.get("room_id")} for n, d in sorted(self.graph.nodes(data=True))]
        edges = sorted([int(min(u, v)), int(max(u, v)), float(d["weight"])] for u, v, d in self.graph.edges(data=True))
        return to_jsonable({"version": NAVGRAPH_VERSION, "scene_id": self.scene_id, "spacing": self.spacing,
                            "max_edge": self.max_edge, "nodes": nodes, "edges": edges})

    @classmethod
    def from_json(cls, data: Any, *, file: str | Path | None = None) -> "NavGraph":
        """Rebuild from ``to_json`` output; malformed data raises ``ConfigError`` naming the field."""
        if not isinstance(data, dict) or data.get("version") != NAVGRAPH_VERSION:
            raise ConfigError(f"got {data.get('version') if isinstance(data, dict) else type(data).__name__!r}",
                              file=file, field="version", expected=NAVGRAPH_VERSION)
        graph = nx.Graph()
        try:
            for i, node in enumerate(data["nodes"]):
                pos = [float(v) for v in node["position"]]
                if len(pos) != 2:
                    raise ConfigError(f"got {pos}", file=file, field=f"nodes[{i}].position", expected="[x, y]")
                graph.add_node(int(node["id"]), position=pos, kind=str(node["kind"]), room_id=node.get("room_id"))
            for i, (u, v, w) in enumerate(data["edges"]):
                if u not in graph or v not in graph:
                    raise ConfigError(f"edge ({u}, {v}) names an unknown node", file=file, field=f"edges[{i}]")
                graph.add_edge(int(u), int(v), weight=float(w))
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, ConfigError):
                raise
            raise ConfigError(f"malformed navigation graph: {exc!r}", file=file,
                              expected="{'nodes': [{id, position, kind, room_id}], 'edges': [[u, v, w]]}") from None
        return cls(graph, scene_id=str(data.get("scene_id", "")), spacing=float(data.get("spacing", 1.5)),
                   max_edge=float(data.get("max_edge", 3.0)))

    def save(self, path: str | Path) -> Path:
        """Write the graph as JSON atomically."""
        return write_json_atomic(path, self.to_json(), indent=None)

    @classmethod
    def load(cls, path: str | Path) -> "NavGraph":
        """Read a graph written by ``save``."""
        path = Path(path)
        if not path.is_file():
            raise ConfigError("navigation graph file not found", file=path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ConfigError(f"malformed JSON: {exc.msg}", file=path, line=exc.lineno) from None
        return cls.from_json(data, file=path)


def _poisson_fill(planner: PathPlanner, rng: np.random.Generator, spacing: float, seeds: np.ndarray) -> np.ndarray:
    """Seeded Poisson-disk points on navigable cells, at least ``spacing`` from each other and from ``seeds``.

    Candidates are the navigable cells of a sub-grid every ``spacing / 3``, visited in random
    order; a candidate is kept when no kept point lies within ``spacing``.
    """
    step = max(int(round(spacing / 3.0 / planner.resolution)), 1)
    rows, cols = np.nonzero(planner.free)
    on_sub = (rows % step == step // 2) & (cols % step == step // 2)
    cand = planner.cell_centres(rows[on_sub], cols[on_sub])
    if len(cand) == 0:  # tiny map: use every navigable cell
        cand = planner.cell_centres(rows, cols)
    cand = cand[rng.permutation(len(cand))]
    # Each candidate's neighbours within ``spacing`` (among candidates and seeds), then a greedy pass.
    tree = cKDTree(cand)
    blocked = np.zeros(len(cand), dtype=bool)
    if len(seeds):
        for idx in tree.query_ball_point(seeds, r=spacing):
            blocked[idx] = True
    neighbours = tree.query_ball_point(cand, r=spacing)
    kept = []
    for i in range(len(cand)):
        if blocked[i]:
            continue
        kept.append(i)
        blocked[neighbours[i]] = True
    return cand[kept]


def build_navgraph(planner: PathPlanner, *, rooms=(), doors=(), room_map: np.ndarray | None = None,
                   spacing: float = 1.5, max_edge: float = 3.0, seed: int = 0, scene_id: str | None = None) -> NavGraph:
    """Build the navigation graph of one navigable map (see the module docstring).

    ``rooms``/``doors`` are ``scenes.description.Room``/``Door`` objects; ``room_map`` (room id per
    cell on the planner's grid) labels viewpoints with their room and snaps room centres into
    their room. Deterministic for a given ``seed``.
    """
    if not (0 < spacing <= max_edge):
        raise ValueError(f"need 0 < spacing <= max_edge, got spacing={spacing}, max_edge={max_edge}")
    rng = np.random.default_rng(seed)
    points: list[np.ndarray] = []
    kinds: list[str] = []

    def add(xy: np.ndarray, kind: str, min_gap: float = 0.3) -> None:
        if points and np.min(np.linalg.norm(np.asarray(points) - xy, axis=1)) < min_gap:
            return
        points.append(np.asarray(xy, dtype=float))
        kinds.append(kind)

    for door in doors:
        add(planner.snap_point(door.center), "door")
    for room in rooms:
        centre = np.asarray(room.centroid, dtype=float)
        if room_map is not None and not planner.is_navigable(centre)[0]:
            rr, cc = np.nonzero(room_map == room.room_id)
            if len(rr):
                cells = planner.cell_centres(rr, cc)
                centre = cells[np.argmin(np.linalg.norm(cells - centre, axis=1))]
        add(planner.snap_point(centre), "room")
    seeds = np.asarray(points).reshape(-1, 2)
    for xy in _poisson_fill(planner, rng, spacing, seeds):
        add(xy, "grid", min_gap=0.0)

    pos = np.asarray(points).reshape(-1, 2)
    graph = nx.Graph()
    for i, (p, kind) in enumerate(zip(pos, kinds)):
        graph.add_node(i, position=[float(p[0]), float(p[1])], kind=kind, room_id=None)
    _connect_within(planner, graph, max_edge)
    _bridge_components(planner, graph, max_edge)

    if room_map is not None:
        all_pos = np.array([graph.nodes[n]["position"] for n in sorted(graph.nodes)])
        rc = planner.map.world_to_cell(all_pos)
        ok = planner.map.in_bounds(rc)
        for n, good, (r, c) in zip(sorted(graph.nodes), ok, rc):
            rid = int(room_map[r, c]) if good else -1
            graph.nodes[n]["room_id"] = rid if rid >= 0 else None
    return NavGraph(graph, scene_id=scene_id or planner.scene_id, spacing=float(spacing), max_edge=float(max_edge))


def _connect_within(planner: PathPlanner, graph: nx.Graph, max_edge: float, nodes: list[int] | None = None) -> None:
    """Add an edge between every pair within ``max_edge`` with line of sight (only pairs touching ``nodes``)."""
    ids = np.array(sorted(graph.nodes))
    pos = np.array([graph.nodes[i]["position"] for i in ids]).reshape(-1, 2)
    pairs = cKDTree(pos).query_pairs(max_edge, output_type="ndarray")
    if nodes is not None and len(pairs):
        wanted = np.isin(ids[pairs], nodes).any(axis=1)
        pairs = pairs[wanted]
    if len(pairs) == 0:
        return
    free = planner.segments_free(pos[pairs[:, 0]], pos[pairs[:, 1]])
    for i, j in pairs[free]:
        graph.add_edge(int(ids[i]), int(ids[j]), weight=float(np.linalg.norm(pos[i] - pos[j])))


def _bridge_components(planner: PathPlanner, graph: nx.Graph, max_edge: float) -> None:
    """Join graph components lying in the same navigable region via viewpoints on the shortest path."""
    labels = planner.components()
    while True:
        comps = sorted((sorted(c) for c in nx.connected_components(graph)), key=lambda c: c[0])
        if len(comps) < 2:
            return
        region = {}
        for k, comp in enumerate(comps):
            p = graph.nodes[comp[0]]["position"]
            r, c, _ = planner.snap(np.asarray(p))
            region.setdefault(int(labels[r[0], c[0]]), []).append(k)
        pending = [ks for ks in region.values() if len(ks) > 1]
        if not pending:
            return
        ks = pending[0]
        a_nodes, rest = comps[ks[0]], [n for k in ks[1:] for n in comps[k]]
        a_pos = np.array([graph.nodes[n]["position"] for n in a_nodes])
        b_pos = np.array([graph.nodes[n]["position"] for n in rest])
        dist, idx = cKDTree(b_pos).query(a_pos)
        i = int(np.argmin(dist))
        path = planner.shortest_path(a_pos[i], b_pos[idx[i]])
        # Viewpoints along the path, at most max_edge / 2 apart, joined in sequence.
        dense = resample_polyline(path.waypoints, max_edge / 2.0)
        prev = a_nodes[i]
        new_nodes = []
        for xy in dense[1:-1]:
            n = max(graph.nodes) + 1
            graph.add_node(n, position=[float(xy[0]), float(xy[1])], kind="bridge", room_id=None)
            graph.add_edge(prev, n, weight=float(np.linalg.norm(np.asarray(graph.nodes[prev]["position"]) - xy)))
            new_nodes.append(n)
            prev = n
        end = rest[int(idx[i])]
        graph.add_edge(prev, end, weight=float(np.linalg.norm(np.asarray(graph.nodes[prev]["position"])
                                                              - np.asarray(graph.nodes[end]["position"]))))
        if new_nodes:
            _connect_within(planner, graph, max_edge, nodes=new_nodes)
