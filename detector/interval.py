"""Report interval in iterations, kept in step across ranks and re-estimated at every report.

``generate_report_if_interval_elapsed`` is called once per training iteration on every
rank, so the iteration count is the one clock all ranks share. The tracker turns
``report_time_interval`` (seconds) into an iteration count from the measured step time:

* first estimate after ``ESTIMATION_ITERS`` iterations (NVRx: 16), then
* again at every report iteration, from the steps of the window just ended — NVRx fixes
  the count once, so a job that speeds up or slows down later reports too often or
  too rarely for the rest of the run.

Each estimate is agreed through ``sync`` (an all-reduce MAX of the step time over the
process group), called at the same iteration on every rank; the slowest rank's step
time wins, so no rank waits longer than the interval. ``sync`` is injected: this module
has no torch and no clock of its own beyond the injected one.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np


class IntervalTracker:
    ESTIMATION_ITERS = 16
    MAX_STEPS_KEPT = 4096

    def __init__(
        self,
        interval_s: float,
        profiling_interval: int,
        sync: Callable[[float], float],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval_s = interval_s
        self.profiling_interval = profiling_interval
        self._sync = sync
        self._clock = clock
        self.current_iter = 0
        self.iter_interval: int | None = None
        self.step_time_s: float | None = None
        """Last agreed step time (seconds)."""
        self._next_report_iter: int | None = None
        self._elapsed = False
        self._prev: float | None = None
        self._steps: list[float] = []

    def iter_increase(self) -> None:
        """Count one iteration; re-estimate when this iteration reports (same on all ranks)."""
        self.current_iter += 1
        now = self._clock()
        if self._prev is not None and len(self._steps) < self.MAX_STEPS_KEPT:
            self._steps.append(now - self._prev)
        self._prev = now
        self._elapsed = False
        if self._next_report_iter is None:
            # The first call has no step before it, so estimation needs one more call.
            if self.current_iter > self.ESTIMATION_ITERS:
                self._estimate()
            return
        if self.current_iter >= self._next_report_iter:
            self._elapsed = True
            self._estimate()

    def _estimate(self) -> None:
        # Every rank reaches this at the same iteration; clear first so a failing
        # sync still starts a fresh window.
        # 0.0, not NaN, when unknown: a NaN would win the MAX on every rank.
        local = float(np.median(self._steps)) if self._steps else 0.0
        self._steps.clear()
        agreed = self._sync(local)
        if np.isfinite(agreed) and agreed > 0:
            self.step_time_s = agreed
            self.iter_interval = max(self.profiling_interval, round(self.interval_s / agreed))
        elif self.iter_interval is None:
            self.iter_interval = max(self.profiling_interval, self.ESTIMATION_ITERS)
        self._next_report_iter = self.current_iter + self.iter_interval

    def is_interval_elapsed(self) -> bool:
        """True iff the latest ``iter_increase`` was a report iteration."""
        return self._elapsed
