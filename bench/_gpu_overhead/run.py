"""The whole GPU run behind ``bench/gpu_overhead.py``'s flags: pin the process to one
core, build the steps, measure every mode on every workload (the result saved after
each), then the diagnostics, generate_report's cost and the CPU record path. Apart
from the entry point, which only parses the flags, and from the pieces it runs in order."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import traceback
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from .detector_diagnostics import flush_delivery, hook_costs
from .entry_calls import marker_call_costs, sampled_call_costs
from .interleaved import interleaved, presence
from .marker_diagnostics import marker_after_flush, stop_marker_variants
from .mode_table import MODES
from .paired import kernels_per_step, measure_mode
from .record_cost import record_processing_cost
from .report_timing import bench_reports
from .results import print_table, save
from .workloads import Step, build_steps


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


def diagnostics(launch: Step) -> dict[str, Callable[[], dict[str, Any]]]:
    """The diagnostics by the names ``--diagnostics`` takes, in the order they run."""
    return {
        "hooks": lambda: hook_costs(launch),
        "hooks_sampled": lambda: hook_costs(launch, 320, sample_every=32),
        "marker_calls": lambda: marker_call_costs(launch),
        "sampled_calls": lambda: sampled_call_costs(launch),
        "stop_marker_variants": lambda: stop_marker_variants(launch),
        "marker_after_flush": lambda: marker_after_flush(launch),
        "flush_delivery": lambda: flush_delivery(launch),
    }


def run(args: argparse.Namespace) -> None:
    """Everything but ``--decode-only``; writes ``gpu_overhead.json`` to ``args.out``."""
    import torch

    if args.core >= 0:  # -1: every core the machine gives (a job's rank with several)
        with contextlib.suppress(OSError, AttributeError):
            os.sched_setaffinity(0, {args.core})
    torch.set_num_threads(1)
    steps = build_steps()
    from pacekeeper.cupti_ext.sampling import START_SAMPLE_EVERY

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
        # No window is collected while a mode is measured, so the per-window rule
        # stays at its first N throughout.
        "ours_default_sample_every": START_SAMPLE_EVERY,
        "workloads": {},
    }
    with single_rank_group():
        for wname in [w for w in args.workloads.split(",") if w]:
            run_workload(args, wname, steps[wname], result)
        for key, diagnostic in diagnostics(steps["launch_bound"]).items():
            if key not in args.diagnostics.split(","):
                continue
            try:
                result[key] = diagnostic()
            except Exception:
                result[key] = {"error": traceback.format_exc(limit=4)}
            print(key, json.dumps(result[key]), flush=True)
        if args.interleaved_pairs:
            for wname in [w for w in args.interleaved_workloads.split(",") if w]:
                key = f"interleaved_{wname}"
                result[key] = interleaved(steps[wname], args.interleaved_pairs)
                print(key, json.dumps(result[key]), flush=True)
                result[f"presence_{wname}"] = presence(steps[wname])
                print(f"presence_{wname}", json.dumps(result[f"presence_{wname}"]), flush=True)
                save(result, args.out)
        report_modes = [m for m in args.report_modes.split(",") if m]
        for wname in [w for w in args.report_workloads.split(",") if w]:
            # launch_bound's keeps its old key: earlier runs' files read the same.
            key = "generate_report" if wname == "launch_bound" else f"generate_report_{wname}"
            result[key] = bench_reports(
                steps[wname], args.report_repeats, report_modes, MODES, args.report_rounds
            )
            print(key, json.dumps(_brief_reports(result[key])), flush=True)
    if not args.skip_decode:
        result["record_processing_cpu"] = record_processing_cost()

    save(result, args.out)
    print_table(result)


def run_workload(args: argparse.Namespace, wname: str, step: Step, result: dict[str, Any]) -> None:
    """Every mode of ``--modes`` on one workload, into ``result["workloads"][wname]``."""
    for _ in range(10):
        step()
    kps = kernels_per_step(step)
    wres: dict[str, Any] = {"kernels_per_step": kps, "modes": {}}
    for mname in [m for m in args.modes.split(",") if m]:
        mode = MODES[mname]()
        pairs = args.slow_mode_pairs if mname == "bare_cupti" else args.pairs
        if wname == "gemm_bound" and args.gemm_pairs:
            pairs = args.gemm_pairs
        wres["modes"][mname] = measure_mode(mode, step, pairs, args.block, kps)
        brief = {k: v for k, v in wres["modes"][mname].items() if not k.endswith("_ms")}
        print(wname, mname, json.dumps(brief), flush=True)
        result["workloads"][wname] = wres
        save(result, args.out)


def _brief_reports(reports: dict[str, Any]) -> dict[str, Any]:
    """Report times and kernel counts per mode, without the profiles (for the log)."""
    return {
        mode: {k: v for k, v in r.items() if k not in ("profile", "last_collect_after_steps")}
        for mode, r in reports.items()
    }
