"""What a simulated job answers when the controller asks for its confirmation probe
(``detector/probe.py``, ``confirm: probe``): every rank's throughputs on the same fixed
work, as the H200 gave them (docs/performance.md: 787 TFLOPS bf16 GEMM, 4.1 TB/s device
copy, 55 GB/s pinned host-to-device, 18.7 ms), divided by how much slower the rank's
GPU runs identical work now (``WindowSummary.gpu_speed``: its static spread, drift and
any GPU or node fault), with 1% run-to-run noise per part. A host-side fault (a busy
CPU, a slow loader) does not slow the GPU probe, and the host-to-device part follows no
simulated fault: the simulator has none of the link between host and GPU.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from pacekeeper.detector.probe import ProbeResult

GEMM_TFLOPS = 787.0
MEMORY_GBPS = 4100.0
H2D_GBPS = 55.0
ELAPSED_MS = 18.7
NOISE_CV = 0.01


def answers(probe_id: str, gpu_speed: npt.NDArray[np.float64], seed: int) -> list[ProbeResult]:
    """One result per rank (row order of ``gpu_speed``)."""
    rng = np.random.default_rng([seed, 0x9E0BE])
    noise = 1.0 + NOISE_CV * rng.standard_normal((gpu_speed.size, 3))
    return [
        ProbeResult(
            probe_id,
            "cuda",
            gemm_tflops=float(GEMM_TFLOPS / speed * n[0]),
            memory_gbps=float(MEMORY_GBPS / speed * n[1]),
            h2d_gbps=float(H2D_GBPS * n[2]),
            elapsed_ms=ELAPSED_MS,
        )
        for speed, n in zip(gpu_speed.tolist(), noise, strict=True)
    ]
