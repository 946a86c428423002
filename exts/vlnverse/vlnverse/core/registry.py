"""Name → class registries used for agents, tasks, models, sensors, metrics and benchmarks.

A new plug-in is one decorated class::

    AGENTS = Registry("agent")

    @AGENTS.register("oracle")
    class OracleAgent: ...

The decorator returns the class unchanged, so the class stays usable under its own name.
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

    def register(self, name: str | None = None, *, overwrite: bool = False) -> Callable[[T], T]:
        """Decorator adding the decorated object under ``name`` (default: its ``__name__``)."""

        def decorator(obj: T) -> T:
            key = name or getattr(obj, "__name__")
            if key in self._items and not overwrite and self._items[key] is not obj:
                raise ValueError(f"{self.kind} '{key}' is already registered")
            self._items[key] = obj
            return obj

        return decorator

    def get(self, name: str) -> T:
        """Return the object registered as ``name``; raise ``UnknownNameError`` otherwise."""
        try:
            return self._items[name]
        except KeyError:
            raise UnknownNameError(self.kind, name, list(self._items)) from None

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._items)
