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
    for t in (50.0, 50.0, 50.0):
        b.update("k", t)
    bases = [b.update("k", 80.0) for _ in range(4)]
    assert bases == [50.0, 50.0, 80.0, 80.0]


def test_invalid_times_are_ignored_and_keys_are_bounded() -> None:
    b = RecentBest(windows=3, max_keys=2)
    assert math.isnan(b.update("a", float("nan")))
    assert b.update("a", 0.0) != b.update("a", 0.0)  # still no valid sample: NaN
    b.update("b", 1.0)
    b.update("c", 1.0)
    assert len(b) == 2 and math.isnan(b.baseline("a"))
