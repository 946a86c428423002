"""VLN-NF Table 2 on the toolkit's homes: ROAM and the baselines in one runner, and ROAM's room
classifier (``python -m vlnverse.eval.roam_table train-rooms | table``; see docs/evaluation.md).

``table`` runs every method of :data:`METHODS` through ``vlnverse eval`` (graph mode on the view
cache) on the same false-premise episodes with the same model (a scripted one by default, or
any ``MODELS`` entry, e.g. an OpenAI-compatible endpoint) and prints Coverage, Len (reach),
Len (explore), Reach SR, Reach&Decision SR, Reach SPL and REV-SPL per method.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np

#: Table 2 rows: label -> agent block (params added to the shared ones)
METHODS: dict[str, dict[str, Any]] = {
    "NavGPT": {"name": "navgpt"},
    "MapGPT": {"name": "mapgpt"},
    "SoM": {"name": "som"},
    "ROAM": {"name": "roam", "params": {"room_labels": "classifier"}},
    "ROAM (GT rooms)": {"name": "roam", "params": {"room_labels": "ground_truth"}},
}
#: Table 2 columns: header -> (summary key, unit)
COLUMNS = {"Coverage": ("coverage", "%"), "Len (reach)": ("len_reach", "m"), "Len (explore)": ("len_explore", "m"),
           "Reach SR": ("reach_SR", "%"), "Reach&Decision SR": ("RD_SR", "%"), "Reach SPL": ("reach_SPL", "%"),
           "REV-SPL": ("REV_SPL", "%")}
#: the scripted model of the table (and the tests): eight moves (marker 1, then 2), then NOT_FOUND
SCRIPTED = {"name": "scripted", "params": {"answers": ["Action: 1"] * 5 + ["Action: 2"] * 3 + ["Action: NOT_FOUND"],
                                           "cycle": True}}


def table_rows(summaries: dict[str, dict]) -> list[list[str]]:
    """Table 2 rows (method, then the COLUMNS) from ``summary.json`` contents."""
    rows = []
    for label, summary in summaries.items():
        means = summary["overall"]["means"]
        cells = [label]
        for key, unit in COLUMNS.values():
            v = means.get(key)
            cells.append("-" if v is None else (f"{100 * v:.1f}%" if unit == "%" else f"{v:.1f}"))
        rows.append(cells)
    return rows


def format_table(rows: list[list[str]]) -> str:
    """Plain-text table."""
    head = ["Method", *COLUMNS]
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    line = lambda cells: " | ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))  # noqa: E731
    return "\n".join([line(head), "-+-".join("-" * w for w in widths), *[line(r) for r in rows]])


def run_table(episodes: str, out: str, *, model: dict | None = None, room_classifier: str | None = None,
              methods: Sequence[str] | None = None, max_steps: int = 40, scene_loader: Any = None) -> dict[str, Any]:
    """Evaluate the methods on ``episodes`` (a false-premise JSONL), one run folder each under
    ``out``; returns ``{"rows": ..., "summaries": ...}``."""
    from .runner import run_eval

    model = model or SCRIPTED
    summaries = {}
    for label in methods or list(METHODS):
        agent = json.loads(json.dumps(METHODS[label]))
        params = agent.setdefault("params", {})
        params.setdefault("max_reprompts", 1)
        if params.get("room_labels") == "classifier":
            if not room_classifier:
                continue  # no classifier given: the GT-rooms ablation row stands alone
            params["room_classifier"] = str(room_classifier)
        folder = Path(out) / label.lower().replace(" ", "_").replace("(", "").replace(")", "")
        cfg = load_eval_config_dict({"agent": agent, "model": model, "task": "false_premise", "episodes": str(episodes),
                                     "collision_mode": "graph", "backend": "viewpoints", "max_steps": max_steps,
                                     "seed": 0, "out": str(folder), "report": {"enabled": False}}, folder)
        kwargs = {"scene_loader": scene_loader} if scene_loader is not None else {}
        summaries[label] = run_eval(cfg, progress=False, print_summary=False, **kwargs)
    return {"rows": table_rows(summaries), "summaries": summaries}


def load_eval_config_dict(data: dict, folder: Path):
    """An ``EvalConfig`` from a dict (written next to the run as ``config.yaml`` first)."""
    import yaml

    from ..core.io import write_text_atomic
    from .config import load_eval_config

    folder.mkdir(parents=True, exist_ok=True)
    path = folder.parent / f"{folder.name}.yaml"
    write_text_atomic(path, yaml.safe_dump(data, sort_keys=False))
    return load_eval_config(path)


# ------------------------------------------------------------------------------------------
# room classifier: train, report accuracy


def train_rooms(train_scenes: str, eval_scenes: str | None, out: str) -> dict[str, Any]:
    """Train ROAM's :class:`~vlnverse.eval.roam.RoomClassifier` on the viewpoints of
    ``train_scenes`` (room labels from the room maps: room-level supervision only), save it to
    ``out`` and report its accuracy on ``eval_scenes``' viewpoints; returns the figures."""
    from ..core.body import load_body
    from ..tasks.base import load_scene_context
    from ..tasks.dataset import resolve_scene_paths
    from .roam import RoomClassifier, multi_hot, scene_samples

    body = load_body("r2r_ce")

    def samples(spec):
        seen, labs = [], []
        for p in resolve_scene_paths(spec):
            s, lab, _ = scene_samples(load_scene_context(p, body, 0.05))
            seen += s
            labs += lab
        return seen, labs

    seen, y = samples(train_scenes)
    vocab = sorted({c for s in seen for c in s})
    clf = RoomClassifier.fit(multi_hot(seen, vocab), y, vocab=vocab)
    clf.save(out)
    accuracy = lambda s, lab: round(float(np.mean(np.array(clf.predict(multi_hot(s, vocab))) == np.array(lab))), 4)  # noqa: E731
    report = {"train_scenes": train_scenes, "train_viewpoints": len(y), "classes": clf.classes,
              "train_accuracy": accuracy(seen, y), "out": str(out)}
    if eval_scenes:
        seen_e, ye = samples(eval_scenes)
        report.update({"eval_scenes": eval_scenes, "eval_viewpoints": len(ye), "eval_accuracy": accuracy(seen_e, ye)})
    return report


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m vlnverse.eval.roam_table")
    sub = ap.add_subparsers(dest="cmd", required=True)
    tr = sub.add_parser("train-rooms", help="train ROAM's room classifier; print its accuracy")
    tr.add_argument("--scenes", default="train")
    tr.add_argument("--eval-scenes", default="val_unseen")
    tr.add_argument("--out", required=True)
    tb = sub.add_parser("table", help="VLN-NF Table 2: ROAM and the baselines on false-premise episodes")
    tb.add_argument("--episodes", required=True, help="false-premise episodes (JSONL, from 'vlnverse data generate')")
    tb.add_argument("--out", required=True, help="folder of the runs (one per method)")
    tb.add_argument("--room-classifier", default=None, help="ROAM's room classifier (.npz); without it only the "
                    "ground-truth-rooms ablation of ROAM runs")
    tb.add_argument("--model", default=None, help="model block as JSON (default: the scripted model)")
    tb.add_argument("--max-steps", type=int, default=40)
    args = ap.parse_args(argv)
    if args.cmd == "train-rooms":
        print(json.dumps(train_rooms(args.scenes, args.eval_scenes, args.out), indent=1))
        return 0
    result = run_table(args.episodes, args.out, model=json.loads(args.model) if args.model else None,
                       room_classifier=args.room_classifier, max_steps=args.max_steps)
    n = {label: s["overall"]["episodes"] for label, s in result["summaries"].items()}
    print(f"VLN-NF Table 2 on {args.episodes} (episodes per method: {n})")
    print(format_table(result["rows"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
