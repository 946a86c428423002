"""A policy defined outside the package (a plug-in ``.py`` file) is a policy like the built-in ones:
``TrainConfig`` accepts it with ``plugins=[...]``, its checkpoint saves what it says and rebuilds it,
the ``policy`` eval agent acts through its methods, and it trains and evaluates from the command line."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]

#: A plug-in policy: no recurrence, depth + previous action -> logits; it saves an extra entry in
#: its checkpoints, checks it on load, and marks each step it acts in the agent's outputs.
PLUGIN = '''
import torch
from torch import nn

from vlnverse.core.errors import ConfigError
from vlnverse.learn.policies import NUM_ACTIONS, VLNPolicy, register_policy


@register_policy("tiny_plugin")
class TinyPolicy(VLNPolicy):
    def __init__(self, vocab, sensors, *, bias: float = 0.0, **params):
        super().__init__(vocab, sensors, **params)
        self.head = nn.Linear(self.visual_dim + self.prev_action.embedding_dim, NUM_ACTIONS)
        self.bias = float(bias)

    def step(self, instruction, visual, prev_action, hidden):
        x = torch.cat([*self._visual_globals(visual), self.prev_action(prev_action)], dim=1)
        return self.head(x) + self.bias, hidden

    def checkpoint_extras(self):
        return {"tiny_plugin": {"head_inputs": self.head.in_features}}

    @classmethod
    def params_from_checkpoint(cls, params, data, path):
        if "tiny_plugin" not in data:
            raise ConfigError("no tiny_plugin entry", file=path, field="tiny_plugin")
        return super().params_from_checkpoint(params, data, path)

    def propose(self, memory, observations, state, agent):
        action = super().propose(memory, observations, state, agent)
        agent.outputs.append({"tiny_plugin_step": len(agent.outputs)})
        return action
'''

SENSORS = [{"name": "rgb", "kind": "rgb", "shape": [16, 16, 3]}, {"name": "depth", "kind": "depth", "shape": [16, 16]}]


@pytest.fixture
def plugin_file(tmp_path):
    path = tmp_path / "plugins" / "tiny_policy_plugin.py"
    path.parent.mkdir()
    path.write_text(PLUGIN, encoding="utf-8")
    return path


def test_a_plugin_policy_validates_saves_its_extras_and_acts_through_its_methods(plugin_file, tmp_path):
    import torch

    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.agent import PolicyAgent
    from vlnverse.learn.checkpoint import policy_from_checkpoint, read_checkpoint, save_checkpoint
    from vlnverse.learn.config import load_train_config
    from vlnverse.learn.policies import POLICIES, VLNPolicy, build_policy
    from vlnverse.learn.vocab import Vocabulary

    config = tmp_path / "train.yaml"
    config.write_text("policy: {name: tiny_plugin}\ntask: fine_grained\ntrain: episodes.jsonl\n", encoding="utf-8")
    if "tiny_plugin" not in POLICIES:  # no name list: an unknown policy until its plug-in is loaded
        with pytest.raises(ConfigError, match="policy.name.*tiny_plugin"):
            load_train_config(config)
    cfg = load_train_config(config, [f"plugins=[{plugin_file}]"])
    assert cfg.policy.name == "tiny_plugin" and "tiny_plugin" in POLICIES
    assert "plugins" not in cfg.run_key()  # where a plug-in lives does not change a run

    torch.manual_seed(0)
    vocab = Vocabulary.build(["walk to the sofa"])
    policy = build_policy("tiny_plugin", {"bias": 0.5}, vocab, SENSORS)
    assert isinstance(policy, VLNPolicy) and policy.name == "tiny_plugin"
    # training unrolls the plug-in's own ``step`` (it defines no ``features``): the loss reaches its head
    b, t = 2, 3
    batch = {"tokens": torch.as_tensor(np.stack([vocab.encode("walk to the sofa", 8)] * b)),
             "frames": {"rgb": torch.zeros(b, t, 16, 16, 3, dtype=torch.uint8), "depth": torch.ones(b, t, 16, 16)},
             "prev": torch.zeros(b, t, dtype=torch.long), "labels": torch.ones(b, t, dtype=torch.long),
             "weights": torch.ones(b, t)}
    loss, correct = policy.imitation_loss(batch)
    loss.backward()
    assert math.isfinite(loss.item()) and 0 <= correct <= b * t and float(policy.head.weight.grad.abs().sum()) > 0
    with pytest.raises(ConfigError, match="progress_weight.*tiny_plugin"):
        build_policy("tiny_plugin", {"progress_weight": 0.5}, vocab, SENSORS).imitation_loss(batch)
    ckpt = save_checkpoint(tmp_path / "tiny.pt", policy, config=cfg.to_dict() | {"policy": {"name": "tiny_plugin",
                                                                                            "params": {"bias": 0.5}}})
    data = read_checkpoint(ckpt)
    assert data["tiny_plugin"] == {"head_inputs": policy.head.in_features}
    again = policy_from_checkpoint(data, path=ckpt)
    assert again.bias == 0.5 and torch.equal(again.head.weight, policy.head.weight)
    del data["tiny_plugin"]  # the policy, not the checkpoint code, decides what a checkpoint must hold
    with pytest.raises(ConfigError, match="no tiny_plugin entry"):
        policy_from_checkpoint(data, path=ckpt)

    agent = PolicyAgent(checkpoint=str(ckpt), seed=3)
    agent.reset(SimpleNamespace(episode_id="e0", instruction_text="walk to the sofa"), None)
    obs = {"rgb": np.zeros((16, 16, 3), np.uint8), "depth": np.ones((16, 16), np.float32)}
    actions = [int(agent.act(obs, None)) for _ in range(3)]
    assert all(0 <= a < 6 for a in actions)
    assert agent.outputs == [{"tiny_plugin_step": 0}, {"tiny_plugin_step": 1}, {"tiny_plugin_step": 2}]
    assert agent.memory["prev"] == 1 + actions[-1]  # the base class fed the executed action back


def _cli(*args: str, cwd: Path, ok: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "exts" / "vlnverse"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "vlnverse", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=1800)
    if ok:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.mark.slow
def test_a_plugin_policy_trains_and_evaluates_from_the_command_line(plugin_file, tmp_path):
    plugins = f"plugins=[{plugin_file}]"
    _cli("train", "cma_fine_grained", "policy.name=tiny_plugin", "policy.params={hidden_size: 32}", plugins,
         "train={generate: {scenes: [home_0001], episodes_per_scene: 1, seed: 0}}", "val={}", "validation.split=null",
         "il.epochs=1", "device=cpu", "threads=1", "out=runs/tiny", f"cache.dir={tmp_path / 'cache'}", "--no-progress",
         cwd=tmp_path)
    best = tmp_path / "runs" / "tiny" / "best.pt"
    summary = json.loads((tmp_path / "runs" / "tiny" / "summary.json").read_text())
    assert best.is_file() and summary["policy"] == "tiny_plugin" and summary["il"]["samples"] > 0
    evaluate = ["eval", "oracle_fine_grained_strict", "agent.name=policy", "agent.params.checkpoint=runs/tiny/best.pt",
                "limit=1", "max_steps=5", "report.enabled=false", "--no-progress"]
    refused = _cli(*evaluate, "out=runs/refused", cwd=tmp_path, ok=False)  # the plug-in is not loaded: one clear line
    assert refused.returncode == 2 and "tiny_plugin" in refused.stderr and "plugins=" in refused.stderr
    _cli(*evaluate, plugins, "out=runs/eval", cwd=tmp_path)
    records = [json.loads(line) for line in (tmp_path / "runs" / "eval" / "episodes.jsonl").read_text().splitlines()]
    assert len(records) == 1 and records[0]["actions"]
    assert records[0]["agent_outputs"][0] == {"tiny_plugin_step": 0}  # the plug-in's own propose acted
