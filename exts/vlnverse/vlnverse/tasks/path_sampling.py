"""Drawing navigable points and start/goal pairs at a geodesic distance on a ``pathing.PathPlanner``
(``planner``: every draw comes from the generator given, so the result is a function of its seed)."""
from __future__ import annotations

import numpy as np

from ..core.errors import NoNavigableSpaceError
from .path_geometry import SQRT2, StartGoal


def sample_navigable_points(planner, rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` navigable cell centres drawn uniformly (with replacement), shape (n, 2)."""
    idx = planner.free_cells[rng.integers(0, planner.num_nodes, size=int(n))]
    rows, cols = np.divmod(idx, planner.shape[1])
    return planner.cell_centres(rows, cols)


def sample_start_goal(planner, rng: np.random.Generator, min_geodesic: float = 3.0, max_geodesic: float = 20.0,
                      require_room_change: bool = True, room_map: np.ndarray | None = None,
                      max_tries: int = 50) -> StartGoal:
    """Sample a goal cell, then a start cell whose geodesic distance lies in [min, max].

    With ``require_room_change`` and a ``room_map`` (room id per cell, -1 outside rooms, on
    this navigable grid) the start must lie in a different room than the goal, both in a
    room. Each try costs one distance field. Raises ``NoNavigableSpaceError`` naming the scene
    when no pair is found in ``max_tries`` goals.
    """
    if not (0 <= min_geodesic < max_geodesic):
        raise ValueError(f"need 0 <= min_geodesic < max_geodesic, got {min_geodesic}, {max_geodesic}")
    if require_room_change and room_map is not None and np.shape(room_map) != planner.shape:
        raise ValueError(f"room_map shape {np.shape(room_map)} != navigable map shape {planner.shape}")
    use_rooms = require_room_change and room_map is not None
    components = planner.components()
    sizes = np.bincount(components[planner.free])
    # Only goals in components that can hold a pair at min distance are worth a field: such a
    # component contains a path of that length, i.e. at least min / (res·√2) + 1 cells.
    min_cells = min_geodesic / (planner.resolution * SQRT2) + 1.0
    eligible = planner.free & (sizes[np.maximum(components, 0)] >= min_cells)
    if use_rooms:
        eligible &= room_map >= 0
    goal_cells = np.flatnonzero(eligible)
    if len(goal_cells) == 0:
        raise NoNavigableSpaceError(
            f"scene '{planner.scene_id}': no navigable start/goal pair with geodesic distance in "
            f"[{min_geodesic}, {max_geodesic}] m" + (" across rooms" if use_rooms else ""))
    for _ in range(max_tries):
        g = int(goal_cells[rng.integers(len(goal_cells))])
        gr, gc = divmod(g, planner.shape[1])
        goal = planner.cell_centres(gr, gc)
        fld = planner.distance_field(goal)
        ok = (fld.grid >= min_geodesic) & (fld.grid <= max_geodesic)
        if use_rooms:
            ok &= (room_map >= 0) & (room_map != room_map[gr, gc])
        cand = np.flatnonzero(ok)
        if len(cand) == 0:
            continue
        s = int(cand[rng.integers(len(cand))])
        sr, sc = divmod(s, planner.shape[1])
        return StartGoal(planner.cell_centres(sr, sc), goal, float(fld.grid[sr, sc]), fld)
    raise NoNavigableSpaceError(
        f"scene '{planner.scene_id}': no navigable start/goal pair with geodesic distance in "
        f"[{min_geodesic}, {max_geodesic}] m" + (" across rooms" if use_rooms else "")
        + f" after {max_tries} goals")
