"""``vlnverse bench scale`` on a small workload: every figure present and consistent, the parallel
files and records equal the serial ones, and the speed-up is the median of paired ratios."""
from __future__ import annotations

import statistics
from types import SimpleNamespace

from vlnverse.benchmarks import scale


def test_bench_scale_reports_paired_speedups_and_identical_results(monkeypatch):
    monkeypatch.setattr(scale, "SCENES", 2)
    monkeypatch.setattr(scale, "GENERATE_EPISODES_PER_SCENE", 2)
    monkeypatch.setattr(scale, "EPISODES_PER_SCENE", 1)
    monkeypatch.setattr(scale, "_configs", lambda: [("serial", 1, "local"), ("local_2", 2, "local")])
    out = scale.run(SimpleNamespace(seed=0, repeat=2, progress=False))

    assert out["scenes"] == 2 and out["repeat"] == 2 and out["fork_server_start_s"] >= 0
    assert "ray_init_s" not in out and out["warm_up_s"] > 0
    assert out["generate"]["local_2"]["identical_files"] and out["eval"]["local_2"]["identical_records"]
    assert out["eval"]["serial"]["episodes"] == 2 and out["eval"]["serial"]["SR"] == 1.0
    for section, rate, count in (("generate", "scenes_per_min", 2), ("eval", "episodes_per_min", 2)):
        serial, local = out[section]["serial"], out[section]["local_2"]
        assert len(serial["seconds"]) == len(local["seconds"]) == 2
        assert serial["speedups"] == [1.0, 1.0] and serial["speedup"] == 1.0
        ratios = [s / t for s, t in zip(serial["seconds"], local["seconds"])]
        assert local["speedups"] == [round(r, 2) for r in ratios]
        assert abs(local["speedup"] - statistics.median(ratios)) <= 0.011  # seconds are rounded to 0.01
        assert abs(local[rate] - 60 * count / min(local["seconds"])) <= 0.05 * local[rate]  # the best repetition
    assert out["meets_target"] == all(out[s]["local_2"]["speedup"] >= scale.TARGET_SPEEDUP
                                      for s in ("generate", "eval"))
