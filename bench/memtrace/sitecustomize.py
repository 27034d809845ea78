"""Where a long-running process's memory and collector time go (a diagnosis aid).

Put this folder first on PYTHONPATH of the process to watch and set
PACEKEEPER_MEMTRACE_OUT; only a process whose command line contains
PACEKEEPER_MEMTRACE_MATCH (default "operator") traces. It starts tracemalloc at
interpreter start, takes a baseline snapshot after PACEKEEPER_MEMTRACE_FIRST_S seconds
(warm-up: caches primed, every job seen) and then, every PACEKEEPER_MEMTRACE_EVERY_S,
appends to the output file the allocation sites that grew most since the baseline, with
their tracebacks. tracemalloc slows allocation severalfold: no timing taken beside it
is a figure. PACEKEEPER_GCSTATS_OUT (no tracemalloc, nearly free) appends every 30 s the
process's CPU time and the wall time spent in each generation's collections so far.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
import tracemalloc

_OUT = os.environ.get("PACEKEEPER_MEMTRACE_OUT")
_GC_OUT = os.environ.get("PACEKEEPER_GCSTATS_OUT")
_MATCH = os.environ.get("PACEKEEPER_MEMTRACE_MATCH", "operator")


def _watch(out: str, first_s: float, every_s: float, top: int) -> None:
    time.sleep(first_s)
    base = tracemalloc.take_snapshot()
    started = time.monotonic()
    while True:
        time.sleep(every_s)
        snap = tracemalloc.take_snapshot()
        diffs = snap.compare_to(base, "traceback")
        current, _ = tracemalloc.get_traced_memory()
        with open(out, "a") as f:
            f.write(
                f"=== {time.monotonic() - started:.0f} s after the baseline; "
                f"traced now {current / 2**20:.1f} MiB; growth by site:\n"
            )
            for d in diffs[:top]:
                f.write(f"{d.size_diff / 1024:+.1f} KiB ({d.count_diff:+d} blocks)\n")
                for line in d.traceback.format()[-12:]:
                    f.write(f"    {line}\n")


if _OUT and _MATCH in " ".join(sys.argv):
    tracemalloc.start(int(os.environ.get("PACEKEEPER_MEMTRACE_FRAMES", "10")))
    threading.Thread(
        target=_watch,
        args=(
            _OUT,
            float(os.environ.get("PACEKEEPER_MEMTRACE_FIRST_S", "300")),
            float(os.environ.get("PACEKEEPER_MEMTRACE_EVERY_S", "300")),
            int(os.environ.get("PACEKEEPER_MEMTRACE_TOP", "15")),
        ),
        name="memtrace",
        daemon=True,
    ).start()


def _gc_stats(out: str) -> None:
    spent = [0.0, 0.0, 0.0]
    runs = [0, 0, 0]
    began: list[float] = [0.0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            began[0] = time.perf_counter()
        else:
            spent[info["generation"]] += time.perf_counter() - began[0]
            runs[info["generation"]] += 1

    gc.callbacks.append(on_gc)
    while True:
        time.sleep(30.0)
        with open(out, "a") as f:
            f.write(
                f"{time.monotonic():.0f} cpu_s={time.process_time():.2f} "
                f"gc_s={[round(x, 3) for x in spent]} runs={runs} "
                f"objects={len(gc.get_objects())} frozen={gc.get_freeze_count()}\n"
            )


if _GC_OUT and _MATCH in " ".join(sys.argv):
    threading.Thread(target=_gc_stats, args=(_GC_OUT,), name="gcstats", daemon=True).start()
