"""Report interval in iterations, kept in step across ranks (NVRx's ``ReportIntervalTracker``).

``generate_report_if_interval_elapsed`` is called once per training iteration on every
rank, so the iteration count is the one clock all ranks share. The tracker turns
``time_interval`` (seconds) into an iteration count from the measured step time, with
NVRx's attributes and phase:

* ``iter_interval`` stays None until ``INTERVAL_ESTIMATION_ITERS`` (16) step times are
  known, i.e. the 17th call; reports then fall on the iterations that are multiples of
  ``iter_interval`` (``current_iter % iter_interval == 0``), as in NVRx;
* ``time_interval == 0`` means every ``max(1, profiling_interval)`` iterations (NVRx's
  ``max(0 / step, profiling_interval)``, kept from dividing by zero);
* beyond NVRx (``adaptive=True``, the default): the count is estimated again at every
  report iteration from the steps of the window just ended, so a job that speeds up or
  slows down keeps reporting about every ``time_interval`` seconds. NVRx fixes the count
  once (``adaptive=False`` here). A new count takes effect from the next iteration, and
  reports stay on its multiples, so ``is_interval_elapsed()`` always equals
  ``current_iter % iter_interval == 0``.

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


class IntervalTracker:
    INTERVAL_ESTIMATION_ITERS = 16
    ESTIMATION_ITERS = INTERVAL_ESTIMATION_ITERS
    MAX_STEPS_KEPT = 4096

    def __init__(
        self,
        time_interval: float = 60.0,
        profiling_interval: int = 1,
        sync: Callable[[float], float] | None = None,
        clock: Callable[[], float] = time.monotonic,
        *,
        adaptive: bool = True,
    ) -> None:
        self.time_interval = time_interval
        """Target seconds between reports (NVRx's name)."""
        self.profiling_interval = profiling_interval
        self.adaptive = adaptive
        self._sync = sync if sync is not None else _no_sync
        self._clock = clock
        self.current_iter = 0
        self.iter_interval: int | None = None
        self.step_time_s: float | None = None
        """Last agreed step time (seconds)."""
        self.prev_iter_start_time: float | None = None
        self.step_times: list[float] = []
        """Step times (s) since the last estimate."""
        self._pending: int | None = None
        """A new count agreed at a report iteration, in effect from the next one."""

    @property
    def interval_s(self) -> float:
        return self.time_interval

    def iter_increase(self) -> None:
        """Count one iteration; estimate at the same iterations on every rank."""
        self.current_iter += 1
        if self._pending is not None:
            self.iter_interval, self._pending = self._pending, None
        if self.iter_interval is not None and not self.adaptive:
            # NVRx's tracker stops measuring once it has its count.
            return
        now = self._clock()
        if self.prev_iter_start_time is not None and len(self.step_times) < self.MAX_STEPS_KEPT:
            self.step_times.append(now - self.prev_iter_start_time)
        self.prev_iter_start_time = now
        if self.iter_interval is None:
            if len(self.step_times) >= self.INTERVAL_ESTIMATION_ITERS:
                self.iter_interval = self._estimate(fallback=self.INTERVAL_ESTIMATION_ITERS)
            return
        if self.current_iter % self.iter_interval == 0:
            new = self._estimate(fallback=self.iter_interval)
            if new != self.iter_interval:
                self._pending = new

    def _estimate(self, *, fallback: int) -> int:
        floor = max(1, self.profiling_interval)
        if self.time_interval == 0:
            # Every rank knows the answer without measuring: no collective.
            self.step_times.clear()
            return floor
        # 0.0, not NaN, when unknown: a NaN would win the MAX on every rank.
        local = float(np.median(self.step_times)) if self.step_times else 0.0
        self.step_times.clear()
        agreed = self._sync(local)
        if np.isfinite(agreed) and agreed > 0:
            self.step_time_s = agreed
            return max(floor, round(self.time_interval / agreed))
        return max(floor, fallback)  # failed agreement: keep what we had

    def retune(self, time_interval: float, profiling_interval: int) -> None:
        """New targets (runtime control), called at the same report on every rank. The
        count follows from the agreed step time when one is known, in effect from the
        next iteration; with none known (the interval was 0) the steps are measured
        again, as at the start; still estimating, the first estimate uses them."""
        self.time_interval = time_interval
        self.profiling_interval = profiling_interval
        if self.iter_interval is None:
            return
        floor = max(1, profiling_interval)
        if time_interval == 0:
            new = floor
        elif self.step_time_s:
            new = max(floor, round(time_interval / self.step_time_s))
        else:
            self.iter_interval = self._pending = self.prev_iter_start_time = None
            self.step_times.clear()
            return
        self._pending = new if new != self.iter_interval else None

    def is_interval_elapsed(self) -> bool:
        """True iff the latest ``iter_increase`` was a report iteration."""
        iv = self.iter_interval
        return iv is not None and self.current_iter % iv == 0


ReportIntervalTracker = IntervalTracker
"""NVRx's class name."""
