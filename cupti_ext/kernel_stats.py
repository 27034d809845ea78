"""Per-key duration statistics over a window, updated in bulk, bounded in memory.

Counts, sums, minima and maxima are exact over the window. The median comes from the
last ``ring`` durations of each key (a ring buffer), so memory stays ``groups x ring``
however many kernels a window holds; with ~hundreds of launches per key per window the
ring's median is the window's typical time to within noise.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from .backend import KernelStat

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
_U16_MAX = (1 << 16) - 1


class RingStats:
    """Statistics per integer group key; not thread-safe (one owner)."""

    def __init__(self, ring: int = 256, max_groups: int | None = None) -> None:
        if ring < 1:
            raise ValueError(f"ring={ring} must be >= 1")
        self.ring = ring
        self.max_groups = max_groups
        self.refused = 0
        """Samples not kept because ``max_groups`` groups already existed."""
        self._reset_arrays(16)

    def _reset_arrays(self, capacity: int) -> None:
        self._rows: dict[int, int] = {}
        self._count: npt.NDArray[Any] = np.zeros(capacity, np.int64)
        self._sum: npt.NDArray[Any] = np.zeros(capacity, np.float64)
        self._sumsq: npt.NDArray[Any] = np.zeros(capacity, np.float64)
        self._min: npt.NDArray[Any] = np.full(capacity, np.inf)
        self._max: npt.NDArray[Any] = np.full(capacity, -np.inf)
        self._samples: npt.NDArray[Any] = np.full((capacity, self.ring), np.nan)

    def __len__(self) -> int:
        return len(self._rows)

    def _grow(self) -> None:
        old = len(self._count)
        extra = old

        def pad(a: npt.NDArray[Any], fill: float) -> npt.NDArray[Any]:
            shape = (extra, *a.shape[1:])
            return np.concatenate([a, np.full(shape, fill, dtype=a.dtype)])

        self._count = pad(self._count, 0)
        self._sum = pad(self._sum, 0.0)
        self._sumsq = pad(self._sumsq, 0.0)
        self._min = pad(self._min, np.inf)
        self._max = pad(self._max, -np.inf)
        self._samples = pad(self._samples, np.nan)

    def _row(self, group: int) -> int:
        row = self._rows.get(group)
        if row is None:
            if self.max_groups is not None and len(self._rows) >= self.max_groups:
                return -1
            row = len(self._rows)
            if row >= len(self._count):
                self._grow()
            self._rows[group] = row
        return row

    def add(self, groups: I64, durations_ns: F64, base: int = 0) -> None:
        """Add one duration per element; vectorized, Python work per distinct group.

        The group of element ``i`` is ``base + groups[i]``: callers with a common high
        part pass it as ``base`` so the sort below sees small integers.
        """
        if len(groups) == 0:
            return
        # One stable sort groups the samples and keeps each group's arrival order; on
        # 16-bit keys numpy's stable sort is a radix sort, linear in the batch.
        small = int(groups.min()) >= 0 and int(groups.max()) <= _U16_MAX
        order = np.argsort(groups.astype(np.uint16) if small else groups, kind="stable")
        sorted_groups = groups[order]
        starts = np.flatnonzero(np.r_[True, sorted_groups[1:] != sorted_groups[:-1]])
        n = np.diff(np.r_[starts, len(sorted_groups)])
        row_of = np.fromiter(
            (self._row(base + int(g)) for g in sorted_groups[starts]), np.int64, len(starts)
        )
        rows = np.repeat(row_of, n)
        dur = durations_ns[order].astype(np.float64)
        keep = rows >= 0
        if not keep.all():
            self.refused += int(np.count_nonzero(~keep))
            rows, dur = rows[keep], dur[keep]
            if len(rows) == 0:
                return
            starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
            n = np.diff(np.r_[starts, len(rows)])
        bounds = starts
        urows = rows[bounds]
        self._sum[urows] += np.add.reduceat(dur, bounds)
        self._sumsq[urows] += np.add.reduceat(dur * dur, bounds)
        self._min[urows] = np.minimum(self._min[urows], np.minimum.reduceat(dur, bounds))
        self._max[urows] = np.maximum(self._max[urows], np.maximum.reduceat(dur, bounds))
        # Position of each sample within its group; only the last `ring` ones are written,
        # so no ring slot is assigned twice in one call.
        rank = np.arange(len(rows)) - np.repeat(bounds, n)
        n_each = np.repeat(n, n)
        last = rank >= n_each - self.ring
        slot = (self._count[rows] + rank) % self.ring
        self._samples[rows[last], slot[last]] = dur[last]
        self._count[urows] += n

    def snapshot(self) -> dict[int, KernelStat]:
        """Statistics of every group seen since the last reset."""
        if not self._rows:
            return {}
        groups = list(self._rows)
        rows = np.fromiter(self._rows.values(), np.int64, len(groups))
        count = self._count[rows]
        samples = self._samples[rows]
        full = count >= self.ring
        median = np.empty(len(rows))
        if full.any():
            median[full] = np.median(samples[full], axis=1)
        part = ~full
        if part.any():
            median[part] = np.nanmedian(samples[part], axis=1)
        total = self._sum[rows]
        mean = total / count
        var = np.maximum(self._sumsq[rows] / count - mean * mean, 0.0)
        out: dict[int, KernelStat] = {}
        for i, g in enumerate(groups):
            out[g] = KernelStat(
                num=int(count[i]),
                median_ns=float(median[i]),
                mean_ns=float(mean[i]),
                min_ns=float(self._min[rows[i]]),
                max_ns=float(self._max[rows[i]]),
                std_ns=math.sqrt(float(var[i])),
                total_ns=float(total[i]),
            )
        return out

    def reset(self) -> None:
        self._reset_arrays(max(16, len(self._count)))
        self.refused = 0
