"""This rank's side of a report: its window of sections and kernels made into its payload.

``payload`` holds the wire format and how the reporting rank scores it (pure). This
module fills it in on every rank: it drains the section table, collects the kernel
window from the backend, drops communication kernels, bounds the kernel keys, and
computes the rank's individual scores. The memory that takes lives here too, for one
run: the individual baselines, cached key ids, the kernel ids already named to the
receiver, and the comm-kernel verdicts.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections import Counter
from typing import TYPE_CHECKING

import numpy as np

from . import scoring
from .baselines import RecentBest
from .collectives import WAIT_NS
from .payload import MAX_NAMES, NAME_REFRESH_REPORTS, KeyIds, RankPayload
from .reports import RankInfo, Statistic, summary_statistics
from .tails import RecentTail
from .topology import Topology

if TYPE_CHECKING:
    import re

    from pacekeeper.cupti_ext import BackendChoice, KernelStat, KernelTimingBackend, KernelWindow

    from .env import DetectorSettings
    from .guard import Guard
    from .probe import ProbeResult
    from .sections import SectionSummary, SectionTable

Summaries = dict[str, dict[Statistic, float]]
LocalReport = tuple[RankPayload, Summaries, Summaries]
"""The payload to gather, and this rank's section (ms) and kernel (µs) summaries."""

_COMM_CACHE_MAX = 1 << 16

KERNEL_COUNTS = ("attributed", "unattributed", "held", "dropped", "lost_markers")
"""What became of the kernel records a window traced (``PayloadBuilder.kernel_counts``)."""

logger = logging.getLogger(__name__)


def kernel_counts(window: KernelWindow | None) -> dict[str, int]:
    """A window's kernel records by fate: attributed to a traced section entry, traced
    outside every entry, held for markers still to come, dropped; and markers lost."""
    if window is None:
        return dict.fromkeys(KERNEL_COUNTS, 0)
    return {
        "attributed": int(window.records),
        "unattributed": int(window.unattributed_records),
        "held": int(window.held_records),
        "dropped": int(window.dropped_records),
        "lost_markers": int(window.lost_markers),
    }


class PayloadBuilder:
    """Makes this rank's ``RankPayload`` once per report; holds what that remembers."""

    def __init__(
        self,
        *,
        rank_info: RankInfo,
        settings: DetectorSettings,
        table: SectionTable,
        backend: KernelTimingBackend | None,
        choice: BackendChoice,
        guard: Guard,
        comm_extra: re.Pattern[str] | None,
    ) -> None:
        self.rank_info = rank_info
        self._max_kernel_keys = settings.max_kernel_keys
        self._table = table
        self._backend = backend
        self._choice = choice
        self._guard = guard
        self._comm_extra = comm_extra
        self._comm_verdicts: dict[str, bool] = {}  # per run: the pattern may change
        self.section_baselines = RecentBest(settings.baseline_windows, settings.max_sections)
        self.kernel_baselines = RecentBest(settings.baseline_windows, 4 * settings.max_kernel_keys)
        self.section_tails = RecentTail(max_keys=settings.max_sections)
        """Each section's recent window times, slow ones too (``sectionTail``)."""
        self.key_ids = KeyIds()
        self.sent_kernel_names: set[int] = set()
        self.kernel_counts: dict[str, int] = kernel_counts(None)
        """The last window's ``kernel_counts`` (this rank's, for its ScoreReport)."""
        self.kernel_totals: Counter[str] = Counter()
        """The same counts summed over every report since initialize."""
        self._wait_mark = (WAIT_NS[0], time.perf_counter_ns())
        self.topology = Topology()
        """This rank's place in the job's layout (``Detector.set_topology``)."""
        self.probe: ProbeResult | None = None
        """The confirmation probe run for the coming report (``control_cycle``)."""

    def empty(self) -> LocalReport:
        """What this rank sends when collecting failed: it still joins the collective."""
        return RankPayload.empty(self.rank_info), {}, {}

    def collect(self, sequence: int) -> LocalReport:
        """This window's payload from the section table and the backend (report ``sequence``)."""
        backend = self._backend
        if backend is not None and self._choice.name != "none":
            self._guard.call("cuda.synchronize", _cuda_synchronize, None)
        sections = self._table.drain()
        window = None
        if backend is not None:
            window = self._guard.call("backend.collect", backend.collect, None)
        return self.build(sections, window, sequence)

    def build(
        self, sections: list[SectionSummary], window: KernelWindow | None, sequence: int
    ) -> LocalReport:
        """The payload of drained ``sections`` and a backend's kernel ``window`` (or None)."""
        sec_names = [s.name for s in sections]
        # Scored on the work done: the wait for peers inside a section is not this
        # rank's slowness but someone else's (collectives).
        sec_med = np.array([s.work_median_ns for s in sections], dtype=np.float64)
        sec_base = self.section_baselines.update_many(sec_names, sec_med)
        sec_ind = scoring.individual_scores(sec_med, sec_base)
        tails = self.section_tails.update(sec_names, sec_med.tolist())
        sec_tail = dict(zip(sec_names, tails, strict=True))
        sec_ids = self.key_ids.ids(sec_names)
        names = dict(zip(sec_ids.tolist(), sec_names, strict=True))
        sec_summ = {s.name: summary_statistics(s, 1e-6) for s in sections}
        self._count_kernels(window)

        kernels = dict(window.kernels) if window is not None else {}
        # Communication kernels wait for the slowest peer and make fast ranks look slow.
        # The CUPTI backend leaves them out already; this catches any other backend,
        # with the one rule cupti_ext defines (plus $PACEKEEPER_COMM_KERNEL_PATTERN).
        comm_ns = window.comm_ns if window is not None else 0.0
        comm_keys = [k for k in kernels if self._is_comm(k)]
        for k in comm_keys:
            comm_ns += kernels.pop(k).total_ns
        gpu_wait = _gpu_wait_share(comm_ns, kernels)
        if len(kernels) > self._max_kernel_keys:
            # Bounded payload under dynamic shapes: keep where the time goes.
            top = sorted(kernels.items(), key=lambda kv: kv[1].total_ns, reverse=True)
            kernels = dict(top[: self._max_kernel_keys])
        ker_names = list(kernels)
        ker_med = np.array([kernels[k].median_ns for k in ker_names], dtype=np.float64)
        ker_tot = np.array([kernels[k].total_ns for k in ker_names], dtype=np.float64)
        ker_thr = _launch_threads(window, ker_names)
        ker_base, base_thr = self.kernel_baselines.update_launches(ker_names, ker_med, ker_thr)
        thr = None if ker_thr is None else (ker_thr, base_thr)
        # The mean stays a time against the baseline's (what the step pays); the median
        # below reads a bigger launch per unit of work (what the GPU is).
        gpu_ind = (
            scoring.gpu_individual_score(ker_med, ker_base, ker_tot) if ker_names else math.nan
        )
        ker_ids = self.key_ids.ids(ker_names)
        # Kernel names travel once per id, and all of them again every
        # NAME_REFRESH_REPORTS reports.
        refresh = sequence % NAME_REFRESH_REPORTS == 1
        sent = self.sent_kernel_names
        for kid, kname in zip(ker_ids.tolist(), ker_names, strict=True):
            if refresh or kid not in sent:
                names[kid] = kname
        ker_summ = {k: summary_statistics(v, 1e-3) for k, v in kernels.items()}
        me = self.rank_info
        probe, self.probe = self.probe, None  # a result travels in one report only
        # This window's figures over the rank's identity (every field of it kept: a
        # field copied by hand was once dropped, the pid).
        info = dataclasses.replace(
            me,
            section_samples=int(sum(s.num for s in sections)),
            kernel_samples=int(window.records) if window is not None else 0,
            dropped_records=int(window.dropped_records) if window is not None else 0,
            wait_share=_larger(self._wait_share(), gpu_wait),
            group=self.topology.group,
            coords=self.topology.coords,
            probe=probe,
            section_tail=sec_tail,
            gpu_individual_median=(
                scoring.gpu_individual_median(ker_med, ker_base, ker_tot, *(thr or ()))
                if ker_names
                else None
            ),
            gpu_individual_fast=(
                scoring.gpu_individual_fast(ker_med, ker_base, ker_tot, *(thr or ()))
                if ker_names
                else None
            ),
        )
        payload = RankPayload(
            info, sec_ids, sec_med, sec_ind, ker_ids, ker_med, ker_tot, gpu_ind, names, ker_thr
        )
        return payload, sec_summ, ker_summ

    def _wait_share(self) -> float | None:
        """Share of the time since the last report spent blocked in collectives; None
        when none was timed (a job without collectives, or timing them is off)."""
        wait0, t0 = self._wait_mark
        wait, now = WAIT_NS[0], time.perf_counter_ns()
        self._wait_mark = (wait, now)
        if wait == wait0 or now <= t0:
            return None
        return min(1.0, (wait - wait0) / (now - t0))

    def _count_kernels(self, window: KernelWindow | None) -> None:
        counts = self.kernel_counts = kernel_counts(window)
        self.kernel_totals.update(counts)
        if counts["dropped"] or counts["lost_markers"]:
            # The GPU score of this window stands on part of its kernels: say so.
            logger.warning(
                "kernel records lost: the GPU score uses part of this window's kernels",
                extra=counts,
            )

    def mark_sent(self, payload: RankPayload) -> None:
        """Record the names ``payload`` carried; call once the gather has delivered it."""
        if len(self.sent_kernel_names) > MAX_NAMES:
            self.sent_kernel_names.clear()
        self.sent_kernel_names.update(payload.names)

    def _is_comm(self, key: str) -> bool:
        # Kernel keys repeat every report: remember the verdict (a regex search each,
        # ~0.5 ms of a 200-kernel report). Keys are bounded upstream; the cache too.
        cache = self._comm_verdicts
        verdict = cache.get(key)
        if verdict is None:
            from pacekeeper.cupti_ext.kernel_keys import is_comm_kernel

            if len(cache) >= _COMM_CACHE_MAX:
                cache.clear()
            verdict = cache[key] = bool(is_comm_kernel(key, self._comm_extra))
        return verdict


def _cuda_synchronize() -> None:
    # Only reached with a GPU backend: a CPU-only job makes no CUDA call at all.
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _launch_threads(window: KernelWindow | None, names: list[str]) -> np.ndarray | None:
    """Per kernel, its launches' typical threads (``KernelWindow.launch_threads``, NaN
    unknown); None when the backend gives none (the payload then carries none)."""
    launches = getattr(window, "launch_threads", None)
    if not launches:
        return None
    return np.array([launches.get(k, math.nan) for k in names], np.float64)


def _gpu_wait_share(comm_ns: float, kernels: dict[str, KernelStat]) -> float | None:
    """Share of the traced GPU time spent in communication kernels: with NCCL the host
    only queues a collective and the wait for peers happens on the GPU, in kernels that
    spin until every rank has joined. None without any."""
    if comm_ns <= 0:
        return None
    busy = comm_ns + sum(s.total_ns for s in kernels.values())
    return min(1.0, comm_ns / busy)


def _larger(host: float | None, gpu: float | None) -> float | None:
    """One wait share for the rank: a job waits on the host (gloo, blocking calls) or on
    the GPU (NCCL), and where both are timed they see the same wait, so the larger
    counts rather than the sum."""
    if host is None or gpu is None:
        return gpu if host is None else host
    return max(host, gpu)
