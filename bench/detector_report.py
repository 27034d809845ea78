"""generate_report on 4 gloo CPU ranks: what a report costs the training loop.

Each rank times 8 sections (100 entries each per window), optionally with 200 kernels
per rank from a synthetic kernel-timing backend (stands in for CUPTI on this CPU
machine: same KernelWindow the real backends return), then calls generate_report
REPORTS times. Figures: per-call wall time on the reporting rank (gathers and scores)
and the slowest other rank, for gather_on_rank0 True and False.
NVRx reference (ENVIRONMENT.md, GPU machine, one rank): 5.6-5.9 ms warm.

Run: .venv/bin/python bench/detector_report.py
"""

from __future__ import annotations

import os
import pickle
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _table import emit

from pacekeeper.cupti_ext import BackendChoice, KernelStat, KernelWindow
from pacekeeper.detector import Detector
from pacekeeper.detector.local_world import spawn_world

WORLD = 4
SECTIONS = 8
ENTRIES = 100
KERNELS = 200
REPORTS = 30
WARMUP = 3


class SyntheticKernels:
    """Returns the same 200-kernel window every collect (what a GPU rank would send)."""

    name = "synthetic"

    def __init__(self, rank: int) -> None:
        self.window = KernelWindow(
            kernels={
                f"void kernel_{i}<float, 128>(params)": KernelStat(
                    50, 1e4 + i + rank, 1e4 + i, 9e3, 2e4, 10.0, 5e5 + 50 * i
                )
                for i in range(KERNELS)
            },
            records=KERNELS * 50,
        )

    def start(self, section: str) -> None:
        pass

    def stop(self, section: str) -> None:
        pass

    def collect(self) -> KernelWindow:
        return self.window

    def shutdown(self) -> None:
        pass


def bench_rank(rank: int, world_size: int, out_dir: str) -> None:
    import torch.distributed as dist

    from pacekeeper import cupti_ext

    results = {}
    for gather, kernels in ((True, False), (False, False), (True, True), (False, True)):
        if kernels:
            backend = SyntheticKernels(rank)
            cupti_ext.select_backend = lambda requested=None, b=backend, **_options: (  # type: ignore[assignment]
                b,
                BackendChoice("synthetic", "benchmark"),
            )
        Detector.initialize(gather_on_rank0=gather, kernel_timing=None if kernels else "none")
        times = []
        for i in range(REPORTS + WARMUP):
            for s in range(SECTIONS):
                handle = Detector.detection_section(f"section_{s}")
                for _ in range(ENTRIES):
                    with handle:
                        pass
            if world_size > 1:
                dist.barrier()  # time the report, not how far apart the ranks arrive
            t0 = time.perf_counter()
            Detector.generate_report()
            if i >= WARMUP:
                times.append((time.perf_counter() - t0) * 1e3)
        Detector.shutdown()
        results[(gather, kernels)] = times
    with open(os.path.join(out_dir, f"rank{rank}.pkl"), "wb") as f:
        pickle.dump(results, f)


def main() -> None:
    with tempfile.TemporaryDirectory() as out:
        bench_rank(0, 1, out)  # world of one: the local part alone (no collective)
        alone = pickle.loads(Path(out, "rank0.pkl").read_bytes())
        spawn_world(bench_rank, WORLD, out)
        per_rank = [pickle.loads(Path(out, f"rank{r}.pkl").read_bytes()) for r in range(WORLD)]
    rows = [
        {
            "mode": "one process, no collective",
            "kernels/rank": KERNELS if kernels else 0,
            "rank 0 median ms": statistics.median(times),
            "rank 0 p90 ms": sorted(times)[int(0.9 * len(times))],
            "other ranks median ms (max)": "-",
        }
        for (gather, kernels), times in alone.items()
        if gather
    ]
    for key in per_rank[0]:
        gather, kernels = key
        rank0 = per_rank[0][key]
        others = [statistics.median(per_rank[r][key]) for r in range(1, WORLD)]
        rows.append(
            {
                "mode": f"gather_on_rank0={gather}",
                "kernels/rank": KERNELS if kernels else 0,
                "rank 0 median ms": statistics.median(rank0),
                "rank 0 p90 ms": sorted(rank0)[int(0.9 * len(rank0))],
                "other ranks median ms (max)": max(others),
            }
        )
    emit(
        "detector_report",
        rows,
        title=f"generate_report, {WORLD} gloo CPU ranks, {SECTIONS} sections",
        meta={
            "world_size": WORLD,
            "sections": SECTIONS,
            "entries_per_section": ENTRIES,
            "reports": REPORTS,
            "nvrx_reference_ms": "5.6-5.9 (one rank, GPU machine, warm)",
        },
    )


if __name__ == "__main__":
    main()
