from __future__ import annotations

import math

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
