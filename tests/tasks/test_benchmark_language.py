"""A benchmark's held-out splits re-instructed in another language (``Benchmark.episodes(...,
language=...)``): the frozen paths, homes and ids of the version-1 episodes, new wording, the
``val_unseen_language`` twins with ``params.language_split``, the same bytes on every build, and
the version-1 files untouched."""
from __future__ import annotations

import json

import pytest

from vlnverse.core.cache_key import sha256_file
from vlnverse.tasks.benchmark import load_benchmark

from test_benchmark import _write, tiny  # noqa: F401 (tiny: a fixture)

V2 = {"params.instruction_version": 2}
SPLIT = {"params.instruction_version": 2, "params.language_split": True}

def _done(episodes_file) -> dict:
    return json.loads((episodes_file.parent / "done.json").read_text())


def _frozen(e) -> tuple:
    return (e.scene_id, e.scene_path, e.start_position, e.start_yaw, [g.to_dict() for g in e.goals], e.reference_path,
            e.geodesic_distance)


def test_held_out_paths_are_reworded_and_the_twins_follow_the_split(tiny, tmp_path):
    bench = load_benchmark(_write(tmp_path, tiny))
    cache = tmp_path / "cache"
    v1 = {s: bench.episodes(s, cache_dir=cache, progress=False) for s in ("val_unseen", "test")}
    v1_sha = {s: sha256_file(bench.cache_folder(s, cache) / "episodes" / f"{s}.jsonl") for s in v1}
    assert v1_sha == bench.episodes_sha256  # the definition's, before and after (below)
    for split in ("val_unseen", "test"):
        v2 = bench.episodes(split, cache_dir=cache, progress=False, language=V2)
        unworded = _done(bench.language_file(split, V2, cache_dir=cache))["unworded"]
        kept = [e for e in v1[split] if e.episode_id not in unworded]
        assert len(v1[split]) == 4 and len(kept) >= 2 and len(unworded) == 4 - len(kept)
        assert [e.episode_id for e in v2] == [e.episode_id for e in kept]  # in the definition's order
        assert [_frozen(e) for e in v2] == [_frozen(e) for e in kept]
        assert {e.split for e in v2} == {split}
        assert all(e.info["language"] == {"version": 2, "families": [0, 1]} for e in v2)
        assert all([i.text for i in a.instructions] != [i.text for i in b.instructions] for a, b in zip(v2, v1[split]))
    shifted = bench.episodes("val_unseen", cache_dir=cache, progress=False, language=SPLIT)
    held = [e for e in shifted if e.split == "val_unseen"]
    twins = {e.episode_id: e for e in shifted if e.split == "val_unseen_language"}
    unworded = _done(bench.language_file("val_unseen", SPLIT, cache_dir=cache))["unworded"]
    assert [e.episode_id for e in held] == [e.episode_id for e in v1["val_unseen"] if e.episode_id not in unworded]
    assert sorted(twins) == sorted(e.episode_id + "-language" for e in held) and len(shifted) == 2 * len(held) >= 4
    for e in held:
        twin = twins[e.episode_id + "-language"]
        assert _frozen(twin) == _frozen(e) and e.info["language"]["families"] == [0]
        assert twin.info["language"]["families"] == [1]
        assert {i.text for i in twin.instructions}.isdisjoint(i.text for i in e.instructions)
    test_split = bench.episodes("test", cache_dir=cache, progress=False, language=SPLIT)
    assert {e.split for e in test_split} == {"test"} and all(e.info["language"]["families"] == [0] for e in test_split)
    assert {s: sha256_file(bench.cache_folder(s, cache) / "episodes" / f"{s}.jsonl") for s in v1} == v1_sha
    assert bench.cached("val_unseen", cache) and bench.cached("test", cache)


def test_a_reworded_split_has_the_same_bytes_on_every_build_and_is_reused(tiny, tmp_path):
    bench = load_benchmark(_write(tmp_path, tiny))
    a = bench.language_file("val_unseen", SPLIT, cache_dir=tmp_path / "a", progress=False)
    b = bench.language_file("val_unseen", SPLIT, cache_dir=tmp_path / "b", progress=False)
    assert a.read_bytes() == b.read_bytes() and a.parent.name == b.parent.name
    assert a.parent.parent == bench.cache_folder("val_unseen", tmp_path / "a").parent
    done = _done(a)
    assert done["episodes"] == 2 * (4 - len(done["unworded"])) and done["episodes_sha256"] == sha256_file(a)
    mtime = a.stat().st_mtime_ns
    assert bench.language_file("val_unseen", SPLIT, cache_dir=tmp_path / "a", progress=False) == a
    assert a.stat().st_mtime_ns == mtime  # reused
    other = bench.language_file("val_unseen", V2, cache_dir=tmp_path / "a", progress=False)
    assert other.parent != a.parent and other.read_bytes() != a.read_bytes()  # keyed by language


def test_another_task_is_generated_on_the_held_out_homes_the_same_on_every_build(tiny, tmp_path):
    """``episodes(..., task="coarse_grained", language=SPLIT)``: coarse-grained episodes on the
    benchmark's held-out homes (its episode seed and episodes per home), formal only, each val_unseen
    episode followed by its natural/casual twin; the same bytes from two caches, reused, the
    definition's own files untouched."""
    bench = load_benchmark(_write(tmp_path, tiny))
    got = {c: bench.episodes("val_unseen", cache_dir=tmp_path / c, progress=False, task="coarse_grained",
                             language=SPLIT) for c in ("a", "b")}
    held = [e for e in got["a"] if e.split == "val_unseen"]
    twins = {e.episode_id: e for e in got["a"] if e.split == "val_unseen_language"}
    assert len(held) == 2 * 2 and sorted(twins) == sorted(e.episode_id + "-language" for e in held)  # 2 homes x 2
    assert {e.scene_id for e in held} == set(bench.scene_ids("val_unseen"))
    assert all([i.style for i in e.instructions] == ["formal"] and "target" in e.info for e in held)
    for e in held:
        twin = twins[e.episode_id + "-language"]
        assert twin.reference_path == e.reference_path and twin.info["target"] == e.info["target"]
        assert sorted(i.style for i in twin.instructions) == ["casual", "natural"]
    assert all(e.scene_path == str(bench.scenes_folder("val_unseen", tmp_path / "a") / f"{e.scene_id}.usd")
               for e in held)
    folders = {c: bench.task_folder("val_unseen", "coarse_grained", SPLIT, cache_dir=tmp_path / c) for c in ("a", "b")}
    for name in ("val_unseen.jsonl", "val_unseen_language.jsonl"):
        assert (folders["a"] / name).read_bytes() == (folders["b"] / name).read_bytes()
    mtime = (folders["a"] / "val_unseen.jsonl").stat().st_mtime_ns
    assert bench.task_folder("val_unseen", "coarse_grained", SPLIT, cache_dir=tmp_path / "a") == folders["a"]
    assert (folders["a"] / "val_unseen.jsonl").stat().st_mtime_ns == mtime  # reused
    own = bench.cache_folder("val_unseen", tmp_path / "a") / "episodes" / "val_unseen.jsonl"
    assert sha256_file(own) == bench.episodes_sha256["val_unseen"]
    test = bench.episodes("test", cache_dir=tmp_path / "a", progress=False, task="coarse_grained", language=SPLIT)
    assert {e.split for e in test} == {"test"} and {e.scene_id for e in test} == set(bench.scene_ids("test"))


def test_another_task_with_no_episodes_is_an_error_and_leaves_no_folder(tiny, tmp_path, monkeypatch):
    """A task whose generation writes no episodes for the split: one-line error naming the
    benchmark, task and split, and no task folder left behind (the next call generates again)."""
    import vlnverse.tasks.dataset as dataset
    from vlnverse.core.errors import VLNVerseError

    bench = load_benchmark(_write(tmp_path, tiny))
    bench.build("val_unseen", cache_dir=tmp_path / "c", progress=False)
    monkeypatch.setattr(dataset, "generate_dataset", lambda *a, **k: {"counts": {}})
    with pytest.raises(VLNVerseError, match="benchmark 'tiny': no coarse_grained episodes were generated on its "
                                            "val_unseen homes"):
        bench.task_folder("val_unseen", "coarse_grained", SPLIT, cache_dir=tmp_path / "c", progress=False)
    root = bench.cache_folder("val_unseen", tmp_path / "c").parent
    assert sorted(p.name for p in root.iterdir() if "coarse" in p.name) == []
