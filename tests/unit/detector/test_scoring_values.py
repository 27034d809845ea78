"""The scoring primitives' numbers, checked by value where the property tests compare
two paths that share a default: unsorted rows without ``rows_sorted``, a reference
computed without a caller's mask, the dtypes of an empty index, a vocabulary of one
key, the tail's quartile, and pairs of unequal length. Written against mutants the
other tests let through (docs/testing.md, "Mutation testing")."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pacekeeper.detector.scoring import (
    column_min,
    gpu_relative_scores,
    index_keys,
    plain_individual_scores,
    plain_weighted_mean,
    tail_score,
    weighted_row_mean,
)

I64 = np.int64


def test_column_min_without_a_mask_leaves_missing_entries_out() -> None:
    cols = np.array([0, 0, 1, 1, 2], dtype=I64)
    times = np.array([3.0, 2.0, math.nan, 5.0, -1.0])
    ref = column_min(cols, times, 3)
    assert ref[:2].tolist() == [2.0, 5.0]
    assert math.isnan(ref[2])


def test_weighted_row_mean_of_unsorted_rows_by_default() -> None:
    rows = np.array([1, 0, 1, 0], dtype=I64)
    values = np.array([1.0, 0.5, 0.0, 1.0])
    weights = np.array([1.0, 1.0, 3.0, 1.0])
    out = weighted_row_mean(rows, values, weights, 3)
    assert out[:2].tolist() == [0.75, 0.25]
    assert math.isnan(out[2])


def test_gpu_relative_scores_of_unsorted_rows_by_default() -> None:
    # Rank 1's kernel takes twice rank 0's; rows come interleaved.
    rows = np.array([1, 0, 1, 0], dtype=I64)
    cols = np.array([0, 0, 1, 1], dtype=I64)
    typical = np.array([2.0, 1.0, 4.0, 4.0])
    total = np.array([2.0, 1.0, 2.0, 2.0])
    out = gpu_relative_scores(rows, cols, typical, total, 2, 2)
    assert out.tolist() == [1.0, (2.0 * 0.5 + 2.0 * 1.0) / 4.0]


def test_an_empty_index_has_the_index_dtypes() -> None:
    idx = index_keys([])
    assert (idx.rows.dtype, idx.cols.dtype, idx.keys.dtype) == (np.int64, np.int64, np.uint64)
    assert idx.rows.size == idx.cols.size == idx.keys.size == 0


def test_a_vocabulary_of_one_key_maps_every_entry_to_column_zero() -> None:
    idx = index_keys([np.array([5], dtype=np.uint64), np.array([5], dtype=np.uint64)])
    assert idx.cols.tolist() == [0, 0]
    assert idx.rows.tolist() == [0, 1]
    assert idx.keys.tolist() == [5]


@pytest.mark.parametrize(
    ("times", "expected"),
    [
        ([4.0, 1.0, 3.0, 2.0], 1.0 / 3.0),  # q1 is the smallest of four
        ([5.0, 1.0, 4.0, 2.0, 3.0], 2.0 / 4.0),
        ([8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0], 2.0 / 7.0),
    ],
)
def test_tail_is_the_nearest_rank_first_quartile_over_the_second_highest(
    times: list[float], expected: float
) -> None:
    assert tail_score(times) == pytest.approx(expected, rel=1e-15)


def test_plain_scores_refuse_pairs_of_unequal_length() -> None:
    with pytest.raises(ValueError):
        plain_individual_scores([1.0], [1.0, 2.0])
    with pytest.raises(ValueError):
        plain_weighted_mean([1.0, 1.0], [1.0])
