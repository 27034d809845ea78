"""Report interval: NVRx's estimate and first phase, agreed on the slowest rank; keeps
adapting unless asked not to, each gap counted from the previous report."""

from __future__ import annotations

import random
from itertools import pairwise

import pytest
import torch

from pacekeeper.detector.interval import IntervalTracker, ReportIntervalTracker


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


def test_fixed_count_reports_on_its_multiples_like_nvrx() -> None:
    clock = Clock()
    tracker = ReportIntervalTracker(1.0, 1, lambda v: v, clock)
    assert tracker.adaptive is False  # NVRx's class: one estimate
    steps = [0.1] * 40 + [0.37] * 40 + [0.05] * 80
    for dt in steps:
        clock.now += dt
        tracker.iter_increase()
        iv = tracker.iter_interval
        expected = iv is not None and tracker.current_iter % iv == 0
        assert tracker.is_interval_elapsed() == expected
        assert (iv is None) == (tracker.current_iter <= tracker.INTERVAL_ESTIMATION_ITERS)


def test_estimate_is_torch_s_lower_median_truncated_like_nvrx() -> None:
    # NVRx's test_estimate: the first 8 of the 16 steps also sleep 40 ms. torch.median
    # is the lower middle (10 ms), so the count is int(0.5 / 0.0101) = 49; the mean of
    # the two middles (30 ms) would give 16 or 17, three times as many reports.
    clock = Clock()
    tracker = ReportIntervalTracker(0.5, 1, lambda v: v, clock)
    _run(tracker, clock, [0.0501] * 8 + [0.0101] * 8 + [0.0101] * 100)
    assert tracker.iter_interval == 49
    assert tracker.step_times == []


class NvrxTracker:
    """NVRx's ReportIntervalTracker as its source reads, for reference: 16 step times,
    then ``int(max(time_interval / torch.median(float32 steps), profiling_interval))``
    once; reports at the multiples of that count."""

    def __init__(self, time_interval: float) -> None:
        self.time_interval, self.current_iter = time_interval, 0
        self.iter_interval: int | None = None
        self.prev: float | None = None
        self.steps: list[float] = []

    def iter_increase(self, now: float) -> None:
        self.current_iter += 1
        if self.iter_interval is None:
            if self.prev is not None:
                self.steps.append(now - self.prev)
                if len(self.steps) == 16:
                    med = torch.median(torch.tensor(self.steps, dtype=torch.float32))
                    self.iter_interval = int(max((self.time_interval / med).item(), 1))
            self.prev = now

    def is_interval_elapsed(self) -> bool:
        iv = self.iter_interval
        return iv is not None and self.current_iter % iv == 0


def _jittery(n: int, step: float, seed: int, jitter: float = 0.05) -> list[float]:
    rng = random.Random(seed)
    return [step * (1 + rng.uniform(-jitter, jitter)) for _ in range(n)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_adaptive_cadence_matches_nvrx_on_jittery_steps(seed: int) -> None:
    # The case: 3,000 steps of 8 ms +-5%, interval 0.5 s. A count that changed
    # took effect at the next multiple of the absolute iteration, so gaps of 24 ms came.
    steps, interval = _jittery(3000, 0.008, seed), 0.5
    clock = Clock()
    ours = IntervalTracker(interval, 1, lambda v: v, clock)
    nvrx = NvrxTracker(interval)
    times: list[float] = []
    nvrx_reports = 0
    for dt in steps:
        clock.now += dt
        ours.iter_increase()
        nvrx.iter_increase(clock.now)
        nvrx_reports += nvrx.is_interval_elapsed()
        if ours.is_interval_elapsed():
            times.append(clock.now)
    gaps = [b - a for a, b in pairwise(times)]
    assert min(gaps) >= interval / 2
    # Every gap is the interval to within a few steps, as NVRx's fixed count gives.
    assert all(abs(g - interval) <= 4 * 0.008 for g in gaps), gaps
    assert abs(len(times) - nvrx_reports) <= 0.05 * nvrx_reports, (len(times), nvrx_reports)


def test_a_new_count_never_shortens_the_next_gap() -> None:
    # Step time 8.1 ms then 8.0 ms: the count goes 61 -> 62; the report after the change
    # comes 62 iterations after the previous one, not at the next multiple of 62.
    clock = Clock()
    tracker = IntervalTracker(0.5, 1, lambda v: v, clock)
    elapsed = _run(tracker, clock, [0.0081] * 130 + [0.0080] * 200)
    gaps = [b - a for a, b in pairwise(elapsed)]
    assert set(gaps) <= {61, 62} and 61 in gaps and 62 in gaps
    assert gaps == sorted(gaps)  # 61 until the window is all 8.0 ms steps, then 62


def test_retune_counts_the_new_interval_from_the_latest_report() -> None:
    clock = Clock()
    tracker = IntervalTracker(1.0, 1, lambda v: v, clock)
    elapsed = _run(tracker, clock, [0.1] * 30)
    assert elapsed == [20, 30]
    tracker.retune(0.5, 1)
    assert tracker.iter_interval == 5
    assert _run(tracker, clock, [0.1] * 20) == [35, 40, 45, 50]
