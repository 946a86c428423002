"""The evaluation runner behind ``vlnverse eval CONFIG``.

For every episode: place the agent, let it act until it STOPs, fails (Strict displacement) or
runs out of steps, and score the trajectory with the task's metrics (geodesic NE/SR/OSR/SPL on
the scene's navigable map). One simulator is built per scene and reused across its episodes.

Output folder (``cfg.out``):

- ``config.json`` — the resolved config (a resumed run must match it);
- ``input_episodes.jsonl`` — the episodes evaluated (generated ones are kept for resume);
- ``episodes.jsonl`` — one line per finished episode, appended and flushed as each finishes;
  a resumed run skips the episodes already there, except those *not evaluated* (the agent's
  model endpoint gave no answer: ``outcome: not_evaluated``), which it removes and runs again;
  a line that is not a valid record (a truncated last line after a crash, a corrupt line) moves
  verbatim to ``episodes.rejected.jsonl``;
- ``summary.json`` — aggregated metrics per task/mode; ``report.html`` — the human view;
- ``maps/`` and ``frames/`` — per-episode top-down maps and first-person frames.

The run's modules: ``folder`` (files, episodes, resumable log), ``scene_job`` (one scene's
evaluation job and the run's agent), ``visuals`` (maps and frames for the report) and this one
(``run_eval``: the run itself, its protocol and closing lines).
"""
from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..core.errors import ConfigError
from ..core.io import claim_output_dir, folder_lock, redact_secrets, to_jsonable, write_json_atomic
from ..core.jobs import JobFailure, ParallelConfig, RunReport, run_jobs
from ..run.agents import Agent, agent_rig
from ..run.episodes import RunSettings, check_all_episode_bounds, resolve_settings
from ..run.evaluation import run_batched_forked
from ..run.generation import model_identity
from ..run.records import append_record, read_finished
from ..run.rollout import WORKER_PRELOAD
from ..run.summary import design_line, print_table, summarize
from ..tasks.scene_jobs import scene_jobs
from .config import EvalConfig
from .folder import (CONFIG_FILE, EPISODES_FILE, SUMMARY_FILE, benchmark_record, commit_config_record, drop_not_evaluated,
                     episode_scene_roots, resolve_episodes, stage_config_record)
from .scene_job import MODEL_REQUESTS, EvalJob, _batched_kwargs, eval_scene_job, make_run_agent, model_concurrency

log = logging.getLogger(__name__)


def run_protocol(cfg: EvalConfig, settings: RunSettings, episodes: list | None = None) -> dict[str, Any]:
    """What a run's numbers depend on besides the agent: task, collision mode and its parameters,
    success radius, step budget, the body and whether a blocked move slides along the obstacle
    (``slide_on_collision``: Strict runs physics and the agent geom slides unless the body declares
    a ``friction``; Tel-Hop lands a blocked hop on the nearest free pose; graph hops do not slide),
    and ``instruction_language`` when ``episodes`` are not in the version-1 language."""
    from dataclasses import asdict

    from ..core.params import parse_params
    from ..run.modes import MODES
    from ..tasks.episode import instruction_languages

    body = settings.body
    mode = cfg.collision_mode
    slide = {"strict": body.friction == 0, "telhop": True}.get(mode, False)
    return {"task": cfg.task, "task_type": settings.task_type, "collision_mode": mode,
            "mode_params": asdict(parse_params(MODES.get(mode).Params, cfg.mode_params.get(mode), owner=mode)),
            "success_distance": settings.success_distance, "max_steps": settings.max_steps,
            "slide_on_collision": bool(slide), "backend": cfg.backend,
            "body": {"name": body.name, "radius": body.radius, "height": body.height,
                     "step_height": body.step_height, "holonomic": body.holonomic, "friction": body.friction},
            **({"instruction_language": language} if (language := instruction_languages(episodes or [])) else {})}


def run_eval(cfg: EvalConfig, **kwargs: Any) -> dict[str, Any]:
    """Run (or resume) the evaluation ``cfg``; returns the summary written to ``summary.json``.

    ``cfg.out`` must be new, empty or an eval folder (``core.io.claim_output_dir``) and is locked
    for the run (``core.io.folder_lock``): a second run on the same folder is refused.
    Keyword arguments: see ``run_eval_locked``.
    """
    out = claim_output_dir(cfg.out, command="eval", field="out")
    with folder_lock(out):
        return run_eval_locked(cfg, **kwargs)


def run_eval_locked(cfg: EvalConfig, *, progress: bool = True, print_summary: bool = True,
                    agent_factory: Callable[[], Agent] | None = None,
                    scene_loader: Callable[[str, Any, float], Any] | None = None,
                    workers: int = 1, engine: str = "local", address: str | None = None,
                    job_timeout: float | None = None, envs: int | None = None) -> dict[str, Any]:
    """``run_eval``'s body, for a caller that holds ``cfg.out``'s lock.

    ``envs`` (default ``cfg.envs``) > 1 runs that many episodes at once with batched
    agent calls (``vlnverse.run.batched``), for an agent that acts in batches
    (``Agent.acts_in_batches``; others run one episode at a time): with one worker the
    environments are processes; with ``workers`` > 1 each worker steps its scene's episodes so,
    in its own process. The records are the serial run's.

    ``workers`` > 1 or ``engine="ray"`` (``address`` = a cluster's ``HOST:PORT``) evaluate
    scenes in parallel (``vlnverse.core.jobs``): the records are the same as a serial run's
    and ``summary.json`` aggregates them in the serial order. A scene whose worker keeps
    failing is listed in ``summary["failed_scenes"]`` and the other scenes complete;
    ``job_timeout`` (s, default off) kills and retries a worker stuck on a scene that long.

    ``agent_factory`` overrides the registry lookup (e.g. an agent object built in code);
    ``scene_loader(scene_path, body, resolution) -> SceneContext`` overrides
    ``load_scene_context`` (e.g. for in-memory scenes).
    """
    from tqdm import tqdm

    from ..core.plugins import load_plugins
    from ..sim.api import backend_module
    from ..tasks.base import load_task_types
    from ..tasks.scoring import scoring_for
    from .report import write_report

    parallel = ParallelConfig(workers, engine, address, job_timeout).checked()
    preload = WORKER_PRELOAD + (backend_module(cfg.backend),)
    parallel.start_early(eval_scene_job, preload)
    load_plugins(cfg.plugins)
    load_task_types()
    out = Path(cfg.out)
    config_path = out / CONFIG_FILE
    key = redact_secrets(to_jsonable(cfg.run_key()))  # never a key from a URL in a file
    if config_path.is_file():
        previous = json.loads(config_path.read_text(encoding="utf-8"))
        if previous.get("run_key") != key:
            raise ConfigError("the output folder holds a run with a different config", field="out",
                              expected="a new 'out' folder, or the same config to resume", file=config_path)
    settings = resolve_settings(cfg)
    agent = make_run_agent(cfg, agent_factory, out)
    sensors = agent_rig(agent, [s.to_spec() for s in cfg.sensors], agent_name=f"agent '{cfg.agent.name}'")
    agent.check_sensors(sensors)  # a mismatched rig fails once, before the run
    envs = cfg.envs if envs is None else envs
    if isinstance(envs, bool) or not isinstance(envs, int) or envs < 1:
        raise ConfigError(f"got {envs!r}", field="envs", expected="an integer >= 1")
    if envs > 1 and not agent.acts_in_batches():
        log.info("agent '%s' does not act in batches: its episodes run one at a time (envs=%d has no effect)",
                 cfg.agent.name, envs)
        envs = 1
    episodes = resolve_episodes(cfg, settings, out, progress=progress)
    roots: list = []
    if scene_loader is None:  # episodes name scenes portably: find each file before running (errors name the roots)
        from ..tasks.scene_roots import resolve_episode_scenes

        roots = episode_scene_roots(cfg, out)
        episodes = resolve_episode_scenes(episodes, roots)
    check_all_episode_bounds(episodes, settings, scene_loader)  # before anything is recorded or run
    if note := agent.episodes_note(episodes):
        log.warning("agent '%s': %s", cfg.agent.name, note)
    # the scene roots (absolute) let ``vlnverse view`` find the run's scenes from anywhere
    benchmark = benchmark_record(cfg)
    stage_config_record(out, {"run_key": key, "config": redact_secrets(to_jsonable(cfg.to_dict())),
                              "scene_roots": [str(r.resolve()) for r in roots],
                              **({"benchmark": benchmark} if benchmark else {})})

    log_path = out / EPISODES_FILE
    finished = drop_not_evaluated(log_path, read_finished(log_path))
    done = {r["episode_id"] for r in finished}
    todo = [e for e in episodes if e.episode_id not in done]
    report_budget = max(0, cfg.report.max_episodes - sum(1 for r in finished if r.get("map") or r.get("frames")))
    rgb_sensor = next((s for s in sensors if s.kind == "rgb"), None)  # the config's first, else the agent's
    if rgb_sensor is not None and cfg.report.frames:
        from dataclasses import replace

        frame_w = cfg.report.frame_width
        rgb_sensor = replace(rgb_sensor, name="report_rgb", width=frame_w,
                             height=max(8, round(frame_w * rgb_sensor.height / rgb_sensor.width)))

    by_scene: dict[str, list] = {}
    for ep in todo:
        by_scene.setdefault(str(ep.scene_path), []).append(ep)
    serial_order = [ep.episode_id for eps in by_scene.values() for ep in eps]
    # The episodes that get report pictures are fixed up front (the first ones in serial order),
    # so a record does not depend on which worker finished first.
    with_visuals = set(serial_order[:report_budget]) if cfg.report.enabled else set()
    inline = parallel.inline
    common = EvalJob(cfg=cfg, settings=settings, out=out, sensors=sensors, rgb_sensor=rgb_sensor,
                     with_visuals=with_visuals, scene_loader=scene_loader, agent=agent if inline else None,
                     agent_factory=agent_factory, envs=envs)
    jobs = scene_jobs(by_scene, common, send=not inline, field_name="--workers",
                      expected="1, or a module-level agent_factory / scene_loader")
    t_start = time.perf_counter()
    bar = tqdm(total=len(episodes), initial=len(finished), desc=f"{cfg.agent.name}/{cfg.collision_mode}",
               unit="ep", disable=not progress)
    headline = scoring_for(settings.task_type).headline  # the task's headline success

    def on_record(episode_id: str, record: dict) -> None:
        commit_config_record(out)  # with the first record, the staged config record becomes config.json
        append_record(log_path, record)  # the driver is the only writer of the episode log
        finished.append(to_jsonable(record))  # as written: a resumed run aggregates the same numbers
        bar.update(1)
        scores = [r["metrics"].get(headline) for r in finished if r["metrics"].get(headline) is not None]
        if scores:
            bar.set_postfix({headline: f"{np.mean(scores):.2f}"})

    def on_failure(failure: JobFailure) -> None:
        bar.write(f"scene {failure.key} failed after {failure.attempts} attempt(s): {failure.error}; "
                  f"{len(failure.missing)} episode(s) not evaluated")

    try:
        if envs > 1 and inline:
            run_batched_forked([ep for eps in by_scene.values() for ep in eps], settings, agent, envs,
                               _batched_kwargs(common), lambda record: on_record(record["episode_id"], record),
                               preload=preload)
            report = RunReport(received=len(todo))
        else:
            report = run_jobs(eval_scene_job, jobs, on_result=on_record, parallel=parallel, on_failure=on_failure,
                              shared={MODEL_REQUESTS: model_concurrency(cfg)} if getattr(cfg.model, "concurrency", None)
                              else None, preload=preload)
    except KeyboardInterrupt:
        bar.close()
        print(f"interrupted: {len(finished)} of {len(episodes)} episodes are saved in {log_path}; "
              "run the same command again to resume")
        raise
    finally:
        bar.close()
    elapsed = time.perf_counter() - t_start
    commit_config_record(out)
    order = {e.episode_id: i for i, e in enumerate(episodes)}
    finished = sorted((r for r in finished if r["episode_id"] in order), key=lambda r: order[r["episode_id"]])
    run = {"agent": cfg.agent.name, "model": cfg.model.name if cfg.model else None, "task": cfg.task,
           "collision_mode": cfg.collision_mode, "split": cfg.split, "seed": cfg.seed,
           "max_steps": settings.max_steps, "success_distance": settings.success_distance,
           "body": settings.body.name, **({"benchmark": benchmark} if benchmark else {})}
    summary = to_jsonable(summarize(finished, run=run))  # the figures summary.json holds
    summary["protocol"] = run_protocol(cfg, settings, episodes)
    summary["model"] = to_jsonable(model_identity(agent, cfg.agent.name, finished))
    summary["timing"] = {"episodes_run_now": len(todo), "seconds": round(elapsed, 2),
                         "episodes_per_min": round(60.0 * len(todo) / elapsed, 2) if todo and elapsed > 0 else None,
                         "workers": parallel.workers, "engine": parallel.engine, "envs": envs}
    if report.failures:
        summary["failed_scenes"] = [{"scene": f.key, "error": f.error, "missing_episodes": f.missing}
                                    for f in report.failures]
    write_json_atomic(out / SUMMARY_FILE, summary)
    if cfg.report.enabled:
        write_report(out / "report.html", [(f"{cfg.agent.name} / {cfg.collision_mode}", summary, finished)], base_dir=out)
    if print_summary:
        print_table([((k.split("/")[0], cfg.agent.name, cfg.collision_mode), v) for k, v in summary["by_task"].items()])
        print(design_line(summary["overall"]))
        print(f"wrote {out / SUMMARY_FILE}, {out / EPISODES_FILE}" + (f", {out / 'report.html'}" if cfg.report.enabled else ""))
    return summary


def not_evaluated_line(summary: dict, out: Any) -> str | None:
    """One line saying how many episodes were not evaluated and which model failed why (None
    when all were; see :func:`assistant_line` for an assistant's outage)."""
    skipped = summary.get("overall", {}).get("not_evaluated") or {}
    if not skipped.get("episodes"):
        return None
    from ..run.summary import component_reasons

    total = skipped["episodes"] + summary["overall"]["episodes"]
    by_component = skipped.get("by_component") or {"navigator": skipped["by_reason"]}
    bound = (summary["overall"].get("partial") or {}).get("bounds", {}).get("SR")
    sr = summary["overall"].get("means", {}).get("SR")
    rates = "" if sr is None or bound is None else f" (SR {100 * sr:.1f}% over the evaluated, {100 * bound:.1f}% counting them as failures)"
    return (f"{skipped['episodes']} of {total} episode(s) not evaluated: {component_reasons(by_component)}; "
            f"the metrics leave them out{rates}; run the same command again (out={out}) to evaluate them")


def assistant_line(summary: dict) -> str | None:
    """One line when the agent's assistant gave no answer at some steps of evaluated episodes
    (they went on without guidance); None otherwise."""
    from ..run.summary import component_reasons

    down = ((summary.get("overall", {}).get("not_evaluated") or {}).get("by_component") or {}).get("assistant")
    return component_reasons({"assistant": down}) if down else None
