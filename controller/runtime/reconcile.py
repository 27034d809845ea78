"""One level-based ``reconcile_job(job_key)``: read the world, decide, persist, act.

Every trigger (a StragglerReport changed, a pod or node changed, a timer) ends here,
and the same world always gives the same result: the core's state lives in the cluster
(``state_store``), decisions carry idempotency keys, and actuators check before they
write. Synchronous on purpose: the operator runs it in a worker thread, one job at a
time, so two reconciles never race on the cluster-wide budget.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, assert_never

from pacekeeper.controller.actuators.errors import GiveUp, RetryLater
from pacekeeper.controller.actuators.events import EventAction, EventType, ObjectRef
from pacekeeper.controller.actuators.kubernetes_actuators import KubernetesActuators
from pacekeeper.controller.core.decisions import (
    JOB_SUBJECT,
    Decision,
    Reason,
    Verdict,
    summary_lines,
)
from pacekeeper.controller.core.engine import decide
from pacekeeper.controller.core.ids import JobKey, NodeName
from pacekeeper.controller.core.observations import RejectedReport, Window
from pacekeeper.controller.core.policy import ActionKind, Mode, PolicyDocument
from pacekeeper.controller.core.ranks import RankUnresolved, resolve_rank
from pacekeeper.controller.core.state import State
from pacekeeper.controller.core.trust import binding_of, place_report
from pacekeeper.controller.runtime.metrics import ControllerMetrics
from pacekeeper.controller.runtime.state_store import JobRecord, StateStore, controller_status
from pacekeeper.controller.sources.kubernetes import (
    JOB_NAME_LABELS,
    KubernetesSource,
    OptIn,
    WorldCache,
    cluster_view_of,
    job_key_of,
    job_view_of,
    opt_in_of,
    pods_of_job,
    report_of,
)
from pacekeeper.detector.reporters.k8s_status import GROUP, KIND, VERSION
from pacekeeper.detector.score_report import ScoreReport

logger = logging.getLogger(__name__)

STATE_CONFLICT_RETRIES = 3
RETRY_SOON_S = 5.0


@dataclass(slots=True)
class ReconcileResult:
    decisions: tuple[Decision, ...] = ()
    recheck_at: datetime | None = None
    applied: list[str] = field(default_factory=list)
    """``<action> <target> <outcome>`` for each actuator call (tests and logs)."""
    failed: list[Decision] = field(default_factory=list)
    """One ``ActionFailed`` record per action the API refused, with its answer."""


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


def _job_selector(pods: Sequence[Mapping[str, Any]], name: str) -> str | None:
    for label in JOB_NAME_LABELS:
        if any(((p.get("metadata") or {}).get("labels") or {}).get(label) == name for p in pods):
            return f"{label}={name}"
    return None


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
        owner: str = "pacekeeper",
        instance: str = "",
        metrics: ControllerMetrics | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        is_leader: Callable[[], bool] = lambda: True,
        actuators: KubernetesActuators | None = None,
        cache: WorldCache | None = None,
    ) -> None:
        self.policies = policies
        self.owner = owner
        self.metrics = metrics or ControllerMetrics()
        self.source = KubernetesSource(api_client)
        self.store = StateStore(api_client, namespace=namespace)
        self.actuators = actuators or KubernetesActuators(
            api_client, owner=owner, instance=instance
        )
        self._clock = clock
        self._is_leader = is_leader
        self._lock = threading.Lock()
        self._pdb_blocked: dict[JobKey, set[NodeName]] = {}
        self.cache = cache

    # --- public -------------------------------------------------------------------------

    def known_jobs(self) -> list[JobKey]:
        return [job_key_of(o) for o in self.source.list_report_objects()]

    def reconcile_job(self, key: JobKey) -> ReconcileResult:
        with self._lock:
            started = time.perf_counter()
            try:
                for _ in range(STATE_CONFLICT_RETRIES):
                    result = self._reconcile_once(key)
                    if result is not None:
                        return result
                logger.warning("state kept changing under us", extra={"job": key})
                return ReconcileResult(recheck_at=self._clock() + timedelta(seconds=RETRY_SOON_S))
            finally:
                self.metrics.reconcile_seconds.observe(time.perf_counter() - started)

    # --- one attempt ----------------------------------------------------------------------

    def _pods(self, namespace: str) -> list[dict[str, Any]]:
        if self.cache is not None and self.cache.primed:
            return list(self.cache.pods(namespace))
        return list(self.source.list_pods(namespace))

    def _nodes(self) -> list[dict[str, Any]]:
        if self.cache is not None and self.cache.primed:
            return list(self.cache.nodes())
        return list(self.source.list_nodes())

    def _reconcile_once(self, key: JobKey) -> ReconcileResult | None:
        from kubernetes.client.exceptions import ApiException

        if not self._is_leader():
            return ReconcileResult()
        namespace, _, name = key.partition("/")
        obj = self.source.read_report_object(namespace, name)
        if obj is None:
            self._pdb_blocked.pop(key, None)
            self.store.delete_job(key)
            return ReconcileResult()
        now = self._clock()
        pods = pods_of_job(self._pods(namespace), name)
        cluster_state = self.store.load_cluster()
        if self.store.job_state_since is None:
            self.store.save_cluster(cluster_state, now)  # stamps when this version began
        record = self.store.load_job(key, obj)
        binding = binding_of(obj, pods)
        if not binding.bound and record.state is None:
            return self._unbound(key, obj, record, binding.problem, now)

        opt_in = opt_in_of(pods) if binding.bound else OptIn(False, None, None, None)
        for problem in opt_in.problems:
            logger.warning("job annotation ignored", extra={"job": key, "problem": problem})
        report = report_of(obj, now)
        if isinstance(report, ScoreReport):
            report = place_report(report, pods, now, ranks_per_pod=opt_in.ranks_per_pod)
        view = job_view_of(obj, report, opt_in, _started_at(obj, pods))
        blocked = self._pdb_blocked.get(key)
        if blocked:
            view = replace(view, pdb_blocked_nodes=frozenset(blocked))
        cluster_view = cluster_view_of(self._nodes(), self.owner)

        state = State(jobs={key: record.state} if record.state else {}, cluster=cluster_state)
        outcome = decide(Window(jobs=(view,), cluster=cluster_view), state, self.policies, now)
        next_job = outcome.next_state.jobs.get(key)

        # Persist before acting (see state_store): a crash now re-issues, never repeats.
        fresh = _new_records(outcome.decisions, record.decisions)
        try:
            if outcome.next_state.cluster != cluster_state:
                self.store.save_cluster(outcome.next_state.cluster, now)
            if next_job != record.state or fresh or record.resource_version is None:
                record = self.store.save_job(record, next_job, record.with_decisions(fresh))
        except ApiException as e:
            if e.status == 409:
                return None  # another writer: re-read and decide again
            raise
        sequence = report.sequence if isinstance(report, ScoreReport) else None
        self._mirror(obj, record.decisions, fresh, sequence)
        if isinstance(report, RejectedReport) and report.reason is Reason.UNTRUSTED_REPORT:
            self._refused(key, obj, report, fresh)

        for line in summary_lines(outcome.decisions):
            logger.info("decision", extra={"job": key, "summary": line})
        for d in outcome.decisions:
            self.metrics.decisions.labels(
                d.verdict.value, d.action.value if d.action else "", d.reason.value, d.mode.value
            ).inc()

        result = ReconcileResult(decisions=outcome.decisions, recheck_at=outcome.recheck_at)
        for d in outcome.decisions:
            self._apply(d, obj, pods, report, result, fresh_decision=d in fresh)
        if result.failed:
            # What the server answered goes where people look: the job's records.
            try:
                record = self.store.save_job(record, next_job, record.with_decisions(result.failed))
            except ApiException as e:
                logger.warning("failure record not written", extra={"job": key, "status": e.status})
            else:
                self._mirror(obj, record.decisions, result.failed, sequence)
        return result

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
            self._mirror(obj, record.with_decisions(fresh), fresh, None)
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
            self._report_ref(obj), prov, EventAction.NOTIFY,
            f"{Reason.UNTRUSTED_REPORT.value}: {report.error}"[:1000],
            event_type=EventType.WARNING,
        )  # fmt: skip

    def _mirror(
        self,
        obj: Mapping[str, Any],
        records: Sequence[Mapping[str, Any]],
        fresh: Sequence[Decision],
        sequence: int | None,
    ) -> None:
        """The display copy in status.controller; a failure to write it loses nothing."""
        from kubernetes.client.exceptions import ApiException

        meta = obj.get("metadata") or {}
        previous = (obj.get("status") or {}).get("controller") or {}
        block = controller_status(records, fresh, previous, sequence)
        if block == previous:
            return
        try:
            self.store.mirror_status(str(meta.get("namespace")), str(meta.get("name")), block,
                                     previous)  # fmt: skip
        except ApiException as e:
            logger.warning(
                "status display not written",
                extra={"job": job_key_of(obj), "status": e.status, "reason": e.reason},
            )

    # --- acting ---------------------------------------------------------------------------

    def _apply(
        self,
        d: Decision,
        obj: Mapping[str, Any],
        pods: Sequence[Mapping[str, Any]],
        report: Any,
        result: ReconcileResult,
        *,
        fresh_decision: bool,
    ) -> None:
        if d.action is None or d.verdict is Verdict.HOLD:
            return
        if d.action is ActionKind.NOTIFY:
            # Notify is an Event and a status record: it is safe in every mode.
            if fresh_decision and d.verdict is Verdict.ACT:
                self._notify(d, obj)
            return
        if d.mode is not Mode.ENFORCE:
            return  # the core already turned these into holds; never act on a slip
        prov = self.actuators.provenance(
            d.job, d.reason.value, d.policy, d.decided_at or self._clock()
        )
        node = d.node
        try:
            outcomes = self._dispatch(d, prov, node, obj, pods, report)
        except RetryLater as e:
            self.metrics.actions.labels(d.action.value, "retry").inc()
            if e.reason == "PdbBlocked" and node is not None:
                self._pdb_blocked.setdefault(d.job, set()).add(node)
            when = self._clock() + timedelta(seconds=e.delay_s)
            result.recheck_at = min(result.recheck_at or when, when)
            logger.info(
                "action deferred",
                extra={
                    "job": d.job,
                    "action": d.action.value,
                    "reason": e.reason,
                    "delayS": e.delay_s,
                },
            )
            return
        except GiveUp as e:
            self.metrics.actions.labels(d.action.value, "failed").inc()
            answer: dict[str, Any] = {"failure": e.reason, "detail": e.detail[:500]}
            if e.http_status is not None:
                answer["httpStatus"] = e.http_status
            if e.server_message:
                answer["serverMessage"] = e.server_message
            logger.error("action failed", extra={"job": d.job, "action": d.action.value, **answer})
            result.failed.append(
                Decision(
                    job=d.job, subject=d.subject, verdict=Verdict.HOLD, action=d.action,
                    reason=Reason.ACTION_FAILED, evidence=answer, policy=d.policy, mode=d.mode,
                    decided_at=self._clock(),
                )
            )  # fmt: skip
            return
        if node is not None:
            self._pdb_blocked.get(d.job, set()).discard(node)
        for text in outcomes:
            result.applied.append(text)
            self.metrics.actions.labels(d.action.value, "applied").inc()
            logger.info(
                "action applied",
                extra={
                    "job": d.job,
                    "action": d.action.value,
                    "verdict": d.verdict.value,
                    "result": text,
                },
            )
        if d.verdict is Verdict.ACT and report is not None and isinstance(report, ScoreReport):
            lag = (self._clock() - report.generated_at).total_seconds()
            self.metrics.time_to_act_seconds.observe(max(0.0, lag))

    def _dispatch(  # noqa: PLR0917 (everything one action needs)
        self,
        d: Decision,
        prov: Any,
        node: NodeName | None,
        obj: Mapping[str, Any],
        pods: Sequence[Mapping[str, Any]],
        report: Any,
    ) -> list[str]:
        assert d.action is not None
        nodes, pod_act = self.actuators.nodes, self.actuators.pods
        undo = d.verdict is Verdict.UNDO
        match d.action:
            case ActionKind.TAINT_NODE:
                assert node is not None
                r = nodes.untaint(node, prov) if undo else nodes.taint(node, prov)
                return [f"{d.action.value} {r.target} {r.outcome.value}"]
            case ActionKind.CORDON_NODE:
                assert node is not None
                r = nodes.uncordon(node, prov) if undo else nodes.cordon(node, prov)
                return [f"{d.action.value} {r.target} {r.outcome.value}"]
            case ActionKind.DRAIN_NODE:
                if undo:
                    return []  # a drain has no mark to undo: the taint keeps pods away
                assert node is not None
                meta = obj.get("metadata") or {}
                selector = _job_selector(pods, str(meta.get("name")))
                if selector is None:
                    raise GiveUp("NoJobPods", "no pod of the job carries a job-name label")
                dr = pod_act.drain_job_from_node(
                    node, str(meta.get("namespace")), selector, prov,
                    attempt=int(d.evidence.get("attempt", 0)), related=self._report_ref(obj),
                )  # fmt: skip
                return [f"{d.action.value} {p.target} {p.outcome.value}" for p in dr.pods]
            case ActionKind.RESTART_RANK:
                if undo:
                    return []
                return self._restart_ranks(d, prov, pods, report, obj)
            case ActionKind.NOTIFY:
                return []
            case _:
                assert_never(d.action)

    def _restart_ranks(
        self,
        d: Decision,
        prov: Any,
        pods: Sequence[Mapping[str, Any]],
        report: Any,
        obj: Mapping[str, Any],
    ) -> list[str]:
        ranks = [int(r) for r in d.evidence.get("ranks") or []]
        by_rank = {}
        per_pod: dict[str, int] = {}
        if isinstance(report, ScoreReport):
            by_rank = {r.rank: r for r in report.ranks}
            for r in report.ranks:
                if r.pod:
                    per_pod[r.pod] = per_pod.get(r.pod, 0) + 1
        ranks_per_pod = max(per_pod.values()) if per_pod else 1
        out = []
        done_pods: set[str] = set()
        for rank in ranks:
            rs = by_rank.get(rank)
            try:
                found = resolve_rank(
                    rank, pods, ranks_per_pod=ranks_per_pod,
                    report_pod=rs.pod if rs else None, report_node=rs.node if rs else None,
                )  # fmt: skip
            except RankUnresolved as e:
                logger.warning(
                    "rank not resolved", extra={"job": d.job, "rank": rank, "error": str(e)}
                )
                continue
            if found.pod.name in done_pods:
                continue  # several slow ranks in one pod: one restart
            done_pods.add(found.pod.name)
            restarted = self.actuators.pods.restart_rank(
                found.pod, prov, rank=rank, attempt=int(d.evidence.get("attempt", 0)),
                related=self._report_ref(obj),
            )  # fmt: skip
            out.append(
                f"{ActionKind.RESTART_RANK.value} {restarted.target} {restarted.outcome.value}"
            )
        return out

    @staticmethod
    def _report_ref(obj: Mapping[str, Any]) -> ObjectRef:
        meta = obj.get("metadata") or {}
        return ObjectRef(
            kind=KIND,
            name=str(meta.get("name")),
            namespace=meta.get("namespace"),
            uid=meta.get("uid"),
            api_version=f"{GROUP}/{VERSION}",
        )

    def _notify(self, d: Decision, obj: Mapping[str, Any]) -> None:
        ranks = d.evidence.get("ranks") or []
        where = f" on node {d.node}" if d.node else ""
        message = f"ranks {', '.join(str(r) for r in ranks[:12])}{where}: {d.reason.value}"
        prov = self.actuators.provenance(
            d.job, d.reason.value, d.policy, d.decided_at or self._clock()
        )
        posted = self.actuators.events.record(
            self._report_ref(obj), prov, EventAction.NOTIFY, message,
            event_type=EventType.WARNING,
        )  # fmt: skip
        self.metrics.actions.labels("notify", "applied" if posted else "failed").inc()
