"""The confirmation probe: the same small, fixed work on every rank, timed, so a slow
GPU (or host) is told from a heavy share of the job's work.

Scores say a rank is slower than its peers; they cannot say whether its hardware is
slow or its work is heavier (a longer sequence, a pipeline stage with the loss). Before
a node action the controller may ask every rank of the job to run this probe at its
next report (runtime control, ``Control.probe_id``): identical work everywhere, so
the rank whose probe is slow has slow hardware. On a GPU:

* ``gemm``: bf16 matrix products (tensor cores, clocks, power and thermal limits);
* ``memory``: a large device-to-device copy (HBM bandwidth);
* ``h2d``: a pinned host-to-device copy (PCIe/NVLink-C2C, the host's memory).

Each part is timed with CUDA events on a stream of the probe's own, after a warm-up,
and sized to stay inside ``budget_ms`` of GPU time in all (the default 200 ms: the
issue's bound). On a CPU-only rank: float32 matrix products on the host. Results are
throughputs (higher is better), compared by the controller with the job's other ranks
of the same GPU model.

About 2 x 256 MiB + 2 x 128 MiB + 64 MiB of device memory for the probe's duration,
and ~10 ms of GPU time on an H200 (docs/performance.md). The caller runs it under the
detector's guard: out of memory or any other failure is logged and counted, and the
report goes out without a probe result; it never raises into training.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

DEFAULT_BUDGET_MS = 200.0
"""Most GPU (or CPU) time the probe may take on a rank."""
_GEMM_N = 4096
_GEMM_REPS = 8
_MEMORY_BYTES = 256 << 20
_H2D_BYTES = 128 << 20
_CPU_N = 384
_CPU_REPS = 4


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """One rank's probe: throughputs of identical work (None: that part did not run)."""

    probe_id: str
    device: str
    """``cuda`` or ``cpu``."""
    gemm_tflops: float | None = None
    memory_gbps: float | None = None
    h2d_gbps: float | None = None
    cpu_gflops: float | None = None
    elapsed_ms: float = 0.0
    """Wall time the probe took on the rank's training thread."""

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.probe_id, "device": self.device}
        for key, value in (
            ("gemmTflops", self.gemm_tflops),
            ("memoryGbps", self.memory_gbps),
            ("h2dGbps", self.h2d_gbps),
            ("cpuGflops", self.cpu_gflops),
        ):
            if value is not None:
                out[key] = round(value, 3)
        out["elapsedMs"] = round(self.elapsed_ms, 3)
        return out


def run(probe_id: str, *, budget_ms: float = DEFAULT_BUDGET_MS) -> ProbeResult:
    """The probe on this rank's current CUDA device, or on the host without one."""
    import torch

    t0 = time.perf_counter()
    if torch.cuda.is_available() and torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        result = _gpu(torch, probe_id, budget_ms)
    else:
        result = _cpu(torch, probe_id)
    return ProbeResult(
        result.probe_id,
        result.device,
        result.gemm_tflops,
        result.memory_gbps,
        result.h2d_gbps,
        result.cpu_gflops,
        (time.perf_counter() - t0) * 1e3,
    )


def _gpu(torch: Any, probe_id: str, budget_ms: float) -> ProbeResult:
    stream = torch.cuda.Stream()
    # The job's work in flight must not count: the probe starts on an idle device.
    torch.cuda.current_stream().synchronize()
    with torch.cuda.stream(stream):
        a = torch.randn(_GEMM_N, _GEMM_N, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(_GEMM_N, _GEMM_N, device="cuda", dtype=torch.bfloat16)
        src = torch.empty(_MEMORY_BYTES // 2, device="cuda", dtype=torch.float16)
        dst = torch.empty_like(src)
        host = torch.empty(_H2D_BYTES, dtype=torch.uint8, pin_memory=True)
        dev = torch.empty(_H2D_BYTES, dtype=torch.uint8, device="cuda")
        # Warm-up (kernel selection, clocks up), untimed.
        torch.matmul(a, b)
        dst.copy_(src)
        dev.copy_(host, non_blocking=True)
        stream.synchronize()
        share = budget_ms / 3.0
        gemm_ms = _timed(torch, stream, lambda: torch.matmul(a, b), _GEMM_REPS, share)
        mem_ms = _timed(torch, stream, lambda: dst.copy_(src), 4, share)
        h2d_ms = _timed(torch, stream, lambda: dev.copy_(host, non_blocking=True), 4, share)
    flops = 2.0 * _GEMM_N**3
    return ProbeResult(
        probe_id,
        "cuda",
        gemm_tflops=_rate(flops, gemm_ms, 1e12),
        # A copy reads and writes every byte.
        memory_gbps=_rate(2.0 * _MEMORY_BYTES, mem_ms, 1e9),
        h2d_gbps=_rate(float(_H2D_BYTES), h2d_ms, 1e9),
    )


def _timed(torch: Any, stream: Any, op: Any, reps: int, budget_ms: float) -> tuple[float, int]:
    """(ms, repetitions) of ``op`` run back to back on ``stream``: one run first sets
    how many more fit the part's share of the budget (at most ``reps``)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record(stream)
    op()
    end.record(stream)
    end.synchronize()
    one = max(start.elapsed_time(end), 1e-3)
    n = max(1, min(reps, int(budget_ms / one) - 1))
    start.record(stream)
    for _ in range(n):
        op()
    end.record(stream)
    end.synchronize()
    return start.elapsed_time(end), n


def _rate(work_per_rep: float, timed: tuple[float, int], unit: float) -> float | None:
    ms, n = timed
    if ms <= 0:
        return None
    return work_per_rep * n / (ms * 1e-3) / unit


def _cpu(torch: Any, probe_id: str) -> ProbeResult:
    a = torch.randn(_CPU_N, _CPU_N)
    b = torch.randn(_CPU_N, _CPU_N)
    torch.mm(a, b)  # warm-up
    t0 = time.perf_counter()
    for _ in range(_CPU_REPS):
        torch.mm(a, b)
    s = time.perf_counter() - t0
    return ProbeResult(
        probe_id,
        "cpu",
        cpu_gflops=_rate(2.0 * _CPU_N**3, (s * 1e3, _CPU_REPS), 1e9),
    )
