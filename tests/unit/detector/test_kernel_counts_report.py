"""What became of a window's kernel records travels with every report: attributed,
traced outside every section, held for markers still to come, dropped; a window that
lost some says so in a warning (issue 19: a GPU score built on 39% of the kernels
without a word)."""

from __future__ import annotations

import logging

import pytest
from test_guard import ScriptedBackend, _stat, _use

from pacekeeper.cupti_ext import KernelWindow
from pacekeeper.detector import Detector
from pacekeeper.detector.score_report import KernelTiming, ScoreReport


def _window(**counts: int) -> KernelWindow:
    return KernelWindow(kernels={"gemm~abc/t9": _stat(1000.0, counts["records"])}, **counts)


def test_each_score_report_carries_the_windows_kernel_counts(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    windows = [
        _window(records=800, unattributed_records=0, held_records=0),
        _window(records=300, unattributed_records=480, held_records=20, lost_markers=12),
    ]
    _use(monkeypatch, ScriptedBackend(windows))
    Detector.initialize(report_time_interval=3600)
    with Detector.detection_section("step"):
        pass
    Detector.generate_report()
    first = Detector.latest_score_report()
    assert first is not None
    timing = first.kernel_timing
    assert (timing.attributed_records, timing.unattributed_records) == (800, 0)
    assert (timing.held_records, timing.lost_markers, timing.dropped_records) == (0, 0, 0)
    assert "kernel records lost" not in caplog.text
    Detector.generate_report()
    second = Detector.latest_score_report()
    assert second is not None
    timing = second.kernel_timing
    assert (timing.attributed_records, timing.unattributed_records) == (300, 480)
    assert (timing.held_records, timing.lost_markers) == (20, 12)
    assert "kernel records lost" in caplog.text
    totals = Detector._run.payloads.kernel_totals  # type: ignore[union-attr]
    assert totals["attributed"] == 1100 and totals["lost_markers"] == 12
    # On the wire, camelCase, and read back.
    wire = second.to_json()
    assert '"attributedRecords":300' in wire.replace(" ", "")
    Detector.shutdown()


def test_reports_without_the_counts_still_read() -> None:
    old = KernelTiming.model_validate({"backend": "cupti", "reason": "", "droppedRecords": 2})
    assert (old.attributed_records, old.held_records, old.dropped_records) == (0, 0, 2)
    assert ScoreReport.model_fields["kernel_timing"].default_factory is KernelTiming
