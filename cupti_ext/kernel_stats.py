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

from . import native
from .backend import KernelStat

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
_U16_MAX = (1 << 16) - 1
_ZERO = np.zeros(1, np.int64)
_DENSE_MAX = 1 << 20
"""Largest group id (after ``base``) the compiled fold maps through a dense array."""
_UNKNOWN = -2
FEW_GROUPS = 16
"""Groups up to which ``snapshot`` reads them one by one (numpy's fixed cost per call
outweighs its speed per element below this)."""
_KEEP_ROWS_MAX = 1 << 13
"""Without a ``max_groups``, rows are kept across windows up to half this many."""


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
        # Compiled fold: group - base -> row, per base (-2 unknown yet, -1 refused),
        # with the map's address.
        self._dense: dict[int, tuple[npt.NDArray[np.int64], int]] = {}
        self._count: npt.NDArray[Any] = np.zeros(capacity, np.int64)
        self._sum: npt.NDArray[Any] = np.zeros(capacity, np.float64)
        self._sumsq: npt.NDArray[Any] = np.zeros(capacity, np.float64)
        self._min: npt.NDArray[Any] = np.full(capacity, np.inf)
        self._max: npt.NDArray[Any] = np.full(capacity, -np.inf)
        self._samples: npt.NDArray[Any] = np.full((capacity, self.ring), np.nan)
        self._pointers: I64 | None = None
        self._snapshot_scratch: tuple[F64, F64, int, int] | None = None

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
        self._pointers = None

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

    def add(
        self,
        groups: I64,
        durations_ns: F64,
        base: int = 0,
        use: npt.NDArray[np.bool_] | None = None,
    ) -> None:
        """Add one duration per element (only where ``use``, if given); vectorized,
        Python work per distinct group.

        The group of element ``i`` is ``base + groups[i]``: callers with a common high
        part pass it as ``base`` so the sort below sees small integers.
        """
        lib = native.library()
        if lib is not None and self._add_native(lib, groups, durations_ns, base, use):
            return
        if use is not None:
            groups, durations_ns = groups[use], durations_ns[use]
        n_all = len(groups)
        if n_all == 0:
            return
        # One stable sort groups the samples and keeps each group's arrival order; on
        # 16-bit keys numpy's stable sort is a radix sort, linear in the batch.
        small = int(groups.min()) >= 0 and int(groups.max()) <= _U16_MAX
        order = np.argsort(groups.astype(np.uint16) if small else groups, kind="stable")
        sorted_groups = groups[order]
        change = np.flatnonzero(sorted_groups[1:] != sorted_groups[:-1]) + 1
        starts = np.concatenate((_ZERO, change))
        n = np.diff(np.concatenate((starts, (n_all,))))
        row_of = self._rows_of(sorted_groups[starts], base)
        dur = durations_ns[order].astype(np.float64, copy=False)
        if (row_of < 0).any():  # groups beyond max_groups: their samples are refused
            keep_group = row_of >= 0
            keep = np.repeat(keep_group, n)
            self.refused += int(n_all - np.count_nonzero(keep))
            dur = dur[keep]
            if len(dur) == 0:
                return
            row_of, n = row_of[keep_group], n[keep_group]
            starts = np.concatenate((_ZERO, np.cumsum(n)[:-1]))
        rows = np.repeat(row_of, n)
        self._sum[row_of] += np.add.reduceat(dur, starts)
        self._sumsq[row_of] += np.add.reduceat(dur * dur, starts)
        # Rows are distinct within a call, so plain fancy updates are exact.
        self._min[row_of] = np.minimum(self._min[row_of], np.minimum.reduceat(dur, starts))
        self._max[row_of] = np.maximum(self._max[row_of], np.maximum.reduceat(dur, starts))
        # Position of each sample within its group; only the last `ring` ones are written,
        # so no ring slot is assigned twice in one call.
        rank = np.arange(len(rows)) - np.repeat(starts, n)
        last = rank >= np.repeat(n - self.ring, n)
        slot = (self._count[rows] + rank) % self.ring
        self._samples[rows[last], slot[last]] = dur[last]
        self._count[row_of] += n

    def _add_native(
        self,
        lib: native.NativeLib,
        groups: I64,
        durations: F64,
        base: int,
        use: npt.NDArray[np.bool_] | None,
    ) -> bool:
        """The compiled fold (one pass, no sort); False where it does not apply."""
        if len(groups) == 0:
            return True
        groups = np.ascontiguousarray(groups, np.int64)
        lo, hi = int(groups.min()), int(groups.max())
        if lo < 0 or hi >= _DENSE_MAX:
            return False
        if use is not None:
            groups, durations = groups[use], durations[use]
        self.dense_map(base, hi + 1)
        self.fold_new(lib, base, groups, durations)
        return True

    # --- for the compiled window fold (window_builder) ---------------------------------

    def dense_map(self, base: int, size: int) -> tuple[I64, int]:
        """The compiled fold's map of groups ``base + g`` to rows (-2: no row yet, -1:
        refused), holding at least ``g < size``, and its address."""
        known = self._dense.get(base)
        if known is None or size > len(known[0]):
            grown = np.full(max(64, 2 * size), _UNKNOWN, np.int64)
            if known is not None:
                grown[: len(known[0])] = known[0]
            known = self._dense[base] = (grown, native.ptr(grown))
        return known

    def addresses(self) -> tuple[int, ...]:
        """Addresses of the six statistics arrays (count, sum, sumsq, min, max,
        samples); they move only when the table grows or is rebuilt."""
        return tuple(self.address_array().tolist())

    def address_array(self) -> I64:
        """``addresses()`` as an int64 array, kept alive by the table (C reads it)."""
        if self._pointers is None:
            state = (self._count, self._sum, self._sumsq, self._min, self._max, self._samples)
            self._pointers = np.array([native.ptr(a) for a in state], np.int64)
        return self._pointers

    def fold_new(self, lib: native.NativeLib, base: int, groups: I64, durations: F64) -> None:
        """Fold samples of groups that may have no row yet (``base + groups[i]``, every
        group inside its dense map): rows are given first, then one compiled fold;
        samples of groups refused a row are counted in ``refused``."""
        dense = self.dense_map(base, 0)[0]
        for g in np.unique(groups[dense[groups] < -1]).tolist():
            dense[g] = self._row(base + g)
        rows = np.ascontiguousarray(dense[groups])
        self.refused += int(np.count_nonzero(rows < 0))
        dur = np.ascontiguousarray(durations, np.float64)
        lib.lib.pk_fold(
            native.ptr(rows), native.ptr(dur), None, len(rows), self.ring, *self.addresses()
        )

    def _rows_of(self, distinct: I64, base: int) -> I64:
        """Row of each distinct group (``base + g``); -1 where the table is full."""
        return np.fromiter((self._row(base + int(g)) for g in distinct.tolist()), np.int64)

    def snapshot(self) -> dict[int, KernelStat]:
        """Statistics of every group seen since the last reset."""
        if not self._rows:
            return {}
        lib = native.library()
        if lib is not None:
            return self._snapshot_native(lib)
        return self._snapshot_numpy()

    def _snapshot_numpy(self) -> dict[int, KernelStat]:
        """``snapshot`` without the compiled library: one by one for a few groups,
        vectorised for many."""
        if not self._rows:
            return {}
        if len(self._rows) <= FEW_GROUPS:
            return self._snapshot_few()
        all_rows = np.fromiter(self._rows.values(), np.int64, len(self._rows))
        seen = self._count[all_rows] > 0  # rows are kept for groups of past windows
        groups = np.fromiter(self._rows, np.int64, len(self._rows))[seen].tolist()
        rows = all_rows[seen]
        count = self._count[rows]
        # Unwritten ring slots are NaN and sort last, so each row's samples are its
        # first min(count, ring) sorted values: one sort for all rows, no masked arrays.
        ordered = np.sort(self._samples[rows], axis=1)
        kept = np.minimum(count, self.ring)
        at = np.arange(len(rows))
        median = (ordered[at, (kept - 1) // 2] + ordered[at, kept // 2]) / 2
        total = self._sum[rows]
        mean = total / count
        std = np.sqrt(np.maximum(self._sumsq[rows] / count - mean * mean, 0.0))
        return {
            g: KernelStat(
                num=num, median_ns=med, mean_ns=avg, min_ns=lo, max_ns=hi, std_ns=sd, total_ns=tot
            )
            for g, num, med, avg, lo, hi, sd, tot in zip(
                groups,
                count.tolist(),
                median.tolist(),
                mean.tolist(),
                self._min[rows].tolist(),
                self._max[rows].tolist(),
                std.tolist(),
                total.tolist(),
                strict=True,
            )
        }

    def _snapshot_native(self, lib: native.NativeLib) -> dict[int, KernelStat]:
        """``snapshot`` in one compiled call (``pk_snapshot``, the same arithmetic):
        a report reads its window's statistics without a numpy call or a Python sort
        per group (the launch-bound window's build on the H200, 9 keys: 0.43 -> 0.38
        ms, docs/kernel-timing.md)."""
        n = len(self._rows)
        out = self._snapshot_rows(lib)
        # Rows are given in order (``_row``), so the i-th group has row i.
        return {
            g: KernelStat(
                num=int(count),
                median_ns=med,
                mean_ns=avg,
                min_ns=lo,
                max_ns=hi,
                std_ns=sd,
                total_ns=tot,
            )
            for g, (count, med, avg, lo, hi, sd, tot) in zip(
                self._rows, out[:n].tolist(), strict=True
            )
            if count > 0
        }

    def _snapshot_rows(self, lib: native.NativeLib) -> F64:
        """``pk_snapshot``'s output: one row of statistics per row of the table."""
        n = len(self._rows)
        scratch = self._snapshot_scratch
        if scratch is None or len(scratch[1]) < n:
            work, out = np.empty(self.ring), np.empty((max(n, 16), native.SNAPSHOT_FIELDS))
            scratch = self._snapshot_scratch = (work, out, native.ptr(work), native.ptr(out))
        work, out, work_ptr, out_ptr = scratch
        pointers = self.address_array()
        lib.lib.pk_snapshot(native.ptr(pointers), self.ring, n, work_ptr, out_ptr)
        return out

    def medians(self) -> dict[int, float]:
        """Each group's median since the last reset: ``snapshot``'s ``median_ns`` alone,
        without a ``KernelStat`` per group (a window's launch sizes, issue #38: a third
        of the cost of a snapshot)."""
        if not self._rows:
            return {}
        lib = native.library()
        if lib is None:
            return {g: st.median_ns for g, st in self._snapshot_numpy().items()}
        n = len(self._rows)
        out = self._snapshot_rows(lib)
        return {
            g: med
            for g, count, med in zip(
                self._rows, out[:n, 0].tolist(), out[:n, 1].tolist(), strict=True
            )
            if count > 0
        }

    def _snapshot_few(self) -> dict[int, KernelStat]:
        """``snapshot`` row by row in plain Python, for the few groups of a small window
        (a GEMM step's four kernels): the same arithmetic, without numpy's cost per
        call (``tests/unit/cupti_ext/test_kernel_stats.py`` compares the two)."""
        out = {}
        ring = self.ring
        counts = self._count.tolist()
        for g, row in self._rows.items():
            count = counts[row]
            if count <= 0:
                continue
            kept = count if count < ring else ring
            ordered = sorted(self._samples[row, :kept].tolist())
            total = float(self._sum[row])
            mean = total / count
            var = float(self._sumsq[row]) / count - mean * mean
            out[g] = KernelStat(
                num=count,
                median_ns=(ordered[(kept - 1) // 2] + ordered[kept // 2]) / 2,
                mean_ns=mean,
                min_ns=float(self._min[row]),
                max_ns=float(self._max[row]),
                std_ns=math.sqrt(var) if var > 0 else 0.0,
                total_ns=total,
            )
        return out

    def reset(self) -> None:
        """Start a new window.

        Groups keep their rows (and the compiled fold its maps and addresses) from one
        window to the next, and only the statistics are cleared: a window's first buffer
        would otherwise assign every row anew (~20 us per call on the dev machine, paid
        by every report). Groups of past windows count towards ``max_groups``, so the
        rows are dropped once they fill half of it: a window can still take at least
        half of ``max_groups`` new groups.
        """
        n = len(self._rows)
        limit = (self.max_groups if self.max_groups is not None else _KEEP_ROWS_MAX) // 2
        if n > limit or len(self._count) > 4 * max(16, n):
            self._reset_arrays(16)
        else:
            self._count[:n] = 0
            self._sum[:n] = 0.0
            self._sumsq[:n] = 0.0
            self._min[:n] = np.inf
            self._max[:n] = -np.inf
            self._samples[:n] = np.nan
        self.refused = 0
