"""What the job's relative scores are measured against, per key, in a form that composes.

Every relative score reads a rank's typical time against a reference that depends on
the other ranks only through per-key minima and small counts (``scoring``): a section's
or kernel's best valid time, how many ranks timed a kernel (a kernel only one rank ran
scores nothing while several report kernels), how many ranks report kernels at all, and
a kernel's smallest typical launch (``per_work_entry_scores``). Minima and capped counts
combine in any order, so node leaders can summarise their host's payloads, merge the
summaries up the report tree, and score their own host's ranks against the job's
references (``payload.score_payloads(refs=...)``): the same scores as one rank scoring
every payload, without any rank holding every payload (issue 42).

Pure: numpy in, numpy out. Keys are sorted and unique; a value of ``inf`` means no
valid entry (NaN never appears here, so minima need no masking).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from . import scoring
from .few_scores import RankPayload

U64 = scoring.U64
F64 = scoring.F64
I64 = scoring.I64

SUPPORT_CAP = 2
"""Counts are kept only up to this: the rules ask "one rank, or more?" and nothing else,
so a capped count is as good as the count and the summaries stay the keys' size."""


@dataclass(frozen=True, slots=True)
class References:
    section_keys: U64
    section_best: F64
    """Per section key, the best valid typical time (``inf``: none valid)."""
    kernel_keys: U64
    kernel_best: F64
    kernel_support: I64
    """Per kernel key, the ranks with a valid typical time, capped at ``SUPPORT_CAP``."""
    kernel_launch: F64
    """Per kernel key, the smallest valid typical launch (threads) among its entries with
    a valid time (``inf``: none known)."""
    reporting: int
    """Ranks with at least one valid kernel time, capped at ``SUPPORT_CAP``."""

    @classmethod
    def empty(cls) -> References:
        u, f, i = np.zeros(0, np.uint64), np.zeros(0), np.zeros(0, np.int64)
        return cls(u, f, u, f, i, f, 0)

    @property
    def kernel_min_support(self) -> int:
        """The support a kernel needs to be scored (``gpu_relative_entry_scores``)."""
        return 2 if self.reporting > 1 else 1

    def section_best_for(self, keys: U64) -> F64:
        """The best time of each of ``keys`` (NaN where unknown or none valid)."""
        return _nan_for_inf(_lookup(self.section_keys, self.section_best, keys, np.inf))

    def kernel_best_for(self, keys: U64) -> F64:
        return _nan_for_inf(_lookup(self.kernel_keys, self.kernel_best, keys, np.inf))

    def kernel_support_for(self, keys: U64) -> I64:
        return _lookup(self.kernel_keys, self.kernel_support, keys, 0).astype(np.int64)

    def kernel_launch_for(self, keys: U64) -> F64:
        """The reference launch of each of ``keys`` (``inf`` where none is known)."""
        return _lookup(self.kernel_keys, self.kernel_launch, keys, np.inf)


def _nan_for_inf(values: F64) -> F64:
    out = values.astype(np.float64, copy=True)
    out[np.isinf(out)] = np.nan
    return out


def _lookup(keys: U64, values: npt.NDArray[Any], wanted: U64, missing: float) -> npt.NDArray[Any]:
    out = np.full(wanted.shape, missing, dtype=values.dtype if values.size else np.float64)
    if keys.size == 0 or wanted.size == 0:
        return out
    pos = np.minimum(np.searchsorted(keys, wanted), keys.size - 1)
    hit = keys[pos] == wanted
    out[hit] = values[pos[hit]]
    return out


def _reduce(
    keys: U64, values: Sequence[npt.NDArray[Any]], how: Sequence[np.ufunc]
) -> tuple[Any, ...]:
    """``keys`` made unique (sorted), each of ``values`` reduced over equal keys."""
    if keys.size == 0:
        return (keys, *(v[:0] for v in values))
    order = np.argsort(keys, kind="stable")
    k = keys[order]
    starts = np.concatenate(([0], np.flatnonzero(k[1:] != k[:-1]) + 1))
    return (
        k[starts],
        *(ufunc.reduceat(v[order], starts) for v, ufunc in zip(values, how, strict=True)),
    )


def of_payloads(payloads: Sequence[RankPayload]) -> References:
    """The references of these ranks alone (one host's, or the whole job's)."""
    if not payloads:
        return References.empty()
    s_ids = np.concatenate([p.section_ids for p in payloads]).astype(np.uint64, copy=False)
    s_med = np.concatenate([p.section_median_ns for p in payloads]).astype(np.float64)
    s_ok = scoring.valid(s_med)
    k_ids = np.concatenate([p.kernel_ids for p in payloads]).astype(np.uint64, copy=False)
    k_med = np.concatenate([p.kernel_median_ns for p in payloads]).astype(np.float64)
    k_ok = scoring.valid(k_med)
    threads = np.concatenate(
        [
            np.full(len(p.kernel_ids), np.nan)
            if p.kernel_threads is None
            else np.asarray(p.kernel_threads, np.float64)
            for p in payloads
        ]
    )
    launch = np.where(scoring.valid(threads), threads, np.inf)
    reporting = sum(
        1 for p in payloads if bool(scoring.valid(np.asarray(p.kernel_median_ns)).any())
    )
    # Each valid entry is a reference of its own (one rank's), reduced per key below.
    return _reduced(
        (s_ids[s_ok], s_med[s_ok]),
        (k_ids[k_ok], k_med[k_ok], np.ones(int(k_ok.sum()), np.int64), launch[k_ok]),
        reporting,
    )


def merge(parts: Sequence[References]) -> References:
    """The references of the union of the ranks behind ``parts`` (any order, any nesting)."""
    parts = [p for p in parts if p is not None]
    if not parts:
        return References.empty()
    if len(parts) == 1:
        return parts[0]

    def joined(name: str) -> npt.NDArray[Any]:
        return np.concatenate([getattr(p, name) for p in parts])

    return _reduced(
        (joined("section_keys"), joined("section_best")),
        tuple(joined(n) for n in ("kernel_keys", "kernel_best", "kernel_support", "kernel_launch")),
        sum(p.reporting for p in parts),
    )


def _reduced(
    sections: tuple[npt.NDArray[Any], ...], kernels: tuple[npt.NDArray[Any], ...], reporting: int
) -> References:
    """References from per-key entries (keys, then values; repeats allowed): minima of
    times and launches, sums of supports, every count capped."""
    s_keys, s_best = _reduce(sections[0], sections[1:], [np.minimum])
    k_keys, k_best, k_support, k_launch = _reduce(
        kernels[0], kernels[1:], [np.minimum, np.add, np.minimum]
    )
    return References(
        s_keys,
        s_best,
        k_keys,
        k_best,
        np.minimum(k_support, SUPPORT_CAP),
        k_launch,
        min(reporting, SUPPORT_CAP),
    )
