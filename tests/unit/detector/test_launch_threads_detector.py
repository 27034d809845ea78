"""Work per launch through the real ``Detector`` (issue #38): a backend's window names
each kernel's typical launch threads, the rank's payload carries them, and its broad
individual GPU score (``gpuIndividualMedian``) reads a bigger launch per unit of work
against its own baseline, while the kernel-time mean (NVRx's individual GPU score, what
the step pays) stays a time."""

from __future__ import annotations

import pytest
from test_guard import ScriptedBackend, _stat, _use

from pacekeeper.cupti_ext import KernelWindow
from pacekeeper.detector import Detector

KEY = "gemm~abc/t9"


def _individual_scores(
    monkeypatch: pytest.MonkeyPatch, launches: bool
) -> list[tuple[float, float | None]]:
    times = [1000.0] * 5 + [1200.0]
    threads = [640.0] * 5 + [768.0]  # the last window: 20% more work, launched 20% bigger
    windows = [
        KernelWindow(
            kernels={KEY: _stat(t, 10)},
            records=10,
            launch_threads={KEY: n} if launches else {},
        )
        for t, n in zip(times, threads, strict=True)
    ]
    _use(monkeypatch, ScriptedBackend(windows))
    Detector.initialize(report_time_interval=3600)
    out = []
    try:
        for _ in times:
            with Detector.detection_section("step"):
                pass
            report = Detector.generate_report()
            ours = Detector.latest_score_report()
            assert report is not None and ours is not None
            out.append((report.gpu_individual_perf_scores[0], ours.ranks[0].gpu_individual_median))
    finally:
        Detector.shutdown()
    return out


def test_a_bigger_launch_is_read_per_unit_of_work_against_the_own_baseline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mean, median = _individual_scores(monkeypatch, launches=True)[-1]
    assert median == pytest.approx(1.0)
    assert mean == pytest.approx(1 / 1.2)  # a time: NVRx's score is never rescaled


def test_without_launch_sizes_the_same_window_reads_slow(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _individual_scores(monkeypatch, launches=False)[-1] == pytest.approx((1 / 1.2, 1 / 1.2))
