"""Line of sight on a navigable grid and the any-angle shortening of grid paths (``PathPlanner``'s
smoothing): supercover segment checks, shortest visible sub-chain, re-routing through obstacle corners."""
from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import dijkstra

from .path_geometry import cell_centres, polyline_length, resample_polyline, shifted


class LineOfSight:
    """Straight-line visibility over the navigable cells ``free`` (bool (H, W)) of a grid whose cell
    (0, 0) has its outer corner at world ``origin`` and whose cells are ``resolution`` m wide."""

    #: with more corner cells than this, corner-to-corner sight is not kept between refinements
    #: (the table is K x K bytes: 4 MB at this bound)
    MAX_KEPT_CORNERS = 2048

    def __init__(self, free: np.ndarray, origin: np.ndarray, resolution: float):
        self.free = free
        self.origin = origin
        self.resolution = resolution
        self.shape = free.shape
        self._padded: np.ndarray | None = None
        self._corners: np.ndarray | None = None
        #: line of sight between corner cells i -> j, kept across ``refine_any_angle`` calls
        #: (int8 (K, K): -1 not yet checked, 0 blocked, 1 free); ``None`` until first needed
        self._corner_sight: np.ndarray | None = None

    def cell_centres(self, rows, cols) -> np.ndarray:
        """World (x, y) centres of cells, shape (N, 2)."""
        return cell_centres(self.origin, self.resolution, rows, cols)

    def _sample_cells(self, a: np.ndarray, b: np.ndarray, step: float):
        """Cells (rows, cols) of points every ≤ ``step`` along each segment, and each point's segment.

        Point k of a segment cut into n pieces is ``a + (k / n) * (b - a)``, floored onto the grid
        as ``OccupancyMap.world_to_cell`` does; x and y are computed apart, in place, from
        per-segment values repeated (the same float operations in the same order as on (N, 2)
        arrays, so the same cells, ~2× faster on the any-angle refinement's large batches:
        ``tests/tasks/test_pathing.py``)."""
        d = b - a
        lengths = np.linalg.norm(d, axis=1)
        counts = np.maximum(np.ceil(lengths / step).astype(np.int64), 1) + 1
        seg = np.repeat(np.arange(len(a)), counts)
        starts = np.cumsum(counts) - counts
        t = (np.arange(int(counts.sum())) - np.repeat(starts, counts)) / np.repeat(counts - 1, counts)
        h, w = self.shape
        cells = []
        for axis, size in ((1, h), (0, w)):  # rows from y, cols from x
            v = np.repeat(a[:, axis], counts) + t * np.repeat(d[:, axis], counts)
            v -= self.origin[axis]
            v /= self.resolution
            v += 1e-9  # same flooring as OccupancyMap.world_to_cell
            idx = np.floor(v, out=v).astype(np.int64)
            cells.append(np.clip(idx, -1, size, out=idx))
        return cells[0], cells[1], seg

    def segments_free(self, a, b) -> np.ndarray:
        """Bool (M,): is each straight segment a[i]→b[i] entirely on navigable cells?

        Samples every ≤ resolution/2 along each segment and, where consecutive samples change both
        row and column, also checks the two cells sharing that corner (supercover), so a segment
        never slips diagonally between two blocked cells. Off-map counts as blocked. A coarse
        pass (samples every 2 cells) first rejects most blocked segments cheaply.
        """
        a = np.atleast_2d(np.asarray(a, dtype=float))[:, :2]
        b = np.atleast_2d(np.asarray(b, dtype=float))[:, :2]
        result = np.zeros(len(a), dtype=bool)
        if len(a) == 0:
            return result
        if self._padded is None:
            self._padded = np.pad(self.free, 1, constant_values=False)
        padded = self._padded
        rows, cols, seg = self._sample_cells(a, b, 2.0 * self.resolution)
        alive = np.bincount(seg[~padded[rows + 1, cols + 1]], minlength=len(a)) == 0
        todo = np.flatnonzero(alive)
        if len(todo) == 0:
            return result
        rows, cols, seg = self._sample_cells(a[todo], b[todo], self.resolution / 2.0)
        bad = ~padded[rows + 1, cols + 1]
        idx = np.flatnonzero((seg[1:] == seg[:-1]) & (rows[1:] != rows[:-1]) & (cols[1:] != cols[:-1]))
        corner_bad = ~(padded[rows[idx] + 1, cols[idx + 1] + 1] & padded[rows[idx + 1] + 1, cols[idx] + 1])
        n_bad = np.bincount(seg[bad], minlength=len(todo)) + np.bincount(seg[idx[corner_bad]], minlength=len(todo))
        result[todo] = n_bad == 0
        return result

    def segment_free(self, a_xy, b_xy) -> bool:
        """Is the straight segment from ``a_xy`` to ``b_xy`` entirely on navigable cells?"""
        return bool(self.segments_free(np.asarray(a_xy)[None], np.asarray(b_xy)[None])[0])

    def simplify(self, points: np.ndarray, max_exact: int = 160) -> np.ndarray:
        """Line-of-sight pruning of a path into the shortest chain of its own points.

        The input is first reduced to its turning points (collinear runs are already straight).
        Up to ``max_exact`` turning points, every pair is checked for line of sight at once and
        the shortest visible chain is found by dynamic programming (optimal over subsequences);
        longer paths are first pruned greedily (farthest visible point from each anchor).
        """
        pts = np.asarray(points, dtype=float).reshape(-1, 2)
        if len(pts) <= 2:
            return pts.copy()
        d = np.diff(pts, axis=0)
        d = d / np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-12)
        turning = np.flatnonzero(np.any(np.abs(d[1:] - d[:-1]) > 1e-9, axis=1)) + 1
        cand = pts[np.concatenate([[0], turning, [len(pts) - 1]])]
        if len(cand) > max_exact:
            cand = self._greedy_prune(cand)
        if len(cand) > max_exact:
            return cand
        return self._optimal_prune(cand)

    def _greedy_prune(self, cand: np.ndarray) -> np.ndarray:
        kept, i, n = [0], 0, len(cand)
        while i < n - 1:
            vis = self.segments_free(np.repeat(cand[i][None], n - i - 1, axis=0), cand[i + 1:])
            blocked = np.flatnonzero(~vis)
            first_blocked = blocked[0] if len(blocked) else n - i - 1
            i = i + max(int(first_blocked), 1)
            kept.append(i)
        return cand[kept]

    def _optimal_prune(self, cand: np.ndarray) -> np.ndarray:
        n = len(cand)
        ii, jj = np.triu_indices(n, 1)
        visible = np.zeros((n, n), dtype=bool)
        visible[ii, jj] = self.segments_free(cand[ii], cand[jj])
        visible[np.arange(n - 1), np.arange(1, n)] = True  # consecutive points are joined by the grid path
        seg = np.linalg.norm(cand[:, None, :] - cand[None, :, :], axis=2)
        best = np.full(n, np.inf)
        best[0] = 0.0
        prev = np.zeros(n, dtype=np.int64)
        for j in range(1, n):
            options = np.where(visible[:j, j], best[:j] + seg[:j, j], np.inf)
            prev[j] = int(np.argmin(options))
            best[j] = options[prev[j]]
        chain = [n - 1]
        while chain[-1] != 0:
            chain.append(int(prev[chain[-1]]))
        return cand[chain[::-1]]

    def corner_cells(self) -> np.ndarray:
        """(K, 2) world centres of navigable cells at convex obstacle corners.

        A cell qualifies when a diagonal neighbour is blocked while the two orthogonal cells
        towards it are navigable: taut (any-angle shortest) paths bend only at such cells.
        """
        if self._corners is None:
            blocked = ~self.free
            mask = np.zeros_like(self.free)
            for dr, dc in ((1, 1), (1, -1), (-1, 1), (-1, -1)):
                mask |= self.free & shifted(blocked, dr, dc) & shifted(self.free, dr, 0) & shifted(self.free, 0, dc)
            rows, cols = np.nonzero(mask)
            self._corners = self.cell_centres(rows, cols)
        return self._corners

    def _pairs_free(self, nodes: np.ndarray, ii: np.ndarray, jj: np.ndarray, picked: np.ndarray,
                    n_chain: int) -> np.ndarray:
        """``segments_free(nodes[ii], nodes[jj])``, where ``nodes`` is ``n_chain`` chain points
        followed by the corner cells ``picked`` (indices into ``corner_cells()``): a segment
        between two corner cells is checked once per direction and kept (a segment's result
        does not depend on the others checked with it), the rest are checked as given."""
        both = (ii >= n_chain) & (jj >= n_chain)
        if not both.any() or len(self.corner_cells()) > self.MAX_KEPT_CORNERS:
            return self.segments_free(nodes[ii], nodes[jj])
        if self._corner_sight is None:
            k = len(self.corner_cells())
            self._corner_sight = np.full((k, k), -1, dtype=np.int8)
        known = self._corner_sight
        ci, cj = picked[ii[both] - n_chain], picked[jj[both] - n_chain]
        got = known[ci, cj]
        todo = np.flatnonzero(got < 0)
        if len(todo):
            fresh = self.segments_free(nodes[ii[both][todo]], nodes[jj[both][todo]])
            got[todo] = fresh
            known[ci[todo], cj[todo]] = fresh
        visible = np.empty(len(ii), dtype=bool)
        visible[both] = got > 0
        other = ~both
        visible[other] = self.segments_free(nodes[ii[other]], nodes[jj[other]])
        return visible

    def refine_any_angle(self, chain: np.ndarray, max_corners: int = 250) -> np.ndarray:
        """Shorten a collision-free polyline by re-routing it through obstacle corner cells.

        Builds a visibility graph over the chain's points and the corner cells inside the ellipse
        ``|a−c| + |c−b| ≤ L`` (``L`` = chain length: no vertex outside can shorten it; at most
        ``max_corners`` of them, the closest to the chain), keeps only the pairs that could still
        beat ``L``, checks their line of sight at once and returns the shortest route (Dijkstra).
        The result is never longer than ``chain``.
        """
        chain = np.asarray(chain, dtype=float).reshape(-1, 2)
        if len(chain) <= 2:
            return chain.copy()
        a, b = chain[0], chain[-1]
        limit = polyline_length(chain) + 1e-9
        corners = self.corner_cells()
        picked = np.arange(len(corners))
        if len(corners):
            picked = picked[np.linalg.norm(corners - a, axis=1) + np.linalg.norm(corners - b, axis=1) < limit]
        if len(picked) > max_corners:
            from scipy.spatial import cKDTree

            gap, _ = cKDTree(resample_polyline(chain, self.resolution)).query(corners[picked])
            picked = picked[np.argsort(gap, kind="stable")[:max_corners]]
        corners = corners[picked]
        nodes = np.concatenate([chain, corners])
        n = len(nodes)
        to_a = np.linalg.norm(nodes - a, axis=1)
        to_b = np.linalg.norm(nodes - b, axis=1)
        ii, jj = np.triu_indices(n, 1)
        lengths = np.linalg.norm(nodes[ii] - nodes[jj], axis=1)
        useful = np.minimum(to_a[ii] + to_b[jj], to_a[jj] + to_b[ii]) + lengths < limit
        k = np.arange(len(chain) - 1)
        ii, jj, lengths = ii[useful], jj[useful], lengths[useful]
        visible = self._pairs_free(nodes, ii, jj, picked, len(chain))
        # The chain's own segments are known to be free.
        ii = np.concatenate([ii[visible], k])
        jj = np.concatenate([jj[visible], k + 1])
        wts = np.concatenate([lengths[visible], np.linalg.norm(chain[k + 1] - chain[k], axis=1)])
        graph = csr_matrix((np.maximum(wts, 1e-12), (ii, jj)), shape=(n, n))
        dist, pred = dijkstra(graph, directed=False, indices=0, return_predecessors=True)
        goal = len(chain) - 1
        if not np.isfinite(dist[goal]) or dist[goal] >= limit:
            return chain.copy()
        route = [goal]
        while route[-1] != 0:
            route.append(int(pred[route[-1]]))
        return nodes[route[::-1]]
