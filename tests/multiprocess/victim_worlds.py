"""Rank bodies for the culprit-and-victims tests: 8 gloo ranks, a synchronous all-reduce
every step, rank ``CULPRIT`` doing its work more slowly; the section placed around the
compute only, around the whole step (compute and all-reduce), or around DDP's own
``backward`` (where DDP's gradient all-reduce waits). Results go to pickles."""

from __future__ import annotations

import os
import pickle
import time
from typing import Any

import torch
import torch.distributed as dist
from sleeping_backward import SleepingBackward

from pacekeeper.detector import Detector

CULPRIT = 3
WORK_MS = {"compute": 100.0, "step": 100.0, "backward": 200.0}
"""A healthy rank's work per step. Eight ranks share two cores here: each reduction wakes
all eight at once, and the few ms until each is scheduled again land partly in DDP's
backward (~5% of 200 ms, measured), so that placement gets more work to stay clear of a
10% slowdown."""
STEPS = 40
"""Enough for the culprit's gap to outgrow a one-off skew. The window's first all-reduce
absorbs how far apart the ranks left ``initialize`` (21-303 ms measured with the ranks
sharing two cores with four busy processes), which is nobody's waiting for the culprit;
a 10% culprit's peers wait 11 ms a step longer than it does. At 16 steps (176 ms) the
skew could outweigh the gap: 1 CI run in 4 failed the wait-share test, and 1 in 16 under
the extra load. At 40 (440 ms), 12 runs of 12 under that load kept every victim 0.034 or
more above the culprit."""
PLACEMENTS = ("compute", "step", "backward")


class _Model(torch.nn.Module):
    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.first = torch.nn.Linear(64, 64)
        self.last = torch.nn.Linear(64, 1)
        self.seconds = seconds

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The sleep sits between the two layers: DDP's one bucket (both layers' grads) is
        # ready only after it, as after a real backward's compute.
        return self.last(SleepingBackward.apply(self.first(x), self.seconds))


def sync_world(rank: int, world_size: int, out_dir: str, placement: str, loss: float) -> None:
    """``loss``: the culprit's throughput loss (0.1: its work takes 1/0.9 as long)."""
    work_s = WORK_MS[placement] / 1000.0 / ((1.0 - loss) if rank == CULPRIT else 1.0)
    torch.manual_seed(0)
    Detector.initialize(report_time_interval=3600, kernel_timing="none", node_name=f"n{rank}")
    grad = torch.ones(4096)
    model: Any = None
    hooked = None
    if placement == "backward":
        model = torch.nn.parallel.DistributedDataParallel(_Model(work_s))
        hooked = Detector.watch_ddp(model)
    x = torch.randn(8, 64)
    for _ in range(STEPS):
        if placement == "compute":
            with Detector.detection_section("compute", profile_cuda=False):
                time.sleep(work_s)
            dist.all_reduce(grad)
        elif placement == "step":
            with Detector.detection_section("step", profile_cuda=False):
                time.sleep(work_s)
                dist.all_reduce(grad)
        else:
            out = model(x).sum()
            with Detector.detection_section("backward", profile_cuda=False):
                out.backward()
    Detector.generate_report()
    with open(os.path.join(out_dir, f"rank{rank}.pkl"), "wb") as f:
        pickle.dump(
            {
                "score_report": Detector.latest_score_report(),
                "hooked": hooked,
                "errors": Detector.internal_errors(),
            },
            f,
        )
    Detector.shutdown()


LATE_S = 0.3
"""How late rank 1 joins each collective in ``async_world``."""


def async_world(rank: int, world_size: int, out_dir: str) -> None:
    """Two ranks, rank 1 joining each collective ``LATE_S`` late: an async all-reduce
    waited on with ``Work.wait()``, a batch of point-to-point transfers waited on the
    same way, then a second report for which rank 1 also arrives late (the detector's
    own collectives, which are no wait of the job's). Each rank's wait counter after each."""
    from pacekeeper.detector import collectives

    Detector.initialize(report_time_interval=3600, kernel_timing="none", node_name=f"n{rank}")
    waits = {}
    t = torch.ones(1024)
    if rank == 1:
        time.sleep(LATE_S)
    before = collectives.WAIT_NS[0]
    work = dist.all_reduce(t, async_op=True)
    launched = collectives.WAIT_NS[0] - before
    work.wait()
    waits["all_reduce launch"] = launched
    waits["all_reduce"] = collectives.WAIT_NS[0] - before
    if rank == 1:
        time.sleep(LATE_S)
    before = collectives.WAIT_NS[0]
    peer = 1 - rank
    ops = [dist.P2POp(dist.isend, t, peer), dist.P2POp(dist.irecv, torch.empty(1024), peer)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    waits["p2p"] = collectives.WAIT_NS[0] - before
    with Detector.detection_section("step", profile_cuda=False):
        pass
    Detector.generate_report()  # makes the detector's group (its set-up is no Work.wait)
    with Detector.detection_section("step", profile_cuda=False):
        pass
    if rank == 1:
        time.sleep(LATE_S)
    before = collectives.WAIT_NS[0]
    Detector.generate_report()
    waits["report"] = collectives.WAIT_NS[0] - before
    with open(os.path.join(out_dir, f"rank{rank}.pkl"), "wb") as f:
        pickle.dump({"waits": waits, "errors": Detector.internal_errors()}, f)
    Detector.shutdown()
