"""A page a person can check instructions on (``vlnverse data review DATASET --n 50 --out DIR``).

``DIR/index.html`` has one card per instruction (the first ``n`` in file order): the text with each
reference highlighted and numbered (colour by what made it unique: category, attribute, relation,
ordinal), what each reference denotes (and how many rivals in view in another room it was told
apart from), and the scene's top-down map (``scenes.render_map``) with the reference path, start
and goal and each referenced object marked with its number. Version-1
datasets record no references: their object and room words (``Lexicon.find``) are underlined and
the landmarks the Describer found near the path are marked unnumbered. Maps are ``DIR/maps/*.png``;
the folder is written atomically (``core.io.replace_output_dir``).
"""
from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import numpy as np

#: Highlight colour per ``needs`` of a reference.
NEED_COLOURS = {"category": "#cfe8ff", "attribute": "#ffe08a", "relation": "#c8f2c2", "ordinal": "#f5c6f0"}

_STYLE = """
body { font-family: sans-serif; margin: 1.5em; background: #f4f4f6; }
.card { background: white; border-radius: 6px; padding: 1em; margin-bottom: 1.2em; display: flex; gap: 1.2em;
        box-shadow: 0 1px 3px rgba(0,0,0,.15); }
.card img { width: 460px; height: auto; border: 1px solid #ddd; }
.text { font-size: 1.1em; line-height: 1.6; max-width: 46em; }
mark { border-radius: 3px; padding: 0 2px; }
mark sup { font-size: .7em; color: #444; }
.word { text-decoration: underline dotted; }
.meta { color: #666; font-size: .85em; margin-top: .6em; }
table.refs { font-size: .85em; margin-top: .6em; border-collapse: collapse; }
table.refs td { padding: 1px 8px; border-bottom: 1px solid #eee; }
"""


def _highlight(text: str, spans: list[tuple[int, int, str, str]]) -> str:
    """HTML of ``text`` with ``(start, end, open_tag, close_tag)`` spans (non-overlapping, sorted)."""
    out, pos = [], 0
    for start, end, open_tag, close_tag in sorted(spans):
        if start < pos:
            continue
        out.append(html.escape(text[pos:start]) + open_tag + html.escape(text[start:end]) + close_tag)
        pos = end
    out.append(html.escape(text[pos:]))
    return "".join(out)


def _card(ep, k: int, instr, refs: list[dict] | None, graph_objects: dict, lexicon, map_file: str | None) -> str:
    text = instr.text
    rows = []
    if refs is not None:
        spans = []
        for n, ref in enumerate(refs, 1):
            colour = NEED_COLOURS.get(ref.get("needs"), "#eee")
            spans.append((ref["span"][0], ref["span"][1], f'<mark style="background:{colour}" '
                          f'title="needs {html.escape(str(ref.get("needs")))}">', f"<sup>{n}</sup></mark>"))
            if ref.get("kind") == "doorway":
                what = f"doorway into room {ref.get('room_id')}"
            else:
                what = f"{graph_objects.get(ref['instance_id'], {}).get('category', '?')} #{ref['instance_id']}"
            seen = ref.get("seen_rivals")
            seen = f", {seen} rival{'s' if seen != 1 else ''} in view in another room" if seen else ""
            rows.append(f"<tr><td>{n}</td><td>{html.escape(what)}</td>"
                        f"<td>needs {html.escape(str(ref.get('needs')))}{seen}</td></tr>")
        body = _highlight(text, spans)
    else:
        body = _highlight(text, [(h.span[0], h.span[1], '<span class="word">', "</span>") for h in lexicon.find(text)])
    image = f'<img src="{html.escape(map_file)}" alt="map">' if map_file else "<div>(no map)</div>"
    table = f'<table class="refs">{"".join(rows)}</table>' if rows else ""
    return (f'<div class="card">{image}<div><div class="text">{body}</div>{table}'
            f'<div class="meta">{html.escape(ep.episode_id)} · instruction {k + 1} · {html.escape(ep.split)} · '
            f'scene {html.escape(ep.scene_id)} · {ep.geodesic_distance:.1f} m</div></div></div>')


def write_review(episodes: list, out_dir: str | Path, n: int = 50, scene_roots: list[Path] | None = None,
                 body: str | None = None, maps: bool = True) -> dict[str, Any]:
    """Write the review page of the first ``n`` instructions of ``episodes`` into ``out_dir``;
    returns ``{"cards": ..., "episodes": ..., "path": ...}``."""
    from ...core.body import DEFAULT_BODY
    from ...core.io import replace_output_dir, write_text_atomic
    from ..base import load_scene_context
    from ..scene_roots import resolve_episode_scene
    from .lexicon import Lexicon

    chosen = []
    for ep in episodes:
        for k, instr in enumerate(ep.instructions):
            if len(chosen) < n:
                chosen.append((ep, k, instr))
    cards, contexts = [], {}
    out_dir = Path(out_dir)
    with replace_output_dir(out_dir, command="data review") as tmp:
        (tmp / "maps").mkdir()
        for c, (ep, k, instr) in enumerate(chosen):
            refs_all = (ep.info or {}).get("references")
            refs = refs_all[k] if refs_all is not None and k < len(refs_all) else None
            key = ep.scene_path or ep.scene_id
            if key not in contexts:
                path = resolve_episode_scene(ep, scene_roots or [])
                contexts[key] = load_scene_context(path, body or DEFAULT_BODY)
            ctx = contexts[key]
            objects = {int(o["instance_id"]): o for o in ctx.maps.scene_graph.objects()}
            map_file = None
            if maps:
                map_file = f"maps/{c:04d}.png"
                _draw_map(ctx, ep, refs, objects, tmp / map_file)
            lexicon = Lexicon({o["category"] for o in objects.values()},
                              {r["room_type"] for r in ctx.maps.scene_graph.rooms()})
            cards.append(_card(ep, k, instr, refs, objects, lexicon, map_file))
        legend = " ".join(f'<mark style="background:{c}">{need}</mark>' for need, c in NEED_COLOURS.items())
        page = (f"<!doctype html><html><head><meta charset='utf-8'><title>Instruction review</title>"
                f"<style>{_STYLE}</style></head><body><h1>Instruction review</h1>"
                f"<p>{len(cards)} instructions. References, coloured by what made them unique: {legend}. "
                f"Numbers match the map's markers.</p>{''.join(cards)}</body></html>\n")
        write_text_atomic(tmp / "index.html", page)
    return {"cards": len(cards), "episodes": len({ep.episode_id for ep, _, _ in chosen}),
            "path": str(out_dir / "index.html")}


def _draw_map(ctx, ep, refs, objects: dict, out: Path) -> None:
    from ...scenes.render_map import render_map_png

    path = np.asarray(ep.reference_path, dtype=float)[:, :2]
    markers = [{"xy": path[0], "color": "tab:green", "label": "start", "size": 60},
               {"xy": np.asarray(ep.goals[0].position, dtype=float)[:2], "color": "tab:red", "marker": "*",
                "label": "goal", "size": 110}]
    if refs is not None:
        for n, ref in enumerate(refs, 1):
            obj = objects.get(ref["instance_id"]) if ref.get("instance_id") is not None else None
            if obj is not None:
                markers.append({"xy": np.asarray(obj["position"], dtype=float)[:2], "color": "tab:purple",
                                "marker": f"${n}$", "label": None if n > 1 else "reference (number)", "size": 140})
    else:
        lms = [objects[i]["position"][:2] for i in (ep.info or {}).get("landmarks", []) if i in objects]
        if lms:
            markers.append({"xy": np.asarray(lms, dtype=float), "color": "tab:gray", "marker": "o",
                            "label": "landmarks near the path", "size": 40})
    render_map_png(ctx.desc, ctx.maps, out, paths=[{"xy": path, "color": "tab:blue", "label": "reference path"}],
                   markers=markers, title=ep.episode_id, dpi=70)


__all__ = ["NEED_COLOURS", "write_review"]
