"""What the decision core sees: plain frozen values the shell builds from the world.

The operator builds these from StragglerReport status, pod annotations and Node objects;
the Ray-side runner from the ScoreBoard and ``ray.nodes()``; the simulator from its own
model. The core never fetches anything itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from pacekeeper.controller.core.decisions import Decision, Reason, Verdict
from pacekeeper.controller.core.ids import JobKey, NodeName
from pacekeeper.controller.core.policy import ActionKind, Mode
from pacekeeper.detector.score_report import ScoreReport


class MarkKind(StrEnum):
    """Marks the controller leaves on a node (and removes when it undoes)."""

    TAINT = "taint"
    CORDON = "cordon"


MARK_OF_ACTION: dict[ActionKind, MarkKind] = {
    ActionKind.TAINT_NODE: MarkKind.TAINT,
    ActionKind.CORDON_NODE: MarkKind.CORDON,
}
ACTION_OF_MARK: dict[MarkKind, ActionKind] = {v: k for k, v in MARK_OF_ACTION.items()}


@dataclass(frozen=True, slots=True)
class NodeView:
    """A node as the shell last read it."""

    name: NodeName
    labels: Mapping[str, str] = field(default_factory=dict)
    unschedulable: bool = False
    our_marks: frozenset[MarkKind] = frozenset()
    """Marks present on the node that carry our ownership annotation."""

    @property
    def cordoned_by_others(self) -> bool:
        """Cordoned, and not by us: a human's or another system's decision."""
        return self.unschedulable and MarkKind.CORDON not in self.our_marks


@dataclass(frozen=True, slots=True)
class RejectedReport:
    """A report that failed validation at the boundary (``ReportRejected``); never acted on."""

    received_at: datetime
    error: str
    reason: Reason = Reason.MALFORMED_REPORT
    """``UntrustedReport`` when its identities contradict the API (``trust.py``)."""
    evidence: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class JobView:
    """One job: its identity, its opt-in annotations and its window of recent reports."""

    key: JobKey
    reports: tuple[ScoreReport | RejectedReport, ...]
    namespace: str | None = None
    name: str = ""
    started_at: datetime | None = None
    """When the job (this incarnation) started; None: the first time we saw it."""
    policy_name: str | None = None
    """``pacekeeper.dev/policy``; None: the document's defaultPolicy."""
    mode_override: Mode | None = None
    """``pacekeeper.dev/mode``; can only lower the mode."""
    policy_source: str | None = None
    """What named ``policy_name`` (``annotation pacekeeper.dev/policy``), for decisions
    to say so: an override nobody can see is one nobody can undo."""
    mode_source: str | None = None
    """What set ``mode_override`` (``annotation pacekeeper.dev/mode``)."""
    opted_out: bool = False
    """The job's own annotation opted it out."""
    pdb_blocked_nodes: frozenset[NodeName] = frozenset()
    """Nodes where the shell's drain of this job's pods is held up by a
    PodDisruptionBudget (eviction answered 429): the ladder waits there."""
    service_account: str | None = None
    """The ServiceAccount the job's pods run as (``spec.serviceAccountName``, from the
    API, never the report): with ``namespace``, the tenant that what the job teaches the
    memory of hardware is tagged with (``hardware_trust``). None: not known (Ray, the
    simulator): the namespace alone is the tenant."""
    placed_nodes: frozenset[NodeName] | None = None
    """The nodes the API places the job's live pods on (never the report's word). A
    bounded report counts nodes it does not name: of a node the job still runs on it
    says only that every counted node scores at least its floor. None: not known (Ray,
    the simulator): such a node neither recovers nor counts as left."""


@dataclass(frozen=True, slots=True)
class ClusterView:
    nodes: Mapping[NodeName, NodeView] = field(default_factory=dict)
    total_nodes: int | None = None
    """Nodes in the cluster for percentage budgets; None: ``len(nodes)``."""
    marked: tuple[NodeName, ...] = field(init=False)
    """The nodes carrying marks of ours, in ``nodes``' order: found once per view (the
    operator shares one across reconciles until a node changes), not once per decision
    over every node of the cluster (32,000 in the time-to-act bench)."""

    def __post_init__(self) -> None:
        marked = tuple(name for name, nv in self.nodes.items() if nv.our_marks)
        object.__setattr__(self, "marked", marked)

    def node(self, name: NodeName) -> NodeView:
        return self.nodes.get(name) or NodeView(name=name)

    def node_count(self) -> int:
        return self.total_nodes if self.total_nodes is not None else len(self.nodes)

    def with_decisions(self, decisions: Iterable[Decision]) -> ClusterView:
        """The world after an ideal actuator applied these decisions (taints and cordons
        become our marks, undos remove them). For simulators and tests: the shell reads
        the real world instead."""
        nodes = dict(self.nodes)
        for d in decisions:
            if d.action is None or d.node is None or d.action not in MARK_OF_ACTION:
                continue
            mark = MARK_OF_ACTION[d.action]
            nv = nodes.get(d.node) or NodeView(name=d.node)
            if d.verdict is Verdict.ACT:
                marks = nv.our_marks | {mark}
            elif d.verdict is Verdict.UNDO:
                marks = nv.our_marks - {mark}
            else:
                continue
            unschedulable = nv.unschedulable
            if mark is MarkKind.CORDON:
                unschedulable = d.verdict is Verdict.ACT
            nodes[d.node] = replace(nv, our_marks=frozenset(marks), unschedulable=unschedulable)
        return replace(self, nodes=nodes)


@dataclass(frozen=True, slots=True)
class Window:
    """One call's input: the jobs to decide on and the cluster they run on. A call may
    carry one job (the operator's per-job reconcile) or all of them (simulator, Ray)."""

    jobs: tuple[JobView, ...]
    cluster: ClusterView = ClusterView()


def cluster_from_reports(reports: Iterable[ScoreReport]) -> ClusterView:
    """A cluster view holding just the nodes the reports name (Ray runner, simulator)."""
    names = {NodeName(r.node) for rep in reports for r in rep.ranks}
    return ClusterView(nodes={n: NodeView(name=n) for n in sorted(names)})


def job_view(
    reports: Iterable[ScoreReport | RejectedReport],
    *,
    started_at: datetime | None = None,
    policy_name: str | None = None,
    mode_override: Mode | None = None,
) -> JobView:
    """A ``JobView`` keyed by the reports' job identity."""
    items = tuple(reports)
    ok = [r for r in items if isinstance(r, ScoreReport)]
    if not ok:
        raise ValueError("job_view needs at least one valid report to know the job")
    job = ok[-1].job
    return JobView(
        key=JobKey(job.key),
        reports=items,
        namespace=job.namespace,
        name=job.name,
        started_at=started_at,
        policy_name=policy_name,
        mode_override=mode_override,
    )
