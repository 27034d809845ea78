"""A torchrun script that fails once: two gloo ranks report into the StragglerReport
(reporter from PACEKEEPER_* variables); in the first attempt rank 1 raises after two
reports, torchrun restarts both, and the second attempt reports twice and exits."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import torch.distributed as dist

from pacekeeper.detector import Detector
from pacekeeper.detector.integrations.torchelastic import describe


def main() -> None:
    out = Path(os.environ["OUT_DIR"])
    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    Detector.initialize(report_time_interval=3600, kernel_timing="none")  # before the group
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    for step in range(4):
        with Detector.detection_section("compute", profile_cuda=False):
            time.sleep(0.03 if rank == 1 else 0.01)
        if step % 2 == 1:
            Detector.generate_report()
    publisher = Detector.reporter()
    if publisher is not None:
        publisher.flush(timeout_s=30)
        sink = publisher.sink
        (out / f"attempt{attempt}.json").write_text(
            json.dumps({"incarnation": sink.incarnation, "job": describe().job_key,
                        "published": publisher.stats().published,
                        "sequence": publisher.stats().last_published_sequence,
                        "errors": Detector.internal_errors()})
        )  # fmt: skip
    dist.barrier()
    if attempt == 0 and rank == 1:
        raise RuntimeError("a worker fails once")
    Detector.shutdown()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
