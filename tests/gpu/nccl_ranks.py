"""Rank body for the two-GPU NCCL test (spawned; results pickled to a folder)."""

from __future__ import annotations

import os
import pickle
import time
from typing import Any

import torch
import torch.distributed as dist
from workloads import GpuHog, gemm_step

from pacekeeper.cupti_ext import CuptiBackend
from pacekeeper.detector import Detector

STEPS = 30
SLOW_RANK = 1


def _step(a: torch.Tensor, b: torch.Tensor, grad: torch.Tensor) -> None:
    with Detector.detection_section("step"):
        gemm_step(a, b)
        dist.all_reduce(grad)
        # The fast rank waits here for the slow one, so CPU section times stay equal.
        torch.cuda.synchronize()


def rank_main(rank: int, world_size: int, out_dir: str, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    os.environ["PACEKEEPER_KERNEL_SAMPLE_EVERY"] = "1"
    torch.cuda.set_device(rank)
    dist.init_process_group(
        "nccl", rank=rank, world_size=world_size, device_id=torch.device("cuda", rank)
    )
    result: dict[str, Any] = {}
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    grad = torch.ones(1 << 20, device="cuda")
    dist.all_reduce(grad)
    torch.cuda.synchronize()

    # Communication kernels are seen, counted and left out.
    backend = CuptiBackend(sample_every=1)
    result["marker_mode"] = backend.marker_mode
    for _ in range(4):
        backend.start("step")
        gemm_step(a, b, 2)
        dist.all_reduce(grad)
        backend.stop("step")
    torch.cuda.synchronize()
    window = backend.collect()
    names = backend.kernel_names()
    result["comm_records"] = window.comm_records
    result["nccl_keys"] = [k for k in window.kernels if "nccl" in names[k].lower()]
    result["records"] = window.records
    backend.shutdown()

    Detector.initialize(report_time_interval=3600, node_name=f"node{rank}", kernel_timing="cupti")
    result["backend"] = Detector.kernel_timing_backend()
    for _ in range(STEPS):
        _step(a, b, grad)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    healthy = Detector.generate_report()
    result["report_ms"] = (time.perf_counter() - t0) * 1e3  # for the log, not asserted
    hog = GpuHog(device=rank) if rank == SLOW_RANK else None
    if hog is not None:
        hog.__enter__()
    dist.barrier()
    for _ in range(STEPS):
        _step(a, b, grad)
    slow = Detector.generate_report()
    if hog is not None:
        hog.__exit__(None, None, None)
    if rank == 0:
        result["healthy"] = pickle.dumps(healthy)
        result["slow"] = pickle.dumps(slow)
    Detector.shutdown()
    dist.barrier()
    dist.destroy_process_group()
    with open(os.path.join(out_dir, f"rank{rank}.pkl"), "wb") as f:
        pickle.dump(result, f)
