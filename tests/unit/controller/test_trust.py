"""What the controller believes of a report: placement from the API, binding by owner uid.

Pods here are the JSON the API serves; the report is the job's claim."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pacekeeper.controller.core.decisions import Reason
from pacekeeper.controller.core.observations import RejectedReport
from pacekeeper.controller.core.trust import binding_of, place_report
from pacekeeper.detector.score_report import (
    JobIdentity,
    NodeSummary,
    Platform,
    RankScores,
    ScoreReport,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)
OWNER = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "uid-train"}


def pod(
    index: int | None, node: str | None, *, name: str | None = None, phase: str = "Running",
    owner: dict[str, Any] | None = OWNER, deleting: bool = False,
) -> dict[str, Any]:  # fmt: skip
    labels = {"batch.kubernetes.io/job-name": "train"}
    if index is not None:
        labels["batch.kubernetes.io/job-completion-index"] = str(index)
    meta: dict[str, Any] = {"name": name or f"train-{index}", "namespace": "ml", "labels": labels}
    if owner is not None:
        meta["ownerReferences"] = [{**owner, "controller": True}]
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec = {"nodeName": node} if node else {}
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def report_object(owners: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "train", "namespace": "ml"}
    if owners is not None:
        meta["ownerReferences"] = owners
    return {"metadata": meta}


def report(claims: list[tuple[str, str | None]], **kw: Any) -> ScoreReport:
    """One rank per claim: (node, pod)."""
    ranks = [
        RankScores(rank=r, node=node, pod=p, gpu_relative=0.5 if r == 1 else 0.99)
        for r, (node, p) in enumerate(claims)
    ]
    return ScoreReport.build(
        job=JobIdentity(platform=Platform.KUBERNETES, namespace="ml", name="train"),
        sequence=3, generated_at=NOW, window_s=30.0, ranks=ranks, **kw,
    )  # fmt: skip


PODS = [pod(0, "n0"), pod(1, "n1"), pod(2, "n2")]


def test_a_report_that_matches_the_api_is_kept_and_learns_its_pod_names() -> None:
    placed = place_report(report([("n0", None), ("n1", "train-1"), ("n2", None)]), PODS, NOW)
    assert isinstance(placed, ScoreReport)
    assert [(r.node, r.pod) for r in placed.ranks] == [
        ("n0", "train-0"),
        ("n1", "train-1"),
        ("n2", "train-2"),
    ]


def test_a_rank_claiming_a_node_the_api_does_not_place_it_on_refuses_the_report() -> None:
    placed = place_report(report([("n0", None), ("infra-db", None), ("n2", None)]), PODS, NOW)
    assert isinstance(placed, RejectedReport)
    assert placed.reason is Reason.UNTRUSTED_REPORT
    assert placed.evidence["mismatches"][0] == {
        "rank": 1, "claimedNode": "infra-db", "actualNode": "n1",
    }  # fmt: skip
    # The per-node summary built from that rank names infra-db too.
    assert placed.evidence["mismatchCount"] == 2
    assert "rank 1 claims node 'infra-db', the API says 'n1'" in placed.error


def test_a_pod_name_that_is_not_the_jobs_refuses_the_report() -> None:
    placed = place_report(report([("n0", None), ("n1", "someone-else-0")]), PODS, NOW)
    assert isinstance(placed, RejectedReport)
    assert placed.evidence["mismatches"][0]["claimedPod"] == "someone-else-0"


def test_a_named_pod_on_another_node_than_claimed_refuses_the_report() -> None:
    placed = place_report(report([("n0", "train-0"), ("n0", "train-1")]), PODS, NOW)
    assert isinstance(placed, RejectedReport)
    assert placed.evidence["mismatches"][0] == {
        "rank": 1, "claimedNode": "n0", "actualNode": "n1", "claimedPod": "train-1",
    }  # fmt: skip


def test_without_framework_indexes_a_claimed_node_must_host_a_pod_of_the_job() -> None:
    pods = [pod(None, "n0", name="w-a"), pod(None, "n1", name="w-b")]
    ok = place_report(report([("n0", None), ("n1", None)]), pods, NOW)
    assert isinstance(ok, ScoreReport)
    bad = place_report(report([("n0", None), ("infra-db", None)]), pods, NOW)
    assert isinstance(bad, RejectedReport)
    assert bad.evidence["mismatches"][0]["actualNode"] is None


def test_terminating_and_finished_pods_place_nobody() -> None:
    pods = [pod(0, "n0"), pod(1, "n1", deleting=True), pod(2, "n2", phase="Succeeded")]
    placed = place_report(report([("n0", None), ("n1", None)]), pods, NOW)
    assert isinstance(placed, RejectedReport)


def test_a_summary_naming_a_node_outside_the_job_refuses_the_report() -> None:
    base = report([("n0", None), ("n1", None), ("n2", None)])
    summary = base.summary.model_copy(
        update={"nodes": [*base.summary.nodes, NodeSummary(node="infra-db", ranks=8)]}
    )
    placed = place_report(base.model_copy(update={"summary": summary}), PODS, NOW)
    assert isinstance(placed, RejectedReport)
    assert {"claimedNode": "infra-db", "actualNode": None, "why": "no pod of the job there"} in (
        placed.evidence["mismatches"]
    )


def test_several_ranks_per_pod_are_placed_by_world_size_over_pods() -> None:
    claims = [("n0", None)] * 4 + [("n1", None)] * 4
    placed = place_report(report(claims), [pod(0, "n0"), pod(1, "n1")], NOW)
    assert isinstance(placed, ScoreReport)
    assert [r.pod for r in placed.ranks] == ["train-0"] * 4 + ["train-1"] * 4
    swapped = place_report(report(claims[::-1]), [pod(0, "n0"), pod(1, "n1")], NOW)
    assert isinstance(swapped, RejectedReport)


@given(
    nodes=st.lists(st.sampled_from(["n0", "n1", "n2", "infra-db", "kube-system-0"]), min_size=1,
                   max_size=12),
)  # fmt: skip
def test_every_node_of_an_accepted_report_hosts_a_live_pod_of_the_job(nodes: list[str]) -> None:
    pods = [pod(None, "n0", name="a"), pod(None, "n1", name="b"), pod(None, "n2", name="c")]
    placed = place_report(report([(n, None) for n in nodes]), pods, NOW)
    job_nodes = {"n0", "n1", "n2"}
    if isinstance(placed, ScoreReport):
        assert {r.node for r in placed.ranks} <= job_nodes
        assert {n.node for n in placed.summary.nodes} <= job_nodes
    else:
        assert set(nodes) - job_nodes


def test_a_report_owned_by_the_pods_controller_is_bound() -> None:
    binding = binding_of(report_object([OWNER]), PODS)
    assert binding.bound and binding.owner_uids == {"uid-train"}


def test_a_report_with_no_pods_behind_it_is_a_ghost() -> None:
    binding = binding_of(report_object([OWNER]), [])
    assert not binding.bound and "no pod" in binding.problem


def test_a_report_without_an_owner_is_not_bound() -> None:
    assert not binding_of(report_object(None), PODS).bound


def test_an_owner_named_like_the_job_but_with_another_uid_is_not_bound() -> None:
    forged = {**OWNER, "uid": "uid-guess"}
    binding = binding_of(report_object([forged]), PODS)
    assert not binding.bound and "does not control" in binding.problem
