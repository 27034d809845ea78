"""What each rank sends at report time, and how the reporting rank scores them all.

One payload per rank and report: key ids (stable 64-bit hashes of section and kernel
names, identical on every rank without a name-agreement round), typical times, kernel
time totals, and the rank's own individual scores (computed locally, from its own
history). Names travel once per id; the receiver keeps the id -> name table.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from typing import Literal

import numpy as np

from . import few_scores, scoring
from .key_references import References
from .reports import RankInfo

U64 = scoring.U64
F64 = scoring.F64

MAX_NAMES = 65536
"""Bound on the id -> name table (sections and kernels) a receiving rank keeps, and on
the set of kernel ids a sending rank remembers having named."""

NAME_REFRESH_REPORTS = 16
"""Every this many reports a rank names all its kernels again, so a receiver that lost or
trimmed its table (bounded under dynamic shapes) learns them back."""


def key_id(name: str) -> int:
    """Stable across processes and hosts (``hash()`` is salted per process)."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little")


class KeyIds:
    """Cached ``key_id`` per name, bounded (cleared when full: ids are recomputable)."""

    def __init__(self, max_names: int = 65536) -> None:
        self._ids: dict[str, int] = {}
        self._max = max_names

    def ids(self, names: Sequence[str]) -> U64:
        cache = self._ids
        if len(cache) + len(names) > self._max:
            cache.clear()
        out = np.empty(len(names), dtype=np.uint64)
        for i, n in enumerate(names):
            v = cache.get(n)
            if v is None:
                v = cache[n] = key_id(n)
            out[i] = v
        return out


@dataclass(frozen=True, slots=True)
class RankPayload:
    info: RankInfo
    section_ids: U64
    section_median_ns: F64
    section_individual: F64
    kernel_ids: U64
    kernel_median_ns: F64
    kernel_total_ns: F64
    gpu_individual: float = math.nan
    names: dict[int, str] = field(default_factory=dict)
    """Names for ids the receiver may not know yet (sections: always; kernels: new ones)."""
    kernel_threads: F64 | None = None
    """Per kernel, its launches' typical (median) threads, grid x block; NaN or None:
    unknown, and then no key of this rank is read per unit of work
    (``scoring.per_work_entry_scores``)."""

    def __setstate__(self, state: list[object]) -> None:
        # Pickled by the gather: a payload from a build without the trailing fields
        # (kernel_threads) unpickles with their defaults, so mixed builds still score.
        for f, v in zip(fields(self), state, strict=False):
            object.__setattr__(self, f.name, v)
        for f in fields(self)[len(state) :]:
            default = f.default_factory() if f.default_factory is not MISSING else f.default
            object.__setattr__(self, f.name, default)

    @classmethod
    def empty(cls, info: RankInfo) -> RankPayload:
        z64 = np.zeros(0, dtype=np.uint64)
        zf = np.zeros(0, dtype=np.float64)
        return cls(info, z64, zf, zf, z64, zf, zf)


@dataclass(frozen=True, slots=True)
class Scores:
    gpu_relative: dict[int, float]
    section_relative: dict[str, dict[int, float]]
    gpu_individual: dict[int, float]
    section_individual: dict[str, dict[int, float]]
    rank_to_node: dict[int, str]
    gpu_relative_median: dict[int, float] = field(default_factory=dict)
    """Per rank, the kernel-time-weighted median of the kernel scores ``gpu_relative``
    averages (``scoring.gpu_relative_medians``): no NVRx score, only the ScoreReport's
    ``gpuRelativeMedian``, so never NaN-filled."""

    def only(self, rank: int) -> Scores:
        """These scores of ``rank`` alone (a rank that scores only itself)."""

        def one(scores: dict[int, float]) -> dict[int, float]:
            return {rank: scores[rank]} if rank in scores else {}

        def per_section(scores: dict[str, dict[int, float]]) -> dict[str, dict[int, float]]:
            return {name: {rank: v[rank]} for name, v in scores.items() if rank in v}

        return Scores(
            one(self.gpu_relative),
            per_section(self.section_relative),
            one(self.gpu_individual),
            per_section(self.section_individual),
            {rank: self.rank_to_node[rank]} if rank in self.rank_to_node else {},
            one(self.gpu_relative_median),
        )

    def nan_filled(
        self, ranks: Sequence[int], sections: Iterable[str], *, relative: bool, individual: bool
    ) -> Scores:
        """NVRx's shape: each computed kind lists every rank of ``ranks`` (and, for
        sections, every name of ``sections``), NaN where no score could be computed."""
        nan = math.nan
        names = list(sections)
        n = len(ranks)

        def gpu(scores: dict[int, float]) -> dict[int, float]:
            # Scores only ever name ranks of ``ranks``: a full mapping is kept as it is
            # (a healthy window costs a length check per mapping).
            return scores if len(scores) == n else {r: scores.get(r, nan) for r in ranks}

        def per_section(scores: dict[str, dict[int, float]]) -> dict[str, dict[int, float]]:
            out = {name: gpu(scores.get(name, {})) for name in names}
            for name, per_rank in scores.items():  # a name beyond the caller's bound
                out.setdefault(name, per_rank)
            return out

        return Scores(
            gpu(self.gpu_relative) if relative else self.gpu_relative,
            per_section(self.section_relative) if relative else self.section_relative,
            gpu(self.gpu_individual) if individual else self.gpu_individual,
            per_section(self.section_individual) if individual else self.section_individual,
            self.rank_to_node,
            self.gpu_relative_median,
        )


def _name(names: Mapping[int, str], key: int) -> str:
    return names.get(key) or f"<key {key:016x}>"


def _per_key(  # noqa: PLR0917
    ranks: np.ndarray,
    rows: np.ndarray,
    cols: np.ndarray,
    values: np.ndarray,
    keys: U64,
    names: Mapping[int, str],
    only_rank: int | None,
) -> dict[str, dict[int, float]]:
    ok = np.isfinite(values)
    if only_rank is not None:
        ok &= ranks[rows] == only_rank
    rows, cols, values = rows[ok], cols[ok], values[ok]
    order = np.argsort(cols, kind="stable")
    rows, cols, values = rows[order], cols[order], values[order]
    bounds = np.flatnonzero(np.diff(cols)) + 1
    out: dict[str, dict[int, float]] = {}
    for r, c, v in zip(
        np.split(rows, bounds), np.split(cols, bounds), np.split(values, bounds), strict=True
    ):
        if c.size:
            out[_name(names, int(keys[c[0]]))] = dict(
                zip(ranks[r].tolist(), v.tolist(), strict=True)
            )
    return out


def _per_rank(ranks: np.ndarray, values: np.ndarray, only_rank: int | None) -> dict[int, float]:
    ok = np.isfinite(values)
    if only_rank is not None:
        ok &= ranks == only_rank
    return dict(zip(ranks[ok].tolist(), values[ok].tolist(), strict=True))


def _rank_to_node(payloads: Sequence[RankPayload], only_rank: int | None) -> dict[int, str]:
    rank_to_node = {p.info.rank: p.info.node for p in payloads}
    if only_rank is None:
        return rank_to_node
    return {only_rank: rank_to_node[only_rank]} if only_rank in rank_to_node else {}


def score_payloads(
    payloads: Sequence[RankPayload],
    names: Mapping[int, str],
    *,
    relative: bool,
    individual: bool,
    only_rank: int | None = None,
    path: Literal["auto", "few", "vectorised"] = "auto",
    refs: References | None = None,
) -> Scores:
    """Scores of all ranks (or only ``only_rank``'s) from the gathered payloads.

    NaN rule (see ``scoring``): missing data drops out of references; a score that cannot
    be computed is left out of the mappings. A window of few entries is scored in plain
    Python (``few_scores``: the same results without numpy's cost per call); ``path``
    forces one of the two (the tests compare them). ``refs``: the relative scores'
    references made elsewhere (``key_references``: a node leader scores its host's
    ranks against the whole job's), always on the vectorised path; None: these
    payloads' own.
    """
    if refs is not None:
        maps = _vectorised_maps(payloads, names, relative, individual, only_rank, refs=refs)
    else:
        few = few_scores.is_few(payloads) if path == "auto" else path == "few"
        score = few_scores.score_maps if few else _vectorised_maps
        maps = score(payloads, names, relative, individual, only_rank)
    gpu_rel, sec_rel, gpu_ind, sec_ind, gpu_rel_median = maps
    return Scores(
        gpu_rel, sec_rel, gpu_ind, sec_ind, _rank_to_node(payloads, only_rank), gpu_rel_median
    )


def _vectorised_maps(
    payloads: Sequence[RankPayload],
    names: Mapping[int, str],
    relative: bool,
    individual: bool,
    only_rank: int | None,
    *,
    refs: References | None = None,
) -> few_scores.ScoreMaps:
    """``score_payloads``'s mappings over numpy arrays, whatever the window's size."""
    ranks = np.fromiter((p.info.rank for p in payloads), dtype=np.int64, count=len(payloads))
    gpu_rel: dict[int, float] = {}
    sec_rel: dict[str, dict[int, float]] = {}
    gpu_ind: dict[int, float] = {}
    sec_ind: dict[str, dict[int, float]] = {}
    gpu_rel_median: dict[int, float] = {}
    n = len(payloads)
    sidx = scoring.index_keys([p.section_ids for p in payloads])
    if relative and n:
        if sidx.rows.size:
            smed = np.concatenate([p.section_median_ns for p in payloads])
            if refs is None:
                s_scores = scoring.relative_entry_scores(sidx.rows, sidx.cols, smed, sidx.keys.size)
            else:
                best = refs.section_best_for(sidx.keys)
                s_scores = scoring.entry_scores_against(sidx.cols, smed, best)
            sec_rel = _per_key(ranks, sidx.rows, sidx.cols, s_scores, sidx.keys, names, only_rank)
        kidx = scoring.index_keys([p.kernel_ids for p in payloads])
        if kidx.rows.size:
            kmed = np.concatenate([p.kernel_median_ns for p in payloads])
            ktot = np.concatenate([p.kernel_total_ns for p in payloads])
            if refs is None:
                k_scores = scoring.gpu_relative_entry_scores(
                    kidx.rows, kidx.cols, kmed, n, kidx.keys.size
                )
            else:
                k_scores = scoring.entry_scores_against(
                    kidx.cols,
                    kmed,
                    refs.kernel_best_for(kidx.keys),
                    support=refs.kernel_support_for(kidx.keys),
                    min_support=refs.kernel_min_support,
                )
            # The mean stays a time (what the step pays; the host side reads it); the
            # median reads a bigger launch per unit of work (what the GPU is).
            g = scoring.weighted_row_mean(kidx.rows, k_scores, ktot, n, rows_sorted=True)
            gpu_rel = _per_rank(ranks, g, only_rank)
            kthr = _kernel_threads(payloads)
            if refs is None:
                k_scores = scoring.per_work_entry_scores(
                    kidx.cols, k_scores, kmed, kthr, kidx.keys.size
                )
            else:
                launch = refs.kernel_launch_for(kidx.keys)
                k_scores = scoring.per_work_against(kidx.cols, k_scores, kmed, kthr, launch)
            g_med = scoring.weighted_row_median(kidx.rows, k_scores, ktot, n)
            gpu_rel_median = _per_rank(ranks, g_med, only_rank)
    if individual and n:
        gi = np.fromiter((p.gpu_individual for p in payloads), dtype=np.float64, count=n)
        gpu_ind = _per_rank(ranks, gi, only_rank)
        if sidx.rows.size:
            sind = np.concatenate([p.section_individual for p in payloads])
            sec_ind = _per_key(ranks, sidx.rows, sidx.cols, sind, sidx.keys, names, only_rank)
    return gpu_rel, sec_rel, gpu_ind, sec_ind, gpu_rel_median


def _kernel_threads(payloads: Sequence[RankPayload]) -> F64 | None:
    """Every kernel entry's typical launch threads, in payload order (NaN for a payload
    without them); None when no payload carries any."""
    if all(p.kernel_threads is None for p in payloads):
        return None
    return np.concatenate(
        [
            np.full(len(p.kernel_ids), np.nan)
            if p.kernel_threads is None
            else np.asarray(p.kernel_threads, np.float64)
            for p in payloads
        ]
    )
