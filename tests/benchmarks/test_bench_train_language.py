"""``vlnverse bench train --language``: the version-2 language, and with ``v2-split`` its template
families partitioned (train on one, ``val_unseen_language`` on the other) with each agent's paired
SR drop val_unseen - val_unseen_language."""
import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

from test_bench_train_jobs import tiny, tiny_args  # noqa: E402,F401 (tiny: a fixture)


@pytest.mark.parametrize("flags, field, match", [
    (dict(language="v3"), "--language", "got 'v3'.*v1 or v2 or v2-split"),
    (dict(language="V2"), "--language", "got 'V2'"),
    (dict(language="v2", policies="vlnbert", no_dagger=False, no_transfer=False), "--language", "--no-transfer"),
    (dict(language="v2-split", seeds=None, policies="gama_multitask"), "--policies", "gama_multitask with --language"),
    (dict(task="coarse"), "--task", "got 'coarse'.*fine_grained or coarse_grained"),
    (dict(task="coarse_grained", seeds=None, policies="gama_multitask"), "--policies", "gama_multitask with --task"),
    (dict(task="coarse_grained", policies="vlnbert", no_dagger=False, no_transfer=False), "--task", "--no-transfer"),
])
def test_language_flag_bad_values_are_one_line(flags, field, match, tmp_path):
    from vlnverse.benchmarks.train.options import TrainBenchOptions
    from vlnverse.core.errors import ConfigError

    with pytest.raises(ConfigError, match=match) as err:
        TrainBenchOptions.from_args(tiny_args(tmp_path / "x.json", **flags))
    assert str(err.value).startswith(field) and "\n" not in str(err.value)


def test_language_with_a_benchmark_rewords_its_held_out_episodes(tmp_path):
    """``--benchmark proc-v1 --language v2-split`` is accepted: the benchmark's held-out paths are
    re-instructed (``Benchmark.episodes(..., language=)``, tests/tasks/test_benchmark_language.py)."""
    from vlnverse.benchmarks.train.options import TrainBenchOptions

    options = TrainBenchOptions.from_args(tiny_args(tmp_path / "x.json", language="v2-split", benchmark="proc-v1",
                                                    eval_episodes=None))
    assert options.benchmark.name == "proc-v1" and options.language == "v2-split"
    assert options.task_overrides == {"params.instruction_version": 2, "params.language_split": True}
    assert options.eval_splits == ("val_seen", "val_unseen", "val_unseen_language", "test")
    coarse = TrainBenchOptions.from_args(tiny_args(tmp_path / "x.json", language="v2-split", benchmark="proc-v1",
                                                   eval_episodes=None, task="coarse_grained"))
    assert coarse.task == "coarse_grained" and coarse.benchmark.task == "fine_grained"  # generated on its homes


def test_language_joins_the_work_identity_only_when_given(tmp_path):
    from vlnverse.benchmarks.train.jobs import work_identity
    from vlnverse.benchmarks.train.options import TrainBenchOptions

    plain, v1, v2, split = (TrainBenchOptions.from_args(tiny_args(tmp_path / "x.json", **kw))
                            for kw in ({}, {"language": "v1"}, {"language": "v2"}, {"language": "v2-split"}))
    assert v2.eval_splits == plain.eval_splits and v2.task_overrides == {"params.instruction_version": 2}
    assert "language" not in plain.settings_key() and work_identity(v1) == work_identity(plain)
    assert plain.eval_splits == ("val_seen", "val_unseen", "test") and plain.task_overrides == {}
    assert split.settings_key() == {**plain.settings_key(), "language": "v2-split"}
    assert work_identity(split)["config"] != work_identity(plain)["config"]
    assert split.eval_splits == ("val_seen", "val_unseen", "val_unseen_language", "test")
    assert split.task_overrides == {"params.instruction_version": 2, "params.language_split": True}


def _row(agent, split, ids, homes, sr):
    return {"agent": agent, "split": split, "mode": "telhop", "episodes": len(ids), "SR": {"mean": sum(sr) / len(sr)},
            "per_episode": {"ids": ids, "homes": homes, "SR": sr, "SPL": [0.5 * v for v in sr]}}


def test_language_drop_pairs_each_episode_with_its_val_unseen_twin():
    """Four paths in two homes; the language rows listed in another order: the drop pairs by id."""
    from vlnverse.benchmarks.train.report import language_drop_lines, language_drops

    ids, homes = ["h1_0", "h1_1", "h2_0", "h2_1"], ["h1", "h1", "h2", "h2"]
    table = [_row("cma_il", "val_unseen", ids, homes, [1.0, 1.0, 0.0, 1.0]),
             _row("cma_il", "val_unseen_language", [i + "-language" for i in reversed(ids)], list(reversed(homes)),
                  [0.0, 0.0, 1.0, 0.0]),  # h2_1 0, h2_0 0, h1_1 1, h1_0 0
             _row("random", "val_unseen", ids, homes, [0.0] * 4)]  # no language row: no drop
    (drop,) = language_drops(table)
    assert drop["agent"] == "cma_il" and drop["homes"] == 2 and drop["episodes"] == 4
    assert drop["SR"]["mean"] == pytest.approx((1 - 0 + 1 - 1 + 0 - 0 + 1 - 0) / 4)  # 0.5
    assert drop["SPL"]["mean"] == pytest.approx(0.25)
    assert (drop["SR_val_unseen"], drop["SR_val_unseen_language"]) == (0.75, 0.25)
    assert drop["SR"]["prob_improvement"] > 0.5 and drop["SR"]["clusters"] == 2
    lines = language_drop_lines([drop])
    assert len(lines) == 2 and "+0.500" in lines[1] and "cma_il" in lines[1]
    other = [table[0], _row("cma_il", "val_unseen_language", ["x-language"] + ids[1:], homes, [0.0] * 4)]
    assert language_drops(other) == []  # not the same paths


@pytest.mark.parametrize("seeds", ["0", None], ids=["jobs", "single"])
def test_language_split_trains_on_one_family_and_reports_the_paired_drop(seeds, tiny, tmp_path):
    """The tiniest run (``--seeds 0`` jobs, and the single run) with ``--language v2-split``:
    version-2 episodes, a val_unseen_language split on val_unseen's paths in other wording,
    evaluated for every agent, and each agent's drop equal to the paired difference of the
    per-episode SR in the JSON."""
    from vlnverse.tasks.episode import load_episodes
    from vlnverse.tasks.instructions import route_language

    fig = tiny.run(tiny_args(tmp_path / "bt.json", language="v2-split", seeds=seeds))
    assert fig["language"] == "v2-split"
    seed = Path(fig["work_dir"])
    if seeds is not None:
        assert fig["work"]["settings"]["language"] == "v2-split"
        seed = seed / "seeds" / "s0"
    unseen, shifted = (load_episodes(seed / f"{s}.jsonl") for s in ("val_unseen", "val_unseen_language"))
    assert len(unseen) == len(shifted) >= 2
    twins = {e.episode_id: e for e in unseen}
    for b in shifted:
        a = twins[b.episode_id.removesuffix("-language")]
        assert a.reference_path == b.reference_path and a.scene_id == b.scene_id
        assert {i.text for i in a.instructions}.isdisjoint({i.text for i in b.instructions})
        assert all(route_language.family(t) == 1 for ids in b.info["template_ids"] for t in ids)
    for e in load_episodes(seed / "train.jsonl"):
        assert all(route_language.family(t) == 0 for ids in e.info["template_ids"] for t in ids)
    assert list(dict.fromkeys(r["split"] for r in fig["table"])) == ["val_seen", "val_unseen", "val_unseen_language",
                                                                      "test"]
    rows = {(r["agent"], r["split"]): r for r in fig["table"] if r["mode"] == "telhop"}
    agents = {"random", "forward", "seq2seq_il"}
    assert {a for a, s in rows if s == "val_unseen_language"} == agents
    for (agent, split), r in rows.items():  # the wording each row was evaluated on, in its protocol
        families = [1] if split == "val_unseen_language" else [0]
        assert r["protocol"]["instruction_language"] == [{"version": 2, "families": families}], (agent, split)
    drops = {d["agent"]: d for d in fig["language_drop"]}
    assert set(drops) == agents and len(fig["language_drop_text"]) == len(agents) + 1
    for agent in agents:
        a, b = rows[(agent, "val_unseen")]["per_episode"], rows[(agent, "val_unseen_language")]["per_episode"]
        shifted_sr = dict(zip(b["ids"], b["SR"]))
        by_hand = [sr - shifted_sr[f"{i}-language"] for i, sr in zip(a["ids"], a["SR"])]
        assert drops[agent]["SR"]["mean"] == pytest.approx(sum(by_hand) / len(by_hand))
        assert drops[agent]["SR"]["n"] == len(unseen) and drops[agent]["homes"] == len({e.scene_id for e in unseen})
    json.dumps(fig)  # JSON-ready


def test_task_joins_the_work_identity_only_when_not_fine_grained(tmp_path):
    from vlnverse.benchmarks.train.jobs import work_identity
    from vlnverse.benchmarks.train.options import TrainBenchOptions

    plain, fine, coarse = (TrainBenchOptions.from_args(tiny_args(tmp_path / "x.json", **kw))
                           for kw in ({}, {"task": "fine_grained"}, {"task": "coarse_grained", "language": "v2-split"}))
    assert plain.task == fine.task == "fine_grained" and work_identity(fine) == work_identity(plain)
    assert coarse.settings_key() == {**plain.settings_key(), "language": "v2-split", "task": "coarse_grained"}
    assert coarse.eval_splits == ("val_seen", "val_unseen", "val_unseen_language", "test")


@pytest.mark.parametrize("seeds", ["0", None], ids=["jobs", "single"])
def test_coarse_grained_trains_on_formal_and_reports_the_drop_on_natural_and_casual(seeds, tiny, tmp_path):
    """``--task coarse_grained --language v2-split`` (the tiniest run, ``--seeds 0`` and single): every split's
    episodes are coarse-grained and formal, val_unseen_language holds each val_unseen episode (same
    path and target) in the natural and casual styles only, the rows train on coarse-grained
    episodes, and each agent's drop is the paired difference of its per-episode SR."""
    from vlnverse.tasks.episode import load_episodes

    fig = tiny.run(tiny_args(tmp_path / "bt.json", language="v2-split", task="coarse_grained", seeds=seeds))
    assert fig["task"] == "coarse_grained"
    seed, il = Path(fig["work_dir"]), Path(fig["work_dir"]) / "il" / "seq2seq"
    if seeds is not None:
        assert fig["work"]["settings"]["task"] == "coarse_grained"
        seed, il = seed / "seeds" / "s0", seed / "jobs" / "seq2seq-s0" / "il" / "seq2seq"
    for split in ("train", "val_seen", "val_unseen", "test"):
        for e in load_episodes(seed / f"{split}.jsonl"):
            assert [i.style for i in e.instructions] == ["formal"] and "target" in e.info, (split, e.episode_id)
    unseen, shifted = (load_episodes(seed / f"{s}.jsonl") for s in ("val_unseen", "val_unseen_language"))
    assert len(unseen) == len(shifted) >= 2
    twins = {e.episode_id: e for e in unseen}
    for b in shifted:
        a = twins[b.episode_id.removesuffix("-language")]
        assert a.reference_path == b.reference_path and a.info["target"] == b.info["target"]
        assert sorted(i.style for i in b.instructions) == ["casual", "natural"]
    config = json.loads((il / "config.json").read_text())
    assert config["config"]["task"] == "coarse_grained"
    rows = {(r["agent"], r["split"]): r for r in fig["table"] if r["mode"] == "telhop"}
    drops = {d["agent"]: d for d in fig["language_drop"]}
    assert set(drops) == {"random", "forward", "seq2seq_il"}
    for agent, drop in drops.items():
        a, b = rows[(agent, "val_unseen")]["per_episode"], rows[(agent, "val_unseen_language")]["per_episode"]
        shifted_sr = dict(zip(b["ids"], b["SR"]))
        by_hand = [sr - shifted_sr[f"{i}-language"] for i, sr in zip(a["ids"], a["SR"])]
        assert drop["SR"]["mean"] == pytest.approx(sum(by_hand) / len(by_hand)) and drop["SR"]["n"] == len(unseen)


def test_il_batching_reaches_every_selected_row_and_joins_the_work_identity_only_when_given(tmp_path):
    """``--il-batching padded`` (the padded vs bucketed A/B): each selected row's IL config forms padded
    batches, the work identity differs from the recipe's, and a bad value is a one-line error."""
    from vlnverse.benchmarks.train import recipe as R
    from vlnverse.benchmarks.train.jobs import work_identity
    from vlnverse.benchmarks.train.options import TrainBenchOptions
    from vlnverse.core.config import from_dict
    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.config import TrainConfig

    plain, padded, bucketed = (TrainBenchOptions.from_args(tiny_args(tmp_path / "x.json", policies="seq2seq,cma", **kw))
                               for kw in ({}, {"il_batching": "padded"}, {"il_batching": "bucketed"}))
    assert padded.settings_key() == {**plain.settings_key(), "il_batching": "padded"}
    assert work_identity(bucketed) == work_identity(plain) and bucketed.rows == plain.rows  # the recipe's own
    assert "il_batching" not in plain.settings_key() and work_identity(padded)["config"] != work_identity(plain)["config"]
    for options, want in ((plain, "bucketed"), (padded, "padded")):
        assert [r["name"] for r in options.rows] == ["seq2seq", "cma"]
        for row in options.rows:
            cfg = R.row_config(row, tmp_path, None, 0, "cpu", 1, dict(row["params"]))
            assert from_dict(TrainConfig, cfg).il.batching == want, row["name"]
    with pytest.raises(ConfigError, match="got 'packed'.*bucketed or padded") as err:
        TrainBenchOptions.from_args(tiny_args(tmp_path / "x.json", il_batching="packed"))
    assert str(err.value).startswith("--il-batching") and "\n" not in str(err.value)


def test_waypoint_epochs_reach_each_seeds_predictor_and_join_the_work_identity_only_when_given(tmp_path, monkeypatch):
    """``--waypoint-epochs 60`` (the predictor's 15 vs 60 A/B, docs/results/log.md): a seed's prepared
    predictor is trained for 60 epochs, the work identity differs from the recipe's (so a ledger of
    15-epoch jobs is not carried into it), the flag is handed to Table 7's stage, and 0 is a
    one-line error."""
    from vlnverse.benchmarks.train import jobs
    from vlnverse.benchmarks.train import recipe as R
    from vlnverse.benchmarks.train.jobs import work_identity
    from vlnverse.benchmarks.train.options import TrainBenchOptions
    from vlnverse.core.errors import ConfigError

    plain, longer = (TrainBenchOptions.from_args(tiny_args(tmp_path / "x.json", policies="gama", **kw))
                     for kw in ({}, {"waypoint_epochs": 60}))
    assert (plain.waypoint_epochs, longer.waypoint_epochs) == (None, 60)
    assert longer.settings_key() == {**plain.settings_key(), "waypoint_epochs": 60}
    assert "waypoint_epochs" not in plain.settings_key() and work_identity(longer)["config"] != work_identity(plain)["config"]
    asked = []
    import vlnverse.learn.homes as homes

    monkeypatch.setattr(jobs, "split_data", lambda folder, options, seed: ({s: [] for s in R.SPLITS + ("train",)}, {}))
    monkeypatch.setattr(homes, "check_disjoint_homes", lambda *a, **k: None)
    monkeypatch.setattr(jobs.seed_run, "train_waypoint_predictor",
                        lambda folder, scale, seed, epochs=None: asked.append((seed, epochs)) or {"path": "p.pt"})
    for options in (plain, longer):
        jobs.prepare_seed(tmp_path / f"w{options.waypoint_epochs}", options, 1, encoder=False, predictor=True)
    assert asked == [(1, None), (1, 60)]
    with pytest.raises(ConfigError, match="got 0.*an integer >= 1") as err:
        TrainBenchOptions.from_args(tiny_args(tmp_path / "x.json", waypoint_epochs=0))
    assert str(err.value).startswith("--waypoint-epochs") and "\n" not in str(err.value)
