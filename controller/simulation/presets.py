"""The policy the simulator and the detection-quality benchmark use unless given one.

Judged on the GPU individual score (this rank against its own recent best): a static
spread of ~8% between same-SKU GPUs puts healthy ranks of a large job far below 1.0 on
*relative* scores, and the gradient all-reduce wait makes every fast rank's section
scores low, so only the individual GPU score separates a GPU that became slow from one
that always was. Two consecutive reports below 0.98 act (the goal asks for detection of
slowdowns of 10% or more within two windows, and of a 3% one within five minutes).
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
    Thresholds,
)

ACT_THRESHOLD = 0.98
RECOVER_THRESHOLD = 0.99


def simulation_policy(mode: Mode = Mode.DRY_RUN) -> PolicyDocument:
    policy = Policy(
        score=ScoreSelector(kind=ScoreKind.GPU_INDIVIDUAL),
        thresholds=Thresholds(act=ACT_THRESHOLD, recover=RECOVER_THRESHOLD),
        persistence=Persistence(consecutive_reports=2),
        ladder=Ladder(
            notify=LadderStep(enabled=True, timeout_s=120.0),
            restart_rank=LadderStep(enabled=True, timeout_s=600.0, max_attempts=1),
            taint_node=LadderStep(enabled=True, timeout_s=900.0),
        ),
    )
    return PolicyDocument(mode=mode, policies={"default": policy})
