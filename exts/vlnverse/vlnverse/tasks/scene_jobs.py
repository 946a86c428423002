"""Parallel jobs of per-scene work (``vlnverse.core.jobs``): one job per scene of a set of
episodes, costed by the scene file's size. Evaluation and the learning layer's collection build
their jobs here; the engine itself knows nothing of scenes."""
from __future__ import annotations

import os
import pickle
from dataclasses import replace
from typing import Any

from ..core.errors import ConfigError
from ..core.jobs import Job


def scene_jobs(by_scene: dict, common: Any, *, send: bool, field_name: str, expected: str) -> list[Job]:
    """One ``Job`` per scene of ``by_scene`` ({scene path: [episode, ...]}): key the scene id,
    items the episode ids, payload ``common`` (a dataclass with ``scene_path`` and ``episodes``
    fields, e.g. ``EvalJob``) with this scene's path and episodes, cost the episode
    count times ``scene_cost(path)``. With ``send`` (the jobs go to worker processes) a payload
    that cannot be pickled is a ``ConfigError`` naming ``field_name``, before any worker starts."""
    jobs = [Job(eps[0].scene_id, tuple(ep.episode_id for ep in eps), replace(common, scene_path=path, episodes=eps),
                cost=len(eps) * scene_cost(path))
            for path, eps in by_scene.items()]
    if send and jobs:
        try:
            pickle.dumps(jobs[0].payload)
        except Exception as exc:  # noqa: BLE001 - e.g. a lambda scene loader or agent factory
            raise ConfigError(f"the run cannot be sent to worker processes ({exc})", field=field_name,
                              expected=expected) from None
    return jobs


def scene_cost(path: Any) -> float:
    """Relative cost of working on the scene file ``path``: its size in MB (a larger home takes
    longer to load, simulate and render), at least 0.1; 1 for a scene that is not a file."""
    try:
        return max(0.1, os.path.getsize(path) / 1e6)
    except (OSError, TypeError, ValueError):
        return 1.0
