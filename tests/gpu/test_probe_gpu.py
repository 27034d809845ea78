"""The confirmation probe on the H200: identical GEMM, memory-copy and host-to-device
work, timed with CUDA events; within its time bound; and a GPU slowed by a competing
workload probes slower, so the probe singles out slow hardware (issue 18)."""

from __future__ import annotations

import time

import torch
from workloads import GpuHog

from pacekeeper.detector import probe


def _best(n: int = 3) -> probe.ProbeResult:
    results = [probe.run(f"p{i}") for i in range(n)]
    return max(results, key=lambda r: r.gemm_tflops or 0)


def test_the_probe_measures_the_gpu_within_its_bound() -> None:
    torch.zeros(1, device="cuda")
    probe.run("warm")  # first use: allocator and kernel selection
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    r = probe.run("req")
    wall_ms = (time.perf_counter() - t0) * 1e3
    assert r.device == "cuda" and r.probe_id == "req"
    assert r.gemm_tflops is not None and r.gemm_tflops > 50  # an H200 does ~700 dense bf16
    assert r.memory_gbps is not None and r.memory_gbps > 500
    assert r.h2d_gbps is not None and r.h2d_gbps > 1
    assert r.elapsed_ms < probe.DEFAULT_BUDGET_MS and wall_ms < probe.DEFAULT_BUDGET_MS
    print(f"probe: {r.to_wire()} wall {wall_ms:.1f} ms")


def test_a_gpu_busy_with_other_work_probes_slower() -> None:
    torch.zeros(1, device="cuda")
    probe.run("warm")
    quiet = _best()
    with GpuHog():
        time.sleep(0.2)
        busy = max((probe.run(f"b{i}") for i in range(3)), key=lambda r: r.gemm_tflops or 0)
    assert quiet.gemm_tflops is not None and busy.gemm_tflops is not None
    assert busy.gemm_tflops < 0.8 * quiet.gemm_tflops
    print(f"quiet {quiet.to_wire()} busy {busy.to_wire()}")
