"""The memory of hardware through the Kubernetes API harness: what one job taught about a
GPU survives an operator restart, in the controller's own ConfigMaps, and changes what
the restarted operator does for the next job on that GPU; ``pacekeeper status
--hardware`` shows it."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from born_reports import born
from harness import RunningServer
from harness.objects import node, pod
from operator_world import CONTROLLER_NS, NAMESPACE, Clock, taints
from reporter_helpers import CRD_PATH
from test_operator_process import kubeconfig
from typer.testing import CliRunner

from pacekeeper.controller.actuators.kubernetes_actuators import KubernetesActuators
from pacekeeper.controller.actuators.retries import RetrySettings
from pacekeeper.controller.cli.app import app
from pacekeeper.controller.core import hardware_memory as hm
from pacekeeper.controller.core.ids import JobKey
from pacekeeper.controller.core.marks import TAINT_KEY
from pacekeeper.controller.core.policy import load_policy_document
from pacekeeper.controller.runtime.hardware_store import HARDWARE_KEY, shard_name
from pacekeeper.controller.runtime.reconcile import Reconciler
from pacekeeper.controller.runtime.state_store import DECISIONS_KEY, job_state_name
from pacekeeper.detector.reporters.kubernetes import KubernetesStatusSink
from pacekeeper.detector.score_report import JobIdentity, Platform, RankScores, ScoreReport

NODES = ("n0", "n1", "n2")
RANKS_PER_NODE = 4
SLOW_RANK = 5  # n1, its second GPU
POLICY = """
apiVersion: pacekeeper.dev/v1alpha1
kind: RemediationPolicies
mode: enforce
defaultPolicy: gpu
policies:
  gpu:
    score: {kind: gpuRelative}
    thresholds: {act: 0.75, recover: 0.9}
    persistence: {consecutiveReports: 2, minSamples: 10, maxReportAgeS: 120}
    warmup: {afterJobStartS: 0, afterActionS: 0}
    ladder:
      notify: {enabled: true, timeoutS: 60}
      restartRank: {enabled: true, timeoutS: 120}
      taintNode: {enabled: true, timeoutS: 120}
    budgets: {nodes: {maxNodes: 1}, actionsPerHour: 10, betweenActionsS: 0}
cluster:
  nodes: {maxNodes: 2}
  actionsPerHour: 20
"""


def gpu_of(rank: int, per_node: int = RANKS_PER_NODE) -> str:
    return f"GPU-{rank // per_node:08x}-{rank % per_node:04x}-4000-8000-000000000000"


def add_job(server: RunningServer, job: str) -> None:
    for i, n in enumerate(NODES):
        server.apply(
            pod(
                f"{job}-{i}",
                node_name=n,
                labels={
                    "batch.kubernetes.io/job-name": job,
                    "batch.kubernetes.io/job-completion-index": str(i),
                },
                annotations={"pacekeeper.dev/detect": "true"},
                owner={"kind": "Job", "name": job, "uid": f"uid-job-{job}"},
            )
        )


def report(job: str, seq: int, at: datetime, slow: float) -> ScoreReport:
    ranks = [
        RankScores(
            rank=r,
            node=NODES[r // RANKS_PER_NODE],
            pod=f"{job}-{r // RANKS_PER_NODE}",
            gpu_relative=slow if r == SLOW_RANK else 0.98,
            gpu_individual=1.0,
            section_samples=100,
            kernel_samples=1000,
            gpu_uuid=gpu_of(r),
        )
        for r in range(len(NODES) * RANKS_PER_NODE)
    ]
    return ScoreReport.build(
        job=JobIdentity(platform=Platform.KUBERNETES, namespace=NAMESPACE, name=job),
        sequence=seq,
        generated_at=at,
        window_s=30.0,
        ranks=ranks,
    )


def reconciler(api_client: Any, clock: Clock, policy: str = POLICY) -> Reconciler:
    acts = KubernetesActuators(
        api_client, instance="test", settings=RetrySettings(request_timeout_s=1.0),
        sleep=lambda _s: None,
    )  # fmt: skip
    doc = load_policy_document(policy, "test-policy")
    return Reconciler(api_client, doc, namespace=CONTROLLER_NS, clock=clock, actuators=acts)


def run(  # noqa: PLR0917 - the world, the job, and how it runs
    rec: Reconciler, api_client: Any, clock: Clock, job: str, steps: int, slow: float
) -> None:
    born(api_client, NAMESPACE, job, controller_ns=CONTROLLER_NS)  # as the controller makes it
    sink = KubernetesStatusSink(
        namespace=NAMESPACE, name=job, incarnation="inc-1", api_client=api_client,
        pod_name=f"{job}-0",
    )  # fmt: skip
    for seq in range(steps):
        sink.send(report(job, seq, clock(), slow))
        rec.reconcile_job(JobKey(f"{NAMESPACE}/{job}"))
        clock.advance(30.0)


def test_what_a_job_taught_about_a_gpu_survives_an_operator_restart(
    k8s_server: RunningServer, k8s_api_client: Any, tmp_path: Path
) -> None:
    k8s_server.apply_yaml(CRD_PATH)
    k8s_server.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": CONTROLLER_NS}})
    for n in NODES:
        k8s_server.apply(node(n))
    add_job(k8s_server, "alpha")
    clock = Clock()
    first = reconciler(k8s_api_client, clock)
    run(first, k8s_api_client, clock, "alpha", 3, slow=0.5)  # slow, notified, no more

    shard = k8s_server.read(
        "v1", "ConfigMap", shard_name(hm.shard_of("n1")), namespace=CONTROLLER_NS
    )
    assert shard["metadata"]["labels"]["pacekeeper.dev/state"] == "hardware"
    stored = json.loads(shard["data"][HARDWARE_KEY])
    (record,) = stored["nodes"]["n1"]["gpus"][gpu_of(SLOW_RANK)]["services"]
    assert record["job"] == f"{NAMESPACE}/alpha"
    assert record["slowWindows"] == record["windows"] >= 2  # the first is the warm-up's

    # A new operator process: nothing but the cluster's ConfigMaps. A second job lands on
    # the same GPU, and it is slow there too.
    add_job(k8s_server, "beta")
    second = reconciler(k8s_api_client, clock)
    run(second, k8s_api_client, clock, "beta", 8, slow=0.5)

    # Slow in two jobs: the GPU, not the rank. No restart, straight to the taint.
    assert [t["key"] for t in taints(k8s_server, "n1")] == [TAINT_KEY]
    assert k8s_server.history.find(subresource="eviction") == []
    assert k8s_server.history.find(verb="delete", plural="pods") == []
    beta = job_state_name(JobKey(f"{NAMESPACE}/beta"))
    stored_beta = k8s_server.read("v1", "ConfigMap", beta, namespace=CONTROLLER_NS)
    decided = json.loads(stored_beta["data"][DECISIONS_KEY])
    acted = [d for d in decided if d["verdict"] == "act"]
    assert [d["action"] for d in acted] == ["notify", "taintNode"]
    assert acted[-1]["evidence"]["slowElsewhere"] == {gpu_of(SLOW_RANK): [f"{NAMESPACE}/alpha"]}

    gauge = second.metrics.registry.get_sample_value
    assert gauge("pacekeeper_hardware_nodes") == len(NODES)
    assert gauge("pacekeeper_hardware_gpus", {"state": "all"}) == len(NODES) * RANKS_PER_NODE
    assert gauge("pacekeeper_hardware_gpus", {"state": "slowHistory"}) == 1

    kc = kubeconfig(k8s_server.url, tmp_path / "kubeconfig")
    args = ["status", "kubernetes", "--kubeconfig", str(kc), "--namespace", CONTROLLER_NS]
    shown = CliRunner().invoke(app, [*args, "--hardware", "-o", "json"])
    assert shown.exit_code == 0, shown.output
    memory = json.loads(shown.stdout)  # output mixes in stderr: the harness logs there
    assert memory["nodes"] == len(NODES) and memory["gpus"] == len(NODES) * RANKS_PER_NODE
    assert memory["slowGpus"] == 1
    gpu = memory["byNode"]["n1"][gpu_of(SLOW_RANK)]
    assert gpu["slowJobs"] == [f"{NAMESPACE}/alpha", f"{NAMESPACE}/beta"]
    table = CliRunner().invoke(app, [*args, "--hardware"], env={"COLUMNS": "240"})
    assert table.exit_code == 0 and gpu_of(SLOW_RANK) in table.output
