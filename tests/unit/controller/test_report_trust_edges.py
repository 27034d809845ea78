"""What the controller believes of a report (``trust``), clause by clause: which owner
references bind a report (by uid, the pods' controller or the outermost workload), how
ranks per pod are counted, two pods claiming one index, and what a refusal names.
test_trust.py covers the cases; these pin each rule's messages and counts."""

from __future__ import annotations

from typing import Any

import pytest
from test_trust import NOW, OWNER, PODS, pod, report, report_object

from pacekeeper.controller.core import trust as tr
from pacekeeper.controller.core.decisions import Reason
from pacekeeper.controller.core.observations import RejectedReport
from pacekeeper.detector.score_report import ScoreReport

# --- binding ------------------------------------------------------------------------


def test_binding_problems_are_named() -> None:
    assert tr.binding_of(report_object([OWNER]), []) == tr.Binding(
        False, "no pod carries this job's name: nothing stands behind the report"
    )
    assert tr.binding_of(report_object(None), PODS) == tr.Binding(
        False, "the report has no ownerReference to the job's workload"
    )
    assert tr.binding_of(report_object([{**OWNER, "uid": ""}]), PODS) == tr.Binding(
        False, "the report has no ownerReference to the job's workload"
    )
    assert tr.binding_of(report_object([{**OWNER, "uid": "x"}]), PODS) == tr.Binding(
        False, "the report's owner does not control the job's pods"
    )


def test_bound_by_the_owners_that_control_the_pods_only() -> None:
    got = tr.binding_of(report_object([{**OWNER, "uid": "other"}, OWNER]), PODS)
    assert got == tr.Binding(True, owner_uids=frozenset({"uid-train"}))


def test_the_outermost_workload_binds_too_but_only_over_controlled_pods() -> None:
    top = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "uid": "uid-top"}
    assert tr.binding_of(report_object([top]), PODS, "uid-top") == tr.Binding(
        True, owner_uids=frozenset({"uid-top"})
    )
    orphans = [pod(0, "n0", owner=None), pod(1, "n1", owner=None)]
    assert not tr.binding_of(report_object([top]), orphans, "uid-top").bound


def test_only_a_controller_reference_makes_a_pods_controller() -> None:
    not_controller = pod(0, "n0")
    not_controller["metadata"]["ownerReferences"] = [{**OWNER, "controller": False}]
    assert not tr.binding_of(report_object([OWNER]), [not_controller]).bound
    no_uid = pod(0, "n0")
    no_uid["metadata"]["ownerReferences"] = [
        {**OWNER, "uid": "", "controller": True},
        {**OWNER, "uid": "uid-second", "controller": True},
    ]
    second = {**OWNER, "uid": "uid-second"}
    assert tr.binding_of(report_object([second]), [no_uid]).bound


# --- how the controller creates reports ---------------------------------------------


def born(owners: list[dict[str, Any]] | None, job: Any = "default") -> dict[str, Any]:
    obj = report_object(owners)
    obj["spec"] = {"job": tr.expected_job("ml", "train") if job == "default" else job}
    return obj


def test_expected_job() -> None:
    assert tr.expected_job("ml", "train") == {
        "platform": "kubernetes",
        "namespace": "ml",
        "name": "train",
    }


def test_birth_problems_are_named() -> None:
    assert tr.birth_problem(born([OWNER]), "uid-train") == ""
    assert (
        tr.birth_problem(born(None), "uid-train")
        == "the report has no ownerReference to the job's workload"
    )
    assert (
        tr.birth_problem(born([{**OWNER, "uid": ""}]), "uid-train")
        == "the report has no ownerReference to the job's workload"
    )
    assert (
        tr.birth_problem(born([OWNER]), "uid-live")
        == "the report's ownerReference is not the live workload's uid"
    )
    other = {"platform": "kubernetes", "namespace": "ml", "name": "other"}
    assert tr.birth_problem(born([OWNER], other), "uid-train") == (
        f"spec.job is {other!r}, not {tr.expected_job('ml', 'train')!r}"
    )
    no_spec = report_object([OWNER])
    assert tr.birth_problem(no_spec, "uid-train").startswith("spec.job is None, not")


# --- placement ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("annotated", "live", "ranks", "want"),
    [
        (3, 2, 4, 3),
        (0, 2, 4, 1),
        (None, 2, 4, 2),
        (None, 3, 4, 1),  # not a multiple: one rank per pod
        (None, 0, 4, 1),
        (None, 4, 4, 1),
    ],
)
def test_ranks_per_pod(annotated: int | None, live: int, ranks: int, want: int) -> None:
    rep = report([("n0", None)] * ranks)
    assert tr._ranks_per_pod(rep, live, annotated) == want


def test_an_annotated_ranks_per_pod_places_the_ranks() -> None:
    claims = [("n0", None)] * 2 + [("n1", None)] * 2
    placed = tr.place_report(report(claims), [pod(0, "n0"), pod(1, "n1")], NOW, ranks_per_pod=2)
    assert isinstance(placed, ScoreReport)
    assert [r.pod for r in placed.ranks] == ["train-0", "train-0", "train-1", "train-1"]
    wrong = tr.place_report(report(claims), [pod(0, "n0"), pod(1, "n1")], NOW, ranks_per_pod=1)
    assert isinstance(wrong, RejectedReport)


def test_two_pods_claiming_one_index_place_nobody() -> None:
    pods = [pod(0, "n0"), pod(0, "n5", name="train-0-dup"), pod(1, "n1")]
    # Rank 0 falls back to "a live pod of the job on the claimed node": n5 hosts one.
    placed = tr.place_report(report([("n5", None), ("n1", None)]), pods, NOW)
    assert isinstance(placed, ScoreReport)
    assert [r.pod for r in placed.ranks] == [None, "train-1"]


def test_a_report_already_naming_its_pods_comes_back_as_it_was() -> None:
    rep = report([("n0", "train-0"), ("n1", "train-1")])
    assert tr.place_report(rep, PODS, NOW) is rep


def test_a_refusal_names_the_first_mismatches_and_counts_them_all() -> None:
    claims = [("bad", None)] * 12
    pods = [pod(None, "n0", name="a")]
    placed = tr.place_report(report(claims), pods, NOW)
    assert isinstance(placed, RejectedReport)
    assert placed.reason is Reason.UNTRUSTED_REPORT
    assert placed.received_at == NOW
    ev = placed.evidence
    assert len(ev["mismatches"]) == tr.MISMATCHES_KEPT == 8
    assert ev["mismatchCount"] == 13  # 12 ranks and the summary's node
    assert ev["sequence"] == 3
    assert placed.error == "; ".join(
        f"rank {r} claims node 'bad', the API says None" for r in range(3)
    )


def test_mismatch_forms() -> None:
    full = tr.Mismatch(2, "a", "b", "p", "why")
    assert full.to_dict() == {
        "claimedNode": "a",
        "actualNode": "b",
        "rank": 2,
        "claimedPod": "p",
        "why": "why",
    }
    summary = tr.Mismatch(None, "a", None)
    assert summary.to_dict() == {"claimedNode": "a", "actualNode": None}
    assert summary.describe() == "summary claims node 'a', the API says None"
    assert tr.Mismatch(0, "a", "b").describe() == "rank 0 claims node 'a', the API says 'b'"
    assert tr.Mismatch(0, "a", "b").to_dict() == {"claimedNode": "a", "actualNode": "b", "rank": 0}
