"""ScoreBoard throughput: reports per second accepted from 64 concurrent jobs.

64 client threads in one driver, one job each, publish pre-serialised reports as fast
as the board answers (each waits for its acknowledgement, as a reporter does). Cases:
4-rank and 256-rank reports, with write-through to the GCS store (the default, which
makes the board survive its own restart) and without. The board is one actor, so this
is its serial rate: validation, bookkeeping and the store write per report.

Run: .venv/bin/python bench/transport_throughput.py [reports_per_job]
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _table import emit

from pacekeeper.controller.simulation.synthetic import synthetic_report
from pacekeeper.detector.reporters.ray_scoreboard import ScoreBoard
from pacekeeper.detector.score_report import JobIdentity, Platform

JOBS = 64


def _run_case(ranks: int, persist: bool, per_job: int) -> dict[str, Any]:
    import ray

    board = (
        ray.remote(ScoreBoard)
        .options(num_cpus=0)
        .remote(persist=persist, store_prefix=f"bench-{ranks}-{persist}/")
    )
    ray.get(board.ping.remote())
    payloads: list[list[tuple[str, str]]] = []
    for j in range(JOBS):
        job = JobIdentity(platform=Platform.RAY, name=f"j{j}", ray_job_id=f"{ranks}-{persist}-{j}")
        payloads.append(
            [(job.key, synthetic_report(job=job, sequence=s, world_size=ranks).to_json())
             for s in range(per_job)]
        )  # fmt: skip
    start = threading.Barrier(JOBS + 1)
    latencies: list[float] = []
    lock = threading.Lock()

    def client(items: list[tuple[str, str]]) -> None:
        start.wait()
        mine = []
        for key, text in items:
            t0 = time.perf_counter()
            ray.get(board.publish.remote(text, key, "bench"))
            mine.append(time.perf_counter() - t0)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client, args=(p,)) for p in payloads]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    stats = ray.get(board.stats.remote())
    ray.kill(board)
    total = JOBS * per_job
    assert stats["accepted"] == total, stats
    latencies.sort()
    return {
        "ranks_per_report": ranks,
        "write_through": persist,
        "jobs": JOBS,
        "reports": total,
        "report_kib": len(payloads[0][0][1]) / 1024,
        "reports_per_s": total / elapsed,
        "ack_p50_ms": latencies[len(latencies) // 2] * 1e3,
        "ack_p99_ms": latencies[int(len(latencies) * 0.99)] * 1e3,
    }


def main() -> None:
    per_job = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=100 * 1024**2,
             log_to_driver=False)  # fmt: skip
    try:
        rows = [
            _run_case(ranks, persist, per_job if ranks < 256 else max(5, per_job // 4))
            for ranks in (4, 256)
            for persist in (True, False)
        ]
    finally:
        ray.shutdown()
    emit(
        "transport_throughput",
        rows,
        title=f"ScoreBoard throughput, {JOBS} concurrent jobs",
        meta={"reports_per_job": per_job},
    )


if __name__ == "__main__":
    main()
