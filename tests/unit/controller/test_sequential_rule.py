"""The sequential test alone (``sequential``): false alarms on healthy noise drawn over
wide ranges stay under the stated rate, and 10% and 30% slowdowns pass it in bounded
time, also under fast drift of each rank's own."""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pytest

from pacekeeper.controller.core import sequential as sq
from pacekeeper.controller.core.ids import Rank

WINDOW_S = 60.0
RANKS = 32
ACT = 0.93
RATE = 0.01
"""Per GPU-day: high enough that a unit test's ~100 GPU-days could see it exceeded."""


@dataclass(frozen=True)
class Noise:
    jitter: float
    tail_df: float
    rho: float
    drift_amp: float
    drift_period: float
    common: float
    skew: float

    @classmethod
    def draw(cls, rng: np.random.Generator) -> Noise:
        """Healthy noise from the ranges docs/decision-rule.md claims the rate for."""
        return cls(
            jitter=float(rng.uniform(0.005, 0.04)),
            tail_df=float(rng.uniform(2.5, 30.0)),
            rho=float(rng.uniform(0.0, 0.9)),
            drift_amp=float(rng.uniform(0.0, 0.02)),
            drift_period=float(rng.uniform(10.0, 60.0)),
            common=float(rng.uniform(0.0, 0.1)),
            skew=float(rng.uniform(0.0, 0.05)),
        )


def _scores(
    noise: Noise, rng: np.random.Generator, windows: int, slow: dict[int, float]
) -> Iterator[dict[int, float]]:
    """Per window, each rank's score against its peers' median (capped at 1, as the
    detector reports it); ``slow``: rank -> slowdown from window ``windows // 4``."""
    ar = np.zeros(RANKS)
    phase = rng.uniform(0, 2 * math.pi, RANKS)
    period = noise.drift_period * rng.uniform(0.5, 2.0, RANKS)
    skew = np.zeros(RANKS)
    unit_t = math.sqrt((noise.tail_df - 2) / noise.tail_df)
    for t in range(windows):
        shock = rng.standard_t(noise.tail_df, RANKS) * unit_t * noise.jitter
        ar = noise.rho * ar + math.sqrt(1 - noise.rho**2) * shock
        if rng.random() < 0.1:  # skew that stays on the same ranks ~10 windows
            skew = np.where(rng.random(RANKS) < 0.2, noise.skew, 0.0)
        drift = noise.drift_amp * np.sin(2 * math.pi * t / period + phase)
        step = np.exp(ar + drift + skew + noise.common * math.sin(t / 7.0))
        if t >= windows // 4:
            for r, s in slow.items():
                step[r] /= 1.0 - s
        yield {r: float(v) for r, v in enumerate(np.minimum(np.median(step) / step, 1.0))}


def _first_passes(noise: Noise, seed: int, windows: int, slow: dict[int, float]) -> dict[int, int]:
    rng = np.random.default_rng(seed)
    h = sq.threshold(RATE, WINDOW_S)
    tests: dict[Rank, sq.RankTest] = {}
    first: dict[int, int] = {}
    for t, scores in enumerate(_scores(noise, rng, windows, slow)):
        tests = sq.advance(tests, scores, shift=sq.shift_for(ACT))
        for r, test in tests.items():
            if test.passes(h) and r not in first:
                first[r] = t
                tests[r] = sq.RankTest()  # a false disruption restarts the rank: count anew
    return first


def test_threshold_follows_the_stated_rate_and_window() -> None:
    assert sq.threshold(1e-3, 60.0) == pytest.approx(math.log(1440 / 1e-3))
    assert sq.threshold(1e-3, 30.0) > sq.threshold(1e-3, 60.0) > sq.threshold(1e-2, 60.0)
    # Reports a day apart at one false disruption a GPU-day: still some evidence needed.
    assert sq.threshold(1.0, 86400.0) == pytest.approx(math.log(20.0))


def test_healthy_noise_over_wide_ranges_alarms_at_most_at_the_stated_rate() -> None:
    rng = np.random.default_rng(20261205)
    scenarios, windows = 16, 240
    alarms = 0
    for i in range(scenarios):
        alarms += len(_first_passes(Noise.draw(rng), seed=1000 + i, windows=windows, slow={}))
    gpu_days = scenarios * RANKS * windows * WINDOW_S / sq.SECONDS_PER_DAY
    expected_at_the_rate = RATE * gpu_days  # ~0.85
    # Poisson(0.85) exceeds 3 with probability ~1%: more means the rate does not hold.
    assert alarms <= 3, f"{alarms} false alarms in {gpu_days:.0f} GPU-days at {RATE}/GPU-day"
    assert expected_at_the_rate < 1.0


@pytest.mark.parametrize(("slowdown", "within"), [(0.10, 40), (0.30, 20)])
def test_a_slowdown_passes_within_bounded_windows_and_no_peer_does(
    slowdown: float, within: int
) -> None:
    noise = Noise(0.015, 5.0, 0.5, 0.01, 30.0, 0.05, 0.0)
    for seed in range(3):
        windows = 120
        first = _first_passes(noise, seed, windows, {3: slowdown})
        onset = windows // 4
        assert 3 in first, f"seed {seed}: a {slowdown:.0%} slowdown never passed"
        assert first[3] - onset <= within
        assert set(first) == {3}, f"seed {seed}: healthy ranks passed too: {sorted(first)}"


def test_a_slow_rank_under_fast_drift_passes_and_the_drifting_ranks_do_not() -> None:
    # +-2% drift of each rank's own on a period of ~10 windows, a 10% GPU among them.
    noise = Noise(0.01, 5.0, 0.3, 0.02, 10.0, 0.05, 0.0)
    for seed in range(3):
        first = _first_passes(noise, seed, 160, {5: 0.10})
        assert set(first) == {5}, f"seed {seed}: {sorted(first)}"


def test_too_few_peers_move_nothing() -> None:
    tests = sq.advance({}, {0: 0.5, 1: 1.0, 2: 1.0}, shift=sq.shift_for(ACT))
    assert tests == {}


def test_a_large_slowdown_passes_on_the_wide_statistic(monkeypatch: pytest.MonkeyPatch) -> None:
    # Sampled scenario 8's shape: a GPU 28 % slower where each rank drifts 1 % and its
    # noise keeps 0.8 of the last window's (x ~ 30 scales). Clipped at 6, every window
    # adds what one at 6 scales does; clipped at 24 the same windows count for more.
    monkeypatch.setattr(sys.modules[__name__], "RANKS", 256)
    noise = Noise(0.005, 30.0, 0.8, 0.01, 50.0, 0.0, 0.0)
    onset = 120 // 4

    def after_onset() -> list[int]:
        out = []
        for seed in range(3):
            first = _first_passes(noise, seed, 120, {3: 0.28})
            assert set(first) == {3}, f"seed {seed}: {sorted(first)}"
            out.append(first[3] - onset)
        return out

    # The peers' record (256 ranks fill it) would pass first: this is the CUSUMs' test.
    monkeypatch.setattr(sq.peer_extreme, "MIN_RECORD", 10**9)
    wide = after_onset()
    monkeypatch.setattr(sq, "WIDE", sq.CLIP)
    clipped = after_onset()
    assert max(wide) <= 7
    assert min(clipped) >= max(wide) + 3
