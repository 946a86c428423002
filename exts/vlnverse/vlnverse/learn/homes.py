"""Training on procedurally generated homes, and the guard that keeps them apart from held-out homes.

``train: {homes: N, seed: S, episodes_per_home: K}`` (``HomesSource``) trains on N homes of the
scene generator (``scenes.procgen.generate_home``, seeds S … S+N−1, scene ids ``gen_<seed>``),
each with K episodes of the config's task, ``val_seen_fraction`` of them held out as ``val_seen``
(the same block under ``val: {val_seen: ...}`` gives those: same homes, disjoint episodes; with
``val_seen_episodes: M`` there, a subset of at most M of them drawn with the run's ``seed``,
``seeded_subset``, the episodes ``bench train`` holds out). They are made on demand, deterministically by seed, into
``<cache dir>/homes/<key hash>/`` (``scenes/`` USD files, ``episodes/`` the dataset, ``done.json``
with the seconds spent per home) and reused; nothing is shipped. Homes and episodes are made with
``workers`` processes (``vlnverse.core.jobs``); the files do not depend on the count.

The split guard (``check_disjoint_homes``) refuses a train split that shares a home with
``val_unseen`` or ``test`` -- by scene id, or by content (``scenes.description.scene_content_hash(portable=True)``:
the geometry and labels, whatever the scene id or file format), since the generator with a held-out home's seed
makes that home again under another name.
"""
from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..core.config import require
from ..core.errors import ConfigError
from ..scenes.home_jobs import home_scene_id  # noqa: F401  (the training homes' scene ids)

#: Default first seed of training homes: far from the shipped homes' seeds (1-35).
DEFAULT_HOMES_SEED = 1000
#: Held-out episode splits a train split may not share homes with.
HELD_OUT_SPLITS = ("val_unseen", "test")


@dataclass
class HomesSource:
    """``homes`` generated homes (seeds ``seed`` … ``seed + homes - 1``) with ``episodes_per_home``
    episodes each, split ``train`` / ``val_seen`` by ``val_seen_fraction`` (see the module docstring)."""

    homes: int
    seed: int = DEFAULT_HOMES_SEED
    episodes_per_home: int = 10
    min_rooms: int = 4
    max_rooms: int = 12
    val_seen_fraction: float = 0.25
    #: under ``val.val_seen`` only: at most this many of the held-out episodes, a subset drawn with
    #: the run's ``seed`` (``seeded_subset``); null: all of them
    val_seen_episodes: int | None = None

    def validate(self) -> None:
        """Positive counts, a seed >= 0, a room range the generator accepts."""
        require(isinstance(self.homes, int) and 1 <= self.homes <= 10_000, "homes", f"got {self.homes!r}",
                "an integer in 1..10000")
        require(isinstance(self.seed, int) and self.seed >= 0, "seed", f"got {self.seed!r}", "an integer >= 0")
        require(isinstance(self.episodes_per_home, int) and self.episodes_per_home >= 1, "episodes_per_home",
                f"got {self.episodes_per_home!r}", "a positive integer")
        require(4 <= self.min_rooms <= self.max_rooms <= 12, "min_rooms", f"got {self.min_rooms}..{self.max_rooms}",
                "4 <= min_rooms <= max_rooms <= 12")
        require(0.0 <= self.val_seen_fraction < 1.0, "val_seen_fraction", f"got {self.val_seen_fraction!r}",
                "a fraction in [0, 1)")
        require(self.val_seen_episodes is None or (isinstance(self.val_seen_episodes, int)
                                                   and not isinstance(self.val_seen_episodes, bool)
                                                   and self.val_seen_episodes >= 1),
                "val_seen_episodes", f"got {self.val_seen_episodes!r}", "a positive integer or null")

    def key(self, task: str, body: str | None) -> dict[str, Any]:
        """What the generated homes and episodes depend on."""
        from ..scenes.procgen import GENERATOR_VERSION

        return {"homes": self.homes, "seed": self.seed, "episodes_per_home": self.episodes_per_home,
                "rooms": [self.min_rooms, self.max_rooms], "val_seen_fraction": self.val_seen_fraction, "task": task, "body": body,
                "generator_version": GENERATOR_VERSION}


def seeded_subset(items: list, seed: int, cap: int) -> list:
    """At most ``cap`` of ``items``, drawn without replacement with ``seed``, in their order."""
    import numpy as np

    keep = sorted(np.random.default_rng(seed).choice(len(items), min(cap, len(items)), replace=False).tolist())
    return [items[i] for i in keep]


def hold_out_seen(episodes: list, seed: int, cap: int) -> tuple[list, list]:
    """(train, val_seen) of generated episodes: the train ones, and a seeded subset of at most
    ``cap`` of the val_seen ones (``seeded_subset``: the generator holds each out with a
    probability); when it held none out and there are two train episodes or more, one seeded
    train episode moves to val_seen (every task of the multi-task row needs a val_seen split)."""
    import numpy as np

    train = [e for e in episodes if e.split == "train"]
    seen = [e for e in episodes if e.split == "val_seen"]
    if not seen and len(train) >= 2:
        from dataclasses import replace

        i = int(np.random.default_rng(seed).integers(len(train)))
        return train[:i] + train[i + 1:], [replace(train[i], split="val_seen")]
    return train, seeded_subset(seen, seed, cap)


#: fingerprints remembered in this process (file key -> fingerprint)
_MEMO: dict[str, str] = {}


def _is_usd(path: Path) -> bool:
    from ..scenes.usd_io import USD_SUFFIXES

    return path.suffix.lower() in USD_SUFFIXES and path.is_file()


def _fingerprint_of(path: Path, loader: Callable[[str], Any], memo: dict[str, str]) -> str:
    stat = path.stat()
    key = f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
    if key not in memo:
        from ..scenes.description import scene_content_hash

        memo[key] = scene_content_hash(loader(str(path)), portable=True)
    return memo[key]


def _memo_file(cache_dir: Any) -> Path:
    from .cache import cache_root

    return cache_root(cache_dir) / "homes" / "fingerprints.json"


def _read_memo(cache_dir: Any) -> dict[str, str]:
    path = _memo_file(cache_dir)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _write_memo(cache_dir: Any, memo: dict[str, str]) -> None:
    from ..core.io import write_json_atomic

    path = _memo_file(cache_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, memo)


def held_out_scenes(val: dict[str, list]) -> dict[str, list[Path]]:
    """USD files per held-out split: the shipped ``val_unseen`` and ``test`` scenes, plus the scenes
    of the config's own ``val_unseen`` / ``test`` episodes."""
    from ..scenes.splits import load_splits, scene_file

    out: dict[str, list[Path]] = {name: [] for name in HELD_OUT_SPLITS}
    try:
        shipped = load_splits()
    except (ConfigError, FileNotFoundError):
        shipped = {}
    for name in HELD_OUT_SPLITS:
        for scene_id in shipped.get(name, []):
            path = scene_file(scene_id)
            if path is not None:
                out[name].append(path)
        for ep in val.get(name, []):
            out[name].append(Path(ep.scene_path))
    return {name: list(dict.fromkeys(paths)) for name, paths in out.items()}


def check_disjoint_homes(train: list, held_out: dict[str, list[Path]], *, loader: Callable[[str], Any] | None = None,
                         cache_dir: Any = None) -> None:
    """Raise ``ConfigError`` (field ``train``) when a training episode's home is a held-out home:
    the same scene id, or the same content (``scene_content_hash(portable=True)``) under another id or file.
    ``loader(path)`` gives a scene description (default: ``scenes.usd_io.load_scene``);
    fingerprints are remembered in ``<cache dir>/homes/fingerprints.json`` by file, size and mtime."""
    if loader is None:
        from ..scenes.usd_io import load_scene

        loader = load_scene
    train_ids: dict[str, Path] = {}
    for ep in train:
        train_ids.setdefault(str(ep.scene_id), Path(ep.scene_path))
    for name, paths in held_out.items():
        shared = sorted(set(train_ids) & {p.stem for p in paths})
        if shared:
            raise ConfigError(f"the train split shares homes with {name}: {shared}", field="train",
                              expected=f"training homes disjoint from {' and '.join(HELD_OUT_SPLITS)}")
    train_files = {scene_id: path for scene_id, path in train_ids.items() if _is_usd(path)}
    if not train_files:  # nothing on disk to compare (e.g. scenes built in memory)
        return
    memo = {**_read_memo(cache_dir), **_MEMO}
    before = dict(memo)
    mine = {}
    try:
        for scene_id, path in train_files.items():
            mine.setdefault(_fingerprint_of(path, loader, memo), scene_id)
        for name, paths in held_out.items():
            for path in paths:
                if not _is_usd(path):
                    continue
                fp = _fingerprint_of(path, loader, memo)
                if fp in mine:
                    raise ConfigError(f"the train split's home '{mine[fp]}' is {name} home '{path.stem}' "
                                      f"({path.name}) under another name", field="train",
                                      expected=f"training homes disjoint from {' and '.join(HELD_OUT_SPLITS)} "
                                               "(e.g. another homes seed)")
    finally:
        _MEMO.update(memo)
        if memo != before:
            _write_memo(cache_dir, memo)


def homes_dataset(spec: HomesSource, *, task: str, body: str | None, cache_dir: Any, progress: bool = True,
                  workers: int = 1, report: Callable[[str], None] = print,
                  overrides: dict | None = None) -> tuple[list, Path, dict[str, Any]]:
    """The episodes of ``spec`` (generated when missing; ``overrides``: the task's config overrides,
    part of the cache key only when given), the dataset folder, and ``done.json``'s figures
    (``seconds_per_home``: generating and writing one home; ``seconds_episodes``;
    ``fingerprints``: {scene id: ``home_file_fingerprint``} of every home, as read back)."""
    from ..core.io import write_json_atomic
    from ..tasks.dataset import generate_dataset, simulator_renderer_factory
    from ..tasks.episode import load_episodes
    from ..tasks.instructions.languages import generation_key
    from .cache import keyed_folder

    key = spec.key(task, body)
    key.update(generation_key(overrides))
    folder = keyed_folder(cache_dir, "homes", key)
    done = folder / "done.json"
    if done.is_file():
        info = json.loads(done.read_text(encoding="utf-8"))
        report(f"training homes: reusing {spec.homes} homes in {folder}")
        return load_episodes(folder / "episodes"), folder, info
    if folder.exists():
        shutil.rmtree(folder)
    from ..scenes.home_jobs import generate_home_files, home_scene_id

    t0 = time.perf_counter()
    seeds = list(range(spec.seed, spec.seed + spec.homes))
    made = generate_home_files(seeds, folder / "scenes", min_rooms=spec.min_rooms, max_rooms=spec.max_rooms,
                               workers=workers, progress=progress, desc="training homes", fingerprint=True)
    paths = [Path(made[s]["path"]) for s in seeds]
    t_homes = time.perf_counter() - t0
    generate_dataset(task, paths, spec.episodes_per_home, spec.seed, folder / "episodes", body=body,
                     overrides=overrides or None, val_seen_fraction=spec.val_seen_fraction, default_split="train", progress=progress,
                     renderer_factory=simulator_renderer_factory(), workers=workers)
    info = {"key": key, "seconds_per_home": round(t_homes / spec.homes, 3), "seconds_homes": round(t_homes, 1),
            "seconds_episodes": round(time.perf_counter() - t0 - t_homes, 1), "workers": workers,
            "fingerprints": {home_scene_id(s): made[s]["fingerprint"] for s in seeds}}
    write_json_atomic(done, info)
    report(f"training homes: generated {spec.homes} homes in {t_homes:.1f} s ({info['seconds_per_home']} s a home "
           f"of wall time with {workers} worker(s)) "
           f"and their episodes in {info['seconds_episodes']} s ({workers} worker(s)) into {folder}")
    return load_episodes(folder / "episodes"), folder, info
