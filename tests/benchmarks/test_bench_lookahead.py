"""``vlnverse bench lookahead``: the rendered lookahead views' cosine to the real views against the
copy-the-current-view baseline, measured through the command on the corridor (equal to
``hnr.lookahead_similarity`` called directly), and its bad input as one-line errors."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from learn_helpers import make_episodes, small_config

torch = pytest.importorskip("torch")

from test_vlnbert import RIG16, _train, predictor_file  # noqa: E402,F401 (the session fixture)

SMALL = {"hidden_size": 32, "cloud_cap": 192, "history": 4, "render": {"k": 3, "rays": 2, "samples": 6}, "render_weight": 1.0}


def _args(*argv: str):
    from vlnverse.cli import build_parser

    return build_parser().parse_args(["bench", "lookahead", *argv])


def test_the_command_reports_the_cosines_of_lookahead_similarity_on_the_corridor(corridor, episodes_file, predictor_file,
                                                                                 tmp_path, monkeypatch):
    """A 2-epoch HNR of the corridor: the command builds the teacher store with the checkpoint's own
    predictor (the same steps and features as the training cache) and its figures equal
    ``lookahead_similarity`` on either store; the CIs hold the means; the JSON and PNG are written."""
    import vlnverse.benchmarks.cli as bench_cli
    from vlnverse.benchmarks import lookahead
    from vlnverse.learn.checkpoint import policy_from_checkpoint, read_checkpoint
    from vlnverse.learn.hnr import lookahead_cosines, lookahead_similarity
    from vlnverse.learn.store import StepStore

    params = {**SMALL, "waypoint_predictor": str(predictor_file)}
    cfg = small_config(tmp_path / "il", episodes_file, policy="hnr", policy__params=params, sensors=RIG16, max_steps=25,
                       il__batch_size=2, il__epochs=2, validation__every=1000, val={})
    summary = _train(cfg, corridor)
    trained = StepStore(summary["cache"]["path"])
    checkpoint = Path(cfg.out) / "last.pt"
    policy = policy_from_checkpoint(read_checkpoint(checkpoint))
    direct = lookahead_similarity(policy, trained)

    out = tmp_path / "bench" / "lookahead.json"
    out.parent.mkdir()
    # through the registered command and its JSON writer, with the corridor as the scene
    real_run = lookahead.run
    monkeypatch.setattr(lookahead, "run", lambda args: real_run(args, scene_loader=lambda *a: corridor,
                                                                cache_dir=tmp_path / "bench_cache"))
    args = _args("--checkpoint", str(checkpoint), "--episodes", str(episodes_file), "--out", str(out))
    assert bench_cli._run(args) == 0
    figures = json.loads(out.read_text())
    assert figures["policy"] == "hnr" and figures["episodes"] == 4 and figures["body"] == "r2r_ce"
    assert figures["steps"] == direct["steps"] > 0
    assert figures["rendered_cos"]["mean"] == direct["rendered_cos"]
    assert figures["copy_baseline_cos"]["mean"] == direct["copy_baseline_cos"]
    built = StepStore(figures["cache"]["path"])
    assert Path(figures["cache"]["path"]) != Path(summary["cache"]["path"])  # its own store, same teacher steps
    assert lookahead_similarity(policy, built) == direct
    for name in ("rendered_cos", "copy_baseline_cos", "difference"):
        ci = figures[name]
        assert ci["lo"] <= ci["mean"] <= ci["hi"] and ci["n"] == figures["steps"]
    assert figures["difference"]["mean"] == pytest.approx(direct["rendered_cos"] - direct["copy_baseline_cos"], abs=2e-4)
    cos = lookahead_cosines(policy, built)
    assert figures["per_episode"]["episodes"] == len(set(cos["episode"])) and figures["per_episode"]["rendered_cos"]["n"] == 4
    expected = ("rendering beats copying" if figures["difference"]["lo"] > 0 else "copying beats rendering"
                if figures["difference"]["hi"] < 0 else "no significant difference")
    assert figures["verdict"] == expected
    assert 0 <= figures["opacity"]["mean"] <= 1 and len(cos["depth_ahead"]) == figures["steps"]
    assert all(0 < d <= 10 for d in cos["depth_ahead"])  # the corridor's front views see their cells
    assert figures["load_average_1m"]["start"] >= 0 and Path(figures["plot"]).stat().st_size > 5000

    # --limit: the first N taken in turn from each scene (one scene here: the file's first two)
    limited = real_run(_args("--checkpoint", str(checkpoint), "--episodes", str(episodes_file), "--limit", "2"),
                       scene_loader=lambda *a: corridor, cache_dir=tmp_path / "bench_cache")
    assert limited["episodes"] == 2 and limited["limit"] == 2 and 0 < limited["steps"] < figures["steps"]


def test_limit_takes_episodes_in_turn_from_each_scene(corridor):
    from vlnverse.benchmarks.lookahead import round_robin

    eps = make_episodes(corridor)
    for e, scene in zip(eps, ("a", "a", "a", "b")):
        e.scene_id = scene
    assert [e.episode_id for e in round_robin(eps, 2)] == ["corridor-0", "corridor-3"]
    assert [e.episode_id for e in round_robin(eps, None)] == ["corridor-0", "corridor-3", "corridor-1", "corridor-2"]


def test_the_figures_pair_the_cosines_and_say_which_is_ahead():
    from vlnverse.benchmarks.lookahead import figures_of

    cos = {"rendered": [0.9, 0.8, 0.7, 0.6], "copy": [0.5, 0.5, 0.5, 0.5], "opacity": [1.0, 0.0, 0.5, 0.05],
           "episode": [0, 0, 1, 1], "depth_ahead": [1.0, 2.0, 2.0, 4.0], "mean_view": [0.9] * 4, "rendered_centred": [0.1] * 4, "copy_centred": [0.2] * 4}
    f = figures_of(cos)
    assert f["steps"] == 4 and f["rendered_cos"]["mean"] == 0.75 and f["difference"]["mean"] == 0.25
    assert f["verdict"] == "rendering beats copying" and f["difference"]["lo"] > 0
    assert f["per_episode"]["rendered_cos"]["mean"] == 0.75 and f["per_episode"]["episodes"] == 2
    empty = f["opacity"]["empty_below_0.1"]
    got = (empty["steps"], empty["rendered_cos"], empty["copy_baseline_cos"], empty["difference"]["mean"])
    assert got == (2, 0.7, 0.5, 0.2)
    assert empty["depth_ahead_m"] == 3.0 and f["opacity"]["not_empty"]["depth_ahead_m"] == 1.5
    assert f["centred"]["difference"]["mean"] == pytest.approx(-0.1)
    # moves numbered within each episode: episode 0's steps are moves 0, 1; episode 1's too
    assert f["by_move"]["move_0"]["steps"] == 2 and f["by_move"]["move_0"]["rendered_cos"] == pytest.approx(0.8)
    assert f["by_move"]["move_1"]["empty_share"] == 1.0 and f["by_move"]["moves_4_on"] == {"steps": 0, "empty_share": None}
    f = figures_of({**cos, "rendered": [0.5, 0.5, 0.5, 0.5], "copy": [0.9, 0.8, 0.7, 0.6]})
    assert f["verdict"] == "copying beats rendering"
    f = figures_of({**cos, "rendered": [0.5, 0.6, 0.5, 0.6], "copy": [0.6, 0.5, 0.6, 0.5]})
    assert f["verdict"] == "no significant difference"


@pytest.fixture(scope="module")
def seq2seq_checkpoint(corridor, episodes_file, tmp_path_factory):
    """An untrained seq2seq checkpoint (not an HNR policy)."""
    from vlnverse.learn.checkpoint import save_checkpoint
    from vlnverse.learn.policies import build_policy
    from vlnverse.learn.store import sensor_layout
    from vlnverse.learn.vocab import Vocabulary

    root = tmp_path_factory.mktemp("s2s")
    cfg = small_config(root / "run", episodes_file, policy="seq2seq", sensors=RIG16)
    vocab = Vocabulary.build(e.instruction_text for e in make_episodes(corridor))
    policy = build_policy("seq2seq", cfg.policy.params, vocab, sensor_layout(cfg.sensor_specs()))
    return save_checkpoint(root / "s2s.pt", policy, config=cfg.to_dict())


@pytest.mark.parametrize("bad, needle", [
    ([], "--checkpoint"), (["--checkpoint", "NOFILE.pt"], "--checkpoint"), (["--checkpoint", "S2S"], "--episodes"),
    (["--checkpoint", "S2S", "--episodes", "NOFILE.jsonl"], "--episodes"),
    (["--checkpoint", "S2S", "--episodes", "EPISODES", "--limit", "0"], "--limit"),
    (["--checkpoint", "S2S", "--episodes", "EPISODES", "--workers", "0"], "--workers"),
    (["--checkpoint", "S2S", "--episodes", "EPISODES", "--body", "no_such_body"], "--body"),
    (["--checkpoint", "S2S", "--episodes", "EPISODES"], "'seq2seq' policy"),
    (["--checkpoint", "GARBAGE", "--episodes", "EPISODES"], "GARBAGE"),
])
def test_bad_input_is_one_line_naming_the_flag_or_file(bad, needle, seq2seq_checkpoint, episodes_file, tmp_path, capsys):
    from vlnverse.cli import main

    garbage = tmp_path / "garbage.pt"
    garbage.write_text("not a checkpoint")
    files = {"S2S": str(seq2seq_checkpoint), "EPISODES": str(episodes_file), "GARBAGE": str(garbage),
             "NOFILE.pt": str(tmp_path / "NOFILE.pt"), "NOFILE.jsonl": str(tmp_path / "NOFILE.jsonl")}
    assert main(["bench", "lookahead", *[files.get(a, a) for a in bad]]) == 2
    err = capsys.readouterr().err.strip()
    needle = files.get(needle, needle)
    assert needle in err and "\n" not in err and "Traceback" not in err, err
    if needle == "'seq2seq' policy":
        assert "--checkpoint" in err and str(seq2seq_checkpoint) in err
