"""Feeds simulated windows through the real detector scoring and builds ScoreReports.

What a real job does per report, with the detector's own code: each rank turns its
window into a ``RankPayload`` (typical times, totals, and its individual scores against
its ``RecentBest`` baselines via ``scoring.individual_scores`` /
``scoring.gpu_individual_score``); rank 0 scores all payloads with
``payload.score_payloads``; ``reports.to_score_report`` makes the wire report. Nothing
here re-implements a score: this module only plays the part of N ranks and the gather.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from pacekeeper.controller.simulation.models import Layout, WindowSummary
from pacekeeper.cupti_ext.kernel_keys import is_comm_kernel
from pacekeeper.detector import scoring
from pacekeeper.detector.baselines import RecentBest
from pacekeeper.detector.env import DetectorSettings
from pacekeeper.detector.payload import RankPayload, key_id, score_payloads
from pacekeeper.detector.reports import RankInfo, Report, to_score_report
from pacekeeper.detector.score_report import JobIdentity, KernelTiming, RankScores, ScoreReport

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
"""Simulated time zero (a fixed instant keeps traces reproducible)."""


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a row of the window sits in the job's topology (schemaVersion 2 fields)."""

    coords: Mapping[str, int] | None = None
    group: str | None = None
    wait_share: float | None = None


class RealScoring:
    """Plays every rank's detector and rank 0's report for a simulated job.

    Row ``i`` of a window is rank ``i``; ``rank_ids`` names other ranks instead (an
    imported trace that recorded some ranks of a larger job: ``layout.ranks`` is then
    the job's world size, and nodes follow the global rank)."""

    def __init__(
        self,
        layout: Layout,
        job_name: str = "sim-job",
        *,
        rank_ids: Sequence[int] | None = None,
        kernel_timing: KernelTiming | None = None,
    ) -> None:
        self.layout = layout
        self.job = JobIdentity(name=job_name)
        self.rank_ids = list(rank_ids) if rank_ids is not None else list(range(layout.ranks))
        self.kernel_timing = kernel_timing or KernelTiming(backend="simulated", reason="simulator")
        rows = len(self.rank_ids)
        settings = DetectorSettings()
        self._section_base = [
            RecentBest(settings.baseline_windows, settings.max_sections) for _ in range(rows)
        ]
        self._kernel_base = [
            RecentBest(settings.baseline_windows, 4 * settings.max_kernel_keys) for _ in range(rows)
        ]
        self._names: dict[int, str] = {}
        self._infos = [
            RankInfo(rank=r, node=layout.node_name(layout.node_of(r))) for r in self.rank_ids
        ]

    def report(
        self, w: WindowSummary, placements: Sequence[Placement] | None = None
    ) -> ScoreReport:
        """The window's ScoreReport; ``placements`` (one per row) add coordinates,
        groups and wait shares."""
        keep = [i for i, k in enumerate(w.kernel_names) if not is_comm_kernel(k)]
        k_names = [w.kernel_names[i] for i in keep]
        k_ids = np.array([key_id(k) for k in k_names], dtype=np.uint64)
        s_ids = np.array([key_id(s) for s in w.section_names], dtype=np.uint64)
        for i, name in zip(k_ids.tolist(), k_names, strict=True):
            self._names[i] = name
        for i, name in zip(s_ids.tolist(), w.section_names, strict=True):
            self._names[i] = name
        k_med_all = w.kernel_median_ns[:, keep]
        k_tot_all = w.kernel_total_ns[:, keep]
        sec_ns = w.section_median_s * 1e9
        payloads = []
        for r in range(len(self.rank_ids)):
            ran = np.isfinite(k_med_all[r])
            names_r = [n for n, ok in zip(k_names, ran, strict=True) if ok]
            k_med = k_med_all[r, ran]
            k_tot = k_tot_all[r, ran]
            k_base = self._kernel_base[r].update_many(names_r, k_med)
            gpu_ind = scoring.gpu_individual_score(k_med, k_base, k_tot) if names_r else math.nan
            s_med = sec_ns[r]
            s_base = self._section_base[r].update_many(w.section_names, s_med)
            s_ind = scoring.individual_scores(s_med, s_base)
            info = RankInfo(
                rank=self.rank_ids[r],
                node=self._infos[r].node,
                section_samples=int(w.section_samples[r]),
                kernel_samples=int(w.kernel_count[r, keep][ran].sum()),
            )
            self._infos[r] = info
            payloads.append(
                RankPayload(info, s_ids, s_med, s_ind, k_ids[ran], k_med, k_tot, gpu_ind)
            )
        scores = score_payloads(payloads, self._names, relative=True, individual=True)
        report = Report(
            gpu_relative_perf_scores=scores.gpu_relative,
            section_relative_perf_scores=scores.section_relative,
            gpu_individual_perf_scores=scores.gpu_individual,
            section_individual_perf_scores=scores.section_individual,
            rank_to_node=scores.rank_to_node,
            local_section_summaries={},
            local_kernel_summaries={},
            generate_report_elapsed_time=0.0,
            gather_on_rank0=True,
            rank=0,
        )
        out = to_score_report(
            report,
            job=self.job,
            sequence=w.index,
            generated_at=EPOCH + timedelta(seconds=w.end_s),
            window_s=w.end_s - w.start_s,
            rank_info={i.rank: i for i in self._infos},
            world_size=self.layout.ranks,
            kernel_timing=self.kernel_timing,
        )
        return out if placements is None else _placed(out, self.rank_ids, placements)


def _placed(
    report: ScoreReport, rank_ids: Sequence[int], placements: Sequence[Placement]
) -> ScoreReport:
    where = dict(zip(rank_ids, placements, strict=True))
    ranks = []
    for r in report.ranks:
        p = where.get(r.rank)
        if p is None:
            ranks.append(r)
            continue
        fields: dict[str, Any] = {"coords": dict(p.coords) if p.coords else None}
        fields |= {"group": p.group, "wait_share": p.wait_share}
        ranks.append(RankScores.model_validate({**r.model_dump(), **fields}))
    return ScoreReport.build(
        job=report.job,
        sequence=report.sequence,
        generated_at=report.generated_at,
        window_s=report.window_s,
        ranks=ranks,
        world_size=report.summary.world_size,
        kernel_timing=report.kernel_timing,
    )
