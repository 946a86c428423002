"""``vlnverse bench scale`` on a small workload: every figure present and consistent, the parallel
files and records equal the serial ones, and the speed-up is the median of ratios to the serial
runs before and after each parallel run."""
from __future__ import annotations

import statistics

import pytest

from vlnverse.benchmarks import scale


@pytest.mark.slow  # ~80 s on a loaded 2-core machine; parallel = serial results are tests/*/test_*parallel*'s
def test_bench_scale_reports_paired_speedups_and_identical_results(monkeypatch):
    monkeypatch.setattr(scale, "SCENES", 2)
    monkeypatch.setattr(scale, "GENERATE_EPISODES_PER_SCENE", 2)
    monkeypatch.setattr(scale, "EPISODES_PER_SCENE", 1)
    monkeypatch.setattr(scale, "_configs", lambda: [("serial", 1, "local"), ("local_2", 2, "local")])
    out = scale.run(scale.ScaleOptions(seed=0, repeat=2, progress=False))

    assert out["scenes"] == 2 and out["repeat"] == 2 and out["fork_server_start_s"] >= 0
    assert "ray_init_s" not in out and out["warm_up_s"] > 0
    assert out["generate"]["local_2"]["identical_files"] and out["eval"]["local_2"]["identical_records"]
    assert out["eval"]["serial"]["episodes"] == 2 and out["eval"]["serial"]["SR"] == 1.0
    for section, rate, count in (("generate", "scenes_per_min", 2), ("eval", "episodes_per_min", 2)):
        serial, local = out[section]["serial"], out[section]["local_2"]
        # serial, local, serial, local, serial: each local run between two serial runs
        assert len(serial["seconds"]) == 3 and len(local["seconds"]) == 2 and "speedup" not in serial
        s = serial["seconds"]
        ratios = [(s[0] + s[1]) / 2 / local["seconds"][0], (s[1] + s[2]) / 2 / local["seconds"][1]]
        assert local["speedups"] == [round(r, 2) for r in ratios]
        assert abs(local["speedup"] - statistics.median(ratios)) <= 0.011  # seconds are rounded to 0.01
        assert local[rate] == round(60 * count / min(local["seconds"]), 2)  # the best repetition
    assert out["meets_target"] == all(out[s]["local_2"]["speedup"] >= scale.TARGET_SPEEDUP
                                      for s in ("generate", "eval"))


def test_paired_speedups_cancel_a_steady_drift_of_the_machine():
    # the machine slows down steadily: the serial runs take 10, 12 and 14 s, a serial run between
    # them would take 11 and 13 s, and the parallel runs there take half of that
    assert scale.paired_speedups([10.0, 12.0, 14.0], [5.5, 6.5]) == [2.0, 2.0]
    assert scale.paired_speedups([10.0, 10.0], [8.0]) == [1.25]
