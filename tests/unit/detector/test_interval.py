"""Report interval: NVRx's phase (multiples of the count), agreed on the slowest rank,
keeps adapting unless asked not to."""

from __future__ import annotations

import pytest

from pacekeeper.detector.interval import IntervalTracker


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _run(tracker: IntervalTracker, clock: Clock, steps: list[float]) -> list[int]:
    elapsed = []
    for dt in steps:
        clock.now += dt
        tracker.iter_increase()
        if tracker.is_interval_elapsed():
            elapsed.append(tracker.current_iter)
    return elapsed


def test_first_estimate_after_sixteen_steps_then_reports_every_interval() -> None:
    clock, synced = Clock(), []

    def sync(v: float) -> float:
        synced.append(v)
        return v

    tracker = IntervalTracker(1.0, 1, sync, clock)
    elapsed = _run(tracker, clock, [0.1] * 60)
    assert synced[0] == pytest.approx(0.1) and tracker.iter_interval == 10
    # NVRx: the count is known at the 17th call; reports fall on its multiples.
    assert elapsed == [20, 30, 40, 50, 60]


def test_estimate_follows_a_job_that_slows_down() -> None:
    clock = Clock()
    tracker = IntervalTracker(1.0, 1, lambda v: v, clock)
    _run(tracker, clock, [0.1] * 27)
    assert tracker.iter_interval == 10
    elapsed = _run(tracker, clock, [0.5] * 20)
    # NVRx would keep reporting every 10 steps (5 s); we go back to ~1 s. The window
    # ending at 40 is all slow steps; the new count applies from iteration 41.
    assert tracker.iter_interval == 2
    assert elapsed[:4] == [30, 40, 42, 44]


def test_ranks_with_different_step_times_report_at_the_same_iterations() -> None:
    clocks = [Clock(), Clock()]
    step = [0.05, 0.2]
    trackers: list[IntervalTracker] = []

    def agreed(_local: float) -> float:
        # What all_reduce(MAX) returns on both ranks: the slowest step time.
        return max(step)

    trackers = [IntervalTracker(2.0, 1, agreed, c) for c in clocks]
    runs = [_run(t, c, [s] * 80) for t, c, s in zip(trackers, clocks, step, strict=True)]
    assert runs[0] == runs[1] == [20, 30, 40, 50, 60, 70, 80]


def test_failed_agreement_keeps_the_previous_interval() -> None:
    clock, answers = Clock(), [0.1, float("nan")]
    tracker = IntervalTracker(1.0, 4, lambda v: answers.pop(0) if answers else v, clock)
    elapsed = _run(tracker, clock, [0.1] * 40)
    assert tracker.iter_interval == 10
    assert elapsed[:2] == [20, 30]


def test_interval_never_below_profiling_interval() -> None:
    clock = Clock()
    tracker = IntervalTracker(0.01, 5, lambda v: v, clock)
    _run(tracker, clock, [1.0] * 20)
    assert tracker.iter_interval == 5


def test_zero_time_interval_reports_every_profiling_interval_without_agreeing() -> None:
    # NVRx: iter_interval = max(0 / step_time, profiling_interval); never below 1 here.
    for profiling, expected in ((3, 3), (1, 1), (0, 1)):
        clock, synced = Clock(), list[float]()
        tracker = IntervalTracker(0, profiling, synced.append, clock)  # type: ignore[arg-type]
        elapsed = _run(tracker, clock, [0.1] * 30)
        assert tracker.iter_interval == expected and synced == []
        assert elapsed == [i for i in range(17, 31) if i % expected == 0]


def test_fixed_interval_agrees_once_like_nvrx() -> None:
    clock, synced = Clock(), []
    tracker = IntervalTracker(1.0, 1, lambda v: synced.append(v) or v, clock, adaptive=False)
    elapsed = _run(tracker, clock, [0.1] * 30 + [0.5] * 30)
    assert len(synced) == 1 and tracker.iter_interval == 10
    assert elapsed == [20, 30, 40, 50, 60]
    assert tracker.step_times == []  # NVRx stops measuring once it has its count


def test_elapsed_is_always_current_iter_modulo_iter_interval() -> None:
    clock = Clock()
    tracker = IntervalTracker(1.0, 1, lambda v: v, clock)
    steps = [0.1] * 40 + [0.37] * 40 + [0.05] * 80
    for dt in steps:
        clock.now += dt
        tracker.iter_increase()
        iv = tracker.iter_interval
        expected = iv is not None and tracker.current_iter % iv == 0
        assert tracker.is_interval_elapsed() == expected
        if tracker.current_iter <= tracker.INTERVAL_ESTIMATION_ITERS:
            assert iv is None
        else:
            assert iv is not None
