"""One long detector run in a fresh process, for test_kernel_counts.py: prints what each
report window's ScoreReport says became of its kernels, and what torch launched.

A fresh process because the set-ups differ in what must come first: pinned to one core
before torch starts any thread, the detector started before any CUDA context (then
``api`` markers), a world-of-one NCCL group. Run as
``python kernel_count_runs.py --scenario counts|profiler [options]``; prints one JSON
line last.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from typing import Any


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--scenario", choices=["counts", "profiler"], default="counts")
    p.add_argument("--marker", default="auto")
    p.add_argument("--core", type=int, default=-1, help="pin the process to this core")
    p.add_argument("--nccl", action="store_true", help="a world-of-one NCCL group")
    p.add_argument("--port", type=int, default=29500)
    p.add_argument("--before-context", action="store_true")
    p.add_argument("--windows", type=int, default=4)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--kernels", type=int, default=800)
    p.add_argument(
        "--body",
        choices=["add", "model"],
        default="add",
        help="add: KERNELS in-place adds on this thread; model: forward and backward of "
        "a stack of linear layers (~800 kernels, backward's launched by autograd's thread)",
    )
    p.add_argument(
        "--attribution",
        choices=["markers", "gated"],
        default="markers",
        help="PACEKEEPER_KERNEL_ATTRIBUTION: section markers, or records on inside entries alone",
    )
    p.add_argument(
        "--no-hold",
        action="store_true",
        help="control: rule on kernels before their entries' markers are in (the old way)",
    )
    return p.parse_args()


class _Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def main() -> None:
    a = _args()
    if a.core >= 0:
        os.sched_setaffinity(0, {a.core})  # before torch: every thread it starts inherits
    os.environ["PACEKEEPER_KERNEL_SAMPLE_EVERY"] = "1"
    if a.marker != "auto":
        os.environ["PACEKEEPER_KERNEL_MARKER"] = a.marker
    os.environ["PACEKEEPER_KERNEL_ATTRIBUTION"] = a.attribution
    warnings = _Warnings()
    logging.getLogger("pacekeeper").addHandler(warnings)

    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    from pacekeeper.detector import Detector

    def start() -> None:
        Detector.initialize(report_time_interval=3600, kernel_timing="cupti")

    if a.before_context:
        start()  # no CUDA context yet: memset markers cannot be set up
    dist: Any = None
    if a.nccl:
        import torch.distributed as dist

        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(a.port))
        torch.cuda.set_device(0)
        dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
    x = torch.ones(4096, device="cuda")
    grad = torch.ones(1 << 16, device="cuda")
    torch.cuda.synchronize()
    if not a.before_context:
        start()
    backend = Detector.cupti_manager
    if a.no_hold:
        backend._builder.book.sent = None
    result: dict[str, Any] = {
        "marker_mode": getattr(backend, "marker_mode", None),
        "attribution": getattr(backend, "attribution", None),
    }

    model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(133)]).cuda()
    inputs = torch.randn(64, 256, device="cuda")

    def body() -> None:
        if a.body == "model":
            model.zero_grad(set_to_none=True)
            model(inputs).sum().backward()
        else:
            for _ in range(a.kernels):
                x.add_(1.0)
        if dist is not None:
            dist.all_reduce(grad)

    def step() -> None:
        with Detector.detection_section("step"):
            body()

    def window(steps: int) -> dict[str, Any]:
        for _ in range(steps):
            step()
        t0 = time.perf_counter()
        Detector.generate_report()
        ms = (time.perf_counter() - t0) * 1e3
        sr = Detector.latest_score_report()
        kt = sr.kernel_timing if sr is not None else None
        return {
            "steps": steps,
            "attributed": kt.attributed_records if kt else -1,
            "unattributed": kt.unattributed_records if kt else -1,
            "held": kt.held_records if kt else -1,
            "dropped": kt.dropped_records if kt else -1,
            "lost_markers": kt.lost_markers if kt else -1,
            "report_ms": round(ms, 3),
            "paused": bool(getattr(backend, "paused", False)),
        }

    def cuda_kernels(prof: Any) -> tuple[int, int]:
        """(kernels, of which communication) among a profiler's CUDA events."""
        names = [
            e.name
            for e in prof.events()
            if e.device_type == torch.autograd.DeviceType.CUDA
            and not e.name.startswith(("Memcpy", "Memset"))
        ]
        return len(names), sum("nccl" in n.lower() for n in names)

    windows: list[dict[str, Any]] = []
    if a.scenario == "counts":
        windows = [window(a.steps) for _ in range(a.windows)]
    else:
        windows += [window(a.steps) for _ in range(2)]
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                step()
            torch.cuda.synchronize()
        result["plain_profiler"] = cuda_kernels(prof)
        result["plain_profiler_steps"] = 3
        windows.append({**window(0), "during": "plain profiler"})
        windows += [window(a.steps) for _ in range(2)]
        cycles: list[tuple[int, int]] = []
        with profile(
            activities=[ProfilerActivity.CUDA],
            schedule=schedule(wait=1, warmup=1, active=2, repeat=2),
            on_trace_ready=lambda p: cycles.append(cuda_kernels(p)),
        ) as prof:
            # Two cycles; between them (a wait step) we trace, and the second cycle's
            # warm-up starts with our records still in CUPTI's buffers.
            for _ in range(9):
                step()
                # The GPU must not lag into the next phase: the profiler keeps kernels
                # by when they ran, so a warm-up step's last ones would count as active.
                torch.cuda.synchronize()
                prof.step()
            torch.cuda.synchronize()
        result["scheduled_profiler"] = cycles
        result["scheduled_profiler_steps"] = 2
        windows.append({**window(0), "during": "scheduled profiler"})
        windows += [window(a.steps) for _ in range(2)]
        result["marker_mode_after"] = getattr(backend, "marker_mode", None)
    result["windows"] = windows
    result["failures"] = dict(getattr(backend, "failures", {}))
    Detector.shutdown()
    # What torch launches per step, seen by torch.profiler once we let CUPTI go.
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(2):
            body()
        torch.cuda.synchronize()
    kernels, comm = cuda_kernels(prof)
    result["per_step"] = {"kernels": kernels // 2, "comm": comm // 2}
    result["warnings"] = warnings.messages[-20:]
    if dist is not None:
        dist.destroy_process_group()
    print(json.dumps(result), flush=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
