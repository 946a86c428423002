"""Episode sourcing for a run: its settings from the task config, episodes generated with the
task layer's generator, and the check that every start and goal lies in its scene.

:func:`run_settings` resolves what an episode is scored under (step budget, success radius, body,
map resolution, task type); :func:`generate_episodes` makes a dataset of a task on scenes; the
bounds checks refuse an episode whose start or goal lies outside its scene's navigable area
before anything runs. Training and ``vlnverse eval`` source their episodes through these.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from ..core.body import AgentBody
from ..core.errors import ConfigError


@dataclass
class RunSettings:
    """Per-run values resolved from the eval config and the task config."""

    max_steps: int
    success_distance: float
    body: AgentBody
    resolution: float
    task_type: str


def run_settings(task: str, *, body: str | None = None, max_steps: int | None = None,
                 success_distance: float | None = None) -> RunSettings:
    """The settings of a run of ``task``: the values given, the task config's (``tasks/types/<task>/config.yaml``)
    for those left None."""
    from ..core.body import load_body
    from ..tasks.base import load_task_config

    task_cfg = load_task_config(task)
    return RunSettings(max_steps=max_steps or task_cfg.max_steps,
                       success_distance=success_distance or task_cfg.success_distance,
                       body=load_body(body or task_cfg.body), resolution=task_cfg.map_resolution,
                       task_type=task_cfg.task_type)


def resolve_settings(setup: Any) -> RunSettings:
    """Fill the unset settings of ``setup`` (anything with ``task``, ``body``, ``max_steps`` and
    ``success_distance``: an ``EpisodeSetup``, an eval or train config) from the task config
    (``run_settings``)."""
    return run_settings(setup.task, body=setup.body, max_steps=setup.max_steps, success_distance=setup.success_distance)


def generate_episodes(task: str, scenes: Any, episodes_per_scene: int, seed: int, out_dir: str | Path, *,
                      body: str | None = None, max_scenes: int | None = None, progress: bool = True,
                      render: dict[str, str] | None = None, overrides: dict | None = None) -> list:
    """Generate a dataset of ``task`` into ``out_dir`` with the task layer's generator
    (``vlnverse.tasks.dataset.generate_dataset``: per-scene seeding, splits from
    ``splits.json``, assets such as reference images or prior videos rendered with the
    simulator's camera, drawn with the run's ``render`` options: an agent's reference image
    looks like its views) on ``scenes`` (a split name, ``all``, ids or paths; the first
    ``max_scenes``; ``overrides``: the task's config overrides, e.g. an instruction language's),
    and return its episodes."""
    from ..tasks.dataset import generate_dataset, resolve_scene_paths, simulator_renderer_factory
    from ..tasks.episode import load_episodes

    paths = resolve_scene_paths(scenes)
    if max_scenes is not None:
        paths = paths[:max_scenes]
    generate_dataset(task, paths, episodes_per_scene, seed, out_dir, body=body, progress=progress,
                     renderer_factory=simulator_renderer_factory(options=render), overrides=overrides or None)
    return load_episodes(out_dir)


#: How far beyond the navigable area's bounding box a start (m) may lie; a goal may lie its
#: success radius (at least ``GOAL_BOUNDS_MARGIN``) beyond it (objects stand on furniture, by walls).
START_BOUNDS_MARGIN = 0.5
GOAL_BOUNDS_MARGIN = 1.0


def check_episode_bounds(episodes: Iterable, ctx: Any, *, bounds: Any = None) -> None:
    """Reject an episode whose start or goal lies outside the scene's navigable bounds (the box
    around its navigable cells; ``bounds`` = ``(lo, hi)`` when known, else from ``ctx``): a
    ``ConfigError`` names the episode file, line and field.

    Without this, a goal 640 m away is snapped onto the map by the distance field and scores."""
    from ..tasks.base import navigable_bounds

    if bounds is None:
        bounds = navigable_bounds(ctx.maps)
    if bounds is None:
        return  # load_scene_context already refuses a scene without navigable space
    lo, hi = np.asarray(bounds[0], dtype=float), np.asarray(bounds[1], dtype=float)
    scene_id = getattr(ctx, "scene_id", None) or next((ep.scene_id for ep in episodes), "?")
    for ep in episodes:
        file, line = getattr(ep, "source", None) or (None, None)
        checks = [("start_position", ep.start_position, START_BOUNDS_MARGIN)]
        checks += [(f"goals[{i}].position", g.position, max(GOAL_BOUNDS_MARGIN, float(g.radius)))
                   for i, g in enumerate(ep.goals)]
        for field_name, pos, margin in checks:
            xy = np.asarray(pos, dtype=float)[:2]
            if not (np.all(np.isfinite(xy)) and np.all(xy >= lo - margin) and np.all(xy <= hi + margin)):
                raise ConfigError(f"episode '{ep.episode_id}': ({xy[0]:.2f}, {xy[1]:.2f}) lies outside scene "
                                  f"'{scene_id}'", file=file, line=line, field=field_name,
                                  expected=f"x in [{lo[0] - margin:.2f}, {hi[0] + margin:.2f}], "
                                           f"y in [{lo[1] - margin:.2f}, {hi[1] + margin:.2f}]")


def check_all_episode_bounds(episodes: list, settings: RunSettings,
                             scene_loader: Callable[[str, Any, float], Any] | None = None) -> None:
    """``check_episode_bounds`` for every episode against its scene: an episode outside its scene
    stops the run before any record or config is written. The bounds come from
    ``tasks.base.scene_navigable_bounds``: stored by whichever process last loaded the scene
    (data generation, an earlier run, a worker), so this driver loads a scene only the first
    time it is seen (with ``scene_loader``: always)."""
    from ..tasks.base import scene_navigable_bounds

    by_scene: dict[str, list] = {}
    for ep in episodes:
        by_scene.setdefault(str(ep.scene_path), []).append(ep)
    for path, scene_eps in by_scene.items():
        bounds = scene_navigable_bounds(path, settings.body, settings.resolution, loader=scene_loader)
        if bounds is not None:  # None: no navigable space, which loading the scene refuses anyway
            check_episode_bounds(scene_eps, None, bounds=bounds)
