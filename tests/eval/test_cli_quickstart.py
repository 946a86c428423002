"""``vlnverse eval`` and ``vlnverse quickstart`` through the CLI entry point (shipped scenes)."""
from __future__ import annotations

import json

import pytest

from vlnverse.cli import main
from vlnverse.scenes.splits import load_splits


@pytest.fixture(scope="module")
def val_scene():
    scenes = load_splits().get("val_unseen") or []
    if not scenes:
        pytest.skip("no shipped scenes")
    return scenes[0]


def _write(path, text):
    path.write_text(text)
    return path


def test_eval_errors_are_one_line_with_exit_status_2(tmp_path, capsys):
    assert main(["eval", str(tmp_path / "missing.yaml")]) == 2
    assert "missing.yaml" in capsys.readouterr().err
    bad = _write(tmp_path / "bad.yaml", "agent: {name: oracle\ntask: fine_grained\n")
    assert main(["eval", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "malformed YAML" in err and f"{bad}:" in err
    cfg = _write(tmp_path / "c.yaml", "agent: {name: orcale}\ntask: fine_grained\nepisodes: x.jsonl\n")
    assert main(["eval", str(cfg), f"out={tmp_path / 'run'}"]) == 2
    err = capsys.readouterr().err
    assert "unknown agent 'orcale'" in err and "oracle" in err and "wall_bumper" in err
    cfg = _write(tmp_path / "t.yaml", "agent: {name: oracle}\ntask: fine_grianed\nepisodes: x.jsonl\n")
    assert main(["eval", str(cfg), f"out={tmp_path / 'run2'}"]) == 2
    assert "unknown task 'fine_grianed'" in capsys.readouterr().err
    assert main(["eval", "no_such_config"]) == 2
    assert "oracle_fine_grained_strict" in capsys.readouterr().err


def test_eval_runs_a_shipped_config_with_overrides(tmp_path, capsys, val_scene):
    out = tmp_path / "run"
    code = main(["eval", "oracle_fine_grained_telhop", "--no-progress", f"out={out}", "limit=2",
                 f"episodes.generate.scenes=[{val_scene}]", "episodes.generate.episodes_per_scene=2",
                 "sensors=[{name: rgb, kind: rgb, width: 32, height: 32}]", "report.max_episodes=1"])
    assert code == 0
    stdout = capsys.readouterr().out
    assert "fine_grained" in stdout and "oracle" in stdout and "telhop" in stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["overall"]["episodes"] == 2 and summary["run"]["collision_mode"] == "telhop"
    assert len((out / "episodes.jsonl").read_text().splitlines()) == 2
    assert (out / "report.html").is_file() and (out / "input_episodes.jsonl").is_file()


def test_quickstart_small_config_end_to_end_and_resumes(tmp_path, capsys, val_scene):
    cfg = _write(tmp_path / "qs.yaml", f"""
scenes: [{val_scene}]
max_scenes: 1
tasks: [fine_grained, coarse_grained]
episodes_per_scene: 1
agents: [{{name: oracle}}, {{name: random}}]
collision_modes: [telhop]
sensors: [{{name: rgb, kind: rgb, width: 32, height: 32}}, {{name: depth, kind: depth, width: 32, height: 32}}]
report: {{max_episodes: 1, frame_width: 32}}
""")
    out = tmp_path / "qs"
    assert main(["quickstart", "--out", str(out), "--config", str(cfg), "--no-progress"]) == 0
    table = capsys.readouterr().out
    assert "vlnverse quickstart" in table and "coarse_grained" in table and "random" in table
    combined = json.loads((out / "summary.json").read_text())
    assert len(combined["runs"]) == 4  # 2 tasks x 2 agents x 1 mode
    assert all(r["overall"]["episodes"] == 1 for r in combined["runs"].values())
    html = (out / "report.html").read_text()
    assert html.count("class='ep ") == 4 and "data:image/png;base64," in html
    for task in ("fine_grained", "coarse_grained"):
        assert (out / "episodes" / task / "summary.json").is_file()
        assert (out / f"{task}__oracle__telhop" / "episodes.jsonl").is_file()
    # a second run resumes: nothing is evaluated again and the numbers are the same
    assert main(["quickstart", "--out", str(out), "--config", str(cfg), "--no-progress"]) == 0
    assert json.loads((out / "summary.json").read_text()) == combined


def test_quickstart_generates_in_its_language_and_refuses_a_folder_of_another(tmp_path, capsys, val_scene):
    """``language: v2`` words every task's episodes in version 2 (fine-grained episodes record it);
    resuming the folder with another language or episode count is a one-line error naming the
    setting, and nothing is evaluated again."""
    body = f"""
scenes: [{val_scene}]
max_scenes: 1
tasks: [fine_grained]
episodes_per_scene: 1
agents: [{{name: oracle}}]
collision_modes: [telhop]
sensors: [{{name: rgb, kind: rgb, width: 32, height: 32}}]
report: {{enabled: false}}
"""
    out = tmp_path / "qs"
    cfg = _write(tmp_path / "qs.yaml", body + "language: v2\n")
    assert main(["quickstart", "--out", str(out), "--config", str(cfg), "--no-progress"]) == 0
    from vlnverse.tasks.episode import load_episodes
    from vlnverse.tasks.instructions.languages import language_of

    assert language_of(load_episodes(out / "episodes" / "fine_grained")) == "v2"
    assert json.loads((out / "episodes" / "generation.json").read_text())["language"] == "v2"
    before = (out / "summary.json").read_text()
    capsys.readouterr()
    for extra, field in (("language: v1\n", "language"), ("language: v2\nepisodes_per_scene: 2\n", "episodes_per_scene")):
        other = _write(tmp_path / "other.yaml", body.replace("episodes_per_scene: 1\n", "") + extra
                       + ("" if "episodes_per_scene" in extra else "episodes_per_scene: 1\n"))
        assert main(["quickstart", "--out", str(out), "--config", str(other), "--no-progress"]) == 2
        err = capsys.readouterr().err.strip()
        assert field in err and "new --out" in err and "\n" not in err
    assert (out / "summary.json").read_text() == before
    bad = _write(tmp_path / "bad.yaml", body + "language: v3\n")
    assert main(["quickstart", "--out", str(tmp_path / "b"), "--config", str(bad), "--no-progress"]) == 2
    assert "language" in capsys.readouterr().err


def test_quickstart_runs_the_shipped_learned_agent_where_only_allows(tmp_path, capsys, val_scene):
    """The shipped GAMA checkpoint (``tasks/train/gama_fine_grained.pt``, named by its recipe) runs
    beside the oracle through the runner (which adds the policy's 64 px cameras), restricted by
    ``only`` to its training task; ``only`` naming an unknown agent is a one-line error."""
    pytest.importorskip("torch")
    body = f"""
scenes: [{val_scene}]
max_scenes: 1
tasks: [fine_grained, coarse_grained]
episodes_per_scene: 1
agents: [{{name: oracle}}, {{name: policy, params: {{checkpoint: gama_fine_grained}}}}]
collision_modes: [telhop]
max_steps: 12
sensors: [{{name: rgb, kind: rgb, width: 32, height: 32}}, {{name: depth, kind: depth, width: 32, height: 32}}]
report: {{enabled: false}}
"""
    cfg = _write(tmp_path / "qs.yaml", body + "only: {policy: {tasks: [fine_grained]}}\n")
    out = tmp_path / "qs"
    assert main(["quickstart", "--out", str(out), "--config", str(cfg), "--no-progress"]) == 0
    combined = json.loads((out / "summary.json").read_text())
    assert sorted(combined["runs"]) == ["oracle / telhop / coarse_grained", "oracle / telhop / fine_grained",
                                        "policy / telhop / fine_grained"]
    record = json.loads((out / "fine_grained__policy__telhop" / "episodes.jsonl").read_text().splitlines()[0])
    assert 1 <= len(record["actions"]) <= 12
    bad = _write(tmp_path / "bad.yaml", body + "only: {cma: {tasks: [fine_grained]}}\n")
    assert main(["quickstart", "--out", str(tmp_path / "b"), "--config", str(bad), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert "only.cma" in err and "\n" not in err
