"""Language statistics of a dataset's instructions (``vlnverse data stats DATASET``).

* ``vocabulary``: distinct lower-cased words (``[a-z']+``; digits and punctuation left out);
* ``trigrams_per_100``: distinct word 3-grams (within one instruction) per 100 instructions;
* ``mean_words``: mean instruction length in words;
* ``styles`` (when instructions of several styles are present): per style the count, vocabulary
  and ``own_trigram_share``, the share of its distinct 3-grams that no other style uses (how far
  the formal, natural and casual registers stay apart);
* ``references``: object references recorded by the version-2 generator (episode ``info``) and the
  share that needed an attribute or a relation (``needs``) or an ordinal to be unique, the share
  told apart from rivals in view in another room (``in_view_share``: ``seen_rivals``), and the
  doorway ordinals said (``doorways``: needed, ``ordinal``, or not, ``category``); ``null`` for
  datasets that do not record them (version 1);
* ``verifier``: attempts accepted and rejected by the route Verifier (``info["verifier"]``), the
  rejected share and the counts by reason; references dropped as not unique (``info["dropped"]``).

``max_instructions`` takes the first N instructions in file order (splits in ``SPLIT_ORDER``), so
two datasets are compared on the same count.
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Any, Iterable

_WORD = re.compile(r"[a-z']+")


def words(text: str) -> list[str]:
    """Lower-cased words of ``text``."""
    return _WORD.findall(text.lower())


def instruction_stats(episodes: Iterable, max_instructions: int | None = None) -> dict[str, Any]:
    """The statistics above over the episodes' instructions (see the module docstring)."""
    texts: list[str] = []
    styles: list[str] = []
    needs: Counter = Counter()
    doorways: Counter = Counter()
    in_view = 0
    rejected: Counter = Counter()
    dropped: Counter = Counter()
    accepted = 0
    recorded = False
    for ep in episodes:
        if max_instructions is not None and len(texts) >= max_instructions:
            break
        info = ep.info or {}
        room = None if max_instructions is None else max_instructions - len(texts)
        chosen = ep.instructions[:room] if room is not None else ep.instructions
        texts += [i.text for i in chosen]
        styles += [getattr(i, "style", None) or "" for i in chosen]
        if "references" in info:
            recorded = True
            for refs in info["references"][:len(chosen)]:
                needs.update(r.get("needs", "category") for r in refs if r.get("kind") != "doorway")
                in_view += sum(1 for r in refs if r.get("kind") != "doorway" and r.get("seen_rivals"))
                doorways.update(r.get("needs", "category") for r in refs if r.get("kind") == "doorway")
        if "verifier" in info:
            accepted += int(info["verifier"].get("accepted", 0))
            rejected.update({k: int(v) for k, v in info["verifier"].get("rejected", {}).items()})
        dropped.update({k: int(v) for k, v in (info.get("dropped") or {}).items()})
    tokens = [words(t) for t in texts]
    trigrams = {tuple(w[k:k + 3]) for w in tokens for k in range(len(w) - 2)}
    n = len(texts)
    total_refs = sum(needs.values())
    out: dict[str, Any] = {
        "instructions": n,
        "vocabulary": len({w for ws in tokens for w in ws}),
        "trigrams_per_100": round(len(trigrams) * 100.0 / n, 2) if n else 0.0,
        "mean_words": round(sum(map(len, tokens)) / n, 2) if n else 0.0,
        "references": None,
        "verifier": None,
    }
    by_style: dict[str, set] = {}
    for style, w in zip(styles, tokens):
        by_style.setdefault(style, set()).update(tuple(w[k:k + 3]) for k in range(len(w) - 2))
    if len(by_style) > 1:
        out["styles"] = {}
        for style, grams in sorted(by_style.items()):
            others = set().union(*(g for s, g in by_style.items() if s != style))
            vocab = {x for s, w in zip(styles, tokens) if s == style for x in w}
            out["styles"][style] = {"instructions": styles.count(style), "vocabulary": len(vocab),
                                    "own_trigram_share": round(len(grams - others) / len(grams), 4) if grams else 0.0}
    if recorded:
        out["references"] = {
            "count": total_refs, "by_need": dict(sorted(needs.items())),
            "attribute_or_relation_share": round((needs["attribute"] + needs["relation"]) / total_refs, 4)
            if total_refs else 0.0,
            "ordinal_share": round(needs["ordinal"] / total_refs, 4) if total_refs else 0.0,
            "in_view_share": round(in_view / total_refs, 4) if total_refs else 0.0,
            "doorways": dict(sorted(doorways.items()))}
    attempts = accepted + sum(rejected.values())
    if attempts or dropped:
        out["verifier"] = {"attempts": attempts, "accepted": accepted,
                           "rejected_share": round(sum(rejected.values()) / attempts, 4) if attempts else 0.0,
                           "rejected_by_reason": dict(sorted(rejected.items())),
                           "dropped_references": dict(sorted(dropped.items()))}
    return out


def format_stats(stats: dict[str, Any]) -> str:
    """A few readable lines for the terminal."""
    lines = [f"{stats['instructions']} instructions: vocabulary {stats['vocabulary']} words, "
             f"{stats['trigrams_per_100']} distinct word 3-grams per 100 instructions, "
             f"mean length {stats['mean_words']} words"]
    refs = stats.get("references")
    lines.append("references: not recorded in this dataset" if refs is None else
                 f"references: {refs['count']}, {refs['attribute_or_relation_share']:.1%} needed an attribute or "
                 f"relation, {refs['ordinal_share']:.1%} an ordinal ({refs['by_need']}), "
                 f"{refs.get('in_view_share', 0.0):.1%} had rivals in view in another room; doorway ordinals "
                 f"{refs.get('doorways') or 'none'}")
    for style, st in (stats.get("styles") or {}).items():
        lines.append(f"style {style}: {st['instructions']} instructions, vocabulary {st['vocabulary']}, "
                     f"{st['own_trigram_share']:.1%} of its 3-grams used by no other style")
    ver = stats.get("verifier")
    if ver is not None:
        lines.append(f"verifier: {ver['rejected_share']:.1%} of {ver['attempts']} attempts rejected "
                     f"{ver['rejected_by_reason'] or ''}; dropped references {ver['dropped_references'] or 'none'}")
    return "\n".join(lines)


__all__ = ["format_stats", "instruction_stats", "words"]
