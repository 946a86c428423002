"""The task tests share the eval tests' helpers: the one fake chat server (``mllm_server``)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "eval"))
