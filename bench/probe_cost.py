"""What the confirmation probe (``detector/probe.py``) costs the rank that runs it.

The probe runs on the training thread inside one report, so its cost is the wall time
that report's step loses, plus, on a GPU, the device time and memory it holds for that
long. Measured here: the first probe of the process (allocations, cuBLAS set-up) apart
from the next ones, the wall time on the calling thread, the GPU time its events
measure where there is a GPU, the device memory it allocates at its peak, and the
throughputs it reports (the numbers the controller compares between ranks). The bound
it must stay inside: 200 ms of GPU time (``DEFAULT_BUDGET_MS``).

Run: .venv/bin/python bench/probe_cost.py [--repeats N] [--device cpu|cuda] [--out DIR]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _table import emit

from pacekeeper.detector import probe


def _measure(device: str, repeats: int) -> list[dict[str, Any]]:
    import torch

    if device == "cuda":
        torch.cuda.init()  # the probe runs on a GPU only where the job set CUDA up
        torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated() if device == "cuda" else 0
    runs = []
    for i in range(repeats + 1):
        result = probe.run(f"bench-{i}")
        if result.device != device:
            raise SystemExit(f"the probe ran on {result.device}, not {device}")
        runs.append(result)
    peak_mib = (torch.cuda.max_memory_allocated() - base) / 2**20 if device == "cuda" else None
    first, rest = runs[0], runs[1:]
    rows = []
    for label, sample in (("first", [first]), ("next", rest)):
        ms = [r.elapsed_ms for r in sample]
        row: dict[str, Any] = {
            "device": device,
            "probe": label,
            "runs": len(sample),
            "wall ms (median)": statistics.median(ms),
            "wall ms (max)": max(ms),
            "budget ms": probe.DEFAULT_BUDGET_MS,
        }
        for key, attr in (
            ("GEMM TFLOPS", "gemm_tflops"),
            ("memory GB/s", "memory_gbps"),
            ("H2D GB/s", "h2d_gbps"),
            ("CPU GFLOPS", "cpu_gflops"),
        ):
            values = [getattr(r, attr) for r in sample if getattr(r, attr) is not None]
            if values:
                row[key] = statistics.median(values)
        if peak_mib is not None:
            row["peak MiB"] = peak_mib
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    ap.add_argument("--out", type=Path, default=None, help="results folder (bench/results)")
    args = ap.parse_args(argv)
    import torch

    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    rows = _measure(device, args.repeats)
    name = f"probe_cost_{device}"
    meta: dict[str, Any] = {"torch": torch.__version__, "threads": torch.get_num_threads()}
    if device == "cuda":
        meta["gpu"] = torch.cuda.get_device_name()
    emit(name, rows, title=f"confirmation probe cost ({device})", meta=meta, results_dir=args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
