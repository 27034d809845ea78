"""Rank -> pod resolution from the frameworks' own pod labels and annotations.

A training rank runs in one pod; a pod runs `ranks_per_pod` consecutive ranks
(torchrun's `--nproc-per-node`), so the pod that hosts rank r is the one whose global
pod index is `r // ranks_per_pod`. Each framework writes that index differently:

- indexed batch/v1 Job (and Kubeflow Trainer v2, through JobSet):
  `batch.kubernetes.io/job-completion-index`;
- JobSet: `jobset.sigs.k8s.io/job-global-index` (else `job-index`) times the pods per
  child Job, plus the completion index;
- Kubeflow PyTorchJob (training-operator): `training.kubeflow.org/replica-index`; the
  master is 0 and workers follow it;
- Volcano: `volcano.sh/task-index` within its `volcano.sh/task-spec`; master tasks first;
- StatefulSet: `apps.kubernetes.io/pod-index`;
- KubeRay and anything else: the pod the score report names, else the job's only live
  pod on the rank's node.

Keys are looked up in labels first, then annotations (some controllers write only one).
Pure: takes pods as the JSON mappings the API serves.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
JOBSET_GLOBAL_INDEX = "jobset.sigs.k8s.io/job-global-index"
JOBSET_JOB_INDEX = "jobset.sigs.k8s.io/job-index"
JOBSET_REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
KUBEFLOW_REPLICA_INDEX = "training.kubeflow.org/replica-index"
KUBEFLOW_REPLICA_TYPE = "training.kubeflow.org/replica-type"
VOLCANO_TASK_INDEX = "volcano.sh/task-index"
VOLCANO_TASK_SPEC = "volcano.sh/task-spec"
STATEFULSET_POD_INDEX = "apps.kubernetes.io/pod-index"
RAY_NODE_TYPE = "ray.io/node-type"

_MASTER_TYPES = frozenset({"master", "launcher", "chief"})


class Via(StrEnum):
    """How a rank's pod was found (recorded in decision evidence and Events)."""

    REPORT = "report"
    JOBSET = "jobset"
    COMPLETION_INDEX = "completionIndex"
    KUBEFLOW = "kubeflow"
    VOLCANO = "volcano"
    STATEFULSET = "statefulset"
    NODE = "node"


@dataclass(frozen=True, slots=True)
class PodTarget:
    """An explicit pod for an actuator: uid pins the incarnation we decided about."""

    namespace: str
    name: str
    uid: str | None = None
    node: str | None = None


@dataclass(frozen=True, slots=True)
class RankPod:
    rank: int
    pod: PodTarget
    via: Via
    pod_index: int | None


class RankUnresolved(LookupError):
    """No single live pod hosts the rank; the message says why."""


def _meta(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return pod.get("metadata") or {}


def _key(pod: Mapping[str, Any], key: str) -> str | None:
    meta = _meta(pod)
    value = (meta.get("labels") or {}).get(key)
    if value is None:
        value = (meta.get("annotations") or {}).get(key)
    return None if value is None else str(value)


def _int_key(pod: Mapping[str, Any], key: str) -> int | None:
    value = _key(pod, key)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def _target(pod: Mapping[str, Any]) -> PodTarget:
    meta = _meta(pod)
    return PodTarget(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta["name"]),
        uid=meta.get("uid"),
        node=(pod.get("spec") or {}).get("nodeName"),
    )


def live_pods(pods: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Pods that can host a running rank: not terminating, not finished."""
    return [
        pod
        for pod in pods
        if not _meta(pod).get("deletionTimestamp")
        and (pod.get("status") or {}).get("phase") not in {"Succeeded", "Failed"}
    ]


def _has_kubeflow_master(pods: Sequence[Mapping[str, Any]]) -> bool:
    return any((_key(pod, KUBEFLOW_REPLICA_TYPE) or "").lower() in _MASTER_TYPES for pod in pods)


def _volcano_offsets(pods: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    # Master-like tasks take the first indexes, as Volcano's pytorch plugin numbers ranks.
    sizes: dict[str, int] = {}
    for pod in pods:
        task = _key(pod, VOLCANO_TASK_SPEC)
        index = _int_key(pod, VOLCANO_TASK_INDEX)
        if task is not None and index is not None:
            sizes[task] = max(sizes.get(task, 0), index + 1)
    offsets: dict[str, int] = {}
    offset = 0
    for task in sorted(sizes, key=lambda name: (name.lower() not in _MASTER_TYPES, name)):
        offsets[task] = offset
        offset += sizes[task]
    return offsets


def pod_index(
    pod: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]] = (),
    *,
    pods_per_job: int | None = None,
) -> tuple[int, Via] | None:
    """The global pod index of `pod` within its job, and where it came from.

    `pods` (the job's pods) is needed where the index is relative: Kubeflow masters,
    Volcano task offsets, and JobSet's pods per child job when `pods_per_job` is unset.
    """
    completion = _int_key(pod, COMPLETION_INDEX)
    global_index = _int_key(pod, JOBSET_GLOBAL_INDEX)
    job_index = _int_key(pod, JOBSET_JOB_INDEX)
    if global_index is not None or job_index is not None:
        if global_index is None:
            assert job_index is not None
            global_index = job_index
        if completion is None:
            return global_index, Via.JOBSET
        per_job = pods_per_job
        if per_job is None:
            siblings = [
                _int_key(other, COMPLETION_INDEX)
                for other in pods
                if _key(other, JOBSET_REPLICATED_JOB) == _key(pod, JOBSET_REPLICATED_JOB)
            ]
            per_job = max([index for index in siblings if index is not None] + [completion]) + 1
        return global_index * per_job + completion, Via.JOBSET
    if completion is not None:
        return completion, Via.COMPLETION_INDEX
    replica_index = _int_key(pod, KUBEFLOW_REPLICA_INDEX)
    if replica_index is not None:
        replica_type = (_key(pod, KUBEFLOW_REPLICA_TYPE) or "").lower()
        if replica_type in _MASTER_TYPES:
            return replica_index, Via.KUBEFLOW
        return replica_index + (1 if _has_kubeflow_master(pods) else 0), Via.KUBEFLOW
    task_index = _int_key(pod, VOLCANO_TASK_INDEX)
    task = _key(pod, VOLCANO_TASK_SPEC)
    if task_index is not None and task is not None:
        return _volcano_offsets(pods).get(task, 0) + task_index, Via.VOLCANO
    sts_index = _int_key(pod, STATEFULSET_POD_INDEX)
    if sts_index is not None:
        return sts_index, Via.STATEFULSET
    return None


def resolve_rank(
    rank: int,
    pods: Iterable[Mapping[str, Any]],
    *,
    ranks_per_pod: int = 1,
    pods_per_job: int | None = None,
    report_pod: str | None = None,
    report_node: str | None = None,
) -> RankPod:
    """Find the live pod that hosts `rank` among the job's `pods`.

    Order: the pod the report names (when it is live), then framework indexes, then
    the job's only live pod on the node the report names. Raises `RankUnresolved`
    when none or several pods fit: acting on a guess could restart the wrong rank.
    """
    if rank < 0:
        raise RankUnresolved(f"rank {rank}: ranks are non-negative")
    if ranks_per_pod < 1:
        raise RankUnresolved(f"rank {rank}: ranks_per_pod={ranks_per_pod} must be >= 1")
    live = live_pods(pods)
    if report_pod is not None:
        named = [pod for pod in live if _meta(pod).get("name") == report_pod]
        if len(named) == 1:
            return RankPod(rank, _target(named[0]), Via.REPORT, None)
    wanted = rank // ranks_per_pod
    indexed: list[tuple[Mapping[str, Any], int, Via]] = []
    for pod in live:
        found = pod_index(pod, live, pods_per_job=pods_per_job)
        if found is not None:
            indexed.append((pod, *found))
    if indexed:
        matches = [(pod, index, via) for pod, index, via in indexed if index == wanted]
        if len(matches) == 1:
            pod, index, via = matches[0]
            return RankPod(rank, _target(pod), via, index)
        if len(matches) > 1:
            names = sorted(str(_meta(pod).get("name")) for pod, _, _ in matches)
            raise RankUnresolved(f"rank {rank}: pod index {wanted} is claimed by {names}")
    if report_node is not None:
        on_node = [pod for pod in live if (pod.get("spec") or {}).get("nodeName") == report_node]
        if len(on_node) == 1:
            return RankPod(rank, _target(on_node[0]), Via.NODE, None)
        if len(on_node) > 1:
            raise RankUnresolved(
                f"rank {rank}: {len(on_node)} pods of the job run on node {report_node!r} "
                "and none carries a rank index"
            )
    raise RankUnresolved(
        f"rank {rank}: no live pod with pod index {wanted} among {len(live)} live pods"
    )
