"""A torchrun script for the runtime-control test: gloo ranks whose StragglerReport's
``spec.control`` disables detection, then (changed by the test mid-run) enables it.

Rank 0 pauses after ``PAUSE_AT`` iterations until the test has patched the spec (a file
appears), then waits a few control polls; a barrier keeps every rank with it. Each rank
writes the control it followed at every report iteration to ``OUT_DIR/rank<r>.json``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import torch.distributed as dist

from pacekeeper.detector import Detector


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    out = Path(os.environ["OUT_DIR"])
    pause_at = int(os.environ.get("PAUSE_AT", "30"))
    # The reporter and the control source come from PACEKEEPER_* variables alone.
    Detector.initialize(report_time_interval=0, kernel_timing="none")
    time.sleep(0.5)  # a few control polls: rank 0 has read spec.control before training
    dist.barrier()
    records = []
    for it in range(1, 2 * pause_at + 1):
        with Detector.detection_section("compute", profile_cuda=False):
            time.sleep(0.004)
        report = Detector.generate_report_if_interval_elapsed()
        if Detector.is_interval_elapsed():
            state = Detector.control_state()
            assert state is not None
            records.append([it, state.enabled, state.report, report is not None])
        if it == pause_at:
            if rank == 0:
                (out / "reached").write_text("1")
                while not (out / "go").exists():
                    time.sleep(0.02)
                time.sleep(0.5)
            dist.barrier()
    (out / f"rank{rank}.json").write_text(
        json.dumps({"records": records, "errors": Detector.internal_errors()})
    )
    Detector.shutdown()
    dist.barrier()  # leave together: a rank exiting while a peer still reports can abort
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
