"""schemaVersion 5: the bounded (Kubernetes) form lists the worst nodes in full and
counts the rest (``summary.omittedNodes``), so its size no longer grows with the job's
nodes; every listed rank's node is listed; older reports still read."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from score_report_builders import LLAMA_JOB, build

from pacekeeper.detector.compaction import compact, compaction_key
from pacekeeper.detector.score_report import (
    NODE_SKETCH_EDGES,
    SCHEMA_VERSION,
    RankScores,
    ReportRejected,
    ScoreReport,
)

NOW = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)
BOUND = 40_000


def _report(world: int, slow: dict[int, float], per_node: int = 8) -> ScoreReport:
    ranks = [
        RankScores(
            rank=r,
            node=f"gpu-node-{r // per_node:05d}",
            gpu_relative=slow.get(r, 0.97 + 0.03 * ((r * 7919) % 97) / 97),
            section_relative={"fwd": 1.0, "bwd": 1.0},
            kernel_samples=800,
        )
        for r in range(world)
    ]
    return build(ranks, job=LLAMA_JOB, generated_at=NOW, sequence=3)


def test_a_bounded_form_of_many_nodes_lists_the_worst_and_counts_the_rest() -> None:
    world = 4096  # 512 nodes: their entries alone would crowd the ranks out of 40 kB
    slow = {3: 0.2, 2000: 0.4, 4095: 0.5}
    full = _report(world, slow)
    small = compact(full, BOUND)
    assert len(small.to_json()) <= BOUND
    omitted = small.summary.omitted_nodes
    assert omitted is not None and small.truncated
    assert small.schema_version == SCHEMA_VERSION >= 5
    # Every node is named or counted, and so is every rank.
    assert small.summary.node_count == world // 8 == len(small.summary.nodes) + omitted.nodes
    assert sum(n.ranks for n in small.summary.nodes) + omitted.ranks == world
    assert sum(omitted.counts) == omitted.nodes and omitted.edges == list(NODE_SKETCH_EDGES)
    # The slow ranks and their nodes are listed; each listed rank's node is listed.
    listed_nodes = {n.node for n in small.summary.nodes}
    assert set(slow) <= {r.rank for r in small.ranks}
    assert {r.node for r in small.ranks} <= listed_nodes
    # The counted nodes are no worse than any listed node's worst rank.
    assert omitted.min_score is not None
    assert omitted.min_score >= max(compaction_key(r)[0] for r in small.ranks)
    assert small.summary.min_score == 0.2 and small.summary.worst_rank == 3
    assert ScoreReport.from_wire(small.to_json()) == small


def test_the_bounded_form_stays_within_its_bound_whatever_the_node_count() -> None:
    sizes = []
    for world in (1024, 4096, 16_384):
        small = compact(_report(world, {5: 0.3}), BOUND)
        sizes.append(len(small.to_json()))
        assert 5 in {r.rank for r in small.ranks}
    assert max(sizes) <= BOUND


def _bounded_wire() -> dict[str, Any]:
    wire = compact(_report(4096, {3: 0.2}), BOUND).to_wire()
    assert "omittedNodes" in wire["summary"]
    return wire


def test_a_bounded_report_naming_a_rank_on_an_unlisted_node_is_refused() -> None:
    wire = _bounded_wire()
    wire["ranks"][0]["node"] = "gpu-node-99999"
    with pytest.raises(ReportRejected, match=r"node 'gpu-node-99999' is not in summary.nodes"):
        ScoreReport.from_wire(wire)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("counts", [1, 2], "counts for 11 edges"),
        ("edges", [0.5, 0.5, *NODE_SKETCH_EDGES[2:]], "edges must ascend"),
        ("nodes", 1, "counts sum to"),
        ("unmeasured", 10**6, "within nodes"),
    ],
)
def test_an_inconsistent_node_sketch_is_refused_naming_the_field(
    field: str, value: object, message: str
) -> None:
    wire = _bounded_wire()
    wire["summary"]["omittedNodes"][field] = value
    with pytest.raises(ReportRejected, match=message):
        ScoreReport.from_wire(wire)


def test_a_version_4_report_reads_with_every_node_listed() -> None:
    wire = _report(64, {3: 0.2}).to_wire()
    wire["schemaVersion"] = 4
    old = ScoreReport.from_wire(wire)
    assert old.schema_version == 4 and old.summary.omitted_nodes is None
    assert old.summary.node_count == 8


def test_a_version_6_report_is_refused_until_the_controller_is_upgraded() -> None:
    wire = _bounded_wire()
    wire["schemaVersion"] = SCHEMA_VERSION + 1
    with pytest.raises(ReportRejected, match="newer than this pacekeeper understands"):
        ScoreReport.from_wire(wire)
