"""Applying one reconcile's decisions through the actuators, and what came of it.

Separate from ``reconcile.py``, which reads, decides and persists: this is the part that
changes other people's objects (nodes, pods, Events), with its mapping of actuator answers
(``RetryLater``, ``GiveUp``) to rechecks and ``ActionFailed`` records. Enforce mode only,
except notify, which is an Event and is sent in every mode.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, assert_never

from pacekeeper.controller.actuators.errors import GiveUp, RetryLater
from pacekeeper.controller.actuators.events import EventAction, EventType, ObjectRef
from pacekeeper.controller.actuators.kubernetes_actuators import KubernetesActuators
from pacekeeper.controller.core.decisions import Decision, Reason, Verdict
from pacekeeper.controller.core.ids import JobKey, NodeName
from pacekeeper.controller.core.observations import MARK_OF_ACTION
from pacekeeper.controller.core.policy import ActionKind, Mode
from pacekeeper.controller.core.ranks import RankUnresolved, resolve_rank
from pacekeeper.controller.runtime.metrics import ControllerMetrics
from pacekeeper.controller.sources.kubernetes import JOB_NAME_LABELS
from pacekeeper.detector.reporters.k8s_status import GROUP, KIND, VERSION
from pacekeeper.detector.score_report import ScoreReport

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class Acted:
    applied: list[str] = field(default_factory=list)
    """``<action> <target> <outcome>`` for each actuator call."""
    failed: list[Decision] = field(default_factory=list)
    """One ``ActionFailed`` record per action the API refused, with its answer."""
    retry_at: datetime | None = None
    """The earliest time an actuator asked to be tried again (``RetryLater``)."""


def report_ref(obj: Mapping[str, Any]) -> ObjectRef:
    meta = obj.get("metadata") or {}
    return ObjectRef(
        kind=KIND,
        name=str(meta.get("name")),
        namespace=meta.get("namespace"),
        uid=meta.get("uid"),
        api_version=f"{GROUP}/{VERSION}",
    )


def _marked_at(d: Decision) -> datetime | None:
    """The time of the core's record of the decision's mark (None: none was given)."""
    text = d.evidence.get("markedAt")
    try:
        return datetime.fromisoformat(str(text)) if text else None
    except ValueError:
        return None


def job_selector(pods: Sequence[Mapping[str, Any]], name: str) -> str | None:
    for label in JOB_NAME_LABELS:
        if any(((p.get("metadata") or {}).get("labels") or {}).get(label) == name for p in pods):
            return f"{label}={name}"
    return None


class Acting:
    def __init__(
        self,
        actuators: KubernetesActuators,
        metrics: ControllerMetrics,
        clock: Callable[[], datetime],
    ) -> None:
        self.actuators = actuators
        self.metrics = metrics
        self._clock = clock
        self.pdb_blocked: dict[JobKey, set[NodeName]] = {}
        """Nodes where a job's drain waits on a PodDisruptionBudget (the core's view)."""

    def apply(
        self,
        decisions: Sequence[Decision],
        fresh: Sequence[Decision],
        obj: Mapping[str, Any],
        pods: Sequence[Mapping[str, Any]],
        report: Any,
    ) -> Acted:
        """Act on ``decisions`` in order; ``fresh``: those that are new records (a notify
        is sent once, when its record is new)."""
        result = Acted()
        for d in decisions:
            self._apply(d, obj, pods, report, result, fresh_decision=d in fresh)
        return result

    def _apply(
        self,
        d: Decision,
        obj: Mapping[str, Any],
        pods: Sequence[Mapping[str, Any]],
        report: Any,
        result: Acted,
        *,
        fresh_decision: bool,
    ) -> None:
        if d.reason is Reason.AWAITING_PROBE and d.mode is Mode.ENFORCE:
            self._request_probe(d, obj)
            return
        if d.reason is Reason.HUMAN_OVERRIDE and d.verdict is Verdict.HOLD:
            self._forget(d)
            return
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
                self.pdb_blocked.setdefault(d.job, set()).add(node)
            when = self._clock() + timedelta(seconds=e.delay_s)
            result.retry_at = min(result.retry_at or when, when)
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
            self.pdb_blocked.get(d.job, set()).discard(node)
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
        at = _marked_at(d)
        match d.action:
            case ActionKind.TAINT_NODE:
                assert node is not None
                r = (
                    nodes.untaint(node, prov, marked_at=at)
                    if undo
                    else nodes.taint(node, prov, d.taint_effect, marked_at=at)
                )
                return [f"{d.action.value} {r.target} {r.outcome.value}"]
            case ActionKind.CORDON_NODE:
                assert node is not None
                r = (
                    nodes.uncordon(node, prov, marked_at=at)
                    if undo
                    else nodes.cordon(node, prov, marked_at=at)
                )
                return [f"{d.action.value} {r.target} {r.outcome.value}"]
            case ActionKind.DRAIN_NODE:
                if undo:
                    return []  # a drain has no mark to undo: the taint keeps pods away
                assert node is not None
                meta = obj.get("metadata") or {}
                selector = job_selector(pods, str(meta.get("name")))
                if selector is None:
                    raise GiveUp("NoJobPods", "no pod of the job carries a job-name label")
                dr = pod_act.drain_job_from_node(
                    node, str(meta.get("namespace")), selector, prov,
                    attempt=int(d.evidence.get("attempt", 0)), related=report_ref(obj),
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

    def _forget(self, d: Decision) -> None:
        """A human took one of our marks (the core's ``HumanOverride``): clear our note of
        it, so that no later episode reads the human's mark as ours. In every mode, as
        undo is: it only gives up a claim."""
        kind = MARK_OF_ACTION.get(d.action) if d.action is not None else None
        at = _marked_at(d)
        if kind is None or d.node is None or at is None:
            return
        prov = self.actuators.provenance(d.job, d.reason.value, d.policy, at)
        r = self.actuators.nodes.forget(d.node, kind, prov, marked_at=at)
        logger.info(
            "mark handed to a human",
            extra={"job": d.job, "node": d.node, "mark": kind.value, "note": r.detail},
        )

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
                related=report_ref(obj),
            )  # fmt: skip
            out.append(
                f"{ActionKind.RESTART_RANK.value} {restarted.target} {restarted.outcome.value}"
            )
        return out

    def _request_probe(self, d: Decision, obj: Mapping[str, Any]) -> None:
        """Ask the job for its confirmation probe: ``spec.control.probe`` on its report,
        which its reporting rank reads. Written only when the report does not already
        carry this request, so a decision repeated after a restart asks once."""
        request = (d.evidence.get("probe") or {}).get("request")
        if not request:
            return
        control = (obj.get("spec") or {}).get("control") or {}
        if (control.get("probe") or {}).get("id") == request:
            return
        meta = obj.get("metadata") or {}
        try:
            self.actuators.api.patch_report(
                str(meta.get("namespace")),
                str(meta.get("name")),
                {"spec": {"control": {"probe": {"id": request}}}},
            )
        except Exception as e:  # the next reconcile asks again (the report lacks it)
            self.metrics.actions.labels("probe", "failed").inc()
            extra = {"job": d.job, "probe": request, "error": repr(e)}
            logger.warning("probe request not written", extra=extra)
            return
        self.metrics.actions.labels("probe", "applied").inc()
        logger.info("probe requested", extra={"job": d.job, "node": d.node, "probe": request})

    def _notify(self, d: Decision, obj: Mapping[str, Any]) -> None:
        ranks = d.evidence.get("ranks") or []
        where = f" on node {d.node}" if d.node else ""
        message = f"ranks {', '.join(str(r) for r in ranks[:12])}{where}: {d.reason.value}"
        prov = self.actuators.provenance(
            d.job, d.reason.value, d.policy, d.decided_at or self._clock()
        )
        posted = self.actuators.events.record(
            report_ref(obj), prov, EventAction.NOTIFY, message,
            event_type=EventType.WARNING,
        )  # fmt: skip
        self.metrics.actions.labels("notify", "applied" if posted else "failed").inc()
