"""NVRx's ``ReportGenerator``, built from NVRx's constructor and fed summaries by hand.

Code ported from NVRx builds ``ReportGenerator(scores_to_compute, gather_on_rank0=,
pg=, node_name=)`` and calls ``generate_report(section_summaries, kernel_summaries)``
with ``{name: {Statistic: value}}`` mappings on every rank of ``pg``. Each rank packs
its medians, kernel time totals and individual scores into a ``RankPayload``, the
payloads are all-gathered over ``pg``, and each rank (or rank 0 alone, with
``gather_on_rank0``) scores them.

Built as NVRx builds it, the generator scores by NVRx's rules (``nvrx_scores``: common
kernels and sections only, the smallest median ever as the individual baseline, NVRx's
communication-kernel filter) and keys scores and ``rank_to_node`` by rank in ``pg``, as
NVRx does. ``rules="pacekeeper"`` scores with pacekeeper's own rules instead
(``payload.score_payloads``, the code ``Detector`` reports with; ``RecentBest``
baselines), keyed by global rank (docs/detector.md, "Differences from NVRx").
``name_mapper`` numbers names as NVRx's does: every rank's sections in rank order, then
every rank's kernels, the same ids on every rank, and only when the scores need the
group (relative scores or ``gather_on_rank0``).

``Detector.reporter`` is a view of the running detector (``reporter_view``); it is
registered as a virtual subclass, so ``isinstance(Detector.reporter, ReportGenerator)``
holds for code that checks it.
"""

from __future__ import annotations

import logging
import math
import time
from abc import ABCMeta
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import numpy as np

from . import nvrx_scores, scoring
from .baselines import RecentBest
from .name_mapper import NameMapper
from .payload import KeyIds, RankPayload, Scores, score_payloads
from .reporter_view import ReportGenerator as _DetectorView
from .reports import RankInfo, Report, Statistic

log = logging.getLogger(__name__)

Summaries = Mapping[str, Mapping[Statistic, float]]

_SCORE_KINDS = ("relative_perf_scores", "individual_perf_scores")
Rules = Literal["nvrx", "pacekeeper"]
_MS_NS = 1e6
"""Section summaries are in milliseconds, kernel summaries in microseconds (NVRx's
units); both become nanoseconds, the unit of ``RankPayload``."""
_US_NS = 1e3


def _dist() -> Any:
    """``torch.distributed`` when a default group exists, else None (one process)."""
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover - torch is a dependency of the detector
        return None
    return dist if dist.is_available() and dist.is_initialized() else None


def _group_rank_size(pg: Any) -> tuple[int, int, int]:
    """(rank in ``pg``, size of ``pg``, global rank); (0, 1, 0) without torch.distributed."""
    dist = _dist()
    if dist is None:
        return 0, 1, 0
    return int(dist.get_rank(pg)), int(dist.get_world_size(pg)), int(dist.get_rank())


def _score_kinds(scores_to_compute: Iterable[str]) -> tuple[bool, bool]:
    if isinstance(scores_to_compute, str):
        raise TypeError(f"scores_to_compute must be a list of names, got {scores_to_compute!r}")
    names = set(scores_to_compute)
    if "all" in names:
        return True, True
    unknown = sorted(names - set(_SCORE_KINDS))
    if unknown:
        raise ValueError(f"scores_to_compute: unknown {unknown}; known: {list(_SCORE_KINDS)}")
    return _SCORE_KINDS[0] in names, _SCORE_KINDS[1] in names


def _medians(kind: str, summaries: Summaries, scale: float) -> tuple[list[str], np.ndarray]:
    """Names and medians (ns) of ``summaries``; a summary without a median raises."""
    names = list(summaries)
    med = np.empty(len(names), dtype=np.float64)
    for i, name in enumerate(names):
        try:
            med[i] = float(summaries[name][Statistic.MED]) * scale
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{kind}[{name!r}]: no numeric Statistic.MED ({e!r})") from None
    return names, med


def _kernel_totals(summaries: Summaries, names: list[str]) -> np.ndarray:
    """Per kernel, the time spent in it (``NUM * AVG``, ns): its weight in the GPU score."""
    tot = np.empty(len(names), dtype=np.float64)
    for i, name in enumerate(names):
        s = summaries[name]
        try:
            tot[i] = float(s[Statistic.NUM]) * float(s[Statistic.AVG]) * _US_NS
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"kernel_summaries[{name!r}]: needs NUM and AVG ({e!r})") from None
    return tot


class ReportGenerator(metaclass=ABCMeta):  # noqa: B024 - ABCMeta for register(), no abstract method
    """NVRx's report generator: ``generate_report`` must be called by every rank of ``pg``."""

    def __init__(
        self,
        scores_to_compute: Iterable[str],
        gather_on_rank0: bool = True,
        pg: Any = None,
        node_name: str = "<notset>",
        *,
        rules: Rules = "nvrx",
    ) -> None:
        if rules not in ("nvrx", "pacekeeper"):
            raise ValueError(f"rules: {rules!r}, expected 'nvrx' or 'pacekeeper'")
        self.rules: Rules = rules
        """Whose scoring rules: NVRx's (``nvrx_scores``) or pacekeeper's (``payload``)."""
        self.is_computing_rel_scores, self.is_computing_indiv_scores = _score_kinds(
            scores_to_compute
        )
        self.gather_on_rank0 = bool(gather_on_rank0)
        self.group = pg
        self.rank, self.world_size, self._global_rank = _group_rank_size(pg)
        self.node_name = str(node_name)
        self.name_mapper = NameMapper(pg=pg)
        self.rank_to_node: dict[int, str] = {}
        self._baselines = RecentBest()
        self._best_sections = nvrx_scores.RunningMinimum()
        self._best_kernels = nvrx_scores.RunningMinimum()
        self._ids = KeyIds()

    def generate_report(
        self, section_summaries: Summaries, kernel_summaries: Summaries
    ) -> Report | None:
        """This window's ``Report``: every rank's scores on rank 0 of ``pg`` (None on the
        others) with ``gather_on_rank0``, else this rank's own on each. Summaries without
        a numeric ``MED`` (kernels: also ``NUM``, ``AVG``) raise ``ValueError`` naming the
        key; a failed collective is logged and gives None (never raised into training)."""
        start = time.perf_counter_ns()
        self.rank, self.world_size, self._global_rank = _group_rank_size(self.group)
        kernels = {k: v for k, v in kernel_summaries.items() if not self._is_comm_kernel(k)}
        local = self._local_payload(section_summaries, kernels)
        try:
            payloads = self._exchange(local)
        except Exception:  # a broken group must not stop training
            log.exception("pacekeeper: ReportGenerator.generate_report: exchange failed")
            return None
        if self._uses_group():
            self._assign_ids(payloads)
        if self.gather_on_rank0 and self.rank != 0:
            return None
        return self._report(payloads, section_summaries, kernels, start)

    def _is_comm_kernel(self, name: str) -> bool:
        if self.rules == "nvrx":
            return nvrx_scores.is_comm_kernel(name)
        from pacekeeper.cupti_ext.kernel_keys import is_comm_kernel

        return is_comm_kernel(name)

    def _uses_group(self) -> bool:
        return self.is_computing_rel_scores or self.gather_on_rank0

    def _local_payload(self, sections: Summaries, kernels: Summaries) -> RankPayload:
        s_names, s_med = _medians("section_summaries", sections, _MS_NS)
        k_names, k_med = _medians("kernel_summaries", kernels, _US_NS)
        k_tot = _kernel_totals(kernels, k_names)
        s_ind = np.full(len(s_names), math.nan)
        gpu_ind = math.nan
        if self.is_computing_indiv_scores and self.rules == "nvrx":
            times = _times(s_names, s_med, k_names, k_med, k_tot)
            gpu_ind, by_name = nvrx_scores.individual_scores(
                times, self._best_sections, self._best_kernels
            )
            s_ind = np.array([by_name[n] for n in s_names], dtype=np.float64)
        elif self.is_computing_indiv_scores:
            keys = [("s", n) for n in s_names] + [("k", n) for n in k_names]
            base = self._baselines.update_many(keys, np.concatenate([s_med, k_med]))
            s_ind = scoring.individual_scores(s_med, base[: len(s_names)])
            if k_names:
                gpu_ind = scoring.gpu_individual_score(k_med, base[len(s_names) :], k_tot)
        s_ids, k_ids = self._ids.ids(s_names), self._ids.ids(k_names)
        names = dict(zip(s_ids.tolist(), s_names, strict=True))
        names.update(zip(k_ids.tolist(), k_names, strict=True))
        info = RankInfo(rank=self._global_rank, node=self.node_name)
        return RankPayload(info, s_ids, s_med, s_ind, k_ids, k_med, k_tot, gpu_ind, names)

    def _exchange(self, local: RankPayload) -> list[RankPayload]:
        """Every rank's payload in group-rank order (only this one's when no score
        needs the group). NVRx all-reduces minima and gathers scores; one all-gather of
        the payloads gives every rank what both need."""
        dist = _dist()
        if dist is None or self.world_size == 1 or not self._uses_group():
            return [local]
        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, local, group=self.group)
        return [p for p in out if isinstance(p, RankPayload)]

    def _assign_ids(self, payloads: list[RankPayload]) -> None:
        """NVRx's numbering: all ranks' sections in rank order, then all their kernels;
        identical on every rank since every rank sees the same payloads."""
        mapper = self.name_mapper
        for p in payloads:
            for sid in p.section_ids.tolist():
                mapper._assign_section_id(p.names[sid])
        for p in payloads:
            for kid in p.kernel_ids.tolist():
                mapper._assign_kernel_id(p.names[kid])

    def _report(
        self,
        payloads: list[RankPayload],
        sections: Summaries,
        kernels: Summaries,
        start_ns: int,
    ) -> Report:
        names: dict[int, str] = {}
        for p in payloads:
            names.update(p.names)
        rel, ind = self.is_computing_rel_scores, self.is_computing_indiv_scores
        if self.rules == "nvrx":
            scores = self._nvrx_scores(payloads, names)
            me = None if self.gather_on_rank0 else self.rank
        else:
            me = None if self.gather_on_rank0 else self._global_rank
            scores = score_payloads(payloads, names, relative=rel, individual=ind, only_rank=me)
        if self.gather_on_rank0:
            ranks = (
                list(range(len(payloads)))
                if self.rules == "nvrx"
                else [p.info.rank for p in payloads]
            )
            listed: Iterable[str] = self.name_mapper.section_name_to_id
        else:
            ranks, listed = [self.rank if self.rules == "nvrx" else self._global_rank], sections
        scores = scores.nan_filled(ranks, listed, relative=rel, individual=ind)
        self.rank_to_node = dict(scores.rank_to_node)
        return Report(
            gpu_relative_perf_scores=scores.gpu_relative,
            section_relative_perf_scores=scores.section_relative,
            gpu_individual_perf_scores=scores.gpu_individual,
            section_individual_perf_scores=scores.section_individual,
            rank_to_node=dict(scores.rank_to_node),
            local_section_summaries={k: dict(v) for k, v in sections.items()},
            local_kernel_summaries={k: dict(v) for k, v in kernels.items()},
            generate_report_elapsed_time=(time.perf_counter_ns() - start_ns) / 1e6,
            gather_on_rank0=self.gather_on_rank0,
            rank=me,
        )

    def _nvrx_scores(self, payloads: list[RankPayload], names: Mapping[int, str]) -> Scores:
        """NVRx's scores of the ranks this rank reports (all with ``gather_on_rank0``,
        else itself), keyed by rank in ``pg``: payloads arrive in group-rank order."""
        rel, ind = self.is_computing_rel_scores, self.is_computing_indiv_scores
        if self.gather_on_rank0:
            reported = [(i, i) for i in range(len(payloads))]  # (payload index, rank)
        else:  # only this rank's payload when no relative score needs the group's
            reported = [(self.rank if len(payloads) > 1 else 0, self.rank)]
        relative = (
            nvrx_scores.relative_scores([_payload_times(p, names) for p in payloads]) if rel else []
        )
        out = Scores({}, {}, {}, {}, {})
        for i, r in reported:
            p = payloads[i]
            out.rank_to_node[r] = p.info.node
            if rel:
                out.gpu_relative[r] = relative[i][0]
                for name, v in relative[i][1].items():
                    out.section_relative.setdefault(name, {})[r] = v
            if ind:
                out.gpu_individual[r] = p.gpu_individual
                for sid, v in zip(
                    p.section_ids.tolist(), p.section_individual.tolist(), strict=True
                ):
                    out.section_individual.setdefault(names[sid], {})[r] = v
        return out


def _times(
    s_names: list[str], s_med: np.ndarray, k_names: list[str], k_med: np.ndarray, k_tot: np.ndarray
) -> nvrx_scores.RankTimes:
    return nvrx_scores.RankTimes(
        dict(zip(s_names, s_med.tolist(), strict=True)),
        dict(zip(k_names, k_med.tolist(), strict=True)),
        dict(zip(k_names, k_tot.tolist(), strict=True)),
    )


def _payload_times(p: RankPayload, names: Mapping[int, str]) -> nvrx_scores.RankTimes:
    return _times(
        [names[i] for i in p.section_ids.tolist()],
        p.section_median_ns,
        [names[i] for i in p.kernel_ids.tolist()],
        p.kernel_median_ns,
        p.kernel_total_ns,
    )


ReportGenerator.register(_DetectorView)
