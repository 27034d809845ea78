"""Rank bodies for the sequential rule on real processes (issue 38): 8 gloo ranks, two a
node, a synchronous all-reduce every step, each calling the detector as an NVRx user
does (NVRx's ``straggler`` module, one import changed).

From report ``SLOW_FROM`` on, rank ``CULPRIT`` is ``loss`` slower (throughput): in its
compute (the timed ``compute`` section; the all-reduce after it, outside), or in its
whole step (a sleep on the host before its work, inside the ``step`` section that also
holds the all-reduce). Every world, the healthy one too, also has data skew that comes
and goes: each rank of ``SKEWS`` does ``SKEW`` more work for eight reports, as a rank
given longer sequences a while does. Rank 0 keeps every report; results to a pickle."""

from __future__ import annotations

import time

import torch
import torch.distributed as dist
from gloo_worlds import save

from pacekeeper import detector as straggler  # NVRx: nvidia_resiliency_ext.attribution.straggler

CULPRIT = 5
WORK_S = 0.05
"""A healthy rank's work per step (a sleep: eight ranks on two cores stay within ~1%)."""
STEPS_PER_REPORT = 8
SLOW_FROM = 6
"""Healthy reports first: the warm-up's, then two judged ones."""
SKEW = 0.09
SKEWS = ((1, 6, 14), (7, 24, 32))
"""(rank, first report, report after the last): healthy ranks 9% slower for 8 reports,
below the recommended policy's line (0.93) long enough for its ladder to reach
restartRank (two reports, then the notice's 300 s) were the line all that decided."""
PLACES = ("compute", "step")


def _extra(rank: int, k: int, loss: float) -> float:
    """Seconds added to this rank's work per step in report ``k``."""
    slow = loss if rank == CULPRIT and k >= SLOW_FROM else 0.0
    slow = max([slow] + [SKEW for r, a, b in SKEWS if r == rank and a <= k < b])
    return WORK_S * slow / (1.0 - slow)


def slowed_world(  # noqa: PLR0917 (the world's shape, passed on by spawn_world)
    rank: int, world_size: int, out_dir: str, where: str, loss: float, reports: int
) -> None:
    """``where``: ``compute`` or ``step``; ``loss`` 0: the culprit is never slowed."""
    straggler.Detector.initialize(
        scores_to_compute=["relative_perf_scores", "individual_perf_scores"],
        gather_on_rank0=True,
        node_name=f"node{rank // 2}",
    )
    grad = torch.ones(1024)
    kept = []
    for k in range(reports):
        extra = _extra(rank, k, loss)
        for _ in range(STEPS_PER_REPORT):
            if where == "compute":
                with straggler.Detector.detection_section("compute"):
                    time.sleep(WORK_S + extra)
                dist.all_reduce(grad)
            else:
                with straggler.Detector.detection_section("step"):
                    time.sleep(extra)  # the host's stall, before the step's work
                    time.sleep(WORK_S)
                    dist.all_reduce(grad)
        straggler.Detector.generate_report()
        if rank == 0:
            kept.append(straggler.Detector.latest_score_report())
    save(out_dir, rank, {"reports": kept, "errors": straggler.Detector.internal_errors()})
    straggler.Detector.shutdown()
