"""Per-operation records of a recorded job cut into report windows: what a detector on
each rank would have summarised, as the simulator's ``WindowSummary``.

Every trace format (the straggler artifact's parquet, PyTorch profiler JSON) is read
into ``Operations``: one entry per timed operation, with the rank, the training step,
a name and a ``Role``. A window is ``steps_per_window`` consecutive recorded steps.
Per window and rank:

* a *section* is the median of its entries' durations (``detection_section`` around
  one microbatch's forward compute measures exactly that);
* a *kernel* has its median, count and total (the GPU score's weights);
* *wait* is the union of the rank's communication intervals (a send and a receive
  batched together overlap: they are counted once), as a share of the window's wall
  time — the job's step time, the slowest rank's.

Time: the recorded steps keep their place in the job. Window ``k`` ends at
``(its last step + 1) x step_s`` after the job started (``step_s``: the median step
time), so warm-up and persistence see the job's real age; its length is the time its
steps actually took.

Pure numpy; the readers do the I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntFlag

import numpy as np
import numpy.typing as npt

from pacekeeper.controller.simulation.detection import Placement
from pacekeeper.controller.simulation.models import WindowSummary

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


class Role(IntFlag):
    """What an operation's time is to the detector."""

    SECTION = 1
    """Entries of a detection section (CPU-visible time of compute)."""
    KERNEL = 2
    """GPU work, scored as kernels (communication kernels never are)."""
    WAIT = 4
    """Time spent in communication: waiting for peers or moving data."""


@dataclass(frozen=True, slots=True)
class Operations:
    """Timed operations of the recorded ranks (parallel arrays, one entry each)."""

    rank: I64
    step: I64
    name: I64
    """Index into ``names``."""
    start_s: F64
    """Start, on any clock shared by one rank's operations of one step."""
    duration_s: F64
    names: tuple[str, ...]
    roles: tuple[Role, ...]
    """Role of each name."""

    def __post_init__(self) -> None:
        n = self.rank.size
        if not all(a.size == n for a in (self.step, self.name, self.start_s, self.duration_s)):
            raise ValueError("operations: rank, step, name, start and duration differ in length")
        if len(self.roles) != len(self.names):
            raise ValueError("operations: one role per name is needed")
        if n and (self.name.min() < 0 or self.name.max() >= len(self.names)):
            raise ValueError("operations: a name index is outside the names")


@dataclass(frozen=True, slots=True)
class Topology:
    """The job's parallel sizes, fastest-varying first (Megatron's rank order is tp, cp,
    dp, pp): ``coords`` of a global rank is its mixed-radix digits."""

    sizes: tuple[tuple[str, int], ...]

    @classmethod
    def of(cls, **sizes: int) -> Topology:
        bad = [f"{k}={v}" for k, v in sizes.items() if v < 1]
        if bad:
            raise ValueError(f"topology sizes must be >= 1: {', '.join(bad)}")
        return cls(tuple(sizes.items()))

    @property
    def world_size(self) -> int:
        return int(np.prod([size for _, size in self.sizes], dtype=np.int64))

    def coords(self, rank: int) -> dict[str, int]:
        out = {}
        for name, size in self.sizes:
            out[name] = rank % size
            rank //= size
        return out


@dataclass(frozen=True, slots=True)
class TraceWindow:
    summary: WindowSummary
    placements: tuple[Placement, ...]
    """Per row: coordinates and wait share."""


@dataclass(frozen=True, slots=True)
class Trace:
    """A recorded job cut into windows, ready for ``RealScoring``."""

    rank_ids: tuple[int, ...]
    """Global rank of each row."""
    world_size: int
    step_s: float
    windows: tuple[TraceWindow, ...]


def cut(
    ops: Operations,
    *,
    steps_per_window: int,
    world_size: int | None = None,
    coords: Mapping[int, Mapping[str, int]] | None = None,
) -> Trace:
    """Cut ``ops`` into windows of ``steps_per_window`` recorded steps (the last may be
    shorter). ``coords``: parallel coordinates per global rank."""
    if steps_per_window < 1:
        raise ValueError(f"steps per window must be >= 1, got {steps_per_window}")
    if ops.rank.size == 0:
        raise ValueError("the trace holds no operations")
    ranks = np.unique(ops.rank)
    world = int(world_size if world_size is not None else ranks.max() + 1)
    if ranks.min() < 0 or ranks.max() >= world:
        raise ValueError(f"trace ranks {ranks.min()}..{ranks.max()} are outside world {world}")
    row = np.searchsorted(ranks, ops.rank)
    steps = np.unique(ops.step)
    col = np.searchsorted(steps, ops.step)
    wall = _step_walls(row, col, ops, ranks.size, steps.size)  # per step: the slowest rank
    step_s = float(np.median(wall))
    sections = [i for i, r in enumerate(ops.roles) if r & Role.SECTION]
    kernels = [i for i, r in enumerate(ops.roles) if r & Role.KERNEL]
    waits = np.array([bool(r & Role.WAIT) for r in ops.roles])[ops.name]
    windows = []
    for k, lo in enumerate(range(0, steps.size, steps_per_window)):
        chunk = np.arange(lo, min(lo + steps_per_window, steps.size))
        in_window = np.isin(col, chunk)
        window_s = float(wall[chunk].sum())
        end_s = float(steps[chunk[-1]] + 1) * step_s
        s_med, s_cnt, _ = _per_row_and_name(ops, row, in_window, sections, ranks.size)
        k_med, k_cnt, k_tot = _per_row_and_name(ops, row, in_window, kernels, ranks.size)
        waited = _waited(ops, row, col, in_window & waits, ranks.size)
        share = np.clip(waited / window_s, 0.0, 1.0) if window_s > 0 else waited * np.nan
        summary = WindowSummary(
            index=k,
            start_s=end_s - window_s,
            end_s=end_s,
            steps=int(chunk.size),
            section_names=tuple(ops.names[i] for i in sections),
            section_median_s=s_med,
            section_samples=s_cnt.sum(axis=1),
            kernel_names=tuple(ops.names[i] for i in kernels),
            kernel_median_ns=k_med * 1e9,
            kernel_count=k_cnt,
            kernel_total_ns=k_tot * 1e9,
        )
        placements = tuple(
            Placement(
                coords=(coords or {}).get(int(r)),
                wait_share=None if np.isnan(share[i]) else round(float(share[i]), 4),
            )
            for i, r in enumerate(ranks.tolist())
        )
        windows.append(TraceWindow(summary, placements))
    return Trace(tuple(int(r) for r in ranks), world, step_s, tuple(windows))


def _step_walls(row: I64, col: I64, ops: Operations, rows: int, cols: int) -> F64:
    """Per step, the longest span of any rank's operations in it (its wall time)."""
    first = np.full((rows, cols), np.inf)
    last = np.full((rows, cols), -np.inf)
    np.minimum.at(first, (row, col), ops.start_s)
    np.maximum.at(last, (row, col), ops.start_s + ops.duration_s)
    span = np.where(np.isfinite(first), last - first, 0.0)
    return np.asarray(span.max(axis=0), dtype=np.float64)


def _per_row_and_name(
    ops: Operations, row: I64, in_window: npt.NDArray[np.bool_], names: Sequence[int], rows: int
) -> tuple[F64, I64, F64]:
    """rows x names: median duration (NaN: none), count, total (0: none)."""
    med = np.full((rows, len(names)), np.nan)
    cnt = np.zeros((rows, len(names)), dtype=np.int64)
    tot = np.zeros((rows, len(names)))
    if not names:
        return med, cnt, tot
    column = np.full(len(ops.names), -1, dtype=np.int64)
    column[list(names)] = np.arange(len(names))
    pick = in_window & (column[ops.name] >= 0) & np.isfinite(ops.duration_s)
    key = row[pick] * len(names) + column[ops.name[pick]]
    dur = ops.duration_s[pick]
    if key.size == 0:
        return med, cnt, tot
    order = np.argsort(key, kind="stable")
    key, dur = key[order], dur[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    at = key[starts]
    flat_med = np.array([np.median(seg) for seg in np.split(dur, starts[1:])])
    med.reshape(-1)[at] = flat_med
    cnt.reshape(-1)[at] = np.diff(np.r_[starts, key.size])
    tot.reshape(-1)[at] = np.add.reduceat(dur, starts)
    return med, cnt, tot


def _waited(ops: Operations, row: I64, col: I64, pick: npt.NDArray[np.bool_], rows: int) -> F64:
    """Per row, the length of the union of its picked intervals, step by step."""
    out = np.zeros(rows)
    if not pick.any():
        return out
    r, c = row[pick], col[pick]
    start = ops.start_s[pick]
    end = start + np.maximum(ops.duration_s[pick], 0.0)
    order = np.lexsort((start, c, r))
    r, c, start, end = r[order], c[order], start[order], end[order]
    bounds = np.flatnonzero((r[1:] != r[:-1]) | (c[1:] != c[:-1])) + 1
    for rr, s, e in zip(
        np.split(r, bounds), np.split(start, bounds), np.split(end, bounds), strict=True
    ):
        # Covered length of sorted intervals: each adds what lies past all before it.
        reach = np.maximum.accumulate(np.r_[-np.inf, e[:-1]])
        out[rr[0]] += float(np.clip(e - np.maximum(s, reach), 0.0, None).sum())
    return out
