"""The CUSUM step of each rank under autocorrelated noise, pinned by value (issue 41).

test_sequential_values.py pins each rank's own scale and autocorrelation; the rule's
tests check only the sign of a step. Here one report's step is written out in plain
Python from the module's docstring (the deviation from the peers' median, the largest
of the scales, the deviation standardized around the peers' trimmed mean and clipped
at ``CLIP``, the variance ``max(1, mean x^2)`` inflated by the pooled lag-1 factor
``(1 + rho) / (1 - rho)``, Bennett's bound) and compared with ``advance``: a wrong
inflation, a missing clip or a wrong centre moves every rank's statistic."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Mapping, Sequence
from fractions import Fraction

import numpy as np
import pytest
from test_sequential_values import expected_own

from pacekeeper.controller.core import sequential as sq

SHIFT = sq.shift_for(0.9)


def quantile(values: Sequence[float], p: float) -> float:
    """Linear interpolation between order statistics (R's type 7, numpy's default)."""
    v = sorted(values)
    pos = p * (len(v) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def expected_step(
    tests: Mapping[sq.Rank, sq.RankTest], scores: Mapping[int, float]
) -> tuple[dict[int, tuple[float, float]], list[float], float]:
    """Per rank (cusum, scale) after one report, the standardized deviations and the
    pooled autocorrelation, from the docstring's definition."""
    ranks = list(scores)
    logs = [math.log(min(scores[r], 1.0)) for r in ranks]
    med = statistics.median(logs)
    e = [med - v for v in logs]
    owns = [expected_own(tests.get(sq.Rank(r), sq.RankTest())) for r in ranks]
    known_scales = [s for s, _ in owns if not math.isnan(s)]
    known_rhos = [p for _, p in owns if not math.isnan(p)]
    peers = statistics.median(known_scales) if known_scales else 0.0
    rho = min(max(statistics.median(known_rhos) if known_rhos else 0.0, 0.0), sq.MAX_RHO)
    spread = (quantile(e, 0.75) - quantile(e, 0.5)) / sq.Q75
    scale = [max(0.0 if math.isnan(s) else s, peers, spread, sq.FLOOR) for s, _ in owns]
    lo, hi = quantile(e, 0.1), quantile(e, 0.9)
    centre = statistics.fmean(min(max(d, lo), hi) for d in e)
    z = [(d - centre) / s for d, s in zip(e, scale, strict=True)]
    x = [min(max(zi, -sq.CLIP), sq.CLIP) for zi in z]
    steps = bennett(z, scale, sq.CLIP, rho)
    wide = bennett(z, scale, sq.WIDE, rho)
    out: dict[int, tuple[float, float, float]] = {}
    for i, r in enumerate(ranks):
        old = tests.get(sq.Rank(r), sq.RankTest())
        out[r] = (max(0.0, old.cusum + steps[i]), scale[i], max(0.0, old.wide + wide[i]))
    return out, x, rho


def bennett(z: list[float], scale: list[float], b: float, rho: float) -> list[float]:
    """Each rank's step for deviations ``z`` clipped at ``b``: for X <= b with variance
    v, log E exp(lam X) <= v (e^(lam b) - 1 - lam b) / b^2; lam is the bound's best for a
    shift of delta (at most b) standard units."""
    x = [min(max(zi, -b), b) for zi in z]
    v = max(1.0, statistics.fmean(xi * xi for xi in x)) * (1.0 + rho) / (1.0 - rho)
    out = []
    for xi, s in zip(x, scale, strict=True):
        delta = min(SHIFT / s, b)
        lam = math.log(1.0 + delta * b / v) / b
        psi = v * (math.expm1(lam * b) - lam * b) / (b * b)
        out.append(lam * xi - psi)
    return out


def ar1(seed: int, n: int = 16, phi: float = 0.8, sd: float = 0.01) -> tuple[float, ...]:
    """Autocorrelated noise: each window keeps ``phi`` of the last one's deviation."""
    rng = random.Random(seed)
    level, out = 0.0, []
    for _ in range(n):
        level = phi * level + rng.gauss(0.0, sd)
        out.append(round(level, 6))
    return tuple(out)


def check(tests: dict[sq.Rank, sq.RankTest], scores: dict[int, float]) -> list[float]:
    want, x, rho = expected_step(tests, scores)
    assert 0.2 < rho < sq.MAX_RHO  # the inflation matters, unclipped
    got = sq.advance(tests, scores, shift=SHIFT)
    for r, (cusum, scale, wide) in want.items():
        assert cusum > 0 and wide > 0  # each rank's step is seen, not cut at 0
        assert got[sq.Rank(r)].scale == pytest.approx(scale, rel=1e-9)
        assert got[sq.Rank(r)].cusum == pytest.approx(cusum, rel=1e-9), r
        assert got[sq.Rank(r)].wide == pytest.approx(wide, rel=1e-9), r
    return x


def test_a_step_under_autocorrelated_noise_inflates_the_variance_by_the_pooled_factor() -> None:
    # Six ranks with AR(1) histories (the last two windows a run, left out of the
    # scale), each mid-way through a run; this window's deviations are small against
    # their scales, so max(1, mean x^2) is 1 and the inflation alone sets v.
    tests = {sq.Rank(r): sq.RankTest(history=ar1(r), cusum=3.0, run=2, wide=3.0) for r in range(6)}
    scores = {r: math.exp(-0.004 * ((r * 5) % 6) - 0.05) for r in range(6)}
    x = check(tests, scores)
    assert statistics.fmean(xi * xi for xi in x) < 1.0


def test_a_wild_window_sets_the_variance_and_a_fast_rank_is_clipped_below() -> None:
    # One rank far slower and one far faster than the peers: both standardized
    # deviations are past CLIP, the mean x^2 is above 1 and sets v, and the fast rank's
    # statistic falls by the clipped step only.
    tests = {
        sq.Rank(r): sq.RankTest(history=ar1(10 + r), cusum=40.0, run=1, wide=40.0) for r in range(6)
    }
    scores = {0: 0.5, 1: 0.502, 2: 0.49, 3: 0.507, 4: 0.3, 5: 1.0}
    x = check(tests, scores)
    assert x[5] == -sq.CLIP
    assert x[4] == sq.CLIP
    assert statistics.fmean(xi * xi for xi in x) > 1.0


def test_the_censored_spread_is_measured_from_the_deviations_median() -> None:
    # Scores near the float range's end (logs about -700) and an even number of ranks:
    # the peers' median of the logs, halfway between the middle two, is rounded, so
    # the deviations are all off by that rounding; the spread above their median is
    # not. Two ranks tie at the upper quartile, so its interpolation is exact.
    scores = {0: 1e-304, 1: 1.0037e-304, 2: 1.7e-304, 3: 2.9e-304, 4: 1e-304, 5: 9e-305}
    logs = np.log(np.fromiter(scores.values(), np.float64))  # as advance takes them
    exact = [Fraction(float(v)) for v in logs]
    mid = sorted(exact)[2:4]
    med = (mid[0] + mid[1]) / 2
    assert Fraction(float(statistics.median(float(v) for v in logs))) != med  # rounded
    dev = sorted(med - v for v in exact)
    q75 = dev[3] + (dev[4] - dev[3]) * Fraction(3, 4)
    q50 = (dev[2] + dev[3]) / 2
    spread = float((q75 - q50) / Fraction(sq.Q75))
    assert spread > sq.FLOOR
    got = sq.advance({}, scores, shift=SHIFT)
    assert [t.scale for t in got.values()] == pytest.approx([spread] * 6, rel=1e-13, abs=0.0)
