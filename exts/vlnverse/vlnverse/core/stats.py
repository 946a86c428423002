"""Interval estimates and paired comparisons that respect an evaluation's design.

Per-episode values (SR 0/1, SPL, nDTW ...) are not independent draws: the episodes of one home
share its layout, so a benchmark samples homes, then episodes within them. Every function here
takes the per-episode ``values`` with their ``clusters`` (the home, i.e. scene id, of each
episode), is seeded (``numpy.random.default_rng(seed)``: the same seed gives the same numbers)
and rounds what it returns to ``DECIMALS`` places. The methods and their formulas are in
``docs/statistics.md``.

- ``bootstrap_ci``: the plain percentile bootstrap over episodes (treats them as independent).
- ``clustered_bootstrap_ci``: two-stage bootstrap: homes with replacement, then episodes with
  replacement within each drawn home. Undefined (``lo``/``hi`` None) with fewer than two homes.
- ``seeds_ci``: over training seeds: mean ± sd of the seeds' means, and an interval resampling
  seeds, then homes, then episodes.
- ``paired_difference``: two agents on the same episodes: the clustered bootstrap of the
  per-episode differences and rliable's probability of improvement over homes.
- ``minimum_detectable_difference``: the smallest difference between two agents the design
  detects, from the observed variance between and within homes (design effect).
- ``paired_power``: the same for a paired difference on the same episodes, and the homes a
  design needs to detect a given difference (e.g. a paper's).
"""
from __future__ import annotations

from statistics import NormalDist
from typing import Any, Sequence

import numpy as np

#: decimal places of every returned float
DECIMALS = 4
#: default bootstrap resamples
SAMPLES = 2000
#: two home means closer than this count as a tie (probability of improvement)
TIE_TOLERANCE = 1e-9


def _round(x: float | None) -> float | None:
    return None if x is None else round(float(x), DECIMALS)


def _interval(means: np.ndarray, level: float) -> tuple[float, float]:
    """The percentile interval of bootstrap ``means``: their (1 - level)/2 and (1 + level)/2 quantiles."""
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return _round(lo), _round(hi)


def _check(values: Any, clusters: Any) -> tuple[np.ndarray, np.ndarray]:
    v = np.asarray(values, dtype=float).reshape(-1)
    c = np.asarray([str(x) for x in clusters], dtype=object)
    if len(c) != len(v):
        raise ValueError(f"{len(v)} values but {len(c)} cluster labels: one home per episode expected")
    if not np.all(np.isfinite(v)):
        raise ValueError("values must be finite numbers")
    return v, c


def _same_episodes(a: Any, b: Any, clusters: Any) -> tuple[np.ndarray, np.ndarray]:
    va, vb = np.asarray(a, dtype=float).reshape(-1), np.asarray(b, dtype=float).reshape(-1)
    if len(va) != len(vb):
        raise ValueError(f"{len(va)} and {len(vb)} values: the same episodes expected")
    return _check(va, clusters)[0], _check(vb, clusters)[0]


def _groups(values: np.ndarray, clusters: np.ndarray) -> list[np.ndarray]:
    """The values of each home, homes in sorted order of their ids (the order is part of the seed's stream)."""
    order = sorted(set(clusters.tolist()))
    return [values[clusters == h] for h in order]


def _two_stage_means(groups: list[np.ndarray], counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Bootstrap means given how often each home was drawn (``counts``: shape (..., homes)): each
    draw of home h resamples its m_h episodes with replacement, so C draws of it take C * m_h
    episodes from it (multinomial counts over its episodes); the mean is over every episode drawn."""
    sums = np.zeros(counts.shape[:-1])
    taken = np.zeros(counts.shape[:-1])
    for h, g in enumerate(groups):
        n = counts[..., h] * len(g)
        picks = rng.multinomial(n, np.full(len(g), 1.0 / len(g)))  # (..., m_h)
        sums += picks @ g
        taken += n
    return sums / taken


def bootstrap_ci(values: Sequence[float], *, seed: int = 0, samples: int = SAMPLES, level: float = 0.95) -> dict:
    """Mean of ``values`` with a percentile-bootstrap confidence interval: ``samples`` resamples of
    the values with replacement (``numpy.random.default_rng(seed)``), the (1 - level)/2 and
    (1 + level)/2 quantiles of their means; ``n`` values (all None when there are none)."""
    v = np.asarray(values, dtype=float)
    if len(v) == 0:
        return {"mean": None, "lo": None, "hi": None, "n": 0}
    means = v[np.random.default_rng(seed).integers(0, len(v), size=(samples, len(v)))].mean(axis=1)
    lo, hi = _interval(means, level)
    return {"mean": _round(v.mean()), "lo": lo, "hi": hi, "n": int(len(v))}


def clustered_bootstrap_ci(values: Sequence[float], clusters: Sequence[Any], *, seed: int = 0, samples: int = SAMPLES,
                           level: float = 0.95) -> dict:
    """Mean of ``values`` (over episodes) with a two-stage percentile-bootstrap interval: per
    resample, draw as many homes as there are with replacement, then each drawn home's episodes
    with replacement; the interval is the quantiles of the resampled means over every episode drawn.

    With fewer than two homes the spread between homes cannot be estimated: ``lo`` and ``hi``
    are None (an interval of unbounded width), never the within-home episode interval."""
    v, c = _check(values, clusters)
    if len(v) == 0:
        return {"mean": None, "lo": None, "hi": None, "n": 0, "clusters": 0}
    groups = _groups(v, c)
    k = len(groups)
    out = {"mean": _round(v.mean()), "lo": None, "hi": None, "n": int(len(v)), "clusters": k}
    if k < 2:
        return out
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(k, np.full(k, 1.0 / k), size=samples)
    out["lo"], out["hi"] = _interval(_two_stage_means(groups, counts, rng), level)
    return out


def seeds_ci(runs: Sequence[tuple[Sequence[float], Sequence[Any]]], *, seed: int = 0, samples: int = SAMPLES,
             level: float = 0.95) -> dict:
    """Over training seeds (``runs``: one ``(values, clusters)`` per seed): the mean and sample sd
    (ddof 1; None for one seed) of the seeds' means, and a percentile interval of resamples that
    draw the seeds with replacement, then homes, then episodes within each drawn home.

    When every seed ran on the same homes, a resample draws the homes once for all its seeds
    (homes crossed with seeds); otherwise each drawn seed draws its own homes (nested). With
    one seed the interval is ``clustered_bootstrap_ci``'s; fewer than two homes: None."""
    checked = [_check(v, c) for v, c in runs]
    if not checked or any(len(v) == 0 for v, _ in checked):
        return {"mean": None, "sd": None, "lo": None, "hi": None, "seeds": len(checked), "n": 0}
    seed_means = np.array([v.mean() for v, _ in checked])
    r = len(checked)
    out = {"mean": _round(seed_means.mean()), "sd": _round(seed_means.std(ddof=1)) if r > 1 else None,
           "lo": None, "hi": None, "seeds": r, "n": int(sum(len(v) for v, _ in checked))}
    home_sets = [sorted(set(c.tolist())) for _, c in checked]
    if min(len(h) for h in home_sets) < 2:
        return out
    rng = np.random.default_rng(seed)
    drawn = rng.integers(0, r, size=(samples, r))  # the seeds of each resample
    crossed = all(h == home_sets[0] for h in home_sets)
    if crossed:
        k = len(home_sets[0])
        shared = rng.multinomial(k, np.full(k, 1.0 / k), size=samples)  # (samples, homes)
    means = np.empty((r, samples, r))  # seed i's two-stage mean for resample s, slot j
    for i, (v, c) in enumerate(checked):
        groups = _groups(v, c)
        k = len(groups)
        counts = (np.repeat(shared[:, None, :], r, axis=1) if crossed
                  else rng.multinomial(k, np.full(k, 1.0 / k), size=(samples, r)))
        means[i] = _two_stage_means(groups, counts, rng)
    stat = means[drawn, np.arange(samples)[:, None], np.arange(r)[None, :]].mean(axis=1)
    out["lo"], out["hi"] = _interval(stat, level)
    return out


def probability_of_improvement(a: Sequence[float], b: Sequence[float], clusters: Sequence[Any]) -> float | None:
    """rliable's probability of improvement (Agarwal et al. 2021) with homes as its tasks and one
    score per agent and home (the home's mean over its episodes): the mean over homes of
    P(A_h > B_h) = 1 if A's home mean is higher, 0.5 on a tie, 0 if lower (the Mann-Whitney U
    statistic over one run each, normalised); every home weighs the same. None without episodes."""
    va, vb = _same_episodes(a, b, clusters)
    c = _check(va, clusters)[1]
    if len(va) == 0:
        return None
    wins = []
    for ga, gb in zip(_groups(va, c), _groups(vb, c)):
        d = ga.mean() - gb.mean()
        wins.append(0.5 if abs(d) <= TIE_TOLERANCE else float(d > 0))
    return _round(np.mean(wins))


def paired_difference(a: Sequence[float], b: Sequence[float], clusters: Sequence[Any], *, seed: int = 0,
                      samples: int = SAMPLES, level: float = 0.95) -> dict:
    """A minus B on the same episodes (same order): the mean per-episode difference with the
    clustered bootstrap interval of the differences (``clustered_bootstrap_ci``), ``separated``
    when that interval excludes 0 (never with fewer than two homes), and
    ``probability_of_improvement`` of A over B."""
    va, vb = _same_episodes(a, b, clusters)
    ci = clustered_bootstrap_ci(va - vb, clusters, seed=seed, samples=samples, level=level)
    separated = ci["lo"] is not None and (ci["lo"] > 0 or ci["hi"] < 0)
    return {"mean": ci["mean"], "lo": ci["lo"], "hi": ci["hi"],
            "prob_improvement": probability_of_improvement(va, vb, clusters), "separated": bool(separated),
            "n": ci["n"], "clusters": ci["clusters"]}


def variance_components(values: Sequence[float], clusters: Sequence[Any]) -> dict | None:
    """One-way ANOVA estimates of the variance between homes (``between``) and within them
    (``within``), the intraclass correlation ``icc`` and the design effect ``deff`` =
    1 + (m̄ - 1) icc (m̄: episodes per home); None with fewer than two homes or no replication."""
    v, c = _check(values, clusters)
    groups = _groups(v, c)
    k, n = len(groups), len(v)
    if k < 2 or n <= k:
        return None
    sizes = np.array([len(g) for g in groups], dtype=float)
    home_means = np.array([g.mean() for g in groups])
    msb = float(np.sum(sizes * (home_means - v.mean()) ** 2) / (k - 1))
    msw = float(sum(np.sum((g - g.mean()) ** 2) for g in groups) / (n - k))
    m0 = (n - np.sum(sizes ** 2) / n) / (k - 1)  # the unequal-sizes "average" home size of the ANOVA
    between = max(0.0, (msb - msw) / m0)
    total = between + msw
    icc = between / total if total > 0 else 0.0
    return {"between": float(between), "within": msw, "icc": float(icc), "deff": float(1.0 + (n / k - 1.0) * icc),
            "homes": k, "episodes": n}


def _detectable(comp: dict, samples: int, level: float, power: float) -> float:
    """(z_(1+level)/2 + z_power) * sqrt(samples * σ² * deff / n) of ``variance_components``' ``comp``."""
    z = NormalDist().inv_cdf((1 + level) / 2) + NormalDist().inv_cdf(power)
    variance = (comp["between"] + comp["within"]) * comp["deff"] / comp["episodes"]
    return float(z * np.sqrt(samples * variance))


def minimum_detectable_difference(values: Sequence[float], clusters: Sequence[Any], *, level: float = 0.95,
                                  power: float = 0.8) -> float | None:
    """The smallest true difference between two agents' means, each evaluated on a design like
    this one (same homes and episodes per home), that a two-sided test at ``level`` detects with
    probability ``power``: (z_(1+level)/2 + z_power) * sqrt(2 * σ² * deff / n), where σ² is the
    between- plus within-home variance, deff the design effect (``variance_components``) and n
    the episodes. None with fewer than two homes (the spread between homes is unknown)."""
    comp = variance_components(values, clusters)
    return None if comp is None else _round(_detectable(comp, 2, level, power))


def paired_power(a: Sequence[float], b: Sequence[float], clusters: Sequence[Any], *, gap: float | None = None,
                 level: float = 0.95, power: float = 0.8) -> dict | None:
    """How much this design can tell about A - B on the same episodes: ``detectable``, the smallest
    true mean difference a two-sided test at ``level`` detects with probability ``power``,
    (z_(1+level)/2 + z_power) * sqrt(σ_d² * deff_d / n) from the variance components of the
    per-episode differences; with ``gap`` (a true difference to test, e.g. a paper's) the
    ``homes_needed`` to detect it at this design's episodes per home: ceil(k * (detectable /
    gap)²), k the homes here. None with fewer than two homes."""
    x, y = _same_episodes(a, b, clusters)
    comp = variance_components(x - y, clusters)
    if comp is None:
        return None
    detectable = _detectable(comp, 1, level, power)
    out = {"detectable": _round(detectable), "homes": comp["homes"], "episodes": comp["episodes"],
           "level": level, "power": power, "gap": gap, "homes_needed": None}
    if gap:
        out["homes_needed"] = int(np.ceil(comp["homes"] * (detectable / abs(gap)) ** 2 - 1e-9))
    return out
