"""``vlnverse bench eval``'s learned-policy block: batched vs serial on the same episodes in one run."""
from __future__ import annotations

import argparse

import pytest


def test_learned_policy_block_times_batched_and_serial_and_checks_the_records(monkeypatch, caplog):
    """... on episodes worded in the language the shipped CMA was trained on (version 2): no run
    notes a wording the policy never learned."""
    from vlnverse.benchmarks import eval as bench

    assert bench.checkpoint_language(bench.LEARNED_CHECKPOINT) == {"params.instruction_version": 2}
    monkeypatch.setattr(bench, "LEARNED_EPISODES", 4)
    out = bench.learned_policy(bench.EvalBenchOptions(seed=0, repeat=1, envs=2))
    assert not [r for r in caplog.records if "trained on instruction language" in r.getMessage()]
    assert out["records_identical"] is True
    assert out["episodes"] == 4 and out["envs"] == 2 and out["steps"] > 0
    assert set(out["episodes_per_s"]) == {"serial", "batched"}
    assert out["speedup"] == round(out["episodes_per_s"]["batched"] / out["episodes_per_s"]["serial"], 2)
    assert len(out["load_average"]) == 3
    # the driver's batched forward: part of the batched run's wall time, in ms per episode step
    forward = out["policy_forward"]
    assert 0 < forward["share"] < 1 and 0 < forward["cpu_ms_per_episode_step"] <= forward["ms_per_episode_step"] + 0.01


def test_bench_eval_options_come_from_the_flags_and_a_bad_envs_names_the_flag():
    from vlnverse.benchmarks.eval import LEARNED_ENVS, EvalBenchOptions
    from vlnverse.core.errors import ConfigError

    flags = argparse.Namespace(name="eval", repeat=2, seed=5, envs=None, out=None)
    assert EvalBenchOptions.from_args(flags) == EvalBenchOptions(repeat=2, seed=5, envs=LEARNED_ENVS)
    with pytest.raises(ConfigError, match=r"--envs: got 0 \(expected an integer >= 1\)"):
        EvalBenchOptions.from_args(argparse.Namespace(repeat=3, seed=0, envs=0))
