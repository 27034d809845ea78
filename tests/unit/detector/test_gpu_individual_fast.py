"""How a rank's fastest tenth of kernel time ran against its own baseline
(``gpuIndividualFast``, schemaVersion 8): a slow GPU lowers it with every kernel, data
skew leaves it at the GPU's pace however much of the kernel time the skewed kernels
take; then its way through the rank's payload, the ScoreReport and back."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime

import numpy as np
import pytest

from pacekeeper.detector.score_report import (
    SCHEMA_VERSION,
    JobIdentity,
    RankScores,
    ReportRejected,
    ScoreReport,
)
from pacekeeper.detector.scoring import (
    gpu_individual_fast,
    gpu_individual_median,
    weighted_median,
    weighted_quantile,
)

BASE = np.array([4e5, 3e5, 2e5, 1e5])
"""Per-step kernel times of a healthy rank; the last kernel is a tenth of the time."""


def test_the_quantile_is_the_value_where_its_share_of_the_weight_is_reached() -> None:
    values, weights = [0.8, 1.0, 0.9], [7.0, 1.0, 2.0]
    assert weighted_quantile(values, weights, 0.5) == 0.8  # 7 of 10 at 0.8
    assert weighted_quantile(values, weights, 0.8) == 0.9  # 9 of 10 at or below 0.9
    assert weighted_quantile(values, weights, 0.95) == 1.0
    # Missing values and weights left out; nothing left: NaN.
    assert weighted_quantile([math.nan, 0.7], [5.0, 1.0], 0.9) == 0.7
    assert weighted_quantile([0.7, 0.9], [0.0, 1.0], 0.1) == 0.9
    assert math.isnan(weighted_quantile([math.nan], [1.0], 0.5))


@pytest.mark.parametrize("seed", range(20))
def test_the_median_is_the_half_quantile(seed: int) -> None:
    rng = random.Random(seed)
    values = [rng.choice([0.8, 0.9, 1.0, rng.random()]) for _ in range(rng.randint(1, 12))]
    weights = [rng.choice([0.0, 1.0, rng.random()]) for _ in values]
    a, b = weighted_median(values, weights), weighted_quantile(values, weights, 0.5)
    assert (math.isnan(a) and math.isnan(b)) or a == b


def test_a_slow_gpu_lowers_its_fastest_kernels_too() -> None:
    got = gpu_individual_fast(BASE / 0.9, BASE, BASE / 0.9)
    assert got == pytest.approx(0.9)


def test_skew_on_most_of_the_kernel_time_leaves_the_fastest_tenth_at_pace() -> None:
    # The first two kernels (70% of the time) carry 15% more work; the others, of
    # fixed work, run as ever. Mean and median both read a slow GPU, the fast one not.
    skewed = BASE * np.array([1.15, 1.15, 1.0, 1.0])
    assert gpu_individual_median(skewed, BASE, skewed) == pytest.approx(1 / 1.15)
    assert gpu_individual_fast(skewed, BASE, skewed) == 1.0


def test_a_bigger_launch_is_read_per_unit_of_work() -> None:
    # Every kernel 20% longer, the last two (30% of the time) launched with twice the
    # threads: per unit of work those ran faster than their baseline (capped at 1.0);
    # without the launch sizes all read 1 / 1.2.
    typical = BASE * 1.2
    threads = np.array([128.0, 128.0, 256.0, 256.0])
    base_threads = np.full(4, 128.0)
    assert gpu_individual_fast(typical, BASE, typical) == pytest.approx(1 / 1.2)
    assert gpu_individual_fast(typical, BASE, typical, threads, base_threads) == 1.0


def _report(fast: float | None) -> ScoreReport:
    ranks = [
        RankScores(rank=0, node="n0", gpu_individual=1.0, gpu_individual_fast=1.0),
        RankScores(rank=1, node="n1", gpu_individual=0.85, gpu_individual_fast=fast),
    ]
    return ScoreReport.build(
        job=JobIdentity(name="train"),
        sequence=1,
        generated_at=datetime(2026, 12, 6, tzinfo=UTC),
        window_s=60.0,
        ranks=ranks,
    )


def test_it_travels_in_the_score_report_and_reads_back() -> None:
    report = _report(0.99)
    wire = report.to_wire()
    assert wire["schemaVersion"] == SCHEMA_VERSION >= 8
    assert wire["ranks"][1]["gpuIndividualFast"] == 0.99
    back = ScoreReport.from_wire(report.to_json())
    assert back.ranks[1].gpu_individual_fast == 0.99
    # Not a worst score: the sequential test reads it, notices do not.
    assert back.ranks[1].worst_score() == 0.85
    assert back.summary.peers[0].spreads["gpuIndividualFast"].median == pytest.approx(0.995)


def test_older_reports_read_without_it_and_a_bad_one_is_refused() -> None:
    wire = _report(None).to_wire()
    assert "gpuIndividualFast" not in wire["ranks"][1]
    assert ScoreReport.from_wire({**wire, "schemaVersion": 7}).ranks[1].gpu_individual_fast is None
    wire["ranks"][1]["gpuIndividualFast"] = -0.5
    with pytest.raises(ReportRejected, match=r"ranks\.1\.gpuIndividualFast"):
        ScoreReport.from_wire(wire)


def _through_the_detector(
    monkeypatch: pytest.MonkeyPatch, last: dict[str, float]
) -> tuple[float | None, float | None]:
    """The real ``Detector`` over five steady windows and one of ``last`` times: the
    last report's (median, fast) for rank 0."""
    from test_guard import ScriptedBackend, _stat, _use

    from pacekeeper.cupti_ext import KernelWindow
    from pacekeeper.detector import Detector

    steady = {"attn~a/t1": 800.0, "adam~b/t1": 200.0}
    windows = [
        KernelWindow(kernels={k: _stat(t, 10) for k, t in times.items()}, records=20)
        for times in [steady] * 5 + [last]
    ]
    _use(monkeypatch, ScriptedBackend(windows))
    Detector.initialize(report_time_interval=3600)
    try:
        for _ in range(len(windows)):  # the backend pops the windows it hands out
            with Detector.detection_section("step"):
                pass
            Detector.generate_report()
        ours = Detector.latest_score_report()
        assert ours is not None
        return ours.ranks[0].gpu_individual_median, ours.ranks[0].gpu_individual_fast
    finally:
        Detector.shutdown()


def test_the_detector_reports_skew_and_a_slow_gpu_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    # 80% of the kernel time in a kernel whose work follows the data, 15% heavier.
    median, fast = _through_the_detector(monkeypatch, {"attn~a/t1": 920.0, "adam~b/t1": 200.0})
    assert median == pytest.approx(800 / 920) and fast == 1.0
    # A slow GPU: both kernels 10% longer.
    median, fast = _through_the_detector(monkeypatch, {"attn~a/t1": 880.0, "adam~b/t1": 220.0})
    assert median == pytest.approx(1 / 1.1) and fast == pytest.approx(1 / 1.1)
