"""``vlnverse bench paths``: planning and episode-generation throughput.

* ``paths_per_s`` — A* + line-of-sight simplification + any-angle refinement + resampling, random
  start/goal pairs on a generated home's navigable map (r2r_ce body, 5 cm cells).
* ``distance_fields_per_s`` — exact geodesic fields (scipy Dijkstra) on a 400×400 map, one goal
  each; ``graph_build_s`` is the one-off grid-graph construction.
* ``episodes_per_s`` — per registered task type, episodes generated per second on that home
  (rendering tasks use the simulator camera; a task that cannot run is listed in
  ``episodes_errors`` instead).
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..core.body import DEFAULT_BODY, R2R_CE


def _best_rate(fn, count: int, repeat: int) -> float:
    best = np.inf
    for _ in range(max(repeat, 1)):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return float(count / best)


def _home_like_map(size: int = 400, seed: int = 0):
    """A 20 m × 20 m map: 4×4 rooms with door gaps and random furniture, dilated by 0.18 m."""
    from ..scenes.occupancy import FREE, OCCUPIED, OccupancyMap

    rng = np.random.default_rng(seed)
    grid = np.zeros((size, size), np.uint8)
    step = size // 4
    for k in range(0, size + 1, step):
        grid[min(k, size - 1), :] = OCCUPIED
        grid[:, min(k, size - 1)] = OCCUPIED
    for k in range(step, size - 1, step):
        for j in range(0, size - step + 1, step):
            d = j + step // 2 + rng.integers(-step // 4, step // 4)
            grid[k, d - 9:d + 9] = FREE
            grid[d - 9:d + 9, k] = FREE
    for _ in range(60):
        r, c = rng.integers(5, size - 25, 2)
        grid[r:r + rng.integers(8, 20), c:c + rng.integers(8, 20)] = OCCUPIED
    return OccupancyMap(grid, 0.05, np.zeros(2)).dilate(R2R_CE.radius)


def run(args: Any) -> dict[str, Any]:
    """Measure the figures above; ``args`` (``TimingOptions`` or its flags): ``repeat`` repetitions
    (best kept), ``seed`` for scenes/pairs."""
    from .train.options import TimingOptions, options_from_args
    from ..scenes.procgen import generate_home
    from ..tasks.base import TASKS, context_from_description, load_task_config, load_task_types
    from ..tasks.dataset import simulator_renderer_factory
    from ..tasks.pathing import PathPlanner

    options = options_from_args(TimingOptions, args)
    repeat, seed = options.repeat, options.seed
    figures: dict[str, Any] = {}

    # Paths on a generated home.
    desc = generate_home(seed, scene_id=f"bench_{seed}", min_rooms=6, max_rooms=8)
    ctx = context_from_description(desc, DEFAULT_BODY)
    rng = np.random.default_rng(seed)
    pairs = [ctx.planner.sample_start_goal(rng, 3.0, 20.0, require_room_change=False) for _ in range(20)]
    ctx.planner.shortest_path(pairs[0].start_xy, pairs[0].goal_xy)  # neighbour tables, corner cells

    def plan_all():
        for p in pairs:
            ctx.planner.shortest_path(p.start_xy, p.goal_xy)

    figures["paths_per_s"] = round(_best_rate(plan_all, len(pairs), repeat), 2)
    figures["path_map_cells"] = list(ctx.planner.shape)
    figures["mean_path_length_m"] = round(float(np.mean([ctx.planner.shortest_path(p.start_xy, p.goal_xy).length
                                                          for p in pairs])), 3)

    # Exact distance fields on a 400×400 map.
    big = _home_like_map(400, seed)
    t0 = time.perf_counter()
    planner = PathPlanner(big, scene_id="bench_400", field_cache_size=1)
    _ = planner.graph
    figures["graph_build_s"] = round(time.perf_counter() - t0, 4)
    goals = planner.sample_navigable_points(np.random.default_rng(seed + 1), 10)

    def fields():
        planner._fields.clear()
        for g in goals:
            planner.distance_field(g)

    figures["distance_fields_per_s"] = round(_best_rate(fields, len(goals), repeat), 2)
    figures["distance_field_map"] = [400, 400]
    figures["distance_field_nodes"] = planner.num_nodes

    # Episodes per task type.
    rates: dict[str, float] = {}
    errors: dict[str, str] = {}
    n = 3
    with tempfile.TemporaryDirectory() as tmp:
        for name in load_task_types():
            try:
                gen = TASKS.get(name)(load_task_config(name))
                gen.output_dir = Path(tmp) / name
                task_ctx, close = ctx, None
                if TASKS.get(name).needs_renderer:
                    renderer, close = simulator_renderer_factory(128, 128)(ctx)
                    task_ctx = context_from_description(desc, DEFAULT_BODY, renderer=renderer)
                try:
                    gen.generate(task_ctx, np.random.default_rng(seed), 1, "train")  # warm caches
                    counter = iter(range(10 ** 6))
                    rates[name] = round(_best_rate(
                        lambda: gen.generate(task_ctx, np.random.default_rng(seed + next(counter)), n, "train"),
                        n, repeat), 3)
                finally:
                    if close is not None:
                        close()
            except Exception as exc:  # a benchmark reports, it does not stop at one task
                errors[name] = f"{type(exc).__name__}: {exc}"
    figures["episodes_per_s"] = rates
    if errors:
        figures["episodes_errors"] = errors
    return figures
