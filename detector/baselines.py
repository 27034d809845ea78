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
  are evicted first);
* beside each recorded time, the launch's typical threads (``update_launches``; NaN
  when not given): a window's kernel launched bigger than the baseline's typical launch
  is read per unit of work (``scoring.per_work_individual``). The times recorded, and
  so the baseline, are the same with or without threads.
"""

from __future__ import annotations

import bisect
import math
from collections import OrderedDict
from collections.abc import Hashable, Iterable

import numpy as np

FEW_KEYS = 24
"""Keys of one update at or below which plain Python beats numpy's cost per call (the
two cost the same at about 28 keys on the development machine)."""


class RecentBest:
    """Per-key baselines as above. Every key's history is a row of one array, so a report
    updates all its keys in a few vectorized steps (a per-key Python update with a numpy
    median each cost ~15 µs per key: 3 ms of a 200-kernel report)."""

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
        if max_keys < 1:
            raise ValueError(f"max_keys must be >= 1, got {max_keys}")
        self.windows = windows
        self.max_keys = max_keys
        self.slow_tolerance = slow_tolerance
        self.adapt_after = adapt_after if adapt_after is not None else 10 * windows
        if self.adapt_after < 1:
            raise ValueError(f"adapt_after must be >= 1, got {self.adapt_after}")
        self._rows: OrderedDict[Hashable, int] = OrderedDict()  # least recently seen first
        self._allocated = 0  # rows handed out so far (the arrays may be larger)
        self._hist = np.full((0, windows), np.nan)
        self._threads = np.full((0, windows), np.nan)
        """Beside each recorded time, its launch's typical threads (NaN: unknown)."""
        self._next = np.zeros(0, np.int64)
        self._slow = np.zeros(0, np.int64)

    def update(self, key: Hashable, typical: float) -> float:
        """Record this window's typical time for ``key``; return the baseline including it.

        Invalid times (NaN, <= 0) are not recorded; the baseline (maybe NaN) is returned.
        """
        return float(self.update_many([key], np.array([typical], np.float64))[0])

    def update_many(self, keys: Iterable[Hashable], typical: np.ndarray) -> np.ndarray:
        """``update`` for each key in turn (same results), vectorized over the keys."""
        keys = list(keys)
        typical = np.asarray(typical, np.float64)
        n = len(keys)
        # A report's few distinct keys: the plain loop, no numpy call added.
        if n <= min(FEW_KEYS, self.max_keys) and n == len(typical) and len(set(keys)) == n:
            return np.array(self._update_few(keys, typical, [math.nan] * n)[1])
        return self.update_launches(keys, typical, None)[0]

    def update_launches(
        self, keys: Iterable[Hashable], typical: np.ndarray, threads: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``update_many`` with each window's typical launch ``threads`` (None or NaN:
        unknown) recorded beside its time: the baselines, and per key the threads of
        the window whose time the baseline is (NaN where unknown): the launch the
        baseline ran."""
        keys = list(keys)
        typical = np.asarray(typical, np.float64)
        if len(keys) != len(typical):
            raise ValueError(f"{len(keys)} keys but {len(typical)} typical times")
        thr = np.full(len(keys), np.nan) if threads is None else np.asarray(threads, np.float64)
        if len(thr) != len(keys):
            raise ValueError(f"{len(keys)} keys but {len(thr)} thread counts")
        if len(set(keys)) != len(keys):  # a key twice: the second sees the first
            parts = [
                self.update_launches([k], typical[i : i + 1], thr[i : i + 1])
                for i, k in enumerate(keys)
            ]
            return np.concatenate([a for a, _ in parts]), np.concatenate([b for _, b in parts])
        out = np.empty(len(keys))
        launch = np.empty(len(keys))
        # Chunks of at most max_keys: a key evicted to make room is then never one of
        # the chunk's own keys (those were all just moved to the recent end).
        for lo in range(0, len(keys), self.max_keys):
            hi = lo + self.max_keys
            chunk = keys[lo:hi]
            rows, out[lo:hi] = (
                self._update_few(chunk, typical[lo:hi], thr[lo:hi].tolist())
                if len(chunk) <= FEW_KEYS
                else self._update_unique(chunk, typical[lo:hi], thr[lo:hi])
            )
            launch[lo:hi] = (
                np.nan
                if threads is None
                else _baseline_launches(self._hist[rows], self._threads[rows])
            )
        return out, launch

    def _row(self, key: Hashable) -> int:
        row = self._rows.get(key)
        if row is not None:
            self._rows.move_to_end(key)
            return row
        if len(self._rows) >= self.max_keys:
            _, row = self._rows.popitem(last=False)  # the least recently seen key's row
        else:
            row = self._allocated
            self._allocated += 1
            if row == len(self._hist):
                self._grow()
        self._hist[row] = np.nan
        self._threads[row] = np.nan
        self._next[row] = 0
        self._slow[row] = 0
        self._rows[key] = row
        return row

    def _grow(self) -> None:
        n = len(self._next)
        extra = min(max(16, n), self.max_keys - n)  # doubling, never past max_keys rows
        self._hist = np.vstack([self._hist, np.full((extra, self.windows), np.nan)])
        self._threads = np.vstack([self._threads, np.full((extra, self.windows), np.nan)])
        self._next = np.concatenate([self._next, np.zeros(extra, np.int64)])
        self._slow = np.concatenate([self._slow, np.zeros(extra, np.int64)])

    def _update_unique(
        self, keys: list[Hashable], typical: np.ndarray, threads: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        rows = np.fromiter((self._row(k) for k in keys), np.int64, len(keys))
        valid = np.isfinite(typical) & (typical > 0)
        known, sorted_hist = _known_sorted(self._hist[rows])
        # Gate on the recorded *median*, not the baseline: lucky windows sit below the
        # median, so normal windows keep being recorded and push them out.
        gated = valid & (known >= 3)
        median = _sorted_median(sorted_hist, known)
        slow = np.zeros(len(rows), np.bool_)
        slow[gated] = typical[gated] > median[gated] * (1.0 + self.slow_tolerance)
        streak = self._slow[rows] + slow
        held_out = slow & (streak < self.adapt_after)  # a slow window is evidence
        self._slow[rows[held_out]] = streak[held_out]
        new_regime = slow & ~held_out  # slow for long enough: learn the new level afresh
        self._hist[rows[new_regime]] = np.nan
        self._threads[rows[new_regime]] = np.nan
        rec = valid & ~held_out
        r = rows[rec]
        self._slow[r] = 0
        slot = self._next[r] % self.windows
        self._hist[r, slot] = typical[rec]
        self._threads[r, slot] = threads[rec]
        self._next[r] += 1
        return rows, _baselines(*_known_sorted(self._hist[rows]))

    def _update_few(
        self, keys: list[Hashable], typical: np.ndarray, threads: list[float]
    ) -> tuple[list[int], list[float]]:
        """``_update_unique`` key by key in plain Python: the same rule and results
        (``tests/unit/detector/test_baselines.py`` compares the two)."""
        rows = [self._row(k) for k in keys]
        hist, nxt, slow_run, launches = self._hist, self._next, self._slow, self._threads
        out = []
        for row, t, n in zip(rows, typical.tolist(), threads, strict=True):
            times = hist[row].tolist()
            recorded = sorted(filter(math.isfinite, times))  # NaN: not recorded
            valid = 0 < t < math.inf
            if valid and len(recorded) >= 3 and t > _median(recorded) * (1.0 + self.slow_tolerance):
                streak = int(slow_run[row]) + 1
                if streak < self.adapt_after:  # held out: evidence of a slow rank
                    slow_run[row] = streak
                    out.append(_baseline(recorded))
                    continue
                hist[row] = np.nan  # slow for long enough: learn the new level afresh
                launches[row] = np.nan
                times, recorded = [math.nan] * self.windows, []
            if valid:
                slow_run[row] = 0
                slot = int(nxt[row]) % self.windows
                hist[row, slot] = t
                launches[row, slot] = n
                nxt[row] += 1
                replaced = times[slot]
                if math.isfinite(replaced):
                    recorded.remove(replaced)
                bisect.insort(recorded, t)
            out.append(_baseline(recorded))
        return rows, out

    def baseline(self, key: Hashable) -> float:
        row = self._rows.get(key)
        if row is None:
            return float("nan")
        return float(_baselines(*_known_sorted(self._hist[[row]]))[0])

    def __len__(self) -> int:
        return len(self._rows)


def _median(recorded: list[float]) -> float:
    """``_sorted_median`` of one row's recorded times, sorted, at least one."""
    n = len(recorded)
    mid = n // 2
    return recorded[mid] if n % 2 else (recorded[mid - 1] + recorded[mid]) / 2


def _baseline(recorded: list[float]) -> float:
    """``_baselines`` of one row's recorded times, sorted."""
    n = len(recorded)
    if n == 0:
        return math.nan
    return recorded[0 if n < 3 else max(1, n // 4)]


def _known_sorted(hist: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: how many times are recorded, and the row sorted (NaNs last)."""
    return np.isfinite(hist).sum(axis=1), np.sort(hist, axis=1)


def _sorted_median(sorted_hist: np.ndarray, known: np.ndarray) -> np.ndarray:
    """Median of each row's recorded times (NaN where none), as ``np.median`` gives it."""
    idx = np.arange(len(known))
    hi = np.minimum(known // 2, sorted_hist.shape[1] - 1)
    lo = np.maximum(hi - 1, 0)
    even = (known % 2 == 0) & (known > 0)
    out: np.ndarray = sorted_hist[idx, hi].copy()
    out[even] = (sorted_hist[idx[even], lo[even]] + sorted_hist[idx[even], hi[even]]) / 2
    out[known == 0] = np.nan
    return out


def _baselines(known: np.ndarray, sorted_hist: np.ndarray) -> np.ndarray:
    """The first quartile of each row's recorded times (at least the second smallest),
    the smallest while fewer than three are known, NaN with none: a few lucky windows
    cannot set it, and since slow windows are kept out, lucky ones must not linger."""
    idx = np.arange(len(known))
    k = np.where(known < 3, 0, np.maximum(1, known // 4))
    out: np.ndarray = sorted_hist[idx, np.minimum(k, sorted_hist.shape[1] - 1)].copy()
    out[known == 0] = np.nan
    return out


def _baseline_launches(hist: np.ndarray, threads: np.ndarray) -> np.ndarray:
    """Per row, the threads recorded beside the time ``_baselines`` picks (the same
    position in the row's sorted times; NaN with no time or no threads recorded)."""
    order = np.argsort(hist, axis=1, kind="stable")  # NaN (not recorded) sorts last
    known = np.isfinite(hist).sum(axis=1)
    k = np.where(known < 3, 0, np.maximum(1, known // 4))
    idx = np.arange(len(known))
    out: np.ndarray = threads[idx, order[idx, np.minimum(k, hist.shape[1] - 1)]].copy()
    out[known == 0] = np.nan
    return out
