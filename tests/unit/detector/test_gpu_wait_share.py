"""On GPUs the wait for peers is in the NCCL kernels (the host only queues them): a
rank's ``waitShare`` is the share of its traced GPU time they took, the larger of that
and the host-side share where both were timed (issue 17)."""

from __future__ import annotations

import pytest
from test_guard import ScriptedBackend, _stat, _use

from pacekeeper.cupti_ext import KernelWindow
from pacekeeper.detector import Detector
from pacekeeper.detector.local_payload import _larger


def _report_wait_share() -> float | None:
    with Detector.detection_section("step"):
        pass
    Detector.generate_report()
    report = Detector.latest_score_report()
    assert report is not None
    (rank,) = report.ranks
    return rank.wait_share


def test_nccl_kernel_time_is_the_ranks_wait_share(monkeypatch: pytest.MonkeyPatch) -> None:
    gemm = {"gemm~abc/t9": _stat(1000.0, 10)}  # 10 us of compute
    nccl = "ncclDevKernel_AllReduce_Sum_f32_RING_LL~def/t1"
    windows = [
        # CUPTI: communication kernels already left out, their time summed.
        KernelWindow(kernels=dict(gemm), records=10, comm_records=2, comm_ns=30_000.0),
        # Another backend lists them by name: the detector takes them out and counts them.
        KernelWindow(kernels={**gemm, nccl: _stat(5000.0, 2)}, records=12),
        KernelWindow(kernels=dict(gemm), records=10),
    ]
    _use(monkeypatch, ScriptedBackend(windows))
    Detector.initialize(report_time_interval=3600)
    try:
        assert _report_wait_share() == pytest.approx(0.75)
        assert _report_wait_share() == pytest.approx(0.5)
        report = Detector.latest_score_report()
        assert report is not None and "ncclDevKernel" not in str(report.ranks[0].gpu_relative)
        assert _report_wait_share() is None  # nothing waited: not measured, not zero
    finally:
        Detector.shutdown()


def test_host_and_gpu_shares_count_once() -> None:
    assert _larger(None, None) is None
    assert _larger(0.2, None) == 0.2 and _larger(None, 0.3) == 0.3
    assert _larger(0.2, 0.3) == 0.3 and _larger(0.4, 0.3) == 0.4
