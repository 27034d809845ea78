"""What the Ray-side controller believes of a report: its numbers, never its placements.

A job writes its own reports, so which Ray node and process each rank runs on is only
the job's claim; acting on it would let a job pick the worker the controller restarts
or the node it drains. Here the claims meet Ray's own record of the job — its actors in
the GCS actor table, each with the node and process id Ray placed it on:

- ``place_ray_report``: every rank must name a Ray node id and pid that is an actor of
  the report's own job; one claim that does not match refuses the whole report
  (``UntrustedReport``, as ``core/trust.py`` does on Kubernetes). An accepted report
  comes back with each rank's ``node`` set to its Ray node id, so node names (ladders,
  budgets, marks) are Ray's, not the job's.
- ``wrong_platform``: a report on the Ray ScoreBoard must say ``platform: ray``; one
  saying ``kubernetes`` or ``local`` names no Ray job and is refused whatever the
  runner's ``verify_placement`` (issue 40; the Kubernetes source refuses the converse).
- ``confirm_workers`` / ``confirm_nodes``: just before acting, the targets are checked
  again against the job's *live* actors (a pid may have died and been reused since).

Pure: actors are values read by ``ray_records.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from pacekeeper.controller.core.observations import RejectedReport
from pacekeeper.controller.core.trust import Mismatch, untrusted
from pacekeeper.detector.score_report import NodeSummary, Platform, RankScores, ScoreReport

RAY_KEY_PREFIX = "ray:"
RAY_JOB_ID_HEX = 8
"""A Ray ``JobID`` is 4 bytes."""


@dataclass(frozen=True, slots=True)
class RayActor:
    """One actor of a job as the GCS actor table records it."""

    actor_id: str
    node_id: str
    pid: int
    alive: bool


def wrong_platform(report: ScoreReport, now: datetime) -> RejectedReport | None:
    """The refusal of a report on the Ray ScoreBoard that is not a Ray job's, else None."""
    if report.job.platform is Platform.RAY:
        return None
    return RejectedReport(
        received_at=now,
        error=f"report.job.platform is {report.job.platform.value!r}: the Ray ScoreBoard "
        "takes ray reports only",
    )


def ray_job_of(key: str) -> str | None:
    """The Ray job id (hex) of a ``ray:<id>`` job key, else None."""
    if not key.startswith(RAY_KEY_PREFIX):
        return None
    job = key[len(RAY_KEY_PREFIX) :].lower()
    if len(job) != RAY_JOB_ID_HEX or any(c not in "0123456789abcdef" for c in job):
        return None
    return job


def place_ray_report(
    report: ScoreReport,
    placed: Iterable[tuple[str, int]],
    now: datetime,
) -> ScoreReport | RejectedReport:
    """The report with every rank's (Ray node id, pid) checked against ``placed``, the
    job's actors as Ray records them (any state: an old report names workers that have
    since died). On acceptance each rank's ``node`` is its Ray node id, in the per-node
    summary too. A refusal is dated by the report (``received_at``), so an old untrusted
    report does not hold up decisions on the newer trusted ones."""
    known = set(placed)
    mismatches: list[Mismatch] = []
    node_of_name: dict[str, str] = {}
    name_of_node: dict[str, str] = {}
    ranks: list[RankScores] = []
    for r in report.ranks:
        why = _unplaced(r, known, node_of_name, name_of_node)
        if why:
            actual = node_of_name.get(r.node) if why.startswith("node name") else None
            mismatches.append(Mismatch(r.rank, r.ray_node_id, actual, None, why))
            continue
        ranks.append(r.model_copy(update={"node": r.ray_node_id}))
    nodes: list[NodeSummary] = []
    for ns in report.summary.nodes:
        node_id = node_of_name.get(ns.node)
        if node_id is None:
            mismatches.append(Mismatch(None, ns.node, None, None, "no rank of the job there"))
            continue
        nodes.append(ns.model_copy(update={"node": node_id}))
    if mismatches:
        refusal = untrusted(mismatches, now, report.sequence)
        said = "; ".join(
            f"{'summary' if m.rank is None else f'rank {m.rank}'} ({m.claimed_node}): {m.why}"
            for m in mismatches[:3]
        )
        return replace(refusal, received_at=min(report.generated_at, now), error=said)
    summary = report.summary.model_copy(update={"nodes": nodes})
    return report.model_copy(update={"ranks": ranks, "summary": summary})


def _unplaced(
    r: RankScores,
    known: set[tuple[str, int]],
    node_of_name: dict[str, str],
    name_of_node: dict[str, str],
) -> str:
    """Why Ray does not place rank ``r`` as claimed ('' when it does); records the first
    Ray node id of each node name, and the reverse, as it goes."""
    if not r.ray_node_id or r.pid is None:
        return "no Ray node id and pid named"
    if (r.ray_node_id, r.pid) not in known:
        return f"pid {r.pid} is not an actor of the job on that Ray node"
    first_node = node_of_name.setdefault(r.node, r.ray_node_id)
    first_name = name_of_node.setdefault(r.ray_node_id, r.node)
    if first_node != r.ray_node_id or first_name != r.node:
        return f"node name {r.node!r} and Ray node ids disagree across ranks"
    return ""


def confirm_workers(workers: Sequence[Mapping[str, Any]], live: Iterable[RayActor]) -> list[str]:
    """Why each of ``workers`` ({rank, rayNodeId, pid}) may not be restarted: empty when
    every one is a live actor of the job on the node named."""
    alive = {(a.node_id, a.pid) for a in live if a.alive}
    return [
        f"rank {w.get('rank')}: pid {w.get('pid')} on Ray node {w.get('rayNodeId')} "
        "is not a live actor of the job"
        for w in workers
        if (str(w.get("rayNodeId")), _int(w.get("pid"))) not in alive
    ]


def confirm_nodes(
    node_ids: Sequence[str], live: Iterable[RayActor], alive_nodes: frozenset[str]
) -> list[str]:
    """Why each of ``node_ids`` may not be drained: empty when every one is an alive
    Ray node hosting a live actor of the job."""
    hosting = {a.node_id for a in live if a.alive}
    problems = []
    for node in node_ids:
        if node not in alive_nodes:
            problems.append(f"Ray node {node} is not an alive node of the cluster")
        elif node not in hosting:
            problems.append(f"Ray node {node} hosts no live actor of the job")
    return problems


def _int(value: object) -> int | None:
    try:
        return int(value)  # type: ignore[call-overload, no-any-return]
    except (TypeError, ValueError):
        return None
