"""``make bench``: the benchmarks that run on this machine's CPUs, one after another.

Each prints its table and writes its JSON to bench/results/ (docs/performance.md reads
them). Left out, with the reason printed: the GPU benches (``gpu_overhead.py``,
``cupti_flush_probe.py``, ``cupti_subscribers_probe.py``: the lent GPU machine, through
``bench/device_gpu.sh``), the real-server and long controller runs
(``controller_time_to_act.py``, ``device_real_server.sh``: minutes to hours), and the
real traces (``real_traces.py``: needs ../shared/data).

Run: .venv/bin/python bench/run_all.py [--only NAME ...]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

CPU_BENCHES: dict[str, list[str]] = {
    "detector_overhead": [],
    "detector_report": [],
    "detector_scoring": [],
    "detector_report_cupti_sim": ["--reports", "100", "--launch-reports", "10"],
    "controller_decide": ["--rounds", "3"],
    "detection_quality": ["--quick"],
    "detector_scale": ["--worlds", "4", "8", "16", "32", "--reports", "3"],
}
"""Script (bench/NAME.py) and its arguments: defaults, or fewer rounds where a full run
is long and the shorter one answers the same question."""

ELSEWHERE = {
    "gpu_overhead": "needs a GPU: bash bench/device_gpu.sh report|paired|interleaved",
    "cupti_flush_probe": "needs a GPU",
    "cupti_subscribers_probe": "needs a GPU: bash bench/device_gpu.sh probe",
    "controller_time_to_act": "minutes to hours against the harness or the real server",
    "real_traces": "reads the public traces in ../shared/data",
    "detection_quality (full space)": "about 7 core-hours: docs/detection-quality.md",
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", choices=sorted(CPU_BENCHES), default=None)
    args = ap.parse_args(argv)
    names = args.only or list(CPU_BENCHES)
    failed = []
    for name in names:
        print(f"\n=== {name}", flush=True)
        t0 = time.monotonic()
        rc = subprocess.call([sys.executable, str(HERE / f"{name}.py"), *CPU_BENCHES[name]])
        print(f"=== {name}: exit {rc} after {time.monotonic() - t0:.0f} s", flush=True)
        if rc:
            failed.append(name)
    for name, why in ELSEWHERE.items():
        print(f"not run here: {name} ({why})")
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
