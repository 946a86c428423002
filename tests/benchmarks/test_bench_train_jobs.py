"""``vlnverse bench train --seeds``: (row, seed) jobs on the parallel engine, their work folder
(identity, resume, retries) and the aggregate over seeds; ``--benchmark``'s data. The end-to-end
runs are the tiniest bench: 2 generated homes of 4 episodes, 1 episode per held-out scene, small
CNNs, no DAgger, a step budget of 10 (``MAX_STEPS``, which the jobs' processes take from here)."""
import json
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

pytest.importorskip("torch")

SPLITS = ("val_seen", "val_unseen", "test")


def tiny_args(out: Path, **kw) -> SimpleNamespace:
    args = dict(out=str(out), seed=0, seeds="0", policies="seq2seq", train_homes=2, episodes_per_home=4, eval_episodes=1,
                test_episodes=None, val_seen_episodes=None, epochs=2, budget=None, workers=1, encoder="cnn",
                no_strict=True, no_dagger=True, no_transfer=True, validation_episodes=1, engine="local", address=None,
                rebuild=False, benchmark=None, render_only=False)
    args.update(kw)
    return SimpleNamespace(**args)


@pytest.fixture
def tiny(monkeypatch):
    """``bench train`` (``run``; with ``--seeds``: ``benchmarks.train.jobs``) with the rows' step
    budget at 10; ``row``: the module of ``train_row``."""
    from vlnverse.benchmarks.train import recipe, row, run

    monkeypatch.setattr(recipe, "MAX_STEPS", 10)
    return SimpleNamespace(run=run, row=row)


def _checkpoint_tensors(path):
    from vlnverse.learn.checkpoint import read_checkpoint

    return read_checkpoint(path)["state_dict"]


def _per_episode(result):
    return {(r["agent"], r["split"]): r["per_episode"] for r in result["table"]}


# ------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize("text, match", [("", "names no seed"), (" , ,", "names no seed"), ("0,1,0", "seed 0 given twice"),
                                         ("0,x", "'x'"), ("-1", "'-1'")])
def test_seeds_naming_nothing_or_twice_is_one_line(text, match, tmp_path):
    from vlnverse.benchmarks.train import run
    from vlnverse.core.errors import ConfigError

    with pytest.raises(ConfigError, match=match) as err:
        run(tiny_args(tmp_path / "bt.json", seeds=text))
    assert "--seeds" in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "bt").exists()  # refused before any work


@pytest.mark.parametrize("text, match", [("", "names no row"), (",,", "names no row"), ("cma,nope", "nope")])
def test_policies_naming_nothing_is_one_line(text, match, tmp_path):
    from vlnverse.benchmarks.train import run
    from vlnverse.core.errors import ConfigError

    with pytest.raises(ConfigError, match=match) as err:
        run(tiny_args(tmp_path / "bt.json", seeds="0,1", policies=text))
    assert "--policies" in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "bt").exists()


def test_workers_default_to_the_usable_cores_of_a_single_run_and_to_one_per_job(tmp_path, monkeypatch):
    """``--workers`` not given: a single-seed run takes the cores it may use, shared among
    ``$VLNVERSE_JOBS``; ``--seeds`` jobs take 1 each; a given value is kept."""
    import os

    from vlnverse.benchmarks.train.options import TrainBenchOptions

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4, 5}, raising=False)
    monkeypatch.delenv("VLNVERSE_JOBS", raising=False)
    single = tiny_args(tmp_path / "bt.json", seeds=None, workers=None)
    assert TrainBenchOptions.from_args(single).workers == 6
    monkeypatch.setenv("VLNVERSE_JOBS", "4")
    assert TrainBenchOptions.from_args(single).workers == 1  # 6 cores // 4 runs
    monkeypatch.setenv("VLNVERSE_JOBS", "2")
    assert TrainBenchOptions.from_args(single).workers == 3
    assert TrainBenchOptions.from_args(tiny_args(tmp_path / "bt.json", seeds="0,1", workers=None)).workers == 1
    assert TrainBenchOptions.from_args(tiny_args(tmp_path / "bt.json", seeds=None, workers=2)).workers == 2


def test_parse_seeds_keeps_the_order_given():
    from vlnverse.benchmarks.train.options import parse_seeds

    assert parse_seeds("2, 0,1") == [2, 0, 1] and parse_seeds("7") == [7] and parse_seeds("0,1,") == [0, 1]


def test_work_folder_of_another_code_version_or_setting_is_refused_or_rebuilt(tmp_path):
    from dataclasses import replace

    from vlnverse.benchmarks.train.jobs import check_work, work_identity
    from vlnverse.benchmarks.train.options import TrainBenchOptions
    from vlnverse.core.errors import ConfigError

    opts = TrainBenchOptions.from_args(tiny_args(tmp_path / "x.json"))
    me = work_identity(opts)
    assert me["benchmark"] is None and me["code_version"] and len(me["config"]) == 16
    assert work_identity(replace(opts, workers=4, parallel_workers=4)) == me  # how many run at once is not part of it
    work = tmp_path / "bt"
    check_work(work, me, False, print)
    (work / "jobs").mkdir()
    check_work(work, me, False, print)  # the same identity: continued
    assert (work / "jobs").is_dir()
    old = {**me, "code_version": "0.0.1"}
    (work / "work.json").write_text(json.dumps(old))
    with pytest.raises(ConfigError, match=r"work.json code_version.*'0.0.1'.*--rebuild") as err:
        check_work(work, me, False, print)
    assert "\n" not in str(err.value)
    more = work_identity(replace(opts, epochs=5))
    (work / "work.json").write_text(json.dumps(me))
    with pytest.raises(ConfigError, match=r"work.json config.*\(epochs: 2 there, 5 here\)"):
        check_work(work, more, False, print)
    lines = []
    check_work(work, more, True, lines.append)  # --rebuild: deleted, started afresh, one line says why
    assert len(lines) == 1 and "--rebuild" in lines[0] and "config" in lines[0]
    assert not (work / "jobs").exists() and json.loads((work / "work.json").read_text()) == more
    other = tmp_path / "other"
    (other / "il").mkdir(parents=True)
    with pytest.raises(ConfigError, match="no work.json"):  # a single-seed run's folder
        check_work(other, me, False, print)
    bench = {**me, "benchmark": "proc-v1", "benchmark_version": 2}
    (work / "work.json").write_text(json.dumps({**me, "benchmark": "proc-v1", "benchmark_version": 1}))
    with pytest.raises(ConfigError, match="work.json benchmark_version.*1.*2"):
        check_work(work, bench, False, print)


#: ``work.json`` of ``bench train --seeds 0,1,2`` at the default flags, as the code before the rows
#: were read from their train configs made it (without and with ``--benchmark proc-v1``, version 1)
DEFAULT_IDENTITY = {"benchmark": None, "benchmark_version": None, "code_version": "0.1.0", "config": "16e0a7f38ac32401",
                    "settings": {"budget": None, "dagger": True, "encoder": "pretrained", "epochs": 15, "homes": 30,
                                 "per_held_out": 50, "per_home": 8, "per_test": 50, "scale": 1.0, "table7": True,
                                 "val_seen_cap": 40, "validation_episodes": 6}}
PROC_V1_CONFIG = "5bc6ce9033e2f0a5"
#: sha256 (16 hex) of each row's IL and DAgger ``TrainConfig`` dicts in a job folder (the trainer's and
#: its caches' keys derive from them), as that code made them
ROW_CONFIGS = {"seq2seq": ("5c46c67eb3706c3d", "8dea1caef151f8c2"), "cma": ("df2bbb4a9a44304d", "99c1e80bef0a406f"),
               "rdp": ("d70521c525723155", "dbab507d7b4e9f91"), "vlnbert": ("27b39e82dce310e6", "5623cd693d99bc43"),
               "hnr": ("92a70da7ba4905f4", "5ee950b7ae87e6e8"), "gama": ("8f9fc054acdf71d2", "f84b1a78e4669977"),
               "gama_multitask": ("9d568b7b5307e331", "783ecf54505f7344")}


def test_a_work_folder_made_before_the_split_resumes_its_identity_and_job_configs_are_unchanged(tmp_path):
    """The identity of a ``bench train --seeds`` work folder at the default flags (with and without
    ``--benchmark proc-v1``), and every row's IL and DAgger config in a job, are byte for byte those
    of the code that made the running folders: such a folder's ``work.json`` is continued."""
    import hashlib

    from vlnverse.benchmarks.train import recipe as R
    from vlnverse.benchmarks.train.jobs import check_work, work_identity
    from vlnverse.benchmarks.train.options import TrainBenchOptions
    from vlnverse.core.io import to_jsonable

    flags = dict(out="x.json", seed=0, seeds="0,1,2", policies=None, train_homes=None, episodes_per_home=None,
                 eval_episodes=None, test_episodes=None, val_seen_episodes=None, epochs=None, budget=None, workers=None,
                 encoder="pretrained", no_strict=False, no_dagger=False, no_transfer=False, validation_episodes=None,
                 engine="local", address=None, rebuild=False, benchmark=None, render_only=False)
    options = TrainBenchOptions.from_args(SimpleNamespace(**flags))
    assert json.dumps(work_identity(options), sort_keys=True) == json.dumps(DEFAULT_IDENTITY, sort_keys=True)
    made = {"benchmark": "proc-v1", "benchmark_version": 1, "code_version": "0.1.0", "config": PROC_V1_CONFIG,
            "settings": {k: v for k, v in DEFAULT_IDENTITY["settings"].items() if k not in ("per_held_out", "per_test", "scale")}}
    proc = TrainBenchOptions.from_args(SimpleNamespace(**{**flags, "benchmark": "proc-v1"}))
    assert work_identity(proc) == made
    (tmp_path / "work.json").write_text(json.dumps(made, indent=2, sort_keys=True))  # a running folder's, as written
    (tmp_path / "jobs").mkdir()
    check_work(tmp_path, work_identity(proc), False, print)  # continued, not refused
    assert (tmp_path / "jobs").is_dir()

    def digest(cfg: dict) -> str:
        return hashlib.sha256(json.dumps(to_jsonable(cfg), sort_keys=True).encode()).hexdigest()[:16]

    work = Path("/w/jobs/x")
    for row in R.policy_rows():
        params = dict(row["params"])  # as a job gives them: the seed's encoder and predictor files
        if "rgb_encoder" in params:
            params["rgb_encoder"] = params["depth_encoder"] = {"type": "pretrained", "frozen": True,
                                                               "path": "/w/seeds/s0/encoder/encoder.safetensors"}
        if row.get("waypoint_predictor"):
            params["waypoint_predictor"] = "/w/seeds/s0/waypoints/predictor.pt"
        il = R.row_config(row, work, None, 0, "auto", 1, params, 15, 6)
        base = R.row_config(row, work, None, 0, "auto", 1, dict(row["params"]), 15, 6)
        dagger = R.dagger_config(base, row["name"], work, "/w/jobs/x/il/r/best.pt", None, 15, 6, 508)
        assert (digest(il), digest(dagger)) == ROW_CONFIGS[row["name"]], row["name"]


def test_a_change_to_the_shared_encoder_or_predictor_recipe_refuses_an_old_work_folder(tmp_path, monkeypatch):
    """The recipes of the encoder and the waypoint predictor a seed's rows share are part of the
    work identity: today's recipes keep the pinned identity (the ledgers made before they joined
    it carry), and a folder made before one of them changes is refused, the line saying so."""
    from dataclasses import replace

    from vlnverse.benchmarks.train import recipe as R
    from vlnverse.benchmarks.train.jobs import check_work, work_identity
    from vlnverse.benchmarks.train.options import TrainBenchOptions
    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.encoder import pretraining
    from vlnverse.learn.waypoints import train as waypoints

    assert R.component_recipes() == R.COMPONENTS_AT_START
    assert R.component_recipes()["encoder"]["epochs"] == 15 and R.component_recipes()["predictor"]["model"] == {"rgb": True}
    opts = TrainBenchOptions.from_args(tiny_args(tmp_path / "x.json"))
    made = work_identity(opts)
    check_work(tmp_path / "bt", made, False, print)
    monkeypatch.setitem(pretraining.RECIPE_PRETRAINING, "epochs", 30)
    longer = work_identity(opts)
    assert longer["config"] != made["config"] and longer["settings"] == made["settings"]
    assert R.component_recipes()["encoder"]["epochs"] == 30
    with pytest.raises(ConfigError, match=r"work.json config.*the shared encoder's or waypoint predictor's"):
        check_work(tmp_path / "bt", longer, False, print)
    monkeypatch.setitem(pretraining.RECIPE_PRETRAINING, "epochs", 15)
    assert work_identity(opts) == made  # back to the recipe: the folder carries again
    monkeypatch.setattr(waypoints, "RECIPE_MODEL", {"rgb": False})
    assert R.component_recipes()["predictor"]["model"] == {"rgb": False}
    assert work_identity(opts)["config"] not in (made["config"], longer["config"])
    monkeypatch.setattr(waypoints, "RECIPE_MODEL", {"rgb": True})
    # --waypoint-epochs is a run setting (settings_key), not a recipe change
    assert work_identity(replace(opts, waypoint_epochs=60))["settings"]["waypoint_epochs"] == 60


def test_carried_jobs_of_another_predictor_draw_are_named_before_the_new_jobs_train(tmp_path):
    """Seed 1's GAMA job carried from another machine acted on a predictor of held-out hit 0.8403;
    this run's seed 1 predictor reads 0.7983 (and an encoder file of its own): the seed is named
    with both draws before its new jobs train. Seed 0, whose carried job and prepared predictor
    agree, and a carried job without predictor figures are not."""
    from vlnverse.benchmarks.train.jobs import draws_before_training

    there = {"poses": 119, "next_waypoint_hit": 0.8403}
    here = {"poses": 119, "next_waypoint_hit": 0.7983}
    same = {"poses": 120, "next_waypoint_hit": 0.9}
    (tmp_path / "encoder.safetensors").write_bytes(b"trunks")
    carried = {"gama-s1": {"seed": 1, "figures": {"waypoint_predictor": {"held_out": there}}},
               "gama-s0": {"seed": 0, "figures": {"waypoint_predictor": {"held_out": same}}},
               "cma-s1": {"seed": 1, "figures": {"device": "cpu"}}}
    shared = {"seed-1": {"seed": 1, "predictor": {"held_out": here, "epochs": 15},
                         "encoder": {"path": str(tmp_path / "encoder.safetensors")}},
              "seed-0": {"seed": 0, "predictor": {"held_out": same, "epochs": 15}}}
    draws = draws_before_training(carried, shared)
    assert draws == [{"seed": 1, "artefact": "waypoint predictor", "draws": [
        {"label": "15 epochs, held-out hit 0.8403", "jobs": ["gama-s1"]},
        {"label": "15 epochs, held-out hit 0.7983", "jobs": ["seed-1"]}]}]
    assert draws_before_training({}, shared) == []  # a fresh folder: one draw per seed


def test_multitask_row_needs_the_single_seed_run(tmp_path):
    from vlnverse.benchmarks.train import run
    from vlnverse.core.errors import ConfigError

    with pytest.raises(ConfigError, match="--policies.*gama_multitask with --seeds"):
        run(tiny_args(tmp_path / "bt.json", seeds="0,1", policies="gama_multitask"))


# ------------------------------------------------------------------------------ aggregation


def test_aggregate_over_seeds_is_the_hand_computed_mean_and_sd():
    """Seed 0: SR 1, 0 in home a and 1, 0 in home b (0.5); seed 1: 1, 1 and 1, 0 (0.75); seed 2: all
    0 (0.0). Mean 0.4167, sample sd sqrt(((0.5-m)^2 + (0.75-m)^2 + m^2) / 2) = 0.3819; pooled, home
    a has 3 of 6 successes and home b 2 of 6."""
    from vlnverse.benchmarks.train.report import aggregate, aggregate_lines

    def result(seed, sr):
        per = {"ids": ["e0", "e1", "e2", "e3"], "homes": ["a", "a", "b", "b"], "SR": sr, "SPL": [v / 2 for v in sr],
               "nDTW": sr}
        row = {"agent": "cma_il", "split": "test", "mode": "telhop", "episodes": 4, "per_episode": per,
               "protocol": {"collision_mode": "telhop"}, **{m: {"mean": sum(per[m]) / 4} for m in ("SR", "SPL", "nDTW")}}
        return {"seed": seed, "table": [row]}

    jobs = {"cma-s0": result(0, [1.0, 0.0, 1.0, 0.0]), "cma-s1": result(1, [1.0, 1.0, 1.0, 0.0]),
            "cma-s2": result(2, [0.0, 0.0, 0.0, 0.0])}
    (row,) = aggregate(jobs)
    assert (row["agent"], row["split"], row["mode"], row["seeds"], row["seed_list"]) == ("cma_il", "test", "telhop", 3, [0, 1, 2])
    assert row["per_seed"] == {"0": {"SR": 0.5, "SPL": 0.25, "nDTW": 0.5}, "1": {"SR": 0.75, "SPL": 0.375, "nDTW": 0.75},
                               "2": {"SR": 0.0, "SPL": 0.0, "nDTW": 0.0}}
    sr = row["seeds_ci"]["SR"]
    assert sr["mean"] == 0.4167 and sr["sd"] == 0.3819 and sr["seeds"] == 3 and sr["n"] == 12
    assert row["seeds_ci"]["SPL"]["mean"] == 0.2083 and row["seeds_ci"]["SPL"]["sd"] == 0.1909
    assert 0.0 <= sr["lo"] <= sr["mean"] <= sr["hi"] <= 1.0
    # the seeds' episodes pooled: a results-format-2 row (episode and clustered intervals, homes, design)
    assert row["episodes"] == 12 and row["SR"]["mean"] == 0.4167 and row["SR"]["n"] == 12
    assert row["clustered"]["SR"]["mean"] == 0.4167 and row["design"]["homes"] == 2 and row["design"]["episodes"] == 12
    assert row["per_home"]["a"]["SR"] == 0.5 and row["per_home"]["b"]["SR"] == 0.3333
    assert row["per_episode"]["ids"][:5] == ["s0/e0", "s0/e1", "s0/e2", "s0/e3", "s1/e0"]
    assert row["protocol"] == {"collision_mode": "telhop"}
    assert aggregate(jobs) == [row]  # seeded
    (two,) = aggregate({k: v for k, v in jobs.items() if k != "cma-s2"})  # a failed seed: over the others
    assert two["seeds"] == 2 and two["seeds_ci"]["SR"]["mean"] == 0.625 and two["seeds_ci"]["SR"]["sd"] == 0.1768
    header, line = aggregate_lines([row])
    assert header.split()[:6] == ["agent", "split", "mode", "seeds", "n", "homes"]
    assert line.split()[:6] == ["cma_il", "test", "telhop", "3", "12", "2"] and "0.417 ± 0.382 [" in line


def test_the_vlnbert_job_runs_its_table7_stage_on_its_own_folder(tmp_path, monkeypatch):
    """The wiring of the VLN-BERT row's job (training, evaluation and the stage replaced): the
    seed's predictor is where the stage reads it, the stage sees the job's val_unseen results,
    its lines join the job's table (so they aggregate over seeds) and its figures the result."""
    from dataclasses import replace

    from vlnverse.benchmarks.train import evaluation, recipe, row
    from vlnverse.benchmarks.train.jobs import row_job
    from vlnverse.benchmarks.train.options import TrainBenchOptions

    seed_dir = tmp_path / "seeds" / "s3"
    seed_dir.mkdir(parents=True)
    for name in ("train", "val_seen", "val_unseen", "test"):
        (seed_dir / f"{name}.jsonl").write_text(f"{name}\n")
    (seed_dir / "predictor.pt").write_bytes(b"weights")
    monkeypatch.setattr(row, "train_row", lambda row, folder, *a: {
        "checkpoints": {"vlnbert_il": "il.pt", "vlnbert_il_dagger": "dagger.pt"}, "figures": {"device": "cpu"}, "curve": {}})
    monkeypatch.setattr(evaluation, "evaluate", lambda spec, split, mode, folder, seed, workers, sensors, agent,
                        task="fine_grained": {
        "episodes": 1, "SR": {"mean": 0.5 if agent.endswith("dagger") else 0.25}})
    seen = {}

    def stage(args, work, workers, results, table):
        seen.update(seed=args.seed, work=work, predictor=(work / "waypoints" / "predictor.pt").read_bytes(),
                    in_domain=[results["telhop"]["val_unseen"][a]["SR"]["mean"] for a in ("vlnbert_il", "vlnbert_il_dagger")])
        table.append({"agent": "vlnbert_t7_zero_shot", "split": "val_unseen", "mode": "telhop", "episodes": 1})
        return {"table7": {"ratio": 2.0}}

    monkeypatch.setattr(recipe, "table7_stage", lambda: stage)
    opts = TrainBenchOptions(rows=(recipe.policy_row("vlnbert"),), budget=None, dagger=True, table7=True, epochs=1,
                             validation_episodes=1)
    got = row_job(tmp_path, opts, "vlnbert", 3, {"predictor": {"path": str(seed_dir / "predictor.pt")}})
    folder = tmp_path / "jobs" / "vlnbert-s3"
    assert seen == {"seed": 3, "work": folder, "predictor": b"weights", "in_domain": [0.25, 0.5]}
    assert got["online_fine_tuning"] == {"table7": {"ratio": 2.0}} and got["table"][-1]["agent"] == "vlnbert_t7_zero_shot"
    assert len(got["table"]) == 7 and (folder / "test.jsonl").read_text() == "test\n"
    assert json.loads((folder / "done.json").read_text()) == got
    from vlnverse.core.provenance import code_revision

    assert got["code"] == code_revision()  # the commit that ran the job (None outside a git checkout)
    seen.clear()
    row_job(tmp_path, replace(opts, table7=False), "vlnbert", 3, {"predictor": None})  # --no-transfer: no stage
    assert seen == {}


def test_best_agent_is_the_best_val_seen_sr_over_seeds_ties_by_ndtw():
    from vlnverse.benchmarks.train.report import best_agent

    def row(agent, sr, ndtw, split="val_seen"):
        return {"agent": agent, "split": split, "mode": "telhop",
                "seeds_ci": {"SR": {"mean": sr}, "nDTW": {"mean": ndtw}}}

    rows = [row("random", 0.9, 0.9), row("cma_il", 0.3, 0.5), row("cma_il_dagger", 0.3, 0.6), row("rdp_il", 0.2, 0.9),
            row("seq2seq_il", 0.8, 0.8, split="test")]
    assert best_agent(rows) == "cma_il_dagger"  # baselines and other splits do not count
    assert best_agent([row("forward", 0.5, 0.5)]) is None


# ------------------------------------------------------------------------------ --benchmark


class _Bench:
    """A benchmark's interface (``tasks.benchmark.Benchmark``) over the shipped scenes."""

    name, version, task, rooms = "tiny-v1", 3, "fine_grained", (4, 6)
    episodes_per_home = {"train": 4, "val_unseen": 1, "test": 1}
    path = Path("tiny-v1.json")

    def __init__(self, held_out):
        self.held_out, self.asked = held_out, []

    def train_seeds(self, homes):
        return list(range(7000, 7000 + homes))

    def episodes(self, split, **kw):
        self.asked.append(split)
        return [e for e in self.held_out if e.split == split]

    def identity(self, split=None):
        return {"name": self.name, "version": self.version}

    def check_fingerprints(self, split, found):
        self.checked = (split, sorted(found))


def test_benchmark_gives_the_training_homes_and_held_out_episodes(tmp_path, monkeypatch):
    from vlnverse.benchmarks.train.data import _dataset, split_data
    from vlnverse.benchmarks.train.options import TrainBenchOptions
    from vlnverse.core.errors import ConfigError

    held = [e for split in ("val_unseen", "test")  # the benchmark's held-out episodes: 1 per shipped scene
            for e in _dataset("fine_grained", split, 1, 5, tmp_path / f"held_{split}", 0.0) if e.split == split]
    bench = _Bench(held)
    module = ModuleType("vlnverse.tasks.benchmark")
    module.load_benchmark = lambda name: bench
    monkeypatch.setitem(sys.modules, "vlnverse.tasks.benchmark", module)
    with pytest.raises(ConfigError, match="--eval-episodes.*benchmark fixes"):
        TrainBenchOptions.from_args(tiny_args(tmp_path / "x.json", benchmark="tiny-v1"))
    with pytest.raises(ConfigError, match="--train-homes"):
        TrainBenchOptions.from_args(tiny_args(tmp_path / "x.json", benchmark="tiny-v1", eval_episodes=None, train_homes=0))
    opts = TrainBenchOptions.from_args(tiny_args(tmp_path / "x.json", benchmark="tiny-v1", eval_episodes=None,
                                                 episodes_per_home=None))
    assert opts.benchmark is bench and opts.per_home == 4  # the benchmark's train episodes per home
    splits, homes = split_data(tmp_path / "w", opts, 0)
    assert homes["seed"] == 7000 and homes["homes"] == 2  # the first homes of the train pool
    assert bench.checked == ("train", ["gen_07000", "gen_07001"])  # checked against the pool's fingerprints
    assert {e.scene_id for e in splits["train"]} <= {"gen_07000", "gen_07001"}
    assert [e.episode_id for e in splits["val_unseen"]] == [e.episode_id for e in held if e.split == "val_unseen"]
    assert [e.episode_id for e in splits["test"]] == [e.episode_id for e in held if e.split == "test"]
    assert bench.asked == ["val_unseen", "test"] and not (tmp_path / "w" / "data_val_unseen").exists()
    from vlnverse.benchmarks.train.jobs import work_identity

    me = work_identity(opts)
    assert (me["benchmark"], me["benchmark_version"]) == ("tiny-v1", 3) and "per_held_out" not in me["settings"]


# ------------------------------------------------------------------------------ jobs, end to end


def test_a_failing_job_is_retried_then_reported_and_the_others_finish(tiny, tmp_path, monkeypatch, capsys):
    """One seed, the cma row raising every time: tried twice, listed in ``failed_jobs`` and on
    stderr, exit status 1; the baselines' results and their aggregate stand. A rerun skips the
    done job and tries the failed one again."""
    from vlnverse.benchmarks import cli

    calls = []

    def broken(row, *a, **kw):
        calls.append(row["name"])
        raise RuntimeError("the GPU fell off")

    monkeypatch.setattr(tiny.row, "train_row", broken)
    out = tmp_path / "bt.json"
    args = tiny_args(out, policies="cma", name="train", nproc=None)
    assert cli._run(args) == 1
    fig = json.loads(out.read_text())
    assert calls == ["cma", "cma"] and fig["retries"] == 1
    assert fig["failed_jobs"] == [{"job": "cma-s0", "error": "RuntimeError: the GPU fell off", "attempts": 2}]
    assert sorted(fig["jobs"]) == ["baselines-s0"] and (tmp_path / "bt" / "jobs" / "baselines-s0" / "done.json").is_file()
    assert {r["agent"] for r in fig["table"]} == {"random", "forward"}
    assert "job cma-s0 failed after 2 attempt(s): RuntimeError: the GPU fell off" in capsys.readouterr().err
    fig = tiny.run(tiny_args(out, policies="cma"))
    assert fig["jobs_skipped"] == ["baselines-s0"] and calls == ["cma"] * 4 and len(fig["failed_jobs"]) == 1


def test_the_results_file_holds_the_table_so_far_after_each_job(tiny, tmp_path, monkeypatch):
    """While the jobs run, ``--out`` is rewritten after each finished job: the jobs done so far,
    their table, and the jobs still pending (``partial``); the last write is the whole run's. ``--out``
    is relative (the jobs' episodes name their homes by absolute paths, found from the job folders)."""
    import vlnverse.benchmarks.train.jobs as jobs

    monkeypatch.chdir(tmp_path)
    out = Path("bt.json")
    seen = []
    row_job = jobs.row_job

    def watching(work, options, row_name, seed, shared):
        seen.append(json.loads(out.read_text()) if out.is_file() else None)
        return row_job(work, options, row_name, seed, shared)

    def saying(line, **_):  # each job's "done" line comes once --out holds that job
        if " done (" in line:
            seen_at_line[line.split()[2]] = sorted(json.loads(out.read_text())["jobs"])

    seen_at_line = {}
    monkeypatch.setattr(jobs, "row_job", watching)
    monkeypatch.setattr(jobs, "print", saying, raising=False)
    fig = tiny.run(tiny_args(out, seeds="0,1", policies="seq2seq"))
    assert seen_at_line == {"baselines-s0": ["baselines-s0"], "seq2seq-s0": ["baselines-s0", "seq2seq-s0"],
                            "baselines-s1": ["baselines-s0", "baselines-s1", "seq2seq-s0"],
                            "seq2seq-s1": ["baselines-s0", "baselines-s1", "seq2seq-s0", "seq2seq-s1"]}
    # one worker: the jobs in turn, seed by seed, baselines first
    assert [sorted(s["jobs"]) if s else None for s in seen] == [
        None, ["baselines-s0"], ["baselines-s0", "seq2seq-s0"], ["baselines-s0", "baselines-s1", "seq2seq-s0"]]
    assert seen[2]["partial"] == {"pending": ["baselines-s1", "seq2seq-s1"]}
    assert sorted({r["agent"] for r in seen[2]["table"]}) == ["forward", "random", "seq2seq_il"]
    final = json.loads(out.read_text())
    assert "partial" not in fig and sorted(fig["jobs"]) == ["baselines-s0", "baselines-s1", "seq2seq-s0", "seq2seq-s1"]
    assert final["jobs"]["seq2seq-s1"] == fig["jobs"]["seq2seq-s1"]  # the last partial write holds every job


def test_a_job_interrupted_mid_il_resumes_to_the_same_checkpoint(tiny, tmp_path, monkeypatch):
    """The job's process stops right after the checkpoint at the end of IL epoch 1 (as a kill
    would: nothing after it runs); the rerun resumes from ``last.pt`` and ends with the weights
    and per-episode results of an uninterrupted run."""
    import vlnverse.learn.trainer as trainer

    whole = tiny.run(tiny_args(tmp_path / "a.json"))
    save = trainer.Trainer._save

    def dies_after_epoch_1(self, path, **extra):
        save(self, path, **extra)
        if extra.get("position") == {"phase": "il", "epoch": 1, "batch": 0}:
            raise KeyboardInterrupt  # not an Exception: nothing catches it, like a killed process

    monkeypatch.setattr(trainer.Trainer, "_save", dies_after_epoch_1)
    with pytest.raises(KeyboardInterrupt):
        tiny.run(tiny_args(tmp_path / "b.json"))
    job = tmp_path / "b" / "jobs" / "seq2seq-s0"
    assert (job / "il" / "seq2seq" / "last.pt").is_file() and not (job / "done.json").exists()
    monkeypatch.setattr(trainer.Trainer, "_save", save)
    resumed = tiny.run(tiny_args(tmp_path / "b.json"))
    assert resumed["jobs_skipped"] == ["baselines-s0"]  # done before the interruption
    a, b = (_checkpoint_tensors(w / "jobs" / "seq2seq-s0" / "il" / "seq2seq" / "best.pt") for w in (tmp_path / "a", tmp_path / "b"))
    assert a.keys() == b.keys() and all((a[k] == b[k]).all() for k in a)
    assert _per_episode(resumed["jobs"]["seq2seq-s0"]) == _per_episode(whole["jobs"]["seq2seq-s0"])
    assert resumed["table"] == whole["table"]


@pytest.mark.slow  # ~1 min on 2 loaded cores
def test_a_job_process_killed_mid_il_is_retried_and_resumes_to_the_same_checkpoint(tiny, tmp_path):
    """``kill -9`` of the local worker processes as soon as the row's first ``last.pt`` exists: the
    engine retries the job on a fresh process, which resumes from it; weights and per-episode
    results equal an uninterrupted run's (here in this process)."""
    import multiprocessing
    import os
    import signal
    import threading
    import time

    whole = tiny.run(tiny_args(tmp_path / "a.json", epochs=6))
    last = tmp_path / "b" / "jobs" / "seq2seq-s0" / "il" / "seq2seq" / "last.pt"
    killed = []

    def killer():
        deadline = time.monotonic() + 300
        while not last.is_file() and time.monotonic() < deadline:
            time.sleep(0.02)
        for proc in multiprocessing.active_children():
            if proc.name.startswith("vlnverse-worker"):
                os.kill(proc.pid, signal.SIGKILL)
                killed.append(proc.pid)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    fig = tiny.run(tiny_args(tmp_path / "b.json", epochs=6, workers=2))
    thread.join()
    assert killed and fig["retries"] >= 1 and fig["failed_jobs"] == []
    a, b = (_checkpoint_tensors(w / "jobs" / "seq2seq-s0" / "il" / "seq2seq" / "best.pt") for w in (tmp_path / "a", tmp_path / "b"))
    assert a.keys() == b.keys() and all((a[k] == b[k]).all() for k in a)
    assert _per_episode(fig["jobs"]["seq2seq-s0"]) == _per_episode(whole["jobs"]["seq2seq-s0"])


@pytest.mark.slow  # ~1-2 min on 2 loaded cores
def test_two_rows_and_two_seeds_run_as_jobs_on_local_processes(tiny, tmp_path):
    fig = tiny.run(tiny_args(tmp_path / "bt.json", seeds="0,1", policies="seq2seq,cma", workers=2, no_strict=False))
    assert fig["engine"] == "local" and fig["workers"] == 2 and fig["failed_jobs"] == [] and fig["device"] == ["cpu"]
    assert sorted(fig["jobs"]) == [f"{r}-s{s}" for r in ("baselines", "cma", "seq2seq", "strict") for s in (0, 1)]
    for key, job in fig["jobs"].items():
        assert json.loads((tmp_path / "bt" / "jobs" / key / "done.json").read_text()) == job
        if job["row"] != "strict":
            assert {(r["split"], r["mode"]) for r in job["table"]} == {(s, "telhop") for s in SPLITS}
    agents = {r["agent"] for r in fig["table"]}
    assert agents == {"random", "forward", "seq2seq_il", "cma_il"}
    best = fig["best_row_agent"]
    assert best in ("seq2seq_il", "cma_il")  # the Strict rows: the baselines and the best on val_seen, each seed
    assert {(r["agent"], r["split"]) for r in fig["table"] if r["mode"] == "strict"} == {
        (a, s) for a in ("random", "forward", best) for s in ("val_unseen", "test")}
    for row in fig["table"]:
        assert row["seeds"] == 2 and row["seed_list"] == [0, 1] and len(row["per_seed"]) == 2
        means = [v["SR"] for v in row["per_seed"].values()]
        assert row["seeds_ci"]["SR"]["mean"] == round(sum(means) / 2, 4) and row["seeds_ci"]["SR"]["seeds"] == 2
    assert fig["table_text"][0].split()[:4] == ["agent", "split", "mode", "seeds"] and fig["format"] == 2
    assert {(c["split"], c["a"], c["b"]) for c in fig["comparisons"]} >= {("test", "seq2seq_il", "cma_il")}
    assert Path(fig["plot"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    again = tiny.run(tiny_args(tmp_path / "bt.json", seeds="0,1", policies="seq2seq,cma", workers=2, no_strict=False))
    assert len(again["jobs_skipped"]) == 8 and again["table"] == fig["table"]


def _ray_job_workers() -> list[int]:
    """Process ids of this test's Ray job actors (their process title names the actor class;
    only descendants of this process: other Ray instances on the machine are left alone)."""
    import os

    def parent(pid: int) -> int:
        try:
            return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return 0

    me, found = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            title = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"RayJobWorker" not in title:
            continue
        pid = up = int(entry.name)
        while up > 1 and up != me:
            up = parent(up)
        if up == me:
            found.append(pid)
    return found


@pytest.mark.slow  # starting Ray takes ~10-30 s here
def test_jobs_run_on_a_local_ray_instance_and_a_lost_worker_is_retried(tiny, tmp_path):
    """Two seeds on a local Ray instance; the Ray workers are killed (``kill -9``) as soon as a
    row's first ``last.pt`` exists: the job is retried on a fresh actor and resumes."""
    import os
    import signal
    import threading
    import time

    ray = pytest.importorskip("ray", reason="Ray is the optional [ray] extra")
    last = tmp_path / "bt" / "jobs" / "seq2seq-s0" / "il" / "seq2seq" / "last.pt"
    killed = []

    def killer():
        deadline = time.monotonic() + 600
        while not last.is_file() and time.monotonic() < deadline:
            time.sleep(0.02)
        for pid in _ray_job_workers():
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        thread = threading.Thread(target=killer, daemon=True)
        thread.start()
        fig = tiny.run(tiny_args(tmp_path / "bt.json", seeds="0,1", engine="ray", workers=2, epochs=6))
        thread.join()
    finally:
        ray.shutdown()
    assert fig["engine"] == "ray" and fig["failed_jobs"] == [] and killed and fig["retries"] >= 1
    assert sorted(fig["jobs"]) == ["baselines-s0", "baselines-s1", "seq2seq-s0", "seq2seq-s1"]
    assert {r["seeds"] for r in fig["table"]} == {2}


# ------------------------------------------------------------------------------ carrying finished jobs


def test_finished_jobs_carry_to_a_fresh_work_folder_and_another_identity_is_refused(tiny, tmp_path, monkeypatch):
    """``--jobs-from`` the results file of a finished run: a fresh work folder trains and prepares
    nothing (no homes, no seeds) and aggregates the same table (checkpoints named relative to the
    work folder), and so does ``--work`` naming the finished folder with another ``--out``; a results file of
    other settings, one that is not a results file, and the flag without ``--seeds`` are one line each."""
    from vlnverse.benchmarks.train.options import TrainBenchOptions
    from vlnverse.core.errors import ConfigError

    first = tiny.run(tiny_args(tmp_path / "a.json"))
    (tmp_path / "a.json").write_text(json.dumps(first))
    assert first["jobs"]["seq2seq-s0"]["checkpoints"] == {"seq2seq_il": "jobs/seq2seq-s0/il/seq2seq/best.pt"}
    for row in first["jobs"]["seq2seq-s0"]["table"] + first["table"]:  # each episode's first error (None: solved)
        per = row["per_episode"]
        assert len(per["first_error"]) == len(per["ids"])
        assert all((e is None) == (sr == 1.0) for e, sr in zip(per["first_error"], per["SR"]))

    def no_training(*a, **kw):
        raise AssertionError("a carried job was trained again")

    def no_preparation(*a, **kw):
        raise AssertionError("homes were made for a table whose jobs are all finished")

    from vlnverse.benchmarks.train import jobs as jobs_module

    monkeypatch.setattr(tiny.row, "train_row", no_training)
    monkeypatch.setattr(jobs_module, "homes_data", no_preparation)
    again = tiny.run(tiny_args(tmp_path / "b.json", jobs_from=[str(tmp_path / "a.json")]))
    assert sorted(again["jobs_skipped"]) == ["baselines-s0", "seq2seq-s0"] and again["failed_jobs"] == []
    assert again["seeds_prepared"] == {}  # no seed prepared either
    assert again["table"] == first["table"] and again["comparisons"] == first["comparisons"]
    assert json.loads((tmp_path / "b" / "jobs" / "seq2seq-s0" / "done.json").read_text())["imported"] is True
    # --work names the folder: the finished table goes to another --out, nothing made or trained.
    elsewhere = tiny.run(tiny_args(tmp_path / "elsewhere" / "b.json", work=str(tmp_path / "a")))
    assert elsewhere["work_dir"] == str(tmp_path / "a") and not (tmp_path / "elsewhere" / "b").exists()
    assert sorted(elsewhere["jobs_skipped"]) == ["baselines-s0", "seq2seq-s0"] and elsewhere["seeds_prepared"] == {}
    assert elsewhere["table"] == first["table"] and (tmp_path / "elsewhere" / "b.png").is_file()

    # Two sources sharing a job: each line counts what that source added.
    from vlnverse.benchmarks.train.jobs import import_jobs

    lines = []
    (tmp_path / "a2.json").write_text(json.dumps({**first, "jobs": {k: first["jobs"][k] for k in ["seq2seq-s0"]}}))
    got = import_jobs(tmp_path / "fresh", first["work"], (str(tmp_path / "a2.json"), str(tmp_path / "a.json")),
                      lines.append)
    assert got == ["seq2seq-s0", "baselines-s0"]
    assert [line.split(" carried from ")[0] for line in lines] == ["bench train: 1 finished job(s)"] * 2
    assert lines[1].endswith(": baselines-s0")
    with pytest.raises(ConfigError, match=r"a\.json: work\.config: made with config .* \(epochs: 2 there, 3 here\)"):
        tiny.run(tiny_args(tmp_path / "c.json", epochs=3, jobs_from=[str(tmp_path / "a.json")]))
    (tmp_path / "junk.json").write_text('{"jobs": []}')
    with pytest.raises(ConfigError, match=r"junk\.json: --jobs-from: holds no 'work' identity and 'jobs'"):
        tiny.run(tiny_args(tmp_path / "d.json", jobs_from=[str(tmp_path / "junk.json")]))
    with pytest.raises(ConfigError, match=r"--jobs-from: got .* without --seeds"):
        TrainBenchOptions.from_args(tiny_args(tmp_path / "e.json", seeds=None, jobs_from=[str(tmp_path / "a.json")]))
    for work in (str(tmp_path / "a.json"), str(tmp_path / "g.json")):   # a file, or the --out file itself
        with pytest.raises(ConfigError, match=r"--work: got .* \(expected a folder .*not the --out file\)"):
            TrainBenchOptions.from_args(tiny_args(tmp_path / "g.json", work=work))


def test_rows_pair_on_the_same_episodes_in_any_log_order(tmp_path):
    """Batched evaluation logs episodes in finish order, which differs between agents: rows still
    pair, episode by episode (SR differences 1, 0, -1 and 1 over two homes: mean 0.25), and
    ``row_design`` lists a run's episodes by id."""
    from vlnverse.benchmarks.train.evaluation import row_design
    from vlnverse.benchmarks.train.report import pairwise_comparisons

    def row(agent, order, sr):
        ids = ["e0", "e1", "e2", "e3"]
        homes = {"e0": "h0", "e1": "h0", "e2": "h1", "e3": "h1"}
        return {"agent": agent, "split": "test", "mode": "telhop", "protocol": {"body": "r2r"},
                "per_episode": {"ids": [ids[k] for k in order], "homes": [homes[ids[k]] for k in order],
                                **{m: [float(sr[k]) for k in order] for m in ("SR", "SPL", "nDTW")}}}

    a, b = row("a", [0, 1, 2, 3], [1, 1, 0, 1]), row("b", [2, 0, 3, 1], [0, 1, 1, 0])
    b_sorted = row("b", [0, 1, 2, 3], [0, 1, 1, 0])
    [got] = pairwise_comparisons([a, b])
    [want] = pairwise_comparisons([a, b_sorted])
    assert got == want and got["SR"]["mean"] == pytest.approx(0.25)

    records = [{"episode_id": i, "scene_id": "h0", "metrics": {"SR": float(i == "e1"), "SPL": 0.0, "nDTW": 0.0},
                "status": "done"} for i in ("e2", "e0", "e1")]
    (tmp_path / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    summary = {"overall": {"intervals": {m: {"clustered": None} for m in ("SR", "SPL", "nDTW")}, "per_home": {},
                           "design": {}}, "protocol": {}}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    design = row_design(tmp_path)
    assert design["per_episode"]["ids"] == ["e0", "e1", "e2"] and design["per_episode"]["SR"] == [0.0, 1.0, 0.0]
