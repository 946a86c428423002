"""``vlnverse bench train``'s policy rows: every row names a registered policy whose params build,
and ``--policies`` picks rows or fails in one line naming the flag."""
from types import SimpleNamespace

import pytest

from test_vlnbert import predictor_file  # noqa: F401 (the session fixture)


def test_every_row_builds_its_policy_on_the_bench_rig():
    from vlnverse.benchmarks.train import POLICY_ROWS, SENSORS
    from vlnverse.learn.policies import build_policy
    from vlnverse.learn.vocab import Vocabulary

    rig = [{"name": s["name"], "kind": s["kind"], "shape": [s["height"], s["width"], 3] if s["kind"] == "rgb"
            else [s["height"], s["width"]]} for s in SENSORS]
    assert [r["name"] for r in POLICY_ROWS] == ["seq2seq", "cma", "rdp", "vlnbert", "hnr", "gama"]
    for row in POLICY_ROWS:
        params = dict(row["params"])
        if row.get("waypoint_predictor"):  # the bench trains one first; an untrained one of default size here
            params["waypoint_predictor"] = {}
        policy = build_policy(row["policy"], params, Vocabulary.build(["go to the kitchen"]), rig)
        assert policy.name == row["policy"] and row["lr"] > 0


def test_policies_flag_picks_rows_and_rejects_unknown_names():
    from vlnverse.benchmarks.train import _rows
    from vlnverse.core.errors import ConfigError

    assert [r["name"] for r in _rows(SimpleNamespace(policies=None))] == ["seq2seq", "cma", "rdp", "vlnbert", "hnr", "gama"]
    assert [r["name"] for r in _rows(SimpleNamespace(policies="gama,hnr,vlnbert"))] == ["vlnbert", "hnr", "gama"]
    assert [r["name"] for r in _rows(SimpleNamespace(policies="rdp, cma"))] == ["cma", "rdp"]  # table order
    assert [r["name"] for r in _rows(SimpleNamespace(policies="cma,seq2seq"))] == ["seq2seq", "cma"]
    assert [r["name"] for r in _rows(SimpleNamespace(policies="rdp"))] == ["rdp"]
    assert [r["name"] for r in _rows(SimpleNamespace(policies="vlnbert,rdp"))] == ["rdp", "vlnbert"]
    with pytest.raises(ConfigError, match="--policies.*seq2sq"):
        _rows(SimpleNamespace(policies="rdp,seq2sq"))


def test_bootstrap_ci_matches_a_hand_computed_case():
    """[0, 0, 0, 1]: a resample's mean is k/4 with k ~ Binomial(4, 1/4): P(k <= 2) = 0.949 and
    P(k <= 3) = 0.996, so the 2.5% and 97.5% quantiles of the means are 0 and 0.75."""
    from vlnverse.benchmarks.train import bootstrap_ci

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

    from vlnverse.benchmarks.train import bootstrap_ci, episode_metrics, table_lines

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
    from vlnverse.benchmarks.train import _check_counts
    from vlnverse.core.errors import ConfigError

    args = {"homes": None, "workers": 1, "per_held_out": 50, "per_home": None}
    args.update({{"train_homes": "homes", "eval_episodes": "per_held_out", "episodes_per_home": "per_home"}.get(k, k): v
                 for k, v in flags.items()})
    with pytest.raises(ConfigError, match=field):
        _check_counts(args["homes"], args["workers"], args["per_held_out"], args["per_home"])


def test_a_budget_too_small_for_one_epoch_names_the_minimum_budget(monkeypatch):
    import vlnverse.learn.trainer as trainer
    from vlnverse.benchmarks.train import _train
    from vlnverse.core.errors import ConfigError

    def short(cfg, progress=True):
        raise trainer.BudgetTooSmallError("il: ...", phase="il", minimum_seconds=70.2)

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
    from vlnverse.benchmarks.train import POLICY_ROWS, train_row
    from vlnverse.learn.checkpoint import read_checkpoint
    from vlnverse.tasks.episode import save_episodes

    from learn_helpers import make_episodes

    run = trainer.run_training
    monkeypatch.setattr(trainer, "run_training", lambda cfg, progress=True: run(  # the corridor is not a USD file
        cfg, scene_loader=lambda *a: corridor, progress=False, report=lambda s: None))
    eps = make_episodes(corridor)
    save_episodes(tmp_path / "train.jsonl", eps)
    save_episodes(tmp_path / "val_seen.jsonl", [replace(e, split="val_seen") for e in eps[:2]])
    row = next(r for r in POLICY_ROWS if r["name"] == name)
    row = {**row, "batch_size": 2}
    predictor = {"path": str(predictor_file), "held_out": {}, "train_poses": 0, "seconds": 0.0}
    out = train_row(row, tmp_path, None, 0, epochs=1, device="cpu", predictor=predictor)
    assert set(out["checkpoints"]) == {f"{name}_il", f"{name}_il_dagger"}
    for path in out["checkpoints"].values():
        data = read_checkpoint(path)
        assert data["policy"] == name and data["cloud"] == {"grid": 2}
    fig = out["figures"]
    assert fig["policy"] == name and fig["il_epochs"] == 1 and fig["dagger_episodes"] >= 1
    assert fig["params"]["waypoint_predictor"] == str(predictor_file) and fig["waypoint_predictor"]["train_poses"] == 0
