"""The observation cache: teacher-forced rollouts rendered once into a ``StepStore`` and reused.

A cache folder is ``<cache dir>/obs/<key hash>``; the key covers the episodes (ids, starts, goals,
reference paths, instructions), the sensor rig, the body, the collision mode and its parameters,
the step limits, the code version (``vlnverse.learn.code_version()``) and how the frames were
rendered (``render``: ``physics`` or ``teleport``, see ``collect``) and, when they are not the
defaults, the render settings (``render_settings``: quality, objects), so any change makes a new cache. A cache that is missing, was interrupted, or lost a chunk file is rebuilt, and the log
says why. Its size and render rate (frames/s) are reported.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable

from ..core.cache_key import content_key
from . import code_version
from .store import StepStore, sensor_layout

log = logging.getLogger(__name__)


def cache_key(episodes: list, *, sensors: list, settings: Any, collision_mode: str, mode_params: dict | None,
              teacher: Any = None, render: str = "physics", render_settings: Any = None) -> dict[str, Any]:
    """The cache key (JSON-ready); a non-default ``teacher`` spec adds its key (``teacher_key``); ``render`` is the
    render path (``physics`` | ``teleport``); ``render_settings`` (a ``RenderConfig``) adds
    ``{quality, objects}`` unless None or the defaults (the keys of default renders are unchanged)."""
    view = None if render_settings is None else render_settings.key()
    episodes_key = content_key("episodes", 1, [{k: v for k, v in ep.to_dict().items() if k != "info"}
                                               for ep in episodes])
    return {"episodes_sha256": episodes_key, "episodes": len(episodes), "sensors": sensor_layout(sensors),
            "body": settings.body.name, "max_steps": settings.max_steps, "success_distance": settings.success_distance,
            "collision_mode": collision_mode, "mode_params": (mode_params or {}).get(collision_mode, {}),
            "code_version": code_version(), "render": render, **({"teacher": teacher_key(teacher, episodes)} if teacher is not None else {}),
            **({"render_settings": view} if view is not None else {})}


def teacher_key(teacher: Any, episodes: list) -> dict[str, Any]:
    """A teacher spec's part of the cache key: its ``key_for(episodes)`` (``TeacherSpec``: its
    ``key``, unless it depends on the episodes, e.g. RDP's on whether any has ordered sub-goals)."""
    return teacher.key_for(episodes)


def cache_root(base: str | Path | None) -> Path:
    """``base`` or ``$VLNVERSE_CACHE/learn``."""
    from ..paths import cache_dir

    return Path(base) if base else cache_dir() / "learn"


#: format version of every keyed folder of the learning caches (part of each folder's content key)
CACHE_VERSION = 1


def keyed_folder(base_dir: str | Path | None, namespace: str, key: dict, *, length: int = 12) -> Path:
    """``<cache root>/<namespace>/<content key>``: the folder of one cached result
    (``vlnverse.core.cache_key.content_key`` of the namespace, ``CACHE_VERSION`` and ``key``)."""
    return cache_root(base_dir) / namespace / content_key(namespace, CACHE_VERSION, key, length=length)


def keyed_store(base_dir: str | Path | None, namespace: str, key: dict, *, what: str, build: bool = True,
                report: Callable[[str], None] = print) -> tuple[Path, StepStore, str]:
    """The step store of ``key`` under ``<cache root>/<namespace>/<content key>`` and its status:
    ``reused`` (complete and made for this key), else ``built`` / ``rebuilt`` (to be written at the
    returned root; a stale one is reported). ``build=False`` (a rank that may not build) makes a
    store that cannot be reused a ``VLNVerseError``; ``what`` names the cache in messages."""
    root = keyed_folder(base_dir, namespace, key, length=16)
    store = StepStore(root)
    problem = store.check() if root.exists() else "missing"
    if problem is None and store.manifest.get("key") != key:
        problem = "its key does not match"
    if problem is None:
        return root, store, "reused"
    if not build:
        from ..core.errors import VLNVerseError

        raise VLNVerseError(f"{what} cache {root} cannot be reused after rank 0 built it ({problem}): "
                            "every rank must see the same cache.dir (a shared file system on several nodes)")
    if problem != "missing":
        report(f"{what} cache at {root} is stale ({problem}): rebuilding")
    return root, store, "built" if problem == "missing" else "rebuilt"


def teacher_cache(episodes: list, *, sensors: list, settings: Any, collision_mode: str, mode_params: dict | None = None,
                  base_dir: str | Path | None = None, chunk_frames: int = 512,
                  scene_loader: Callable | None = None, backend: str = "auto", progress: bool = True,
                  report: Callable[[str], None] = print, teacher: Any = None, workers: int = 1,
                  engine: str = "local", address: str | None = None,
                  job_timeout: float | None = None, render: str = "auto", build: bool = True,
                  render_settings: Any = None) -> tuple[StepStore, dict[str, Any]]:
    """The observation cache of ``episodes`` (built when missing or stale); returns the store and
    its stats (``status``: reused / built / rebuilt, ``frames``, ``bytes``, ``frames_per_s`` when built).
    ``teacher``: a policy's teacher spec (see ``collect``); None is the discrete oracle.
    ``workers`` / ``engine`` / ``address`` / ``job_timeout`` render scenes in parallel (``collect``);
    the cache's files are byte-identical to a serial build's, so they are not part of its key.
    ``render``: ``auto`` (teleport where it applies), ``physics`` or ``teleport``
    (``collect.resolve_render_path``). ``build=False`` (ranks > 0 of a distributed run, which
    open what rank 0 built) makes a cache that cannot be reused a ``VLNVerseError``.
    ``render_settings``: the ``RenderConfig`` the frames are drawn with (None: the defaults)."""
    from .collect import collect, resolve_render_path

    render = resolve_render_path(render, collision_mode, teacher, sensors)
    key = cache_key(episodes, sensors=sensors, settings=settings, collision_mode=collision_mode, mode_params=mode_params,
                    teacher=teacher, render=render, render_settings=render_settings)
    root, store, status = keyed_store(base_dir, "obs", key, what="observation", build=build, report=report)
    if status == "reused":
        stats = {"status": "reused", "path": str(root), "frames": store.num_steps, "episodes": len(store),
                 "bytes": store.size_bytes(), "teacher_SR": (store.manifest.get("summary") or {}).get("teacher_SR")}
        report(f"observation cache: reusing {root} ({stats['frames']} frames, {stats['bytes'] / 1e6:.1f} MB)")
        return store, stats
    store = StepStore.create(root, key=key, sensors=sensor_layout(sensors), chunk_frames=chunk_frames,
                              extra_fields=teacher.extra_fields if teacher is not None else None)
    result = collect(episodes, settings=settings, sensors=sensors, collision_mode=collision_mode, store=store,
                     scene_loader=scene_loader, mode_params=mode_params, backend=backend, progress=progress,
                     desc="render cache", teacher=teacher, workers=workers, engine=engine, address=address,
                     job_timeout=job_timeout, render=render, render_settings=render_settings)
    teacher_sr = round(sum(r["metrics"]["SR"] or 0.0 for r in result["records"]) / max(1, len(result["records"])), 4)
    store.close(teacher_SR=teacher_sr)
    stats = {"status": status, "path": str(root), "frames": store.num_steps, "episodes": len(store),
             "bytes": store.size_bytes(), "seconds": result["seconds"], "frames_per_s": result["steps_per_s"],
             "workers": workers, "engine": engine, "render": render,
             "teacher_SR": teacher_sr}
    report(f"observation cache: {status} {root}: {stats['frames']} frames of {stats['episodes']} episodes, "
           f"{stats['bytes'] / 1e6:.1f} MB, {stats['frames_per_s']} frames/s rendered by {render} (teacher SR {stats['teacher_SR']:.2f})")
    return store, stats


def generated_episodes(gen: Any, *, task: str, body: str | None = None, cache_dir: Any = None,
                       progress: bool = True, overrides: dict | None = None) -> list:
    """The episodes of a ``GenerateSpec`` (``task`` when it names none; ``overrides``: the task's
    config overrides, e.g. a language's, part of the key only when given), kept in the cache
    (``<cache dir>/datasets/<key hash>``) and reused."""
    import shutil

    from ..core.io import write_json_atomic
    from ..run.episodes import generate_episodes
    from ..tasks.episode import load_episodes
    from ..tasks.instructions.languages import generation_key

    key = {"task": gen.task or task, "scenes": gen.scenes, "n": gen.episodes_per_scene, "seed": gen.seed,
           "max_scenes": gen.max_scenes, "body": body,
           **generation_key(overrides)}
    folder = keyed_folder(cache_dir, "datasets", key)
    if (folder / "done.json").is_file():
        return load_episodes(folder)
    if folder.exists():
        shutil.rmtree(folder)
    episodes = generate_episodes(key["task"], gen.scenes, gen.episodes_per_scene, gen.seed, folder, body=body,
                                 max_scenes=gen.max_scenes, progress=progress, overrides=overrides)
    write_json_atomic(folder / "done.json", key)
    return episodes
