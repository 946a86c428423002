"""Shared fixtures of the learning-layer tests: the hand-built corridor of the eval tests, four
corridor episodes, and a small training config (32x32 RGB-D, Tel-Hop)."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "eval"))

pytest.importorskip("torch", reason="the learning layer needs torch (the [learn] extra)")

from learn_helpers import PAIRS, corridor, episodes_file, make_episodes, small_config  # noqa: E402,F401
