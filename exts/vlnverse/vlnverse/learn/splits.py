"""Training episodes: a config's episode source (file, generate block or generated homes) resolved to
one split of one task type."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from ..core.errors import ConfigError


def resolve_split(source: Any, *, split: str | None, task_type: str, task: str, body: str | None, cache_dir: Any,
                  field: str, progress: bool, resolve_scenes: bool = True, scene_root: Any = None,
                  workers: int = 1, report: Callable[[str], None] = print, info: dict | None = None,
                  seed: int = 0, overrides: dict | None = None) -> list:
    """Episodes of ``source`` (path, generate block or ``HomesSource``) of the task type, filtered
    to ``split`` when any episode carries that split; none left is a ``ConfigError`` naming
    ``field``. With ``resolve_scenes`` each episode's portable ``scene_path`` becomes its USD file
    (looked up in ``scene_root``, the dataset's folder, then the shipped scenes), as the eval runner
    does. Generated homes (made with ``workers``) put their figures into ``info``; their
    ``val_seen_episodes`` keeps a subset of the val_seen episodes drawn with ``seed``. ``overrides``
    (the task's config overrides, e.g. the config's instruction language) apply to what is
    generated; an episode file is read as it is."""
    from ..tasks.episode import load_episodes
    from ..tasks.scene_roots import resolve_episode_scenes, scene_roots
    from .homes import HomesSource, homes_dataset, seeded_subset

    if isinstance(source, HomesSource):
        episodes, folder, figures = homes_dataset(source, task=task, body=body, cache_dir=cache_dir, progress=progress,
                                                  workers=workers, report=report, overrides=overrides)
        if info is not None:
            info.update(figures, folder=str(folder))
        dataset_dir = folder / "episodes"
    elif source.path is not None:
        if not Path(source.path).exists():
            raise ConfigError("episode file or folder not found", field=f"{field}.path", file=source.path,
                              expected="an existing JSONL file/folder")
        episodes = load_episodes(source.path)
        dataset_dir = Path(source.path) if Path(source.path).is_dir() else Path(source.path).parent
    else:
        from .cache import generated_episodes

        episodes = generated_episodes(source.generate, task=task, body=body, cache_dir=cache_dir, progress=progress,
                                      overrides=overrides)
        dataset_dir = None
    episodes = [e for e in episodes if e.task_type == task_type]
    if split is not None and any(e.split == split for e in episodes):
        episodes = [e for e in episodes if e.split == split]
        if isinstance(source, HomesSource) and source.val_seen_episodes is not None and split == "val_seen":
            episodes = seeded_subset(episodes, seed, source.val_seen_episodes)
    elif split is not None and episodes and (field == "train" or field.endswith("].train")):  # a 'tasks' entry's too
        raise ConfigError(f"no '{split}' episodes (splits: {sorted({e.split for e in episodes})})", field="train_split")
    if not episodes:
        raise ConfigError(f"empty split: no '{task_type}' episodes", field=field, expected="at least one episode")
    return resolve_episode_scenes(episodes, scene_roots(scene_root, dataset_dir)) if resolve_scenes else episodes
