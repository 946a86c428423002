"""Generated homes written in parallel (``vlnverse.core.jobs`` jobs) and their fingerprints.

One place for what the learning layer's training homes (``learn.homes``) and the task layer's
benchmarks (``tasks.benchmark``) share: the scene id of the home of a seed, the job that
generates and writes homes, and the fingerprint of a home file
(``scene_content_hash(portable=True)`` of the scene read back from the file: what every
consumer of the file sees, whatever its id).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable


def home_scene_id(seed: int) -> str:
    """Scene id of the generated home of ``seed`` (never a shipped ``home_NNNN`` id)."""
    return f"gen_{int(seed):05d}"


def home_file_fingerprint(path: str | Path) -> str:
    """``scene_content_hash(portable=True)`` of the home in the USD file ``path``, as read back."""
    from .description import scene_content_hash
    from .usd_io import load_scene

    return scene_content_hash(load_scene(str(path)), portable=True)


@dataclass(frozen=True)
class HomesJob:
    """The payload of a home-generation job (``generate_home_job``): the folder and room counts;
    ``fingerprint``: also read each written file back and fingerprint it."""

    folder: str
    min_rooms: int
    max_rooms: int
    fingerprint: bool = False


def generate_home_job(payload: HomesJob, items: tuple, state: dict, emit: Callable[[Any, Any], None]) -> None:
    """Parallel job (``vlnverse.core.jobs``): generate and write the homes of the seeds ``items``
    (``gen_<seed>.usd`` in ``payload.folder``, each written atomically); emit each seed's
    ``{"path": file, "fingerprint": home_file_fingerprint(file) or None}``."""
    from .procgen import generate_home
    from .usd_io import write_usd

    for seed in items:
        desc = generate_home(int(seed), scene_id=home_scene_id(seed), min_rooms=payload.min_rooms,
                             max_rooms=payload.max_rooms)
        path = write_usd(desc, Path(payload.folder) / f"{desc.scene_id}.usd")
        emit(seed, {"path": str(path), "fingerprint": home_file_fingerprint(path) if payload.fingerprint else None})


def generate_home_files(seeds: list[int], folder: str | Path, *, min_rooms: int = 4, max_rooms: int = 12,
                        fingerprint: bool = False, workers: int = 1, progress: bool = True,
                        desc: str = "homes") -> dict[int, dict[str, Any]]:
    """Generate the homes of ``seeds`` into ``folder`` with ``workers`` processes
    (``generate_home_job``); returns ``{seed: {"path", "fingerprint"}}``. The files do not depend
    on the worker count. A failed job is a ``VLNVerseError`` naming its home."""
    from tqdm import tqdm

    from ..core.errors import VLNVerseError
    from ..core.jobs import Job, run_jobs

    made: dict[int, dict[str, Any]] = {}
    bar = tqdm(total=len(seeds), desc=desc, unit="home", disable=not progress)

    def got(seed: int, result: dict[str, Any]) -> None:
        made[int(seed)] = result
        bar.update(1)

    payload = HomesJob(folder=str(folder), min_rooms=min_rooms, max_rooms=max_rooms, fingerprint=fingerprint)
    try:
        run = run_jobs(generate_home_job, [Job(home_scene_id(s), (s,), payload) for s in seeds], on_result=got,
                       workers=workers)
    finally:
        bar.close()
    if run.failures:
        raise VLNVerseError(f"{desc}: {run.failure_summary()}")
    return {int(s): made[int(s)] for s in seeds}
