"""Shared fixtures of the learning-layer tests: the hand-built corridor of the eval tests, four
corridor episodes, and a small training config (32x32 RGB-D, Tel-Hop)."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "eval"))

pytest.importorskip("torch", reason="the learning layer needs torch (the [learn] extra)")

from eval_scenes import corridor_scene  # noqa: E402

from learn_helpers import PAIRS, make_episodes, small_config  # noqa: E402,F401


@pytest.fixture(scope="session")
def corridor():
    from vlnverse.sim.body import load_body
    from vlnverse.tasks.base import context_from_description

    return context_from_description(corridor_scene(), load_body("r2r_ce"), 0.05, scene_path="corridor.usda")


@pytest.fixture(scope="session")
def episodes_file(corridor, tmp_path_factory):
    from vlnverse.tasks.episode import save_episodes

    path = tmp_path_factory.mktemp("episodes") / "train.jsonl"
    save_episodes(path, make_episodes(corridor))
    return path
