"""A lone rank's host-side stall (``score.hostSideOneRank``) is its process: the ladder
restarts the rank and stops there. The stall outlives the restart here (the simulated
world restarts nothing), so without the cap the ladder would go on to taint, drain and
cordon a node whose GPUs and other ranks are fine."""

from __future__ import annotations

import pytest

from pacekeeper.controller.core.decisions import Verdict
from pacekeeper.controller.core.policy import NODE_ACTIONS, ActionKind, Mode, PolicyDocument
from pacekeeper.controller.core.policy_ladder import Ladder, LadderStep, TaintStep
from pacekeeper.controller.simulation.models import Fault, FaultKind, JobSimulator, ModelParams
from pacekeeper.controller.simulation.presets import simulation_policy
from pacekeeper.controller.simulation.tail_reports import run_with_tails

P = ModelParams(kernels=16)
CULPRIT = 5


def _policy() -> PolicyDocument:
    doc = simulation_policy(Mode.ENFORCE)
    p = doc.policies["default"]
    ladder = Ladder(
        notify=LadderStep(enabled=True, timeout_s=60.0),
        restart_rank=LadderStep(enabled=True, timeout_s=120.0),
        taint_node=TaintStep(enabled=True, timeout_s=120.0),
        drain_node=LadderStep(enabled=True, timeout_s=120.0),
        cordon_node=LadderStep(enabled=True, timeout_s=120.0),
    )
    score = p.score.model_copy(update={"host_side": True, "host_side_one_rank": True})
    pol = p.model_copy(update={"score": score, "ladder": ladder})
    return doc.model_copy(update={"policies": {"default": pol}})


@pytest.mark.parametrize("seed", [1, 2])
def test_a_lone_host_stall_is_restarted_and_never_escalates_to_its_node(seed: int) -> None:
    stall = Fault(FaultKind.SLOW_HOST, (CULPRIT,), start_s=300.0, slowdown=0.1)
    sim = JobSimulator(32, params=P, faults=(stall,), seed=seed)
    run = run_with_tails(sim, 30, _policy())
    acts = [d for _, d in run.decisions if d.action is not None and d.verdict is Verdict.ACT]
    kinds = [d.action for d in acts]
    assert ActionKind.RESTART_RANK in kinds
    assert not [k for k in kinds if k in NODE_ACTIONS]
