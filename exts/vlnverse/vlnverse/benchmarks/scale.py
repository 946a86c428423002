"""``vlnverse bench scale``: throughput of parallel evaluation and data generation.

The same work three ways, in one run: serial (1 local worker, in this process), 2 local worker
processes, and 2 Ray workers on a local Ray instance (started before timing; its start-up time
is reported apart as ``ray_init_s``; skipped when Ray is not installed). Work: ``fine_grained``
episode generation, ``GENERATE_EPISODES_PER_SCENE`` (20) on each of ``SCENES`` (6) shipped scenes
(``scenes_per_min``; a real dataset has tens to hundreds per scene: with 4, a worker's start-up of
1-2 s was a third of the work), then evaluation of the shortest-path oracle under Strict physics
with 128² RGB-D on the first ``EPISODES_PER_SCENE`` (4) episodes of each scene
(``episodes_per_min``). Each parallel run's records are checked against the serial run's
(``identical_records``). ``speedup`` = rate ÷ serial rate. Worker start-up (process spawn,
imports, scene loading) is part of the timed work, as in a real run; so is the serial run's
scene loading (this process's scene cache is emptied before every timed run, as a fresh
``vlnverse`` command starts with none). The machine's load average and core count are reported:
on a shared machine, ratios say more than absolute rates.
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

SCENES = 6
GENERATE_EPISODES_PER_SCENE = 20
EPISODES_PER_SCENE = 4


def _configs() -> list[tuple[str, int, str]]:
    runs = [("serial", 1, "local"), ("local_2", 2, "local")]
    try:
        import ray  # noqa: F401 - only whether it is installed

        runs.append(("ray_2", 2, "ray"))
    except ImportError:
        pass
    return runs


def _fresh_process_state() -> None:
    """Empty this process's scene-context cache: the serial run loads its scenes like a new process."""
    from vlnverse.tasks import base

    base._CONTEXT_CACHE.clear()


def _comparable(records: list[dict]) -> str:
    return json.dumps(sorted(({k: v for k, v in r.items() if k != "duration_s"} for r in records),
                             key=lambda r: r["episode_id"]), sort_keys=True)


def run(args) -> dict:
    """Measure the figures listed in the module docstring; returns a JSON-ready dict."""
    from vlnverse.core.parallel import connect_ray
    from vlnverse.eval.config import EpisodeSource, EvalConfig, NamedSpec, ReportConfig, SensorConfig
    from vlnverse.eval.runner import EPISODES_FILE, run_eval
    from vlnverse.tasks.dataset import generate_dataset, resolve_scene_paths
    from vlnverse.tasks.episode import load_episodes, save_episodes

    scenes = [str(p) for p in resolve_scene_paths("all")[:SCENES]]
    seed = int(getattr(args, "seed", 0))
    out: dict = {"cpu_count": os.cpu_count(), "load_average_1m_before": round(os.getloadavg()[0], 2),
                 "scenes": len(scenes), "generated_episodes_per_scene": GENERATE_EPISODES_PER_SCENE,
                 "episodes_per_scene": EPISODES_PER_SCENE,
                 "eval": {"agent": "oracle", "mode": "strict", "sensors": "rgb 128x128 + depth 128x128"},
                 "generate": {"task": "fine_grained"}}
    runs = _configs()
    if any(engine == "ray" for _, _, engine in runs):
        t0 = time.perf_counter()
        connect_ray(None, num_cpus=2)
        out["ray_init_s"] = round(time.perf_counter() - t0, 2)
    with tempfile.TemporaryDirectory(prefix="vlnverse-bench-scale-") as tmp:
        tmp = Path(tmp)
        serial_files = None
        for label, workers, engine in runs:
            dest = tmp / f"data_{label}"
            _fresh_process_state()
            t0 = time.perf_counter()
            generate_dataset("fine_grained", scenes, GENERATE_EPISODES_PER_SCENE, seed, dest, progress=False,
                             workers=workers, engine=engine)
            elapsed = time.perf_counter() - t0
            files = {p.name: p.read_bytes() for p in dest.glob("*.jsonl")}
            serial_files = files if serial_files is None else serial_files
            out["generate"][label] = {"workers": workers, "engine": engine, "seconds": round(elapsed, 2),
                                      "scenes_per_min": round(60 * len(scenes) / elapsed, 2),
                                      "identical_files": files == serial_files}
        episodes = tmp / "eval_episodes.jsonl"
        per_scene: dict = {}
        for episode in load_episodes(tmp / "data_serial"):
            per_scene.setdefault(episode.scene_id, []).append(episode)
        save_episodes(episodes, [e for eps in per_scene.values() for e in eps[:EPISODES_PER_SCENE]])
        serial_records = None
        for label, workers, engine in runs:
            cfg = EvalConfig(agent=NamedSpec("oracle"), task="fine_grained", episodes=EpisodeSource(path=str(episodes)),
                             collision_mode="strict", out=str(tmp / f"eval_{label}"), seed=seed,
                             sensors=[SensorConfig("rgb", "rgb", 128, 128), SensorConfig("depth", "depth", 128, 128)],
                             report=ReportConfig(enabled=False))
            cfg.validate()
            _fresh_process_state()
            t0 = time.perf_counter()
            summary = run_eval(cfg, progress=False, print_summary=False, workers=workers, engine=engine)
            elapsed = time.perf_counter() - t0
            records = [json.loads(line) for line in (Path(cfg.out) / EPISODES_FILE).read_text().splitlines()]
            serial_records = _comparable(records) if serial_records is None else serial_records
            out["eval"][label] = {"workers": workers, "engine": engine, "seconds": round(elapsed, 2),
                                  "episodes": len(records), "episodes_per_min": round(60 * len(records) / elapsed, 2),
                                  "SR": summary["overall"]["means"].get("SR"),
                                  "identical_records": _comparable(records) == serial_records}
    for section, rate in (("generate", "scenes_per_min"), ("eval", "episodes_per_min")):
        base = out[section]["serial"][rate]
        for label, _, _ in runs:
            out[section][label]["speedup"] = round(out[section][label][rate] / base, 2)
    out["load_average_1m_after"] = round(os.getloadavg()[0], 2)
    if "ray_init_s" in out:
        import ray

        ray.shutdown()
    return out
