"""The interval tracker's numbers, checked by value: the median it takes, the count after
a failed agreement, the iteration a retune moves the next report to, and the bound on
the steps it keeps. Written against mutants that the behavioural tests let through
(docs/testing.md, "Mutation testing")."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from pacekeeper.detector.interval import IntervalTracker, lower_median


class _Clock:
    """A clock that moves ``step`` seconds per reading: every step lasts ``step``."""

    def __init__(self, step: float) -> None:
        self.t = 0.0
        self.step = step

    def __call__(self) -> float:
        self.t += self.step
        return self.t


def _tracker(
    time_interval: float,
    step: float = 0.1,
    sync: Callable[[float], float] | None = None,
    **kw: object,
) -> IntervalTracker:
    return IntervalTracker(time_interval, 1, sync, _Clock(step), **kw)  # type: ignore[arg-type]


def _run(tracker: IntervalTracker, n: int) -> list[int]:
    """``n`` iterations; the iterations that were report iterations."""
    reports = []
    for _ in range(n):
        tracker.iter_increase()
        if tracker.is_interval_elapsed():
            reports.append(tracker.current_iter)
    return reports


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([7.0], 7.0),
        ([2.0, 1.0], 1.0),
        ([3.0, 1.0, 2.0], 2.0),
        ([4.0, 1.0, 3.0, 2.0], 2.0),
        ([5.0, 1.0, 4.0, 2.0, 3.0], 3.0),
        ([6.0, 1.0, 5.0, 2.0, 4.0, 3.0], 3.0),
        ([float(v) for v in range(10, 0, -1)], 5.0),
    ],
)
def test_lower_median_is_the_lower_middle_of_the_sorted_values(
    values: list[float], expected: float
) -> None:
    assert lower_median(values) == expected


def test_defaults_are_nvrx_s_and_nothing_is_known_before_the_first_step() -> None:
    tracker = IntervalTracker()
    assert tracker.time_interval == 60.0
    assert tracker.profiling_interval == 1
    assert tracker.step_time_s is None
    assert tracker.next_report_iter is None
    assert tracker.iter_interval is None
    assert not tracker.is_interval_elapsed()  # iteration 0 is no report


@pytest.mark.parametrize("agreed", [math.nan, math.inf, 0.0, -0.1])
def test_a_failed_agreement_falls_back_to_sixteen_iterations(agreed: float) -> None:
    tracker = _tracker(10.0, sync=lambda _local: agreed)
    _run(tracker, 17)
    assert tracker.iter_interval == IntervalTracker.INTERVAL_ESTIMATION_ITERS
    assert tracker.step_time_s is None  # nothing agreed, nothing kept


def test_retune_before_the_first_report_counts_from_iteration_zero() -> None:
    tracker = _tracker(10.0)  # 0.1 s steps: 100 iterations
    assert _run(tracker, 17) == []
    assert tracker.iter_interval == 100
    tracker.retune(5.0, 1)
    assert (tracker.iter_interval, tracker.next_report_iter) == (50, 50)
    assert _run(tracker, 40) == [50]


def test_retune_to_a_count_already_passed_reports_at_the_next_iteration() -> None:
    tracker = _tracker(10.0)
    _run(tracker, 17)
    tracker.retune(0.1, 1)  # one step: the report is due at once, never in the past
    assert tracker.next_report_iter == 18
    assert _run(tracker, 3) == [18, 19, 20]


def test_retune_to_zero_seconds_reports_every_profiling_interval() -> None:
    tracker = _tracker(10.0)
    _run(tracker, 17)
    tracker.retune(0.0, 1)
    assert tracker.iter_interval == 1
    tracker.retune(1.0, 1)  # a step time is known: 1 s of 0.1 s steps
    assert tracker.iter_interval == 10


def test_retune_without_a_known_step_time_keeps_a_zero_interval_s_floor() -> None:
    tracker = _tracker(0.0)
    _run(tracker, 17)
    assert tracker.iter_interval == 1 and tracker.step_time_s is None
    tracker.retune(0.0, 2)
    assert tracker.iter_interval == 2


def test_retune_from_zero_seconds_measures_again_as_at_the_start() -> None:
    tracker = _tracker(0.0)
    _run(tracker, 17)
    tracker.retune(5.0, 1)  # no step time was ever agreed: measure again
    assert tracker.iter_interval is None
    assert tracker.next_report_iter is None
    assert tracker.prev_iter_start_time is None
    assert _run(tracker, 17) == []  # 16 steps known only at the 17th call from here
    assert tracker.iter_interval == 50
    assert tracker.next_report_iter == 50


def test_at_most_max_steps_kept_are_measured_between_reports() -> None:
    tracker = _tracker(1e6)  # no report in this test
    _run(tracker, IntervalTracker.MAX_STEPS_KEPT + 100)
    assert len(tracker.step_times) == IntervalTracker.MAX_STEPS_KEPT
