"""Errors that stop a training run (``vlnverse train``)."""
from __future__ import annotations

from ..core.errors import VLNVerseError


class TrainingError(VLNVerseError):
    """Training cannot go on (NaN loss, no data); the message says what was kept."""


class BudgetTooSmallError(TrainingError):
    """The time budget (``il.max_seconds``) ends before the phase's first epoch: ``minimum_seconds``
    is what one epoch took to extrapolate here."""

    def __init__(self, message: str, *, phase: str, minimum_seconds: float):
        super().__init__(message)
        self.phase, self.minimum_seconds = phase, float(minimum_seconds)
