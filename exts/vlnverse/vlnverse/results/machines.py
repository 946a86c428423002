"""Where a results page's rows were trained: the device each ``bench train`` row recorded
(``device_info``: cpu or cuda:N, the GPU's or CPU's name, torch and CUDA versions, the CPU's
vector kernels), so a page with rows from a CUDA machine says so in its first lines and in a
section listing each source's jobs by device; and which draws of the artefacts a seed's rows share
(the waypoint predictor, the pretrained encoder) its jobs acted on, since a seed's jobs trained on
different machines act on different draws (``shared_draws``). Eval run folders record no training
device and are left out."""
from __future__ import annotations

import json
from pathlib import Path

#: the fields of ``device_info`` a page shows, in its column order
FIELDS = ("device", "name", "torch", "cuda", "cpu_capability")


def _entry(info: dict | None, device: str | None) -> dict:
    info = dict(info or {})
    if device is not None:
        info.setdefault("device", device)
    return {f: (None if info.get(f) is None else str(info[f])) for f in FIELDS}


def trained_rows(data: dict) -> list[tuple[str, dict, str | None]]:
    """``(job or row, device entry, code revision)`` of each trained row of one ``bench train``
    results file: a ``--seeds`` file's row jobs (its baselines train nothing), or a single run's
    ``rows``; nothing for other files."""
    jobs = data.get("jobs")
    if isinstance(jobs, dict):
        out = []
        for key in sorted(jobs):
            figures = (jobs[key] or {}).get("figures")
            if isinstance(figures, dict):
                out.append((key, _entry(figures.get("device_info"), figures.get("device")), jobs[key].get("code")))
        return out
    rows, devices = data.get("rows"), data.get("device")
    if isinstance(rows, dict):
        devices = devices if isinstance(devices, dict) else {}
        return [(name, _entry((rows[name] or {}).get("device_info"), devices.get(name)), None) for name in sorted(rows)]
    return []


def machines(sources: list[tuple[Path, dict]]) -> list[dict]:
    """Per source (``page.json_sources``) and device: the rows trained there, in source order."""
    out: list[dict] = []
    for path, data in sources:
        groups: dict[tuple, dict] = {}
        for job, entry, code in trained_rows(data):
            group = groups.setdefault(tuple(entry[f] for f in FIELDS),
                                      {"source": path.stem, **entry, "jobs": [], "code": []})
            group["jobs"].append(job)
            if code and str(code) not in group["code"]:
                group["code"].append(str(code))
        out += list(groups.values())
    return out


def on_gpu(entry: dict) -> bool:
    """Whether a device entry is a CUDA device."""
    return str(entry.get("device") or "").startswith("cuda")


def device_label(entries: list[dict]) -> str | None:
    """The page's first-lines label: rows trained on a CUDA GPU (named), on CPU only, or None
    when no source records a device."""
    if not entries:
        return None
    gpus = sorted({e["name"] or e["device"] for e in entries if on_gpu(e)})
    if gpus:
        cpu_too = any(not on_gpu(e) for e in entries)
        return (f"**Rows trained on a CUDA GPU** ({', '.join(gpus)})" + (", others on CPU" if cpu_too else "")
                + ": results from a GPU machine, each row's device listed under *Where the rows were trained*.")
    return "Every row trained on CPU (no GPU), as listed under *Where the rows were trained*."


def machine_lines(entries: list[dict]) -> list[str]:
    """The page's section listing ``machines``; no lines when there are none."""
    if not entries:
        return []
    lines = ["## Where the rows were trained", "",
             "The device each `bench train` row trained and was evaluated on (`device: auto`: CUDA when present), "
             "from the `device_info` its job recorded; *CPU kernels*: the vector instructions torch dispatched to "
             "(CPU training is exact on one machine, not across these).", "",
             "| source | device | name | torch | CUDA | CPU kernels | code | jobs |", "|---|---|---|---|---|---|---|---|"]
    for e in entries:
        cells = [e["source"], *("-" if e[f] is None else e[f] for f in FIELDS),
                 ", ".join(c[:12] for c in e["code"]) or "-", ", ".join(e["jobs"])]
        lines.append("| " + " | ".join(cells) + " |")
    return lines + [""]


#: the waypoint predictor's training epochs in jobs that do not record them: every predictor trained the
#: recipe's 15 before ``--waypoint-epochs`` existed
PREDICTOR_EPOCHS_UNRECORDED = 15


def _draws(job: dict) -> dict[str, tuple[str, str]]:
    """``{artefact: (key, label)}`` of the shared artefacts one row job acted on: the waypoint
    predictor by its recorded training epochs and held-out figures (every waypoint row records
    them), the encoder by its file's digest (``shared``; older jobs record none)."""
    out: dict[str, tuple[str, str]] = {}
    figures = job.get("figures") if isinstance(job.get("figures"), dict) else {}
    predictor = figures.get("waypoint_predictor")
    held = predictor.get("held_out") if isinstance(predictor, dict) else None
    if isinstance(held, dict):
        epochs = predictor.get("epochs") or PREDICTOR_EPOCHS_UNRECORDED
        out["waypoint predictor"] = (json.dumps([epochs, held], sort_keys=True),
                                     f"{epochs} epochs, held-out hit {held.get('next_waypoint_hit')}")
    digest = (job.get("shared") or {}).get("encoder") if isinstance(job.get("shared"), dict) else None
    if digest:
        out["encoder"] = (str(digest), f"sha256 {str(digest)[:12]}")
    return out


def shared_draws(sources: list[tuple[str, dict]]) -> list[dict]:
    """Per training seed and shared artefact that the seed's row jobs (over every ``(name, bench
    train --seeds results)`` source) acted on in more than one draw: ``{"seed", "artefact",
    "draws": [{"label", "jobs": ["source:job", ...]}]}``. A seed's rows share one predictor and one
    encoder when they ran in one work folder on one machine; jobs carried from another machine, or
    runs of another predictor recipe (``--waypoint-epochs``), act on others."""
    found: dict[tuple, dict[str, dict]] = {}
    for name, data in sources:
        jobs = data.get("jobs")
        if not isinstance(jobs, dict):
            continue
        for key in sorted(jobs):
            job = jobs[key] if isinstance(jobs[key], dict) else {}
            for artefact, (draw, label) in _draws(job).items():
                seen = found.setdefault((job.get("seed"), artefact), {})
                seen.setdefault(draw, {"label": label, "jobs": []})["jobs"].append(f"{name}:{key}" if name else key)
    return [{"seed": seed, "artefact": artefact, "draws": list(draws.values())}
            for (seed, artefact), draws in sorted(found.items(), key=lambda kv: (str(kv[0][0]), kv[0][1]))
            if len(draws) > 1]


def draw_lines(draws: list[dict]) -> list[str]:
    """One line per seed and artefact of ``shared_draws``."""
    return [f"seed {d['seed']}'s jobs acted on {len(d['draws'])} draws of the {d['artefact']}: "
            + "; ".join(f"{x['label']} ({', '.join(x['jobs'])})" for x in d["draws"]) for d in draws]
