"""docs/policies/enforce-recommended.yaml on a rank throttled 30% for 2 minutes in every
6, through the detector's real scoring (tails included) and the real decision core: the
sequential rule gathers its evidence across bursts (the tail statistic holds the rank's
judged score low between them, where the window median recovers and a CUSUM on it
decays) and restarts that rank, and no other rank or node is disrupted."""

from __future__ import annotations

from pathlib import Path

import pytest

from pacekeeper.controller.core.decisions import Verdict
from pacekeeper.controller.core.policy import DISRUPTIVE_ACTIONS, ActionKind, load_policy_file
from pacekeeper.controller.simulation.faults_tail import periodic
from pacekeeper.controller.simulation.models import Fault, FaultKind, JobSimulator, ModelParams
from pacekeeper.controller.simulation.tail_reports import run_with_tails

RECOMMENDED = Path(__file__).resolve().parents[3] / "docs" / "policies" / "enforce-recommended.yaml"
P = ModelParams(kernels=16)
CULPRIT = 9
START_S = 420.0


def _burst(start_s: float) -> Fault:
    return Fault(
        FaultKind.THROTTLING, (CULPRIT,), start_s=start_s, slowdown=0.3,
        throttle_on_s=120.0, throttle_off_s=240.0,
    )  # fmt: skip


@pytest.mark.parametrize(("offset_s", "seed"), [(0.0, 1), (30.0, 2)])
def test_bursts_are_restarted_within_fifteen_minutes_and_nothing_else_is(
    offset_s: float, seed: int
) -> None:
    sim = periodic(JobSimulator(64, params=P, faults=(_burst(START_S + offset_s),), seed=seed))
    run = run_with_tails(sim, 30, load_policy_file(RECOMMENDED))
    acts = [
        (t, d.action, tuple(d.evidence.get("ranks") or ()))
        for t, d in run.decisions
        if d.action in DISRUPTIVE_ACTIONS and d.verdict is Verdict.ACT
    ]
    restarts = [t for t, a, ranks in acts if a is ActionKind.RESTART_RANK and ranks == (CULPRIT,)]
    assert restarts, acts
    # In phase: the tail drops after the first burst; out of phase, after the second
    # (the first looks like two windows 15% slow, as a short data skew does).
    assert restarts[0] - (START_S + offset_s) <= 900.0
    assert all(ranks == (CULPRIT,) for _, _, ranks in acts), acts
