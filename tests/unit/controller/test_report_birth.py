"""What the controller accepts as a report bound from birth, and which name it gives a
job's report (issue 40): pure parts, no API."""

from __future__ import annotations

from typing import Any

from pacekeeper.controller.core.trust import binding_of, birth_problem
from pacekeeper.controller.runtime.report_birth import born_object, report_name_of
from pacekeeper.controller.sources.workloads import OwnerRef

WORKLOAD = OwnerRef("jobset.x-k8s.io/v1alpha2", "JobSet", "llama", "team-a", uid="uid-js")


def _pod(**labels: str) -> dict[str, Any]:
    child = {"kind": "Job", "name": "llama-w-0", "uid": "uid-child", "controller": True}
    return {"metadata": {"name": "p", "namespace": "team-a", "labels": labels,
                         "ownerReferences": [child]}}  # fmt: skip


def test_a_jobsets_pods_report_into_the_jobsets_report_not_their_child_jobs() -> None:
    pod = _pod(**{"batch.kubernetes.io/job-name": "llama-w-0",
                  "jobset.sigs.k8s.io/jobset-name": "llama"})  # fmt: skip
    assert report_name_of(pod) == "llama"
    assert report_name_of(_pod()) is None


def test_the_born_report_is_bound_and_binds_to_the_pods_outermost_workload() -> None:
    obj = born_object("team-a", "llama", WORKLOAD)
    assert birth_problem(obj, "uid-js") == ""
    pods = [_pod(**{"jobset.sigs.k8s.io/jobset-name": "llama"})]
    assert binding_of(obj, pods, "uid-js").bound
    assert not binding_of(obj, pods).bound  # the child Job is not its owner


def test_a_report_made_by_anyone_else_is_found_out() -> None:
    ours = born_object("team-a", "llama", WORKLOAD)
    unowned = {**ours, "metadata": {**ours["metadata"], "ownerReferences": []}}
    assert "no ownerReference" in birth_problem(unowned, "uid-js")
    guessed = born_object("team-a", "llama",
                          OwnerRef("jobset.x-k8s.io/v1alpha2", "JobSet", "llama", "team-a",
                                   uid="uid-guess"))  # fmt: skip
    assert "uid" in birth_problem(guessed, "uid-js")
    other_job = {**ours, "spec": {"job": {"platform": "kubernetes", "name": "gpt"}}}
    assert "spec.job" in birth_problem(other_job, "uid-js")
