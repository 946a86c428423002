"""Checks and the ``study_episodes`` fixture shared by the study and benchmark tests (imported by
name: this folder is on ``sys.path`` under pytest)."""
from __future__ import annotations

import statistics
from pathlib import Path

import numpy as np
import pytest


def assert_t_is_driving_time(rows, tolerance: float = 0.1) -> None:
    """``t`` (measured driving time) strictly rises, ``wall_time`` never goes back, and over one
    uninterrupted drive ``t`` advances as the server's wall clock does: the offset
    ``wall_time - t`` at the start and at the end of the drive agree within ``tolerance`` s.

    Each offset is the median over up to ten rows: a row's two clock reads may lie a scheduling
    slice apart on a loaded machine, which moves one row's offset, never the median of ten.
    No bound on the time between rows is asserted (that is ``vlnverse bench study``'s figure)."""
    assert len(rows) >= 2, rows
    assert all(b.t > a.t for a, b in zip(rows, rows[1:])), [r.t for r in rows]
    assert all(b.wall_time >= a.wall_time for a, b in zip(rows, rows[1:])), [r.wall_time for r in rows]
    offsets = [r.wall_time - r.t for r in rows]
    k = max(1, min(10, len(rows) // 3))
    drift = statistics.median(offsets[-k:]) - statistics.median(offsets[:k])
    assert abs(drift) < tolerance, (f"t drifted {drift:+.3f} s from the wall clock over {rows[-1].t - rows[0].t:.2f} s "
                                    f"of driving ({len(rows)} rows)")


@pytest.fixture(scope="session")
def study_episodes(tmp_path_factory) -> Path:
    """Three fine-grained episodes on the first shipped test home, as a JSONL file whose scene
    paths are portable (relative to the shipped scenes, as ``vlnverse data generate`` writes them)."""
    import dataclasses

    from vlnverse.scenes.splits import resolve_scenes
    from vlnverse.tasks.base import TASKS, load_scene_context, load_task_config, load_task_types
    from vlnverse.tasks.episode import save_episodes
    from vlnverse.tasks.scene_roots import portable_scene_path

    load_task_types()
    cfg = load_task_config("fine_grained")
    scene = resolve_scenes("test")[0]
    ctx = load_scene_context(scene, cfg.body, cfg.map_resolution)
    episodes = TASKS.get("fine_grained")(cfg).generate(ctx, np.random.default_rng(0), 3, "test")
    path = tmp_path_factory.mktemp("study-episodes") / "episodes.jsonl"
    relative = portable_scene_path(scene, path.parent)
    assert not Path(relative).is_absolute() and not Path(relative).exists(), relative
    save_episodes(path, [dataclasses.replace(e, scene_path=relative) for e in episodes])
    return path
