"""Training homes made by the scene generator (``learn.homes``) and the split guard: a train split
that shares a home with val_unseen or test -- by scene id or by content under another name -- is
refused in one line naming ``train``."""
from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from learn_helpers import make_episodes


def _episode_on(path, scene_id):
    from vlnverse.tasks.episode import Episode, Goal, Instruction

    return Episode(f"{scene_id}-0", scene_id, str(path), "train", "fine_grained", [0.0, 0.0, 0.0], 0.0,
                   [Goal([1.0, 0.0, 0.0])], [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]], 1.0, [Instruction("go")])


def test_guard_refuses_a_held_out_scene_id_and_passes_train_homes(tmp_path):
    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.homes import check_disjoint_homes, held_out_scenes
    from vlnverse.scenes.splits import scene_file

    held = held_out_scenes({})
    assert {p.stem for p in held["val_unseen"]} == {"home_0014", "home_0016"}
    assert {p.stem for p in held["test"]} == {"home_0002", "home_0017"}
    with pytest.raises(ConfigError, match=r"train.*shares homes with test: \['home_0017'\]") as err:
        check_disjoint_homes([_episode_on(scene_file("home_0017"), "home_0017")], held, cache_dir=tmp_path)
    assert "\n" not in str(err.value)
    loads = []
    fake = {"a": "desc a", "b": "desc b"}

    def loader(path):  # in-memory descriptions: the content check without USD
        loads.append(path)
        from types import SimpleNamespace

        return SimpleNamespace(geoms=[], rooms=[SimpleNamespace(room_type=fake[path[-5]], polygon=[[0, 0], [1, 1]])])

    for name in ("xa.usd", "xb.usd", "ya.usd"):
        (tmp_path / name).write_bytes(b"#usda 1.0\n")
    held = {"val_unseen": [tmp_path / "xa.usd"], "test": [tmp_path / "xb.usd"]}
    check_disjoint_homes([], held, loader=loader, cache_dir=tmp_path)  # nothing to compare
    with pytest.raises(ConfigError, match=r"home 'ya' is val_unseen home 'xa'"):
        check_disjoint_homes([_episode_on(tmp_path / "ya.usd", "ya")], held, loader=loader, cache_dir=tmp_path)
    held = {"val_unseen": [tmp_path / "xb.usd"], "test": []}
    check_disjoint_homes([_episode_on(tmp_path / "ya.usd", "ya")], held, loader=loader, cache_dir=tmp_path)
    assert (tmp_path / "homes" / "fingerprints.json").is_file()


def test_guard_finds_a_held_out_home_copied_under_another_name(tmp_path):
    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.homes import check_disjoint_homes, held_out_scenes
    from vlnverse.scenes.splits import scene_file

    copy = tmp_path / "gen_00014.usd"
    shutil.copyfile(scene_file("home_0014"), copy)
    ok = [_episode_on(scene_file("home_0001"), "home_0001")]
    check_disjoint_homes(ok, held_out_scenes({}), cache_dir=tmp_path)  # a shipped train home: fine
    with pytest.raises(ConfigError, match=r"train.*'gen_00014' is val_unseen home 'home_0014'"):
        check_disjoint_homes(ok + [_episode_on(copy, "gen_00014")], held_out_scenes({}), cache_dir=tmp_path)


def test_trainer_refuses_overlapping_splits_before_rendering(tmp_path, corridor):
    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.trainer import Trainer
    from vlnverse.scenes.splits import scene_file
    from vlnverse.tasks.episode import save_episodes
    from learn_helpers import small_config

    eps = make_episodes(corridor)[:1]
    eps[0].scene_id, eps[0].scene_path = "home_0016", str(scene_file("home_0016"))
    save_episodes(tmp_path / "train.jsonl", eps)
    cfg = small_config(tmp_path / "run", tmp_path / "train.jsonl")
    with pytest.raises(ConfigError, match="shares homes with val_unseen"):
        Trainer(cfg, progress=False)._episodes()
    assert not (tmp_path / "cache" / "obs").exists()


def test_homes_source_in_a_train_config(tmp_path, episodes_file):
    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.homes import DEFAULT_HOMES_SEED, HomesSource, home_scene_id
    from learn_helpers import small_config

    cfg = small_config(tmp_path / "x", episodes_file, train={"homes": 30, "episodes_per_home": 5})
    assert cfg.train == HomesSource(homes=30, seed=DEFAULT_HOMES_SEED, episodes_per_home=5)
    both = small_config(tmp_path / "x", episodes_file, train={"homes": 3}, val={"val_seen": {"homes": 3}})
    assert both.val["val_seen"] == both.train and both.train.val_seen_fraction == 0.25
    assert cfg.to_dict()["train"]["homes"] == 30 and home_scene_id(14) == "gen_00014"
    key = cfg.train.key("fine_grained", None)
    assert key != HomesSource(homes=30, seed=DEFAULT_HOMES_SEED + 1, episodes_per_home=5).key("fine_grained", None)
    with pytest.raises(ConfigError, match=r"train\.homes"):
        small_config(tmp_path / "x", episodes_file, train={"homes": 0})
    with pytest.raises(ConfigError, match=r"val\.val_seen\.val_seen_fraction"):
        small_config(tmp_path / "x", episodes_file, val={"val_seen": {"homes": 3, "val_seen_fraction": 1.5}})
    with pytest.raises(ConfigError, match=r"train\.seed"):
        small_config(tmp_path / "x", episodes_file, train={"homes": 2, "seed": -1})
    with pytest.raises(ConfigError, match=r"train\.val_seen_episodes.*only in a val\.val_seen block"):
        small_config(tmp_path / "x", episodes_file, train={"homes": 2, "val_seen_episodes": 4})
    with pytest.raises(ConfigError, match=r"val\.val_seen\.val_seen_episodes.*positive integer"):
        small_config(tmp_path / "x", episodes_file, val={"val_seen": {"homes": 2, "val_seen_episodes": 0}})


def test_a_train_configs_language_reaches_what_it_generates(tmp_path, episodes_file, corridor, monkeypatch):
    """``language: v2`` generates the homes (and ``generate`` blocks) in the version-2 language;
    an episode file is read as it is."""
    import vlnverse.learn.homes as homes
    from vlnverse.learn.trainer import Trainer
    from vlnverse.tasks.episode import load_episodes
    from learn_helpers import small_config

    asked = []

    def fake_homes(spec, **kw):   # the homes as the generator words them
        asked.append(kw.get("overrides"))
        info = {"language": {"version": 2, "families": [0, 1]}} if kw.get("overrides") else {}
        return [replace(e, split="train", info={**e.info, **info}) for e in load_episodes(episodes_file)], \
            Path("unused"), {}

    monkeypatch.setattr(homes, "homes_dataset", fake_homes)
    for language, expected in (("v2", {"params.instruction_version": 2}), ("v1", {})):
        cfg = small_config(tmp_path / language, episodes_file, train={"homes": 1}, language=language)
        Trainer(cfg, progress=False, scene_loader=lambda *a: corridor)._episodes()
        assert asked.pop() == expected
        assert cfg.run_key().get("language") == (None if language == "v1" else language)  # v1: folders of before resume
    # An episode file in version 1 under a version-2 config is refused before anything renders.
    from vlnverse.core.errors import ConfigError

    cfg = small_config(tmp_path / "file", episodes_file, language="v2")
    with pytest.raises(ConfigError, match="worded in v1, the config says 'v2'"):
        Trainer(cfg, progress=False, scene_loader=lambda *a: corridor)._episodes()


@pytest.mark.parametrize("seed", [0, 1])
def test_val_seen_episodes_keeps_the_subset_bench_train_holds_out(seed, monkeypatch):
    """A config's ``val.val_seen: {homes: ..., val_seen_episodes: M}`` validates on the episodes
    ``bench train`` (``hold_out_seen``) holds out with the same seed, in the same order."""
    import vlnverse.learn.homes as homes
    from vlnverse.learn.splits import resolve_split
    from vlnverse.tasks.episode import Episode, Goal, Instruction

    eps = [Episode(f"e{i}", "gen_01000", "gen_01000.usd", "val_seen" if i % 3 == 0 else "train", "fine_grained",
                   [0.0, 0.0, 0.0], 0.0, [Goal([1.0, 0.0, 0.0])], [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]], 1.0,
                   [Instruction("go")]) for i in range(30)]  # 10 held out
    monkeypatch.setattr(homes, "homes_dataset", lambda spec, **kw: (list(eps), Path("unused"), {}))
    source = homes.HomesSource(homes=1, val_seen_episodes=4)
    got = resolve_split(source, split="val_seen", task_type="fine_grained", task="fine_grained", body=None,
                        cache_dir=None, field="val.val_seen", progress=False, resolve_scenes=False, seed=seed)
    bench = homes.hold_out_seen(eps, seed, 4)[1]
    assert [e.episode_id for e in got] == [e.episode_id for e in bench] and len(got) == 4
    everything = resolve_split(homes.HomesSource(homes=1), split="val_seen", task_type="fine_grained",
                               task="fine_grained", body=None, cache_dir=None, field="val.val_seen", progress=False,
                               resolve_scenes=False, seed=seed)
    assert len(everything) == 10 and {e.episode_id for e in got} < {e.episode_id for e in everything}


@pytest.mark.slow
def test_generated_homes_are_deterministic_reused_and_a_held_out_seed_is_refused(tmp_path):
    """Two homes with episodes (~1 min on a loaded 2-core machine); the generator with a val_unseen
    seed makes that home again, which the guard catches by content."""
    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.homes import HomesSource, check_disjoint_homes, held_out_scenes, homes_dataset

    said = []
    spec = HomesSource(homes=2, seed=1000, episodes_per_home=2, val_seen_fraction=0.0)
    eps, folder, info = homes_dataset(spec, task="fine_grained", body=None, cache_dir=tmp_path, progress=False,
                                      report=said.append, workers=2)
    assert {e.scene_id for e in eps} == {"gen_01000", "gen_01001"} and {e.split for e in eps} == {"train"}
    assert (folder / "scenes" / "gen_01000.usd").is_file()
    # the per-home figure is of the homes' seconds over the 2 homes, as done.json keeps it and the log says
    assert info["seconds_per_home"] == pytest.approx(info["seconds_homes"] / 2, abs=0.05 / 2 + 0.0005)
    assert json.loads((folder / "done.json").read_text()) == info
    assert f"generated 2 homes in {info['seconds_homes']:.1f} s ({info['seconds_per_home']} s a home" in said[0]
    again, _, _ = homes_dataset(spec, task="fine_grained", body=None, cache_dir=tmp_path, progress=False,
                                report=said.append)
    assert "reusing" in said[-1] and [e.to_dict() for e in again] == [e.to_dict() for e in eps]
    bad, bad_folder, _ = homes_dataset(HomesSource(homes=1, seed=16, episodes_per_home=1), task="fine_grained",
                                       body=None, cache_dir=tmp_path, progress=False, report=said.append)
    from vlnverse.tasks.scene_roots import resolve_episode_scenes, scene_roots

    bad = resolve_episode_scenes(bad, scene_roots(None, bad_folder / "episodes"))
    with pytest.raises(ConfigError, match="'gen_00016' is val_unseen home 'home_0016'"):
        check_disjoint_homes(bad, held_out_scenes({}), cache_dir=tmp_path)
