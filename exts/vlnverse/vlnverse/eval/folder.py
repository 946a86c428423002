"""An eval run's folder: its files, its episodes (resumed, loaded or generated) and dataset folder,
the resumable episode log and the config record staged until the first episode."""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError
from ..core.io import write_bytes_atomic, write_json_atomic
from ..run.episodes import RunSettings, generate_episodes
from ..run.records import _parse_record, is_evaluated
from .config import EvalConfig

log = logging.getLogger(__name__)

EPISODES_FILE = "episodes.jsonl"
INPUT_FILE = "input_episodes.jsonl"
SUMMARY_FILE = "summary.json"
CONFIG_FILE = "config.json"


# --------------------------------------------------------------------------------------------
# episodes


def resolve_episodes(cfg: EvalConfig, settings: RunSettings, out: Path, *, progress: bool = True) -> list:
    """The run's episodes: reloaded from ``out/input_episodes.jsonl`` when resuming, else loaded
    from ``episodes.path``, a benchmark's split or generated into ``out/dataset`` (the generated
    ones in the config's ``language``), filtered to the config's task (and ``split``), and saved."""
    from ..tasks.episode import load_episodes, save_episodes

    saved = out / INPUT_FILE
    resuming = saved.is_file() and (out / CONFIG_FILE).is_file()  # without a config record: a failed start
    if resuming:
        episodes = load_episodes(saved)
    elif cfg.benchmark is not None:  # its split, made and checked on first use; scene paths kept portable
        episodes = cfg.check_benchmark().episodes(cfg.benchmark_split(), progress=progress, resolve=False,
                                                  language=cfg.language_overrides() or None, task=cfg.task)
    elif cfg.episodes.path is not None:
        path = Path(cfg.episodes.path)
        if not path.exists():
            raise ConfigError("episode file or folder not found", field="episodes.path", expected="an existing JSONL file/folder",
                              file=path)
        episodes = load_episodes(path)
    else:
        gen = cfg.episodes.generate
        episodes = generate_episodes(gen.task or cfg.task, gen.scenes, gen.episodes_per_scene, gen.seed,
                                     out / "dataset", body=cfg.body, max_scenes=gen.max_scenes, progress=progress,
                                     render=cfg.render.options(), overrides=cfg.language_overrides())
    if cfg.split is not None:
        episodes = [e for e in episodes if e.split == cfg.split]
    matching = [e for e in episodes if e.task_type == settings.task_type]
    if episodes and not matching:
        raise ConfigError(f"no '{settings.task_type}' episodes in the episode source", field="task",
                          expected=f"one of {sorted({e.task_type for e in episodes})}")
    episodes = matching
    if not episodes:
        raise ConfigError("no episodes to evaluate", field="episodes", expected="at least one episode")
    if not resuming:
        save_episodes(saved, episodes)  # all of them (portable scene paths): ``limit`` may change between resumes
    return episodes[:cfg.limit] if cfg.limit is not None else episodes


def benchmark_record(cfg: EvalConfig) -> dict[str, Any] | None:
    """``{name, version, split}`` of the run's benchmark (None without one): what ``config.json``
    and ``summary.json`` record."""
    return None if cfg.benchmark is None else cfg.check_benchmark().identity(cfg.split)


def episode_scene_roots(cfg: EvalConfig, out: Path) -> list[Path]:
    """Where the run's episode scenes are looked up: ``scene_root``, the dataset's folder, the shipped scenes."""
    from ..tasks.scene_roots import scene_roots

    explicit = [cfg.scene_root] if isinstance(cfg.scene_root, str) else list(cfg.scene_root or [])
    if cfg.benchmark is not None:  # the benchmark's episodes name their homes relative to its scenes folder
        explicit.append(cfg.check_benchmark().scenes_folder(cfg.benchmark_split()))
    return scene_roots(explicit, dataset_folder(cfg, out))


def dataset_folder(cfg: EvalConfig, out: Path) -> Path:
    """The folder of the run's dataset: ``episodes.path`` (its folder), the benchmark split's
    episodes folder (of another task than the benchmark's: its ``task_folder``), or ``out/dataset``
    where ``episodes: generate`` writes the episodes and their assets (prior videos, reference images)."""
    if cfg.benchmark is not None:
        bench, split = cfg.check_benchmark(), cfg.benchmark_split()
        if cfg.task != bench.task:
            return bench.task_folder(split, cfg.task, cfg.language_overrides() or None, progress=False)
        return bench.cache_folder(split) / "episodes"
    if cfg.episodes.path is not None:
        source = Path(cfg.episodes.path)
        return source if source.is_dir() else source.parent
    return out / "dataset"


# --------------------------------------------------------------------------------------------
# resumable episode log


def drop_not_evaluated(path: Path, records: list[dict]) -> list[dict]:
    """Remove the not-evaluated records from the episode log (atomically) so a resumed run
    evaluates those episodes again; returns the records kept."""
    ids = {r["episode_id"] for r in records if not is_evaluated(r)}
    if not ids:
        return records
    lines = [line for line in path.read_bytes().splitlines(keepends=True)
             if line.strip() and (_parse_record(line) or {}).get("episode_id") not in ids]
    write_bytes_atomic(path, b"".join(lines))
    log.info("%s: %d episode(s) not evaluated before are run again", path, len(ids))
    return [r for r in records if r["episode_id"] not in ids]


#: The config record of a run that has not written an episode yet (see ``stage_config_record``).
PENDING_CONFIG_FILE = ".config.pending.json"


def stage_config_record(out: Path, record: dict) -> None:
    """Stage the run's config record; it becomes ``config.json`` with the first episode record
    (``commit_config_record``), so a config that fails at run time (a bad ``mode_params`` value,
    a scene that does not load) leaves no record behind and the corrected config is not refused."""
    if (out / CONFIG_FILE).is_file():
        return
    write_json_atomic(out / PENDING_CONFIG_FILE, record)


def commit_config_record(out: Path) -> None:
    """Promote the staged config record to ``config.json`` (no-op when there is none)."""
    pending = out / PENDING_CONFIG_FILE
    if pending.is_file() and not (out / CONFIG_FILE).is_file():
        os.replace(pending, out / CONFIG_FILE)
