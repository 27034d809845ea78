"""Kernel-timing overhead on a GPU: paired A/B blocks inside one process.

Separate processes per mode differ by about +-10% on these machines, more than the
effect, so every mode is measured as alternating blocks of steps without (A) and with
(B) timing inside one process pinned to one core; the figure is the median over pairs
of B/A. Modes, all in the same run and on the same steps:
  aa            nothing timed in either block (the method's own noise)
  bare_raw      CUPTI CONCURRENT_KERNEL tracing, raw buffer callback (ctypes) only counting
  bare_cupti    CUPTI CONCURRENT_KERNEL tracing, cupti-python callback only counting records
  ours_i1       pacekeeper Detector, profiling_interval=1, every entry traced
  ours_default  pacekeeper Detector with its defaults (gated attribution since
                2026-12-03)
  ours_*_forced the same two with a report's fence flushing CUPTI forced
                (PACEKEEPER_REPORT_FLUSH=forced; plain first since 2026-12-02)
  ours_*_gated  the same two with gated attribution named (PACEKEEPER_KERNEL_ATTRIBUTION=
                gated: records on inside traced entries alone, no section markers)
  ours_*_by_markers  the same two with section markers (PACEKEEPER_KERNEL_ATTRIBUTION=
                markers: the detector's default before 2026-12-03)
  ours_i1_marker_fence  ours_i1 with a fence marker at every report (no quiet fence:
                CuptiBackend.quiet_fence off, as before 2026-12-02's sixth session)
  ours_*_driver the same two with driver-call section markers (PACEKEEPER_KERNEL_MARKER=
                driver: the fallback where memset markers cannot be used)
  ours_i1_markers  ours_i1 with its buffers only counted, not decoded: the cost of
                markers and switching records on and off, without record handling
  ours_i1_vs_bare  A blocks bare_raw, B blocks ours_i1, in one process: our cost above
                the floor measured directly (the other modes' A blocks are untraced)
  ours_switched_vs_bare  the same with records switched per entry (the backend keeps
                them on between consecutive traced entries at interval 1)
  ours_i1_parts, ours_default_parts  ours_i1_vs_bare, and ours_default against plain
                A blocks, with each block's hook time (training thread) and buffer
                callback time (CUPTI's thread) timed in place, wall and CPU, and
                from them the steady state of a running job (steady_parts: what the
                blocks pay once per flush taken out)
  toggle_vs_bare  A blocks bare_raw, B blocks bare_toggle: what switching costs, paired
  bare_toggle   bare_raw with kernel records switched on and off around every step
  bare_toggle_memset_kind  bare_toggle, the MEMSET kind switched along
  bare_markers  bare_toggle_memset_kind plus a marker memset at each step's start and end
  nvrx          NVRx 0.7.0 Detector.detection_section(profile_cuda=True), interval 1
Steps: launch-bound (100 x Linear(256), forward and backward) and GEMM-bound
(4 x bf16 8192^3). Also generate_report time on one rank, ours vs NVRx (ours with
a cProfile of where a report's time goes), hook and marker-call costs, and where a
forced flush hands buffers over (flush_delivery).

Every block of a tracing mode (A and B alike) ends with a forced CUPTI flush inside the
timed region (NVRx's: a plain one), so the cost of handling a block's records lands in
that block and not in the next one. Prints a table and writes JSON to --out (default
$OUT, else bench/results).

This file parses the flags; the bench itself lives in bench/_gpu_overhead/ (the modes,
the paired runner, the diagnostics, the result's JSON and table: its __init__ lists them).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _gpu_overhead.record_cost import record_processing_cost
from _gpu_overhead.run import run


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
    ap.add_argument("--core", type=int, default=2, help="the one core to run on; -1: not pinned")
    ap.add_argument("--report-repeats", type=int, default=12)
    ap.add_argument(
        "--report-rounds",
        type=int,
        default=1,
        help="times the report modes run in turn (ratios to NVRx per round)",
    )
    ap.add_argument("--workloads", default="launch_bound,gemm_bound")
    ap.add_argument("--modes", default="aa,bare_raw,ours_i1_vs_bare,ours_i1,ours_default,nvrx")
    ap.add_argument(
        "--report-modes",
        default="ours_i1,ours_default,nvrx",
        help="modes whose generate_report is timed ('' for none)",
    )
    ap.add_argument(
        "--report-workloads",
        default="launch_bound",
        help="workloads whose steps come before each timed report (launch_bound, gemm_bound)",
    )
    ap.add_argument(
        "--out", default=os.environ.get("OUT") or str(Path(__file__).parent / "results")
    )
    ap.add_argument(
        "--diagnostics",
        default="hooks,hooks_sampled,marker_calls,sampled_calls,flush_delivery",
        help="which diagnostics to run after the modes ('' for none)",
    )
    ap.add_argument(
        "--skip-decode", action="store_true", help="skip the CPU record-processing figures"
    )
    ap.add_argument(
        "--interleaved-pairs",
        type=int,
        default=0,
        help="overhead at the defaults by per-step interleaving on these workloads' steps "
        "(pairs per arm; 0: off)",
    )
    ap.add_argument("--interleaved-workloads", default="launch_bound")
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
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
