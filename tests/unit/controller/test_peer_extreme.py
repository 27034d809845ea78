"""The peers' record (``peer_extreme``): calibrated on healthy noise of several tail
shapes, blind to one wild window, deaf where the tail is heavy, and quick on a slow GPU
under drift, where the CUSUMs wait (docs/decision-rule.md, "The peers' record")."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pacekeeper.controller.core import peer_extreme as px
from pacekeeper.controller.core import sequential as sq
from pacekeeper.controller.core.ids import Rank

RANKS = 1024
H = sq.HISTORY


def _drift(rng: np.random.Generator, amp: float, period: float, windows: int) -> np.ndarray:
    """Ranks x windows: each rank's own sinusoidal drift (random phase and period) plus a
    little jitter, as log deviations from the peers."""
    t = np.arange(windows)[None, :]
    phase = rng.uniform(0, 2 * math.pi, (RANKS, 1))
    per = period * rng.uniform(0.5, 2.0, (RANKS, 1))
    return amp * np.sin(2 * math.pi * t / per + phase) + rng.normal(0, amp / 20, (RANKS, windows))


@pytest.mark.parametrize(
    "draw",
    [
        lambda rng, n: rng.laplace(0.0, 1.0, n),  # exponential tails
        lambda rng, n: rng.normal(0.0, 1.0, n),  # lighter
        lambda rng, n: rng.standard_t(3.0, n),  # heavier (polynomial)
        lambda rng, n: rng.pareto(2.5, n),  # one-sided, heavy
    ],
    ids=["laplace", "normal", "t3", "pareto"],
)
def test_healthy_evidence_reaches_t_at_most_about_e_to_minus_t(draw) -> None:
    # Independent windows of one law for every rank: the rank is one more draw of its
    # record, so evidence >= t (a fitted chance <= e^-t) must be about that rare.
    rng = np.random.default_rng(7)
    reach = {4.0: 0, 6.0: 0}
    trials = 0
    for _ in range(6):
        hist = draw(rng, (RANKS, H))
        ev = px.evidence(hist, np.ones(RANKS))
        trials += RANKS
        for t in reach:
            reach[t] += int(np.count_nonzero(ev >= t))
    for t, n in reach.items():
        # Poisson slack over the expected count (with e^-4: ~113 of 6,144).
        bound = trials * math.exp(-t)
        assert n <= bound + 4 * math.sqrt(bound) + 3, f"evidence >= {t}: {n} of {trials}"


def test_a_persistent_shift_far_beyond_a_bounded_drift_is_found() -> None:
    rng = np.random.default_rng(11)
    hist = _drift(rng, 0.02, 20.0, H)
    scale = np.full(RANKS, 0.02)
    hist[5, -3:] += 0.105  # a GPU 10 % slower for three reports
    ev = px.evidence(hist, scale)
    h = sq.threshold(1e-3, 60.0) + sq.EXTREME_EXTRA
    assert ev[5] >= h
    assert np.delete(ev, 5).max() < h / 2


def test_one_wild_window_is_no_evidence() -> None:
    rng = np.random.default_rng(12)
    hist = _drift(rng, 0.02, 20.0, H)
    hist[5, -1] += 1.0  # a stall 50 scales out, this report only
    hist[6, -3:-1] += 1.0  # two reports, then back
    ev = px.evidence(hist, np.full(RANKS, 0.02))
    assert ev[5] == 0.0 and ev[6] == 0.0


def test_a_heavy_tailed_record_does_not_judge_a_shift_of_the_same_size() -> None:
    # Peers whose windows reach tens of scales now and then (t with 1.5 degrees of
    # freedom, no finite variance): a rank 10 scales out is within what they showed.
    rng = np.random.default_rng(13)
    hist = rng.standard_t(1.5, (RANKS, H))
    hist[5, -3:] = 10.0
    ev = px.evidence(hist, np.ones(RANKS))
    assert ev[5] < sq.threshold(1e-3, 60.0) + sq.EXTREME_EXTRA


def test_a_ranks_own_record_is_left_out_of_the_fit_that_judges_it() -> None:
    # A GPU slow for the whole kept history: with its own 30 values in the tail the fit
    # would read a heavy tail and clear it; left out, it is judged as one slow 3 reports.
    rng = np.random.default_rng(14)
    base = _drift(rng, 0.02, 20.0, H)
    scale = np.full(RANKS, 0.02)
    long, short = base.copy(), base.copy()
    long[5] += 0.105
    short[5, -3:] += 0.105
    ev_long, ev_short = px.evidence(long, scale)[5], px.evidence(short, scale)[5]
    assert ev_long >= 0.9 * ev_short
    assert ev_long >= sq.threshold(1e-3, 60.0) + sq.EXTREME_EXTRA


def test_a_record_too_small_or_too_short_judges_nobody() -> None:
    rng = np.random.default_rng(15)
    small = rng.normal(0, 1, (64, H))  # 64 x 30 spans = 1,920 < MIN_RECORD
    small[3, -3:] = 50.0
    assert not px.evidence(small, np.ones(64)).any()
    short = rng.normal(0, 1, (RANKS, px.SPAN - 1))
    assert not px.evidence(short, np.ones(RANKS)).any()
    ragged = np.full((RANKS, H), np.nan)
    ragged[:, -4:] = rng.normal(0, 1, (RANKS, 4))  # 2 spans a rank: 2,048 values
    ragged[3, -3:] = 50.0
    assert not px.evidence(ragged, np.ones(RANKS)).any()


def test_a_thinned_record_of_a_large_job_still_finds_the_rank(monkeypatch) -> None:
    monkeypatch.setattr(px, "MAX_RECORD", 8192)  # 1,024 x 30 thinned ~4x
    rng = np.random.default_rng(16)
    hist = _drift(rng, 0.02, 20.0, H)
    hist[777, -3:] += 0.105
    ev = px.evidence(hist, np.full(RANKS, 0.02))
    assert ev[777] >= sq.threshold(1e-3, 60.0) + sq.EXTREME_EXTRA
    assert np.delete(ev, 777).max() < 10.0


def _under_drift(seed: int, windows: int, slow: float) -> tuple[int | None, set[int]]:
    """A job of 1,024 ranks, each drifting +-2.5 % on its own ~15-report period; rank 5
    ``slow`` slower from report 40. The first report at which rank 5 passes (after the
    onset), and the healthy ranks that ever passed."""
    rng = np.random.default_rng(seed)
    dev = _drift(rng, 0.025, 15.0, windows)
    h = sq.threshold(1e-3, 60.0)
    tests: dict[Rank, sq.RankTest] = {}
    first, healthy = None, set()
    for t in range(windows):
        e = dev[:, t].copy()
        if t >= 40:
            e[5] -= math.log(1.0 - slow)
        scores = np.minimum(np.exp(np.median(e) - e), 1.0)
        tests = sq.advance(tests, dict(enumerate(scores.tolist())), shift=sq.shift_for(0.93))
        for r, test in tests.items():
            if test.passes(h):
                if r == 5:
                    first = t - 40 if first is None else first
                else:
                    healthy.add(int(r))
    return first, healthy


def test_a_slow_gpu_under_drift_passes_within_a_few_reports_and_no_drifting_rank_does(
    monkeypatch,
) -> None:
    got = [_under_drift(seed, 60, 0.10) for seed in (1, 2)]
    assert all(not healthy for _, healthy in got), got
    assert all(first is not None and first <= 5 for first, _ in got), got
    # Without the record the same runs wait on the CUSUMs for much longer.
    monkeypatch.setattr(px, "MIN_RECORD", 10**9)
    without = [_under_drift(seed, 60, 0.10)[0] for seed in (1, 2)]
    assert all(w is None or w >= 8 for w in without), without


def test_a_large_job_with_short_histories_is_thinned_over_the_values_it_has(monkeypatch) -> None:
    # Histories are right-aligned: early on only the last columns hold values. Thinning
    # by position would keep only empty columns (a crash at 131,072 ranks, 10 reports).
    monkeypatch.setattr(px, "MAX_RECORD", 5000)
    rng = np.random.default_rng(17)
    hist = np.full((RANKS, H), np.nan)
    hist[:, -10:] = _drift(rng, 0.02, 20.0, 10)
    hist[9, -3:] += 0.105
    ev = px.evidence(hist, np.full(RANKS, 0.02))
    assert ev[9] >= sq.threshold(1e-3, 60.0) + sq.EXTREME_EXTRA
    assert np.delete(ev, 9).max() < 10.0


def _reference(history: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """``evidence`` written out the long way: every rank's spans by hand, its own values
    left out of its fit by filtering, the moments and bounds as docs/decision-rule.md
    states them."""
    n, width = history.shape
    z = history / scale[:, None]
    values, owners = [], []
    now = np.full(n, np.nan)
    for i in range(n):
        for j in range(width - px.SPAN + 1):
            low = min(z[i, j : j + px.SPAN])  # NaN-free rows only reach here below
            if all(np.isfinite(z[i, j : j + px.SPAN])):
                values.append(low)
                owners.append(i)
                if j == width - px.SPAN:
                    now[i] = low
    out = np.zeros(n)
    if len(values) < px.MIN_RECORD:
        return out
    vals, own = np.array(values), np.array(owners)
    edge = float(np.quantile(vals, px.QUANTILE))
    for i in range(n):
        if not (np.isfinite(now[i]) and now[i] > edge):
            continue
        keep = (vals > edge) & (own != i)
        y = vals[keep] - edge
        if y.size < px.MIN_TAIL:
            continue
        mean, var = y.mean(), y.var()
        shape = max(0.5 * (1 - mean * mean / var), 0.0) if var > 0 else 0.0
        shape += px.Z95 * (1 + shape) / math.sqrt(len(set(own[keep].tolist())))
        fit_scale = mean * (1 - min(shape, 0.5)) * (1 + px.Z95 / math.sqrt(y.size))
        share = (y.size + 1) / (np.count_nonzero(own != i) + 1)
        out[i] = -math.log(share) + math.log1p(shape * (now[i] - edge) / fit_scale) / shape
    return out


@pytest.mark.parametrize("seed", [21, 22, 23])
def test_evidence_equals_the_long_way(monkeypatch, seed: int) -> None:
    # 240 ranks of their own scales (0.5-3 %), heavy-ish tails, some ranks' histories
    # short, a few ranks shifted for their last reports: every figure as the long way.
    monkeypatch.setattr(px, "MIN_RECORD", 2000)
    monkeypatch.setattr(px, "MIN_TAIL", 20)
    rng = np.random.default_rng(seed)
    n = 240
    scale = rng.uniform(0.005, 0.03, n)
    hist = rng.standard_t(4.0, (n, H)) * scale[:, None]
    hist[rng.choice(n, 30, replace=False), : rng.integers(4, 20)] = np.nan
    for r, k in ((3, 3), (7, 5), (11, 12)):
        hist[r, -k:] += 8 * scale[r]
    hist[13, -2:] += 50 * scale[13]  # high for two reports only: not a span
    got, want = px.evidence(hist, scale), _reference(hist, scale)
    assert np.count_nonzero(want) >= 3
    assert got[13] == 0.0
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def test_a_rank_is_read_in_its_own_scale() -> None:
    # Rank 5 moved 6 % where its own scale is 10 %: 0.6 of its scale, not a finding;
    # rank 6 moved 6 % where its scale is 0.5 %: twelve scales out.
    rng = np.random.default_rng(24)
    scale = np.full(RANKS, 0.005)
    scale[5] = 0.1
    hist = rng.normal(0, 1, (RANKS, H)) * scale[:, None]
    hist[5, -3:] += 0.06
    hist[6, -3:] += 0.06
    ev = px.evidence(hist, scale)
    assert ev[5] == 0.0
    assert ev[6] >= sq.threshold(1e-3, 60.0) + sq.EXTREME_EXTRA


def test_a_tail_the_rank_makes_itself_judges_nothing(monkeypatch) -> None:
    # 200 quiet ranks x 30 spans, one of them far out for 28 reports: 26 of the record's
    # 60 top values are its own, and the 34 left without it are under MIN_TAIL.
    monkeypatch.setattr(px, "MIN_RECORD", 5000)
    rng = np.random.default_rng(25)
    hist = rng.normal(0, 1, (200, H))
    hist[4, -28:] += 30.0
    ev = px.evidence(hist, np.ones(200))
    assert ev[4] == 0.0


def test_a_record_thinned_below_what_the_tail_needs_judges_nobody(monkeypatch) -> None:
    # 200 ranks x 30 spans = 6,000 values: 60 in the 1 % tail, 30 once thinned to every
    # second value (MAX_RECORD 3,000), under MIN_TAIL.
    monkeypatch.setattr(px, "MAX_RECORD", 3000)
    rng = np.random.default_rng(26)
    hist = rng.normal(0, 1, (200, H))
    hist[4, -3:] += 30.0
    assert not px.evidence(hist, np.ones(200)).any()
    monkeypatch.setattr(px, "MAX_RECORD", 6000)  # not thinned: the same record judges
    assert px.evidence(hist, np.ones(200))[4] > 0.0


def test_evidence_equals_the_long_way_on_small_excesses_and_a_one_rank_tail(monkeypatch) -> None:
    monkeypatch.setattr(px, "MIN_RECORD", 2000)
    monkeypatch.setattr(px, "MIN_TAIL", 20)
    rng = np.random.default_rng(27)
    # Heavy tails in units far below 1 (excesses sum to under 1, variance under 1).
    hist = rng.standard_t(3.0, (150, H)) * 1e-4
    hist[2, -3:] += 3e-3
    scale = np.ones(150)
    want = _reference(hist, scale)
    assert want[2] > 0
    np.testing.assert_allclose(px.evidence(hist, scale), want, rtol=1e-9, atol=1e-12)
    # A tail one other rank makes: 100 ranks x 30 spans, rank 0 high throughout.
    one = rng.normal(0, 1, (100, H))
    one[0] += 10.0 + rng.normal(0, 1, H)
    one[1, -3:] += 20.0
    want = _reference(one, np.ones(100))
    assert want[1] > 0
    np.testing.assert_allclose(px.evidence(one, np.ones(100)), want, rtol=1e-9)


def test_a_rank_without_a_scale_is_no_value_and_judges_nothing(monkeypatch) -> None:
    monkeypatch.setattr(px, "MIN_RECORD", 2000)
    rng = np.random.default_rng(28)
    hist = rng.normal(0, 0.01, (150, H))
    hist[3, -3:] += 0.5
    scale = np.full(150, 0.01)
    base = px.evidence(hist, scale)
    scale[9] = 0.0
    hist[9] = 1.0  # would be infinitely far out on a scale of 0
    got = px.evidence(hist, scale)
    assert got[9] == 0.0
    np.testing.assert_allclose(np.delete(got, 9), np.delete(base, 9), rtol=0.05)


def test_the_record_judges_from_exactly_min_record_values_and_one_span(monkeypatch) -> None:
    rng = np.random.default_rng(29)
    hist = rng.normal(0, 1, (4000, px.SPAN))  # one span a rank: 4,000 values
    hist[7] += 20.0
    monkeypatch.setattr(px, "MIN_TAIL", 20)
    monkeypatch.setattr(px, "MIN_RECORD", 4000)
    assert px.evidence(hist, np.ones(4000))[7] > 0
    monkeypatch.setattr(px, "MIN_RECORD", 4001)
    assert not px.evidence(hist, np.ones(4000)).any()
