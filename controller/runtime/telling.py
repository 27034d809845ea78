"""Events on the job's workload: what a platform engineer sees in ``kubectl describe``.

Every mode tells: a notice (a rank or node below the act threshold; in observe and
dry-run mode the would-be action), each action and undo, and the holds worth a human's
attention (budgets, breaker, workload shape, a policy that does not exist, a human's
override). Holds that only say "nothing new" (``Healthy``, ``AwaitingEffect``,
``WarmingUp`` ...) stay in the decision records.

Only decisions that are new records are told (``reconcile._new_records``, kept in the
controller's own store, so a restart repeats nothing), and messages carry no number
that changes from report to report: the same verdict coming back is one Event whose
count grows (``EventRecorder.tell``), never a new Event per reconcile.

``tellings`` is pure (decisions in, Events to say out); ``WorkloadTeller`` finds the
workload (``sources.workloads``) and posts.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pacekeeper.controller.actuators.events import EventType, ObjectRef
from pacekeeper.controller.actuators.kubernetes_actuators import KubernetesActuators
from pacekeeper.controller.core.decisions import Decision, Reason, Verdict, format_ranks
from pacekeeper.controller.sources.workloads import OwnerRef, WorkloadResolver

logger = logging.getLogger(__name__)

TOLD_HOLDS: frozenset[Reason] = frozenset(
    {
        Reason.OBSERVE_MODE,
        Reason.BUDGET_EXHAUSTED,
        Reason.BREAKER_OPEN,
        Reason.COOLDOWN,
        Reason.WORKLOAD_IMBALANCE,
        Reason.WORKLOAD_STRUCTURE,
        Reason.JOB_WIDE_SLOWDOWN,
        Reason.PDB_BLOCKED,
        Reason.LADDER_EXHAUSTED,
        Reason.HUMAN_OVERRIDE,
        Reason.NOT_OURS,
        Reason.UNKNOWN_POLICY,
        Reason.MALFORMED_REPORT,
        Reason.ACTION_FAILED,
        Reason.PROBE_CLEARED,
    }
)
"""Holds a human would want to hear about; every act and undo is told too.
``UntrustedReport`` is told once on the StragglerReport whose writer it accuses
(``Reconciler._refused``), not again here."""
NORMAL_REASONS = frozenset({Reason.RECOVERED, Reason.PROBE_CLEARED, Reason.MARK_EXPIRED})


@dataclass(frozen=True, slots=True)
class Telling:
    """One Event to say on the workload."""

    event_type: EventType
    reason: str
    action: str
    message: str
    decision: Decision


def _where(d: Decision) -> str:
    ranks = d.evidence.get("ranks")
    shown = ""
    if isinstance(ranks, list) and ranks:
        word = "rank" if len(ranks) == 1 else "ranks"
        shown = f"{word} {format_ranks(int(r) for r in ranks)}"
    node = d.node
    if node is not None:
        return f"{shown} on node {node}" if shown else f"node {node}"
    if d.subject.startswith("rank/"):
        return d.subject.replace("/", " ")
    return shown or "the job"


def _below(d: Decision) -> str:
    threshold = d.evidence.get("threshold")
    return f" below the act threshold {threshold}" if threshold is not None else ""


def _unknown_policy(d: Decision) -> str:
    ev = d.evidence
    source = ev.get("policySource") or "the job"
    known = ", ".join(str(k) for k in ev.get("known") or ()) or "none"
    text = f"{source} names policy {ev.get('policy')!r}, which does not exist (policies: {known})"
    if ev.get("didYouMean"):
        text += f"; did you mean {ev['didYouMean']!r}?"
    return text + "; the job is not judged until it names one that exists"


def _mode_note(d: Decision) -> str:
    source = d.evidence.get("modeSource")
    return f"mode {d.mode.value}" + (f", held there by {source}" if source else "")


def message_of(d: Decision) -> str:
    """What the Event says: who, what, why; nothing that changes with every report."""
    action = d.action.value if d.action else None
    where = _where(d)
    match d.verdict:
        case Verdict.ACT:
            return f"{where}{_below(d)}: {action} (policy {d.policy})"
        case Verdict.UNDO:
            return f"{where}: {action} undone ({d.reason.value})"
        case Verdict.HOLD:
            pass
    if d.reason is Reason.UNKNOWN_POLICY:
        return _unknown_policy(d)
    if d.reason is Reason.OBSERVE_MODE:
        would = "undo" if d.evidence.get("wouldBe") == Verdict.UNDO.value else ""
        act = f"{would} {action}".strip()
        return f"{where}{_below(d)}: would {act}; not taken in {_mode_note(d)}"
    if d.reason is Reason.HUMAN_OVERRIDE:
        mark = d.evidence.get("mark") or action
        return f"{where}: a human removed our {mark}; it is theirs, we do not put it back"
    if d.reason is Reason.ACTION_FAILED:
        failure = d.evidence.get("failure") or "refused"
        return f"{where}: {action} failed ({failure}): {d.evidence.get('serverMessage', '')}"
    held = f"{action} held" if action else "held"
    detail = d.evidence.get("error") or d.evidence.get("problem") or ""
    text = f"{where}: {held} ({d.reason.value})"
    return f"{text}: {detail}" if detail else text


def tellings(decisions: Iterable[Decision]) -> list[Telling]:
    """The Events that ``decisions`` (new records) call for, in order. An act the API
    then refused is told by its ``ActionFailed``, not as if it had happened."""
    ds = list(decisions)
    failed = {(d.subject, d.action) for d in ds if d.reason is Reason.ACTION_FAILED and d.action}
    out = []
    for d in ds:
        if d.verdict is Verdict.HOLD and d.reason not in TOLD_HOLDS:
            continue
        if d.verdict is Verdict.ACT and (d.subject, d.action) in failed:
            continue
        kind = (
            EventType.NORMAL
            if d.verdict is Verdict.UNDO or d.reason in NORMAL_REASONS
            else EventType.WARNING
        )
        action = d.action.value if d.action else "notify"
        out.append(Telling(kind, d.reason.value, action, message_of(d), d))
    return out


def involved_of(ref: OwnerRef) -> ObjectRef:
    return ObjectRef(
        kind=ref.kind, name=ref.name, namespace=ref.namespace, uid=ref.uid,
        api_version=ref.api_version,
    )  # fmt: skip


class WorkloadTeller:
    def __init__(
        self,
        actuators: KubernetesActuators,
        resolver: WorkloadResolver,
        clock: Callable[[], datetime],
    ) -> None:
        self._actuators = actuators
        self._resolver = resolver
        self._clock = clock

    def tell(
        self,
        decisions: Sequence[Decision],
        pods: Sequence[Mapping[str, Any]],
    ) -> int:
        """Post the Events ``decisions`` call for on the pods' workload; how many were
        written. No workload (the pods have no controller): nothing to tell it."""
        said = tellings(decisions)
        if not said:
            return 0
        owner = self._resolver.top_owner(pods)
        if owner is None:
            logger.debug("no workload to tell", extra={"job": said[0].decision.job})
            return 0
        involved = involved_of(owner)
        posted = 0
        for t in said:
            d = t.decision
            at = d.decided_at or self._clock()
            prov = self._actuators.provenance(d.job, t.reason, d.policy, at)
            posted += self._actuators.events.tell(
                involved, reason=t.reason, message=t.message, event_type=t.event_type,
                action=t.action, provenance=prov,
            )  # fmt: skip
        return posted
