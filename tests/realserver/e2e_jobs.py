"""Training jobs on the real server, as a Job controller and a training pod would make them.

`create_job` makes a real batch/v1 Job, then its pods as the Job controller would: owned
by the Job (a controlling ownerReference with its uid), labelled with the Job's selector
(`controller-uid`, `job-name`) and the indexed-Job labels (`batch.kubernetes.io/job-name`,
`batch.kubernetes.io/job-completion-index`), bound to a node (`spec.nodeName`), and
Running and Ready through `/status` (there is no kubelet). The Job's own pod template
names a ServiceAccount that does not exist, so kube-controller-manager's Job controller,
which does run here, can never add pods of its own (the ServiceAccount admission
plugin refuses them): it sees the pods made here as the Job's active ones.

`Reporters` is the training side: every job's report sent through the real
`KubernetesStatusSink`, authenticated as the job's ServiceAccount, on a thread.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from cluster import RealCluster, ServiceAccountIdentity
from identities import TRAINER

from pacekeeper.detector.reporters.kubernetes import KubernetesStatusSink, ReportNotCreated
from pacekeeper.detector.score_report import JobIdentity, Platform, RankScores, ScoreReport

DETECT = {"pacekeeper.dev/detect": "true"}
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
JOB_NAME = "batch.kubernetes.io/job-name"
ABSENT_ACCOUNT = "pk-never-created"
"""The Job template's ServiceAccount: never created, so the Job controller adds no pods."""
HEALTHY = 0.98


@dataclass(frozen=True, slots=True)
class JobPod:
    name: str
    node: str
    uid: str


@dataclass(frozen=True, slots=True)
class TrainingJob:
    namespace: str
    name: str
    uid: str
    pods: tuple[JobPod, ...]
    ranks_per_pod: int
    account: ServiceAccountIdentity

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def node_of_rank(self, rank: int) -> str:
        return self.pods[rank // self.ranks_per_pod].node

    def report(
        self,
        sequence: int,
        at: datetime,
        slow: Mapping[int, float],
        claims: Mapping[int, str] | None = None,
    ) -> ScoreReport:
        """Every rank at `HEALTHY` but those in `slow`; `claims` replaces a rank's node
        (a forger's report: it names no pod, as one who cannot list the job's pods)."""
        ranks = []
        for r in range(len(self.pods) * self.ranks_per_pod):
            score = slow.get(r, HEALTHY)
            pod = self.pods[r // self.ranks_per_pod]
            claimed = (claims or {}).get(r)
            ranks.append(
                RankScores(
                    rank=r, node=claimed or pod.node, pod=None if claimed else pod.name,
                    gpu_relative=score, gpu_individual=score,
                    section_samples=100, kernel_samples=1000,
                )
            )  # fmt: skip
        return ScoreReport.build(
            job=JobIdentity(platform=Platform.KUBERNETES, namespace=self.namespace, name=self.name),
            sequence=sequence, generated_at=at, window_s=30.0, ranks=ranks,
        )  # fmt: skip


def create_nodes(cluster: RealCluster, names: Sequence[str]) -> None:
    cluster.apply(
        [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": n, "labels": {"kubernetes.io/hostname": n}},
            }
            for n in names
        ]
    )


def ensure_service_account(cluster: RealCluster, namespace: str, name: str) -> None:
    cluster.apply(
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": name, "namespace": namespace}}
    )  # fmt: skip


def job_manifest(name: str, pods: int) -> dict[str, Any]:
    """An indexed-style Job of ``pods`` pods whose template names a ServiceAccount that
    never exists (``ABSENT_ACCOUNT``), so no Job controller adds pods of its own."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "parallelism": pods,
            "completions": pods,
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": {JOB_NAME: name}, "annotations": dict(DETECT)},
                "spec": {
                    "serviceAccountName": ABSENT_ACCOUNT,
                    "automountServiceAccountToken": False,
                    "restartPolicy": "Never",
                    "containers": [{"name": "trainer", "image": "trainer:1"}],
                },
            },
        },
    }


def pod_manifest(
    job: Mapping[str, Any], pod_name: str, index: int, node: str, account: str
) -> dict[str, Any]:
    """Pod ``index`` of the stored ``job``, as its Job controller would make it: owned by
    the Job (controlling ownerReference with its uid), the Job's generated selector
    labels and the indexed-Job labels, bound to ``node``."""
    name = job["metadata"]["name"]
    labels = {**job["spec"]["template"]["metadata"]["labels"], JOB_NAME: name}
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": name,
             "uid": job["metadata"]["uid"], "controller": True,
             "blockOwnerDeletion": True}  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name,
            "labels": {**labels, COMPLETION_INDEX: str(index)},
            "annotations": {**DETECT, COMPLETION_INDEX: str(index)},
            "ownerReferences": [owner],
        },
        "spec": {
            "nodeName": node,
            "serviceAccountName": account,
            "automountServiceAccountToken": False,
            "restartPolicy": "Never",
            "containers": [{"name": "trainer", "image": "trainer:1"}],
        },
    }


def create_job(
    cluster: RealCluster,
    namespace: str,
    name: str,
    nodes: Sequence[str],
    *,
    ranks_per_pod: int = 4,
    account: str = TRAINER,
) -> TrainingJob:
    """A Job of one pod per node in `nodes` (completion index = position)."""
    import kubernetes

    ensure_service_account(cluster, namespace, account)
    manifest = job_manifest(name, len(nodes))
    manifest["metadata"]["namespace"] = namespace
    (job,) = cluster.apply(manifest)
    core: Any = kubernetes.client.CoreV1Api(cluster.admin)
    pods = []
    started = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    for index, node in enumerate(nodes):
        pod_name = f"{name}-{index}-{secrets.token_hex(3)[:5]}"
        created = core.create_namespaced_pod(
            namespace, pod_manifest(job, pod_name, index, node, account)
        )
        ready = [
            {"type": kind, "status": "True", "lastTransitionTime": started}
            for kind in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
        ]
        core.patch_namespaced_pod_status(
            pod_name, namespace,
            {"status": {"phase": "Running", "startTime": started, "conditions": ready,
                        "podIP": f"10.1.0.{index + 1}", "hostIP": "10.2.0.1"}},
        )  # fmt: skip
        pods.append(JobPod(pod_name, node, created.metadata.uid))
    return TrainingJob(
        namespace, name, uid=job["metadata"]["uid"], pods=tuple(pods),
        ranks_per_pod=ranks_per_pod, account=ServiceAccountIdentity(namespace, account),
    )  # fmt: skip


# --- the training side ------------------------------------------------------------------


@dataclass
class Publishing:
    """What one job's reporter sends next; the test changes it while the thread runs."""

    job: TrainingJob
    sink: KubernetesStatusSink
    slow: dict[int, float] = field(default_factory=dict)
    claims: dict[int, str] = field(default_factory=dict)
    age_s: float = 0.0
    """How old each report is when sent (stale data)."""
    paused: bool = False
    sequence: int = 0
    sent: int = 0


class Reporters:
    """One thread sending every job's report each `every_s`, as each job's ServiceAccount."""

    def __init__(self, cluster: RealCluster, every_s: float) -> None:
        self._cluster = cluster
        self._every_s = every_s
        self._lock = threading.Lock()
        self._jobs: dict[str, Publishing] = {}
        self.errors: list[str] = []
        self.waited = 0
        """Sends made before the controller had created the job's report."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="reporters", daemon=True)

    def add(self, job: TrainingJob, slow: Mapping[int, float] | None = None) -> Publishing:
        client = self._cluster.api_client(self._cluster.token_for(job.account))
        sink = KubernetesStatusSink(
            namespace=job.namespace, name=job.name, incarnation=f"inc-{job.uid[:8]}",
            api_client=client, pod_name=job.pods[0].name,
        )  # fmt: skip
        publishing = Publishing(job, sink, dict(slow or {}))
        with self._lock:
            self._jobs[job.key] = publishing
        return publishing

    def __getitem__(self, job: TrainingJob) -> Publishing:
        return self._jobs[job.key]

    def start(self) -> Reporters:
        self._thread.start()
        return self

    def send_once(self, publishing: Publishing) -> None:
        with self._lock:
            seq = publishing.sequence
            publishing.sequence += 1
            at = datetime.now(UTC) - timedelta(seconds=publishing.age_s)
            report = publishing.job.report(seq, at, publishing.slow, publishing.claims)
        publishing.sink.send(report)
        publishing.sent += 1

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                jobs = [p for p in self._jobs.values() if not p.paused]
            for publishing in jobs:
                try:
                    self.send_once(publishing)
                except ReportNotCreated:
                    # The controller creates the report once it sees the job's pods; till
                    # then the reporter waits, as a Publisher retries (issue 40).
                    self.waited += 1
                except Exception as error:  # recorded; the test asserts there are none
                    self.errors.append(f"{publishing.job.key}: {error!r}"[:500])
            self._stop.wait(self._every_s)

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)


@contextlib.contextmanager
def reporting(cluster: RealCluster, every_s: float) -> Iterator[Reporters]:
    reporters = Reporters(cluster, every_s)
    try:
        yield reporters
    finally:
        reporters.close()
