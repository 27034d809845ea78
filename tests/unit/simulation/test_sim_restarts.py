"""Restarts: a new incarnation with fresh detector state on the same, still slow, GPU."""

from __future__ import annotations

import numpy as np
import pytest

from pacekeeper.controller.core.decisions import Decision, Reason, Verdict
from pacekeeper.controller.core.ids import JobKey
from pacekeeper.controller.core.policy import ActionKind, Mode
from pacekeeper.controller.simulation.detection import RealScoring
from pacekeeper.controller.simulation.models import (
    SECTIONS,
    Fault,
    FaultKind,
    JobSimulator,
    ModelParams,
)
from pacekeeper.controller.simulation.presets import simulation_policy
from pacekeeper.controller.simulation.restarts import RestartKind, Restarts
from pacekeeper.controller.simulation.runner import run_scenario, simulate
from pacekeeper.controller.simulation.scenarios import get_scenario

P = ModelParams(kernels=16)
SLOW = Fault(FaultKind.SLOW_GPU, (5,), start_s=120.0, slowdown=0.25)


def test_a_restart_gives_every_rank_a_fresh_baseline_and_a_new_incarnation() -> None:
    sim = JobSimulator(16, params=P, faults=(SLOW,), seed=1)
    scoring = RealScoring(sim.layout, gpu_uuids=True)
    before = [scoring.report(w) for w in sim.windows(5)]
    assert before[-1].ranks[5].gpu_individual == pytest.approx(1 / 1.25, abs=0.01)
    assert before[-1].sequence == 4
    first = scoring.incarnation
    scoring.restart()
    after = [scoring.report(w) for w in sim.windows(2)]
    # The slow GPU is its own new baseline: it scores as if it had never been faster.
    assert after[0].ranks[5].gpu_individual == pytest.approx(1.0, abs=0.01)
    assert after[1].ranks[5].gpu_individual == pytest.approx(1.0, abs=0.01)
    # Each incarnation's reporter counts from 0; torchrun's restart count names it.
    assert [r.sequence for r in after] == [0, 1]
    assert first.endswith(".r0") and scoring.incarnation.endswith(".r1")
    assert scoring.incarnation.removesuffix(".r1") == first.removesuffix(".r0")
    assert after[0].job == before[0].job
    # Same GPU, named the same way before and after.
    assert after[0].ranks[5].gpu_uuid == before[0].ranks[5].gpu_uuid is not None


def test_the_slow_gpu_stays_slow_through_the_restart() -> None:
    ref = JobSimulator(16, params=P, faults=(SLOW,), seed=1)
    sim = JobSimulator(16, params=P, faults=(SLOW,), seed=1)
    fb = SECTIONS.index("forward_backward")
    healthy_window = ref.windows(3)[0]
    sim.windows(3)
    sim.skip(2)  # the downtime: the clock moves on, nothing is drawn
    assert sim.clock_s == 5 * P.window_s
    w = sim.next_window()
    assert w.start_s == 5 * P.window_s
    ratio = w.section_median_s[:, fb] / healthy_window.section_median_s[:, fb]
    assert ratio[5] == pytest.approx(1.25, abs=0.03)
    assert np.all(np.abs(np.delete(ratio, 5) - 1.0) < 0.03)


def test_the_runner_restarts_on_schedule_and_skips_the_downtime() -> None:
    sim = JobSimulator(16, params=P, faults=(SLOW,), seed=1)
    plan = Restarts(at_s=(300.0,), downtime_windows=2)
    rec = run_scenario(sim, 10, simulation_policy(), restarts=plan)
    assert rec.restarts_s == [300.0]
    # Windows 5 and 6 (300-420 s) are down: no report ends at 360 or 420 s.
    assert rec.times_s == [60.0, 120.0, 180.0, 240.0, 300.0, 480.0, 540.0, 600.0]
    assert len(set(rec.incarnations[:5])) == 1 and len(set(rec.incarnations[5:])) == 1
    assert rec.incarnations[0] != rec.incarnations[5]
    # The judged score (gpuIndividual) of the slow rank: low before, fresh after.
    assert rec.scores[4][5] == pytest.approx(1 / 1.25, abs=0.01)
    assert rec.scores[-1][5] == pytest.approx(1.0, abs=0.01)


def test_only_a_taken_restart_rank_restarts_the_job() -> None:
    def decided(verdict: Verdict, action: ActionKind, reason: Reason) -> Decision:
        return Decision(JobKey("local:sim-job"), "node/node-00000", verdict, action, reason)

    plan = Restarts(on_restart_rank=True)
    taken = decided(Verdict.ACT, ActionKind.RESTART_RANK, Reason.BELOW_THRESHOLD)
    would = decided(Verdict.HOLD, ActionKind.RESTART_RANK, Reason.OBSERVE_MODE)
    notify = decided(Verdict.ACT, ActionKind.NOTIFY, Reason.BELOW_THRESHOLD)
    assert plan.triggered_by([notify, taken])
    assert not plan.triggered_by([would, notify])
    assert not Restarts().triggered_by([taken])


def test_the_ladder_restart_scenario_restarts_only_when_the_restart_is_taken() -> None:
    sc = get_scenario("slow-gpu-10-ladder-restart")
    assert sc.mode is Mode.ENFORCE
    dry = simulate(sc, 32, 1800.0, seed=0, policy=simulation_policy(Mode.DRY_RUN))
    assert dry.record.restarts_s == []
    assert dry.truth.found_after_s is None
    out = simulate(sc, 32, 1800.0, seed=0)
    restarts = out.record.restarts_s
    assert len(restarts) >= 1
    taken = [
        t
        for t, d in zip(out.record.decision_times_s, out.record.decisions, strict=True)
        if d.verdict.value == "act" and d.action is not None and d.action.value == "restartRank"
    ]
    # The job goes down in the window after the eviction.
    assert restarts[0] == taken[0]
    start = out.truth.start_s
    assert start is not None and out.truth.found_after_s == min(t for t in restarts if t >= start)


def test_a_resubmitted_job_starts_a_new_warm_up_and_an_in_place_one_does_not() -> None:
    def holds(kind: RestartKind) -> list[float]:
        sim = JobSimulator(16, params=P, seed=3)
        plan = Restarts(at_s=(600.0,), kind=kind)
        rec = run_scenario(sim, 20, simulation_policy(), restarts=plan)
        return [
            t
            for t, d in zip(rec.decision_times_s, rec.decisions, strict=True)
            if d.reason is Reason.WARMING_UP and t > 600.0
        ]

    assert holds(RestartKind.IN_PLACE) == []
    warm = holds(RestartKind.RESUBMITTED)
    warmup_s = simulation_policy().policies["default"].warmup.after_job_start_s
    # The new pods start after the window of downtime (660 s); warm-up runs from there.
    assert warm and min(warm) == 720.0 and max(warm) < 660.0 + warmup_s


def test_the_restart_scenarios_name_when_the_fault_must_be_found_again() -> None:
    _, gt = get_scenario("slow-gpu-10-restart").build(64, 1800.0, seed=0)
    (fault,) = gt.faults
    assert gt.restarts.at_s == (fault.start_s + 300.0,)
    _, healthy = get_scenario("healthy-restart").build(64, 1800.0, seed=0)
    assert healthy.faults == () and healthy.restarts.at_s == (600.0,)
    out = simulate("slow-gpu-10-restart", 16, 1800.0, seed=0)
    assert out.record.restarts_s == [900.0]
    assert out.truth.found_after_s == 900.0
    # One window down: no report ends at 960 s, the next incarnation reports from 1020 s.
    assert 960.0 not in out.record.times_s and 1020.0 in out.record.times_s
