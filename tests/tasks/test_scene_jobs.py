"""``vlnverse.tasks.scene_jobs``: one parallel job per scene, costed by its episodes and file size."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from vlnverse.core.errors import ConfigError


@dataclass(frozen=True)
class Payload:
    loader: Any = None
    scene_path: str = ""
    episodes: list = field(default_factory=list)


def test_scene_jobs_cost_grows_with_the_episode_count_and_the_scene_file(tmp_path):
    from types import SimpleNamespace

    from vlnverse.tasks.scene_jobs import scene_cost, scene_jobs

    small, large = tmp_path / "small.usda", tmp_path / "large.usda"
    small.write_bytes(b"x" * 200_000)
    large.write_bytes(b"x" * 600_000)
    eps = [SimpleNamespace(scene_id="a", episode_id=f"e{i}") for i in range(3)]
    jobs = scene_jobs({str(small): eps, str(large): eps[:2]}, Payload(), send=False, field_name="x", expected="y")
    assert [j.cost for j in jobs] == pytest.approx([3 * 0.2, 2 * 0.6])
    assert [(j.payload.scene_path, j.payload.episodes) for j in jobs] == [(str(small), eps), (str(large), eps[:2])]
    assert scene_cost(tmp_path / "missing.usda") == 1.0 and scene_cost(None) == 1.0


def test_scene_jobs_that_cannot_be_sent_to_workers_name_the_field():
    from types import SimpleNamespace

    from vlnverse.tasks.scene_jobs import scene_jobs

    eps = [SimpleNamespace(scene_id="a", episode_id="e0")]
    with pytest.raises(ConfigError, match="^--workers: the run cannot be sent to worker processes"):
        scene_jobs({"a.usda": eps}, Payload(loader=lambda: None), send=True, field_name="--workers", expected="1")
    assert scene_jobs({"a.usda": eps}, Payload(loader=lambda: None), send=False, field_name="--workers", expected="1")
