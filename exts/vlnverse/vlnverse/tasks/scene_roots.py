"""Portable scene references: episodes name their scene by id plus a path relative to a scene root.

An episode's ``scene_id`` is the scene's id (its USD file stem) and ``scene_path`` a POSIX path
*relative to a scene root* (``home_0012.usd``, ``../my_homes/home_0040.usda``). Scene roots are
searched in this order:

1. folders given explicitly (``--scene-root`` of ``vlnverse data generate``, ``scene_root`` of an
   eval config);
2. the dataset's own folder (the folder holding its JSONL files);
3. the shipped scenes (``scenes_usd/``, ``vlnverse.paths.scenes_dir``).

In each root the relative path is tried first, then ``<root>/<scene_id><suffix>`` for every
USD suffix. Old files whose ``scene_path`` is absolute still work: an existing absolute path is
taken as it is, otherwise its file name and the scene id are looked up in the roots. A scene
found in no root raises ``SceneError`` naming the episode, the scene id and every root searched.

This is the one scene resolver of every consumer of episodes (``vlnverse eval``, ``train``,
``study serve``/``score``, ``view``, ``cache build``, the gym env, the Isaac Sim study panel);
each accepts ``--scene-root`` (repeatable, or one ``os.pathsep``-separated list:
:func:`add_scene_root_option`, :func:`root_args`).
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..core.errors import SceneError
from ..paths import ResourceNotFoundError, scenes_dir


def scene_roots(explicit: Iterable[str | Path] | str | Path | None = None,
                dataset_dir: str | Path | None = None) -> list[Path]:
    """Scene roots in search order: ``explicit`` folders, then ``dataset_dir``, then the shipped scenes."""
    if isinstance(explicit, (str, Path)):
        explicit = [explicit]
    roots = [Path(p) for p in (explicit or [])]
    if dataset_dir is not None:
        roots.append(Path(dataset_dir))
    try:
        roots.append(scenes_dir())
    except ResourceNotFoundError:  # a wheel without shipped scenes: only the other roots
        pass
    unique: list[Path] = []
    for root in roots:
        if root.resolve() not in [u.resolve() for u in unique]:
            unique.append(root)
    return unique


def add_scene_root_option(parser, what: str = "episodes") -> None:
    """Add ``--scene-root DIR`` (repeatable; a ``os.pathsep``-separated list also works) to ``parser``."""
    parser.add_argument("--scene-root", action="append", default=[], metavar="DIR",
                        help=f"folder searched for the scenes of the {what} before the dataset's own folder "
                             f"and the shipped scenes (repeatable, or DIR{os.pathsep}DIR)")


def root_args(values: Iterable[str | Path] | str | Path | None, field: str = "--scene-root") -> list[Path]:
    """Folders of ``--scene-root`` values (each may be an ``os.pathsep``-separated list); a folder
    that does not exist is a ``ConfigError`` naming ``field``."""
    from ..core.errors import ConfigError

    if values is None:
        return []
    if isinstance(values, (str, Path)):
        values = [values]
    out: list[Path] = []
    for value in values:
        parts = [value] if isinstance(value, Path) else [p for p in str(value).split(os.pathsep) if p.strip()]
        for part in parts:
            path = Path(part).expanduser()
            if not path.is_dir():
                raise ConfigError("scene root is not a folder", file=path, field=field,
                                  expected="an existing folder holding USD scenes")
            out.append(path)
    return out


def with_scene_roots(configured: Any, given: list | None) -> Any:
    """A config's ``scene_root`` with the ``--scene-root`` folders (checked to exist) in front."""
    if not given:
        return configured
    before = [configured] if isinstance(configured, str) else list(configured or [])
    return [str(p) for p in root_args(given)] + before


class SceneResolver:
    """Resolve episodes' scenes lazily in ``roots`` (one look-up per scene; see the module docstring)."""

    def __init__(self, roots: Sequence[Path]):
        self.roots = list(roots)
        self._cache: dict[tuple[str, str], Path] = {}

    def __call__(self, episode) -> Path:
        """The USD file of ``episode``'s scene (``SceneError`` naming the episode and the roots)."""
        key = (episode.scene_id, str(episode.scene_path))
        if key not in self._cache:
            self._cache[key] = resolve_episode_scene(episode, self.roots)
        return self._cache[key]

    def resolved(self, episode):
        """A copy of ``episode`` whose ``scene_path`` is the resolved file."""
        return dataclasses.replace(episode, scene_path=str(self(episode)))


def recorded_roots(run_dir: str | Path) -> list[Path]:
    """The scene roots an output folder of ``vlnverse eval`` or ``vlnverse study serve`` recorded
    (``scene_roots`` of its ``config.json`` / ``study.json``; for older eval runs the config's
    ``scene_root``, its episode folder and ``dataset/``), those that exist."""
    import json

    run_dir = Path(run_dir)
    recorded: list = []
    for name in ("study.json", "config.json"):
        path = run_dir / name
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        recorded += list(data.get("scene_roots") or [])
        cfg = data.get("config") or {}
        if not data.get("scene_roots") and name == "config.json":  # runs written before roots were recorded
            scene_root = cfg.get("scene_root")
            recorded += [scene_root] if isinstance(scene_root, str) else list(scene_root or [])
            source = (cfg.get("episodes") or {}).get("path")
            if isinstance(source, str) and source not in ("", "-"):
                recorded.append(source if Path(source).is_dir() else str(Path(source).parent))
            recorded.append(str(run_dir / "dataset"))
    return [Path(r) for r in recorded if isinstance(r, str) and Path(r).is_dir()]


def recorded_scene_roots(run_dir: str | Path, explicit: Iterable[str | Path] | None = None) -> list[Path]:
    """Scene roots of an output folder: ``explicit`` folders (``--scene-root``), the roots it
    recorded (:func:`recorded_roots`), the folder itself, the shipped scenes."""
    return scene_roots(root_args(explicit) + recorded_roots(run_dir), run_dir)


def _within(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


def portable_scene_path(scene_file: str | Path, dataset_dir: str | Path,
                        explicit: Iterable[str | Path] = ()) -> str:
    """The ``scene_path`` to store for ``scene_file`` in a dataset written to ``dataset_dir``.

    Relative to the first root containing the file (``explicit`` folders, the dataset folder,
    the shipped scenes), else relative to the dataset folder (``../``), as a POSIX path.
    """
    path = Path(scene_file).resolve()
    dataset = Path(dataset_dir).resolve()
    for root in scene_roots(explicit, dataset):
        root = root.resolve()
        if _within(path, root):
            return path.relative_to(root).as_posix()
    return Path(os.path.relpath(path, dataset)).as_posix()


def resolve_episode_scene(episode, roots: Sequence[Path]) -> Path:
    """The USD file of ``episode``'s scene, searched in ``roots`` (see the module docstring), as an
    absolute path: an episode saved again elsewhere (a job's own folder) or read from another
    working directory still finds it."""
    from ..scenes.splits import scene_file

    ref = Path(episode.scene_path) if episode.scene_path else None
    if ref is not None and ref.is_absolute() and ref.is_file():  # old files: absolute paths
        return ref
    for root in roots:
        if ref is not None and not ref.is_absolute() and (root / ref).is_file():
            return (root / ref).absolute()
        if ref is not None and ref.is_absolute() and (root / ref.name).is_file():
            return (root / ref.name).absolute()
        found = scene_file(episode.scene_id, root) if root.is_dir() else None
        if found is not None:
            return found.absolute()
    searched = ", ".join(str(r) for r in roots) or "(none)"
    raise SceneError(f"episode {episode.episode_id}: scene '{episode.scene_id}' (scene_path "
                     f"'{episode.scene_path}') not found; searched scene roots: {searched} "
                     "(pass the folder holding it as scene_root / --scene-root)")


def resolve_episode_scenes(episodes: Sequence, roots: Sequence[Path]) -> list:
    """Copies of ``episodes`` whose ``scene_path`` is the resolved file (one look-up per scene)."""
    cache: dict[tuple[str, str], str] = {}
    out = []
    for ep in episodes:
        key = (ep.scene_id, ep.scene_path)
        if key not in cache:
            cache[key] = str(resolve_episode_scene(ep, roots))
        out.append(dataclasses.replace(ep, scene_path=cache[key]))
    return out
