"""Per-job metrics with a bounded label set: worst score, ranks below the act threshold,
actions decided, each labelled ``job``.

A ``job`` label is one series per job per metric, and jobs come and go all day; so the
jobs shown are bounded twice. At most ``max_jobs`` (least recently reconciled dropped
first), and a job not reconciled for ``idle_s`` is dropped at the next scrape or
reconcile: a finished job's StragglerReport goes with it and its reconciles stop. A
dropped job that reports again starts its counters over, which ``rate()`` reads as a
counter reset. Samples are built at scrape time from a small table, so dropping a job
is forgetting a row, not hunting for label sets.

The label is ``job_key`` (``namespace/name``, ``ray:<id>``), not ``job``: Prometheus
gives every scraped series the target's own ``job`` label and would rename ours to
``exported_job``.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

MAX_JOBS = 200
"""Jobs with per-job series; at 200 jobs and a handful of action kinds that is ~2,000
series, well inside what one Prometheus target should carry."""
IDLE_S = 1800.0
"""Seconds without a reconcile after which a job's series go. A reporting job is
reconciled at least once per report interval (60 s by default; the adaptive interval
stays far below this)."""


@dataclass(slots=True)
class _Job:
    seen_at: float
    report_id: object = None
    worst_score: float | None = None
    below_act: int | None = None
    act_threshold: float | None = None
    actions: dict[tuple[str, str], int] = field(default_factory=dict)


class JobMetrics:
    """A Prometheus collector; ``ControllerMetrics`` registers one and feeds it."""

    def __init__(
        self,
        *,
        max_jobs: int = MAX_JOBS,
        idle_s: float = IDLE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_jobs < 1:
            raise ValueError(f"per-job metrics max_jobs must be >= 1, got {max_jobs!r}")
        if not idle_s > 0:
            raise ValueError(f"per-job metrics idle_s must be > 0, got {idle_s!r}")
        self.max_jobs = max_jobs
        self.idle_s = idle_s
        self._clock = clock
        self._jobs: OrderedDict[str, _Job] = OrderedDict()
        self._lock = threading.Lock()
        self.dropped = 0
        """Jobs whose series were dropped, by the bound or by idleness."""

    def jobs(self) -> list[str]:
        with self._lock:
            self._sweep(self._clock())
            return list(self._jobs)

    def observe(
        self,
        job: str,
        *,
        report_id: object,
        score: Callable[[], tuple[float | None, int | None, float | None]] | None,
        decisions: Sequence[Any] = (),
    ) -> None:
        """Record one reconcile of ``job``. ``score`` gives (worst score, ranks below
        act, act threshold); it is called only for a ``report_id`` not seen yet (None: no
        report), since it walks every rank. ``decisions``: ``job``'s act and undo ones count as
        actions."""
        now = self._clock()
        with self._lock:
            row = self._jobs.get(job)
            if row is None:
                row = self._jobs[job] = _Job(seen_at=now)
            row.seen_at = now
            self._jobs.move_to_end(job)
            fresh = report_id is not None and report_id != row.report_id
            for d in decisions:
                verdict = getattr(d.verdict, "value", str(d.verdict))
                # A reconcile also decides for other jobs (a shared node's mark): those
                # are counted when their own job is reconciled and records them.
                if d.job != job or d.action is None or verdict not in ("act", "undo"):
                    continue
                key = (getattr(d.action, "value", str(d.action)), verdict)
                row.actions[key] = row.actions.get(key, 0) + 1
            self._sweep(now)
        if fresh and score is not None:
            # Outside the lock: a scrape must not wait on a walk of 16,384 ranks.
            worst, below, act = score()
            with self._lock:
                row = self._jobs.get(job)
                if row is not None:
                    row.report_id = report_id
                    row.worst_score, row.below_act, row.act_threshold = worst, below, act

    def forget(self, job: str) -> None:
        with self._lock:
            if self._jobs.pop(job, None) is not None:
                self.dropped += 1

    def _sweep(self, now: float) -> None:
        while len(self._jobs) > self.max_jobs:
            self._jobs.popitem(last=False)
            self.dropped += 1
        while self._jobs:
            oldest = next(iter(self._jobs.values()))
            if now - oldest.seen_at < self.idle_s:
                break
            self._jobs.popitem(last=False)
            self.dropped += 1

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        worst = GaugeMetricFamily(
            "pacekeeper_job_worst_score",
            "Lowest score of any rank in the job's latest report, as the job reported it "
            "(1.0 = as fast as the best).",
            labels=["job_key"],
        )
        below = GaugeMetricFamily(
            "pacekeeper_job_ranks_below_act",
            "Ranks of the job's latest report below its policy's thresholds.act, judged as "
            "the policy judges (its score kind and reference).",
            labels=["job_key"],
        )
        act = GaugeMetricFamily(
            "pacekeeper_job_act_threshold",
            "thresholds.act of the policy judging the job.",
            labels=["job_key"],
        )
        actions = CounterMetricFamily(
            "pacekeeper_job_actions",
            "Act and undo decisions for the job, by action (observe mode's would-be "
            'actions are holds: pacekeeper_decisions{reason="ObserveMode"}).',
            labels=["job_key", "action", "verdict"],
        )
        tracked = GaugeMetricFamily(
            "pacekeeper_job_metrics_jobs",
            f"Jobs with per-job series now (at most {self.max_jobs}; idle ones go after "
            f"{self.idle_s:g} s).",
        )
        dropped = CounterMetricFamily(
            "pacekeeper_job_metrics_dropped",
            "Jobs whose per-job series were dropped (the bound, or no reconcile for long).",
        )
        with self._lock:
            self._sweep(self._clock())
            for job, row in self._jobs.items():
                if row.worst_score is not None:
                    worst.add_metric([job], row.worst_score)
                if row.below_act is not None:
                    below.add_metric([job], row.below_act)
                if row.act_threshold is not None:
                    act.add_metric([job], row.act_threshold)
                for (action, verdict), n in sorted(row.actions.items()):
                    actions.add_metric([job, action, verdict], n)
            tracked.add_metric([], len(self._jobs))
            dropped.add_metric([], self.dropped)
        yield from (worst, below, act, actions, tracked, dropped)


def report_scores(report: Any, policy: Any) -> tuple[float | None, int | None, float | None]:
    """(worst score as reported, ranks below ``policy``'s act as it judges them, act).

    Judged without the GPUs' learned speed factors (hardware memory): the engine's own
    count can differ by a calibrated GPU near the line."""
    from pacekeeper.controller.core.attribution import digest

    if policy is None:
        return report.summary.min_score, None, None
    return report.summary.min_score, len(digest(report, policy).below), policy.thresholds.act
