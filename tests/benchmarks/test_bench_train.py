"""``vlnverse bench train``'s policy rows: every row names a registered policy whose params build,
and ``--policies`` picks rows or fails in one line naming the flag."""
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("torch")

from test_vlnbert import predictor_file  # noqa: E402,F401 (the session fixture)


def test_every_row_builds_its_policy_on_the_bench_rig():
    from vlnverse.benchmarks.train.recipe import SENSORS, policy_rows
    from vlnverse.learn.policies import build_policy
    from vlnverse.learn.vocab import Vocabulary

    rig = [{"name": s["name"], "kind": s["kind"], "shape": [s["height"], s["width"], 3] if s["kind"] == "rgb"
            else [s["height"], s["width"]]} for s in SENSORS]
    rows = policy_rows()
    assert [r["name"] for r in rows] == ["seq2seq", "cma", "rdp", "vlnbert", "hnr", "gama", "gama_multitask"]
    for row in rows:
        params = dict(row["params"])
        if row.get("waypoint_predictor"):  # the bench trains one first; an untrained one of default size here
            params["waypoint_predictor"] = {}
        policy = build_policy(row["policy"], params, Vocabulary.build(["go to the kitchen"]), rig)
        assert policy.name == row["policy"] and row["lr"] > 0


def test_policies_flag_picks_rows_and_rejects_unknown_names():
    from vlnverse.benchmarks.train.recipe import select_rows
    from vlnverse.core.errors import ConfigError

    assert [r["name"] for r in select_rows(None)] == ["seq2seq", "cma", "rdp", "vlnbert", "hnr", "gama"]
    assert [r["name"] for r in select_rows("gama,hnr,vlnbert")] == ["vlnbert", "hnr", "gama"]
    assert [r["name"] for r in select_rows("rdp, cma")] == ["cma", "rdp"]  # table order
    assert [r["name"] for r in select_rows("cma,seq2seq")] == ["seq2seq", "cma"]
    assert [r["name"] for r in select_rows("rdp")] == ["rdp"]
    assert [r["name"] for r in select_rows("vlnbert,rdp")] == ["rdp", "vlnbert"]
    assert [r["name"] for r in select_rows("gama_multitask,gama")] == ["gama", "gama_multitask"]
    with pytest.raises(ConfigError, match="--policies.*seq2sq"):
        select_rows("rdp,seq2sq")


def test_bootstrap_ci_matches_a_hand_computed_case():
    """[0, 0, 0, 1]: a resample's mean is k/4 with k ~ Binomial(4, 1/4): P(k <= 2) = 0.949 and
    P(k <= 3) = 0.996, so the 2.5% and 97.5% quantiles of the means are 0 and 0.75."""
    from vlnverse.core.stats import bootstrap_ci

    ci = bootstrap_ci([0, 0, 0, 1], seed=0)
    assert ci == {"mean": 0.25, "lo": 0.0, "hi": 0.75, "n": 4}
    assert bootstrap_ci([0, 0, 0, 1], seed=0) == ci  # seeded
    assert bootstrap_ci([1.0, 1.0, 1.0], seed=3) == {"mean": 1.0, "lo": 1.0, "hi": 1.0, "n": 3}
    wide = bootstrap_ci([0, 1], seed=1)  # means 0, 0.5, 1 with probabilities 1/4, 1/2, 1/4
    assert (wide["lo"], wide["hi"]) == (0.0, 1.0)
    many = bootstrap_ci([1] * 30 + [0] * 70, seed=0)  # normal approximation: 0.3 +- 1.96 * 0.0458
    assert many["mean"] == 0.3 and abs(many["lo"] - 0.21) <= 0.02 and abs(many["hi"] - 0.39) <= 0.02
    assert bootstrap_ci([], seed=0) == {"mean": None, "lo": None, "hi": None, "n": 0}


def test_episode_metrics_and_table_from_eval_records(tmp_path):
    import json

    from vlnverse.benchmarks.train.evaluation import episode_metrics
    from vlnverse.benchmarks.train.report import table_lines
    from vlnverse.core.stats import bootstrap_ci

    with open(tmp_path / "episodes.jsonl", "w") as fh:
        for sr, spl, ndtw in ((1.0, 0.8, 0.9), (0.0, 0.0, None), (1.0, 0.5, 0.7)):
            fh.write(json.dumps({"metrics": {"SR": sr, "SPL": spl, "nDTW": ndtw}}) + "\n")
    per = episode_metrics(tmp_path)
    assert per == {"SR": [1.0, 0.0, 1.0], "SPL": [0.8, 0.0, 0.5], "nDTW": [0.9, 0.0, 0.7]}
    row = {"agent": "cma_il", "split": "val_unseen", "mode": "telhop", "episodes": 3,
           **{m: bootstrap_ci(v, seed=0) for m, v in per.items()}}
    header, line = table_lines([row])
    assert header.split()[:4] == ["agent", "split", "mode", "n"]
    assert line.startswith("cma_il") and "0.667 [" in line and " 3 " in line


@pytest.mark.parametrize("flags, field", [({"train_homes": -1}, "--train-homes"), ({"workers": 0}, "--workers"),
                                          ({"eval_episodes": -1}, "--eval-episodes"),
                                          ({"episodes_per_home": 0}, "--episodes-per-home")])
def test_bench_count_flags_are_one_line_errors(flags, field):
    from vlnverse.benchmarks.train.options import check_counts
    from vlnverse.core.errors import ConfigError

    args = {"homes": None, "workers": 1, "per_held_out": 50, "per_home": None}
    args.update({{"train_homes": "homes", "eval_episodes": "per_held_out", "episodes_per_home": "per_home"}.get(k, k): v
                 for k, v in flags.items()})
    with pytest.raises(ConfigError, match=field):
        check_counts(args["homes"], args["workers"], args["per_held_out"], args["per_home"])


def test_validation_episodes_flag_sets_every_rows_selection_and_refuses_non_positive_counts(tmp_path):
    import argparse

    from vlnverse.benchmarks.train import run
    from vlnverse.benchmarks.train.recipe import IL_EMA, VALIDATION_EPISODES, policy_row, row_config
    from vlnverse.core.errors import ConfigError

    row = policy_row("cma")
    assert row_config(row, tmp_path, None, 0, "cpu", 1, {})["validation"]["limit"] == VALIDATION_EPISODES == 6
    assert row_config(row, tmp_path, None, 0, "cpu", 1, {}, validation_episodes=40)["validation"]["limit"] == 40
    assert row_config(row, tmp_path, None, 0, "cpu", 1, {})["il"]["ema"] == IL_EMA == 0.98  # every row averages
    il = row_config({**row, "il": {"ema": 0.0}}, tmp_path, None, 0, "cpu", 1, {})["il"]  # a row's own IL settings win
    assert il["ema"] == 0.0 and il["lr"] == row["lr"] and il["epochs"] == 15
    args = argparse.Namespace(name="train", policies="cma", budget=None, epochs=None, validation_episodes=0, seed=0,
                              out=str(tmp_path / "bt.json"), render_only=False)
    with pytest.raises(ConfigError, match="--validation-episodes") as err:
        run(args)
    assert "\n" not in str(err.value) and ">= 1" in str(err.value)
    assert not (tmp_path / "bt").exists()  # refused before any work


@pytest.mark.parametrize("name", ["seq2seq", "cma", "rdp", "vlnbert", "hnr", "gama"])
def test_each_rows_shipped_config_is_the_recipe_bench_train_runs(name, tmp_path):
    """``tasks/train/<row>_fine_grained.yaml`` trains what ``bench train``'s row trains: the row read
    from it (``policy_row``) gives back its policy and parameters (the recipe's encoder and waypoint
    predictor as ``auto``), and the config has the bench's rig, collision mode, IL schedule,
    selection, generated homes and DAgger round (whose ``il.lr`` its header gives)."""
    from dataclasses import asdict

    from vlnverse.benchmarks.train import recipe as R
    from vlnverse.core.io import to_jsonable
    from vlnverse.run.setup import sensor_config
    from vlnverse.learn.config import load_train_config, resolve_train_config_path
    from vlnverse.learn.homes import HomesSource

    row = R.policy_row(name)
    params = dict(row["params"])
    if "rgb_encoder" in params:  # bench train's default --encoder pretrained: the recipe's encoder, frozen
        params["rgb_encoder"] = params["depth_encoder"] = {"type": "pretrained", "path": "auto", "frozen": True}
    if row.get("waypoint_predictor"):
        params["waypoint_predictor"] = "auto"
    want = R.row_config(row, tmp_path, None, 0, "auto", 1, params)
    path = resolve_train_config_path(f"{name}_fine_grained")
    got = load_train_config(path).to_dict()
    assert got["policy"] == to_jsonable(want["policy"])
    assert got["sensors"] == [to_jsonable(asdict(sensor_config(s))) for s in want["sensors"]]
    assert (got["task"], got["collision_mode"], got["max_steps"]) == (want["task"], "telhop", want["max_steps"])
    assert {k: got["il"][k] for k in want["il"] if k != "max_seconds"} == \
        {k: v for k, v in want["il"].items() if k != "max_seconds"}
    assert {k: got["validation"][k] for k in want["validation"]} == want["validation"]
    homes = HomesSource(homes=R.TRAIN_HOMES, episodes_per_home=R.EPISODES_PER_HOME)
    assert {k: got["train"][k] for k in ("homes", "seed", "episodes_per_home")} == \
        {"homes": homes.homes, "seed": homes.seed, "episodes_per_home": homes.episodes_per_home}
    # held-out episodes of the same homes, the subset bench train validates on (test_homes.py)
    assert got["val"]["val_seen"] == {**got["train"], "val_seen_episodes": R.VAL_SEEN_HOMES_EPISODES}
    assert {k: got["dagger"][k] for k in R.DAGGER_ROUND} == R.DAGGER_ROUND
    assert got["dagger"]["epochs"] == max(1, round(R.IL_EPOCHS * R.DAGGER_EPOCH_SHARE))
    assert f"il.lr={R.DAGGER_LR:g}" in path.read_text(encoding="utf-8")


def test_the_rows_follow_their_train_configs(tmp_path):
    """The bench reads each row from its train config: a config whose learning rate, batch size,
    parameters, IL settings or waypoint predictor change gives a row (and an IL config, and a
    work-folder identity) that changes with it; the other rows stay as shipped."""
    import shutil

    import yaml

    from vlnverse.benchmarks.train import recipe as R
    from vlnverse.paths import tasks_dir

    for row in {r.config for r in R.ROWS}:
        shutil.copy(tasks_dir() / "train" / f"{row}.yaml", tmp_path / f"{row}.yaml")

    def change(config, edit):
        data = yaml.safe_load((tmp_path / f"{config}.yaml").read_text())
        edit(data)
        (tmp_path / f"{config}.yaml").write_text(yaml.safe_dump(data))

    shipped = R.policy_rows()
    assert R.policy_rows(tmp_path) == shipped  # the copies read as the shipped configs
    change("cma_fine_grained", lambda d: d["il"].update(lr=0.003, batch_size=12))
    change("rdp_fine_grained", lambda d: d["policy"]["params"].update(horizon=6))
    change("hnr_fine_grained", lambda d: d["il"].update(ema=0.9, stop_weight=2.0))
    change("vlnbert_fine_grained", lambda d: d["policy"]["params"].pop("waypoint_predictor"))
    change("gama_fine_grained", lambda d: d["policy"]["params"].update(experts=6))
    rows = {r["name"]: r for r in R.policy_rows(tmp_path)}
    il = R.row_config(rows["cma"], tmp_path, None, 0, "cpu", 1, rows["cma"]["params"])["il"]
    assert (il["lr"], il["batch_size"], il["ema"]) == (0.003, 12, R.IL_EMA)
    assert rows["rdp"]["params"]["horizon"] == 6
    il = R.row_config(rows["hnr"], tmp_path, None, 0, "cpu", 1, rows["hnr"]["params"])["il"]
    assert rows["hnr"]["il"] == {"ema": 0.9, "stop_weight": 2.0} and (il["ema"], il["stop_weight"]) == (0.9, 2.0)
    assert "waypoint_predictor" not in rows["vlnbert"] and shipped[3]["waypoint_predictor"] is True
    assert rows["gama"]["params"]["experts"] == rows["gama_multitask"]["params"]["experts"] == 6  # one GAMA recipe
    assert rows["seq2seq"] == shipped[0]
    assert R.recipe_identity(list(rows.values())) != R.recipe_identity()  # a work folder of the old rows is refused


def test_a_budget_too_small_for_one_epoch_names_the_minimum_budget(monkeypatch):
    import vlnverse.learn.trainer as trainer
    from vlnverse.benchmarks.train.row import _train
    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.errors import BudgetTooSmallError

    def short(cfg, progress=True):
        raise BudgetTooSmallError("il: ...", phase="il", minimum_seconds=70.2)

    monkeypatch.setattr(trainer, "run_training", short)
    monkeypatch.setattr("vlnverse.core.config.from_dict", lambda cls, data: data)
    with pytest.raises(ConfigError, match=r"--budget.*at least 141 s") as err:
        _train({}, 100.0, 0.5)
    assert "\n" not in str(err.value) and "il" in str(err.value)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["hnr", "gama"])
def test_hnr_and_gama_rows_train_il_and_a_dagger_round_through_the_bench_path(name, corridor, predictor_file, tmp_path,
                                                                              monkeypatch):
    """Smoke test of a row on the corridor with a tiny budget (1 IL epoch, 1 DAgger epoch): the
    bench's own ``train_row`` (same config builder, rig, selection and DAgger round as every row)
    with the shared waypoint predictor given; checkpoints and figures come back."""
    from dataclasses import replace

    import vlnverse.learn.trainer as trainer
    from vlnverse.benchmarks.train.recipe import policy_row
    from vlnverse.benchmarks.train.row import train_row
    from vlnverse.learn.checkpoint import read_checkpoint
    from vlnverse.tasks.episode import save_episodes

    from learn_helpers import make_episodes

    run = trainer.run_training
    monkeypatch.setattr(trainer, "run_training", lambda cfg, progress=True: run(  # the corridor is not a USD file
        cfg, scene_loader=lambda *a: corridor, progress=False, report=lambda s: None))
    eps = make_episodes(corridor)
    save_episodes(tmp_path / "train.jsonl", eps)
    save_episodes(tmp_path / "val_seen.jsonl", [replace(e, split="val_seen") for e in eps[:2]])
    row = {**policy_row(name), "batch_size": 2}
    predictor = {"path": str(predictor_file), "held_out": {}, "train_poses": 0, "seconds": 0.0}
    out = train_row(row, tmp_path, None, 0, epochs=1, device="cpu", predictor=predictor)
    assert set(out["checkpoints"]) == {f"{name}_il", f"{name}_il_dagger"}
    for path in out["checkpoints"].values():
        data = read_checkpoint(path)
        assert data["policy"] == name and data["cloud"] == {"grid": 2}
    fig = out["figures"]
    assert fig["policy"] == name and fig["il_epochs"] == 1 and fig["dagger_episodes"] >= 1
    assert fig["params"]["waypoint_predictor"] == str(predictor_file) and fig["waypoint_predictor"]["train_poses"] == 0


def test_multitask_row_mixes_the_shipped_configs_five_tasks_with_their_observation_setups():
    from vlnverse.benchmarks.train.recipe import multitask_entries, multitask_tasks, policy_row

    tasks = multitask_tasks()
    assert [t["task"] for t in tasks] == ["fine_grained", "coarse_grained", "visual_reference", "long_horizon", "object_goal"]
    assert {t["name"]: t["observation"] for t in tasks if t["observation"]} == {
        "visual_reference": {"view": "monocular", "hfov_deg": 90.0}}
    row, gama = policy_row("gama_multitask"), policy_row("gama")
    assert row["policy"] == "gama" and row["params"] == gama["params"] and row["lr"] == gama["lr"] and row["multitask"]
    entries = multitask_entries(Path("w"), tasks)
    assert [e["name"] for e in entries] == [t["name"] for t in tasks]
    assert entries[2] == {"task": "visual_reference", "name": "visual_reference",
                          "train": str(Path("w/tasks/visual_reference/train.jsonl")),
                          "val": {"val_seen": str(Path("w/tasks/visual_reference/val_seen.jsonl"))},
                          "observation": {"view": "monocular", "hfov_deg": 90.0}}
    assert "observation" not in entries[0]
    # the entries make a valid multi-task TrainConfig
    from vlnverse.core.config import from_dict
    from vlnverse.learn.config import TrainConfig

    cfg = from_dict(TrainConfig, {"policy": {"name": "gama", "params": {}}, "out": "x", "tasks": entries})
    assert cfg.task_names() == [t["name"] for t in tasks]


def test_multitask_config_must_start_with_fine_grained(tmp_path):
    from vlnverse.benchmarks.train.recipe import multitask_tasks
    from vlnverse.core.errors import ConfigError

    bad = tmp_path / "mix.yaml"
    bad.write_text("tasks:\n  - {task: coarse_grained, train: a.jsonl}\n  - {task: fine_grained, train: b.jsonl}\n")
    with pytest.raises(ConfigError, match="fine_grained first") as err:
        multitask_tasks(str(bad))
    assert "\n" not in str(err.value) and "mix.yaml" in str(err.value)
    bad.write_text("tasks:\n  - {train: a.jsonl}\n")
    with pytest.raises(ConfigError, match=r"tasks\[0\].task"):
        multitask_tasks(str(bad))
    bad.write_text("tasks:\n  - {task: fine_grained, train: a.jsonl, observation: {view: fisheye}}\n")
    with pytest.raises(ConfigError, match=r"tasks\[0\].observation.view"):
        multitask_tasks(str(bad))


def test_task_counts_default_to_a_share_of_the_rows_counts_or_follow_the_flags():
    from vlnverse.benchmarks.train.data import task_counts
    from vlnverse.benchmarks.train.recipe import TASK_SHARE

    assert TASK_SHARE == 0.25
    none = (None, None)  # --task-episodes, --task-eval-episodes
    assert task_counts(*none, homes=20, per_home=8, per_held_out=50, per_test=50) == {"train": 2, "val_unseen": 12, "test": 12}
    assert task_counts(*none, homes=20, per_home=2, per_held_out=3, per_test=10) == {"train": 1, "val_unseen": 1, "test": 2}
    # shipped train scenes: a quarter of TRAIN_SCENE_EPISODES (20) at the budget's scale, at least 2
    assert task_counts(*none, homes=0, per_home=8, per_held_out=50, per_test=50)["train"] == 5
    assert task_counts(*none, homes=0, per_home=8, per_held_out=50, per_test=50, scale=0.1)["train"] == 2
    assert task_counts(3, 4, homes=20, per_home=8, per_held_out=50, per_test=7) == {"train": 3, "val_unseen": 4, "test": 4}


@pytest.mark.parametrize("flags, policies, match", [
    ({"task_episodes": 0}, "gama_multitask", "--task-episodes.*integer >= 1"),
    ({"task_eval_episodes": -2}, "gama_multitask", "--task-eval-episodes.*integer >= 1"),
    ({"task_episodes": 2.5}, "gama_multitask", "--task-episodes"),
    ({"task_episodes": 2}, "gama", "--task-episodes.*gama_multitask"),
    ({"task_eval_episodes": 2}, None, "--task-eval-episodes.*gama_multitask")])
def test_task_flags_are_one_line_errors(flags, policies, match):
    from vlnverse.benchmarks.train.options import check_task_flags
    from vlnverse.benchmarks.train.recipe import select_rows
    from vlnverse.core.errors import ConfigError

    given = {"task_episodes": None, "task_eval_episodes": None, **flags}
    with pytest.raises(ConfigError, match=match) as err:
        check_task_flags(given["task_episodes"], given["task_eval_episodes"], select_rows(policies))
    assert "\n" not in str(err.value)
    check_task_flags(2, 1, select_rows("gama_multitask"))  # fine


def test_hold_out_seen_caps_val_seen_and_never_leaves_it_empty():
    from dataclasses import replace

    from vlnverse.learn.homes import hold_out_seen
    from vlnverse.tasks.episode import Episode, Goal, Instruction

    def ep(i, split):
        return Episode(f"e{i}", "s", "s.usd", split, "coarse_grained", [0.0, 0.0, 0.0], 0.0, [Goal([1.0, 0.0, 0.0])],
                       [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]], 1.0, [Instruction("go")])

    eps = [ep(i, "val_seen" if i % 3 == 0 else "train") for i in range(12)]  # 4 val_seen, 8 train
    train, seen = hold_out_seen(eps, 0, 2)
    assert len(train) == 8 and len(seen) == 2 and {e.split for e in seen} == {"val_seen"}
    assert hold_out_seen(eps, 0, 2) == (train, seen)  # seeded
    assert len(hold_out_seen(eps, 0, 40)[1]) == 4
    only_train = [replace(e, split="train") for e in eps[:5]]
    train, seen = hold_out_seen(only_train, 0, 40)  # none held out: one train episode moves
    assert len(train) == 4 and len(seen) == 1 and seen[0].split == "val_seen"
    assert {e.episode_id for e in train} | {seen[0].episode_id} == {e.episode_id for e in only_train}
    assert hold_out_seen(only_train[:1], 0, 40) == (only_train[:1], [])  # one episode: nothing to hold out


def test_table_lines_add_a_task_column_with_a_multitask_row():
    from vlnverse.benchmarks.train.report import table_lines
    from vlnverse.core.stats import bootstrap_ci

    cells = {m: bootstrap_ci([1.0, 0.0], seed=0) for m in ("SR", "SPL", "nDTW")}
    rows = [{"agent": "gama_multitask_il_dagger", "split": "test", "mode": "telhop", "episodes": 2, **cells},
            {"agent": "gama_multitask_il_dagger", "task": "visual_reference", "split": "test", "mode": "telhop",
             "episodes": 2, **cells}]
    header, fine, visual = table_lines(rows)
    assert header.split()[:5] == ["agent", "task", "split", "mode", "n"]
    assert fine.split()[:5] == ["gama_multitask_il_dagger", "fine_grained", "test", "telhop", "2"]
    assert visual.split()[:2] == ["gama_multitask_il_dagger", "visual_reference"] and "0.500 [" in visual
    assert len({len(x) for x in (header, fine, visual)}) == 1  # aligned


@pytest.mark.slow
def test_multitask_row_runs_end_to_end_and_reports_each_task(predictor_file, tmp_path, monkeypatch):
    """``bench train --policies gama_multitask`` at the tiniest size (2 generated homes, 1 IL epoch,
    no DAgger, 1 episode per held-out scene and task, a step budget of 10; the test's waypoint
    predictor): every task has its own episodes, val_unseen / test results with n and CIs in the
    table and the JSON, and its expert usage."""
    import json

    import vlnverse.benchmarks.train as bench
    from vlnverse.benchmarks.train import recipe, single

    predictor = {"path": str(predictor_file), "held_out": {}, "train_poses": 0, "seconds": 0.0}
    monkeypatch.setattr(single, "train_waypoint_predictor", lambda work, scale, seed, epochs=None: predictor)
    monkeypatch.setattr(recipe, "RENDER_COMPARE_EPISODES", 1)
    monkeypatch.setattr(recipe, "MAX_STEPS", 10)
    args = SimpleNamespace(out=str(tmp_path / "bench.json"), seed=0, policies="gama_multitask", train_homes=2,
                           episodes_per_home=4, eval_episodes=1, test_episodes=None, val_seen_episodes=None,
                           task_episodes=2, task_eval_episodes=1, epochs=1, budget=None, workers=1, encoder="pretrained",
                           no_strict=True, no_dagger=True)
    fig = bench.run(args)
    names = ["fine_grained", "coarse_grained", "visual_reference", "long_horizon", "object_goal"]
    mt = fig["multitask"]["gama_multitask"]
    assert mt["tasks"] == names and mt["observation"]["visual_reference"] == {"view": "monocular", "hfov_deg": 90.0}
    assert mt["counts"] == {"train": 2, "val_unseen": 1, "test": 1}
    for name in names[1:]:  # 2 per home on 2 homes (fewer if a generator falls short); 1 per held-out scene (2 + 2)
        n = mt["episodes"][name]
        assert 2 <= n["train"] + n["val_seen"] <= 4 and n["val_seen"] >= 1 and n["val_unseen"] == 2 and n["test"] == 2, (name, n)
    assert mt["episodes"]["fine_grained"] == {s: fig["episodes"][s] for s in ("train", "val_seen", "val_unseen", "test")}
    assert mt["train_episodes"] == {name: mt["episodes"][name]["train"] for name in names}
    (agent,) = mt["results"]
    assert agent == "gama_multitask_il"
    res = mt["results"][agent]
    assert list(res) == names
    for name in names:
        for split in ("val_unseen", "test"):
            got = res[name][split]
            assert got["episodes"] == mt["episodes"][name][split] == got["SR"]["n"] == 2
            assert 0.0 <= got["SR"]["lo"] <= got["SR"]["mean"] <= got["SR"]["hi"] <= 1.0
    (fine_test,) = [r for r in fig["table"] if r["agent"] == agent and r["split"] == "test" and "task" not in r]
    assert res["fine_grained"]["test"] == {k: v for k, v in fine_test.items() if k not in ("agent", "split", "mode")}
    report = mt["policy_report"][agent]["expert_usage"]  # the policy's multitask_report (GAMA: expert usage)
    usage = json.loads(Path(report["json"]).read_text())  # (a JSON file: its keys sorted)
    assert list(report["overall"]) == names and report["overall"] == {n: usage[n]["overall"] for n in names}
    for name, u in usage.items():  # 4 experts, top 2 per decision step
        assert len(u["overall"]) == 4 and abs(sum(u["overall"]) - 1.0) < 1e-3, (name, u)
        assert all(abs(sum(row) - 1.0) < 1e-3 for row in u["share"]) and sum(u["steps"]) > 0
        records = []
        for split in ("val_unseen", "test"):
            folder = Path(fig["work_dir"]) / "eval" / agent / ("" if name == "fine_grained" else name) / "telhop" / split
            records += [json.loads(x) for x in (folder / "episodes.jsonl").read_text().splitlines() if x.strip()]
        assert len(records) == 4
        picks = [o["experts"] for r in records for o in r["agent_outputs"] if "experts" in o]
        assert picks and all(len(p) == 2 for p in picks) and sum(u["steps"]) == 2 * len(picks)  # the records, recounted
    assert Path(report["png"]) == Path(fig["work_dir"]) / "eval" / agent / "expert_usage.png"
    assert Path(report["png"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the per-task lines of the table: fine-grained with the rows, every other task on its held-out splits
    lines = fig["table_text"]
    assert lines[0].split()[:3] == ["agent", "task", "split"]
    for name in names[1:]:
        for split in ("val_unseen", "test"):
            (line,) = [x for x in lines if x.split()[:3] == [agent, name, split]]
            assert line.split()[4] == "2"
    assert {r["agent"] for r in fig["table"] if r["split"] == "test" and "task" not in r} == {"random", "forward", agent}
    assert json.loads(json.dumps(fig))["multitask"]["gama_multitask"]["results"] == mt["results"]  # JSON-ready
    assert Path(fig["plot"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_render_only_needs_an_episodes_file_and_a_positive_limit(tmp_path):
    from vlnverse.benchmarks.train import run
    from vlnverse.core.errors import ConfigError

    args = SimpleNamespace(render_only=True, episodes=str(tmp_path / "missing.jsonl"), limit=None, workers=1, out=None,
                           seed=0)
    with pytest.raises(ConfigError, match="--episodes"):
        run(args)
    (tmp_path / "train.jsonl").write_text("")
    with pytest.raises(ConfigError, match="--limit"):
        run(SimpleNamespace(**{**vars(args), "episodes": str(tmp_path / "train.jsonl"), "limit": 0}))


@pytest.mark.slow
def test_render_only_compares_every_render_path_on_the_same_frames(corridor, tmp_path):
    """``bench train --render-only``: physics, teleport with the reference depth pass, teleport and
    teleport on 2 workers build the same cache (labels, poses, frames), each twice, in one run."""
    from eval_scenes import corridor_scene
    from learn_helpers import make_episodes
    from vlnverse.benchmarks.train import run
    from vlnverse.scenes.usd_io import write_usd
    from vlnverse.tasks.episode import save_episodes

    scene = tmp_path / "corridor.usda"
    write_usd(corridor_scene(), scene)
    episodes = make_episodes(corridor)[:2]
    for ep in episodes:
        ep.scene_path = str(scene)
    save_episodes(tmp_path / "train.jsonl", episodes)
    got = run(SimpleNamespace(render_only=True, episodes=str(tmp_path / "train.jsonl"), limit=2, workers=2,
                              out=str(tmp_path / "r.json"), seed=0))["render"]
    paths = ("teleport_reference", "teleport", "teleport_2_workers")
    assert set(got["frames_per_s"]) == {"physics", *paths} and got["episodes"] == 2 and got["frames"] > 10
    assert all(all(got["equal"][p].values()) for p in paths)
    assert all(len(r) == 2 and min(r) > 0 for r in got["runs_frames_per_s"].values())
    assert got["glass_pass_speedup"] > 0 and got["workers_speedup"] > 0 and len(got["load_average_1m"]) == 9


def test_bench_train_nproc_needs_two_ranks_or_more():
    from vlnverse.benchmarks.train_ddp import TrainDdpOptions, run
    from vlnverse.core.errors import ConfigError

    with pytest.raises(ConfigError, match="--nproc: got 1"):
        run(TrainDdpOptions(nproc=1))
    with pytest.raises(ConfigError, match="--budget: got 0"):
        run(TrainDdpOptions(nproc=2, budget=0))
    # the command line's flags: --budget unset is the default budget
    from vlnverse.benchmarks.train.options import options_from_args
    from vlnverse.benchmarks.train_ddp import DEFAULT_BUDGET

    got = options_from_args(TrainDdpOptions, SimpleNamespace(nproc=3, budget=None, seed=4, out=None, repeat=3))
    assert got == TrainDdpOptions(nproc=3, budget=DEFAULT_BUDGET, seed=4, out=None) and DEFAULT_BUDGET == 60.0
