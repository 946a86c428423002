"""One scene's evaluation job (``eval_scene_job``, run by ``core.jobs``): the run's agent, the
run-wide model request limit and the episodes of the scene, serial, threaded or batched."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..core.io import to_jsonable
from ..run.agents import Agent, join_run, make_agent
from ..run.episodes import RunSettings
from ..run.rollout import run_scene
from .config import EvalConfig
from .folder import dataset_folder
from .visuals import save_episode_visuals


def make_run_agent(cfg: EvalConfig, agent_factory: Callable[[], Agent] | None = None, out: Path | None = None) -> Agent:
    """The run's agent: ``agent_factory()``, else the registry's ``cfg.agent`` with its model;
    with the run folder ``out``, the run's dataset folder is its first asset root (prior videos;
    ``Agent.add_asset_root``)."""
    from ..run.models import make_model

    if agent_factory is not None:
        agent = agent_factory()
    else:
        model = make_model(cfg.model.name, cfg.model.params) if cfg.model is not None else None
        agent = make_agent(cfg.agent.name, cfg.agent.params, seed=cfg.seed, model=model)
    if out is not None:
        agent.add_asset_root(dataset_folder(cfg, Path(out)))
    return agent


#: name of the run-wide limit on model requests in flight (``model.concurrency``; ``core.jobs.SharedLimit``)
MODEL_REQUESTS = "model_requests"


def model_concurrency(cfg: EvalConfig) -> int:
    """``model.concurrency`` of ``cfg`` (1 when there is no model or it is unset)."""
    return int(getattr(cfg.model, "concurrency", None) or 1) if cfg.model is not None else 1


@dataclass(frozen=True)
class EvalJob:
    """The payload of one scene's evaluation job (``eval_scene_job``; picklable for worker
    processes unless ``agent`` -- the inline run's own agent -- is set)."""

    cfg: EvalConfig
    settings: RunSettings
    out: Path
    sensors: list
    rgb_sensor: Any
    with_visuals: set
    scene_loader: Callable[..., Any] | None
    agent: Agent | None
    agent_factory: Callable[[], Agent] | None
    scene_path: str = ""
    episodes: list = field(default_factory=list)
    #: episodes of the scene run at once in the worker (``run.batched``; 1: one at a time)
    envs: int = 1


def eval_scene_job(payload: EvalJob, items: tuple, state: dict, emit: Callable[[str, Any], None]) -> None:
    """Parallel job (``vlnverse.core.jobs``): evaluate the episodes ``items`` of one scene and
    ``emit(episode_id, record)`` as each finishes. The agent is built once per worker (``state``)
    and the scene's simulator once per job. With ``model.concurrency`` N, every model request
    takes the run-wide limit ``state["shared"]["model_requests"]`` and a simulator-free backend
    runs up to N episodes at once in threads (an agent per thread), records in episode order. The
    agents' chat models (``Agent.chat_models``) take that limit and share one breaker per role."""
    cfg, settings, out = payload.cfg, payload.settings, payload.out
    limit = state.get("shared", {}).get(MODEL_REQUESTS)  # ``model.concurrency``: one limit for the whole run

    def new_agent() -> Agent:
        made = make_run_agent(cfg, payload.agent_factory, out)
        join_run(made, limit, peer=agent)  # the episode threads of a scene open one circuit breaker per role
        return made

    agent = payload.agent
    if agent is None:
        key = ("agent", json.dumps(to_jsonable(cfg.run_key()), sort_keys=True))
        if key not in state:
            from ..core.plugins import load_plugins
            from ..tasks.base import load_task_types

            load_plugins(cfg.plugins)
            load_task_types()
            state[key] = new_agent()
        agent = state[key]
    join_run(agent, limit)
    wanted = set(items)
    episodes = [ep for ep in payload.episodes if ep.episode_id in wanted]

    if payload.envs > 1 and agent.acts_in_batches():  # a worker process cannot start processes: envs in this one
        from ..run.batched import run_batched

        run_batched(episodes, settings, agent, envs=payload.envs, asynchronous=False, **_batched_kwargs(payload),
                    on_record=lambda record: emit(record["episode_id"], record))
        return

    def visuals(record: dict, ctx: Any, sim: Any) -> None:
        if record["episode_id"] in payload.with_visuals:
            save_episode_visuals(record, ctx, sim, out, rgb_sensor=payload.rgb_sensor, frames=cfg.report.frames)

    run_scene(payload.scene_path, episodes, settings, agent, collision_mode=cfg.collision_mode,
              mode_params=cfg.mode_params.get(cfg.collision_mode, {}), sensors=payload.sensors,
              backend=cfg.backend, quality=cfg.render.quality, objects=cfg.render.objects,
              scene_loader=payload.scene_loader,
              extra={"agent": cfg.agent.name, "collision_mode": cfg.collision_mode}, visuals=visuals,
              on_record=lambda record: emit(record["episode_id"], record),
              threads=model_concurrency(cfg), agent_factory=new_agent)


def _batched_kwargs(payload: EvalJob) -> dict[str, Any]:
    """``run_batched``'s keyword arguments for the run ``payload`` describes (not the episodes)."""
    from ..run.batched import Visuals

    cfg = payload.cfg
    return {"collision_mode": cfg.collision_mode, "mode_params": cfg.mode_params.get(cfg.collision_mode, {}),
            "sensors": payload.sensors, "backend": cfg.backend, "scene_loader": payload.scene_loader,
            "quality": cfg.render.quality, "objects": cfg.render.objects,
            "extra": {"agent": cfg.agent.name, "collision_mode": cfg.collision_mode},
            "visuals": Visuals(payload.out, frozenset(payload.with_visuals), payload.rgb_sensor, cfg.report.frames,
                               save_episode_visuals) if payload.with_visuals else None}
