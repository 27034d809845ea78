"""Builders for the controller core tests: reports, policy documents, and a loop that
feeds the real engine and applies its decisions to a world of node marks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from pacekeeper.controller.core.decisions import Decision, Reason, Verdict
from pacekeeper.controller.core.engine import decide
from pacekeeper.controller.core.ids import JobKey, NodeName
from pacekeeper.controller.core.observations import (
    ClusterView,
    JobView,
    MarkKind,
    NodeView,
    RejectedReport,
    Window,
)
from pacekeeper.controller.core.policy import ActionKind, PolicyDocument, parse_policy_document
from pacekeeper.controller.core.state import State
from pacekeeper.detector.score_report import JobIdentity, Platform, RankScores, ScoreReport

T0 = datetime(2026, 1, 1, tzinfo=UTC)
REPORT_S = 60.0


def node_of(rank: int, per_node: int = 8) -> str:
    return f"node-{rank // per_node:03d}"


def report(
    scores: Mapping[int, float | None],
    *,
    seq: int,
    at: datetime,
    job: str = "train",
    namespace: str = "ml",
    per_node: int = 8,
    samples: int = 10,
    nodes: Mapping[int, str] | None = None,
    world_size: int | None = None,
) -> ScoreReport:
    ranks = [
        RankScores(
            rank=r,
            node=nodes[r] if nodes else node_of(r, per_node),
            pod=f"{job}-{r}",
            gpu_relative=s,
            section_samples=samples,
            kernel_samples=samples,
        )
        for r, s in scores.items()
    ]
    return ScoreReport.build(
        job=JobIdentity(platform=Platform.KUBERNETES, namespace=namespace, name=job),
        sequence=seq,
        generated_at=at,
        window_s=REPORT_S,
        ranks=ranks,
        world_size=world_size,
    )


GPU_TAIL_POLICY: dict[str, Any] = {
    "thresholds": {"act": 0.93, "recover": 0.97},
    "score": {
        "kind": "gpuIndividual",
        "reference": "peerMedian",
        "minDeviations": None,
        "tail": {},
    },
    "persistence": {"consecutiveReports": 2, "maxReportAgeS": 300},
}
"""The recommended policy's score in short: gpuIndividual against the peers, with a tail."""


def calm_gpus(rng: Any, world: int, gpu_sd: float) -> tuple[Any, Any]:
    """One report's GPU scores and section tails of a healthy job: 1 less a half-normal
    jitter (``gpu_sd`` for the GPU, 1 % for the tails)."""
    g = np.minimum(1.0 - np.abs(rng.normal(0.0, gpu_sd, world)), 1.0)
    tails = np.minimum(1.0 - np.abs(rng.normal(0.0, 0.01, world)), 1.0)
    return g, tails


def gpu_report(
    gpu: list[tuple[float | None, float | None]],
    tails: list[float] | None = None,
    *,
    seq: int = 1,
    at: datetime | None = None,
) -> ScoreReport:
    """A report of ``gpuIndividual`` and its median per rank (``gpu[rank]``), and with
    ``tails`` one section's tail score per rank; 8 ranks a node."""
    return ScoreReport.build(
        job=JobIdentity(platform=Platform.KUBERNETES, namespace="ml", name="train"),
        sequence=seq,
        generated_at=at or T0 + timedelta(seconds=REPORT_S * seq),
        window_s=REPORT_S,
        ranks=[
            RankScores(
                rank=r,
                node=node_of(r),
                pod=f"train-{r}",
                gpu_individual=g,
                gpu_individual_median=m,
                section_tail=None if tails is None else {"step": tails[r]},
                section_samples=50,
                kernel_samples=50,
            )
            for r, (g, m) in enumerate(gpu)
        ],
    )


def scores(
    world: int, slow: Mapping[int, float] | None = None, base: float = 1.0
) -> dict[int, float]:
    out = dict.fromkeys(range(world), base)
    out.update(slow or {})
    return out


def deep_merge(a: dict[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for k, v in b.items():
        out[k] = (
            deep_merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), dict) else v
        )
    return out


ALL_STEPS = {
    "notify": {"enabled": True, "timeoutS": 60},
    "restartRank": {"enabled": True, "timeoutS": 60, "maxAttempts": 1},
    "taintNode": {"enabled": True, "timeoutS": 60},
    "drainNode": {"enabled": True, "timeoutS": 60},
    "cordonNode": {"enabled": True, "timeoutS": 60},
}


def policy_doc(
    policy: Mapping[str, Any] | None = None, document: Mapping[str, Any] | None = None
) -> PolicyDocument:
    """An enforce-mode document with fast, test-sized timings; overrides merge deeply."""
    base_policy: dict[str, Any] = {
        "persistence": {"consecutiveReports": 3, "maxReportAgeS": 300},
        "warmup": {"afterJobStartS": 0, "afterActionS": 0},
        "recovery": {"consecutiveReports": 2, "holdS": 60},
        "ladder": ALL_STEPS,
        "budgets": {"nodes": {"maxNodes": 2}, "actionsPerHour": 100, "betweenActionsS": 0},
        "cooldowns": {"nodeAfterUndoS": 600, "nodeAfterHumanS": 3600},
    }
    base_doc: dict[str, Any] = {
        "apiVersion": "pacekeeper.dev/v1alpha1",
        "kind": "RemediationPolicies",
        "mode": "enforce",
        "cluster": {
            "nodes": {"maxNodes": 100},
            "actionsPerHour": 1000,
            "breaker": {"maxActions": 1000},
        },
    }
    doc = deep_merge(base_doc, document or {})
    doc["policies"] = {"default": deep_merge(base_policy, policy or {})}
    return parse_policy_document(doc, "test")


@dataclass
class Loop:
    """Feeds reports to the real engine every REPORT_S and applies its act/undo
    decisions to the node marks the next call observes (an ideal actuator)."""

    doc: PolicyDocument
    world: int = 16
    job: str = "train"
    window: int = 5
    started_at: datetime = T0
    now: datetime = T0
    seq: int = 0
    state: State = field(default_factory=State)
    cluster: ClusterView = field(default_factory=ClusterView)
    reports: list[ScoreReport | RejectedReport] = field(default_factory=list)
    log: list[Decision] = field(default_factory=list)
    job_fields: dict[str, Any] = field(default_factory=dict)
    """Overrides for the JobView (annotations, PDB feedback)."""

    def __post_init__(self) -> None:
        if not self.cluster.nodes:
            names = sorted({node_of(r) for r in range(self.world)})
            self.cluster = ClusterView(nodes={NodeName(n): NodeView(NodeName(n)) for n in names})

    def view(self) -> JobView:
        return JobView(
            key=JobKey(f"ml/{self.job}"),
            reports=tuple(self.reports[-self.window :]),
            namespace="ml",
            name=self.job,
            started_at=self.started_at,
            **self.job_fields,
        )

    def step(self, slow: Mapping[int, float] | None = None, **kw: Any) -> list[Decision]:
        """Advance one report interval with these slow ranks and decide."""
        self.now += timedelta(seconds=REPORT_S)
        self.seq += 1
        self.reports.append(
            report(scores(self.world, slow), seq=self.seq, at=self.now, job=self.job, **kw)
        )
        return self.decide()

    def step_gpu(self, gpu: Any, tails: Any) -> list[Decision]:
        """Advance one report interval with a ``gpu_report`` of these per-rank GPU
        scores (used as mean and median) and section tails, and decide."""
        self.now += timedelta(seconds=REPORT_S)
        self.seq += 1
        pairs = [(float(x), float(x)) for x in gpu]
        self.reports.append(gpu_report(pairs, [float(x) for x in tails], seq=self.seq))
        return self.decide()

    def decide(self) -> list[Decision]:
        out = decide(
            Window(jobs=(self.view(),), cluster=self.cluster), self.state, self.doc, self.now
        )
        self.state = out.next_state
        self.cluster = self.cluster.with_decisions(out.decisions)
        self.log.extend(out.decisions)
        return list(out.decisions)

    def decide_without_applying(self) -> list[Decision]:
        """Decide, but let the actuator fail: the world does not change."""
        out = decide(
            Window(jobs=(self.view(),), cluster=self.cluster), self.state, self.doc, self.now
        )
        self.state = out.next_state
        self.log.extend(out.decisions)
        return list(out.decisions)

    def human_uncordon(self, node: str) -> None:
        nv = self.cluster.nodes[NodeName(node)]
        nodes = dict(self.cluster.nodes)
        marks = nv.our_marks - {MarkKind.CORDON}
        nodes[NodeName(node)] = replace(nv, unschedulable=False, our_marks=marks)
        self.cluster = replace(self.cluster, nodes=nodes)


def acts(decisions: list[Decision]) -> list[tuple[ActionKind | None, str]]:
    return [(d.action, d.subject) for d in decisions if d.verdict is Verdict.ACT]


def reasons(decisions: list[Decision]) -> set[Reason]:
    return {d.reason for d in decisions}
