"""Load results files as runs and compare runs evaluated on the same episodes, pairwise.

A *run* is one agent on one split under one protocol with its per-episode SR / SPL / nDTW and
homes: an eval run folder (or its ``summary.json`` / ``episodes.jsonl``), or one row of a
``bench train`` JSON's table. Runs compared together must share the task, the collision mode and
the rest of the protocol, and the episode ids; anything else is refused with one line naming the
file and field (``ConfigError``). Statistics: ``core.stats`` (docs/statistics.md).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError
from ..eval.folder import EPISODES_FILE, SUMMARY_FILE
from ..run.summary import INTERVAL_METRICS, RESULTS_FORMAT, home_of
from ..run.records import is_evaluated, read_finished

#: metrics of the paired comparisons; the verdict is the first one's
COMPARED_METRICS = ("SR", "SPL")


@dataclass
class Run:
    """One agent's results on one split: what comparisons and pages need."""

    label: str
    source: Path                 # the results file read (named in errors)
    task: str
    split: str | None
    mode: str
    protocol: dict
    ids: list[str]
    homes: list[str]
    values: dict[str, list[float]]   # INTERVAL_METRICS per episode (None counts 0)
    intervals: dict[str, dict]       # metric -> {"episode": ci, "clustered": ci}
    per_home: dict[str, dict]
    design: dict
    seeds: int | None = 1
    bench: bool = False          # a row of a bench train table
    extra: dict = field(default_factory=dict)
    failures: list | None = None  # per episode its first error's category (run.diagnostics), None if none

    @property
    def key(self) -> tuple:
        """What runs must share to be compared: task, split, collision mode and the whole protocol."""
        return self.key_across(())

    def key_across(self, across: tuple[str, ...]) -> tuple:
        """``key`` without the protocol fields ``across`` (the condition a comparison is across)."""
        return (self.task, self.split or "-", self.mode, json.dumps(protocol_without(self.protocol, across),
                                                                    sort_keys=True))


def protocol_without(protocol: dict, across: tuple[str, ...]) -> dict:
    """``protocol`` less its top-level fields ``across``."""
    return {k: v for k, v in protocol.items() if k not in across}


def _read_json(path: Path) -> dict:
    if not path.is_file():
        raise ConfigError("not found", file=path, expected="a results file (summary.json, or a bench train JSON)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"not JSON ({exc})", file=path) from None
    if not isinstance(data, dict):
        raise ConfigError(f"got {type(data).__name__}", file=path, expected="a JSON object")
    return data


def _check_format(data: dict, path: Path) -> None:
    got = data.get("format")
    if not isinstance(got, int) or got < RESULTS_FORMAT:
        raise ConfigError("missing (a results file of an older format)" if got is None else f"got {got!r}",
                          file=path, field="format",
                          expected=f"{RESULTS_FORMAT} or later: re-run the evaluation with this version")


def _require(data: dict, key: str, path: Path, where: str = "") -> Any:
    if key not in data:
        raise ConfigError("missing", file=path, field=f"{where}{key}", expected=f"a results file of format {RESULTS_FORMAT}")
    return data[key]


def _eval_run(path: Path) -> Run:
    """An eval run from its folder, ``summary.json`` or ``episodes.jsonl`` (the other file beside it)."""
    folder = path if path.is_dir() else path.parent
    summary_path = folder / SUMMARY_FILE
    summary = _read_json(summary_path)
    _check_format(summary, summary_path)
    protocol = _require(summary, "protocol", summary_path)
    overall = _require(summary, "overall", summary_path)
    episodes_path = folder / EPISODES_FILE
    if not episodes_path.is_file():
        raise ConfigError("not found", file=episodes_path, expected=f"the episode records beside {summary_path}")
    records = [r for r in read_finished(episodes_path) if is_evaluated(r)]
    run = summary.get("run") or {}
    return Run(label=folder.name, source=summary_path, task=str(protocol.get("task") or run.get("task")),
               split=run.get("split") or (records[0].get("split") if records else None),
               mode=str(protocol.get("collision_mode")), protocol=protocol, ids=[r["episode_id"] for r in records],
               homes=[home_of(r) for r in records],
               values={m: [float(r["metrics"].get(m) or 0.0) for r in records] for m in INTERVAL_METRICS},
               intervals=_require(overall, "intervals", summary_path, "overall."),
               per_home=_require(overall, "per_home", summary_path, "overall."),
               design=_require(overall, "design", summary_path, "overall."), seeds=None,
               extra={"agent": run.get("agent")}, failures=[first_error_category(r) for r in records])


def _bench_runs(path: Path, data: dict) -> list[Run]:
    """The rows of a ``bench train`` JSON's table."""
    _check_format(data, path)
    pending = sorted(str(j) for j in ((data.get("partial") or {}).get("pending") or []))
    out = []
    for i, row in enumerate(data["table"]):
        where = f"table[{i}]."
        per = _require(row, "per_episode", path, where)
        protocol = _require(row, "protocol", path, where)
        clustered = _require(row, "clustered", path, where)
        out.append(Run(label=str(row["agent"]), source=path, task=str(row.get("task") or protocol.get("task")),
                       split=row.get("split"), mode=str(row.get("mode")), protocol=protocol, ids=list(per["ids"]),
                       homes=[str(h) for h in per["homes"]], values={m: list(per[m]) for m in INTERVAL_METRICS},
                       intervals={m: {"episode": row[m], "clustered": clustered[m]} for m in INTERVAL_METRICS},
                       per_home=_require(row, "per_home", path, where), design=_require(row, "design", path, where),
                       seeds=row.get("seeds"), bench=True,
                       extra={"agent": str(row["agent"]), "seeds_ci": row.get("seeds_ci"), "pending": pending},
                       failures=list(per["first_error"]) if "first_error" in per else None))
    return out


def first_error_category(record: dict) -> str | None:
    """The category of an episode record's first error (``run.diagnostics``), None for a success."""
    error = record.get("first_error")
    return str(error["category"]) if isinstance(error, dict) and error.get("category") else None


def in_episode_order(run: Run) -> Run:
    """``run`` with its episodes in episode-id order: the pairing of two runs, and the bootstrap's
    stream, must not depend on the order their episodes finished in (``--envs``, ``--workers``)."""
    order = sorted(range(len(run.ids)), key=lambda i: str(run.ids[i]))
    run.ids = [run.ids[i] for i in order]
    run.homes = [run.homes[i] for i in order]
    run.values = {m: [v[i] for i in order] for m, v in run.values.items()}
    if run.failures is not None:
        run.failures = [run.failures[i] for i in order]
    return run


#: ``FILE.json:sN``: the rows of training seed N of a ``bench train --seeds`` results file
ONE_SEED = re.compile(r"^(?P<path>.+\.json):s(?P<seed>\d+)$")


def _seed_runs(path: Path, data: dict, seed: int) -> list[Run]:
    """The rows of the jobs of training ``seed`` in a ``--seeds`` results file (episode ids as an
    eval run has them, not ``s<seed>/...``), labelled ``<agent>@s<seed>``."""
    _check_format(data, path)
    jobs = data.get("jobs")
    if not isinstance(jobs, dict):
        raise ConfigError("missing", file=path, field="jobs",
                          expected="a 'bench train --seeds' results file (its jobs' rows) for ':s<seed>'")
    rows = [row for job in jobs.values() if isinstance(job, dict) and job.get("seed") == seed
            for row in job.get("table") or []]
    if not rows:
        seeds = sorted({job.get("seed") for job in jobs.values() if isinstance(job, dict)}, key=str)
        raise ConfigError(f"no job of seed {seed}", file=path, field="jobs", expected=f"a seed among {seeds}")
    runs = _bench_runs(path, {"format": data["format"], "table": rows})
    for run in runs:
        run.label = f"{run.label}@s{seed}"
    return runs


def load_runs(paths: list[str | Path]) -> list[Run]:
    """Every run of ``paths`` (eval run folders, their ``summary.json`` / ``episodes.jsonl``, bench
    train JSONs, ``FILE.json:sN`` for one training seed's rows of a ``--seeds`` file), labelled
    uniquely: an eval run by its folder name, a bench row by its agent (``@sN`` for one seed's;
    prefixed by the file's stem when several files are read)."""
    runs: list[Run] = []
    for given in paths:
        path = Path(given)
        one_seed = None if path.exists() else ONE_SEED.match(str(given))
        if one_seed:
            path = Path(one_seed["path"])
            rows = _seed_runs(path, _read_json(path), int(one_seed["seed"]))
        elif path.is_dir() or path.name in (SUMMARY_FILE, EPISODES_FILE) or path.suffix == ".jsonl":
            runs.append(_eval_run(path))
            continue
        else:
            data = _read_json(path)
            if "table" not in data:
                runs.append(_eval_run(path))
                continue
            rows = _bench_runs(path, data)
        if len(paths) > 1:
            for r in rows:
                r.label = f"{path.stem}:{r.label}"
        runs += rows
    labels = [r.label for r in runs]
    for r in runs:  # eval folders of the same name in different places
        if labels.count(r.label) > 1 and not r.bench:
            r.label = str(r.source.parent)
    return [in_episode_order(r) for r in runs]


def of_splits(runs: list[Run], splits: tuple[str, ...]) -> list[Run]:
    """The runs of ``splits`` (all of them when empty); a split no run has is a one-line
    ``ConfigError`` naming ``--split`` and the splits there are."""
    have = sorted({r.split or "-" for r in runs})
    missing = [s for s in splits if s not in have]
    if missing:
        raise ConfigError(f"got {missing[0]!r}", field="--split", expected=f"one of the runs' splits {have}")
    return [r for r in runs if not splits or (r.split or "-") in splits]


def _first_difference(a: Any, b: Any, prefix: str) -> str | None:
    """The dotted name of the first field where ``a`` and ``b`` differ (None when equal)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            got = _first_difference(a.get(key), b.get(key), f"{prefix}.{key}")
            if got:
                return got
        return None
    return None if a == b else prefix


def training_seeds(ids: list[str]) -> list[int]:
    """The training seeds a ``bench train --seeds`` row pools (its episode ids ``s<seed>/...``),
    ascending; ``[]`` when an id has no such prefix."""
    import re

    found = [re.match(r"s(\d+)/", i) for i in ids]
    return sorted({int(m.group(1)) for m in found}) if found and all(found) else []


def check_comparable(a: Run, b: Run, across: tuple[str, ...] = ()) -> None:
    """Refuse (one line naming ``b``'s file and the field) runs that are not on the same task,
    collision mode, protocol (but for its fields ``across``: the condition compared, e.g.
    ``instruction_language``) and episodes as ``a``."""
    for name, x, y in (("protocol.task", a.task, b.task), ("protocol.collision_mode", a.mode, b.mode)):
        if x != y:
            raise ConfigError(f"{b.label} has {y!r}, {a.label} ({a.source}) has {x!r}", file=b.source, field=name,
                              expected="runs on the same task and collision mode")
    protocols = [protocol_without(a.protocol, across), protocol_without(b.protocol, across)]
    where = _first_difference(*protocols, "protocol")
    if where:
        keys = where.split(".")[1:]
        got = list(protocols)
        for k in keys:
            got = [g.get(k) if isinstance(g, dict) else None for g in got]
        raise ConfigError(f"{b.label} has {got[1]!r}, {a.label} ({a.source}) has {got[0]!r}", file=b.source,
                          field=where, expected="runs under the same protocol")
    partial = bool(a.extra.get("pending") or b.extra.get("pending"))
    if partial and set(a.ids) & set(b.ids):
        a, b = common_episodes(a, b)
    if a.ids != b.ids:
        seeds = [training_seeds(r.ids) for r in (a, b)]
        if seeds[0] != seeds[1] and all(seeds):
            raise ConfigError(f"{b.label} pools training seeds {seeds[1]}, {a.label} ({a.source}) seeds {seeds[0]}",
                              file=b.source, field="seeds",
                              expected="bench train files of the same seeds (one seed of a finished file: "
                                       "bench train --seeds S --jobs-from FILE)")
        missing = sorted(set(a.ids) ^ set(b.ids))
        detail = (f"{len(missing)} episode id(s) in only one of them, e.g. {missing[0]!r}" if missing
                  else "an episode id repeated a different number of times")
        raise ConfigError(f"{b.label} and {a.label} ({a.source}) differ: {detail}", file=b.source, field="episodes",
                          expected="runs on the same episodes (ids)")
    if a.homes != b.homes:
        raise ConfigError(f"{b.label} places episodes in other homes than {a.label} ({a.source})", file=b.source,
                          field="episodes.scene_id", expected="the same home per episode")


def _restricted(run: Run, keep: set) -> Run:
    index = [i for i, e in enumerate(run.ids) if e in keep]
    return replace(run, ids=[run.ids[i] for i in index], homes=[run.homes[i] for i in index],
                   values={m: [v[i] for i in index] for m, v in run.values.items()},
                   failures=None if run.failures is None else [run.failures[i] for i in index])


def common_episodes(a: Run, b: Run) -> tuple[Run, Run]:
    """``a`` and ``b`` on the episodes both have, in id order (themselves when they have the same):
    how the rows of a partial table (a ``bench train --seeds`` file with pending jobs, its rows over
    different seeds) are paired. ``check_comparable`` allows this only for a partial table."""
    if a.ids == b.ids:
        return a, b
    shared = set(a.ids) & set(b.ids)
    return _restricted(a, shared), _restricted(b, shared)


def group_runs(runs: list[Run], *, strict: bool, across: tuple[str, ...] = ()) -> dict[tuple, list[Run]]:
    """Runs by task, split, collision mode and protocol (``Run.key``; without the protocol fields
    ``across``), each group checked with ``check_comparable`` (the same episodes). ``strict`` (no
    bench file given): every run must be comparable with the first, one group."""
    if strict:
        for r in runs[1:]:
            check_comparable(runs[0], r, across)
        return {runs[0].key_across(across): list(runs)} if runs else {}
    groups: dict[tuple, list[Run]] = {}
    for r in runs:
        groups.setdefault(r.key_across(across), []).append(r)
    for members in groups.values():
        for r in members[1:]:
            check_comparable(members[0], r, across)
    return groups


def pair_is_across(a: Run, b: Run, across: tuple[str, ...]) -> bool:
    """Whether ``a`` - ``b`` is a pair across the condition: their protocols differ in a field of
    ``across`` and, both being bench rows, they are the same row (agent) in each condition."""
    if not any(a.protocol.get(f) != b.protocol.get(f) for f in across):
        return False
    return not (a.bench and b.bench) or a.extra.get("agent") == b.extra.get("agent")


def aligned(per_episode: dict, ids: list) -> dict:
    """``per_episode`` (ids, homes and per-metric lists) reordered to ``ids`` (the same episodes in
    another order: eval logs are in finish order, which batched runs make differ between agents)."""
    index = {str(i): k for k, i in enumerate(per_episode["ids"])}
    order = [index[str(i)] for i in ids]
    return {key: [values[k] for k in order] for key, values in per_episode.items()}


def rows_pair(a: dict, b: dict) -> bool:
    """Whether two table rows (``per_episode`` ids, ``protocol``) are on the same episodes, in any
    order, under the same protocol: what a paired comparison of them needs."""
    return (sorted(map(str, a["per_episode"]["ids"])) == sorted(map(str, b["per_episode"]["ids"]))
            and a.get("protocol") == b.get("protocol"))


def compare_pair(a_label: str, a: dict, b_label: str, b: dict, *, seed: int = 0) -> dict:
    """A - B on the same episodes (``a``, ``b``: per-episode ``COMPARED_METRICS`` lists and
    ``homes``): per metric ``core.stats.paired_difference``, and the verdict "A > B" (or "B > A")
    only when the first metric's interval excludes 0, else "not separated"."""
    from ..core.stats import paired_difference

    diff = {m: paired_difference(a[m], b[m], a["homes"], seed=seed) for m in COMPARED_METRICS}
    first = diff[COMPARED_METRICS[0]]
    verdict = ("not separated" if not first["separated"]
               else f"{a_label} > {b_label}" if first["mean"] > 0 else f"{b_label} > {a_label}")
    return {"a": a_label, "b": b_label, **diff, "verdict": verdict}


def comparison_lines(comparisons: list[dict]) -> list[str]:
    """Comparisons as aligned text: A - B per metric, mean [clustered 95% CI], P(A > B), verdict."""
    if not comparisons:
        return []
    width = max(len(c["a"]) + len(c["b"]) + 3 for c in comparisons)
    labelled = any("split" in c for c in comparisons)

    def cell(d: dict) -> str:
        ci = "undefined" if d["lo"] is None else f"[{d['lo']:+.3f}, {d['hi']:+.3f}]"
        return f"{d['mean']:+.3f} {ci:<16} P(A>B) {d['prob_improvement']:.2f}"

    def where(c: dict) -> str:
        return f"{c.get('split') or '-':<10} {c.get('mode', ''):<7} " if labelled else ""

    lines = [f"{'A - B':<{width}} " + (f"{'split':<10} {'mode':<7} " if labelled else "")
             + "  ".join(f"{m + ' difference [home CI]':<39}" for m in COMPARED_METRICS) + "  verdict (SR)"]
    for c in comparisons:
        lines.append(f"{c['a'] + ' - ' + c['b']:<{width}} {where(c)}"
                     + "  ".join(f"{cell(c[m]):<39}" for m in COMPARED_METRICS) + f"  {c['verdict']}")
    return lines


def body_name(run: Run) -> str | None:
    """The name of the body a run was evaluated with (its protocol's)."""
    return (run.protocol.get("body") or {}).get("name")


def columns(run: Run) -> dict:
    """A run's per-episode homes and metrics: what ``compare_pair`` takes for one side."""
    return {"homes": run.homes, **run.values}


def group_mde(runs: list[Run]) -> float | None:
    """The design's smallest detectable SR difference for a group of runs: the largest of the runs'
    own (each from that run's variance between and within homes), so it holds for every pair."""
    got = [r.design.get("mde_SR") for r in runs if r.design.get("mde_SR") is not None]
    return max(got) if got else None


def compare_runs(runs: list[Run], *, strict: bool, seed: int = 0, across: tuple[str, ...] = ()) -> dict:
    """Groups of comparable runs with every pair's paired differences (``compare_pair``); runs whose
    protocols differ only in the fields ``across`` are paired (``check_comparable``)."""
    groups = group_runs(runs, strict=strict, across=across)
    index = {id(r): i for i, r in enumerate(runs)}
    out = []
    for (task, split, mode, _), members in groups.items():
        pairs = [compare_pair(a.label, columns(x), b.label, columns(y), seed=seed)
                 for i, a in enumerate(members) for b in members[i + 1:] for x, y in [common_episodes(a, b)]]
        out.append({"task": task, "split": split, "mode": mode, "body": body_name(members[0]),
                    "runs": [r.label for r in members], "run_indices": [index[id(r)] for r in members],
                    "design": {"homes": len(set(members[0].homes)), "episodes": len(members[0].ids),
                               "mde_SR": group_mde(members)},
                    "comparisons": pairs})
    if not any(g["comparisons"] for g in out):
        raise ConfigError(f"{len(runs)} run(s) in {len(out)} group(s): no two on the same task, split and mode",
                          field="RUN", expected="at least two runs on the same episodes")
    return {"format": RESULTS_FORMAT, "seed": seed, **({"across": list(across)} if across else {}),
            "runs": [run_entry(r) for r in runs], "groups": out}


def run_entry(run: Run) -> dict:
    """A run's summary for compare.json and pages (no per-episode values)."""
    return {"label": run.label, "source": str(run.source), "task": run.task, "split": run.split, "mode": run.mode,
            "seeds": run.seeds, "episodes": len(run.ids), "homes": len(set(run.homes)), "design": run.design,
            "intervals": run.intervals, "per_home": run.per_home, "protocol": run.protocol}


def interval_cell(c: dict | None) -> str:
    """A page's cell for an interval ``{mean, lo, hi}``: "[lo, hi]", "undefined (1 home)" without
    bounds, "-" without a mean."""
    if not c or c.get("mean") is None:
        return "-"
    return "undefined (1 home)" if c["lo"] is None else f"[{c['lo']:.3f}, {c['hi']:.3f}]"


def _ci(c: dict | None) -> str:
    """A text table's cell: the mean and ``interval_cell``, "-" without a mean."""
    return "-" if not c or c.get("mean") is None else f"{c['mean']:.3f} {interval_cell(c)}"


def run_lines(entries: list[dict]) -> list[str]:
    """Runs as aligned text: episodes, homes, seeds, and per metric mean [clustered 95% CI]."""
    width = max([8] + [len(e["label"]) for e in entries])
    lines = [f"{'run':<{width}} {'n':>5} {'homes':>5} {'seeds':>5}  "
             + "  ".join(f"{m + ' [home CI]':<22}" for m in INTERVAL_METRICS)]
    for e in entries:
        lines.append(f"{e['label']:<{width}} {e['episodes']:>5} {e['homes']:>5} {str(e['seeds'] or '-'):>5}  "
                     + "  ".join(f"{_ci(e['intervals'][m]['clustered']):<22}" for m in INTERVAL_METRICS))
    return lines


def compare_text(result: dict) -> str:
    """The stdout table of ``vlnverse results compare``."""
    lines = []
    for g in result["groups"]:
        if not g["comparisons"]:
            continue
        d = g["design"]
        mde = "-" if d["mde_SR"] is None else f"{d['mde_SR']:.3f}"
        lines += [f"{g['task']} / {g['split']} / {g['mode']} / body {g['body']}: {d['homes']} homes, "
                  f"{d['episodes']} episodes, "
                  f"smallest detectable SR difference {mde}"]
        lines += run_lines([result["runs"][i] for i in g["run_indices"]])  # a label names a row in every split
        lines += [""] + comparison_lines(g["comparisons"]) + [""]
    return "\n".join(lines).rstrip() + "\n"


def plot_comparisons(result: dict, path: Path) -> None:
    """PNG: per group and compared metric, each pair's A - B with its clustered 95% CI and 0 marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..core.io import atomic_path

    groups = [g for g in result["groups"] if g["comparisons"]]
    rows = sum(len(g["comparisons"]) for g in groups)
    fig, axes = plt.subplots(len(groups), len(COMPARED_METRICS), squeeze=False,
                             figsize=(5 * len(COMPARED_METRICS), 1.2 + 0.45 * rows + 0.6 * len(groups)))
    for gi, g in enumerate(groups):
        labels = [f"{c['a']} - {c['b']}" for c in g["comparisons"]]
        for mi, m in enumerate(COMPARED_METRICS):
            ax = axes[gi][mi]
            for y, c in enumerate(g["comparisons"]):
                d = c[m]
                color = "tab:green" if d["separated"] else "tab:gray"
                if d["lo"] is not None:
                    ax.plot([d["lo"], d["hi"]], [y, y], color=color, lw=2)
                ax.plot([d["mean"]], [y], "o", color=color)
            ax.axvline(0, color="black", lw=0.8)
            ax.set_yticks(range(len(labels)), labels if mi == 0 else [""] * len(labels), fontsize=7)
            ax.invert_yaxis()
            ax.set_title(f"{m} difference, 95% home CI: {g['split']} / {g['mode']} / {g.get('body')}", fontsize=8)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=90, metadata={"Software": None})
    plt.close(fig)
