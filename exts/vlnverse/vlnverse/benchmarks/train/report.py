"""``bench train``'s tables and figures: the table of a single run and the table over seeds of
``--seeds`` (``aggregate``), paired comparisons between rows, their text lines and PNGs."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import vlnverse.benchmarks.train.recipe as R

def pairwise_comparisons(table: list[dict], seed: int = 0) -> list[dict]:
    """Every pair of rows on the same task, split, collision mode, protocol and episodes (table
    order: A before B; B's episodes aligned to A's by id): the paired SR and SPL differences A - B with clustered intervals and the
    probability of improvement, and the verdict "A > B" (or "B > A") only when the SR interval
    excludes 0, else "not separated" (``results.compare.compare_pair``)."""
    from vlnverse.results.compare import aligned, compare_pair, rows_pair

    groups: dict[tuple, list[dict]] = {}
    for row in table:
        if row.get("per_episode"):
            groups.setdefault((row.get("task", "fine_grained"), row["split"], row["mode"]), []).append(row)
    return [{"task": task, "split": split, "mode": mode,
             **compare_pair(a["agent"], a["per_episode"], b["agent"], aligned(b["per_episode"], a["per_episode"]["ids"]),
                            seed=seed)}
            for (task, split, mode), rows in groups.items()
            for i, a in enumerate(rows) for b in rows[i + 1:]
            if rows_pair(a, b)]  # same episodes and protocol (body, success radius ...)


def language_drops(table: list[dict], seed: int = 0) -> list[dict]:
    """Per agent and collision mode with both rows, the drop of ``--language v2-split``: val_unseen
    minus val_unseen_language (``tasks.episode.LANGUAGE_SPLIT``) on the same paths, paired by
    episode (a language episode's id is its val_unseen twin's with ``LANGUAGE_TWIN_SUFFIX``,
    ``s<seed>/`` prefixes kept) and clustered by home (``results.compare.compare_pair``: SR and SPL differences, their
    intervals, the probability of improvement, "val_unseen > val_unseen_language" only when the SR
    interval excludes 0), with each split's mean SR."""
    from vlnverse.results.compare import aligned, compare_pair

    from vlnverse.tasks.episode import LANGUAGE_SPLIT, LANGUAGE_TWIN_SUFFIX as suffix

    rows = {(r["agent"], r["split"], r["mode"]): r for r in table
            if r.get("per_episode") and "task" not in r and r["split"] in ("val_unseen", LANGUAGE_SPLIT)}
    out = []
    for (agent, split, mode), held in rows.items():
        shifted = rows.get((agent, LANGUAGE_SPLIT, mode))
        if split != "val_unseen" or shifted is None:
            continue
        ids = [str(i) for i in shifted["per_episode"]["ids"]]
        twins = dict(shifted["per_episode"], ids=[i[:-len(suffix)] for i in ids])
        if not all(i.endswith(suffix) for i in ids) or sorted(twins["ids"]) != sorted(map(str, held["per_episode"]["ids"])):
            continue  # not the same paths: no paired drop
        got = compare_pair("val_unseen", held["per_episode"], LANGUAGE_SPLIT, aligned(twins, held["per_episode"]["ids"]),
                           seed=seed)
        out.append({"agent": agent, "mode": mode, "episodes": held["episodes"],
                    "homes": len(set(held["per_episode"]["homes"])),
                    "SR_val_unseen": held["SR"]["mean"], f"SR_{LANGUAGE_SPLIT}": shifted["SR"]["mean"], **got})
    return out


def language_drop_lines(drops: list[dict]) -> list[str]:
    """The language drops as aligned text: per agent and mode the episodes, homes, SR on each split
    and the paired SR drop with its clustered 95% interval, P(val_unseen > language) and the verdict."""
    if not drops:
        return []
    width = max([18] + [len(d["agent"]) for d in drops])

    def cell(d: dict) -> str:
        ci = "undefined" if d["lo"] is None else f"[{d['lo']:+.3f}, {d['hi']:+.3f}]"
        return f"{d['mean']:+.3f} {ci:<16} P {d['prob_improvement']:.2f}"

    lines = [f"{'agent':<{width}} {'mode':<7} {'n':>4} {'homes':>5}  {'SR unseen':>9} {'SR lang':>8}  "
             f"{'SR drop (unseen - language) [home CI]':<38}  verdict"]
    for d in drops:
        lines.append(f"{d['agent']:<{width}} {d['mode']:<7} {d['episodes']:>4} {d['homes']:>5}  "
                     f"{d['SR_val_unseen']:>9.3f} {d['SR_val_unseen_language']:>8.3f}  {cell(d['SR']):<38}  {d['verdict']}")
    return lines


def split_design(table: list[dict]) -> dict:
    """Per split (and task), the homes and episodes its rows were evaluated on (the first row's design)."""
    out: dict = {}
    for row in table:
        key = row["split"] if "task" not in row else f"{row['task']}/{row['split']}"
        if key not in out and row.get("design"):
            out[key] = {"homes": row["design"]["homes"], "episodes": row["design"]["episodes"]}
    return out


def table_lines(table: list[dict]) -> list[str]:
    """The table as aligned text lines: per row its episodes, homes and training seeds, and per
    metric the mean with the episode bootstrap 95% CI and, after it, the clustered (by home) one
    ("-" where a row has none, "undefined" with one home); with a multi-task row, a task column
    after the agent's (rows without ``task`` are fine-grained)."""
    def ci(c: dict | None) -> str:
        if not c or c.get("mean") is None:
            return "-"
        return "undefined" if c["lo"] is None else f"[{c['lo']:.3f}, {c['hi']:.3f}]"

    def cell(r: dict, m: str) -> str:
        c = r[m]
        return "-" if c["mean"] is None else f"{c['mean']:.3f} {ci(c)} {ci((r.get('clustered') or {}).get(m))}"

    width = max([18] + [len(r["agent"]) for r in table])
    split_width = max([10] + [len(r["split"]) for r in table])
    tasks = any("task" in r for r in table)
    task_width = max([16] + [len(r.get("task", "")) for r in table])

    def head(agent: str, task: str) -> str:
        return f"{agent:<{width}} " + (f"{task:<{task_width}} " if tasks else "")

    lines = [head("agent", "task") + f"{'split':<{split_width}} {'mode':<7} {'n':>4} {'homes':>5} {'seeds':>5}  "
             + "  ".join(f"{m + ' [episode CI] [home CI]':<37}" for m in R.METRICS)]
    for r in table:
        homes = (r.get("design") or {}).get("homes", "-")
        lines.append(head(r["agent"], r.get("task", "fine_grained")) + f"{r['split']:<{split_width}} {r['mode']:<7} "
                     f"{r['episodes']:>4} {homes:>5} {r.get('seeds', '-'):>5}  "
                     + "  ".join(f"{cell(r, m):<37}" for m in R.METRICS))
    return lines


def plot_curve(curves: dict, table: list[dict], path: Path, title: str = "") -> None:
    """PNG: per row IL loss, accuracy and val_seen nDTW per validation; SR with its CI per agent
    and split (Tel-Hop); the table."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(16, 10))
    grid = fig.add_gridspec(2, 3, height_ratios=[1, 1.1])
    ax_loss, ax_acc, ax_sr = (fig.add_subplot(grid[0, i]) for i in range(3))
    ax_tab = fig.add_subplot(grid[1, :])
    for name, curve in curves.items():
        ep = [e["epoch"] for e in curve["il_epochs"]]
        ax_loss.plot(ep, [e["loss"] for e in curve["il_epochs"]], label=name)
        line, = ax_acc.plot(ep, [e["accuracy"] for e in curve["il_epochs"]], label=f"{name} train accuracy")
        if curve["validation"]:
            ax_acc.plot([v["after_epoch"] for v in curve["validation"]], [v.get("nDTW", 0) for v in curve["validation"]],
                        "o--", color=line.get_color(), label=f"{name} val_seen nDTW (selection)")
    ax_loss.set(title="IL training loss (the policy's own objective)", xlabel="epoch")
    ax_loss.legend()
    ax_acc.set(title="IL accuracy (RDP: stop decision); val_seen nDTW", xlabel="epoch", ylim=(0, 1))
    ax_acc.legend(fontsize=7)
    rows = [r for r in table if r["mode"] == "telhop" and "task" not in r]  # fine-grained
    agents = list(dict.fromkeys(r["agent"] for r in rows))
    splits = list(dict.fromkeys(r["split"] for r in rows))
    width = 0.8 / max(1, len(splits))
    for i, split in enumerate(splits):
        xs, ys, errs = [], [], [[], []]
        for j, agent in enumerate(agents):
            r = next((r for r in rows if r["agent"] == agent and r["split"] == split), None)
            if r is None or r["SR"]["mean"] is None:
                continue
            ci = (r.get("clustered") or {}).get("SR") or r["SR"]  # by home where the row has it
            lo, hi = (ci["lo"], ci["hi"]) if ci["lo"] is not None else (0.0, 1.0)  # one home: undefined
            xs.append(j + i * width)
            ys.append(r["SR"]["mean"])
            errs[0].append(max(0.0, r["SR"]["mean"] - lo))
            errs[1].append(max(0.0, hi - r["SR"]["mean"]))
        ax_sr.bar(xs, ys, width, yerr=errs, capsize=2, label=split)
    ax_sr.set_xticks([j + 0.4 - width / 2 for j in range(len(agents))], agents, rotation=30, fontsize=7)
    ax_sr.set(title="SR with 95% CI by home (homes, then episodes; Tel-Hop)", ylim=(0, 1))
    ax_sr.legend()
    ax_tab.axis("off")
    ax_tab.text(0, 1, "\n".join(table_lines(table)), family="monospace", fontsize=7, va="top")
    save_figure(fig, path, title)


def save_figure(fig: Any, path: Path, title: str = "") -> None:
    """``fig`` (with ``title`` above it) written to ``path`` as a PNG through a temporary file, then closed."""
    import matplotlib.pyplot as plt

    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp, dpi=90)
    plt.close(fig)
    os.replace(tmp, path)


def aggregate(jobs: dict, *, seed: int = 0) -> list[dict]:
    """The table over seeds: per agent, split and mode of the done jobs' table rows (``jobs``:
    ``{key: result}``) a results-format-2 row of the seeds' episodes pooled (episode ids
    ``s<seed>/<id>``; episode and clustered intervals, per-home results and design:
    ``run.summary.design_block``; ``per_episode`` for paired comparisons), with the seeds, their
    per-seed means and ``seeds_ci``: per metric ``core.stats.seeds_ci`` (mean and sd over the
    seeds' means, an interval resampling seeds, then homes, then episodes)."""
    from vlnverse.core.stats import seeds_ci
    from vlnverse.run.summary import design_block

    groups: dict[tuple, list] = {}
    for result in jobs.values():
        for row in result.get("table", []):
            groups.setdefault((row["agent"], row["split"], row["mode"]), []).append((result["seed"], row))
    out = []
    for (agent, split, mode), runs in groups.items():
        runs.sort(key=lambda r: r[0])
        records = [{"episode_id": f"s{s}/{i}", "scene_id": h, "metrics": {m: r["per_episode"][m][k] for m in R.METRICS}}
                   for s, r in runs for k, (i, h) in enumerate(zip(r["per_episode"]["ids"], r["per_episode"]["homes"]))]
        block = design_block(records, seed=seed)
        out.append({"agent": agent, "split": split, "mode": mode, "episodes": len(records), "seeds": len(runs),
                    "seed_list": [s for s, _ in runs], "per_seed": {str(s): {m: r[m]["mean"] for m in R.METRICS}
                                                                   for s, r in runs},
                    "seeds_ci": {m: seeds_ci([(r["per_episode"][m], r["per_episode"]["homes"]) for _, r in runs],
                                             seed=seed, samples=R.BOOTSTRAP_SAMPLES) for m in R.METRICS},
                    **{m: block["intervals"][m]["episode"] for m in R.METRICS},
                    "clustered": {m: block["intervals"][m]["clustered"] for m in R.METRICS},
                    "per_home": block["per_home"], "design": block["design"], "protocol": runs[0][1].get("protocol"),
                    "per_episode": {"ids": [r["episode_id"] for r in records], "homes": [r["scene_id"] for r in records],
                                    **{m: [r["metrics"][m] for r in records] for m in R.METRICS},
                                    **({"first_error": [e for _, r in runs for e in r["per_episode"]["first_error"]]}
                                       if all("first_error" in r["per_episode"] for _, r in runs) else {})}})
    return sorted(out, key=lambda r: (_split_rank(r["split"]), r["mode"], _agent_rank(r["agent"]), r["agent"]))


def _split_rank(split: str) -> float:
    """Table order: ``recipe.SPLITS``'s, val_unseen_language right after val_unseen, then any other."""
    from vlnverse.tasks.episode import LANGUAGE_SPLIT

    if split == LANGUAGE_SPLIT:
        return R.SPLITS.index("val_unseen") + 0.5
    return R.SPLITS.index(split) if split in R.SPLITS else len(R.SPLITS)


def _agent_rank(agent: str) -> int:
    """Table order: random, forward, then each row's IL and IL + DAgger agents in ``recipe.ROWS`` order."""
    names = ["random", "forward"] + [f"{r.name}_{s}" for r in R.ROWS for s in ("il", "il_dagger")]
    return names.index(agent) if agent in names else len(names)


def aggregate_lines(rows: list[dict]) -> list[str]:
    """The table over seeds as aligned text: per agent, split and mode the seeds, the episodes (all
    seeds') and homes, and per metric mean ± sd over seeds [95% interval over seeds, homes, episodes]."""
    def cell(c: dict) -> str:
        if c["mean"] is None:
            return "-"
        sd = "-" if c["sd"] is None else f"{c['sd']:.3f}"
        ci = "[-]" if c["lo"] is None else f"[{c['lo']:.3f}, {c['hi']:.3f}]"
        return f"{c['mean']:.3f} ± {sd} {ci}"

    width = max([18] + [len(r["agent"]) for r in rows])
    split_width = max([10] + [len(r["split"]) for r in rows])
    lines = [f"{'agent':<{width}} {'split':<{split_width}} {'mode':<7} {'seeds':>5} {'n':>5} {'homes':>5}  "
             + "  ".join(f"{m + ' mean ± sd [seeds x homes x episodes]':<40}" for m in R.METRICS)]
    for r in rows:
        lines.append(f"{r['agent']:<{width}} {r['split']:<{split_width}} {r['mode']:<7} {r['seeds']:>5} {r['episodes']:>5} "
                     f"{r['design']['homes']:>5}  " + "  ".join(f"{cell(r['seeds_ci'][m]):<40}" for m in R.METRICS))
    return lines


def plot_aggregate(rows: list[dict], path: Path, title: str = "") -> None:
    """PNG: SR per agent on val_unseen and test (Tel-Hop): the mean over seeds with its interval, each seed a dot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    splits = [s for s in ("val_unseen", "test") if any(r["split"] == s for r in rows)]
    fig, axes = plt.subplots(1, max(1, len(splits)), figsize=(7 * max(1, len(splits)), 4.5), squeeze=False)
    for ax, split in zip(axes[0], splits):
        these = [r for r in rows if r["split"] == split and r["mode"] == "telhop"]
        for i, r in enumerate(these):
            c = r["seeds_ci"]["SR"]
            if c["mean"] is None:
                continue
            err = [[c["mean"] - c["lo"]], [c["hi"] - c["mean"]]] if c["lo"] is not None else None
            ax.bar(i, c["mean"], 0.6, yerr=err, capsize=3, color="#9ecae1")
            ax.plot([i] * len(r["per_seed"]), [v["SR"] for v in r["per_seed"].values()], "o", color="#08519c", ms=4)
        ax.set_xticks(range(len(these)), [r["agent"] for r in these], rotation=30, fontsize=7)
        ax.set_title(f"{split}: SR over seeds (bar: mean, 95% interval over seeds, homes, episodes; dots: seeds)",
                     fontsize=8)
        ax.set_ylim(0, 1)
    save_figure(fig, path, title)


def best_agent(rows: list[dict]) -> str | None:
    """The learned agent with the best val_seen Tel-Hop SR over seeds (ties: nDTW) of the table
    over seeds (``aggregate``): the one the single run also evaluates under Strict."""
    learned = [r for r in rows if r["split"] == "val_seen" and r["mode"] == "telhop"
               and r["agent"] not in ("random", "forward") and r["seeds_ci"]["SR"]["mean"] is not None]
    if not learned:
        return None
    return max(learned, key=lambda r: (r["seeds_ci"]["SR"]["mean"], r["seeds_ci"]["nDTW"]["mean"] or 0.0))["agent"]
