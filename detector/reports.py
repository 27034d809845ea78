"""The NVRx-compatible ``Report`` and its conversion to the versioned ``ScoreReport``.

``Report``'s field names and order, ``StragglerId``'s repr and ``Statistic``'s members
are API: logs are parsed and reports pickled by existing NVRx tooling.

Units, as NVRx: section summaries in milliseconds, kernel summaries in microseconds,
``generate_report_elapsed_time`` in milliseconds. Scores map *global* ranks (the rank
in the default group), even when the detector runs on a sub-group.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .probe import ProbeResult
from .score_report import JobIdentity, KernelTiming, ProbeEvidence, RankScores, ScoreReport


class Statistic(enum.Enum):
    """Summary statistics of ``Report.local_*_summaries``; printed as NVRx prints them
    (``str``: ``MED``, ``repr``: ``Statistic.MED``), so logged reports read the same."""

    MIN = enum.auto()
    MAX = enum.auto()
    MED = enum.auto()
    AVG = enum.auto()
    STD = enum.auto()
    NUM = enum.auto()

    # Members are singletons compared by identity, so the C identity hash is consistent
    # with equality; Enum's own __hash__ is Python code, and a report builds six-entry
    # dicts keyed by these for every kernel and section (~0.2 ms of a 200-kernel report).
    __hash__ = object.__hash__

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"{type(self).__name__}.{self.name}"


@dataclass(frozen=True)
class StragglerId:
    rank: int
    node: str


@dataclass(frozen=True)
class Report:
    """Scores for one report window (NVRx field names and order).

    With ``gather_on_rank0=True`` the reporting rank (rank 0 of the process group)
    holds every rank's scores and the other ranks get ``None`` from
    ``generate_report``; with ``False`` every rank gets a report with its own scores.
    As in NVRx, each score kind computed lists every rank (or this one) with NaN where no
    score could be computed (no kernels timed, a section a rank did not run);
    ``initialize(missing_scores="absent")`` leaves such scores out instead.
    """

    gpu_relative_perf_scores: Mapping[int, float]
    section_relative_perf_scores: Mapping[str, Mapping[int, float]]
    gpu_individual_perf_scores: Mapping[int, float]
    section_individual_perf_scores: Mapping[str, Mapping[int, float]]
    rank_to_node: Mapping[int, str]
    local_section_summaries: Mapping[str, Mapping[Statistic, float]]
    local_kernel_summaries: Mapping[str, Mapping[Statistic, float]]
    generate_report_elapsed_time: float
    gather_on_rank0: bool
    rank: int | None

    def identify_stragglers(
        self,
        gpu_rel_threshold: float = 0.75,
        section_rel_threshold: float = 0.75,
        gpu_indiv_threshold: float = 0.75,
        section_indiv_threshold: float = 0.75,
    ) -> dict[str, Any]:
        """Ranks whose score is strictly below the threshold (NaN is never flagged).

        Returns ``straggler_gpus_relative`` / ``straggler_gpus_individual`` (sets of
        ``StragglerId``) and ``straggler_sections_relative`` /
        ``straggler_sections_individual`` (section -> non-empty set of ``StragglerId``).
        """

        def below(scores: Mapping[int, float], threshold: float) -> set[StragglerId]:
            return {
                StragglerId(rank=r, node=self.rank_to_node.get(r, "<unk>"))
                for r, s in scores.items()
                if not math.isnan(s) and s < threshold
            }

        def sections(
            scores: Mapping[str, Mapping[int, float]], threshold: float
        ) -> dict[str, set[StragglerId]]:
            out = {}
            for name, per_rank in scores.items():
                if flagged := below(per_rank, threshold):
                    out[name] = flagged
            return out

        return {
            "straggler_gpus_relative": below(self.gpu_relative_perf_scores, gpu_rel_threshold),
            "straggler_gpus_individual": below(
                self.gpu_individual_perf_scores, gpu_indiv_threshold
            ),
            "straggler_sections_relative": sections(
                self.section_relative_perf_scores, section_rel_threshold
            ),
            "straggler_sections_individual": sections(
                self.section_individual_perf_scores, section_indiv_threshold
            ),
        }


@dataclass(frozen=True, slots=True)
class RankInfo:
    """Where a rank runs and how much it measured; travels with the gathered payload."""

    rank: int
    node: str
    pod: str | None = None
    ray_node_id: str | None = None
    pid: int | None = None
    section_samples: int = 0
    kernel_samples: int = 0
    dropped_records: int = 0
    wait_share: float | None = None
    """Share of the window this rank spent blocked in the job's collectives."""
    group: str | None = None
    coords: Mapping[str, int] | None = None
    """Peer group and parallel coordinates (``topology``), when the job gave them."""
    gpu_uuid: str | None = None
    """The UUID of the rank's GPU (``identity.gpu_uuid``); None on CPU-only ranks."""
    probe: ProbeResult | None = None
    """The confirmation probe this rank ran for the report (``probe``), if asked."""
    section_tail: Mapping[str, float] | None = None
    """Per section, this rank's tail score over its recent windows (``tails``)."""
    gpu_individual_median: float | None = None
    """The kernel-time-weighted median of its kernels' individual scores
    (``scoring.gpu_individual_median``); None or NaN: not measured."""
    gpu_individual_fast: float | None = None
    """The same scores' kernel-time-weighted 0.9 quantile: how its fastest tenth of
    the kernel time ran (``scoring.gpu_individual_fast``); None or NaN: not measured."""


def summary_statistics(s: Any, scale: float) -> dict[Statistic, float]:
    """NVRx's per-key statistics (``Report.local_*_summaries``) from anything with
    min/max/median/mean/std_ns and num, scaled from nanoseconds to the report's unit."""
    return {
        Statistic.MIN: s.min_ns * scale,
        Statistic.MAX: s.max_ns * scale,
        Statistic.MED: s.median_ns * scale,
        Statistic.AVG: s.mean_ns * scale,
        Statistic.STD: s.std_ns * scale,
        Statistic.NUM: s.num,
    }


def _score(value: float | None) -> float | None:
    if value is None or not math.isfinite(value) or value < 0:
        return None
    return float(value)


def _by_rank(scores: Mapping[str, Mapping[int, float]]) -> dict[int, dict[str, float | None]]:
    """section -> rank -> score turned into rank -> section -> score, valid scores only."""
    out: dict[int, dict[str, float | None]] = {}
    for name, per_rank in scores.items():
        for r, value in per_rank.items():
            if (v := _score(value)) is not None:
                out.setdefault(r, {})[name] = v
    return out


def to_score_report(
    report: Report,
    *,
    job: JobIdentity,
    sequence: int,
    generated_at: datetime,
    window_s: float,
    rank_info: Mapping[int, RankInfo],
    world_size: int | None = None,
    kernel_timing: KernelTiming | None = None,
    gpu_relative_median: Mapping[int, float] | None = None,
) -> ScoreReport:
    """Convert a ``Report`` into the torch-free ``ScoreReport`` the controller reads.

    Every rank in ``report.rank_to_node`` or ``rank_info`` gets an entry; scores that are
    NaN or absent become ``None``. ``kernel_timing.dropped_records`` is summed from
    ``rank_info`` when not given. ``gpu_relative_median``: ``Scores.gpu_relative_median``
    (no NVRx ``Report`` field holds it; scored with the peers, not in ``rank_info``).
    """
    ranks = sorted(set(report.rank_to_node) | set(rank_info))
    sec_rel = _by_rank(report.section_relative_perf_scores)
    sec_ind = _by_rank(report.section_individual_perf_scores)
    rel_median = gpu_relative_median or {}
    out = []
    for r in ranks:
        info = rank_info.get(r) or RankInfo(rank=r, node=report.rank_to_node.get(r, "<unk>"))
        out.append(
            RankScores(
                rank=r,
                node=info.node or report.rank_to_node.get(r) or "<unk>",
                pod=info.pod,
                ray_node_id=info.ray_node_id,
                pid=info.pid,
                gpu_relative=_score(report.gpu_relative_perf_scores.get(r)),
                gpu_individual=_score(report.gpu_individual_perf_scores.get(r)),
                section_relative=sec_rel.get(r, {}),
                section_individual=sec_ind.get(r, {}),
                section_samples=max(0, info.section_samples),
                kernel_samples=max(0, info.kernel_samples),
                wait_share=info.wait_share,
                group=info.group,
                coords=dict(info.coords) if info.coords else None,
                gpu_uuid=info.gpu_uuid,
                probe=None if info.probe is None else _probe_evidence(info.probe),
                section_tail=_tails(info.section_tail),
                gpu_individual_median=_score(info.gpu_individual_median),
                gpu_individual_fast=_score(info.gpu_individual_fast),
                gpu_relative_median=_score(rel_median.get(r)),
            )
        )
    if kernel_timing is None:
        kernel_timing = KernelTiming()
    if kernel_timing.dropped_records == 0 and rank_info:
        dropped = sum(i.dropped_records for i in rank_info.values())
        kernel_timing = kernel_timing.model_copy(update={"dropped_records": dropped})
    return ScoreReport.build(
        job=job,
        sequence=sequence,
        generated_at=generated_at,
        window_s=window_s if window_s > 0 else 1e-9,
        ranks=out,
        world_size=world_size,
        kernel_timing=kernel_timing,
    )


def report_fields() -> list[str]:
    """``Report``'s field names in order (tests and docs pin them to NVRx's)."""
    return [f.name for f in dataclasses.fields(Report)]


def _tails(tails: Mapping[str, float] | None) -> dict[str, float | None] | None:
    """The measured tail scores (NaN: too few windows yet, left out); None: none."""
    if not tails:
        return None
    kept: dict[str, float | None] = {name: v for name, v in tails.items() if _score(v) is not None}
    return kept or None


def _probe_evidence(result: ProbeResult) -> ProbeEvidence:
    return ProbeEvidence.model_validate(result.to_wire())
