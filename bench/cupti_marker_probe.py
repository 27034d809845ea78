"""What a CUPTI section marker can rest on, measured on a GPU (one process, ~20 s).

- cost of switching the MEMSET, CONCURRENT_KERNEL and DRIVER activity kinds on and off;
- whether MEMSET records carry correlation ids in launch order with kernel records, and
  keep the value and size written (what memset markers need, cupti_ext/markers.py);
- the CPU cost of one marker call (a 244-byte cuMemsetD32Async);
- whether one kind switch or flush inserted into a GEMM-bound block costs anything.

Prints the findings and writes JSON to --out (default $OUT, else bench/results).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--out", default=os.environ.get("OUT") or str(Path(__file__).parent / "results")
    )
    args = ap.parse_args()
    import torch
    from cupti import cupti as c

    torch.ones(1, device="cuda")
    torch.cuda.synchronize()
    result: dict[str, Any] = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__}
    got: list[tuple[str, int, int, int]] = []
    memset_kind, kernel_kind = int(c.ActivityKind.MEMSET), int(c.ActivityKind.CONCURRENT_KERNEL)

    def done(acts: Any) -> None:
        for a in acts:
            if int(a.kind) == memset_kind:
                got.append(("memset", int(a.correlation_id), int(a.value), int(a.bytes)))
            elif int(a.kind) == kernel_kind:
                got.append(("kernel", int(a.correlation_id), 0, 0))

    c.activity_register_callbacks(lambda: (1 << 20, 0), done)
    lib = ctypes.CDLL("libcuda.so.1")
    memset = lib.cuMemsetD32Async
    memset.argtypes = [ctypes.c_uint64, ctypes.c_uint, ctypes.c_size_t, ctypes.c_void_p]
    buf = torch.empty(1024, dtype=torch.int32, device="cuda")
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

    def marker(value: int) -> int:
        return int(memset(buf.data_ptr(), value, 61, stream))

    def pair_us(kind: Any) -> float:
        t0 = time.perf_counter()
        for _ in range(200):
            c.activity_enable(kind)
            c.activity_disable(kind)
        return (time.perf_counter() - t0) / 200 * 1e6

    result["on_off_us"] = {
        "MEMSET": pair_us(c.ActivityKind.MEMSET),
        "CONCURRENT_KERNEL": pair_us(c.ActivityKind.CONCURRENT_KERNEL),
        "DRIVER": pair_us(c.ActivityKind.DRIVER),
    }
    c.activity_enable(c.ActivityKind.CONCURRENT_KERNEL)
    c.activity_enable(c.ActivityKind.MEMSET)
    x = torch.ones(1 << 16, device="cuda")
    plan = [(0xA0000001, 5), (0xA0000002, 3), (0xA0000003, 4), (0xA0000004, 0)]
    for value, kernels in plan:
        marker(value)
        for _ in range(kernels):
            x.add_(1)
    t0 = time.perf_counter()
    for i in range(200):
        marker(0xB0000000 + i)
    result["marker_call_us"] = (time.perf_counter() - t0) / 200 * 1e6
    torch.cuda.synchronize()
    c.activity_flush_all(1)
    time.sleep(0.2)
    c.activity_flush_all(1)
    c.activity_disable(c.ActivityKind.CONCURRENT_KERNEL)
    c.activity_disable(c.ActivityKind.MEMSET)
    ordered = sorted(got, key=lambda r: r[1])
    first = [r for r in ordered if r[0] == "kernel" or r[2] >> 28 == 0xA]
    # Between marker k and k+1 there must be exactly plan[k] kernels, in correlation order.
    counts, run = [], 0
    for kind, _, _, _ in first:
        if kind == "memset":
            counts.append(run)
            run = 0
        else:
            run += 1
    result["kernels_between_markers"] = counts[1:]
    result["expected_between_markers"] = [k for _, k in plan[:-1]]
    result["memset_values_and_sizes"] = sorted(
        {(hex(v), n) for kind, _, v, n in first if kind == "memset"}
    )
    result["gemm_block_added_ms"] = gemm_block_costs(c, torch)
    print(json.dumps(result, indent=2))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "cupti_marker_probe.json").write_text(json.dumps(result, indent=2))
    return 0


def gemm_block_costs(c: Any, torch: Any) -> dict[str, float]:
    """Median added ms per 40-step GEMM-bound block of one switch or flush, 6 pairs."""
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)

    def block(hook: Callable[[], Any]) -> float:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for i in range(40):
            for _ in range(4):
                torch.matmul(a, b)
            if i == 20:
                hook()
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    def switch(kind: Any) -> Callable[[], Any]:
        return lambda: (c.activity_enable(kind), c.activity_disable(kind))

    hooks: dict[str, Callable[[], Any]] = {
        "none": lambda: None,
        "kernel_switch": switch(c.ActivityKind.CONCURRENT_KERNEL),
        "driver_switch": switch(c.ActivityKind.DRIVER),
        "external_correlation_switch": switch(c.ActivityKind.EXTERNAL_CORRELATION),
        "flush": lambda: c.activity_flush_all(0),
    }
    block(hooks["none"])
    out = {}
    for name, hook in hooks.items():
        pairs = [(block(hooks["none"]), block(hook)) for _ in range(6)]
        out[name] = statistics.median(b_t - a_t for a_t, b_t in pairs) * 1e3
    return out


if __name__ == "__main__":
    raise SystemExit(main())
