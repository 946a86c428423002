"""``vlnverse results page``: a results page (markdown + PNGs) generated from results files.

Per task / split / collision mode: the design (homes, episodes, smallest detectable SR
difference), a table of every run with episode and clustered (home) 95% intervals and its
training seeds, the paper's numbers beside ours where the paper has them (``paper_tables.json``),
a per-home SR plot and the pairwise paired comparisons (with ``across``: the pairs across the
condition first, each bench row against itself, and only those in the plot); the training-scale
curve when the sources are one table trained on several numbers of homes (``scale_curve``); then
the protocols, and where ``bench train`` rows trained (``machines``: labelled in the first lines
when any trained on a CUDA GPU). The same inputs give
the same bytes (``page.json``, ``index.md`` and the PNGs).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from ..core.io import replace_output_dir, write_json_atomic, write_text_atomic
from .claims import claim_lines, judge_claims, outcome_lines, paper_row, paper_tables
from .compare import (COMPARED_METRICS, Run, body_name, columns, common_episodes, compare_pair, group_mde, group_runs,
                      interval_cell, load_runs, of_splits, pair_is_across, plot_comparisons, run_entry)
from .machines import device_label, draw_lines, machine_lines, machines, shared_draws
from .scale_curve import scale_section

METRICS = ("SR", "SPL", "nDTW")


def shown_source(path: str | Path) -> str:
    """A results file as a page names it: relative to the working folder when inside it, else its
    last two path parts (a page in git must not carry one machine's absolute paths)."""
    path = Path(path)
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return Path(*path.resolve().parts[-2:]).as_posix()


def _slug(*parts: str | None) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", "_".join(str(p or "-") for p in parts))


def plot_per_home(runs: list[Run], path: Path, title: str) -> None:
    """PNG: SR per home (bars per run, homes in sorted order), each home's episode count on the axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from ..core.io import atomic_path

    homes = sorted(set(runs[0].homes))
    width = 0.8 / len(runs)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.5 * len(homes) * max(1, len(runs)) + 2), 3.6))
    for i, run in enumerate(runs):
        ys = [run.per_home.get(h, {}).get("SR", 0.0) for h in homes]
        ax.bar(np.arange(len(homes)) + (i - (len(runs) - 1) / 2) * width, ys, width, label=run.label)
    counts = [runs[0].per_home.get(h, {}).get("episodes", 0) for h in homes]
    ax.set_xticks(range(len(homes)), [f"{h}\n({n} ep)" for h, n in zip(homes, counts)], rotation=90 if len(homes) > 6 else 0, fontsize=7)
    ax.set(ylim=(0, 1), ylabel="SR", title=title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=90, metadata={"Software": None})
    plt.close(fig)


def _protocol_lines(runs: list[Run]) -> list[str]:
    distinct: list[tuple[dict, list[str]]] = []
    for run in runs:
        for proto, labels in distinct:
            if proto == run.protocol:
                labels.append(run.label)
                break
        else:
            distinct.append((run.protocol, [run.label]))
    lines = ["## Protocol", "", "| runs | task | collision mode | success radius (m) | max steps | slide on collision | "
             "body (radius, height m) | mode parameters |", "|---|---|---|---|---|---|---|---|"]
    for p, labels in distinct:
        body = p.get("body") or {}
        params = ", ".join(f"{k} {v}" for k, v in sorted((p.get("mode_params") or {}).items()))
        lines.append(f"| {', '.join(labels)} | {p.get('task')} | {p.get('collision_mode')} | {p.get('success_distance')} "
                     f"| {p.get('max_steps')} | {'on' if p.get('slide_on_collision') else 'off'} | "
                     f"{body.get('name')} ({body.get('radius')}, {body.get('height')}) | {params} |")
    return lines + [""]


def json_sources(paths: list[str]) -> list[tuple[Path, dict]]:
    """``(path, data)`` of each source among ``paths`` that is a JSON file (a ``bench train``
    results file), read once for the page's sections that need more than its rows."""
    return [(Path(p), json.loads(Path(p).read_text(encoding="utf-8"))) for p in paths
            if Path(p).suffix == ".json" and Path(p).is_file()]


def language_shift_lines(sources: list[tuple[Path, dict]]) -> tuple[list[str], list[dict]]:
    """The section of the ``bench train --language v2-split`` drops (``language_drop`` of each
    results file of ``sources``, ``json_sources``): per agent and mode SR on val_unseen and on the
    same paths in the held-out wording, the paired drop with its home interval and verdict; no
    lines when none."""
    drops = [{**d, "task": data.get("task", "fine_grained")}
             for _, data in sources for d in data.get("language_drop") or []]
    if not drops:
        return [], []
    lines = ["## The language shift", "",
             "Trained on one part of the instruction templates; val_unseen_language holds val_unseen's episodes worded "
             "in the other part (fine_grained: the held-out template families; coarse_grained: trained on formal "
             "descriptions, held out in the natural and casual styles). The drop is val_unseen - val_unseen_language on "
             "the same episodes, paired by episode and clustered by home (`bench train --language v2-split [--task "
             "coarse_grained]`).", "",
             "| task | agent | mode | episodes | homes | SR val_unseen | SR val_unseen_language | SR drop | home CI | "
             "P(drop > 0) | verdict |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for d in drops:
        sr = d["SR"]
        lines.append(f"| {d['task']} | {d['agent']} | {d['mode']} | {d['episodes']} | {d['homes']} | "
                     f"{d['SR_val_unseen']:.3f} | {d['SR_val_unseen_language']:.3f} | {sr['mean']:+.3f} | {interval_cell(sr)} | "
                     f"{sr['prob_improvement']:.2f} | {d['verdict']} |")
    return lines + [""], drops


def write_job_ledgers(sources: list[tuple[Path, dict]], folder: Path) -> list[str]:
    """For each of ``sources`` (``json_sources``) that is a ``bench train --seeds`` results file (it
    has ``work`` and ``jobs``), ``<stem>.jobs.json`` in ``folder``: its work identity and finished
    jobs, compact and sorted (what ``bench train --jobs-from`` reads, without the table it
    recomputes, nor whether a job was carried into the folder it was read from). Returns the names."""
    names = []
    for path, data in sources:
        if isinstance(data.get("work"), dict) and isinstance(data.get("jobs"), dict):
            name = f"{path.stem}.jobs.json"
            jobs = {key: {k: v for k, v in job.items() if k != "imported"} for key, job in data["jobs"].items()}
            write_text_atomic(folder / name, json.dumps({"work": data["work"], "jobs": jobs}, sort_keys=True,
                                                        separators=(",", ":")) + "\n")
            names.append(name)
    return names


def _pair_table(pairs: list[dict]) -> list[str]:
    """Markdown rows of paired comparisons: difference, home CI and P(A > B) per compared metric."""
    lines = ["| A - B | episodes | " + " | ".join(f"{m} difference | {m} home CI | P(A > B) {m}" for m in COMPARED_METRICS)
             + " | verdict (SR) |", "|---|---|" + "---|---|---|" * len(COMPARED_METRICS) + "---|"]
    for c in pairs:
        lines.append(f"| {c['a']} - {c['b']} | {c['episodes']} | " + " | ".join(
            f"{c[m]['mean']:+.3f} | {interval_cell(c[m])} | {c[m]['prob_improvement']:.2f}" for m in COMPARED_METRICS)
            + f" | {c['verdict']} |")
    return lines


def build_page(paths: list[str], name: str, out: Path, *, seed: int = 0, across: tuple[str, ...] = (),
               splits: tuple[str, ...] = ()) -> dict:
    """Write ``out/index.md``, ``out/page.json`` and the PNGs from the results files ``paths``
    (only the runs of ``splits`` when given; runs whose protocols differ only in the fields
    ``across`` paired); returns the page's data (``page.json``)."""
    runs = of_splits(load_runs(paths), splits)
    groups = group_runs(runs, strict=False, across=across)
    sources = [shown_source(p) for p in paths]
    data = {"name": name, "sources": sources, "seed": seed, **({"across": list(across)} if across else {}),
            **({"splits": list(splits)} if splits else {}), "groups": []}
    md = [f"# Results: {name}", "",
          "Generated by `vlnverse results page` from " + ", ".join(f"`{p}`" for p in sources)
          + "; regenerate it rather than editing it. Intervals are 95% percentile bootstraps: *episode* resamples "
          "episodes as if independent, *home* resamples homes, then episodes within each drawn home "
          "(docs/statistics.md). A paired difference A - B is on the same episodes; \"A > B\" only when its home "
          "interval excludes 0. Paper figures are the VLNVerse paper's (percent, its own scenes and training), "
          "shown beside ours for orientation, not as a paired comparison.", ""]
    sources_read = json_sources(paths)
    trained_on = machines(sources_read)
    label = device_label(trained_on)
    if label:
        md += [label, ""]
        data["machines"] = trained_on
    if splits:
        md += [f"Splits shown: {', '.join(splits)} (the sources' other splits are left out).", ""]
    if across:
        md += [f"**Paired across {', '.join(f'`{f}`' for f in across)}:** runs whose protocols differ in "
               f"{'this field' if len(across) == 1 else 'these fields'} (the condition compared) are paired on the "
               "same episodes; each run's own value is in page.json (`groups[].runs[].protocol`).", ""]
    pending = sorted({j for r in runs for j in (r.extra or {}).get("pending") or []})
    if pending:
        md += [f"**A partial table:** job(s) {', '.join(pending)} had not finished, so some rows cover fewer training "
               "seeds (the *seeds* column); a pair of rows is compared on the episodes both have (the pair's "
               "*episodes*).", ""]
        data["pending"] = pending
    with replace_output_dir(out, command="results page") as tmp:
        for gi, ((task, split, mode, _), members) in enumerate(groups.items()):
            mde_sr = group_mde(members)
            mde = "-" if mde_sr is None else f"{mde_sr:.3f}"
            homes = len(set(members[0].homes))
            body = body_name(members[0])
            md += [f"## {task} / {split or '-'} / {mode} / body {body}", "",
                   f"Design: {homes} homes, {len(members[0].ids)} episodes; the smallest SR difference this design "
                   f"detects (two-sided 5%, power 80%, from the variance between and within homes; the largest of "
                   f"the runs'): {mde}.", "",
                   "| run | seeds | episodes | homes | " + " | ".join(f"{m} | {m} episode CI | {m} home CI" for m in METRICS)
                   + " | paper SR % | paper SPL % | paper source |",
                   "|---|---|---|---|" + "---|---|---|" * len(METRICS) + "---|---|---|"]
            for run in members:
                cells = []
                for m in METRICS:
                    iv = run.intervals[m]
                    cells += ["-" if iv["clustered"]["mean"] is None else f"{iv['clustered']['mean']:.3f}",
                              interval_cell(iv["episode"]), interval_cell(iv["clustered"])]
                paper = paper_row(run.label, task, split)
                ref = [f"{paper[1].get('SR', '-')}", f"{paper[1].get('SPL', '-')}", paper[0]] if paper else ["-"] * 3
                md.append(f"| {run.label} | {run.seeds or '-'} | {len(run.ids)} | {len(set(run.homes))} | "
                          + " | ".join(cells + ref) + " |")
            seeded = [r for r in members if isinstance((r.extra or {}).get("seeds_ci"), dict)]
            if seeded:
                md += ["", "Over training seeds (each seed's SR over its episodes; the interval resamples seeds, "
                           "then homes, then episodes: `core.stats.seeds_ci`):", "",
                       "| run | seeds | " + " | ".join(f"{m} mean ± sd | {m} seeds CI" for m in METRICS) + " |",
                       "|---|---|" + "---|---|" * len(METRICS)]
                for run in seeded:
                    cells = []
                    for m in METRICS:
                        c = run.extra["seeds_ci"].get(m) or {}
                        sd = "-" if c.get("sd") is None else f"{c['sd']:.3f}"
                        cells += ["-" if c.get("mean") is None else f"{c['mean']:.3f} ± {sd}", interval_cell(c)]
                    md.append(f"| {run.label} | {run.seeds} | " + " | ".join(cells) + " |")
            png = f"sr_per_home_{gi}_{_slug(task, split, mode, body)}.png"
            plot_per_home(members, tmp / png, f"SR per home: {task} / {split or '-'} / {mode} / body {body}")
            md += ["", f"![SR per home]({png})", ""]
            pairs = [compare_pair(a.label, columns(x), b.label, columns(y), seed=seed)
                     | {"episodes": len(x.ids), **({"across": pair_is_across(a, b, across)} if across else {})}
                     for i, a in enumerate(members) for b in members[i + 1:] for x, y in [common_episodes(a, b)]]
            crossing = [c for c in pairs if c.get("across")]
            if crossing:
                md += [f"### Paired across {', '.join(f'`{f}`' for f in across)}", "",
                       "Each row against itself in the other condition (two eval runs: any pair whose conditions "
                       "differ).", ""] + _pair_table(crossing) + [""]
            rest = [c for c in pairs if not c.get("across")]
            if rest:
                md += ["### Other paired comparisons" if crossing else "### Paired comparisons", ""] + _pair_table(rest)
                md.append("")
            data["groups"].append({"task": task, "split": split, "mode": mode, "body": body, "homes": homes,
                                   "episodes": len(members[0].ids), "mde_SR": mde_sr,
                                   "runs": [{**run_entry(r), "source": shown_source(r.source)} for r in members],
                                   "comparisons": pairs, "plot": png})
        crossing = [{**g, "comparisons": [c for c in g["comparisons"] if c.get("across")]} for g in data["groups"]]
        if any(g["comparisons"] for g in crossing):  # with --across, the plot shows the pairs across the condition
            plot_comparisons({"groups": crossing}, tmp / "comparisons.png")
            md += [f"## Paired across {', '.join(f'`{f}`' for f in across)}", "",
                   "![paired differences](comparisons.png)", ""]
        elif any(g["comparisons"] for g in data["groups"]):
            plot_comparisons({"groups": data["groups"]}, tmp / "comparisons.png")
            md += ["## All paired comparisons", "", "![paired differences](comparisons.png)", ""]
        judged = judge_claims(paper_tables()["claims"], runs, seed=seed)
        if any(c["verdict"] != "not run" for c in judged):
            data["claims"] = judged
            md += ["## The paper's claims", "",
                   "Each claim is the paired SR difference of two rows on the same episodes (over the training "
                   "seeds when the rows have several; rows under different protocols, e.g. two instruction languages, "
                   "are never paired: the claim is judged under each, its files named after A - B), "
                   "with its interval clustered by home: *reproduced* when the "
                   "interval lies above 0, *refuted* when below, else *not separated* (`results.claims`; the "
                   "claims are listed in `results/paper_tables.json`). *Detectable*: the smallest true difference "
                   "this design (its homes, episodes per home and the pair's spread between and within homes) "
                   "detects with 80% power at 5% two-sided; *held-out homes to detect it*: the homes the design "
                   "would need, at its episodes per home, to detect the paper's own SR gap (`core.stats.paired_power`); "
                   "*outside the CI*: the pair's home interval excludes the paper's gap.", ""] + claim_lines(judged) + [""]
            md += ["What each verdict is made of, episode by episode (episodes pooled over seeds): the episodes only "
                   "A or only B solved, and each row's failed episodes by their first error (`run.diagnostics`: "
                   "`premature_stop` stopped short, `out_of_steps` never stopped, `overshoot` stopped past the "
                   "goal, `wrong_direction` / `missed_landmark` left the route, `loop`, `walked_away`, "
                   "`collision`).", ""] + outcome_lines(judged) + [""]
        shift, drops = language_shift_lines(sources_read)
        if drops:
            data["language_drop"] = drops
            md += shift
        scale, curves = scale_section(sources_read, runs, tmp, seed=seed)
        if curves:
            data["scale_curves"] = curves
        md += scale
        md += _protocol_lines(runs)
        md += machine_lines(trained_on)
        draws = shared_draws([(p.stem, d) for p, d in sources_read])
        if draws:
            data["shared_draws"] = draws
            md += ["**Some seeds' jobs acted on different draws of what a seed's rows share** (the waypoint "
                   "predictor, the pretrained encoder: made once per seed and work folder; CPU training is exact on "
                   "one machine only, so jobs from another machine, or of another predictor recipe, act on other "
                   "draws). Like the seed, such a draw is chance, not a bias, but a pair between these jobs no longer "
                   "holds it fixed: the pair's difference mixes it with the condition compared.", ""] \
                + [f"- {line}" for line in draw_lines(draws)] + [""]
        ledgers = write_job_ledgers(sources_read, tmp)
        if ledgers:
            data["job_ledgers"] = ledgers
            md += ["", "## Continuing this table", "",
                   "The finished jobs of each `bench train --seeds` source, with its work identity: "
                   + ", ".join(f"`{n}`" for n in ledgers) + ". `vlnverse bench train --seeds ... --jobs-from "
                   "<this folder>/<file>` with the same benchmark and settings runs only the jobs still missing "
                   "(docs/scaling.md).", ""]
        write_json_atomic(tmp / "page.json", data)
        write_text_atomic(tmp / "index.md", "\n".join(md).rstrip() + "\n")
    return data
