"""The policy the simulator and the detection-quality benchmark use unless given one.

Judged on the GPU individual score (this rank against its own recent best): a static
spread of ~8% between same-SKU GPUs puts healthy ranks of a large job far below 1.0 on
*relative* scores, and the gradient all-reduce wait makes every fast rank's section
scores low, so the individual GPU score separates a GPU that became slow from one that
always was. With the memory of hardware it is also judged by its calibrated relative
score (the peer check: a GPU slow from the job's start, or after a restart's fresh
baseline), and with ``hostSide`` by its host side (a slow data loader or CPU on one
node). Two consecutive reports below 0.98 act, after a 2-minute warm-up (3 after our
own action): judged against peers a score needs no long baseline, and issue #18 asks
for a fault found within 5 minutes of the job's start or restart.
"""

from __future__ import annotations

from pacekeeper.controller.core.policy import (
    Ladder,
    LadderStep,
    Mode,
    Persistence,
    Policy,
    PolicyDocument,
    ScoreKind,
    ScoreSelector,
    TaintStep,
    Thresholds,
    Warmup,
)
from pacekeeper.controller.core.policy_hardware import Confirm

ACT_THRESHOLD = 0.98
RECOVER_THRESHOLD = 0.99


def simulation_policy(mode: Mode = Mode.DRY_RUN, confirm: Confirm = Confirm.NONE) -> PolicyDocument:
    """``confirm``: what node actions need beyond the scores (``confirm: probe``)."""
    policy = Policy(
        score=ScoreSelector(kind=ScoreKind.GPU_INDIVIDUAL, host_side=True),
        thresholds=Thresholds(act=ACT_THRESHOLD, recover=RECOVER_THRESHOLD),
        persistence=Persistence(consecutive_reports=2),
        # Judged against peers, a score needs no baseline: two windows settle the job's
        # start (the goal finds a GPU slow from it within 5 min, two reports included).
        warmup=Warmup(after_job_start_s=120.0, after_action_s=180.0),
        confirm=confirm,
        ladder=Ladder(
            notify=LadderStep(enabled=True, timeout_s=120.0),
            restart_rank=LadderStep(enabled=True, timeout_s=600.0, max_attempts=1),
            taint_node=TaintStep(enabled=True, timeout_s=900.0),
        ),
    )
    return PolicyDocument(mode=mode, policies={"default": policy})
