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
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Iterable, Sequence

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
    """The USD file of ``episode``'s scene, searched in ``roots`` (see the module docstring)."""
    from ..scenes.splits import scene_file

    ref = Path(episode.scene_path) if episode.scene_path else None
    if ref is not None and ref.is_absolute() and ref.is_file():  # old files: absolute paths
        return ref
    for root in roots:
        if ref is not None and not ref.is_absolute() and (root / ref).is_file():
            return root / ref
        if ref is not None and ref.is_absolute() and (root / ref.name).is_file():
            return root / ref.name
        found = scene_file(episode.scene_id, root) if root.is_dir() else None
        if found is not None:
            return found
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
