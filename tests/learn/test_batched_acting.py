"""Batched acting of the ``policy`` agent (``vlnverse eval --envs N``): one forward for several
episodes gives each exactly (bit for bit) the action and recurrent state of acting on it alone."""
from __future__ import annotations

import numpy as np
import pytest

SENSORS = [{"name": "rgb", "kind": "rgb", "shape": [16, 16, 3]}, {"name": "depth", "kind": "depth", "shape": [16, 16]}]
#: two instructions of the same length (they share the recurrence) and three of other lengths
TEXTS = ["walk past the sofa and stop at the table", "turn left at the table", "turn right at the sofa",
         "walk to the sofa", "stop"]


def _episode(i: int, text: str):
    from vlnverse.tasks.episode import Episode, Goal, Instruction

    return Episode(f"e{i}", "s", "s.usda", "train", "fine_grained", [0, 0, 0], 0.0, [Goal([1, 0, 0])],
                   [[0, 0, 0], [1, 0, 0]], 1.0, [Instruction(text)])


def _fresh(name: str, **params):
    from vlnverse.learn.agent import PolicyAgent
    from vlnverse.learn.policies import build_policy
    from vlnverse.learn.vocab import Vocabulary

    vocab = Vocabulary.build(TEXTS)
    return lambda: PolicyAgent(policy=build_policy(name, {"hidden_size": 16, **params}, vocab, SENSORS), seed=3)


def _same_model(make):
    """Agents sharing one set of weights (``make`` builds the first)."""
    from vlnverse.learn.agent import PolicyAgent

    first = make()
    return first, lambda: PolicyAgent(policy=first.policy, seed=first.seed, sample=first.sample)


def _observations(rng, shape):
    return {"rgb": rng.integers(0, 256, (*shape, 3), dtype=np.uint8),
            "depth": (rng.random(shape, dtype=np.float32) * 6).astype(np.float32)}


def _compare(make, shape=(16, 16), steps=12, texts=TEXTS):
    import torch

    batched, single = _same_model(make)
    episodes = [_episode(i, t) for i, t in enumerate(texts)]
    alone = []
    for slot, episode in enumerate(episodes):
        batched.begin_slot(slot, episode)
        agent = single()
        agent.reset(episode, None)
        alone.append(agent)
    rng = np.random.default_rng(0)
    live = list(range(len(episodes)))
    for step in range(steps):
        if step == steps // 2:
            live = live[1:]  # an episode ended: the batch shrinks, the others go on
        obs = {slot: _observations(rng, shape) for slot in live}
        actions = batched.act_batch(live, [obs[s] for s in live], [None] * len(live))
        for slot, action in zip(live, actions):
            assert action == alone[slot].act(obs[slot], None), (step, slot)
            assert torch.equal(batched.slots[slot]["memory"]["hidden"], alone[slot].memory["hidden"]), (step, slot)
    return batched


@pytest.mark.parametrize("name", ["seq2seq", "cma"])
def test_fresh_policy_batched_forward_equals_single_forward_bit_for_bit(name):
    agent = _compare(_fresh(name))
    assert agent.acts_in_batches()


def test_sampling_policy_draws_from_each_episodes_own_generator():
    _compare(lambda: _sampling(_fresh("cma")()))


def _sampling(agent):
    agent.sample = True
    return agent


def test_shipped_cma_checkpoint_batched_forward_equals_single_forward():
    from vlnverse.learn.agent import PolicyAgent

    _compare(lambda: PolicyAgent(checkpoint="cma_fine_grained"), shape=(64, 64), steps=8,
             texts=["walk past the sofa and stop at the kitchen table", "turn left go through the door",
                    "turn left go up the stairs", "exit the room"])


def test_row_exact_products_equal_batch_of_one():
    """The operations whose kernels depend on the batch size give each row the one-row result."""
    import torch
    from torch.nn import functional as F

    from vlnverse.learn.row_exact import row_exact

    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 300, generator=g)
    w, b = torch.randn(128, 300, generator=g), torch.randn(128, generator=g)
    cell = torch.nn.GRUCell(300, 32)
    lstm = torch.nn.LSTMCell(300, 32)
    conv = torch.nn.Conv2d(3, 8, 3, 2, 1)
    h, c = torch.randn(5, 32, generator=g), torch.randn(5, 32, generator=g)
    images = torch.randn(5, 3, 16, 16, generator=g)
    with torch.no_grad():
        with row_exact():
            batch = {"linear": F.linear(x, w, b), "addmm": torch.addmm(b, x, w.t()), "matmul": x @ w.t(),
                     "gru": cell(x, h), "lstm": lstm(x, (h, c))[1], "conv": conv(images)}
        for i in range(5):
            one = {"linear": F.linear(x[i:i + 1], w, b), "addmm": torch.addmm(b, x[i:i + 1], w.t()),
                   "matmul": x[i:i + 1] @ w.t(), "gru": cell(x[i:i + 1], h[i:i + 1]),
                   "lstm": lstm(x[i:i + 1], (h[i:i + 1], c[i:i + 1]))[1], "conv": conv(images[i:i + 1])}
            for key, value in one.items():
                assert torch.equal(value[0], batch[key][i]), (key, i)


def test_batching_is_a_capability_of_the_agent_and_policy():
    """The base agents and policies that override the base acting do not act in batches."""
    from vlnverse.run.agents import make_agent
    from vlnverse.learn.policies import POLICIES, VLNPolicy

    assert not make_agent("oracle").acts_in_batches()
    assert not make_agent("random").acts_in_batches()
    assert _fresh("seq2seq")().acts_in_batches()
    rdp = POLICIES.get("rdp")
    assert rdp.propose is not VLNPolicy.propose  # RDP acts with its own memory: one episode at a time
    with pytest.raises(NotImplementedError, match="does not act in batches"):
        make_agent("random").act_batch([0], [{}], [None])


def test_validation_envs_is_checked_on_load():
    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.config import ValidationConfig

    ValidationConfig(envs=4).validate()
    with pytest.raises(ConfigError, match=r"envs: got 0 \(expected an integer in 1\.\.256\)"):
        ValidationConfig(envs=0).validate()


def test_training_validation_with_envs_gives_the_serial_validation(corridor, episodes_file, tmp_path):
    """``validation.envs`` batches the trainer's validation runs; their records are the serial ones."""
    import json

    from learn_helpers import small_config
    from vlnverse.learn.trainer import run_training

    tiny = dict(il__epochs=2, il__batch_size=2, validation__every=2, validation__limit=4, max_steps=30,
                sensors=[{"name": "rgb", "kind": "rgb", "width": 16, "height": 16},
                         {"name": "depth", "kind": "depth", "width": 16, "height": 16}])
    records = {}
    for envs in (1, 3):
        cfg = small_config(tmp_path / f"envs{envs}" / "run", episodes_file, policy="seq2seq", validation__envs=envs,
                           **tiny)
        run_training(cfg, scene_loader=lambda *a: corridor, progress=False, report=lambda s: None)
        lines = (tmp_path / f"envs{envs}" / "run" / "val" / "epoch_002" / "train" / "episodes.jsonl").read_text()
        records[envs] = {r["episode_id"]: {k: v for k, v in r.items() if k != "duration_s"}
                         for r in map(json.loads, lines.splitlines())}
    assert len(records[1]) == 4 and records[1] == records[3]
