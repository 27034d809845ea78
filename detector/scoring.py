"""Performance scores from timing arrays: pure numpy, no clock, no I/O, no torch.

A score is ``reference / typical time`` for one rank and one key (section or kernel):
1.0 means as fast as the reference, 0.5 twice as slow. Inputs are *entries*: parallel
arrays ``rows`` (rank index), ``cols`` (key index) and ``times``, so a job whose ranks
saw different keys needs no dense ``ranks x keys`` matrix.

The NaN rule, everywhere in this module: an entry whose time is NaN, infinite, zero or
negative is *missing*. A missing entry drops out of the reference of its key and gets
no score; it never changes any other rank's score, and it never makes every score NaN.
A rank whose entries are all missing gets NaN for the aggregate, which callers leave out
of reports (a score that cannot be computed is absent, not NaN).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]


def valid(times: F64) -> npt.NDArray[np.bool_]:
    """Entries usable as timings: finite and strictly positive."""
    with np.errstate(invalid="ignore"):
        return np.isfinite(times) & (times > 0)


def column_min(cols: I64, times: F64, n_cols: int, ok: npt.NDArray[np.bool_] | None = None) -> F64:
    """Per key, the smallest valid time over all entries; NaN where none is valid.
    ``ok`` is ``valid(times)`` when the caller has it already."""
    ok = valid(times) if ok is None else ok
    ref = np.full(n_cols, np.inf)
    if bool(ok.all()):
        np.minimum.at(ref, cols, times)
    else:
        np.minimum.at(ref, cols[ok], times[ok])
    ref[np.isinf(ref)] = np.nan
    return ref


def relative_entry_scores(
    rows: I64, cols: I64, times: F64, n_cols: int, *, min_support: int = 1
) -> F64:
    """Per entry, ``best valid time of its key / its time``; NaN where the entry is
    missing or its key has fewer than ``min_support`` valid entries (entries are unique
    per (rank, key), so support counts ranks)."""
    del rows  # the reference is per key over all ranks; rows kept for a uniform signature
    ok = valid(times)
    all_ok = bool(ok.all())
    ref = column_min(cols, times, n_cols, ok)
    if min_support > 1:
        support = np.bincount(cols if all_ok else cols[ok], minlength=n_cols)
        if bool((support >= min_support).all()):
            pass  # every key has peers: nothing to drop
        else:
            ok = ok & (support[cols] >= min_support)
            all_ok = False
    if all_ok:
        return ref[cols] / times
    out = np.full(times.shape, np.nan)
    out[ok] = ref[cols[ok]] / times[ok]
    return out


def _weighed_entries(rows: I64, values: F64, weights: F64) -> tuple[I64, F64, F64]:
    """The entries whose value is finite and whose weight is finite and positive."""
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(values) & np.isfinite(weights) & (weights > 0)
    if bool(ok.all()):
        return rows, values, weights
    return rows[ok], values[ok], weights[ok]


def weighted_row_mean(
    rows: I64, values: F64, weights: F64, n_rows: int, *, rows_sorted: bool = False
) -> F64:
    """Per row, ``sum(w * v) / sum(w)`` over entries whose value is finite and whose
    weight is finite and positive; NaN for a row with no such entry.

    ``rows_sorted`` (rows non-decreasing, as ``index_keys`` makes them) lets the sums run
    over contiguous segments instead of scattering.
    """
    rows, values, weights = _weighed_entries(rows, values, weights)
    out = np.full(n_rows, np.nan)
    if rows.size == 0:
        return out
    if rows_sorted:
        starts = np.concatenate(([0], np.flatnonzero(rows[1:] != rows[:-1]) + 1))
        num = np.add.reduceat(weights * values, starts)
        den = np.add.reduceat(weights, starts)
        present = rows[starts]
        has = den > 0
        out[present[has]] = num[has] / den[has]
        return out
    num = np.bincount(rows, weights=weights * values, minlength=n_rows)
    den = np.bincount(rows, weights=weights, minlength=n_rows)
    has = den > 0
    out[has] = num[has] / den[has]
    return out


def gpu_relative_scores(  # noqa: PLR0917 - the entry arrays belong together
    rows: I64,
    cols: I64,
    typical_ns: F64,
    total_ns: F64,
    n_rows: int,
    n_cols: int,
    *,
    rows_sorted: bool = False,
    threads: F64 | None = None,
) -> F64:
    """One GPU score per rank: the kernel scores weighted by each kernel's time share.

    A kernel seen on a single rank (in a job of several) has no peer to compare with and
    is left out: counting it would pull that rank towards 1.0. Communication kernels
    must be filtered out by the caller (``cupti_ext.kernel_keys.is_comm_kernel``).
    ``threads`` (each entry's typical launch threads, NaN unknown) reads a bigger
    launch per unit of work (``per_work_entry_scores``).
    """
    scores = gpu_relative_entry_scores(rows, cols, typical_ns, n_rows, n_cols)
    scores = per_work_entry_scores(cols, scores, typical_ns, threads, n_cols)
    return weighted_row_mean(rows, scores, total_ns, n_rows, rows_sorted=rows_sorted)


def gpu_relative_entry_scores(
    rows: I64, cols: I64, typical_ns: F64, n_rows: int, n_cols: int
) -> F64:
    """Per kernel entry, the score ``gpu_relative_scores`` weights: against the key's
    best time, NaN for a key only one rank ran while several report kernels."""
    ok = valid(typical_ns)
    reporting = int(np.count_nonzero(np.bincount(rows[ok], minlength=n_rows)))
    support = 2 if reporting > 1 else 1
    return relative_entry_scores(rows, cols, typical_ns, n_cols, min_support=support)


def per_work_entry_scores(
    cols: I64, scores: F64, typical_ns: F64, threads: F64 | None, n_cols: int
) -> F64:
    """Kernel entry ``scores`` read per unit of work where a key's launches differ in size.

    A data-dependent kernel that does more work is launched bigger (a GEMM's grid follows
    the token count, attention's batch x heads x sequence blocks); a slow GPU runs the
    same launch slower. Per key, the reference launch is the smallest typical thread
    count among the entries with a valid time and thread count; an entry launched bigger
    than it scores ``min(1, score x threads / reference)``: its time as if it had run the
    reference launch, against the same best time as without it. Nothing else moves: an entry
    at the reference launch, one without a thread count (NaN, an older payload) and
    every key whose launches are all the same size keep their scores bit for bit
    (``threads`` None returns ``scores`` itself). So the rescaling can only raise the
    score of a rank that launched bigger, never lower any rank's: a kernel whose time
    does not grow with its launch (a grid smaller than the GPU's SM count) reads faster
    per unit of work, never slower (docs/decision-rule.md, "Work per launch").
    NaN rule: an entry whose score is NaN stays NaN."""
    if threads is None:
        return scores
    ok = valid(threads) & valid(typical_ns)
    if not bool(ok.any()):
        return scores
    c, n = (cols, threads) if bool(ok.all()) else (cols[ok], threads[ok])
    seen = np.full(n_cols, np.nan)
    seen[c] = n  # one launch size per key, whichever entry wrote last
    if bool((n == seen[c]).all()):
        return scores  # every key's launches the same size: the common case, cheaply
    lo = np.full(n_cols, np.inf)
    np.minimum.at(lo, c, n)
    return _per_work(ok, cols, scores, threads, lo)


def _per_work(ok: npt.NDArray[np.bool_], cols: I64, scores: F64, threads: F64, lo: F64) -> F64:
    with np.errstate(invalid="ignore"):
        bigger = ok & (threads > lo[cols]) & np.isfinite(scores)
    if not bool(bigger.any()):
        return scores
    out = scores.copy()
    at = np.flatnonzero(bigger)
    out[at] = np.minimum(1.0, scores[at] * (threads[at] / lo[cols[at]]))
    return out


def entry_scores_against(
    cols: I64, times: F64, best: F64, *, support: I64 | None = None, min_support: int = 1
) -> F64:
    """Per entry, ``best[its key] / its time``: ``relative_entry_scores`` against
    references made elsewhere (``key_references``: the job's, merged up the report
    tree), per key of ``cols``; NaN where the entry is missing or its key's
    ``support`` is under ``min_support``."""
    ok = valid(times)
    if support is not None and min_support > 1:
        ok &= support[cols] >= min_support
    out = np.full(times.shape, np.nan)
    out[ok] = best[cols[ok]] / times[ok]
    return out


def per_work_against(
    cols: I64, scores: F64, typical_ns: F64, threads: F64 | None, launch: F64
) -> F64:
    """``per_work_entry_scores`` against each key's reference launch made elsewhere
    (``launch``, per key of ``cols``; ``inf`` where none is known)."""
    if threads is None:
        return scores
    ok = valid(threads) & valid(typical_ns)
    if not bool(ok.any()):
        return scores
    return _per_work(ok, cols, scores, threads, launch)


def plain_per_work_scores(
    keys: Sequence[int], scores: Sequence[float], typical: Sequence[float],
    threads: Sequence[float],
) -> list[float]:  # fmt: skip
    """``per_work_entry_scores`` over Python floats (the same results); ``keys`` name
    each entry's key."""
    lo: dict[int, float] = {}
    for k, t, n in zip(keys, typical, threads, strict=True):
        if usable(t) and usable(n):
            b = lo.get(k)
            lo[k] = n if b is None or n < b else b
    out = list(scores)
    for i, (k, t, n, s) in enumerate(zip(keys, typical, threads, scores, strict=True)):
        if usable(t) and usable(n) and n > lo[k] and math.isfinite(s):
            out[i] = min(1.0, s * (n / lo[k]))
    return out


def weighted_row_median(rows: I64, values: F64, weights: F64, n_rows: int) -> F64:
    """Per row, ``weighted_median`` of its entries (the lower weighted median over
    entries whose value is finite and weight finite and positive); NaN for a row with
    none. Each row's weights are summed in value order from zero, as ``weighted_median``
    sums them, so a tie at exactly half the weight falls the same way on both paths."""
    rows, values, weights = _weighed_entries(rows, values, weights)
    out = np.full(n_rows, np.nan)
    if rows.size == 0:
        return out
    order = np.lexsort((values, rows))  # by row, then by value within the row
    r, v = rows[order], values[order]
    counts = np.bincount(r, minlength=n_rows)
    starts = np.cumsum(counts) - counts
    pos = np.arange(r.size) - starts[r]
    # One row of the matrix per rank, zero weight past its entries: a cumulative sum
    # along each row is the plain loop's running sum, exactly.
    cum = np.zeros((n_rows, int(counts.max())))
    cum[r, pos] = weights[order]
    np.cumsum(cum, axis=1, out=cum)
    first = np.argmax(cum >= cum[:, -1:] / 2.0, axis=1)
    present = np.flatnonzero(counts)
    out[present] = v[starts[present] + first[present]]
    return out


def gpu_relative_medians(  # noqa: PLR0917 - the entry arrays belong together
    rows: I64,
    cols: I64,
    typical_ns: F64,
    total_ns: F64,
    n_rows: int,
    n_cols: int,
    *,
    threads: F64 | None = None,
) -> F64:
    """One broad GPU score per rank against its peers (``gpuRelativeMedian``): the
    kernel-time-weighted median of the per-kernel scores ``gpu_relative_scores``
    averages.

    The mean falls by the time share of the kernels whose work follows the data when a
    rank's batch is heavier (data skew), and the memory of hardware's peer check reads
    such a rank as a GPU further below its peers than any factor may be. A slow GPU
    slows every kernel: the median falls with the mean. Skew on under half the kernel
    time leaves the median on a kernel of fixed shape, at the GPU's own pace
    (docs/decision-rule.md, "Data skew against a slow GPU"). ``threads``: as
    ``gpu_relative_scores``."""
    scores = gpu_relative_entry_scores(rows, cols, typical_ns, n_rows, n_cols)
    scores = per_work_entry_scores(cols, scores, typical_ns, threads, n_cols)
    return weighted_row_median(rows, scores, total_ns, n_rows)


FEW_KEYS = 32
"""A rank's keys up to which its individual scores are plain loops (``plain_*`` below):
a window's few sections and kernels, where numpy's fixed cost per call was most of it."""


def individual_scores(typical: F64, baseline: F64) -> F64:
    """Per key, ``baseline / typical`` capped at 1.0 (a window faster than the rank's own
    reference scores 1.0, as in NVRx); NaN where either side is missing."""
    if len(typical) <= FEW_KEYS:
        plain = plain_individual_scores(typical.tolist(), baseline.tolist())
        return np.array(plain, dtype=np.float64)
    ok = valid(typical) & valid(baseline)
    out = np.full(typical.shape, np.nan)
    out[ok] = np.minimum(1.0, baseline[ok] / typical[ok])
    return out


def per_work_individual(
    scores: list[float], threads: F64 | None, baseline_threads: F64 | None
) -> list[float]:
    """Per kernel, its individual score read per unit of work where this window's launch
    was bigger than the one its baseline's windows ran (``RecentBest.update_launches``):
    ``min(1, score x threads / baseline threads)``, as ``per_work_entry_scores`` reads
    a bigger launch against peers. Every other score is kept as it is (None: all)."""
    if threads is None or baseline_threads is None:
        return scores
    out = scores
    for i, (n, b) in enumerate(zip(threads.tolist(), baseline_threads.tolist(), strict=True)):
        s = scores[i]
        if usable(n) and usable(b) and n > b and math.isfinite(s):
            if out is scores:
                out = list(scores)
            out[i] = min(1.0, s * (n / b))
    return out


def _per_work_or_none(
    typical_ns: F64, baseline_ns: F64, threads: F64 | None, baseline_threads: F64 | None
) -> list[float] | None:
    """The individual kernel scores read per unit of work; None where no kernel's launch
    was bigger than its baseline's (the caller then scores as without threads, so the
    result is the same bit for bit)."""
    if threads is None or baseline_threads is None:
        return None
    with np.errstate(invalid="ignore"):
        if not bool((threads > baseline_threads).any()):  # NaN compares False
            return None
    plain = plain_individual_scores(typical_ns.tolist(), baseline_ns.tolist())
    out = per_work_individual(plain, threads, baseline_threads)
    return None if out is plain else out


def gpu_individual_score(typical_ns: F64, baseline_ns: F64, total_ns: F64) -> float:
    """This rank's GPU score against its own baseline (NVRx's ``gpuIndividual``),
    weighted by kernel time share. Always times: what the step pays (a bigger launch is
    read per unit of work only by the median and the fast score)."""
    if len(typical_ns) <= FEW_KEYS:
        plain = plain_individual_scores(typical_ns.tolist(), baseline_ns.tolist())
        return plain_weighted_mean(plain, total_ns.tolist())
    scores = individual_scores(typical_ns, baseline_ns)
    rows = np.zeros(scores.shape, dtype=np.int64)
    return float(weighted_row_mean(rows, scores, total_ns, 1)[0])


def usable(t: float) -> bool:
    """``valid`` for one float: finite and strictly positive."""
    return t > 0 and t != math.inf  # NaN fails the first test


def plain_individual_scores(typical: Iterable[float], baseline: Iterable[float]) -> list[float]:
    """``individual_scores`` over Python floats (the same results)."""
    return [
        min(1.0, b / t) if usable(t) and usable(b) else math.nan
        for t, b in zip(typical, baseline, strict=True)
    ]


def plain_weighted_mean(values: Iterable[float], weights: Iterable[float]) -> float:
    """``weighted_row_mean`` of one row over Python floats (the same to rounding)."""
    num = den = 0.0
    for v, w in zip(values, weights, strict=True):
        if math.isfinite(v) and usable(w):
            num += w * v
            den += w
    return num / den if den > 0 else math.nan


@dataclass(frozen=True, slots=True)
class KeyIndex:
    """Entries of many ranks mapped onto one key vocabulary."""

    rows: I64
    cols: I64
    keys: U64
    """Sorted, unique key ids; ``cols`` index into it."""


def index_keys(ids_per_rank: Sequence[U64]) -> KeyIndex:
    """Map each rank's key ids (uint64, any order) onto a shared sorted vocabulary.

    Ranks of one job nearly always see the same keys, so the vocabulary is seeded from
    the rank with most keys and only ids not in it are sorted (keeps 16k ranks x 200
    kernels to one vectorised lookup).
    """
    n = len(ids_per_rank)
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return KeyIndex(empty, empty, np.zeros(0, dtype=np.uint64))
    lengths = np.fromiter((len(a) for a in ids_per_rank), dtype=np.int64, count=n)
    rows = np.repeat(np.arange(n, dtype=np.int64), lengths)
    all_ids = (
        np.concatenate(ids_per_rank).astype(np.uint64, copy=False)
        if lengths.sum()
        else np.zeros(0, dtype=np.uint64)
    )
    base = np.unique(np.asarray(ids_per_rank[int(np.argmax(lengths))], dtype=np.uint64))
    if base.size:
        pos = np.minimum(np.searchsorted(base, all_ids), base.size - 1)
        found = base[pos] == all_ids
    else:
        pos = np.zeros(all_ids.shape, dtype=np.int64)
        found = np.zeros(all_ids.shape, dtype=bool)
    if bool(found.all()):
        return KeyIndex(rows, pos.astype(np.int64), base)
    keys = np.union1d(base, all_ids[~found])
    cols = np.searchsorted(keys, all_ids).astype(np.int64)
    return KeyIndex(rows, cols, keys)


TAIL_WINDOWS = 15
"""Report windows a rank's tail statistic looks back over (``tail_score``): fifteen
minutes at the usual 60 s, two and a half periods of a burst every 6 minutes, so two
wholly slow windows are in it even when each burst straddles window boundaries."""

TAIL_MIN_WINDOWS = 4
"""Windows a key needs before its tail is scored (fewer: no tail statistic)."""


def tail_score(times: Sequence[float]) -> float:
    """A key's tail over its recent windows: ``first quartile / second-highest`` of the
    valid window times (capped at 1.0), NaN with fewer than ``TAIL_MIN_WINDOWS`` valid.
    The quartile is nearest-rank, the ``(n - 1) // 4``-th smallest: a time one window had.

    The window median hides a rank slow one window in three (throttling 2 minutes in
    6): each slow window is a typical time of its own, and a persistence rule on
    consecutive windows never sees three in a row. Over the last ``TAIL_WINDOWS``
    windows the second-highest time is a slow window whenever two of them were, so
    the score falls to ``healthy / slow``; one odd window alone (a checkpoint, a GC
    storm) is the highest and moves nothing. The first quartile of the same windows is
    the rank's own good time even when a burst touches half of them (a 2-minute burst
    out of phase with 60 s windows slows three), and a GPU that is always slower than
    its peers (same-SKU spread) scores 1.0 here: the tail says how much worse the
    rank's bad windows are than its good ones, and peers judge whether that is more
    than everyone's (heavy-tailed jitter widens every rank's tail alike)."""
    ok = sorted(t for t in times if usable(t))
    n = len(ok)
    if n < TAIL_MIN_WINDOWS:
        return math.nan
    return min(1.0, ok[(n - 1) // 4] / ok[-2])


def weighted_median(values: Iterable[float], weights: Iterable[float]) -> float:
    """The lower weighted median: the smallest value at or below which half the weight
    lies, over entries whose value is finite and whose weight is finite and positive;
    NaN without any. Always a value one entry had."""
    return weighted_quantile(values, weights, 0.5)


def weighted_quantile(values: Iterable[float], weights: Iterable[float], q: float) -> float:
    """The smallest value at or below which a share ``q`` of the weight lies, over
    entries whose value is finite and whose weight is finite and positive; NaN without
    any. Always a value one entry had."""
    pairs = sorted(
        (v, w) for v, w in zip(values, weights, strict=True) if math.isfinite(v) and usable(w)
    )
    if not pairs:
        return math.nan
    part = sum(w for _, w in pairs) * q
    acc = 0.0
    for v, w in pairs:
        acc += w
        if acc >= part:
            return v
    return pairs[-1][0]


def gpu_individual_median(
    typical_ns: F64,
    baseline_ns: F64,
    total_ns: F64,
    threads: F64 | None = None,
    baseline_threads: F64 | None = None,
) -> float:
    """This rank's broad GPU score (``gpuIndividualMedian``): the kernel-time-weighted
    median of its per-kernel scores against its own baseline.

    ``gpu_individual_score`` is their weighted *mean*, so a kernel whose work depends on
    the data (varlen attention, MoE expert GEMMs on routed tokens) pulls it down by its
    time share when the rank's batch is heavier. A slow GPU slows every kernel alike:
    the median then shows the whole slowdown, as the mean does. Data skew slows only the
    data-dependent kernels: while they are under half the kernel time, the median sits
    on a kernel of fixed shape and stays at the GPU's own speed (docs/decision-rule.md,
    "Data skew against a slow GPU"). ``threads`` and ``baseline_threads``: each kernel's
    launch threads now and in its baseline's windows, so a bigger launch reads per unit
    of work (``per_work_individual``)."""
    per_work = _per_work_or_none(typical_ns, baseline_ns, threads, baseline_threads)
    if per_work is not None:
        return weighted_median(per_work, total_ns.tolist())
    if len(typical_ns) <= FEW_KEYS:
        plain = plain_individual_scores(typical_ns.tolist(), baseline_ns.tolist())
        return weighted_median(plain, total_ns.tolist())
    scores = individual_scores(typical_ns, baseline_ns)
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(scores) & np.isfinite(total_ns) & (total_ns > 0)
    if not bool(ok.any()):
        return math.nan
    v, w = scores[ok], total_ns[ok]
    order = np.argsort(v, kind="stable")
    cum = np.cumsum(w[order])
    # The first entry at which half the weight is reached, as ``weighted_median``.
    return float(v[order][min(int(np.searchsorted(cum, cum[-1] / 2.0)), v.size - 1)])


FAST_SHARE = 0.1
"""The share of a rank's kernel time ``gpu_individual_fast`` reads: its fastest tenth."""


def gpu_individual_fast(
    typical_ns: F64,
    baseline_ns: F64,
    total_ns: F64,
    threads: F64 | None = None,
    baseline_threads: F64 | None = None,
) -> float:
    """How its fastest kernels ran against its own baseline (``gpuIndividualFast``): the
    per-kernel scores ``gpu_individual_median`` reads, at the point above which a tenth
    of the kernel time lies (the kernel-time-weighted 0.9 quantile).

    A slow GPU slows every kernel, so even the fastest tenth of the kernel time falls
    with it. Data skew leaves the kernels whose work is fixed by the model (parameter
    updates, casts of weights, fixed-shape GEMMs) at the GPU's own pace, however much of
    the kernel time the skewed kernels take: this stays at 1.0 where the median cannot,
    once those kernels are over half the time (docs/decision-rule.md, "Partial
    slowdowns"). ``threads``, ``baseline_threads``: as ``gpu_individual_median``."""
    per_work = _per_work_or_none(typical_ns, baseline_ns, threads, baseline_threads)
    if per_work is None:
        per_work = plain_individual_scores(typical_ns.tolist(), baseline_ns.tolist())
    return weighted_quantile(per_work, total_ns.tolist(), 1.0 - FAST_SHARE)
