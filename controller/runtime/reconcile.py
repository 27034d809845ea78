"""One level-based ``reconcile_job(job_key)``: read the world, decide, persist, act.

Every trigger (a StragglerReport changed, a pod or node changed, a timer) ends here,
and the same world always gives the same result: the core's state lives in the cluster
(``state_store``), decisions carry idempotency keys, and actuators check before they
write. Synchronous on purpose: the operator runs several at once, each in a thread.

Concurrency. Two reconciles of one job never overlap (``JobSlots``: a second call waits
for the first). Reconciles of different jobs overlap everywhere but in one place: the
cluster-wide state (our marks, rate-limit stamps, breaker) is loaded, decided on and
saved under one lock, so each decision counts every budget use decided before it and no
budget is ever exceeded. Only ``decide`` and a write of the cluster ConfigMap when it
changed run there; the report, its trust checks, the job's state, acting and the
display copy run outside it. The ConfigMap is written with its resourceVersion, so
another writer (a replica that lost the Lease) still gets 409, and the reconcile reads
again and decides again.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from pacekeeper.controller.actuators.events import EventAction, EventType
from pacekeeper.controller.actuators.kubernetes_actuators import KubernetesActuators
from pacekeeper.controller.core.budgets import cluster_usage
from pacekeeper.controller.core.decisions import (
    JOB_SUBJECT,
    Decision,
    Reason,
    Verdict,
    summary_lines,
)
from pacekeeper.controller.core.engine import decide
from pacekeeper.controller.core.hardware_views import summary as hardware_summary
from pacekeeper.controller.core.ids import JobKey
from pacekeeper.controller.core.observations import ClusterView, RejectedReport, Window
from pacekeeper.controller.core.policy import PolicyDocument
from pacekeeper.controller.core.report_columns import columnar
from pacekeeper.controller.core.state import State
from pacekeeper.controller.core.trust import binding_of, place_report
from pacekeeper.controller.runtime.acting import Acting, report_ref
from pacekeeper.controller.runtime.conditions import conditions_of, verdict_of
from pacekeeper.controller.runtime.metrics import ControllerMetrics
from pacekeeper.controller.runtime.report_birth import Later, ReportBirth
from pacekeeper.controller.runtime.state_store import (
    DECISIONS_KEPT,
    JobRecord,
    StateStore,
    as_stored,
    controller_status,
    display_outdated,
)
from pacekeeper.controller.runtime.telling import WorkloadTeller
from pacekeeper.controller.sources.kubernetes import (
    KubernetesSource,
    OptIn,
    cluster_view_of,
    job_key_of,
    job_view_of,
    opt_in_of,
    pods_of_job,
    report_of,
)
from pacekeeper.controller.sources.workloads import WorkloadResolver
from pacekeeper.controller.sources.world_cache import WorldCache
from pacekeeper.detector.score_report import ScoreReport

logger = logging.getLogger(__name__)

STATE_CONFLICT_RETRIES = 3
RETRY_SOON_S = 5.0
HARDWARE_GAUGES_EVERY_S = 15.0
"""The hardware gauges are refreshed at most this often (Prometheus scrapes every 15-60 s)."""


@dataclass(slots=True)
class ReconcileResult:
    decisions: tuple[Decision, ...] = ()
    recheck_at: datetime | None = None
    applied: list[str] = field(default_factory=list)
    """``<action> <target> <outcome>`` for each actuator call (tests and logs)."""
    failed: list[Decision] = field(default_factory=list)
    """One ``ActionFailed`` record per action the API refused, with its answer."""
    gone: bool = False
    """The StragglerReport no longer exists (what we kept of it is deleted too)."""


class JobSlots:
    """At most one holder per job: a second ``hold`` of a held job waits its turn."""

    def __init__(self) -> None:
        self._held: set[JobKey] = set()
        self._changed = threading.Condition()

    @contextlib.contextmanager
    def hold(self, key: JobKey) -> Iterator[None]:
        with self._changed:
            self._changed.wait_for(lambda: key not in self._held)
            self._held.add(key)
        try:
            yield
        finally:
            with self._changed:
                self._held.discard(key)
                self._changed.notify_all()

    def held(self) -> frozenset[JobKey]:
        with self._changed:
            return frozenset(self._held)


def _parse_ts(value: Any) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def _started_at(obj: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> datetime | None:
    """This incarnation's start: its oldest live pod, else the report object's creation."""
    starts = [
        t for p in pods if (t := _parse_ts((p.get("status") or {}).get("startTime"))) is not None
    ]
    if starts:
        return min(starts)
    return _parse_ts((obj.get("metadata") or {}).get("creationTimestamp"))


def _new_records(
    decisions: Sequence[Decision], previous: Sequence[Mapping[str, Any]]
) -> list[Decision]:
    """Decisions that say something new for their subject (holds repeat every cycle;
    records and Events need them once, logs and metrics get every one). ``previous``
    comes from the controller's own store, never from the job's status."""
    last: dict[str, tuple[Any, ...]] = {}
    for rec in previous:
        last[str(rec.get("subject"))] = (rec.get("verdict"), rec.get("action"), rec.get("reason"))
    out = []
    for d in decisions:
        sig = (d.verdict.value, d.action.value if d.action else None, d.reason.value)
        if last.get(d.subject) != sig:
            out.append(d)
            last[d.subject] = sig
    return out


class Reconciler:
    def __init__(
        self,
        api_client: Any,
        policies: PolicyDocument,
        *,
        namespace: str,
        state_namespace: str | None = None,
        owner: str = "pacekeeper",
        instance: str = "",
        metrics: ControllerMetrics | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        is_leader: Callable[[], bool] = lambda: True,
        actuators: KubernetesActuators | None = None,
        cache: WorldCache | None = None,
        reuse_state_reads: bool = True,
    ) -> None:
        """``cache``: the operator's watch-fed pods and nodes (None: LIST them each time).
        ``reuse_state_reads``: answer state loads from the store's own last read or write
        (``state_store``; the resourceVersion on every write keeps that safe).
        ``state_namespace``: where the state ConfigMaps live (None: ``namespace``)."""
        if cache is not None and cache.owner != owner:
            raise ValueError(f"the cache shows {cache.owner!r}'s marks, the reconciler {owner!r}")
        self.policies = policies
        self.owner = owner
        self.metrics = metrics or ControllerMetrics()
        self.source = KubernetesSource(api_client)
        self.store = StateStore(
            api_client, namespace=state_namespace or namespace, controller_namespace=namespace,
            reuse_reads=reuse_state_reads,
        )  # fmt: skip
        self.actuators = actuators or KubernetesActuators(
            api_client, owner=owner, instance=instance
        )
        self._clock = clock
        self._is_leader = is_leader
        self._slots = JobSlots()
        self._cluster_lock = threading.Lock()
        """Held from loading the cluster state to saving it: one decision at a time."""
        self.acting = Acting(self.actuators, self.metrics, clock)
        self.resolver = WorkloadResolver(api_client)
        self.telling = WorkloadTeller(self.actuators, self.resolver, clock)
        self.birth = ReportBirth(
            api_client, self.store, self.resolver, self.actuators,
            metrics=self.metrics, clock=clock,
        )  # fmt: skip
        self.cache = cache
        self._handed: dict[JobKey, list[Decision]] = {}
        """Decisions about another job than the one reconciled (the cluster pass notices a
        human's change to any job's mark): that job's own next reconcile records them."""
        self._handed_lock = threading.Lock()
        self._hardware_shown_at: datetime | None = None

    # --- public -------------------------------------------------------------------------

    def known_jobs(self) -> list[JobKey]:
        return [job_key_of(o) for o in self.source.list_report_objects()]

    def reconcile_job(
        self, key: JobKey, report_object: Mapping[str, Any] | None = None
    ) -> ReconcileResult:
        """``report_object``: the StragglerReport as the newest watch event delivered it,
        instead of a GET (None: read it). A GET could be fresher only by the watch's lag,
        and the report's own ``generatedAt`` meets the policy's ``maxReportAgeS`` either
        way, so a level-based reconcile loses nothing by it."""
        with self._slots.hold(key):
            started = time.perf_counter()
            try:
                if not self._is_leader():
                    return ReconcileResult()
                namespace, _, name = key.partition("/")
                obj = report_object
                if obj is None:
                    obj = self.source.read_report_object(namespace, name)
                # Created by us, or repaired, before anything in it is believed.
                born = self.birth.ensure(key, obj, self._pods_of_job(namespace, name))
                if isinstance(born, Later):
                    logger.info("stragglerreport not settled", extra={"job": key, "why": born.why})
                    return ReconcileResult(
                        recheck_at=self._clock() + timedelta(seconds=RETRY_SOON_S)
                    )
                obj = born
                if obj is None:
                    self.acting.pdb_blocked.pop(key, None)
                    with self._handed_lock:
                        self._handed.pop(key, None)
                    self.store.delete_job(key)
                    return ReconcileResult(gone=True)
                for _ in range(STATE_CONFLICT_RETRIES):
                    result = self._reconcile_once(key, obj)
                    if result is not None:
                        return result
                logger.warning("state kept changing under us", extra={"job": key})
                return ReconcileResult(recheck_at=self._clock() + timedelta(seconds=RETRY_SOON_S))
            finally:
                self.metrics.reconcile_seconds.observe(time.perf_counter() - started)

    def in_flight(self) -> frozenset[JobKey]:
        """Jobs being reconciled now."""
        return self._slots.held()

    # --- one attempt ----------------------------------------------------------------------

    def _pods_of_job(self, namespace: str, name: str) -> list[Mapping[str, Any]]:
        if self.cache is not None and self.cache.primed:
            return list(self.cache.pods_of_job(namespace, name))
        return pods_of_job(self.source.list_pods(namespace), name)

    def _cluster_view(self) -> ClusterView:
        if self.cache is not None and self.cache.primed:
            return self.cache.cluster_view()
        return cluster_view_of(self.source.list_nodes(), self.owner)

    def _stamp_since(self, now: datetime) -> None:
        """The first write of this version stamps when it began (``jobStateSince``), before
        any job's state is loaded: an old release's state is taken over only for reports
        created earlier."""
        if self.store.job_state_since is not None:
            return
        with self._cluster_lock:
            cluster_state = self.store.load_cluster()
            if self.store.job_state_since is None:
                self.store.save_cluster(cluster_state, now)

    def _reconcile_once(self, key: JobKey, obj: Mapping[str, Any]) -> ReconcileResult | None:
        """None: a state write met a newer version; read again and decide again."""
        from kubernetes.client.exceptions import ApiException

        if not self._is_leader():
            return ReconcileResult()
        namespace, _, name = key.partition("/")
        now = self._clock()
        pods = self._pods_of_job(namespace, name)
        try:
            self._stamp_since(now)
            record = self.store.load_job(key, obj)
        except ApiException as e:
            if e.status == 409:
                return None
            raise
        workload = self.resolver.top_owner(pods)
        binding = binding_of(obj, pods, workload.uid if workload is not None else None)
        if not binding.bound and record.state is None:
            return self._unbound(key, obj, record, binding.problem, now)

        # The job's part, in parallel with other jobs': what its report says and may say.
        opt_in = opt_in_of(pods) if binding.bound else OptIn(False, None, None, None)
        for problem in opt_in.problems:
            logger.warning("job annotation ignored", extra={"job": key, "problem": problem})
        report = report_of(obj, now)
        if isinstance(report, ScoreReport):
            report = place_report(report, pods, now, ranks_per_pod=opt_in.ranks_per_pod)
        if isinstance(report, ScoreReport):
            # Its columns read once here, where it was parsed and placed (issue 42).
            report = columnar(report)
        if isinstance(report, ScoreReport):
            self.metrics.count_kernel_records(key, report.sequence, report.kernel_timing)
        view = job_view_of(obj, report, opt_in, _started_at(obj, pods))
        blocked = self.acting.pdb_blocked.get(key)
        if blocked:
            view = replace(view, pdb_blocked_nodes=frozenset(blocked))
        cluster_view = self._cluster_view()

        # The cluster's part, one reconcile at a time; persisted before anything acts.
        with self._cluster_lock:
            cluster_state = self.store.load_cluster()
            hardware = self.store.hardware.load()
            state = State(
                jobs={key: record.state} if record.state else {},
                cluster=cluster_state,
                hardware=hardware,
            )
            window = Window(jobs=(view,), cluster=cluster_view)
            outcome = decide(window, state, self.policies, now)
            gauges_at = self._hardware_shown_at
            if gauges_at is None or (
                outcome.next_state.hardware is not hardware
                and (now - gauges_at).total_seconds() >= HARDWARE_GAUGES_EVERY_S
            ):
                # The memory changes at nearly every report; the gauges walk all of it
                # under the cluster lock, so they follow it at a scrape's pace.
                self.metrics.show_hardware(hardware_summary(outcome.next_state.hardware))
                self._hardware_shown_at = now
            # What the chart's PacekeeperBreakerOpen alert reads.
            open_until = outcome.next_state.cluster.breaker_open_until
            self.metrics.breaker_open.set(int(open_until is not None and now < open_until))
            self.metrics.show_budgets(
                cluster_usage(
                    outcome.next_state.cluster, self.policies.cluster,
                    cluster_view.node_count(), now,
                )
            )  # fmt: skip
            try:
                if outcome.next_state.cluster != cluster_state:
                    self.store.save_cluster(outcome.next_state.cluster, now)
                if outcome.next_state.hardware != hardware:
                    self.store.hardware.save(outcome.next_state.hardware)
            except ApiException as e:
                if e.status == 409:
                    return None  # another writer: re-read and decide again
                raise
        next_job = outcome.next_state.jobs.get(key)
        # A job's records (and its report's display copy) hold its own decisions only.
        with self._handed_lock:
            handed = list(self._handed.get(key, ()))
        mine = [d for d in outcome.decisions if d.job == key]
        fresh = _new_records([*handed, *mine], record.decisions)
        try:
            if next_job != record.state or fresh or record.resource_version is None:
                record = self.store.save_job(record, next_job, record.with_decisions(fresh))
        except ApiException as e:
            if e.status in (404, 409):
                return None  # our copy was stale, or the ConfigMap went: read again
            raise
        self._hand_over(key, handed, [d for d in outcome.decisions if d.job != key])

        for line in summary_lines(outcome.decisions):
            logger.info("decision", extra={"job": key, "summary": line})
        for d in outcome.decisions:
            self.metrics.decisions.labels(
                d.verdict.value, d.action.value if d.action else "", d.reason.value, d.mode.value
            ).inc()
        self.metrics.show_job(key, report, self.policies, view.policy_name, outcome.decisions)

        sequence = report.sequence if isinstance(report, ScoreReport) else None
        shown = self._mirror(
            obj, record.decisions, sequence, conditions=self._conditions(obj, mine, bound=True)
        )
        if isinstance(report, RejectedReport) and report.reason is Reason.UNTRUSTED_REPORT:
            self._refused(key, obj, report, fresh)

        acted = self.acting.apply(outcome.decisions, fresh, obj, pods, report)
        self.telling.tell([*fresh, *acted.failed], pods)
        recheck = [t for t in (outcome.recheck_at, acted.retry_at) if t is not None]
        result = ReconcileResult(
            decisions=outcome.decisions, recheck_at=min(recheck, default=None),
            applied=acted.applied, failed=acted.failed,
        )  # fmt: skip
        if result.failed:
            # What the server answered goes where people look: the job's records. The one
            # path with a second write of each: an action the API refused.
            try:
                record = self.store.save_job(record, next_job, record.with_decisions(result.failed))
            except ApiException as e:
                logger.warning("failure record not written", extra={"job": key, "status": e.status})
            else:
                self._mirror(obj, record.decisions, sequence, shown)
        return result

    def _hand_over(
        self, key: JobKey, recorded: Sequence[Decision], theirs: Sequence[Decision]
    ) -> None:
        """Drop the decisions handed to ``key`` that it ``recorded``; hand ``theirs`` on."""
        with self._handed_lock:
            if recorded:
                left = [d for d in self._handed.get(key, ()) if all(d is not r for r in recorded)]
                self._handed[key] = left
            for d in theirs:
                if d.job:  # a mark without a holder has no job to tell
                    kept = self._handed.setdefault(d.job, [])
                    kept[:] = [*kept, d][-DECISIONS_KEPT:]

    # --- reports we do not believe -----------------------------------------------------

    def _unbound(
        self, key: JobKey, obj: Mapping[str, Any], record: JobRecord, problem: str, now: datetime
    ) -> ReconcileResult:
        """A report no workload stands behind never reaches the core: it can spend no
        budget, trip no breaker and leave no state behind. One record says why."""
        d = Decision(
            job=key, subject=JOB_SUBJECT, verdict=Verdict.HOLD, action=None,
            reason=Reason.UNBOUND_REPORT, evidence={"problem": problem},
            mode=self.policies.mode, decided_at=now,
        )  # fmt: skip
        fresh = _new_records([d], record.decisions)
        self.metrics.decisions.labels("hold", "", d.reason.value, d.mode.value).inc()
        if fresh:
            self.metrics.reports_refused.labels(d.reason.value).inc()
            logger.warning("report ignored", extra={"job": key, "reason": d.reason.value,
                                                    "problem": problem})  # fmt: skip
            # The display copy only: the controller keeps nothing for a ghost.
            conditions = self._conditions(obj, [d], bound=False, problem=problem)
            self._mirror(obj, record.with_decisions(fresh), None, conditions=conditions)
        return ReconcileResult(decisions=(d,))

    def _refused(
        self, key: JobKey, obj: Mapping[str, Any], report: RejectedReport, fresh: list[Decision]
    ) -> None:
        if not any(d.reason is Reason.UNTRUSTED_REPORT for d in fresh):
            return  # said once, while the report keeps contradicting the API
        self.metrics.reports_refused.labels(Reason.UNTRUSTED_REPORT.value).inc()
        logger.warning(
            "report refused",
            extra={"job": key, "reason": Reason.UNTRUSTED_REPORT.value, "error": report.error},
        )
        prov = self.actuators.provenance(key, Reason.UNTRUSTED_REPORT.value, "", self._clock())
        self.actuators.events.record(
            report_ref(obj), prov, EventAction.NOTIFY,
            f"{Reason.UNTRUSTED_REPORT.value}: {report.error}"[:1000],
            event_type=EventType.WARNING,
        )  # fmt: skip

    def _conditions(
        self,
        obj: Mapping[str, Any],
        decisions: Sequence[Decision],
        *,
        bound: bool,
        problem: str = "",
    ) -> dict[str, Any]:
        """``status.conditions`` and ``status.verdict`` for this reconcile's decisions."""
        status = obj.get("status") or {}
        generation = (obj.get("metadata") or {}).get("generation")
        out: dict[str, Any] = {
            "conditions": conditions_of(
                decisions, status.get("conditions") or [], bound=bound, problem=problem,
                generation=int(generation) if generation is not None else None,
                now=self._clock(),
            )
        }  # fmt: skip
        verdict = verdict_of(decisions)
        if verdict is not None:
            out["verdict"] = verdict
        return out

    def _mirror(
        self,
        obj: Mapping[str, Any],
        records: Sequence[Mapping[str, Any]],
        sequence: int | None,
        previous: Mapping[str, Any] | None = None,
        *,
        conditions: Mapping[str, Any] | None = None,
    ) -> Mapping[str, Any]:
        """The display copy in status.controller (and ``conditions``: the top-level
        ``status.conditions`` and ``status.verdict``), written only when it changed
        (against ``previous``, else the object's); a failure to write it loses nothing.
        Returns the block now shown."""
        from kubernetes.client.exceptions import ApiException

        meta = obj.get("metadata") or {}
        status = obj.get("status") or {}
        if previous is None:
            previous = status.get("controller") or {}
        now = self._clock()
        block = controller_status(records, sequence, now)
        shown = {
            k: v for k, v in (conditions or {}).items()
            if as_stored(v) != as_stored(status.get(k))
        }  # fmt: skip
        if not display_outdated(block, previous, now) and not shown:
            return previous
        try:
            self.store.mirror_status(str(meta.get("namespace")), str(meta.get("name")), block,
                                     previous, shown)  # fmt: skip
        except ApiException as e:
            logger.warning(
                "status display not written",
                extra={"job": job_key_of(obj), "status": e.status, "reason": e.reason},
            )
            return previous
        return block
