"""The Ray-side controller believes a report's numbers, never its placements."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pacekeeper.controller.core.decisions import Reason
from pacekeeper.controller.core.observations import RejectedReport
from pacekeeper.controller.simulation.synthetic import synthetic_report
from pacekeeper.controller.sources.ray_trust import (
    RayActor,
    confirm_nodes,
    confirm_workers,
    place_ray_report,
    ray_job_of,
)
from pacekeeper.detector.score_report import JobIdentity, Platform, ScoreReport

JOB = JobIdentity(platform=Platform.RAY, name="train", ray_job_id="01000000")
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
N1, N2 = "a" * 56, "b" * 56


def _report(placements: list[tuple[str, str | None, int | None]]) -> ScoreReport:
    """One rank per (node name, Ray node id, pid); rank 1 slow."""
    base = synthetic_report(job=JOB, world_size=len(placements), slow={1: 0.4},
                            generated_at=NOW - timedelta(seconds=30))  # fmt: skip
    ranks = [
        r.model_copy(update={"node": name, "ray_node_id": node_id, "pid": pid})
        for r, (name, node_id, pid) in zip(base.ranks, placements, strict=True)
    ]
    rebuilt = ScoreReport.build(job=JOB, sequence=3, generated_at=base.generated_at,
                                window_s=60.0, ranks=ranks)  # fmt: skip
    return rebuilt


PLACED = {(N1, 100), (N1, 101), (N2, 200)}


def test_a_report_whose_ranks_are_the_jobs_actors_is_kept_with_ray_node_ids_as_names() -> None:
    report = _report([("host-1", N1, 100), ("host-1", N1, 101), ("host-2", N2, 200)])
    placed = place_ray_report(report, PLACED, NOW)
    assert isinstance(placed, ScoreReport)
    assert [r.node for r in placed.ranks] == [N1, N1, N2]
    assert sorted(n.node for n in placed.summary.nodes) == [N1, N2]
    assert [r.section_relative for r in placed.ranks] == [r.section_relative for r in report.ranks]


@pytest.mark.parametrize(
    ("placements", "why"),
    [
        ([("host-1", N1, 100), ("host-1", N1, 999)], "pid 999 is not an actor of the job"),
        ([("host-1", N1, 100), ("host-1", N2, 101)], "pid 101 is not an actor"),
        ([("host-1", N1, 100), ("host-1", None, None)], "no Ray node id and pid"),
        ([("host-1", N1, 100), ("host-2", N1, 101)], "Ray node ids disagree"),
        ([("host-1", N1, 100), ("host-1", N2, 200)], "Ray node ids disagree"),
    ],
    ids=[
        "foreign-pid",
        "pid-on-another-node",
        "no-placement",
        "two-names-one-node",
        "one-name-two-nodes",
    ],
)
def test_one_claim_ray_does_not_record_refuses_the_whole_report(
    placements: list[tuple[str, str | None, int | None]], why: str
) -> None:
    report = _report(placements)
    refused = place_ray_report(report, PLACED, NOW)
    assert isinstance(refused, RejectedReport)
    assert refused.reason is Reason.UNTRUSTED_REPORT
    assert why in refused.error
    assert refused.evidence["sequence"] == 3 and refused.evidence["mismatchCount"] >= 1
    assert refused.received_at == report.generated_at, "dated by the report, not by now"


def test_a_summary_naming_a_node_no_rank_is_on_refuses_the_report() -> None:
    report = _report([("host-1", N1, 100)])
    extra = report.summary.nodes[0].model_copy(update={"node": "elsewhere"})
    forged = report.model_copy(
        update={
            "summary": report.summary.model_copy(update={"nodes": [*report.summary.nodes, extra]})
        }
    )
    refused = place_ray_report(forged, PLACED, NOW)
    assert isinstance(refused, RejectedReport) and "no rank of the job there" in refused.error


def test_restart_targets_must_be_live_actors_of_the_job_on_the_node_named() -> None:
    live = [RayActor("x", N1, 100, True), RayActor("y", N1, 101, False)]
    ok = {"rank": 0, "rayNodeId": N1, "pid": 100}
    assert confirm_workers([ok], live) == []
    dead = {"rank": 1, "rayNodeId": N1, "pid": 101}
    moved = {"rank": 2, "rayNodeId": N2, "pid": 100}
    problems = confirm_workers([ok, dead, moved, {"rank": 3, "pid": "x"}], live)
    assert [p.split(":")[0] for p in problems] == ["rank 1", "rank 2", "rank 3"]


def test_a_node_is_drained_only_when_alive_and_hosting_a_live_actor_of_the_job() -> None:
    live = [RayActor("x", N1, 100, True), RayActor("y", N2, 200, False)]
    alive = frozenset({N1, N2})
    assert confirm_nodes([N1], live, alive) == []
    assert confirm_nodes([N2], live, alive) == [f"Ray node {N2} hosts no live actor of the job"]
    assert "not an alive node" in confirm_nodes(["c" * 56], live, alive)[0]


def test_only_ray_job_keys_name_a_ray_job() -> None:
    assert ray_job_of("ray:01000000") == "01000000"
    assert ray_job_of("ray:") is None and ray_job_of("ray:zzzzzzzz") is None
    assert ray_job_of("ray:d1") is None, "a Ray job id is 4 bytes"
    assert ray_job_of("local:demo") is None and ray_job_of("ns/name") is None
