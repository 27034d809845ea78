"""A fleet of GPUs with names, jobs that run on it, and the real engine in between: the
builders of the memory-of-hardware tests.

Each GPU has a speed (its static factor times any fault); a job's report scores each
rank as the detector does — relative to the fastest rank of the report, individual to
the rank's own best window since the job's (or its restart's) start — and names each
rank's GPU."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pacekeeper.controller.core.decisions import Decision, Verdict
from pacekeeper.controller.core.engine import decide
from pacekeeper.controller.core.ids import JobKey, NodeName
from pacekeeper.controller.core.observations import ClusterView, JobView, NodeView, Window
from pacekeeper.controller.core.policy import ActionKind, PolicyDocument, parse_policy_document
from pacekeeper.controller.core.state import State
from pacekeeper.detector.score_report import JobIdentity, Platform, RankScores, ScoreReport

T0 = datetime(2026, 3, 1, tzinfo=UTC)
REPORT_S = 60.0


def gpu_name(node: int, slot: int) -> str:
    return f"GPU-{node:08x}-{slot:04x}-4000-8000-000000000000"


def node_name(node: int) -> str:
    return f"gpu-node-{node:02d}"


@dataclass
class Fleet:
    """``nodes`` x ``per_node`` GPUs; ``factors``: static speed of a GPU (by global slot
    ``node * per_node + slot``), 1.0 when not given."""

    nodes: int = 2
    per_node: int = 8
    factors: dict[int, float] = field(default_factory=dict)
    noise: float = 0.002
    seed: int = 1

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    @property
    def size(self) -> int:
        return self.nodes * self.per_node

    def speed(self, slot: int, fault: float = 1.0) -> float:
        jitter = 1.0 + self.rng.uniform(-self.noise, self.noise)
        return self.factors.get(slot, 1.0) * fault * jitter


@dataclass
class Job:
    """A job with one rank per GPU of the fleet (rank = slot)."""

    name: str
    fleet: Fleet
    started_at: datetime = T0
    seq: int = 0
    best: dict[int, float] = field(default_factory=dict)
    """Each rank's fastest window since the (re)start: its individual baseline."""

    @property
    def key(self) -> JobKey:
        return JobKey(f"ml/{self.name}")

    def restart(self, at: datetime) -> None:
        """A new incarnation: fresh detector state, so every baseline starts again."""
        self.best.clear()
        self.started_at = at
        self.seq = 0

    def report(self, at: datetime, faults: Mapping[int, float] | None = None) -> ScoreReport:
        faults = faults or {}
        f = self.fleet
        speeds = {r: f.speed(r, faults.get(r, 1.0)) for r in range(f.size)}
        fastest = max(speeds.values())
        ranks = []
        for r, s in speeds.items():
            self.best[r] = max(self.best.get(r, 0.0), s)
            ranks.append(
                RankScores(
                    rank=r,
                    node=node_name(r // f.per_node),
                    pod=f"{self.name}-{r}",
                    gpu_relative=s / fastest,
                    gpu_individual=s / self.best[r],
                    kernel_samples=100,
                    section_samples=100,
                    gpu_uuid=gpu_name(r // f.per_node, r % f.per_node),
                )
            )
        self.seq += 1
        return ScoreReport.build(
            job=JobIdentity(platform=Platform.KUBERNETES, namespace="ml", name=self.name),
            sequence=self.seq,
            generated_at=at,
            window_s=REPORT_S,
            ranks=ranks,
        )


LADDER = {
    "notify": {"enabled": True, "timeoutS": 60},
    "restartRank": {"enabled": True, "timeoutS": 60, "maxAttempts": 1},
    "taintNode": {"enabled": True, "timeoutS": 60},
}


def doc(policy: Mapping[str, Any] | None = None, **document: Any) -> PolicyDocument:
    """Enforce mode, test-sized timings; ``policy`` and ``document`` add or replace keys."""
    base: dict[str, Any] = {
        "score": {"kind": "gpuRelative"},
        "thresholds": {"act": 0.9, "recover": 0.95},
        "persistence": {"consecutiveReports": 2, "maxReportAgeS": 300},
        "warmup": {"afterJobStartS": 0, "afterActionS": 0},
        "recovery": {"consecutiveReports": 2, "holdS": 60},
        "ladder": LADDER,
        "budgets": {"nodes": {"maxNodes": 2}, "actionsPerHour": 100, "betweenActionsS": 0},
        "cooldowns": {"nodeAfterUndoS": 600, "nodeAfterHumanS": 3600},
    }
    base.update(policy or {})
    return parse_policy_document(
        {
            "mode": "enforce",
            "cluster": {"nodes": {"maxNodes": 100}, "actionsPerHour": 1000},
            "policies": {"default": base},
            **document,
        },
        "test",
    )


@dataclass
class World:
    """The real engine over one fleet; jobs take turns, an ideal actuator applies marks."""

    policies: PolicyDocument
    fleet: Fleet
    now: datetime = T0
    state: State = field(default_factory=State)
    cluster: ClusterView = field(default_factory=ClusterView)
    log: list[Decision] = field(default_factory=list)

    def __post_init__(self) -> None:
        names = [NodeName(node_name(n)) for n in range(self.fleet.nodes)]
        self.cluster = ClusterView(nodes={n: NodeView(n) for n in names})

    def step(self, job: Job, faults: Mapping[int, float] | None = None) -> list[Decision]:
        """One report interval of ``job`` with these GPUs slowed (speed multipliers)."""
        self.now += timedelta(seconds=REPORT_S)
        view = JobView(
            key=job.key,
            reports=(job.report(self.now, faults),),
            namespace="ml",
            name=job.name,
            started_at=job.started_at,
        )
        out = decide(Window((view,), self.cluster), self.state, self.policies, self.now)
        self.state = out.next_state
        self.cluster = self.cluster.with_decisions(out.decisions)
        self.log.extend(out.decisions)
        return list(out.decisions)

    def run(self, job: Job, steps: int, faults: Mapping[int, float] | None = None) -> None:
        for _ in range(steps):
            self.step(job, faults)


def actions(decisions: list[Decision], job: JobKey | None = None) -> list[ActionKind]:
    """The act and would-be act steps, in order."""
    return [
        d.action
        for d in decisions
        if d.action is not None
        and (job is None or d.job == job)
        and (d.verdict is Verdict.ACT or d.evidence.get("wouldBe") == "act")
    ]
