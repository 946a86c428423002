"""The paper's claims judged on our results: each claim is a paired comparison of two rows.

A claim (``paper_tables.json`` → ``claims``) names the row that should be better (``a``), the row
it should beat (``b``), the task, the collision mode and the splits to judge it on. On each split
where both rows were run on the same episodes, the verdict comes from the paired SR difference
A - B with its interval clustered by home (``compare.compare_pair``, ``core.stats.paired_difference``):

- *reproduced*: the interval lies above 0 (A > B);
- *refuted*: it lies below 0 (B > A);
- *not separated*: it contains 0;
- *not run*: a row is missing from the results read.

Beside each verdict, what it is made of (``outcomes``): the episodes only A solved, only B, both
and neither, and each row's failed episodes by their first error (``run.diagnostics``: stopped
short, never stopped, left the route ...), so a refuted or unseparated claim says how the rows fail;
and what the design can tell (``power``, ``core.stats.paired_power``): the smallest difference it
detects, and the held-out homes it would need to detect the paper's own gap (``paper_gap``), so
"not separated" reads as "too small a design for the paper's gap" or "smaller than the paper's".
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from ..core.stats import paired_power
from .compare import Run, check_comparable, columns, common_episodes, compare_pair

VERDICTS = ("reproduced", "refuted", "not separated", "not run")
PAPER_TABLES = Path(__file__).with_name("paper_tables.json")


def paper_tables() -> dict:
    """The paper's published figures this toolkit compares against (``paper_tables.json``)."""
    return json.loads(PAPER_TABLES.read_text(encoding="utf-8"))


def paper_row(label: str, task: str, split: str | None) -> tuple[str, dict] | None:
    """(citation, the paper's metrics) for a run whose label starts with a policy the paper reports
    (``cma_il_dagger`` → CMA) on ``task`` and ``split``; None when the paper has no such figure."""
    policy = label.split(":")[-1].split("_")[0].lower()
    for table in paper_tables()["tables"]:
        row = table["rows"].get(policy)
        if table["task"] == task and row is not None and split in row:
            return f"{table['table']}: {row['name']}", row[split]
    return None


def paper_gap(a: str, b: str, task: str, split: str) -> float | None:
    """The paper's SR difference A - B as a fraction (its tables print percent) when it reports both
    rows' policies, different ones, on ``task`` and ``split``; None otherwise."""
    found = [paper_row(label, task, split) for label in (a, b)]
    if any(f is None or "SR" not in f[1] for f in found) or found[0][0] == found[1][0]:
        return None
    return round((found[0][1]["SR"] - found[1][1]["SR"]) / 100.0, 4)


def _label(run: Run) -> str:
    """A run's row name without the file prefix ``load_runs`` adds when several files are read."""
    return run.label.split(":")[-1]


def _source(run: Run) -> str:
    """The file prefix of a run's label (``stem`` of ``stem:row``), "" when it has none."""
    return run.label.rsplit(":", 1)[0] if ":" in run.label else ""


def judge_claims(claims: list[dict], runs: list[Run], *, seed: int = 0) -> list[dict]:
    """Every claim on each of its splits: ``{claim fields..., "split", "source", "verdict", "SR":
    paired difference or None, "missing": [row names not found]}``, in the claims' order. A claim
    pairs rows under the same protocol only: with runs under several (e.g. files of two instruction
    languages, ``results page --across``) it is judged under each, ``source`` naming the files of
    its rows there ("" when there is one)."""
    out = []
    for claim in claims:
        for split in claim["splits"]:
            by_protocol: dict[str, dict[str, Run]] = {}
            for run in runs:
                if (run.task, run.split, run.mode) == (claim["task"], split, claim["mode"]) and _label(run) in (claim["a"], claim["b"]):
                    by_protocol.setdefault(json.dumps(run.protocol, sort_keys=True), {}).setdefault(_label(run), run)
            groups = list(by_protocol.values()) or [{}]
            for found in groups:
                source = ", ".join(dict.fromkeys(_source(r) for r in found.values() if _source(r))) if len(groups) > 1 else ""
                out.append(_judged(claim, split, source, found, seed))
    return out


def _judged(claim: dict, split: str, source: str, found: dict[str, Run], seed: int) -> dict:
    """One claim on one split under one protocol: ``found`` its rows there by name."""
    missing = [name for name in (claim["a"], claim["b"]) if name not in found]
    entry: dict[str, Any] = {**{k: claim[k] for k in ("id", "claim", "paper", "a", "b")}, "split": split,
                             "source": source, "missing": missing, "SR": None, "SPL": None}
    if missing:
        entry["verdict"] = "not run"
        return entry
    check_comparable(found[claim["a"]], found[claim["b"]])
    a, b = common_episodes(found[claim["a"]], found[claim["b"]])
    pair = compare_pair(claim["a"], columns(a), claim["b"], columns(b), seed=seed)
    gap = paper_gap(claim["a"], claim["b"], claim["task"], split)
    entry.update(SR=pair["SR"], SPL=pair["SPL"], seeds={"a": a.seeds, "b": b.seeds}, outcomes=outcomes(a, b),
                 power=_power(a, b, gap, pair["SR"]),
                 verdict="not separated" if pair["verdict"] == "not separated"
                 else "reproduced" if pair["SR"]["mean"] > 0 else "refuted")
    return entry


def _power(a: Run, b: Run, gap: float | None, sr: dict) -> dict | None:
    """``paired_power`` of A - B's SR, with ``gap_excluded``: the paper's gap lies outside the
    pair's home interval (the data rule out a difference that large, or that small)."""
    power = paired_power(a.values["SR"], b.values["SR"], a.homes, gap=gap)
    if power is not None and gap is not None and sr.get("lo") is not None:
        power["gap_excluded"] = not sr["lo"] <= gap <= sr["hi"]
    return power


def outcomes(a: Run, b: Run) -> dict:
    """Two runs on the same episodes (id order), episode by episode: how many only A solved
    (``only_a``), only B, both and neither, and under ``first_errors`` each run's failed episodes
    counted by their first error's category (most frequent first; None when a run's results carry
    no first errors)."""
    solved = Counter((x >= 1.0, y >= 1.0) for x, y in zip(a.values["SR"], b.values["SR"]))
    out: dict[str, Any] = {"only_a": solved[(True, False)], "only_b": solved[(False, True)],
                           "both": solved[(True, True)], "neither": solved[(False, False)], "first_errors": None}
    if a.failures is not None and b.failures is not None:
        def counts(failures: list) -> dict[str, int]:
            got = Counter(f for f in failures if f is not None)
            return {c: got[c] for c in sorted(got, key=lambda c: (-got[c], c))}

        out["first_errors"] = {"a": counts(a.failures), "b": counts(b.failures)}
    return out


def outcome_lines(judged: list[dict]) -> list[str]:
    """The page's markdown table of what each judged claim's verdict is made of (``outcomes``)."""
    def errors(c: dict) -> str:
        return ", ".join(f"{k} {v}" for k, v in c.items()) or "none"

    lines = ["| A - B | split | only A solved | only B solved | both | neither | A's failures by first error | "
             "B's failures by first error |", "|---|---|---|---|---|---|---|---|"]
    for c in judged:
        o = c.get("outcomes")
        if not o:
            continue
        fe = o["first_errors"]
        lines.append(f"| {_pair_name(c)} | {c['split']} | {o['only_a']} | {o['only_b']} | {o['both']} | "
                     f"{o['neither']} | {errors(fe['a']) if fe else '-'} | {errors(fe['b']) if fe else '-'} |")
    return lines


def _pair_name(c: dict) -> str:
    """"A - B" of a judged claim, with its source file's stem when the page read several."""
    return f"{c['a']} - {c['b']}" + (f" ({c['source']})" if c.get("source") else "")


def claim_lines(judged: list[dict]) -> list[str]:
    """The page's markdown table of the judged claims, then one line naming the claims not run here
    (a row missing from the sources), each with its splits and missing rows."""
    def ci(d: dict) -> str:
        return "undefined (1 home)" if d["lo"] is None else f"[{d['lo']:+.3f}, {d['hi']:+.3f}]"

    def power(p: dict | None) -> list[str]:
        if not p:
            return ["-", "-"]
        needed = "-" if p["homes_needed"] is None else f"{100 * p['gap']:+.2f} points: {p['homes_needed']} homes"
        if p.get("gap_excluded"):
            needed += ", outside the CI"
        return [f"{p['detectable']:.3f}", needed]

    lines = ["| claim | paper | A - B | split | SR difference | home CI | P(A > B) | detectable (80% power) | "
             "paper's gap: held-out homes to detect it | verdict |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    not_run: dict[tuple, list[str]] = {}
    for c in judged:
        if c["verdict"] == "not run":
            not_run.setdefault((c["claim"], c.get("source") or "", tuple(c["missing"])), []).append(c["split"])
            continue
        sr = c["SR"]
        cells = [f"{sr['mean']:+.3f}", ci(sr), f"{sr['prob_improvement']:.2f}"] + power(c.get("power"))
        lines.append(f"| {c['claim']} | {c['paper']} | {_pair_name(c)} | {c['split']} | " + " | ".join(cells)
                     + f" | **{c['verdict']}** |")
    if not_run:
        lines += ["", "**Not run here** (a row missing from these sources): " + "; ".join(
            f"{claim}{f' ({source})' if source else ''} on {', '.join(splits)} ({', '.join(missing)} missing)"
            for (claim, source, missing), splits in not_run.items()) + "."]
    return lines
