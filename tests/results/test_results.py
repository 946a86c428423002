"""``vlnverse results compare`` and ``results page`` on tiny real eval runs (oracle vs forward on
three corridor homes x 2 episodes, Tel-Hop), and their refusals."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from eval_scenes import corridor_episodes, corridor_loader
from vlnverse.cli import main
from vlnverse.core.stats import clustered_bootstrap_ci, paired_difference
from vlnverse.run.setup import EpisodeSource, NamedSpec, SensorConfig
from vlnverse.eval.config import EvalConfig, ReportConfig
from vlnverse.eval.folder import EPISODES_FILE, SUMMARY_FILE
from vlnverse.eval.runner import run_eval
from vlnverse.tasks.episode import save_episodes

# per home: an episode the forward agent also solves (straight, no wall between) and one it fails
STARTS = [((5.8, 1.5), 0.0, (9.0, 1.5)), ((9.0, 0.6), 3.141592653589793, (1.0, 0.6))]


def _run(folder: Path, episodes: Path, agent: str, mode: str = "telhop", **kw) -> Path:
    out = folder / f"{agent}_{mode}"
    cfg = EvalConfig(agent=NamedSpec(agent), task="fine_grained", episodes=EpisodeSource(path=str(episodes)),
                     collision_mode=mode, sensors=[SensorConfig("depth", "depth", 16, 16)], out=str(out), seed=0,
                     max_steps=60, success_distance=1.0, report=ReportConfig(enabled=False), **kw)
    cfg.validate()
    run_eval(cfg, progress=False, print_summary=False, scene_loader=corridor_loader)
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("runs")
    episodes = corridor_episodes(folder, STARTS)
    save_episodes(folder / "episodes.jsonl", episodes)
    save_episodes(folder / "fewer.jsonl", episodes[:-1])
    return {"folder": folder, "oracle": _run(folder, folder / "episodes.jsonl", "oracle"),
            "forward": _run(folder, folder / "episodes.jsonl", "forward"),
            "fewer": _run(folder / "fewer", folder / "fewer.jsonl", "random"),
            "strict": _run(folder, folder / "episodes.jsonl", "random", mode="strict")}


def _records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / EPISODES_FILE).read_text().splitlines()]


def test_summary_carries_format_per_home_clustered_intervals_design_and_protocol(runs):
    summary = json.loads((runs["oracle"] / SUMMARY_FILE).read_text())
    assert summary["format"] == 2
    overall = summary["overall"]
    assert sorted(overall["per_home"]) == ["corridor_a", "corridor_b", "corridor_c"]
    records = _records(runs["oracle"])
    for home, cells in overall["per_home"].items():
        mine = [r["metrics"]["SR"] for r in records if r["scene_id"] == home]
        assert cells["episodes"] == len(mine) == 2 and cells["SR"] == pytest.approx(sum(mine) / 2)
    sr = [r["metrics"]["SR"] for r in records]
    assert overall["intervals"]["SR"]["clustered"] == clustered_bootstrap_ci(sr, [r["scene_id"] for r in records], seed=0)
    assert overall["intervals"]["SR"]["episode"]["n"] == 6
    assert overall["design"]["homes"] == 3 and overall["design"]["episodes"] == 6
    assert "mde_SR" in overall["design"]
    protocol = summary["protocol"]
    assert protocol["collision_mode"] == "telhop" and protocol["success_distance"] == 1.0
    assert protocol["max_steps"] == 60 and protocol["slide_on_collision"] is True
    assert protocol["body"]["name"] == "r2r_ce" and protocol["body"]["radius"] == pytest.approx(0.18)
    strict = json.loads((runs["strict"] / SUMMARY_FILE).read_text())["protocol"]
    assert strict["mode_params"]["displacement_threshold"] == 0.1
    assert summary["overall"]["means"]["SR"] == pytest.approx(sum(sr) / 6)  # the existing keys stay
    from vlnverse.run.summary import design_line

    c = overall["intervals"]["SR"]["clustered"]
    assert f"[{c['lo']:.3f}, {c['hi']:.3f}] by home" in design_line(overall) and "(3 homes, 6 episodes" in design_line(overall)


def test_compare_two_runs_prints_the_paired_difference_and_writes_json_and_png(runs, tmp_path, capsys):
    out = tmp_path / "cmp"
    assert main(["results", "compare", str(runs["oracle"]), str(runs["forward"] / SUMMARY_FILE), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    got = json.loads((out / "compare.json").read_text())
    assert (out / "compare.png").stat().st_size > 1000
    (group,) = got["groups"]
    assert group["runs"] == ["oracle_telhop", "forward_telhop"] and group["design"]["homes"] == 3
    (pair,) = group["comparisons"]
    a, b = _records(runs["oracle"]), _records(runs["forward"])
    assert [r["episode_id"] for r in a] == [r["episode_id"] for r in b]
    expected = paired_difference([r["metrics"]["SR"] for r in a], [r["metrics"]["SR"] for r in b],
                                 [r["scene_id"] for r in a], seed=0)
    assert pair["SR"] == expected
    assert pair["SR"]["mean"] == pytest.approx(sum(r["metrics"]["SR"] for r in a) / 6
                                               - sum(r["metrics"]["SR"] for r in b) / 6, abs=1e-4)
    assert pair["verdict"] in ("not separated", "oracle_telhop > forward_telhop")
    assert pair["verdict"] == ("oracle_telhop > forward_telhop" if expected["separated"] else "not separated")
    assert "oracle_telhop - forward_telhop" in text and f"{pair['SR']['mean']:+.3f}" in text


def test_compare_refuses_runs_on_different_episodes_in_one_line(runs, capsys):
    assert main(["results", "compare", str(runs["forward"]), str(runs["fewer"])]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "random_telhop/summary.json" in err and ": episodes:" in err


def test_compare_refuses_different_collision_modes(runs, capsys):
    assert main(["results", "compare", str(runs["forward"]), str(runs["strict"])]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "protocol.collision_mode" in err and "random_strict/summary.json" in err


def test_compare_refuses_bench_rows_on_the_same_paths_in_another_instruction_language(runs, tmp_path, capsys):
    """Two bench tables on the same episodes and homes, one row evaluated on its episodes worded in
    the version-2 language: its protocol records it (the eval run's) and the pair is refused in one
    line naming the field; the same language on both sides is compared."""
    from dataclasses import replace

    from vlnverse.benchmarks.train.evaluation import row_design
    from vlnverse.core.errors import ConfigError
    from vlnverse.results.compare import check_comparable, group_runs, load_runs
    from vlnverse.tasks.episode import load_episodes

    v2_file = tmp_path / "episodes_v2.jsonl"
    save_episodes(v2_file, [replace(e, info={**e.info, "language": {"version": 2, "families": [0]}})
                            for e in load_episodes(runs["folder"] / "episodes.jsonl")])
    forward_v2 = _run(tmp_path, v2_file, "forward")
    assert "instruction_language" not in row_design(runs["forward"])["protocol"]
    files = {}
    for name, run in (("v1", runs["forward"]), ("v2", forward_v2), ("v2b", forward_v2)):
        row = {"agent": "forward", "split": "test", "mode": "telhop", "episodes": 6, "seeds": 1,
               **{m: {"mean": 0.0, "lo": 0.0, "hi": 0.0} for m in ("SR", "SPL", "nDTW")}, **row_design(run)}
        files[name] = tmp_path / f"{name}.json"
        files[name].write_text(json.dumps({"format": 2, "table": [row]}))
    protocol = json.loads(files["v2"].read_text())["table"][0]["protocol"]
    assert protocol["instruction_language"] == [{"version": 2, "families": [0]}]
    v1, v2, v2b = (r for name in ("v1", "v2", "v2b") for r in load_runs([files[name]]))
    refused = r"v2\.json: protocol\.instruction_language: forward has \[\{'families': \[0\], 'version': 2\}\], .* has None"
    with pytest.raises(ConfigError, match=refused):
        check_comparable(v1, v2)
    check_comparable(v2, v2b)
    assert len(group_runs([v1, v2, v2b], strict=False)) == 2  # never paired in a page or comparison
    assert main(["results", "compare", str(files["v1"]), str(files["v2"])]) == 2  # nothing comparable
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "no two on the same task, split and mode" in err, err
    # Asked for: the pair is across the language (the condition compared), on the same episodes.
    check_comparable(v1, v2, ("instruction_language",))
    assert len(group_runs([v1, v2, v2b], strict=False, across=("instruction_language",))) == 1
    out = tmp_path / "across"
    assert main(["results", "compare", str(files["v1"]), str(files["v2"]), "--across", "instruction_language",
                 "--out", str(out)]) == 0
    result = json.loads((out / "compare.json").read_text())
    assert result["across"] == ["instruction_language"]
    (pair,) = result["groups"][0]["comparisons"]
    assert pair["SR"]["mean"] == 0.0 and pair["verdict"] == "not separated"   # the same forward agent twice
    page = tmp_path / "page"
    assert main(["results", "page", str(files["v1"]), str(files["v2"]), "--across", "instruction_language",
                 "--out", str(page)]) == 0
    assert "Paired across `instruction_language`" in (page / "index.md").read_text()
    # Pairs across the condition: each bench row against itself in the other language, apart and first.
    two = json.loads(files["v1"].read_text())
    two["table"].append({**two["table"][0], "agent": "random"})
    files["v1two"] = tmp_path / "v1two.json"
    files["v1two"].write_text(json.dumps(two))
    page2 = tmp_path / "page2"
    assert main(["results", "page", str(files["v1two"]), str(files["v2"]), "--across", "instruction_language",
                 "--out", str(page2)]) == 0
    pairs = json.loads((page2 / "page.json").read_text())["groups"][0]["comparisons"]
    assert sorted((c["a"], c["b"], c["across"]) for c in pairs) == [
        ("v1two:forward", "v1two:random", False), ("v1two:forward", "v2:forward", True),
        ("v1two:random", "v2:forward", False)]
    text = (page2 / "index.md").read_text()
    assert text.index("### Paired across `instruction_language`") < text.index("| v1two:forward - v2:forward |") \
        < text.index("### Other paired comparisons") < text.index("| v1two:forward - v1two:random |")
    shown = tmp_path / "shown"     # --split keeps the runs of the splits named, and says so
    assert main(["results", "page", str(files["v1"]), str(files["v2"]), "--across", "instruction_language",
                 "--split", "test", "--out", str(shown)]) == 0
    data = json.loads((shown / "page.json").read_text())
    assert data["splits"] == ["test"] and [g["split"] for g in data["groups"]] == ["test"]
    assert "Splits shown: test" in (shown / "index.md").read_text()
    assert main(["results", "compare", str(files["v1"]), str(files["v2"]), "--split", "val_seen"]) == 2
    assert "--split: got 'val_seen'" in capsys.readouterr().err
    assert main(["results", "compare", str(files["v1"]), str(files["v2"]), "--across", ","]) == 2
    assert "--across" in capsys.readouterr().err
    assert main(["results", "compare", str(files["v2"]), str(files["v2b"])]) == 0


def test_compare_refuses_a_results_file_of_an_older_format(runs, tmp_path, capsys):
    old = tmp_path / "old_run"
    shutil.copytree(runs["forward"], old)
    summary = json.loads((old / SUMMARY_FILE).read_text())
    del summary["format"]
    (old / SUMMARY_FILE).write_text(json.dumps(summary))
    assert main(["results", "compare", str(runs["oracle"]), str(old), "--out", str(tmp_path / "cmp")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"{old / SUMMARY_FILE}: format: missing" in err
    assert not (tmp_path / "cmp").exists()  # nothing half-written


def test_page_from_tiny_runs_has_the_json_numbers_and_is_deterministic(runs, tmp_path):
    out = tmp_path / "page"
    args = ["results", "page", str(runs["oracle"]), str(runs["forward"]), "--out", str(out), "--name", "tiny"]
    assert main(args) == 0
    md = (out / "index.md").read_text()
    page = json.loads((out / "page.json").read_text())
    (group,) = page["groups"]
    assert (out / group["plot"]).stat().st_size > 1000 and (out / "comparisons.png").is_file()
    assert md.startswith("# Results: tiny") and "3 homes, 6 episodes" in md and "## fine_grained / test / telhop / body r2r_ce" in md
    for run in group["runs"]:
        c = run["intervals"]["SR"]["clustered"]
        row = next(line for line in md.splitlines() if line.startswith(f"| {run['label']} |"))
        assert f"| {c['mean']:.3f} |" in row
        e = run["intervals"]["SR"]["episode"]
        assert f"[{e['lo']:.3f}, {e['hi']:.3f}]" in row
    (pair,) = group["comparisons"]
    assert f"| {pair['SR']['mean']:+.3f} |" in md and pair["verdict"] in md
    assert "| telhop | 1.0 | 60 | on |" in md  # the protocol
    # no absolute path of this machine in a page meant for git: runs outside the working folder by their last two parts
    assert str(tmp_path) not in md + json.dumps(page) and f"`{runs['oracle'].parent.name}/{runs['oracle'].name}`" in md
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    assert main(args) == 0  # the same inputs: the same bytes
    assert {p.name: p.read_bytes() for p in out.iterdir()} == first


def test_page_puts_the_papers_number_beside_a_bench_row(runs, tmp_path):
    """A bench train JSON row named like the paper's CMA on the test split gets Table 3's figures."""
    from vlnverse.benchmarks.train.evaluation import row_design
    from vlnverse.benchmarks.train.report import pairwise_comparisons, split_design, table_lines
    from vlnverse.core.stats import bootstrap_ci

    table = []
    for agent, run in (("cma_il", runs["oracle"]), ("random", runs["forward"])):
        per = {m: [float(r["metrics"].get(m) or 0) for r in _records(run)] for m in ("SR", "SPL", "nDTW")}
        table.append({"agent": agent, "split": "test", "mode": "telhop", "episodes": 6, "seeds": 1,
                      **{m: bootstrap_ci(v) for m, v in per.items()}, **row_design(run)})
    other_body = json.loads(json.dumps({**table[1], "agent": "random_low_base"}))
    other_body["protocol"]["body"]["name"] = "low_base"  # same episodes, another protocol: never paired
    table.append(other_body)
    table[0]["seeds_ci"] = {"SR": {"mean": 0.29, "sd": 0.0436, "lo": 0.1999, "hi": 0.3867, "n": 6, "seeds": 3}}
    comparisons = pairwise_comparisons(table)
    assert [(c["a"], c["b"]) for c in comparisons] == [("cma_il", "random")]
    assert split_design(table) == {"test": {"homes": 3, "episodes": 6}}
    header, line, _, _ = table_lines(table)
    assert "homes" in header and "seeds" in header and line.split()[4:6] == ["3", "1"]
    bench = tmp_path / "bench.json"
    work = {"benchmark": "proc-v1", "benchmark_version": 1, "code_version": "0.1.0", "config": "abc", "settings": {}}
    jobs = {"cma-s0": {"key": "cma-s0", "row": "cma", "seed": 0, "table": table[:1]}}
    bench.write_text(json.dumps({"format": 2, "table": table, "comparisons": comparisons, "work": work, "jobs": jobs}))
    out = tmp_path / "page"
    assert main(["results", "page", str(bench), "--out", str(out)]) == 0
    md = (out / "index.md").read_text()
    # the finished jobs beside the page, for 'bench train --jobs-from': identity and jobs, nothing else
    assert json.loads((out / "bench.jobs.json").read_text()) == {"work": work, "jobs": jobs}
    assert json.loads((out / "page.json").read_text())["job_ledgers"] == ["bench.jobs.json"] and "`bench.jobs.json`" in md
    row = next(line for line in md.splitlines() if line.startswith("| cma_il |"))
    assert row.endswith("| 28.83 | 25.54 | Table 3: CMA |")
    # over seeds: mean ± sd and the interval resampling seeds, homes and episodes, for the rows that have them
    seeds_row = next(line for line in md.splitlines() if line.startswith("| cma_il | 1 | 0.290"))
    assert "| 0.290 ± 0.044 | [0.200, 0.387] | - | - | - | - |" in seeds_row
    assert not any(line.startswith("| random | 1 | 0.") for line in md.splitlines())
    assert "## fine_grained / test / telhop / body low_base" in md  # its own group
    assert len(json.loads((out / "page.json").read_text())["groups"]) == 2
    del table[0]["per_episode"]
    bench.write_text(json.dumps({"format": 2, "table": table}))
    assert main(["results", "page", str(bench), "--out", str(tmp_path / "p2")]) == 2


def test_a_page_says_which_rows_trained_on_a_cuda_gpu(runs, tmp_path):
    """Req 6 of issue 53: a ``--seeds`` file whose GAMA job trained on a CUDA GPU and its CMA job on
    CPU: the page's first lines name the GPU, its section lists each job under its device (the
    baselines job trains nothing, so it is not listed), and page.json carries the same; a file of
    CPU rows only says so; eval run folders record no device and add nothing."""
    from vlnverse.benchmarks.train.evaluation import row_design
    from vlnverse.core.stats import bootstrap_ci

    per = {m: [float(r["metrics"].get(m) or 0) for r in _records(runs["oracle"])] for m in ("SR", "SPL", "nDTW")}
    row = {"agent": "gama_il", "split": "test", "mode": "telhop", "episodes": 6, "seeds": 1,
           **{m: bootstrap_ci(v) for m, v in per.items()}, **row_design(runs["oracle"])}
    gpu = {"device": "cuda:0", "name": "NVIDIA H100 80GB HBM3", "torch": "2.13.0+cu128", "cuda": "12.8",
           "torch_threads": 1, "cpu": "AMD EPYC", "cpu_capability": "AVX512"}
    cpu = {"device": "cpu", "name": "AMD EPYC", "torch": "2.13.0+cpu", "cuda": None, "cpu_capability": "AVX2"}
    jobs = {"gama-s0": {"key": "gama-s0", "row": "gama", "seed": 0, "code": "0123456789abcdef",
                        "figures": {"device": "cuda:0", "device_info": gpu}},
            "cma-s0": {"key": "cma-s0", "row": "cma", "seed": 0, "figures": {"device": "cpu", "device_info": cpu}},
            "cma-s1": {"key": "cma-s1", "row": "cma", "seed": 1, "figures": {"device": "cpu"}},  # an older job
            "baselines-s0": {"key": "baselines-s0", "row": "baselines", "seed": 0}}
    work = {"benchmark": "proc-v1", "benchmark_version": 1, "code_version": "0.1.0", "config": "abc", "settings": {}}
    bench = tmp_path / "mixed.json"
    bench.write_text(json.dumps({"format": 2, "table": [row], "work": work, "jobs": jobs}))
    out = tmp_path / "page"
    assert main(["results", "page", str(bench), "--out", str(out)]) == 0
    md = (out / "index.md").read_text()
    head = md.split("## ", 1)[0]
    assert "**Rows trained on a CUDA GPU** (NVIDIA H100 80GB HBM3), others on CPU" in head
    section = md.split("## Where the rows were trained", 1)[1]
    assert "| mixed | cuda:0 | NVIDIA H100 80GB HBM3 | 2.13.0+cu128 | 12.8 | AVX512 | 0123456789ab | gama-s0 |" in section
    assert "| mixed | cpu | AMD EPYC | 2.13.0+cpu | - | AVX2 | - | cma-s0 |" in section
    assert "| mixed | cpu | - | - | - | - | - | cma-s1 |" in section and "baselines-s0" not in section
    listed = json.loads((out / "page.json").read_text())["machines"]
    assert [(m["device"], m["jobs"]) for m in listed] == [("cpu", ["cma-s0"]), ("cpu", ["cma-s1"]), ("cuda:0", ["gama-s0"])]
    del jobs["gama-s0"]
    bench.write_text(json.dumps({"format": 2, "table": [row], "work": work, "jobs": jobs}))
    assert main(["results", "page", str(bench), "--out", str(out)]) == 0
    md = (out / "index.md").read_text()
    assert "Every row trained on CPU (no GPU)" in md.split("## ", 1)[0] and "CUDA GPU**" not in md
    assert main(["results", "page", str(runs["oracle"]), "--out", str(tmp_path / "evals")]) == 0
    md = (tmp_path / "evals" / "index.md").read_text()
    assert "trained on" not in md and "machines" not in json.loads((tmp_path / "evals" / "page.json").read_text())


def test_a_page_says_when_a_seeds_rows_acted_on_different_predictor_or_encoder_draws(runs, tmp_path):
    """Two ``--seeds`` files of one seed, as a scale curve's points: 30 homes (GAMA and HNR on one
    predictor) and 100 homes (GAMA on a predictor trained elsewhere: other held-out figures, and
    another encoder file). The page lists seed 0's two predictor draws and two encoder draws with
    their jobs; seed 1, whose jobs agree, and jobs recording neither are not listed."""
    from vlnverse.benchmarks.train.evaluation import row_design
    from vlnverse.benchmarks.train.jobs import shared_digests
    from vlnverse.core.stats import bootstrap_ci
    from vlnverse.results.machines import draw_lines, shared_draws

    per = {m: [float(r["metrics"].get(m) or 0) for r in _records(runs["oracle"])] for m in ("SR", "SPL", "nDTW")}
    row = {"agent": "gama_il", "split": "test", "mode": "telhop", "episodes": 6, "seeds": 1,
           **{m: bootstrap_ci(v) for m, v in per.items()}, **row_design(runs["oracle"])}
    here = {"poses": 120, "next_waypoint_hit": 0.7983, "mean_candidates": 4.504}
    there = {"poses": 120, "next_waypoint_hit": 0.8403, "mean_candidates": 5.1}

    def job(key, seed, held, encoder=None, epochs=15):
        return {"key": key, "row": key.split("-")[0], "seed": seed, "figures": {
            "device": "cpu", "waypoint_predictor": {"held_out": held, **({"epochs": epochs} if epochs else {})}},
            **({"shared": {"encoder": encoder}} if encoder else {})}

    work = {"benchmark": "proc-v1", "benchmark_version": 1, "code_version": "0.1.0", "config": "abc", "settings": {}}
    small = {"gama-s0": job("gama-s0", 0, there, "aaaa000011112222"), "hnr-s0": job("hnr-s0", 0, there, "aaaa000011112222"),
             "gama-s1": job("gama-s1", 1, here, epochs=None), "baselines-s0": {"key": "baselines-s0", "row": "baselines", "seed": 0},
             "cma-s0": {"key": "cma-s0", "row": "cma", "seed": 0, "figures": {"device": "cpu"}}}
    # seed 1: the same predictor, one job from before jobs recorded its epochs (the recipe's 15 then)
    large = {"gama-s0": job("gama-s0", 0, here, "bbbb000011112222"), "gama-s1": job("gama-s1", 1, here)}
    for name, jobs in (("homes-30", small), ("homes-100", large)):
        (tmp_path / f"{name}.json").write_text(json.dumps({"format": 2, "table": [row], "work": work, "jobs": jobs}))
    draws = shared_draws([("homes-30", {"jobs": small}), ("homes-100", {"jobs": large})])
    assert draws == [
        {"seed": 0, "artefact": "encoder", "draws": [
            {"label": "sha256 aaaa00001111", "jobs": ["homes-30:gama-s0", "homes-30:hnr-s0"]},
            {"label": "sha256 bbbb00001111", "jobs": ["homes-100:gama-s0"]}]},
        {"seed": 0, "artefact": "waypoint predictor", "draws": [
            {"label": "15 epochs, held-out hit 0.8403", "jobs": ["homes-30:gama-s0", "homes-30:hnr-s0"]},
            {"label": "15 epochs, held-out hit 0.7983", "jobs": ["homes-100:gama-s0"]}]}]
    assert shared_draws([("homes-30", {"jobs": small})]) == []  # within one folder the seed's rows agree
    out = tmp_path / "page"
    assert main(["results", "page", str(tmp_path / "homes-30.json"), str(tmp_path / "homes-100.json"),
                 "--out", str(out)]) == 0
    md = (out / "index.md").read_text()
    section = md.split("## Where the rows were trained", 1)[1]
    assert "**Some seeds' jobs acted on different draws" in section
    assert ("- seed 0's jobs acted on 2 draws of the waypoint predictor: 15 epochs, held-out hit 0.8403 "
            "(homes-30:gama-s0, homes-30:hnr-s0); 15 epochs, held-out hit 0.7983 (homes-100:gama-s0)") in section
    assert "seed 1's" not in section and draw_lines(draws)[0].startswith("seed 0's jobs acted on 2 draws of the encoder")
    assert json.loads((out / "page.json").read_text())["shared_draws"] == draws
    # a job records the digests of the seed's files it acted on (sha256, 16 hex)
    (tmp_path / "predictor.pt").write_bytes(b"weights")
    assert shared_digests({"predictor": {"path": str(tmp_path / "predictor.pt")}, "encoder": None}) == {
        "predictor": "9a129038d9a00aed"}  # sha256(b"weights")


def test_bad_results_files_are_one_line_errors(tmp_path, capsys):
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "old_bench.json").write_text(json.dumps({"table": [{"agent": "cma_il", "split": "test"}]}))
    (tmp_path / "future.json").write_text(json.dumps({"format": "two", "table": []}))
    for name, field in (("broken.json", "not JSON"), ("old_bench.json", "format: missing"),
                        ("future.json", "format: got 'two'"), ("missing.json", "not found")):
        assert main(["results", "compare", str(tmp_path / name), str(tmp_path / name)]) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and str(tmp_path / name) in err and field in err, err


def _claim_run(label: str, split: str, sr: list[float]) -> "object":
    from vlnverse.results.compare import Run

    homes = [f"h{i // 5}" for i in range(len(sr))]
    return Run(label=label, source=Path("bench.json"), task="fine_grained", split=split, mode="telhop", protocol={},
               ids=[f"e{i:02d}" for i in range(len(sr))], homes=homes, values={"SR": sr, "SPL": [v * 0.5 for v in sr]},
               intervals={}, per_home={}, design={}, seeds=3, bench=True)


def test_claims_are_judged_by_the_paired_difference_clustered_by_home(tmp_path):
    """A claim (A beats B) is reproduced when A - B's home interval lies above 0, refuted when below,
    not separated when it holds 0, and "not run" names a missing row. Rows under two protocols
    (``other``: another instruction language) are judged under each (here reproduced under one,
    refuted under the other), never one row of each; two files under one protocol pair."""
    from vlnverse.results.claims import claim_lines, judge_claims

    better = [1.0, 1.0, 1.0, 1.0, 0.0] * 4   # 0.8 in each of 4 homes
    worse = [1.0, 0.0, 0.0, 0.0, 0.0] * 4    # 0.2
    runs = [_claim_run("bench:rdp_il", "test", better), _claim_run("bench:cma_il", "test", worse),
            _claim_run("bench:hnr_il", "test", better), _claim_run("bench:gama_il", "test", worse),
            _claim_run("bench:seq2seq_il", "test", better),
            _claim_run("other:rdp_il", "test", worse), _claim_run("other:cma_il", "test", better)]
    for run in runs[-2:]:
        run.protocol = {"instruction_language": [{"version": 2}]}
    claims = [{"id": "x", "claim": "RDP beats CMA", "paper": "p", "a": "rdp_il", "b": "cma_il", "task": "fine_grained",
               "mode": "telhop", "splits": ["test", "val_unseen"]},
              {"id": "y", "claim": "GAMA beats HNR", "paper": "p", "a": "gama_il", "b": "hnr_il", "task": "fine_grained",
               "mode": "telhop", "splits": ["test"]},
              {"id": "z", "claim": "RDP beats Seq2Seq", "paper": "p", "a": "rdp_il", "b": "seq2seq_il",
               "task": "fine_grained", "mode": "telhop", "splits": ["test"]}]
    judged = judge_claims(claims, runs)
    assert [(c["id"], c["split"], c["source"], c["verdict"]) for c in judged] == [
        ("x", "test", "bench", "reproduced"), ("x", "test", "other", "refuted"), ("x", "val_unseen", "", "not run"),
        ("y", "test", "", "refuted"), ("z", "test", "bench", "not separated"),
        ("z", "test", "other", "not run")]
    assert judged[0]["SR"]["mean"] == pytest.approx(0.6) and judged[0]["SR"]["lo"] > 0
    assert judged[1]["SR"]["mean"] == pytest.approx(-0.6)
    assert judged[3]["SR"]["mean"] == pytest.approx(-0.6) and judged[3]["SR"]["hi"] < 0
    assert judged[4]["SR"]["mean"] == 0.0 and judged[2]["missing"] == ["rdp_il", "cma_il"]
    assert judged[5]["missing"] == ["seq2seq_il"]   # other has RDP only: not paired with bench's Seq2Seq
    # The design's power, by hand: per home the differences are [0, 1, 1, 1, 0] (no spread between
    # homes, 0.3 within), so it detects 2.8016 * sqrt(0.3 / 20) = 0.3431; the paper's RDP - CMA test
    # gap, 7.55 points, needs ceil(4 * (0.3431 / 0.0755)^2) = 83 homes.
    assert judged[0]["power"]["detectable"] == pytest.approx(0.3431, abs=1e-4)
    assert (judged[0]["power"]["gap"], judged[0]["power"]["homes_needed"]) == (0.0755, 83)
    lines = claim_lines(judged)
    assert lines[2].startswith("| RDP beats CMA | p | rdp_il - cma_il (bench) | test | +0.600 |")
    assert lines[2].endswith("**reproduced** |")
    assert "| 0.343 | +7.55 points: 83 homes, outside the CI |" in lines[2]   # +0.6's interval lies above 0.0755
    # Claims not run here leave the table for one line after it, their splits gathered per claim.
    assert len(lines) == 2 + 4 + 2 and lines[6] == "" and not any("not run" in line for line in lines[:6])
    assert lines[-1] == ("**Not run here** (a row missing from these sources): RDP beats CMA on val_unseen "
                         "(rdp_il, cma_il missing); RDP beats Seq2Seq (other) on test (seq2seq_il missing).")
    # One protocol over two files (a table run in two parts): the claim pairs across them, unnamed.
    split_table = [_claim_run("part1:rdp_il", "test", better), _claim_run("part2:seq2seq_il", "test", worse)]
    (one,) = judge_claims(claims[2:], split_table)
    assert (one["source"], one["verdict"]) == ("", "reproduced")


def test_a_claims_outcomes_count_episodes_and_first_errors():
    """What a verdict is made of, episode by episode: of 20 episodes A solves 16 and B 4, 4 by both
    (so 12 only A, 0 only B, 4 neither); B's 16 failures by first error, 12 stopped short and 4
    never stopped; a run without first errors gives none."""
    from vlnverse.results.claims import judge_claims, outcome_lines

    better = [1.0, 1.0, 1.0, 1.0, 0.0] * 4
    worse = [1.0, 0.0, 0.0, 0.0, 0.0] * 4
    a, b = _claim_run("rdp_il", "test", better), _claim_run("cma_il", "test", worse)
    a.failures = [None if v else "out_of_steps" for v in better]
    b.failures = [None, "premature_stop", "premature_stop", "premature_stop", "out_of_steps"] * 4
    claim = {"id": "x", "claim": "RDP beats CMA", "paper": "p", "a": "rdp_il", "b": "cma_il", "task": "fine_grained",
             "mode": "telhop", "splits": ["test"]}
    [judged] = judge_claims([claim], [a, b])
    assert judged["outcomes"] == {"only_a": 12, "only_b": 0, "both": 4, "neither": 4, "first_errors": {
        "a": {"out_of_steps": 4}, "b": {"premature_stop": 12, "out_of_steps": 4}}}
    assert outcome_lines([judged])[2] == ("| rdp_il - cma_il | test | 12 | 0 | 4 | 4 | out_of_steps 4 | "
                                          "premature_stop 12, out_of_steps 4 |")
    b.failures = None
    [judged] = judge_claims([claim], [a, b])
    assert judged["outcomes"]["first_errors"] is None and outcome_lines([judged])[2].endswith("| - | - |")


def test_a_partial_tables_rows_are_paired_on_the_episodes_both_have():
    """A ``bench train --seeds`` file with pending jobs: a row missing a seed (its last 10 of 30
    episodes) is compared with a full row on the 20 episodes both have (A 0.8, B 0.2 in each of 4
    homes: +0.6), and outcomes count those 20; the same rows in a finished table are refused."""
    from vlnverse.core.errors import ConfigError
    from vlnverse.results.claims import judge_claims

    better = [1.0, 1.0, 1.0, 1.0, 0.0] * 4
    worse = [1.0, 0.0, 0.0, 0.0, 0.0] * 4
    full = _claim_run("gama_il", "test", better + [0.0] * 10)
    short = _claim_run("hnr_il", "test", worse)
    claim = {"id": "y", "claim": "GAMA beats HNR", "paper": "p", "a": "gama_il", "b": "hnr_il", "task": "fine_grained",
             "mode": "telhop", "splits": ["test"]}
    with pytest.raises(ConfigError, match="10 episode id"):
        judge_claims([claim], [full, short])
    full.extra["pending"] = short.extra["pending"] = ["hnr-s2"]
    [judged] = judge_claims([claim], [full, short])
    assert judged["verdict"] == "reproduced" and judged["SR"]["mean"] == pytest.approx(0.6)
    assert judged["outcomes"]["only_a"] + judged["outcomes"]["both"] + judged["outcomes"]["neither"] == 20
    assert len(full.ids) == 30   # the row itself is left whole


def test_rows_pooled_over_other_training_seeds_are_refused_naming_the_seeds():
    """Two ``bench train --seeds`` rows on the same held-out episodes, one pooled over seeds 0-2 and
    one over seed 0 (ids ``s<seed>/...``): refused in one line naming both seed lists and the field;
    the same seed on both sides pairs."""
    from dataclasses import replace

    from vlnverse.core.errors import ConfigError
    from vlnverse.results.compare import check_comparable, training_seeds

    one = _claim_run("homes-100:gama_il", "test", [1.0, 0.0] * 5)
    one = replace(one, ids=[f"s0/{i}" for i in one.ids])
    three = replace(one, label="homes-30:gama_il", ids=[f"s{s}/{i}" for s in range(3) for i in one.ids[:4]][:10])
    assert training_seeds(three.ids) == [0, 1, 2] and training_seeds(one.ids) == [0] and training_seeds(["e1"]) == []
    with pytest.raises(ConfigError, match=r"seeds: homes-100:gama_il pools training seeds \[0\], homes-30:gama_il "
                                          r"\(bench.json\) seeds \[0, 1, 2\] .*--jobs-from") as err:
        check_comparable(three, one)
    assert "\n" not in str(err.value)
    check_comparable(one, replace(one, label="homes-30:gama_il"))


def test_a_pages_language_shift_section_has_the_paired_drop(tmp_path):
    """``results page`` of a ``bench train --language v2-split`` file shows its ``language_drop``:
    on 4 paths in 2 homes SR 0.5 held out (paths 0, 1 solved) and 0.25 in the other wording
    (path 0 only): a drop of +0.250."""
    from vlnverse.benchmarks.train.report import language_drops
    from vlnverse.results.page import json_sources, language_shift_lines

    def row(split: str, ids: list[str], sr: list[float]) -> dict:
        return {"agent": "cma_il", "split": split, "mode": "telhop", "episodes": 4, "SR": {"mean": sum(sr) / 4},
                "per_episode": {"ids": ids, "homes": ["h0", "h0", "h1", "h1"], "SR": sr, "SPL": sr}}

    ids = ["e0", "e1", "e2", "e3"]
    table = [row("val_unseen", ids, [1.0, 1.0, 0.0, 0.0]),
             row("val_unseen_language", [f"{i}-language" for i in ids], [1.0, 0.0, 0.0, 0.0])]
    drops = language_drops(table)
    assert len(drops) == 1 and drops[0]["SR"]["mean"] == pytest.approx(0.25)
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"language_drop": drops}))
    coarse = tmp_path / "coarse.json"
    coarse.write_text(json.dumps({"language_drop": drops, "task": "coarse_grained"}))
    lines, got = language_shift_lines(json_sources([str(path), str(coarse)]))
    assert got == [{**drops[0], "task": "fine_grained"}, {**drops[0], "task": "coarse_grained"}]
    assert lines[0] == "## The language shift"
    for task in ("fine_grained", "coarse_grained"):
        assert any(line.startswith(f"| {task} | cma_il | telhop | 4 | 2 | 0.500 | 0.250 | +0.250 |") for line in lines)
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"table": []}))
    assert language_shift_lines(json_sources([str(plain)])) == ([], [])


def test_a_page_of_one_row_trained_on_more_homes_draws_the_scale_curve(runs, tmp_path):
    """Three ``bench train --seeds`` files that differ only in ``--train-homes`` (30, 100, 300): the
    page's scale curve has the row's SR per size (forward 0.5 at 30 homes, oracle 1.0 at 100 and
    300) and each step paired on the same 6 episodes (+0.500, then +0.000, not separated); sources
    that also differ in another setting get a line saying why there is no curve."""
    from vlnverse.benchmarks.train.evaluation import row_design
    from vlnverse.core.stats import bootstrap_ci

    def bench_file(name: str, homes: int, run: Path, **settings) -> Path:
        per = {m: [float(r["metrics"].get(m) or 0) for r in _records(run)] for m in ("SR", "SPL", "nDTW")}
        row = {"agent": "gama_il", "split": "test", "mode": "telhop", "episodes": 6, "seeds": 1,
               **{m: bootstrap_ci(v) for m, v in per.items()}, **row_design(run)}
        work = {"benchmark": "proc-v1", "benchmark_version": 1, "code_version": "0.1.0", "config": f"c{homes}",
                "settings": {"homes": homes, "epochs": 15, **settings}}
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"format": 2, "table": [row], "work": work, "jobs": {}}))
        return path

    files = [bench_file("h30", 30, runs["forward"]), bench_file("h100", 100, runs["oracle"]),
             bench_file("h300", 300, runs["oracle"])]
    out = tmp_path / "page"
    assert main(["results", "page", *map(str, files), "--out", str(out)]) == 0
    (curve,) = json.loads((out / "page.json").read_text())["scale_curves"]
    assert (curve["agent"], curve["split"], curve["mode"]) == ("gama_il", "test", "telhop")
    assert [(p["homes"], p["SR"]) for p in curve["points"]] == [(30, 0.5), (100, 1.0), (300, 1.0)]
    first, second = curve["steps"]
    assert (first["from"], first["to"], first["episodes"]) == (30, 100, 6)
    assert first["SR"]["mean"] == pytest.approx(0.5) and second["SR"]["mean"] == 0.0
    assert second["verdict"] == "not separated"
    md = (out / "index.md").read_text()
    assert "## Training homes (scale curve)" in md and "| gama_il | test | telhop | 30 → 100 | 6 | +0.500 |" in md
    assert (out / "scale_curve.png").stat().st_size > 0
    mixed = tmp_path / "mixed"
    other = bench_file("h100e5", 100, runs["oracle"], epochs=5)
    assert main(["results", "page", str(files[0]), str(other), "--out", str(mixed)]) == 0
    assert "scale_curves" not in json.loads((mixed / "page.json").read_text())
    assert "No training-scale curve: the sources differ in settings.epochs" in (mixed / "index.md").read_text()


def test_the_papers_gap_is_its_sr_difference_between_two_of_its_rows():
    """GAMA - HNR on Table 3's fine-grained test split: 37.72 - 32.24 = 5.48 points; a row against
    itself (the DAgger claims) or a row the paper does not print has none."""
    from vlnverse.results.claims import paper_gap

    assert paper_gap("gama_il", "hnr_il", "fine_grained", "test") == 0.0548
    assert paper_gap("gama_il_dagger", "gama_il", "fine_grained", "test") is None
    assert paper_gap("vlnbert_t7_online_round_3", "vlnbert_t7_zero_shot", "fine_grained", "val_unseen") is None


def test_one_training_seed_of_a_seeds_file_pairs_with_an_eval_run_of_that_checkpoint(runs, tmp_path, capsys):
    """``FILE.json:s1``: the rows of seed 1's jobs, with the episode ids an eval run has, so the
    eval run of that seed's checkpoint (here the same oracle run) pairs with its row: difference 0
    on all 6 episodes. A seed the file lacks, and a file without jobs, are one line each."""
    from vlnverse.benchmarks.train.evaluation import row_design
    from vlnverse.core.stats import bootstrap_ci

    per = {m: [float(r["metrics"].get(m) or 0) for r in _records(runs["oracle"])] for m in ("SR", "SPL", "nDTW")}
    row = {"agent": "cma_il", "split": "test", "mode": "telhop", "episodes": 6, "seeds": 1,
           **{m: bootstrap_ci(v) for m, v in per.items()}, **row_design(runs["oracle"])}
    pooled = json.loads(json.dumps(row))
    pooled["per_episode"]["ids"] = [f"s1/{i}" for i in row["per_episode"]["ids"]]   # the table over seeds' ids
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({"format": 2, "table": [pooled],
                                 "jobs": {"cma-s1": {"key": "cma-s1", "row": "cma", "seed": 1, "table": [row]}}}))
    out = tmp_path / "cmp"
    assert main(["results", "compare", str(runs["oracle"]), f"{bench}:s1", "--out", str(out)]) == 0
    (group,) = json.loads((out / "compare.json").read_text())["groups"]
    (pair,) = group["comparisons"]
    assert (pair["a"], pair["b"]) == ("oracle_telhop", "bench:cma_il@s1")
    assert pair["SR"]["mean"] == 0.0 and pair["SR"]["n"] == 6 and pair["verdict"] == "not separated"
    assert main(["results", "compare", str(runs["oracle"]), f"{bench}:s4"]) == 2
    err = capsys.readouterr().err
    assert "bench.json: jobs: no job of seed 4 (expected a seed among [1])" in err
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"format": 2, "table": [pooled]}))
    assert main(["results", "compare", str(runs["oracle"]), f"{plain}:s1"]) == 2
    assert "plain.json: jobs: missing" in capsys.readouterr().err


def test_compare_text_shows_each_splits_own_rows_for_a_label_in_every_split():
    """A bench table names its rows alike in every split: each group's run lines are that split's
    (val_unseen SR 0.6 / 0.2, test 0.4 / 0.0), not the last split's under every heading."""
    from vlnverse.results.compare import compare_runs, compare_text

    def run(label: str, split: str, sr: list[float]) -> "object":
        r = _claim_run(label, split, sr)
        r.intervals = {m: {"clustered": {"mean": sum(sr) / len(sr), "lo": 0.0, "hi": 1.0}} for m in ("SR", "SPL", "nDTW")}
        r.values["nDTW"] = list(sr)
        return r

    runs = [run("a", "val_unseen", [1.0, 1.0, 1.0, 0.0, 0.0] * 2), run("b", "val_unseen", [1.0, 0.0, 0.0, 0.0, 0.0] * 2),
            run("a", "test", [1.0, 1.0, 0.0, 0.0, 0.0] * 2), run("b", "test", [0.0] * 10)]
    text = compare_text(compare_runs(runs, strict=False))
    val_unseen, test = text.split("fine_grained / test")
    rows = lambda part: [line.split()[4] for line in part.splitlines() if line.split()[:1] in (["a"], ["b"]) and line.split()[1].isdigit()]  # noqa: E731
    assert rows(val_unseen) == ["0.600", "0.200"] and rows(test) == ["0.400", "0.000"]
    assert "+0.400" in val_unseen and "+0.400" in test   # a - b in each split
