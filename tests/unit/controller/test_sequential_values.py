"""Values of ``sequential`` that test_sequential_edges.py and the rule's rate tests left
loose, found by mutation (make mutation, issue 41): each rank's own noise scale and
lag-1 autocorrelation (``_own``), which decide how fast a slow rank's statistic climbs.
The rate tests run with healthy noise, where a wrong scale or a wrong autocorrelation
only shifts the figure a little; these pin them against the definition in the module's
docstring, written out here in plain Python on histories chosen so that each part of
it matters (a run left out, outliers past ``CLIP``, ranks at different levels, a scale
of zero)."""

from __future__ import annotations

import itertools
import math
import statistics
import warnings
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pacekeeper.controller.core import sequential as sq

NAN = float("nan")


def _mad(values: Sequence[float]) -> float:
    med = statistics.median(values)
    return 1.4826 * statistics.median(abs(v - med) for v in values)


def expected_own(t: sq.RankTest) -> tuple[float, float]:
    """(scale, lag-1 autocorrelation) as the module's docstring defines them."""
    keep = list(t.history[: max(0, len(t.history) - t.run)])
    if len(keep) < sq.MIN_WINDOWS:
        return NAN, NAN
    diffs = [b - a for a, b in itertools.pairwise(keep)]
    scale = max(_mad(keep), _mad(diffs) / math.sqrt(2.0))
    if scale <= 0:
        return scale, NAN
    med = statistics.median(keep)
    z = [min(max((v - med) / scale, -sq.CLIP), sq.CLIP) for v in keep]
    mean = sum(z) / len(z)
    z = [v - mean for v in z]
    den = sum(v * v for v in z)
    lag = sum(a * b for a, b in itertools.pairwise(z))
    return scale, (lag / den if den > 0 else NAN)


def own(*tests: sq.RankTest) -> list[tuple[float, float]]:
    got = sq._own(list(tests))
    assert got.shape == (len(tests), 2)
    return [(float(a), float(b)) for a, b in got]


def same(got: list[tuple[float, float]], want: list[tuple[float, float]]) -> None:
    assert np.allclose(np.array(got), np.array(want), rtol=1e-12, atol=0.0, equal_nan=True), (
        got,
        want,
    )


# Levels: median 0.5, deviations 0.5 (two of 1.5): MAD 1.4826 x 0.5. Differences
# 1, -1, 2, -2, 1, -1, 2: median 1, deviations 0, 2, 1, 3, 0, 2, 1: MAD 1.4826, so the
# differences set the scale, 1.4826 / sqrt 2.
ROUGH = (0.0, 1.0, 0.0, 2.0, 0.0, 1.0, 0.0, 2.0)


def test_the_differences_set_the_scale_of_a_rough_history() -> None:
    ((scale, rho),) = own(sq.RankTest(history=ROUGH))
    assert scale == pytest.approx(1.4826 / math.sqrt(2.0), rel=1e-12)
    # Deviations from the mean 0.75: den 5.5, lag-1 sum -3.5625.
    assert rho == pytest.approx(-3.5625 / 5.5, rel=1e-12)


def test_the_levels_set_the_scale_of_a_drift() -> None:
    drift = tuple(0.01 * i for i in range(10))  # differences all 0.01: MAD 0
    ((scale, rho),) = own(sq.RankTest(history=drift))
    assert scale == pytest.approx(1.4826 * 0.025, rel=1e-9)
    assert rho == pytest.approx(expected_own(sq.RankTest(history=drift))[1], rel=1e-12)
    assert rho > 0.6  # a drift is strongly autocorrelated


def test_ranks_at_different_levels_are_each_measured_around_their_own_median() -> None:
    low = sq.RankTest(history=ROUGH)
    high = sq.RankTest(history=tuple(v + 5.0 for v in ROUGH))
    far = sq.RankTest(history=tuple(3.0 * v - 40.0 for v in ROUGH))
    got = own(low, high, far)
    same(got, [expected_own(t) for t in (low, high, far)])
    assert got[0] == pytest.approx(got[1], rel=1e-12)
    assert got[2][0] == pytest.approx(3.0 * got[0][0], rel=1e-12)


def test_the_current_run_is_left_out_of_the_scale() -> None:
    in_run = sq.RankTest(history=(*ROUGH, 9.0, 9.0, 9.0), run=3)
    same(own(in_run), own(sq.RankTest(history=ROUGH)))
    # A run as long as the history leaves nothing in control.
    same(own(sq.RankTest(history=ROUGH, run=len(ROUGH) + 2)), [(NAN, NAN)])
    same(own(sq.RankTest(history=ROUGH[:-1])), [(NAN, NAN)])


@pytest.mark.parametrize("size", [50.0, 500.0])
def test_outliers_past_clip_move_the_autocorrelation_no_further(size: float) -> None:
    # One window far above and one far below: standardized, both are clipped at CLIP,
    # so their size beyond it changes nothing (the scale is robust to them too).
    base = (0.3, 1.0, 0.2, 2.0, 0.1, 1.0, 0.4, 2.0, 0.6, 1.5, 0.2)
    spiky = sq.RankTest(history=(*base[:3], size, *base[3:7], -size, *base[7:]))
    got = own(spiky)
    same(got, [expected_own(spiky)])
    same(got, own(sq.RankTest(history=(*base[:3], 20.0, *base[3:7], -20.0, *base[7:]))))


def test_a_zero_scale_gives_no_autocorrelation() -> None:
    # Most windows identical: the levels' and the differences' MADs are both 0, and
    # the off windows cannot be standardized.
    flat = sq.RankTest(history=(0.0,) * 6 + (1.0, -1.0, 1.0))
    same(own(flat), [(0.0, NAN)])


def test_a_mixed_job_gives_each_rank_its_own_row() -> None:
    tests = [
        sq.RankTest(history=ROUGH),
        sq.RankTest(history=ROUGH[:5]),
        sq.RankTest(history=tuple(0.02 * ((i * 7) % 5) - 0.3 for i in range(20)), run=4),
        sq.RankTest(history=(0.0,) * 6 + (1.0, -1.0, 1.0)),
        sq.RankTest(),
    ]
    same(own(*tests), [expected_own(t) for t in tests])


def test_without_history_the_scale_is_the_windows_censored_spread() -> None:
    # Deviations -0.2 .. 0.2 in steps of 0.1: upper quartile 0.1 above the median 0,
    # over the standard normal's 0.6745.
    scores = {r: math.exp(-0.1 * r) for r in range(5)}
    got = sq.advance({}, scores, shift=sq.shift_for(0.9))
    assert [t.scale for t in got.values()] == pytest.approx([0.1 / sq.Q75] * 5, rel=1e-9)


def test_a_rank_without_history_takes_the_peers_median_scale() -> None:
    # Ranks 0-4 each have their own scale (ROUGH times 0.01 .. 0.05), rank 5 none yet;
    # identical scores give no spread, so rank 5's scale is the median of the others'.
    tests = {
        sq.Rank(r): sq.RankTest(history=tuple(0.01 * (r + 1) * v for v in ROUGH)) for r in range(5)
    }
    got = sq.advance(tests, dict.fromkeys(range(6), 1.0), shift=sq.shift_for(0.9))
    unit = 1.4826 / math.sqrt(2.0)
    assert got[sq.Rank(5)].scale == pytest.approx(0.03 * unit, rel=1e-9)
    assert [got[sq.Rank(r)].scale for r in range(5)] == pytest.approx(
        [max(0.01 * (r + 1), 0.03) * unit for r in range(5)], rel=1e-9
    )


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 40),
    st.integers(1, 33),
    st.integers(0, 2**32 - 1),
    st.floats(0.0, 0.9),
    st.booleans(),
)
def test_the_row_median_is_numpys_nanmedian_to_the_bit(
    rows: int, cols: int, seed: int, missing: float, ties: bool
) -> None:
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(rows, cols)) * 10 ** rng.uniform(-6, 3)
    if ties:
        a = np.round(a, 1)
    a[rng.random((rows, cols)) < missing] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows
        want = np.nanmedian(a, axis=1)
    np.testing.assert_array_equal(sq._nanmedian_rows(a), want)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(st.floats(-5, 5, allow_nan=False), max_size=sq.HISTORY).map(tuple),
        min_size=1,
        max_size=12,
    ),
    st.data(),
)
def test_histories_take_their_places_in_the_arrays(
    histories: list[tuple[float, ...]], data: st.DataObject
) -> None:
    """``_own`` reads each history's in-control part from the first columns and the
    peers' record reads each from the last; both arrays fill the full histories (of
    ``HISTORY`` windows) in one conversion and the rest one by one."""
    left, right = sq._aligned(histories, right=False), sq._aligned(histories, right=True)
    for i, h in enumerate(histories):
        pad = [NAN] * (sq.HISTORY - len(h))
        np.testing.assert_array_equal(left[i], [*h, *pad])
        np.testing.assert_array_equal(right[i], [*pad, *h])
    runs = [data.draw(st.integers(0, len(h) + 2)) for h in histories]
    tests = [sq.RankTest(history=h, run=r) for h, r in zip(histories, runs, strict=True)]
    with_runs = sq._own(tests)
    kept = [
        sq.RankTest(history=h[: max(0, len(h) - r)]) for h, r in zip(histories, runs, strict=True)
    ]
    np.testing.assert_array_equal(with_runs, sq._own(kept))
