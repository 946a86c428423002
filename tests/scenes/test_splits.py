"""Scene splits: the shipped split file, scene resolution and bad split files."""
from __future__ import annotations

import json

import pytest

from vlnverse.core.errors import ConfigError, UnknownNameError
from vlnverse.paths import scenes_dir
from vlnverse.scenes.splits import SPLIT_NAMES, load_splits, resolve_scenes


def test_shipped_splits_are_disjoint_and_cover_every_scene():
    splits = load_splits()
    assert list(splits) == list(SPLIT_NAMES)
    ids = [i for s in SPLIT_NAMES for i in splits[s]]
    assert len(ids) == len(set(ids))  # disjoint
    shipped = sorted(p.stem for p in scenes_dir().iterdir() if p.suffix in (".usd", ".usda", ".usdc"))
    assert sorted(ids) == shipped and len(shipped) >= 6
    assert len(splits["train"]) >= 4 and splits["val_unseen"] and splits["test"]


def test_resolve_split_names_ids_and_paths():
    splits = load_splits()
    train = resolve_scenes("train")
    assert [p.stem for p in train] == splits["train"] and all(p.is_file() for p in train)
    assert resolve_scenes("val_seen") == train  # val_seen episodes come from the train scenes
    everything = resolve_scenes("all")
    assert len(everything) == sum(len(v) for v in splits.values())
    one = splits["test"][0]
    assert resolve_scenes(one) == [scenes_dir() / f"{one}.usd"]
    assert resolve_scenes([str(train[0]), "test"]) == [train[0]] + resolve_scenes("test")
    assert resolve_scenes(f"{one},{one}") == resolve_scenes(one)  # comma list, no duplicates


def test_unknown_name_lists_known_ones():
    with pytest.raises(UnknownNameError, match=r"unknown scene or split 'kitchen_42'.*train.*val_unseen"):
        resolve_scenes("kitchen_42")
    with pytest.raises(ConfigError, match="empty scene selection"):
        resolve_scenes([])


def _write(tmp_path, splits, files=("a", "b", "c")):
    for f in files:
        (tmp_path / f"{f}.usda").write_text("#usda 1.0\n")
    path = tmp_path / "splits.json"
    path.write_text(json.dumps({"splits": splits}) if not isinstance(splits, str) else splits)
    return path


def test_custom_split_file(tmp_path):
    path = _write(tmp_path, {"train": ["a", "b"], "val_unseen": [], "test": ["c"]})
    assert load_splits(path) == {"train": ["a", "b"], "val_unseen": [], "test": ["c"]}
    assert resolve_scenes("test", splits_file=path) == [tmp_path / "c.usda"]


@pytest.mark.parametrize("splits, message", [
    ({"train": ["a"], "test": ["a"]}, r"splits\.test: scene 'a' is in both 'train' and 'test' \(expected disjoint splits\)"),
    ({"train": ["a", "zzz"]}, r"splits\.train: scene 'zzz' has no USD file"),
    ({"train": "a"}, r"splits\.train: got 'a' \(expected a list of scene ids\)"),
    ({"val_seen": ["a"]}, r"unknown split.*val_seen.*val_seen episodes use the train scenes"),
    ("{not json", r"splits\.json:1: malformed JSON"),
])
def test_bad_split_files_name_file_and_field(tmp_path, splits, message):
    path = _write(tmp_path, splits)
    with pytest.raises(ConfigError, match=message) as info:
        load_splits(path)
    assert str(path) in str(info.value)


def test_missing_split_file(tmp_path):
    with pytest.raises(ConfigError, match="splits.json: file not found"):
        load_splits(tmp_path / "splits.json")
