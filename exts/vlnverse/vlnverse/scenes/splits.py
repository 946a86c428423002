"""Scene splits and the one scene resolver (split names, scene ids, USD paths) used by every command.

``scenes_usd/splits.json`` holds ``{"splits": {"train": [...], "val_unseen": [...], "test":
[...]}}`` with scene ids (file stems of ``scenes_usd/<id>.usd``, any of ``USD_SUFFIXES``). The three lists
are disjoint. As in VLNVerse there is no ``val_seen`` scene list: ``val_seen`` episodes are
drawn from the ``train`` scenes (new start/goal pairs in seen homes).
"""
from __future__ import annotations

from pathlib import Path

from ..core.errors import ConfigError, UnknownNameError
from ..paths import scenes_dir
from .usd_io import USD_SUFFIXES

#: Scene splits, in the order they are listed.
SPLIT_NAMES = ("train", "val_unseen", "test")
#: Episode splits whose scenes come from another scene split.
EPISODE_SPLIT_SCENES = {"val_seen": "train"}


def splits_path() -> Path:
    """Location of the shipped split file."""
    return scenes_dir() / "splits.json"


def scene_file(scene_id: str, folder: Path | None = None) -> Path | None:
    """USD file ``<folder>/<scene_id><suffix>`` (first of ``USD_SUFFIXES``; default folder: the shipped
    scenes), or None if absent."""
    folder = folder or scenes_dir()
    for suffix in USD_SUFFIXES:
        path = folder / f"{scene_id}{suffix}"
        if path.is_file():
            return path
    return None


def load_splits(path: str | Path | None = None) -> dict[str, list[str]]:
    """Scene ids per split from ``splits.json`` (default: the shipped one), validated.

    Raises ``ConfigError`` naming the file and field when it is missing or malformed, a split
    is not a list of ids, an id appears in two splits, or an id has no USD file beside it.
    """
    from ..core.config import load_json

    path = Path(path) if path is not None else splits_path()
    data = load_json(path, expected="a JSON split file")
    splits = data.get("splits") if isinstance(data, dict) else None
    if not isinstance(splits, dict):
        raise ConfigError("missing or not a mapping", file=path, field="splits",
                          expected="{\"train\": [...], \"val_unseen\": [...], \"test\": [...]}")
    unknown = sorted(set(splits) - set(SPLIT_NAMES))
    if unknown:
        hint = " (val_seen episodes use the train scenes)" if "val_seen" in unknown else ""
        raise ConfigError(f"unknown split(s) {unknown}{hint}", file=path, field="splits", expected=list(SPLIT_NAMES))
    out: dict[str, list[str]] = {}
    seen: dict[str, str] = {}
    for name in SPLIT_NAMES:
        ids = splits.get(name, [])
        if not isinstance(ids, list) or not all(isinstance(i, str) and i for i in ids):
            raise ConfigError(f"got {ids!r}", file=path, field=f"splits.{name}", expected="a list of scene ids")
        for scene_id in ids:
            if scene_id in seen:
                raise ConfigError(f"scene '{scene_id}' is in both '{seen[scene_id]}' and '{name}'", file=path,
                                  field=f"splits.{name}", expected="disjoint splits")
            if scene_file(scene_id, path.parent) is None:
                raise ConfigError(f"scene '{scene_id}' has no USD file in {path.parent}", file=path,
                                  field=f"splits.{name}", expected=f"{scene_id}{'/'.join(USD_SUFFIXES)} beside the split file")
            seen[scene_id] = name
        out[name] = list(ids)
    return out


def looks_like_path(item: str | Path) -> bool:
    """True when ``item`` names a file (a USD suffix or a folder part) rather than a split or scene id."""
    p = Path(item)
    return p.suffix.lower() in USD_SUFFIXES or len(p.parts) > 1


def resolve_scenes(spec: str | Path | list, *, splits_file: str | Path | None = None,
                   field: str = "scenes") -> list[Path]:
    """USD paths for a split name, ``all``, ``val_seen`` (= train scenes), scene ids or file paths.

    The one scene resolver of every command. ``spec`` may be one string (comma-separated items
    allowed) or a list of them; the result keeps the given order without duplicates. An item that
    looks like a path (``looks_like_path``) must be an existing file (else ``ConfigError`` naming
    it and ``field``); other items are split names, then scene ids, then local files; an unknown
    name raises ``UnknownNameError`` listing the splits and shipped scene ids.
    """
    items = [spec] if isinstance(spec, (str, Path)) else list(spec)
    items = [part.strip() for item in items for part in str(item).split(",") if part.strip()]
    if not items:
        raise ConfigError("empty scene selection", field=field, expected="a split name, 'all', scene ids or paths")
    split_file = Path(splits_file) if splits_file is not None else None
    splits: dict[str, list[str]] | None = None

    def folder() -> Path:
        return split_file.parent if split_file is not None else scenes_dir()

    def get_splits() -> dict[str, list[str]]:
        nonlocal splits
        if splits is None:
            splits = load_splits(split_file if split_file is not None else splits_path())
        return splits

    out: list[Path] = []
    seen: set[Path] = set()
    for item in items:
        name = EPISODE_SPLIT_SCENES.get(item, item)
        if looks_like_path(item) or Path(item).is_dir():
            if Path(item).is_dir():
                raise ConfigError("is a folder, not a scene file", file=item, field=field,
                                  expected="a .usd/.usda/.usdc/.usdz file, a scene id or a split name")
            if not Path(item).is_file():
                raise ConfigError("scene file not found", file=item, field=field)
            paths = [Path(item)]
        elif name == "all":
            ids = [i for s in SPLIT_NAMES for i in get_splits()[s]]
            paths = [scene_file(i, folder()) for i in ids]
        elif name in SPLIT_NAMES:
            paths = [scene_file(i, folder()) for i in get_splits()[name]]
        elif scene_file(name, folder()) is not None:
            paths = [scene_file(name, folder())]
        elif Path(item).is_file():  # a local file without a USD suffix
            paths = [Path(item)]
        else:
            known = list(SPLIT_NAMES) + ["all", "val_seen"] + sorted(
                p.stem for p in folder().iterdir() if p.suffix in USD_SUFFIXES)
            raise UnknownNameError("scene or split", item, known)
        for p in paths:
            key = p.resolve() if p is not None else None
            if p is not None and key not in seen:
                seen.add(key)
                out.append(p)
    return out
