"""The eval tests' hand-built scenes (``eval_scenes``) for tiny real runs."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "eval"))
