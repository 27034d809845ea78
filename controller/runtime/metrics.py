"""Prometheus metrics of the controller. One Reason value is one label value.

Each controller process owns one ``ControllerMetrics`` on its own registry, so tests (and
two operators in one process) never collide on the global default registry. How the
registry is served (who may read it, over what) is ``metrics_serving.py``.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from .metrics_jobs import IDLE_S, MAX_JOBS, JobMetrics, report_scores

logger = logging.getLogger(__name__)

KERNEL_JOBS = 16384
"""Jobs whose last counted report sequence ``count_kernel_records`` remembers."""


class ControllerMetrics:
    def __init__(
        self,
        registry: Any | None = None,
        *,
        max_jobs: int = MAX_JOBS,
        job_idle_s: float = IDLE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.decisions = Counter(
            "pacekeeper_decisions",
            "Decisions taken, including each decision not to act.",
            ["verdict", "action", "reason", "mode"],
            registry=r,
        )
        self.actions = Counter(
            "pacekeeper_actions",
            "Actions sent to the API, by result (applied, retry, failed).",
            ["action", "result"],
            registry=r,
        )
        self.budget_used = Gauge(
            "pacekeeper_budget_used",
            "Disruptive actions in force, by scope.",
            ["scope"],
            registry=r,
        )
        self.budget_limit = Gauge(
            "pacekeeper_budget_limit",
            "Budget limit, by scope (absent = unlimited).",
            ["scope"],
            registry=r,
        )
        self.breaker_open = Gauge(
            "pacekeeper_breaker_open", "1 while the circuit breaker blocks new actions.", registry=r
        )
        self.reports_rejected = Counter(
            "pacekeeper_reports_rejected",
            "Score reports refused at the boundary.",
            ["reason"],
            registry=r,
        )
        self.reconcile_seconds = Histogram(
            "pacekeeper_reconcile_seconds", "Time to reconcile one job.", registry=r
        )
        self.time_to_act_seconds = Histogram(
            "pacekeeper_time_to_act_seconds",
            "From the report that crossed the line to the action's API call.",
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
            registry=r,
        )
        self.leader = Gauge("pacekeeper_leader", "1 while this replica leads.", registry=r)
        self.queue_depth = Gauge(
            "pacekeeper_queue_depth",
            "Jobs due for a reconcile that no worker has taken yet (not-yet-due timers "
            "left out): above the worker count for long, the controller is behind.",
            registry=r,
        )
        self.queue_longest_wait = Gauge(
            "pacekeeper_queue_longest_wait_seconds",
            "How long the longest-waiting due job has waited for a worker.",
            registry=r,
        )
        self.hardware_nodes = Gauge(
            "pacekeeper_hardware_nodes",
            "Nodes the memory of hardware remembers (docs/controller.md).",
            registry=r,
        )
        self.hardware_gpus = Gauge(
            "pacekeeper_hardware_gpus",
            "GPUs remembered, by what is known of them: all, calibrated (a learned speed "
            "factor), slowHistory (slow against their peers in some job's record).",
            ["state"],
            registry=r,
        )
        self.kernel_records = Counter(
            "pacekeeper_kernel_records",
            "Kernel records the jobs' reports say their reporting rank's windows had, by "
            "what became of them (attributed, unattributed, held, dropped, lostMarkers): "
            "a rising dropped or lostMarkers means GPU scores built on part of the kernels. "
            "The jobs' own figures; each report counted once per controller process.",
            ["kind"],
            registry=r,
        )
        self._kernel_counted: OrderedDict[str, int] = OrderedDict()
        self._kernel_lock = threading.Lock()
        self.reports_refused = Counter(
            "pacekeeper_reports_refused",
            "Reports never acted on: identities the API contradicts (UntrustedReport) or no "
            "workload behind them (UnboundReport).",
            ["reason"],
            registry=r,
        )
        self.reports_repaired = Counter(
            "pacekeeper_reports_repaired",
            "StragglerReports the controller found made by someone else and repaired: "
            "recreated (not bound to the live workload) or controlReset (bound, spec.control "
            "of its maker's choosing removed). Any rise means a pod created a report before "
            "the controller did (docs/security.md).",
            ["repair"],
            registry=r,
        )
        self.jobs = JobMetrics(max_jobs=max_jobs, idle_s=job_idle_s, clock=clock)
        r.register(self.jobs)

    def show_job(
        self, job: str, report: Any, policies: Any, policy_name: str | None, decisions: Any
    ) -> None:
        """Per-job series after one reconcile (``metrics_jobs``): ``report`` is the job's
        latest (a ScoreReport, else no scores), judged by ``policies``' policy
        ``policy_name`` (None: the default one). Never raises: a metric is not worth a
        failed reconcile."""
        from pacekeeper.detector.score_report import ScoreReport

        try:
            if not isinstance(report, ScoreReport):
                self.jobs.observe(job, report_id=None, score=None, decisions=decisions)
                return
            picked = policies.policy_for(policy_name) if policies is not None else None
            policy = picked[1] if picked is not None else None
            self.jobs.observe(
                job,
                report_id=(report.sequence, report.generated_at),
                score=lambda: report_scores(report, policy),
                decisions=decisions,
            )
        except Exception:
            logger.warning("per-job metrics not updated", extra={"job": job}, exc_info=True)

    def watch_queue(self, backlog: Callable[[], tuple[int, float]]) -> None:
        """Queue gauges read at each scrape from ``backlog`` (``WorkQueue.backlog``)."""
        self.queue_depth.set_function(lambda: backlog()[0])
        self.queue_longest_wait.set_function(lambda: backlog()[1])

    def show_budgets(self, usage: Mapping[str, tuple[int, int | None]]) -> None:
        """Budget gauges from ``budgets.cluster_usage``; an unlimited scope has no limit
        sample (an alert on used/limit then never divides by a made-up number)."""
        for scope, (used, limit) in usage.items():
            self.budget_used.labels(scope).set(used)
            if limit is None:
                with contextlib.suppress(KeyError):
                    self.budget_limit.remove(scope)
            else:
                self.budget_limit.labels(scope).set(limit)

    def count_kernel_records(self, job: str, sequence: int, timing: Any) -> None:
        """Add a report's kernel counts (``ScoreReport.kernel_timing``) once: a job's
        report is reconciled again and again, its sequence tells a new one. The jobs
        remembered are bounded (``KERNEL_JOBS``, least recently reported first out; a
        job forgotten and reconciled again on the same report counts it twice)."""
        with self._kernel_lock:
            if self._kernel_counted.get(job) == sequence:
                return
            self._kernel_counted[job] = sequence
            self._kernel_counted.move_to_end(job)
            while len(self._kernel_counted) > KERNEL_JOBS:
                self._kernel_counted.popitem(last=False)
        for kind, n in (
            ("attributed", timing.attributed_records),
            ("unattributed", timing.unattributed_records),
            ("held", timing.held_records),
            ("dropped", timing.dropped_records),
            ("lostMarkers", timing.lost_markers),
        ):
            if n:
                self.kernel_records.labels(kind).inc(n)

    def show_hardware(self, summary: Any) -> None:
        """Memory gauges from ``hardware_views.summary`` (``nodes``, ``gpus``,
        ``calibrated_gpus``, ``slow_gpus``)."""
        self.hardware_nodes.set(summary.nodes)
        self.hardware_gpus.labels("all").set(summary.gpus)
        self.hardware_gpus.labels("calibrated").set(summary.calibrated_gpus)
        self.hardware_gpus.labels("slowHistory").set(summary.slow_gpus)
