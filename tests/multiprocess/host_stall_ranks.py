"""Rank bodies for the one-rank host stall test: 4 gloo ranks on one node, a synchronous
all-reduce every step inside the timed ``step`` section; from report ``STALL_FROM`` on,
rank ``STALLED`` spends ``STALL_S`` more on its host side each step (a sleep: no compute
of its changes). Issue 38's stall, +0.2 s on ~1 s steps, scaled to 0.1 s steps so the
test stays short. Rank 0 keeps every report; results go to a pickle."""

from __future__ import annotations

import time

import torch
import torch.distributed as dist
from gloo_worlds import save

from pacekeeper.detector import Detector

STALLED = 2
STEP_S = 0.1
STALL_S = 0.02
STEPS_PER_REPORT = 8
REPORTS = 9
STALL_FROM = 4
"""Healthy reports first: the stalled rank's own baseline is its healthy step."""


def stall_world(rank: int, world_size: int, out_dir: str, stall: bool) -> None:
    """``stall``: rank ``STALLED`` stalls from report ``STALL_FROM`` (False: nobody does)."""
    Detector.initialize(report_time_interval=3600, kernel_timing="none", node_name="node-a")
    grad = torch.ones(1024)
    reports = []
    for k in range(REPORTS):
        extra = STALL_S if stall and rank == STALLED and k >= STALL_FROM else 0.0
        for _ in range(STEPS_PER_REPORT):
            with Detector.detection_section("step", profile_cuda=False):
                time.sleep(STEP_S + extra)
                dist.all_reduce(grad)
        Detector.generate_report()
        if rank == 0:
            reports.append(Detector.latest_score_report())
    save(out_dir, rank, {"reports": reports, "errors": Detector.internal_errors()})
    Detector.shutdown()
