"""Error types shared by every layer.

Every user-facing error names *where* the problem is (file, field) and *what* was expected,
so the CLI can print it as a single line and exit non-zero.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any


class VLNVerseError(Exception):
    """Base class for all errors the toolkit raises on bad input or bad state."""


class ConfigError(VLNVerseError, ValueError):
    """A config or data file has a missing or invalid field.

    The message reads ``<file>: <field>: <problem> (expected <expected>)``; any part that is
    unknown is left out.
    """

    def __init__(self, problem: str, *, file: str | Path | None = None, field: str | None = None,
                 expected: Any = None, line: int | None = None):
        self.problem, self.file, self.field, self.expected, self.line = problem, file, field, expected, line
        parts = []
        if file is not None:
            parts.append(f"{file}:{line}" if line is not None else str(file))
        if field:
            parts.append(field)
        problem = " ".join(str(problem).split())  # one line, and never a whole huge value
        if len(problem) > 300:
            problem = problem[:297] + "..."
        msg = problem if expected is None else f"{problem} (expected {expected})"
        parts.append(msg)
        super().__init__(": ".join(parts))

    def in_file(self, file: str | Path) -> "ConfigError":
        """This error naming ``file`` (unchanged when it already names one)."""
        if self.file is not None:
            return self
        return ConfigError(self.problem, file=file, field=self.field, expected=self.expected, line=self.line)


class SceneError(VLNVerseError):
    """A scene file is missing, corrupt or unusable (no floor, no collision geometry, ...)."""


class NoNavigableSpaceError(SceneError):
    """The agent footprint leaves no navigable cell (or no pair at the requested distance)."""


class UnknownNameError(VLNVerseError, KeyError):
    """A name was looked up in a registry that does not hold it; lists the known names."""

    def __init__(self, kind: str, name: str, known: list[str]):
        self.kind, self.name, self.known = kind, name, sorted(known)
        super().__init__(f"unknown {kind} '{name}' (registered: {', '.join(self.known) or 'none'})")

    def __str__(self) -> str:  # KeyError would quote the message
        return self.args[0]


class BackendError(VLNVerseError, RuntimeError):
    """A simulator backend could not start or was set up wrongly (one line: the engine's own reason)."""
