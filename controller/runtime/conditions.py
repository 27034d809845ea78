"""``status.conditions`` and ``status.verdict`` on a StragglerReport, in Kubernetes'
conventions: what ``kubectl get``/``describe`` and ``kubectl wait --for=condition=...``
read. Pure: this reconcile's decisions and the conditions now shown in, the new ones out.

- ``Bound``: the report stands for a live workload (``trust.binding_of``).
- ``Stragglers``: True while a rank is below the policy's act threshold; False when the
  newest report is healthy; Unknown when it could not be judged (stale, warming up ...).
- ``Acting``: True while the controller acts on the job (enforce mode); False with the
  reason it does not (``ObserveMode``, ``BudgetExhausted``, ``Healthy`` ...).

``lastTransitionTime`` changes only when a condition's status does; messages carry no
number that changes from report to report, so a steady job costs no status write.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from pacekeeper.controller.core.decisions import Decision, Reason, Verdict
from pacekeeper.controller.runtime.telling import message_of

BOUND, STRAGGLERS, ACTING = "Bound", "Stragglers", "Acting"
BELOW_REASONS = frozenset({Reason.JOB_WIDE_SLOWDOWN, Reason.WORKLOAD_IMBALANCE})
"""Job-wide holds that still mean ranks are below the threshold."""
HEALTHY_REASONS = frozenset({Reason.HEALTHY, Reason.RECOVERED})


def _rank(d: Decision) -> int:
    if d.verdict is Verdict.ACT:
        return 0
    if d.verdict is Verdict.UNDO:
        return 1
    if d.action is not None:
        return 2
    return 4 if d.reason in HEALTHY_REASONS else 3


def headline(decisions: Sequence[Decision]) -> Decision | None:
    """The decision that best says where the job stands (act, undo, a held action, a
    hold, then healthy; the first of each)."""
    return min(decisions, key=_rank, default=None)


def verdict_of(decisions: Sequence[Decision]) -> str | None:
    """``status.verdict`` (the ``Verdict`` printer column): ``act BelowThreshold
    taintNode``, ``hold ObserveMode taintNode``, ``hold Healthy``."""
    d = headline(decisions)
    if d is None:
        return None
    parts = [d.verdict.value, d.reason.value] + ([d.action.value] if d.action else [])
    return " ".join(parts)


def _stamp(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _condition(
    kind: str, status: str, reason: str, message: str, *,
    previous: Mapping[str, Mapping[str, Any]], now: datetime, generation: int | None,
) -> dict[str, Any]:  # fmt: skip
    old = previous.get(kind) or {}
    since = old.get("lastTransitionTime") if old.get("status") == status else None
    out: dict[str, Any] = {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message[:1000],
        "lastTransitionTime": since or _stamp(now),
    }
    if generation is not None:
        out["observedGeneration"] = generation
    return out


def conditions_of(
    decisions: Sequence[Decision],
    shown: Sequence[Mapping[str, Any]],
    *,
    bound: bool,
    problem: str = "",
    generation: int | None,
    now: datetime,
) -> list[dict[str, Any]]:
    """The three conditions for this reconcile's ``decisions`` (the job's own), given
    those ``shown`` on the object now."""
    previous = {str(c.get("type")): c for c in shown if isinstance(c, Mapping)}

    def cond(kind: str, status: str, reason: str, message: str) -> dict[str, Any]:
        return _condition(
            kind, status, reason, message, previous=previous, now=now, generation=generation
        )

    if not bound:
        why = Reason.UNBOUND_REPORT.value
        return [
            cond(BOUND, "False", why, problem),
            cond(STRAGGLERS, "Unknown", why, "the report is not bound to a workload"),
            cond(ACTING, "False", why, "the report is not bound to a workload"),
        ]
    out = [cond(BOUND, "True", "Bound", "owned by the workload that controls the job's pods")]
    below = [
        d for d in decisions
        if "finding" in d.evidence or (d.reason in BELOW_REASONS and d.evidence.get("ranks"))
    ]  # fmt: skip
    if below:
        d = below[0]
        threshold = d.evidence.get("threshold")
        where = message_of(d).split(":", 1)[0] if threshold is not None else d.reason.value
        out.append(cond(STRAGGLERS, "True", d.reason.value, where))
    elif any(d.reason in HEALTHY_REASONS for d in decisions):
        out.append(cond(STRAGGLERS, "False", Reason.HEALTHY.value, "no rank below the threshold"))
    else:
        first = decisions[0] if decisions else None
        reason = first.reason.value if first else "NoReport"
        out.append(cond(STRAGGLERS, "Unknown", reason, "the newest report was not judged"))
    top = headline(decisions)
    if top is not None and top.verdict is Verdict.ACT:
        out.append(cond(ACTING, "True", top.reason.value, message_of(top)))
    elif top is not None:
        out.append(cond(ACTING, "False", top.reason.value, message_of(top)))
    else:
        out.append(cond(ACTING, "False", "NoReport", "no report to judge yet"))
    return out
