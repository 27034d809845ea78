"""A tiny training script run by torchrun in tests: gloo ranks, the real Detector, and
the reporter wired purely from environment variables (PACEKEEPER_REPORTER etc.).

Rank ``SLOW_RANK`` sleeps longer in each step, so its scores are the lowest. Between
steps rank 0 may wait for a file to appear (the test kills the ScoreBoard meanwhile).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist

from pacekeeper.detector import Detector


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    steps = int(os.environ.get("STEPS", "6"))
    report_every = int(os.environ.get("REPORT_EVERY", "2"))
    slow_rank = int(os.environ.get("SLOW_RANK", "3"))
    pause_file = os.environ.get("PAUSE_AFTER_STEP_FILE")
    pause_step = int(os.environ.get("PAUSE_AFTER_STEP", "-1"))
    # The reporter comes from PACEKEEPER_* variables alone: no code beyond the Detector's.
    Detector.initialize(report_time_interval=3600, kernel_timing="none")
    publisher = Detector.reporter()
    step_times = []
    x = torch.ones(64)
    for step in range(steps):
        start = time.perf_counter()
        # Compute only: the all-reduce makes every rank wait for the slowest one.
        # Long enough that a few ms of scheduling delay on a busy 2-core machine (4 ranks
        # and a Ray actor restarting beside them) cannot move a healthy rank's score of
        # a 2-step window below 0.75: at 10 ms, one late wake-up read 0.58 in CI.
        with Detector.detection_section("compute", profile_cuda=False):
            time.sleep(0.15 if rank == slow_rank else 0.05)
        dist.all_reduce(x)
        step_times.append(time.perf_counter() - start)
        if (step + 1) % report_every == 0:
            Detector.generate_report()
        if step == pause_step and pause_file:
            # Every rank waits (a barrier keeps the collective order) while rank 0 polls.
            if rank == 0:
                Path(pause_file + ".reached").write_text("1")
                while not Path(pause_file).exists():
                    time.sleep(0.05)
            dist.barrier()
    if publisher is not None:
        publisher.flush(timeout_s=30)
        stats = publisher.stats()
        out = os.environ.get("RESULT_FILE")
        if out:
            Path(out).write_text(
                json.dumps({"published": stats.published, "dropped": stats.dropped_oldest,
                            "errors": stats.send_errors, "rejected": stats.rejected})
            )  # fmt: skip
    # Ranks leave together: one that tears its groups down while rank 0 still flushes can
    # abort in gloo's threads at exit (docs/detector.md, "The detector's process group").
    dist.barrier()
    Detector.shutdown()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
