"""Per-key statistics updated in bulk match a plain per-sample computation."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pacekeeper.cupti_ext import kernel_stats
from pacekeeper.cupti_ext.kernel_stats import RingStats


def _batches(groups: int, size: int) -> st.SearchStrategy[list[list[tuple[int, float]]]]:
    """Up to four batches of (group, duration) samples."""
    batch = st.lists(st.tuples(st.integers(0, groups - 1), st.floats(1, 1e6)), max_size=size)
    return st.lists(batch, min_size=1, max_size=4)


@settings(max_examples=60, deadline=None)
@given(_batches(6, 40), st.integers(1, 8))
def test_bulk_updates_match_a_plain_loop(batches, ring):
    stats = RingStats(ring)
    seen: dict[int, list[float]] = {}
    for batch in batches:
        g = np.array([b[0] for b in batch], np.int64)
        d = np.array([b[1] for b in batch], np.float64)
        stats.add(g, d)
        for gi, di in batch:
            seen.setdefault(gi, []).append(di)
    snap = stats.snapshot()
    assert set(snap) == set(seen)
    for g, values in seen.items():
        s = snap[g]
        assert s.num == len(values)
        assert s.min_ns == min(values) and s.max_ns == max(values)
        assert np.isclose(s.total_ns, sum(values))
        assert np.isclose(s.mean_ns, np.mean(values))
        # std comes from running sums: exact to about sqrt(eps) of the magnitude.
        assert np.isclose(s.std_ns, np.std(values), rtol=1e-6, atol=1e-7 * max(values))
        assert s.median_ns == np.median(values[-ring:])


def test_group_limit_refuses_new_groups_and_counts_them():
    stats = RingStats(4, max_groups=2)
    stats.add(np.array([1, 2, 3, 3], np.int64), np.ones(4))
    assert set(stats.snapshot()) == {1, 2}
    assert stats.refused == 2


def test_reset_starts_an_empty_window():
    stats = RingStats(4)
    stats.add(np.array([1], np.int64), np.array([5.0]))
    stats.reset()
    assert stats.snapshot() == {}
    stats.add(np.array([1], np.int64), np.array([7.0]))
    assert stats.snapshot()[1].median_ns == 7.0


def test_a_group_of_a_past_window_is_not_in_the_next_one():
    stats = RingStats(4)
    stats.add(np.array([1, 2, 2], np.int64), np.array([5.0, 6.0, 8.0]))
    stats.reset()
    stats.add(np.array([2], np.int64), np.array([9.0]))
    snap = stats.snapshot()
    assert set(snap) == {2}
    assert (snap[2].num, snap[2].min_ns, snap[2].max_ns, snap[2].median_ns) == (1, 9.0, 9.0, 9.0)


def test_a_window_can_take_half_the_group_limit_whatever_came_before():
    stats = RingStats(4, max_groups=4)
    for window in ([1, 2, 3, 4], [5, 6, 7, 8], [9, 10], [11, 12], [13, 14]):
        stats.add(np.array(window, np.int64), np.ones(len(window)))
        assert set(stats.snapshot()) == set(window)
        assert stats.refused == 0, window
        stats.reset()


@settings(max_examples=80, deadline=None)
@given(_batches(31, 60), st.integers(1, 8))
def test_few_groups_read_one_by_one_as_the_vectorised_snapshot(batches, ring) -> None:  # type: ignore[no-untyped-def]
    # Windows of up to 31 groups, on both sides of FEW_GROUPS, and past windows' rows.
    stats = RingStats(ring)
    for batch in batches:
        stats.reset()
        stats.add(np.array([b[0] for b in batch], np.int64), np.array([b[1] for b in batch]))
        few, saved = stats._snapshot_few(), kernel_stats.FEW_GROUPS
        kernel_stats.FEW_GROUPS = 0
        try:
            vectorised = stats._snapshot_numpy()
        finally:
            kernel_stats.FEW_GROUPS = saved
        assert few == vectorised
