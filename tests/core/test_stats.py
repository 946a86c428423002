"""vlnverse.core.stats on constructed data with known answers."""
from __future__ import annotations

import numpy as np
import pytest

from vlnverse.core.stats import (bootstrap_ci, clustered_bootstrap_ci, minimum_detectable_difference, paired_difference,
                                 probability_of_improvement, seeds_ci, variance_components)


def _homes(rates: list[float], per_home: int = 20, prefix: str = "home") -> tuple[np.ndarray, np.ndarray]:
    """Binary outcomes: home i succeeds in round(rates[i] * per_home) of its episodes."""
    values, clusters = [], []
    for i, rate in enumerate(rates):
        wins = round(rate * per_home)
        values += [1.0] * wins + [0.0] * (per_home - wins)
        clusters += [f"{prefix}{i}"] * per_home
    return np.array(values), np.array(clusters)


def test_one_home_of_identical_episodes_is_not_a_narrow_interval():
    values, clusters = [1.0] * 100, ["only"] * 100
    episode = bootstrap_ci(values, seed=0)
    assert episode == {"mean": 1.0, "lo": 1.0, "hi": 1.0, "n": 100}  # 100 "independent" draws: zero width
    clustered = clustered_bootstrap_ci(values, clusters, seed=0)
    # one home says nothing about the next home: the interval is undefined (unbounded), not [1, 1]
    assert clustered == {"mean": 1.0, "lo": None, "hi": None, "n": 100, "clusters": 1}
    assert minimum_detectable_difference(values, clusters) is None
    assert paired_difference(values, [0.0] * 100, clusters)["separated"] is False


def test_homes_that_differ_widen_the_clustered_interval():
    values, clusters = _homes([1.0, 0.0, 0.5, 1.0, 0.1])
    episode = bootstrap_ci(values, seed=0)
    clustered = clustered_bootstrap_ci(values, clusters, seed=0)
    assert episode["mean"] == clustered["mean"] == pytest.approx(0.52)
    assert clustered["clusters"] == 5 and clustered["n"] == 100
    assert (clustered["hi"] - clustered["lo"]) > 2.5 * (episode["hi"] - episode["lo"])
    # the home means alone (1, 0, .5, 1, .1): their bootstrap is about the clustered one
    homes = bootstrap_ci([1.0, 0.0, 0.5, 1.0, 0.1], seed=0)
    assert abs(homes["lo"] - clustered["lo"]) < 0.08 and abs(homes["hi"] - clustered["hi"]) < 0.08


def test_homes_with_the_same_rate_keep_the_clustered_interval_near_the_episode_one():
    values, clusters = _homes([0.5] * 10)
    episode = bootstrap_ci(values, seed=0)
    clustered = clustered_bootstrap_ci(values, clusters, seed=0)
    assert abs((clustered["hi"] - clustered["lo"]) - (episode["hi"] - episode["lo"])) < 0.04


def test_a_beating_b_in_every_home_is_separated():
    b, clusters = _homes([0.2, 0.4, 0.0, 0.6, 0.3, 0.5])
    a = np.ones_like(b)
    got = paired_difference(a, b, clusters, seed=0)
    assert got["mean"] == pytest.approx(1 - b.mean(), abs=1e-4)
    assert got["separated"] is True and got["lo"] > 0
    assert got["prob_improvement"] == 1.0
    assert paired_difference(b, a, clusters, seed=0)["prob_improvement"] == 0.0
    assert paired_difference(b, a, clusters, seed=0)["hi"] < 0


def test_identical_runs_differ_by_zero_and_are_not_separated():
    a, clusters = _homes([0.2, 0.9, 0.5])
    got = paired_difference(a, a.copy(), clusters, seed=3)
    assert got == {"mean": 0.0, "lo": 0.0, "hi": 0.0, "prob_improvement": 0.5, "separated": False, "n": 60,
                   "clusters": 3}


def test_probability_of_improvement_counts_homes_with_ties_as_half():
    # home means A - B: +0.5 (win), 0 (tie), -0.5 (loss), +0.5 (win): (1 + 0.5 + 0 + 1) / 4
    a = [1, 1, 1, 0, 0, 0, 1, 1]
    b = [1, 0, 0, 1, 1, 0, 0, 1]
    clusters = ["h1", "h1", "h2", "h2", "h3", "h3", "h4", "h4"]
    assert probability_of_improvement(a, b, clusters) == pytest.approx(2.5 / 4)


def test_seeds_ci_reports_the_sd_of_the_seed_means():
    runs = []
    for rates in ([0.2, 0.8, 0.5], [0.4, 0.6, 0.5], [0.1, 0.7, 0.3]):
        runs.append(_homes(rates, per_home=10))
    means = [v.mean() for v, _ in runs]  # 0.5, 0.5, 0.3667
    got = seeds_ci(runs, seed=0)
    assert got["mean"] == pytest.approx(np.mean(means), abs=1e-4)
    hand_sd = np.sqrt(sum((m - np.mean(means)) ** 2 for m in means) / (len(means) - 1))
    assert got["sd"] == pytest.approx(hand_sd, abs=1e-4) == pytest.approx(0.0770, abs=1e-4)
    assert got["seeds"] == 3 and got["n"] == 90
    assert got["lo"] < got["mean"] < got["hi"]
    assert seeds_ci(runs, seed=0) == got  # seeded
    one = seeds_ci(runs[:1], seed=0)
    assert one["sd"] is None and one["mean"] == pytest.approx(0.5)


def test_seeds_ci_is_wider_than_any_one_seed_when_seeds_disagree():
    good, clusters = _homes([0.9, 0.8, 0.9, 0.8], per_home=25)
    bad, _ = _homes([0.1, 0.2, 0.1, 0.2], per_home=25)
    got = seeds_ci([(good, clusters), (bad, clusters)], seed=0)
    one = clustered_bootstrap_ci(good, clusters, seed=0)
    assert got["sd"] == pytest.approx(np.std([good.mean(), bad.mean()], ddof=1), abs=1e-4)
    assert got["hi"] - got["lo"] > 3 * (one["hi"] - one["lo"])


def test_mde_shrinks_with_more_homes():
    rates = [0.1, 0.5, 0.3, 0.7]
    mdes = []
    for copies in (1, 4, 16):
        v, c = _homes(rates * copies)
        mdes.append(minimum_detectable_difference(v, c))
    assert mdes[0] > mdes[1] > mdes[2] > 0
    assert mdes[1] == pytest.approx(mdes[0] / 2, rel=0.15)  # 4x the homes: about half the MDE


def test_mde_matches_the_design_effect_formula():
    v, c = _homes([0.1, 0.5, 0.3, 0.7], per_home=10)
    comp = variance_components(v, c)
    # hand-computed one-way ANOVA: home means .1 .5 .3 .7 (grand .4), 10 episodes each
    msb = 10 * sum((m - 0.4) ** 2 for m in (0.1, 0.5, 0.3, 0.7)) / 3
    msw = sum(10 * m * (1 - m) for m in (0.1, 0.5, 0.3, 0.7)) / 36
    between = (msb - msw) / 10
    assert comp["between"] == pytest.approx(between) and comp["within"] == pytest.approx(msw)
    icc = between / (between + msw)
    assert comp["deff"] == pytest.approx(1 + 9 * icc)
    z = 1.959964 + 0.841621
    expected = z * np.sqrt(2 * (between + msw) * (1 + 9 * icc) / 40)
    assert minimum_detectable_difference(v, c) == pytest.approx(expected, abs=1e-4)


def test_every_function_is_deterministic_per_seed():
    rng = np.random.default_rng(0)
    v, c = rng.random(80), np.repeat(["a", "b", "c", "d"], 20)  # continuous values: no tied quantiles
    w = rng.random(80)
    for fn in (lambda s: clustered_bootstrap_ci(v, c, seed=s), lambda s: paired_difference(v, w, c, seed=s),
               lambda s: seeds_ci([(v, c), (w, c)], seed=s)):
        assert fn(7) == fn(7)
        assert fn(7) != fn(8)


def test_mismatched_lengths_are_refused():
    with pytest.raises(ValueError, match="one home per episode"):
        clustered_bootstrap_ci([1.0, 0.0], ["a"])
    with pytest.raises(ValueError, match="same episodes"):
        paired_difference([1.0, 0.0], [1.0], ["a", "b"])


def test_paired_power_from_the_differences_variance_components_by_hand():
    """Differences [1, 0] in home h0 and [1, 1] in h1: the ANOVA gives no variance between homes
    and 0.25 within, deff 1, so Var(mean) = 0.25 / 4 and the design detects (1.96 + 0.8416) * 0.25
    = 0.7004; a gap of 0.35 needs ceil(2 * (0.7004 / 0.35)^2) = 9 homes."""
    from vlnverse.core.stats import paired_power

    got = paired_power([1, 0, 1, 1], [0, 0, 0, 0], ["h0", "h0", "h1", "h1"], gap=0.35)
    assert got["detectable"] == pytest.approx(0.7004, abs=1e-4)
    assert (got["homes"], got["episodes"], got["homes_needed"]) == (2, 4, 9)
    assert paired_power([1, 0, 1, 1], [0, 0, 0, 0], ["h0", "h0", "h1", "h1"])["homes_needed"] is None
    assert paired_power([1, 0], [0, 0], ["h0", "h0"]) is None   # one home: the spread between homes is unknown

