"""A small training job in the harness: nodes, opted-in pods, a StragglerReport that the
real reporter sink fills, and a policy. Shared by the operator tests."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from born_reports import born
from harness import RunningServer
from harness.objects import node, pod
from reporter_helpers import CRD_PATH

from pacekeeper.controller.actuators.kubernetes_actuators import KubernetesActuators
from pacekeeper.controller.actuators.retries import RetrySettings
from pacekeeper.controller.core.ids import JobKey
from pacekeeper.controller.core.policy import PolicyDocument, load_policy_document
from pacekeeper.controller.runtime.reconcile import Reconciler
from pacekeeper.controller.runtime.state_store import STATE_KEY, job_state_name
from pacekeeper.detector.reporters.kubernetes import KubernetesStatusSink
from pacekeeper.detector.score_report import JobIdentity, Platform, RankScores, ScoreReport

NAMESPACE = "default"
JOB = "llama"
CONTROLLER_NS = "pacekeeper"
NODES = ("n0", "n1", "n2")
RANKS_PER_NODE = 4
JOB_OWNER = {"kind": "Job", "name": JOB, "uid": "uid-job-llama"}
"""The batch/v1 Job whose pods these are: the reporter makes it the report's owner."""

POLICY_YAML = """
apiVersion: pacekeeper.dev/v1alpha1
kind: RemediationPolicies
mode: {mode}
defaultPolicy: gpu
policies:
  gpu:
    score: {{kind: gpuRelative}}
    thresholds: {{act: 0.75, recover: 0.9}}
    persistence: {{consecutiveReports: 2, minSamples: 10, maxReportAgeS: 120}}
    warmup: {{afterJobStartS: 0, afterActionS: 0}}
    recovery: {{consecutiveReports: 2, holdS: 60}}
    ladder:
      notify: {{enabled: true, timeoutS: 60}}
      taintNode: {{enabled: true, timeoutS: 120}}
      cordonNode: {{enabled: true, timeoutS: 120}}
    budgets:
      nodes: {{maxNodes: 1}}
      actionsPerHour: 10
      betweenActionsS: 0
cluster:
  nodes: {{maxNodes: 2}}
  actionsPerHour: 20
"""


def policy(mode: str = "enforce") -> PolicyDocument:
    return load_policy_document(POLICY_YAML.format(mode=mode), "test-policy")


def _start() -> datetime:
    # A few seconds ahead of the API's wall clock: objects the test makes after its clock
    # (the job's report, whose creation is the job's start when no pod has a startTime)
    # must not postdate the test's first report, whatever second boundary falls between.
    return datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=5)


@dataclass
class Clock:
    now: datetime = field(default_factory=_start)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


def setup_world(server: RunningServer, *, mode_annotation: str | None = None) -> None:
    server.apply_yaml(CRD_PATH)
    server.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": CONTROLLER_NS}})
    for n in NODES:
        server.apply(node(n))
    annotations = {"pacekeeper.dev/detect": "true"}
    if mode_annotation:
        annotations["pacekeeper.dev/mode"] = mode_annotation
    for i in range(len(NODES)):
        server.apply(
            pod(
                f"{JOB}-{i}",
                node_name=NODES[i],
                labels={
                    "batch.kubernetes.io/job-name": JOB,
                    "batch.kubernetes.io/job-completion-index": str(i),
                },
                annotations=annotations,
                owner=JOB_OWNER,
            )
        )


def report(seq: int, at: datetime, slow: dict[int, float]) -> ScoreReport:
    ranks = []
    for r in range(len(NODES) * RANKS_PER_NODE):
        score = slow.get(r, 0.98)
        n = r // RANKS_PER_NODE
        ranks.append(
            RankScores(
                rank=r,
                node=NODES[n],
                pod=f"{JOB}-{n}",
                gpu_relative=score,
                gpu_individual=score,
                section_samples=100,
                kernel_samples=1000,
            )
        )
    return ScoreReport.build(
        job=JobIdentity(platform=Platform.KUBERNETES, namespace=NAMESPACE, name=JOB),
        sequence=seq,
        generated_at=at,
        window_s=30.0,
        ranks=ranks,
    )


def reconciler(api_client: Any, clock: Clock, mode: str = "enforce") -> Reconciler:
    """The real reconciler over HTTP, with the test's clock and no waits between retries."""
    acts = KubernetesActuators(
        api_client, instance="test", settings=RetrySettings(request_timeout_s=1.0),
        sleep=lambda _s: None,
    )  # fmt: skip
    return Reconciler(
        api_client, policy(mode), namespace=CONTROLLER_NS, clock=clock, actuators=acts
    )


def sink(api_client: Any) -> KubernetesStatusSink:
    """Rank 0's reporter, its report created as the controller creates it on seeing the
    job's opted-in pods (``setup_world`` first)."""
    born(api_client, NAMESPACE, JOB, controller_ns=CONTROLLER_NS)
    return KubernetesStatusSink(
        namespace=NAMESPACE, name=JOB, incarnation="inc-1", api_client=api_client,
        pod_name=f"{JOB}-0",
    )  # fmt: skip


def taints(server: RunningServer, name: str) -> list[dict[str, Any]]:
    return list(server.read("v1", "Node", name).get("spec", {}).get("taints") or [])


def cordoned(server: RunningServer, name: str) -> bool:
    return bool(server.read("v1", "Node", name).get("spec", {}).get("unschedulable"))


def controller_status(server: RunningServer) -> dict[str, Any]:
    """The display copy in the report's status (what ``kubectl`` users read)."""
    obj = server.read("pacekeeper.dev/v1alpha1", "StragglerReport", JOB, namespace=NAMESPACE)
    return dict((obj.get("status") or {}).get("controller") or {})


def controller_state(
    server: RunningServer, job: str = JOB, namespace: str = CONTROLLER_NS
) -> dict[str, Any]:
    """The job's state as the controller keeps it, in its state namespace (its own
    unless told otherwise, as the chart does)."""
    name = job_state_name(JobKey(f"{NAMESPACE}/{job}"))
    cm = server.read("v1", "ConfigMap", name, namespace=namespace)
    return dict(json.loads((cm.get("data") or {}).get(STATE_KEY) or "{}"))
