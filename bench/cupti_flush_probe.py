"""What CUPTI's report-time calls cost, alone and in the order a report makes them.

Issue 19: on the GEMM-bound step at interval 1 a report's plain flush took about 0.2 ms
more than at the defaults, with a buffer of 240 records instead of a dozen, and our
report as a whole stayed 0.1-0.5 ms over NVRx's. This asks CUPTI directly (cupti-python,
kernel records into buffers handed back through ctypes to a callback that only counts
bytes, so none of our decoding is in it) where that time goes:

- ``off_then_flush``: kernel records on for 40 GEMM steps (4 kernels each), device
  synchronized, records switched off, plain flush (what a report does at interval 1);
- ``flush_then_off``: the same, flushing while records are still on, then switching off;
- ``off_early``: records switched off right after the steps, 20 ms before the flush;
- ``few``: records on for the first step only (the defaults' share), then the flush;
- ``idle``: a flush with nothing recorded since the last one;
- ``memset_toggle``: switching the MEMSET kind on and off (a fence marker's switches);
- ``with_markers``: ``off_then_flush`` with a memset marker before and after each step
  on a stream of its own (the detector's records at interval 1: 80 markers a window);
- ``markers_only``: the markers alone, kernel records off.

Each scenario runs ``--repeats`` times, the scenarios interleaved; the table gives the
median per call (ms). JSON to --out (default $OUT, else bench/results).

Run (GPU machine): python3 bench/cupti_flush_probe.py [--repeats 12] [--steps 40]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _table import emit


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=12)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--size", type=int, default=8192, help="GEMM side (bf16)")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="ATTR=VALUE",
        help="a CUPTI activity attribute to set first (cupti-python's ActivityAttribute "
        "name, e.g. ATTR_DEVICE_BUFFER_SIZE=262144); repeatable",
    )
    ap.add_argument(
        "--set-after-context",
        action="store_true",
        help="set them once the CUDA context exists (as a detector initialized late)",
    )
    ap.add_argument("--scenarios", default="", help="comma-separated; empty: all")
    ap.add_argument("--name", default="cupti_flush_probe")
    ap.add_argument(
        "--out", default=os.environ.get("OUT") or str(Path(__file__).parent / "results")
    )
    args = ap.parse_args()
    from cupti import cupti as c

    def cupti_call(name: str) -> Any:
        # The very libcupti cupti-python uses (cupti_buffers.py says why), called with
        # C's signature: (attribute, size_t *valueSize, void *value).
        from cupti._internal import cupti as internal

        pointers = internal._inspect_function_pointers()
        addr = next(v for k, v in pointers.items() if k.lstrip("_") == name)
        proto = ctypes.CFUNCTYPE(
            ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_size_t), ctypes.c_void_p
        )
        return proto(addr)

    def set_attributes() -> dict[str, Any]:
        done: dict[str, Any] = {}
        setter, getter = (
            cupti_call("cuptiActivitySetAttribute"),
            cupti_call("cuptiActivityGetAttribute"),
        )
        for item in args.set:
            name, value = item.split("=", 1)
            attr = int(getattr(c.ActivityAttribute, name))
            cell, size = ctypes.c_uint64(int(value)), ctypes.c_size_t(8)
            if name in ("ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED", "ATTR_ZEROED_OUT_BUFFER"):
                cell, size = ctypes.c_uint8(int(value)), ctypes.c_size_t(1)  # uint8_t
            rc = setter(attr, ctypes.byref(size), ctypes.addressof(cell))
            back, back_size = type(cell)(0), ctypes.c_size_t(ctypes.sizeof(cell))
            rc_get = getter(attr, ctypes.byref(back_size), ctypes.addressof(back))
            done[name] = {"set_rc": rc, "get_rc": rc_get, "value": int(back.value)}
        return done

    attributes = {} if args.set_after_context else set_attributes()
    import torch

    from pacekeeper.cupti_ext.cupti_buffers import (
        BUFFER_BYTES,
        RawBuffers,
        register_callbacks_function,
    )

    a = torch.randn(args.size, args.size, device="cuda", dtype=torch.bfloat16)
    b = torch.randn_like(a)
    torch.cuda.synchronize()
    if args.set_after_context:
        attributes = set_attributes()
    got = {"buffers": 0, "bytes": 0}

    def on_bytes(raw: Any) -> None:
        got["buffers"] += 1
        got["bytes"] += len(raw)

    c.get_timestamp()
    register = register_callbacks_function()
    if register is None:
        print("no raw CUPTI callbacks here", file=sys.stderr)
        return 2
    raw = RawBuffers(register, BUFFER_BYTES, on_bytes)
    raw.register()
    kernel, memset = c.ActivityKind.CONCURRENT_KERNEL, c.ActivityKind.MEMSET

    def step() -> None:
        for _ in range(4):
            torch.mm(a, b)

    def timed(fn: Any) -> float:
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3

    times: dict[str, list[float]] = defaultdict(list)
    records: dict[str, list[int]] = defaultdict(list)
    live: dict[str, list[int]] = defaultdict(list)

    def off_then_flush() -> None:
        c.activity_enable(kernel)
        for _ in range(args.steps):
            step()
        torch.cuda.synchronize()
        times["off_then_flush.disable"].append(timed(lambda: c.activity_disable(kernel)))
        times["off_then_flush.flush"].append(timed(lambda: c.activity_flush_all(0)))

    def flush_then_off() -> None:
        c.activity_enable(kernel)
        for _ in range(args.steps):
            step()
        torch.cuda.synchronize()
        times["flush_then_off.flush"].append(timed(lambda: c.activity_flush_all(0)))
        times["flush_then_off.disable"].append(timed(lambda: c.activity_disable(kernel)))

    def off_early() -> None:
        c.activity_enable(kernel)
        for _ in range(args.steps):
            step()
        c.activity_disable(kernel)
        torch.cuda.synchronize()
        time.sleep(0.02)
        times["off_early.flush"].append(timed(lambda: c.activity_flush_all(0)))

    libcuda = ctypes.CDLL("libcuda.so.1")
    libcuda.cuMemsetD32Async.argtypes = [
        ctypes.c_uint64,
        ctypes.c_uint32,
        ctypes.c_size_t,
        ctypes.c_void_p,
    ]
    marks = torch.zeros(64, device="cuda", dtype=torch.int32)
    side = torch.cuda.Stream()

    def memset_marker() -> None:
        libcuda.cuMemsetD32Async(marks.data_ptr(), 7, 61, ctypes.c_void_p(side.cuda_stream))

    def marked(name: str, kinds: list[Any]) -> None:
        # As the detector at interval 1 with memset markers: one before and one after
        # every step, on a stream of their own, the MEMSET kind on with ``kinds``.
        for kind in kinds:
            c.activity_enable(kind)
        for _ in range(args.steps):
            memset_marker()
            step()
            memset_marker()
        torch.cuda.synchronize()
        for kind in kinds:
            c.activity_disable(kind)
        times[f"{name}.flush"].append(timed(lambda: c.activity_flush_all(0)))

    def with_markers() -> None:
        marked("with_markers", [kernel, memset])

    def markers_only() -> None:
        marked("markers_only", [memset])

    def few() -> None:
        c.activity_enable(kernel)
        step()
        c.activity_disable(kernel)
        for _ in range(args.steps - 1):
            step()
        torch.cuda.synchronize()
        times["few.flush"].append(timed(lambda: c.activity_flush_all(0)))

    def idle() -> None:
        torch.cuda.synchronize()
        times["idle.flush"].append(timed(lambda: c.activity_flush_all(0)))

    def memset_toggle() -> None:
        times["memset_toggle.on_off"].append(
            timed(lambda: (c.activity_enable(memset), c.activity_disable(memset)))
        )

    scenarios = [
        off_then_flush,
        flush_then_off,
        off_early,
        few,
        idle,
        memset_toggle,
        with_markers,
        markers_only,
    ]
    if args.scenarios:
        wanted = args.scenarios.split(",")
        scenarios = [fn for fn in scenarios if fn.__name__ in wanted]
    for fn in scenarios:  # warm-up round, not kept
        fn()
    times.clear()
    for _ in range(args.repeats):
        for fn in scenarios:
            before = got["bytes"]
            fn()
            records[fn.__name__].append(got["bytes"] - before)
            # Buffers CUPTI asked for and has not handed back (after a flush: what it
            # keeps; a report could skip its fence marker only if this is 0).
            live[fn.__name__].append(len(raw._live))
    rows = [
        {
            "call": name,
            "median_ms": round(statistics.median(v), 4),
            "min_ms": round(min(v), 4),
            "max_ms": round(max(v), 4),
        }
        for name, v in times.items()
    ]
    path = emit(
        args.name,
        rows,
        title=f"CUPTI's report-time calls, {args.steps} GEMM steps of 4 kernels, "
        f"{args.repeats} repeats",
        meta={
            "gpu": torch.cuda.get_device_name(),
            "torch": torch.__version__,
            "steps": args.steps,
            "repeats": args.repeats,
            "attributes": attributes,
            "attributes_set": "after the CUDA context" if args.set_after_context else "first",
            "bytes_handed_over_median": {k: statistics.median(v) for k, v in records.items()},
            "times_ms": times,
            "buffers_kept_by_cupti": live,
        },
        results_dir=Path(args.out),
    )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
