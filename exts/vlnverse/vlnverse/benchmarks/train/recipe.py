"""``bench train``'s recipe: the policy rows and what every row shares.

A row's own settings (policy, parameters, learning rate, batch size, whether it needs the
waypoint predictor, IL settings of its own) are those of its shipped train config
``tasks/train/<row>_fine_grained.yaml`` (``policy_rows``); the multi-task row is the ``gama``
row's GAMA trained on the task mix of ``tasks/train/gama_multitask.yaml`` (``multitask_tasks``).
What is the bench's (the table order, which rows run by default, and what every row shares so
that the rows compare: rig, epochs, weight averaging, selection, DAgger round, step budget) is
here. Jobs of ``bench train --seeds`` take this module's ``CARRIED`` constants from the driver.
"""
from __future__ import annotations

import copy
import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_BUDGET = 1200.0        # seconds per row that the dataset sizes are scaled against (--budget)
IL_EPOCHS = 15                 # IL epochs per row (--epochs): the budget, the same for every row
IL_EMA = 0.98                  # every row's weight averaging (il.ema): validated, selected and evaluated weights
DAGGER_EPOCH_SHARE = 0.2       # the DAgger round retrains for this share of --epochs
DAGGER_ROUND = {"rounds": 1, "p": 0.5}  # every row's DAgger round (VLN-BERT's online fine-tuning): beta = p
DAGGER_LR = 0.0005             # its learning rate (il.lr of the round)
DAGGER_EPISODE_SHARE = 4       # it collects 1 / this of the IL episodes
RESOLUTION = 64
SENSORS = [{"name": "rgb", "kind": "rgb", "width": RESOLUTION, "height": RESOLUTION},
           {"name": "depth", "kind": "depth", "width": RESOLUTION, "height": RESOLUTION}]
VAL_SEEN_FRACTION = 0.25
TRAIN_SCENE_EPISODES = 20      # per train scene at the default budget (6 scenes: ~90 train, ~30 val_seen)
EVAL_EPISODES = 50             # per val_unseen and per test scene (2 + 2 scenes: 100 + 100 episodes)
TRAIN_HOMES = 30               # generated training homes (--train-homes; 0: the 6 shipped train scenes)
EPISODES_PER_HOME = 8          # per generated home (--episodes-per-home): the recipe of tasks/train/cma_fine_grained.yaml
VAL_SEEN_HOMES_EPISODES = 40   # val_seen episodes held out of the generated homes' episodes
VALIDATION_EPISODES = 6        # val_seen episodes of each IL validation (selection and curve)
VALIDATION_EVERY = 4           # IL epochs between validations
TABLE7_VALIDATION_EPISODES = 40  # val_seen episodes choosing the online round of the VLN-BERT row's Table 7 stage
#: the VLN-BERT row's Table 7 stage (``bench transfer`` on the run's work folder), resolved when a run
#: needs it: the transfer bench builds on this package, so naming it here keeps the imports one-way
TABLE7_STAGE = "vlnverse.benchmarks.transfer:table7_stage"
RENDER_COMPARE_EPISODES = 12   # training episodes rendered both ways for the render-path figure
BOOTSTRAP_SAMPLES = 2000
#: episodes stepped in lockstep in every evaluation (``vlnverse eval --envs``; same records as 1)
EVAL_ENVS = 4
METRICS = ("SR", "SPL", "nDTW")
#: the tasks the rows can be trained and evaluated on (``--task``; the first is the default)
TASKS = ("fine_grained", "coarse_grained")
#: the splits every agent is evaluated on (Tel-Hop; the best row also under Strict on the held-out two)
SPLITS = ("val_seen", "val_unseen", "test")
#: the from-scratch encoders of ``--encoder cnn``: they stand for a row config's ``{type:
#: pretrained, path: auto}`` encoders (``--encoder pretrained`` gives every row the bench's own)
ENCODER = {"type": "cnn", "channels": 16, "out_dim": 64}
#: IL settings every row trains with (``row_config``); a row config's ``il`` value that differs is
#: the row's own (``epochs`` and ``max_seconds`` are the bench's budget: ``--epochs``, ``--budget``)
SHARED_IL = {"inflection_weight": "auto", "all_instructions": True, "ema": IL_EMA}
#: the multi-task row's tasks and their observation setups: those of ``tasks/train/<name>.yaml``
MULTITASK_CONFIG = "gama_multitask"
#: default per-task episode counts of the multi-task row's other tasks, as a share of the rows'
#: fine-grained counts (``--task-episodes``, ``--task-eval-episodes``)
TASK_SHARE = 0.25
#: the held-out splits the multi-task row reports per task (val_seen: the trainer's ``tasks.json``)
MULTITASK_SPLITS = ("val_unseen", "test")
#: step budget of every row's rollouts and evaluations; None: each task's own (``tasks/types/<task>/config.yaml``)
MAX_STEPS: int | None = None
#: constants a job's process of ``bench train --seeds`` takes from the driver's (they shape the results)
CARRIED = ("MAX_STEPS", "BOOTSTRAP_SAMPLES", "RESOLUTION", "SENSORS", "VALIDATION_EVERY")


@dataclass(frozen=True)
class BenchRow:
    """A row of the table: its ``name`` (agents ``<name>_il`` and ``<name>_il_dagger``), the train
    config holding its recipe, whether it trains on the task mix of ``MULTITASK_CONFIG`` and
    whether it runs when ``--policies`` is not given."""

    name: str
    config: str
    multitask: bool = False
    default: bool = True


#: The rows, in table order. Every policy gets the same budget, splits, validation and DAgger
#: round (for VLN-BERT the DAgger round is the paper's online fine-tuning: schedule sampling
#: between oracle and prediction). A row whose config has a ``waypoint_predictor`` first trains
#: the candidate waypoint predictor on panoramas of the train scenes (outside the budget). The
#: multi-task row (GAMA as the paper's unified agent) is not in the default set: about twice the
#: ``gama`` row's data and five times its held-out evaluation.
ROWS = (BenchRow("seq2seq", "seq2seq_fine_grained"), BenchRow("cma", "cma_fine_grained"),
        BenchRow("rdp", "rdp_fine_grained"), BenchRow("vlnbert", "vlnbert_fine_grained"),
        BenchRow("hnr", "hnr_fine_grained"), BenchRow("gama", "gama_fine_grained"),
        BenchRow("gama_multitask", "gama_fine_grained", multitask=True, default=False))


def _encoder(spec: Any) -> Any:
    """A row config's encoder as the bench's row holds it: the recipe's pretrained one (``path:
    auto``) is ``ENCODER`` (``--encoder cnn``; ``--encoder pretrained`` puts the bench's own in)."""
    if isinstance(spec, dict) and spec.get("type") == "pretrained" and spec.get("path") == "auto":
        return copy.deepcopy(ENCODER)
    return spec


def row_recipe(row: BenchRow, configs: Path | None = None) -> dict:
    """The recipe of ``row`` read from its train config (in ``configs``, default the shipped
    ``tasks/train``): ``{name, policy, params, lr, batch_size}`` plus ``waypoint_predictor: True``
    when its policy reads a predictor (trained by the bench: the config's value is dropped),
    ``il`` with the config's IL settings that differ from ``SHARED_IL``, and ``multitask`` /
    ``default`` for the multi-task row. One-line ``ConfigError`` naming the file on a bad field."""
    import yaml

    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.config import resolve_train_config_path

    path = (Path(configs) / f"{row.config}.yaml") if configs is not None else resolve_train_config_path(row.config)
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    policy, il = data.get("policy"), data.get("il")
    if not isinstance(policy, dict) or not isinstance(policy.get("name"), str):
        raise ConfigError(f"{path}: got {policy!r}", field="policy.name", expected="a policy name")
    if not isinstance(il, dict) or not all(isinstance(il.get(k), (int, float)) for k in ("lr", "batch_size")):
        raise ConfigError(f"{path}: got {il!r}", field="il", expected="il.lr and il.batch_size numbers")
    params = dict(policy.get("params") or {})
    predictor = params.pop("waypoint_predictor", None) is not None
    for key in ("rgb_encoder", "depth_encoder"):
        if key in params:
            params[key] = _encoder(params[key])
    out: dict = {"name": row.name, "policy": policy["name"], "params": params, "lr": il["lr"],
                 "batch_size": il["batch_size"]}
    if predictor:
        out["waypoint_predictor"] = True
    own = {k: v for k, v in il.items() if k not in ("epochs", "max_seconds", "lr", "batch_size")
           and (k not in SHARED_IL or SHARED_IL[k] != v)}
    if own:
        out["il"] = own
    if row.multitask:
        out["multitask"] = True
    if not row.default:
        out["default"] = False
    return out


def policy_rows(configs: Path | None = None) -> list[dict]:
    """Every row's recipe (``row_recipe``), in table order."""
    return [row_recipe(row, configs) for row in ROWS]


def policy_row(name: str, configs: Path | None = None) -> dict:
    """The recipe of the row ``name``."""
    return row_recipe(next(r for r in ROWS if r.name == name), configs)


def select_rows(policies: str | None, configs: Path | None = None) -> list[dict]:
    """The rows named by ``--policies`` (a comma-separated string; None: every default row), in
    table order; a name that is no row is a one-line ``ConfigError`` naming the flag."""
    from vlnverse.core.errors import ConfigError

    if policies is None:
        return [row_recipe(r, configs) for r in ROWS if r.default]
    names = [n.strip() for n in str(policies).split(",") if n.strip()]
    known = [r.name for r in ROWS]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise ConfigError(f"unknown policy row(s) {unknown}" if unknown else f"got {policies!r}: names no row",
                          field="--policies", expected=f"a comma-separated subset of {known}")
    return [row_recipe(r, configs) for r in ROWS if r.name in names]


#: the shared components' recipes (``component_recipes``) when they joined the work identity: folders
#: made before then trained with these, so the components change the identity only when they differ
COMPONENTS_AT_START = {
    "encoder": {"channels": 32, "out_dim": 128, "objectives": ["semantic", "depth", "room"], "epochs": 15,
                "batch_size": 32, "lr": 0.001, "body": "r2r_ce", "threads": 1, "frames": 1500, "held_out_frames": 120},
    "predictor": {"scenes": "train", "val_scenes": "val_unseen", "poses_per_scene": 150, "val_poses_per_scene": 60,
                  "epochs": 15, "batch_size": 32, "lr": 0.001, "body": "r2r_ce", "model": {"rgb": True},
                  "hit_radius": 1.0, "threads": 1}}


def component_recipes() -> dict:
    """The recipes of what a seed's rows share: the visual encoder's pretraining
    (``learn.encoder.pretraining.recipe_identity``) and the waypoint predictor's training
    (``learn.waypoints.train.recipe_identity``; ``--waypoint-epochs`` is a run setting)."""
    from vlnverse.learn.encoder.pretraining import recipe_identity as encoder_recipe
    from vlnverse.learn.waypoints.train import recipe_identity as predictor_recipe

    return {"encoder": encoder_recipe(), "predictor": predictor_recipe()}


def recipe_identity(rows: list[dict] | None = None) -> dict:
    """What the rows' results depend on besides the run's settings (hashed into a ``bench train
    --seeds`` work folder's identity): every row's recipe, the rig, weight averaging, DAgger
    round, validation interval, step budget and, when they differ from ``COMPONENTS_AT_START``,
    the shared encoder's and waypoint predictor's recipes."""
    components = component_recipes()
    return {"rows": policy_rows() if rows is None else rows, "sensors": SENSORS, "il_ema": IL_EMA,
            "dagger": DAGGER_ROUND, "dagger_lr": DAGGER_LR, "dagger_epoch_share": DAGGER_EPOCH_SHARE,
            "dagger_episode_share": DAGGER_EPISODE_SHARE, "validation_every": VALIDATION_EVERY,
            "max_steps": MAX_STEPS, **({} if components == COMPONENTS_AT_START else {"components": components})}


def table7_stage():
    """The VLN-BERT row's Table 7 stage (``TABLE7_STAGE``), imported when a run needs it."""
    module, _, name = TABLE7_STAGE.partition(":")
    return getattr(importlib.import_module(module), name)


def row_config(row: dict, work: Path, budget: float | None, seed: int, device: str, workers: int, params: dict,
               epochs: int = IL_EPOCHS, validation_episodes: int = VALIDATION_EPISODES, language: str = "v1",
               task: str = "fine_grained") -> dict:
    """The IL ``TrainConfig`` (as a dict) of a row: the same data, rig, epochs, budget share and selection for every
    row (``validation_episodes`` val_seen episodes every ``VALIDATION_EVERY`` epochs); ``language``: the
    wording of its episode files (``--language``), which its checkpoints record; ``task``: theirs (``--task``)."""
    return {"policy": {"name": row["policy"], "params": params}, "task": task,
            **({"language": language} if language != "v1" else {}),   # v1: the job configs of before
            "train": str(work / "train.jsonl"), "val": {"val_seen": str(work / "val_seen.jsonl")},
            "collision_mode": "telhop", "sensors": SENSORS, "threads": 1, "workers": workers, "max_steps": MAX_STEPS,
            "il": {"epochs": epochs, "batch_size": row["batch_size"], "lr": row["lr"], "inflection_weight": "auto",
                   "max_seconds": None if budget is None else 0.50 * budget, "all_instructions": True, "ema": IL_EMA,
                   **row.get("il", {})},
            "validation": {"metric": "nDTW", "every": VALIDATION_EVERY, "limit": validation_episodes, "split": "val_seen",
                           "envs": EVAL_ENVS},
            "device": device, "seed": seed, "cache": {"dir": str(work / "cache")}, "out": str(work / "il" / row["name"])}


def dagger_config(base: dict, name: str, work: Path, init: str, budget: float | None, epochs: int,
                  validation_episodes: int, il_episodes: int) -> dict:
    """The DAgger round's ``TrainConfig`` (as a dict) of a row whose IL config is ``base``: from
    ``init``, ``DAGGER_ROUND`` retraining for ``DAGGER_EPOCH_SHARE`` of ``epochs`` at ``DAGGER_LR``
    on 1 / ``DAGGER_EPISODE_SHARE`` of the ``il_episodes``, 10% of the ``budget``."""
    return {**base, "mode": "dagger", "init": init, "out": str(work / "dagger" / name),
            "validation": {"metric": "nDTW", "limit": validation_episodes, "split": "val_seen"},
            "il": {**base["il"], "lr": DAGGER_LR, "max_seconds": None if budget is None else 0.10 * budget},
            "dagger": {**DAGGER_ROUND, "epochs": max(1, round(epochs * DAGGER_EPOCH_SHARE)),
                       "episodes": max(2, il_episodes // DAGGER_EPISODE_SHARE)}}


def multitask_tasks(config: str = MULTITASK_CONFIG) -> list[dict]:
    """The task mix of the multi-task row: ``{task, name, observation}`` per ``tasks`` entry of the
    shipped train config ``config`` (its order; ``observation`` None: the panorama); the first
    must be ``fine_grained`` (it trains on the other rows' data)."""
    import yaml

    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.config import resolve_train_config_path
    from vlnverse.learn.waypoints.grid import ObservationSetup

    path = resolve_train_config_path(config)
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    out = []
    for i, t in enumerate(data.get("tasks") or []):
        if not isinstance(t, dict) or not isinstance(t.get("task"), str):
            raise ConfigError(f"{path}: got {t!r}", field=f"tasks[{i}].task", expected="a task name")
        obs = t.get("observation")
        out.append({"task": str(t["task"]), "name": str(t.get("name") or t["task"]),
                    "observation": None if obs is None else ObservationSetup.parse(obs, f"{path}: tasks[{i}].observation").to_dict()})
    if not out or out[0]["task"] != "fine_grained":
        raise ConfigError(f"{path}: tasks {[t['task'] for t in out]}", field="tasks",
                          expected="fine_grained first (the multi-task row trains it on the other rows' data)")
    return out


def multitask_entries(work: Path, tasks: list[dict]) -> list[dict]:
    """The ``TrainConfig.tasks`` entries of the multi-task row: each task's ``work/tasks/<name>``
    train and val_seen files (``data.multitask_data``) and its observation setup."""
    return [{"task": t["task"], "name": t["name"], "train": str(work / "tasks" / t["name"] / "train.jsonl"),
             "val": {"val_seen": str(work / "tasks" / t["name"] / "val_seen.jsonl")},
             **({"observation": t["observation"]} if t["observation"] else {})} for t in tasks]
