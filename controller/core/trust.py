"""What the controller believes of a report: its numbers, never its identities.

A training job writes its own StragglerReport, so everything in it is the job's claim.
The scores are the job's to give (a job can only hurt itself by lying about them); which
node or pod a rank runs on is not: it would let a job choose what the controller taints,
cordons or evicts. Here the claims meet the API's own record of the job:

- ``binding_of``: a report counts for a job only when the job's pods exist and the
  report object is owned by the workload that controls them (the pods' controller, or
  the outermost workload above them, as the controller sets it when it creates the
  report). A report nobody's pods stand behind (a "ghost") is ignored.
- ``birth_problem``: whether a report is bound exactly the way the controller creates it
  (owned by the live workload, ``spec.job`` naming the job); anything else was made by
  someone else and is repaired (``runtime/report_birth.py``).
- ``place_report``: every rank's node (and pod, when named) must be where the API's live
  pods put it; every node a summary names must host a live pod of the job. One claim
  that does not match refuses the whole report: its writer is not telling the truth
  about placement, so none of its attribution can be used.

Pure: pods and report objects are the JSON mappings the API serves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pacekeeper.controller.core.decisions import Reason
from pacekeeper.controller.core.observations import RejectedReport
from pacekeeper.controller.core.ranks import live_pods, pod_index
from pacekeeper.detector.score_report import RankScores, ScoreReport

MISMATCHES_KEPT = 8
"""Mismatches named in a decision's evidence; the count covers the rest."""


@dataclass(frozen=True, slots=True)
class Mismatch:
    """One identity claim the API contradicts."""

    rank: int | None
    """None for a node named only by the report's per-node summary."""
    claimed_node: str | None
    actual_node: str | None
    """Where the API places the rank; None when no live pod of the job is there."""
    claimed_pod: str | None = None
    why: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"claimedNode": self.claimed_node, "actualNode": self.actual_node}
        if self.rank is not None:
            out["rank"] = self.rank
        if self.claimed_pod is not None:
            out["claimedPod"] = self.claimed_pod
        if self.why:
            out["why"] = self.why
        return out

    def describe(self) -> str:
        who = "summary" if self.rank is None else f"rank {self.rank}"
        return f"{who} claims node {self.claimed_node!r}, the API says {self.actual_node!r}"


@dataclass(frozen=True, slots=True)
class Binding:
    """Whether a report object stands for a live workload, and why not."""

    bound: bool
    problem: str = ""
    owner_uids: frozenset[str] = field(default_factory=frozenset)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _controller_uid(obj: Mapping[str, Any]) -> str | None:
    for ref in _meta(obj).get("ownerReferences") or ():
        if ref.get("controller") and ref.get("uid"):
            return str(ref["uid"])
    return None


def binding_of(
    report_object: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    workload_uid: str | None = None,
) -> Binding:
    """A StragglerReport is bound to its job when the job has pods and the report is
    owned by the object that controls them (their Job, PyTorchJob, JobSet child Job...)
    or by ``workload_uid``, the outermost controller above them (read from the API).

    Owner references are checked by uid, which the API assigns: a report cannot claim a
    workload by name. Its pods are found by the frameworks' job-name labels, so the
    report's name must be the job's name."""
    if not pods:
        return Binding(False, "no pod carries this job's name: nothing stands behind the report")
    controllers = {uid for p in pods if (uid := _controller_uid(p)) is not None}
    if workload_uid is not None and controllers:
        controllers.add(workload_uid)
    owners = {
        str(ref["uid"])
        for ref in _meta(report_object).get("ownerReferences") or ()
        if ref.get("uid")
    }
    if not owners:
        return Binding(False, "the report has no ownerReference to the job's workload")
    if not owners & controllers:
        return Binding(False, "the report's owner does not control the job's pods")
    return Binding(True, owner_uids=frozenset(owners & controllers))


def expected_job(namespace: str, name: str) -> dict[str, str]:
    """``spec.job`` of the job's report, as the controller writes it."""
    return {"platform": "kubernetes", "namespace": namespace, "name": name}


def birth_problem(report_object: Mapping[str, Any], workload_uid: str) -> str:
    """Why ``report_object`` is not bound the way the controller creates reports ("" when
    it is): owned by the live workload (by uid: a namesake or a guess does not count),
    ``spec.job`` naming this very object's job, nothing in ``spec`` but the job. A report
    made by anyone else may carry a ``spec.control`` of its maker's choosing."""
    meta = _meta(report_object)
    uids = {str(r.get("uid")) for r in meta.get("ownerReferences") or () if r.get("uid")}
    if not uids:
        return "the report has no ownerReference to the job's workload"
    if workload_uid not in uids:
        return "the report's ownerReference is not the live workload's uid"
    spec = report_object.get("spec") or {}
    job = expected_job(str(meta.get("namespace") or ""), str(meta.get("name") or ""))
    if spec.get("job") != job:
        return f"spec.job is {spec.get('job')!r}, not {job!r}"
    return ""


def _node_of(pod: Mapping[str, Any]) -> str | None:
    node = (pod.get("spec") or {}).get("nodeName")
    return str(node) if node else None


def _ranks_per_pod(report: ScoreReport, live: int, annotated: int | None) -> int:
    if annotated is not None:
        return max(1, annotated)
    world = report.summary.world_size or len(report.ranks)
    if live and world and world % live == 0:
        return world // live
    return 1


def place_report(
    report: ScoreReport,
    pods: Sequence[Mapping[str, Any]],
    now: datetime,
    *,
    ranks_per_pod: int | None = None,
) -> ScoreReport | RejectedReport:
    """The report with every rank's placement checked against the job's live pods.

    A rank that names its pod must name a live pod of the job, on the node it names. A
    rank without a pod name is placed by the frameworks' pod index (``ranks.py``); where
    no index exists, the node it names must at least host a live pod of the job. Any
    contradiction refuses the report (``UntrustedReport``). An accepted report comes back
    with each rank's ``pod`` set to the pod the API places it in, when known."""
    live = live_pods(pods)
    by_name = {str(_meta(p).get("name")): p for p in live}
    job_nodes = {n for p in live if (n := _node_of(p)) is not None}
    rpp = _ranks_per_pod(report, len(live), ranks_per_pod)
    by_index: dict[int, Mapping[str, Any] | None] = {}
    for p in live:
        found = pod_index(p, live)
        if found is not None:
            # Two pods claiming one index place nobody (the same rule as resolve_rank).
            by_index[found[0]] = None if found[0] in by_index else p
    mismatches: list[Mismatch] = []
    placed: list[RankScores] = []
    for r in report.ranks:
        if r.pod is not None:
            pod = by_name.get(r.pod)
            if pod is None:
                mismatches.append(
                    Mismatch(r.rank, r.node, None, r.pod, "the pod is not a live pod of the job")
                )
                continue
        else:
            pod = by_index.get(r.rank // rpp)
        if pod is None:
            if r.node not in job_nodes:
                mismatches.append(Mismatch(r.rank, r.node, None, None, "no pod of the job there"))
                continue
            placed.append(r)
            continue
        actual = _node_of(pod)
        if actual != r.node:
            mismatches.append(Mismatch(r.rank, r.node, actual, r.pod))
            continue
        name = str(_meta(pod).get("name"))
        placed.append(r if r.pod == name else r.model_copy(update={"pod": name}))
    for ns in report.summary.nodes:
        if ns.node not in job_nodes:
            mismatches.append(Mismatch(None, ns.node, None, None, "no pod of the job there"))
    if mismatches:
        return untrusted(mismatches, now, report.sequence)
    if all(a is b for a, b in zip(placed, report.ranks, strict=True)):
        return report
    return report.model_copy(update={"ranks": placed})


def untrusted(mismatches: Sequence[Mismatch], now: datetime, sequence: int) -> RejectedReport:
    named = [m.to_dict() for m in mismatches[:MISMATCHES_KEPT]]
    return RejectedReport(
        received_at=now,
        error="; ".join(m.describe() for m in mismatches[:3]),
        reason=Reason.UNTRUSTED_REPORT,
        evidence={"mismatches": named, "mismatchCount": len(mismatches), "sequence": sequence},
    )
