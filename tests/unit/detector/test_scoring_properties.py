"""Vectorised scoring against plain-loop references, on arbitrary inputs with NaNs."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pacekeeper.detector import scoring

TIME = st.one_of(
    st.floats(min_value=1e-3, max_value=1e9),
    st.just(float("nan")),
    st.just(0.0),
    st.just(-1.0),
    st.just(float("inf")),
)


@st.composite
def entries(draw: st.DrawFn) -> tuple[list[int], list[int], list[float], list[float], int, int]:
    """Sparse (rank, key) entries: each rank has a subset of keys (missing kernels)."""
    n_rows = draw(st.integers(1, 6))
    n_cols = draw(st.integers(1, 5))
    rows, cols, times, weights = [], [], [], []
    for r in range(n_rows):
        for c in range(n_cols):
            if draw(st.booleans()):
                rows.append(r)
                cols.append(c)
                times.append(draw(TIME))
                weights.append(draw(TIME))
    return rows, cols, times, weights, n_rows, n_cols


def _ok(t: float) -> bool:
    return math.isfinite(t) and t > 0


def _ref_relative(rows, cols, times, n_cols, min_support=1):  # type: ignore[no-untyped-def]
    best: dict[int, float] = {}
    support: dict[int, int] = {}
    for c, t in zip(cols, times, strict=True):
        if _ok(t):
            best[c] = min(best.get(c, math.inf), t)
            support[c] = support.get(c, 0) + 1
    out = []
    for c, t in zip(cols, times, strict=True):
        if _ok(t) and support.get(c, 0) >= min_support:
            out.append(best[c] / t)
        else:
            out.append(math.nan)
    return out


def _ref_weighted(rows, values, weights, n_rows):  # type: ignore[no-untyped-def]
    num = [0.0] * n_rows
    den = [0.0] * n_rows
    for r, v, w in zip(rows, values, weights, strict=True):
        if math.isfinite(v) and math.isfinite(w) and w > 0:
            num[r] += w * v
            den[r] += w
    return [num[r] / den[r] if den[r] > 0 else math.nan for r in range(n_rows)]


def _arrays(rows, cols, times, weights):  # type: ignore[no-untyped-def]
    return (
        np.array(rows, dtype=np.int64),
        np.array(cols, dtype=np.int64),
        np.array(times, dtype=np.float64),
        np.array(weights, dtype=np.float64),
    )


def _same(a: np.ndarray, b: list[float]) -> bool:
    return bool(np.allclose(a, np.array(b, dtype=np.float64), equal_nan=True, rtol=1e-12))


@settings(max_examples=200, deadline=None)
@given(entries(), st.integers(1, 3))
def test_relative_entry_scores_match_loop_reference(data, min_support) -> None:  # type: ignore[no-untyped-def]
    rows, cols, times, weights, _n_rows, n_cols = data
    r, c, t, _ = _arrays(rows, cols, times, weights)
    got = scoring.relative_entry_scores(r, c, t, n_cols, min_support=min_support)
    assert _same(got, _ref_relative(rows, cols, times, n_cols, min_support))
    finite = got[np.isfinite(got)]
    assert np.all((finite > 0) & (finite <= 1.0))


@settings(max_examples=200, deadline=None)
@given(entries())
def test_gpu_scores_match_loop_reference_and_stay_in_unit_range(data) -> None:  # type: ignore[no-untyped-def]
    rows, cols, times, weights, n_rows, n_cols = data
    r, c, t, w = _arrays(rows, cols, times, weights)
    got = scoring.gpu_relative_scores(r, c, t, w, n_rows, n_cols)
    # entries() lists rows in order, so the segment-sum path must agree too.
    segmented = scoring.gpu_relative_scores(r, c, t, w, n_rows, n_cols, rows_sorted=True)
    assert np.allclose(got, segmented, equal_nan=True, rtol=1e-12)
    reporting = {row for row, tt in zip(rows, times, strict=True) if _ok(tt)}
    per_entry = _ref_relative(rows, cols, times, n_cols, 2 if len(reporting) > 1 else 1)
    assert _same(got, _ref_weighted(rows, per_entry, weights, n_rows))
    finite = got[np.isfinite(got)]
    assert np.all((finite > 0) & (finite <= 1.0 + 1e-12))


@settings(max_examples=100, deadline=None)
@given(entries(), st.integers(0, 5))
def test_a_rank_missing_data_never_makes_the_others_nan(data, broken) -> None:  # type: ignore[no-untyped-def]
    rows, cols, times, weights, n_rows, n_cols = data
    broken_row = broken % n_rows
    # Every entry of one rank is NaN; an extra healthy rank has every key.
    times = [math.nan if r == broken_row else t for r, t in zip(rows, times, strict=True)]
    healthy = n_rows
    rows = [*rows, *([healthy] * n_cols)]
    cols = [*cols, *range(n_cols)]
    times = [*times, *([5.0] * n_cols)]
    weights = [*weights, *([1.0] * n_cols)]
    r, c, t, w = _arrays(rows, cols, times, weights)
    section = scoring.relative_entry_scores(r, c, t, n_cols)
    assert np.all(np.isfinite(section[r == healthy]))
    assert np.all(np.isnan(section[r == broken_row]))
    gpu = scoring.gpu_relative_scores(r, c, t, w, n_rows + 1, n_cols)
    reporting = {row for row, tt in zip(rows, times, strict=True) if _ok(tt)}
    if len(reporting) > 1:
        # The healthy rank has a peer on some key only if another rank reported it.
        shared = {
            cc for row, cc, tt in zip(rows, cols, times, strict=True) if row != healthy and _ok(tt)
        }
        assert math.isfinite(gpu[healthy]) == bool(shared)
    else:
        assert math.isfinite(gpu[healthy])
    assert math.isnan(gpu[broken_row])


def test_missing_kernel_on_one_rank_drops_out_of_that_reference_only() -> None:
    # Rank 1 never ran kernel 1; kernel 0 is 2x slower on rank 1.
    rows = np.array([0, 0, 1])
    cols = np.array([0, 1, 0])
    times = np.array([10.0, 30.0, 20.0])
    weights = np.array([10.0, 30.0, 20.0])
    gpu = scoring.gpu_relative_scores(rows, cols, times, weights, 2, 2)
    # Kernel 1 is seen on one rank only: no peer, left out, so rank 0 scores on kernel 0.
    assert gpu.tolist() == [1.0, 0.5]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.lists(st.integers(0, 40), unique=True, max_size=8).map(
            lambda xs: np.array(xs, dtype=np.uint64)
        ),
        max_size=6,
    )
)
def test_index_keys_maps_every_entry_to_its_id(ids_per_rank) -> None:  # type: ignore[no-untyped-def]
    idx = scoring.index_keys(ids_per_rank)
    expected_rows = [r for r, ids in enumerate(ids_per_rank) for _ in ids]
    expected_ids = [int(i) for ids in ids_per_rank for i in ids]
    assert idx.rows.tolist() == expected_rows
    assert [int(idx.keys[c]) for c in idx.cols] == expected_ids
    assert idx.keys.tolist() == sorted(set(expected_ids))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(TIME, TIME), max_size=8))
def test_individual_scores_match_loop_reference(pairs) -> None:  # type: ignore[no-untyped-def]
    typical = np.array([p[0] for p in pairs], dtype=np.float64)
    baseline = np.array([p[1] for p in pairs], dtype=np.float64)
    expected = [min(1.0, b / t) if _ok(t) and _ok(b) else math.nan for t, b in pairs]
    assert _same(scoring.individual_scores(typical, baseline), expected)
