"""Seq2Seq and CMA each overfit the 4 corridor episodes: teacher-action accuracy >= 95% and SR >= 0.75
on those episodes, evaluated by ``vlnverse eval CONFIG agent.name=policy agent.params.checkpoint=PATH``
in a subprocess (the corridor written as a USD file beside the episodes, as a user's dataset).

Kept fast for the non-slow suite: 16x16 RGB-D, small encoders, batches of 2 episodes with a high
learning rate, one observation cache shared by both policies (module-scoped), torch on 1 thread.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from learn_helpers import make_episodes

PACKAGE_ROOT = Path(__file__).resolve().parents[2] / "exts" / "vlnverse"
SENSORS = [{"name": "rgb", "kind": "rgb", "width": 16, "height": 16},
           {"name": "depth", "kind": "depth", "width": 16, "height": 16}]
ENCODER = {"type": "cnn", "channels": 8, "out_dim": 32}
SMALL = {"hidden_size": 64, "instruction_encoder": {"embedding_size": 32, "hidden_size": 64},
         "rgb_encoder": ENCODER, "depth_encoder": ENCODER}


@pytest.fixture(scope="module")
def corridor_dataset(corridor, tmp_path_factory):
    """``corridor.usda`` + ``train.jsonl`` (4 episodes naming it portably) and a shared cache folder."""
    from eval_scenes import corridor_scene

    from vlnverse.scenes.usd_io import write_usd
    from vlnverse.tasks.episode import save_episodes

    root = tmp_path_factory.mktemp("overfit")
    write_usd(corridor_scene(), root / "corridor.usda")
    save_episodes(root / "train.jsonl", make_episodes(corridor))
    return root


def _eval_cli(root: Path, checkpoint: Path, out: Path) -> dict:
    """``vlnverse eval`` in a subprocess on the 4 training episodes; returns its summary."""
    import yaml

    cfg = {"agent": {"name": "random"}, "task": "fine_grained", "episodes": {"path": str(root / "train.jsonl")},
           "collision_mode": "telhop", "sensors": SENSORS, "max_steps": 80, "success_distance": 1.5,
           "report": {"enabled": False}, "out": str(out)}
    (root / "eval.yaml").write_text(yaml.safe_dump(cfg))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(PACKAGE_ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-m", "vlnverse", "eval", str(root / "eval.yaml"), "--no-progress",
                           "agent.name=policy", f"agent.params.checkpoint={checkpoint}"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads((out / "summary.json").read_text())


@pytest.mark.parametrize("policy,epochs,lr", [("seq2seq", 60, 0.006), ("cma", 70, 0.006)])
def test_policy_overfits_four_episodes(policy, epochs, lr, corridor_dataset):
    """Teacher-action accuracy >= 95% in training, SR >= 0.75 through ``vlnverse eval``."""
    from vlnverse.core.config import from_dict
    from vlnverse.learn.config import TrainConfig
    from vlnverse.learn.trainer import run_training

    root = corridor_dataset
    params = {**SMALL, "attention_size": 32} if policy == "cma" else SMALL
    cfg = from_dict(TrainConfig, {
        "policy": {"name": policy, "params": params}, "task": "fine_grained", "train": str(root / "train.jsonl"),
        "val": {}, "collision_mode": "telhop", "max_steps": 80, "success_distance": 1.5, "sensors": SENSORS,
        "il": {"epochs": epochs, "batch_size": 2, "lr": lr}, "validation": {"every": epochs, "metric": "accuracy"},
        "cache": {"dir": str(root / "cache")}, "device": "cpu", "threads": 1, "seed": 0, "out": str(root / policy)})
    summary = run_training(cfg, progress=False, report=lambda s: None)
    assert summary["il"]["steps"] > 100 and summary["il"]["accuracy"] >= 0.95
    result = _eval_cli(root, root / policy / "last.pt", root / f"eval_{policy}")
    assert result["overall"]["episodes"] == 4 and result["overall"]["means"]["SR"] >= 0.75
