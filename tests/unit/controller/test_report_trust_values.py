"""Values of ``trust`` that test_trust.py and test_report_trust_edges.py checked only in
part, found by mutation (make mutation, issue 41): a refusal names every contradiction
in full, each of its kind (the evidence a person reads to see which claim was false),
and keeps checking after the first; ranks per pod come from the job's world size even
when the report lists only its worst ranks; Kubeflow's indexes count the master; a pod
with no node yet places no rank; a report object without a name expects an empty job."""

from __future__ import annotations

from typing import Any

from test_trust import NOW, OWNER, PODS, pod, report, report_object

from pacekeeper.controller.core import trust as tr
from pacekeeper.controller.core.observations import RejectedReport
from pacekeeper.detector.score_report import JobIdentity, Platform, RankScores, ScoreReport


def test_a_refusal_names_each_contradiction_in_full_and_checks_every_rank() -> None:
    claims = [
        ("n0", "ghost-a"),  # names a pod the job does not have
        ("n9", None),  # its pod (by index) is on n1
        ("n7", "train-2"),  # names its pod, which is on n2
        ("n8", None),  # no pod by index, and no pod of the job on n8
        ("n0", "ghost-b"),
    ]
    placed = tr.place_report(report(claims), PODS, NOW)
    assert isinstance(placed, RejectedReport)
    assert placed.evidence == {
        "mismatches": [
            {
                "rank": 0,
                "claimedNode": "n0",
                "actualNode": None,
                "claimedPod": "ghost-a",
                "why": "the pod is not a live pod of the job",
            },
            {"rank": 1, "claimedNode": "n9", "actualNode": "n1"},
            {"rank": 2, "claimedNode": "n7", "actualNode": "n2", "claimedPod": "train-2"},
            {
                "rank": 3,
                "claimedNode": "n8",
                "actualNode": None,
                "why": "no pod of the job there",
            },
            {
                "rank": 4,
                "claimedNode": "n0",
                "actualNode": None,
                "claimedPod": "ghost-b",
                "why": "the pod is not a live pod of the job",
            },
            {"claimedNode": "n7", "actualNode": None, "why": "no pod of the job there"},
            {"claimedNode": "n8", "actualNode": None, "why": "no pod of the job there"},
            {"claimedNode": "n9", "actualNode": None, "why": "no pod of the job there"},
        ],
        "mismatchCount": 8,
        "sequence": 3,
    }
    assert placed.error == (
        "rank 0 claims node 'n0', the API says None; rank 1 claims node 'n9', the API says "
        "'n1'; rank 2 claims node 'n7', the API says 'n2'"
    )


def test_ranks_per_pod_come_from_the_world_size_of_a_report_listing_few_ranks() -> None:
    # 8 ranks on 4 pods, 2 a pod; the (bounded) report lists only ranks 6 and 7.
    pods = [pod(i, f"n{i}") for i in range(4)]
    listed = [RankScores(rank=r, node="n3", gpu_relative=0.5) for r in (6, 7)]
    rep = ScoreReport.build(
        job=JobIdentity(platform=Platform.KUBERNETES, namespace="ml", name="train"),
        sequence=3,
        generated_at=NOW,
        window_s=30.0,
        ranks=listed,
        world_size=8,
    )
    assert tr._ranks_per_pod(rep, 4, None) == 2
    placed = tr.place_report(rep, pods, NOW)
    assert isinstance(placed, ScoreReport)
    assert [(r.rank, r.pod) for r in placed.ranks] == [(6, "train-3"), (7, "train-3")]


def kubeflow(kind: str, index: int, node: str) -> dict[str, Any]:
    got = pod(None, node, name=f"train-{kind}-{index}")
    got["metadata"]["labels"].update(
        {
            "training.kubeflow.org/replica-type": kind,
            "training.kubeflow.org/replica-index": str(index),
        }
    )
    return got


def test_kubeflow_workers_are_placed_after_their_master() -> None:
    pods = [kubeflow("master", 0, "n0"), kubeflow("worker", 0, "n1"), kubeflow("worker", 1, "n2")]
    placed = tr.place_report(report([("n0", None), ("n1", None), ("n2", None)]), pods, NOW)
    assert isinstance(placed, ScoreReport)
    assert [r.pod for r in placed.ranks] == [
        "train-master-0",
        "train-worker-0",
        "train-worker-1",
    ]


def test_a_pod_without_a_node_places_no_rank() -> None:
    pods = [pod(0, "n0"), pod(1, None)]  # train-1 is not scheduled yet
    # Not even a rank claiming a node literally named "None".
    for claim in ("n1", "None"):
        placed = tr.place_report(report([("n0", None), (claim, None)]), pods, NOW)
        assert isinstance(placed, RejectedReport), claim
        assert placed.evidence["mismatches"][0] == {
            "rank": 1,
            "claimedNode": claim,
            "actualNode": None,
        }


def test_a_report_object_without_a_name_expects_an_empty_job() -> None:
    nameless = report_object([OWNER])
    nameless["metadata"] = {"ownerReferences": [OWNER]}
    nameless["spec"] = {"job": tr.expected_job("ml", "train")}
    assert tr.birth_problem(nameless, "uid-train") == (
        f"spec.job is {tr.expected_job('ml', 'train')!r}, not {tr.expected_job('', '')!r}"
    )
