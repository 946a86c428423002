"""``vlnverse results best``: which trained row, and which of its seeds, a benchmark's held-out split
picks from ``bench train`` results files (the checkpoint a project ships).

The row is the learned agent with the highest mean over seeds of ``metric`` on ``split`` under
``mode`` (ties: SPL, then nDTW, then name); within it, the seed with the highest per-seed value
(same ties, then the lowest seed). Selection reads one split only: report another (test) for the
chosen checkpoint. Beside the choice stand the ranking and the paired, home-clustered differences
of the first row with the second and with the best row of another policy, so a reader sees
whether the first place is separated at all.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.errors import ConfigError
from .compare import _check_format, _read_json, _require, aligned, compare_pair, rows_pair

#: the tie-breaks after the selection metric, in order
TIE_BREAKS = ("SPL", "nDTW")


def _learned_rows(path: Path, data: dict) -> list[tuple[dict, dict]]:
    """``(row, jobs)`` for each table row of ``data`` whose agent some job holds a checkpoint of."""
    jobs = _require(data, "jobs", path)
    with_checkpoints = {a for j in jobs.values() for a in (j.get("checkpoints") or {})}
    return [(row, jobs) for row in _require(data, "table", path) if row.get("agent") in with_checkpoints]


def _key(values: dict, metric: str) -> tuple:
    return tuple(float(values.get(m) if values.get(m) is not None else float("-inf")) for m in (metric, *TIE_BREAKS))


def best_checkpoint(paths: list[str | Path], *, split: str = "val_unseen", mode: str = "telhop", metric: str = "SR",
                    work: str | Path | None = None, seed: int = 0) -> dict[str, Any]:
    """The row and seed ``split`` picks from the ``bench train`` JSON files ``paths`` (module
    docstring), the checkpoint file of that seed (under the file's ``work_dir``, or ``work``),
    the ranking of every learned row, and the paired difference of the first two rows."""
    candidates: dict[str, dict] = {}
    for raw in paths:
        path = Path(raw)
        data = _read_json(path)
        _check_format(data, path)
        if "jobs" not in data:
            raise ConfigError("no 'jobs'", file=path, field="jobs", expected="a results file of 'vlnverse bench train --seeds'")
        folder = Path(work) if work is not None else Path(_require(data, "work_dir", path))
        for row, jobs in _learned_rows(path, data):
            if row.get("split") != split or row.get("mode") != mode:
                continue
            if row["agent"] in candidates:
                raise ConfigError(f"row '{row['agent']}' is also in {candidates[row['agent']]['source']}", file=path,
                                  field="table", expected="each learned row in one results file")
            candidates[row["agent"]] = {"row": row, "jobs": jobs, "work": folder, "source": str(path)}
    if not candidates:
        raise ConfigError(f"no learned row with checkpoints on split '{split}' under '{mode}'", file=", ".join(map(str, paths)),
                          field="table", expected="bench train results of learned rows evaluated on that split")
    for name, c in candidates.items():
        if metric not in c["row"].get("seeds_ci", {}):
            raise ConfigError(f"row '{name}' has no '{metric}'", file=c["source"], field="table[].seeds_ci",
                              expected=f"one of {sorted(c['row'].get('seeds_ci', {}))}")
    means = {name: {m: (c["row"]["seeds_ci"].get(m) or {}).get("mean") for m in (metric, *TIE_BREAKS)}
             for name, c in candidates.items()}
    order = sorted(candidates, key=lambda a: (tuple(-v for v in _key(means[a], metric)), a))
    best = candidates[order[0]]
    per_seed = {int(s): v for s, v in best["row"]["per_seed"].items()}
    chosen = max(per_seed, key=lambda s: (_key(per_seed[s], metric), -s))
    job_key, job = next((k, j) for k, j in sorted(best["jobs"].items())
                        if j.get("seed") == chosen and order[0] in (j.get("checkpoints") or {}))
    checkpoint = best["work"] / job["checkpoints"][order[0]]
    out = {"split": split, "mode": mode, "metric": metric, "tie_breaks": list(TIE_BREAKS),
           "ranking": [{"agent": a, "seeds": candidates[a]["row"].get("seeds"),
                        **{m: candidates[a]["row"]["seeds_ci"].get(m) for m in (metric, *TIE_BREAKS)},
                        "source": candidates[a]["source"]} for a in order],
           "best": {"agent": order[0], "seed": chosen, "job": job_key, "checkpoint": str(checkpoint),
                    "checkpoint_exists": checkpoint.is_file(),
                    "per_seed": {str(s): per_seed[s] for s in sorted(per_seed)}}}
    row_of = {a: next((j.get("row") for j in candidates[a]["jobs"].values() if a in (j.get("checkpoints") or {})), a)
              for a in order}
    other = next((a for a in order if row_of[a] != row_of[order[0]]), None)
    for field, b in (("first_two", order[1] if len(order) > 1 else None), ("best_other_row", other)):
        if b is not None:
            out[field] = _paired(order[0], candidates[order[0]]["row"], b, candidates[b]["row"], seed)
    return out


def _paired(a_label: str, a: dict, b_label: str, b: dict, seed: int) -> dict:
    """A - B on the same pooled episodes of the seeds (``compare_pair``), or why not."""
    if not rows_pair(a, b):
        return {"a": a_label, "b": b_label, "verdict": "not paired: other episodes or protocol"}
    return compare_pair(a_label, a["per_episode"], b_label, aligned(b["per_episode"], a["per_episode"]["ids"]), seed=seed)


def best_lines(result: dict) -> list[str]:
    """``best_checkpoint``'s choice as text: the ranking, the first two rows' paired difference,
    and the chosen seed's checkpoint."""
    metric = result["metric"]
    lines = [f"rows by {metric} on {result['split']} ({result['mode']}), mean ± sd over seeds "
             f"(ties: {', '.join(result['tie_breaks'])}):"]
    for r in result["ranking"]:
        c = r[metric]
        sd = "-" if c.get("sd") is None else f"{c['sd']:.3f}"
        lines.append(f"  {r['agent']:<24} {c['mean']:.3f} ± {sd}  seeds {r['seeds']}")
    for pair in (result.get(k) for k in ("first_two", "best_other_row")):
        if pair and metric in pair:
            d = pair[metric]
            lines.append(f"{pair['a']} - {pair['b']}: {metric} {d['mean']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}] "
                         f"(paired, by home): {pair['verdict']}")
        elif pair:
            lines.append(f"{pair['a']} - {pair['b']}: {pair['verdict']}")
    best = result["best"]
    seeds = ", ".join(f"s{s} {v[metric]:.3f}" for s, v in best["per_seed"].items())
    lines.append(f"best: {best['agent']} seed {best['seed']} ({seeds})")
    lines.append(f"checkpoint: {best['checkpoint']}" + ("" if best["checkpoint_exists"] else " (not on this machine)"))
    return lines
