"""In-memory evaluation: episodes under one :class:`~vlnverse.run.setup.EpisodeSetup` with one
agent, giving the per-episode records and their summary without writing anything.

``vlnverse eval`` adds what a run folder needs around the same steps (resume, the config record,
report pictures, parallel workers); training validation calls :func:`evaluate` directly. The
records and the summary's figures are the ones ``vlnverse eval`` writes for the same episodes.
"""
from __future__ import annotations

import logging
import pickle
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from ..core.io import to_jsonable
from .agents import Agent, agent_rig, join_run
from .episodes import check_all_episode_bounds, resolve_settings
from .rollout import WORKER_PRELOAD, run_scene
from .setup import EpisodeSetup
from .summary import summarize

log = logging.getLogger(__name__)


@dataclass
class Results:
    """What :func:`evaluate` gives: the episode records (in the order of the episodes given, as
    ``episodes.jsonl`` holds them) and their ``summary`` (``run.summary.summarize``)."""

    records: list[dict]
    summary: dict[str, Any]


def evaluate(setup: EpisodeSetup, episodes: Sequence[Any], agent: Agent, *, envs: int = 1, seed: int = 0,
             scene_loader: Callable[[str, Any, float], Any] | None = None) -> Results:
    """Run ``episodes`` (their scene paths resolved) under ``setup`` with ``agent`` and return their
    records and summary. Episodes outside their scene are refused before any runs
    (``check_all_episode_bounds``). ``envs`` > 1 runs that many episodes at once for an
    agent that acts in batches (``run.batched``, environment processes when the arguments can be
    sent to them); the records are the serial ones. ``seed`` seeds the summary's bootstrap
    intervals; ``scene_loader(scene_path, body, resolution)`` overrides ``load_scene_context``."""
    from ..tasks.base import load_task_types

    load_task_types()
    settings = resolve_settings(setup)
    sensors = agent_rig(agent, setup.sensor_specs(), agent_name=f"agent '{agent.name}'")
    agent.check_sensors(sensors)
    episodes = list(episodes)
    check_all_episode_bounds(episodes, settings, scene_loader)
    join_run(agent)
    extra = {"agent": agent.name, "collision_mode": setup.collision_mode}
    kwargs = {"collision_mode": setup.collision_mode, "mode_params": setup.selected_mode_params(), "sensors": sensors,
              "backend": setup.backend, "scene_loader": scene_loader, "quality": setup.render.quality,
              "objects": setup.render.objects, "extra": extra}
    records: list[dict] = []
    if envs > 1 and agent.acts_in_batches():
        from ..sim.api import backend_module

        run_batched_forked(episodes, settings, agent, envs, kwargs, records.append,
                           preload=WORKER_PRELOAD + (backend_module(setup.backend),))
    else:
        by_scene: dict[str, list] = {}
        for ep in episodes:
            by_scene.setdefault(str(ep.scene_path), []).append(ep)
        for scene_path, scene_episodes in by_scene.items():
            run_scene(scene_path, scene_episodes, settings, agent, on_record=records.append, **kwargs)
    order = {ep.episode_id: i for i, ep in enumerate(episodes)}
    records = sorted((to_jsonable(r) for r in records), key=lambda r: order[r["episode_id"]])
    run = {"agent": agent.name, "model": None, "task": setup.task, "collision_mode": setup.collision_mode,
           "split": None, "seed": seed, "max_steps": settings.max_steps, "success_distance": settings.success_distance,
           "body": settings.body.name}
    return Results(records, to_jsonable(summarize(records, run=run)))


def run_batched_forked(episodes: list, settings: Any, agent: Agent, envs: int, kwargs: dict,
                       on_record: Callable[[dict], None], *, preload: Iterable[str] = ()) -> None:
    """``run.batched.run_batched`` of ``episodes`` with ``kwargs`` (its keyword arguments) and
    ``envs`` environment processes, forked from the fork server with ``preload`` imported (in
    this process when the arguments cannot be sent to them: a scene loader built in code)."""
    from ..engines.local import start_fork_server
    from .batched import run_batched

    try:
        pickle.dumps((settings, kwargs))
        asynchronous = True
    except Exception as exc:  # noqa: BLE001 - e.g. a lambda scene loader
        log.warning("batched evaluation: the environments run in this process (%s cannot be sent to a process)", exc)
        asynchronous = False
    if asynchronous:
        start_fork_server(tuple(preload) + ("vlnverse.run.batched",))
    run_batched(episodes, settings, agent, envs=envs, asynchronous=asynchronous, **kwargs, on_record=on_record)
