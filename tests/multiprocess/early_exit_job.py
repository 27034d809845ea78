"""One rank of a plain two-rank gloo script with no barrier at the end: rank 1 shuts the
detector down, destroys its groups and exits as soon as its last report is made, while
rank 0 makes one more report (rank 1 is gone: None, counted) and then exits too.

argv: rank, file-store path, result path."""

from __future__ import annotations

import json
import sys
import time

import torch.distributed as dist

from pacekeeper.detector import Detector


def main() -> None:
    rank, store, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    Detector.initialize(report_time_interval=3600, kernel_timing="none", report_timeout_s=5)
    reports = []
    for step in range(6):
        with Detector.detection_section("compute", profile_cuda=False):
            time.sleep(0.005)
        if step % 3 == 2:
            reports.append(Detector.generate_report() is not None)
    late = None
    if rank == 0:
        time.sleep(0.1)
        late = Detector.generate_report() is not None
    with open(out, "w") as f:
        json.dump({"reports": reports, "late": late, "errors": Detector.internal_errors()}, f)
    Detector.shutdown()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
