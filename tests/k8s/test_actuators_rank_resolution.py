"""Rank -> pod resolution from framework labels (pure; no server needed)."""

from __future__ import annotations

from typing import Any

import pytest

from pacekeeper.controller.core.ranks import RankUnresolved, Via, pod_index, resolve_rank


def _pod(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    node: str = "n1",
    phase: str = "Running",
    terminating: bool = False,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ml",
        "uid": f"uid-{name}",
        "labels": labels or {},
        "annotations": annotations or {},
    }
    if terminating:
        meta["deletionTimestamp"] = "2026-11-30T00:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": node}, "status": {"phase": phase}}


def _indexed(count: int) -> list[dict[str, Any]]:
    return [
        _pod(f"job-{i}", labels={"batch.kubernetes.io/job-completion-index": str(i)})
        for i in range(count)
    ]


def test_indexed_job_rank_maps_through_ranks_per_pod() -> None:
    pods = _indexed(4)
    found = resolve_rank(13, pods, ranks_per_pod=8)
    assert (found.pod.name, found.via, found.pod_index) == ("job-1", Via.COMPLETION_INDEX, 1)
    assert found.pod.uid == "uid-job-1"
    assert found.pod.node == "n1"


def test_completion_index_is_read_from_annotations_too() -> None:
    pods = [
        _pod("old-style", annotations={"batch.kubernetes.io/job-completion-index": "2"}),
    ]
    assert resolve_rank(2, pods).pod.name == "old-style"


def test_a_terminating_incarnation_does_not_shadow_its_replacement() -> None:
    label = {"batch.kubernetes.io/job-completion-index": "0"}
    pods = [_pod("job-0-old", labels=label, terminating=True), _pod("job-0-new", labels=label)]
    assert resolve_rank(0, pods).pod.name == "job-0-new"


def test_two_live_pods_claiming_one_index_refuse_to_guess() -> None:
    label = {"batch.kubernetes.io/job-completion-index": "0"}
    with pytest.raises(RankUnresolved, match="claimed by"):
        resolve_rank(0, [_pod("a", labels=label), _pod("b", labels=label)])


def test_jobset_uses_job_index_times_pods_per_job() -> None:
    pods = [
        _pod(
            f"js-w-{j}-{c}",
            labels={
                "jobset.sigs.k8s.io/replicatedjob-name": "workers",
                "jobset.sigs.k8s.io/job-index": str(j),
                "batch.kubernetes.io/job-completion-index": str(c),
            },
        )
        for j in range(2)
        for c in range(3)
    ]
    found = resolve_rank(4, pods)
    assert (found.pod.name, found.via, found.pod_index) == ("js-w-1-1", Via.JOBSET, 4)
    assert resolve_rank(4, pods, pods_per_job=3).pod.name == "js-w-1-1"


def test_jobset_global_index_wins_over_job_index() -> None:
    labels = {
        "jobset.sigs.k8s.io/job-global-index": "5",
        "jobset.sigs.k8s.io/job-index": "0",
    }
    assert pod_index(_pod("x", labels=labels)) == (5, Via.JOBSET)


def test_kubeflow_workers_follow_the_master() -> None:
    pods = [
        _pod(
            "pt-master-0",
            labels={
                "training.kubeflow.org/replica-type": "master",
                "training.kubeflow.org/replica-index": "0",
            },
        ),
        _pod(
            "pt-worker-0",
            labels={
                "training.kubeflow.org/replica-type": "worker",
                "training.kubeflow.org/replica-index": "0",
            },
        ),
        _pod(
            "pt-worker-1",
            labels={
                "training.kubeflow.org/replica-type": "worker",
                "training.kubeflow.org/replica-index": "1",
            },
        ),
    ]
    assert resolve_rank(0, pods).pod.name == "pt-master-0"
    assert resolve_rank(2, pods).pod.name == "pt-worker-1"
    assert resolve_rank(2, pods).via is Via.KUBEFLOW


def test_volcano_master_tasks_come_first() -> None:
    pods = [
        _pod(
            "vc-worker-0",
            annotations={"volcano.sh/task-spec": "worker", "volcano.sh/task-index": "0"},
        ),
        _pod(
            "vc-master-0",
            annotations={"volcano.sh/task-spec": "master", "volcano.sh/task-index": "0"},
        ),
        _pod(
            "vc-worker-1",
            annotations={"volcano.sh/task-spec": "worker", "volcano.sh/task-index": "1"},
        ),
    ]
    assert resolve_rank(0, pods).pod.name == "vc-master-0"
    assert resolve_rank(2, pods).pod.name == "vc-worker-1"


def test_the_report_named_pod_wins_when_it_is_live() -> None:
    pods = _indexed(2)
    assert resolve_rank(0, pods, report_pod="job-1").via is Via.REPORT
    assert resolve_rank(0, pods, report_pod="gone").pod.name == "job-0"


def test_ray_pods_resolve_by_the_ranks_node_when_only_one_pod_runs_there() -> None:
    pods = [
        _pod("ray-head", labels={"ray.io/node-type": "head"}, node="n0"),
        _pod("ray-worker-a", labels={"ray.io/node-type": "worker"}, node="n1"),
        _pod("ray-worker-b", labels={"ray.io/node-type": "worker"}, node="n2"),
    ]
    found = resolve_rank(7, pods, report_node="n2")
    assert (found.pod.name, found.via) == ("ray-worker-b", Via.NODE)


def test_several_unlabelled_pods_on_the_node_are_unresolved() -> None:
    pods = [_pod("a", node="n1"), _pod("b", node="n1")]
    with pytest.raises(RankUnresolved, match="none carries a rank index"):
        resolve_rank(0, pods, report_node="n1")


def test_finished_pods_never_host_a_rank() -> None:
    label = {"batch.kubernetes.io/job-completion-index": "0"}
    with pytest.raises(RankUnresolved, match="no live pod"):
        resolve_rank(0, [_pod("done", labels=label, phase="Succeeded")])


@pytest.mark.parametrize(("rank", "per_pod"), [(-1, 1), (0, 0)])
def test_bad_arguments_are_refused_with_the_rank_named(rank: int, per_pod: int) -> None:
    with pytest.raises(RankUnresolved, match=f"rank {rank}"):
        resolve_rank(rank, _indexed(1), ranks_per_pod=per_pod)
