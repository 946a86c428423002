"""Episode JSONL format: round trip, validation with line numbers, R2R (VLN-CE) round trip."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from vlnverse.core.errors import ConfigError
from vlnverse.tasks.episode import Episode, Goal, Instruction, load_episodes, save_episodes
from vlnverse.tasks.r2r import (export_r2r, habitat_to_zup, import_r2r, quaternion_to_yaw, yaw_to_quaternion,
                                zup_to_habitat)


def episode(i: int, split: str = "train", task: str = "fine_grained", **kw) -> Episode:
    base = dict(
        episode_id=f"{task}-home_{i:03d}-{i:05d}", scene_id=f"home_{i:03d}", scene_path=f"scenes_usd/home_{i:03d}.usda",
        split=split, task_type=task, start_position=[1.0 + i, 2.5, 0.0], start_yaw=0.25 * i - 1.0,
        goals=[Goal(position=[4.0, 2.5 + i, 0.0], radius=3.0, object_id=12, room_id=2, category="sofa")],
        reference_path=[[1.0 + i, 2.5, 0.0], [3.0, 2.5, 0.0], [4.0, 2.5 + i, 0.0]], geodesic_distance=3.5 + i,
        instructions=[Instruction("Walk past the table and stop by the red sofa."),
                      Instruction("Head to the sofa.", style="casual")],
        info={"decision": "FOUND", "frames": [1, 2, 3], "nested": {"a": 1.5}})
    base.update(kw)
    return Episode(**base)


def test_jsonl_round_trip_and_split_filter(tmp_path):
    eps = [episode(0), episode(1, split="val_seen"), episode(2)]
    path = save_episodes(tmp_path / "train.jsonl", eps)
    lines = path.read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(line)["version"] == 1 for line in lines)
    back = load_episodes(path)
    assert [e.to_dict() for e in back] == [e.to_dict() for e in eps]
    assert [e.episode_id for e in load_episodes(path, split="val_seen")] == [eps[1].episode_id]
    # A dataset folder: split picks the file, None loads every file.
    save_episodes(tmp_path / "test.jsonl", [episode(5, split="test")])
    assert len(load_episodes(tmp_path)) == 4
    assert [e.split for e in load_episodes(tmp_path, split="test")] == ["test"]
    with pytest.raises(ConfigError, match=r"no split 'val_unseen'.*\['test', 'train'\]"):
        load_episodes(tmp_path, split="val_unseen")


def test_numpy_values_serialise():
    ep = episode(0, start_position=np.array([1.0, 2.0, 0.0]), start_yaw=np.float32(0.5),
                 info={"arr": np.arange(3), "x": np.float64(2.5)})
    d = json.loads(json.dumps(ep.to_dict()))
    assert d["start_position"] == [1.0, 2.0, 0.0] and d["info"] == {"arr": [0, 1, 2], "x": 2.5}


def _write_lines(path, records):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))


@pytest.mark.parametrize("mutate, match", [
    (lambda d: d.pop("goals"), r"missing required field\(s\) \['goals'\]"),
    (lambda d: d.update(start_position=[1.0, 2.0]), r"start_position: got \[1.0, 2.0\] \(expected a list of 3"),
    (lambda d: d.update(geodesic_distance=float("nan")), r"geodesic_distance: got nan \(expected a finite number"),
    (lambda d: d.update(start_yaw="north"), r"start_yaw: got 'north'"),
    (lambda d: d.update(instructions=[]), r"instructions: empty \(expected at least one instruction"),
    (lambda d: d["goals"][0].update(radius=0), r"goals\[0\].radius: got 0.0 \(expected a positive number"),
    (lambda d: d["reference_path"].append([1, 2, "z"]), r"reference_path\[3\]\[2\]: got 'z'"),
    (lambda d: d.update(version=2), r"version: got 2 \(expected 1\)"),
    (lambda d: d.update(colour="red"), r"unknown field\(s\) \['colour'\]"),
])
def test_bad_record_names_file_line_and_field(tmp_path, mutate, match):
    good = [episode(0).to_dict(), episode(1).to_dict()]
    bad = episode(2).to_dict()
    mutate(bad)
    path = tmp_path / "eps.jsonl"
    _write_lines(path, good + [bad])
    with pytest.raises(ConfigError, match=rf"eps.jsonl:3: {match}"):
        load_episodes(path)


def test_malformed_json_and_duplicate_ids(tmp_path):
    path = tmp_path / "eps.jsonl"
    _write_lines(path, [episode(0).to_dict(), "", '{"episode_id": "x",'])
    with pytest.raises(ConfigError, match=r"eps.jsonl:3: malformed JSON"):
        load_episodes(path)
    _write_lines(path, [episode(0).to_dict(), episode(0).to_dict()])
    with pytest.raises(ConfigError, match=r"eps.jsonl:2: episode_id: duplicate episode id .* \(first on line 1\)"):
        load_episodes(path)
    with pytest.raises(ConfigError, match="episode file not found"):
        load_episodes(tmp_path / "missing.jsonl")


def test_object_goal_may_use_the_category_instead_of_text(tmp_path):
    ok = episode(0, task="object_goal", instructions=[])
    path = save_episodes(tmp_path / "og.jsonl", [ok])
    assert load_episodes(path)[0].instruction_text == "sofa"
    bad = episode(1, task="object_goal", instructions=[], goals=[Goal(position=[1.0, 1.0, 0.0])])
    save_episodes(path, [bad])
    with pytest.raises(ConfigError, match=r"og.jsonl:1: instructions: no instruction and no goal category"):
        load_episodes(path)


def test_save_is_atomic_on_failure(tmp_path):
    path = save_episodes(tmp_path / "eps.jsonl", [episode(0)])
    before = path.read_bytes()
    with pytest.raises(TypeError):
        save_episodes(path, [episode(1, info={"bad": object()})])
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eps.jsonl"]


def test_axis_conversion_hand_computed():
    assert zup_to_habitat([1.0, 2.0, 0.5]) == [1.0, 0.5, -2.0]
    assert habitat_to_zup([1.0, 0.5, -2.0]) == [1.0, 2.0, 0.5]
    # Facing +Y (vlnverse) is Habitat's identity rotation (facing -Z).
    np.testing.assert_allclose(yaw_to_quaternion(math.pi / 2), [0, 0, 0, 1], atol=1e-12)
    # Facing +X: rotation of -90° about +Y.
    np.testing.assert_allclose(yaw_to_quaternion(0.0), [0, -math.sqrt(0.5), 0, math.sqrt(0.5)], atol=1e-12)
    for yaw in np.linspace(-3.1, 3.1, 13):
        assert quaternion_to_yaw(yaw_to_quaternion(yaw)) == pytest.approx(yaw, abs=1e-12)
    # A scaled quaternion reads the same heading.
    assert quaternion_to_yaw(2 * np.asarray(yaw_to_quaternion(0.3))) == pytest.approx(0.3)


def test_r2r_round_trip(tmp_path):
    eps = [episode(0, split="val_unseen"), episode(1, split="val_unseen", instructions=[Instruction("Go.")])]
    for e in eps:  # R2R carries no object ids, instruction styles or info
        e.goals = [Goal(position=e.goals[0].position, radius=3.0)]
        e.instructions = [Instruction(i.text) for i in e.instructions]
        e.info = {}
    path = export_r2r(eps, tmp_path / "r2r.json")
    data = json.loads(path.read_text())
    assert len(data["episodes"]) == 3  # 2 + 1 instructions
    first = data["episodes"][0]
    assert first["episode_id"] == f"{eps[0].episode_id}#0" and first["trajectory_id"] == 0
    assert first["start_position"] == [1.0, 0.0, -2.5]
    assert first["scene_id"] == eps[0].scene_id  # the id, not a local path
    assert len(first["instruction"]["instruction_tokens"]) == 200
    vocab = data["instruction_vocab"]
    words = [vocab["itos"][t] for t in first["instruction"]["instruction_tokens"] if t != 0]
    assert " ".join(words) == "walk past the table and stop by the red sofa ."
    back = import_r2r(path, split="val_unseen", task_type="fine_grained")
    assert len(back) == 2
    for orig, new in zip(eps, back):
        a, b = orig.to_dict(), new.to_dict()
        assert b["start_yaw"] == pytest.approx(a.pop("start_yaw"), abs=1e-8)  # quaternion: 9 decimals
        assert b.pop("scene_path") == "" and a.pop("scene_path")  # the file names the scene by id only
        b.pop("start_yaw")
        assert b.pop("info") == {"trajectory_id": eps.index(orig)}
        a.pop("info")
        assert a == b


def test_r2r_import_errors(tmp_path):
    path = tmp_path / "r2r.json"
    path.write_text(json.dumps({"episodes": [{"episode_id": 1, "scene_id": "a.glb", "start_position": [0, 0, 0],
                                              "start_rotation": [0, 0, 0, 1], "goals": [{"position": [1, 0]}],
                                              "instruction": {"instruction_text": "go"}}]}))
    with pytest.raises(ConfigError, match=r"r2r.json: episodes\[0\].goals\[0\].position: got \[1, 0\]"):
        import_r2r(path, split="train")
    path.write_text('{"episodes": 3}')
    with pytest.raises(ConfigError, match="r2r.json: episodes: missing"):
        import_r2r(path, split="train")


def test_r2r_json_gz_is_gzipped_and_round_trips(tmp_path):
    """VLN-CE ships ``{split}.json.gz``: an export to a ``.gz`` path is gzip-compressed, and the
    import reads gzip by content (a plain JSON file named ``.gz`` loads too)."""
    import gzip

    eps = [episode(0, split="val_unseen")]
    path = export_r2r(eps, tmp_path / "val_unseen.json.gz")
    data = json.loads(gzip.decompress(path.read_bytes()))
    assert len(data["episodes"]) == len(eps[0].instructions)
    assert [e.episode_id for e in import_r2r(path, split="val_unseen")] == [eps[0].episode_id]
    plain = tmp_path / "plain.json.gz"
    plain.write_text(json.dumps(data))
    assert [e.episode_id for e in import_r2r(plain, split="val_unseen")] == [eps[0].episode_id]
    broken = tmp_path / "broken.json.gz"
    broken.write_bytes(b"\x1f\x8b\x08garbage")
    with pytest.raises(ConfigError, match="broken.json.gz"):
        import_r2r(broken, split="val_unseen")
