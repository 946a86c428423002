"""Small hand-built scenes for the evaluation tests."""
from __future__ import annotations

import numpy as np

from vlnverse.scenes.description import Geom, Room, SceneDescription, SceneObject


def box(center, half, label, instance_id):
    """An axis-aligned box geom (centre (3,), half extents (3,))."""
    t = np.eye(4)
    t[:3, 3] = center
    return Geom("box", t, np.asarray(half, float), label=label, instance_id=instance_id, name=f"{label}_{instance_id}")


def corridor_scene(gap_width: float = 1.0, with_objects: bool = False) -> SceneDescription:
    """A 10 m × 3 m corridor (x 0..10, y 0..3) cut at x = 5 by a 0.1 m wall with a ``gap_width``
    opening at its top end (y in [3 - gap, 3]). Walls 2.6 m high, floor top at z = 0. Room 0
    ("hallway") is x < 5, room 1 ("kitchen") x > 5. ``with_objects`` adds a kitchen table
    (instance 10, centre (8, 2.4)) and a cabinet (instance 11, against the end wall at (9.7, 0.5))."""
    h = 1.3
    geoms = [
        box([5, 1.5, -0.05], [5.0, 1.5, 0.05], "floor", 1),
        box([5, -0.05, h], [5.1, 0.05, h], "wall", 2),
        box([5, 3.05, h], [5.1, 0.05, h], "wall", 3),
        box([-0.05, 1.5, h], [0.05, 1.6, h], "wall", 4),
        box([10.05, 1.5, h], [0.05, 1.6, h], "wall", 5),
    ]
    wall_len = 3.0 - gap_width
    geoms.append(box([5.0, wall_len / 2, h], [0.05, wall_len / 2, h], "wall", 6))
    rooms = [Room(0, "hallway", [[0, 0], [5, 0], [5, 3], [0, 3]]), Room(1, "kitchen", [[5, 0], [10, 0], [10, 3], [5, 3]])]
    objects = []
    if with_objects:
        for iid, category, centre, half in ((10, "table", (8.0, 2.4, 0.375), (0.4, 0.3, 0.375)),
                                            (11, "cabinet", (9.7, 0.5, 0.5), (0.25, 0.4, 0.5))):
            geoms.append(box(centre, half, category, iid))
            lo, hi = np.subtract(centre, half), np.add(centre, half)
            objects.append(SceneObject(iid, category, f"/World/Objects/{category}", lo, hi, [len(geoms) - 1], room_id=1))
    return SceneDescription("corridor", geoms=geoms, objects=objects, rooms=rooms)


#: gap widths of the corridor variants ``corridor_a`` .. ``corridor_c`` (``corridor_loader``)
CORRIDOR_GAPS = {"corridor_a": 1.0, "corridor_b": 1.3, "corridor_c": 1.6}


def corridor_loader(path, body, resolution):
    """A module-level ``scene_loader`` (picklable, for worker processes): the corridor variant
    named by the path's stem. Test hooks, keyed by files beside ``path``, fire in worker processes
    only (the driver also loads every scene, to check episode bounds before the run):
    ``<stem>.kill-once`` kills the calling worker the first time (then renames itself ``.killed``);
    ``<stem>.crash`` raises every time; ``<stem>.hang-once`` makes the calling worker stop making
    progress (asleep for an hour, alive) the first time (then renames itself ``.hung``)."""
    import multiprocessing
    import os
    import signal
    from pathlib import Path

    from vlnverse.tasks.base import context_from_description

    p = Path(path)
    in_worker = multiprocessing.parent_process() is not None
    kill = p.with_suffix(".kill-once")
    if in_worker and kill.exists():
        kill.rename(p.with_suffix(".killed"))
        os.kill(os.getpid(), signal.SIGKILL)
    hang = p.with_suffix(".hang-once")
    if in_worker and hang.exists():
        import time

        hang.rename(p.with_suffix(".hung"))
        time.sleep(3600)
    if in_worker and p.with_suffix(".crash").exists():
        raise RuntimeError(f"cannot load {p.name}: test crash")
    return context_from_description(corridor_scene(CORRIDOR_GAPS[p.stem]), body, resolution, scene_path=str(p))


def corridor_episodes(folder, starts) -> list:
    """Fine-grained test episodes on every corridor variant (``CORRIDOR_GAPS``; scene files
    ``folder/<stem>.usda`` for ``corridor_loader``, scene id the stem): per variant one episode per
    ``(start xy, start yaw, goal xy)`` of ``starts``, on the planner's shortest path."""
    from pathlib import Path

    from vlnverse.sim.body import load_body
    from vlnverse.tasks.episode import Episode, Goal, Instruction

    body = load_body("r2r_ce")
    episodes = []
    for stem in CORRIDOR_GAPS:
        scene = Path(folder) / f"{stem}.usda"
        ctx = corridor_loader(scene, body, 0.05)
        for i, (start, yaw, goal) in enumerate(starts):
            path = ctx.planner.shortest_path(start, goal)
            episodes.append(Episode(f"{stem}-{i}", stem, str(scene), "test", "fine_grained", [*start, 0.0], yaw,
                                    [Goal([*goal, 0.0])], [[*p, 0.0] for p in path.waypoints], path.length,
                                    [Instruction("walk to the other end of the corridor")]))
    return episodes


def named_corridor_loader(path, body, resolution):
    """Like ``corridor_loader`` (no test hooks), but the scene id is the path's stem, so the
    variants can share one view cache (``vlnverse cache build`` keys it by scene id)."""
    from pathlib import Path

    from vlnverse.tasks.base import context_from_description

    p = Path(path)
    desc = corridor_scene(CORRIDOR_GAPS[p.stem])
    desc.scene_id = p.stem
    return context_from_description(desc, body, resolution, scene_path=str(p))
