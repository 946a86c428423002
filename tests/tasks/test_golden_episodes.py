"""Generated episodes are byte-identical to the recorded ones (refactors must not change datasets).

The hashes are of the dataset files ``generate_dataset`` writes for 2 episodes per task on the shipped
home_0014 with seed 3. A change that is meant to alter generated episodes updates them here, in the
same commit, and says so in its message; an unintended difference fails this test.
"""
from __future__ import annotations

import hashlib

import pytest

from vlnverse.paths import scenes_dir
from vlnverse.tasks.dataset import generate_dataset

GOLDEN = {
    "coarse_grained": "2ecd273b74d6419cf66e2f928f049cdc7e0bca431e4b5aee46bfdd24f3378a6f",
    "fine_grained": "49e4fa31de7206006679c8b605de354ca56650a527d180e246a9c9543e2c6f15",
    "object_goal": "bb6007b35f6f327db7c1fa7b23612c90cabc036f1811ea7b708fcc6b2ed7ac8f",
}


@pytest.mark.parametrize("task", sorted(GOLDEN))
def test_generated_episodes_match_the_recorded_bytes(task, tmp_path):
    scene = scenes_dir() / "home_0014.usd"
    generate_dataset(task, [str(scene)], 2, 3, tmp_path / "ds", progress=False)
    files = sorted(p.name for p in (tmp_path / "ds").glob("*.jsonl"))
    assert files == ["val_unseen.jsonl"]
    digest = hashlib.sha256((tmp_path / "ds" / "val_unseen.jsonl").read_bytes()).hexdigest()
    assert digest == GOLDEN[task], f"{task}: generated episodes changed (sha256 {digest})"
