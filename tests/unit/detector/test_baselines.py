from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pacekeeper.detector import baselines
from pacekeeper.detector.baselines import RecentBest


def test_single_lucky_window_never_becomes_the_baseline() -> None:
    b = RecentBest(windows=10)
    for t in (100.0, 100.0, 100.0, 10.0, 100.0):
        base = b.update("k", t)
    assert base == 100.0


def test_baseline_forgets_after_its_windows() -> None:
    b = RecentBest(windows=4)
    for t in (50.0, 40.0, 50.0, 50.0):  # 40: lucky
        b.update("k", t)
    # Within tolerance of the baseline: recorded; the lucky window rolls out.
    bases = [b.update("k", 50.5) for _ in range(4)]
    assert bases == [50.0, 50.0, 50.5, 50.5]


def test_a_persistently_slow_rank_does_not_become_its_own_new_normal() -> None:
    b = RecentBest(windows=4, adapt_after=30)
    for _ in range(4):
        b.update("k", 50.0)
    bases = [b.update("k", 60.0) for _ in range(29)]
    assert set(bases) == {50.0}, "29 slow windows: still judged against the healthy level"
    assert b.update("k", 60.0) == 60.0, "30 in a row: accepted as a new regime"


def test_a_slow_spell_shorter_than_adapt_after_leaves_no_trace() -> None:
    b = RecentBest(windows=4, adapt_after=10)
    for _ in range(4):
        b.update("k", 50.0)
    for _ in range(9):
        b.update("k", 70.0)
    assert b.update("k", 50.0) == 50.0
    assert [b.update("k", 70.0) for _ in range(9)] == [50.0] * 9, "the streak starts over"


def test_invalid_times_are_ignored_and_keys_are_bounded() -> None:
    b = RecentBest(windows=3, max_keys=2)
    assert math.isnan(b.update("a", float("nan")))
    assert b.update("a", 0.0) != b.update("a", 0.0)  # still no valid sample: NaN
    b.update("b", 1.0)
    b.update("c", 1.0)
    assert len(b) == 2 and math.isnan(b.baseline("a"))


def test_two_lucky_windows_among_twenty_do_not_set_the_baseline() -> None:
    b = RecentBest(windows=20)
    for i in range(40):
        base = b.update("k", 30.0 if i in (5, 6) else 50.0)
    assert base == 50.0


class _OneKeyAtATime:
    """The plain per-key definition of RecentBest (its first version), as a reference."""

    def __init__(self, windows: int, max_keys: int, adapt_after: int) -> None:
        self.windows, self.max_keys, self.adapt_after = windows, max_keys, adapt_after
        self.hist: OrderedDict[str, np.ndarray] = OrderedDict()
        self.next: dict[str, int] = {}
        self.slow: dict[str, int] = {}

    def update(self, key: str, typical: float) -> float:
        hist = self.hist.get(key)
        if hist is None:
            hist = self.hist[key] = np.full(self.windows, np.nan)
            self.next[key] = 0
            while len(self.hist) > self.max_keys:
                old, _ = self.hist.popitem(last=False)
                self.next.pop(old, None)
                self.slow.pop(old, None)
        else:
            self.hist.move_to_end(key)
        if not (np.isfinite(typical) and typical > 0):
            return self.baseline(key)
        known = hist[np.isfinite(hist)]
        if known.size >= 3 and typical > float(np.median(known)) * 1.02:
            slow = self.slow.get(key, 0) + 1
            if slow < self.adapt_after:
                self.slow[key] = slow
                return self.baseline(key)
            hist[:] = np.nan
        self.slow[key] = 0
        hist[self.next[key] % self.windows] = typical
        self.next[key] += 1
        return self.baseline(key)

    def baseline(self, key: str) -> float:
        hist = self.hist.get(key)
        known = np.empty(0) if hist is None else hist[np.isfinite(hist)]
        if known.size == 0:
            return float("nan")
        if known.size < 3:
            return float(known.min())
        k = max(1, known.size // 4)
        return float(np.partition(known, k)[k])


_times = st.one_of(
    st.floats(1.0, 200.0),
    st.sampled_from([float("nan"), 0.0, -1.0, 100.0, 101.0, 150.0]),
)
_batches = st.lists(
    st.lists(st.tuples(st.sampled_from("abcdefgh"), _times), max_size=10), max_size=40
)


@pytest.mark.parametrize("few_keys", [0, 1000], ids=["vectorised", "plain"])
@settings(max_examples=150, deadline=None)
@given(
    batches=_batches,
    windows=st.integers(1, 6),
    max_keys=st.integers(1, 5),
    adapt_after=st.integers(1, 6),
)
def test_vectorized_updates_match_updating_one_key_at_a_time(
    few_keys, batches, windows, max_keys, adapt_after
) -> None:
    # Both paths (numpy for many keys, plain Python for few) against the reference.
    saved, baselines.FEW_KEYS = baselines.FEW_KEYS, few_keys
    try:
        _check_against_reference(batches, windows, max_keys, adapt_after)
    finally:
        baselines.FEW_KEYS = saved


def _check_against_reference(batches, windows, max_keys, adapt_after) -> None:  # type: ignore[no-untyped-def]
    fast = RecentBest(windows=windows, max_keys=max_keys, adapt_after=adapt_after)
    ref = _OneKeyAtATime(windows, max_keys, adapt_after)
    for batch in batches:
        keys = [k for k, _ in batch]
        got = fast.update_many(keys, np.array([t for _, t in batch]))
        want = [ref.update(k, t) for k, t in batch]
        np.testing.assert_array_equal(got, np.array(want))
    assert len(fast) == len(ref.hist)
    for key in "abcdefgh":
        np.testing.assert_array_equal(fast.baseline(key), ref.baseline(key))


def test_memory_grows_with_keys_held_not_keys_ever_seen() -> None:
    b = RecentBest(windows=5, max_keys=300)
    for i in range(2000):
        b.update_many([f"k{i}-{j}" for j in range(3)], np.array([1.0, 2.0, 3.0]))
    assert len(b) == 300
    assert b._hist.shape == (300, 5)  # grown by doubling up to max_keys rows, no further
