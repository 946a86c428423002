"""Named, versioned benchmarks (``vlnverse.tasks.benchmark``): a tiny definition made here (2 homes a
split), its held-out splits built into a cache and checked, bad definitions refused in one line,
and ``vlnverse eval ... benchmark=...``."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from vlnverse.core.errors import ConfigError
from vlnverse.scenes.procgen import GENERATOR_VERSION
from vlnverse.tasks.benchmark import (SHIPPED_MIN_HOMES, definition_text, load_benchmark, make_definition,
                                      parse_definition)

TINY = dict(name="tiny", version=3, seed_ranges={"train": (90000, 90001), "val_unseen": (90100, 90101),
                                                 "test": (90200, 90201)},
            episodes_per_home={"train": 2, "val_unseen": 2, "test": 2}, task="fine_grained", episode_seed=4)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict:
    """The tiny benchmark's definition (held-out homes, episodes and the train pool fingerprinted)."""
    return make_definition(**TINY, progress=False)


def _write(folder: Path, data: dict, name: str = "tiny.json") -> Path:
    path = folder / name
    path.write_text(definition_text(data), encoding="utf-8")
    return path


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != "done.json" and "summary" not in p.name}


def test_definition_records_every_home_and_the_episodes(tiny, tmp_path):
    bench = load_benchmark(_write(tmp_path, tiny))
    assert (bench.name, bench.version, bench.task, bench.episode_seed) == ("tiny", 3, "fine_grained", 4)
    assert bench.generator_version == GENERATOR_VERSION
    assert bench.seed_ranges == {"train": (90000, 90001), "val_unseen": (90100, 90101), "test": (90200, 90201)}
    assert bench.episodes_per_home == {"train": 2, "val_unseen": 2, "test": 2}
    assert sorted(bench.fingerprints["test"]) == ["gen_90200", "gen_90201"]
    assert sorted(bench.fingerprints["train"]) == ["gen_90000", "gen_90001"]
    assert len({fp for split in bench.fingerprints.values() for fp in split.values()}) == 6  # six distinct homes
    assert set(bench.episodes_sha256) == {"val_unseen", "test"}
    assert bench.train_seeds(2) == [90000, 90001]
    with pytest.raises(ConfigError, match=r"tiny\.json: splits\.train\.seeds: .*2 training homes, asked for 3"):
        bench.train_seeds(3)


def test_split_is_built_once_with_the_same_bytes_on_every_build(tiny, tmp_path):
    bench = load_benchmark(_write(tmp_path, tiny))
    a, b = tmp_path / "cache_a", tmp_path / "cache_b"
    scenes = bench.scenes("test", cache_dir=a, progress=False)
    assert [p.name for p in scenes] == ["gen_90200.usd", "gen_90201.usd"] and all(p.is_file() for p in scenes)
    episodes = bench.episodes("test", cache_dir=b, progress=False)
    assert len(episodes) == 4 and {e.split for e in episodes} == {"test"}
    assert {Path(e.scene_path).name for e in episodes} == {"gen_90200.usd", "gen_90201.usd"}
    assert all(Path(e.scene_path).is_file() for e in episodes)
    folder_a, folder_b = bench.cache_folder("test", a), bench.cache_folder("test", b)
    assert folder_a == a / "tiny-v3" / "test"
    files = _files(folder_a)
    assert "episodes/test.jsonl" in files and "scenes/gen_90201.usd" in files
    assert files == _files(folder_b)  # same bytes twice
    assert bench.cached("test", a) and not bench.cached("val_unseen", a)
    mtime = (folder_a / "done.json").stat().st_mtime_ns
    assert bench.scenes("test", cache_dir=a, progress=False) == scenes  # reused, not made again
    assert (folder_a / "done.json").stat().st_mtime_ns == mtime
    (folder_a / "scenes" / "gen_90201.usd").write_bytes(b"#usda 1.0\n")  # a damaged cache is made again
    assert not bench.cached("test", a)
    bench.scenes("test", cache_dir=a, progress=False)
    assert _files(folder_a) == files
    assert bench.verify("test", cache_dir=a, progress=False)["homes"] == 2


def test_a_split_another_run_finished_meanwhile_is_kept_not_replaced(tiny, tmp_path, monkeypatch):
    """Two runs sharing a cache build the same split at once: the one finishing second keeps the
    first one's folder (a run reading it loses no file) and drops its own copy."""
    from vlnverse.tasks.benchmark import Benchmark

    bench = load_benchmark(_write(tmp_path, tiny))
    cache = tmp_path / "cache"
    folder = bench.build("test", cache_dir=cache, progress=False)
    first = (folder.stat().st_ino, (folder / "episodes" / "test.jsonl").stat().st_ino)
    checks = []
    real_cached = Benchmark.cached

    def started_before_the_other_finished(self, split, cache_dir=None):
        checks.append(split)
        return len(checks) > 1 and real_cached(self, split, cache_dir)

    monkeypatch.setattr(Benchmark, "cached", started_before_the_other_finished)
    assert bench.build("test", cache_dir=cache, progress=False) == folder
    assert len(checks) == 2  # made again (first check), then kept (the check at the end)
    assert (folder.stat().st_ino, (folder / "episodes" / "test.jsonl").stat().st_ino) == first
    assert sorted(p.name for p in folder.parent.iterdir()) == ["test"]  # no temporary copy left


def test_a_home_this_machine_makes_differently_is_refused_and_nothing_is_left(tiny, tmp_path):
    data = json.loads(json.dumps(tiny))
    data["splits"]["test"]["homes"]["gen_90201"] = "0" * 64
    bench = load_benchmark(_write(tmp_path, data))
    cache = tmp_path / "cache"
    with pytest.raises(ConfigError) as err:
        bench.scenes("test", cache_dir=cache, progress=False)
    message = str(err.value)
    assert "\n" not in message and str(tmp_path / "tiny.json") in message
    assert "splits.test.homes.gen_90201" in message and "home 'gen_90201'" in message
    assert not bench.cache_folder("test", cache).exists()
    assert list((cache / "tiny-v3").iterdir()) == []  # no temporary folder either

    data = json.loads(json.dumps(tiny))
    data["splits"]["val_unseen"]["episodes_sha256"] = "f" * 64
    bench = load_benchmark(_write(tmp_path, data))
    with pytest.raises(ConfigError, match=r"tiny\.json: splits\.val_unseen\.episodes_sha256: the val_unseen episodes"):
        bench.episodes("val_unseen", cache_dir=cache, progress=False)
    assert not bench.cache_folder("val_unseen", cache).exists()


def test_a_cached_home_changed_on_disk_fails_verify(tiny, tmp_path):
    from vlnverse.scenes.procgen import generate_home
    from vlnverse.scenes.usd_io import write_usd

    bench = load_benchmark(_write(tmp_path, tiny))
    folder = bench.build("val_unseen", cache_dir=tmp_path, progress=False)
    # another home under the same name and size-check slipped past: verify re-reads the content
    path = folder / "scenes" / "gen_90101.usd"
    write_usd(generate_home(90102, scene_id="gen_90101"), path)
    done = json.loads((folder / "done.json").read_text())
    done["sizes"]["scenes/gen_90101.usd"] = path.stat().st_size
    (folder / "done.json").write_text(json.dumps(done))
    with pytest.raises(ConfigError, match=r"splits\.val_unseen\.homes\.gen_90101: home 'gen_90101' generated here"):
        bench.verify("val_unseen", cache_dir=tmp_path, progress=False)


def _mutated(tiny: dict, change) -> dict:
    data = json.loads(json.dumps(tiny))
    change(data)
    return data


@pytest.mark.parametrize("change, pattern", [
    (lambda d: d["splits"]["test"].update(seeds=[90101, 90102]),
     r"splits\.test\.seeds: seeds 90101\.\.90101 are in both val_unseen and test \(expected disjoint seed ranges\)"),
    (lambda d: d["splits"]["train"].update(seeds=[90050, 90200]), r"splits\.val_unseen\.seeds: seeds 90100\.\.90101"),
    (lambda d: d["splits"]["val_unseen"].update(seeds=[14, 15], homes={}),
     r"splits\.val_unseen\.seeds: seed 14 is the shipped val_unseen home home_0014"),
    (lambda d: d.update(generator_version=GENERATOR_VERSION - 1),
     rf"generator_version: benchmark 'tiny' was made by scene generator version {GENERATOR_VERSION - 1}; "
     rf"this vlnverse's generator is version {GENERATOR_VERSION}"),
    (lambda d: d["task"].update(type="teleportation"), r"task\.type: unknown task 'teleportation'"),
    (lambda d: d["splits"]["test"].update(seeds=[90200, 90200]),
     r"splits\.test\.seeds: 1 home\(s\) \(90200\.\.90200\) \(expected 2\.\.100000 homes in test\)"),
    (lambda d: d["splits"]["test"]["homes"].pop("gen_90200"), r"splits\.test\.homes: missing \['gen_90200'\]"),
    (lambda d: d["splits"]["test"]["homes"].update(gen_90200=d["splits"]["val_unseen"]["homes"]["gen_90100"]),
     r"splits\.test\.homes\.gen_90200: the same home as val_unseen home gen_90100"),
    (lambda d: d["splits"]["test"].update(episodes_per_home=0), r"splits\.test\.episodes_per_home: got 0"),
    (lambda d: d.update(shards=2), r"shards: unknown field"),
])
def test_bad_definitions_are_refused_in_one_line(tiny, tmp_path, change, pattern):
    path = _write(tmp_path, _mutated(tiny, change))
    with pytest.raises(ConfigError, match=pattern) as err:
        load_benchmark(path)
    assert str(err.value).startswith(f"{path}: ") and "\n" not in str(err.value)


def test_malformed_and_unknown_definitions(tmp_path):
    from vlnverse.core.errors import UnknownNameError

    bad = tmp_path / "bad.json"
    bad.write_text('{"format": 1,\n "name": }\n')
    with pytest.raises(ConfigError, match=rf"{bad}:2: malformed JSON"):
        load_benchmark(bad)
    with pytest.raises(UnknownNameError, match=r"unknown benchmark 'proc-v0' \(registered: .*proc-v1"):
        load_benchmark("proc-v0")
    with pytest.raises(ConfigError, match="file not found"):
        load_benchmark(tmp_path / "missing.json")


def test_the_shipped_benchmark_is_large_disjoint_and_holds_the_training_recipes_homes():
    from vlnverse.learn.homes import DEFAULT_HOMES_SEED
    from vlnverse.tasks.benchmark import shipped_home_seeds

    bench = load_benchmark("proc-v1")
    assert (bench.name, bench.version, bench.task) == ("proc-v1", 1, "fine_grained")
    for split, minimum in SHIPPED_MIN_HOMES.items():
        assert len(bench.seeds(split)) >= minimum
        assert len(bench.fingerprints[split]) == len(bench.seeds(split))
    assert bench.episodes_per_home["test"] == bench.episodes_per_home["val_unseen"] == 5
    assert bench.train_seeds(30) == list(range(DEFAULT_HOMES_SEED, DEFAULT_HOMES_SEED + 30))
    shipped = set(shipped_home_seeds())
    assert shipped and not shipped & {s for split in ("train", "val_unseen", "test") for s in bench.seeds(split)}
    # the shipped file holds what the tool writes (sorted keys, its layout), and the shipped rules apply
    text = bench.path.read_text(encoding="utf-8")
    assert definition_text(json.loads(text)) == text
    small = json.loads(text)
    small["splits"]["test"]["seeds"] = [6000, 6009]
    small["splits"]["test"]["homes"] = {k: v for k, v in small["splits"]["test"]["homes"].items() if k <= "gen_06009"}
    parse_definition(small, Path("user.json"))  # a user's benchmark may be smaller
    with pytest.raises(ConfigError, match=r"splits\.test\.seeds: 10 home\(s\).*20\.\.100000 homes in test"):
        parse_definition(small, bench.path, shipped=True)


def test_eval_on_a_benchmark_split_records_it(tiny, tmp_path, monkeypatch):
    from vlnverse.eval.config import load_eval_config
    from vlnverse.eval.runner import run_eval
    from vlnverse.paths import tasks_dir

    monkeypatch.setenv("VLNVERSE_CACHE", str(tmp_path / "cache"))
    definition = _write(tmp_path, tiny)
    cfg = load_eval_config(tasks_dir() / "eval" / "oracle_fine_grained_strict.yaml", [f"benchmark={definition}", "split=test", "sensors=[]", "report.enabled=false",
                            f"out={tmp_path / 'run'}"])
    assert cfg.episodes is None  # the benchmark is the episode source
    summary = run_eval(cfg, progress=False, print_summary=False)
    record = {"name": "tiny", "version": 3, "split": "test"}
    assert summary["run"]["benchmark"] == record
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["run"]["benchmark"] == record
    assert json.loads((tmp_path / "run" / "config.json").read_text())["benchmark"] == record
    assert summary["overall"]["episodes"] == 4 and summary["overall"]["means"]["SR"] == 1.0
    saved = (tmp_path / "run" / "input_episodes.jsonl").read_text()
    assert '"scene_path":"gen_90200.usd"' in saved and str(tmp_path) not in saved  # portable scene names


@pytest.mark.parametrize("task", ["coarse_grained", "fine_grained"])
def test_eval_of_the_language_split_on_a_benchmark_runs_on_its_held_out_homes(task, tiny, tmp_path, monkeypatch):
    """``language: v2-split``, ``split: val_unseen_language`` on a fine-grained benchmark: its paths
    re-instructed (fine_grained: the oracle reaches every goal), or the coarse-grained twins
    generated on its val_unseen homes (2 homes x 2 episodes, natural/casual only)."""
    from vlnverse.eval.config import load_eval_config
    from vlnverse.eval.runner import run_eval
    from vlnverse.paths import tasks_dir
    from vlnverse.tasks.episode import load_episodes

    monkeypatch.setenv("VLNVERSE_CACHE", str(tmp_path / "cache"))
    definition = _write(tmp_path, tiny)
    cfg = load_eval_config(tasks_dir() / "eval" / "oracle_fine_grained_telhop.yaml",
                           [f"benchmark={definition}", "split=val_unseen_language", f"task={task}",
                            "language=v2-split", "sensors=[]", "report.enabled=false", f"out={tmp_path / 'run'}"])
    summary = run_eval(cfg, progress=False, print_summary=False)
    episodes = load_episodes(tmp_path / "run" / "input_episodes.jsonl")
    assert summary["overall"]["episodes"] == len(episodes) and summary["run"]["benchmark"]["name"] == "tiny"
    assert {e.task_type for e in episodes} == {task} and {e.split for e in episodes} == {"val_unseen_language"}
    assert {e.scene_id for e in episodes} <= {"gen_90100", "gen_90101"}
    if task == "coarse_grained":
        assert len(episodes) == 4 and {e.scene_id for e in episodes} == {"gen_90100", "gen_90101"}
        assert all(sorted(i.style for i in e.instructions) == ["casual", "natural"] for e in episodes)
    else:  # the paths the version-2 language words (tests/tasks/test_benchmark_language.py), the oracle on them
        assert len(episodes) >= 2 and all(e.info["language"]["families"] == [1] for e in episodes)
        assert summary["overall"]["means"]["SR"] == 1.0


def test_eval_config_refuses_a_split_the_benchmark_lacks(tiny, tmp_path):
    from vlnverse.eval.config import load_eval_config

    definition = _write(tmp_path, tiny)
    config = tmp_path / "eval.yaml"
    config.write_text(f"agent: {{name: oracle}}\ntask: fine_grained\nbenchmark: {definition}\nsplit: train\n")
    with pytest.raises(ConfigError, match=rf"{config}: split: got 'train' \(expected val_unseen or test"):
        load_eval_config(config)
    with pytest.raises(ConfigError, match=r"benchmark: unknown benchmark 'nope'"):
        load_eval_config(config, ["split=test", "benchmark=nope"])
    without = tmp_path / "plain.yaml"
    without.write_text("agent: {name: oracle}\ntask: fine_grained\n")
    with pytest.raises(ConfigError, match=r"episodes: got None"):
        load_eval_config(without)


def test_benchmark_commands(tiny, tmp_path, capsys):
    from vlnverse.cli import main

    definition = _write(tmp_path, tiny)
    cache = str(tmp_path / "cache")
    assert main(["benchmark", "build", str(definition), "--split", "test", "--cache-dir", cache, "--no-progress"]) == 0
    assert "tiny v3 test: 2 homes, built and checked" in capsys.readouterr().out
    assert main(["benchmark", "info", str(definition), "--cache-dir", cache]) == 0
    out = capsys.readouterr().out
    assert "test       seeds 90200..90201: 2 homes x 2 episodes = 4" in out and f"cached in {cache}" in out
    assert "val_unseen seeds 90100..90101" in out and "not built yet" in out
    assert main(["benchmark", "verify", str(definition), "--split", "test", "--cache-dir", cache, "--no-progress",
                 "--train-homes", "1"]) == 0
    assert "the first 1 homes match" in capsys.readouterr().out
    assert main(["benchmark", "list"]) == 0
    assert "proc-v1" in capsys.readouterr().out
    assert main(["benchmark", "info", "nope"]) == 2
    assert "unknown benchmark 'nope'" in capsys.readouterr().err


@pytest.mark.slow
def test_proc_v1_val_unseen_builds_and_matches_its_fingerprints(tmp_path):
    bench = load_benchmark("proc-v1")
    episodes = bench.episodes("val_unseen", cache_dir=tmp_path, workers=2, progress=False)
    assert len({e.scene_id for e in episodes}) == 20
    assert len(episodes) == 20 * bench.episodes_per_home["val_unseen"]


def test_documented_benchmark_commands_compare_the_shipped_cma_with_random(tiny, tmp_path, monkeypatch, capsys):
    """docs/benchmark.md's commands with the tiny definition: the shipped CMA config and the
    random agent on the same held-out episodes, trailing --benchmark/--split, then one paired
    comparison over them (a few steps per episode keep it fast)."""
    from vlnverse.cli import main

    monkeypatch.setenv("VLNVERSE_CACHE", str(tmp_path / "cache"))
    definition = str(_write(tmp_path, tiny))
    small = ["max_steps=4", "report.enabled=false", "--no-progress"]
    cma, rand = tmp_path / "cma_test", tmp_path / "random_test"
    assert main(["eval", "cma_fine_grained", "--benchmark", definition, "--split", "test", "--envs", "2",
                 f"out={cma}", *small]) == 0
    assert main(["eval", "cma_fine_grained", "agent.name=random", "agent.params={}", f"out={rand}",
                 "--benchmark", definition, "--split", "test", *small]) == 0
    for run, agent in ((cma, "policy"), (rand, "random")):
        summary = json.loads((run / "summary.json").read_text())
        assert summary["run"]["agent"] == agent and summary["run"]["benchmark"]["split"] == "test"
        assert summary["overall"]["design"]["homes"] == 2 and summary["overall"]["episodes"] == 4
    capsys.readouterr()
    assert main(["results", "compare", str(cma), str(rand), "--out", str(tmp_path / "cmp")]) == 0
    compared = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    (group,) = compared["groups"]
    assert [c["a"] + " - " + c["b"] for c in group["comparisons"]] == ["cma_test - random_test"]


def test_bench_train_refuses_training_homes_made_differently_here(tiny, tmp_path):
    """``bench train --benchmark``'s training homes are the pool's first N, checked against its
    fingerprints as made (and again when the cached homes are reused)."""
    from vlnverse.benchmarks.train.data import homes_data

    bench = load_benchmark(_write(tmp_path, tiny))
    train, seen, figures = homes_data(tmp_path / "work", 2, 2, 0, 1, benchmark=bench)
    assert {Path(e.scene_path).stem for e in train + seen} == {"gen_90000", "gen_90001"}
    assert "fingerprints" not in figures
    changed = json.loads(json.dumps(tiny))
    changed["splits"]["train"]["homes"]["gen_90001"] = "0" * 64
    other = load_benchmark(_write(tmp_path, changed, "changed.json"))
    for cache in ("work", "fresh"):  # reusing the cached homes, and making them anew
        with pytest.raises(ConfigError, match=r"changed\.json: splits\.train\.homes\.gen_90001: home 'gen_90001' "
                                              r"generated here has fingerprint"):
            homes_data(tmp_path / cache, 2, 2, 0, 1, benchmark=other)
