"""Self-contained HTML report of one or more evaluation runs.

The page holds the metrics table of every run, then per episode its instruction, metrics,
termination, the top-down map (occupancy, reference path, agent path, collisions) and the
first-person frames at key steps. Images are read from the run folders and embedded as base64,
so the single ``report.html`` file can be moved or mailed on its own.
"""
from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any, Iterable

from ..core.io import write_text_atomic
from ..run.summary import partial_note

COLUMNS = ("TL", "NE", "SR", "OSR", "SPL", "nDTW", "sDTW", "CLS", "CR")
PERCENT = {"SR", "OSR", "SPL", "nDTW", "sDTW", "CLS", "CR", "RSR", "reach_SR", "decision_SR", "RD_SR", "coverage",
           "REV_SPL", "Rid_SR", "Oid_SR", "reach_SPL"}

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}
.ep{border:1px solid #ddd;border-radius:6px;padding:10px;margin:12px 0}
.ep.ok{border-left:6px solid #2e7d32}.ep.fail{border-left:6px solid #c62828}
.imgs{display:flex;flex-wrap:wrap;gap:8px;align-items:flex-start}
.imgs figure{margin:0}.imgs figcaption{font-size:12px;color:#555;text-align:center}
.map{max-width:420px}.frame{width:160px}.muted{color:#666;font-size:13px}
"""


def _fmt(name: str, value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, (int, float)):
        return f"{100 * value:.1f}" if name in PERCENT else f"{value:.2f}"
    return html.escape(str(value))


def _img(path: Path, cls: str, alt: str) -> str:
    if not path.is_file():
        return ""
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<img class="{cls}" alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def _summary_table(runs: list[tuple[str, dict, list[dict]]]) -> str:
    head = "".join(f"<th>{c}</th>" for c in COLUMNS)
    rows = []
    for _label, summary, _records in runs:
        agent = summary.get("run", {}).get("agent", "?")
        for key, agg in summary["by_task"].items():
            task, _sep, mode = key.partition("/")
            cells = "".join(f"<td>{_fmt(c, agg['means'].get(c))}</td>" for c in COLUMNS)
            extras = [f"{k} {_fmt(k, v)}" for k, v in agg["means"].items() if k not in COLUMNS]
            extras += [f"{k} {100 * v:.1f}" for k, v in agg.get("sr_n", {}).items()]
            rows.append(f"<tr><td>{html.escape(task)}</td><td>{html.escape(agent)}</td><td>{html.escape(mode)}</td>"
                        f"<td>{agg['episodes']}</td>{cells}"
                        f"<td>{agg.get('invalid_actions', 0)}</td>"
                        f"<td>{(agg.get('not_evaluated') or {}).get('episodes', 0)}</td>"
                        f"<td>{html.escape(' · '.join(extras))}</td></tr>")
    return (f"<table><tr><th>task</th><th>agent</th><th>mode</th><th>episodes</th>{head}<th>invalid actions</th>"
            "<th>not evaluated</th><th>task-specific</th></tr>"
            + "".join(rows) + "</table><p class='muted'>SR, OSR, SPL, nDTW, sDTW, CLS, CR in %; TL, NE in metres. "
            "NE/SR/OSR/SPL use geodesic distance on the navigable map.</p>")


def _episode_block(record: dict, base_dir: Path) -> str:
    m = record["metrics"]
    ok = m.get("SR") == 1.0
    metrics = " · ".join(f"{k} {_fmt(k, m.get(k))}" for k in COLUMNS if k in m)
    imgs = []
    if record.get("map"):
        imgs.append(f"<figure>{_img(base_dir / record['map'], 'map', 'top-down map')}"
                    "<figcaption>blue: reference · orange: agent · x: collisions</figcaption></figure>")
    for frame in record.get("frames", []):
        imgs.append(f"<figure>{_img(base_dir / frame['file'], 'frame', frame['label'])}"
                    f"<figcaption>{html.escape(frame['label'])} (pose {frame['index']})</figcaption></figure>")
    failure = f" — {html.escape(record['failure'])}" if record.get("failure") else ""
    error = record.get("first_error")
    if error:
        text = f" — clause: “{html.escape(error['clause_text'])}”" if error.get("clause_text") else ""
        failure += (f"</span><p><b>first error: {html.escape(error['category'])}</b> at step {error['step']} "
                    f"({html.escape(error['detail'])}; purple X on the map){text}</p><span>")
    return (f"<div class='ep {'ok' if ok else 'fail'}'><b>{html.escape(record['episode_id'])}</b> "
            f"<span class='muted'>{html.escape(record['scene_id'])} · {html.escape(record['task_type'])} · "
            f"{record['steps']} steps · {len(record['collisions'])} collisions · {record['invalid_actions']} invalid · "
            f"ended by {html.escape(record['termination'])}{failure}</span>"
            f"<p>{html.escape(record.get('instruction', ''))}</p><p class='muted'>{metrics}</p>"
            f"<div class='imgs'>{''.join(imgs)}</div></div>")


def write_report(path: str | Path, runs: Iterable[tuple[str, dict, list[dict]]], *, base_dir: str | Path | None = None,
                 title: str = "vlnverse evaluation report") -> Path:
    """Write the HTML report for ``runs`` = [(label, summary, episode records)] atomically.

    Image paths in the records are relative to ``base_dir`` (per run: pass records whose
    ``map``/``frames`` paths were made relative to the report's folder).
    """
    path = Path(path)
    base = Path(base_dir) if base_dir is not None else path.parent
    runs = list(runs)
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
             f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>", _summary_table(runs)]
    for label, summary, records in runs:
        run = summary.get("run", {})
        parts.append(f"<h2>{html.escape(label)}</h2><p class='muted'>task {html.escape(str(run.get('task')))} · "
                     f"body {html.escape(str(run.get('body')))} · max steps {run.get('max_steps')} · "
                     f"success distance {run.get('success_distance')} m</p>")
        model = summary.get("model") or {}
        if model.get("model"):
            served = ", ".join(model.get("served_models") or {}) or "-"
            parts.append(f"<p class='muted'>model {html.escape(str(model['model']))} "
                         f"{html.escape(str(model.get('model_name')))} (served: {html.escape(served)}) at "
                         f"{html.escape(str(model.get('endpoint_host')))} · prompt version "
                         f"{html.escape(str(model.get('prompt_version')))} · {model.get('requests', 0)} requests · "
                         f"{model.get('cache_hits', 0)} cache hits</p>")
        note = partial_note(label, summary.get("overall") or {})
        if note:  # a partial row (its SR beside the bound) or an assistant outage, with the reason per component
            parts.append(f"<p><b>{html.escape(note.lstrip('* '))}</b>; the metrics leave out what was not evaluated.</p>")
        errors = (summary.get("overall") or {}).get("first_errors") or {}
        if errors.get("failed_episodes"):
            cells = "".join(f"<tr><td>{html.escape(k)}</td><td>{n}</td><td>"
                            + html.escape(", ".join(f"{e['episode_id']} (step {e['step']})"
                                                    for e in errors.get("examples", {}).get(k, [])))
                            + "</td></tr>" for k, n in errors["counts"].items() if n)
            parts.append(f"<p>First error of the {errors['failed_episodes']} failed episode(s) (step-level error "
                         "analysis; rules in docs/evaluation.md)</p><table><tr><th>error</th><th>episodes</th>"
                         f"<th>e.g.</th></tr>{cells}</table>")
        shown = [r for r in records if r.get("map") or r.get("frames")]
        parts.extend(_episode_block(r, base / r.get("_dir", "")) for r in shown)
        hidden = len(records) - len(shown)
        if hidden:
            parts.append(f"<p class='muted'>{hidden} more episode(s) without pictures: see episodes.jsonl.</p>")
    parts.append("</body></html>")
    return write_text_atomic(path, "\n".join(parts))
