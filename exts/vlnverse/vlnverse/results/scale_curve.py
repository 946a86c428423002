"""The training-scale curve of a results page: the same rows trained on different numbers of
homes (one ``bench train --seeds --train-homes N`` results file per N, every other setting the
same) on the same held-out episodes.

Per row, split and mode: SR against the number of training homes (the mean over training seeds
with its seeds interval, ``core.stats.seeds_ci``; one seed: the home interval), and each step to
the next size as a paired difference on the same episodes, clustered by home (``compare_pair``:
"A > B" only when the interval excludes 0). A flat step is "not separated", not "no gain".
"""
from __future__ import annotations

from pathlib import Path

from .compare import Run, columns, common_episodes, compare_pair, interval_cell

#: work identity fields that may differ between the sources of one curve
VARYING = ("config",)


def training_homes(sources: list[tuple[Path, dict]]) -> tuple[dict[Path, int], str | None]:
    """Each ``bench train --seeds`` source's training homes (``work.settings.homes``) when the
    sources differ in it and in nothing else of their work identity (``{}`` otherwise), and the
    reason when they differ in more (None when there is no curve to draw or it is drawn)."""
    works = {path.resolve(): data["work"] for path, data in sources
             if isinstance(data.get("work"), dict) and isinstance(data["work"].get("settings"), dict)}
    homes = {p: w["settings"].get("homes") for p, w in works.items()}
    if len(set(homes.values())) < 2:
        return {}, None
    rest = {p: {**{k: v for k, v in w.items() if k not in VARYING and k != "settings"},
                **{f"settings.{k}": v for k, v in w["settings"].items() if k != "homes"}} for p, w in works.items()}
    first = next(iter(rest.values()))
    for p, r in rest.items():
        differ = sorted(k for k in set(first) | set(r) if first.get(k) != r.get(k))
        if differ:
            return {}, (f"no training-scale curve: the sources differ in {', '.join(differ)} besides the training "
                        f"homes ({p.name})")
    return {p: int(h) for p, h in homes.items()}, None


def _point(homes: int, run: Run) -> dict:
    """One size's SR: the mean over seeds and its seeds interval (else the home interval)."""
    ci = ((run.extra or {}).get("seeds_ci") or {}).get("SR") or run.intervals.get("SR", {}).get("clustered") or {}
    return {"homes": homes, "label": run.label, "seeds": run.seeds, "episodes": len(run.ids),
            "SR": ci.get("mean"), "lo": ci.get("lo"), "hi": ci.get("hi")}


def scale_curves(runs: list[Run], homes_of: dict[Path, int], *, seed: int = 0) -> list[dict]:
    """Per row (agent), split and mode present at two sizes or more: ``points`` by size and
    ``steps``, each next size - this one, paired on the episodes both have."""
    by_key: dict[tuple, dict[int, Run]] = {}
    for run in runs:
        homes = homes_of.get(Path(run.source).resolve())
        if homes is not None and run.bench:
            key = (str((run.extra or {}).get("agent") or run.label), run.split, run.mode)
            by_key.setdefault(key, {})[homes] = run
    curves = []
    for (agent, split, mode), sized in by_key.items():
        if len(sized) < 2:
            continue
        sizes = sorted(sized)
        steps = []
        for small, big in zip(sizes, sizes[1:]):
            x, y = common_episodes(sized[big], sized[small])
            steps.append({"from": small, "to": big, "episodes": len(x.ids),
                          **compare_pair(f"{big} homes", columns(x), f"{small} homes", columns(y), seed=seed)})
        curves.append({"agent": agent, "split": split, "mode": mode,
                       "points": [_point(h, sized[h]) for h in sizes], "steps": steps})
    return curves


def scale_lines(curves: list[dict], plot: str | None) -> list[str]:
    """The page section: each curve's SR by size, then its steps as paired differences."""
    lines = ["## Training homes (scale curve)", "",
             "The same rows trained on more homes (one `bench train --train-homes N` results file per size, every "
             "other setting the same), on the same held-out episodes. SR is the mean over training seeds with its "
             "seeds interval; a step is the next size - this one, paired by episode and clustered by home.", "",
             "| row | split | mode | homes | seeds | episodes | SR | SR CI |", "|---|---|---|---|---|---|---|---|"]
    for c in curves:
        for p in c["points"]:
            sr = "-" if p["SR"] is None else f"{p['SR']:.3f}"
            lines.append(f"| {c['agent']} | {c['split']} | {c['mode']} | {p['homes']} | {p['seeds'] or '-'} | "
                         f"{p['episodes']} | {sr} | {interval_cell({'mean': p['SR'], 'lo': p['lo'], 'hi': p['hi']})} |")
    lines += ["", "| row | split | mode | step | episodes | SR difference | home CI | P(more > fewer) | verdict |",
              "|---|---|---|---|---|---|---|---|---|"]
    for c in curves:
        for s in c["steps"]:
            sr = s["SR"]
            lines.append(f"| {c['agent']} | {c['split']} | {c['mode']} | {s['from']} → {s['to']} | {s['episodes']} | "
                         f"{sr['mean']:+.3f} | {interval_cell(sr)} | {sr['prob_improvement']:.2f} | "
                         f"{s['verdict']} |")
    if plot:
        lines += ["", f"![SR by training homes]({plot})"]
    return lines + [""]


def plot_scale_curves(curves: list[dict], path: Path) -> None:
    """PNG: per split and mode, SR (with its interval) against training homes, one line per row."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..core.io import atomic_path

    panels = sorted({(c["split"] or "-", c["mode"]) for c in curves})
    fig, axes = plt.subplots(1, len(panels), squeeze=False, figsize=(4.5 * len(panels), 3.6))
    for ax, (split, mode) in zip(axes[0], panels):
        sizes = set()
        for c in (c for c in curves if (c["split"] or "-", c["mode"]) == (split, mode)):
            pts = [p for p in c["points"] if p["SR"] is not None]
            xs, ys = [p["homes"] for p in pts], [p["SR"] for p in pts]
            err = [[y - (p["lo"] if p["lo"] is not None else y) for y, p in zip(ys, pts)],
                   [(p["hi"] if p["hi"] is not None else y) - y for y, p in zip(ys, pts)]]
            ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=c["agent"])
            sizes.update(xs)
        ax.set_xscale("log")
        ax.set_xticks(sorted(sizes), [str(s) for s in sorted(sizes)])
        ax.minorticks_off()
        ax.set(ylim=(0, 1), xlabel="training homes", ylabel="SR", title=f"{split} / {mode}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=90, metadata={"Software": None})
    plt.close(fig)


def scale_section(sources: list[tuple[Path, dict]], runs: list[Run], folder: Path, *,
                  seed: int = 0) -> tuple[list[str], list[dict]]:
    """The page's training-scale section and its data (``scale_curves``), with its plot
    ``scale_curve.png`` in ``folder``; no lines when the sources are not one row at several sizes."""
    homes_of, why_not = training_homes(sources)
    if why_not:
        return [f"*{why_not[0].upper() + why_not[1:]}.*", ""], []
    curves = scale_curves(runs, homes_of, seed=seed)
    if not curves:
        return [], []
    plot_scale_curves(curves, folder / "scale_curve.png")
    return scale_lines(curves, "scale_curve.png"), curves
