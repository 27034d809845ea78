"""Kernel-timing overhead on a GPU: paired A/B blocks inside one process.

Separate processes per mode differ by about +-10% on these machines, more than the
effect, so every mode is measured as alternating blocks of steps without (A) and with
(B) timing inside one process pinned to one core; the figure is the median over pairs
of B/A. Modes, all in the same run and on the same steps:
  aa            nothing timed in either block (the method's own noise)
  bare_raw      CUPTI CONCURRENT_KERNEL tracing, raw buffer callback (ctypes) only counting
  bare_cupti    CUPTI CONCURRENT_KERNEL tracing, cupti-python callback only counting records
  ours_i1       pacekeeper Detector, profiling_interval=1, every entry traced
  ours_default  pacekeeper Detector with its defaults
  ours_*_memset the same two with memset section markers (PACEKEEPER_KERNEL_MARKER=memset)
  nvrx          NVRx 0.7.0 Detector.detection_section(profile_cuda=True), interval 1
Steps: launch-bound (100 x Linear(256), forward and backward) and GEMM-bound
(4 x bf16 8192^3). Also generate_report time on one rank, ours vs NVRx.

Every block of a tracing mode (A and B alike) ends with a CUPTI flush inside the timed
region, so the cost of handling a block's records lands in that block and not in the
next one. Prints a table and writes JSON to --out (default $OUT, else bench/results).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import platform
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

Step = Callable[[], None]


def build_steps() -> dict[str, Step]:
    import torch

    torch.manual_seed(0)
    layers = [torch.nn.Linear(256, 256) for _ in range(100)]
    model = torch.nn.Sequential(*layers).cuda()
    x = torch.randn(64, 256, device="cuda")

    def launch_bound() -> None:
        model.zero_grad(set_to_none=True)
        model(x).sum().backward()

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)

    def gemm_bound() -> None:
        c = a
        for _ in range(4):
            c = torch.matmul(a, b)
        del c

    return {"launch_bound": launch_bound, "gemm_bound": gemm_bound}


class Mode:
    """How a B block runs a step; setup/teardown around the mode's whole measurement."""

    name = "aa"

    def setup(self) -> None:
        pass

    def block_start(self) -> None:
        pass

    def block_end(self) -> None:
        pass

    def flush(self) -> None:
        pass

    def wrap(self, step: Step) -> Step:
        return step

    def teardown(self) -> None:
        pass


def release_cupti(cupti: Any) -> None:
    """Stop tracing and deliver what is buffered. No cuptiFinalize: called from an
    ordinary thread it left CUPTI giving no records to the next mode in this process."""
    cupti.activity_disable(cupti.ActivityKind.CONCURRENT_KERNEL)
    cupti.activity_flush_all(1)


def cupti_flush() -> None:
    from cupti import cupti

    cupti.activity_flush_all(0)


class BareTracing(Mode):
    """CUPTI kernel tracing on for whole B blocks, records only counted: the floor."""

    c: Any

    def block_start(self) -> None:
        self.c.activity_enable(self.c.ActivityKind.CONCURRENT_KERNEL)

    def block_end(self) -> None:
        self.c.activity_disable(self.c.ActivityKind.CONCURRENT_KERNEL)

    flush = staticmethod(cupti_flush)

    def teardown(self) -> None:
        release_cupti(self.c)


class BareRaw(BareTracing):
    name = "bare_raw"

    def setup(self) -> None:
        from cupti import cupti

        from pacekeeper.cupti_ext.cupti_backend import RawBuffers, register_callbacks_function

        self.c = cupti
        cupti.get_timestamp()
        self.count = 0
        size = int(cupti.activity_kernel10_dtype.itemsize)

        def on_bytes(raw: Any) -> None:
            self.count += len(raw) // size

        register_fn = register_callbacks_function()
        assert register_fn is not None, "cupti-python exposes no cuptiActivityRegisterCallbacks"
        self.raw = RawBuffers(register_fn, 1 << 20, on_bytes)
        self.raw.register()


class BareCupti(BareTracing):
    name = "bare_cupti"

    def setup(self) -> None:
        from cupti import cupti

        self.c = cupti
        self.count = 0

        def requested() -> tuple[int, int]:
            return 1 << 20, 0

        def completed(acts: Any) -> None:
            self.count += len(acts)

        cupti.activity_register_callbacks(requested, completed)


class SectionMode(Mode):
    """A detector's ``detection_section('step', profile_cuda=True)`` around each step
    (ours and NVRx's share the API, so they are timed the same way)."""

    det: Any

    def wrap(self, step: Step) -> Step:
        section = self.det.detection_section

        def wrapped() -> None:
            with section("step", profile_cuda=True):
                step()

        return wrapped

    flush = staticmethod(cupti_flush)


class Ours(SectionMode):
    def __init__(self, name: str, sample_every: int | None, marker: str = "auto") -> None:
        self.name = name
        self.sample_every = sample_every
        self.marker = marker

    def setup(self) -> None:
        from pacekeeper.detector import Detector

        os.environ["PACEKEEPER_KERNEL_MARKER"] = self.marker
        if self.sample_every is not None:
            os.environ["PACEKEEPER_KERNEL_SAMPLE_EVERY"] = str(self.sample_every)
        else:
            os.environ.pop("PACEKEEPER_KERNEL_SAMPLE_EVERY", None)
        self.det = Detector
        if self.sample_every is None:
            Detector.initialize(report_time_interval=3600, kernel_timing="cupti")
        else:
            Detector.initialize(
                report_time_interval=3600, profiling_interval=1, kernel_timing="cupti"
            )
        assert Detector.kernel_timing_backend() == "cupti", Detector.kernel_timing_backend()
        self.records_seen = 0

    def block_end(self) -> None:
        # Counted per block (a report would clear it), to show the kernels were traced.
        from pacekeeper.detector import Detector

        backend = Detector._backend
        if backend is not None:
            self.records_seen += backend.collect().records

    def teardown(self) -> None:
        self.det.shutdown()
        os.environ.pop("PACEKEEPER_KERNEL_SAMPLE_EVERY", None)
        os.environ.pop("PACEKEEPER_KERNEL_MARKER", None)


class Nvrx(SectionMode):
    name = "nvrx"

    def setup(self) -> None:
        from nvidia_resiliency_ext.attribution import straggler

        self.det = straggler.Detector
        self.det.initialize(report_time_interval=3600, profiling_interval=1)

    def teardown(self) -> None:
        self.det.shutdown()


def run_block(step: Step, steps: int, flush: Callable[[], None] = lambda: None) -> float:
    import torch

    torch.cuda.synchronize()
    flush()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    flush()
    return (time.perf_counter() - t0) / steps


def measure(mode: Mode, step: Step, pairs: int, block: int) -> dict[str, Any]:
    timed = mode.wrap(step)
    a_times: list[float] = []
    b_times: list[float] = []

    def run_b() -> float:
        mode.block_start()
        try:
            return run_block(timed, block, mode.flush)
        finally:
            mode.block_end()

    run_block(step, block // 2, mode.flush)  # warm both paths
    run_b()
    for i in range(pairs):
        # ABBA ordering cancels a slow drift within a pair.
        if i % 2 == 0:
            a_times.append(run_block(step, block, mode.flush))
            b_times.append(run_b())
        else:
            b_times.append(run_b())
            a_times.append(run_block(step, block, mode.flush))
    ratios = np.array(b_times) / np.array(a_times)
    return {
        "a_step_ms_median": statistics.median(a_times) * 1e3,
        "b_step_ms_median": statistics.median(b_times) * 1e3,
        "ratio_median": float(np.median(ratios)),
        "ratio_p25": float(np.percentile(ratios, 25)),
        "ratio_p75": float(np.percentile(ratios, 75)),
        "added_step_us_median": float(np.median(np.array(b_times) - np.array(a_times)) * 1e6),
        "a_step_ms": [round(t * 1e3, 4) for t in a_times],
        "b_step_ms": [round(t * 1e3, 4) for t in b_times],
    }


def kernels_per_step(step: Step, steps: int = 20) -> float:
    """Kernel launches per step, counted with bare CUPTI tracing."""
    import torch

    mode = BareCupti()
    mode.setup()
    torch.cuda.synchronize()
    mode.block_start()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    mode.block_end()
    mode.c.activity_flush_all(1)
    n = mode.count / steps
    mode.teardown()
    return n


def report_times(det: Any, step: Step, section_kw: dict[str, Any], repeats: int) -> dict[str, Any]:
    """generate_report on one rank after 40 traced steps, repeated; first and warm. For
    ours, also the backend's ``collect`` (the CUPTI part of a report) on its own."""
    import torch

    def timed(call: Callable[[], Any]) -> tuple[float, Any]:
        for _ in range(40):
            with det.detection_section("step", **section_kw):
                step()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = call()
        return (time.perf_counter() - t0) * 1e3, out

    runs = [timed(det.generate_report) for _ in range(repeats)]
    times = [t for t, _ in runs]
    report = runs[-1][1]
    collect = getattr(getattr(det, "_backend", None), "collect", None)
    collect_ms = [timed(collect)[0] for _ in range(repeats)] if collect else []
    return {
        "first_ms": times[0],
        "warm_ms_median": statistics.median(times[1:]),
        "warm_ms_min": min(times[1:]),
        "kernel_keys_in_report": len(getattr(report, "local_kernel_summaries", {}) or {}),
        "collect_ms_median": statistics.median(collect_ms) if collect_ms else None,
        "gpu_scores": dict(getattr(report, "gpu_relative_perf_scores", {}) or {}),
    }


def bench_reports(step: Step, repeats: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, mode in (("ours_i1", Ours("ours_i1", 1)), ("ours_default", Ours("od", None))):
        try:
            mode.setup()
            out[name] = report_times(mode.det, step, {"profile_cuda": True}, repeats)
        except Exception:
            out[name] = {"error": traceback.format_exc(limit=3)}
        finally:
            with contextlib.suppress(Exception):
                mode.teardown()
    nvrx = Nvrx()
    try:
        nvrx.setup()
        out["nvrx"] = report_times(nvrx.det, step, {"profile_cuda": True}, repeats)
    except Exception:
        out["nvrx"] = {"error": traceback.format_exc(limit=3)}
    finally:
        with contextlib.suppress(Exception):
            nvrx.teardown()
    return out


def record_processing_cost(repeats: int = 30) -> dict[str, Any]:
    """CPU cost per record of our buffer path (walk, decode, fold into statistics), on a
    1 MiB buffer synthesized with cupti-python's real record dtypes: 602-kernel steps
    between section markers, 30 kernel names. Runs without a GPU."""
    from cupti import cupti

    from pacekeeper.cupti_ext.attribution import decode_external_ids, encode_external_id
    from pacekeeper.cupti_ext.kernel_keys import KernelKeyTable
    from pacekeeper.cupti_ext.records import RecordLayout, decode_span, record_offsets
    from pacekeeper.cupti_ext.window_builder import KernelWindowBuilder

    layout = RecordLayout.from_cupti(cupti)
    ours = int(cupti.ExternalCorrelationKind.CUSTOM2)
    rng = np.random.default_rng(0)

    def mark(serial: int, stop: bool, corr: int) -> bytes:
        e = np.zeros(1, dtype=layout.external_dtype)
        e["kind"], e["external_kind"], e["correlation_id"] = layout.external_kind, ours, corr
        e["external_id"] = encode_external_id(serial, 0, stop)
        a = np.zeros(1, dtype=layout.api_dtype)
        a["kind"], a["correlation_id"] = layout.driver_kind, corr
        return e.tobytes() + a.tobytes()

    parts: list[bytes] = []
    corr, serial, size = 1, 1, 0
    while size < (1 << 20) - 700 * layout.kernel_dtype.itemsize:
        k = np.zeros(602, dtype=layout.kernel_dtype)
        k["kind"] = layout.kernel_kind
        k["start"] = 1000
        k["end"] = 1000 + rng.integers(1000, 5000, 602)
        k["correlation_id"] = np.arange(corr + 1, corr + 603)
        k["name"] = rng.integers(1, 31, 602)
        for f in ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"):
            k[f] = 1
        parts += [mark(serial, False, corr), k.tobytes(), mark(serial, True, corr + 603)]
        size += len(parts[-3]) + len(parts[-2]) + len(parts[-1])
        corr, serial = corr + 604, serial + 1
    raw = np.frombuffer(b"".join(parts), dtype=np.uint8)
    names = {i: f"_Z6kernelILi{i}EEvv" for i in range(1, 31)}
    builder = KernelWindowBuilder(ours, keys=KernelKeyTable(resolve_name=names.__getitem__))
    offsets, _ = record_offsets(raw, layout)
    decoded = decode_span(raw, offsets, layout)
    builder.add(decoded, len(offsets))

    def best(fn: Callable[[], Any]) -> float:
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return min(times) / len(offsets) * 1e6

    # A window's later buffers: 600 distinct buffers (shifted correlation ids and
    # serials, as a 60 s window at interval 1 holds) folded first, then the next timed.
    late = KernelWindowBuilder(ours, keys=KernelKeyTable(resolve_name=names.__getitem__))
    span = int(decoded.kernels.correlation_id.max()) + 1
    entries = int(decode_external_ids(decoded.external_id)[0].max()) + 1

    def shifted(i: int) -> Any:
        sid = decoded.external_id + np.uint64(entries * i << 17)
        k = dataclasses.replace(
            decoded.kernels, correlation_id=decoded.kernels.correlation_id + np.uint32(span * i)
        )
        ext_corr = decoded.external_correlation_id + np.uint32(span * i)
        return dataclasses.replace(
            decoded, kernels=k, external_id=sid, external_correlation_id=ext_corr
        )

    for i in range(600):
        late.add(shifted(i), len(offsets))
    t0 = time.perf_counter()
    for i in range(600, 600 + repeats):
        late.add(shifted(i), len(offsets))
    fold_late = (time.perf_counter() - t0) / repeats / len(offsets) * 1e6

    walk = best(lambda: record_offsets(raw, layout))
    decode = best(lambda: decode_span(raw, offsets, layout))
    fold = best(lambda: builder.add(decoded, len(offsets)))
    builder.take(["step"])  # first call pays numpy's one-time set-up
    for _ in range(repeats):
        builder.add(decoded, len(offsets))
    t0 = time.perf_counter()
    builder.take(["step"])
    return {
        "records_per_buffer": len(offsets),
        "walk_us_per_record": walk,
        "decode_us_per_record": decode,
        "fold_us_per_record": fold,
        "fold_us_per_record_after_600_buffers": fold_late,
        "total_us_per_record": walk + decode + fold,
        "take_window_ms_warm": (time.perf_counter() - t0) * 1e3,
        "cpu": platform.processor() or platform.machine(),
    }


@contextlib.contextmanager
def single_rank_group() -> Iterator[None]:
    import torch
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29511")
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
    try:
        yield
    finally:
        dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=25)
    ap.add_argument("--gemm-pairs", type=int, default=None, help="pairs for gemm_bound")
    ap.add_argument("--block", type=int, default=40)
    ap.add_argument(
        "--slow-mode-pairs",
        type=int,
        default=6,
        help="pairs for bare_cupti (cupti-python's per-record objects make it ~4x slower)",
    )
    ap.add_argument("--core", type=int, default=2)
    ap.add_argument("--report-repeats", type=int, default=12)
    ap.add_argument("--workloads", default="launch_bound,gemm_bound")
    ap.add_argument("--modes", default="aa,bare_raw,bare_cupti,ours_i1,ours_default,nvrx")
    ap.add_argument(
        "--out", default=os.environ.get("OUT") or str(Path(__file__).parent / "results")
    )
    ap.add_argument(
        "--decode-only",
        action="store_true",
        help="only the CPU cost of our record processing (no GPU needed)",
    )
    args = ap.parse_args(argv)
    if args.decode_only:
        cost = record_processing_cost()
        print(json.dumps(cost, indent=2))
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "gpu_overhead_decode.json").write_text(json.dumps(cost, indent=2))
        return 0
    import torch

    with contextlib.suppress(OSError, AttributeError):
        os.sched_setaffinity(0, {args.core})
    torch.set_num_threads(1)
    steps = build_steps()
    modes: dict[str, Callable[[], Mode]] = {
        "aa": Mode,
        "bare_raw": BareRaw,
        "bare_cupti": BareCupti,
        "ours_i1": lambda: Ours("ours_i1", 1),
        "ours_default": lambda: Ours("ours_default", None),
        "ours_i1_memset": lambda: Ours("ours_i1_memset", 1, marker="memset"),
        "ours_default_memset": lambda: Ours("ours_default_memset", None, marker="memset"),
        "nvrx": Nvrx,
    }
    from pacekeeper.cupti_ext.cupti_backend import DEFAULT_SAMPLE_EVERY

    result: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": {
            "gpu": torch.cuda.get_device_name(0),
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "python": platform.python_version(),
            "host_cores": os.cpu_count(),
            "pinned_core": args.core,
        },
        "method": {
            "pairs": args.pairs,
            "block_steps": args.block,
            "order": "ABBA",
            "flush_in_block": True,
        },
        "ours_default_sample_every": DEFAULT_SAMPLE_EVERY,
        "workloads": {},
    }
    with single_rank_group():
        for wname in args.workloads.split(","):
            step = steps[wname]
            for _ in range(10):
                step()
            kps = kernels_per_step(step)
            wres: dict[str, Any] = {"kernels_per_step": kps, "modes": {}}
            for mname in args.modes.split(","):
                mode = modes[mname]()
                # Plain blocks just before set-up and just after teardown: a cost the
                # mode adds to every step (B and A blocks alike) shows only here.
                before = [run_block(step, args.block, cupti_flush) for _ in range(6)]
                try:
                    mode.setup()
                    pairs = args.slow_mode_pairs if mname == "bare_cupti" else args.pairs
                    if wname == "gemm_bound" and args.gemm_pairs:
                        pairs = args.gemm_pairs
                    r = measure(mode, step, pairs, args.block)
                    r["pairs"] = pairs
                    backend = getattr(getattr(mode, "det", None), "_backend", None)
                    marker_mode = getattr(backend, "marker_mode", None)
                    if marker_mode is not None:
                        r["marker_mode"] = marker_mode
                    seen = getattr(mode, "count", getattr(mode, "records_seen", None))
                    if seen is not None:
                        r["records_seen"] = seen
                    r["added_per_kernel_us"] = r["added_step_us_median"] / kps if kps else None
                    wres["modes"][mname] = r
                except Exception:
                    wres["modes"][mname] = {"error": traceback.format_exc(limit=4)}
                finally:
                    with contextlib.suppress(Exception):
                        mode.teardown()
                after = [run_block(step, args.block, cupti_flush) for _ in range(6)]
                r = wres["modes"][mname]
                if "a_step_ms_median" in r:
                    pre = statistics.median(before) * 1e3
                    r["plain_before_ms"] = pre
                    r["plain_after_ms"] = statistics.median(after) * 1e3
                    r["a_vs_plain_before"] = r["a_step_ms_median"] / pre
                    r["plain_after_vs_before"] = r["plain_after_ms"] / pre
                brief = {k: v for k, v in wres["modes"][mname].items() if not k.endswith("_ms")}
                print(wname, mname, json.dumps(brief), flush=True)
                result["workloads"][wname] = wres
                save(result, args.out)
        result["generate_report"] = bench_reports(steps["launch_bound"], args.report_repeats)
    result["record_processing_cpu"] = record_processing_cost()

    save(result, args.out)
    print_table(result)
    return 0


def save(result: dict[str, Any], out_dir: str) -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_overhead.json").write_text(json.dumps(result, indent=2, default=str))


def print_table(result: dict[str, Any]) -> None:
    m = result["machine"]
    print(f"\n{result['date']}  {m['gpu']}  torch {m['torch']}  core {m['pinned_core']}")
    print(
        f"{'workload':14} {'mode':13} {'A ms':>8} {'B/A med':>8} {'p25':>6} {'p75':>6} "
        f"{'+us/step':>9} {'+us/kernel':>10}"
    )
    for wname, w in result["workloads"].items():
        for mname, r in w["modes"].items():
            if "error" in r:
                print(f"{wname:14} {mname:13} ERROR {r['error'].splitlines()[-1]}")
                continue
            per_k = r.get("added_per_kernel_us")
            print(
                f"{wname:14} {mname:13} {r['a_step_ms_median']:8.3f} {r['ratio_median']:8.4f} "
                f"{r['ratio_p25']:6.3f} {r['ratio_p75']:6.3f} {r['added_step_us_median']:9.1f} "
                f"{per_k if per_k is None else round(per_k, 3)!s:>10}"
            )
        print(f"{wname:14} kernels/step {w['kernels_per_step']:.1f}")
    print("\ngenerate_report on one rank (ms):")
    for name, r in result["generate_report"].items():
        if "error" in r:
            print(f"  {name:13} ERROR {r['error'].splitlines()[-1]}")
        else:
            print(
                f"  {name:13} first {r['first_ms']:7.3f}  warm median {r['warm_ms_median']:7.3f}"
                f"  min {r['warm_ms_min']:7.3f}  kernel keys {r['kernel_keys_in_report']}"
                f"  collect alone {r.get('collect_ms_median')}"
            )


if __name__ == "__main__":
    sys.exit(main())
