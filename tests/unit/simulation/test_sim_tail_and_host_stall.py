"""Issue 38's two missed faults through the detector's real scoring and the real decision
core: a rank throttled 30% for 2 minutes in every 6 (``score.tail``), and one rank's
host-side stall of 0.2 s a step (``score.hostSideOneRank``): each found and acted on by
``restartRank`` on that rank, no node action; a healthy job with heavy-tailed jitter gets
nothing from either rule."""

from __future__ import annotations

import pytest

from pacekeeper.controller.core.decisions import Decision, Verdict
from pacekeeper.controller.core.policy import (
    NODE_ACTIONS,
    ActionKind,
    Mode,
    Persistence,
    PolicyDocument,
    Thresholds,
)
from pacekeeper.controller.core.policy_tail import TailRule
from pacekeeper.controller.simulation.faults_tail import periodic
from pacekeeper.controller.simulation.models import Fault, FaultKind, JobSimulator, ModelParams
from pacekeeper.controller.simulation.presets import simulation_policy
from pacekeeper.controller.simulation.restarts import Restarts
from pacekeeper.controller.simulation.runner import run_scenario
from pacekeeper.controller.simulation.tail_reports import run_with_tails

P = ModelParams(kernels=16)
RANKS = 32
CULPRIT = 5


def _policy(*, tail: bool, one_rank: bool, sustained_only: bool = False) -> PolicyDocument:
    """The simulator's benchmark policy with the new rules on or off; ``sustained_only``:
    act at 0.8 after three reports in a row, a policy for sustained slowdowns of 25% or
    more, which a burst of two windows in six never keeps below."""
    doc = simulation_policy(Mode.ENFORCE)
    p = doc.policies["default"]
    score = p.score.model_copy(
        update={"tail": TailRule() if tail else None, "host_side_one_rank": one_rank}
    )
    update: dict[str, object] = {"score": score}
    if sustained_only:
        update |= {
            "thresholds": Thresholds(act=0.8, recover=0.9),
            "persistence": Persistence(consecutive_reports=3),
        }
    return doc.model_copy(update={"policies": {"default": p.model_copy(update=update)}})


Act = tuple[float, ActionKind, tuple[int, ...]]


def _acts(decisions: list[tuple[float, Decision]]) -> list[Act]:
    return [
        (t, d.action, tuple(d.evidence.get("ranks") or ()))
        for t, d in decisions
        if d.action is not None and d.verdict is Verdict.ACT
    ]


def _burst(start_s: float) -> Fault:
    return Fault(
        FaultKind.THROTTLING,
        (CULPRIT,),
        start_s=start_s,
        slowdown=0.3,
        throttle_on_s=120.0,
        throttle_off_s=240.0,
    )


@pytest.mark.parametrize(("start_s", "seed"), [(300.0, 1), (330.0, 2)])
def test_a_rank_throttled_2_minutes_in_6_is_restarted_with_the_tail(
    start_s: float, seed: int
) -> None:
    # In phase with the 60 s windows (two slow windows in six) and out of it (one slow
    # and two half-slow windows per burst).
    sim = periodic(JobSimulator(RANKS, params=P, faults=(_burst(start_s),), seed=seed))
    run = run_with_tails(sim, 20, _policy(tail=True, one_rank=False, sustained_only=True))
    acts = _acts(run.decisions)
    restarts = [(t, ranks) for t, action, ranks in acts if action is ActionKind.RESTART_RANK]
    assert restarts and restarts[0][1] == (CULPRIT,)
    assert restarts[0][0] - start_s <= 720.0  # acted on within 12 minutes
    assert all(ranks == (CULPRIT,) for _, _, ranks in acts)


def test_without_the_tail_the_same_bursts_are_missed() -> None:
    sim = periodic(JobSimulator(RANKS, params=P, faults=(_burst(300.0),), seed=1))
    run = run_with_tails(sim, 20, _policy(tail=False, one_rank=False, sustained_only=True))
    assert _acts(run.decisions) == []
    # The tail is there in the reports; only the policy does not read it.
    assert min(r.ranks[CULPRIT].worst_tail() or 1.0 for r in run.reports) < 0.8


def _stall_run(one_rank: bool, seed: int) -> list[Act]:
    # 0.2 s more host time a step (of 2 s) in forward_backward on one rank, from 5 min.
    stall = Fault(FaultKind.SLOW_HOST, (CULPRIT,), start_s=300.0, slowdown=0.1)
    sim = JobSimulator(RANKS, params=P, faults=(stall,), seed=seed)
    rec = run_scenario(
        sim,
        25,
        _policy(tail=False, one_rank=one_rank),
        restarts=Restarts(on_restart_rank=True),
    )
    return _acts(list(zip(rec.decision_times_s, rec.decisions, strict=True)))


@pytest.mark.parametrize("seed", [1, 2])
def test_one_rank_host_stall_is_restarted_and_no_node_is_touched(seed: int) -> None:
    acts = _stall_run(True, seed)
    assert (ActionKind.RESTART_RANK, (CULPRIT,)) in [(a, r) for _, a, r in acts]
    assert not [a for _, a, _ in acts if a in NODE_ACTIONS]
    assert all(ranks == (CULPRIT,) for _, _, ranks in acts)


def test_without_one_rank_the_host_stall_is_missed() -> None:
    assert _stall_run(False, 1) == []


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_healthy_job_with_heavy_tailed_jitter_gets_nothing(seed: int) -> None:
    # Frequent long GC pauses (2% of steps, up to 1 s), loader stalls in 1% of steps,
    # three times the section jitter: heavy tails on every rank alike.
    noisy = ModelParams(
        kernels=16,
        gc_prob=0.02,
        gc_max_s=1.0,
        stall_prob=0.01,
        section_jitter_cv=0.03,
        step_jitter_cv=0.01,
    )
    sim = JobSimulator(RANKS, params=noisy, seed=seed)
    run = run_with_tails(sim, 40, _policy(tail=True, one_rank=True))
    assert [(t, d.action) for t, d in run.decisions if d.action is not None] == []
    # The tails were measured and judged: every rank has one from the fourth report.
    assert all(r.section_tail for r in run.reports[-1].ranks)
