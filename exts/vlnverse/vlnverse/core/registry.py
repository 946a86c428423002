"""Name → class registries used for agents, tasks, models, sensors, metrics and benchmarks.

A new plug-in is one decorated class::

    AGENTS = Registry("agent")

    @AGENTS.register("oracle")
    class OracleAgent: ...

The decorator returns the class unchanged, so the class stays usable under its own name.

An entry defined in an optional layer can be registered lazily, by the module that registers it::

    AGENTS.register_lazy("policy", "vlnverse.learn.agent")   # imported (with torch) on first ``get``

Either registration may declare ``tags`` (e.g. ``tags=("vision_language",)``): what a caller needs
to know about an entry without importing it (``has_tag``; the tags of both registrations add up).
"""
from __future__ import annotations

from typing import Callable, Generic, Iterator, TypeVar

from .errors import UnknownNameError

T = TypeVar("T")


class Registry(Generic[T]):
    """A named table of plug-ins; ``get`` on an unknown name lists the registered ones."""

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, T] = {}
        self._lazy: dict[str, str] = {}
        self._tags: dict[str, frozenset[str]] = {}

    def register(self, name: str | None = None, *, overwrite: bool = False,
                 tags: tuple[str, ...] = ()) -> Callable[[T], T]:
        """Decorator adding the decorated object under ``name`` (default: its ``__name__``) with ``tags``."""

        def decorator(obj: T) -> T:
            key = name or getattr(obj, "__name__")
            self._check_tags(key, tags)
            if key in self._items and not overwrite and self._items[key] is not obj:
                raise ValueError(f"{self.kind} '{key}' is already registered")
            self._items[key] = obj
            self._add_tags(key, tags)
            return obj

        return decorator

    def register_lazy(self, name: str, module: str, *, tags: tuple[str, ...] = ()) -> None:
        """Name an entry that the module ``module`` registers on import; the module is imported on
        the first ``get(name)`` (so optional dependencies load only when the entry is used).
        ``tags`` are known at once, without the import."""
        self._check_tags(name, tags)
        if name in self._items:
            raise ValueError(f"{self.kind} '{name}' is already registered")
        self._lazy[name] = module
        self._add_tags(name, tags)

    def _check_tags(self, name: str, tags: tuple[str, ...]) -> None:
        if isinstance(tags, str):
            raise TypeError(f"{self.kind} '{name}': tags is a tuple of names, not the string {tags!r}")

    def _add_tags(self, name: str, tags: tuple[str, ...]) -> None:
        if tags:
            self._tags[name] = self._tags.get(name, frozenset()) | frozenset(tags)

    def has_tag(self, name: str, tag: str) -> bool:
        """Whether entry ``name`` was registered (lazily or not) with ``tag``; imports nothing."""
        return tag in self._tags.get(name, ())

    def tagged(self, tag: str) -> list[str]:
        """Names registered with ``tag``, sorted; imports nothing."""
        return sorted(n for n, t in self._tags.items() if tag in t)

    def get(self, name: str) -> T:
        """Return the object registered as ``name`` (importing its module for a lazy entry);
        raise ``UnknownNameError`` otherwise."""
        if name not in self._items and name in self._lazy:
            import importlib

            importlib.import_module(self._lazy[name])
        try:
            return self._items[name]
        except KeyError:
            raise UnknownNameError(self.kind, name, self.names()) from None

    def names(self) -> list[str]:
        """Registered names (lazy entries included), sorted."""
        return sorted({*self._items, *self._lazy})

    def __contains__(self, name: object) -> bool:
        return name in self._items or name in self._lazy

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())
