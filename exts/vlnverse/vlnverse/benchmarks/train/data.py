"""``bench train``'s episodes: the training homes (or shipped train scenes), the held-out splits
(shipped scenes or a benchmark's) and the multi-task row's other tasks, generated once into the
work folder and reused."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import vlnverse.benchmarks.train.recipe as R

def _dataset(task: str, scenes: str | list, per_scene: int, seed: int, out: Path, val_seen_fraction: float,
             overrides: dict | None = None) -> list:
    """Episodes generated once into ``out`` (reused when its ``done`` marker exists); ``scenes``: a
    split name or a list of scene files; ``overrides``: the task's config overrides (in the marker
    only when given)."""
    from vlnverse.core.io import write_json_atomic
    from vlnverse.tasks.dataset import generate_dataset, resolve_scene_paths, simulator_renderer_factory
    from vlnverse.tasks.episode import load_episodes
    from vlnverse.tasks.instructions.languages import generation_key

    if not isinstance(scenes, str):
        scenes = [str(p) for p in scenes]
    key = {"task": task, "scenes": scenes, "n": per_scene, "seed": seed, "val_seen_fraction": val_seen_fraction,
           **generation_key(overrides)}
    marker = out / "done.json"
    if marker.is_file() and __import__("json").loads(marker.read_text()) == key:
        return load_episodes(out / "episodes")
    generate_dataset(task, resolve_scene_paths(scenes) if isinstance(scenes, str) else scenes, per_scene, seed,
                     out / "episodes", progress=True, val_seen_fraction=val_seen_fraction, overrides=overrides or None,
                     renderer_factory=simulator_renderer_factory())
    write_json_atomic(marker, key)
    return load_episodes(out / "episodes")


def split_data(work: Path, options: Any, seed: int) -> tuple[dict[str, list], dict | None]:
    """``({train, val_seen, val_unseen, test: episodes}, homes figures)`` of a run with the
    ``options`` (``TrainBenchOptions``) and ``seed``: generated training homes (``homes_data``, the
    val_seen subset drawn with ``seed``) or the shipped train scenes; the held-out episodes of the
    benchmark (``Benchmark.episodes``, made once into its cache; in another language its frozen
    paths re-instructed; in another task than its own, that task's episodes on its held-out homes,
    ``Benchmark.task_folder``), else of the shipped val_unseen
    and test scenes (seeds ``seed + 1`` / ``seed + 2``). Every split of ``options.task`` in
    ``options.task_overrides``'s language (``--language``); with ``v2-split`` also
    ``val_unseen_language``: each val_unseen episode in the held-out template families (coarse-grained:
    in the natural and casual styles, trained on formal), id ``<val_unseen id>-language``. Generated
    once into ``work`` (the homes into ``options.homes_cache`` when given) and reused."""
    from vlnverse.tasks.episode import LANGUAGE_SPLIT

    homes, workers, benchmark, overrides = options.homes, options.workers, options.benchmark, options.task_overrides
    task = options.task
    homes_figures = None
    if homes:
        train, val_seen, homes_figures = homes_data(work, int(homes), options.per_home, seed, workers, options.val_seen_cap,
                                                    benchmark=benchmark, cache_dir=options.homes_cache,
                                                    overrides=overrides, task=task)
    else:
        seen = _dataset(task, "train", max(8, round(R.TRAIN_SCENE_EPISODES * options.scale)), seed,
                        work / "data_train", R.VAL_SEEN_FRACTION, overrides)
        train, val_seen = [e for e in seen if e.split == "train"], [e for e in seen if e.split == "val_seen"]
    if benchmark is not None:
        unseen, test = (benchmark.episodes(s, workers=workers, language=overrides or None, task=task)
                        for s in ("val_unseen", "test"))
    else:
        unseen = _dataset(task, "val_unseen", options.per_held_out, seed + 1, work / "data_val_unseen", 0.0,
                          overrides)
        test = _dataset(task, "test", options.per_test, seed + 2, work / "data_test", 0.0, overrides)
    assert not {e.episode_id for e in train} & {e.episode_id for e in val_seen}, "val_seen must be disjoint from train"
    out = {"train": train, "val_seen": val_seen, "val_unseen": [e for e in unseen if e.split == "val_unseen"],
           "test": [e for e in test if e.split == "test"]}
    if LANGUAGE_SPLIT in options.eval_splits:
        out[LANGUAGE_SPLIT] = [e for e in unseen if e.split == LANGUAGE_SPLIT]
    return out, homes_figures


def homes_data(work: Path, homes: int, per_home: int, seed: int, workers: int,
               val_seen_cap: int = R.VAL_SEEN_HOMES_EPISODES, benchmark: Any = None,
               cache_dir: str | Path | None = None, overrides: dict | None = None,
               task: str = "fine_grained") -> tuple[list, list, dict]:
    """(train, val_seen, figures) on ``homes`` generated homes (``learn.homes``, the recipe of
    ``tasks/train/*.yaml``; with ``benchmark``, the first ``homes`` of its train pool and its room
    range; generated into ``cache_dir``, default ``work/cache``; ``overrides``: the task's config
    overrides, e.g. ``--language``'s; ``task``: its task, ``--task``): the dataset's train episodes, and
    at most ``VAL_SEEN_HOMES_EPISODES`` of its val_seen episodes (a seeded subset: same homes,
    disjoint episodes)."""
    from vlnverse.learn.homes import HomesSource, hold_out_seen, homes_dataset
    from vlnverse.tasks.scene_roots import resolve_episode_scenes, scene_roots

    pool = {} if benchmark is None else {"seed": benchmark.train_seeds(homes)[0], "min_rooms": benchmark.rooms[0],
                                         "max_rooms": benchmark.rooms[1]}
    spec = HomesSource(homes=homes, episodes_per_home=per_home, **pool)
    spec.validate()
    episodes, folder, info = homes_dataset(spec, task=task, body=None, cache_dir=cache_dir or work / "cache",
                                           workers=workers, overrides=overrides)
    if benchmark is not None:  # the training homes are the pool's: refused, naming the home, if made differently here
        from vlnverse.scenes.home_jobs import home_file_fingerprint

        made = info.get("fingerprints") or {p.stem: home_file_fingerprint(p) for p in sorted((folder / "scenes").glob("*.usd"))}
        benchmark.check_fingerprints("train", made)
    info = {k: v for k, v in info.items() if k != "fingerprints"}
    episodes = resolve_episode_scenes(episodes, scene_roots(None, folder / "episodes"))
    train, seen = hold_out_seen(episodes, seed, val_seen_cap)
    return train, seen, {"homes": homes, "episodes_per_home": per_home, "seed": spec.seed, **info}


def task_counts(train: int | None, held: int | None, homes: int, per_home: int, per_held_out: int, per_test: int,
                scale: float = 1.0) -> dict:
    """Episodes of each task but fine-grained in the multi-task row: ``train`` per generated home
    (``--train-homes`` > 0) or per shipped train scene, ``val_unseen`` / ``test`` per held-out
    scene: ``train`` (``--task-episodes``) and ``held`` (``--task-eval-episodes``, both held-out
    splits) when given, by default ``TASK_SHARE`` of the rows' fine-grained counts (at least 1; 2
    per shipped train scene)."""
    if train is None:
        train = max(1, round(per_home * R.TASK_SHARE)) if homes else max(2, round(R.TRAIN_SCENE_EPISODES * scale * R.TASK_SHARE))
    return {"train": int(train),
            "val_unseen": int(held) if held is not None else max(1, round(per_held_out * R.TASK_SHARE)),
            "test": int(held) if held is not None else max(1, round(per_test * R.TASK_SHARE))}


def multitask_data(work: Path, tasks: list[dict], split_eps: dict, counts: dict, seed: int, homes: bool,
                   val_seen_cap: int = R.VAL_SEEN_HOMES_EPISODES) -> dict:
    """Each task's episodes, split as the rows' -> ``{name: {split: [episodes]}}``, saved as
    ``work/tasks/<name>/<split>.jsonl``. fine_grained: the rows' own (``split_eps``); task ``i`` of
    the others: ``counts['train']`` episodes per training scene of the rows (the generated homes,
    ``homes``, or the shipped train scenes; seed ``seed + 10 i``, val_seen held out as the rows'
    are), ``counts['val_unseen']`` / ``counts['test']`` per shipped val_unseen / test scene
    (seeds ``seed + 10 i + 1`` / ``+ 2``), generated once into ``work/data_<split>_<name>``."""
    from vlnverse.learn.homes import hold_out_seen
    from vlnverse.tasks.episode import save_episodes
    from vlnverse.tasks.scene_roots import resolve_episode_scenes, scene_roots

    def made(task: str, scenes, n: int, task_seed: int, folder: str, fraction: float) -> list:
        eps = _dataset(task, scenes, n, task_seed, work / folder, fraction)
        return resolve_episode_scenes(eps, scene_roots(None, work / folder / "episodes"))

    out: dict = {}
    for i, t in enumerate(tasks):
        name, task = t["name"], t["task"]
        if task == "fine_grained" and i == 0:
            data = {s: list(split_eps[s]) for s in ("train", "val_seen", *R.MULTITASK_SPLITS)}
        else:
            s0 = seed + 10 * i
            scenes = sorted({str(e.scene_path) for e in split_eps["train"] + split_eps["val_seen"]}) if homes else "train"
            train, seen = hold_out_seen(made(task, scenes, counts["train"], s0, f"data_train_{name}", R.VAL_SEEN_FRACTION),
                                        s0, val_seen_cap)
            data = {"train": train, "val_seen": seen}
            for split, k in (("val_unseen", 1), ("test", 2)):
                data[split] = [e for e in made(task, split, counts[split], s0 + k, f"data_{split}_{name}", 0.0)
                               if e.split == split]
        for split, eps in data.items():
            if not eps:
                from vlnverse.core.errors import ConfigError

                raise ConfigError(f"task {name!r} has no {split} episodes", field="--task-episodes" if split in
                                  ("train", "val_seen") else "--task-eval-episodes", expected="a larger count")
            save_episodes(work / "tasks" / name / f"{split}.jsonl", eps)
        out[name] = data
    return out
