"""Schema version 2: each rank's place in the job's topology and its wait share travel,
version 1 reports still read, and the bounded form stays under the Kubernetes limit."""

from __future__ import annotations

import pytest
from score_report_builders import build, old_wire

from pacekeeper.detector.compaction import compact
from pacekeeper.detector.score_report import (
    K8S_STATUS_MAX_BYTES,
    MAX_PEER_SUMMARIES,
    SCHEMA_VERSION,
    RankScores,
    ReportRejected,
    ScoreReport,
    peer_key,
)

V1_WIRE = old_wire(
    1,
    kernelTiming={"backend": "cupti", "reason": "", "droppedRecords": 0},
    ranks=[
        {"rank": 0, "node": "n0", "gpuRelative": 1.0, "sectionRelative": {"fwd": 0.9}},
        {"rank": 1, "node": "n0", "gpuRelative": 0.5},
    ],
    summary={"worldSize": 2, "reportedRanks": 2, "minScore": 0.5, "worstRank": 1},
)


def _rank(rank: int, score: float, **kw: object) -> RankScores:
    return RankScores(
        rank=rank,
        node=f"node-{rank // 8:05d}",
        gpu_relative=score,
        gpu_individual=1.0,
        section_relative={"forward": score, "backward": score},
        section_individual={"forward": 1.0, "backward": 1.0},
        section_samples=100,
        kernel_samples=1000,
        **kw,  # type: ignore[arg-type]
    )


def test_a_version_1_report_still_reads_and_has_no_topology() -> None:
    report = ScoreReport.from_wire(V1_WIRE)
    assert report.schema_version == 1 < SCHEMA_VERSION
    assert all(r.group is None and r.coords is None and r.wait_share is None for r in report.ranks)
    assert report.summary.peers == []
    assert peer_key(report.ranks[0]) == ""  # no topology: the whole job is one group


def test_group_coords_and_wait_share_round_trip_in_camel_case() -> None:
    ranks = [
        _rank(0, 1.0, coords={"dp": 0, "pp": 1, "tp": 0}, wait_share=0.25),
        _rank(1, 0.8, group="stage-1", wait_share=0.0),
    ]
    report = build(ranks)
    wire = report.to_wire()
    assert wire["schemaVersion"] == SCHEMA_VERSION
    assert wire["ranks"][0]["coords"] == {"dp": 0, "pp": 1, "tp": 0}
    assert wire["ranks"][0]["waitShare"] == 0.25 and wire["ranks"][1]["group"] == "stage-1"
    assert ScoreReport.from_wire(report.to_json()) == report
    # Peers: the group, else the coordinates without the replica dimensions.
    assert peer_key(report.ranks[0]) == "pp=1"
    assert peer_key(report.ranks[1]) == "group=stage-1"
    keys = {p.peers for p in report.summary.peers}
    assert keys == {"pp=1", "group=stage-1"}


@pytest.mark.parametrize(
    ("field", "value", "where"),
    [
        ("waitShare", 1.5, "ranks.0.waitShare"),
        ("waitShare", -0.1, "ranks.0.waitShare"),
        ("coords", {"DP": 1}, "ranks.0.coords"),
        ("coords", {"dp": -1}, "ranks.0.coords.dp"),
        ("coords", {"dp": "1"}, "ranks.0.coords.dp"),
        ("group", "", "ranks.0.group"),
    ],
)
def test_bad_topology_fields_are_refused_naming_the_field(
    field: str, value: object, where: str
) -> None:
    wire = {**V1_WIRE, "schemaVersion": 2}
    wire["ranks"] = [{**V1_WIRE["ranks"][0], field: value}]
    with pytest.raises(ReportRejected, match=where.replace(".", r"\.")):
        ScoreReport.from_wire(wire)


def test_16k_ranks_with_coordinates_fit_the_status_bound_and_keep_peer_spreads() -> None:
    world = 16_384
    ranks = []
    for r in range(world):
        coords = {"tp": r % 8, "dp": (r // 8) % 128, "pp": r // 1024}  # 16 stages
        score = 0.3 if r in (5, 9000) else 0.95 + 0.05 * ((r * 7919) % 100) / 100
        ranks.append(_rank(r, score, coords=coords, wait_share=0.1))
    full = build(ranks)
    small = compact(full)
    assert len(small.to_json()) <= K8S_STATUS_MAX_BYTES
    assert small.truncated and {5, 9000} <= {r.rank for r in small.ranks}
    assert small.summary == full.summary  # summary, peer spreads included, kept in full
    assert len(small.summary.peers) == 16 <= MAX_PEER_SUMMARIES
    stage = next(p for p in small.summary.peers if p.peers == "pp=0")
    assert stage.ranks == 1024 and stage.spreads["gpuRelative"].n == 1024
    assert set(stage.spreads) >= {"sectionRelative/forward", "sectionIndividual/backward"}


def test_peer_summaries_are_bounded_to_the_largest_groups() -> None:
    ranks = [_rank(r, 1.0, group=f"g{r % 100}") for r in range(400)]
    report = build(ranks)
    assert len(report.summary.peers) == MAX_PEER_SUMMARIES
