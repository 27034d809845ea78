"""One rank of one torchrun attempt over the agent's shared store (torch's default
since 2.4: every attempt's ranks reach the same TCPStore, whose keys outlive them).

argv: rank, world size, store port, first-report delay (s), result path, die.
``TORCHELASTIC_RESTART_COUNT`` comes from the environment, as torchrun sets it. The
rank joins the job's gloo group over the shared store, starts the detector, waits
``delay`` before its first report (so a peer that reads a dead attempt's keys reads
them before this rank writes its own) and makes two reports. ``die`` 1: the attempt
fails (``os._exit``: no shutdown, no cleanup, as a crashed worker) after writing its
result. ``PACEKEEPER_TEST_NO_RESTART_PREFIX=1`` switches the fix off (see ``main``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import timedelta

import torch.distributed as dist

from pacekeeper.detector import Detector


def main() -> None:
    if os.environ.get("PACEKEEPER_TEST_NO_RESTART_PREFIX") == "1":
        # The check that the test can fail: the detector keys its group as if every
        # attempt were the first (the restart count left out of its store prefix).
        from pacekeeper.detector import env

        env.elastic_restart_count = lambda environ=None: None
    rank, world, port = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    delay, out, die = float(sys.argv[4]), sys.argv[5], sys.argv[6] == "1"
    store = dist.TCPStore("127.0.0.1", port, None, False, timeout=timedelta(seconds=60))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
    Detector.initialize(report_time_interval=3600, kernel_timing="none", report_timeout_s=10)
    for _ in range(5):
        with Detector.detection_section("compute", profile_cuda=False):
            time.sleep(0.002)
    time.sleep(delay)
    reports = [Detector.generate_report() for _ in range(2)]
    ranks = [None if r is None else sorted(r.rank_to_node) for r in reports]
    with open(out, "w") as f:
        json.dump({"reports": ranks, "errors": Detector.internal_errors()}, f)
    if die:
        os._exit(1)
    Detector.shutdown()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
