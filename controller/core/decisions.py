"""Decision records: every decision, including each decision not to act, and why."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from pacekeeper.controller.core.ids import JobKey, NodeName
from pacekeeper.controller.core.policy import ActionKind, Mode, TaintEffect


class Verdict(StrEnum):
    ACT = "act"
    HOLD = "hold"
    UNDO = "undo"


class Reason(StrEnum):
    """One value serves as Event reason, condition reason, log key and metric label."""

    BELOW_THRESHOLD = "BelowThreshold"
    RECOVERED = "Recovered"
    STALE_DATA = "StaleData"
    WARMING_UP = "WarmingUp"
    BUDGET_EXHAUSTED = "BudgetExhausted"
    BREAKER_OPEN = "BreakerOpen"
    COOLDOWN = "Cooldown"
    OBSERVE_MODE = "ObserveMode"
    NOT_OURS = "NotOurs"
    OPTED_OUT = "OptedOut"
    WORKLOAD_IMBALANCE = "WorkloadImbalance"
    WORKLOAD_STRUCTURE = "WorkloadStructure"
    JOB_WIDE_SLOWDOWN = "JobWideSlowdown"
    PDB_BLOCKED = "PdbBlocked"
    # Beyond the design's list (docs/controller.md says why each exists):
    HEALTHY = "Healthy"
    NOT_PERSISTENT = "NotPersistent"
    AWAITING_EFFECT = "AwaitingEffect"
    LADDER_EXHAUSTED = "LadderExhausted"
    INSUFFICIENT_SAMPLES = "InsufficientSamples"
    MALFORMED_REPORT = "MalformedReport"
    UNKNOWN_POLICY = "UnknownPolicy"
    MARK_EXPIRED = "MarkExpired"
    HUMAN_OVERRIDE = "HumanOverride"
    UNTRUSTED_REPORT = "UntrustedReport"
    UNBOUND_REPORT = "UnboundReport"
    ACTION_FAILED = "ActionFailed"
    AWAITING_PROBE = "AwaitingProbe"
    PROBE_CLEARED = "ProbeCleared"


JOB_SUBJECT = "job"


def node_subject(node: str) -> str:
    return f"node/{node}"


def rank_subject(rank: int) -> str:
    return f"rank/{rank}"


@dataclass(frozen=True, slots=True)
class Decision:
    job: JobKey
    subject: str
    """``job``, ``node/<name>`` or ``rank/<n>``."""
    verdict: Verdict
    action: ActionKind | None
    """For act: the action; for undo: the action whose mark is removed; for hold: the
    would-be action when one was ready (observe mode, budgets, breaker), else None."""
    reason: Reason
    evidence: Mapping[str, Any] = field(default_factory=dict)
    """JSON-able numbers behind the decision: scores, ranks, counts, budget used/limit."""
    policy: str = ""
    mode: Mode = Mode.OBSERVE
    decided_at: datetime | None = None

    @property
    def node(self) -> NodeName | None:
        if self.subject.startswith("node/"):
            return NodeName(self.subject[5:])
        n = self.evidence.get("node")
        return NodeName(n) if isinstance(n, str) else None

    @property
    def taint_effect(self) -> TaintEffect:
        """For a taintNode act: the effect its policy chose (``evidence.taintEffect``);
        NoSchedule for a decision recorded before effects could be chosen."""
        value = self.evidence.get("taintEffect")
        try:
            return TaintEffect(value) if isinstance(value, str) else TaintEffect.NO_SCHEDULE
        except ValueError:
            return TaintEffect.NO_SCHEDULE

    @property
    def action_key(self) -> str | None:
        """Idempotency key for actuators: the same act decided twice has the same key."""
        k = self.evidence.get("actionKey")
        return k if isinstance(k, str) else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able record (camelCase) for CR status, Events and logs."""
        return {
            "job": self.job,
            "subject": self.subject,
            "verdict": self.verdict.value,
            "action": self.action.value if self.action else None,
            "reason": self.reason.value,
            "evidence": dict(self.evidence),
            "policy": self.policy,
            "mode": self.mode.value,
            "decidedAt": self.decided_at.isoformat() if self.decided_at else None,
        }


def format_ranks(ranks: Iterable[int], limit: int = 12) -> str:
    """``3, 17, 42`` (then ``and N more`` past ``limit``)."""
    ordered = sorted(set(ranks))
    shown = ", ".join(str(r) for r in ordered[:limit])
    if len(ordered) > limit:
        shown += f" and {len(ordered) - limit} more"
    return shown


def group_ranks_by_reason(pairs: Iterable[tuple[int, str]]) -> list[str]:
    """Ranks sharing a reason share a line: ``ranks 3, 17, 42: StaleData``."""
    by_reason: dict[str, set[int]] = {}
    for rank, reason in pairs:
        by_reason.setdefault(str(reason), set()).add(rank)
    lines = []
    for reason, ranks in sorted(by_reason.items(), key=lambda kv: (min(kv[1]), kv[0])):
        word = "rank" if len(ranks) == 1 else "ranks"
        lines.append(f"{word} {format_ranks(ranks)}: {reason}")
    return lines


def summary_lines(decisions: Iterable[Decision]) -> list[str]:
    """One log line per (job, verdict, action, reason), ranks grouped."""
    groups: dict[tuple[str, str, str, str], set[int]] = {}
    others: list[str] = []
    for d in decisions:
        ranks = d.evidence.get("ranks")
        if isinstance(ranks, list) and ranks:
            key = (d.job, d.verdict.value, d.action.value if d.action else "-", d.reason.value)
            groups.setdefault(key, set()).update(int(r) for r in ranks)
        else:
            act = f" {d.action.value}" if d.action else ""
            others.append(f"{d.job} {d.subject}: {d.verdict.value}{act} {d.reason.value}")
    lines = []
    for (job, verdict, action, reason), ranks in sorted(groups.items()):
        act = "" if action == "-" else f" {action}"
        word = "rank" if len(ranks) == 1 else "ranks"
        lines.append(f"{job} {word} {format_ranks(ranks)}: {verdict}{act} {reason}")
    return lines + others
