"""The report's scores in plain Python, for windows with few entries.

``payload.score_payloads`` and ``scoring`` are vectorised for jobs of thousands of ranks
and hundreds of kernels. A report of one rank, or of a few ranks that each ran a handful
of sections and kernels (a GEMM-bound step launches four), makes dozens of numpy calls
on arrays of a few elements, and numpy's fixed cost per call (1-3 µs here, more on a
busy GPU host) was most of the report: 0.17 ms of scoring for one rank with one
section and four kernels, where these loops take a sixth of that. Same rules, same
results (``tests/unit/detector/test_few_scores.py`` compares the two on arbitrary input
with NaNs); ``score_payloads`` picks this path below ``FEW_ENTRIES`` entries.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from .reports import RankInfo
from .scoring import plain_per_work_scores, plain_weighted_mean, usable, weighted_median


class RankPayload(Protocol):
    """What is read of ``payload.RankPayload`` (named here so that module may import
    this one)."""

    @property
    def info(self) -> RankInfo: ...
    @property
    def section_ids(self) -> npt.NDArray[np.uint64]: ...
    @property
    def section_median_ns(self) -> npt.NDArray[np.float64]: ...
    @property
    def section_individual(self) -> npt.NDArray[np.float64]: ...
    @property
    def kernel_ids(self) -> npt.NDArray[np.uint64]: ...
    @property
    def kernel_median_ns(self) -> npt.NDArray[np.float64]: ...
    @property
    def kernel_total_ns(self) -> npt.NDArray[np.float64]: ...
    @property
    def gpu_individual(self) -> float: ...
    @property
    def kernel_threads(self) -> npt.NDArray[np.float64] | None: ...


FEW_ENTRIES = 96
"""Sections plus kernels over all gathered payloads below which plain loops win (on the
development machine the two cost the same at about 150 entries)."""

PerKey = dict[str, dict[int, float]]
ScoreMaps = tuple[dict[int, float], PerKey, dict[int, float], PerKey, dict[int, float]]
"""(gpu relative, section relative, gpu individual, section individual, gpu relative
median)."""


def is_few(payloads: Sequence[RankPayload]) -> bool:
    n = 0
    for p in payloads:
        n += len(p.section_ids) + len(p.kernel_ids)
        if n >= FEW_ENTRIES:
            return False
    return True


def _name(names: Mapping[int, str], key: int) -> str:
    return names.get(key) or f"<key {key:016x}>"


Entry = tuple[int, int, float]
"""(rank, key id, value) of one payload entry."""


def _entries(
    ranks: Sequence[int], ids: Iterable[list[int]], values: Iterable[list[float]]
) -> list[Entry]:
    return [
        (r, k, v)
        for r, ks, vs in zip(ranks, ids, values, strict=True)
        for k, v in zip(ks, vs, strict=True)
    ]


def _relative(entries: list[Entry], min_support: int = 1) -> list[float]:
    """Per entry, the best valid time of its key over this time (``relative_entry_scores``)."""
    best: dict[int, float] = {}
    support: dict[int, int] = {}
    for _, k, t in entries:
        if usable(t):
            b = best.get(k)
            best[k] = t if b is None or t < b else b
            support[k] = support.get(k, 0) + 1
    nan = math.nan
    return [best[k] / t if usable(t) and support[k] >= min_support else nan for _, k, t in entries]


def _per_key(
    entries: list[Entry],
    values: Sequence[float],
    names: Mapping[int, str],
    only_rank: int | None,
) -> PerKey:
    """Finite values by key name (keys in id order, as ``payload._per_key``), then rank."""
    by_key: dict[int, dict[int, float]] = {}
    for (r, k, _), v in zip(entries, values, strict=True):
        if math.isfinite(v) and (only_rank is None or r == only_rank):
            by_key.setdefault(k, {})[r] = v
    return {_name(names, k): by_key[k] for k in sorted(by_key)}


def _per_rank(
    ranks: Sequence[int], values: Sequence[float], only_rank: int | None
) -> dict[int, float]:
    return {
        r: v
        for r, v in zip(ranks, values, strict=True)
        if math.isfinite(v) and (only_rank is None or r == only_rank)
    }


def score_maps(
    payloads: Sequence[RankPayload],
    names: Mapping[int, str],
    relative: bool,
    individual: bool,
    only_rank: int | None,
) -> ScoreMaps:
    """``payload.score_payloads``'s mappings, in plain loops."""
    ranks = [p.info.rank for p in payloads]
    sec_ids = [p.section_ids.tolist() for p in payloads]
    sections = _entries(ranks, sec_ids, (p.section_median_ns.tolist() for p in payloads))
    gpu_rel: dict[int, float] = {}
    sec_rel: PerKey = {}
    gpu_ind: dict[int, float] = {}
    sec_ind: PerKey = {}
    gpu_rel_median: dict[int, float] = {}
    if relative and payloads:
        if sections:
            sec_rel = _per_key(sections, _relative(sections), names, only_rank)
        kernels = _entries(
            ranks,
            (p.kernel_ids.tolist() for p in payloads),
            (p.kernel_median_ns.tolist() for p in payloads),
        )
        if kernels:
            gpu_rel, gpu_rel_median = _gpu_relative(payloads, ranks, kernels, only_rank)
    if individual and payloads:
        gpu_ind = _per_rank(ranks, [p.gpu_individual for p in payloads], only_rank)
        if sections:
            values = _entries(ranks, sec_ids, (p.section_individual.tolist() for p in payloads))
            sec_ind = _per_key(sections, [v for _, _, v in values], names, only_rank)
    return gpu_rel, sec_rel, gpu_ind, sec_ind, gpu_rel_median


def _gpu_relative(
    payloads: Sequence[RankPayload], ranks: list[int], kernels: list[Entry], only_rank: int | None
) -> tuple[dict[int, float], dict[int, float]]:
    """Per rank, its kernels' scores weighted by their time: their mean
    (``gpu_relative_scores``) and their median (``gpu_relative_medians``). A kernel
    only one rank ran has no peer and counts only in a job of one reporting rank."""
    bounds = []
    at = 0
    for p in payloads:
        bounds.append((at, at + len(p.kernel_ids), p))
        at += len(p.kernel_ids)
    reporting = sum(1 for a, b, _ in bounds if any(usable(t) for _, _, t in kernels[a:b]))
    scores = _relative(kernels, 2 if reporting > 1 else 1)
    per_work = scores  # the median's: a bigger launch per unit of work; the mean's: time
    if any(p.kernel_threads is not None for p in payloads):
        threads = [
            n
            for p in payloads
            for n in (
                [math.nan] * len(p.kernel_ids)
                if p.kernel_threads is None
                else p.kernel_threads.tolist()
            )
        ]
        per_work = plain_per_work_scores(
            [k for _, k, _ in kernels], scores, [t for _, _, t in kernels], threads
        )
    means: list[float] = []
    medians: list[float] = []
    for a, b, p in bounds:
        totals = p.kernel_total_ns.tolist()
        means.append(plain_weighted_mean(scores[a:b], totals))
        medians.append(weighted_median(per_work[a:b], totals))
    return _per_rank(ranks, means, only_rank), _per_rank(ranks, medians, only_rank)
