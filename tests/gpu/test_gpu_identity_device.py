"""On a real GPU: the detector names the rank's GPU as the driver does (a UUID that
``nvidia-smi`` lists, ``GPU-…``), in every report, once CUDA is in use."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from pacekeeper.detector import Detector, identity


def test_the_reported_gpu_is_one_nvidia_smi_names() -> None:
    import torch

    if shutil.which("nvidia-smi") is None:
        pytest.skip("nvidia-smi is not on PATH")
    assert identity.gpu_uuid() is None or torch.cuda.is_initialized()
    torch.zeros(1, device="cuda")  # the job's first kernel: CUDA is now in use
    listed = subprocess.run(
        ["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    found = identity.gpu_uuid()
    assert found is not None and found.startswith("GPU-")
    assert found in listed, (found, listed)
    if len(listed) == 1 and not os.environ.get("CUDA_VISIBLE_DEVICES"):
        assert found == listed[0]
    Detector.initialize(report_time_interval=3600)
    try:
        with Detector.detection_section("step"):
            torch.ones(256, 256, device="cuda").matmul(torch.ones(256, 256, device="cuda"))
        Detector.generate_report()
        report = Detector.latest_score_report()
        assert report is not None and [r.gpu_uuid for r in report.ranks] == [found]
    finally:
        Detector.shutdown()
