"""Rank bodies for the pipeline-structure test: 8 gloo ranks, 2 data-parallel replicas
of a hand-written 4-stage pipeline (send/recv of activations forward, of gradients
backward, two micro-batches a step, an all-reduce closing each step). The last stage
does 30% more work, as a last stage with the LM head and the loss does. No
``set_topology`` call: the reports carry no coordinates. Rank 0 keeps every report."""

from __future__ import annotations

import os
import pickle
import time

import torch
import torch.distributed as dist

from pacekeeper.detector import Detector

STAGES = 4
MICRO = 2
LAST_EXTRA = 0.3
FORWARD_MS, BACKWARD_MS = 20.0, 40.0
"""Long enough that a few ms of scheduler jitter on a loaded 2-core machine stay well
inside the 13% a 15% slowdown takes off a score."""
STEPS_PER_REPORT = 3
REPORTS = 30
SLOW_FROM = 12
"""The report from which ``slow_rank`` works 15% longer (mid-job: after the first ones)."""
SLOW_FACTOR = 1.15


def stage_of(rank: int) -> int:
    return rank % STAGES  # the stage innermost: rank = replica * STAGES + stage


def pipeline_world(rank: int, world_size: int, out_dir: str, slow_rank: int | None) -> None:
    Detector.initialize(report_time_interval=3600, kernel_timing="none", node_name=f"n{rank // 2}")
    stage = stage_of(rank)
    work = 1.0 + LAST_EXTRA if stage == STAGES - 1 else 1.0
    act = torch.zeros(256)
    closing = torch.ones(16)
    reports = []
    for index in range(REPORTS):
        scale = work * (SLOW_FACTOR if rank == slow_rank and index >= SLOW_FROM else 1.0)
        for _ in range(STEPS_PER_REPORT):
            for _ in range(MICRO):
                if stage > 0:
                    dist.recv(act, src=rank - 1)
                with Detector.detection_section("forward", profile_cuda=False):
                    time.sleep(FORWARD_MS * scale / 1000.0)
                if stage < STAGES - 1:
                    dist.send(act, dst=rank + 1)
            for _ in range(MICRO):
                if stage < STAGES - 1:
                    dist.recv(act, src=rank + 1)
                with Detector.detection_section("backward", profile_cuda=False):
                    time.sleep(BACKWARD_MS * scale / 1000.0)
                if stage > 0:
                    dist.send(act, dst=rank - 1)
            dist.all_reduce(closing)  # the optimizer step waits for every stage
        Detector.generate_report()
        if rank == 0:
            reports.append(Detector.latest_score_report())
    with open(os.path.join(out_dir, f"rank{rank}.pkl"), "wb") as f:
        pickle.dump({"reports": reports, "errors": Detector.internal_errors()}, f)
    Detector.shutdown()
