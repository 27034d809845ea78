"""Individual-score baselines: what "this rank at its own best" means, robustly.

NVRx keeps the minimum median ever seen, so one lucky window (a short step, a warm
cache, a clock hiccup) lowers the reference for the rest of the job and every later
window looks slow. Here each key remembers only its last ``windows`` typical times and
the baseline is their first quartile (at least the second smallest) once three or more
are known:

* one lucky window never sets the baseline on its own;
* everything expires after ``windows`` recorded reports, so no window locks it forever;
* a window slower than the recorded median by more than ``slow_tolerance`` is *not*
  recorded:
  a rank that turned slow must not become its own new normal after ``windows`` reports
  (the simulator caught a persistent 20% fault "recovering" after 20 windows and its
  taint being undone). Only after ``adapt_after`` slow windows in a row is the slower
  level accepted as a new regime (a changed batch size, a new phase of training);
* memory is bounded: ``max_keys`` keys x ``windows`` floats (least recently seen keys
  are evicted first).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterable

import numpy as np


class RecentBest:
    def __init__(
        self,
        windows: int = 20,
        max_keys: int = 4096,
        *,
        slow_tolerance: float = 0.02,
        adapt_after: int | None = None,
    ) -> None:
        if windows < 1:
            raise ValueError(f"windows must be >= 1, got {windows}")
        if slow_tolerance < 0:
            raise ValueError(f"slow_tolerance must be >= 0, got {slow_tolerance}")
        self.windows = windows
        self.max_keys = max_keys
        self.slow_tolerance = slow_tolerance
        self.adapt_after = adapt_after if adapt_after is not None else 10 * windows
        if self.adapt_after < 1:
            raise ValueError(f"adapt_after must be >= 1, got {self.adapt_after}")
        self._hist: OrderedDict[Hashable, np.ndarray] = OrderedDict()
        self._next: dict[Hashable, int] = {}
        self._slow: dict[Hashable, int] = {}

    def update(self, key: Hashable, typical: float) -> float:
        """Record this window's typical time for ``key``; return the baseline including it.

        Invalid times (NaN, <= 0) are not recorded; the baseline (maybe NaN) is returned.
        """
        hist = self._hist.get(key)
        if hist is None:
            hist = np.full(self.windows, np.nan)
            self._hist[key] = hist
            self._next[key] = 0
            while len(self._hist) > self.max_keys:
                old, _ = self._hist.popitem(last=False)
                self._next.pop(old, None)
                self._slow.pop(old, None)
        else:
            self._hist.move_to_end(key)
        if not (np.isfinite(typical) and typical > 0):
            return self.baseline(key)
        known = hist[np.isfinite(hist)]
        # Gate on the recorded *median*, not the baseline: lucky windows sit below the
        # median, so normal windows keep being recorded and push them out.
        if known.size >= 3 and typical > float(np.median(known)) * (1.0 + self.slow_tolerance):
            slow = self._slow.get(key, 0) + 1
            if slow < self.adapt_after:
                self._slow[key] = slow
                return self.baseline(key)  # a slow window is evidence, not a new normal
            hist[:] = np.nan  # slow for long enough: a new regime, learn it afresh
        self._slow[key] = 0
        i = self._next[key]
        hist[i % self.windows] = typical
        self._next[key] = i + 1
        return self.baseline(key)

    def update_many(self, keys: Iterable[Hashable], typical: np.ndarray) -> np.ndarray:
        return np.array([self.update(k, float(t)) for k, t in zip(keys, typical, strict=True)])

    def baseline(self, key: Hashable) -> float:
        hist = self._hist.get(key)
        if hist is None:
            return float("nan")
        known = hist[np.isfinite(hist)]
        if known.size == 0:
            return float("nan")
        if known.size < 3:
            return float(known.min())
        # The first quartile (at least the second smallest): a few lucky windows cannot
        # set it, and since slow windows are kept out, lucky ones must not linger.
        k = max(1, known.size // 4)
        return float(np.partition(known, k)[k])

    def __len__(self) -> int:
        return len(self._hist)
