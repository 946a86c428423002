"""Fixtures of the ``vlnverse bench ...`` tests: the learn tests' corridor and episodes, the study
tests' episodes on a shipped home, and their helper modules on ``sys.path``."""
import sys
from pathlib import Path

_TESTS = Path(__file__).parents[1]
for _folder in ("eval", "learn", "study"):
    sys.path.insert(0, str(_TESTS / _folder))

from learn_helpers import corridor, episodes_file  # noqa: E402,F401 (session fixtures)
from study_helpers import study_episodes  # noqa: E402,F401 (a session fixture)
