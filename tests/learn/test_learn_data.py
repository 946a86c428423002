"""Vocabulary, the chunked step store and the observation cache (teacher labels = best_action)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from learn_helpers import make_episodes


def test_vocabulary_maps_unknown_words_to_unk_and_round_trips():
    from vlnverse.learn.vocab import UNK_ID, Vocabulary, tokenize

    vocab = Vocabulary.build(["Walk to the sofa.", "walk past the table"])
    assert tokenize("Walk to the sofa.") == ["walk", "to", "the", "sofa", "."]
    ids = vocab.encode("walk to the piano", 6)
    assert ids.tolist()[:4] == [vocab.index["walk"], vocab.index["to"], vocab.index["the"], UNK_ID]
    assert ids.tolist()[4:] == [0, 0]
    assert Vocabulary.from_dict(vocab.to_dict()).words == vocab.words
    assert vocab.encode("", 3).tolist() == [UNK_ID, 0, 0]


def test_step_store_writes_chunks_and_reads_them_memory_mapped(tmp_path):
    from vlnverse.learn.store import StepStore, truncate_store

    layout = [{"name": "rgb", "kind": "rgb", "shape": [4, 4, 3]}, {"name": "depth", "kind": "depth", "shape": [4, 4]}]
    store = StepStore.create(tmp_path / "s", key={"k": 1}, sensors=layout, chunk_frames=5)
    rng = np.random.default_rng(0)
    written = []
    for e, n in enumerate((3, 4, 2)):
        steps = [{"rgb": rng.integers(0, 255, (4, 4, 3), dtype=np.uint8), "depth": rng.random((4, 4)).astype(np.float32),
                  "label": int(rng.integers(6)), "executed": 1, "pose": np.array([e, t, 0.0])} for t in range(n)]
        written.append(steps)
        store.add_episode(f"ep{e}", f"instruction {e}", steps)
    store.close()
    again = StepStore(tmp_path / "s")
    assert again.check() is None and again.num_steps == 9 and len(again) == 3
    assert [e["chunk"] for e in again.episodes] == [0, 1, 2]  # 3 + 4 > 5: an episode never spans two chunks
    ep = again.episode(1)
    assert np.array_equal(ep["rgb"], np.stack([s["rgb"] for s in written[1]]))
    assert np.allclose(ep["depth"], np.stack([s["depth"] for s in written[1]]), atol=1e-3)  # float16
    assert isinstance(again._array(1, "rgb"), np.memmap)
    truncate_store(again, 2)
    assert len(StepStore(tmp_path / "s")) == 2 and StepStore(tmp_path / "s").check() is None


def test_every_instruction_of_a_path_is_one_training_item(tmp_path):
    """With ``instructions`` each (episode, instruction) pair is an item: the same frames and
    labels, each instruction's tokens; without it the stored (first) instruction only."""
    from vlnverse.learn.store import StepStore
    from vlnverse.learn.batching import EpisodeBatches
    from vlnverse.learn.vocab import Vocabulary

    layout = [{"name": "depth", "kind": "depth", "shape": [2, 2]}]
    store = StepStore.create(tmp_path / "s", key={"k": 1}, sensors=layout, chunk_frames=8)
    for e, n in enumerate((3, 2)):
        store.add_episode(f"ep{e}", f"first {e}", [{"depth": np.full((2, 2), e + t, np.float32), "label": t % 3,
                                                    "executed": 1, "pose": np.zeros(3)} for t in range(n)])
    store.close()
    store = StepStore(tmp_path / "s")
    texts = {"ep0": ["go left", "walk to the sofa", "turn around"], "ep1": ["stop"]}
    vocab = Vocabulary.build([t for ts in texts.values() for t in ts] + ["first 0", "first 1"])
    every = EpisodeBatches([store], vocab, 6, layout, texts)
    assert len(every) == 4 and len(EpisodeBatches([store], vocab, 6, layout)) == 2
    b = every.batch(np.arange(4), 1.0, "cpu")
    assert [list(map(int, row[:3])) for row in b["tokens"]] == [list(vocab.encode(t, 6)[:3]) for t in
                                                                ("go left", "walk to the sofa", "turn around", "stop")]
    assert b["labels"][:3].tolist() == [[0, 1, 2]] * 3 and b["labels"][3].tolist() == [0, 1, 0]
    assert float(b["frames"]["depth"][1, 2, 0, 0]) == float(b["frames"]["depth"][2, 2, 0, 0]) == 2.0
    first = EpisodeBatches([store], vocab, 6, layout).batch(np.arange(2), 1.0, "cpu")
    assert list(map(int, first["tokens"][1][:2])) == list(vocab.encode("first 1", 6)[:2])


def _settings(ctx):
    from vlnverse.run.episodes import RunSettings

    return RunSettings(max_steps=60, success_distance=1.5, body=ctx.body, resolution=0.05, task_type="fine_grained")


def test_cache_is_reused_rebuilt_when_stale_and_labels_are_the_teachers(corridor, tmp_path):
    from vlnverse.run.agents import OracleAgent
    from vlnverse.learn.cache import teacher_cache
    from vlnverse.sim.sensors import CameraSpec
    from vlnverse.sim.types import AgentPose

    episodes = make_episodes(corridor)[:2]
    sensors = [CameraSpec("rgb", "rgb", 16, 16), CameraSpec("depth", "depth", 16, 16)]
    said = []
    kw = dict(sensors=sensors, settings=_settings(corridor), collision_mode="telhop", base_dir=tmp_path,
              scene_loader=lambda *a: corridor, progress=False, report=said.append, chunk_frames=32)
    store, stats = teacher_cache(episodes, **kw)
    assert stats["status"] == "built" and stats["frames"] == store.num_steps > 20 and stats["teacher_SR"] == 1.0
    assert stats["frames_per_s"] == round(stats["frames"] / stats["seconds"], 2)
    # bytes on disk: per frame RGB 16x16x3 uint8, depth 16x16 float16, label and executed int8, pose
    # 3 float32; each chunk file a 128-byte .npy header; plus the manifest and the episode index
    root = Path(stats["path"])
    chunks = sorted((root / "chunks").glob("*.npy"))
    per_frame = 16 * 16 * 3 + 16 * 16 * 2 + 1 + 1 + 3 * 4
    assert sum(p.stat().st_size for p in chunks) == stats["frames"] * per_frame + 128 * len(chunks)
    assert len(chunks) == 5 * len({e["chunk"] for e in store.episodes})  # rgb, depth, label, executed, pose
    assert stats["bytes"] == sum(p.stat().st_size for p in [*chunks, root / "manifest.json", root / "index.jsonl"])
    # labels are the oracle's best_action at the recorded poses (a fresh teacher replayed in order)
    for i, ep in enumerate(episodes):
        rec = store.episode(i)
        teacher = OracleAgent()
        teacher.reset(ep, corridor)
        teacher.success_distance = 1.5
        replay = [int(teacher.best_action(AgentPose(*p))) for p in rec["pose"].astype(float)]
        assert replay == rec["label"].tolist() and rec["label"][-1] == 0  # ends with STOP
        assert np.array_equal(rec["executed"], rec["label"])  # beta = 1: the teacher drives
    _, again = teacher_cache(episodes, **kw)
    assert again["status"] == "reused" and "reusing" in said[-1] and again["teacher_SR"] == 1.0  # kept in the manifest
    next((store.root / "chunks").glob("*.rgb.npy")).unlink()
    _, rebuilt = teacher_cache(episodes, **kw)
    assert rebuilt["status"] == "rebuilt" and "stale" in said[-2] and "missing" in said[-2]
    _, other = teacher_cache(episodes, **{**kw, "sensors": sensors[:1]})  # another rig: another cache
    assert other["status"] == "built" and other["path"] != rebuilt["path"]


def test_oracle_reuses_its_aim_on_turns_in_place_with_the_same_labels(corridor):
    """The oracle keeps its goal distance and aim point while the agent turns in place; the
    labels equal those of a teacher that recomputes them at every step (memos cleared), on a
    kinematic walk with turns, forward moves and pushes off the path (replans)."""
    import math

    from vlnverse.run.agents import OracleAgent
    from vlnverse.sim.types import AgentPose, DiscreteAction

    rng = np.random.default_rng(0)
    hits = 0
    for ep in make_episodes(corridor)[:3]:
        kept, fresh = OracleAgent(), OracleAgent()
        for t in (kept, fresh):
            t.reset(ep, corridor)
            t.success_distance = 1.5
        x, y = ep.start_position[:2]
        yaw = float(ep.start_yaw) if getattr(ep, "start_yaw", None) is not None else 0.0
        labels = []
        for step in range(150):
            fresh._aim_memo = fresh._remaining_memo = None
            before = kept._aim_memo
            pose = AgentPose(float(x), float(y), yaw, 0.0)
            a, b = kept.best_action(pose), fresh.best_action(pose)
            assert a == b, f"step {step}"
            hits += kept._aim_memo is before and before is not None
            labels.append(int(a))
            if a == DiscreteAction.STOP:
                break
            if a == DiscreteAction.MOVE_FORWARD:
                x, y = x + 0.25 * math.cos(yaw), y + 0.25 * math.sin(yaw)
                if step % 9 == 4:  # pushed sideways: off the path, a replan
                    x, y = x + rng.uniform(-0.5, 0.5), y + rng.uniform(-0.5, 0.5)
            else:
                yaw += math.radians(15.0) * (1 if a == DiscreteAction.TURN_LEFT else -1)
        assert labels[-1] == 0 and len(set(labels)) >= 3
    assert hits > 5
