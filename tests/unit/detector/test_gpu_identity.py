"""Each rank's GPU in its reports: the current CUDA device's UUID in the driver's form,
read once, and nothing on a rank that never touched CUDA (no CUDA call, no torch import)."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest
import torch

from pacekeeper.detector import Detector, identity

DEVICES = {0: "5c2b1f9e-3a4d-4e8a-9f01-23456789abcd", 1: "0d7e93c1-bb42-47c0-8a55-d00ec0ffee01"}


def _fake_cuda(monkeypatch: pytest.MonkeyPatch, device: int, uuids: dict[int, str]) -> list[int]:
    """CUDA in use on ``device``; returns the devices whose properties were read."""
    read: list[int] = []

    def properties(d: int) -> SimpleNamespace:
        read.append(d)
        return SimpleNamespace(uuid=uuids[d])

    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: device)
    monkeypatch.setattr(torch.cuda, "get_device_properties", properties)
    return read


def test_the_current_devices_uuid_in_the_drivers_form(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_cuda(monkeypatch, 1, DEVICES)
    assert identity.gpu_uuid() == f"GPU-{DEVICES[1]}"
    _fake_cuda(monkeypatch, 0, {0: "MIG-6f2a0c51-aaaa-bbbb-cccc-123456789012"})
    assert identity.gpu_uuid() == "MIG-6f2a0c51-aaaa-bbbb-cccc-123456789012"  # kept as it is


def test_a_rank_that_never_touched_cuda_names_no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_call(*_a: object) -> None:
        raise AssertionError("a CUDA call on a rank that uses no GPU")

    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(torch.cuda, "get_device_properties", no_call)
    assert identity.gpu_uuid() is None
    monkeypatch.delitem(sys.modules, "torch")
    assert identity.gpu_uuid() is None
    assert "torch" not in sys.modules  # asked, not imported


def test_every_report_names_the_ranks_gpu_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    Detector.initialize(report_time_interval=3600)
    try:
        read = _fake_cuda(monkeypatch, 0, DEVICES)
        for _ in range(3):
            with Detector.detection_section("step"):
                pass
            Detector.generate_report()
            report = Detector.latest_score_report()
            assert report is not None
            assert [r.gpu_uuid for r in report.ranks] == [f"GPU-{DEVICES[0]}"]
        assert read == [0]
    finally:
        Detector.shutdown()


def test_a_cpu_only_rank_reports_no_gpu_and_stops_asking(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[bool] = []
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: asked.append(True) or False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    Detector.initialize(report_time_interval=3600)
    try:
        for _ in range(3):
            Detector.generate_report()
            report = Detector.latest_score_report()
            assert report is not None and report.ranks[0].gpu_uuid is None
        assert len(asked) == 1
    finally:
        Detector.shutdown()
