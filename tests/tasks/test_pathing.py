"""A*, exact distance fields, line of sight and start/goal sampling on hand-built navigable maps."""
from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest

from vlnverse.core.errors import NoNavigableSpaceError
from vlnverse.scenes.occupancy import FREE, OCCUPIED, UNKNOWN, OccupancyMap
from vlnverse.tasks.path_geometry import shifted
from vlnverse.tasks.pathing import PathPlanner, path_heading, polyline_length, resample_polyline

RES = 0.1


def make_map(grid: np.ndarray, res: float = RES, origin=(0.0, 0.0)) -> OccupancyMap:
    return OccupancyMap(np.asarray(grid, dtype=np.uint8), res, np.asarray(origin, dtype=float))


def wall_with_door() -> OccupancyMap:
    """40×60 cells (4 m × 6 m): a vertical wall at column 30 with a 6-cell door at rows 30..35."""
    g = np.zeros((40, 60), np.uint8)
    g[:, 30] = OCCUPIED
    g[30:36, 30] = FREE
    return make_map(g)


def cluttered(seed: int, size: int = 70) -> OccupancyMap:
    rng = np.random.default_rng(seed)
    g = np.zeros((size, size), np.uint8)
    for _ in range(8):
        r, c = rng.integers(0, size - 5, 2)
        g[r:r + rng.integers(3, 12), c:c + rng.integers(3, 12)] = OCCUPIED
    return make_map(g, res=0.05).dilate(0.1)


def test_path_goes_through_the_door_and_never_touches_an_occupied_cell():
    planner = PathPlanner(wall_with_door())
    start, goal = np.array([0.55, 0.55]), np.array([5.55, 0.55])  # both below the door, opposite sides
    path = planner.shortest_path(start, goal)
    assert np.all(planner.free[path.cells[:, 0], path.cells[:, 1]])
    crossing = path.cells[path.cells[:, 1] == 30]
    assert len(crossing) >= 1 and np.all((crossing[:, 0] >= 30) & (crossing[:, 0] <= 35))
    assert np.all(planner.is_navigable(path.dense))
    assert np.all(planner.segments_free(path.waypoints[:-1], path.waypoints[1:]))
    # The door is 2.5 m above the straight line: the path must climb to y ≥ 3.0 m.
    assert path.waypoints[:, 1].max() >= 3.0
    np.testing.assert_allclose(path.waypoints[0], start)
    np.testing.assert_allclose(path.waypoints[-1], goal)


def test_hand_computed_costs_and_no_corner_cutting():
    # Open 2×2: the diagonal costs √2·res.
    open_map = PathPlanner(make_map(np.zeros((2, 2))))
    assert open_map.astar_cells((0, 0), (1, 1))[1] == pytest.approx(math.sqrt(2) * RES, abs=1e-12)
    # Block (0, 1): the diagonal would cut its corner, so the path takes two straight moves.
    g = np.zeros((2, 2), np.uint8)
    g[0, 1] = OCCUPIED
    planner = PathPlanner(make_map(g))
    cells, cost = planner.astar_cells((0, 0), (1, 1))
    assert cost == pytest.approx(2 * RES, abs=1e-12)
    assert cells.tolist() == [[0, 0], [1, 0], [1, 1]]
    field = planner.distance_field(planner.cell_centres(1, 1))
    assert field.grid[0, 0] == pytest.approx(2 * RES, abs=1e-12)


def test_diagonal_moves_never_cut_corners_on_cluttered_maps():
    for seed in range(3):
        planner = PathPlanner(cluttered(seed))
        rng = np.random.default_rng(seed)
        for _ in range(5):
            a, b = planner.sample_navigable_points(rng, 2)
            if not np.isfinite(planner.geodesic_distance(a, b)):
                continue
            cells = planner.shortest_path(a, b).cells
            step = np.diff(cells, axis=0)
            assert np.all(np.abs(step).max(axis=1) == 1)
            diag = np.flatnonzero((step[:, 0] != 0) & (step[:, 1] != 0))
            assert np.all(planner.free[cells[diag, 0] + step[diag, 0], cells[diag, 1]])
            assert np.all(planner.free[cells[diag, 0], cells[diag, 1] + step[diag, 1]])


def test_astar_cost_equals_distance_field_at_start():
    planner = PathPlanner(cluttered(7, size=90))
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(25):
        a, b = planner.sample_navigable_points(rng, 2)
        field = planner.distance_field(b)
        expected = field.distance(a[None])[0]
        if not np.isfinite(expected):
            continue
        path = planner.shortest_path(a, b)
        assert path.grid_cost == pytest.approx(expected, abs=1e-9)
        assert path.length <= path.grid_cost + 1e-9
        checked += 1
    assert checked >= 15


def _visibility_graph_length(planner: PathPlanner, a, b) -> float:
    """Independent any-angle shortest path: Dijkstra over all corner cells with line of sight."""
    occ = ~planner.free
    corner = np.zeros_like(planner.free)
    for dr, dc in ((1, 1), (1, -1), (-1, 1), (-1, -1)):
        corner |= planner.free & shifted(occ, dr, dc) & shifted(planner.free, dr, 0) & shifted(planner.free, 0, dc)
    rc = np.argwhere(corner)
    pts = np.vstack([a, b, planner.cell_centres(rc[:, 0], rc[:, 1])])
    i, j = np.triu_indices(len(pts), 1)
    ok = planner.segments_free(pts[i], pts[j])
    graph = nx.Graph()
    graph.add_weighted_edges_from((int(u), int(v), float(np.linalg.norm(pts[u] - pts[v]))) for u, v in zip(i[ok], j[ok]))
    return nx.dijkstra_path_length(graph, 0, 1)


def test_reference_length_within_2_percent_of_geodesic_and_segments_free():
    checked = 0
    for seed in (3, 4):
        planner = PathPlanner(cluttered(seed, size=60))
        rng = np.random.default_rng(seed)
        for _ in range(6):
            a, b = planner.sample_navigable_points(rng, 2)
            if not np.isfinite(planner.geodesic_distance(a, b)) or np.allclose(a, b):
                continue
            path = planner.shortest_path(a, b)
            true_length = _visibility_graph_length(planner, a, b)
            assert abs(path.length / true_length - 1.0) <= 0.02
            assert np.all(planner.segments_free(path.waypoints[:-1], path.waypoints[1:]))
            assert np.all(planner.is_navigable(path.dense))
            gaps = np.linalg.norm(np.diff(path.dense, axis=0), axis=1)
            assert gaps.max() <= 0.1 + 1e-9
            assert polyline_length(path.dense) == pytest.approx(path.length, rel=1e-9)
            checked += 1
    assert checked >= 8


def test_segments_free_blocks_diagonal_slip_between_two_blocked_cells():
    g = np.zeros((4, 4), np.uint8)
    g[1, 2] = OCCUPIED
    g[2, 1] = OCCUPIED
    planner = PathPlanner(make_map(g))
    # From cell (1,1) to cell (2,2) exactly through the shared corner of the two blocked cells.
    assert not planner.segment_free(planner.cell_centres(1, 1), planner.cell_centres(2, 2))
    assert planner.segment_free(planner.cell_centres(0, 0), planner.cell_centres(0, 3))
    assert not planner.segment_free([0.05, 0.05], [0.05, -0.5])  # off the map is blocked


def test_unreachable_goal_is_inf_and_shortest_path_raises():
    g = np.zeros((20, 20), np.uint8)
    g[:, 10] = OCCUPIED
    planner = PathPlanner(make_map(g))
    left, right = np.array([0.25, 1.0]), np.array([1.75, 1.0])
    assert planner.geodesic_distance(left, right) == math.inf
    assert np.isinf(planner.distance_field(right).distance(left[None])).all()
    with pytest.raises(NoNavigableSpaceError):
        planner.shortest_path(left, right)


def test_off_map_and_blocked_points_snap_with_offset():
    g = np.zeros((10, 10), np.uint8)
    g[:, 5:] = UNKNOWN  # only columns 0..4 navigable (x < 0.5 m)
    planner = PathPlanner(make_map(g))
    goal = planner.cell_centres(0, 0)  # (0.05, 0.05)
    field = planner.distance_field(goal)
    # A point in the blocked half at x = 0.85 snaps to column 4 (x = 0.45): offset 0.4 m.
    # Cell (0, 4) is 4 orthogonal steps from the goal: 0.4 m.
    d = field.distance([[0.85, 0.05], [0.05, 0.05], [-1.0, 0.05]])
    np.testing.assert_allclose(d, [0.8, 0.0, 1.05], atol=1e-9)


def test_sample_start_goal_respects_distance_range_and_room_change():
    planner = PathPlanner(wall_with_door())
    room_map = np.where(planner.free, np.where(np.arange(60)[None, :] < 30, 0, 1), -1).astype(np.int32)
    rng = np.random.default_rng(5)
    for _ in range(10):
        pair = planner.sample_start_goal(rng, 2.0, 4.0, require_room_change=True, room_map=room_map)
        assert 2.0 <= pair.geodesic_distance <= 4.0
        assert pair.geodesic_distance == pytest.approx(planner.geodesic_distance(pair.start_xy, pair.goal_xy))
        (sr, sc), (gr, gc) = planner.map.world_to_cell(np.stack([pair.start_xy, pair.goal_xy]))
        assert room_map[sr, sc] != room_map[gr, gc]
    with pytest.raises(NoNavigableSpaceError, match="scene 'scene'.*\\[50.0, 60.0\\]"):
        planner.sample_start_goal(rng, 50.0, 60.0, max_tries=5)


def test_sampling_is_a_function_of_its_seed_only():
    """Same seed, same pair (whatever the global NumPy state); different seeds, different pairs;
    and the sampler draws from the generator it is given."""
    planner = PathPlanner(cluttered(2))

    def pair(rng):
        p = planner.sample_start_goal(rng, 1.0, 3.0, require_room_change=False)
        return tuple(np.round(np.concatenate([p.start_xy, p.goal_xy]), 6))

    np.random.seed(0)
    a = pair(np.random.default_rng(11))
    np.random.seed(1)
    assert pair(np.random.default_rng(11)) == a
    assert len({pair(np.random.default_rng(seed)) for seed in range(8)}) >= 6
    rng = np.random.default_rng(11)
    pair(rng)
    assert rng.bit_generator.state != np.random.default_rng(11).bit_generator.state


def test_heading_and_resampling_helpers():
    assert path_heading(np.array([[0.0, 0.0], [0.0, 0.0], [0.0, 2.0]])) == pytest.approx(math.pi / 2)
    dense = resample_polyline(np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0]]), 0.25)
    assert len(dense) == 9 and polyline_length(dense) == pytest.approx(2.0)


def test_empty_map_raises():
    with pytest.raises(NoNavigableSpaceError):
        PathPlanner(make_map(np.full((5, 5), OCCUPIED)))


def test_sampling_finds_pairs_in_a_one_cell_wide_corridor():
    g = np.full((5, 120), OCCUPIED, np.uint8)
    g[2, :] = FREE  # a 12 m long, 1-cell corridor: 120 cells
    planner = PathPlanner(make_map(g))
    pair = planner.sample_start_goal(np.random.default_rng(0), 8.0, 12.0, require_room_change=False)
    assert 8.0 <= pair.geodesic_distance <= 12.0
    assert abs(pair.start_xy[0] - pair.goal_xy[0]) == pytest.approx(pair.geodesic_distance)


def _sample_cells_reference(self, a, b, step):
    """``LineOfSight._sample_cells`` as it was before its per-axis rewrite (on (N, 2) arrays)."""
    lengths = np.linalg.norm(b - a, axis=1)
    counts = np.maximum(np.ceil(lengths / step).astype(np.int64), 1) + 1
    seg = np.repeat(np.arange(len(a)), counts)
    starts = np.cumsum(counts) - counts
    t = (np.arange(counts.sum()) - starts[seg]) / (counts - 1)[seg]
    pts = a[seg] + t[:, None] * (b - a)[seg]
    rel = (pts - self.origin) / self.resolution + 1e-9
    h, w = self.shape
    rows = np.clip(np.floor(rel[:, 1]).astype(np.int64), -1, h)
    cols = np.clip(np.floor(rel[:, 0]).astype(np.int64), -1, w)
    return rows, cols, seg


@pytest.mark.parametrize("res, origin", [(RES, (0.0, 0.0)), (0.05, (-3.7, 1.3))])
def test_line_of_sight_sampling_and_plans_equal_the_reference(res, origin, monkeypatch):
    """The per-axis sampler gives the reference's cells bit for bit (segments on and off the map,
    zero-length, grid-aligned), hence the same visibility and the same planned paths (what the
    oracle teacher follows: its labels cannot change)."""
    from vlnverse.tasks.line_of_sight import LineOfSight

    grid = cluttered(3).grid
    planner = PathPlanner(make_map(grid, res, origin))
    sight = planner.sight
    rng = np.random.default_rng(0)
    lo = np.asarray(origin) - 0.3
    hi = np.asarray(origin) + np.array(grid.shape[::-1]) * res + 0.3
    a = rng.uniform(lo, hi, (3000, 2))
    b = rng.uniform(lo, hi, (3000, 2))
    b[:50] = a[:50]  # zero length
    b[50:100, 0] = a[50:100, 0]  # axis-aligned
    a[100:150] = np.round(a[100:150] / res) * res + np.asarray(origin) % res  # on cell corners
    for step in (2 * res, res / 2, 0.013):
        for got, want in zip(sight._sample_cells(a, b, step), _sample_cells_reference(sight, a, b, step)):
            assert got.dtype == want.dtype and np.array_equal(got, want)
    cells = np.argwhere(planner.free)
    ends = sight.cell_centres(cells[:, 0], cells[:, 1])[rng.integers(0, len(cells), 24)]
    new = [sight.segments_free(a, b)]
    for s, g in zip(ends[:12], ends[12:]):
        try:
            new.append(planner.shortest_path(s, g).dense)
        except NoNavigableSpaceError:
            new.append(None)
    monkeypatch.setattr(LineOfSight, "_sample_cells", _sample_cells_reference)
    old = PathPlanner(make_map(grid, res, origin))
    ref = [old.sight.segments_free(a, b)]
    for s, g in zip(ends[:12], ends[12:]):
        try:
            ref.append(old.shortest_path(s, g).dense)
        except NoNavigableSpaceError:
            ref.append(None)
    assert 0 < new[0].sum() < len(a)
    assert sum(x is not None for x in new[1:]) >= 6
    for x, y in zip(new, ref):
        assert (x is None and y is None) or (x.dtype == y.dtype and x.tobytes() == y.tobytes())


@pytest.mark.parametrize("seed", [3, 4])
def test_refine_with_kept_corner_sight_equals_a_fresh_refinement(seed):
    """Corner-to-corner line of sight kept between refinements (one planner, many plans, as an
    oracle replans through one scene) gives the same waypoints, bit for bit, as a fresh
    ``LineOfSight`` for every plan, and the kept table agrees with ``segments_free``."""
    from vlnverse.tasks.line_of_sight import LineOfSight

    grid = cluttered(seed).grid
    planner = PathPlanner(make_map(grid, 0.05, (0.4, -2.0)))
    cells = np.argwhere(planner.free)
    rng = np.random.default_rng(seed)
    ends = planner.cell_centres(cells[:, 0], cells[:, 1])[rng.integers(0, len(cells), (40, 2))]
    refined = 0
    for s, g in ends:
        try:
            cells_path = planner.shortest_path(s, g).cells
        except NoNavigableSpaceError:
            continue
        chain = planner.simplify(planner.cell_centres(cells_path[:, 0], cells_path[:, 1]))
        for max_corners in (250, 7):  # 7: the nearest corners only, picked in another order
            got = planner.sight.refine_any_angle(chain, max_corners)
            want = LineOfSight(planner.free, planner.origin, planner.resolution).refine_any_angle(chain, max_corners)
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
            refined += len(got) < len(chain) or not np.array_equal(got, chain)
    kept = planner.sight._corner_sight
    assert kept is not None and refined > 5
    ci, cj = np.nonzero(kept >= 0)
    corners = planner.sight.corner_cells()
    assert len(ci) > 50 and 0 < kept[ci, cj].sum() < len(ci)
    assert np.array_equal(kept[ci, cj] > 0, planner.sight.segments_free(corners[ci], corners[cj]))


def test_refine_keeps_no_corner_table_past_its_bound(monkeypatch):
    """With more corner cells than ``MAX_KEPT_CORNERS`` nothing is kept (memory bound) and the
    waypoints are those of a planner that keeps its table."""
    from vlnverse.tasks.line_of_sight import LineOfSight

    grid = cluttered(4).grid
    keeping, bounded = PathPlanner(make_map(grid, 0.05)), PathPlanner(make_map(grid, 0.05))
    monkeypatch.setattr(bounded.sight, "MAX_KEPT_CORNERS", 0)
    cells = np.argwhere(keeping.free)
    ends = keeping.cell_centres(cells[:, 0], cells[:, 1])[np.random.default_rng(1).integers(0, len(cells), (12, 2))]
    for s, g in ends:
        try:
            want = keeping.shortest_path(s, g).dense
        except NoNavigableSpaceError:
            continue
        assert bounded.shortest_path(s, g).dense.tobytes() == want.tobytes()
    assert bounded.sight._corner_sight is None and keeping.sight._corner_sight is not None
    assert LineOfSight.MAX_KEPT_CORNERS == 2048
