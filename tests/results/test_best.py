"""``vlnverse results best``: the row by its mean over seeds on the selecting split, then the seed,
with hand-computed values on constructed bench train results."""
import json
from pathlib import Path

import pytest

from vlnverse.cli import main

HOMES = ["h0", "h0", "h1", "h1", "h2", "h2", "h3", "h3"]
IDS = [f"e{i}" for i in range(8)]


def _row(agent: str, split: str, sr: list[float], spl: list[float] | None = None) -> dict:
    spl = spl if spl is not None else [0.8 * x for x in sr]
    per = {"ids": IDS, "homes": HOMES, "SR": sr, "SPL": spl, "nDTW": [0.5] * len(sr)}
    return {"agent": agent, "split": split, "mode": "telhop", "per_episode": per,
            "protocol": {"task": "fine_grained", "collision_mode": "telhop"},
            **{m: {"mean": sum(per[m]) / len(per[m])} for m in ("SR", "SPL", "nDTW")}}


def _job(row: str, seed: int, sr: dict, spl: dict | None = None) -> dict:
    """A done job of ``row`` and ``seed``: its IL agent's rows on val_unseen (``sr``) and test (all 0)."""
    agent = f"{row}_il"
    table = [_row(agent, "val_unseen", sr, (spl or {}).get("val_unseen")), _row(agent, "test", [0.0] * 8)]
    return {"row": row, "seed": seed, "key": f"{row}-s{seed}", "checkpoints": {agent: f"jobs/{row}-s{seed}/il/best.pt"},
            "table": table}


def _results(tmp_path: Path, jobs: dict, name: str = "bench.json") -> Path:
    from vlnverse.benchmarks.train.report import aggregate
    from vlnverse.run.summary import RESULTS_FORMAT

    path = tmp_path / name
    path.write_text(json.dumps({"format": RESULTS_FORMAT, "jobs": jobs, "table": aggregate(jobs),
                                "work_dir": str(tmp_path / "work")}))
    return path


ONES = [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]


def test_the_row_with_the_best_mean_over_seeds_wins_then_its_best_seed_with_spl_breaking_a_tie(tmp_path, capsys):
    """a: per-seed SR 0.5, 0.5, 0.25 (mean 0.4167); b: 0.625, 0.25, 0.25 (mean 0.375, best single
    seed). a wins by its mean; seeds 0 and 1 tie on SR, seed 1's SPL is higher, so seed 1."""
    jobs = {
        "a-s0": _job("a", 0, ONES, {"val_unseen": [0.5] * 4 + [0.0] * 4}),
        "a-s1": _job("a", 1, ONES, {"val_unseen": [0.9] * 4 + [0.0] * 4}),
        "a-s2": _job("a", 2, [1.0, 1.0] + [0.0] * 6),
        "b-s0": _job("b", 0, [1.0] * 5 + [0.0] * 3),
        "b-s1": _job("b", 1, [1.0, 1.0] + [0.0] * 6),
        "b-s2": _job("b", 2, [0.0] * 6 + [1.0, 1.0]),
    }
    (tmp_path / "work" / "jobs" / "a-s1" / "il").mkdir(parents=True)
    (tmp_path / "work" / "jobs" / "a-s1" / "il" / "best.pt").write_bytes(b"x")
    path = _results(tmp_path, jobs)
    assert main(["results", "best", str(path), "--out", str(tmp_path / "best.json")]) == 0
    out = capsys.readouterr().out
    got = json.loads((tmp_path / "best.json").read_text())
    assert [r["agent"] for r in got["ranking"]] == ["a_il", "b_il"]
    assert got["ranking"][0]["SR"]["mean"] == pytest.approx(5 / 12, abs=1e-3)
    assert got["ranking"][1]["SR"]["mean"] == pytest.approx(0.375, abs=1e-3)
    assert got["best"]["agent"] == "a_il" and got["best"]["seed"] == 1 and got["best"]["job"] == "a-s1"
    assert got["best"]["checkpoint"] == str(tmp_path / "work" / "jobs" / "a-s1" / "il" / "best.pt")
    assert got["best"]["checkpoint_exists"] is True
    # a - b paired on the 24 pooled episodes: (10 - 9) / 24 successes
    assert got["first_two"]["SR"]["mean"] == pytest.approx(1 / 24, abs=1e-3)
    assert got["first_two"]["verdict"] == "not separated"
    assert got["best_other_row"]["b"] == "b_il"
    assert "best: a_il seed 1 (s0 0.500, s1 0.500, s2 0.250)" in out
    # another split selects otherwise: on test every row reads 0, so the name breaks the tie
    assert main(["results", "best", str(path), "--split", "test"]) == 0
    assert "best: a_il seed 0" in capsys.readouterr().out


def test_bad_input_is_one_line(tmp_path, capsys):
    path = _results(tmp_path, {"a-s0": _job("a", 0, ONES)})
    assert main(["results", "best", str(path), "--split", "val_seen"]) == 2
    assert "no learned row with checkpoints on split 'val_seen'" in capsys.readouterr().err
    assert main(["results", "best", str(path), "--metric", "XYZ"]) == 2
    assert "has no 'XYZ'" in capsys.readouterr().err
    twice = _results(tmp_path, {"a-s0": _job("a", 0, ONES)}, name="again.json")
    assert main(["results", "best", str(path), str(twice)]) == 2
    assert "row 'a_il' is also in" in capsys.readouterr().err
    plain = tmp_path / "plain.json"
    from vlnverse.run.summary import RESULTS_FORMAT

    plain.write_text(json.dumps({"format": RESULTS_FORMAT, "table": []}))
    assert main(["results", "best", str(plain)]) == 2
    assert "bench train --seeds" in capsys.readouterr().err
