"""VLN-NF Table 2 on the toolkit's homes: ROAM and the baselines in one runner
(``python -m vlnverse.eval.roam_table table``; see docs/evaluation.md).

``table`` runs every method of :data:`METHODS` through ``vlnverse eval`` (graph mode on the view
cache) on the same false-premise episodes with the same model (a scripted one by default, or
any ``MODELS`` entry, e.g. an OpenAI-compatible endpoint) and prints Coverage, Len (reach),
Len (explore), Reach SR, Reach&Decision SR, Reach SPL and REV-SPL per method. ROAM's learned
room classifier (``vlnverse train room_classifier``) and the supervised graph policy
(``vlnverse train graph_nf``) come as checkpoints; without one, its row is left out. With the
classifier, its room-classification accuracy on the episodes' scenes is reported too. Each method
draws with its ``vlnverse eval`` default render (``config.default_agent_render``: meshes for the
MLLM agents and ROAM, primitives for the supervised policy, its training render), so the view
cache needs ``vlnverse cache build`` (meshes) and, for that row, ``--objects primitives``.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

#: Table 2 rows: label -> agent block (MLLM agents get the shared model and ``max_reprompts``)
METHODS: dict[str, dict[str, Any]] = {
    "Supervised (NOT_FOUND)": {"name": "graph_policy"},
    "NavGPT": {"name": "navgpt"},
    "MapGPT": {"name": "mapgpt"},
    "SoM": {"name": "som"},
    "ROAM": {"name": "roam", "params": {"room_labels": "classifier"}},
    "ROAM (GT rooms)": {"name": "roam", "params": {"room_labels": "ground_truth"}},
    # ablation: FOUND / NOT_FOUND from the detector and the stop criterion alone (the model moves)
    "ROAM (GT rooms, detector decides)": {"name": "roam_detector", "params": {"room_labels": "ground_truth"}},
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
        bounds = (summary["overall"].get("partial") or {}).get("bounds", {})
        cells = [label]
        for key, unit in COLUMNS.values():
            v = means.get(key)
            cell = "-" if v is None else (f"{100 * v:.1f}%" if unit == "%" else f"{v:.1f}")
            if key in bounds:  # partial row: over the evaluated episodes, flagged, beside the all-episode bound
                cell += f"* (all: {100 * bounds[key]:.1f}%)"
            cells.append(cell)
        rows.append(cells)
    return rows


def format_table(rows: list[list[str]]) -> str:
    """Plain-text table."""
    head = ["Method", *COLUMNS]
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    line = lambda cells: " | ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))  # noqa: E731
    return "\n".join([line(head), "-+-".join("-" * w for w in widths), *[line(r) for r in rows]])


def run_table(episodes: str, out: str, *, model: dict | None = None, room_classifier: str | None = None,
              graph_policy: str | None = None, methods: Sequence[str] | None = None, max_steps: int = 40,
              scene_loader: Any = None) -> dict[str, Any]:
    """Evaluate the methods on ``episodes`` (a false-premise JSONL), one run folder each under
    ``out``; returns ``{"rows": ..., "summaries": ..., "room_accuracy": ...}`` (the last with a
    ``room_classifier``: its accuracy on the in-room viewpoints of the episodes' scenes)."""
    from .runner import run_eval

    model = model or SCRIPTED
    summaries = {}
    for label in methods or list(METHODS):
        agent = json.loads(json.dumps(METHODS[label]))
        params = agent.setdefault("params", {})
        if agent["name"] == "graph_policy":
            if not graph_policy:
                continue  # no checkpoint of 'vlnverse train graph_nf': the row is left out
            params["checkpoint"] = str(graph_policy)
        else:
            params.setdefault("max_reprompts", 1)
        if params.get("room_labels") == "classifier":
            if not room_classifier:
                continue  # no classifier given: the GT-rooms ablation row stands alone
            params["room_classifier"] = str(room_classifier)
        folder = Path(out) / label.lower().replace(" ", "_").replace("(", "").replace(")", "").replace(",", "")
        cfg = load_eval_config_dict({"agent": agent, "model": model, "task": "false_premise", "episodes": str(episodes),
                                     "collision_mode": "graph", "backend": "viewpoints", "max_steps": max_steps,
                                     "seed": 0, "out": str(folder), "report": {"enabled": False}}, folder)
        kwargs = {"scene_loader": scene_loader} if scene_loader is not None else {}
        summaries[label] = run_eval(cfg, progress=False, print_summary=False, **kwargs)
    result = {"rows": table_rows(summaries), "summaries": summaries}
    if room_classifier:
        result["room_accuracy"] = classifier_accuracy(room_classifier, episodes, scene_loader)
    return result


def classifier_accuracy(path: str, episodes: str, scene_loader: Any = None) -> dict[str, Any]:
    """Room-classification accuracy of the classifier at ``path`` on the in-room viewpoints of
    the scenes of ``episodes`` (their split: val_unseen for the table), labels from the room maps."""
    from ..core.body import load_body
    from ..tasks.base import load_scene_context, load_task_config
    from ..tasks.episode import load_episodes
    from ..tasks.scene_roots import resolve_episode_scenes, scene_roots
    from ..run.rooms import load_room_classifier, room_accuracy, scene_samples

    clf = load_room_classifier(path, "--room-classifier")
    eps = load_episodes(episodes)
    if scene_loader is None:
        where = Path(episodes)
        eps = resolve_episode_scenes(eps, scene_roots(None, where if where.is_dir() else where.parent))
        task = load_task_config("false_premise")
        body = load_body(task.body)
        scene_loader = lambda p: load_scene_context(p, body, task.map_resolution)  # noqa: E731
    paths = list(dict.fromkeys(e.scene_path for e in eps))
    return {"splits": sorted({e.split for e in eps}), "scenes": len(paths),
            **room_accuracy(clf, [scene_samples(scene_loader(p), clf.sight)[:2] for p in paths])}


def load_eval_config_dict(data: dict, folder: Path):
    """An ``EvalConfig`` from a dict (written next to the run as ``config.yaml`` first)."""
    import yaml

    from ..core.io import write_text_atomic
    from .config import load_eval_config

    folder.mkdir(parents=True, exist_ok=True)
    path = folder.parent / f"{folder.name}.yaml"
    write_text_atomic(path, yaml.safe_dump(data, sort_keys=False))
    return load_eval_config(path)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m vlnverse.eval.roam_table table ...``; bad input is one line, exit status 2."""
    import sys

    from ..core.errors import VLNVerseError

    try:
        return _main(argv)
    except VLNVerseError as exc:
        print(f"vlnverse.eval.roam_table: error: {exc}", file=sys.stderr)
        return 2


def _main(argv: Sequence[str] | None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m vlnverse.eval.roam_table")
    sub = ap.add_subparsers(dest="cmd", required=True)
    tb = sub.add_parser("table", help="VLN-NF Table 2: ROAM and the baselines on false-premise episodes")
    tb.add_argument("--episodes", required=True, help="false-premise episodes (JSONL, from 'vlnverse data generate')")
    tb.add_argument("--out", required=True, help="folder of the runs (one per method)")
    tb.add_argument("--room-classifier", default=None, help="ROAM's room classifier (best.pt of 'vlnverse train "
                    "room_classifier'); without it only the ground-truth-rooms ablation of ROAM runs")
    tb.add_argument("--graph-policy", default=None, help="the supervised graph policy with NOT_FOUND (best.pt of "
                    "'vlnverse train graph_nf'); without it its row is left out")
    tb.add_argument("--model", default=None, help="model block as JSON (default: the scripted model)")
    tb.add_argument("--max-steps", type=int, default=40)
    args = ap.parse_args(argv)
    result = run_table(args.episodes, args.out, model=parse_model(args.model), room_classifier=args.room_classifier,
                       graph_policy=args.graph_policy, max_steps=args.max_steps)
    n = {label: s["overall"]["episodes"] for label, s in result["summaries"].items()}
    print(f"VLN-NF Table 2 on {args.episodes} (episodes per method: {n})")
    print(format_table(result["rows"]))
    from ..run.summary import partial_note

    for label, summary in result["summaries"].items():
        note = partial_note(label, summary["overall"])
        if note:
            print(note)
    acc = result.get("room_accuracy")
    if acc:
        print(f"ROAM's room classifier on {'/'.join(acc['splits'])} ({acc['scenes']} scenes, {acc['viewpoints']} in-room "
              f"viewpoints): accuracy {100 * acc['accuracy']:.1f}%")
    return 0


def parse_model(text: str | None) -> dict | None:
    """``--model`` as a JSON object with a ``name``; anything else is a one-line ``ConfigError``."""
    from ..core.errors import ConfigError

    if text is None:
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"not JSON ({exc.msg})", field="--model", expected='a model block, e.g. '
                          '\'{"name": "openai", "params": {...}}\'') from None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        raise ConfigError(f"got {text!r}", field="--model", expected="a JSON object with a 'name' (and 'params')")
    return data


if __name__ == "__main__":
    raise SystemExit(main())
