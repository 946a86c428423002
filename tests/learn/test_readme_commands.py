"""The README's train → DAgger → eval commands run as written (issue 29), with a tiny budget added
as overrides: the eval config's 224 px rig gets the checkpoint's 64 px cameras from the agent,
and every training run leaves the ``best.pt`` the next command names (no validation runs here)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
#: one training episode on each of two shipped train homes (the recipe's encoder, ``path: auto``, is
#: pretrained on them: one is held out), no validation split, one epoch / round, small model
TINY = ["train={generate: {scenes: [home_0001, home_0006], episodes_per_scene: 1, seed: 0}}", "val={}",
        "validation.split=null", "il.epochs=1",
        "dagger.rounds=1", "dagger.epochs=1", "dagger.episodes=1", "policy.params.hidden_size=32",
        "device=cpu", "threads=1", "--no-progress"]


def _cli(*args: str, cwd: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "exts" / "vlnverse"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "vlnverse", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"stdout": proc.stdout, "stderr": proc.stderr}


@pytest.mark.slow
def test_readme_train_dagger_eval_commands_run_as_written(tmp_path):
    cache = [f"cache.dir={tmp_path / 'cache'}"]
    il = _cli("train", "cma_fine_grained", *TINY, *cache, cwd=tmp_path)
    best = tmp_path / "runs" / "train" / "cma_fine_grained" / "best.pt"
    assert best.is_file() and "holds the last weights" in il["stdout"] + il["stderr"]
    _cli("train", "cma_fine_grained", "mode=dagger", "init=runs/train/cma_fine_grained/best.pt",
         "out=runs/train/cma_dagger", *TINY, *cache, cwd=tmp_path)
    assert (tmp_path / "runs" / "train" / "cma_dagger" / "best.pt").is_file()
    _cli("eval", "oracle_fine_grained_strict", "agent.name=policy",
         "agent.params.checkpoint=runs/train/cma_dagger/best.pt", "limit=1", "max_steps=20", "report.enabled=false",
         "--no-progress", cwd=tmp_path)
    out = tmp_path / "runs" / "oracle_fine_grained_strict"
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert len(records) == 1 and records[0]["actions"] and (out / "summary.json").is_file()
