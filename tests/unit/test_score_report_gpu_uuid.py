"""Schema version 3: each rank names its GPU (``gpuUuid``), bounded and checked at the
boundary; version 2 reports still read, and the bounded form keeps the worst ranks'
GPUs under the Kubernetes limit."""

from __future__ import annotations

import pytest
from score_report_builders import build, old_wire

from pacekeeper.detector.compaction import compact
from pacekeeper.detector.score_report import (
    K8S_STATUS_MAX_BYTES,
    MAX_GPU_UUID,
    SCHEMA_VERSION,
    RankScores,
    ReportRejected,
    ScoreReport,
)

UUID = "GPU-5c2b1f9e-3a4d-4e8a-9f01-23456789abcd"
V2_WIRE = old_wire(
    2,
    ranks=[{"rank": 0, "node": "n0", "gpuRelative": 1.0, "coords": {"dp": 0}}],
    summary={"worldSize": 1, "reportedRanks": 1},
)


def test_a_version_2_report_still_reads_and_names_no_gpu() -> None:
    report = ScoreReport.from_wire(V2_WIRE)
    assert report.schema_version == 2 < SCHEMA_VERSION
    assert report.ranks[0].gpu_uuid is None
    assert "gpuUuid" not in report.to_wire()["ranks"][0]


def test_the_gpu_uuid_travels_in_camel_case_and_reads_back() -> None:
    ranks = [RankScores(rank=0, node="n0", gpu_relative=1.0, gpu_uuid=UUID)]
    report = build(ranks)
    wire = report.to_wire()
    assert wire["schemaVersion"] == SCHEMA_VERSION >= 3
    assert wire["ranks"][0]["gpuUuid"] == UUID
    assert ScoreReport.from_wire(report.to_json()).ranks[0].gpu_uuid == UUID


@pytest.mark.parametrize(
    "bad",
    ["", "GPU-" + "a" * MAX_GPU_UUID, "GPU-12 34", "GPU-1234\n", "-GPU", "GPU-é", "GPU/x", 7],
)
def test_a_bad_gpu_uuid_is_refused_naming_the_field(bad: object) -> None:
    wire = {**V2_WIRE, "schemaVersion": 3}
    wire["ranks"] = [{**V2_WIRE["ranks"][0], "gpuUuid": bad}]
    with pytest.raises(ReportRejected, match=r"ranks\.0\.gpuUuid"):
        ScoreReport.from_wire(wire)


def test_the_bounded_form_of_a_large_job_keeps_the_worst_ranks_gpus() -> None:
    world = 8192
    ranks = [
        RankScores(
            rank=r,
            node=f"node-{r // 8:05d}",
            gpu_relative=0.3 if r == 4321 else 0.95 + 0.05 * ((r * 7919) % 100) / 100,
            gpu_individual=1.0,
            section_relative={"forward": 1.0},
            kernel_samples=1000,
            gpu_uuid=f"GPU-{r:08x}-3a4d-4e8a-9f01-23456789abcd",
        )
        for r in range(world)
    ]
    full = build(ranks)
    small = compact(full)
    assert len(small.to_json()) <= K8S_STATUS_MAX_BYTES and small.truncated
    worst = next(r for r in small.ranks if r.rank == 4321)
    assert worst.gpu_uuid == f"GPU-{4321:08x}-3a4d-4e8a-9f01-23456789abcd"
