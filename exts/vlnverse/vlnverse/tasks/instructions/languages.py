"""Instruction languages by name, as configs and ``--language`` flags say them.

``LANGUAGES`` maps each name to the fine-grained task's ``params`` overrides that generate it
(``tasks/types/fine_grained``): ``v1`` the shipped data's language, ``v2`` references that need
looking (``route_v2``), ``v2-split`` version 2 with its template families partitioned (train on
family 0, ``val_unseen_language`` in family 1). ``wording_key`` is what a cache of generated
episodes adds to its key so that a change of the version-2 wording is never served stale.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ...core.errors import ConfigError
from .route_v2 import WORDING_REVISION

LANGUAGES: dict[str, dict[str, Any]] = {
    "v1": {},
    "v2": {"params.instruction_version": 2},
    "v2-split": {"params.instruction_version": 2, "params.language_split": True},
}


def language_overrides(name: Any, *, field: str = "language", file: str | Path | None = None) -> dict[str, Any]:
    """The task ``params`` overrides of language ``name`` (``{}`` for ``v1``); an unknown name is a
    one-line ``ConfigError`` naming ``field`` (and ``file``)."""
    if name not in LANGUAGES:
        raise ConfigError(f"got {name!r}", field=field, file=file, expected=" or ".join(LANGUAGES))
    return dict(LANGUAGES[name])


def language_of(episodes) -> str | None:
    """The ``LANGUAGES`` name training ``episodes`` are worded in, from their ``info.language``
    (``{"version": 2, "families": [0, 1]}``: ``v2``; families ``[0]``: ``v2-split``; none recorded:
    ``v1``); None when they mix languages or record another."""
    from ..episode import instruction_languages

    found = instruction_languages(episodes)
    if found is None:
        return "v1"
    if len(found) != 1 or any(not isinstance(e.info.get("language"), dict) for e in episodes):
        return None   # several wordings, or some episodes in version 1
    recorded = found[0]
    families = {(0, 1): "v2", (0,): "v2-split"}
    return families.get(tuple(recorded.get("families") or ())) if recorded.get("version") == 2 else None


def check_training_language(episodes, language: str, *, field: str, file: Any = None) -> None:
    """Refuse (one-line ``ConfigError`` naming ``field``) training ``episodes`` worded in another
    language than the config's ``language``: recorded version-2 wording under another name, or
    fine-grained episodes without it under a version-2 name."""
    got = language_of(episodes)
    if got == language or (got == "v1" and not any(e.task_type == "fine_grained" for e in episodes)):
        return   # tasks that record no wording are taken at the config's word
    raise ConfigError(f"the training episodes are worded in {got or 'several languages'}, the config says {language!r}",
                      field=field, file=file, expected=f"language: {got}" if got else "episodes of one language")


def wording_key(overrides: dict | None) -> dict[str, int]:
    """``{"wording": WORDING_REVISION}`` when ``overrides`` select the version-2 language, else ``{}``
    (a cache key of version-1 episodes stays what it was)."""
    return {"wording": WORDING_REVISION} if (overrides or {}).get("params.instruction_version") == 2 else {}


def generation_key(overrides: dict | None) -> dict[str, Any]:
    """What task ``overrides`` add to the cache key of generated episodes: nothing without them, else
    the overrides and, for the version-2 language, ``wording_key``'s revision."""
    return {"overrides": dict(overrides), **wording_key(overrides)} if overrides else {}


__all__ = ["LANGUAGES", "check_training_language", "generation_key", "language_of", "language_overrides",
           "wording_key"]
