"""Internal failures never raise into training: they are counted and the report degrades.

The backends here stand in for a GPU kernel-timing backend (this machine has no GPU).
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from pacekeeper import cupti_ext
from pacekeeper.cupti_ext import BackendChoice, KernelStat, KernelWindow
from pacekeeper.detector import Detector


def _stat(median_ns: float, num: int = 10) -> KernelStat:
    return KernelStat(
        num=num,
        median_ns=median_ns,
        mean_ns=median_ns,
        min_ns=median_ns,
        max_ns=median_ns,
        std_ns=0.0,
        total_ns=median_ns * num,
    )


class ScriptedBackend:
    """A kernel-timing backend that returns scripted windows or fails on purpose."""

    name = "scripted"

    def __init__(self, windows: list[KernelWindow], fail: set[str] | None = None) -> None:
        self.windows = windows
        self.fail = fail or set()
        self.calls: list[tuple[str, str]] = []

    def start(self, section: str) -> None:
        self.calls.append(("start", section))
        if "start" in self.fail:
            raise RuntimeError("start failed")

    def stop(self, section: str) -> None:
        self.calls.append(("stop", section))

    def collect(self) -> KernelWindow:
        if "collect" in self.fail:
            raise RuntimeError("CUPTI buffer gone")
        return self.windows.pop(0) if self.windows else KernelWindow()

    def shutdown(self) -> None:
        if "shutdown" in self.fail:
            raise RuntimeError("shutdown failed")


def _use(monkeypatch: pytest.MonkeyPatch, backend: Any) -> dict[str, Any]:
    """Make the detector select ``backend``; returns the options it asked for."""
    asked: dict[str, Any] = {}

    def select(requested: str | None = None, **options: Any) -> Any:
        asked.update(options, requested=requested)
        return backend, BackendChoice("scripted", "test")

    monkeypatch.setattr(cupti_ext, "select_backend", select)
    return asked


def test_backend_collect_failure_degrades_to_a_report_without_gpu_scores(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _use(monkeypatch, ScriptedBackend([], fail={"collect", "start", "shutdown"}))
    Detector.initialize()
    for _ in range(3):
        with Detector.detection_section("fwd"):
            pass
    report = Detector.generate_report()
    assert report is not None
    assert report.section_relative_perf_scores == {"fwd": {0: 1.0}}
    assert list(report.gpu_relative_perf_scores) == [0]  # NaN, as NVRx: no kernels
    assert math.isnan(report.gpu_relative_perf_scores[0])
    Detector.generate_report()
    Detector.shutdown()
    assert Detector.internal_errors() == {
        "backend.start": 3,
        "backend.collect": 2,
        "backend.shutdown": 1,
    }


def test_the_detector_asks_its_backend_for_no_per_section_kernel_statistics(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Its GPU score reads kernels over all traced entries; a per-section table would
    # be folded on every buffer and snapshotted on every report for nobody.
    asked = _use(monkeypatch, ScriptedBackend([]))
    Detector.initialize(kernel_timing="auto")
    Detector.shutdown()
    assert asked == {"requested": "auto", "section_stats": False}


def test_internal_error_is_logged_once_per_cause(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _use(monkeypatch, ScriptedBackend([], fail={"collect"}))
    Detector.initialize()
    for _ in range(3):
        Detector.generate_report()
    logged = [r for r in caplog.records if getattr(r, "where", None) == "backend.collect"]
    assert len(logged) == 1
    assert Detector.internal_errors()["backend.collect"] == 3


def test_failing_listener_is_counted_and_others_still_run() -> None:
    seen: list[int] = []

    def broken(_report: Any) -> None:
        raise ValueError("reporter bug")

    Detector.initialize()
    Detector.add_report_listener(broken)
    Detector.add_report_listener(lambda r: seen.append(r.sequence))
    try:
        assert Detector.generate_report() is not None
        assert Detector.generate_report() is not None
    finally:
        Detector.remove_report_listener(broken)
        Detector._listeners.clear()
    assert seen == [1, 2]
    assert Detector.internal_errors() == {"listener": 2}
    assert Detector.latest_score_report() is not None


def test_gpu_scores_come_from_kernels_weighted_and_without_nccl(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PACEKEEPER_COMM_KERNEL_PATTERN", "^my_collective")
    comm = {"ncclDevKernel_AllReduce": _stat(5.0), "my_collective_kernel": _stat(7.0)}
    fast = {"gemm": _stat(100.0), "relu": _stat(10.0), **comm}
    slow = {"gemm": _stat(200.0), "relu": _stat(10.0), **comm}
    windows = [KernelWindow(kernels=k, records=30) for k in (fast, fast, fast, slow)]
    backend = ScriptedBackend(windows)
    _use(monkeypatch, backend)
    Detector.initialize()
    with Detector.detection_section("fwd"):
        pass
    with Detector.detection_section("cpu", profile_cuda=False):
        pass
    assert backend.calls == [("start", "fwd"), ("stop", "fwd")]
    reports = [Detector.generate_report() for _ in range(4)]
    first, last = reports[0], reports[-1]
    assert first is not None and last is not None
    assert set(first.local_kernel_summaries) == {"gemm", "relu"}
    assert first.gpu_relative_perf_scores == {0: 1.0}
    # gemm 2x slower with 2000 of 2100 ns weight: (2000 * 0.5 + 100 * 1.0) / 2100
    assert last.gpu_individual_perf_scores[0] == pytest.approx(1100 / 2100)
    assert last.identify_stragglers()["straggler_gpus_individual"] != set()
    score_report = Detector.latest_score_report()
    assert score_report is not None
    assert score_report.kernel_timing.backend == "scripted"
    assert score_report.ranks[0].kernel_samples == 30


def test_one_lucky_window_does_not_lock_the_individual_baseline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    normal, lucky = {"gemm": _stat(100.0)}, {"gemm": _stat(50.0)}
    windows = [KernelWindow(kernels=k) for k in (normal, normal, lucky, normal, normal)]
    _use(monkeypatch, ScriptedBackend(windows))
    Detector.initialize()
    scores = []
    for _ in range(5):
        report = Detector.generate_report()
        assert report is not None
        scores.append(report.gpu_individual_perf_scores[0])
    # NVRx's all-time minimum would score every window after the lucky one 0.5.
    assert scores == [1.0, 1.0, 1.0, 1.0, 1.0]


def test_a_new_comm_pattern_at_initialize_is_applied_to_keys_seen_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Verdicts per key are remembered between reports; a re-initialize must forget them.
    window = {"gemm": _stat(100.0), "my_collective_kernel": _stat(7.0)}
    for pattern, kept in (("", {"gemm", "my_collective_kernel"}), ("^my_coll", {"gemm"})):
        monkeypatch.setenv("PACEKEEPER_COMM_KERNEL_PATTERN", pattern)
        _use(monkeypatch, ScriptedBackend([KernelWindow(kernels=window, records=2)]))
        Detector.initialize()
        try:
            with Detector.detection_section("fwd"):
                pass
            report = Detector.generate_report()
            assert report is not None and set(report.local_kernel_summaries) == kept
        finally:
            Detector.shutdown()
