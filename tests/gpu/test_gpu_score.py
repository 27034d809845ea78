"""A rank slowed on the GPU is flagged by the GPU score (Detector + CUPTI backend)."""

from __future__ import annotations

import pickle
import socket

import pytest
import torch
from workloads import GpuHog, gemm_step

from pacekeeper.detector import Detector

STEPS = 30


def _window(a: torch.Tensor, b: torch.Tensor) -> None:
    for _ in range(STEPS):
        with Detector.detection_section("step"):
            gemm_step(a, b)


def test_gpu_slowed_by_a_competing_workload_is_flagged_by_the_individual_gpu_score(
    monkeypatch,
):
    monkeypatch.setenv("PACEKEEPER_KERNEL_SAMPLE_EVERY", "1")
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    gemm_step(a, b)
    torch.cuda.synchronize()
    Detector.initialize(report_time_interval=3600, kernel_timing="cupti")
    try:
        assert Detector.kernel_timing_backend() == "cupti"
        healthy = []
        for _ in range(4):
            _window(a, b)
            healthy.append(Detector.generate_report())
        with GpuHog():
            _window(a, b)
            slow = Detector.generate_report()
    finally:
        Detector.shutdown()
    for report in healthy[1:]:
        assert report.identify_stragglers()["straggler_gpus_individual"] == set()
    flagged = slow.identify_stragglers()
    assert slow.gpu_individual_perf_scores[0] < 0.75, slow.gpu_individual_perf_scores
    assert {s.rank for s in flagged["straggler_gpus_individual"]} == {0}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_two_nccl_ranks_gpu_relative_score_flags_the_slowed_rank_not_the_section_score(
    tmp_path,
):
    if torch.cuda.device_count() < 2:
        pytest.skip(f"needs 2 GPUs, this machine has {torch.cuda.device_count()}")
    import torch.multiprocessing as mp
    from nccl_ranks import SLOW_RANK, rank_main

    mp.spawn(rank_main, args=(2, str(tmp_path), _free_port()), nprocs=2, join=True)
    results = [pickle.loads((tmp_path / f"rank{r}.pkl").read_bytes()) for r in range(2)]
    for r in results:
        assert r["backend"] == "cupti"
        assert r["comm_records"] >= 4
        assert r["nccl_keys"] == []
        # 2 GEMMs + 2 scalings per step, 4 steps; cuBLAS may split a GEMM in two kernels.
        assert 16 <= r["records"] <= 24
    healthy = pickle.loads(results[0]["healthy"])
    slow = pickle.loads(results[0]["slow"])
    assert healthy.identify_stragglers()["straggler_gpus_relative"] == set()
    flagged = slow.identify_stragglers()
    assert {s.rank for s in flagged["straggler_gpus_relative"]} == {SLOW_RANK}, (
        slow.gpu_relative_perf_scores
    )
    assert flagged["straggler_sections_relative"] == {}, slow.section_relative_perf_scores
