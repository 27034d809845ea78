"""Pod actions: restart a rank by evicting its pod, and drain a job's pods from a node.

Evictions go through the Eviction API, so PodDisruptionBudgets are honoured: a 429
refusal becomes `RetryLater(delay_s, PdbBlocked)` with a delay that grows with the
caller's attempt count. Deleting the pod instead is a fallback the policy must enable
(`delete_fallback_after`: after that many refused attempts).

Each step re-reads the pod first and pins its uid in the eviction's preconditions, so
repeating a call never evicts twice: a pod that is gone, terminating, or replaced by a
new incarnation (another uid) means the restart already happened.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

from pacekeeper.controller.actuators.api import Body, KubeApi
from pacekeeper.controller.actuators.errors import RetryLater
from pacekeeper.controller.actuators.events import (
    EventAction,
    EventRecorder,
    EventType,
    ObjectRef,
)
from pacekeeper.controller.actuators.results import ActionResult, DrainResult, Outcome
from pacekeeper.controller.actuators.retries import (
    RetrySettings,
    backoff_delay,
    retrying,
    status_of,
)
from pacekeeper.controller.actuators.unanswered import UnansweredWrites
from pacekeeper.controller.core.decisions import Reason
from pacekeeper.controller.core.marks import Provenance
from pacekeeper.controller.core.ranks import PodTarget

logger = logging.getLogger(__name__)


def is_budget_refusal(exc: BaseException) -> bool:
    """A 429 from the eviction subresource that names a disruption budget."""
    if status_of(exc) != 429:
        return False
    try:
        status = json.loads(getattr(exc, "body", None) or "{}")
    except ValueError:
        return False
    causes = (status.get("details") or {}).get("causes") or []
    return any(cause.get("reason") == "DisruptionBudget" for cause in causes)


@dataclass(frozen=True, slots=True)
class _Blocked:
    message: str


def _pod_ref(pod: Body) -> ObjectRef:
    return ObjectRef.of({**pod, "kind": pod.get("kind") or "Pod"})


class PodActuator:
    def __init__(
        self,
        api: KubeApi,
        events: EventRecorder,
        *,
        settings: RetrySettings,
        sleep: Callable[[float], None],
        delete_fallback_after: int | None = None,
    ) -> None:
        if delete_fallback_after is not None and delete_fallback_after < 0:
            raise ValueError(f"delete_fallback_after={delete_fallback_after} must be >= 0")
        self._api = api
        self._events = events
        self._settings = settings
        self._sleep = sleep
        self._delete_fallback_after = delete_fallback_after
        self._unanswered = UnansweredWrites()

    def restart_rank(
        self,
        target: PodTarget,
        provenance: Provenance,
        *,
        rank: int | None = None,
        attempt: int = 0,
        related: ObjectRef | None = None,
    ) -> ActionResult:
        """Evict the pod hosting a rank; its controller starts a new one.

        `attempt` counts the caller's earlier calls for this decision that a budget
        refused; it sets the backoff and when the delete fallback starts.
        """
        note = f"rank {rank}" if rank is not None else "a rank"
        return self._remove(
            target,
            provenance,
            attempt=attempt,
            action=EventAction.RESTART_RANK,
            message=f"Restarting {note}",
            related=related,
        )

    def drain_job_from_node(
        self,
        node: str,
        namespace: str,
        selector: str,
        provenance: Provenance,
        *,
        attempt: int = 0,
        related: ObjectRef | None = None,
    ) -> DrainResult:
        """Evict the job's pods (`selector`, non-empty) that run on `node`.

        Pods a budget protects are left for the next call, which re-lists. A pod already
        evicted stays listed while it terminates (its kubelet deletes it after the grace
        period), so the listing skips terminating pods: nothing is evicted twice.
        """
        if not selector.strip():
            raise ValueError("drain needs a non-empty label selector for the job's pods")
        pods = retrying(
            lambda: self._api.list_pods(
                namespace, label_selector=selector, field_selector=f"spec.nodeName={node}"
            ),
            settings=self._settings,
            sleep=self._sleep,
            what="list job pods on node",
        )
        results: list[ActionResult] = []
        blocked: list[str] = []
        for pod in pods:
            meta = pod["metadata"]
            if meta.get("deletionTimestamp"):
                continue
            target = PodTarget(namespace, meta["name"], meta.get("uid"), node)
            try:
                results.append(
                    self._remove(
                        target,
                        provenance,
                        attempt=attempt,
                        action=EventAction.DRAIN_NODE,
                        message=f"Draining job {provenance.job} from node {node}",
                        related=related,
                    )
                )
            except RetryLater as exc:
                if exc.reason != Reason.PDB_BLOCKED:
                    raise
                blocked.append(meta["name"])
        drained = DrainResult(node, tuple(results))
        if drained.evicted:
            self._events.record(
                ObjectRef(kind="Node", name=node),
                provenance,
                EventAction.DRAIN_NODE,
                f"Evicted {len(drained.evicted)} pods of job {provenance.job} "
                f"(policy {provenance.policy})",
                event_type=EventType.WARNING,
                related=related,
            )
        if blocked:
            raise RetryLater(
                self._budget_delay(attempt),
                Reason.PDB_BLOCKED,
                f"pods {sorted(blocked)} on node {node} are protected by a disruption budget",
            )
        return drained

    # ---- one pod ------------------------------------------------------------------

    def _budget_delay(self, attempt: int) -> float:
        settings = self._settings
        return float(
            backoff_delay(attempt, settings.pdb_backoff_base_s, settings.pdb_backoff_max_s)
        )

    def _read_live(self, target: PodTarget) -> Body | ActionResult:
        """The pod to act on, or the result that says the action is already done."""
        where = f"pod/{target.namespace}/{target.name}"
        try:
            pod = self._api.read_pod(target.namespace, target.name)
        except Exception as exc:
            if status_of(exc) == 404:
                return ActionResult(Outcome.GONE, where, {"pod": "gone"})
            raise
        meta = pod["metadata"]
        if target.uid and meta.get("uid") != target.uid:
            return ActionResult(Outcome.GONE, where, {"replacedBy": meta.get("uid")})
        if meta.get("deletionTimestamp"):
            return ActionResult(Outcome.GONE, where, {"terminating": True})
        return pod

    def _take_down(
        self,
        target: PodTarget,
        call: Callable[[str, str, str | None], None],
        done: Outcome,
        what: str,
    ) -> tuple[ActionResult | _Blocked, Body | None]:
        """Evict or delete the live incarnation of `target`, once; returns the pod taken."""
        where = f"pod/{target.namespace}/{target.name}"
        key = (target.namespace, target.name, target.uid)
        taken: list[Body] = []

        def step() -> ActionResult | _Blocked:
            before = self._unanswered.get(key)
            pinned = target
            if before is not None and not target.uid:
                # Pin the incarnation our unanswered request was for: a replacement
                # with the same name means that request landed, not a new target.
                pinned = replace(target, uid=before["metadata"].get("uid"))
            pod = self._read_live(pinned)
            if isinstance(pod, ActionResult):
                if self._unanswered.settle(key) is not None and before is not None:
                    # Our request went unanswered (a timeout) and that pod is now gone,
                    # terminating or replaced: the request landed.
                    taken.append(before)
                    return ActionResult(done, where, {"confirmed": "by re-read"})
                return pod
            self._unanswered.settle(key)  # still there, same incarnation: not landed
            try:
                call(target.namespace, target.name, pod["metadata"].get("uid"))
            except Exception as exc:
                if status_of(exc) == 404:
                    return ActionResult(Outcome.GONE, where, {"pod": "gone"})
                if is_budget_refusal(exc):
                    return _Blocked(str(getattr(exc, "body", "")))
                if status_of(exc) in {None, 504}:
                    self._unanswered.remember(key, pod)  # no answer: it may have landed
                raise
            taken.append(pod)
            return ActionResult(done, where)

        result = retrying(
            step,
            settings=self._settings,
            sleep=self._sleep,
            what=what,
            unanswered=lambda: key in self._unanswered,
        )
        return result, (taken[0] if taken else None)

    def _remove(
        self,
        target: PodTarget,
        provenance: Provenance,
        *,
        attempt: int,
        action: EventAction,
        message: str,
        related: ObjectRef | None,
    ) -> ActionResult:
        result, pod = self._take_down(target, self._api.evict_pod, Outcome.EVICTED, "evict pod")
        if isinstance(result, ActionResult):
            if pod is not None:
                self._events.record(
                    _pod_ref(pod),
                    provenance,
                    action,
                    f"{message}: evicted (policy {provenance.policy})",
                    event_type=EventType.WARNING,
                    related=related,
                )
            logger.info(
                "pod action",
                extra={"target": result.target, "outcome": str(result.outcome), "attempt": attempt},
            )
            return result
        fallback = self._delete_fallback_after
        if fallback is not None and attempt >= fallback:
            return self._delete(target, provenance, action, message, related)
        self._announce_blocked(target, provenance, result.message, related)
        raise RetryLater(
            self._budget_delay(attempt),
            Reason.PDB_BLOCKED,
            f"pod/{target.namespace}/{target.name}: eviction refused by a disruption budget",
        )

    def _announce_blocked(
        self, target: PodTarget, provenance: Provenance, refusal: str, related: ObjectRef | None
    ) -> None:
        # One Event per decision (the name derives from it), however often it is retried.
        blocked = replace(provenance, reason=str(Reason.PDB_BLOCKED))
        self._events.record(
            ObjectRef(kind="Pod", name=target.name, namespace=target.namespace, uid=target.uid),
            blocked,
            EventAction.RESTART_RANK,
            f"Eviction refused by a PodDisruptionBudget; retrying with backoff: {refusal[:200]}",
            event_type=EventType.WARNING,
            related=related,
        )

    def _delete(
        self,
        target: PodTarget,
        provenance: Provenance,
        action: EventAction,
        message: str,
        related: ObjectRef | None,
    ) -> ActionResult:
        result, pod = self._take_down(target, self._api.delete_pod, Outcome.DELETED, "delete pod")
        if isinstance(result, _Blocked):  # a delete is never budgeted; keep the types honest
            raise RetryLater(self._settings.retry_later_s, Reason.PDB_BLOCKED, result.message)
        if pod is not None:
            logger.warning(
                "pod deleted past its disruption budget", extra={"target": result.target}
            )
            self._events.record(
                _pod_ref(pod),
                provenance,
                action,
                f"{message}: deleted, the policy's fallback after its disruption budget "
                f"kept refusing eviction (policy {provenance.policy})",
                event_type=EventType.WARNING,
                related=related,
            )
        return result
