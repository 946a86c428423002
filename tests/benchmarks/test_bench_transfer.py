"""``vlnverse bench transfer`` (Table 7): its flags fail in one line, and the stages are wired as
the paper's protocol asks -- the source trained on the shipped scenes with the default body, every
evaluation and the online rounds with the target body, the rounds starting from the source."""
from __future__ import annotations

import argparse
import json

import pytest

pytest.importorskip("torch")


def _work(tmp_path):
    work = tmp_path / "bt"
    (work / "waypoints").mkdir(parents=True)
    for name in ("train.jsonl", "val_seen.jsonl", "val_unseen.jsonl", "waypoints/predictor.pt"):
        (work / name).write_text("")
    return work


def _args(**kw):
    base = dict(work=None, body=None, epochs=None, rounds=None, round_epochs=None, stop_weight=None, seed=0, workers=None,
                out=None, adapt_predictor=False, validation_episodes=None, source_render=None, target_render=None)
    base.update(kw)
    return argparse.Namespace(**base)


@pytest.mark.parametrize("change, field", [({"work": None}, "--work"), ({"body": "no_such_body"}, "--body"),
                                           ({"body": "r2r_ce"}, "--body"), ({"rounds": 0}, "--rounds"),
                                           ({"round_epochs": -1}, "--round-epochs"), ({"epochs": 0}, "--epochs"),
                                           ({"stop_weight": 0.0}, "--stop-weight"),
                                           ({"validation_episodes": 0}, "--validation-episodes"),
                                           ({"waypoint_epochs": 0}, "--waypoint-epochs"),
                                           ({"target_render": "ultra:meshes"}, "--target-render"),
                                           ({"source_render": "fast:boxes"}, "--source-render"),
                                           ({"target_render": "fast:meshes:x"}, "--target-render"),
                                           ({"body": "r2r_ce", "source_render": "fast", "target_render": "fast:primitives"},
                                            "--body")])
def test_bad_flags_are_one_line_errors_naming_the_flag(tmp_path, change, field):
    from vlnverse.benchmarks.transfer import TransferOptions
    from vlnverse.core.errors import ConfigError

    args = _args(work=str(_work(tmp_path)))
    vars(args).update(change)
    with pytest.raises(ConfigError) as err:
        TransferOptions.from_args(args)
    assert field in str(err.value) and "\n" not in str(err.value)


def test_a_work_folder_without_the_bench_files_is_refused(tmp_path):
    from vlnverse.benchmarks.transfer import TransferOptions
    from vlnverse.core.errors import ConfigError

    work = _work(tmp_path)
    (work / "waypoints" / "predictor.pt").unlink()
    with pytest.raises(ConfigError, match=r"--work.*predictor\.pt"):
        TransferOptions.from_args(_args(work=str(work)))


def test_stages_follow_the_protocol_and_the_figures_compute_the_lift(tmp_path, monkeypatch):
    import vlnverse.benchmarks.transfer as T
    from vlnverse.tasks.episode import Episode, Goal, Instruction

    work = _work(tmp_path)
    trained, evaluated = [], []
    episodes = [Episode(f"e{i}", "home_0001", "home_0001.usda", split, "fine_grained", [0.0, 0.0, 0.0], 0.0,
                        [Goal([2.0, 0.0, 0.0])], [[0.0, 0.0, 0.0], [2.0, 0.0, 0.0]], 2.0, [Instruction("go")])
                for i, split in enumerate(["train", "train", "val_seen"])]
    monkeypatch.setattr(T, "_dataset", lambda task, scenes, n, seed, out, frac: episodes if scenes == "train" else [])

    def fake_train(cfg, budget, share):
        trained.append(cfg)
        if cfg.get("mode") == "dagger":
            return {"dagger": [{"round": r, "beta": 0.5 ** r, "collection_SR": 0.3, "train_accuracy": 0.5} for r in (1, 2)],
                    "cache": {"teacher_SR": 0.6}}
        return {"il": {"episodes": 2, "accuracy": 0.7, "seconds": 1.0}}

    sr = {"transfer_zero_shot": 0.05, "transfer_online_round_1": 0.1, "transfer_online_round_2": 0.2}

    def fake_evaluate(spec, split, mode, work_, seed, workers, sensors, out_name, body=None, render=None):
        evaluated.append({"checkpoint": spec.params["checkpoint"], "split": split, "mode": mode, "body": body, "name": out_name,
                          "render": render.label()})
        ci = {"mean": sr[out_name], "lo": sr[out_name] / 2, "hi": sr[out_name] * 2, "n": 100}
        return {"episodes": 100, "SR": ci, "SPL": ci, "nDTW": ci}

    monkeypatch.setattr(T, "_train", fake_train)
    monkeypatch.setattr(T, "evaluate", fake_evaluate)
    earlier = work / "eval" / "transfer_zero_shot" / "telhop" / "val_unseen"  # a run of other settings
    earlier.mkdir(parents=True)
    (work / "eval" / "cma_il").mkdir()
    figures = T.run(_args(work=str(work), rounds=2, stop_weight=4.0, out=str(tmp_path / "transfer.json")))
    assert not (work / "eval" / "transfer_zero_shot").exists() and (work / "eval" / "cma_il").is_dir()

    source, online = trained
    assert source.get("body") is None and source.get("mode", "il") == "il" and source["policy"]["name"] == "vlnbert"
    assert [json.loads(line)["episode_id"] for line in open(source["train"])] == ["e0", "e1"]  # the shipped scenes
    assert source["policy"]["params"]["waypoint_predictor"] == str(work / "waypoints" / "predictor.pt")
    assert online["mode"] == "dagger" and online["body"] == "low_base" and online["train"] == str(work / "train.jsonl")
    assert online["init"] == str(tmp_path / "bt" / "transfer" / "source" / "best.pt")
    assert online["dagger"]["rounds"] == 2 and online["dagger"]["include_teacher_data"] is True
    assert online["dagger"]["max_steps"] == 15 and figures["online"]["max_steps"] == 15  # loops cannot flood the aggregate
    assert online["il"]["stop_weight"] == 4.0 and "stop_weight" not in source["il"]
    assert online["policy"] == source["policy"] and online["sensors"] == source["sensors"]  # the init check passes
    assert [e["checkpoint"] for e in evaluated] == [online["init"], str(work / "transfer" / "online" / "round_01.pt"),
                                                    str(work / "transfer" / "online" / "last.pt")]
    assert {(e["split"], e["mode"], e["body"], e["render"]) for e in evaluated} == {
        ("val_unseen", "telhop", "low_base", "default:primitives")}  # no render flag: today's protocol
    assert source["render"] == online["render"] == {"quality": "default", "objects": "primitives"}
    assert figures["SR_after_over_before"] == 4.0 and figures["target"]["teacher_SR"] == 0.6
    assert [r["agent"] for r in figures["table"]] == ["zero_shot", "online_round_1", "online_round_2"]
    assert figures["selected"]["round"] == 2 and figures["SR_selected_over_before"] == 4.0  # no validation: the last
    assert online["validation"]["limit"] == 6
    assert (tmp_path / "transfer.png").stat().st_size > 10_000


def test_the_round_val_seen_selected_is_evaluated_and_gives_the_selected_lift(tmp_path, monkeypatch):
    """Round 2 of 3 kept as ``best.pt`` by val_seen (on ``--validation-episodes``): it is evaluated as
    its own stage and ``SR_selected_over_*`` use it; a selected first or last round is not evaluated twice."""
    import vlnverse.benchmarks.transfer as T

    work = _work(tmp_path)
    monkeypatch.setattr(T, "_dataset", lambda *a: [])
    best = {"tag": "round_02"}
    trained, evaluated = [], []
    monkeypatch.setattr(T, "_train", lambda cfg, b, s: trained.append(cfg) or (
        {"dagger": [{"round": r} for r in (1, 2, 3)], "best": dict(best)} if cfg.get("mode") == "dagger"
        else {"il": {"episodes": 2, "accuracy": 0.7, "seconds": 1.0}}))
    sr = {"transfer_zero_shot": 0.1, "transfer_online_round_1": 0.2, "transfer_online_round_3": 0.12,
          "transfer_online_selected": 0.25}

    def fake_evaluate(spec, split, mode, work_, seed, workers, sensors, out_name, body=None, render=None):
        evaluated.append(spec.params["checkpoint"])
        ci = {"mean": sr[out_name], "lo": 0.0, "hi": 1.0, "n": 100}
        return {"episodes": 100, "SR": ci, "SPL": ci, "nDTW": ci}

    monkeypatch.setattr(T, "evaluate", fake_evaluate)
    figures = T.run(_args(work=str(work), rounds=3, validation_episodes=40))
    online = work / "transfer" / "online"
    assert trained[1]["validation"] == {"metric": "nDTW", "every": 1, "limit": 40, "split": "val_seen"}
    assert evaluated[-1] == str(online / "best.pt") and len(evaluated) == 4
    assert figures["selected"] == {"round": 2, "validation_episodes": 40, "metric": "nDTW", "agent": "online_selected",
                                   "SR": {"mean": 0.25, "lo": 0.0, "hi": 1.0, "n": 100}}
    assert figures["SR_after_over_before"] == 1.2 and figures["SR_selected_over_before"] == 2.5

    best["tag"] = "round_01"  # the first round: already evaluated
    evaluated.clear()
    figures = T.run(_args(work=str(work), rounds=3, validation_episodes=40))
    assert str(online / "best.pt") not in evaluated and len(evaluated) == 3
    assert figures["selected"]["agent"] == "online_round_1" and figures["SR_selected_over_before"] == 2.0


def test_adapt_predictor_adds_a_stage_and_the_rounds_start_from_the_swapped_checkpoint(tmp_path, monkeypatch):
    """``--adapt-predictor``: a predictor trained on the target body's panoramas is swapped into the
    source checkpoint, evaluated zero-shot as its own stage, and the online rounds start from that
    file with that predictor's oracle; both ratios are reported."""
    import vlnverse.benchmarks.transfer as T
    import vlnverse.learn.checkpoint as C

    work = _work(tmp_path)
    trained, evaluated, predictors, swaps = [], [], [], []
    monkeypatch.setattr(T, "_dataset", lambda *a: [])
    monkeypatch.setattr(T, "_train", lambda cfg, b, s: trained.append(cfg) or (
        {"dagger": [{"round": 1}], "cache": {"teacher_SR": 1.0, "frames": 714}} if cfg.get("mode") == "dagger"
        else {"il": {"episodes": 2, "accuracy": 0.7, "seconds": 1.0}}))

    def fake_predictor(work_, scale, seed, body, folder, render=None, epochs=None):
        predictors.append((work_, body, folder))
        return {"path": str(work_ / folder / "predictor.pt"), "held_out": {"next_waypoint_hit": 0.9}, "seconds": 1.0}

    sr = {"transfer_zero_shot": 0.02, "transfer_zero_shot_adapted_predictor": 0.18, "transfer_online_round_1": 0.3}

    def fake_evaluate(spec, split, mode, work_, seed, workers, sensors, out_name, body=None, render=None):
        evaluated.append((spec.params["checkpoint"], body))
        ci = {"mean": sr[out_name], "lo": 0.0, "hi": 1.0, "n": 100}
        return {"episodes": 100, "SR": ci, "SPL": ci, "nDTW": ci}

    monkeypatch.setattr(T, "train_waypoint_predictor", fake_predictor)
    monkeypatch.setattr(C, "swap_predictor", lambda src, pred, dst: swaps.append((src, pred, dst)))
    monkeypatch.setattr(T, "evaluate", fake_evaluate)
    figures = T.run(_args(work=str(work), rounds=1, adapt_predictor=True))

    source, online = trained
    wp = str(work / "transfer" / "waypoints_low_base" / "predictor.pt")
    assert predictors == [(work / "transfer", "low_base", "waypoints_low_base")]
    assert swaps == [(str(work / "transfer" / "source" / "best.pt"), wp, str(work / "transfer" / "source_adapted_predictor.pt"))]
    assert online["init"] == swaps[0][2] and online["policy"]["params"]["waypoint_predictor"] == wp
    assert source["policy"]["params"]["waypoint_predictor"] == str(work / "waypoints" / "predictor.pt")
    assert [c for c, _ in evaluated] == [swaps[0][0], swaps[0][2], str(work / "transfer" / "online" / "round_01.pt")]
    assert [r["agent"] for r in figures["table"]] == ["zero_shot", "zero_shot_adapted_predictor", "online_round_1"]
    assert figures["SR_after_over_before"] == 15.0 and figures["SR_after_over_adapted_zero_shot"] == 1.67
    assert figures["target"]["adapted_predictor"]["path"] == wp and figures["target"]["teacher_frames"] == 714
    assert figures["source"]["checkpoint"] == swaps[0][0]


def test_the_source_body_is_allowed_only_with_a_render_shift(tmp_path):
    from vlnverse.benchmarks.transfer import TransferOptions
    from vlnverse.core.errors import ConfigError
    from vlnverse.run.setup import RenderConfig

    work = str(_work(tmp_path))
    got = TransferOptions.from_args(_args(work=work, body="r2r_ce", target_render="default:meshes"))
    assert got.body == "r2r_ce" and (got.source_render, got.target_render) == (RenderConfig(), RenderConfig("default", "meshes"))
    with pytest.raises(ConfigError, match=r"^--body.*--target-render other than --source-render"):
        TransferOptions.from_args(_args(work=work, body="r2r_ce", source_render="high:meshes", target_render="high:meshes"))
    with pytest.raises(ConfigError, match=r"^--target-render: got 'ultra'.*QUALITY:OBJECTS, QUALITY one of fast, default, high"):
        TransferOptions.from_args(_args(work=work, target_render="ultra"))
    got = TransferOptions.from_args(_args(work=work))
    assert (got.source_render, got.target_render) == (RenderConfig(), RenderConfig())  # the defaults: no shift
    assert (got.body, got.epochs, got.rounds, got.round_epochs, got.stop_weight, got.validation_episodes,
            got.adapt, got.workers) == ("low_base", 10, 3, 4, 1.0, 6, False, 1)  # each flag's documented default


def test_a_render_shift_draws_the_source_with_its_render_and_every_target_stage_with_the_target_one(tmp_path, monkeypatch):
    """``--body r2r_ce --source-render default:primitives --target-render fast:meshes``: the source
    trains with the source render; the zero-shot and round evaluations, the online rounds (teacher
    cache, collection, validation: the online TrainConfig's ``render``) and an adapted predictor's
    panoramas use the target render; the frozen predictor and the body stay the source's."""
    import vlnverse.benchmarks.transfer as T
    import vlnverse.learn.checkpoint as C
    from vlnverse.run.setup import RenderConfig

    work = _work(tmp_path)
    trained, evaluated, predictors = [], [], []
    monkeypatch.setattr(T, "_dataset", lambda *a: [])
    monkeypatch.setattr(T, "_train", lambda cfg, b, s: trained.append(cfg) or (
        {"dagger": [{"round": r} for r in (1, 2)]} if cfg.get("mode") == "dagger"
        else {"il": {"episodes": 2, "accuracy": 0.7, "seconds": 1.0}}))

    def fake_evaluate(spec, split, mode, work_, seed, workers, sensors, out_name, body=None, render=None):
        evaluated.append((out_name, body, render))
        ci = {"mean": 0.1, "lo": 0.0, "hi": 1.0, "n": 100}
        return {"episodes": 100, "SR": ci, "SPL": ci, "nDTW": ci}

    def fake_predictor(work_, scale, seed, body, folder, render=None, epochs=None):
        predictors.append((body, folder, render, epochs))
        return {"path": str(work_ / folder / "predictor.pt"), "held_out": {}, "seconds": 1.0}

    monkeypatch.setattr(T, "evaluate", fake_evaluate)
    monkeypatch.setattr(T, "train_waypoint_predictor", fake_predictor)
    monkeypatch.setattr(C, "swap_predictor", lambda *a: None)
    figures = T.run(_args(work=str(work), body="r2r_ce", rounds=2, adapt_predictor=True,
                          source_render="default:primitives", target_render="fast:meshes",
                          out=str(tmp_path / "shift.json"), waypoint_epochs=60))
    target = RenderConfig("fast", "meshes")
    source, online = trained
    assert source["render"] == {"quality": "default", "objects": "primitives"} and source.get("body") is None
    assert online["render"] == {"quality": "fast", "objects": "meshes"} and online["body"] == "r2r_ce"
    assert online["mode"] == "dagger" and online["policy"]["params"]["waypoint_predictor"].endswith(
        "waypoints_r2r_ce_fast_meshes/predictor.pt")
    assert source["policy"]["params"]["waypoint_predictor"] == str(work / "waypoints" / "predictor.pt")
    assert predictors == [("r2r_ce", "waypoints_r2r_ce_fast_meshes", target, 60)]  # --waypoint-epochs reaches it
    assert [e[0] for e in evaluated] == ["transfer_zero_shot", "transfer_zero_shot_adapted_predictor",
                                         "transfer_online_round_1", "transfer_online_round_2"]
    assert all(b == "r2r_ce" and r == target for _, b, r in evaluated)
    assert {r["render"] for r in figures["table"]} == {"fast:meshes"}
    assert figures["source"]["render"] == "default:primitives" and figures["target"]["render"] == "fast:meshes"
    assert (tmp_path / "shift.png").stat().st_size > 10_000


def test_the_bench_helpers_hand_the_render_to_the_eval_runner_and_the_predictor_training(tmp_path, monkeypatch):
    import vlnverse.benchmarks.train.evaluation as B
    import vlnverse.eval.runner as R
    import vlnverse.learn.waypoints.train as W
    from vlnverse.benchmarks.train.recipe import METRICS, SENSORS
    from vlnverse.benchmarks.train.row import train_waypoint_predictor
    from vlnverse.run.setup import NamedSpec, RenderConfig

    renders, predictor = [], []
    monkeypatch.setattr(R, "run_eval", lambda cfg, **kw: renders.append(cfg.render))
    monkeypatch.setattr(B, "episode_metrics", lambda out: {m: [1.0, 0.0] for m in METRICS})
    monkeypatch.setattr(B, "row_design", lambda out, episodes=None: {})
    B.evaluate(NamedSpec("random"), "val_unseen", "telhop", tmp_path, 0, 1, SENSORS, "x", render=RenderConfig("high", "meshes"))
    B.evaluate(NamedSpec("random"), "val_unseen", "telhop", tmp_path, 0, 1, SENSORS, "y")
    assert renders == [RenderConfig("high", "meshes"), RenderConfig()]
    monkeypatch.setattr(W, "run_waypoint_training", lambda cfg, out: predictor.append((cfg.render, cfg.model, cfg.epochs))
                        or {"held_out": {"predicted": {}}, "train_poses": 1})
    got = train_waypoint_predictor(tmp_path, 0.1, 0, body="low_base", folder="wp", render=RenderConfig("fast", "meshes"))
    longer = train_waypoint_predictor(tmp_path, 0.1, 0, body="low_base", folder="wp", epochs=60)
    # the waypoint rows see RGB-D through it; the recipe's 15 epochs unless --waypoint-epochs says otherwise
    assert predictor == [(RenderConfig("fast", "meshes"), {"rgb": True}, 15), (None, {"rgb": True}, 60)]
    assert (got["epochs"], longer["epochs"]) == (15, 60)


def test_bench_train_measures_the_vlnbert_rows_online_lift_as_table7_on_its_own_work_folder(tmp_path, monkeypatch):
    """``bench train`` with the VLN-BERT row runs ``bench transfer`` on its work folder (the target
    body's predictor adapted, the round chosen on 40 val_seen episodes), appends its val_unseen lines
    to the table and reports the Table 7 lift (zero-shot -> selected round) beside the in-domain one
    (IL -> IL + online round): 0.30 / 0.04 = 7.5, 0.30 / 0.15 = 2.0, 0.24 / 0.27 = 0.89."""
    import vlnverse.benchmarks.train.recipe as B
    import vlnverse.benchmarks.transfer as T
    from vlnverse.benchmarks.train.report import table_lines

    work = _work(tmp_path)
    got_args = []

    def line(agent, sr):
        ci = {"mean": sr, "lo": sr / 2, "hi": min(1.0, sr * 2), "n": 100}
        return {"agent": agent, "split": "val_unseen", "mode": "telhop", "body": "low_base",
                "render": "default:primitives", "episodes": 100, "SR": ci, "SPL": ci, "nDTW": ci}

    stages = [line("zero_shot", 0.04), line("zero_shot_adapted_predictor", 0.15), line("online_round_1", 0.3),
              line("online_round_3", 0.25)]
    monkeypatch.setattr(T, "run", lambda a: got_args.append(a) or {
        "table": stages, "target": {"body": "low_base"},
        "selected": {"round": 1, "validation_episodes": 40, "metric": "nDTW", "agent": "online_round_1",
                     "SR": stages[2]["SR"]}})
    results = {"telhop": {"val_unseen": {"vlnbert_il": {"SR": {"mean": 0.27}}, "vlnbert_il_dagger": {"SR": {"mean": 0.24}}}}}
    table = [{"agent": "vlnbert_il"}]
    args = argparse.Namespace(seed=3, out=str(tmp_path / "bt.json"))
    module, _, name = B.TABLE7_STAGE.partition(":")  # bench train's reference (imports stay one-way)
    assert module == T.__name__ and getattr(T, name) is T.table7_stage
    online = T.table7_stage(args, work, 2, results, table)

    a, = got_args
    assert (a.work, a.seed, a.workers, a.adapt_predictor, a.validation_episodes) == (str(work), 3, 2, True, 40)
    assert a.body is None and a.rounds is None and a.source_render is None  # bench transfer's own defaults
    assert a.out == str(tmp_path / "bt_table7.json")  # its PNG beside the bench's
    assert [r["agent"] for r in table] == ["vlnbert_il", "vlnbert_t7_zero_shot", "vlnbert_t7_zero_shot_adapted_predictor",
                                          "vlnbert_t7_online_round_1", "vlnbert_t7_online_round_3"]
    assert online["table7"]["ratio"] == 7.5 and online["table7"]["after"]["mean"] == 0.3
    assert online["table7_over_adapted_predictor"]["ratio"] == 2.0
    assert online["in_domain"]["ratio"] == 0.89
    assert table_lines(table[1:])[1].startswith("vlnbert_t7_zero_shot ")
