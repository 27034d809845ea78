"""The safety settings of a policy document (node budgets, rate limits, the circuit
breaker) and the rules that judge them in enforce mode: what is refused outright (a zero
budget that refuses every action) and what is refused unless the document accepts the
risk by name in ``acknowledgeUnsafe`` (and then still warned about).

Separate from ``policy.py`` because these rules read budgets and the breaker across
policies and the cluster, and a reader checking "what keeps a bad policy from cordoning
the fleet" should find them in one place.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from pydantic import Field

# Relative on purpose, as in policy.py: mypy sees PolicyModel's type only this way.
from .policy_types import (
    DISRUPTIVE_ACTIONS,
    MAX_ACTIONS,
    NODE_ACTIONS,
    ActionCount,
    ActionKind,
    Int,
    NodeCount,
    Percent,
    PolicyModel,
    PositiveSeconds,
    Seconds,
    TaintEffect,
)

BREAKER_NEVER_OPENS_AT = 5000
"""Kubernetes supports clusters of at most 5,000 nodes: a breaker that trips only when
more distinct (job, node) subjects than that want an action at once never opens."""
HAIR_TRIGGER_ACT = 0.95
"""``thresholds.act`` from which a score within ordinary jitter counts as slow: healthy GPUs
of one model sit up to ~14% from their median (policy_hardware.Calibration), and a rank's
own windows vary by a few percent."""
MIN_STEP_TIMEOUT_S = 1.0
"""A ladder step's ``timeoutS`` below which it cannot have seen any effect of its action
(a restarted rank or a drained node takes minutes to show one) before the next step."""


class NodeBudget(PolicyModel):
    """Nodes that may carry our marks at once. null = unlimited; both set: the smaller wins."""

    max_nodes: NodeCount | None = None
    """Nodes at most (null: no count limit)."""
    max_percent: Percent | None = None
    """Percent of the nodes (of the job, or of the cluster); rounds down, but at least 1
    node when above zero."""

    def limit(self, total_nodes: int) -> int | None:
        limits: list[int] = []
        if self.max_nodes is not None:
            limits.append(self.max_nodes)
        if self.max_percent is not None:
            by_pct = math.floor(self.max_percent * total_nodes / 100.0)
            limits.append(max(1, by_pct) if self.max_percent > 0 else 0)
        return min(limits) if limits else None

    def is_zero(self) -> bool:
        return self.max_nodes == 0 or self.max_percent == 0

    def is_unlimited(self) -> bool:
        return self.max_nodes is None and self.max_percent is None

    def allows_every_node(self) -> bool:
        """True when every node may carry our marks at once, whatever the node count:
        no count limit and 100 % (or no percent limit)."""
        return self.max_nodes is None and (self.max_percent is None or self.max_percent >= 100)


class JobBudgets(PolicyModel):
    """Limits on disruptive actions for one job."""

    nodes: NodeBudget = NodeBudget(max_nodes=1)
    """Nodes of one job that may carry our marks at once."""
    actions_per_hour: ActionCount | None = 3
    """Disruptive actions (restart, taint, drain, cordon) for one job per rolling hour
    (null: unlimited)."""
    between_actions_s: Seconds = 300.0
    """Minimum gap between two disruptive actions on one job."""


class Breaker(PolicyModel):
    """Trips when too many distinct (job, node) subjects want a disruptive action in a
    window: a storm is more likely our bug or a fleet event than many broken GPUs. While
    open it refuses new disruptive actions; it never blocks undo or notify."""

    max_actions: Int = Field(default=10, ge=1, le=MAX_ACTIONS)
    """Trips when more distinct (job, node) subjects than this want an action (5000 or more
    never trips: enforce mode then needs breakerNeverOpens in acknowledgeUnsafe)..."""
    window_s: PositiveSeconds = 900.0
    """...within this many seconds."""
    open_s: PositiveSeconds = 3600.0
    """Stays open this long after tripping."""


class ClusterSafety(PolicyModel):
    """Limits over all jobs (they cannot live in one policy: a storm spans policies)."""

    nodes: NodeBudget = NodeBudget(max_nodes=2, max_percent=5.0)
    """Nodes in the whole cluster that may carry our marks at once."""
    actions_per_hour: ActionCount | None = 6
    """Disruptive actions in the whole cluster per rolling hour (null: unlimited)."""
    breaker: Breaker = Breaker()
    """The circuit breaker."""


# --- the enforce-mode rules -----------------------------------------------------------


class UnsafeRisk(StrEnum):
    """Enforce-mode settings refused unless named in ``acknowledgeUnsafe``."""

    UNLIMITED_BUDGETS = "unlimitedBudgets"
    """Every budget that governs an enforced policy's enabled steps is null."""
    FULL_CLUSTER_BUDGET = "fullClusterBudget"
    """cluster.nodes lets every node of the cluster carry our marks at once."""
    BREAKER_NEVER_OPENS = "breakerNeverOpens"
    """cluster.breaker.maxActions is at least BREAKER_NEVER_OPENS_AT."""
    NO_EXECUTE_TAINT = "noExecuteTaint"
    """An enabled taintNode step with effect NoExecute."""
    HAIR_TRIGGER = "hairTrigger"
    """thresholds.act at or above HAIR_TRIGGER_ACT and one report enough to act, in a policy
    with an enabled disruptive step."""
    EMPTY_LADDER = "emptyLadder"
    """An enforced policy that enables no ladder step, not even notify."""
    INSTANT_ESCALATION = "instantEscalation"
    """An enabled step's timeoutS below MIN_STEP_TIMEOUT_S, in a policy with an enabled
    disruptive step."""


@dataclass(frozen=True, slots=True)
class EnforcedPolicy:
    """One policy whose effective mode is enforce, as the safety rules see it."""

    name: str
    steps: frozenset[ActionKind]
    budgets: JobBudgets
    taint_effect: TaintEffect = TaintEffect.NO_SCHEDULE
    act: float = 0.7
    """thresholds.act."""
    one_report_rule: str | None = None
    """The persistence fields that let one report below ``act`` decide, as a person reads
    them (``persistence.consecutiveReports=1``); None when it takes more."""
    step_timeouts: tuple[tuple[ActionKind, float], ...] = ()
    """(step, timeoutS) of each enabled step."""


@dataclass(frozen=True, slots=True)
class UnsafeSetting:
    """A risky setting found in an enforce document: refused unless acknowledged, then
    warned about. ``message`` names the fields and their values."""

    risk: UnsafeRisk
    message: str
    remedy: str

    def refusal(self) -> str:
        accept = f"or accept the risk with acknowledgeUnsafe: [{self.risk}]"
        return f"{self.message} ({self.remedy}, {accept})"

    def warning(self) -> str:
        return f"{self.message}; accepted by acknowledgeUnsafe: {self.risk}"


def zero_budget_problems(p: EnforcedPolicy, cluster: ClusterSafety) -> list[str]:
    """A zero budget in enforce mode refuses every action it governs: a typo, not a policy.
    Every such budget of ``p``, one line each."""
    disruptive = p.steps & DISRUPTIVE_ACTIONS
    where = f"policy '{p.name}'"
    out = []
    if p.steps & NODE_ACTIONS:
        if p.budgets.nodes.is_zero():
            out.append(
                f"{where}: budgets.nodes is zero in enforce mode; every node action would be "
                "refused (disable the node steps or raise the budget)"
            )
        if cluster.nodes.is_zero():
            out.append(
                f"cluster.nodes is zero in enforce mode while {where} enables node actions: "
                "every node action would be refused (raise it or disable the node steps)"
            )
    if disruptive:
        if p.budgets.actions_per_hour == 0:
            out.append(
                f"{where}: budgets.actionsPerHour=0 in enforce mode refuses every action "
                "(null means unlimited; disable the steps instead)"
            )
        if cluster.actions_per_hour == 0:
            out.append(
                "cluster.actionsPerHour=0 in enforce mode refuses every action "
                "(null means unlimited; disable the steps instead)"
            )
    return out


def unsafe_settings(
    enforced: Sequence[EnforcedPolicy], cluster: ClusterSafety
) -> list[UnsafeSetting]:
    """The risky settings of a document whose enforced policies are ``enforced``.

    Only enabled disruptive steps count: a notify-only policy cannot do harm whatever
    its budgets, and node budgets matter only to policies that enable node steps.
    """
    out = [s for p in enforced if (s := _unlimited_budgets(p, cluster)) is not None]
    node_users = [p.name for p in enforced if p.steps & NODE_ACTIONS]
    nodes = cluster.nodes
    if node_users and nodes.allows_every_node():
        percent = "null" if nodes.max_percent is None else f"{nodes.max_percent:g}"
        out.append(
            UnsafeSetting(
                UnsafeRisk.FULL_CLUSTER_BUDGET,
                f"cluster.nodes with maxNodes=null and maxPercent={percent} lets "
                f"{_policies(node_users)} mark every node of the cluster at once in enforce mode",
                "lower maxPercent or set maxNodes",
            )
        )
    no_execute = [
        p.name
        for p in enforced
        if ActionKind.TAINT_NODE in p.steps and p.taint_effect is TaintEffect.NO_EXECUTE
    ]
    if no_execute:
        out.append(
            UnsafeSetting(
                UnsafeRisk.NO_EXECUTE_TAINT,
                f"ladder.taintNode.effect=NoExecute in {_policies(no_execute)} evicts every pod "
                "on the node that does not tolerate the taint, of every job, at once: no budget, "
                "no PodDisruptionBudget, no drain step governs it (and a scheduler such as "
                "Kueue's topology-aware scheduling may evict or move whole workloads off a "
                "NoExecute-tainted node)",
                "use NoSchedule, the default, and the budgeted drainNode step",
            )
        )
    out += [
        UnsafeSetting(
            UnsafeRisk.EMPTY_LADDER,
            f"policy '{p.name}' enables no ladder step in enforce mode: its jobs' slow ranks "
            "are neither announced nor acted on, and enforce mode then looks in force while "
            "doing nothing",
            "enable ladder.notify at least, or give the policy mode: observe",
        )
        for p in enforced
        if not p.steps
    ]
    out += [s for p in enforced if (s := _hair_trigger(p)) is not None]
    out += [s for p in enforced if (s := _instant_escalation(p)) is not None]
    acting = [p.name for p in enforced if p.steps & DISRUPTIVE_ACTIONS]
    if acting and cluster.breaker.max_actions >= BREAKER_NEVER_OPENS_AT:
        out.append(
            UnsafeSetting(
                UnsafeRisk.BREAKER_NEVER_OPENS,
                f"cluster.breaker.maxActions={cluster.breaker.max_actions} can never trip: a "
                f"Kubernetes cluster has at most {BREAKER_NEVER_OPENS_AT} nodes, so nothing stops "
                f"a storm of actions by {_policies(acting)} in enforce mode",
                f"lower it below {BREAKER_NEVER_OPENS_AT}",
            )
        )
    return out


def _unlimited_budgets(p: EnforcedPolicy, cluster: ClusterSafety) -> UnsafeSetting | None:
    if not p.steps & DISRUPTIVE_ACTIONS:
        return None
    limits = {
        "budgets.actionsPerHour": p.budgets.actions_per_hour is None,
        "cluster.actionsPerHour": cluster.actions_per_hour is None,
    }
    if p.steps & NODE_ACTIONS:
        limits["budgets.nodes"] = p.budgets.nodes.is_unlimited()
        limits["cluster.nodes"] = cluster.nodes.is_unlimited()
    if not all(limits.values()):
        return None
    names = list(limits)
    listed = (
        ", ".join(names[:-1]) + f" and {names[-1]} are " + ("both" if len(names) == 2 else "all")
    )
    return UnsafeSetting(
        UnsafeRisk.UNLIMITED_BUDGETS,
        f"policy '{p.name}': {listed} null in enforce mode: no budget limits its disruptive "
        "actions",
        "set one of them",
    )


def _hair_trigger(p: EnforcedPolicy) -> UnsafeSetting | None:
    if not p.steps & DISRUPTIVE_ACTIONS or p.act < HAIR_TRIGGER_ACT or p.one_report_rule is None:
        return None
    return UnsafeSetting(
        UnsafeRisk.HAIR_TRIGGER,
        f"policy '{p.name}': thresholds.act={p.act:g} with {p.one_report_rule} in enforce "
        f"mode: one report with a rank {100 * (1 - p.act):.2g}% behind its reference starts "
        "disruptive actions, and healthy GPUs of one model differ by more than that",
        f"lower thresholds.act below {HAIR_TRIGGER_ACT:g} or require more reports in a row",
    )


def _instant_escalation(p: EnforcedPolicy) -> UnsafeSetting | None:
    if not p.steps & DISRUPTIVE_ACTIONS:
        return None
    short = [f"ladder.{k}.timeoutS={t:g}" for k, t in p.step_timeouts if t < MIN_STEP_TIMEOUT_S]
    if not short:
        return None
    return UnsafeSetting(
        UnsafeRisk.INSTANT_ESCALATION,
        f"policy '{p.name}': {', '.join(short)} in enforce mode: no action shows an effect "
        f"in under {MIN_STEP_TIMEOUT_S:g} s (a restarted rank or a drained node takes minutes), "
        "so the ladder escalates on every report whatever the last step did",
        "give each enabled step the time its action needs to show",
    )


def _policies(names: list[str]) -> str:
    return ("policy " if len(names) == 1 else "policies ") + ", ".join(f"'{n}'" for n in names)
