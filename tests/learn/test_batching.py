"""IL batch formation: length-bucketed, seeded epoch orders and the packed unroll (the same
outputs and loss as the padded unroll), threads and the recorded device."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from learn_helpers import small_config

SENSORS = [{"name": "rgb", "kind": "rgb", "shape": [8, 8, 3]}, {"name": "depth", "kind": "depth", "shape": [8, 8]}]


def _policy(name: str, progress: float = 0.0):
    import torch

    from vlnverse.learn.policies import build_policy
    from vlnverse.learn.vocab import Vocabulary

    torch.manual_seed(0)
    vocab = Vocabulary.build(["walk to the sofa and stop", "turn left at the table"])
    return build_policy(name, {"hidden_size": 16, "progress_weight": progress}, vocab, SENSORS), vocab


def _batch(vocab, lengths=(3, 5, 2)):
    """A fixed padded batch of three episodes of ``lengths`` steps (T = 5)."""
    import torch

    g = torch.Generator().manual_seed(1)
    b, t = len(lengths), max(lengths)
    valid = torch.arange(t)[None] < torch.tensor(lengths)[:, None]
    tokens = torch.from_numpy(np.stack([vocab.encode(s, 6) for s in
                                        ("walk to the sofa", "turn left at the table and stop", "stop")]))
    return {"tokens": tokens,
            "frames": {"rgb": torch.randint(0, 255, (b, t, 8, 8, 3), generator=g, dtype=torch.uint8),
                       "depth": torch.rand((b, t, 8, 8), generator=g) * 5},
            "prev": torch.randint(1, 7, (b, t), generator=g) * valid, "labels": torch.randint(0, 6, (b, t), generator=g) * valid,
            "weights": valid.float() * torch.tensor([1.0, 2.0, 1.0, 1.0, 2.0]), "lengths": torch.tensor(lengths)}


@pytest.mark.parametrize("name", ["seq2seq", "cma"])
def test_packed_unroll_gives_the_padded_outputs_at_every_valid_step(name):
    import torch

    policy, vocab = _policy(name, progress=1.0)
    batch = _batch(vocab)
    valid = batch["weights"] > 0
    with torch.no_grad():
        padded, p_padded = policy.sequence_outputs(batch["tokens"], batch["frames"], batch["prev"])
        packed, p_packed = policy.sequence_outputs(batch["tokens"], batch["frames"], batch["prev"], batch["lengths"])
    assert packed.shape == padded.shape == (3, 5, 6)
    assert valid.sum() == 10 and torch.allclose(packed[valid], padded[valid], atol=1e-6)
    assert torch.allclose(p_packed[valid], p_padded[valid], atol=1e-6)
    # past an episode's end the packed unroll computes nothing: the heads read zero features there
    assert torch.allclose(packed[~valid], policy.head.bias.expand(int((~valid).sum()), -1))


def test_packing_leaves_the_loss_and_its_gradients_of_a_batch_unchanged():
    import torch

    policy, vocab = _policy("cma", progress=1.0)
    batch = _batch(vocab)
    padded = {k: v for k, v in batch.items() if k != "lengths"}
    grads = []
    for b in (padded, batch):
        policy.zero_grad()
        loss, correct = policy.imitation_loss(b)
        loss.backward()
        grads.append((float(loss.detach()), correct, [p.grad.clone() for p in policy.parameters() if p.grad is not None]))
    (l0, c0, g0), (l1, c1, g1) = grads
    assert abs(l0 - l1) < 1e-6 and c0 == c1
    assert len(g0) == len(g1) and all(torch.allclose(a, b, atol=1e-6) for a, b in zip(g0, g1))


def test_bucketed_order_groups_similar_lengths_and_is_a_seeded_permutation():
    from vlnverse.learn.batching import bucketed_order

    lengths = np.array([5, 1, 4, 2, 3, 6, 9])
    order = bucketed_order(lengths, 2, np.random.default_rng([0, 0]), pool=4)  # one pool: the whole epoch
    assert sorted(order.tolist()) == list(range(7))
    batches = [sorted(lengths[order[i:i + 2]].tolist()) for i in range(0, 6, 2)]
    assert sorted(batches) == [[1, 2], [3, 4], [5, 6]] and lengths[order[6]] == 9  # the partial batch stays last
    rng = np.random.default_rng(3)
    many = rng.integers(10, 120, 203)
    a = bucketed_order(many, 16, np.random.default_rng([7, 2]))
    assert np.array_equal(a, bucketed_order(many, 16, np.random.default_rng([7, 2])))
    assert not np.array_equal(a, bucketed_order(many, 16, np.random.default_rng([7, 3])))
    assert np.array_equal(np.sort(a), np.arange(203))
    padded = lambda order: sum(int(many[order[i:i + 16]].max()) * len(order[i:i + 16]) for i in range(0, 203, 16))  # noqa: E731
    assert padded(a) < 0.85 * padded(np.random.default_rng([7, 2]).permutation(203))


def test_episode_batches_order_follows_il_batching(tmp_path):
    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.store import StepStore
    from vlnverse.learn.batching import EpisodeBatches
    from vlnverse.learn.vocab import Vocabulary

    layout = [{"name": "depth", "kind": "depth", "shape": [2, 2]}]
    store = StepStore.create(tmp_path / "s", key={"k": 1}, sensors=layout, chunk_frames=8)
    for e, n in enumerate((3, 1, 4, 2)):
        store.add_episode(f"ep{e}", f"go {e}", [{"depth": np.full((2, 2), t, np.float32), "label": t % 2,
                                                 "executed": 1 + t % 2, "pose": np.zeros(3)} for t in range(n)])
    store.close()
    vocab = Vocabulary.build(["go 0 1 2 3"])
    bucketed = EpisodeBatches([StepStore(tmp_path / "s")], vocab, 4, layout, batching="bucketed")
    plain = EpisodeBatches([StepStore(tmp_path / "s")], vocab, 4, layout, batching="padded")
    assert np.array_equal(plain.order(0, 1, 2), np.random.default_rng([0, 1]).permutation(4))
    order = bucketed.order(0, 1, 2)
    assert sorted(bucketed.lengths[order[:2]].tolist()) in ([1, 2], [3, 4])
    b = bucketed.batch(np.array([2, 1]), 2.0, "cpu")
    assert b["lengths"].tolist() == [4, 1] and b["steps"] == 5 and b["prev"].shape == (2, 4)
    assert b["prev"].tolist() == [[0, 2, 3, 2], [0, 0, 0, 0]] and b["labels"].tolist() == [[0, 1, 0, 1], [0, 0, 0, 0]]
    assert b["weights"].tolist() == [[2.0, 2.0, 2.0, 2.0], [2.0, 0.0, 0.0, 0.0]]  # every step of 0,1,0,1 is an inflection
    assert "lengths" not in plain.batch(np.array([2, 1]), 2.0, "cpu")
    with pytest.raises(ConfigError, match="il.batching"):
        EpisodeBatches([StepStore(tmp_path / "s")], vocab, 4, layout, batching="sorted")


def test_two_bucketed_runs_with_one_seed_train_identical_weights(corridor, episodes_file, tmp_path):
    import torch

    from vlnverse.learn.checkpoint import read_checkpoint
    from vlnverse.learn.trainer import run_training

    kw = dict(il__epochs=2, il__batch_size=2, validation__every=5, val={}, max_steps=40, threads="auto",
              sensors=[{"name": "rgb", "kind": "rgb", "width": 16, "height": 16},
                       {"name": "depth", "kind": "depth", "width": 16, "height": 16}])
    runs = []
    for name in ("a", "b"):
        summary = run_training(small_config(tmp_path / name, episodes_file, **kw), scene_loader=lambda *a: corridor,
                               progress=False, report=lambda s: None)
        runs.append(read_checkpoint(tmp_path / name / "last.pt")["state_dict"])
    a, b = runs
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert summary["device_info"]["device"] == "cpu" and summary["device_info"]["cuda"] is None
    # the CPU and the kernels torch dispatches to: runs on other CPUs are other draws of the recipe
    assert summary["device_info"]["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    cpuinfo = Path("/proc/cpuinfo")
    models = [line.split(":", 1)[1].strip() for line in (cpuinfo.read_text().splitlines() if cpuinfo.is_file() else [])
              if line.lower().startswith("model name")]
    assert summary["device_info"]["cpu"] == summary["device_info"]["name"] == (models[0] if models else
                                                                                summary["device_info"]["cpu"])
    assert summary["torch_threads"]["requested"] == "auto" and summary["torch_threads"]["threads"] >= 1


def test_auto_threads_share_the_cores_among_declared_jobs(monkeypatch):
    import os

    from vlnverse.core.errors import ConfigError
    from vlnverse.learn import auto_threads
    from vlnverse.learn.trainer import declared_jobs

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    assert (auto_threads(), auto_threads(3), auto_threads(16)) == (8, 2, 1)
    monkeypatch.setenv("VLNVERSE_JOBS", "4")
    assert declared_jobs() == 4
    monkeypatch.setenv("VLNVERSE_JOBS", "two")
    with pytest.raises(ConfigError, match="VLNVERSE_JOBS"):
        declared_jobs()


@pytest.mark.parametrize("name,expected", [("seq2seq", "bucketed"), ("cma", "bucketed"), ("rdp", "padded"),
                                           ("vlnbert", "padded"), ("hnr", "padded"), ("gama", "padded")])
def test_only_policies_that_unroll_packed_get_length_bucketed_batches(name, expected):
    """Length-sorted batches help only a packed unroll; RDP trained on them never stopped (val_seen SR
    0 over 15 epochs, 0.17 with plain batches), so a policy whose loss ignores ``lengths`` gets padded."""
    from vlnverse.learn.policies_registry import POLICIES
    from vlnverse.learn.batching import il_batching

    policy = POLICIES.get(name)
    assert il_batching("bucketed", policy) == expected
    assert il_batching("padded", policy) == "padded"
