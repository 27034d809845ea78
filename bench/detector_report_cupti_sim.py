"""generate_report on one rank with the real CUPTI backend over the simulated CUPTI.

The CPU tests' simulated CUPTI (tests/unit/cupti_ext/fake_cupti.py: real record dtypes,
memset section markers, buffers handed over at the report's forced flush) stands in
for the GPU, so what a report costs in our Python and compiled code can be measured
here; CUPTI's own flush and the device synchronize are not in it (on the H200 they
were about half of a GEMM-bound report at interval 1, docs/performance.md).

Per report: 40 steps, each one ``detection_section("step")`` launching KERNELS kernels
(4 different names); then ``generate_report`` is timed. Workloads: GEMM-bound (4
kernels a step) and launch-bound (600 a step), at interval 1 (every entry traced,
``PACEKEEPER_KERNEL_SAMPLE_EVERY=1``) and at the defaults (the sampling rule). The
launch of a simulated kernel costs far more than the report itself, so only the
report is timed, wall and the thread's CPU time (the dev machine is shared, and its
load moves both: compare runs made back to back). On the launch-bound step, buffers
are handed over every 5 steps, as CUPTI's full buffers would be, outside the timed
report. Figures: warm median and
quartiles over the reports, and the medians of the report's phases (the backend's
collect, in it the builder's ``add`` and ``take``, the payload build), and the Python
function calls a report makes (cProfile over 10 more reports, untimed: a figure the
shared machine's noise leaves alone).

Run: .venv/bin/python bench/detector_report_cupti_sim.py [--reports N] [--out DIR]
     [--native 0|1] [--phases] [--label NAME]
"""

from __future__ import annotations

import argparse
import cProfile
import ctypes
import os
import pstats
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit" / "cupti_ext"))

from _gpu_overhead.report_phases import _timing
from _table import emit

HERE = Path(__file__).resolve().parent

STEPS = 40
PROFILED = 10
NAMES = [b"_Z4gemmv", b"_Z4reluv", b"_Z4addfv", b"_Z4normv"]


def run_mode(kernels: int, interval_1: bool, reports: int, phases: bool) -> dict[str, Any]:
    from fake_cupti import FakeCupti, FakeLibcuda

    from pacekeeper import cupti_ext
    from pacekeeper.cupti_ext import (
        BackendChoice,
        cupti_backend,
        cupti_buffers,
        kernel_keys,
        window_builder,
    )
    from pacekeeper.cupti_ext.cupti_backend import CuptiBackend
    from pacekeeper.detector import Detector, local_payload, report_cycle, run_state, sections

    fake = FakeCupti()
    cupti_backend.register_callbacks_function = lambda: fake.register_raw  # type: ignore[assignment]
    CuptiBackend.fence_timeout_s = 0.02  # the simulation hands buffers over at the flush
    CuptiBackend.self_check_timeout_s = 0.02
    libcuda = FakeLibcuda(fake)
    made: list[CuptiBackend] = []

    def select(requested: str | None = None, **options: Any) -> Any:
        b = CuptiBackend(cupti_module=fake, libcuda=libcuda, **options)
        made.append(b)
        return b, BackendChoice("cupti", "benchmark")

    cupti_ext.select_backend = select  # type: ignore[assignment]
    if interval_1:
        os.environ["PACEKEEPER_KERNEL_SAMPLE_EVERY"] = "1"
    else:
        os.environ.pop("PACEKEEPER_KERNEL_SAMPLE_EVERY", None)
    keep = [ctypes.create_string_buffer(n) for n in NAMES]
    ptrs = [ctypes.addressof(b) for b in keep]
    launch = fake.launch
    if interval_1:
        Detector.initialize(report_time_interval=3600, profiling_interval=1)
    else:  # the defaults: profiling_interval left unset, sampled per window
        Detector.initialize(report_time_interval=3600)
    backend = made[-1]
    builder = window_builder.KernelWindowBuilder
    targets = [
        (backend, "collect", "collect"),
        (cupti_buffers, "decode_buffer", "collect.decode"),
        (builder, "add", "collect.add"),
        (kernel_keys.KernelKeyTable, "lookup", "collect.add.lookup"),
        (builder, "_attribute_all", "collect.add.attribute"),
        (builder, "settle", "collect.settle"),
        (builder, "take", "collect.take"),
        (sections.SectionTable, "drain", "drain"),
        (local_payload.PayloadBuilder, "build", "payload_build"),
        (run_state.RunState, "refresh", "group_refresh"),
        (report_cycle, "score_payloads", "score"),
    ]
    times: list[float] = []
    cpu: list[float] = []
    per: dict[str, list[float]] = defaultdict(list)
    counts: list[tuple[int, int, int, int]] = []

    def steps() -> None:
        for j in range(STEPS):
            with Detector.detection_section("step"):
                for k in range(kernels):
                    launch(ptrs[k & 3], 1000 + k)
            if kernels > 100 and j % 5 == 4:
                # CUPTI hands full buffers over during the steps (on its own
                # thread), not all at the report: a 1 MiB buffer holds ~4,800.
                fake.activity_flush_all(0)

    profile = cProfile.Profile()
    try:
        for i in range(reports + 3):
            steps()
            spent: dict[str, float] = defaultdict(float)
            if phases:
                with _timing(targets, spent):
                    c0, t0 = time.thread_time(), time.perf_counter()
                    Detector.generate_report()
                    t, c = time.perf_counter() - t0, time.thread_time() - c0
            else:
                c0, t0 = time.thread_time(), time.perf_counter()
                Detector.generate_report()
                t, c = time.perf_counter() - t0, time.thread_time() - c0
            if i < 3:
                continue  # the first reports learn names and build their tables
            times.append(t * 1e3)
            cpu.append(c * 1e3)
            for phase in {p for _, _, p in targets}:
                per[phase].append(spent[phase] * 1e3)
            sr = Detector.latest_score_report()
            kt = sr.kernel_timing if sr is not None else None
            if kt is not None:
                counts.append(
                    (
                        kt.attributed_records,
                        kt.unattributed_records,
                        kt.held_records,
                        kt.dropped_records,
                    )
                )
        # Python calls a report makes (a figure the shared machine's noise leaves
        # alone): cProfile over a few more reports, untimed.
        for _ in range(PROFILED):
            steps()
            profile.enable()
            Detector.generate_report()
            profile.disable()
    finally:
        Detector.shutdown()
    q = statistics.quantiles(times, n=4)
    return {
        "median_ms": statistics.median(times),
        "p25_ms": q[0],
        "p75_ms": q[2],
        "cpu_median_ms": statistics.median(cpu),
        "phases_ms": {k: statistics.median(v) for k, v in sorted(per.items())},
        "counts": sorted(set(counts)),
        "times_ms": times,
        "python_calls": pstats.Stats(profile).total_calls / PROFILED,  # type: ignore[attr-defined]
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reports", type=int, default=200, help="warm reports, GEMM-bound")
    ap.add_argument("--launch-reports", type=int, default=20, help="warm reports, launch-bound")
    ap.add_argument("--native", choices=("0", "1"), default="1")
    ap.add_argument("--phases", action="store_true", help="time the phases (slower)")
    ap.add_argument("--label", default="")
    ap.add_argument("--out", default=str(HERE / "results"))
    args = ap.parse_args(argv)
    os.environ["PACEKEEPER_NATIVE_RECORDS"] = args.native
    from pacekeeper.cupti_ext import native

    native.reset()
    rows = []
    phases: dict[str, dict[str, float]] = {}
    for workload, kernels, n in (
        ("gemm_bound", 4, args.reports),
        ("launch_bound", 600, args.launch_reports),
    ):
        for interval_1 in (True, False):
            r = run_mode(kernels, interval_1, n, args.phases)
            ph = r["phases_ms"]
            if args.phases:
                phases[f"{workload}, {'interval 1' if interval_1 else 'defaults'}"] = ph
            rows.append(
                {
                    "workload": workload,
                    "sampling": "interval 1" if interval_1 else "defaults",
                    "reports": n,
                    "median ms": r["median_ms"],
                    "p25 ms": r["p25_ms"],
                    "p75 ms": r["p75_ms"],
                    "CPU median ms": r["cpu_median_ms"],
                    "Python calls": r["python_calls"],
                    **{
                        f"{phase} ms": ph.get(phase, float("nan"))
                        for phase in ("collect", "collect.add", "collect.take", "payload_build")
                    },
                    "counts (attr, unattr, held, dropped)": r["counts"],
                }
            )
    label = f"_{args.label}" if args.label else ""
    emit(
        f"detector_report_cupti_sim{label}",
        rows,
        title=f"generate_report, one rank, simulated CUPTI, {STEPS} steps a report "
        f"(native {args.native})",
        meta={"steps": STEPS, "native": args.native, "phases_ms": phases},
        results_dir=Path(args.out),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
