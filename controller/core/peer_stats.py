"""Peer statistics: each rank's peers' median and robust spread, and a value judged
against them (the arithmetic ``peers`` and ``host_side`` share)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pacekeeper.controller.core.rank_columns import any_given, any_true, coord_block, first_seen
from pacekeeper.controller.core.rank_table import table
from pacekeeper.detector.score_report import (
    REPLICA_DIMENSIONS,
    PeerSummary,
    RankScores,
    peer_key,
)

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

LOO_MAX_GROUP = 32
"""Groups up to this size get an exact leave-one-out reference (a rank of a group of
two is compared with the other one, not with the mean of both)."""

MAD_TO_SIGMA = 1.4826
"""Median absolute deviation to standard deviation, for normally distributed noise."""


def against(raw: F64, ref: F64, mad: F64, act: float, k: float | None) -> F64:
    """``raw / ref`` capped at 1; within ``k`` robust spreads of the reference: at least
    ``act``. NaN where either side is missing."""
    # In place where it can be: at 131,072 ranks x 10 columns each temporary is 10 MB.
    # A reference shared by every row (one peer group: ``Groups.references``) is read
    # as its one row: the same numbers, broadcast, without a full-size copy of it.
    ref, mad = shared_row(ref), shared_row(mad)
    with np.errstate(all="ignore"):
        out = np.divide(raw, np.where(ref > 0, ref, np.nan))
        np.minimum(out, 1.0, out=out)
        if k is not None:
            quiet = np.subtract(ref, raw)
            quiet = np.less(quiet, k * MAD_TO_SIGMA * mad)
            quiet &= out < act
            np.copyto(out, act, where=quiet)
    return np.asarray(out, dtype=np.float64)


def shared_row(a: F64) -> F64:
    """``a``'s first row (1 x columns) where every row is it (a broadcast view: rows
    strided 0 apart), else ``a``: elementwise work on it gives the same numbers."""
    if a.ndim == 2 and a.shape[0] > 1 and a.strides[0] == 0:
        return a[:1]
    return a


@dataclass(frozen=True, slots=True)
class Groups:
    """The listed ranks' peer groups: per group, its key and its members' indices."""

    keys: list[str]
    members: list[I64]

    @classmethod
    def of(cls, ranks: Sequence[RankScores]) -> Groups:
        """The groups of ``ranks`` (found once per decision: ``rank_table``)."""
        groups: Groups = table(ranks).derived("groups", lambda: cls._of(ranks))
        return groups

    @classmethod
    def _of(cls, ranks: Sequence[RankScores]) -> Groups:
        if not any_given(ranks, "group") and not any_true(ranks, "coords"):  # one job
            return cls([""], [np.arange(len(ranks), dtype=np.int64)])
        if not any_given(ranks, "group") and (block := coord_block(ranks)) is not None:
            return cls._of_coords(*block)
        index: dict[str, list[int]] = {}
        for i, r in enumerate(ranks):
            index.setdefault(peer_key(r), []).append(i)
        return cls(list(index), [np.asarray(v, dtype=np.int64) for v in index.values()])

    @classmethod
    def _of_coords(cls, names: list[str], values: I64) -> Groups:
        """``peer_key`` of every rank from its coordinates' columns (every rank carries
        the same names): the distinct values of the names that are not replica
        dimensions, in the order they first occur; a rank at a time cost ~0.3 s at
        131,072 ranks."""
        dims = [j for j, name in enumerate(names) if name not in REPLICA_DIMENSIONS]
        if not dims:
            return cls([""], [np.arange(len(values), dtype=np.int64)])
        sub = values[:, dims]
        code, first = first_seen(sub)
        keys = [
            ",".join(f"{names[j]}={v}" for j, v in zip(dims, sub[i].tolist(), strict=True))
            for i in first
        ]
        by_group = np.argsort(code, kind="stable").astype(np.int64)
        ends = np.cumsum(np.bincount(code, minlength=len(keys)))[:-1]
        return cls(keys, list(np.split(by_group, ends)))

    def minimum(self, values: F64) -> F64:
        """Per rank, the lowest value in its group (NaN: none)."""
        out = np.full(values.shape, np.nan)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN groups
            for idx in self.members:
                out[idx] = np.nanmin(values[idx])
        return out

    def references(
        self,
        raw: F64,
        summaries: dict[str, PeerSummary] | None = None,
        columns: Sequence[str] = (),
    ) -> tuple[F64, F64]:
        """Per rank and column, its peers' median and median absolute deviation (NaN:
        no peer). Groups of equal size are computed together. Read-only: where one
        group holds every rank (a job without groups), both are broadcast views of one
        row per column (``shared_row``)."""
        whole = self._whole(raw, summaries)
        if whole is not None:
            return whole
        ref = np.full(raw.shape, np.nan)
        mad = np.full(raw.shape, np.nan)
        by_size: dict[int, list[I64]] = {}
        for key, idx in zip(self.keys, self.members, strict=True):
            summary = (summaries or {}).get(key)
            if summary is not None:
                _from_summary(summary, columns, idx, ref, mad)
            else:
                by_size.setdefault(idx.size, []).append(idx)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices: no peer
            for size, groups in by_size.items():
                if size < 2:
                    continue
                idx = np.stack(groups)  # groups x size
                if size <= LOO_MAX_GROUP:
                    med, dev = _leave_one_out(raw[idx])
                else:
                    med, dev = _whole_group(raw[idx])
                ref[idx] = med
                mad[idx] = dev
        return ref, mad

    def _whole(self, raw: F64, summaries: dict[str, PeerSummary] | None) -> tuple[F64, F64] | None:
        """``references`` where one group, without a summary, holds every row and is
        too large for leave-one-out: its median and spread per column, computed on
        ``raw`` itself (a median is the same in any member order), broadcast to every
        row; None for any other layout. At 131,072 ranks x 10 columns the general path
        spent ~15 ms (2-core VM) filling, gathering and scattering full-size copies."""
        n = raw.shape[0]
        if len(self.members) != 1 or self.members[0].size != n or n <= LOO_MAX_GROUP:
            return None
        if (summaries or {}).get(self.keys[0]) is not None:
            return None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns: no peer
            med, dev = _whole_group(raw[None], fresh=False)
        return med[0], dev[0]


def _leave_one_out(sub: F64) -> tuple[F64, F64]:
    """``sub``: groups x members x columns; per member, the others' median and MAD."""
    m = sub.shape[1]
    others = np.array([[j for j in range(m) if j != i] for i in range(m)], dtype=np.int64)
    rest = sub[:, others, :]  # groups x members x (members - 1) x columns
    med = np.nanmedian(rest, axis=2)
    dev = np.nanmedian(np.abs(rest - med[:, :, None, :]), axis=2)
    return med, dev


def _whole_group(sub: F64, *, fresh: bool = True) -> tuple[F64, F64]:
    """``sub``: groups x members x columns; per group and column, the members' median
    and MAD, broadcast to every member. ``fresh``: ``sub`` is a temporary of the
    caller's (else it is copied before the work done in place)."""
    # Each column's members made contiguous first (groups x columns x members): numpy
    # partitions a strided axis a third slower (131,072 ranks x 10 columns of ``worst``:
    # ~30 against ~20 ms a median on the 2-core VM). The same numbers either way.
    swapped = np.swapaxes(sub, 1, 2)
    cols = np.ascontiguousarray(swapped) if fresh else np.array(swapped, order="C")
    finite = np.isfinite(cols)
    # nanmedian walks each column in Python when any value is NaN; a job whose ranks all
    # measured every score (nearly always) takes the plain median, the same numbers.
    median = np.median if finite.all() else np.nanmedian
    # ``cols`` is ours: each median partitions it in place (numpy would copy it first,
    # 10 MB at 131,072 x 10). A partition only reorders a column's members, and neither
    # the spread from the median nor its median depends on their order.
    med = median(cols, axis=2, overwrite_input=True)
    spread = np.subtract(cols, med[:, :, None], out=cols)
    dev = median(np.abs(spread, out=spread), axis=2, overwrite_input=True)
    enough = np.count_nonzero(finite, axis=2) >= 2
    med = np.where(enough, med, np.nan)
    shape = sub.shape
    return np.broadcast_to(med[:, None, :], shape), np.broadcast_to(dev[:, None, :], shape)


def _from_summary(
    summary: PeerSummary, columns: Sequence[str], idx: I64, ref: F64, mad: F64
) -> None:
    for j, key in enumerate(columns):
        spread = summary.spreads.get(key)
        if spread is not None and spread.n >= 2:
            ref[idx, j] = spread.median
            mad[idx, j] = spread.mad
