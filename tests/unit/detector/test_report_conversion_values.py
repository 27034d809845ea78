"""Report -> ScoreReport, field by field: every rank's node from whichever side knows it,
a zero score kept, the individual scores and the probe carried, sample counts, the
window's floor, dropped kernel records given or summed, and NVRx's field list and
``<unk>`` node. Written against mutants the conversion tests let through
(docs/testing.md, "Mutation testing")."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import UTC, datetime

import pytest

from pacekeeper.detector import Report
from pacekeeper.detector.probe import ProbeResult
from pacekeeper.detector.reports import (
    RankInfo,
    StragglerId,
    report_fields,
    to_score_report,
)
from pacekeeper.detector.score_report import (
    JobIdentity,
    KernelTiming,
    Platform,
    RankScores,
    ScoreReport,
)

JOB = JobIdentity(platform=Platform.KUBERNETES, namespace="ml", name="job")


def _report(
    gpu_relative: Mapping[int, float] | None = None,
    gpu_individual: Mapping[int, float] | None = None,
    rank_to_node: Mapping[int, str] | None = None,
) -> Report:
    return Report(
        gpu_relative_perf_scores=gpu_relative or {},
        section_relative_perf_scores={},
        gpu_individual_perf_scores=gpu_individual or {},
        section_individual_perf_scores={"fwd": {0: 0.9, 1: 0.7}},
        rank_to_node={0: "n0", 1: "n1"} if rank_to_node is None else rank_to_node,
        local_section_summaries={},
        local_kernel_summaries={},
        generate_report_elapsed_time=1.0,
        gather_on_rank0=True,
        rank=0,
    )


def _convert(
    report: Report,
    rank_info: Mapping[int, RankInfo],
    window_s: float = 60.0,
    kernel_timing: KernelTiming | None = None,
) -> ScoreReport:
    sr = to_score_report(
        report,
        job=JOB,
        sequence=1,
        generated_at=datetime(2026, 12, 5, tzinfo=UTC),
        window_s=window_s,
        rank_info=rank_info,
        kernel_timing=kernel_timing,
    )
    return ScoreReport.from_wire(sr.to_json())


def _by_rank(sr: ScoreReport) -> dict[int, RankScores]:
    return {r.rank: r for r in sr.ranks}


def test_every_rank_gets_its_node_from_whichever_side_knows_it() -> None:
    info = {
        1: RankInfo(1, ""),  # gathered without a node name: the report's map has it
        2: RankInfo(2, "n2"),  # not in the report's map at all
        3: RankInfo(3, ""),  # known to neither
    }
    ranks = _by_rank(_convert(_report(), info))
    assert sorted(ranks) == [0, 1, 2, 3]  # the union of both sides
    assert [ranks[r].node for r in (0, 1, 2, 3)] == ["n0", "n1", "n2", "<unk>"]


def test_scores_are_carried_and_a_zero_score_is_a_score() -> None:
    report = _report(gpu_relative={0: 0.0, 1: 1.0}, gpu_individual={0: 0.8, 1: 0.25})
    ranks = _by_rank(_convert(report, {}))
    assert (ranks[0].gpu_relative, ranks[1].gpu_relative) == (0.0, 1.0)
    assert (ranks[0].gpu_individual, ranks[1].gpu_individual) == (0.8, 0.25)
    assert ranks[0].section_individual == {"fwd": 0.9}
    assert ranks[1].section_individual == {"fwd": 0.7}


def test_sample_counts_are_kept_and_floored_at_zero() -> None:
    info = {0: RankInfo(0, "n0"), 1: RankInfo(1, "n1", section_samples=-2, kernel_samples=7)}
    ranks = _by_rank(_convert(_report(), info))
    assert (ranks[0].section_samples, ranks[0].kernel_samples) == (0, 0)
    assert (ranks[1].section_samples, ranks[1].kernel_samples) == (0, 7)


def test_the_probe_travels_with_its_rank() -> None:
    probe = ProbeResult("p-1", "cpu", cpu_gflops=12.5, elapsed_ms=3.0)
    ranks = _by_rank(_convert(_report(), {0: RankInfo(0, "n0", probe=probe)}))
    assert ranks[1].probe is None
    got = ranks[0].probe
    assert got is not None
    assert (got.id, got.device, got.cpu_gflops, got.elapsed_ms) == ("p-1", "cpu", 12.5, 3.0)


@pytest.mark.parametrize(("window_s", "expected"), [(60.0, 60.0), (0.5, 0.5), (0.0, 1e-9)])
def test_the_window_is_kept_and_a_zero_one_floored(window_s: float, expected: float) -> None:
    assert _convert(_report(), {}, window_s=window_s).window_s == expected


def test_dropped_records_given_are_kept_and_else_summed() -> None:
    info = {0: RankInfo(0, "n0", dropped_records=3), 1: RankInfo(1, "n1", dropped_records=4)}
    given = _convert(_report(), info, kernel_timing=KernelTiming(dropped_records=5))
    assert given.kernel_timing.dropped_records == 5
    assert _convert(_report(), info).kernel_timing.dropped_records == 7


def test_report_fields_are_the_dataclass_s_in_order() -> None:
    # The names themselves are pinned to NVRx's in test_nvrx_compat.py.
    assert report_fields() == [f.name for f in dataclasses.fields(Report)]
    assert report_fields()[0] == "gpu_relative_perf_scores"


def test_a_straggler_of_unknown_node_is_named_unk() -> None:
    report = _report(gpu_relative={0: 1.0, 5: 0.1})
    found = report.identify_stragglers()
    assert found["straggler_gpus_relative"] == {StragglerId(rank=5, node="<unk>")}
