"""Named, versioned benchmarks of generated homes: defined by one small file, made on first use.

A benchmark (``scenes_usd/benchmarks/<name>.json``, see ``docs/benchmark.md``) fixes everything
its homes and episodes are made from: the scene generator's version, the room range, three
disjoint seed ranges (``train``, ``val_unseen``, ``test``; the home of seed ``s`` is
``scenes.procgen.generate_home(s)`` with scene id ``gen_<s:05d>``), the task, body and episode
seed, the episodes per home of each split, and what must come out: each home's content
fingerprint (``scenes.description.scene_content_hash(portable=True)`` of the home read back from
its file) and, per held-out split, the SHA-256 of its episodes file. Nothing bulky is shipped.

``Benchmark.scenes(split)`` / ``episodes(split)`` generate a held-out split on first use into
``<cache>/<name>-v<version>/<split>/`` (``scenes/``, ``episodes/<split>.jsonl``, ``done.json``),
check every home and the episodes file against the definition -- a mismatch is a one-line
``ConfigError`` naming the definition file, the home and the field -- and only then move the
folder into place (``core.io.atomic_dir``): a failed or interrupted build leaves nothing that
looks valid. The train pool is not made here: training homes are ``learn.homes.HomesSource(homes=N,
seed=Benchmark.train_seeds(N)[0])``, and ``check_fingerprints("train", files)`` checks them.

Definitions are written by ``tools/make_benchmark.py`` (``make_definition``), never by hand.
"""
from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..core.cache_key import sha256_file
from ..core.errors import ConfigError, UnknownNameError

#: Version of the definition file's layout (``format``).
FORMAT = 1
#: The splits of a benchmark, and those made here (held out from training).
SPLITS = ("train", "val_unseen", "test")
HELD_OUT = ("val_unseen", "test")
#: The fewest homes any definition may have per split: a held-out split needs two homes for the
#: spread between homes to be estimated at all.
MIN_HOMES = {"train": 1, "val_unseen": 2, "test": 2}
#: The fewest homes of a benchmark shipped with the toolkit (``scenes_usd/benchmarks/``).
SHIPPED_MIN_HOMES = {"train": 300, "val_unseen": 20, "test": 20}
#: The most homes per split, and episodes per home.
MAX_HOMES = 100_000
MAX_EPISODES_PER_HOME = 10_000
#: Namespace and version of the cache key of a built split (bump when what is stored changes).
CACHE_NAMESPACE, CACHE_VERSION = "benchmark", 1
#: Version of how a held-out split is re-instructed in another language (bump when it changes;
#: the wording's own revision is part of the key: ``instructions.languages.wording_key``).
LANGUAGE_VERSION = 1

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def benchmarks_dir() -> Path:
    """Folder of the shipped benchmark definitions (``scenes_usd/benchmarks/``)."""
    from ..paths import scenes_dir

    return scenes_dir() / "benchmarks"


def shipped_benchmarks() -> list[str]:
    """Names of the shipped benchmarks."""
    try:
        folder = benchmarks_dir()
    except FileNotFoundError:
        return []
    return sorted(p.stem for p in folder.glob("*.json"))


def benchmark_cache_root(cache_dir: str | Path | None = None) -> Path:
    """``cache_dir``, else ``<vlnverse cache>/benchmarks`` (``VLNVERSE_CACHE`` moves it)."""
    from ..paths import cache_dir as user_cache

    return Path(cache_dir) if cache_dir else user_cache() / "benchmarks"


def shipped_home_seeds() -> dict[int, str]:
    """Seed → split of the homes shipped in ``scenes_usd/`` (``splits.json``'s ``seeds``)."""
    from ..scenes.splits import splits_path

    try:
        data = json.loads(splits_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    seeds = data.get("seeds") if isinstance(data, dict) else None
    return {int(s): split for split, values in (seeds or {}).items() for s in values if isinstance(s, int)}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class Benchmark:
    """A validated benchmark definition (``load_benchmark``); see the module docstring."""

    name: str
    version: int
    path: Path
    generator_version: int
    rooms: tuple[int, int]
    task: str
    body: str | None
    episode_seed: int
    #: ``{split: (first seed, last seed)}``, both included
    seed_ranges: dict[str, tuple[int, int]]
    #: ``{split: episodes per home}``
    episodes_per_home: dict[str, int]
    #: ``{split: {scene id: fingerprint}}`` (the train pool's may be empty: not checked)
    fingerprints: dict[str, dict[str, str]]
    #: ``{held-out split: SHA-256 of its episodes file}``
    episodes_sha256: dict[str, str]
    description: str = ""

    # -- the definition -------------------------------------------------------------------

    def seeds(self, split: str) -> list[int]:
        """The home seeds of ``split``, in order."""
        first, last = self.seed_ranges[self._split(split, SPLITS)]
        return list(range(first, last + 1))

    def scene_ids(self, split: str) -> list[str]:
        """The scene ids (``gen_<seed>``) of ``split``'s homes."""
        from ..scenes.home_jobs import home_scene_id

        return [home_scene_id(s) for s in self.seeds(split)]

    def train_seeds(self, homes: int) -> list[int]:
        """The first ``homes`` seeds of the train pool (``ConfigError`` past its size)."""
        pool = self.seeds("train")
        if not _is_int(homes) or not 1 <= homes <= len(pool):
            raise ConfigError(f"benchmark '{self.name}' has {len(pool)} training homes, asked for {homes!r}",
                              file=self.path, field="splits.train.seeds", expected=f"1..{len(pool)} homes")
        return pool[:homes]

    def to_dict(self) -> dict[str, Any]:
        """The definition as its file holds it."""
        return definition_dict(name=self.name, version=self.version, generator_version=self.generator_version,
                               rooms=self.rooms, task=self.task, body=self.body, episode_seed=self.episode_seed,
                               seed_ranges=self.seed_ranges, episodes_per_home=self.episodes_per_home,
                               fingerprints=self.fingerprints, episodes_sha256=self.episodes_sha256,
                               description=self.description)

    def identity(self, split: str | None = None) -> dict[str, Any]:
        """``{name, version[, split]}``: what a results file records of the benchmark."""
        return {"name": self.name, "version": self.version, **({"split": split} if split else {})}

    def _split(self, split: str, allowed: tuple[str, ...]) -> str:
        if split not in allowed:
            raise ConfigError(f"got {split!r}", file=self.path, field="split",
                              expected=" or ".join(allowed) + (" (training homes: train_seeds / HomesSource)"
                                                               if allowed == HELD_OUT and split == "train" else ""))
        return split

    # -- the held-out splits, made on first use -------------------------------------------

    def split_key(self, split: str) -> dict[str, Any]:
        """What a held-out split's files depend on and must be (the key of its cache folder)."""
        return {"name": self.name, "version": self.version, "generator_version": self.generator_version,
                "rooms": list(self.rooms), "task": self.task, "body": self.body, "episode_seed": self.episode_seed,
                "split": split, "seeds": list(self.seed_ranges[split]),
                "episodes_per_home": self.episodes_per_home[split], "fingerprints": self.fingerprints[split],
                "episodes_sha256": self.episodes_sha256.get(split)}

    def cache_folder(self, split: str, cache_dir: str | Path | None = None) -> Path:
        """``<cache>/<name>-v<version>/<split>``: where ``split`` is (or will be) made."""
        return benchmark_cache_root(cache_dir) / f"{self.name}-v{self.version}" / self._split(split, HELD_OUT)

    def cached(self, split: str, cache_dir: str | Path | None = None) -> bool:
        """Whether ``split`` is made and complete in the cache (files present with the sizes recorded
        when they were checked; ``verify`` re-checks their content)."""
        folder = self.cache_folder(split, cache_dir)
        try:
            done = json.loads((folder / "done.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        if not isinstance(done, dict) or done.get("key") != self.split_key(split):
            return False
        sizes = done.get("sizes") or {}
        expected = [f"scenes/{s}.usd" for s in self.scene_ids(split)] + [f"episodes/{split}.jsonl"]
        try:
            return all(rel in sizes and (folder / rel).stat().st_size == sizes[rel] for rel in expected)
        except OSError:
            return False

    def build(self, split: str, *, cache_dir: str | Path | None = None, workers: int = 1,
              progress: bool = True) -> Path:
        """Make ``split`` in the cache unless it is there already; returns its folder. Every home and
        the episodes file are checked against the definition before the folder is moved into place."""
        from ..core.io import atomic_dir, write_json_atomic

        folder = self.cache_folder(split, cache_dir)
        if self.cached(split, cache_dir):
            return folder
        with atomic_dir(folder, keep=lambda _: self.cached(split, cache_dir)) as tmp:  # runs sharing the cache
            done = make_split(self, split, tmp, workers=workers, progress=progress, check=True)
            write_json_atomic(tmp / "done.json", {**done, "key": self.split_key(split)})
        return folder

    def scenes(self, split: str, *, cache_dir: str | Path | None = None, workers: int = 1,
               progress: bool = True) -> list[Path]:
        """The USD files of a held-out split's homes (made and checked on first use), in seed order."""
        folder = self.build(split, cache_dir=cache_dir, workers=workers, progress=progress)
        return [folder / "scenes" / f"{s}.usd" for s in self.scene_ids(split)]

    def episodes(self, split: str, *, cache_dir: str | Path | None = None, workers: int = 1,
                 progress: bool = True, resolve: bool = True, language: dict | None = None,
                 task: str | None = None) -> list:
        """A held-out split's episodes (made and checked on first use). ``resolve``: each
        ``scene_path`` is the home's file; else as stored, relative to ``scenes_folder(split)``.
        ``language``: the task's ``params`` overrides of another instruction language (e.g.
        ``{"params.instruction_version": 2}``): the same episodes re-instructed in it
        (``language_file``), with ``params.language_split`` and val_unseen followed by the
        ``val_unseen_language`` twins. ``task``: another task than the definition's, its episodes
        generated on the same homes (``task_folder``; ``language`` as that task's overrides)."""
        from .episode import LANGUAGE_SPLIT, load_episodes

        folder = self.build(split, cache_dir=cache_dir, workers=workers, progress=progress)
        if task not in (None, self.task):
            made = self.task_folder(split, task, language, cache_dir=cache_dir, workers=workers, progress=progress)
            files = [made / f"{s}.jsonl" for s in (split, LANGUAGE_SPLIT if split == "val_unseen" else None) if s]
            episodes = [e for f in files if f.is_file() for e in load_episodes(f)]
        else:
            episodes = load_episodes(self.language_file(split, language, cache_dir=cache_dir, progress=progress)
                                     if language else folder / "episodes" / f"{split}.jsonl")
        if not resolve:
            return episodes
        return [replace(ep, scene_path=str(folder / "scenes" / ep.scene_path)) for ep in episodes]

    def language_key(self, split: str, language: dict) -> dict[str, Any]:
        """What a held-out split re-instructed in ``language`` depends on (its cache folder's key)."""
        from .instructions.languages import wording_key

        return {"split": self.split_key(split), "language": dict(sorted(language.items())),
                "language_version": LANGUAGE_VERSION, **wording_key(language)}

    def language_file(self, split: str, language: dict, *, cache_dir: str | Path | None = None,
                      progress: bool = True) -> Path:
        """The episodes file of ``split`` re-instructed in ``language`` (task ``params`` overrides),
        made once into ``<cache>/<name>-v<version>/<split>-language-<key>/``: every episode keeps its
        id, home, start, goals and reference path (the definition's, checked by ``build``); only its
        instructions are made again by the task's ``reworded`` with a generator seeded by
        ``episode_seed`` and the episode's line, so the bytes are the same on every build. An
        episode whose path gets no verified wording is left out, its id listed in ``done.json``'s
        ``unworded``. The version-1 files are not touched."""
        import numpy as np

        from ..core.io import atomic_dir, write_json_atomic
        from .base import TASKS, load_scene_context, load_task_config, load_task_types
        from .episode import load_episodes, save_episodes

        key = self.language_key(split, language)
        folder, made = self._derived_folder(split, "language", key, cache_dir)
        out = folder / "episodes.jsonl"
        if made and out.is_file():
            return out
        source = self.build(split, cache_dir=cache_dir, progress=progress)
        load_task_types()
        config = load_task_config(self.task, language)
        generator = TASKS.get(self.task)(config)
        if not hasattr(generator, "reworded"):
            raise ConfigError(f"task '{self.task}' cannot re-instruct episodes", file=self.path, field="task.type",
                              expected="fine_grained (the task with another instruction language)")
        from ..core.body import as_body

        body = as_body(self.body or config.body)
        from tqdm import tqdm

        made, unworded = [], []
        original = load_episodes(source / "episodes" / f"{split}.jsonl")
        for line, episode in enumerate(tqdm(original, desc=f"{self.name} {split} language", unit="episode",
                                            disable=not progress)):
            ctx = load_scene_context(source / "scenes" / episode.scene_path, body, resolution=config.map_resolution)
            got = generator.reworded(ctx, episode, np.random.default_rng([self.episode_seed, line]))
            made += got
            if not got:
                unworded.append(episode.episode_id)
        with atomic_dir(folder, keep=lambda _: self._derived_folder(split, "language", key, cache_dir)[1]) as tmp:
            save_episodes(tmp / "episodes.jsonl", made)
            write_json_atomic(tmp / "done.json", {"key": key, "episodes": len(made), "unworded": unworded,
                                                  "episodes_sha256": sha256_file(tmp / "episodes.jsonl")})
        return out

    def task_folder(self, split: str, task: str, overrides: dict | None = None, *,
                    cache_dir: str | Path | None = None, workers: int = 1, progress: bool = True) -> Path:
        """The episodes folder (``<split>.jsonl``, with val_unseen and ``params.language_split`` also
        ``val_unseen_language.jsonl``) of ``task``, another task than the definition's, on
        ``split``'s homes: generated once with the definition's body, episode seed and episodes per
        home (``overrides``: the task's config overrides) into
        ``<cache>/<name>-v<version>/<split>-<task>-<key>/``; the same bytes on every build. The
        definition's own episodes are not touched."""
        from ..core.io import atomic_dir, write_json_atomic
        from .dataset import generate_dataset, simulator_renderer_factory
        from .instructions.languages import generation_key

        key = {"split": self.split_key(split), "task": task, **generation_key(overrides)}
        folder, made = self._derived_folder(split, task, key, cache_dir)
        if made:
            return folder / "episodes"
        source = self.build(split, cache_dir=cache_dir, workers=workers, progress=progress)
        scenes = [source / "scenes" / f"{s}.usd" for s in self.scene_ids(split)]
        with atomic_dir(folder, keep=lambda _: self._derived_folder(split, task, key, cache_dir)[1]) as tmp:
            summary = generate_dataset(task, scenes, self.episodes_per_home[split], self.episode_seed, tmp / "episodes",
                                       body=self.body, overrides=overrides or None, val_seen_fraction=0.0,
                                       default_split=split, progress=progress,
                                       renderer_factory=simulator_renderer_factory(), scene_root=source / "scenes",
                                       workers=workers)
            require_episodes(self, tmp / "episodes" / f"{split}.jsonl", f"{task} episodes", split)
            write_json_atomic(tmp / "done.json", {"key": key, "episodes": summary.get("counts")})
        return folder / "episodes"

    def _derived_folder(self, split: str, label: str, key: dict, cache_dir: str | Path | None) -> tuple[Path, bool]:
        """``(folder, made)``: where files derived from ``split`` (re-instructed, another task) and
        keyed by ``key`` live, ``<cache>/<name>-v<version>/<split>-<label>-<hash of key>/``, and
        whether its ``done.json`` records that key (a finished build)."""
        from ..core.cache_key import content_key

        name = f"{split}-{label}-{content_key(CACHE_NAMESPACE, LANGUAGE_VERSION, key, length=12)}"
        folder = self.cache_folder(split, cache_dir).parent / name
        try:
            made = json.loads((folder / "done.json").read_text(encoding="utf-8")).get("key") == key
        except (OSError, ValueError, AttributeError):
            made = False
        return folder, made

    def scenes_folder(self, split: str, cache_dir: str | Path | None = None) -> Path:
        """The folder of a held-out split's homes (the scene root of its episodes)."""
        return self.cache_folder(split, cache_dir) / "scenes"

    # -- checks ---------------------------------------------------------------------------

    def check_fingerprints(self, split: str, found: dict[str, str]) -> None:
        """Refuse (``ConfigError`` naming the definition file, the home and the field) the first home
        of ``found`` ({scene id: fingerprint}) whose fingerprint is not the definition's."""
        expected = self.fingerprints[self._split(split, SPLITS)]
        for scene_id, fingerprint in found.items():
            want = expected.get(scene_id)
            if want is None:
                if expected:
                    raise ConfigError(f"home '{scene_id}' is not in {split}", file=self.path,
                                      field=f"splits.{split}.homes", expected=f"one of the {len(expected)} homes")
                continue  # a pool without fingerprints
            if fingerprint != want:
                raise ConfigError(f"home '{scene_id}' generated here has fingerprint {fingerprint[:16]}..., the "
                                  f"definition {want[:16]}...", file=self.path, field=f"splits.{split}.homes.{scene_id}",
                                  expected="the same home (this vlnverse's scene generator makes another one)")

    def check_episodes(self, split: str, episodes_file: Path) -> None:
        """Refuse an episodes file whose SHA-256 is not the definition's (``ConfigError``)."""
        got, want = sha256_file(episodes_file), self.episodes_sha256[split]
        if got != want:
            raise ConfigError(f"the {split} episodes generated here have SHA-256 {got[:16]}..., the definition "
                              f"{want[:16]}...", file=self.path, field=f"splits.{split}.episodes_sha256",
                              expected=f"the same episodes (task '{self.task}' and its config as the definition's)")

    def verify(self, split: str, *, cache_dir: str | Path | None = None, workers: int = 1,
               progress: bool = True) -> dict[str, Any]:
        """Make ``split`` if needed, then re-read every home and the episodes file of the cache and
        check them against the definition (``ConfigError`` on the first mismatch); returns counts."""
        from tqdm import tqdm

        from ..scenes.home_jobs import home_file_fingerprint

        folder = self.build(split, cache_dir=cache_dir, workers=workers, progress=progress)
        ids = self.scene_ids(split)
        for scene_id in tqdm(ids, desc=f"verify {split}", unit="home", disable=not progress):
            self.check_fingerprints(split, {scene_id: home_file_fingerprint(folder / "scenes" / f"{scene_id}.usd")})
        self.check_episodes(split, folder / "episodes" / f"{split}.jsonl")
        return {"split": split, "homes": len(ids), "folder": str(folder)}

    def verify_train(self, homes: int, *, workers: int = 1, progress: bool = True) -> dict[str, Any]:
        """Generate the first ``homes`` training homes into a temporary folder and check their
        fingerprints (when the definition has the pool's)."""
        import tempfile

        from ..scenes.home_jobs import generate_home_files, home_scene_id

        seeds = self.train_seeds(homes)
        if not self.fingerprints["train"]:
            raise ConfigError("the definition has no fingerprints of the train pool", file=self.path,
                              field="splits.train.homes", expected="a definition made with the train pool's")
        with tempfile.TemporaryDirectory(prefix="vlnverse-benchmark-") as tmp:
            made = generate_home_files(seeds, tmp, min_rooms=self.rooms[0], max_rooms=self.rooms[1], fingerprint=True,
                                       workers=workers, progress=progress, desc="train homes")
        self.check_fingerprints("train", {home_scene_id(s): made[s]["fingerprint"] for s in seeds})
        return {"split": "train", "homes": len(seeds)}

    def info(self, cache_dir: str | Path | None = None) -> dict[str, Any]:
        """What ``vlnverse benchmark info`` prints: per split the seeds, homes, episodes and cache state."""
        splits = {}
        for split in SPLITS:
            first, last = self.seed_ranges[split]
            homes = last - first + 1
            entry = {"seeds": [first, last], "homes": homes, "episodes_per_home": self.episodes_per_home[split],
                     "episodes": homes * self.episodes_per_home[split], "fingerprints": len(self.fingerprints[split])}
            if split in HELD_OUT:
                entry.update(folder=str(self.cache_folder(split, cache_dir)), cached=self.cached(split, cache_dir))
            splits[split] = entry
        return {"name": self.name, "version": self.version, "file": str(self.path), "description": self.description,
                "generator_version": self.generator_version, "rooms": list(self.rooms), "task": self.task,
                "body": self.body, "episode_seed": self.episode_seed, "splits": splits}


# -----------------------------------------------------------------------------------------
# the definition file


def definition_dict(*, name: str, version: int, generator_version: int, rooms: tuple[int, int] | list[int], task: str,
                    body: str | None, episode_seed: int, seed_ranges: dict[str, tuple[int, int]],
                    episodes_per_home: dict[str, int], fingerprints: dict[str, dict[str, str]] | None = None,
                    episodes_sha256: dict[str, str] | None = None, description: str = "") -> dict[str, Any]:
    """A definition as its file holds it (``format`` 1)."""
    splits = {}
    for split in SPLITS:
        entry: dict[str, Any] = {"seeds": list(seed_ranges[split]), "episodes_per_home": episodes_per_home[split],
                                 "homes": dict(sorted(((fingerprints or {}).get(split) or {}).items()))}
        if split in HELD_OUT:
            entry["episodes_sha256"] = (episodes_sha256 or {}).get(split)
        splits[split] = entry
    return {"format": FORMAT, "name": name, "version": version, "description": description,
            "generator_version": generator_version, "rooms": list(rooms),
            "task": {"type": task, "body": body, "episode_seed": episode_seed}, "splits": splits}


def definition_text(data: dict[str, Any]) -> str:
    """The file's bytes for a definition: sorted keys, two-space indent, one trailing newline."""
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def parse_definition(data: Any, path: Path, *, complete: bool = True, shipped: bool = False) -> Benchmark:
    """A ``Benchmark`` from a definition's JSON value, validated (``ConfigError`` naming ``path`` and
    the field). ``complete=False`` accepts a definition without fingerprints (while it is made);
    ``shipped`` applies ``SHIPPED_MIN_HOMES``."""
    from ..scenes.home_jobs import home_scene_id
    from ..scenes.procgen import GENERATOR_VERSION

    def fail(field_name: str, problem: str, expected: Any = None) -> ConfigError:
        return ConfigError(problem, file=path, field=field_name, expected=expected)

    if not isinstance(data, dict):
        raise fail("", f"got {type(data).__name__}", "a JSON object")
    if data.get("format") != FORMAT:
        raise fail("format", f"got {data.get('format')!r}", f"{FORMAT}")
    known = {"format", "name", "version", "description", "generator_version", "rooms", "task", "splits"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise fail(unknown[0], "unknown field", f"one of {sorted(known)}")
    name = data.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise fail("name", f"got {name!r}", "a lower-case name of letters, digits, '.', '_' or '-'")
    version = data.get("version")
    if not _is_int(version) or version < 1:
        raise fail("version", f"got {version!r}", "an integer >= 1")
    generator = data.get("generator_version")
    if not _is_int(generator):
        raise fail("generator_version", f"got {generator!r}", "an integer")
    if generator != GENERATOR_VERSION:
        raise fail("generator_version", f"benchmark '{name}' was made by scene generator version {generator}; "
                                        f"this vlnverse's generator is version {GENERATOR_VERSION}",
                   f"a definition made by generator version {GENERATOR_VERSION} (tools/make_benchmark.py)")
    rooms = data.get("rooms")
    if not (isinstance(rooms, list) and len(rooms) == 2 and all(_is_int(r) for r in rooms)
            and 4 <= rooms[0] <= rooms[1] <= 12):
        raise fail("rooms", f"got {rooms!r}", "[min, max] with 4 <= min <= max <= 12")
    task_block = data.get("task")
    if not isinstance(task_block, dict) or set(task_block) - {"type", "body", "episode_seed"}:
        raise fail("task", f"got {task_block!r}", "{\"type\": TASK, \"body\": BODY or null, \"episode_seed\": SEED}")
    from .base import TASKS, load_task_types

    task = task_block.get("type")
    if task not in load_task_types():
        raise fail("task.type", f"unknown task {task!r}", f"one of {TASKS.names()}")
    body = task_block.get("body")
    if body is not None:
        from ..core.body import as_body

        if not isinstance(body, str):
            raise fail("task.body", f"got {body!r}", "a body preset name or null (the task's)")
        try:
            as_body(body)
        except (ConfigError, UnknownNameError, FileNotFoundError) as exc:
            raise fail("task.body", str(exc), "a body preset (robots/*.yaml)") from None
    episode_seed = task_block.get("episode_seed")
    if not _is_int(episode_seed) or not 0 <= episode_seed < 2 ** 63:
        raise fail("task.episode_seed", f"got {episode_seed!r}", "an integer in 0..2**63-1")
    splits = data.get("splits")
    if not isinstance(splits, dict) or set(splits) != set(SPLITS):
        raise fail("splits", f"got {sorted(splits) if isinstance(splits, dict) else splits!r}",
                   f"exactly the splits {list(SPLITS)}")
    ranges: dict[str, tuple[int, int]] = {}
    per_home: dict[str, int] = {}
    fingerprints: dict[str, dict[str, str]] = {}
    episodes_sha: dict[str, str] = {}
    minimum = SHIPPED_MIN_HOMES if shipped else MIN_HOMES
    for split in SPLITS:
        entry = splits[split]
        where = f"splits.{split}"
        allowed = {"seeds", "episodes_per_home", "homes"} | ({"episodes_sha256"} if split in HELD_OUT else set())
        if not isinstance(entry, dict) or set(entry) - allowed:
            raise fail(where, f"got {entry!r}" if not isinstance(entry, dict) else
                       f"unknown field(s) {sorted(set(entry) - allowed)}", f"a mapping with {sorted(allowed)}")
        seeds = entry.get("seeds")
        if not (isinstance(seeds, list) and len(seeds) == 2 and all(_is_int(s) and s >= 0 for s in seeds)
                and seeds[0] <= seeds[1]):
            raise fail(f"{where}.seeds", f"got {seeds!r}", "[first, last] with 0 <= first <= last")
        homes = seeds[1] - seeds[0] + 1
        if homes < minimum[split] or homes > MAX_HOMES:
            raise fail(f"{where}.seeds", f"{homes} home(s) ({seeds[0]}..{seeds[1]})",
                       f"{minimum[split]}..{MAX_HOMES} homes in {split}" + (" (a shipped benchmark)" if shipped else ""))
        ranges[split] = (seeds[0], seeds[1])
        n = entry.get("episodes_per_home")
        if not _is_int(n) or not 1 <= n <= MAX_EPISODES_PER_HOME:
            raise fail(f"{where}.episodes_per_home", f"got {n!r}", f"an integer in 1..{MAX_EPISODES_PER_HOME}")
        per_home[split] = n
    _check_disjoint_seeds(ranges, fail)
    for split in SPLITS:
        entry, where = splits[split], f"splits.{split}"
        (first, last), homes = ranges[split], ranges[split][1] - ranges[split][0] + 1
        found = entry.get("homes", {})
        if not isinstance(found, dict) or not all(isinstance(v, str) and _SHA256.match(v) for v in found.values()):
            raise fail(f"{where}.homes", "not a mapping of scene ids to fingerprints",
                       "{\"gen_NNNNN\": 64 hex digits, ...}")
        ids = [home_scene_id(s) for s in range(first, last + 1)]
        must_have = complete and split in HELD_OUT
        if (found or must_have) and set(found) != set(ids):
            missing = sorted(set(ids) - set(found))
            extra = sorted(set(found) - set(ids))
            raise fail(f"{where}.homes", f"missing {missing[:3]}" if missing else f"homes outside the seeds {extra[:3]}",
                       f"a fingerprint for each of the {homes} homes {ids[0]}..{ids[-1]}")
        fingerprints[split] = dict(found)
        if split in HELD_OUT:
            sha = entry.get("episodes_sha256")
            if sha is None and not complete:
                continue
            if not (isinstance(sha, str) and _SHA256.match(sha)):
                raise fail(f"{where}.episodes_sha256", f"got {sha!r}", "64 hex digits")
            episodes_sha[split] = sha
    _check_distinct_homes(fingerprints, fail)
    description = data.get("description", "")
    if not isinstance(description, str):
        raise fail("description", f"got {description!r}", "a string")
    return Benchmark(name=name, version=version, path=path, generator_version=generator, rooms=(rooms[0], rooms[1]),
                     task=task, body=body, episode_seed=episode_seed, seed_ranges=ranges, episodes_per_home=per_home,
                     fingerprints=fingerprints, episodes_sha256=episodes_sha, description=description)


def _check_disjoint_seeds(ranges: dict[str, tuple[int, int]], fail) -> None:
    """Seed ranges overlap neither each other nor the shipped homes' seeds."""
    names = list(SPLITS)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            (a0, a1), (b0, b1) = ranges[a], ranges[b]
            if a0 <= b1 and b0 <= a1:
                raise fail(f"splits.{b}.seeds", f"seeds {max(a0, b0)}..{min(a1, b1)} are in both {a} and {b}",
                           "disjoint seed ranges")
    shipped = shipped_home_seeds()
    for split in names:
        first, last = ranges[split]
        taken = sorted(s for s in shipped if first <= s <= last)
        if taken:
            raise fail(f"splits.{split}.seeds", f"seed {taken[0]} is the shipped {shipped[taken[0]]} home "
                                                f"home_{taken[0]:04d} (scenes_usd/splits.json)",
                       "seeds apart from the shipped homes'")


def _check_distinct_homes(fingerprints: dict[str, dict[str, str]], fail) -> None:
    """No home (fingerprint) in two places."""
    owner: dict[str, str] = {}
    for split in SPLITS:
        for scene_id, fp in fingerprints[split].items():
            if fp in owner:
                raise fail(f"splits.{split}.homes.{scene_id}", f"the same home as {owner[fp]}", "distinct homes")
            owner[fp] = f"{split} home {scene_id}"


def load_benchmark(name_or_path: str | Path) -> Benchmark:
    """The benchmark named ``name_or_path`` (``scenes_usd/benchmarks/<name>.json``) or in that file,
    validated on load (``ConfigError`` naming the file and field; ``UnknownNameError`` lists the
    shipped names)."""
    text = str(name_or_path)
    path = Path(text)
    shipped = False
    if not (path.suffix == ".json" or path.is_file()):
        names = shipped_benchmarks()
        if text not in names:
            raise UnknownNameError("benchmark", text, names)
        path, shipped = benchmarks_dir() / f"{text}.json", True
    from ..core.config import load_json

    data = load_json(path, expected="a benchmark definition (JSON)")
    return parse_definition(data, path, shipped=shipped or path.resolve().parent == _shipped_dir())


def _shipped_dir() -> Path | None:
    try:
        return benchmarks_dir().resolve()
    except FileNotFoundError:
        return None


# -----------------------------------------------------------------------------------------
# making a split (and a definition)


def require_episodes(bench: Benchmark, episodes_file: Path, what: str, split: str) -> None:
    """A one-line ``VLNVerseError`` when generation on ``split``'s homes wrote no ``episodes_file``."""
    if not episodes_file.is_file():
        from ..core.errors import VLNVerseError

        raise VLNVerseError(f"benchmark '{bench.name}': no {what} were generated on its {split} homes")


def make_split(bench: Benchmark, split: str, folder: Path, *, workers: int = 1, progress: bool = True,
               check: bool = True) -> dict[str, Any]:
    """Generate ``split``'s homes into ``folder/scenes`` and its episodes into ``folder/episodes``;
    with ``check``, refuse any that differ from the definition. Returns ``done.json``'s content
    (fingerprints, the episodes' SHA-256, file sizes, seconds)."""
    from ..scenes.home_jobs import generate_home_files, home_scene_id
    from .dataset import generate_dataset, simulator_renderer_factory

    seeds = bench.seeds(split)
    t0 = time.perf_counter()
    made = generate_home_files(seeds, folder / "scenes", min_rooms=bench.rooms[0], max_rooms=bench.rooms[1],
                               fingerprint=True, workers=workers, progress=progress, desc=f"{bench.name} {split} homes")
    found = {home_scene_id(s): made[s]["fingerprint"] for s in seeds}
    if check:
        bench.check_fingerprints(split, found)
    t_homes = time.perf_counter() - t0
    paths = [Path(made[s]["path"]) for s in seeds]
    generate_dataset(bench.task, paths, bench.episodes_per_home[split], bench.episode_seed, folder / "episodes",
                     body=bench.body, val_seen_fraction=0.0, default_split=split, progress=progress,
                     renderer_factory=simulator_renderer_factory(), scene_root=folder / "scenes", workers=workers)
    episodes_file = folder / "episodes" / f"{split}.jsonl"
    require_episodes(bench, episodes_file, "episodes", split)
    if check:
        bench.check_episodes(split, episodes_file)
    sizes = {f"scenes/{p.name}": p.stat().st_size for p in paths}
    sizes[f"episodes/{split}.jsonl"] = episodes_file.stat().st_size
    return {"fingerprints": found, "episodes_sha256": sha256_file(episodes_file), "sizes": sizes,
            "seconds_homes": round(t_homes, 1), "seconds_episodes": round(time.perf_counter() - t0 - t_homes, 1),
            "workers": workers}


def make_definition(*, name: str, version: int, seed_ranges: dict[str, tuple[int, int]],
                    episodes_per_home: dict[str, int], task: str = "fine_grained", body: str | None = None,
                    episode_seed: int = 0, rooms: tuple[int, int] = (4, 12), description: str = "",
                    train_fingerprints: bool = True, workers: int = 1, progress: bool = True,
                    path: Path = Path("<new benchmark>")) -> dict[str, Any]:
    """A complete definition: generate the held-out splits (and the train pool's homes when
    ``train_fingerprints``) in a temporary folder and record what came out. Deterministic: the
    same arguments give the same definition on any machine that generates the same homes."""
    import tempfile

    from ..scenes.home_jobs import generate_home_files, home_scene_id
    from ..scenes.procgen import GENERATOR_VERSION

    skeleton = definition_dict(name=name, version=version, generator_version=GENERATOR_VERSION, rooms=rooms, task=task,
                               body=body, episode_seed=episode_seed, seed_ranges=seed_ranges,
                               episodes_per_home=episodes_per_home, description=description)
    bench = parse_definition(skeleton, path, complete=False)  # ranges, task and counts checked before any work
    fingerprints: dict[str, dict[str, str]] = {}
    episodes_sha: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="vlnverse-make-benchmark-") as tmp:
        for split in HELD_OUT:
            done = make_split(bench, split, Path(tmp) / split, workers=workers, progress=progress, check=False)
            fingerprints[split], episodes_sha[split] = done["fingerprints"], done["episodes_sha256"]
        if train_fingerprints:
            seeds = bench.seeds("train")
            made = generate_home_files(seeds, Path(tmp) / "train", min_rooms=rooms[0], max_rooms=rooms[1],
                                       fingerprint=True, workers=workers, progress=progress, desc=f"{name} train homes")
            fingerprints["train"] = {home_scene_id(s): made[s]["fingerprint"] for s in seeds}
    data = definition_dict(name=name, version=version, generator_version=GENERATOR_VERSION, rooms=rooms, task=task,
                           body=body, episode_seed=episode_seed, seed_ranges=seed_ranges,
                           episodes_per_home=episodes_per_home, fingerprints=fingerprints,
                           episodes_sha256=episodes_sha, description=description)
    parse_definition(data, path)  # complete and consistent
    return data
