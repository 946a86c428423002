"""A run's summary and table: episode records aggregated overall and per task type, with per-home
results, episode and clustered (by home) bootstrap intervals and the design (``core.stats``),
and the metrics table ``vlnverse eval`` prints.

:func:`summarize` is what ``summary.json`` holds (besides the run's protocol, model and timing,
which the eval command adds); training validation reads the same figures from it.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Iterable

from . import metrics as M
from .diagnostics import error_counts
from .generation import generation_summary
from .records import is_evaluated


#: version of the results files (``summary.json``, ``bench train`` JSON): 2 added per-home results,
#: clustered intervals, the design and the protocol; ``vlnverse results`` refuses older files
RESULTS_FORMAT = 2
#: metrics with an episode and a clustered (by home) bootstrap interval in every results file
INTERVAL_METRICS = ("SR", "SPL", "nDTW")


def home_of(record: dict) -> str:
    """The home (scene id) an episode record was evaluated in: the unit the clustered statistics resample."""
    return str(record.get("scene_id") or record.get("scene_path") or "?")


def design_block(records: list[dict], *, seed: int = 0) -> dict[str, Any]:
    """Per-home means (``per_home``: scene id → episodes and every metric's mean), for
    ``INTERVAL_METRICS`` the episode and the clustered bootstrap intervals (``intervals``), and
    the design: homes, episodes and the minimum detectable SR difference (``core.stats``). The
    records are taken in episode-id order, so the intervals do not depend on the order episodes
    finished in (serial, batched, parallel or resumed runs give the same figures)."""
    from ..core.stats import bootstrap_ci, clustered_bootstrap_ci, minimum_detectable_difference

    records = sorted(records, key=lambda r: str(r.get("episode_id")))
    by_home: dict[str, list[dict]] = {}
    for r in records:
        by_home.setdefault(home_of(r), []).append(r)
    per_home = {}
    for home in sorted(by_home):
        agg = M.aggregate([{k: v for k, v in r["metrics"].items() if k != "goals_reached"} for r in by_home[home]])
        per_home[home] = {"episodes": agg["episodes"], **{k: round(float(v), 4) for k, v in agg["means"].items()}}
    intervals, columns = {}, {}
    for name in INTERVAL_METRICS:
        kept = [r for r in records if M.applicable(r["metrics"].get(name))]
        values, homes = [float(r["metrics"][name]) for r in kept], [home_of(r) for r in kept]
        columns[name] = (values, homes)
        intervals[name] = {"episode": bootstrap_ci(values, seed=seed),
                           "clustered": clustered_bootstrap_ci(values, homes, seed=seed)}
    design = {"homes": len(by_home), "episodes": len(records),
              "mde_SR": minimum_detectable_difference(*columns["SR"]) if columns["SR"][0] else None}
    return {"per_home": per_home, "intervals": intervals, "design": design}


def design_line(block: dict) -> str:
    """One line: SR with its 95% intervals by home and by episode, and the design's MDE of SR."""
    iv, design = block["intervals"]["SR"], block["design"]
    if iv["episode"]["mean"] is None:
        return "SR: no evaluated episode"
    home = iv["clustered"]
    by_home = "undefined by home (1 home)" if home["lo"] is None else f"[{home['lo']:.3f}, {home['hi']:.3f}] by home"
    mde = "" if design["mde_SR"] is None else f"; smallest detectable SR difference {design['mde_SR']:.3f}"
    return (f"SR {iv['episode']['mean']:.3f}: 95% CI {by_home}, [{iv['episode']['lo']:.3f}, {iv['episode']['hi']:.3f}] "
            f"by episode ({design['homes']} homes, {design['episodes']} episodes{mde}; docs/statistics.md)")


def summarize(records: list[dict], *, run: dict[str, Any]) -> dict[str, Any]:
    """Aggregate per-episode records: overall and per task type, plus SR_n for ordered-goal tasks,
    each block with its per-home results, episode and clustered intervals and design
    (``design_block``, seeded by ``run["seed"]``). Not-evaluated episodes (``is_evaluated``) are
    left out of every metric and counted in ``not_evaluated`` (episodes, by reason); ``episodes``
    counts the evaluated ones."""
    def block(all_recs: list[dict]) -> dict[str, Any]:
        recs = [r for r in all_recs if is_evaluated(r)]
        skipped = Counter((r.get("not_evaluated") or {}).get("kind", "?") for r in all_recs if not is_evaluated(r))
        agg = M.aggregate([{k: v for k, v in r["metrics"].items() if k != "goals_reached"} for r in recs])
        agg.update(design_block(recs, seed=int(run.get("seed") or 0)))
        agg["not_evaluated"] = {"episodes": sum(skipped.values()), "by_reason": dict(sorted(skipped.items()))}
        agg["not_evaluated"]["by_component"] = not_evaluated_by_component(all_recs)
        if agg["not_evaluated"]["episodes"]:
            agg["partial"] = partial_bounds(agg["means"], len(recs), len(all_recs))
        agg["first_errors"] = error_counts(recs)  # step-level error analysis of the failed episodes
        agg["invalid_actions"] = int(sum(r["invalid_actions"] for r in recs))
        agg["terminations"] = dict(sorted(Counter(r["termination"] for r in recs).items()))
        ordered = [r["metrics"] for r in recs if "goals_reached" in r["metrics"]]
        if ordered:
            # ragged: an episode with 2 sub-goals does not count for SR_3; SR_all = task completion
            # (the episode's SR: all goals in order and a STOP near the last)
            agg["sr_n"] = M.sr_n([m["goals_reached"] for m in ordered],
                                 final_success=[float(m.get("SR") or 0.0) for m in ordered])
        generation = generation_summary(all_recs)  # agents logging model calls: errors by kind, re-prompts, tokens
        if generation is not None:
            agg["generation"] = generation
        return agg

    by_task: dict[str, list[dict]] = {}
    for r in records:
        by_task.setdefault(f"{r['task_type']}/{run['collision_mode']}", []).append(r)
    return {"format": RESULTS_FORMAT, "run": run, "overall": block(records),
            "by_task": {k: block(v) for k, v in sorted(by_task.items())}}


def not_evaluated_by_component(records: list[dict]) -> dict[str, dict[str, int]]:
    """Per model of the agent (``NotEvaluated.component``: navigator, captioner), the episodes of
    ``records`` it left not evaluated, by reason; ``assistant``: the steps whose assistant gave
    no answer (those episodes went on without guidance and are evaluated)."""
    out: dict[str, Counter] = {}
    for r in records:
        if not is_evaluated(r):
            why = r.get("not_evaluated") or {}
            out.setdefault(why.get("component", "navigator"), Counter())[why.get("kind", "?")] += 1
        for step in r.get("agent_outputs") or []:
            down = step.get("assistant", {}).get("unavailable") if isinstance(step, dict) and \
                isinstance(step.get("assistant"), dict) else None
            if isinstance(down, dict):
                out.setdefault("assistant", Counter())[down.get("kind", "?")] += 1
    return {k: dict(sorted(v.items())) for k, v in sorted(out.items())}


def partial_bounds(means: dict[str, Any], evaluated: int, total: int) -> dict[str, Any]:
    """A partial row (some episodes not evaluated): the success rates and SPLs of ``means`` (over
    the ``evaluated`` episodes) beside their bound over all ``total`` episodes, counting each
    missing one as a failure (0): ``{"evaluated", "total", "bounds": {metric: value}}``."""
    keys = [k for k, v in means.items() if v is not None and (k.endswith("SR") or k.endswith("SPL"))]
    return {"evaluated": evaluated, "total": total,
            "bounds": {k: round(float(means[k]) * evaluated / total, 6) for k in sorted(keys)} if total else {}}


TABLE_COLUMNS = ("TL", "NE", "SR", "OSR", "SPL", "nDTW", "CLS", "CR")
TABLE_PERCENT = ("SR", "OSR", "SPL", "nDTW", "CLS", "CR")
#: aggregated but left out of the stdout table (in summary.json and the report)
TABLE_HIDDEN = ("sDTW",)
#: task-specific columns in metres (the others are rates, shown in %)
TABLE_METRES = ("len_reach", "len_explore")


def print_table(rows: Iterable[tuple[tuple[str, ...], dict]], *, title: str = "vlnverse eval",
                label_headers: tuple[str, ...] = ("task", "agent", "mode")) -> None:
    """Print a metrics table (rich): one row per (label cells, aggregate block)."""
    from rich.console import Console
    from rich.table import Table

    rows = list(rows)
    # task-specific rates (SR_n, RD_SR, REV_SPL, coverage, RSR, Rid_SR ...) get columns of their own
    extras = sorted({k for _, agg in rows for k, v in agg["means"].items()
                     if k not in TABLE_COLUMNS and k not in TABLE_HIDDEN and v is not None})
    console = Console()
    if not console.is_terminal:  # piped output: do not squeeze the table to 80 columns
        console = Console(width=max(120, 48 + 9 * (len(TABLE_COLUMNS) + 2) + 15 * len(extras)))
    table = Table(title=title)
    for header in label_headers:
        table.add_column(header, no_wrap=True)
    table.add_column("eps", justify="right")
    for name in TABLE_COLUMNS:
        table.add_column(name + (" %" if name in TABLE_PERCENT else " m"), justify="right")
    for name in extras:
        table.add_column(name + (" m" if name in TABLE_METRES else " %"), justify="right")
    table.add_column("invalid", justify="right")
    table.add_column("not eval.", justify="right")
    partial = any(agg.get("partial") for _, agg in rows)
    if partial:
        table.add_column("SR all %", justify="right")  # missing episodes counted as failures
    notes = []
    for labels, agg in rows:
        means = agg["means"]
        cells = []
        for name in TABLE_COLUMNS:
            v = means.get(name)
            cells.append("-" if v is None else (f"{100 * v:.1f}" if name in TABLE_PERCENT else f"{v:.2f}"))
        note = partial_note(" / ".join(labels), agg)
        if note:
            cells[TABLE_COLUMNS.index("SR")] += "*"
            notes.append(note)
        cells += ["-" if means.get(name) is None else (f"{means[name]:.2f}" if name in TABLE_METRES
                                                       else f"{100 * means[name]:.1f}") for name in extras]
        bound = (agg.get("partial") or {}).get("bounds", {}).get("SR")
        table.add_row(*labels, str(agg["episodes"]), *cells, str(agg.get("invalid_actions", 0)),
                      str((agg.get("not_evaluated") or {}).get("episodes", 0)),
                      *([] if not partial else ["-" if bound is None else f"{100 * bound:.1f}"]))
    console.print(table)
    for note in notes:
        console.print(note, highlight=False, soft_wrap=True)


def partial_note(label: str, agg: dict) -> str | None:
    """The footnote of a flagged row (None: not flagged): a partial row's SR over the evaluated
    episodes, its bound with the missing ones as failures, and the reason per component
    (navigator, captioner, assistant); a complete row whose assistant was unavailable at some steps."""
    part, skipped = agg.get("partial"), agg.get("not_evaluated") or {}
    by_component = skipped.get("by_component") or {}
    if not part:
        return f"* {label}: all episodes evaluated; " + component_reasons(by_component) if by_component else None
    sr, bound = agg["means"].get("SR"), part["bounds"].get("SR")
    rates = ("SR n/a" if sr is None else f"SR {100 * sr:.1f}% over the {part['evaluated']} evaluated") + \
        ("" if bound is None else f", {100 * bound:.1f}% counting the {part['total'] - part['evaluated']} missing as failures")
    return f"* {label}: partial, {part['evaluated']} of {part['total']} episodes evaluated; {rates}; " + \
        component_reasons(by_component or {"navigator": skipped.get("by_reason", {})})


def component_reasons(by_component: dict[str, dict[str, int]]) -> str:
    """``navigator gave no answer (2 server_error); assistant unavailable at 3 steps (3 timeout) ...``."""
    parts = []
    for comp, kinds in by_component.items():
        why = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items(), key=lambda kv: -kv[1]))
        parts.append(f"the assistant was unavailable at {sum(kinds.values())} step(s) ({why}; those episodes went on "
                     "without guidance)" if comp == "assistant" else
                     f"the {comp} model gave no answer in {sum(kinds.values())} episode(s) ({why})")
    return "; ".join(parts)
