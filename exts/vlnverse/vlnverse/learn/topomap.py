"""The topological map of GAMA's global action space (DUET-style, Chen et al. 2022): visited
nodes, the edges the agent travelled, and the **frontier** (candidate waypoints seen at some
decision step and never reached). Pure numpy: the teacher, the acting policy and the policy's
training unroll rebuild the same map from the same recorded inputs (world pose and candidates,
float32), so a global label recorded by the teacher indexes the same node in training.

Rules (one decision step = ``arrive`` then ``observe``):

- ``arrive(pose)``: the agent's position joins the visited node within ``merge_radius`` (else a
  new node); it is linked to the *source* of the frontier node it reached (the visited node that
  frontier node was seen from), or, when it reached none, to the previous node; frontier nodes
  within ``merge_radius`` of it are visited now and leave the frontier.
- ``observe(pose, candidates, step)``: each valid candidate at a distance > 0 (a monocular
  setup's turns in place are not nodes) (world x, y) not within
  ``merge_radius`` of a visited node enters the frontier with the current node as its source,
  replacing earlier-step frontier nodes within ``merge_radius`` of it; at most ``cap`` nodes
  (the oldest earlier-step ones are dropped first).
- The global action set of a step: the current candidates (their slots), STOP, then the
  **earlier** frontier nodes (seen at earlier steps), oldest first (``earlier``).
- ``path(node)``: the shortest path through visited nodes (Dijkstra over travelled edges, networkx) from
  the current node to the node's source, then the node: the waypoint hops of one global action.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np


def candidate_xy(pose: Any, cands: np.ndarray) -> np.ndarray:
    """(n, 2) world (x, y) of the valid candidates (K, 3) = (angle, distance, valid) at ``pose`` (x, y, yaw)."""
    p = np.asarray(pose, dtype=np.float64)
    c = np.asarray(cands, dtype=np.float64)
    c = c[c[:, 2] > 0.5]
    ang = p[2] + c[:, 0]
    return np.stack([p[0] + c[:, 1] * np.cos(ang), p[1] + c[:, 1] * np.sin(ang)], 1).reshape(-1, 2)


@dataclass
class FrontierNode:
    """A candidate seen and never reached: position, the visited node it was seen from, the
    decision step and candidate slot it came from (``id`` = step · K + slot)."""

    xy: np.ndarray
    source: int
    step: int
    slot: int
    id: int


class TopoMap:
    """Visited nodes, travelled edges and frontier of one episode (see the module docstring)."""

    def __init__(self, merge_radius: float = 0.5, cap: int = 16):
        self.merge_radius, self.cap = float(merge_radius), int(cap)
        self.visited: list[np.ndarray] = []
        self.graph = nx.Graph()  # visited node ids, travelled edges weighted by length (m)
        self.frontier: list[FrontierNode] = []
        self.current: int | None = None
        self.step = -1

    def _near_visited(self, xy: np.ndarray) -> int | None:
        if not self.visited:
            return None
        d = np.linalg.norm(np.asarray(self.visited) - xy, axis=1)
        i = int(np.argmin(d))
        return i if d[i] <= self.merge_radius else None

    def _link(self, a: int, b: int) -> None:
        if a != b:
            self.graph.add_edge(a, b, weight=float(np.linalg.norm(self.visited[a] - self.visited[b])))

    def arrive(self, pose: Any) -> int:
        """The agent is at ``pose`` (x, y, ...) for a decision: returns its visited node."""
        xy = np.asarray(pose, dtype=np.float64)[:2]
        parent = self.current
        if self.frontier:
            d = np.linalg.norm(np.stack([f.xy for f in self.frontier]) - xy, axis=1)
            i = int(np.argmin(d))
            if d[i] <= self.merge_radius:
                parent = self.frontier[i].source
        node = self._near_visited(xy)
        if node is None:
            self.visited.append(xy)
            node = len(self.visited) - 1
        if parent is not None:
            self._link(parent, node)
        self.current = node
        self.frontier = [f for f in self.frontier if np.linalg.norm(f.xy - xy) > self.merge_radius]
        return node

    def observe(self, pose: Any, cands: np.ndarray, step: int) -> None:
        """Add the valid candidates (K, 3) seen at ``pose`` at decision ``step`` to the frontier."""
        self.step = int(step)
        k = len(cands)
        from .vlnbert.perception import is_turn  # a turn in place (distance 0) is no place to go

        c = np.asarray(cands)
        valid = c[:, 2] > 0.5
        moves = ~is_turn(c)[valid]
        slots = np.flatnonzero(valid)[moves]
        for slot, xy in zip(slots, candidate_xy(pose, cands)[moves]):
            if self._near_visited(xy) is not None:
                continue
            self.frontier = [f for f in self.frontier
                             if f.step == step or np.linalg.norm(f.xy - xy) > self.merge_radius]
            self.frontier.append(FrontierNode(xy, int(self.current), int(step), int(slot), int(step) * k + int(slot)))
        while len(self.frontier) > self.cap:
            old = [i for i, f in enumerate(self.frontier) if f.step != step]
            if not old:
                break
            del self.frontier[old[0]]

    def earlier(self) -> list[FrontierNode]:
        """The frontier nodes seen before the current step, oldest first (the global set's tail)."""
        return [f for f in self.frontier if f.step != self.step]

    def route(self, target: int) -> tuple[list[int], float]:
        """Shortest path (visited node ids, length) from the current node to visited node ``target``."""
        if target == self.current:
            return [target], 0.0
        try:
            length, nodes = nx.single_source_dijkstra(self.graph, self.current, target)
        except (nx.NetworkXNoPath, nx.NodeNotFound):
            raise ValueError(f"visited node {target} is not connected to the current node {self.current}") from None
        return nodes, float(length)

    def path(self, node: FrontierNode) -> list[np.ndarray]:
        """The waypoints (world x, y) of the trip to frontier ``node``: the visited nodes after the
        current one on the shortest path to its source, then the node itself."""
        nodes, _ = self.route(node.source)
        return [self.visited[i] for i in nodes[1:]] + [node.xy]

    def travel(self, node: FrontierNode) -> float:
        """Length (m) of that trip: the path to the source plus the last straight hop."""
        _, d = self.route(node.source)
        return d + float(np.linalg.norm(node.xy - self.visited[node.source]))


def hop_action(pose: Any, xy: np.ndarray) -> tuple[float, float]:
    """(angle rad CCW in the agent frame, distance m) from ``pose`` (x, y, yaw) to world ``xy``."""
    dx, dy = float(xy[0]) - float(pose[0]), float(xy[1]) - float(pose[1])
    ang = math.atan2(dy, dx) - float(pose[2])
    return math.atan2(math.sin(ang), math.cos(ang)), math.hypot(dx, dy)
