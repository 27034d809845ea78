"""Safety limits on disruptive actions: cooldowns, the circuit breaker, rate limits and
node budgets (per job and per cluster). Pure: state in, refusal or permission out.

The engine asks ``admit`` before a disruptive step (it counts the demand for the breaker,
then checks every limit) and ``charge`` once the step is taken (rate-limit stamp, the
job's gap between actions).

Nothing here ever refuses an undo or a notify: safety limits bound the harm we can do,
and removing our own marks only reduces it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from pacekeeper.controller.core.decisions import Reason
from pacekeeper.controller.core.ids import JobKey, NodeName
from pacekeeper.controller.core.policy import (
    NODE_ACTIONS,
    ActionKind,
    Breaker,
    ClusterSafety,
    Policy,
)
from pacekeeper.controller.core.state import ActionStamp, ClusterState, JobState

RATE_WINDOW = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class Refusal:
    reason: Reason
    evidence: Mapping[str, Any] = field(default_factory=dict)

    @property
    def until(self) -> datetime | None:
        """When the refusal ends by itself (cooldown, breaker); None: it may not."""
        until = self.evidence.get("until")
        return datetime.fromisoformat(until) if isinstance(until, str) else None


@dataclass(frozen=True, slots=True)
class Request:
    """A disruptive step asking to pass, with what its limits are measured against."""

    step: ActionKind
    node: NodeName
    job: JobKey
    job_state: JobState
    policy: Policy
    safety: ClusterSafety
    job_nodes: int
    cluster_nodes: int
    """Nodes in the cluster for percentage budgets (at least the job's)."""
    now: datetime
    include_simulated: bool
    """Count simulated marks and stamps too (the job is observing: a dry-run shows the
    refusals the policy would produce)."""


@dataclass(frozen=True, slots=True)
class Admission:
    """``admit``'s answer: the cluster with the demand counted, and a refusal or the
    budget used/limit to record on the act."""

    cluster: ClusterState
    refusal: Refusal | None
    evidence: dict[str, Any] = field(default_factory=dict)


def counts(stamp: ActionStamp | bool, include_simulated: bool) -> bool:
    simulated = stamp.simulated if isinstance(stamp, ActionStamp) else stamp
    return include_simulated or not simulated


def marked_nodes(
    cluster: ClusterState, *, job: JobKey | None = None, include_simulated: bool
) -> set[NodeName]:
    """Nodes carrying our marks (held by ``job`` when given)."""
    out: set[NodeName] = set()
    for name, ns in cluster.nodes.items():
        for rec in ns.marks.values():
            if not counts(rec.simulated, include_simulated):
                continue
            if job is None or job in rec.holders:
                out.add(name)
    return out


def check(req: Request, cluster: ClusterState) -> Refusal | None:
    """Why ``req.step`` on ``req.node`` must not happen now, or None when it may."""
    step, node, job, job_state, now = req.step, req.node, req.job, req.job_state, req.now
    policy, safety, include_simulated = req.policy, req.safety, req.include_simulated
    job_nodes, cluster_nodes = req.job_nodes, req.cluster_nodes
    ns = cluster.nodes.get(node)
    if step in NODE_ACTIONS and ns is not None and ns.cooldown_until and now < ns.cooldown_until:
        return Refusal(
            Reason.COOLDOWN,
            {"cause": ns.cooldown_cause, "until": ns.cooldown_until.isoformat()},
        )
    gap = policy.budgets.between_actions_s
    if job_state.last_disruptive_at and now - job_state.last_disruptive_at < timedelta(seconds=gap):
        until = job_state.last_disruptive_at + timedelta(seconds=gap)
        return Refusal(Reason.COOLDOWN, {"cause": "betweenActions", "until": until.isoformat()})
    if cluster.breaker_open_until and now < cluster.breaker_open_until:
        return Refusal(
            Reason.BREAKER_OPEN,
            {
                "until": cluster.breaker_open_until.isoformat(),
                "demand": len(cluster.breaker_demand),
            },
        )
    recent = [
        s for s in cluster.stamps if now - s.at < RATE_WINDOW and counts(s, include_simulated)
    ]
    limit = safety.actions_per_hour
    if limit is not None and len(recent) >= limit:
        return Refusal(
            Reason.BUDGET_EXHAUSTED,
            {"budget": "cluster.actionsPerHour", "used": len(recent), "limit": limit},
        )
    mine = sum(1 for s in recent if s.job == job)
    limit = policy.budgets.actions_per_hour
    if limit is not None and mine >= limit:
        return Refusal(
            Reason.BUDGET_EXHAUSTED,
            {"budget": "budgets.actionsPerHour", "used": mine, "limit": limit},
        )
    if step not in NODE_ACTIONS:
        return None
    job_marked = marked_nodes(cluster, job=job, include_simulated=include_simulated)
    if node not in job_marked:
        limit = policy.budgets.nodes.limit(job_nodes)
        if limit is not None and len(job_marked) >= limit:
            return Refusal(
                Reason.BUDGET_EXHAUSTED,
                {"budget": "budgets.nodes", "used": len(job_marked), "limit": limit},
            )
    all_marked = marked_nodes(cluster, include_simulated=include_simulated)
    if node not in all_marked:
        limit = safety.nodes.limit(cluster_nodes)
        if limit is not None and len(all_marked) >= limit:
            return Refusal(
                Reason.BUDGET_EXHAUSTED,
                {"budget": "cluster.nodes", "used": len(all_marked), "limit": limit},
            )
    return None


def admit(req: Request, cluster: ClusterState) -> Admission:
    """Count the job's demand for the step (the breaker sees every demand, let through
    or not), then check every limit against it."""
    cluster = with_demand(cluster, f"{req.job}|{req.node}", req.safety.breaker, req.now)
    refusal = check(req, cluster)
    if refusal is not None:
        return Admission(cluster, refusal)
    return Admission(cluster, None, budget_evidence(req, cluster))


def charge(
    cluster: ClusterState, job_state: JobState, stamp: ActionStamp
) -> tuple[ClusterState, JobState]:
    """The cluster and job after a disruptive action: it counts against the rate limits
    and starts the job's ``budgets.betweenActionsS``."""
    return with_stamp(cluster, stamp), replace(job_state, last_disruptive_at=stamp.at)


def with_demand(cluster: ClusterState, subject: str, cfg: Breaker, now: datetime) -> ClusterState:
    """Record that ``subject`` wants a disruptive action; trip the breaker on a storm."""
    horizon = now - timedelta(seconds=cfg.window_s)
    demand = {k: t for k, t in cluster.breaker_demand.items() if t > horizon}
    demand.setdefault(subject, now)
    # Bounded: past the trip point more entries add nothing but memory.
    if len(demand) > 4 * cfg.max_actions:
        keep = sorted(demand.items(), key=lambda kv: kv[1])[-4 * cfg.max_actions :]
        demand = dict(keep)
    open_until = cluster.breaker_open_until
    if len(demand) > cfg.max_actions and not (open_until and now < open_until):
        open_until = now + timedelta(seconds=cfg.open_s)
    return replace(cluster, breaker_demand=demand, breaker_open_until=open_until)


def with_stamp(cluster: ClusterState, stamp: ActionStamp) -> ClusterState:
    kept = tuple(s for s in cluster.stamps if stamp.at - s.at < RATE_WINDOW)
    return replace(cluster, stamps=(*kept, stamp))


def budget_evidence(req: Request, cluster: ClusterState) -> dict[str, Any]:
    """Budget used/limit, recorded on every act decision."""
    job, include_simulated = req.job, req.include_simulated
    return {
        "jobNodesMarked": len(marked_nodes(cluster, job=job, include_simulated=include_simulated)),
        "jobNodesLimit": req.policy.budgets.nodes.limit(req.job_nodes),
        "clusterNodesMarked": len(marked_nodes(cluster, include_simulated=include_simulated)),
        "clusterNodesLimit": req.safety.nodes.limit(req.cluster_nodes),
    }


def cluster_usage(
    cluster: ClusterState, safety: ClusterSafety, cluster_nodes: int, now: datetime
) -> dict[str, tuple[int, int | None]]:
    """The cluster-wide budgets as an operator watches them: scope -> (used, limit), the
    limit None when unlimited. Only real marks and stamps count: an observing policy's
    simulated ones use nothing."""
    recent = sum(1 for s in cluster.stamps if now - s.at < RATE_WINDOW and counts(s, False))
    return {
        "cluster.nodes": (
            len(marked_nodes(cluster, include_simulated=False)),
            safety.nodes.limit(cluster_nodes),
        ),
        "cluster.actionsPerHour": (recent, safety.actions_per_hour),
    }
