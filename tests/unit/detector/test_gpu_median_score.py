"""The broad GPU score (``gpuIndividualMedian``, schemaVersion 6): the kernel-time-weighted
median of a rank's kernel scores against its own baseline. Data skew on a minority of
the kernel time leaves it at the GPU's speed where the weighted mean falls; a slow GPU
lowers both alike. Then its way into the ScoreReport, the bounded form, and back."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import numpy as np
import pytest

from pacekeeper.detector.reports import RankInfo, Report, report_fields, to_score_report
from pacekeeper.detector.score_report import (
    SCHEMA_VERSION,
    JobIdentity,
    ReportRejected,
    ScoreReport,
)
from pacekeeper.detector.scoring import (
    FEW_KEYS,
    gpu_individual_median,
    gpu_individual_score,
    weighted_median,
)

JOB = JobIdentity(name="train")
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _kernels(n: int, seed: int = 3) -> np.ndarray:
    # Heavy-tailed kernel times, as a real job's (a few GEMMs, many small kernels).
    return np.random.default_rng(seed).lognormal(0.0, 1.0, n) * 1e5


def _data_dependent(base: np.ndarray, share: float) -> np.ndarray:
    """The kernels making up ``share`` of the time (whole kernels, from the first)."""
    cum = np.cumsum(base) / base.sum()
    take = int(np.argmin(np.abs(cum - share))) + 1
    mask = np.zeros(base.size, dtype=bool)
    mask[:take] = True
    return mask


@pytest.mark.parametrize("n", [12, FEW_KEYS + 40])  # the plain and the numpy path
def test_skew_on_thirty_percent_of_kernel_time_leaves_the_median_at_one(n: int) -> None:
    base = _kernels(n)
    dd = _data_dependent(base, 0.3)
    assert 0.2 < base[dd].sum() / base.sum() < 0.4
    typical = np.where(dd, base * 1.15, base)
    total = typical * 10
    median = gpu_individual_median(typical, base, total)
    mean = gpu_individual_score(typical, base, total)
    assert median == pytest.approx(1.0)
    # The mean falls by the skewed kernels' time share: the skew the step times show.
    assert mean < 0.97


@pytest.mark.parametrize("n", [12, FEW_KEYS + 40])
def test_a_slow_gpu_shows_its_whole_slowdown_in_the_median(n: int) -> None:
    base = _kernels(n)
    typical = base * 1.1
    total = typical * 10
    assert gpu_individual_median(typical, base, total) == pytest.approx(1 / 1.1)
    assert gpu_individual_score(typical, base, total) == pytest.approx(1 / 1.1)


def test_past_half_the_kernel_time_the_median_shows_the_skew() -> None:
    # Where the statistic cannot tell skew from a slow GPU: most of the time is
    # data-dependent (MoE expert GEMMs on routed tokens without a capacity limit).
    base = _kernels(40)
    dd = _data_dependent(base, 0.7)
    typical = np.where(dd, base * 1.15, base)
    assert gpu_individual_median(typical, base, typical) == pytest.approx(1 / 1.15)


def test_weighted_median_values_and_missing_entries() -> None:
    assert weighted_median([0.9, 1.0, 0.8], [1.0, 1.0, 1.0]) == 0.9
    # Weight, not count: one kernel of 60% of the time decides.
    assert weighted_median([0.8, 1.0, 1.0], [6.0, 2.0, 2.0]) == 0.8
    assert weighted_median([0.8, 1.0], [5.0, 5.0]) == 0.8  # the lower median
    assert weighted_median([math.nan, 0.7, 1.0], [9.0, 1.0, 3.0]) == 1.0
    assert math.isnan(weighted_median([0.7, 1.0], [0.0, math.nan]))
    assert math.isnan(weighted_median([], []))
    # A missing baseline or time drops the kernel; nothing usable gives NaN.
    empty = np.array([math.nan])
    assert math.isnan(gpu_individual_median(empty, empty, np.array([1.0])))


def _report(median: float | None) -> ScoreReport:
    # NVRx's report with only what these ranks need: no sections, two GPU scores.
    nvrx: dict[str, object] = {key: {} for key in report_fields()}
    nvrx |= {"gpu_individual_perf_scores": {0: 1.0, 1: 0.87}, "rank": 0,
             "rank_to_node": {0: "n0", 1: "n0"}, "generate_report_elapsed_time": 0.0,
             "gather_on_rank0": True}  # fmt: skip
    report = Report(**nvrx)
    infos = {
        0: RankInfo(rank=0, node="n0", gpu_individual_median=math.nan),
        1: RankInfo(rank=1, node="n0", gpu_individual_median=median),
    }
    return to_score_report(
        report, job=JOB, sequence=1, generated_at=NOW, window_s=60.0, rank_info=infos
    )


def test_the_median_travels_in_the_score_report_and_reads_back() -> None:
    report = _report(0.99)
    wire = report.to_wire()
    assert wire["schemaVersion"] == SCHEMA_VERSION >= 6
    assert "gpuIndividualMedian" not in wire["ranks"][0]  # NaN: not measured, absent
    assert wire["ranks"][1]["gpuIndividualMedian"] == 0.99
    back = ScoreReport.from_wire(report.to_json())
    assert back.ranks[1].gpu_individual_median == 0.99
    # Not a worst score: the sequential test reads it, notices do not.
    assert back.ranks[1].worst_score() == 0.87
    assert back.summary.peers[0].spreads["gpuIndividualMedian"].median == 0.99


def test_older_reports_read_without_it_and_a_bad_one_is_refused() -> None:
    wire = _report(None).to_wire()
    assert "gpuIndividualMedian" not in wire["ranks"][1]
    old = {**wire, "schemaVersion": 5}
    assert ScoreReport.from_wire(old).ranks[1].gpu_individual_median is None
    wire["ranks"][1]["gpuIndividualMedian"] = -0.5
    with pytest.raises(ReportRejected, match=r"ranks\.1\.gpuIndividualMedian"):
        ScoreReport.from_wire(wire)
