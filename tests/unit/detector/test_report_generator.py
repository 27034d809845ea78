"""``reporting.ReportGenerator`` as NVRx users build it, in one process (no group): the
scores' values, the name mapper's use, bad input. Multi-rank: tests/multiprocess/
test_report_generator_ranks.py."""

from __future__ import annotations

import math

import pytest

from pacekeeper.detector import Detector, Statistic, reporting


def summary(med: float, num: int = 4, avg: float | None = None) -> dict[Statistic, float]:
    avg = med if avg is None else avg
    return {
        Statistic.MIN: med,
        Statistic.MAX: med,
        Statistic.MED: med,
        Statistic.AVG: avg,
        Statistic.STD: 0.0,
        Statistic.NUM: num,
    }


def test_individual_scores_against_the_ranks_own_baseline_weighted_by_time() -> None:
    gen = reporting.ReportGenerator(
        ["individual_perf_scores"], gather_on_rank0=False, rules="pacekeeper"
    )
    gen.generate_report(
        {"fwd": summary(2.0)}, kernel_summaries={"A": summary(1.0), "B": summary(3.0)}
    )
    # A 2x slower with 10x B's time share, B as before: (0.5 * 20 + 1.0 * 3) / 23.
    report = gen.generate_report(
        {"fwd": summary(8.0)},
        kernel_summaries={"A": summary(2.0, num=10), "B": summary(3.0, num=1)},
    )
    assert report is not None and report.rank == 0
    assert report.gpu_individual_perf_scores == pytest.approx({0: 13 / 23})
    assert report.section_individual_perf_scores["fwd"] == pytest.approx({0: 0.25})
    assert report.gpu_relative_perf_scores == {}  # not asked for
    # Individual scores alone need no group: NVRx's mapper stays empty.
    with pytest.raises(KeyError):
        gen.name_mapper.get_section_id("fwd")


def test_one_rank_relative_scores_are_one_and_comm_kernels_are_left_out() -> None:
    gen = reporting.ReportGenerator(["relative_perf_scores"], node_name="n0", rules="pacekeeper")
    report = gen.generate_report(
        {"fwd": summary(5.0)},
        kernel_summaries={"ncclDevKernel_AllReduce_Sum": summary(9.0), "A": summary(3.0)},
    )
    assert report is not None and report.rank is None  # gather_on_rank0 by default
    assert report.gpu_relative_perf_scores == {0: 1.0}
    assert report.section_relative_perf_scores == {"fwd": {0: 1.0}}
    assert report.rank_to_node == {0: "n0"}
    assert list(report.local_kernel_summaries) == ["A"]
    assert gen.name_mapper.kernel_counter == 1 and gen.name_mapper.get_kernel_id("A") == 0


def test_no_kernels_gives_nan_gpu_scores_as_nvrx() -> None:
    gen = reporting.ReportGenerator(["relative_perf_scores", "individual_perf_scores"])
    report = gen.generate_report({}, kernel_summaries={})
    assert report is not None
    assert math.isnan(report.gpu_relative_perf_scores[0])
    assert math.isnan(report.gpu_individual_perf_scores[0])


def test_bad_input_names_the_key() -> None:
    with pytest.raises(ValueError, match="unknown"):
        reporting.ReportGenerator(["relative_perf_score"])
    gen = reporting.ReportGenerator(["relative_perf_scores"])
    with pytest.raises(ValueError, match="kernel_summaries\\['A'\\]"):
        gen.generate_report({}, kernel_summaries={"A": {Statistic.MED: 1.0}})
    with pytest.raises(ValueError, match="section_summaries\\['fwd'\\]"):
        gen.generate_report({"fwd": {}}, kernel_summaries={})


def test_the_detectors_reporter_is_an_instance() -> None:
    assert isinstance(Detector.reporter, reporting.ReportGenerator)
