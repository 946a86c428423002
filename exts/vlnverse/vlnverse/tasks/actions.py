"""Task-level agent answers: typed actions that end or annotate an episode without moving the agent.

- :class:`Decision` — a STOP that states whether the described target exists (VLN-NF's
  FOUND / NOT_FOUND action space);
- :class:`SelectFrame` — the prior-video frame an agent picks as showing the goal (VCN-Bench
  goal identification).

The evaluation rollout reads them from the agent's actions; the task's scorer rates them.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from enum import Enum
from typing import Any


class Decision(str, Enum):
    """A final decision: the episode ends (a STOP) with this answer."""

    FOUND = "FOUND"
    NOT_FOUND = "NOT_FOUND"

    @classmethod
    def parse(cls, value: Any) -> "Decision | None":
        """``value`` as a decision (a ``Decision`` or its name in any case, ``-`` for ``_``),
        or ``None`` when it is not one."""
        if isinstance(value, Decision):
            return value
        if isinstance(value, str):
            key = value.strip().upper().replace("-", "_")
            if key in cls.__members__:
                return cls[key]
        return None


@dataclass(frozen=True)
class SelectFrame:
    """Goal identification: ``frame`` is the index of the prior-video frame the agent picks."""

    frame: int

    def __post_init__(self) -> None:
        if isinstance(self.frame, bool) or not isinstance(self.frame, numbers.Integral) or self.frame < 0:
            raise ValueError(f"SelectFrame.frame must be a frame index >= 0, got {self.frame!r}")


FOUND, NOT_FOUND = Decision.FOUND, Decision.NOT_FOUND

__all__ = ["Decision", "FOUND", "NOT_FOUND", "SelectFrame"]
