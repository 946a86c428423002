"""CMA by imitation with the from-scratch CNN encoders vs the frozen pretrained encoder, same data,
budget and evaluation (the measurement behind docs/learning.md, "Pretrained visual encoder").

    python3 tools/encoder_compare.py train --row cnn_scratch --encoder runs/encoder/encoder.safetensors
    python3 tools/encoder_compare.py train --row pretrained_frozen --encoder runs/encoder/encoder.safetensors
    python3 tools/encoder_compare.py eval --row cnn_scratch        # val_seen and val_unseen, Tel-Hop
    python3 tools/encoder_compare.py offline                       # teacher-forced accuracy on both splits
    python3 tools/encoder_compare.py throughput --encoder ... --budget 120   # IL samples/s: pixels vs features

Both rows train ``tasks/train/cma_fine_grained.yaml`` (64x64 RGB-D, Tel-Hop) for the same
wall-clock IL budget (``--budget`` s, no validation during training: the evaluated checkpoint is
the last one for every row) on one torch thread, then the eval runner scores the last checkpoint
on the 40 val_unseen episodes (20 per home) of that config, then ``--val-seen`` (10) evenly
spread val_seen episodes. Results go to ``<work>/<row>/result.json``.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def _config(work: Path, row: str, encoder: str | None, budget: float, features: bool = True, epochs: int = 1000):
    from vlnverse.learn.config import load_train_config, resolve_train_config_path

    overrides = [f"out={work / row}", "device=cpu", "threads=1", f"cache.dir={work / 'cache'}",
                 "validation.every=100000", f"il.epochs={epochs}", f"il.max_seconds={budget}",
                 f"cache.features={'true' if features else 'false'}",
                 "val.val_unseen.generate.episodes_per_scene=20"]
    cfg = load_train_config(resolve_train_config_path("cma_fine_grained"), overrides)
    if row.startswith("pretrained"):
        spec = {"type": "pretrained", "path": encoder, "frozen": "frozen" in row}
        cfg.policy.params["rgb_encoder"] = dict(spec)
        cfg.policy.params["depth_encoder"] = dict(spec)
    return cfg


def train(args) -> None:
    from vlnverse.learn.trainer import run_training

    cfg = _config(Path(args.work), args.row, args.encoder, args.budget)
    t0 = time.time()
    summary = run_training(cfg, progress=False)
    summary["wall_seconds"] = round(time.time() - t0, 1)
    (Path(args.work) / args.row / "train_result.json").write_text(json.dumps(summary, indent=1, default=str))


def evaluate(args) -> None:
    import os

    from vlnverse.learn.checkpoint import policy_from_checkpoint, read_checkpoint
    from vlnverse.learn.trainer import Trainer

    work = Path(args.work)
    cfg = _config(work, args.row, args.encoder, args.budget)
    cfg.validation.limit = None
    t = Trainer(cfg, progress=False)
    t.train_episodes, t.val_episodes = t._episodes()
    seen = t.val_episodes["val_seen"]  # an evenly spread subset (every train scene), the same for every row
    seen = [seen[i] for i in sorted({int(round(k * (len(seen) - 1) / max(args.val_seen - 1, 1)))
                                     for k in range(args.val_seen)})]
    # val_unseen first: on a busy machine its episodes are the ones that matter
    t.val_episodes = {"val_unseen": t.val_episodes["val_unseen"], "val_seen": seen}
    data = read_checkpoint(t.last_path, expected_policy="cma")
    t.policy = policy_from_checkpoint(data, path=t.last_path)
    t0 = time.time()
    results = t.validate("final")
    out = {"row": args.row, "episodes": {k: len(v) for k, v in t.val_episodes.items()}, "metrics": results,
           "eval_seconds": round(time.time() - t0, 1), "load_average": os.getloadavg(),
           "il_position": data.get("position")}
    (work / args.row / "result.json").write_text(json.dumps(out, indent=1, default=str))
    print(json.dumps(out, default=str))


def offline(args) -> None:
    """Teacher-forced accuracy and cross-entropy of each row's last checkpoint on the teacher's
    observations of the val_seen and val_unseen episodes (rendered once into observation caches):
    how well each policy imitates the teacher in homes it trained in and in unseen ones."""
    import os

    import numpy as np
    import torch
    from torch.nn import functional as F

    from vlnverse.learn.checkpoint import policy_from_checkpoint, read_checkpoint
    from vlnverse.learn.batching import EpisodeBatches
    from vlnverse.learn.trainer import Trainer

    work = Path(args.work)
    t = Trainer(_config(work, "cnn_scratch", None, args.budget), progress=False)
    _, val = t._episodes()
    stores = {split: t._teacher_store(eps) for split, eps in val.items()}
    out = {"load_average_start": os.getloadavg(), "rows": {}}
    for row in args.rows.split(","):
        policy = policy_from_checkpoint(read_checkpoint(work / row / "last.pt"), path=work / row / "last.pt").eval()
        res = {}
        for split, store in stores.items():
            data = EpisodeBatches([store], policy.vocab, t.cfg.max_instruction_length, t.layout)
            correct = total = 0
            ce = 0.0
            with torch.no_grad():
                for s in range(0, len(data), 8):
                    b = data.batch(np.arange(s, min(s + 8, len(data))), 1.0, "cpu")
                    logits = policy.forward_sequence(b["tokens"], b["frames"], b["prev"])
                    valid = b["weights"] > 0
                    correct += int(((logits.argmax(-1) == b["labels"]) & valid).sum())
                    total += int(valid.sum())
                    ce += float(F.cross_entropy(logits[valid], b["labels"][valid], reduction="sum"))
            res[split] = {"episodes": len(data), "steps": total, "accuracy": round(correct / total, 4),
                          "cross_entropy": round(ce / total, 4)}
        out["rows"][row] = res
        print(row, res, flush=True)
    out["load_average_end"] = os.getloadavg()
    (work / "offline.json").write_text(json.dumps(out, indent=1))


def throughput(args) -> None:
    """IL samples/s of the frozen pretrained CMA from pixels and from cached features, back to back."""
    import os

    from vlnverse.learn.trainer import run_training

    work = Path(args.work)
    out = {"load_average_start": os.getloadavg()}
    for name, features in (("pixels", False), ("features", True), ("pixels_again", False)):
        cfg = _config(work, f"pretrained_frozen_tp_{name}", args.encoder, args.budget, features=features, epochs=1)
        summary = run_training(cfg, progress=False)
        out[name] = {"samples_per_s": summary["il"]["samples_per_s"], "samples": summary["il"]["samples"],
                     "seconds": summary["il"]["seconds"], "feature_cache": summary.get("feature_cache")}
    out["load_average_end"] = os.getloadavg()
    (work / "throughput.json").write_text(json.dumps(out, indent=1, default=str))
    print(json.dumps(out, default=str))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("stage", choices=("train", "eval", "offline", "throughput"))
    p.add_argument("--row", default="cnn_scratch", choices=("cnn_scratch", "pretrained_frozen", "pretrained_finetuned"))
    p.add_argument("--encoder", default=None, help="encoder.safetensors of vlnverse pretrain-encoder")
    p.add_argument("--budget", type=float, default=600.0, help="IL wall-clock seconds per row")
    p.add_argument("--work", default="runs/encoder_compare")
    p.add_argument("--rows", default="cnn_scratch,pretrained_frozen", help="offline: the rows to score")
    p.add_argument("--val-seen", type=int, default=10, help="val_seen episodes evaluated (evenly spread)")
    args = p.parse_args()
    {"train": train, "eval": evaluate, "offline": offline, "throughput": throughput}[args.stage](args)


if __name__ == "__main__":
    main()
