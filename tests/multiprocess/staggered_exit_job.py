"""One rank of a plain gloo script as users write it: ``init_process_group``,
``Detector.initialize``, short steps with reports at an interval, then
``destroy_process_group()`` and exit with no final barrier, each rank at its own time.

argv: rank, world size, file-store path, steps, stagger, mode, report interval (s).
Rank ``r`` runs ``steps + stagger * r`` steps (``stagger`` < 0: ``steps + |stagger| *
(world - 1 - r)``), as ranks with uneven shares of the data do: a rank still in the
loop starts report collectives its peers, gone or tearing their groups down, never join.
``mode`` ``shutdown`` calls ``Detector.shutdown()`` before ``destroy_process_group()``;
``atexit`` leaves the detector to the interpreter's exit. Prints one JSON line: the
reports this rank got and the detector's internal errors.
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch.distributed as dist

from pacekeeper.detector import Detector


def main() -> None:
    if os.environ.get("PACEKEEPER_TEST_NO_EXIT_CLOSE") == "1":
        # The check that the test can fail: the detector's group is left alive to the
        # interpreter's teardown (no close at shutdown or at exit).
        import atexit

        from pacekeeper.detector import report_group

        atexit.unregister(report_group._close_kept)
    if os.environ.get("PACEKEEPER_TEST_SHUTDOWN_COLLECTIVE") == "1":
        # The check that the test can fail: a shutdown that agrees with its peers over
        # the detector's group first, which a rank left alone cannot complete.
        plain = Detector.shutdown

        def agreeing_shutdown() -> None:
            from pacekeeper.detector import gather

            run = Detector._run
            if run is not None:
                run.group.collective(gather.all_reduce_max, 0.0, run.refresh())
            plain()

        Detector.shutdown = agreeing_shutdown  # type: ignore[method-assign]
    rank, world = int(sys.argv[1]), int(sys.argv[2])
    store, steps, stagger = sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    mode, interval = sys.argv[6], float(sys.argv[7])
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    Detector.initialize(report_time_interval=interval, kernel_timing="none", report_timeout_s=5)
    mine = steps + (stagger * rank if stagger >= 0 else -stagger * (world - 1 - rank))
    reports = 0
    for _ in range(mine):
        with Detector.detection_section("compute", profile_cuda=False):
            time.sleep(0.001)
        reports += Detector.generate_report_if_interval_elapsed() is not None
    print(json.dumps({"rank": rank, "reports": reports, "errors": Detector.internal_errors()}))
    sys.stdout.flush()
    if mode == "shutdown":
        Detector.shutdown()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
