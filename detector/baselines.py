"""Individual-score baselines: what "this rank at its own best" means, robustly.

NVRx keeps the minimum median ever seen, so one lucky window (a short step, a warm
cache, a clock hiccup) lowers the reference for the rest of the job and every later
window looks slow. Here each key remembers only its last ``windows`` typical times and
the baseline is the *second* smallest of them once three or more are known:

* one lucky window never sets the baseline on its own;
* everything expires after ``windows`` reports, so no window locks it forever;
* memory is bounded: ``max_keys`` keys x ``windows`` floats (least recently seen keys
  are evicted first).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterable

import numpy as np


class RecentBest:
    def __init__(self, windows: int = 20, max_keys: int = 4096) -> None:
        if windows < 1:
            raise ValueError(f"windows must be >= 1, got {windows}")
        self.windows = windows
        self.max_keys = max_keys
        self._hist: OrderedDict[Hashable, np.ndarray] = OrderedDict()
        self._next: dict[Hashable, int] = {}

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
        else:
            self._hist.move_to_end(key)
        if np.isfinite(typical) and typical > 0:
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
        return float(np.partition(known, 1)[1])

    def __len__(self) -> int:
        return len(self._hist)
