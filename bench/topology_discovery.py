"""What finding the job's layout without ``set_topology`` costs a report
(``detector/topology_discovery.py``).

Each report reads a few cheap signals (c10d's group count, whether Megatron's
``parallel_state`` is initialised, the pipeline stages found) and reuses the cached
layout when none changed: that is the per-report cost. When one changed, the layout is
worked out again from c10d's registry (every group this rank belongs to). At
``initialize``, the first report and whenever c10d made a new group, one walk over the
garbage collector's objects finds DDP models and pipeline stages: its cost grows with
the objects the process holds. Measured in a one-rank gloo world.

Run: .venv/bin/python bench/topology_discovery.py [--repeats N] [--out DIR]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _table import emit

from pacekeeper.detector.topology import Topology
from pacekeeper.detector.topology_discovery import Discovery


def _median_us(fn: Any, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - t)
    return statistics.median(times) / 1e3


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2000)
    ap.add_argument("--out", type=Path, default=None, help="results folder (bench/results)")
    args = ap.parse_args(argv)
    import torch
    import torch.distributed as dist

    store = Path(tempfile.mkdtemp()) / "store"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    rows: list[dict[str, Any]] = []
    try:
        made = 1
        for groups in (1, 16, 128):
            while made < groups:
                dist.new_group([0])
                made += 1
            found = Discovery()
            topo = found.at_report(Topology())
            cached = _median_us(lambda f=found, t=topo: f.at_report(t), args.repeats)
            fresh = _median_us(lambda f=found: f._discover(None, 0, 1), max(1, args.repeats // 10))
            rows.append({"what": f"report, cached ({groups} groups)", "us": round(cached, 2)})
            rows.append({"what": f"layout worked out ({groups} groups)", "us": round(fresh, 1)})
        ballast: list[Any] = []
        for objects in (0, 1_000_000, 4_000_000):
            # Lists are tracked by the garbage collector (a dict of ints is not).
            ballast.extend([i] for i in range(objects - len(ballast)))
            tracked = len(gc.get_objects())
            found = Discovery()
            scan = _median_us(found.scan, 5)
            rows.append({"what": f"object walk ({tracked:,} objects)", "us": round(scan, 0)})
    finally:
        dist.destroy_process_group()
    emit(
        "topology_discovery",
        rows,
        title="topology discovery cost per report",
        meta={"torch": torch.__version__},
        results_dir=args.out,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
