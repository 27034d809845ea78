"""Issue 40's memory poisoning through the reconcile over the API stand-in: tenants are
the namespace and ServiceAccount of the job's pods as the API says (never the report).

- A job of tenant A reports its GPU ~15 % faster than its peers for a dozen windows and
  ends. The next job on that node, of tenant B, is healthy at 0.86 of its peers: no
  action, no eviction, no slow record.
- A job of tenant A, observed only, plants slow records of a GPU; a job of tenant B slow
  on that GPU still gets its rank restart (the ladder is not shortened to the node).

Each test fails when the memory does not tell tenants apart (checked with
``hardware_trust.tenant_of`` answering one tag for every job)."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from born_reports import born
from harness import RunningServer
from harness.objects import node, pod
from operator_world import CONTROLLER_NS, Clock
from reporter_helpers import CRD_PATH
from test_hardware_memory_k8s import gpu_of as hardware_gpu_of
from test_hardware_memory_k8s import reconciler

from pacekeeper.controller.core.ids import JobKey
from pacekeeper.controller.runtime.reconcile import Reconciler
from pacekeeper.detector.reporters.kubernetes import KubernetesStatusSink
from pacekeeper.detector.score_report import JobIdentity, Platform, RankScores, ScoreReport

NODES = ("n0", "n1")
PER_NODE = 8
X = 3  # the GPU under attack: n0, slot 3
REPORT_S = 60.0
ATTACKER = ("team-a", "trainer")
VICTIM = ("team-b", "trainer")

POLICY = """
apiVersion: pacekeeper.dev/v1alpha1
kind: RemediationPolicies
mode: enforce
defaultPolicy: gpu
policies:
  gpu:
    score: {kind: %(score)s}
    thresholds: {act: 0.9, recover: 0.95}
    persistence: {consecutiveReports: 2, maxReportAgeS: 300}
    warmup: {afterJobStartS: 0, afterActionS: 0}
    recovery: {consecutiveReports: 2, holdS: 60}
    ladder:
      notify: {enabled: true, timeoutS: 60}
      restartRank: {enabled: true, timeoutS: 60, maxAttempts: 1}
      taintNode: {enabled: true, timeoutS: 60}
    budgets: {nodes: {maxNodes: 2}, actionsPerHour: 100, betweenActionsS: 0}
cluster:
  nodes: {maxNodes: 100}
  actionsPerHour: 1000
"""


def gpu_of(slot: int) -> str:
    return hardware_gpu_of(slot, PER_NODE)


@dataclass
class Job:
    """One pod per node, one rank per GPU (rank = slot), in ``tenant``'s namespace."""

    server: RunningServer
    api_client: Any
    name: str
    tenant: tuple[str, str]
    observe: bool = False
    """Opted in with ``pacekeeper.dev/mode: observe``: its records are kept, nothing acts."""
    rng: random.Random = field(default_factory=lambda: random.Random(1))
    best: dict[int, float] = field(default_factory=dict)
    seq: int = 0

    @property
    def namespace(self) -> str:
        return self.tenant[0]

    def start(self) -> KubernetesStatusSink:
        namespace, account = self.tenant
        self.server.apply(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        )
        for i, n in enumerate(NODES):
            obj = pod(
                f"{self.name}-{i}", namespace=namespace, node_name=n,
                labels={"batch.kubernetes.io/job-name": self.name,
                        "batch.kubernetes.io/job-completion-index": str(i)},
                annotations={"pacekeeper.dev/detect": "true"}
                | ({"pacekeeper.dev/mode": "observe"} if self.observe else {}),
                owner={"kind": "Job", "name": self.name, "uid": f"uid-{namespace}-{self.name}"},
            )  # fmt: skip
            obj["spec"]["serviceAccountName"] = account
            self.server.apply(obj)
        born(self.api_client, namespace, self.name, controller_ns=CONTROLLER_NS)
        return KubernetesStatusSink(
            namespace=namespace, name=self.name, incarnation="inc-1",
            api_client=self.api_client, pod_name=f"{self.name}-0",
        )  # fmt: skip

    def end(self) -> None:
        for i in range(len(NODES)):
            self.server.delete("v1", "Pod", f"{self.name}-{i}", namespace=self.namespace)

    def report(self, at: datetime, faults: Mapping[int, float]) -> ScoreReport:
        speeds = {
            r: faults.get(r, 1.0) * (1.0 + self.rng.uniform(-0.002, 0.002))
            for r in range(len(NODES) * PER_NODE)
        }
        fastest = max(speeds.values())
        ranks = []
        for r, s in speeds.items():
            self.best[r] = max(self.best.get(r, 0.0), s)
            ranks.append(
                RankScores(
                    rank=r,
                    node=NODES[r // PER_NODE],
                    pod=f"{self.name}-{r // PER_NODE}",
                    gpu_relative=s / fastest,
                    gpu_individual=s / self.best[r],
                    kernel_samples=100,
                    section_samples=100,
                    gpu_uuid=gpu_of(r),
                )
            )
        self.seq += 1
        return ScoreReport.build(
            job=JobIdentity(platform=Platform.KUBERNETES, namespace=self.namespace,
                            name=self.name),
            sequence=self.seq, generated_at=at, window_s=REPORT_S, ranks=ranks,
        )  # fmt: skip


def run(rec: Reconciler, clock: Clock, job: Job, windows: int, faults: Mapping[int, float]) -> None:
    sink = job.start()
    for _ in range(windows):
        clock.advance(REPORT_S)
        sink.send(job.report(clock(), faults))
        rec.reconcile_job(JobKey(f"{job.namespace}/{job.name}"))


def world(server: RunningServer, api_client: Any, score: str) -> tuple[Reconciler, Clock]:
    server.apply_yaml(CRD_PATH)
    server.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": CONTROLLER_NS}})
    for n in NODES:
        server.apply(node(n))
    clock = Clock()
    return reconciler(api_client, clock, POLICY % {"score": score}), clock


def moved(server: RunningServer, namespace: str) -> list[str]:
    """The pods of ``namespace`` evicted or deleted, by name (nothing else is asked to)."""
    return [
        f"{h.verb}:{h.name}"
        for h in server.history.find(namespace=namespace)
        if h.subresource == "eviction" or (h.verb == "delete" and h.plural == "pods")
    ]


def node_marks(server: RunningServer) -> list[str]:
    return [
        f"{h.name}" for h in server.history.find(plural="nodes") if h.verb in ("patch", "update")
    ]


def test_a_factor_another_tenant_planted_moves_nothing_of_the_next_tenants_job(
    k8s_server: RunningServer, k8s_api_client: Any
) -> None:
    rec, clock = world(k8s_server, k8s_api_client, "gpuIndividual")
    poison = Job(k8s_server, k8s_api_client, "poison", ATTACKER)
    run(rec, clock, poison, 12, {X: 1.147})
    g = rec.store.hardware.load().gpu(NODES[0], gpu_of(X))
    assert g is not None and g.factor > 1.14  # the memory did learn it
    poison.end()

    victim = Job(k8s_server, k8s_api_client, "next", VICTIM)
    run(rec, clock, victim, 8, {X: 0.86})
    assert moved(k8s_server, VICTIM[0]) == []
    assert node_marks(k8s_server) == []
    g = rec.store.hardware.load().gpu(NODES[0], gpu_of(X))
    assert g is not None and not [s for s in g.services if s.slow]  # B not recorded slow


def test_a_slow_record_another_tenant_planted_does_not_skip_the_rank_restart(
    k8s_server: RunningServer, k8s_api_client: Any
) -> None:
    rec, clock = world(k8s_server, k8s_api_client, "gpuRelative")
    plant = Job(k8s_server, k8s_api_client, "plant", ATTACKER, observe=True)
    run(rec, clock, plant, 8, {X: 0.7})
    g = rec.store.hardware.load().gpu(NODES[0], gpu_of(X))
    assert g is not None and [s for s in g.services if s.slow]  # the planted record
    assert moved(k8s_server, ATTACKER[0]) == [] and node_marks(k8s_server) == []
    plant.end()

    victim = Job(k8s_server, k8s_api_client, "next", VICTIM)
    run(rec, clock, victim, 3, {X: 0.7})
    # The victim's ladder as before the plant: its rank restarted first, its node unmarked.
    assert moved(k8s_server, VICTIM[0]) == ["create:next-0"]
    assert node_marks(k8s_server) == []
