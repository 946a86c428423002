"""``vlnverse bench transfer``: the paper's Table 7 at CPU scale -- VLN-BERT trained elsewhere,
evaluated zero-shot in a new domain, then fine-tuned online there.

- *Trained elsewhere* (the source): the VLN-BERT row of ``bench train`` (``train.recipe.ROWS``)
  trained by IL on the 6 shipped train scenes (``--epochs``, default ``SOURCE_EPOCHS``) with the
  default body (``r2r_ce``, camera 0.88 m) and the work folder's waypoint predictor, trained on that
  body's panoramas.
- *The new domain* (the target): ``--body`` (default ``low_base``, camera 0.60 m) in the work
  folder's generated training homes. The waypoint predictor stays the source's, frozen, as the
  paper keeps the original predictor; its free-space check uses the target body's geometry.
- *Online fine-tuning*: ``mode=dagger`` from the source checkpoint with the target body --
  ``--rounds`` rounds of schedule sampling (β = ``DAGGER_P``^round: the oracle's or the policy's
  action at each step, every visited state labelled by the waypoint oracle), each retraining
  ``--round-epochs`` epochs on the aggregate plus the target body's teacher-forced cache, at
  ``ONLINE_LR``, STOP steps weighing ``--stop-weight`` (``il.stop_weight``, default 1); each round's
  checkpoint validated on ``--validation-episodes`` (default ``VALIDATION_EPISODES``) val_seen
  episodes by nDTW, the best round kept as ``best.pt`` (selection on val_seen only). A collected episode ends
  after ``ONLINE_MAX_STEPS`` decisions (``dagger.max_steps``): a learner that loops would
  otherwise add up to the task's 200 near-copies of one state per episode to the aggregate.
- ``--adapt-predictor`` (not the paper's protocol, reported as its own stage): a waypoint predictor
  trained afresh on the *target* body's panoramas of the same scenes (the simulator's free labels, no
  navigator data) replaces the source's (``learn.checkpoint.swap_predictor``), evaluated zero-shot,
  and the online rounds start from that checkpoint with its oracle as the teacher.
- *A visual shift* (``--source-render`` / ``--target-render QUALITY:OBJECTS``, default
  ``default:primitives`` both: no shift): the source trains on frames drawn with the source render
  (its teacher cache and validation); everything in the target domain -- the zero-shot and later
  evaluations, the online rounds' teacher cache, collection and validation, the frozen predictor's
  panoramas there, an adapted predictor's training panoramas -- is drawn with the target render
  (``TrainConfig.render``, ``EvalConfig.render``). When the renders differ, ``--body`` may be the
  source body (a shift of the render alone); with one render it must differ. The predictor reads
  depth only unless trained with ``--rgb``: a ``quality``-only shift then changes nothing the
  navigator reads (``objects: meshes`` changes depth too).
- *Evaluated* with the target body under Tel-Hop on the work folder's val_unseen episodes: zero-shot,
  (zero-shot with the adapted predictor,) after round 1, after the last round and the round val_seen
  selected (``online_selected``: evaluated once more only when it is neither of those; the lift
  ratios ``SR_selected_over_*`` use it); SR / SPL / nDTW with 95% bootstrap CIs (as ``bench train``).

The work folder is the one ``vlnverse bench train --policies vlnbert --out FILE.json`` leaves
(``FILE``): its ``train.jsonl``, ``val_seen.jsonl``, ``val_unseen.jsonl`` and ``waypoints/predictor.pt``.
``--out FILE.json`` also writes ``FILE.png`` (SR and nDTW per stage with CIs, and the rounds).
"""
from __future__ import annotations

import copy
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .train.data import _dataset
from .train.evaluation import evaluate
from .train.options import check_int_flags, required_path
from .train.recipe import (SENSORS, TABLE7_VALIDATION_EPISODES, TRAIN_SCENE_EPISODES, VAL_SEEN_FRACTION,
                           VALIDATION_EPISODES, policy_row, row_config)
from .train.report import table_lines
from .train.row import _train, train_waypoint_predictor

SOURCE_BODY = "r2r_ce"       # the body the source model and the waypoint predictor were trained with
TARGET_BODY = "low_base"     # --body default
SOURCE_EPOCHS = 10           # --epochs: the source model's IL epochs on the shipped train scenes
ROUNDS = 3                   # --rounds
ROUND_EPOCHS = 4             # --round-epochs: retraining epochs per online round
DAGGER_P = 0.5               # β = p^round
ONLINE_LR = 5e-4
ONLINE_MAX_STEPS = 15        # decisions per collected episode: 3x the ~5 the waypoint oracle takes on these homes
WORK_FILES = ("train.jsonl", "val_seen.jsonl", "val_unseen.jsonl", "waypoints/predictor.pt")
DEFAULT_RENDER = "default:primitives"  # --source-render / --target-render default: the simulator's defaults


def render_flag(value, flag: str):
    """The ``RenderConfig`` of a ``QUALITY:OBJECTS`` flag (None: ``DEFAULT_RENDER``); a bad value
    is a one-line ``ConfigError`` naming ``flag`` and the expected form."""
    from vlnverse.core.errors import ConfigError
    from vlnverse.run.setup import RenderConfig
    from vlnverse.scenes.object_meshes import OBJECT_STYLES
    from vlnverse.sim.types import RENDER_QUALITIES

    try:
        return RenderConfig.parse(DEFAULT_RENDER if value is None else str(value), flag)
    except ConfigError as exc:
        part = (exc.field or "").rpartition(".")[2] if (exc.field or "").startswith(flag + ".") else None
        raise ConfigError(f"got {value!r}" + (f" (unknown {part.upper()})" if part else ""), field=flag,
                          expected=f"QUALITY:OBJECTS, QUALITY one of {', '.join(RENDER_QUALITIES)}, "
                                   f"OBJECTS one of {', '.join(OBJECT_STYLES)} (default {DEFAULT_RENDER})") from None


@dataclass(frozen=True)
class TransferOptions:
    """The checked settings of a ``bench transfer`` run: the ``work`` folder of ``bench train``, the
    target ``body``, the source's IL ``epochs``, ``rounds`` online rounds of ``round_epochs`` epochs
    with STOP steps weighing ``stop_weight``, ``adapt`` (``--adapt-predictor``),
    ``validation_episodes`` val_seen episodes per round, the ``source_render`` / ``target_render``
    (``RenderConfig``), ``seed``, ``workers``, ``out`` (also its PNG) and ``waypoint_epochs``: the
    target body predictor's training epochs (None: the recipe's)."""

    work: Path
    body: str = TARGET_BODY
    epochs: int = SOURCE_EPOCHS
    rounds: int = ROUNDS
    round_epochs: int = ROUND_EPOCHS
    stop_weight: float = 1.0
    adapt: bool = False
    validation_episodes: int = VALIDATION_EPISODES
    source_render: Any = None
    target_render: Any = None
    seed: int = 0
    workers: int = 1
    out: str | None = None
    waypoint_epochs: int | None = None

    @classmethod
    def from_args(cls, args: Any) -> "TransferOptions":
        """The options of ``args`` (an ``argparse.Namespace`` of ``vlnverse bench transfer``; a flag
        it lacks takes its default); a bad value is a one-line ``ConfigError`` naming the flag."""
        from vlnverse.core.body import load_body
        from vlnverse.core.errors import ConfigError, VLNVerseError

        given = vars(args)
        expected = "the work folder of 'vlnverse bench train --policies vlnbert --out FILE.json' (FILE)"
        work = required_path(given.get("work"), "--work", expected)
        missing = [f for f in WORK_FILES if not (work / f).is_file()]
        if missing:
            raise ConfigError(f"{work} lacks {missing}", field="--work", expected=expected)
        body = given.get("body") or TARGET_BODY
        try:
            target = load_body(body)
        except VLNVerseError as exc:
            raise ConfigError(str(exc), field="--body", expected="a body preset name or a body YAML path") from None
        source_render = render_flag(given.get("source_render"), "--source-render")
        target_render = render_flag(given.get("target_render"), "--target-render")
        if (body == SOURCE_BODY or target == load_body(SOURCE_BODY)) and source_render == target_render:
            raise ConfigError(f"got {body!r}, the source body, and one render ({source_render.label()}) for both domains",
                              field="--body", expected=f"a body other than {SOURCE_BODY}, or a --target-render other "
                                                       f"than --source-render (a visual shift)")
        defaults = {"--epochs": ("epochs", SOURCE_EPOCHS), "--rounds": ("rounds", ROUNDS),
                    "--round-epochs": ("round_epochs", ROUND_EPOCHS),
                    "--validation-episodes": ("validation_episodes", VALIDATION_EPISODES)}
        counts = {flag: default if given.get(attr) is None else given[attr] for flag, (attr, default) in defaults.items()}
        check_int_flags([*((flag, value, 1) for flag, value in counts.items()),
                         ("--waypoint-epochs", given.get("waypoint_epochs"), 1)])
        stop_weight = 1.0 if given.get("stop_weight") is None else given["stop_weight"]
        if not isinstance(stop_weight, (int, float)) or not stop_weight > 0 or stop_weight == float("inf"):
            raise ConfigError(f"got {stop_weight!r}", field="--stop-weight", expected="a positive number (1: STOP weighs as any step)")
        return cls(work=work, body=body, epochs=counts["--epochs"], rounds=counts["--rounds"],
                   round_epochs=counts["--round-epochs"], stop_weight=float(stop_weight),
                   adapt=bool(given.get("adapt_predictor", False)), validation_episodes=counts["--validation-episodes"],
                   source_render=source_render, target_render=target_render, seed=int(given.get("seed", 0) or 0),
                   workers=int(given.get("workers") or 1), out=given.get("out"),
                   waypoint_epochs=given.get("waypoint_epochs"))


def source_config(work: Path, seed: int, workers: int, epochs: int, render=None) -> dict:
    """The source model's IL ``TrainConfig`` (a dict): the VLN-BERT row on the shipped train scenes,
    default body, frames drawn with ``render`` (a ``RenderConfig``; None: the defaults)."""
    from dataclasses import asdict

    from vlnverse.tasks.episode import save_episodes

    seen = _dataset("fine_grained", "train", TRAIN_SCENE_EPISODES, seed, work / "data_shipped_train", VAL_SEEN_FRACTION)
    folder = work / "transfer"
    folder.mkdir(parents=True, exist_ok=True)
    for split in ("train", "val_seen"):
        save_episodes(folder / f"shipped_{split}.jsonl", [e for e in seen if e.split == split])
    row = policy_row("vlnbert")
    params = {**row["params"], "waypoint_predictor": str(work / "waypoints" / "predictor.pt")}
    cfg = row_config(row, work, None, seed, "auto", workers, params, epochs)
    cfg.update(train=str(folder / "shipped_train.jsonl"), val={"val_seen": str(folder / "shipped_val_seen.jsonl")},
               out=str(folder / "source"))
    if render is not None:
        cfg["render"] = asdict(render)
    return cfg


def online_config(source: dict, work: Path, body: str, rounds: int, round_epochs: int, stop_weight: float = 1.0,
                  validation_episodes: int = VALIDATION_EPISODES, render=None) -> dict:
    """The online fine-tuning ``TrainConfig`` (a dict): DAgger from the source's ``best.pt`` with the
    target ``body`` on the work folder's training homes, each round validated on ``validation_episodes``,
    everything drawn with the target ``render`` (a ``RenderConfig``; None: the source's)."""
    from dataclasses import asdict

    cfg = copy.deepcopy(source)
    if render is not None:
        cfg["render"] = asdict(render)
    cfg.update(mode="dagger", init=str(Path(source["out"]) / "best.pt"), body=body,
               train=str(work / "train.jsonl"), val={"val_seen": str(work / "val_seen.jsonl")},
               out=str(work / "transfer" / "online"),
               validation={"metric": "nDTW", "every": 1, "limit": validation_episodes, "split": "val_seen"},
               dagger={"rounds": rounds, "p": DAGGER_P, "epochs": round_epochs, "episodes": None,
                       "include_teacher_data": True, "max_steps": ONLINE_MAX_STEPS})
    cfg["il"] = {**cfg["il"], "lr": ONLINE_LR, "stop_weight": stop_weight}
    return cfg


def run(args) -> dict:
    """Train the source, evaluate it zero-shot with the target body, fine-tune online, evaluate
    after round 1 and the last round; the figures (see the module docstring)."""
    import shutil

    from vlnverse.run.setup import NamedSpec
    from vlnverse.learn.agent import require_torch
    from vlnverse.learn.checkpoint import resolve_device

    require_torch("vlnverse bench transfer", field=None)
    from vlnverse.learn.checkpoint import swap_predictor

    o = TransferOptions.from_args(args)
    work, body, epochs, rounds, seed, workers = o.work, o.body, o.epochs, o.rounds, o.seed, o.workers
    source_render, target_render = o.source_render, o.target_render
    # a fresh run: the generated episodes are reused, the models and their evaluations are not
    for stale in [work / "transfer", *(work / "eval").glob("transfer_*")]:
        shutil.rmtree(stale, ignore_errors=True)
    load_start, t0 = os.getloadavg(), time.perf_counter()
    source = source_config(work, seed, workers, epochs, render=source_render)
    src = _train(source, float("inf"), 1.0)
    t_source = time.perf_counter()
    online = online_config(source, work, body, rounds, o.round_epochs, o.stop_weight, o.validation_episodes,
                           render=target_render)
    table: list[dict] = []

    def stage(name: str, checkpoint: str) -> None:  # the target domain: its body and its render
        got = evaluate(NamedSpec("policy", {"checkpoint": checkpoint, "device": "auto"}), "val_unseen", "telhop", work,
                       seed, workers, SENSORS, f"transfer_{name}", body=body, render=target_render)
        table.append({"agent": name, "split": "val_unseen", "mode": "telhop", "body": body,
                      "render": target_render.label(), **got})

    source_checkpoint = online["init"]
    stage("zero_shot", source_checkpoint)
    predictor = None
    if o.adapt:  # the target body's own predictor swapped in; the rounds start from it, its oracle teaches
        folder = f"waypoints_{Path(body).stem}" + ("" if target_render.is_default() else
                                                   f"_{target_render.quality}_{target_render.objects}")
        predictor = train_waypoint_predictor(work / "transfer", 1.0, seed, body=body, folder=folder, render=target_render,
                                             epochs=o.waypoint_epochs)
        adapted = str(work / "transfer" / "source_adapted_predictor.pt")
        swap_predictor(online["init"], predictor["path"], adapted)
        online["init"] = adapted
        online["policy"]["params"]["waypoint_predictor"] = predictor["path"]
        stage("zero_shot_adapted_predictor", adapted)
    t_zero = time.perf_counter()
    got = _train(online, float("inf"), 1.0)
    t_online = time.perf_counter()
    out = Path(online["out"])
    stage("online_round_1", str(out / "round_01.pt"))
    if rounds > 1:
        stage(f"online_round_{rounds}", str(out / "last.pt"))
    before, after = table[0]["SR"]["mean"], table[-1]["SR"]["mean"]
    adapted_before = table[1]["SR"]["mean"] if o.adapt else None
    selected_round = _selected_round(got) or rounds  # no validation: best.pt holds the last weights
    if selected_round in (1, rounds):  # already evaluated: the same weights
        selected = next(r for r in table if r["agent"] == f"online_round_{selected_round}")
    else:
        stage("online_selected", str(out / "best.pt"))
        selected = table[-1]
    figures = {
        "source": {"body": SOURCE_BODY, "render": source_render.label(), "scenes": "the 6 shipped train scenes",
                   "il_epochs": epochs,
                   "episodes": src["il"]["episodes"], "accuracy": src["il"]["accuracy"], "seconds": src["il"]["seconds"],
                   "checkpoint": source_checkpoint},
        "target": {"body": body, "render": target_render.label(), "train": online["train"], "teacher_SR": (got.get("cache") or {}).get("teacher_SR"),
                   "teacher_frames": (got.get("cache") or {}).get("frames"),
                   "adapted_predictor": predictor and {k: predictor[k] for k in ("path", "held_out", "seconds")}},
        "online": {"rounds": rounds, "p": DAGGER_P, "epochs_per_round": o.round_epochs, "lr": ONLINE_LR,
                   "include_teacher_data": True, "stop_weight": o.stop_weight, "max_steps": ONLINE_MAX_STEPS,
                   "per_round": [{k: r.get(k) for k in ("round", "beta", "collected_episodes", "collected_steps",
                                                        "collection_SR", "train_accuracy", "env_steps_per_s")}
                                 for r in got.get("dagger", [])]},
        "table": table, "table_text": table_lines(table),
        "SR_after_over_before": round(after / before, 2) if before else None,
        "SR_after_over_adapted_zero_shot": round(after / adapted_before, 2) if adapted_before else None,
        "selected": {"round": selected_round, "validation_episodes": o.validation_episodes, "metric": "nDTW",
                     "agent": selected["agent"], "SR": selected["SR"]},
        "SR_selected_over_before": round(selected["SR"]["mean"] / before, 2) if before else None,
        "SR_selected_over_adapted_zero_shot": (round(selected["SR"]["mean"] / adapted_before, 2)
                                               if adapted_before else None),
        "seconds": {"source": round(t_source - t0, 1), "zero_shot_eval": round(t_zero - t_source, 1),
                    "online": round(t_online - t_zero, 1), "eval": round(time.perf_counter() - t_online, 1)},
        "load_average_1m": {"start": round(load_start[0], 2), "end": round(os.getloadavg()[0], 2)},
        "device": str(resolve_device("auto")), "torch_threads": 1, "cpu_count": os.cpu_count(), "workers": workers,
        "work_dir": str(work),
    }
    if o.out:
        figures["plot"] = str(Path(o.out).with_suffix(".png"))
        plot_stages(figures, Path(figures["plot"]))
    return figures


def table7_stage(args, work: Path, workers: int, results: dict, table: list) -> dict:
    """The VLN-BERT row's online fine-tuning as the paper's Table 7 measures it: a VLN-BERT trained
    elsewhere (the shipped train scenes, the ``r2r_ce`` body), evaluated zero-shot in the new domain
    (``transfer.TARGET_BODY`` in this run's training homes: "before"), then fine-tuned online there
    ("after": the round chosen on ``TABLE7_VALIDATION_EPISODES`` val_seen episodes), with the target
    body's own waypoint predictor swapped in first (``--adapt-predictor``, its own stage) --
    ``vlnverse bench transfer`` on this run's work folder (``run``). Its val_unseen
    lines join ``table`` as ``vlnbert_t7_<stage>``; returns the lift figures beside the in-domain
    ones (``vlnbert_il`` -> ``vlnbert_il_dagger``, which has nothing to adapt to)."""
    import argparse

    stage_args = argparse.Namespace(work=str(work), body=None, epochs=None, rounds=None, round_epochs=None,
                                    stop_weight=None, seed=args.seed, workers=workers, adapt_predictor=True,
                                    validation_episodes=TABLE7_VALIDATION_EPISODES, source_render=None,
                                    target_render=None, waypoint_epochs=getattr(args, "waypoint_epochs", None),
                                    out=str(Path(args.out).with_name(Path(args.out).stem + "_table7.json"))
                                    if args.out else None)
    got = run(stage_args)
    for line in got["table"]:
        table.append({**line, "agent": f"vlnbert_t7_{line['agent']}"})

    def sr(agent: str):
        return results["telhop"]["val_unseen"][agent]["SR"]

    def lift(before: dict, after: dict) -> dict:
        return {"before": before, "after": after,
                "ratio": round(after["mean"] / before["mean"], 2) if before["mean"] else None}

    stages = {line["agent"]: line["SR"] for line in got["table"]}
    selected = got["selected"]["SR"]
    return {
        "protocol": ("the paper's Table 7: trained elsewhere (shipped train scenes, r2r_ce body), zero-shot in the "
                     f"new domain ({got['target']['body']} in the training homes), then online rounds there; "
                     "the round chosen on val_seen"),
        "split": "val_unseen", "mode": "telhop",
        "table7": lift(stages["zero_shot"], selected),
        "table7_over_adapted_predictor": lift(stages["zero_shot_adapted_predictor"], selected),
        "in_domain": lift(sr("vlnbert_il"), sr("vlnbert_il_dagger")),
        "selected": got["selected"], "transfer": got,
    }


def _selected_round(got: dict) -> int | None:
    """The online round whose checkpoint val_seen kept as ``best.pt`` (the trainer's ``best`` tag
    ``round_NN``), or None when no validation ran."""
    tag = (got.get("best") or {}).get("tag") or ""
    return int(tag.split("_")[1]) if tag.startswith("round_") else None


def _render_note(label: str | None) -> str:
    """`` (render QUALITY:OBJECTS)`` for a render other than the defaults, else nothing."""
    return "" if label in (None, DEFAULT_RENDER) else f" (render {label})"


def plot_stages(figures: dict, path: Path) -> None:
    """PNG: SR and nDTW with their 95% CIs per stage, and the rounds' collection SR and accuracy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = figures["table"]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    names = [r["agent"] for r in table]
    for ax, metric in zip(axes[:2], ("SR", "nDTW")):
        means = [r[metric]["mean"] for r in table]
        err = [[m - r[metric]["lo"] for m, r in zip(means, table)], [r[metric]["hi"] - m for m, r in zip(means, table)]]
        ax.bar(names, means, yerr=err, capsize=4, color=["#999999" if n.startswith("zero_shot") else "#3b7dd8" for n in names])
        ax.set_title(f"val_unseen {metric} (95% CI), body {figures['target']['body']}"
                     + _render_note(figures["target"].get("render")))
        ax.tick_params(axis="x", rotation=15)
    rounds = figures["online"]["per_round"]
    axes[2].plot([r["round"] for r in rounds], [r["collection_SR"] for r in rounds], "o-", label="collection SR")
    axes[2].plot([r["round"] for r in rounds], [r["train_accuracy"] for r in rounds], "s-", label="train accuracy")
    axes[2].set_xticks([r["round"] for r in rounds])
    axes[2].set_xlabel("online round")
    axes[2].legend()
    axes[2].set_title("online rounds")
    fig.suptitle(f"bench transfer: {figures['source']['body']}{_render_note(figures['source'].get('render'))} (shipped "
                 f"scenes) -> {figures['target']['body']}{_render_note(figures['target'].get('render'))} "
                 f"(generated homes); device {figures['device']}, load {figures['load_average_1m']}")
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=90)
    plt.close(fig)
    tmp.replace(path)
