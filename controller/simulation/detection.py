"""Feeds simulated windows through the real detector scoring and builds ScoreReports.

What a real job does per report, with the detector's own code: each rank turns its
window into a ``RankPayload`` (typical times, totals, and its individual scores against
its ``RecentBest`` baselines via ``scoring.individual_scores`` /
``scoring.gpu_individual_score``); rank 0 scores all payloads with
``payload.score_payloads``; ``reports.to_score_report`` makes the wire report. Nothing
here re-implements a score: this module only plays the part of N ranks and the gather.

With collective timing on (the detector's default, ``Detector.initialize(...,
time_collectives=True)``), a section is scored on its work, the median over entries
of each entry's time less its own wait (``SectionSummary.work_median_ns``), and
each rank's ``waitShare`` is its wait over the window's elapsed time, as
``PayloadBuilder`` computes it. Off, sections are scored on their raw medians and no
rank has a wait share: a drop-in NVRx job that never turned it on.

Each rank reports its tail statistic (``sectionTail``, ``detector.tails.RecentTail``
over the section times it is scored on) and its broad GPU score
(``gpuIndividualMedian``, ``scoring.gpu_individual_median``), as ``PayloadBuilder`` does;
rank 0's scoring gives each its broad score against the peers (``gpuRelativeMedian``),
as ``report_cycle`` does.

A restart (``restart``) is what a torchrun restart does to the job's detectors: every
rank's ``RecentBest`` baselines and tails start empty, the report sequence starts again at 0,
and the reporter's incarnation becomes ``<base>.r<restart count>``
(``detector.identity.elastic_incarnation``). The job keeps its identity.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np

from pacekeeper.controller.simulation import probe_answers
from pacekeeper.controller.simulation.models import Layout, WindowSummary
from pacekeeper.cupti_ext.kernel_keys import is_comm_kernel
from pacekeeper.detector import scoring
from pacekeeper.detector.baselines import RecentBest
from pacekeeper.detector.env import DetectorSettings
from pacekeeper.detector.payload import RankPayload, key_id, score_payloads
from pacekeeper.detector.reports import RankInfo, Report, to_score_report
from pacekeeper.detector.score_report import JobIdentity, KernelTiming, ScoreReport
from pacekeeper.detector.tails import RecentTail

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
"""Simulated time zero (a fixed instant keeps traces reproducible)."""


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a row of the window sits in the job's topology (schemaVersion 2 fields)."""

    coords: Mapping[str, int] | None = None
    group: str | None = None
    wait_share: float | None = None


@dataclass(frozen=True, slots=True)
class Instrumentation:
    """What the simulated job turned on in the detector beyond NVRx's API."""

    collective_timing: bool = True
    """``time_collectives`` (the default) and ``watch_ddp``: sections scored on their
    work, ``waitShare`` reported. False: a job that never turned it on."""
    topology: bool = True
    """``Detector.set_topology``: a pipeline job's ranks carry ``{"pp", "dp"}``."""
    gpu_uuid: bool = True
    """Each rank names its GPU (``gpuUuid``, as the detector does on a CUDA rank), so the
    controller can remember the GPU across restarts. False: reports without it."""


def wait_share(wait_s: float, elapsed_s: float) -> float | None:
    """Share of the window spent waiting, None when nothing was waited (as the
    detector's ``PayloadBuilder`` reports it)."""
    if wait_s <= 0 or elapsed_s <= 0:
        return None
    return min(1.0, wait_s / elapsed_s)


class RealScoring:
    """Plays every rank's detector and rank 0's report for a simulated job.

    Row ``i`` of a window is rank ``i``; ``rank_ids`` names other ranks instead (an
    imported trace that recorded some ranks of a larger job: ``layout.ranks`` is then
    the job's world size, and nodes follow the global rank). ``coords`` (one per row)
    is what each rank gave ``Detector.set_topology``; ``gpu_uuids``: each rank names
    its GPU (``Layout.gpu_uuid``); ``epoch``: the wall-clock time of the job's clock 0
    (an earlier job on the same GPUs runs before ``EPOCH``)."""

    def __init__(
        self,
        layout: Layout,
        job_name: str = "sim-job",
        *,
        rank_ids: Sequence[int] | None = None,
        kernel_timing: KernelTiming | None = None,
        coords: Sequence[Mapping[str, int] | None] | None = None,
        collective_timing: bool = True,
        gpu_uuids: bool = False,
        epoch: datetime = EPOCH,
    ) -> None:
        self.layout = layout
        self.epoch = epoch
        self.collective_timing = collective_timing
        self.job = JobIdentity(name=job_name)
        self.rank_ids = list(rank_ids) if rank_ids is not None else list(range(layout.ranks))
        self.kernel_timing = kernel_timing or KernelTiming(backend="simulated", reason="simulator")
        self.restarts = 0
        self._incarnation_base = f"{epoch:%Y%m%dT%H%M%SZ}-{job_name}"
        # The first incarnation numbers reports by window (as a trace's windows come).
        self._first_window: int | None = 0
        self._fresh_baselines()
        self._probe: str | None = None
        self._names: dict[int, str] = {}
        self._infos = [
            RankInfo(
                rank=r,
                node=layout.node_name(layout.node_of(r)),
                gpu_uuid=layout.gpu_uuid(r) if gpu_uuids else None,
            )
            for r in self.rank_ids
        ]
        rows = len(self.rank_ids)
        if coords is not None and len(coords) != rows:
            raise ValueError(f"coords: one per rank is needed ({rows}), got {len(coords)}")
        self._coords = list(coords) if coords is not None else [None] * rows

    def _fresh_baselines(self) -> None:
        rows = len(self.rank_ids)
        settings = DetectorSettings()
        self._section_base = [
            RecentBest(settings.baseline_windows, settings.max_sections) for _ in range(rows)
        ]
        self._kernel_base = [
            RecentBest(settings.baseline_windows, 4 * settings.max_kernel_keys) for _ in range(rows)
        ]
        # Each rank's tail statistic (``sectionTail``) over the same section times it is
        # scored on, as ``PayloadBuilder`` keeps it: a new process remembers no window.
        self._tails = [RecentTail() for _ in range(rows)]

    @property
    def incarnation(self) -> str:
        """The reporter's incarnation, as a torchrun job's detector names it."""
        return f"{self._incarnation_base}.r{self.restarts}"

    def restart(self) -> None:
        """The job restarted: new detector processes on every rank, on the same GPUs."""
        self.restarts += 1
        self._first_window = None
        self._fresh_baselines()

    def ask_probe(self, probe_id: str) -> None:
        """The controller asked for the confirmation probe: the next report answers."""
        self._probe = probe_id

    def report(
        self, w: WindowSummary, placements: Sequence[Placement] | None = None
    ) -> ScoreReport:
        """The window's ScoreReport; ``placements`` (one per row, an imported trace's)
        give coordinates, groups and wait shares instead."""
        if placements is not None and len(placements) != len(self.rank_ids):
            raise ValueError(
                f"placements: one per rank is needed ({len(self.rank_ids)}), got {len(placements)}"
            )
        if self._first_window is None:
            self._first_window = w.index
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
        k_thr_all = None if w.kernel_threads is None else w.kernel_threads[:, keep]
        sec_ns = w.section_median_s * 1e9
        if self.collective_timing and w.section_work_median_s is not None:
            # Scored on the work done, as the detector does: the wait for peers inside a
            # section is someone else's slowness.
            sec_ns = w.section_work_median_s * 1e9
        shares = self._wait_shares(w) if self.collective_timing else None
        probes = None
        if self._probe is not None and w.gpu_speed is not None:
            # Every rank runs the probe at the report after the request (``control_cycle``).
            probes = probe_answers.answers(self._probe, w.gpu_speed, w.index)
            self._probe = None
        payloads = []
        for r in range(len(self.rank_ids)):
            ran = np.isfinite(k_med_all[r])
            names_r = [n for n, ok in zip(k_names, ran, strict=True) if ok]
            k_med = k_med_all[r, ran]
            k_tot = k_tot_all[r, ran]
            # Launch sizes (issue #38), where modelled: the median reads them per unit of
            # work; the mean stays a time, as on a rank (local_payload).
            k_thr = None if k_thr_all is None else k_thr_all[r, ran]
            k_base, b_thr = self._kernel_base[r].update_launches(names_r, k_med, k_thr)
            thr = () if k_thr is None else (k_thr, b_thr)
            gpu_ind = scoring.gpu_individual_score(k_med, k_base, k_tot) if names_r else math.nan
            gpu_med = scoring.gpu_individual_median(k_med, k_base, k_tot, *thr) if names_r else None
            gpu_fast = scoring.gpu_individual_fast(k_med, k_base, k_tot, *thr) if names_r else None
            s_med = sec_ns[r]
            s_base = self._section_base[r].update_many(w.section_names, s_med)
            s_ind = scoring.individual_scores(s_med, s_base)
            tail = self._tails[r].update(w.section_names, s_med.tolist())
            where = (
                placements[r]
                if placements is not None
                else Placement(self._coords[r], None, None if shares is None else shares[r])
            )
            info = RankInfo(
                rank=self.rank_ids[r],
                node=self._infos[r].node,
                section_samples=int(w.section_samples[r]),
                kernel_samples=int(w.kernel_count[r, keep][ran].sum()),
                wait_share=where.wait_share,
                group=where.group,
                coords=where.coords,
                gpu_uuid=self._infos[r].gpu_uuid,
                probe=None if probes is None else probes[r],
                section_tail={
                    n: v for n, v in zip(w.section_names, tail, strict=True) if math.isfinite(v)
                }
                or None,
                gpu_individual_median=gpu_med,
                gpu_individual_fast=gpu_fast,
            )
            self._infos[r] = info
            payloads.append(
                RankPayload(
                    info,
                    s_ids,
                    s_med,
                    s_ind,
                    k_ids[ran],
                    k_med,
                    k_tot,
                    gpu_ind,
                    kernel_threads=k_thr,
                )
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
        return to_score_report(
            report,
            job=self.job,
            # Each incarnation's reporter counts its reports from 0.
            sequence=w.index - self._first_window,
            generated_at=self.epoch + timedelta(seconds=w.end_s),
            window_s=w.end_s - w.start_s,
            rank_info={i.rank: i for i in self._infos},
            world_size=self.layout.ranks,
            kernel_timing=self.kernel_timing,
            gpu_relative_median=scores.gpu_relative_median,
        )

    def _wait_shares(self, w: WindowSummary) -> list[float | None] | None:
        if w.wait_s is None:
            return None
        elapsed = w.wall_s if w.wall_s is not None else w.end_s - w.start_s
        return [wait_share(float(x), elapsed) for x in w.wait_s.tolist()]
