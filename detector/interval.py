"""Report interval in iterations, kept in step across ranks (NVRx's ``ReportIntervalTracker``).

``generate_report_if_interval_elapsed`` is called once per training iteration on every
rank, so the iteration count is the one clock all ranks share. The tracker turns
``time_interval`` (seconds) into an iteration count from the measured step time, with
NVRx's attributes, estimate and phase:

* ``iter_interval`` stays None until ``INTERVAL_ESTIMATION_ITERS`` (16) step times are
  known, i.e. the 17th call; the first report then falls on the first multiple of
  ``iter_interval`` from there, as in NVRx;
* the estimate is NVRx's: ``int(time_interval / median)`` in float32, where the median
  is torch's (the lower of the two middle values of an even count, so a few slow
  warm-up steps among the 16 do not halve the count), and never below
  ``profiling_interval`` (nor below 1: ``time_interval == 0`` reports every
  ``max(1, profiling_interval)`` iterations);
* beyond NVRx (``adaptive=True``, the default): the count is estimated again at every
  report from the steps since the previous one, so a job that speeds up or slows down
  keeps reporting about every ``time_interval`` seconds. The next report falls that
  many iterations after the one just made, so a new count never shortens a gap below
  what the steps measured: every gap is the interval within a step or two, as NVRx's
  fixed count gives a job of steady speed. NVRx fixes the count once (``adaptive=False``
  here, and the default of ``ReportIntervalTracker``); reports then fall on the
  multiples of the count, exactly as NVRx's.

Each estimate is agreed through ``sync`` (MAX of the step time over the group: the
slowest rank wins, so no rank waits longer than the interval), called at the same
iteration on every rank. ``sync`` is injected: this module has no torch.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np


def _no_sync(value: float) -> float:
    return value


def lower_median(values: list[float]) -> float:
    """torch.median's median: the lower of the two middle values of an even count."""
    return sorted(values)[(len(values) - 1) // 2]


def iterations_for(time_interval: float, step_time: float, floor: int) -> int:
    """NVRx's count: ``int(max(time_interval / step_time, floor))``, divided in float32
    as torch does (so a step time of 0.1 s measured as 0.10000000000000009 still gives
    10 iterations a second, not 9)."""
    ratio = float(np.float32(time_interval) / np.float32(step_time))
    return max(floor, int(ratio))


class IntervalTracker:
    INTERVAL_ESTIMATION_ITERS = 16
    ESTIMATION_ITERS = INTERVAL_ESTIMATION_ITERS
    MAX_STEPS_KEPT = 4096
    ADAPTIVE_BY_DEFAULT = True

    def __init__(
        self,
        time_interval: float = 60.0,
        profiling_interval: int = 1,
        sync: Callable[[float], float] | None = None,
        clock: Callable[[], float] = time.monotonic,
        *,
        adaptive: bool | None = None,
    ) -> None:
        self.time_interval = time_interval
        """Target seconds between reports (NVRx's name)."""
        self.profiling_interval = profiling_interval
        self.adaptive = self.ADAPTIVE_BY_DEFAULT if adaptive is None else adaptive
        self._sync = sync if sync is not None else _no_sync
        self._clock = clock
        self.current_iter = 0
        self.iter_interval: int | None = None
        """The count in use: iterations from one report to the next."""
        self.step_time_s: float | None = None
        """Last agreed step time (seconds)."""
        self.prev_iter_start_time: float | None = None
        self.step_times: list[float] = []
        """Step times (s) since the last estimate."""
        self.next_report_iter: int | None = None
        """The iteration of the next report, once the first estimate is known."""
        self._reported_at = 0
        """The iteration of the latest report (0: none yet)."""

    @property
    def interval_s(self) -> float:
        return self.time_interval

    def iter_increase(self) -> None:
        """Count one iteration; estimate at the same iterations on every rank."""
        self.current_iter += 1
        if self.iter_interval is not None and not self.adaptive:
            # NVRx's tracker stops measuring once it has its count.
            self._advance()
            return
        now = self._clock()
        if self.prev_iter_start_time is not None and len(self.step_times) < self.MAX_STEPS_KEPT:
            self.step_times.append(now - self.prev_iter_start_time)
        self.prev_iter_start_time = now
        if self.iter_interval is None:
            if len(self.step_times) >= self.INTERVAL_ESTIMATION_ITERS:
                self._first_count(self._estimate(fallback=self.INTERVAL_ESTIMATION_ITERS))
            return
        if self._advance():
            self.iter_interval = self._estimate(fallback=self.iter_interval)
            self.next_report_iter = self.current_iter + self.iter_interval

    def _first_count(self, count: int) -> None:
        """NVRx's phase for the first report: the first multiple of the count from now."""
        self.iter_interval = count
        self.next_report_iter = -(-self.current_iter // count) * count
        self._advance()

    def _advance(self) -> bool:
        """Mark a report at this iteration when it is due; the fixed count moves the next
        one a count further (NVRx's multiples). True at a report iteration."""
        if self.next_report_iter is None or self.current_iter != self.next_report_iter:
            return False
        self._reported_at = self.current_iter
        if self.iter_interval is not None:
            self.next_report_iter = self.current_iter + self.iter_interval
        return True

    def _estimate(self, *, fallback: int) -> int:
        floor = max(1, self.profiling_interval)
        if self.time_interval == 0:
            # Every rank knows the answer without measuring: no collective.
            self.step_times.clear()
            return floor
        # 0.0, not NaN, when unknown: a NaN would win the MAX on every rank.
        local = lower_median(self.step_times) if self.step_times else 0.0
        self.step_times.clear()
        agreed = self._sync(local)
        if np.isfinite(agreed) and agreed > 0:
            self.step_time_s = agreed
            return iterations_for(self.time_interval, agreed, floor)
        return max(floor, fallback)  # failed agreement: keep what we had

    def retune(self, time_interval: float, profiling_interval: int) -> None:
        """New targets (runtime control), called at the same report on every rank. The
        count follows from the agreed step time when one is known, counted from the
        latest report; with none known (the interval was 0) the steps are measured
        again, as at the start; still estimating, the first estimate uses them."""
        self.time_interval = time_interval
        self.profiling_interval = profiling_interval
        if self.iter_interval is None:
            return
        floor = max(1, profiling_interval)
        if time_interval == 0:
            new = floor
        elif self.step_time_s:
            new = iterations_for(time_interval, self.step_time_s, floor)
        else:
            self.iter_interval = self.next_report_iter = self.prev_iter_start_time = None
            self.step_times.clear()
            return
        self.iter_interval = new
        self.next_report_iter = max(self.current_iter + 1, self._reported_at + new)

    def is_interval_elapsed(self) -> bool:
        """True iff the latest ``iter_increase`` was a report iteration."""
        return self._reported_at == self.current_iter and self._reported_at > 0


class ReportIntervalTracker(IntervalTracker):
    """NVRx's class: the count is estimated once (``adaptive=False`` unless asked), so
    reports fall on its multiples and ``is_interval_elapsed() == (current_iter %
    iter_interval == 0)``. The Detector's own tracker adapts
    (``Detector.initialize(adaptive_interval=...)``). Built alone it agrees with no
    other rank (``sync`` is the Detector's)."""

    ADAPTIVE_BY_DEFAULT = False
