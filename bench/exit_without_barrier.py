"""Plain 4-rank gloo scripts that leave without a final barrier: how many runs abort.

Each run starts ``tests/multiprocess/staggered_exit_job.py`` on 4 ranks (own processes,
a file store): ``init_process_group``, ``Detector.initialize``, short steps with a
report every 10, then ``destroy_process_group()`` and exit with no barrier, the ranks
leaving ``--stagger`` seconds apart (the reporting rank last). A run fails when any
rank exits non-zero; an abort is a rank killed by a signal (gloo's "terminate called"
is SIGABRT, exit 134 from a shell). Prints a table per mode and writes
bench/results/exit_without_barrier.json.

    .venv/bin/python bench/exit_without_barrier.py --runs 20
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import emit

JOB = Path(__file__).resolve().parents[1] / "tests" / "multiprocess" / "staggered_exit_job.py"


def run_once(  # noqa: PLR0917 - a bench helper
    world: int,
    steps: int,
    stagger: int,
    mode: str,
    interval: float,
    tmp: Path,
    timeout_s: float = 300,
) -> dict[str, Any]:
    """One run of the script on ``world`` ranks: each rank's exit code and output."""
    store = tmp / "store"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(JOB),
                str(r),
                str(world),
                str(store),
                str(steps),
                str(stagger),
                mode,
                str(interval),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for r in range(world)
    ]
    logs = [p.communicate(timeout=timeout_s)[0].decode(errors="replace") for p in procs]
    codes = [p.returncode for p in procs]
    lines = [_result(log) for log in logs]
    return {"codes": codes, "logs": logs, "results": lines}


def _result(log: str) -> dict[str, Any] | None:
    for line in log.splitlines():
        if line.startswith("{") and '"rank"' in line:
            parsed: dict[str, Any] = json.loads(line)
            return parsed
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--world", type=int, default=4)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--stagger", type=int, default=40)
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--modes", default="shutdown,atexit")
    args = parser.parse_args()
    rows = []
    for mode in args.modes.split(","):
        aborts = nonzero = 0
        codes_seen: dict[str, int] = {}
        t0 = time.perf_counter()
        for i in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="pacekeeper-exit-") as tmp:
                run = run_once(args.world, args.steps, args.stagger, mode, args.interval, Path(tmp))
            codes = run["codes"]
            for c in codes:
                codes_seen[str(c)] = codes_seen.get(str(c), 0) + 1
            aborts += any(c < 0 or c == 134 for c in codes)
            nonzero += any(c != 0 for c in codes)
            if any(c != 0 for c in codes):
                bad = next(r for r, c in enumerate(codes) if c != 0)
                print(f"run {i} ({mode}): exit codes {codes}\n{run['logs'][bad][-800:]}")
        rows.append({
            "mode": mode, "runs": args.runs, "ranks": args.world, "steps": args.steps,
            "stagger_steps": args.stagger, "runs_aborted": aborts, "runs_nonzero": nonzero,
            "exit_codes": json.dumps(codes_seen, sort_keys=True),
            "wall_s": round(time.perf_counter() - t0, 1),
        })  # fmt: skip
    emit(
        "exit_without_barrier",
        rows,
        title="Plain gloo scripts without a final barrier: runs that aborted",
        meta=vars(args),
    )


if __name__ == "__main__":
    main()
