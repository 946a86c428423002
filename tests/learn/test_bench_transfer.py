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
                out=None, adapt_predictor=False, validation_episodes=None)
    base.update(kw)
    return argparse.Namespace(**base)


@pytest.mark.parametrize("change, field", [({"work": None}, "--work"), ({"body": "no_such_body"}, "--body"),
                                           ({"body": "r2r_ce"}, "--body"), ({"rounds": 0}, "--rounds"),
                                           ({"round_epochs": -1}, "--round-epochs"), ({"epochs": 0}, "--epochs"),
                                           ({"stop_weight": 0.0}, "--stop-weight"),
                                           ({"validation_episodes": 0}, "--validation-episodes")])
def test_bad_flags_are_one_line_errors_naming_the_flag(tmp_path, change, field):
    from vlnverse.benchmarks.transfer import check_args
    from vlnverse.core.errors import ConfigError

    args = _args(work=str(_work(tmp_path)))
    vars(args).update(change)
    with pytest.raises(ConfigError) as err:
        check_args(args)
    assert field in str(err.value) and "\n" not in str(err.value)


def test_a_work_folder_without_the_bench_files_is_refused(tmp_path):
    from vlnverse.benchmarks.transfer import check_args
    from vlnverse.core.errors import ConfigError

    work = _work(tmp_path)
    (work / "waypoints" / "predictor.pt").unlink()
    with pytest.raises(ConfigError, match=r"--work.*predictor\.pt"):
        check_args(_args(work=str(work)))


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

    def fake_evaluate(spec, split, mode, work_, seed, workers, sensors, out_name, body=None):
        evaluated.append({"checkpoint": spec.params["checkpoint"], "split": split, "mode": mode, "body": body, "name": out_name})
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
    assert {(e["split"], e["mode"], e["body"]) for e in evaluated} == {("val_unseen", "telhop", "low_base")}
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

    def fake_evaluate(spec, split, mode, work_, seed, workers, sensors, out_name, body=None):
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

    def fake_predictor(work_, scale, seed, body, folder):
        predictors.append((work_, body, folder))
        return {"path": str(work_ / folder / "predictor.pt"), "held_out": {"next_waypoint_hit": 0.9}, "seconds": 1.0}

    sr = {"transfer_zero_shot": 0.02, "transfer_zero_shot_adapted_predictor": 0.18, "transfer_online_round_1": 0.3}

    def fake_evaluate(spec, split, mode, work_, seed, workers, sensors, out_name, body=None):
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
