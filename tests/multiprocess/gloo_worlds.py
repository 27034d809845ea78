"""Rank bodies for the multi-process tests (run inside gloo ranks; results to pickles)."""

from __future__ import annotations

import os
import pickle
import time
from typing import Any

from pacekeeper.detector import Detector

# Sleeps long enough that scheduler jitter on a loaded 2-core machine (a few ms at
# worst) stays well inside the 25% margin to the 0.75 threshold.
BASE_MS = {"forward": 10.0, "backward": 15.0}


def step(rank: int, slow_rank: int | None, slow_section: str, factor: float = 1 / 0.7) -> None:
    for name, base_ms in BASE_MS.items():
        ms = base_ms * factor if (rank == slow_rank and name == slow_section) else base_ms
        with Detector.detection_section(name):
            time.sleep(ms / 1000.0)


def save(out_dir: str, rank: int, result: dict[str, Any]) -> None:
    with open(os.path.join(out_dir, f"rank{rank}.pkl"), "wb") as f:
        pickle.dump(result, f)


def gathered_world(rank: int, world_size: int, out_dir: str) -> None:
    """gather_on_rank0=True: a healthy phase on the shared interval, then rank 2 slowed."""
    Detector.initialize(report_time_interval=0.4, node_name=f"n{rank // 2}")
    reported_at: list[int] = []
    healthy: list[Any] = []
    for it in range(1, 61):
        step(rank, None, "backward")
        if rank == 3:
            time.sleep(0.004)  # outside any section: a different step time to agree on
        report = Detector.generate_report_if_interval_elapsed()
        if Detector.is_interval_elapsed():
            reported_at.append(it)
        if report is not None:
            healthy.append(report)
    Detector.generate_report()  # start the slow phase with a fresh window
    for _ in range(16):
        step(rank, 2, "backward")
    slow = Detector.generate_report()
    save(
        out_dir,
        rank,
        {
            "reported_at": reported_at,
            "healthy": healthy,
            "slow": pickle.dumps(slow),
            "latest": Detector.latest_score_report(),
            "errors": Detector.internal_errors(),
        },
    )
    Detector.shutdown()


def split_world(rank: int, world_size: int, out_dir: str) -> None:
    """gather_on_rank0=False on WORLD, then two sub-groups reporting at their own pace."""
    import torch.distributed as dist

    Detector.initialize(gather_on_rank0=False, node_name=f"n{rank}")
    for _ in range(12):
        step(rank, 2, "forward")
    own = Detector.generate_report()
    Detector.shutdown()

    low = dist.new_group([0, 1])
    high = dist.new_group([2, 3])
    group = low if rank < 2 else high
    Detector.initialize(process_group=group, report_time_interval=0.05, node_name=f"n{rank}")
    sub_reports = []
    # The low group runs more iterations than the high one: a WORLD collective would hang.
    for _ in range(36 if rank < 2 else 24):
        step(rank, 3, "forward")
        report = Detector.generate_report_if_interval_elapsed()
        if report is not None:
            sub_reports.append(report)
    for _ in range(16):  # a final window with enough samples to judge
        step(rank, 3, "forward")
    last = Detector.generate_report()
    Detector.shutdown()
    save(
        out_dir,
        rank,
        {"own": own, "sub_reports": sub_reports, "sub_last": last},
    )


def stage_world(rank: int, world_size: int, out_dir: str) -> None:
    """Two 'pipeline stages': ranks 2 and 3 also time the loss, as a last stage does; no
    layout is given, so the report groups ranks by the work they timed."""
    Detector.initialize(report_time_interval=3600, kernel_timing="none", node_name=f"n{rank}")
    for _ in range(6):
        with Detector.detection_section("forward", profile_cuda=False):
            time.sleep(0.01)
        if rank >= 2:
            with Detector.detection_section("loss", profile_cuda=False):
                time.sleep(0.005)
    Detector.generate_report()
    save(out_dir, rank, {"latest": Detector.latest_score_report()})
    Detector.shutdown()
